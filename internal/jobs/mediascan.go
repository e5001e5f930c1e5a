package jobs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// MediaScan returns the mediascan job type: a drive scan run on the node
// that serves each drive. Two phases:
//
//   - scan: one or more tasks per drive in service and up (parameter
//     "drives", e.g. "d3,d7", limits the scan to those drives), pinned to
//     the drive's node (job.TaskSpec.Node), over the drive's block-key
//     space (the first 8 bytes of block ids). Each item is one block,
//     verified through the local block service's Verify (the node reads
//     the block whole and checks every segment CRC; no data crosses the
//     network). A block that fails is verified again up to
//     mediaRereads times: if a re-read passes, the failure is counted as
//     transient; if none does, the block is bad: its header (Stat) names
//     the owner LIN and stripe; if the stripe map still references this
//     drive and block, the stripe is restriped copy-on-write with that
//     unit rebuilt from the others, away from the drive if the pool allows
//     (Restriper.RepairDamaged; the commit queues the bad block for
//     deletion); a block the map no longer references is an orphan, left
//     to collect. A block whose header does not read, or whose stripe
//     cannot be rebuilt (too few other units), is unfixable: logged with
//     its block id, and noted; a stripe with too few units left for good
//     goes to the lost-data list (a data-lost event for a file new to
//     it), counted as "lost".
//   - summary: one item that formats a per-drive table (blocks scanned,
//     MiB read, bad, fixed, transient, unfixable, orphaned, and the node
//     the drive's tasks ran on) into the phase report's Summary, followed
//     by the lost-data list when it is not empty.
//
// How the summary gets the scan's counts: each scan item returns its
// counts as named counters (job.ItemResult.Counts: "scanned", "bad",
// "fixed", "transient", "unfixable", "orphaned"); the engine keeps them in
// the task's checkpoint and, when the scan phase ends, sums them per scope
// (per drive) into the scan's report (job.PhaseReport.Scopes, with the
// nodes that ran each scope). The summary phase reads that report
// (job.Job.Reports) and writes the table. So the counts are exactly as
// durable as the scan's checkpoints, and no extra keys are kept. As with
// every counter of the engine, an item processed again after a crash
// counts twice (a block fixed, then scanned again before the delete queue
// removed it, counts the second time as an orphan); a steal never repeats
// an item (it splits past what the task's holder has reserved).
//
// The type belongs to the restripe exclusion set; defaults: priority 8,
// policy low. A drive that is down is skipped (repair handles it); a
// task's node that goes down mid-scan leaves the task waiting until the
// node is back (the engine never runs a pinned task elsewhere).
func MediaScan() job.Type { return newMediaScan(clusterDrives) }

// mediaRereads is how many times a block that failed verification is
// verified again before it is declared bad.
const mediaRereads = 3

// Names of the scan's counters (job.ItemResult.Counts).
const (
	countScanned   = "scanned"
	countBad       = "bad"
	countFixed     = "fixed"
	countTransient = "transient"
	countUnfixable = "unfixable"
	countOrphaned  = "orphaned"
)

// scanBlocks is what the scan uses of a node's block service.
type scanBlocks interface {
	blockLister
	Verify(ctx context.Context, d drive.ID, id drive.BlockID) error
	Stat(ctx context.Context, d drive.ID, id drive.BlockID) (drive.BlockHeader, int64, time.Time, error)
}

// damagedRepairer rebuilds one damaged unit (Restriper.RepairDamaged).
type damagedRepairer func(ctx context.Context, e Env, lin meta.LIN, index uint64, d meta.DriveID, block meta.BlockID, why string) (restripe.RepairResult, error)

// mediaScan is the mediascan job type. drives lists the drives in service
// (the control plane; tests pass their own); blocks returns the block
// service of a node and repair rebuilds a unit (the node's; tests wrap
// them to inject faults).
type mediaScan struct {
	drives driveLister
	nodes  *driveNodes
	blocks func(ctx context.Context, e Env, node string) (scanBlocks, error)
	repair damagedRepairer
	phases []job.Phase
}

