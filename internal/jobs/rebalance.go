package jobs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/weftfs/weft/internal/block"
	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// Rebalance returns the rebalance job type: it moves units so that the
// drives of each pool end up within a few points of each other in used
// fraction, and so that each stripe's units are spread over the pool's
// nodes. Phases:
//
//   - rebalance: a plan is made from every in-service drive's usage, read
//     fresh from its node (used bytes minus blocks already queued for
//     deletion, over capacity): the pool's mean used fraction m; source
//     drives, above m by more than half a point, each with the fraction
//     p = (used − m·total)/used of its units to move; and target drives,
//     below m, the only ones that receive units. A LIN scan then visits
//     the files of the pool with units on a source drive (their WDL says
//     so without reading stripe maps) or whose WDL spans fewer nodes than
//     the pool has; for each healthy stripe it moves the units in excess
//     on a node (more than ⌈width/nodes⌉) and each unit on a source drive
//     with probability p (a hash of file, stripe and block decides, so a
//     re-run of an item makes the same choices). Over many units a source
//     drive sheds its excess in expectation; the moved units go to target
//     drives weighted by free space, never to a node that would then hold
//     more than its share of the stripe.
//   - settle, settle2, settle3: one task per pool that follows the usage
//     as it is now rather than odds (see settle), moving units off the
//     drives still above the mean until none is; a pass skips the pools
//     already within half the threshold.
//   - check: reports each pool's spread of used fractions; a pool still
//     out of the band (parameter "threshold", default 5 points) counts as
//     an error in the report.
//
// Moves are copy-on-write through the stripe generation
// (Restriper.MoveUnits), so a rebalance runs beside client writes and other restripe jobs; a
// move that would lower the stripe's tolerance is not made, and stripes
// that need repair (a unit down or unplaced) are left to repair.
// Parameters: "pool" (only that pool; default all), "threshold" (points,
// 1-50), "dry-run=true" (count what would move, move nothing).
func Rebalance() job.Type { return newRebalance(clusterSpace) }

func newRebalance(space spaceLister) *rebalance {
	r := &rebalance{space: space, nodes: newDriveNodes(clusterDrives)}
	r.phases = []job.Phase{&balancePass{r: r, name: "rebalance"}}
	for i := 1; i <= settlePasses; i++ {
		name := "settle"
		if i > 1 {
			name = fmt.Sprintf("settle%d", i)
		}
		r.phases = append(r.phases, &balancePass{r: r, name: name, pass: i})
	}
	r.phases = append(r.phases, &balanceCheck{r: r})
	return r
}

// rebalance is the rebalance job type; space is how it learns the drives'
// usage (nodes' block services; tests pass their own).
type rebalance struct {
	space  spaceLister
	nodes  *driveNodes
	phases []job.Phase
	liveMu sync.Mutex
	live   map[string]*liveSpace // settle passes' views, by job/phase/pool
}

var (
	_ job.Defaulter    = (*rebalance)(nil)
	_ job.ParamChecker = (*rebalance)(nil)
)

func (*rebalance) Name() string          { return "rebalance" }
func (*rebalance) Set() job.ExclusionSet { return job.SetRestripe }
func (r *rebalance) Phases() []job.Phase { return r.phases }

// Defaults: balance is an optimisation, below repairs and drains.
func (*rebalance) Defaults() (int, string) { return 5, "low" }

// DefaultBalanceThreshold is the spread of used fractions, in points,
// within which a pool counts as balanced.
const DefaultBalanceThreshold = 5.0

// settlePasses is the number of passes after the first. A unit drawn to
// move may find no drive it may go to (every target is on a node that
// already holds its share of the stripe), so the first pass moves less
// than its plan; the settle passes try other units for what is left.
const settlePasses = 3

// deadband is how far above the mean, in fraction, a drive must be to
// shed units: drives this close to the mean are left alone.
const deadband = 0.005

// CheckParams validates "pool", "threshold" and "dry-run"; errors wrap
// job.ErrInvalid.
func (*rebalance) CheckParams(p map[string]string) error {
	if v := p["pool"]; v != "" && !cluster.ValidName(v) {
		return fmt.Errorf("%w: pool=%q: not a pool name (see weft pool list)", job.ErrInvalid, v)
	}
	if _, err := thresholdOf(p); err != nil {
		return err
	}
	return checkDryRun(p)
}

func thresholdOf(p map[string]string) (float64, error) {
	v := p["threshold"]
	if v == "" {
		return DefaultBalanceThreshold, nil
	}
	f, err := strconv.ParseFloat(strings.TrimSuffix(v, "%"), 64)
	if err != nil || f < 1 || f > 50 {
		return 0, fmt.Errorf("%w: threshold=%q: want the largest acceptable spread of used fractions in points, 1 to 50 (default 5)", job.ErrInvalid, v)
	}
	return f, nil
}

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

