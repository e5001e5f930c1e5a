package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/meta"
)

// Data health: what the namespace says about the cluster's data, beside
// the control plane's health of nodes and drives — stripes below their
// pool's protection (the protection index) and files with lost data (the
// lost-data list), with the routes that list them.

// Namespace is what the API reads of the namespace for data health and
// the file lists; *meta.Meta implements it.
type Namespace interface {
	ProtectionStats(ctx context.Context, max int) (meta.ProtectionStats, error)
	ListUnderProtectedFiles(ctx context.Context, after meta.LIN, limit int) ([]meta.UnderProtectedFile, error)
	ListLost(ctx context.Context, after meta.LIN, limit int) ([]meta.LostFile, error)
	Path(ctx context.Context, lin meta.LIN) (string, error)
	// StatFS gives the per-pool usage of the pool list and of pool
	// delete; GetAttr and SetAttr, the file commands' (set-pool,
	// set-protection).
	StatFS(ctx context.Context) (meta.FSStats, error)
	GetAttr(ctx context.Context, lin meta.LIN) (meta.Attr, error)
	SetAttr(ctx context.Context, lin meta.LIN, mask meta.SetAttrMask, a meta.Attr) (meta.Attr, error)
}

var _ Namespace = (*meta.Meta)(nil)

// HealthCritical is the health of a cluster that has lost data: worse
// than cluster.Degraded, which says something needs attention to keep
// data safe.
const HealthCritical = "critical"

// statusIndexEntries bounds the entries of each index GET /v1/status
// counts; past it the counts are lower bounds (Partial).
const statusIndexEntries = 100000

// withData adds the namespace's data health to st (unless err): counts,
// problems, and the health they imply (critical with lost data, degraded
// with stripes below their protection or an incomplete index).
func (h *handler) withData(ctx context.Context, st Status, err error) (Status, error) {
	if err != nil || h.ns == nil {
		return st, err
	}
	err = h.addData(ctx, &st)
	return st, err
}

func (h *handler) addData(ctx context.Context, st *Status) error {
	d, err := h.ns.ProtectionStats(ctx, statusIndexEntries)
	if err != nil {
		return err
	}
	st.Data = &d
	atLeast := ""
	if d.Partial {
		atLeast = "at least "
	}
	if d.LostFiles > 0 {
		st.Problems = append(st.Problems, fmt.Sprintf("%s%d files have lost data (%s in %d stripes): restore them from a backup, then delete or rewrite them (weft file lost list)",
			atLeast, d.LostFiles, mib(d.LostBytes), d.LostStripes))
	}
	if d.UnderFiles > 0 {
		st.Problems = append(st.Problems, fmt.Sprintf("%s%d files (%s in %d stripes) are below their pool's protection: a repair re-protects them once the cluster can place them (weft file list --under-protected)",
			atLeast, d.UnderFiles, mib(d.UnderBytes), d.UnderStripes))
	}
	if d.Incomplete {
		st.Problems = append(st.Problems, fmt.Sprintf("the protection index is incomplete since %s (namespace upgraded from format 1): the next repair checks every stripe",
			d.IncompleteSince.UTC().Format("2006-01-02 15:04:05Z")))
	}
	switch {
	case d.LostFiles > 0:
		st.Health = HealthCritical
	case len(st.Problems) > 0:
		st.Health = cluster.Degraded
	}
	return nil
}

// mib formats n bytes in MiB with one decimal.
func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// UnderProtectedFile is one file of GET /v1/files/under-protected: the
// file's entries of the protection index, summed, and its path ("" when
// it has none: unlinked, still open).
type UnderProtectedFile struct {
	meta.UnderProtectedFile
	Path string `json:"path"`
}

// UnderProtectedList is GET /v1/files/under-protected: a page of files,
// and the LIN to pass as after for the next one (0: the last page).
type UnderProtectedList struct {
	Files []UnderProtectedFile `json:"files"`
	Next  meta.LIN             `json:"next,omitempty"`
}

// LostFile is one file of GET /v1/files/lost: its lost stripes, the file
// byte ranges they held, and its path ("" when it has none).
type LostFile struct {
	meta.LostFile
	Path   string           `json:"path"`
	Ranges []meta.ByteRange `json:"ranges"`
	Bytes  uint64           `json:"bytes"`
}

