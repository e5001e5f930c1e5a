package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/job"
)

// Pools: the routes that create, change, list and delete pools and move
// drives between them.

// ErrPoolInUse: a pool still holds files or directories, so it cannot be
// deleted (409).
var ErrPoolInUse = errors.New("admin: pool in use")

// CreatePoolRequest is the body of POST /v1/pools: a name and the
// pool's settings (cluster.PoolSpec; unset thresholds take the defaults).
type CreatePoolRequest struct {
	Name string `json:"name"`
	cluster.PoolSpec
}

// PoolView is a pool of GET /v1/pools: its record, drives and capacity,
// and what the namespace keeps in it (inodes: files, directories and
// links whose pool it is; bytes: their logical size; allocated: the bytes
// of their placed units, parity included). Usage is absent (and
// UsageKnown false) when the serving node has no namespace.
type PoolView struct {
	cluster.Pool
	UsageKnown bool  `json:"usage_known"`
	Inodes     int64 `json:"inodes"`
	Bytes      int64 `json:"bytes"`
	Allocated  int64 `json:"allocated"`
	// DrivesMovingIn counts drives draining elsewhere to join this pool.
	DrivesMovingIn int `json:"drives_moving_in,omitempty"`
}

// MoveDriveRequest is the body of POST /v1/drives/{id}/move.
type MoveDriveRequest struct {
	Pool string `json:"pool"`
}

// MoveDriveReply is the answer of POST /v1/drives/{id}/move: the drive's
// record (draining, move_to set) and the drain job that empties it (0
// when the request cancelled a move: the drive was moving and was asked
// back to its own pool).
type MoveDriveReply struct {
	Drive cluster.DriveRecord `json:"drive"`
	Job   job.JobID           `json:"job,omitempty"`
}

// poolRoutes adds:
//
//	GET  /v1/pools                 []PoolView
//	POST /v1/pools                 CreatePoolRequest → cluster.PoolRecord (201)
//	POST /v1/pools/{name}/modify   cluster.PoolSpec → cluster.PoolRecord
//	POST /v1/pools/{name}/delete   → {"deleted": name}; 409 while the pool
//	                               has drives or files
//	POST /v1/drives/{id}/move      MoveDriveRequest → MoveDriveReply
func (h *handler) poolRoutes(mux *http.ServeMux) {
	v := APIVersion
	mux.HandleFunc("GET "+v+"/pools", h.get(h.listPools))
	mux.HandleFunc("POST "+v+"/pools", h.post(func(ctx context.Context, r *http.Request) (any, error) {
		var req CreatePoolRequest
		if err := decodeBody(r, &req); err != nil {
			return nil, err
		}
		p, err := h.store.CreatePoolSpec(ctx, req.Name, req.PoolSpec, false)
		if err != nil {
			return nil, err
		}
		h.log.Info("pool created", "pool", p.Name, "protection", p.Protection, "class", p.Class, "high", p.High, "low", p.Low)
		return created{p}, nil
	}))
	mux.HandleFunc("POST "+v+"/pools/{name}/modify", h.post(func(ctx context.Context, r *http.Request) (any, error) {
		var spec cluster.PoolSpec
		if err := decodeBody(r, &spec); err != nil {
			return nil, err
		}
		p, err := h.store.ModifyPool(ctx, r.PathValue("name"), spec)
		if err == nil {
			h.log.Info("pool modified", "pool", p.Name, "protection", p.Protection, "class", p.Class, "high", p.High, "low", p.Low)
		}
		return p, err
	}))
	mux.HandleFunc("POST "+v+"/pools/{name}/delete", h.post(func(ctx context.Context, r *http.Request) (any, error) {
		name := r.PathValue("name")
		if err := h.poolEmpty(ctx, name); err != nil {
			return nil, err
		}
		if err := h.store.DeletePool(ctx, name); err != nil {
			return nil, err
		}
		h.log.Info("pool deleted", "pool", name)
		return map[string]string{"deleted": name}, nil
	}))
	mux.HandleFunc("POST "+v+"/drives/{id}/move", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) {
		id, err := cluster.ParseDriveID(r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		var req MoveDriveRequest
		if err := decodeBody(r, &req); err != nil {
			return nil, err
		}
		d, err := h.store.MoveDrive(ctx, id, req.Pool)
		if err != nil || d.MoveTo == "" {
			return MoveDriveReply{Drive: d}, err
		}
		jid, err := h.jobs.Submit(ctx, "drain", job.Options{Params: map[string]string{"drives": id.String()}})
		if err == nil {
			h.log.Info("drive moving", "drive", id, "from", d.Pool, "to", d.MoveTo, "job", jid)
		}
		return MoveDriveReply{Drive: d, Job: jid}, err
	}))
}

