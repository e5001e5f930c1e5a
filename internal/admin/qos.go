package admin

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/weftfs/weft/internal/qos"
)

// QoSNode is a node's QoS state as the admin API reports it; the server
// implements it.
type QoSNode interface {
	// QoSSamples returns the node's per-second statistics of the last
	// seconds seconds (at most qos.StatsSeconds).
	QoSSamples(seconds int) []qos.Sample
	// QoSLimits returns the node's shares of the limits, by pool and
	// class.
	QoSLimits() map[qos.Key]qos.Limit
	// QoSFine returns the node's fine statistics of the last seconds
	// seconds (at most qos.StatsSeconds) and how many of their I/Os were
	// counted under an Other key (qos.Stats.FineSeconds).
	QoSFine(seconds int) (samples []qos.FineSample, overflow int64)
}

// QoSChange is the body of PUT /v1/qos: Enable switches enforcement on or
// off (absent: unchanged); Set are limit specifications as qos.Parse
// reads them, merged into the configuration (Replace: replacing all its
// limits). At least one of Enable and Set.
type QoSChange struct {
	Enable  *bool    `json:"enable,omitempty"`
	Set     []string `json:"set,omitempty"`
	Replace bool     `json:"replace,omitempty"`
}

// QoSShare is one limit a node holds: its share of the cluster-wide limit
// of a pool and class (0: that axis is not limited).
type QoSShare struct {
	Pool        string    `json:"pool"`
	Class       qos.Class `json:"class"`
	IOPS        float64   `json:"iops,omitempty"`
	BytesPerSec float64   `json:"bytes_per_sec,omitempty"`
}

// QoSNodeState is GET /v1/node/qos: one node's shares and its statistics
// of the last Seconds seconds; with ?fine=1 also its fine statistics
// (Fine; absent from a node of a version that keeps none).
type QoSNodeState struct {
	Node    string       `json:"node"`
	Shares  []QoSShare   `json:"shares"`
	Samples []qos.Sample `json:"samples,omitempty"`
	Fine    *QoSFine     `json:"fine,omitempty"`
}

// QoSFine is a node's fine statistics: its samples, and how many of
// their I/Os were counted under an Other key, past qos.MaxFineKeys keys
// in a second.
type QoSFine struct {
	Samples  []qos.FineSample `json:"samples"`
	Overflow int64            `json:"overflow,omitempty"`
}

// QoSFineStats is GET /v1/qos/stats/fine: the I/O of each node that
// answered (Nodes) per FineKey in intervals of Interval seconds over the
// Seconds complete seconds before the request (From to To, Unix
// seconds); Overflow counts, by node, the I/Os summed under an Other key
// because a second had qos.MaxFineKeys keys already. Errors names the
// nodes that did not answer (or keep no fine statistics).
type QoSFineStats struct {
	Seconds  int              `json:"seconds"`
	Interval int              `json:"interval"`
	From     int64            `json:"from"`
	To       int64            `json:"to"`
	Nodes    []string         `json:"nodes"`
	Rows     []qos.FineRow    `json:"rows"`
	Overflow map[string]int64 `json:"overflow,omitempty"`
	Errors   []string         `json:"errors,omitempty"`
}

// QoSShow is GET /v1/qos: the configuration (Specs as the administrator
// writes it) and each node's shares (Errors: the nodes that did not
// answer, and why).
type QoSShow struct {
	Config qos.Config     `json:"config"`
	Specs  []string       `json:"specs"`
	Nodes  []QoSNodeState `json:"nodes"`
	Errors []string       `json:"errors,omitempty"`
}

// QoSStats is GET /v1/qos/stats: the I/O of the cluster's nodes per pool
// and class in intervals of Interval seconds over the Seconds complete
// seconds before the request (From to To, Unix seconds), summed over the
// nodes that answered (Nodes); Errors names the others.
type QoSStats struct {
	Seconds  int       `json:"seconds"`
	Interval int       `json:"interval"`
	From     int64     `json:"from"`
	To       int64     `json:"to"`
	Nodes    []string  `json:"nodes"`
	Rows     []qos.Row `json:"rows"`
	Errors   []string  `json:"errors,omitempty"`
}

