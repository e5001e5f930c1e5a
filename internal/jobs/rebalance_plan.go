package jobs

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// The plan of a rebalance pass: pure functions from the drives' usage to
// which drives shed units (sources, each with the probability that one of
// its units moves) and which take them (targets), its encoding in a task
// scope so that every node decides alike, and the choice of the units of
// one stripe to move. Tests: rebalance_plan_test.go, and the scenarios
// under testdata/rebalance (rebalance_plan_datadriven_test.go).

// deadband is how far above the mean, in fraction, a drive must be to
// shed units: drives this close to the mean are left alone.
const deadband = 0.005

// driveSpace is one in-service, up drive as the plan sees it.
type driveSpace struct {
	ID    meta.DriveID
	Node  string
	Pool  string
	Used  int64 // bytes of block files, minus blocks queued for deletion
	Total int64 // capacity
}

func (d driveSpace) fraction() float64 {
	if d.Total <= 0 {
		return 1
	}
	return float64(d.Used) / float64(d.Total)
}

// balancePlan is what a pass of one pool works from; it travels in the
// tasks' scope (encode/decodePlan), so every node decides alike.
type balancePlan struct {
	Pool  string
	Nodes int     // nodes with a drive of the pool in the plan
	Mean  float64 // the pool's used fraction
	// Src: drives to shed units, with the probability (parts per million)
	// that a unit of theirs moves.
	Src map[meta.DriveID]int
	// Dst: drives below the mean, the only ones that take moved units;
	// Member: every drive of the plan.
	Dst    map[meta.DriveID]bool
	Member map[meta.DriveID]bool
}

// planBalance returns a plan per pool (only pool, if not empty), sorted by
// pool name. It is pure.
func planBalance(drives []driveSpace, pool string) []balancePlan {
	byPool := map[string][]driveSpace{}
	for _, d := range drives {
		if pool == "" || d.Pool == pool {
			byPool[d.Pool] = append(byPool[d.Pool], d)
		}
	}
	var out []balancePlan
	for name, ds := range byPool {
		var used, total int64
		nodes := map[string]bool{}
		for _, d := range ds {
			used += d.Used
			total += d.Total
			nodes[d.Node] = true
		}
		p := balancePlan{Pool: name, Nodes: len(nodes), Src: map[meta.DriveID]int{}, Dst: map[meta.DriveID]bool{}, Member: map[meta.DriveID]bool{}}
		if total > 0 {
			p.Mean = float64(used) / float64(total)
		}
		for _, d := range ds {
			p.Member[d.ID] = true
			switch f := d.fraction(); {
			case f > p.Mean+deadband && d.Used > 0:
				excess := float64(d.Used) - p.Mean*float64(d.Total)
				p.Src[d.ID] = int(math.Ceil(excess / float64(d.Used) * 1e6))
			case f < p.Mean:
				p.Dst[d.ID] = true
			}
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pool < out[j].Pool })
	return out
}

// balanced reports whether the plan has units to shed somewhere to put them.
func (p *balancePlan) balanced() bool { return len(p.Src) == 0 || len(p.Dst) == 0 }

// encode writes the plan as a task scope:
// "pool=P;nodes=N;mean=PPM;src=ID:PPM,...;dst=ID,...;all=ID,...".
func (p *balancePlan) encode() string {
	ids := func(m map[meta.DriveID]bool) string {
		var s []string
		for _, id := range slices.Sorted(maps.Keys(m)) {
			s = append(s, strconv.FormatUint(uint64(id), 10))
		}
		return strings.Join(s, ",")
	}
	var src []string
	for _, id := range slices.Sorted(maps.Keys(p.Src)) {
		src = append(src, fmt.Sprintf("%d:%d", id, p.Src[id]))
	}
	return fmt.Sprintf("pool=%s;nodes=%d;mean=%d;src=%s;dst=%s;all=%s", p.Pool, p.Nodes, int(math.Round(p.Mean*1e6)),
		strings.Join(src, ","), ids(p.Dst), ids(p.Member))
}

// decodePlan parses a scope written by encode.
func decodePlan(scope string) (balancePlan, error) {
	p := balancePlan{Src: map[meta.DriveID]int{}, Dst: map[meta.DriveID]bool{}, Member: map[meta.DriveID]bool{}}
	bad := func(why string) (balancePlan, error) {
		return balancePlan{}, fmt.Errorf("%w: rebalance: bad task scope %q: %s", job.ErrInvalid, scope, why)
	}
	idList := func(v string, into map[meta.DriveID]bool) error {
		for _, f := range strings.Split(v, ",") {
			if f == "" {
				continue
			}
			n, err := strconv.ParseUint(f, 10, 32)
			if err != nil || n == 0 {
				return fmt.Errorf("drive %q", f)
			}
			into[meta.DriveID(n)] = true
		}
		return nil
	}
	for _, kv := range strings.Split(scope, ";") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return bad("want key=value fields")
		}
		switch k {
		case "pool":
			p.Pool = v
		case "nodes", "mean":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return bad(k)
			}
			if k == "nodes" {
				p.Nodes = n
			} else {
				p.Mean = float64(n) / 1e6
			}
		case "src":
			for _, f := range strings.Split(v, ",") {
				if f == "" {
					continue
				}
				id, ppm, ok := strings.Cut(f, ":")
				n, err1 := strconv.ParseUint(id, 10, 32)
				q, err2 := strconv.Atoi(ppm)
				if !ok || err1 != nil || err2 != nil || n == 0 || q < 0 {
					return bad("src " + f)
				}
				p.Src[meta.DriveID(n)] = q
			}
		case "dst":
			if err := idList(v, p.Dst); err != nil {
				return bad(err.Error())
			}
		case "all":
			if err := idList(v, p.Member); err != nil {
				return bad(err.Error())
			}
		default:
			return bad("unknown field " + k)
		}
	}
	if p.Pool == "" {
		return bad("no pool")
	}
	return p, nil
}