// post serves a change: fn's answer, with the request timeout.
func (h *handler) post(fn func(context.Context, *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		v, err := fn(ctx, r)
		h.reply(w, r, v, err)
	}
}

func (h *handler) listPools(ctx context.Context) (any, error) {
	pools, err := h.store.ListPools(ctx)
	if err != nil {
		return nil, err
	}
	drives, err := h.store.ListDrives(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]PoolView, len(pools))
	for i, p := range pools {
		out[i].Pool = p
		for _, d := range drives {
			if d.MoveTo == p.Name {
				out[i].DrivesMovingIn++
			}
		}
	}
	if h.ns == nil {
		return out, nil
	}
	st, err := h.ns.StatFS(ctx)
	if err != nil {
		return nil, err
	}
	for i := range out {
		u := st.Pools[out[i].Name]
		out[i].UsageKnown, out[i].Inodes, out[i].Bytes, out[i].Allocated = true, u.Inodes, u.Bytes, u.Allocated
	}
	return out, nil
}

// poolEmpty refuses (ErrPoolInUse) deleting a pool the namespace still
// keeps inodes in, and answers 503 when this node cannot tell.
func (h *handler) poolEmpty(ctx context.Context, name string) error {
	if h.ns == nil {
		return fmt.Errorf("%w: this node serves no namespace, so it cannot tell whether pool %s holds files: ask another node", errUnavailable, name)
	}
	if _, err := h.store.GetPool(ctx, name); err != nil {
		return err
	}
	st, err := h.ns.StatFS(ctx)
	if err != nil {
		return err
	}
	if u := st.Pools[name]; u.Inodes > 0 {
		return fmt.Errorf("%w: pool %s still holds %d files and directories (%d bytes): move them to another pool first (weft file set-pool PATH OTHER), or delete them",
			ErrPoolInUse, name, u.Inodes, u.Bytes)
	}
	return nil
}

// errUnavailable: this node cannot answer the request (503).
var errUnavailable = errors.New("admin: unavailable")

// CreatePoolSpec creates a pool with the settings of spec.
func (c *Client) CreatePoolSpec(ctx context.Context, name string, spec cluster.PoolSpec) (cluster.PoolRecord, error) {
	var p cluster.PoolRecord
	return p, c.do(ctx, http.MethodPost, v1("/pools"), CreatePoolRequest{Name: name, PoolSpec: spec}, &p)
}

// ModifyPool changes the settings of pool name that spec sets.
func (c *Client) ModifyPool(ctx context.Context, name string, spec cluster.PoolSpec) (cluster.PoolRecord, error) {
	var p cluster.PoolRecord
	return p, c.do(ctx, http.MethodPost, v1("/pools/"+name+"/modify"), spec, &p)
}

// DeletePool deletes pool name, which must have no drives and no files.
func (c *Client) DeletePool(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodPost, v1("/pools/"+name+"/delete"), struct{}{}, nil)
}

// PoolViews lists the pools with the namespace's usage.
func (c *Client) PoolViews(ctx context.Context) ([]PoolView, error) {
	var p []PoolView
	return p, c.do(ctx, http.MethodGet, v1("/pools"), nil, &p)
}

// MoveDrive starts moving drive id to pool (a drain, then the pool
// changes).
func (c *Client) MoveDrive(ctx context.Context, id cluster.DriveID, pool string) (MoveDriveReply, error) {
	var r MoveDriveReply
	return r, c.do(ctx, http.MethodPost, v1(fmt.Sprintf("/drives/%s/move", id)), MoveDriveRequest{Pool: pool}, &r)
}

func v1(path string) string { return APIVersion + path }
