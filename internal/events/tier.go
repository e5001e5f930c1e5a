package events

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/policy"
)

// Pool thresholds: a pool whose used share (weft's blocks on its drives
// in service, against their capacity: what weft pool list shows as USE%)
// goes above its high mark records a pool-threshold event and starts a
// tier job, unless one is queued or running. The high mark is the lowest
// of the pool's own (weft pool modify --threshold) and the THRESHOLD
// highs of the installed policy's MIGRATE rules out of the pool; the low
// mark, below which the event re-arms, is the lowest of the lows. A pool
// no MIGRATE rule moves files out of records the event (callbacks run on
// it) without a job.
//
// The event fires once per crossing: it re-arms when the pool drops to
// its low mark, or after thresholdRetry if the pool is still above its
// high mark and no tier job is live (the last one found nothing to move,
// or failed). Which pools fired is in memory: a new coordinator may
// record a still-full pool once more.

// thresholdRetry is how long a pool stays above its high mark, with no
// tier job live, before the event fires again.
const thresholdRetry = time.Hour

// poolMarks are a pool's trigger and re-arm marks, in percent.
type poolMarks struct {
	high, low float64
	// movable is true when some MIGRATE rule moves files out of it.
	movable bool
	// rules names the rules whose THRESHOLD set the marks.
	rules []string
}

// marksOf returns each pool's marks from its record and the policy (nil:
// none installed).
func marksOf(pools []cluster.Pool, pol *policy.Policy) map[string]poolMarks {
	out := map[string]poolMarks{}
	for _, p := range pools {
		m := poolMarks{high: float64(p.High), low: float64(p.Low)}
		if pol != nil {
			for _, r := range pol.Rules() {
				if r.Kind() != policy.KindMigrate || r.From() != "" && r.From() != p.Name || r.Pool() == p.Name && r.Protection() == "" {
					continue
				}
				m.movable = true
				if hi, lo, ok := r.Threshold(); ok {
					m.high, m.low = math.Min(m.high, hi), math.Min(m.low, lo)
					m.rules = append(m.rules, r.Name())
				}
			}
		}
		out[p.Name] = m
	}
	return out
}

// fired is what the watcher remembers of a pool above its high mark.
type fired struct {
	at  time.Time
	job job.JobID
}

// checkThresholds records pool-threshold events and starts tier jobs (see
// above).
func (w *Watcher) checkThresholds(ctx context.Context, drives []cluster.Drive, now time.Time) error {
	pools, err := w.cfg.Store.PoolsOf(ctx, drives)
	if err != nil {
		return err
	}
	pol, err := w.installedPolicy(ctx)
	if err != nil {
		return err
	}
	if w.fired == nil {
		w.fired = map[string]fired{}
	}
	marks := marksOf(pools, pol)
	var errs []error
	for _, p := range pools {
		if p.TotalBytes <= 0 {
			continue
		}
		m := marks[p.Name]
		used := float64(p.UsedBytes) * 100 / float64(p.TotalBytes)
		f, was := w.fired[p.Name]
		if used <= m.low {
			delete(w.fired, p.Name)
			continue
		}
		if used <= m.high {
			continue
		}
		if was {
			if now.Sub(f.at) < thresholdRetry {
				continue
			}
			jobs, err := w.listJobs(ctx)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if _, live := covering(jobs, liveOf("tier")); live {
				continue
			}
		}
		ev := job.Event{Kind: job.EventPoolThreshold, Subject: "pool " + p.Name,
			Detail: fmt.Sprintf("pool %s is %.1f%% full, above its high threshold %.0f%% (%s)", p.Name, used, m.high, markSource(m)),
			Params: map[string]string{"pool": p.Name, "usage": fmt.Sprintf("%.1f", used), "high": fmt.Sprintf("%.0f", m.high)}}
		if !m.movable {
			ev.Outcome = fmt.Sprintf("no job: no MIGRATE rule of the installed policy moves files out of pool %s", p.Name)
			if pol == nil {
				ev.Outcome = "no job: no policy is installed (weft policy install)"
			}
		} else {
			ev.Job, ev.Outcome = w.submit(ctx, "tier", job.Options{Params: map[string]string{
				job.ParamReason: fmt.Sprintf("pool %s %.1f%% full (high threshold %.0f%%)", p.Name, used, m.high)}}, liveOf("tier"))
		}
		if _, err := w.cfg.Jobs.RecordEvent(ctx, ev); err != nil {
			errs = append(errs, err)
			continue
		}
		w.cfg.Log.Warn("pool above its high threshold", "pool", p.Name, "used", fmt.Sprintf("%.1f%%", used), "high", m.high, "outcome", ev.Outcome)
		w.fired[p.Name] = fired{at: now, job: ev.Job}
	}
	return errors.Join(errs...)
}

// markSource says where a pool's high mark comes from.
func markSource(m poolMarks) string {
	if len(m.rules) == 0 {
		return "the pool's own threshold"
	}
	return fmt.Sprintf("the pool's own threshold and the THRESHOLD of rule %v", m.rules)
}

// installedPolicy returns the installed policy, parsed once per version;
// nil when none is installed.
func (w *Watcher) installedPolicy(ctx context.Context) (*policy.Policy, error) {
	ip, err := w.cfg.Store.Policy(ctx, 0)
	if errors.Is(err, cluster.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if w.pol != nil && w.polVersion == ip.Version {
		return w.pol, nil
	}
	pol, err := policy.Parse(ip.Text, nil)
	if err != nil {
		return nil, fmt.Errorf("events: installed policy version %d: %w", ip.Version, err)
	}
	w.pol, w.polVersion = pol, ip.Version
	return pol, nil
}
