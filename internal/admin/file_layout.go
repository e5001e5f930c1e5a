package admin

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
)

// File layout changes: weft file set-pool and set-protection. The inode's
// pool or protection changes at once (new stripes a client writes after
// it reopens the file follow it, and the pools' usage moves), and a
// relayout job rewrites the file's existing stripes copy-on-write into the
// pool and protection it now names; the file stays readable and writable
// meanwhile.

// SetFilePoolRequest is the body of POST /v1/files/{lin}/pool.
type SetFilePoolRequest struct {
	Pool string `json:"pool"`
}

// SetFileProtectionRequest is the body of POST /v1/files/{lin}/protection:
// mirror:N or ec:K+M, or "pool" to follow the pool's protection again.
type SetFileProtectionRequest struct {
	Protection string `json:"protection"`
}

// FileLayoutReply is the answer of both: the file's pool and protection
// now (Protection "" : its pool's, which is PoolProtection) and the
// relayout job that moves its data.
type FileLayoutReply struct {
	LIN            meta.LIN  `json:"lin"`
	Pool           string    `json:"pool"`
	Protection     string    `json:"protection,omitempty"`
	PoolProtection string    `json:"pool_protection"`
	Job            job.JobID `json:"job"`
}

// fileLayoutRoutes adds:
//
//	POST /v1/files/{lin}/pool         SetFilePoolRequest → FileLayoutReply
//	POST /v1/files/{lin}/protection   SetFileProtectionRequest → FileLayoutReply
//
// Both refuse (404) a pool that does not exist, and (400) a protection
// wider than the pool's drives in service, a pool without drives in
// service, a protection that cannot keep the file's stripe size, or a LIN
// that is not a regular file. Both need the job engine and the namespace
// (503 otherwise).
func (h *handler) fileLayoutRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST "+APIVersion+"/files/{lin}/pool", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) {
		var req SetFilePoolRequest
		if err := decodeBody(r, &req); err != nil {
			return nil, err
		}
		return h.setFileLayout(ctx, r, &req.Pool, nil)
	}))
	mux.HandleFunc("POST "+APIVersion+"/files/{lin}/protection", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) {
		var req SetFileProtectionRequest
		if err := decodeBody(r, &req); err != nil {
			return nil, err
		}
		return h.setFileLayout(ctx, r, nil, &req.Protection)
	}))
}

// setFileLayout checks and applies a new pool or protection of the file
// the route names, then starts its relayout.
func (h *handler) setFileLayout(ctx context.Context, r *http.Request, pool, protection *string) (any, error) {
	if h.ns == nil {
		return nil, fmt.Errorf("%w: this node serves no namespace: ask another node", errUnavailable)
	}
	n, err := strconv.ParseUint(r.PathValue("lin"), 10, 64)
	if err != nil || n == 0 {
		return nil, fmt.Errorf("%w: file id %q: want a LIN (the inode number stat shows)", meta.ErrInvalid, r.PathValue("lin"))
	}
	lin := meta.LIN(n)
	a, err := h.ns.GetAttr(ctx, lin)
	if err != nil {
		return nil, err
	}
	if a.Type != meta.TypeFile {
		return nil, fmt.Errorf("%w: LIN %d is a %s: only regular files have a layout to change", meta.ErrInvalid, lin, a.Type)
	}
	var mask meta.SetAttrMask
	want := a
	if pool != nil {
		if *pool == "" {
			return nil, fmt.Errorf("%w: no pool named: give one of weft pool list", meta.ErrInvalid)
		}
		want.Pool, mask = *pool, mask|meta.SetPool
	}
	if protection != nil {
		switch *protection {
		case "":
			return nil, fmt.Errorf("%w: no protection named: give mirror:N, ec:K+M, or pool (the pool's)", meta.ErrInvalid)
		case "pool":
			want.Protection = meta.Protection{}
		default:
			p, err := meta.ParseProtection(*protection)
			if err != nil {
				return nil, fmt.Errorf("%w: protection %q: %w", meta.ErrInvalid, *protection, err)
			}
			want.Protection = p
		}
		mask |= meta.SetProtection
	}
	spec := ""
	if !want.Protection.IsZero() {
		spec = want.Protection.String()
	}
	rec, err := h.store.CheckFilesFit(ctx, want.Pool, spec)
	if err != nil {
		return nil, err
	}
	if spec == "" {
		spec = rec.Protection
	}
	if _, err := client.FileGeometry(a, spec, 0); err != nil {
		return nil, err
	}
	got, err := h.ns.SetAttr(ctx, lin, mask, want)
	if err != nil {
		return nil, err
	}
	jid, err := h.jobs.Submit(ctx, "relayout", job.Options{Params: map[string]string{"lins": strconv.FormatUint(n, 10)}})
	if err != nil {
		return nil, err
	}
	out := FileLayoutReply{LIN: lin, Pool: got.Pool, PoolProtection: rec.Protection, Job: jid}
	if !got.Protection.IsZero() {
		out.Protection = got.Protection.String()
	}
	h.log.Info("file layout changed", "lin", n, "pool", out.Pool, "protection", spec, "job", jid)
	return out, nil
}

// SetFilePool moves file lin to pool: its data follows in a relayout job.
func (c *Client) SetFilePool(ctx context.Context, lin meta.LIN, pool string) (FileLayoutReply, error) {
	var r FileLayoutReply
	return r, c.do(ctx, http.MethodPost, fmt.Sprintf("%s/files/%d/pool", APIVersion, lin), SetFilePoolRequest{Pool: pool}, &r)
}

// SetFileProtection sets file lin's protection (mirror:N, ec:K+M, or
// "pool"): its data is re-encoded in a relayout job.
func (c *Client) SetFileProtection(ctx context.Context, lin meta.LIN, protection string) (FileLayoutReply, error) {
	var r FileLayoutReply
	return r, c.do(ctx, http.MethodPost, fmt.Sprintf("%s/files/%d/protection", APIVersion, lin), SetFileProtectionRequest{Protection: protection}, &r)
}
