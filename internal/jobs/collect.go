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
//   - queue: waits until the delete queue (blocks unreferenced by a
//     commit) of each drive in service is drained by the drive's node,
//     whose drainer worker is the queue's one drainer, and reports what
//     was freed.
//   - orphans: unlinked inodes no session holds open are purged; those
//     still open (meta.ErrBusy) are counted and kept.
//
// With "dry-run=true" nothing is deleted or purged; the report says what
// would be. The type belongs to the mark exclusion set and frees space, so
// it keeps running in low-space mode.
//
// Safety: a block is deleted only if its stripe map, read after the block
// was found old enough, does not reference it — or, older than the grace
// period, it was never written to the disk (empty, or zeros where its
// header goes: a write cut short by a machine crash, see sweepTorn).
// In-flight writes commit their stripes after their puts, within the
// grace period, so a block being written is never a candidate; a stripe
// commit can only reuse a block the committed map references, which the
// sweep keeps. When the map cannot be read, the block is kept and the
// error counted.
func Collect() job.Type { return newCollect(clusterDrives) }

func newCollect(drives driveLister) *collect {
	c := &collect{drives: drives, nodes: newDriveNodes(drives), now: time.Now, wait: waitCtx}
	c.phases = []job.Phase{&sweepPhase{c}, &queuePhase{c}, &orphanPhase{}}
	return c
}

// collect is the collect job type; drives is how it finds the drives in
// service (the control plane; tests pass their own), now its clock (the
// grace period's and the queue phase's reference; tests move it), wait
// how the queue phase waits between looks at a queue (tests drain the
// queue or move the clock instead).
type collect struct {
	drives driveLister
	nodes  *driveNodes
	now    func() time.Time
	wait   func(ctx context.Context, d time.Duration) error
	phases []job.Phase
}

// waitCtx waits d, or until ctx ends (its error).
func waitCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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

