package jobs

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/weftfs/weft/internal/block"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// The drives' usage as a rebalance sees it: read fresh from the nodes'
// block services (the published figures lag), less the blocks already
// queued for deletion; and the running view of it a settle pass keeps,
// adjusted for the moves its node makes.

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
