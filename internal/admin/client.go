package admin

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/impact"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/pki"
)

// ErrNoCluster is returned by Discover when no admin address is configured.
var ErrNoCluster = errors.New("admin: no cluster found")

// Error is an error answer of the API.
type Error struct {
	Status int
	Code   string
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// Client calls the admin API of one of several nodes: it uses the first
// that answers, so that the CLI keeps working while a node is down.
type Client struct {
	bases []string
	http  *http.Client
	tls   *tls.Config
	token string
}

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithTLS talks HTTPS with cfg: a pki.Source's ClientTLS (an admin's or a
// node's certificate, or none from pki.NewTrust with a token), which
// verifies the node against the cluster's CAs. Without it the client
// talks plain HTTP, to a node run with --insecure.
func WithTLS(cfg *tls.Config) ClientOption { return func(c *Client) { c.tls = cfg } }

// WithToken authenticates with a bearer token (weft token create).
func WithToken(token string) ClientOption { return func(c *Client) { c.token = token } }

// NewClient returns a client for the API at addrs: a comma-separated list
// of "host:port" or URLs, tried in order. A host:port is reached over
// https with WithTLS, http otherwise.
func NewClient(addrs string, opts ...ClientOption) *Client {
	c := &Client{}
	for _, o := range opts {
		o(c)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = c.tls
	c.http = &http.Client{Timeout: 30 * time.Second, Transport: tr}
	scheme := "http://"
	if c.tls != nil {
		scheme = "https://"
	}
	for _, a := range strings.FieldsFunc(addrs, func(r rune) bool { return r == ',' || r == '\n' || r == ' ' }) {
		if !strings.Contains(a, "://") {
			a = scheme + a
		}
		c.bases = append(c.bases, strings.TrimRight(a, "/"))
	}
	return c
}

// HTTP returns the client's HTTP client, with its TLS configuration (for
// other paths of a node's admin address: /metrics). Requests made with it
// carry no token: add it with Authorize.
func (c *Client) HTTP() *http.Client { return c.http }

// Authorize adds the client's bearer token, if it has one, to req.
func (c *Client) Authorize(req *http.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}

// Base returns the base URL tried first.
func (c *Client) Base() string {
	if len(c.bases) == 0 {
		return ""
	}
	return c.bases[0]
}

// Discover finds the admin addresses: flag (if non-empty), then
// $WEFT_ADMIN, then what `weft local up` wrote in ./weft-data (every node's
// address in admin.addrs, else admin.addr). It says where it looked when it
// finds nothing.
func Discover(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := os.Getenv("WEFT_ADMIN"); env != "" {
		return env, nil
	}
	for _, name := range []string{"admin.addrs", "admin.addr"} {
		p := filepath.Join("weft-data", name)
		if b, err := os.ReadFile(p); err == nil && len(bytes.TrimSpace(b)) > 0 {
			return strings.Join(strings.Fields(string(b)), ","), nil
		}
	}
	return "", fmt.Errorf("%w: pass --admin HOST:PORT, set WEFT_ADMIN, or run from the directory where `weft local up` created weft-data/ (no weft-data/admin.addr here)", ErrNoCluster)
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.ReadSeeker
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	if len(c.bases) == 0 {
		return fmt.Errorf("%w: empty admin address", ErrNoCluster)
	}
	var resp *http.Response
	var errs []string
	for _, base := range c.bases {
		if rd != nil {
			rd.(*bytes.Reader).Seek(0, io.SeekStart)
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
		if err != nil {
			return err
		}
		if method != http.MethodGet && method != http.MethodHead {
			req.Header.Set("Content-Type", "application/json") // the API requires it of every change
		}
		c.Authorize(req)
		if resp, err = c.http.Do(req); err == nil {
			break
		}
		if ctx.Err() != nil {
			return fmt.Errorf("admin: %s %s: %w", method, path, ctx.Err())
		}
		errs = append(errs, pki.Explain(err).Error())
	}
	if resp == nil {
		return fmt.Errorf("admin: cannot reach the admin API (%s): is the cluster running? (see weft local up)", strings.Join(errs, "; "))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("admin: read answer of %s %s: %w", method, path, err)
	}
	if resp.StatusCode == http.StatusBadRequest && bytes.Contains(b, []byte("HTTP request to an HTTPS server")) {
		return &Error{Status: resp.StatusCode, Code: "https", Msg: fmt.Sprintf("admin: %s serves HTTPS: point weft at the cluster's certificates (--pki DIR, $WEFT_PKI, or weft-data/pki where weft local up made them)", resp.Request.URL.Host)}
	}
	if resp.StatusCode >= 300 {
		var eb ErrorBody
		if json.Unmarshal(b, &eb) != nil || eb.Error == "" {
			eb.Error = fmt.Sprintf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
		}
		return &Error{Status: resp.StatusCode, Code: eb.Code, Msg: eb.Error}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("admin: decode answer of %s %s: %w", method, path, err)
	}
	return nil
}

// Node returns the serving node's identity.
func (c *Client) Node(ctx context.Context) (NodeInfo, error) {
	var n NodeInfo
	return n, c.do(ctx, http.MethodGet, APIVersion+"/node", nil, &n)
}

// Status returns the cluster summary and the job engine's mode.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var s Status
	return s, c.do(ctx, http.MethodGet, APIVersion+"/status", nil, &s)
}

// Nodes lists the nodes.
func (c *Client) Nodes(ctx context.Context) ([]cluster.Node, error) {
	var n []cluster.Node
	return n, c.do(ctx, http.MethodGet, APIVersion+"/nodes", nil, &n)
}

// Drives lists the drives.
func (c *Client) Drives(ctx context.Context) ([]cluster.Drive, error) {
	var d []cluster.Drive
	return d, c.do(ctx, http.MethodGet, APIVersion+"/drives", nil, &d)
}

// SetDriveStatus suspends (to == suspended) or resumes (ready) a drive.
func (c *Client) SetDriveStatus(ctx context.Context, id cluster.DriveID, to cluster.DriveStatus) (cluster.DriveRecord, error) {
	verb := map[cluster.DriveStatus]string{cluster.StatusSuspended: "suspend", cluster.StatusReady: "resume"}[to]
	if verb == "" {
		return cluster.DriveRecord{}, fmt.Errorf("admin: drive status %q cannot be set directly", to)
	}
	var d cluster.DriveRecord
	return d, c.do(ctx, http.MethodPost, fmt.Sprintf("%s/drives/%s/%s", APIVersion, id, verb), nil, &d)
}

// Pools lists the pools.
func (c *Client) Pools(ctx context.Context) ([]cluster.Pool, error) {
	var p []cluster.Pool
	return p, c.do(ctx, http.MethodGet, APIVersion+"/pools", nil, &p)
}

// CreatePool creates a pool.
func (c *Client) CreatePool(ctx context.Context, name, protection string) (cluster.PoolRecord, error) {
	var p cluster.PoolRecord
	return p, c.do(ctx, http.MethodPost, APIVersion+"/pools", CreatePoolRequest{Name: name, PoolSpec: cluster.PoolSpec{Protection: protection}}, &p)
}

// FileLayout returns the layout of file lin (weft file info).
func (c *Client) FileLayout(ctx context.Context, lin meta.LIN) (client.FileLayout, error) {
	var l client.FileLayout
	return l, c.do(ctx, http.MethodGet, fmt.Sprintf("%s/files/%d", APIVersion, lin), nil, &l)
}

// Jobs lists the jobs, running and ended.
func (c *Client) Jobs(ctx context.Context) ([]job.JobView, error) {
	var v []job.JobView
	return v, c.do(ctx, http.MethodGet, APIVersion+"/jobs", nil, &v)
}

// StartJob queues a job and returns its id.
func (c *Client) StartJob(ctx context.Context, req StartJobRequest) (job.JobID, error) {
	var r StartJobReply
	return r.ID, c.do(ctx, http.MethodPost, APIVersion+"/jobs", req, &r)
}

// Job returns one job.
func (c *Client) Job(ctx context.Context, id job.JobID) (job.JobView, error) {
	var v job.JobView
	return v, c.do(ctx, http.MethodGet, fmt.Sprintf("%s/jobs/%d", APIVersion, id), nil, &v)
}

// JobAction pauses, resumes or cancels a job.
func (c *Client) JobAction(ctx context.Context, id job.JobID, verb string) (job.JobView, error) {
	var v job.JobView
	return v, c.do(ctx, http.MethodPost, fmt.Sprintf("%s/jobs/%d/%s", APIVersion, id, verb), nil, &v)
}

// ModifyJob changes a job's priority and/or policy.
func (c *Client) ModifyJob(ctx context.Context, id job.JobID, req ModifyJobRequest) (job.JobView, error) {
	var v job.JobView
	return v, c.do(ctx, http.MethodPost, fmt.Sprintf("%s/jobs/%d/modify", APIVersion, id), req, &v)
}

// JobTypes lists the job types with their settings.
func (c *Client) JobTypes(ctx context.Context) ([]job.TypeView, error) {
	var v []job.TypeView
	return v, c.do(ctx, http.MethodGet, APIVersion+"/job-types", nil, &v)
}

// ModifyJobType sets a job type's settings (all of them: read them with
// JobTypes first) and returns every type.
func (c *Client) ModifyJobType(ctx context.Context, name string, ts job.TypeSettings) ([]job.TypeView, error) {
	var v []job.TypeView
	return v, c.do(ctx, http.MethodPost, APIVersion+"/job-types/"+name, ts, &v)
}

// JobStatus returns the engine's status and the node's throttle.
func (c *Client) JobStatus(ctx context.Context) (JobStatus, error) {
	var v JobStatus
	return v, c.do(ctx, http.MethodGet, APIVersion+"/job-status", nil, &v)
}

// Policies lists the impact policies, built-in then custom.
func (c *Client) Policies(ctx context.Context) ([]impact.Policy, error) {
	var v []impact.Policy
	return v, c.do(ctx, http.MethodGet, APIVersion+"/job-policies", nil, &v)
}

// PutPolicy creates (update false) or modifies a custom impact policy.
func (c *Client) PutPolicy(ctx context.Context, req PolicyRequest, update bool) (impact.Policy, error) {
	var v impact.Policy
	if update {
		return v, c.do(ctx, http.MethodPut, APIVersion+"/job-policies/"+req.Name, req, &v)
	}
	return v, c.do(ctx, http.MethodPost, APIVersion+"/job-policies", req, &v)
}

// RemoveDrive suspends a drive and starts draining it.
func (c *Client) RemoveDrive(ctx context.Context, id cluster.DriveID) (RemoveDriveReply, error) {
	var v RemoveDriveReply
	return v, c.do(ctx, http.MethodPost, fmt.Sprintf("%s/drives/%s/remove", APIVersion, id), nil, &v)
}

// JobSettings returns the job engine's cluster-wide settings.
func (c *Client) JobSettings(ctx context.Context) (job.Settings, error) {
	var v job.Settings
	return v, c.do(ctx, http.MethodGet, APIVersion+"/job-settings", nil, &v)
}

// JobEvents returns the newest limit events of the job engine's event log
// (0: DefaultEventLimit), oldest first.
func (c *Client) JobEvents(ctx context.Context, limit int) ([]job.Event, error) {
	var v []job.Event
	path := APIVersion + "/job-events"
	if limit != 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	return v, c.do(ctx, http.MethodGet, path, nil, &v)
}

// JobEvent returns event id of the job engine's event log, with its
// callbacks' runs; an id no longer in the log is an *Error with status
// 404.
func (c *Client) JobEvent(ctx context.Context, id uint64) (job.Event, error) {
	var v job.Event
	return v, c.do(ctx, http.MethodGet, fmt.Sprintf("%s/job-events/%d", APIVersion, id), nil, &v)
}

// SetJobSettings replaces the job engine's cluster-wide settings.
func (c *Client) SetJobSettings(ctx context.Context, st job.Settings) (job.Settings, error) {
	var v job.Settings
	return v, c.do(ctx, http.MethodPost, APIVersion+"/job-settings", st, &v)
}