// spaceLister returns the drives a plan balances.
type spaceLister func(ctx context.Context, e Env) ([]driveSpace, error)

// clusterSpace returns the drives that are up and ready (not suspended,
// draining or removed), with usage read from their nodes now (the
// published figures lag), less the bytes of their queued deletes. A node
// that does not answer leaves its drives out of this plan.
func clusterSpace(ctx context.Context, e Env) ([]driveSpace, error) {
	ds, err := e.Cluster().ListDrives(ctx)
	if err != nil {
		return nil, err
	}
	byNode := map[string][]cluster.Drive{}
	for _, d := range ds {
		if d.Status == cluster.StatusReady && d.State == cluster.Up {
			byNode[d.Node] = append(byNode[d.Node], d)
		}
	}
	var out []driveSpace
	for node, drives := range byNode {
		bc, err := e.Blocks(ctx, node)
		var us map[drive.ID]drive.Usage
		if err == nil {
			us, err = nodeUsage(ctx, bc)
		}
		if err != nil {
			e.Log().Warn("rebalance: cannot read drive usage; its drives sit this pass out", "node", node, "err", err)
			continue
		}
		for _, d := range drives {
			u, ok := us[drive.ID(d.ID)]
			if !ok || u.TotalBytes <= 0 {
				continue
			}
			q, err := queuedBytes(ctx, e.Meta(), meta.DriveID(d.ID))
			if err != nil {
				return nil, err
			}
			out = append(out, driveSpace{ID: meta.DriveID(d.ID), Node: node, Pool: d.Pool, Used: max(0, u.UsedBytes-q), Total: u.TotalBytes})
		}
	}
	slices.SortFunc(out, func(a, b driveSpace) int { return int(a.ID) - int(b.ID) })
	return out, nil
}

// nodeUsage asks a node's block service for its drives' usage.
func nodeUsage(ctx context.Context, bc *block.Client) (map[drive.ID]drive.Usage, error) {
	us, err := bc.Usage(ctx)
	if err != nil {
		return nil, err
	}
	out := map[drive.ID]drive.Usage{}
	for _, u := range us {
		if u.Err == "" {
			out[u.Drive] = u.Usage
		}
	}
	return out, nil
}

