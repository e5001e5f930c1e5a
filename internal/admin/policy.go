package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/policy"
)

// The pool policy: install, show, history and the dry run (weft policy).

// InstallPolicyRequest is the body of POST /v1/policy: the policy's text
// as written, and an optional note for the history.
type InstallPolicyRequest struct {
	Text    string `json:"text"`
	Comment string `json:"comment,omitempty"`
}

// dryRunBudget is how long a dry run scans before it answers with what
// it has, unless the request says otherwise: well under the client's
// default 30 s request timeout.
const dryRunBudget = 20 * time.Second

// MaxDryRunBudget is the longest scan a dry run request may ask for
// (timeout_seconds).
const MaxDryRunBudget = 30 * time.Minute

// policyTestBody is the body of POST /v1/policy/test: the request, and
// how long the scan may run before the node answers with what it has
// (Complete false). TimeoutSeconds 0 means dryRunBudget; at most
// MaxDryRunBudget. A client that sends a budget waits for it (see
// Client.TestPolicyWithin).
type policyTestBody struct {
	PolicyTestRequest
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
}

// budgetOf returns the scan budget of a request's timeout_seconds, or an
// error wrapping cluster.ErrInvalid (a 400) for one out of range.
func budgetOf(sec float64) (time.Duration, error) {
	if sec == 0 {
		return dryRunBudget, nil
	}
	if !(sec > 0 && sec <= MaxDryRunBudget.Seconds()) {
		return 0, fmt.Errorf("%w: timeout_seconds %g: want a dry run budget of more than 0 and at most %.0f seconds (%s), or 0 for the default %s",
			cluster.ErrInvalid, sec, MaxDryRunBudget.Seconds(), MaxDryRunBudget, dryRunBudget)
	}
	return time.Duration(sec * float64(time.Second)), nil
}

// policyRoutes adds:
//
//	POST /v1/policy                InstallPolicyRequest → 201 cluster.PolicyVersion
//	GET  /v1/policy                cluster.InstalledPolicy (?version=N; default
//	                               the current one)
//	GET  /v1/policy/history        []cluster.PolicyVersion, oldest first
//	POST /v1/policy/test           PolicyTestRequest, plus timeout_seconds
//	                               (the scan's budget: 0 the default 20 s, at
//	                               most MaxDryRunBudget; else 400) →
//	                               PolicyTestReport (a dry run; needs the
//	                               namespace, else 503)
//
// An invalid policy is a 400 whose message lists every problem with its
// line and column (code "invalid_policy").
func (h *handler) policyRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST "+APIVersion+"/policy", h.withBody(func(ctx context.Context, r *http.Request) (any, error) {
		var req InstallPolicyRequest
		if err := decodeBody(r, &req); err != nil {
			return nil, err
		}
		by := PrincipalOf(r.Context()).String()
		v, err := h.store.InstallPolicy(ctx, req.Text, by, req.Comment)
		if err != nil {
			return nil, err
		}
		h.log.Info("policy installed", "version", v.Version, "rules", v.Rules, "checksum", v.Checksum, "by", by)
		return created{v}, nil
	}))
	mux.HandleFunc("GET "+APIVersion+"/policy", h.withBody(func(ctx context.Context, r *http.Request) (any, error) {
		var v uint64
		if s := r.URL.Query().Get("version"); s != "" {
			var err error
			if v, err = strconv.ParseUint(s, 10, 64); err != nil || v == 0 {
				return nil, fmt.Errorf("%w: version %q: want a version number from weft policy history (1, 2, ...)", cluster.ErrInvalid, s)
			}
		}
		return h.store.Policy(ctx, v)
	}))
	mux.HandleFunc("GET "+APIVersion+"/policy/history", h.get(func(ctx context.Context) (any, error) {
		return h.store.PolicyHistory(ctx)
	}))
	mux.HandleFunc("POST "+APIVersion+"/policy/test", func(w http.ResponseWriter, r *http.Request) {
		ns, ok := h.ns.(PolicyNamespace)
		if !ok {
			writeError(w, http.StatusServiceUnavailable, "unavailable", fmt.Sprintf("node %s serves no namespace: ask another node", h.node.Name))
			return
		}
		var body policyTestBody
		if err := decodeBody(r, &body); err != nil {
			h.reply(w, r, nil, err)
			return
		}
		budget, err := budgetOf(body.TimeoutSeconds)
		if err != nil {
			h.reply(w, r, nil, err)
			return
		}
		rep, err := h.dryRun(r.Context(), ns, body.PolicyTestRequest, budget)
		h.reply(w, r, rep, err)
	})
}

