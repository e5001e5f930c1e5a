package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/weftfs/weft/internal/admin"
)

// Control talks to a running supervisor through the unix socket
// DIR/local.addr names (see control_socket.go).
type Control struct {
	dir  string
	addr string // the socket's path
	http *http.Client
}

// Dial finds the supervisor of the cluster in dir. Only the user who runs
// it (and root) may connect.
func Dial(dir string) (*Control, error) {
	b, err := os.ReadFile(filepath.Join(dir, ControlFile))
	if err != nil {
		return nil, fmt.Errorf("local: no running `weft local up` for %s (%v); start one first", dir, err)
	}
	path := strings.TrimSpace(string(b))
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	return &Control{dir: dir, addr: path, http: &http.Client{Timeout: 60 * time.Second, Transport: tr}}, nil
}

func (c *Control) call(ctx context.Context, method, path string, out any) error {
	return c.callBody(ctx, method, path, nil, out)
}

func (c *Control) callBody(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://local"+path, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("local: the supervisor of %s does not answer at %s: %w (only the user who ran weft local up, or root, may use it)", c.dir, c.addr, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		var eb admin.ErrorBody
		if json.Unmarshal(b, &eb) == nil && eb.Error != "" {
			return fmt.Errorf("%s", eb.Error)
		}
		return fmt.Errorf("local: %s %s: HTTP %d: %s", method, path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// Nodes lists the supervised nodes.
func (c *Control) Nodes(ctx context.Context) ([]NodeState, error) {
	var n []NodeState
	return n, c.call(ctx, http.MethodGet, "/nodes", &n)
}

// Start starts a stopped node. It returns once the process is launched,
// not when the node is up.
func (c *Control) Start(ctx context.Context, name string) error {
	return c.StartEnv(ctx, name)
}

// StartRequest is the optional body of the control API's start route.
type StartRequest struct {
	// Env holds KEY=VALUE entries added to the node's environment for
	// this run only.
	Env []string `json:"env,omitempty"`
}

// StartEnv is Start with env ("KEY=VALUE" entries) added to the node
// process's environment for this run only — WEFT_FAILPOINTS to make it
// fail at a point, say. A later Start runs the node without them. An
// entry that is not KEY=VALUE is refused.
func (c *Control) StartEnv(ctx context.Context, name string, env ...string) error {
	var in any
	if len(env) > 0 {
		in = StartRequest{Env: env}
	}
	return c.callBody(ctx, http.MethodPost, "/nodes/"+name+"/start", in, nil)
}

// Stop stops a node gracefully and waits for its process to exit.
func (c *Control) Stop(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodPost, "/nodes/"+name+"/stop", nil)
}

// Kill kills a node (SIGKILL, as a crash would) and waits for it to exit.
func (c *Control) Kill(ctx context.Context, name string) error {
	return c.call(ctx, http.MethodPost, "/nodes/"+name+"/kill", nil)
}

// Down asks the supervisor of dir to stop the cluster (SIGTERM) and waits
// up to timeout for it to exit.
func Down(dir string, timeout time.Duration) error {
	b, err := os.ReadFile(filepath.Join(dir, PIDFile))
	if err != nil {
		return fmt.Errorf("local: no running `weft local up` for %s", dir)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("local: bad %s: %q", PIDFile, b)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("local: signal supervisor pid %d: %w", pid, err)
	}
	deadline := time.Now().Add(timeout)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			return fmt.Errorf("local: supervisor pid %d still running after %s", pid, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}
