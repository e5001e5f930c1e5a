package jobs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
)

// Collect returns the collect job type: it frees space that nothing
// references. Three phases:
//
//   - sweep: every drive in service is scanned; a block older than the
//     grace period (parameter "grace", a Go duration, default 1h) whose
//     header names an owner LIN that is gone, or a stripe whose unit list
//     does not name this drive and block, is deleted. The block header is
//     the mark (it names owner, stripe and unit), so no mark set is stored.
//   - queue: the delete queue (blocks unreferenced by a commit) is drained
//     drive by drive, as the nodes also do in the background.
//   - orphans: unlinked inodes no session holds open are purged; those
//     still open (meta.ErrBusy) are counted and kept.
//
// With "dry-run=true" nothing is deleted or purged; the report says what
// would be. The type belongs to the mark exclusion set and frees space, so
// it keeps running in low-space mode.
//
// Safety: a block is deleted only if its stripe map, read after the block
// was found old enough, does not reference it. In-flight writes commit
// their stripes after their puts, within the grace period, so a block being
// written is never a candidate; a stripe commit can only reuse a block the
// committed map references, which the sweep keeps. When the map cannot be
// read, the block is kept and the error counted.
func Collect() job.Type { return newCollect(clusterDrives) }

func newCollect(drives driveLister) *collect {
	c := &collect{drives: drives, nodes: newDriveNodes(drives), now: time.Now}
	c.phases = []job.Phase{&sweepPhase{c}, &queuePhase{c}, &orphanPhase{}}
	return c
}

// collect is the collect job type; drives is how it finds the drives in
// service (the control plane; tests pass their own), now its clock (the
// grace period's reference; tests move it).
type collect struct {
	drives driveLister
	nodes  *driveNodes
	now    func() time.Time
	phases []job.Phase
}

var (
	_ job.Defaulter    = (*collect)(nil)
	_ job.SpaceSaver   = (*collect)(nil)
	_ job.ParamChecker = (*collect)(nil)
)

// DefaultGrace is the default age below which the sweep never deletes a
// block: far longer than any write takes between its puts and its commit.
const DefaultGrace = time.Hour

func (*collect) Name() string          { return "collect" }
func (*collect) Set() job.ExclusionSet { return job.SetMark }
func (c *collect) Phases() []job.Phase { return c.phases }

// Defaults: collect is background hygiene, below scans.
func (*collect) Defaults() (int, string) { return 7, "low" }

// FreesSpace: collect frees space, so it runs in low-space mode.
func (*collect) FreesSpace() bool { return true }

// CheckParams validates "grace" (a positive Go duration) and "dry-run"
// (true or false); errors wrap job.ErrInvalid.
func (*collect) CheckParams(p map[string]string) error {
	if _, err := graceOf(p); err != nil {
		return err
	}
	return checkDryRun(p)
}

func checkDryRun(p map[string]string) error {
	if v := p["dry-run"]; v != "" && v != "true" && v != "false" {
		return fmt.Errorf("%w: dry-run=%q: want true or false", job.ErrInvalid, v)
	}
	return nil
}

// graceOf returns the job's grace period.
func graceOf(p map[string]string) (time.Duration, error) {
	v, ok := p["grace"]
	if !ok || v == "" {
		return DefaultGrace, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%w: grace=%q: want a positive Go duration such as 1h or 90m (blocks younger than it are never swept)", job.ErrInvalid, v)
	}
	return d, nil
}

// splitDrives returns the drives to work on; down drives are skipped with
// a log line (the next run covers them).
func (c *collect) splitDrives(ctx context.Context, e Env) ([]serviceDrive, error) {
	ds, err := c.drives(ctx, e)
	if err != nil {
		return nil, err
	}
	var out []serviceDrive
	for _, d := range ds {
		if !d.Up {
			e.Log().Warn("collect: skipping a down drive", "drive", d.ID.String(), "node", d.Node)
			continue
		}
		out = append(out, d)
	}
	return out, nil
}

type sweepPhase struct{ c *collect }

func (*sweepPhase) Name() string { return "sweep" }

func (p *sweepPhase) Split(ctx context.Context, env job.Env, j *job.Job) ([]job.TaskSpec, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	if err := p.c.CheckParams(j.Params); err != nil { // refuse bad parameters before any work
		return nil, err
	}
	ds, err := p.c.splitDrives(ctx, e)
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	per := max(1, (j.Parallelism+len(ds)-1)/len(ds))
	var out []job.TaskSpec
	for _, d := range ds {
		out = append(out, job.SplitRange(d.ID.String(), 0, math.MaxUint64, per)...)
	}
	return out, nil
}

