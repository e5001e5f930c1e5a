package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/weftfs/weft/internal/cluster"
)

// Errors of drive add, in addition to the drive package's refusals.
var (
	// ErrRefused: the node refuses the request as it stands (the text says
	// why and what to do).
	ErrRefused = errors.New("admin: refused")
	// ErrNodeDown: the request names a node that is down.
	ErrNodeDown = errors.New("admin: node down")
)

// AddDriveRequest is the body of POST /v1/drives and POST /v1/node/drives:
// open directory Path on node Node as a new drive. Class "" means ssd, Pool
// "" the default pool, Capacity 0 the whole file system (bytes otherwise).
type AddDriveRequest struct {
	Node     string `json:"node"`
	Path     string `json:"path"`
	Class    string `json:"class,omitempty"`
	Pool     string `json:"pool,omitempty"`
	Capacity int64  `json:"capacity,omitempty"`
}

// AddDriveReply is the answer of a drive add: the drive's control-plane
// record and the capacity it was opened with (0: the whole file system).
type AddDriveReply struct {
	Drive    cluster.DriveRecord `json:"drive"`
	Capacity int64               `json:"capacity"`
}

// DriveAdder opens drives on the node serving the API at run time; the
// server implements it.
type DriveAdder interface {
	// AddDrive opens req.Path as a new drive of this node, registers it,
	// serves it and remembers it across restarts. It refuses (errors
	// wrapping drive's ErrOtherCluster, ErrOtherNode, ErrNotEmpty,
	// ErrLocked, ErrNewerFormat, ErrBadIdentity, ErrInvalid, or ErrRefused)
	// with the path and the reason.
	AddDrive(ctx context.Context, req AddDriveRequest) (AddDriveReply, error)
}

// addDriveTimeout bounds a drive add: opening a drive scans its blocks.
const addDriveTimeout = time.Minute

// addDrive serves POST /v1/drives: the node named in the request adds the
// drive, through its own admin API unless it is this node.
func (h *handler) addDrive(w http.ResponseWriter, r *http.Request) {
	var req AddDriveRequest
	if err := decodeBody(r, &req); err != nil {
		h.reply(w, r, nil, err)
		return
	}
	if req.Node == "" {
		writeError(w, http.StatusBadRequest, "invalid", "drive add: no node named; say on which node the directory is (see weft node list)")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), addDriveTimeout)
	defer cancel()
	if req.Node == h.node.Name {
		v, err := h.addLocal(ctx, req)
		h.reply(w, r, v, err)
		return
	}
	n, err := h.upNode(ctx, req.Node, "start it, then add the drive")
	if err != nil {
		h.reply(w, r, nil, err)
		return
	}
	var v AddDriveReply
	if err := NewClient(n.AdminAddr, h.peer...).do(ctx, http.MethodPost, APIVersion+"/node/drives", req, &v); err != nil {
		relayError(w, n, err)
		return
	}
	writeJSON(w, http.StatusCreated, v)
}

// addNodeDrive serves POST /v1/node/drives: this node adds the drive. The
// request must name this node, so that a request sent to a stale address
// never adds a drive to the wrong node.
func (h *handler) addNodeDrive(w http.ResponseWriter, r *http.Request) {
	var req AddDriveRequest
	if err := decodeBody(r, &req); err != nil {
		h.reply(w, r, nil, err)
		return
	}
	if req.Node != h.node.Name {
		writeError(w, http.StatusConflict, "refused", fmt.Sprintf("drive add for node %q reached node %q; send it to /v1/drives of any node, which routes it", req.Node, h.node.Name))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), addDriveTimeout)
	defer cancel()
	v, err := h.addLocal(ctx, req)
	h.reply(w, r, v, err)
}

func (h *handler) addLocal(ctx context.Context, req AddDriveRequest) (any, error) {
	if h.adder == nil {
		return nil, fmt.Errorf("%w: node %s cannot add drives at run time", ErrRefused, h.node.Name)
	}
	v, err := h.adder.AddDrive(ctx, req)
	if err != nil {
		return nil, err
	}
	h.log.Info("drive added", "drive", v.Drive.ID, "path", v.Drive.Path, "pool", v.Drive.Pool, "capacity", v.Capacity)
	return created{v}, nil
}

// created marks a reply to send with 201 Created.
type created struct{ v any }

// AddDrive asks the cluster to open directory req.Path on node req.Node as
// a new drive; any node routes the request to req.Node.
func (c *Client) AddDrive(ctx context.Context, req AddDriveRequest) (AddDriveReply, error) {
	var v AddDriveReply
	return v, c.do(ctx, http.MethodPost, APIVersion+"/drives", req, &v)
}
