package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/weftfs/weft/internal/cluster"
)

// NFSNode is a node's NFS gateway as the admin API reports it; the server
// implements it.
type NFSNode interface {
	// NFSStatus returns the gateway's addresses, clients and operations.
	NFSStatus() NFSNodeStatus
}

// NFSNodeStatus is GET /v1/node/nfs: one node's NFS gateway. Gateway is
// false on a node that runs none (weft server without --nfs); the rest is
// then empty.
type NFSNodeStatus struct {
	Node    string `json:"node"`
	Gateway bool   `json:"gateway"`
	// Listeners are the addresses the gateway serves (host:port, as
	// bound), sorted.
	Listeners []string `json:"listeners"`
	// ExportsVersion is the version of the exports configuration the
	// gateway applies (0: none configured, "/" exported).
	ExportsVersion uint64 `json:"exports_version"`
	// Clients are the clients seen, most recent first.
	Clients []NFSClient `json:"clients"`
	// Ops are the procedures answered since the gateway started, by name.
	Ops []NFSOp `json:"ops"`
	// RefusedConns counts the client connections the gateway closed at
	// once because an address held its maximum of connections.
	RefusedConns uint64 `json:"refused_connections"`
}

// NFSClient is one client of a gateway.
type NFSClient struct {
	Addr     string    `json:"addr"`
	Listener string    `json:"listener"`
	Ops      uint64    `json:"ops"`
	LastSeen time.Time `json:"last_seen"`
}