// blockClient is what the sweep phase uses of a block client.
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
	var torn *drive.CorruptError
	switch {
	case errors.Is(err, drive.ErrNotFound):
		return 0, keptBlock // deleted meanwhile
	case errors.As(err, &torn) && torn.Torn():
		return p.sweepTorn(ctx, e, bc, d, b, dry)
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

// sweepTorn deletes block b of drive d, older than the grace period,
// which was never written to the disk (drive.CorruptError.Torn): a write
// a machine crash cut short, whose bytes were still in the page cache
// (units staged unsynced are synced before any commit names them). Its
// header is gone, so its stripe map cannot be asked; nothing can be read
// from it either way. It is logged, as a warning, with the bytes freed.
func (p *sweepPhase) sweepTorn(ctx context.Context, e Env, bc blockClient, d drive.ID, b drive.BlockInfo, dry bool) (int64, verdict) {
	if dry {
		return b.Size, sweptBlock
	}
	if err := bc.Delete(ctx, d, b.ID); err != nil && !errors.Is(err, drive.ErrNotFound) {
		e.Log().Warn("collect: cannot delete a block never written to the disk", "drive", d.String(), "block", b.ID.String(), "err", err)
		return 0, keptOnError
	}
	e.Log().Warn("collect: deleted a block never written to the disk (empty, or zeros where its header goes: a write cut short by a machine crash)",
		"drive", d.String(), "block", b.ID.String(), "bytes", b.Size)
	return b.Size, sweptBlock
}

// referenced reports whether the stripe the header names lists this drive
// and block among its units. A missing owner means unreferenced; any other
// error is returned (the caller keeps the block).
func referenced(ctx context.Context, m *meta.Meta, d drive.ID, hdr drive.BlockHeader) (bool, error) {
	ss, err := meta.BlockStripes(m).GetStripes(ctx, meta.LIN(hdr.Owner), hdr.Stripe, 1)
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

// queuePhase waits for the nodes to drain the delete queue: one task, one
// item, per drive.
//
// The node serving a drive is the one drainer of its queue (its "drainer"
// worker, package server): a queued block is a local file delete there,
// freed within about a second of the commit that queued it, whether or
// not collect ever runs. The phase does not delete blocks itself (two
// drainers of one queue would only race each other); it waits for the
// drainer, so that a collect (or the collect half of a multiscan) ends
// with the space of what was queued when it reached the phase freed.
type queuePhase struct{ c *collect }

// Tunables of the queue phase.
const (
	// queuePoll is how often it looks at a queue being drained.
	queuePoll = 250 * time.Millisecond
	// queueStall is how long a queue's head may stay put before the phase
	// stops waiting (the node is down or its drainer fails: weft node
	// workers shows why); what is left stays queued for the drainer.
	queueStall = 30 * time.Second
	// queueWaitMax bounds the wait for one drive's queue, which a steady
	// stream of deletes may keep from ever being empty.
	queueWaitMax = 10 * time.Minute
)

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

// singleTask makes a phase one task of the single item 0 (a plan, a
// queue wait, a summary, a report): a phase embeds it for its Split and
// Items, and writes only Name and Process.
type singleTask struct{ scope string }

// Split returns the one task, of scope s.scope.
func (s singleTask) Split(context.Context, job.Env, *job.Job) ([]job.TaskSpec, error) {
	return []job.TaskSpec{{Scope: s.scope, From: 0, To: 1}}, nil
}

// Items lists item 0 while it is in [from, to).
func (singleTask) Items(_ context.Context, _ job.Env, _ string, from, to uint64, _ int) ([]uint64, error) {
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

// Process counts drive d's queue (Items entries of Bytes), then waits
// until its node's drainer has emptied it; with "dry-run=true" it only
// counts. It stops waiting when the queue's head has not moved for
// queueStall or after queueWaitMax, and counts the entries left (at most
// Items) as Errors: they stay queued for the drainer.
func (p *queuePhase) Process(ctx context.Context, env job.Env, j *job.Job, scope string, _ uint64) (job.ItemResult, error) {
	e, err := envOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	d, err := scopeDrive(scope)
	if err != nil {
		return job.ItemResult{}, err
	}
	var res job.ItemResult
	res.Items, res.Bytes, err = countQueue(ctx, e.Meta(), meta.DriveID(d))
	if err != nil || res.Items == 0 {
		return res, err
	}
	if j.Params["dry-run"] == "true" {
		res.Note = fmt.Sprintf("%v: %d queued deletes, %s (dry run: not waited for)", d, res.Items, mib(res.Bytes))
		return res, nil
	}
	start := p.c.now()
	moved, head := start, meta.BlockID{}
	for {
		q, err := e.Meta().ListDeletes(ctx, meta.DriveID(d), meta.BlockID{}, 1)
		if err != nil {
			return res, err
		}
		if len(q) == 0 {
			break
		}
		now := p.c.now()
		if q[0].Block != head {
			head, moved = q[0].Block, now
		}
		if now.Sub(moved) >= queueStall || now.Sub(start) >= queueWaitMax {
			left, _, err := countQueue(ctx, e.Meta(), meta.DriveID(d))
			if err != nil {
				return res, err
			}
			res.Errors = min(left, res.Items)
			e.Log().Warn("collect: the delete queue of a drive is not drained; what is left stays queued for its node's drainer (see weft node workers)",
				"drive", d.String(), "left", left, "waited", now.Sub(start).Round(time.Second))
			break
		}
		if err := p.c.wait(ctx, queuePoll); err != nil {
			return res, err
		}
	}
	res.Note = fmt.Sprintf("%v: %d queued deletes, %s freed by the node's drainer", d, res.Items, mib(res.Bytes))
	if res.Errors > 0 {
		res.Note = fmt.Sprintf("%v: %d queued deletes of %s, %d left queued for the node's drainer", d, res.Items, mib(res.Bytes), res.Errors)
	}
	return res, nil
}

// countQueue returns the entries of drive d's delete queue and their bytes.
func countQueue(ctx context.Context, m *meta.Meta, d meta.DriveID) (n, bytes int64, err error) {
	var after meta.BlockID
	for {
		q, err := m.ListDeletes(ctx, d, after, queueBatch)
		if err != nil {
			return n, bytes, err
		}
		for _, x := range q {
			n++
			bytes += int64(x.Length)
		}
		if len(q) < queueBatch {
			return n, bytes, nil
		}
		after = q[len(q)-1].Block
	}
}

// orphanPhase purges unlinked inodes that no session holds open.
type orphanPhase struct{ singleTask }

func (*orphanPhase) Name() string { return "orphans" }

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
