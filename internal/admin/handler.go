package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/weftfs/weft/internal/cluster"
)

// APIVersion prefixes every route; a breaking change adds /v2 beside it.
const APIVersion = "/v1"

// NodeInfo describes the node serving the API.
type NodeInfo struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
}

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// CreatePoolRequest is the body of POST /v1/pools.
type CreatePoolRequest struct {
	Name       string `json:"name"`
	Protection string `json:"protection"`
}

type handler struct {
	store *cluster.Store
	node  NodeInfo
	log   *slog.Logger
}

// NewHandler returns the API's routes:
//
//	GET  /healthz                    "ok" while the node serves
//	GET  /v1/node                    the serving node (NodeInfo)
//	GET  /v1/status                  cluster.Status
//	GET  /v1/nodes                   []cluster.Node
//	GET  /v1/drives                  []cluster.Drive
//	POST /v1/drives/{id}/suspend     cluster.DriveRecord (idempotent)
//	POST /v1/drives/{id}/resume      cluster.DriveRecord (idempotent)
//	GET  /v1/pools                   []cluster.Pool
//	POST /v1/pools                   CreatePoolRequest → cluster.PoolRecord
//
// Errors are ErrorBody with 400 (bad input), 404, 409 (exists, or a
// transition not allowed), 503 (control plane unreachable) or 500.
func NewHandler(store *cluster.Store, node NodeInfo, log *slog.Logger) http.Handler {
	h := &handler{store: store, node: node, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET "+APIVersion+"/node", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, h.node) })
	mux.HandleFunc("GET "+APIVersion+"/status", h.get(func(ctx context.Context) (any, error) { return store.Status(ctx) }))
	mux.HandleFunc("GET "+APIVersion+"/nodes", h.get(func(ctx context.Context) (any, error) { return store.ListNodes(ctx) }))
	mux.HandleFunc("GET "+APIVersion+"/drives", h.get(func(ctx context.Context) (any, error) { return store.ListDrives(ctx) }))
	mux.HandleFunc("GET "+APIVersion+"/pools", h.get(func(ctx context.Context) (any, error) { return store.ListPools(ctx) }))
	mux.HandleFunc("POST "+APIVersion+"/drives/{id}/suspend", h.driveStatus(cluster.StatusSuspended))
	mux.HandleFunc("POST "+APIVersion+"/drives/{id}/resume", h.driveStatus(cluster.StatusReady))
	mux.HandleFunc("POST "+APIVersion+"/pools", h.createPool)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no such API route: %s %s", r.Method, r.URL.Path))
	})
	return mux
}

const requestTimeout = 10 * time.Second

func (h *handler) get(fn func(context.Context) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		v, err := fn(ctx)
		h.reply(w, r, v, err)
	}
}

func (h *handler) driveStatus(to cluster.DriveStatus) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := cluster.ParseDriveID(r.PathValue("id"))
		if err != nil {
			h.reply(w, r, nil, err)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		d, err := h.store.SetDriveStatus(ctx, id, to)
		if err == nil {
			h.log.Info("drive status changed", "drive", id, "status", to)
		}
		h.reply(w, r, d, err)
	}
}

func (h *handler) createPool(w http.ResponseWriter, r *http.Request) {
	var req CreatePoolRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "request body: "+err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	p, err := h.store.CreatePool(ctx, req.Name, req.Protection, false)
	if err == nil {
		h.log.Info("pool created", "pool", p.Name, "protection", p.Protection)
		writeJSON(w, http.StatusCreated, p)
		return
	}
	h.reply(w, r, nil, err)
}

// reply writes v, or maps err to an HTTP status. This is the one place where
// control-plane errors become HTTP codes.
func (h *handler) reply(w http.ResponseWriter, r *http.Request, v any, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, v)
	case errors.Is(err, cluster.ErrInvalid):
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
	case errors.Is(err, cluster.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, cluster.ErrExists):
		writeError(w, http.StatusConflict, "exists", err.Error())
	case errors.Is(err, cluster.ErrBadTransition):
		writeError(w, http.StatusConflict, "bad_transition", err.Error())
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		writeError(w, http.StatusServiceUnavailable, "unavailable", "control plane did not answer in time: "+err.Error())
	default:
		h.log.Warn("admin request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, kind, msg string) {
	writeJSON(w, code, ErrorBody{Error: msg, Code: kind})
}