// NFSOp is one procedure's activity on a gateway: its totals since the
// start and its rate over the last few seconds (PerSecond, counted by the
// node once a second over up to NFSRateWindow).
type NFSOp struct {
	Procedure string  `json:"procedure"`
	Count     uint64  `json:"count"`
	Errors    uint64  `json:"errors"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
}

// NFSRateWindow is the time over which a node's NFSOp.PerSecond is
// measured.
const NFSRateWindow = 10 * time.Second

// NFSStatus is GET /v1/nfs/status: the gateway of every node that is up
// and answered, by node name; Errors names the others.
type NFSStatus struct {
	Nodes []NFSNodeStatus `json:"nodes"`
	// Addresses are the service addresses held, as the control plane
	// has them (an address no node holds is absent).
	Addresses []NFSAddress `json:"addresses"`
	Errors    []string     `json:"errors,omitempty"`
}

// NFSAddress is one NFS service address (weft server --nfs-address) and
// the node holding it: since when, and the holding's epoch (the etcd
// revision it was taken at; every move raises it, and the gateway's
// write verifier with it).
type NFSAddress struct {
	Addr  string    `json:"addr"`
	Node  string    `json:"node"`
	Since time.Time `json:"since"`
	Epoch int64     `json:"epoch"`
}

// NFSExportList is GET /v1/nfs/exports, and the answer of a change: the
// configured exports (Version 0: never configured), and Effective, what
// the gateways serve — the configured exports, or "/" with the defaults
// (Default true) while there are none.
type NFSExportList struct {
	cluster.NFSExports
	Default   bool                `json:"default"`
	Effective []cluster.NFSExport `json:"effective"`
}

func exportList(x cluster.NFSExports) NFSExportList {
	return NFSExportList{NFSExports: x, Default: len(x.Exports) == 0, Effective: x.Effective()}
}

// nfsRoutes registers the NFS routes:
//
//	GET    /v1/nfs/exports          NFSExportList
//	POST   /v1/nfs/exports          cluster.NFSExport → NFSExportList (201; 409 if its path is exported)
//	DELETE /v1/nfs/exports?path=P   NFSExportList (404 if P is not exported)
//	GET    /v1/nfs/status           NFSStatus of every node that is up
//	GET    /v1/node/nfs             NFSNodeStatus of this node
//
// A bad export is a 400 naming the field at fault. The status asks every
// node that is up through its admin API, each within nodeAskTimeout.
func (h *handler) nfsRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+APIVersion+"/nfs/exports", h.get(func(ctx context.Context) (any, error) {
		x, _, err := h.store.NFSExports(ctx)
		return exportList(x), err
	}))
	mux.HandleFunc("POST "+APIVersion+"/nfs/exports", h.withBody(func(ctx context.Context, r *http.Request) (any, error) {
		var e cluster.NFSExport
		if err := decodeBody(r, &e); err != nil {
			return nil, err
		}
		if err := e.Validate(); err != nil {
			return nil, err
		}
		by := PrincipalOf(r.Context()).String()
		x, err := h.store.UpdateNFSExports(ctx, by, func(cur cluster.NFSExports) ([]cluster.NFSExport, error) {
			if slices.ContainsFunc(cur.Exports, func(o cluster.NFSExport) bool { return o.Path == e.Path }) {
				return nil, fmt.Errorf("%w: %s is exported already: remove it first (weft nfs export remove %s), then add it with the new options", cluster.ErrExists, e.Path, e.Path)
			}
			return append(cur.Exports, e), nil
		})
		if err != nil {
			return nil, err
		}
		h.log.Info("NFS export added", "path", e.Path, "clients", e.Clients, "read_only", e.ReadOnly, "no_root_squash", e.NoRootSquash, "version", x.Version, "by", by)
		return created{exportList(x)}, nil
	}))
	mux.HandleFunc("DELETE "+APIVersion+"/nfs/exports", h.withBody(func(ctx context.Context, r *http.Request) (any, error) {
		p := r.URL.Query().Get("path")
		if p == "" {
			return nil, fmt.Errorf("%w: path: missing: say which export to remove (?path=/projects)", cluster.ErrInvalid)
		}
		if err := (cluster.NFSExport{Path: p}).Validate(); err != nil {
			return nil, err
		}
		by := PrincipalOf(r.Context()).String()
		x, err := h.store.UpdateNFSExports(ctx, by, func(cur cluster.NFSExports) ([]cluster.NFSExport, error) {
			i := slices.IndexFunc(cur.Exports, func(o cluster.NFSExport) bool { return o.Path == p })
			if i < 0 {
				return nil, fmt.Errorf("%w: %s is not exported (see weft nfs export list)", cluster.ErrNotFound, p)
			}
			return slices.Delete(slices.Clone(cur.Exports), i, i+1), nil
		})
		if err != nil {
			return nil, err
		}
		h.log.Info("NFS export removed", "path", p, "version", x.Version, "by", by)
		return exportList(x), nil
	}))
	mux.HandleFunc("GET "+APIVersion+"/nfs/status", h.get(func(ctx context.Context) (any, error) {
		nodes, errs, err := askNodes(ctx, h, APIVersion+"/node/nfs", h.ownNFS, func(s NFSNodeStatus) string { return s.Node })
		if nodes == nil {
			nodes = []NFSNodeStatus{}
		}
		if err != nil {
			return nil, err
		}
		addrs := []NFSAddress{}
		if h.nfsAddrs != nil {
			a, aerr := h.nfsAddrs(ctx)
			if aerr != nil {
				errs = append(errs, fmt.Sprintf("service addresses: %v", aerr))
			} else if a != nil {
				addrs = a
			}
		}
		return NFSStatus{Nodes: nodes, Addresses: addrs, Errors: errs}, nil
	}))
	mux.HandleFunc("GET "+APIVersion+"/node/nfs", h.get(func(context.Context) (any, error) { return h.ownNFS() }))
}

// ownNFS is this node's NFSNodeStatus.
func (h *handler) ownNFS() (NFSNodeStatus, error) {
	if h.nfs == nil {
		return NFSNodeStatus{Node: h.node.Name, Listeners: []string{}, Clients: []NFSClient{}, Ops: []NFSOp{}}, nil
	}
	st := h.nfs.NFSStatus()
	st.Node = h.node.Name
	return st, nil
}

// NFSExports returns the exports configuration.
func (c *Client) NFSExports(ctx context.Context) (NFSExportList, error) {
	var v NFSExportList
	return v, c.do(ctx, http.MethodGet, APIVersion+"/nfs/exports", nil, &v)
}

// AddNFSExport adds export e. A bad field is an *Error of status 400
// naming it; a path exported already, of status 409.
func (c *Client) AddNFSExport(ctx context.Context, e cluster.NFSExport) (NFSExportList, error) {
	var v NFSExportList
	return v, c.do(ctx, http.MethodPost, APIVersion+"/nfs/exports", e, &v)
}

// RemoveNFSExport removes the export of path p (an *Error of status 404
// if there is none).
func (c *Client) RemoveNFSExport(ctx context.Context, p string) (NFSExportList, error) {
	var v NFSExportList
	return v, c.do(ctx, http.MethodDelete, APIVersion+"/nfs/exports?"+url.Values{"path": {p}}.Encode(), nil, &v)
}

// NFSStatus returns the NFS gateway of every node that is up.
func (c *Client) NFSStatus(ctx context.Context) (NFSStatus, error) {
	var v NFSStatus
	return v, c.do(ctx, http.MethodGet, APIVersion+"/nfs/status", nil, &v)
}
