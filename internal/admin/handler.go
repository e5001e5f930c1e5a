package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/impact"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/qos"
)

// APIVersion prefixes every route; a breaking change adds /v2 beside it.
const APIVersion = "/v1"

// NodeInfo describes the node serving the API, and how a client reaches
// the cluster's control plane (what `weft mount` needs).
type NodeInfo struct {
	Name          string   `json:"name"`
	PID           int      `json:"pid"`
	ClusterID     string   `json:"cluster_id"`
	EtcdEndpoints []string `json:"etcd_endpoints"`
	// EmbeddedEtcd says the control plane runs in weft's own embedded
	// members (which allow larger transactions than etcd's defaults).
	EmbeddedEtcd bool `json:"embedded_etcd"`
}

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// Status is GET /v1/status: the cluster summary, the job engine's mode
// (absent when the serving node runs no job engine) and the data's
// health (absent without a namespace): files below their protection make
// Health degraded, files with lost data critical (HealthCritical), each
// with a line in Problems.
type Status struct {
	cluster.Status
	JobEngine *job.Mode             `json:"job_engine,omitempty"`
	Data      *meta.ProtectionStats `json:"data,omitempty"`
}

func (h *handler) status(ctx context.Context) (any, error) {
	st, err := h.store.Status(ctx)
	if err != nil || h.jobs == nil {
		return h.withData(ctx, Status{Status: st}, err)
	}
	m, err := h.jobs.Mode(ctx)
	return h.withData(ctx, Status{Status: st, JobEngine: &m}, err)
}

// Layouts reports file layouts (package client implements it).
type Layouts interface {
	Layout(ctx context.Context, lin meta.LIN) (client.FileLayout, error)
}

// Deps are what the API serves from. Layouts and Jobs may be nil (the
// routes then answer 503).
type Deps struct {
	Store    *cluster.Store
	Layouts  Layouts
	Jobs     *job.Engine
	Throttle *impact.Controller
	Policies *impact.PolicyStore
	// Namespace serves data health and the file lists; nil leaves them
	// out of the status and answers 503 on the lists.
	Namespace Namespace
	// Drives adds drives to this node at run time; nil refuses drive add.
	Drives DriveAdder
	// Workers are this node's background workers; nil answers 503.
	Workers WorkerLister
	// QoS is this node's QoS state; nil answers 503 for it.
	QoS QoSNode
	// NFS is this node's NFS gateway; nil: the node runs none.
	NFS NFSNode
	// NFSAddresses reads who holds each NFS service address, from the
	// control plane (any node can); nil leaves them out of the status.
	NFSAddresses func(ctx context.Context) ([]NFSAddress, error)
	Node         NodeInfo
	Log          *slog.Logger
	// Peer are the options of the client with which this node relays a
	// request to another node's admin API (drive add, workers): its own
	// node certificate.
	Peer []ClientOption
	// Insecure: the node serves without TLS (tokens and identities are
	// refused).
	Insecure bool
}

type handler struct {
	store    *cluster.Store
	layouts  Layouts
	ns       Namespace
	jobs     *job.Engine
	throttle *impact.Controller
	policies *impact.PolicyStore
	adder    DriveAdder
	workers  WorkerLister
	qos      QoSNode
	nfs      NFSNode
	nfsAddrs func(ctx context.Context) ([]NFSAddress, error)
	node     NodeInfo
	log      *slog.Logger
	peer     []ClientOption
	insecure bool
}