func newMediaScan(drives driveLister) *mediaScan {
	m := &mediaScan{drives: drives, nodes: newDriveNodes(drives),
		blocks: func(ctx context.Context, e Env, node string) (scanBlocks, error) { return e.Blocks(ctx, node) },
		repair: func(ctx context.Context, e Env, lin meta.LIN, index uint64, d meta.DriveID, block meta.BlockID, why string) (restripe.RepairResult, error) {
			return e.Restriper().RepairDamaged(ctx, lin, index, d, block, why)
		}}
	m.phases = []job.Phase{&mediaScanPhase{m}, &mediaSummaryPhase{}}
	return m
}

var (
	_ job.Defaulter         = (*mediaScan)(nil)
	_ job.ScheduleDefaulter = (*mediaScan)(nil)
	_ job.ParamChecker      = (*mediaScan)(nil)
)

func (*mediaScan) Name() string          { return "mediascan" }
func (*mediaScan) Set() job.ExclusionSet { return job.SetRestripe }
func (m *mediaScan) Phases() []job.Phase { return m.phases }

// Defaults: a media scan is slow background hygiene: priority 8, low.
func (*mediaScan) Defaults() (int, string) { return 8, "low" }

// DefaultMediaScanSchedule is when a cluster scans its media unless an
// administrator changes it: 02:00 UTC on the 1st of each month. Monthly
// finds a failing sector long before a second failure in the same
// stripe is likely, and a full scan of a large drive takes days at low
// impact, so a shorter period would keep a scan always running.
const DefaultMediaScanSchedule = "0 2 1 * *"

// DefaultSchedule: monthly (DefaultMediaScanSchedule).
func (*mediaScan) DefaultSchedule() string { return DefaultMediaScanSchedule }

// CheckParams validates "drives" (d<N>[,d<N>...], optional); errors wrap
// job.ErrInvalid.
func (*mediaScan) CheckParams(p map[string]string) error {
	_, err := mediaDrives(p)
	return err
}

// mediaDrives returns the drives the "drives" parameter names, nil for
// all.
func mediaDrives(p map[string]string) (map[meta.DriveID]bool, error) {
	v, ok := p["drives"]
	if !ok {
		return nil, nil
	}
	ds, err := parseDrives(v)
	if err != nil {
		return nil, fmt.Errorf("mediascan (leave drives out to scan every drive): %w", err)
	}
	return ds, nil
}

type mediaScanPhase struct{ m *mediaScan }

func (*mediaScanPhase) Name() string { return "scan" }

// Split makes job.Parallelism/drives tasks (at least one) per drive up and
// in service, pinned to its node. A drive named by "drives" that is not in
// service fails the job; one that is down is skipped with a log line.
func (p *mediaScanPhase) Split(ctx context.Context, env job.Env, j *job.Job) ([]job.TaskSpec, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	want, err := mediaDrives(j.Params)
	if err != nil {
		return nil, err
	}
	all, err := p.m.drives(ctx, e)
	if err != nil {
		return nil, err
	}
	known := map[meta.DriveID]bool{}
	var ds []serviceDrive
	for _, d := range all {
		known[meta.DriveID(d.ID)] = true
		if want != nil && !want[meta.DriveID(d.ID)] {
			continue
		}
		if !d.Up {
			e.Log().Warn("mediascan: skipping a down drive (repair handles it)", "drive", d.ID.String(), "node", d.Node)
			continue
		}
		ds = append(ds, d)
	}
	for d := range want {
		if !known[d] {
			return nil, fmt.Errorf("%w: mediascan drives: drive %v is not in service: see weft drive list", job.ErrInvalid, drive.ID(d))
		}
	}
	if len(ds) == 0 {
		return nil, nil
	}
	per := max(1, (j.Parallelism+len(ds)-1)/len(ds))
	var out []job.TaskSpec
	for _, d := range ds {
		for _, t := range job.SplitRange(d.ID.String(), 0, math.MaxUint64, per) {
			t.Node = d.Node
			out = append(out, t)
		}
	}
	return out, nil
}

// local returns drive scope's id and the block service of its node, which
// is this node when the engine honours the task's affinity.
func (p *mediaScanPhase) local(ctx context.Context, e Env, scope string) (drive.ID, string, scanBlocks, error) {
	d, err := scopeDrive(scope)
	if err != nil {
		return 0, "", nil, err
	}
	node, err := p.m.nodes.of(ctx, e, d, "mediascan")
	if err != nil {
		return 0, "", nil, err
	}
	if node != e.Node() {
		e.Log().Warn("mediascan: scanning a drive of another node over the network", "drive", d.String(), "drive_node", node, "node", e.Node())
	}
	bc, err := p.m.blocks(ctx, e, node)
	if err != nil {
		return 0, "", nil, err
	}
	return d, node, bc, nil
}