// queuedBytes sums the on-disk size of drive d's queued deletes.
func queuedBytes(ctx context.Context, m *meta.Meta, d meta.DriveID) (int64, error) {
	var sum int64
	var after meta.BlockID
	for {
		q, err := m.ListDeletes(ctx, d, after, queueBatch)
		if err != nil {
			return 0, err
		}
		for _, x := range q {
			sum += int64(x.Length) + drive.HeaderAlign
		}
		if len(q) < queueBatch {
			return sum, nil
		}
		after = q[len(q)-1].Block
	}
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

// balancePass is the rebalance and settle phases.
type balancePass struct {
	r    *rebalance
	name string
	pass int // 0 for the first pass
}

func (p *balancePass) Name() string { return p.name }

func (p *balancePass) Split(ctx context.Context, env job.Env, j *job.Job) ([]job.TaskSpec, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	if err := p.r.CheckParams(j.Params); err != nil {
		return nil, err
	}
	space, err := p.r.space(ctx, e)
	if err != nil {
		return nil, err
	}
	plans := planBalance(space, j.Params["pool"])
	if j.Params["pool"] != "" && len(plans) == 0 {
		return nil, fmt.Errorf("%w: pool=%q has no drive that is up and in service", job.ErrInvalid, j.Params["pool"])
	}
	threshold, err := thresholdOf(j.Params)
	if err != nil {
		return nil, err
	}
	spread := map[string]float64{}
	for _, s := range poolSpreads(space, j.Params["pool"]) {
		spread[s.Pool] = s.Spread()
	}
	var out []job.TaskSpec
	for _, pl := range plans {
		if p.pass > 0 && spread[pl.Pool] <= threshold/2 {
			continue // balanced enough; the first pass also fixed spread
		}
		e.Log().Info("rebalance plan", "phase", p.name, "pool", pl.Pool, "mean_used", fmt.Sprintf("%.2f%%", pl.Mean*100),
			"sources", len(pl.Src), "targets", len(pl.Dst), "nodes", pl.Nodes)
		if pl.balanced() && pl.Nodes < 2 {
			continue
		}
		n := j.Parallelism
		if p.pass > 0 {
			n = 1 // one worker follows the live usage (see settle)
		}
		tasks, err := splitLINs(ctx, e.Meta(), n)
		if err != nil {
			return nil, err
		}
		scope := pl.encode()
		for i := range tasks {
			tasks[i].Scope = scope
		}
		out = append(out, tasks...)
	}
	return out, nil
}

func (p *balancePass) Items(ctx context.Context, env job.Env, scope string, from, to uint64, limit int) ([]uint64, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	pl, err := decodePlan(scope)
	if err != nil {
		return nil, err
	}
	nodeOf, err := p.r.nodes.get(ctx, e)
	if err != nil {
		return nil, err
	}
	return listLINs(ctx, e.Meta(), from, to, limit, func(in meta.Inode) bool {
		return in.Pool == pl.Pool && pl.wantsFile(in.WDL, nodeOf)
	})
}

func (p *balancePass) Process(ctx context.Context, env job.Env, j *job.Job, scope string, item uint64) (job.ItemResult, error) {
	e, err := envOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	pl, err := decodePlan(scope)
	if err != nil {
		return job.ItemResult{}, err
	}
	nodeOf, err := p.r.nodes.get(ctx, e)
	if err != nil {
		return job.ItemResult{}, err
	}
	isBad, err := e.Restriper().BadDrives(ctx, nil)
	if err != nil {
		return job.ItemResult{}, err
	}
	dry := j.Params["dry-run"] == "true"
	lin := meta.LIN(item)
	// The first pass draws moves from the plan; the settle passes follow
	// the pool's usage as it is now (see settle).
	choose := func(s meta.Stripe) ([]restripe.UnitMove, func(meta.DriveID) bool, error) {
		moves, allow := pl.stripeMoves(lin, s, nodeOf)
		return moves, allow, nil
	}
	var ls *liveSpace
	if p.pass > 0 {
		ls = p.r.liveFor(fmt.Sprintf("%d/%s/%s", j.ID, p.name, pl.Pool))
		choose = func(s meta.Stripe) ([]restripe.UnitMove, func(meta.DriveID) bool, error) {
			return p.settle(ctx, e, ls, pl, s, nodeOf)
		}
	}
	res := job.ItemResult{Items: 1}
	var moved, kept int
	var firstErr error
	err = meta.EachStripe(ctx, e.Meta(), lin, scanPage, func(s meta.Stripe) error {
		if restripe.StripeNeedsRepair(s, isBad) {
			return nil // repair's job, not ours
		}
		moves, allow, err := choose(s)
		if err != nil || len(moves) == 0 {
			return err
		}
		if dry {
			moved += len(moves)
			for _, m := range moves {
				res.Bytes += unitLen(s, m)
			}
			return nil
		}
		r, err := e.Restriper().MoveUnits(ctx, lin, s.Index, moves, allow)
		res.Bytes += r.BytesWritten
		kept += r.Left
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrConflict) {
				res.Errors++ // a finding: the next run moves it
				if firstErr == nil {
					firstErr = err
				}
				return nil
			}
			return err
		}
		if r.Committed {
			moved += r.Moved
			for _, u := range r.Units {
				if u.To != 0 && ls != nil {
					ls.moved(u.From, u.To, int64(s.Units[u.Unit].Length))
				}
			}
		}
		return nil
	})
	if errors.Is(err, meta.ErrNotFound) {
		return job.ItemResult{}, nil // deleted meanwhile
	}
	if err != nil {
		return res, err
	}
	if moved > 0 || firstErr != nil {
		verb := "moved"
		if dry {
			verb = "would move (dry run)"
		}
		res.Note = fmt.Sprintf("%s: %d units %s, %d left in place", pathOf(ctx, e.Meta(), lin), moved, verb, kept)
		if firstErr != nil {
			res.Note += fmt.Sprintf("; %v", firstErr)
		}
	}
	return res, nil
}

// settle chooses the move of stripe s in a pass after the first: instead
// of the plan's odds it follows the pool's usage as it is now (read from
// the nodes at most once a second, and adjusted for each move this node
// makes), moving at most one unit per stripe: one on the fullest drive of
// the stripe that is above the mean by more than the dead band, to a
// drive below the mean on a node that would not then hold more than its
// share of the stripe. So it stops when the drives are within about a
// unit of the mean, and tries units the first pass could not move.
func (p *balancePass) settle(ctx context.Context, e Env, ls *liveSpace, pl balancePlan, s meta.Stripe,
	nodeOf map[meta.DriveID]string) ([]restripe.UnitMove, func(meta.DriveID) bool, error) {
	if err := ls.refresh(ctx, e, p.r.space, pl.Pool); err != nil {
		return nil, nil, err
	}
	mv, allow, ok := ls.pick(s, nodeOf, pl.Nodes)
	if !ok {
		return nil, nil, nil
	}
	return []restripe.UnitMove{mv}, allow, nil
}

// liveSpace is one node's running view of a pool's drives during a settle
// pass.
type liveSpace struct {
	mu     sync.Mutex
	at     time.Time
	used   time.Time // last use, for forgetting
	drives map[meta.DriveID]driveSpace
	mean   float64
}