// NewHandler returns the API's routes:
//
//	GET  /healthz                    "ok" while the node serves
//	GET  /v1/node                    the serving node (NodeInfo)
//	GET  /v1/status                  Status: cluster.Status and the job
//	                                 engine's mode
//	GET  /v1/nodes                   []cluster.Node
//	GET  /v1/node/workers            Workers: this node's background workers
//	GET  /v1/nodes/{name}/workers    Workers of node name (routed to it)
//	GET  /v1/drives                  []cluster.Drive
//	POST /v1/drives                  AddDriveRequest → AddDriveReply (routed to its node)
//	POST /v1/node/drives             AddDriveRequest → AddDriveReply (this node only)
//	POST /v1/drives/{id}/suspend     cluster.DriveRecord (idempotent)
//	POST /v1/drives/{id}/resume      cluster.DriveRecord (idempotent)
//	GET  /v1/files/{lin}             client.FileLayout (weft file info)
//	GET  /v1/files/under-protected   UnderProtectedList (?after=LIN&limit=N)
//	GET  /v1/files/lost              LostList, the lost-data list (?after=LIN&limit=N)
//
// and the routes of jobs, files, pools, file layouts, tokens and
// identities, the pool policy, callbacks and QoS (jobs.go, files.go, pools.go,
// file_layout.go, access.go, policy.go, callbacks.go, qos.go, nfs.go). Who may call them is Guard's
// business (auth.go): the server puts it in front of the handler.
//
// Errors are ErrorBody with 400 (bad input), 404, 409 (exists, or a
// transition not allowed, or a drive add refused), 502 (a node to route to
// did not answer), 503 (control plane unreachable, or the node named is
// down) or 500.
func NewHandler(d Deps) http.Handler {
	store := d.Store
	h := &handler{store: store, layouts: d.Layouts, ns: d.Namespace, jobs: d.Jobs, throttle: d.Throttle, policies: d.Policies, adder: d.Drives, workers: d.Workers, qos: d.QoS, nfs: d.NFS, nfsAddrs: d.NFSAddresses, node: d.Node, log: d.Log,
		peer: d.Peer, insecure: d.Insecure}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET "+APIVersion+"/node", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, h.node) })
	mux.HandleFunc("GET "+APIVersion+"/status", h.get(h.status))
	mux.HandleFunc("GET "+APIVersion+"/nodes", h.get(func(ctx context.Context) (any, error) { return store.ListNodes(ctx) }))
	mux.HandleFunc("GET "+APIVersion+"/drives", h.get(func(ctx context.Context) (any, error) { return store.ListDrives(ctx) }))
	mux.HandleFunc("POST "+APIVersion+"/drives/{id}/suspend", h.driveStatus(cluster.StatusSuspended))
	mux.HandleFunc("POST "+APIVersion+"/drives/{id}/resume", h.driveStatus(cluster.StatusReady))
	mux.HandleFunc("POST "+APIVersion+"/drives", h.addDrive)
	mux.HandleFunc("POST "+APIVersion+"/node/drives", h.addNodeDrive)
	mux.HandleFunc("GET "+APIVersion+"/node/workers", h.nodeWorkers)
	mux.HandleFunc("GET "+APIVersion+"/nodes/{name}/workers", h.namedNodeWorkers)
	mux.HandleFunc("GET "+APIVersion+"/files/{lin}", func(w http.ResponseWriter, r *http.Request) {
		lin, err := strconv.ParseUint(r.PathValue("lin"), 10, 64)
		if err != nil || lin == 0 {
			writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("file id %q: want a LIN (the inode number stat shows)", r.PathValue("lin")))
			return
		}
		h.get(func(ctx context.Context) (any, error) { return h.layouts.Layout(ctx, meta.LIN(lin)) })(w, r)
	})
	h.jobRoutes(mux)
	h.fileRoutes(mux)
	h.poolRoutes(mux)
	h.fileLayoutRoutes(mux)
	h.accessRoutes(mux)
	h.policyRoutes(mux)
	h.callbackRoutes(mux)
	h.qosRoutes(mux)
	h.nfsRoutes(mux)
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

// reply writes v, or maps err to an HTTP status. This is the one place where
// control-plane errors become HTTP codes.
func (h *handler) reply(w http.ResponseWriter, r *http.Request, v any, err error) {
	c, isCreated := v.(created)
	if status, code, ok := policyError(err); ok {
		writeError(w, status, code, err.Error())
		return
	}
	switch {
	case err == nil && isCreated:
		writeJSON(w, http.StatusCreated, c.v)
	case err == nil:
		writeJSON(w, http.StatusOK, v)
	case errors.Is(err, cluster.ErrInvalid), errors.Is(err, meta.ErrInvalid), errors.Is(err, job.ErrInvalid),
		errors.Is(err, job.ErrUnknownType), errors.Is(err, job.ErrBadPriority), errors.Is(err, job.ErrUnknownPolicy),
		errors.Is(err, job.ErrTypeDisabled), errors.Is(err, impact.ErrInvalid), errors.Is(err, impact.ErrUnknownPolicy),
		errors.Is(err, qos.ErrInvalid):
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
	case errors.Is(err, drive.ErrInvalid), errors.Is(err, client.ErrInvalid):
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
	case errors.Is(err, qos.ErrNewerFormat):
		writeError(w, http.StatusConflict, "newer_format", err.Error())
	case errors.Is(err, ErrRefused), errors.Is(err, drive.ErrOtherCluster), errors.Is(err, drive.ErrOtherNode),
		errors.Is(err, drive.ErrNotEmpty), errors.Is(err, drive.ErrLocked), errors.Is(err, drive.ErrNewerFormat),
		errors.Is(err, drive.ErrBadIdentity):
		writeError(w, http.StatusConflict, "refused", err.Error())
	case errors.Is(err, ErrNodeDown):
		writeError(w, http.StatusServiceUnavailable, "node_down", err.Error())
	case errors.Is(err, cluster.ErrAccess):
		writeError(w, http.StatusForbidden, "forbidden", err.Error())
	case errors.Is(err, cluster.ErrNotFound), errors.Is(err, meta.ErrNotFound), errors.Is(err, job.ErrNotFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.Is(err, cluster.ErrExists), errors.Is(err, job.ErrExists):
		writeError(w, http.StatusConflict, "exists", err.Error())
	case errors.Is(err, cluster.ErrInUse), errors.Is(err, ErrPoolInUse):
		writeError(w, http.StatusConflict, "in_use", err.Error())
	case errors.Is(err, errUnavailable):
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
	case errors.Is(err, cluster.ErrBadTransition), errors.Is(err, job.ErrBadTransition), errors.Is(err, impact.ErrPolicyExists),
		errors.Is(err, impact.ErrPolicyBuiltin):
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