func (p *mediaScanPhase) Items(ctx context.Context, env job.Env, scope string, from, to uint64, limit int) ([]uint64, error) {
	e, err := envOf(env)
	if err != nil {
		return nil, err
	}
	d, node, bc, err := p.local(ctx, e, scope)
	if err != nil {
		return nil, err
	}
	return blockItems(ctx, bc, d, node, from, to, limit)
}

// The scan's item keys are block keys (keyOf: the first 8 bytes of the
// block id), one item per block, so that a task boundary or a steal never
// has a block verified twice (collect's buckets would re-read a bucket's
// head on both sides of a cut: harmless for a sweep, but a scan would read
// it twice and count it twice). Two blocks of a drive sharing their first
// 8 bytes (random ids: one chance in 2^64 per pair) are one item, both
// verified.

// blockItems lists the distinct block keys of drive d within [from, to),
// up to limit.
func blockItems(ctx context.Context, bc blockLister, d drive.ID, node string, from, to uint64, limit int) ([]uint64, error) {
	return driveKeys(ctx, bc, d, node, from, to, limit, min(listPage, limit+1), func(k uint64) uint64 { return k })
}

// eachWithKey calls fn for each block of drive d whose key is k (one, but
// for a 1 in 2^64 collision of the first 8 bytes).
func eachWithKey(ctx context.Context, bc blockLister, d drive.ID, node string, k uint64, fn func(drive.BlockInfo) error) error {
	return eachBlock(ctx, bc, d, node, k, k, 4, fn)
}

// Process verifies the block(s) of one key. Errors are returned (and
// retried by the engine) only when the scan itself cannot proceed (the
// block service or the namespace does not answer); bad blocks are
// findings, in the counters.
func (p *mediaScanPhase) Process(ctx context.Context, env job.Env, j *job.Job, scope string, item uint64) (job.ItemResult, error) {
	e, err := envOf(env)
	if err != nil {
		return job.ItemResult{}, err
	}
	d, node, bc, err := p.local(ctx, e, scope)
	if err != nil {
		return job.ItemResult{}, err
	}
	res := job.ItemResult{Counts: map[string]int64{}}
	err = eachWithKey(ctx, bc, d, node, item, func(b drive.BlockInfo) error {
		return p.scanBlock(ctx, e, j, bc, d, b, &res)
	})
	if err != nil {
		return res, fmt.Errorf("mediascan: %w", err)
	}
	res.Items = res.Counts[countScanned]
	res.Errors = res.Counts[countBad]
	for k, v := range res.Counts {
		if v == 0 {
			delete(res.Counts, k)
		}
	}
	return res, ctx.Err()
}

