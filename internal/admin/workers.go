package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/runner"
)

// WorkerLister reports a process's background workers; runner.Runner
// implements it.
type WorkerLister interface {
	Status() []runner.WorkerStatus
}

var _ WorkerLister = (*runner.Runner)(nil)

// Workers is one process's background workers: the answer of GET
// /v1/node/workers and GET /v1/nodes/{name}/workers (Node set), and of a
// mount's /workers on its --metrics address (Mount set: its mount point).
type Workers struct {
	Node    string                `json:"node,omitempty"`
	Mount   string                `json:"mount,omitempty"`
	Workers []runner.WorkerStatus `json:"workers"`
}

// nodeWorkers serves GET /v1/node/workers: this node's workers.
func (h *handler) nodeWorkers(w http.ResponseWriter, r *http.Request) {
	if h.workers == nil {
		writeError(w, http.StatusServiceUnavailable, "unavailable", fmt.Sprintf("node %s does not report its workers", h.node.Name))
		return
	}
	writeJSON(w, http.StatusOK, Workers{Node: h.node.Name, Workers: h.workers.Status()})
}

// namedNodeWorkers serves GET /v1/nodes/{name}/workers: that node's
// workers, asked through its own admin API unless it is this node.
func (h *handler) namedNodeWorkers(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == h.node.Name {
		h.nodeWorkers(w, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	n, err := h.upNode(ctx, name, "it runs no workers; start it to see them")
	if err != nil {
		h.reply(w, r, nil, err)
		return
	}
	var v Workers
	switch err := NewClient(n.AdminAddr, h.peer...).do(ctx, http.MethodGet, APIVersion+"/node/workers", nil, &v); {
	case err != nil:
		relayError(w, n, err)
	case v.Node != n.Name:
		writeError(w, http.StatusBadGateway, "unreachable", fmt.Sprintf("node %s's admin address %s is answered by node %q; its record is stale: restart node %s", n.Name, n.AdminAddr, v.Node, n.Name))
	default:
		writeJSON(w, http.StatusOK, v)
	}
}

// upNode returns node name if it is up: an error wrapping
// cluster.ErrNotFound if the cluster has no such node, ErrNodeDown (with
// why, what the caller cannot do) if it is down.
func (h *handler) upNode(ctx context.Context, name, why string) (cluster.Node, error) {
	nodes, err := h.store.ListNodes(ctx)
	if err != nil {
		return cluster.Node{}, err
	}
	for _, n := range nodes {
		if n.Name != name {
			continue
		}
		if n.State != cluster.Up {
			return n, fmt.Errorf("%w: node %s is %s: %s", ErrNodeDown, n.Name, n.State, why)
		}
		return n, nil
	}
	return cluster.Node{}, fmt.Errorf("%w: no node %q in the cluster (see weft node list)", cluster.ErrNotFound, name)
}

// relayError answers a request relayed to node n's own admin API that
// failed with err: n's own error answer as it is, else 502.
func relayError(w http.ResponseWriter, n cluster.Node, err error) {
	var ae *Error
	if errors.As(err, &ae) {
		writeError(w, ae.Status, ae.Code, ae.Msg)
		return
	}
	writeError(w, http.StatusBadGateway, "unreachable", fmt.Sprintf("node %s is up but its admin API at %s did not answer: %v; try again, or run the command against that node (--admin %s)",
		n.Name, n.AdminAddr, err, n.AdminAddr))
}

// NodeWorkers returns the background workers of node name (any node
// routes the request), or of the node serving the API if name is "".
func (c *Client) NodeWorkers(ctx context.Context, name string) (Workers, error) {
	path := APIVersion + "/node/workers"
	if name != "" {
		path = fmt.Sprintf("%s/nodes/%s/workers", APIVersion, url.PathEscape(name))
	}
	var v Workers
	return v, c.do(ctx, http.MethodGet, path, nil, &v)
}

// MountWorkers returns the background workers of the mount whose
// --metrics address the Client was made with (its /workers). Its errors
// say the address does not answer, or is not a mount's.
func (c *Client) MountWorkers(ctx context.Context) (Workers, error) {
	var v Workers
	base := c.Base()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/workers", nil)
	if err != nil {
		return v, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return v, fmt.Errorf("admin: nothing answers at %s (%w): is the mount running with --metrics at that address?", base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if err == nil {
		err = json.Unmarshal(b, &v)
	}
	if err == nil && v.Mount == "" {
		err = errors.New("the answer names no mount")
	}
	if err != nil {
		return Workers{}, fmt.Errorf("admin: %s/workers: %w; is %s a mount's --metrics address? (a node's workers: weft node workers)", base, err, base)
	}
	return v, nil
}
