package etcdx

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftfs/weft/internal/runner"
)

// SpaceInterval is how often a SpaceWatcher asks the members for the size
// of their databases.
const SpaceInterval = 10 * time.Second

// Space is an etcd member's database: its size on disk and its quota
// (--quota-backend-bytes). Past the quota etcd raises its NOSPACE alarm
// and refuses every write, to the whole namespace, until an
// administrator compacts and defragments it or raises the quota.
type Space struct {
	Member string `json:"member"`
	Used   int64  `json:"used_bytes"`
	Quota  int64  `json:"quota_bytes"`
}

// Fraction is Used over Quota.
func (s Space) Fraction() float64 {
	if s.Quota <= 0 {
		return 0
	}
	return float64(s.Used) / float64(s.Quota)
}

// etcdDefaultQuota is etcd's quota when none is configured (a member that
// reports a quota of 0 has it).
const etcdDefaultQuota = 2 << 30

// MemberSpace returns the Space of a member's answer, and false if it did
// not answer.
func MemberSpace(a MemberStatus) (Space, bool) {
	if a.Err != nil || a.Resp == nil {
		return Space{}, false
	}
	s := Space{Member: a.Endpoint, Used: a.Resp.DbSize, Quota: a.Resp.DbSizeQuota}
	if s.Quota <= 0 {
		s.Quota = etcdDefaultQuota
	}
	return s, true
}

// FullestMember returns the Space of the member whose database is the
// fullest part of its quota among the answers, and false if none answered.
func FullestMember(answers []MemberStatus) (Space, bool) {
	return fullest(spaces(answers))
}

// spaces returns the Spaces of the members that answered.
func spaces(answers []MemberStatus) []Space {
	var out []Space
	for _, a := range answers {
		if s, ok := MemberSpace(a); ok {
			out = append(out, s)
		}
	}
	return out
}

// fullest returns the fullest of ss, and false if ss is empty.
func fullest(ss []Space) (Space, bool) {
	var out Space
	for i, s := range ss {
		if i == 0 || s.Fraction() > out.Fraction() {
			out = s
		}
	}
	return out, len(ss) > 0
}

// SpaceWatcher follows how full the etcd members' databases are, for
// callers that add to them at will — a client committing small files'
// data inline (client.Config.InlineAllowed) — so that they stop before
// the quota stops everyone. It is a runner.Worker (WatchSpace starts one):
// every SpaceInterval it asks each endpoint the client had when it was
// made for its status, and logs when the fullest member crosses Limit.
type SpaceWatcher struct {
	cli *clientv3.Client
	all []string
	log *slog.Logger
	// Limit is the fraction of the quota past which Below reports false.
	Limit float64

	mu      sync.Mutex
	members []Space // every member that answered the last step that had answers
	over    bool    // the fullest of them is past Limit
}

// DefaultSpaceLimit is SpaceWatcher.Limit: half the quota, which leaves
// the other half for inodes, entries and stripe maps.
const DefaultSpaceLimit = 0.5

// WatchSpace starts a SpaceWatcher of cli as the worker "etcd-space" of
// run.
func WatchSpace(run *runner.Runner, cli *clientv3.Client, log *slog.Logger) (*SpaceWatcher, error) {
	w := NewSpaceWatcher(cli, log)
	if _, err := run.Go("etcd-space", w, runner.Options{Idle: SpaceInterval}); err != nil {
		return nil, fmt.Errorf("etcdx: %w", err)
	}
	return w, nil
}

// NewSpaceWatcher returns a SpaceWatcher of cli over the endpoints it has
// now, with Limit DefaultSpaceLimit.
func NewSpaceWatcher(cli *clientv3.Client, log *slog.Logger) *SpaceWatcher {
	if log == nil {
		log = slog.Default()
	}
	return &SpaceWatcher{cli: cli, all: cli.Endpoints(), log: log, Limit: DefaultSpaceLimit}
}

var _ runner.Worker = (*SpaceWatcher)(nil)

// Step asks every member once.
func (w *SpaceWatcher) Step(ctx context.Context) (runner.State, error) {
	answers := AskStatus(ctx, w.all, SteerProbeTimeout, func(ctx context.Context, ep string) (*pb.StatusResponse, error) {
		sr, err := w.cli.Status(ctx, ep)
		return (*pb.StatusResponse)(sr), err
	})
	if ctx.Err() != nil {
		return runner.Done, nil
	}
	members := spaces(answers)
	s, ok := fullest(members)
	if !ok {
		return runner.Idle, nil // nobody answered: keep what was known
	}
	w.mu.Lock()
	was := w.over
	w.members, w.over = members, s.Fraction() >= w.Limit
	over := w.over
	w.mu.Unlock()
	switch {
	case over && !was:
		w.log.Warn("etcd database past its limit for data: small files' data goes to blocks, not inline, until it is back under",
			"member", s.Member, "used_bytes", s.Used, "quota_bytes", s.Quota, "limit", w.Limit)
	case !over && was:
		w.log.Info("etcd database back under its limit for data: small files' data inline again",
			"member", s.Member, "used_bytes", s.Used, "quota_bytes", s.Quota)
	}
	return runner.Idle, nil
}

// Space returns the fullest member's Space at the last answers, and false
// before any member answered.
func (w *SpaceWatcher) Space() (Space, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fullest(w.members)
}

// Below reports whether the fullest member's database was under Limit of
// its quota at the last answer (true before any answer: a store nobody
// can reach takes no commit either).
func (w *SpaceWatcher) Below() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.over
}

// spaceCollector exports a SpaceWatcher's last answers:
//
//	weft_etcd_db_size_bytes{member}    the member's database on disk
//	weft_etcd_db_quota_bytes{member}   its quota: at it, etcd refuses writes
//	weft_etcd_inline_allowed           1 while small files may go inline (Below)
type spaceCollector struct {
	w                    *SpaceWatcher
	size, quota, allowed *prometheus.Desc
}

// NewSpaceCollector returns a Prometheus collector of w (see the metric
// names above). Register it once per registry.
func NewSpaceCollector(w *SpaceWatcher) prometheus.Collector {
	return &spaceCollector{w: w,
		size:    prometheus.NewDesc("weft_etcd_db_size_bytes", "An etcd member's database on disk, as last asked (every 10 s).", []string{"member"}, nil),
		quota:   prometheus.NewDesc("weft_etcd_db_quota_bytes", "An etcd member's database quota: at it, etcd refuses every write.", []string{"member"}, nil),
		allowed: prometheus.NewDesc("weft_etcd_inline_allowed", "1 while the fullest etcd database is under its limit for data and small files' data goes inline; 0 past it.", nil, nil),
	}
}

func (c *spaceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.size
	ch <- c.quota
	ch <- c.allowed
}

func (c *spaceCollector) Collect(ch chan<- prometheus.Metric) {
	c.w.mu.Lock()
	members, over := c.w.members, c.w.over
	c.w.mu.Unlock()
	for _, m := range members {
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(m.Used), m.Member)
		ch <- prometheus.MustNewConstMetric(c.quota, prometheus.GaugeValue, float64(m.Quota), m.Member)
	}
	allowed := 1.0
	if over {
		allowed = 0
	}
	ch <- prometheus.MustNewConstMetric(c.allowed, prometheus.GaugeValue, allowed)
}
