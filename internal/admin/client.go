package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/weftfs/weft/internal/cluster"
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

// Client calls a node's admin API.
type Client struct {
	base string
	http *http.Client
}

// NewClient returns a client for the API at addr ("host:port" or a URL).
func NewClient(addr string) *Client {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return &Client{base: strings.TrimRight(addr, "/"), http: &http.Client{Timeout: 30 * time.Second}}
}

// Base returns the API's base URL.
func (c *Client) Base() string { return c.base }

// Discover finds the admin address: flag (if non-empty), then $WEFT_ADMIN,
// then ./weft-data/admin.addr (what `weft local up` writes). It says where
// it looked when it finds nothing.
func Discover(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := os.Getenv("WEFT_ADMIN"); env != "" {
		return env, nil
	}
	p := filepath.Join("weft-data", "admin.addr")
	if b, err := os.ReadFile(p); err == nil && len(bytes.TrimSpace(b)) > 0 {
		return string(bytes.TrimSpace(b)), nil
	}
	return "", fmt.Errorf("%w: pass --admin HOST:PORT, set WEFT_ADMIN, or run from the directory where `weft local up` created weft-data/ (no %s here)", ErrNoCluster, p)
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("admin: cannot reach the admin API at %s: %w (is the cluster running? see weft local up)", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("admin: read answer of %s %s: %w", method, path, err)
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

// Status returns the cluster summary.
func (c *Client) Status(ctx context.Context) (cluster.Status, error) {
	var s cluster.Status
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
	return p, c.do(ctx, http.MethodPost, APIVersion+"/pools", CreatePoolRequest{Name: name, Protection: protection}, &p)
}
