package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/policy"
	"github.com/weftfs/weft/internal/runner"
)

// DefaultRepairGrace is how long a drive (or its node) may be down before
// a repair job re-protects its data: long enough to ride out a reboot, short
// enough to limit the window with reduced protection.
const DefaultRepairGrace = 10 * time.Minute

const (
	// balanceInterval is how often the coordinator compares the drives
	// of each pool (and right after a drive or node was added).
	balanceInterval = 30 * time.Second
	// rebalanceCooldown is how long after a rebalance it started for a
	// pool ended the coordinator waits before it starts another one for
	// the same pool: a pool a rebalance could not even out (a drive much
	// smaller than the others, files pinned by policy) must not get a new
	// job every balanceInterval.
	rebalanceCooldown = 10 * time.Minute
)

// Config wires a Watcher.
type Config struct {
	Store *cluster.Store
	Jobs  *job.Engine
	// Allocated returns the bytes the namespace has allocated (its usage
	// counters): a cluster that stores nothing yet gets no multiscan for
	// its nodes' registrations. Nil: judged by the drives alone.
	Allocated func(ctx context.Context) (int64, error)
	// RepairGrace is how long a drive may be down before a repair starts
	// (DefaultRepairGrace when 0).
	RepairGrace time.Duration
	// Protection reads the namespace's protection index (stripes below
	// their pool's protection), for the under-protected check; nil: no
	// such check.
	Protection func(ctx context.Context) (Protection, error)
	Log        *slog.Logger
	// Now is the clock (time.Now when nil); tests drive it.
	Now func() time.Time
}

// Interval is how often the events worker checks.
func Interval(grace time.Duration) time.Duration { return min(grace/4+time.Second, 5*time.Second) }