// liveRefresh is how often a settle pass reads the drives' usage.
const liveRefresh = time.Second

// liveFor returns the live view of key (job/phase/pool), forgetting views
// unused for ten minutes.
func (r *rebalance) liveFor(key string) *liveSpace {
	r.liveMu.Lock()
	defer r.liveMu.Unlock()
	if r.live == nil {
		r.live = map[string]*liveSpace{}
	}
	now := time.Now()
	for k, l := range r.live {
		if now.Sub(l.used) > 10*time.Minute {
			delete(r.live, k)
		}
	}
	l := r.live[key]
	if l == nil {
		l = &liveSpace{}
		r.live[key] = l
	}
	l.used = now
	return l
}

func (l *liveSpace) refresh(ctx context.Context, e Env, space spaceLister, pool string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.drives != nil && time.Since(l.at) < liveRefresh {
		return nil
	}
	ds, err := space(ctx, e)
	if err != nil {
		return err
	}
	l.drives = map[meta.DriveID]driveSpace{}
	var used, total int64
	for _, d := range ds {
		if d.Pool == pool {
			l.drives[d.ID] = d
			used += d.Used
			total += d.Total
		}
	}
	l.mean = 0
	if total > 0 {
		l.mean = float64(used) / float64(total)
	}
	l.at = time.Now()
	return nil
}

// pick chooses the unit of s to move, if any, and the drives it may go to.
func (l *liveSpace) pick(s meta.Stripe, nodeOf map[meta.DriveID]string, nodes int) (restripe.UnitMove, func(meta.DriveID) bool, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if nodes < 1 {
		return restripe.UnitMove{}, nil, false
	}
	limit := (len(s.Units) + nodes - 1) / nodes
	load := map[string]int{}
	for _, u := range s.Units {
		load[nodeOf[u.Drive]]++
	}
	best, bestF := -1, l.mean+deadband
	for i, u := range s.Units {
		d, ok := l.drives[u.Drive]
		if ok && d.fraction() > bestF {
			best, bestF = i, d.fraction()
		}
	}
	if best < 0 {
		return restripe.UnitMove{}, nil, false
	}
	u := s.Units[best]
	load[nodeOf[u.Drive]]--
	targets := map[meta.DriveID]bool{}
	for id, d := range l.drives {
		if d.fraction() < l.mean && load[nodeOf[id]] < limit && !slices.ContainsFunc(s.Units, func(x meta.Unit) bool { return x.Drive == id }) {
			targets[id] = true
		}
	}
	if len(targets) == 0 {
		return restripe.UnitMove{}, nil, false
	}
	why := fmt.Sprintf("settle: drive %v is %.1f%% used, above the pool's mean of %.1f%%", cluster.DriveID(u.Drive), bestF*100, l.mean*100)
	return restripe.UnitMove{Drive: u.Drive, Block: u.Block, Why: why}, func(d meta.DriveID) bool { return targets[d] }, true
}

// moved accounts for a unit of n bytes moved from one drive to another.
func (l *liveSpace) moved(from, to meta.DriveID, n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n += drive.HeaderAlign
	if d, ok := l.drives[from]; ok {
		d.Used -= n
		l.drives[from] = d
	}
	if d, ok := l.drives[to]; ok {
		d.Used += n
		l.drives[to] = d
	}
}

func unitLen(s meta.Stripe, m restripe.UnitMove) int64 {
	for _, u := range s.Units {
		if u.Drive == m.Drive && u.Block == m.Block {
			return int64(u.Length)
		}
	}
	return 0
}

// balanceCheck reports the spread of used fractions per pool.
type balanceCheck struct{ r *rebalance }

func (*balanceCheck) Name() string { return "check" }

func (*balanceCheck) Split(context.Context, job.Env, *job.Job) ([]job.TaskSpec, error) {
	return []job.TaskSpec{{Scope: "check", From: 0, To: 1}}, nil
}

func (*balanceCheck) Items(_ context.Context, _ job.Env, _ string, from, to uint64, _ int) ([]uint64, error) {
	return oneItem(from, to), nil
}

func (c *balanceCheck) Process(ctx context.Context, env job.Env, j *job.Job, _ string, _ uint64) (job.ItemResult, error) {
	e, err := envOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	threshold, err := thresholdOf(j.Params)
	if err != nil {
		return job.ItemResult{}, err
	}
	space, err := c.r.space(ctx, e)
	if err != nil {
		return job.ItemResult{}, err
	}
	res := job.ItemResult{Items: 1}
	var notes []string
	for _, s := range poolSpreads(space, j.Params["pool"]) {
		notes = append(notes, s.String())
		if s.Spread() > threshold {
			res.Errors++
		}
	}
	res.Note = strings.Join(notes, "; ")
	e.Log().Info("rebalance check", "pools", res.Note)
	return res, nil
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
