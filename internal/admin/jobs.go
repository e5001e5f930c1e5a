package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/impact"
	"github.com/weftfs/weft/internal/job"
)

// StartJobRequest is the body of POST /v1/jobs.
type StartJobRequest struct {
	Type     string            `json:"type"`
	Priority int               `json:"priority,omitempty"` // 0: the type's default
	Policy   string            `json:"policy,omitempty"`   // "": the type's default
	Params   map[string]string `json:"params,omitempty"`
}

// StartJobReply is the answer of POST /v1/jobs.
type StartJobReply struct {
	ID job.JobID `json:"id"`
}

// ModifyJobRequest is the body of POST /v1/jobs/{id}/modify (0 / "":
// unchanged).
type ModifyJobRequest struct {
	Priority int    `json:"priority,omitempty"`
	Policy   string `json:"policy,omitempty"`
}

// ModifyJobTypeRequest is the body of POST /v1/job-types/{name}: the
// type's settings, all of them. A body without "schedule" (a client from
// before schedules) keeps the type's schedule; "" removes it.
type ModifyJobTypeRequest struct {
	job.TypeSettings
	Schedule *string `json:"schedule,omitempty"`
}

// PolicyRequest is the body of POST and PUT /v1/job-policies: windows in
// the CLI syntax ("mon-fri 08:00-18:00 low").
type PolicyRequest struct {
	Name     string   `json:"name"`
	TimeZone string   `json:"time_zone,omitempty"`
	Default  string   `json:"default"`
	Windows  []string `json:"windows,omitempty"`
	// ClientP99 is the client latency target as impact.ParseClientP99
	// reads it: "" or "default" for the levels' per drive class, "none"
	// or "0" for no target, else a duration such as "5ms".
	ClientP99 string `json:"client_p99,omitempty"`
}

// JobStatus is GET /v1/job-status: the engine's view and this node's
// throttle.
type JobStatus struct {
	job.Status
	Throttle impact.ThrottleStatus `json:"throttle"`
}

// DefaultEventLimit is how many events GET /v1/job-events returns without
// a limit.
const DefaultEventLimit = 50

// RemoveDriveReply is the answer of POST /v1/drives/{id}/remove.
type RemoveDriveReply struct {
	Drive cluster.DriveRecord `json:"drive"`
	Job   job.JobID           `json:"job"`
}