// LostList is GET /v1/files/lost: a page of files, and the LIN to pass as
// after for the next one (0: the last page).
type LostList struct {
	Files []LostFile `json:"files"`
	Next  meta.LIN   `json:"next,omitempty"`
}

// DefaultFileListLimit and MaxFileListLimit bound a page of the file
// lists.
const (
	DefaultFileListLimit = 1000
	MaxFileListLimit     = 10000
)

// fileRoutes adds the file-list routes.
func (h *handler) fileRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+APIVersion+"/files/under-protected", h.page(func(ctx context.Context, after meta.LIN, limit int) (any, error) {
		fs, err := h.ns.ListUnderProtectedFiles(ctx, after, limit+1)
		if err != nil {
			return nil, err
		}
		out := UnderProtectedList{Files: []UnderProtectedFile{}}
		for i, f := range fs {
			if i == limit {
				out.Next = fs[i-1].LIN
				break
			}
			out.Files = append(out.Files, UnderProtectedFile{UnderProtectedFile: f, Path: h.pathOf(ctx, f.LIN)})
		}
		return out, nil
	}))
	mux.HandleFunc("GET "+APIVersion+"/files/lost", h.page(func(ctx context.Context, after meta.LIN, limit int) (any, error) {
		fs, err := h.ns.ListLost(ctx, after, limit+1)
		if err != nil {
			return nil, err
		}
		out := LostList{Files: []LostFile{}}
		for i, f := range fs {
			if i == limit {
				out.Next = fs[i-1].LIN
				break
			}
			out.Files = append(out.Files, LostFile{LostFile: f, Path: h.pathOf(ctx, f.LIN), Ranges: f.Ranges(), Bytes: f.Bytes()})
		}
		return out, nil
	}))
}

// page serves a paged list: ?after=LIN (default 0) and ?limit=N
// (default DefaultFileListLimit, at most MaxFileListLimit), refused with
// a 400 naming the parameter.
func (h *handler) page(fn func(ctx context.Context, after meta.LIN, limit int) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.ns == nil {
			writeError(w, http.StatusServiceUnavailable, "unavailable", "this node serves no namespace")
			return
		}
		after, limit := uint64(0), DefaultFileListLimit
		if v := r.URL.Query().Get("after"); v != "" {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("after=%q: want the LIN the previous page ended with", v))
				return
			}
			after = n
		}
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxFileListLimit {
				writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("limit=%q: want 1 to %d files", v, MaxFileListLimit))
				return
			}
			limit = n
		}
		h.get(func(ctx context.Context) (any, error) { return fn(ctx, meta.LIN(after), limit) })(w, r)
	}
}

// pathOf names lin for a list: its path, or "" when it has none.
func (h *handler) pathOf(ctx context.Context, lin meta.LIN) string {
	p, err := h.ns.Path(ctx, lin)
	if err != nil && !errors.Is(err, meta.ErrNotFound) {
		h.log.Warn("path of a listed file", "lin", uint64(lin), "err", err)
	}
	return p
}

// UnderProtectedFiles returns a page of the files below their pool's
// protection (weft file list --under-protected): up to limit files after
// LIN after (0: from the first; limit 0: the server's default).
func (c *Client) UnderProtectedFiles(ctx context.Context, after meta.LIN, limit int) (UnderProtectedList, error) {
	var l UnderProtectedList
	return l, c.do(ctx, http.MethodGet, fmt.Sprintf("%s/files/under-protected?after=%d%s", APIVersion, after, limitParam(limit)), nil, &l)
}

// LostFiles returns a page of the lost-data list (weft file lost list).
func (c *Client) LostFiles(ctx context.Context, after meta.LIN, limit int) (LostList, error) {
	var l LostList
	return l, c.do(ctx, http.MethodGet, fmt.Sprintf("%s/files/lost?after=%d%s", APIVersion, after, limitParam(limit)), nil, &l)
}

func limitParam(limit int) string {
	if limit <= 0 {
		return ""
	}
	return fmt.Sprintf("&limit=%d", limit)
}
