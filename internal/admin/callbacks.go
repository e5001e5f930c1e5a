package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/weftfs/weft/internal/job"
)

// Callbacks: the routes that add, list and delete the commands the
// coordinator's node runs for events (job.Callback).

// AddCallbackRequest is the body of POST /v1/callbacks: a job.Callback
// with its timeout as a Go duration ("90s", "5m"; "": the default, 60s).
type AddCallbackRequest struct {
	Name    string   `json:"name"`
	Events  []string `json:"events"`
	Command string   `json:"command"`
	Args    []string `json:"args,omitempty"`
	Timeout string   `json:"timeout,omitempty"`
}

// callbackRoutes adds:
//
//	GET    /v1/callbacks          []job.Callback, by name
//	POST   /v1/callbacks          AddCallbackRequest → job.Callback (201);
//	                              400 naming a bad field, 409 if the name
//	                              is taken
//	DELETE /v1/callbacks/{name}   → {"deleted": name}; 404 if none
//
// Like every change, adding and deleting need an admin identity or a
// token (Guard): a callback runs a command on a node as weft's user.
func (h *handler) callbackRoutes(mux *http.ServeMux) {
	v := APIVersion
	mux.HandleFunc("GET "+v+"/callbacks", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) { return h.jobs.Callbacks(ctx) }))
	mux.HandleFunc("POST "+v+"/callbacks", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) {
		var req AddCallbackRequest
		if err := decodeBody(r, &req); err != nil {
			return nil, err
		}
		var timeout time.Duration
		if req.Timeout != "" {
			var err error
			if timeout, err = time.ParseDuration(req.Timeout); err != nil || timeout <= 0 {
				return nil, fmt.Errorf("%w: callback %s: timeout %q: want a duration such as 60s or 5m (1s to %s)", job.ErrInvalid, req.Name, req.Timeout, job.MaxCallbackTimeout)
			}
		}
		c, err := h.jobs.AddCallback(ctx, job.Callback{Name: req.Name, Events: req.Events, Command: req.Command, Args: req.Args, Timeout: timeout})
		if err != nil {
			return nil, err
		}
		h.log.Info("callback added", "callback", c.Name, "events", c.Events, "command", c.Command, "by", PrincipalOf(r.Context()).String())
		return created{c}, nil
	}))
	mux.HandleFunc("DELETE "+v+"/callbacks/{name}", h.withJobs(func(ctx context.Context, r *http.Request) (any, error) {
		name := r.PathValue("name")
		if err := h.jobs.DeleteCallback(ctx, name); err != nil {
			return nil, err
		}
		h.log.Info("callback deleted", "callback", name, "by", PrincipalOf(r.Context()).String())
		return map[string]string{"deleted": name}, nil
	}))
}

// Callbacks lists the callbacks, by name.
func (c *Client) Callbacks(ctx context.Context) ([]job.Callback, error) {
	var v []job.Callback
	return v, c.do(ctx, http.MethodGet, APIVersion+"/callbacks", nil, &v)
}

// AddCallback adds a callback and returns it as stored. A bad field is an
// *Error with status 400 naming it, a name in use 409.
func (c *Client) AddCallback(ctx context.Context, req AddCallbackRequest) (job.Callback, error) {
	var v job.Callback
	return v, c.do(ctx, http.MethodPost, APIVersion+"/callbacks", req, &v)
}

// DeleteCallback deletes the callback called name; none is an *Error with
// status 404.
func (c *Client) DeleteCallback(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, APIVersion+"/callbacks/"+url.PathEscape(name), nil, nil)
}