// jobRoutes adds the job engine's routes:
//
//	GET  /v1/jobs                    []job.JobView (running and ended)
//	POST /v1/jobs                    StartJobRequest → StartJobReply
//	GET  /v1/jobs/{id}               job.JobView
//	POST /v1/jobs/{id}/{pause|resume|cancel}
//	POST /v1/jobs/{id}/modify        ModifyJobRequest
//	GET  /v1/job-types              []job.TypeView
//	POST /v1/job-types/{name}       ModifyJobTypeRequest → []job.TypeView
//	GET  /v1/job-status             JobStatus
//	GET  /v1/job-policies           built-in and custom policies
//	POST /v1/job-policies           PolicyRequest (create)
//	PUT  /v1/job-policies/{name}    PolicyRequest (modify)
//	GET  /v1/job-settings            job.Settings
//	POST /v1/job-settings            job.Settings (the fields given replace
//	                                 the current ones)
//	GET  /v1/job-events?limit=N      []job.Event: the newest N (default
//	                                 DefaultEventLimit, at most 1000),
//	                                 oldest first
//	GET  /v1/job-events/{id}         job.Event, with its callbacks' runs
//	                                 and their output; 404 once it left
//	                                 the log
//	POST /v1/drives/{id}/remove      suspend, then drain: RemoveDriveReply
func (h *handler) jobRoutes(mux *http.ServeMux) {
	v := APIVersion
	mux.HandleFunc("GET "+v+"/job-settings", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) { return h.jobs.Settings(ctx) }))
	mux.HandleFunc("POST "+v+"/job-settings", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) {
		st, err := h.jobs.Settings(ctx)
		if err != nil {
			return nil, err
		}
		if err := decodeBody(r, &st); err != nil {
			return nil, err
		}
		if err := h.jobs.SetSettings(ctx, st); err != nil {
			return nil, err
		}
		return h.jobs.Settings(ctx)
	}))
	mux.HandleFunc("GET "+v+"/job-events", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) {
		limit := DefaultEventLimit
		if q := r.URL.Query().Get("limit"); q != "" {
			n, err := strconv.Atoi(q)
			if err != nil {
				return nil, fmt.Errorf("%w: limit %q: want a number of events, 1 to %d", job.ErrInvalid, q, job.DefaultKeepEvents)
			}
			limit = n
		}
		return h.jobs.Events(ctx, limit)
	}))
	mux.HandleFunc("GET "+v+"/job-events/{id}", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) {
		id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
		if err != nil || id == 0 {
			return nil, fmt.Errorf("%w: event id %q: want a positive decimal number (the ID column of weft job events list)", job.ErrInvalid, r.PathValue("id"))
		}
		return h.jobs.Event(ctx, id)
	}))
	mux.HandleFunc("GET "+v+"/jobs", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) { return h.jobs.List(ctx) }))
	mux.HandleFunc("POST "+v+"/jobs", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) {
		var req StartJobRequest
		if err := decodeBody(r, &req); err != nil {
			return nil, err
		}
		id, err := h.jobs.Submit(ctx, req.Type, job.Options{Priority: req.Priority, Policy: req.Policy, Params: req.Params})
		if err == nil {
			h.log.Info("job started", "id", id, "type", req.Type)
		}
		return StartJobReply{ID: id}, err
	}))
	mux.HandleFunc("GET "+v+"/jobs/{id}", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) {
		id, err := job.ParseJobID(r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		return h.jobs.Get(ctx, id)
	}))
	for verb, fn := range map[string]func(*job.Engine, context.Context, job.JobID) error{
		"pause": (*job.Engine).Pause, "resume": (*job.Engine).Resume, "cancel": (*job.Engine).Cancel,
	} {
		mux.HandleFunc("POST "+v+"/jobs/{id}/"+verb, h.withJobs(func(ctx context.Context, r *http.Request) (any, error) {
			id, err := job.ParseJobID(r.PathValue("id"))
			if err != nil {
				return nil, err
			}
			if err := fn(h.jobs, ctx, id); err != nil {
				return nil, err
			}
			return h.jobs.Get(ctx, id)
		}))
	}
	mux.HandleFunc("POST "+v+"/jobs/{id}/modify", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) {
		id, err := job.ParseJobID(r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		var req ModifyJobRequest
		if err := decodeBody(r, &req); err != nil {
			return nil, err
		}
		if err := h.jobs.Modify(ctx, id, req.Priority, req.Policy); err != nil {
			return nil, err
		}
		return h.jobs.Get(ctx, id)
	}))
	mux.HandleFunc("GET "+v+"/job-types", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) { return h.jobs.Types(ctx) }))
	mux.HandleFunc("POST "+v+"/job-types/{name}", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) {
		var req ModifyJobTypeRequest
		if err := decodeBody(r, &req); err != nil {
			return nil, err
		}
		ts := req.TypeSettings
		if req.Schedule != nil {
			ts.Schedule = *req.Schedule
		} else {
			types, err := h.jobs.Types(ctx)
			if err != nil {
				return nil, err
			}
			for _, t := range types {
				if t.Name == r.PathValue("name") {
					ts.Schedule = t.Schedule
				}
			}
		}
		if err := h.jobs.ModifyType(ctx, r.PathValue("name"), ts); err != nil {
			return nil, err
		}
		return h.jobs.Types(ctx)
	}))
	mux.HandleFunc("GET "+v+"/job-status", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) {
		st, err := h.jobs.Status(ctx)
		out := JobStatus{Status: st}
		if h.throttle != nil {
			out.Throttle = h.throttle.Status()
		}
		return out, err
	}))
	mux.HandleFunc("GET "+v+"/job-policies", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) {
		custom, err := h.policies.List(ctx)
		return append(impact.BuiltinPolicies(), custom...), err
	}))
	putPolicy := func(update bool) func(ctx context.Context, r *http.Request) (any, error) {
		return func(ctx context.Context, r *http.Request) (any, error) {
			var req PolicyRequest
			if err := decodeBody(r, &req); err != nil {
				return nil, err
			}
			if update {
				req.Name = r.PathValue("name")
			}
			target, err := impact.ParseClientP99(req.ClientP99)
			if err != nil {
				return nil, fmt.Errorf("%w (policy %q)", err, req.Name)
			}
			p, err := impact.NewPolicy(req.Name, req.TimeZone, req.Default, req.Windows)
			if err != nil {
				return nil, err
			}
			p.ClientP99 = target
			if update {
				err = h.policies.Update(ctx, p)
			} else {
				err = h.policies.Create(ctx, p)
			}
			return p, err
		}
	}
	mux.HandleFunc("POST "+v+"/job-policies", h.withJobs(putPolicy(false)))
	mux.HandleFunc("PUT "+v+"/job-policies/{name}", h.withJobs(putPolicy(true)))
	mux.HandleFunc("POST "+v+"/drives/{id}/remove", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) {
		id, err := cluster.ParseDriveID(r.PathValue("id"))
		if err != nil {
			return nil, err
		}
		d, err := h.store.SetDriveStatus(ctx, id, cluster.StatusDraining)
		if err != nil {
			return nil, err
		}
		jid, err := h.jobs.Submit(ctx, "drain", job.Options{Params: map[string]string{"drives": id.String()}})
		if err == nil {
			h.log.Info("drive draining", "drive", id, "job", jid)
		}
		return RemoveDriveReply{Drive: d, Job: jid}, err
	}))
}

// withJobs serves a job route: 503 without an engine, else fn's answer.
func (h *handler) withJobs(fn func(context.Context, *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.jobs == nil {
			writeError(w, http.StatusServiceUnavailable, "unavailable", "this node runs no job engine")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		v, err := fn(ctx, r)
		if err == nil && r.Method == http.MethodPost && r.URL.Path == APIVersion+"/jobs" {
			writeJSON(w, http.StatusCreated, v)
			return
		}
		h.reply(w, r, v, err)
	}
}

// decodeBody decodes a JSON request body, refusing unknown fields.
func decodeBody(r *http.Request, into any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return fmt.Errorf("%w: request body: %v", cluster.ErrInvalid, err)
	}
	return nil
}
