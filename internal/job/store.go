package job

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Reads and compare-and-swap updates of job records, settings and type
// settings: the etcd access shared by the public calls and the coordinator.

// jobEntry is a job record as read, with its key's ModRevision.
type jobEntry struct {
	rec    jobRecord
	modRev int64
}

// listJobs reads every job record, in id order.
func (e *Engine) listJobs(ctx context.Context) ([]jobEntry, error) {
	resp, err := e.cfg.Client.Get(ctx, prefixJobs, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("job: list jobs: %w", err)
	}
	out := make([]jobEntry, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r jobRecord
		if err := decode(string(kv.Key), kv.Value, &r); err != nil {
			return nil, err
		}
		out = append(out, jobEntry{r, kv.ModRevision})
	}
	return out, nil
}

// getJob reads one job record; ErrNotFound when there is none.
func (e *Engine) getJob(ctx context.Context, id JobID) (jobEntry, error) {
	resp, err := e.cfg.Client.Get(ctx, jobKey(id))
	if err != nil {
		return jobEntry{}, fmt.Errorf("job: read job %d: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return jobEntry{}, fmt.Errorf("%w: job %d (weft job list shows the jobs kept)", ErrNotFound, id)
	}
	var r jobRecord
	if err := decode(string(resp.Kvs[0].Key), resp.Kvs[0].Value, &r); err != nil {
		return jobEntry{}, err
	}
	return jobEntry{r, resp.Kvs[0].ModRevision}, nil
}

// errNoChange, returned by an update function, skips the write.
var errNoChange = errors.New("job: no change")

// updateJob applies fn to job id's record and writes it back if the record
// did not change meanwhile, retrying on a conflict. fence adds conditions
// (the coordinator's election key); if they fail, updateJob returns
// errFenced. extra ops are written in the same transaction. fn's errors
// are returned as they are (errNoChange: nil, no write).
func (e *Engine) updateJob(ctx context.Context, id JobID, fn func(*jobRecord) error, fence []clientv3.Cmp, extra ...clientv3.Op) (jobRecord, error) {
	for {
		cur, err := e.getJob(ctx, id)
		if err != nil {
			return jobRecord{}, err
		}
		rec := cur.rec
		rec.Params = cloneParams(cur.rec.Params)
		rec.Phases = append([]PhaseReport(nil), cur.rec.Phases...)
		if err := fn(&rec); err != nil {
			if errors.Is(err, errNoChange) {
				return cur.rec, nil
			}
			return cur.rec, err
		}
		cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(jobKey(id)), "=", cur.modRev)}, fence...)
		ops := append([]clientv3.Op{clientv3.OpPut(jobKey(id), encode(&rec))}, extra...)
		resp, err := e.cfg.Client.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return cur.rec, fmt.Errorf("job: write job %d: %w", id, err)
		}
		if resp.Succeeded {
			return rec, nil
		}
		if len(fence) > 0 {
			ok, err := e.fenceHolds(ctx, fence)
			if err != nil {
				return cur.rec, err
			}
			if !ok {
				return cur.rec, errFenced
			}
		}
	}
}

// fenceHolds evaluates compares alone.
func (e *Engine) fenceHolds(ctx context.Context, fence []clientv3.Cmp) (bool, error) {
	resp, err := e.cfg.Client.Txn(ctx).If(fence...).Commit()
	if err != nil {
		return false, fmt.Errorf("job: check coordinator fence: %w", err)
	}
	return resp.Succeeded, nil
}

func cloneParams(p map[string]string) map[string]string {
	if p == nil {
		return nil
	}
	out := make(map[string]string, len(p))
	for k, v := range p {
		out[k] = v
	}
	return out
}

// Settings are the engine's cluster-wide settings, stored in etcd.
type Settings struct {
	// MaxRunning is how many jobs may run at once (1-16; default 3).
	MaxRunning int `json:"max_running"`
	// RestripeExclusive restores one-at-a-time for the restripe set.
	RestripeExclusive bool `json:"restripe_exclusive"`
	// KeepJobs is how many ended jobs (and their reports) are kept
	// (1-10000; default 100); older ones are deleted, oldest id first.
	KeepJobs int `json:"keep_jobs"`
	// LowSpaceThreshold is the free space, in percent of a pool's size,
	// below which the coordinator turns low-space mode on (0-50; default
	// 5; 0 never turns it on). The mode ends when every pool is back at
	// LowSpaceThreshold+1 percent free (hysteresis, so that a pool
	// hovering at the threshold does not flip the mode at every check).
	LowSpaceThreshold int `json:"low_space_threshold"`
	// RebalanceThreshold is the spread, in percentage points of used
	// space, between the fullest and the emptiest drive in service of a
	// pool beyond which the coordinator starts a rebalance job (0-50;
	// default 5; 0 never starts one by itself).
	RebalanceThreshold int `json:"rebalance_threshold"`
}

// DefaultSettings returns the settings of a cluster that never set any.
func DefaultSettings() Settings {
	return Settings{MaxRunning: 3, KeepJobs: 100, LowSpaceThreshold: 5, RebalanceThreshold: 5}
}