// qosRoutes registers the QoS routes:
//
//	GET /v1/qos          QoSShow
//	PUT /v1/qos          QoSChange → qos.Config (the new version)
//	GET /v1/qos/stats       QoSStats (?seconds=N, 1..60, default 10;
//	                        ?interval=K, 1..N, default 1)
//	GET /v1/qos/stats/fine  QoSFineStats (the same parameters)
//	GET /v1/node/qos        QoSNodeState of this node (?seconds=N, 0..60;
//	                        ?fine=1: with its fine statistics)
//
// A bad specification or parameter is a 400 naming it and the forms
// accepted. The cluster-wide routes ask every node that is up through
// its admin API.
func (h *handler) qosRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+APIVersion+"/qos", h.withBody(func(ctx context.Context, r *http.Request) (any, error) {
		c, _, err := h.store.QoS(ctx)
		if err != nil {
			return nil, err
		}
		show := QoSShow{Config: c, Specs: c.Specs()}
		show.Nodes, show.Errors, err = h.qosNodes(ctx, 0, false)
		if show.Specs == nil {
			show.Specs = []string{}
		}
		return show, err
	}))
	mux.HandleFunc("PUT "+APIVersion+"/qos", h.withBody(func(ctx context.Context, r *http.Request) (any, error) {
		var req QoSChange
		if err := decodeBody(r, &req); err != nil {
			return nil, err
		}
		if req.Enable == nil && len(req.Set) == 0 {
			return nil, fmt.Errorf("%w: a QoS change needs enable or set (weft qos enable|disable|set)", qos.ErrInvalid)
		}
		var set map[string]qos.PoolLimits
		if len(req.Set) > 0 {
			var err error
			if set, err = qos.Parse(req.Set); err != nil {
				return nil, err
			}
		}
		by := PrincipalOf(r.Context()).String()
		c, err := h.store.UpdateQoS(ctx, by, func(c qos.Config) (qos.Config, error) {
			if set != nil {
				c = c.Merge(set, req.Replace)
			}
			if req.Enable != nil {
				c.Enabled = *req.Enable
			}
			return c, nil
		})
		if err == nil {
			h.log.Info("QoS configuration changed", "version", c.Version, "enabled", c.Enabled, "limits", c.Specs(), "by", by)
		}
		return c, err
	}))
	mux.HandleFunc("GET "+APIVersion+"/qos/stats", h.withBody(func(ctx context.Context, r *http.Request) (any, error) {
		seconds, interval, err := statsParams(r)
		if err != nil {
			return nil, err
		}
		to := time.Now().Unix()
		from := to - int64(seconds)
		nodes, errs, err := h.qosNodes(ctx, seconds, false)
		if err != nil {
			return nil, err
		}
		var samples []qos.Sample
		st := QoSStats{Seconds: seconds, Interval: interval, From: from, To: to, Errors: errs, Nodes: []string{}}
		for _, n := range nodes {
			st.Nodes = append(st.Nodes, n.Node)
			samples = append(samples, n.Samples...)
		}
		st.Rows = qos.Rows(samples, from, to, interval)
		if st.Rows == nil {
			st.Rows = []qos.Row{}
		}
		return st, nil
	}))
	mux.HandleFunc("GET "+APIVersion+"/qos/stats/fine", h.withBody(func(ctx context.Context, r *http.Request) (any, error) {
		seconds, interval, err := statsParams(r)
		if err != nil {
			return nil, err
		}
		to := time.Now().Unix()
		from := to - int64(seconds)
		nodes, errs, err := h.qosNodes(ctx, seconds, true)
		if err != nil {
			return nil, err
		}
		st := QoSFineStats{Seconds: seconds, Interval: interval, From: from, To: to, Nodes: []string{}, Rows: []qos.FineRow{}}
		for _, n := range nodes {
			if n.Fine == nil {
				errs = append(errs, fmt.Sprintf("node %s: keeps no fine statistics (a weft older than this one?)", n.Node))
				continue
			}
			st.Nodes = append(st.Nodes, n.Node)
			st.Rows = append(st.Rows, qos.FineRows(n.Node, n.Fine.Samples, from, to, interval)...)
			if n.Fine.Overflow > 0 {
				if st.Overflow == nil {
					st.Overflow = map[string]int64{}
				}
				st.Overflow[n.Node] = n.Fine.Overflow
			}
		}
		qos.SortFineRows(st.Rows)
		slices.Sort(errs)
		st.Errors = errs
		return st, nil
	}))
	mux.HandleFunc("GET "+APIVersion+"/node/qos", h.withBody(func(ctx context.Context, r *http.Request) (any, error) {
		seconds, err := intParam(r, "seconds", 0, 0, qos.StatsSeconds)
		if err != nil {
			return nil, err
		}
		fine, err := intParam(r, "fine", 0, 0, 1)
		if err != nil {
			return nil, err
		}
		return h.ownQoS(seconds, fine == 1)
	}))
}