// scanBlock verifies block b of drive d, re-reads it on failure and
// restripes its stripe away from it when it stays bad.
func (p *mediaScanPhase) scanBlock(ctx context.Context, e Env, j *job.Job, bc scanBlocks, d drive.ID, b drive.BlockInfo, res *job.ItemResult) error {
	err := bc.Verify(ctx, d, b.ID)
	switch {
	case err == nil:
		res.Counts[countScanned]++
		res.Bytes += b.Size
		return nil
	case errors.Is(err, drive.ErrNotFound):
		return nil // deleted meanwhile
	case !errors.Is(err, drive.ErrCorrupt) || ctx.Err() != nil:
		return fmt.Errorf("verify block %v on drive %v: %w", b.ID, d, err)
	}
	res.Counts[countScanned]++
	res.Bytes += b.Size
	first := err
	for range mediaRereads {
		err = bc.Verify(ctx, d, b.ID)
		res.Bytes += b.Size
		if err == nil {
			res.Counts[countTransient]++
			e.Log().Warn("mediascan: block failed verification once, then read correctly", "drive", d.String(), "block", b.ID.String(), "err", first)
			res.Note = fmt.Sprintf("%v block %v: transient checksum failure (%v)", d, b.ID, first)
			return nil
		}
		if errors.Is(err, drive.ErrNotFound) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	// A block already queued for deletion was replaced (by a write, a
	// restripe, or this job when it fixed the block on an earlier pass
	// over the same item before a crash): nothing reads it any more.
	if q, err := queuedForDeletion(ctx, e.Meta(), meta.DriveID(d), meta.BlockID(b.ID)); err != nil {
		return fmt.Errorf("look up bad block %v of drive %v in the delete queue: %w", b.ID, d, err)
	} else if q {
		e.Log().Debug("mediascan: bad block already queued for deletion", "drive", d.String(), "block", b.ID.String())
		return nil
	}
	res.Counts[countBad]++
	why := fmt.Sprintf("mediascan: %v after %d re-reads", first, mediaRereads)
	hdr, _, _, err := bc.Stat(ctx, d, b.ID)
	var torn *drive.CorruptError
	switch {
	case errors.Is(err, drive.ErrNotFound):
		res.Counts[countBad]--
		return nil
	case errors.As(err, &torn) && torn.Torn():
		res.Counts[countOrphaned]++
		e.Log().Warn("mediascan: block never written to the disk (a write cut short by a machine crash, which nothing names): left to collect",
			"drive", d.String(), "block", b.ID.String())
		res.Note = fmt.Sprintf("%v block %v: never written to the disk (orphan, left to collect)", d, b.ID)
		return nil
	case errors.Is(err, drive.ErrCorrupt):
		res.Counts[countUnfixable]++
		e.Log().Error("mediascan: bad block with an unreadable header: its owner is unknown, nothing to restripe (collect will not remove it either; a later integrityscan finds the file's missing unit)",
			"drive", d.String(), "block", b.ID.String(), "err", err)
		res.Note = fmt.Sprintf("%v block %v: unfixable, header unreadable", d, b.ID)
		return nil
	case err != nil:
		return fmt.Errorf("read the header of bad block %v on drive %v: %w", b.ID, d, err)
	}
	ref, err := referenced(ctx, e.Meta(), d, hdr)
	if err != nil {
		return fmt.Errorf("read the stripe map of bad block %v on drive %v (LIN %d stripe %d): %w", b.ID, d, hdr.Owner, hdr.Stripe, err)
	}
	if !ref {
		res.Counts[countOrphaned]++
		e.Log().Warn("mediascan: bad block no stripe references: left to collect", "drive", d.String(), "block", b.ID.String(), "owner", hdr.Owner, "stripe", hdr.Stripe)
		res.Note = fmt.Sprintf("%v block %v: bad but unreferenced (orphan, left to collect)", d, b.ID)
		return nil
	}
	rr, err := p.m.repair(ctx, e, meta.LIN(hdr.Owner), hdr.Stripe, meta.DriveID(d), meta.BlockID(b.ID), why)
	switch {
	case errors.Is(err, meta.ErrNotFound):
		res.Counts[countOrphaned]++ // the file went away meanwhile
		return nil
	case errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrCorrupt):
		res.Counts[countUnfixable]++
		e.Log().Error("mediascan: cannot rebuild a bad block's unit", "drive", d.String(), "block", b.ID.String(), "owner", hdr.Owner, "stripe", hdr.Stripe, "err", err)
		res.Note = fmt.Sprintf("%v block %v: unfixable (LIN %d stripe %d): %v", d, b.ID, hdr.Owner, hdr.Stripe, err)
		var lost *restripe.LostError
		if errors.As(err, &lost) {
			return recordLost(ctx, e, j, lost.LIN, []meta.LostStripe{lost.Stripe}, res)
		}
		return nil
	case err != nil:
		return fmt.Errorf("restripe LIN %d stripe %d away from bad block %v on drive %v: %w", hdr.Owner, hdr.Stripe, b.ID, d, err)
	}
	switch {
	case rr.Committed && !rr.StillUnderProtected:
		res.Counts[countFixed]++
		e.Log().Warn("mediascan: bad block rebuilt elsewhere", "drive", d.String(), "block", b.ID.String(), "owner", hdr.Owner, "stripe", hdr.Stripe, "units", fmt.Sprint(rr.Units))
		res.Note = fmt.Sprintf("%v block %v: bad, LIN %d stripe %d restriped", d, b.ID, hdr.Owner, hdr.Stripe)
	case rr.NothingToDo:
		res.Counts[countOrphaned]++ // the stripe moved off the block meanwhile
	default:
		res.Counts[countUnfixable]++
		e.Log().Error("mediascan: bad block's unit left in place", "drive", d.String(), "block", b.ID.String(), "owner", hdr.Owner, "stripe", hdr.Stripe, "reason", rr.Reason)
		res.Note = fmt.Sprintf("%v block %v: unfixable (LIN %d stripe %d): %s", d, b.ID, hdr.Owner, hdr.Stripe, rr.Reason)
	}
	return nil
}