func (s Settings) validate() error {
	if s.MaxRunning < 1 || s.MaxRunning > 16 {
		return fmt.Errorf("%w: max_running %d: use 1 to 16", ErrInvalid, s.MaxRunning)
	}
	if s.KeepJobs < 1 || s.KeepJobs > 10000 {
		return fmt.Errorf("%w: keep_jobs %d: use 1 to 10000", ErrInvalid, s.KeepJobs)
	}
	if s.LowSpaceThreshold < 0 || s.LowSpaceThreshold > 50 {
		return fmt.Errorf("%w: low_space_threshold %d: use 0 (off) to 50 percent free", ErrInvalid, s.LowSpaceThreshold)
	}
	if s.RebalanceThreshold < 0 || s.RebalanceThreshold > 50 {
		return fmt.Errorf("%w: rebalance_threshold %d: use 0 (off) to 50 percentage points", ErrInvalid, s.RebalanceThreshold)
	}
	return nil
}

// Settings returns the cluster's engine settings (defaults if never set).
func (e *Engine) Settings(ctx context.Context) (Settings, error) {
	resp, err := e.cfg.Client.Get(ctx, keySettings)
	if err != nil {
		return Settings{}, fmt.Errorf("job: read settings: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return DefaultSettings(), nil
	}
	// Fields a record lacks (written before they existed) keep their
	// defaults.
	r := settingsRecord{Settings: DefaultSettings()}
	if err := decode(keySettings, resp.Kvs[0].Value, &r); err != nil {
		return Settings{}, err
	}
	if r.validate() != nil {
		return DefaultSettings(), nil
	}
	return r.Settings, nil
}

// SetSettings stores the engine settings; the coordinator applies them at
// its next reconcile (a lower MaxRunning pauses the lowest-priority jobs).
// Invalid values are refused (ErrInvalid).
func (e *Engine) SetSettings(ctx context.Context, s Settings) error {
	if err := s.validate(); err != nil {
		return err
	}
	if _, err := e.cfg.Client.Put(ctx, keySettings, encode(&settingsRecord{Settings: s})); err != nil {
		return fmt.Errorf("job: write settings: %w", err)
	}
	return nil
}

// SetLowSpace turns low-space mode on (with the reason shown to users) or
// off. In low-space mode only job types that implement SpaceSaver run;
// others are paused by the system and resume when the mode ends. It is the
// input for whatever watches pool free space; it is idempotent. Turning it
// on while it is on only updates the reason: the mode's start time is kept.
func (e *Engine) SetLowSpace(ctx context.Context, on bool, reason string) error {
	var err error
	if on {
		cur, lerr := e.lowSpace(ctx)
		if lerr == nil && cur != nil && cur.Reason == reason {
			return nil
		}
		since := now()
		if lerr == nil && cur != nil {
			since = cur.Since
		}
		_, err = e.cfg.Client.Put(ctx, keyLowSpace, encode(&lowSpaceRecord{Reason: reason, Since: since}))
	} else {
		_, err = e.cfg.Client.Delete(ctx, keyLowSpace)
	}
	if err != nil {
		return fmt.Errorf("job: set low-space mode: %w", err)
	}
	return nil
}

// lowSpace returns the low-space record, nil when the mode is off.
func (e *Engine) lowSpace(ctx context.Context) (*lowSpaceRecord, error) {
	resp, err := e.cfg.Client.Get(ctx, keyLowSpace)
	if err != nil {
		return nil, fmt.Errorf("job: read low-space mode: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	var r lowSpaceRecord
	if err := decode(keyLowSpace, resp.Kvs[0].Value, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// TypeSettings are a job type's cluster-wide defaults: the priority and
// policy a job gets when Submit does not say, whether Submit accepts
// jobs of the type at all, and the schedule on which the coordinator
// submits one.
type TypeSettings struct {
	Priority int    `json:"priority"`
	Policy   string `json:"policy"`
	Enabled  bool   `json:"enabled"`
	// Schedule is a cron expression (ParseCron: "0 2 1 * *", "@weekly",
	// "TZ=Europe/Paris 0 3 * * sat"); "" is none. While the type is
	// enabled, the coordinator submits a job of the type with these
	// settings at each of its times, unless one is already queued,
	// running or paused.
	Schedule string `json:"schedule"`
}

// typeSettings returns a type's settings: its ModifyType override, else
// its own Defaults and DefaultSchedule, else priority 5, policy "low",
// enabled, no schedule.
func (e *Engine) typeSettings(ctx context.Context, t Type) (TypeSettings, error) {
	ts := TypeSettings{Priority: 5, Policy: "low", Enabled: true, Schedule: defaultSchedule(t)}
	if d, ok := t.(Defaulter); ok {
		if p, pol := d.Defaults(); p >= 1 && p <= 10 {
			ts.Priority = p
			if pol != "" {
				ts.Policy = pol
			}
		} else if pol != "" {
			ts.Policy = pol
		}
	}
	resp, err := e.cfg.Client.Get(ctx, typeKey(t.Name()))
	if err != nil {
		return ts, fmt.Errorf("job: read settings of job type %s: %w", t.Name(), err)
	}
	if len(resp.Kvs) == 1 {
		var r typeRecord
		if err := decode(typeKey(t.Name()), resp.Kvs[0].Value, &r); err != nil {
			return ts, err
		}
		if r.Priority != 0 {
			ts.Priority = r.Priority
		}
		if r.Policy != "" {
			ts.Policy = r.Policy
		}
		ts.Enabled = !r.Disabled
		if r.Schedule != nil {
			ts.Schedule = *r.Schedule
		}
	}
	return ts, nil
}