func (p *sweepPhase) Items(ctx context.Context, env job.Env, scope string, from, to uint64, limit int) ([]uint64, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	d, err := scopeDrive(scope)
	if err != nil {
		return nil, err
	}
	node, err := p.c.nodes.of(ctx, e, d, "collect")
	if err != nil {
		return nil, err
	}
	bc, err := e.Blocks(ctx, node)
	if err != nil {
		return nil, err
	}
	return bucketItems(ctx, bc, d, node, from, to, limit)
}

func (p *sweepPhase) Process(ctx context.Context, env job.Env, j *job.Job, scope string, item uint64) (job.ItemResult, error) {
	e, err := envOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	grace, err := graceOf(j.Params)
	if err != nil {
		return job.ItemResult{}, err
	}
	dry := j.Params["dry-run"] == "true"
	d, err := scopeDrive(scope)
	if err != nil {
		return job.ItemResult{}, err
	}
	node, err := p.c.nodes.of(ctx, e, d, "collect")
	if err != nil {
		return job.ItemResult{}, err
	}
	bc, err := e.Blocks(ctx, node)
	if err != nil {
		return job.ItemResult{}, err
	}
	var res job.ItemResult
	var swept int64
	err = eachInBucket(ctx, bc, d, node, item, func(b drive.BlockInfo) error {
		res.Items++
		freed, verdict := p.sweepBlock(ctx, e, bc, d, b, grace, dry)
		switch verdict {
		case sweptBlock:
			swept++
			res.Bytes += freed
		case keptOnError:
			res.Errors++
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("collect: %w", err)
	}
	if swept > 0 || res.Errors > 0 {
		verb := "freed"
		if dry {
			verb = "would be freed (dry run)"
		}
		res.Note = fmt.Sprintf("%v: %d orphan blocks, %s %s, %d kept on errors", d, swept, mib(res.Bytes), verb, res.Errors)
	}
	return res, ctx.Err()
}

type verdict int

const (
	keptBlock verdict = iota
	sweptBlock
	keptOnError
)

// blockClient is what the sweep and queue phases use of a block client.
type blockClient interface {
	Stat(ctx context.Context, d drive.ID, id drive.BlockID) (drive.BlockHeader, int64, time.Time, error)
	Delete(ctx context.Context, d drive.ID, id drive.BlockID) error
}

// sweepBlock deletes block b of drive d if it is old enough and its
// stripe map does not reference it; it returns the bytes freed.
func (p *sweepPhase) sweepBlock(ctx context.Context, e Env, bc blockClient, d drive.ID, b drive.BlockInfo, grace time.Duration, dry bool) (int64, verdict) {
	cutoff := p.c.now().Add(-grace)
	if b.ModTime.After(cutoff) {
		return 0, keptBlock
	}
	hdr, size, mtime, err := bc.Stat(ctx, d, b.ID)
	switch {
	case errors.Is(err, drive.ErrNotFound):
		return 0, keptBlock // deleted meanwhile
	case err != nil:
		e.Log().Warn("collect: cannot read block header; kept", "drive", d.String(), "block", b.ID.String(), "err", err)
		return 0, keptOnError
	case hdr.Created.After(cutoff) || mtime.After(cutoff):
		return 0, keptBlock
	}
	ref, err := referenced(ctx, e.Meta(), d, hdr)
	if err != nil {
		e.Log().Warn("collect: cannot read stripe map; block kept", "drive", d.String(), "block", b.ID.String(),
			"owner", hdr.Owner, "stripe", hdr.Stripe, "err", err)
		return 0, keptOnError
	}
	if ref {
		return 0, keptBlock
	}
	if dry {
		return size, sweptBlock
	}
	if err := bc.Delete(ctx, d, b.ID); err != nil && !errors.Is(err, drive.ErrNotFound) {
		e.Log().Warn("collect: cannot delete orphan block", "drive", d.String(), "block", b.ID.String(), "err", err)
		return 0, keptOnError
	}
	e.Log().Debug("collect: swept orphan block", "drive", d.String(), "block", b.ID.String(), "owner", hdr.Owner, "stripe", hdr.Stripe, "bytes", size)
	return size, sweptBlock
}

// referenced reports whether the stripe the header names lists this drive
// and block among its units. A missing owner means unreferenced; any other
// error is returned (the caller keeps the block).
func referenced(ctx context.Context, m *meta.Meta, d drive.ID, hdr drive.BlockHeader) (bool, error) {
	ss, err := m.GetStripes(ctx, meta.LIN(hdr.Owner), hdr.Stripe, 1)
	if errors.Is(err, meta.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if len(ss) == 0 || ss[0].Index != hdr.Stripe {
		return false, nil
	}
	for _, u := range ss[0].Units {
		if u.Drive == meta.DriveID(d) && u.Block == meta.BlockID(hdr.ID) {
			return true, nil
		}
	}
	return false, nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// queuePhase drains the delete queue: one task, one item, per drive.
type queuePhase struct{ c *collect }

func (*queuePhase) Name() string { return "queue" }

func (p *queuePhase) Split(ctx context.Context, env job.Env, j *job.Job) ([]job.TaskSpec, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	ds, err := p.c.splitDrives(ctx, e)
	if err != nil {
		return nil, err
	}
	var out []job.TaskSpec
	for _, d := range ds {
		out = append(out, job.TaskSpec{Scope: d.ID.String(), From: 0, To: 1})
	}
	return out, nil
}

func (*queuePhase) Items(_ context.Context, _ job.Env, _ string, from, to uint64, _ int) ([]uint64, error) {
	return oneItem(from, to), nil
}

// oneItem is Items of a phase whose tasks are the single item 0.
func oneItem(from, to uint64) []uint64 {
	if from == 0 && to > 0 {
		return []uint64{0}
	}
	return nil
}

// queueBatch is the number of queue entries read and acknowledged at once.
const queueBatch = 256

func (p *queuePhase) Process(ctx context.Context, env job.Env, j *job.Job, scope string, _ uint64) (job.ItemResult, error) {
	e, err := envOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	d, err := scopeDrive(scope)
	if err != nil {
		return job.ItemResult{}, err
	}
	dry := j.Params["dry-run"] == "true"
	var res job.ItemResult
	var bc blockClient
	var after meta.BlockID
	for ctx.Err() == nil {
		q, err := e.Meta().ListDeletes(ctx, meta.DriveID(d), after, queueBatch)
		if err != nil {
			return res, err
		}
		if len(q) == 0 {
			break
		}
		after = q[len(q)-1].Block
		res.Items += int64(len(q))
		if dry {
			for _, x := range q {
				res.Bytes += int64(x.Length)
			}
			continue
		}
		if bc == nil {
			node, err := p.c.nodes.of(ctx, e, d, "collect")
			if err != nil {
				return res, err
			}
			c, err := e.Blocks(ctx, node)
			if err != nil {
				return res, err
			}
			bc = c
		}
		var done []meta.DeleteEntry
		for _, x := range q {
			err := bc.Delete(ctx, d, drive.BlockID(x.Block))
			if err != nil && !errors.Is(err, drive.ErrNotFound) {
				res.Errors++ // stays queued for the next run or the node's drainer
				e.Log().Warn("collect: cannot delete queued block", "drive", d.String(), "block", drive.BlockID(x.Block).String(), "err", err)
				continue
			}
			res.Bytes += int64(x.Length)
			done = append(done, x)
		}
		if err := e.Meta().AckDeletes(ctx, done); err != nil {
			return res, err
		}
	}
	if res.Items > 0 {
		res.Note = fmt.Sprintf("%v: %d queued deletes, %s freed, %d left on errors", d, res.Items-res.Errors, mib(res.Bytes), res.Errors)
		if dry {
			res.Note = fmt.Sprintf("%v: %d queued deletes, %s (dry run: not deleted)", d, res.Items, mib(res.Bytes))
		}
	}
	return res, ctx.Err()
}

// orphanPhase purges unlinked inodes that no session holds open.
type orphanPhase struct{}

func (*orphanPhase) Name() string { return "orphans" }

func (*orphanPhase) Split(context.Context, job.Env, *job.Job) ([]job.TaskSpec, error) {
	return []job.TaskSpec{{Scope: "", From: 0, To: 1}}, nil
}

func (*orphanPhase) Items(_ context.Context, _ job.Env, _ string, from, to uint64, _ int) ([]uint64, error) {
	return oneItem(from, to), nil
}

func (*orphanPhase) Process(ctx context.Context, env job.Env, j *job.Job, _ string, _ uint64) (job.ItemResult, error) {
	e, err := envOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	dry := j.Params["dry-run"] == "true"
	var res job.ItemResult
	var purged, busy int64
	var after meta.LIN
	for ctx.Err() == nil {
		os, err := e.Meta().ListOrphans(ctx, after, queueBatch)
		if err != nil {
			return res, err
		}
		if len(os) == 0 {
			break
		}
		after = os[len(os)-1].LIN
		for _, o := range os {
			res.Items++
			if dry {
				continue
			}
			switch err := e.Meta().Purge(ctx, o.LIN); {
			case errors.Is(err, meta.ErrBusy):
				busy++ // still open: its last close deletes it
			case err != nil:
				return res, fmt.Errorf("collect: purge LIN %d: %w", o.LIN, err)
			default:
				purged++
			}
		}
	}
	if res.Items > 0 {
		res.Note = fmt.Sprintf("%d orphan inodes purged, %d still open", purged, busy)
		if dry {
			res.Note = fmt.Sprintf("%d orphan inodes (dry run: not purged)", res.Items)
		}
	}
	return res, ctx.Err()
}