// dryRun reads what the dry run needs (the policy, the pools) within
// requestTimeout, then scans for at most budget (the scan's ctx deadline).
func (h *handler) dryRun(ctx context.Context, ns PolicyNamespace, req PolicyTestRequest, budget time.Duration) (PolicyTestReport, error) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	text, version := req.Text, uint64(0)
	if text == "" {
		cur, err := h.store.Policy(rctx, 0)
		if err != nil {
			return PolicyTestReport{}, err
		}
		text, version = cur.Text, cur.Version
	}
	pol, err := h.store.CheckPolicy(rctx, text)
	if err != nil {
		return PolicyTestReport{}, err
	}
	pools, err := h.store.ListPools(rctx)
	if err != nil {
		return PolicyTestReport{}, err
	}
	sctx, cancel2 := context.WithTimeout(ctx, budget)
	defer cancel2()
	rep, err := DryRun(sctx, ns, pol, pools, req, time.Now())
	rep.Version = version
	return rep, err
}

// withBody serves fn with the request (for its body or query) within
// requestTimeout.
func (h *handler) withBody(fn func(context.Context, *http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
		defer cancel()
		v, err := fn(ctx, r)
		h.reply(w, r, v, err)
	}
}

// policyError is the HTTP status and code of an error of the policy
// routes that reply's table does not know; ok false otherwise.
func policyError(err error) (status int, code string, ok bool) {
	switch {
	case errors.Is(err, policy.ErrInvalid):
		return http.StatusBadRequest, "invalid_policy", true
	case errors.Is(err, policy.ErrNewerFormat):
		return http.StatusConflict, "newer_format", true
	case errors.Is(err, cluster.ErrConflict):
		return http.StatusConflict, "conflict", true
	}
	return 0, "", false
}

// InstallPolicy installs text as the cluster's policy, with a note for
// the history. An invalid policy is an *Error of status 400 whose message
// lists every problem with its line and column.
func (c *Client) InstallPolicy(ctx context.Context, text, comment string) (cluster.PolicyVersion, error) {
	var v cluster.PolicyVersion
	return v, c.do(ctx, http.MethodPost, APIVersion+"/policy", InstallPolicyRequest{Text: text, Comment: comment}, &v)
}

// Policy returns the installed policy of version v (0: the current one).
func (c *Client) Policy(ctx context.Context, v uint64) (cluster.InstalledPolicy, error) {
	var p cluster.InstalledPolicy
	q := ""
	if v > 0 {
		q = "?" + url.Values{"version": {strconv.FormatUint(v, 10)}}.Encode()
	}
	return p, c.do(ctx, http.MethodGet, APIVersion+"/policy"+q, nil, &p)
}

// PolicyHistory lists every installed version, oldest first.
func (c *Client) PolicyHistory(ctx context.Context) ([]cluster.PolicyVersion, error) {
	var v []cluster.PolicyVersion
	return v, c.do(ctx, http.MethodGet, APIVersion+"/policy/history", nil, &v)
}

// TestPolicy runs a dry run of req on the cluster (see PolicyTestRequest)
// with the default budget: the node scans for 20 s at most.
func (c *Client) TestPolicy(ctx context.Context, req PolicyTestRequest) (PolicyTestReport, error) {
	return c.TestPolicyWithin(ctx, req, 0)
}

// TestPolicyWithin is TestPolicy with the scan's time budget: the node
// scans for at most budget (0: the default 20 s) and then answers with
// what it has, and the client waits that long plus what the node takes to
// read the policy and the pools, past its usual 30 s if need be. A budget
// below 0 or over MaxDryRunBudget is refused with an *Error of status 400
// (an older node, which takes no budget, refuses any with a 400 too).
func (c *Client) TestPolicyWithin(ctx context.Context, req PolicyTestRequest, budget time.Duration) (PolicyTestReport, error) {
	var v PolicyTestReport
	body := policyTestBody{PolicyTestRequest: req, TimeoutSeconds: budget.Seconds()}
	return v, c.waiting(budget+requestTimeout).do(ctx, http.MethodPost, APIVersion+"/policy/test", body, &v)
}

// waiting returns c, or a copy of c whose requests may take d when that is
// longer than c's own timeout.
func (c *Client) waiting(d time.Duration) *Client {
	if d <= c.http.Timeout {
		return c
	}
	hc := *c.http
	hc.Timeout = d
	cc := *c
	cc.http = &hc
	return &cc
}