// statsParams reads the ?seconds and ?interval of the stats routes.
func statsParams(r *http.Request) (seconds, interval int, err error) {
	if seconds, err = intParam(r, "seconds", 10, 1, qos.StatsSeconds); err != nil {
		return 0, 0, err
	}
	if interval, err = intParam(r, "interval", 1, 1, seconds); err != nil {
		return 0, 0, err
	}
	return seconds, interval, nil
}

// intParam reads query parameter name: def when absent, else an integer
// in [lo, hi] (an error wrapping qos.ErrInvalid otherwise).
func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		return 0, fmt.Errorf("%w: %s=%q: want a whole number from %d to %d", qos.ErrInvalid, name, s, lo, hi)
	}
	return v, nil
}

// ownQoS is this node's QoSNodeState, with its fine statistics if fine.
func (h *handler) ownQoS(seconds int, fine bool) (QoSNodeState, error) {
	if h.qos == nil {
		return QoSNodeState{}, fmt.Errorf("%w: node %s keeps no QoS state", errUnavailable, h.node.Name)
	}
	st := QoSNodeState{Node: h.node.Name, Shares: []QoSShare{}, Samples: h.qos.QoSSamples(seconds)}
	if fine {
		st.Fine = &QoSFine{}
		st.Fine.Samples, st.Fine.Overflow = h.qos.QoSFine(seconds)
		if st.Fine.Samples == nil {
			st.Fine.Samples = []qos.FineSample{}
		}
	}
	for k, l := range h.qos.QoSLimits() {
		st.Shares = append(st.Shares, QoSShare{Pool: k.Pool, Class: k.Class, IOPS: l.IOPS, BytesPerSec: l.BytesPerSec})
	}
	slices.SortFunc(st.Shares, func(a, b QoSShare) int {
		return cmp.Or(cmp.Compare(a.Pool, b.Pool), slices.Index(qos.Classes(), a.Class)-slices.Index(qos.Classes(), b.Class))
	})
	return st, nil
}

// qosNodes asks every node that is up for its QoSNodeState (askNodes),
// with the fine statistics if fine.
func (h *handler) qosNodes(ctx context.Context, seconds int, fine bool) ([]QoSNodeState, []string, error) {
	path := fmt.Sprintf("%s/node/qos?seconds=%d", APIVersion, seconds)
	if fine {
		path += "&fine=1"
	}
	own := func() (QoSNodeState, error) { return h.ownQoS(seconds, fine) }
	return askNodes(ctx, h, path, own, func(s QoSNodeState) string { return s.Node })
}

// QoS returns the QoS configuration and every node's shares.
func (c *Client) QoS(ctx context.Context) (QoSShow, error) {
	var v QoSShow
	return v, c.do(ctx, http.MethodGet, APIVersion+"/qos", nil, &v)
}

// ChangeQoS applies ch and returns the new configuration. A bad
// specification is an *Error of status 400 naming the token.
func (c *Client) ChangeQoS(ctx context.Context, ch QoSChange) (qos.Config, error) {
	var v qos.Config
	return v, c.do(ctx, http.MethodPut, APIVersion+"/qos", ch, &v)
}

// QoSStats returns the cluster's QoS statistics over the last seconds
// seconds in intervals of interval seconds.
func (c *Client) QoSStats(ctx context.Context, seconds, interval int) (QoSStats, error) {
	var v QoSStats
	q := url.Values{"seconds": {strconv.Itoa(seconds)}, "interval": {strconv.Itoa(interval)}}
	return v, c.do(ctx, http.MethodGet, APIVersion+"/qos/stats?"+q.Encode(), nil, &v)
}

// QoSFineStats returns the fine QoS statistics of every node over the
// last seconds seconds in intervals of interval seconds.
func (c *Client) QoSFineStats(ctx context.Context, seconds, interval int) (QoSFineStats, error) {
	var v QoSFineStats
	q := url.Values{"seconds": {strconv.Itoa(seconds)}, "interval": {strconv.Itoa(interval)}}
	return v, c.do(ctx, http.MethodGet, APIVersion+"/qos/stats/fine?"+q.Encode(), nil, &v)
}