// wantsFile reports whether a file's WDL may hold a unit to move: one on a
// source drive, or drives spanning fewer nodes than the plan has (the
// file may be badly spread; a multi-stripe file spanning every node may
// still hold a badly spread stripe, which this pre-filter misses).
func (p *balancePlan) wantsFile(wdl []meta.DriveID, nodeOf map[meta.DriveID]string) bool {
	nodes := map[string]bool{}
	for _, d := range wdl {
		if !p.balanced() && p.Src[d] > 0 {
			return true
		}
		nodes[nodeOf[d]] = true
	}
	return p.Nodes > 1 && len(nodes) < p.Nodes && len(wdl) > len(nodes)
}

// stripeMoves returns the units of healthy stripe s to move and the drives
// they may go to. It is pure.
func (p *balancePlan) stripeMoves(lin meta.LIN, s meta.Stripe, nodeOf map[meta.DriveID]string) ([]restripe.UnitMove, func(meta.DriveID) bool) {
	if p.Nodes < 1 {
		return nil, nil
	}
	limit := (len(s.Units) + p.Nodes - 1) / p.Nodes
	load := map[string]int{}
	var byNode = map[string][]int{}
	for i, u := range s.Units {
		n := nodeOf[u.Drive]
		load[n]++
		byNode[n] = append(byNode[n], i)
	}
	move := map[int]string{}
	spread := false
	for n, units := range byNode {
		if len(units) <= limit || !p.nodeInPlan(n, nodeOf) {
			continue
		}
		// Shed the excess, units on source drives first.
		slices.SortStableFunc(units, func(a, b int) int {
			return p.Src[s.Units[b].Drive] - p.Src[s.Units[a].Drive]
		})
		for _, i := range units[:len(units)-limit] {
			move[i] = fmt.Sprintf("spread: node %s holds %d of the stripe's %d units, at most %d", n, len(units), len(s.Units), limit)
			spread = true
		}
	}
	if !p.balanced() {
		for i, u := range s.Units {
			if ppm := p.Src[u.Drive]; ppm > 0 && move[i] == "" && unitDraw(lin, s.Index, u.Block) < uint64(ppm) {
				move[i] = fmt.Sprintf("balance: drive %v is above the pool's mean of %.1f%% used", cluster.DriveID(u.Drive), p.Mean*100)
			}
		}
	}
	if len(move) == 0 {
		return nil, nil
	}
	after := maps.Clone(load)
	var out []restripe.UnitMove
	for _, i := range slices.Sorted(maps.Keys(move)) {
		u := s.Units[i]
		after[nodeOf[u.Drive]]--
		out = append(out, restripe.UnitMove{Drive: u.Drive, Block: u.Block, Why: move[i]})
	}
	allow := func(d meta.DriveID) bool {
		if !p.Member[d] || p.Src[d] > 0 || (!p.Dst[d] && !spread) {
			return false
		}
		return after[nodeOf[d]] < limit
	}
	return out, allow
}

func (p *balancePlan) nodeInPlan(n string, nodeOf map[meta.DriveID]string) bool {
	for d := range p.Member {
		if nodeOf[d] == n {
			return true
		}
	}
	return false
}

// unitDraw maps a unit to [0, 1e6): the same unit always draws the same.
func unitDraw(lin meta.LIN, stripe uint64, b meta.BlockID) uint64 {
	h := fnv.New64a()
	var buf [16]byte
	binary.BigEndian.PutUint64(buf[:8], uint64(lin))
	binary.BigEndian.PutUint64(buf[8:], stripe)
	h.Write(buf[:])
	h.Write(b[:])
	return h.Sum64() % 1e6
}

// PoolSpread is the range of used fractions over a pool's drives.
type PoolSpread struct {
	Pool     string
	Drives   int
	Min, Max float64 // used fractions
}

// Spread is Max − Min in percentage points.
func (s PoolSpread) Spread() float64 { return (s.Max - s.Min) * 100 }

func (s PoolSpread) String() string {
	return fmt.Sprintf("pool %s: %d drives %.1f%%–%.1f%% used (spread %.1f points)", s.Pool, s.Drives, s.Min*100, s.Max*100, s.Spread())
}

// poolSpreads returns the spread of each pool (only pool, if set), by name.
func poolSpreads(drives []driveSpace, pool string) []PoolSpread {
	by := map[string]*PoolSpread{}
	for _, d := range drives {
		if pool != "" && d.Pool != pool {
			continue
		}
		f := d.fraction()
		s := by[d.Pool]
		if s == nil {
			s = &PoolSpread{Pool: d.Pool, Min: f, Max: f}
			by[d.Pool] = s
		}
		s.Drives++
		s.Min, s.Max = min(s.Min, f), max(s.Max, f)
	}
	var out []PoolSpread
	for _, s := range by {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pool < out[j].Pool })
	return out
}