// mediaSummaryPhase writes the per-drive table from the scan's report.
type mediaSummaryPhase struct{ singleTask }

func (*mediaSummaryPhase) Name() string { return "summary" }

func (*mediaSummaryPhase) Process(ctx context.Context, env job.Env, j *job.Job, _ string, _ uint64) (job.ItemResult, error) {
	var scan *job.PhaseReport
	for i := range j.Reports {
		if j.Reports[i].Name == "scan" {
			scan = &j.Reports[i]
		}
	}
	if scan == nil {
		return job.ItemResult{}, fmt.Errorf("mediascan: summary: no scan report among the job's %d earlier phases", len(j.Reports))
	}
	sum, note := mediaSummary(scan.Scopes)
	if e, ok := env.(Env); ok {
		lost, lostNote, err := lostSummary(ctx, e.Meta(), j.Created)
		if err != nil {
			return job.ItemResult{}, err
		}
		if lost != "" {
			sum += "\nlost data:\n" + lost
			note += "; " + lostNote
		}
	}
	env.Log().Info("mediascan summary", "job", j.ID, "totals", note)
	return job.ItemResult{Items: 1, Note: note, Summary: sum}, nil
}

// mediaSummary formats the per-drive table and a one-line total.
func mediaSummary(scopes []job.ScopeReport) (table, total string) {
	rows := append([]job.ScopeReport(nil), scopes...)
	sort.SliceStable(rows, func(a, b int) bool {
		da, ea := scopeDrive(rows[a].Scope)
		db, eb := scopeDrive(rows[b].Scope)
		if ea != nil || eb != nil {
			return rows[a].Scope < rows[b].Scope
		}
		return da < db
	})
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "DRIVE\tNODE\tSCANNED\tMIB\tBAD\tFIXED\tTRANSIENT\tUNFIXABLE\tORPHANED")
	var t job.ScopeReport
	t.Counts = map[string]int64{}
	for _, s := range rows {
		c := s.Counts
		fmt.Fprintf(w, "%s\t%s\t%d\t%.1f\t%d\t%d\t%d\t%d\t%d\n", s.Scope, strings.Join(s.Nodes, ","),
			c[countScanned], float64(s.Bytes)/(1<<20), c[countBad], c[countFixed], c[countTransient], c[countUnfixable], c[countOrphaned])
		t.Bytes += s.Bytes
		for k, v := range c {
			t.Counts[k] += v
		}
	}
	c := t.Counts
	fmt.Fprintf(w, "total\t\t%d\t%.1f\t%d\t%d\t%d\t%d\t%d\n",
		c[countScanned], float64(t.Bytes)/(1<<20), c[countBad], c[countFixed], c[countTransient], c[countUnfixable], c[countOrphaned])
	w.Flush()
	total = fmt.Sprintf("%d drives, %d blocks: %d bad, %d fixed, %d transient, %d unfixable, %d orphaned",
		len(rows), c[countScanned], c[countBad], c[countFixed], c[countTransient], c[countUnfixable], c[countOrphaned])
	return b.String(), total
}

// queuedForDeletion reports whether block id of drive d is in the delete
// queue.
func queuedForDeletion(ctx context.Context, m *meta.Meta, d meta.DriveID, id meta.BlockID) (bool, error) {
	after := id // the id just before: the queue lists ids after it
	for i := len(after) - 1; i >= 0; i-- {
		after[i]--
		if after[i] != 0xff {
			break
		}
	}
	q, err := m.ListDeletes(ctx, d, after, 1)
	if err != nil {
		return false, err
	}
	return len(q) == 1 && q[0].Block == id, nil
}