// Step runs every check once if this node is the coordinator, and forgets
// the in-memory state if it is not.
func (w *Watcher) Step(ctx context.Context) (runner.State, error) {
	if !w.cfg.Jobs.IsCoordinator() {
		w.reset()
		return runner.Idle, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.check(ctx, w.cfg.Now()); err != nil {
		return runner.Idle, fmt.Errorf("events: %w", err)
	}
	return runner.Idle, nil
}

// New returns the Watcher of a node; run it as a worker of the node's
// runner, Interval(cfg.RepairGrace) apart.
func New(cfg Config) *Watcher {
	if cfg.RepairGrace <= 0 {
		cfg.RepairGrace = DefaultRepairGrace
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Watcher{cfg: cfg}
}

var _ runner.Worker = (*Watcher)(nil)

// Watcher is the node's "events" worker: it turns cluster events into
// jobs, on the coordinator's node only, and records each in the job
// engine's event log (weft job events list):
//
//   - a drive in service down for longer than the repair grace period
//     starts a repair job at priority 1, unless one is already queued or
//     running;
//   - a drive id or node name the cluster had not seen starts a multiscan
//     job, unless one is already queued (a cluster's first watch only
//     learns what exists), the cluster stores no data, or every new drive
//     joined before it did (cluster.DriveRecord.JoinedEmpty: the drives of
//     a new cluster, written to before the first watch) — a node alone
//     brings nothing to spread onto;
//   - a pool whose drives' used fractions spread more than the
//     rebalance_threshold setting starts a rebalance job for the pool,
//     unless a rebalance of it or a multiscan is queued or running;
//   - a pool below the low_space_threshold setting (percent free) turns
//     the engine's low-space mode on; it ends when every pool is back at
//     the threshold plus one point;
//   - stripes below their pool's protection (written while drives or
//     nodes were down) start a repair when drives come back, or when new
//     ones appear while every drive is up (see checkProtection).
//
// One step runs every check once (Interval apart, failed or not).
// What it must remember across coordinator changes (drives and nodes
// seen, down-since times) is in cluster.WatchRecord; which outcome it last
// recorded for a drive or pool is in memory, so a new coordinator may
// record a still-unbalanced pool once more.
type Watcher struct {
	cfg Config

	loaded bool
	rec    cluster.WatchRecord
	rev    int64
	dirty  bool

	// reported is what was last recorded per subject ("d7", "pool
	// default"): the job the event named, or its outcome when it named
	// none. The same again is not recorded.
	reported map[string]string
	// rebalanced is the last rebalance job started per pool.
	rebalanced  map[string]job.JobID
	lastBalance time.Time
	// jobs is this check's job list, read at most once per check.
	jobs []job.JobView
	// fired are the pools above their high mark whose pool-threshold
	// event fired (tier.go); pol the installed policy, of polVersion.
	fired      map[string]fired
	pol        *policy.Policy
	polVersion uint64
}

// reset forgets the in-memory state (this node is not, or no longer,
// coordinator).
func (w *Watcher) reset() {
	*w = Watcher{cfg: w.cfg}
}

// check runs every check once.
func (w *Watcher) check(ctx context.Context, now time.Time) error {
	w.jobs = nil
	if w.reported == nil {
		w.reported, w.rebalanced = map[string]string{}, map[string]job.JobID{}
	}
	drives, err := w.cfg.Store.ListDrives(ctx)
	if err != nil {
		return err
	}
	nodes, err := w.cfg.Store.ListNodes(ctx)
	if err != nil {
		return err
	}
	settings, err := w.cfg.Jobs.Settings(ctx)
	if err != nil {
		return err
	}
	if !w.loaded {
		rec, rev, found, err := w.cfg.Store.Watch(ctx)
		if err != nil {
			return err
		}
		w.rec, w.rev, w.loaded = rec, rev, true
		if !found {
			// The first watch of this cluster: what exists now is its
			// initial membership, not an addition.
			w.rec.Remember(drives, nodes)
			w.dirty = true
			w.cfg.Log.Info("event watcher initialised", "drives", len(w.rec.Drives), "nodes", len(w.rec.Nodes))
		}
	}
	var errs []error
	returned, err := w.checkDownDrives(ctx, drives, now)
	errs = append(errs, err)
	errs = append(errs, w.checkProtection(ctx, drives, returned))
	added, err := w.checkAdded(ctx, drives, nodes)
	errs = append(errs, err)
	errs = append(errs, w.checkSpace(ctx, drives, settings.LowSpaceThreshold))
	errs = append(errs, w.checkThresholds(ctx, drives, now))
	if added || now.Sub(w.lastBalance) >= balanceInterval {
		w.lastBalance = now
		errs = append(errs, w.checkBalance(ctx, drives, settings.RebalanceThreshold, now))
	}
	if w.dirty {
		rev, err := w.cfg.Store.SaveWatch(ctx, w.rec, w.rev)
		if err != nil {
			w.loaded = false // read it again next time
			errs = append(errs, err)
		} else {
			w.rev, w.dirty = rev, false
		}
	}
	return errors.Join(errs...)
}

// listJobs returns the jobs, read once per check.
func (w *Watcher) listJobs(ctx context.Context) ([]job.JobView, error) {
	if w.jobs != nil {
		return w.jobs, nil
	}
	jobs, err := w.cfg.Jobs.List(ctx)
	if err != nil {
		return nil, err
	}
	w.jobs = jobs
	return jobs, nil
}

// record adds an event to the log, unless the subject's last event named
// the same job (started, then seen queued and running: one event), or no
// job for the same reason.
func (w *Watcher) record(ctx context.Context, ev job.Event) error {
	key := ev.Outcome
	if ev.Job != 0 {
		key = fmt.Sprintf("job %d", ev.Job)
	}
	if w.reported[ev.Subject] == key {
		return nil
	}
	if _, err := w.cfg.Jobs.RecordEvent(ctx, ev); err != nil {
		return err
	}
	w.reported[ev.Subject] = key
	return nil
}

// submit starts a job for an event, unless cover names a live job that
// already covers it; it returns the job and the event's outcome.
func (w *Watcher) submit(ctx context.Context, typ string, o job.Options, cover func(job.JobView) bool) (job.JobID, string) {
	jobs, err := w.listJobs(ctx)
	if err != nil {
		return 0, "no job: " + err.Error()
	}
	if j, ok := covering(jobs, cover); ok {
		return j.ID, fmt.Sprintf("%s job %d already %s", j.Type, j.ID, stateWords(j.State))
	}
	id, err := w.cfg.Jobs.Submit(ctx, typ, o)
	if err != nil {
		return 0, "no job: " + err.Error()
	}
	w.jobs = nil // the list changed
	return id, fmt.Sprintf("started %s job %d", typ, id)
}

// covering returns the first job cover accepts.
func covering(jobs []job.JobView, cover func(job.JobView) bool) (job.JobView, bool) {
	for _, j := range jobs {
		if cover(j) {
			return j, true
		}
	}
	return job.JobView{}, false
}

// liveOf accepts a job of one of types that has not ended (and is not
// being cancelled).
func liveOf(types ...string) func(job.JobView) bool {
	return func(j job.JobView) bool {
		return slices.Contains(types, j.Type) && !j.State.Terminal() && j.State != job.Cancelling
	}
}

func stateWords(s job.State) string {
	switch s {
	case job.Paused:
		return "paused by a user"
	case job.SystemPaused:
		return "paused by the system"
	}
	return string(s)
}

// checkDownDrives records drives in service going down and starts a repair
// once they stay down past the grace period. Down-since times live in the
// watch record, so a coordinator change does not restart the grace period.
// It returns the drives that were down and are up again.
func (w *Watcher) checkDownDrives(ctx context.Context, drives []cluster.Drive, now time.Time) ([]string, error) {
	grace := w.cfg.RepairGrace
	if w.rec.DownSince == nil {
		w.rec.DownSince = map[string]time.Time{}
	}
	var overdue []cluster.Drive
	down, up := map[string]bool{}, map[string]bool{}
	var errs []error
	for _, d := range drives {
		if d.State == cluster.Up && d.Status != cluster.StatusRemoved {
			up[d.ID.String()] = true
		}
		if d.State == cluster.Up || d.Status == cluster.StatusRemoved {
			continue
		}
		name := d.ID.String()
		down[name] = true
		since, ok := w.rec.DownSince[name]
		if !ok {
			w.rec.DownSince[name], w.dirty = now.UTC(), true
			w.cfg.Log.Warn("drive down; repair starts after the grace period unless it returns", "drive", d.ID, "node", d.Node, "grace", grace)
			errs = append(errs, w.record(ctx, job.Event{Kind: job.EventDriveDown, Subject: name, Detail: downDetail(d), Params: driveParams(d),
				Outcome: fmt.Sprintf("repair due at %s (grace %s) unless it returns", now.Add(grace).UTC().Format(time.RFC3339), grace)}))
			continue
		}
		if now.Sub(since) >= grace {
			overdue = append(overdue, d)
		}
	}
	var returned []string
	for name := range w.rec.DownSince {
		if !down[name] {
			delete(w.rec.DownSince, name) // back up (or removed): start over if it fails again
			delete(w.reported, name)
			w.dirty = true
			if up[name] {
				returned = append(returned, name)
			}
		}
	}
	slices.Sort(returned)
	if len(overdue) == 0 {
		return returned, errors.Join(errs...)
	}
	var names []string
	for _, d := range overdue {
		names = append(names, d.ID.String())
	}
	id, outcome := w.submit(ctx, "repair", job.Options{Priority: 1, Params: map[string]string{
		"reason": fmt.Sprintf("drives down for more than %s: %s", grace, strings.Join(names, ",")),
	}}, liveOf("repair"))
	started := strings.HasPrefix(outcome, "started")
	if started {
		w.cfg.Log.Warn("repair started by the down-drive event", "job", id, "drives", strings.Join(names, ","))
		// Give the repair the whole grace period before another could start.
		for name := range w.rec.DownSince {
			w.rec.DownSince[name] = now.UTC()
		}
		w.dirty = true
	}
	for _, d := range overdue {
		errs = append(errs, w.record(ctx, job.Event{Kind: job.EventDriveDown, Subject: d.ID.String(), Params: driveParams(d),
			Detail: fmt.Sprintf("%s, for more than the %s grace period", downDetail(d), grace), Job: id, Outcome: outcome}))
	}
	return returned, errors.Join(errs...)
}

func downDetail(d cluster.Drive) string {
	s := fmt.Sprintf("drive %s on %s (pool %s) is down", d.ID, d.Node, d.Pool)
	if d.Live != nil && d.Live.Error != "" {
		s += ": " + d.Live.Error
	}
	return s
}

// checkAdded records drives and nodes not seen before and starts one
// multiscan for all of them, unless one is queued (it will see them when
// it starts). It reports whether anything was added.
func (w *Watcher) checkAdded(ctx context.Context, drives []cluster.Drive, nodes []cluster.Node) (bool, error) {
	newDrives, newNodes := w.rec.Added(drives, nodes)
	if len(newDrives)+len(newNodes) == 0 {
		return false, nil
	}
	var id job.JobID
	var outcome string
	switch {
	case w.storesNoData(ctx, drives):
		outcome = "no job: the cluster stores no blocks yet, so there is nothing to spread"
	case !slices.ContainsFunc(newDrives, func(d cluster.Drive) bool { return !d.JoinedEmpty }):
		// New nodes bring no drive of their own to spread onto, or only
		// drives every file was placed with.
		outcome = "no job: joined before any data was written, so every file was placed with them"
	default:
		id, outcome = w.submit(ctx, "multiscan", job.Options{}, func(j job.JobView) bool { return j.Type == "multiscan" && j.State == job.Queued })
	}
	var evs []job.Event
	for _, n := range newNodes {
		evs = append(evs, job.Event{Kind: job.EventNodeAdded, Subject: "node " + n.Name, Params: map[string]string{"node": n.Name},
			Detail: fmt.Sprintf("node %s joined (block service %s)", n.Name, n.GRPCAddr), Job: id, Outcome: outcome})
	}
	for _, d := range newDrives {
		evs = append(evs, job.Event{Kind: job.EventDriveAdded, Subject: d.ID.String(), Params: driveParams(d),
			Detail: fmt.Sprintf("drive %s on %s (pool %s, class %s) at %s", d.ID, d.Node, d.Pool, d.Class, d.Path), Job: id, Outcome: outcome})
	}
	var errs []error
	for _, ev := range evs {
		if _, err := w.cfg.Jobs.RecordEvent(ctx, ev); err != nil {
			errs = append(errs, err)
		}
	}
	// Remembered even if recording failed: a multiscan must not be
	// started twice for the same addition.
	w.rec.Remember(newDrives, newNodes)
	w.dirty = true
	return true, errors.Join(errs...)
}

// storesNoData reports whether the cluster holds no file data: no drive
// published a block, and the namespace (when the server has one) counts no
// allocated bytes. The namespace is the one that cannot lag: drives publish
// their usage every few seconds, and a cluster written to right after it
// started may not have yet.
func (w *Watcher) storesNoData(ctx context.Context, drives []cluster.Drive) bool {
	if !storesNoBlocks(drives) {
		return false
	}
	if w.cfg.Allocated != nil {
		if n, err := w.cfg.Allocated(ctx); err == nil && n > 0 {
			return false
		}
	}
	return true
}

// storesNoBlocks reports whether no drive that published its usage holds a
// block: a new cluster, where a multiscan has nothing to do.
func storesNoBlocks(drives []cluster.Drive) bool {
	for _, d := range drives {
		if d.Live != nil && d.Live.Blocks > 0 {
			return false
		}
	}
	return true
}

// checkSpace turns low-space mode on or off from the pools' free space.
func (w *Watcher) checkSpace(ctx context.Context, drives []cluster.Drive, threshold int) error {
	mode, err := w.cfg.Jobs.Mode(ctx)
	if err != nil {
		return err
	}
	on := mode.Mode == job.ModeLowSpace
	v := spaceVerdict(cluster.PoolUsages(drives), threshold, on)
	if v.On == on {
		return nil
	}
	if err := w.cfg.Jobs.SetLowSpace(ctx, v.On, v.Reason); err != nil {
		return err
	}
	ev := job.Event{Kind: job.EventLowSpace, Subject: v.Subject, Detail: v.Reason, Outcome: "low-space mode on: jobs that do not free space pause",
		Params: spaceParams(drives, v.Subject, threshold)}
	if !v.On {
		ev.Kind, ev.Outcome = job.EventSpaceRecovered, "low-space mode off: jobs paused for it resume"
	}
	w.cfg.Log.Warn("low-space mode", "on", v.On, "reason", v.Reason)
	_, err = w.cfg.Jobs.RecordEvent(ctx, ev)
	return err
}

// space is spaceVerdict's answer: the mode's new state, why, and the
// subject of the event if it changes.
type space struct {
	On      bool
	Reason  string
	Subject string
}

// spaceVerdict decides low-space mode from the pools' usage (in service
// only, see cluster.PoolUsages), the threshold in percent free (0: off)
// and whether the mode is on now. The mode turns on when any pool is
// below the threshold, and off only when every pool is at threshold+1
// percent free or more (hysteresis: a pool hovering at the threshold does
// not flip the mode at every check). It is a pure function.
func spaceVerdict(pools []cluster.PoolUsage, threshold int, on bool) space {
	if threshold <= 0 {
		return space{On: false, Reason: "low_space_threshold is 0: low-space mode is off", Subject: "cluster"}
	}
	var low []string
	var lowest *cluster.PoolUsage
	for i, p := range pools {
		if lowest == nil || p.FreeFraction() < lowest.FreeFraction() {
			lowest = &pools[i]
		}
		if 100*p.FreeFraction() < float64(threshold) {
			low = append(low, fmt.Sprintf("pool %s: %.1f%% free", p.Pool, 100*p.FreeFraction()))
		}
	}
	switch {
	case len(low) > 0:
		subject := "pool " + lowest.Pool
		return space{On: true, Subject: subject, Reason: fmt.Sprintf("%s, below the %d%% threshold", strings.Join(low, ", "), threshold)}
	case !on:
		return space{On: false}
	case lowest == nil:
		return space{On: false, Subject: "cluster", Reason: "no pool has a drive in service"}
	case 100*lowest.FreeFraction() >= float64(threshold+1):
		return space{On: false, Subject: "pool " + lowest.Pool, Reason: fmt.Sprintf("every pool at %d%% free or more (threshold %d%% + 1 point); the lowest, %s, has %.1f%%",
			threshold+1, threshold, lowest.Pool, 100*lowest.FreeFraction())}
	}
	return space{On: true} // between the threshold and threshold+1: stays on
}

// imbalance is a pool whose drives are too far apart.
type imbalance struct {
	Pool              string
	Fullest, Emptiest cluster.DriveUsage
	// Points is the spread in percentage points of used space.
	Points float64
}

func (b imbalance) detail(threshold int) string {
	return fmt.Sprintf("%s %.1f%% used, %s %.1f%% used: %.1f points apart (rebalance_threshold %d)",
		b.Fullest.ID, 100*b.Fullest.UsedFraction(), b.Emptiest.ID, 100*b.Emptiest.UsedFraction(), b.Points, threshold)
}

// imbalances returns the pools whose drives in service spread more than
// threshold percentage points of used space, by pool name (none when the
// threshold is 0). It is a pure function.
func imbalances(pools []cluster.PoolUsage, threshold int) []imbalance {
	if threshold <= 0 {
		return nil
	}
	var out []imbalance
	for _, p := range pools {
		full, empty, spread, ok := p.Spread()
		if ok && 100*spread > float64(threshold) {
			out = append(out, imbalance{Pool: p.Pool, Fullest: full, Emptiest: empty, Points: 100 * spread})
		}
	}
	return out
}

// checkBalance starts a rebalance for each pool out of balance, unless a
// rebalance of that pool or a multiscan is queued or running, and records
// the event once per outcome (a new job, or the job that covers it).
func (w *Watcher) checkBalance(ctx context.Context, drives []cluster.Drive, threshold int, now time.Time) error {
	bad := imbalances(cluster.PoolUsages(drives), threshold)
	unbalanced := map[string]bool{}
	var errs []error
	for _, b := range bad {
		subject := "pool " + b.Pool
		unbalanced[subject] = true
		if prev, ok := w.rebalanced[b.Pool]; ok {
			jobs, err := w.listJobs(ctx)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if j, ok := covering(jobs, func(j job.JobView) bool { return j.ID == prev }); ok && j.State.Terminal() && now.Sub(j.Ended) < rebalanceCooldown {
				continue // it just ran; give the pool time before another
			}
		}
		id, outcome := w.submit(ctx, "rebalance", job.Options{Params: map[string]string{"pool": b.Pool}}, func(j job.JobView) bool {
			return liveOf("multiscan")(j) || liveOf("rebalance")(j) && (j.Params["pool"] == "" || j.Params["pool"] == b.Pool)
		})
		if strings.HasPrefix(outcome, "started") {
			w.rebalanced[b.Pool] = id
		}
		errs = append(errs, w.record(ctx, job.Event{Kind: job.EventPoolUnbalanced, Subject: subject, Detail: b.detail(threshold), Job: id, Outcome: outcome,
			Params: balanceParams(b)}))
	}
	for subject := range w.reported {
		if strings.HasPrefix(subject, "pool ") && !unbalanced[subject] {
			delete(w.reported, subject) // balanced again: a new imbalance is a new event
		}
	}
	return errors.Join(errs...)
}
