package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/erasure"
)

// Pool is a pool as listed, with totals over its drives.
type Pool struct {
	PoolRecord
	Drives     int   `json:"drives"`
	DrivesUp   int   `json:"drives_up"`
	TotalBytes int64 `json:"total_bytes"`
	FreeBytes  int64 `json:"free_bytes"`
	UsedBytes  int64 `json:"used_bytes"`
}

// Default space thresholds of a pool, in percent of its capacity (see
// PoolRecord).
const (
	DefaultHigh = 90
	DefaultLow  = 70
)

// PoolSpec is what an administrator sets of a pool. A zero field of a
// modification leaves the pool's value as it is.
type PoolSpec struct {
	// Protection is mirror:N or ec:K+M (erasure.ParseProtection).
	Protection string `json:"protection,omitempty"`
	// Class is nvme, ssd or hdd.
	Class string `json:"class,omitempty"`
	// High and Low are the space thresholds in percent: 0 < Low < High
	// <= 100. Both are given or neither.
	High int `json:"high,omitempty"`
	Low  int `json:"low,omitempty"`
}

// ValidClass reports whether c names a drive class: nvme, ssd or hdd.
func ValidClass(c string) bool { return c == "nvme" || c == "ssd" || c == "hdd" }

// CheckThresholds refuses (ErrInvalid) space thresholds outside
// 0 < low < high <= 100, naming them.
func CheckThresholds(high, low int) error {
	if low <= 0 || low >= high || high > 100 {
		return fmt.Errorf("%w: thresholds %d,%d: want HIGH,LOW with 0 < LOW < HIGH <= 100 (percent of the pool's capacity), e.g. 90,70", ErrInvalid, high, low)
	}
	return nil
}

// check validates the fields of spec that are set, for pool name.
func (spec PoolSpec) check(name string) error {
	if spec.Class != "" && !ValidClass(spec.Class) {
		return fmt.Errorf("%w: pool %s: class %q: want one of nvme, ssd, hdd", ErrInvalid, name, spec.Class)
	}
	if spec.High != 0 || spec.Low != 0 {
		if err := CheckThresholds(spec.High, spec.Low); err != nil {
			return fmt.Errorf("pool %s: %w", name, err)
		}
	}
	return nil
}

// CreatePool defines a pool with protection and no class or thresholds
// of its own (the defaults); see CreatePoolSpec.
func (s *Store) CreatePool(ctx context.Context, name, protection string, ifMissing bool) (PoolRecord, error) {
	return s.CreatePoolSpec(ctx, name, PoolSpec{Protection: protection}, ifMissing)
}

// CreatePoolSpec defines a pool. The protection spec is validated
// (erasure.ParseProtection), and the class and thresholds if set (unset
// thresholds are DefaultHigh, DefaultLow); the protection is, unless
// ifMissing is set (a node creating the pool its drives name), refused
// (ErrInvalid) when a stripe of it is wider than the cluster has drives.
// An existing pool is ErrExists unless ifMissing is set, in which case
// the call is a no-op that returns the stored record.
func (s *Store) CreatePoolSpec(ctx context.Context, name string, spec PoolSpec, ifMissing bool) (PoolRecord, error) {
	if !ValidName(name) {
		return PoolRecord{}, fmt.Errorf("%w: pool name %q: use 1-63 characters of a-z, 0-9, '-', '_', '.'", ErrInvalid, name)
	}
	p, err := erasure.ParseProtection(spec.Protection)
	if err != nil {
		return PoolRecord{}, fmt.Errorf("%w: pool %s: %w", ErrInvalid, name, err)
	}
	if err := spec.check(name); err != nil {
		return PoolRecord{}, err
	}
	if !ifMissing {
		if err := s.checkPlaceable(ctx, name, p); err != nil {
			return PoolRecord{}, err
		}
	}
	now := time.Now().UTC()
	rec := PoolRecord{V: PoolRecordVersion, Name: name, Protection: p.String(), Class: spec.Class,
		High: DefaultHigh, Low: DefaultLow, Created: now, Changed: now}
	if spec.High != 0 {
		rec.High, rec.Low = spec.High, spec.Low
	}
	t, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(poolKey(name)), "=", 0)).
		Then(clientv3.OpPut(poolKey(name), encode(rec))).Commit()
	if err != nil {
		return rec, fmt.Errorf("cluster: create pool %s: %w", name, err)
	}
	if !t.Succeeded {
		if ifMissing {
			return s.GetPool(ctx, name)
		}
		return rec, fmt.Errorf("%w: pool %s (see weft pool list; weft pool modify changes it)", ErrExists, name)
	}
	return rec, nil
}

// ModifyPool changes the fields of spec that are set (at least one must
// be) of pool name, validated as CreatePoolSpec does, and returns the new
// record (written as the current record version). A new protection is
// refused (ErrInvalid) when a stripe of it is wider than the pool has
// drives in service, or the cluster when the pool has none yet. Files
// keep the protection they were written with until they are restriped
// (weft file set-protection, or a repair of their stripes). Errors:
// ErrNotFound, ErrInvalid; it retries a concurrent update itself.
func (s *Store) ModifyPool(ctx context.Context, name string, spec PoolSpec) (PoolRecord, error) {
	if spec == (PoolSpec{}) {
		return PoolRecord{}, fmt.Errorf("%w: pool %s: nothing to change: give --protection, --class or --threshold", ErrInvalid, name)
	}
	if err := spec.check(name); err != nil {
		return PoolRecord{}, err
	}
	var prot string
	if spec.Protection != "" {
		p, err := erasure.ParseProtection(spec.Protection)
		if err != nil {
			return PoolRecord{}, fmt.Errorf("%w: pool %s: %w", ErrInvalid, name, err)
		}
		if err := s.CheckPoolWidth(ctx, name, p); err != nil {
			return PoolRecord{}, err
		}
		prot = p.String()
	}
	for {
		var rec PoolRecord
		rev, err := s.getRecord(ctx, poolKey(name), &rec)
		if err == ErrNotFound {
			return rec, fmt.Errorf("%w: pool %s (see weft pool list)", ErrNotFound, name)
		}
		if err != nil {
			return rec, err
		}
		if prot != "" {
			rec.Protection = prot
		}
		if spec.Class != "" {
			rec.Class = spec.Class
		}
		if spec.High != 0 {
			rec.High, rec.Low = spec.High, spec.Low
		}
		rec.V, rec.Changed = PoolRecordVersion, time.Now().UTC()
		t, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(poolKey(name)), "=", rev)).
			Then(clientv3.OpPut(poolKey(name), encode(rec))).Commit()
		if err != nil {
			return rec, fmt.Errorf("cluster: modify pool %s: %w", name, err)
		}
		if t.Succeeded {
			return rec, nil
		}
	}
}

// DeletePool deletes pool name if no drive (other than removed ones) is
// in it or moving to it; ErrInUse otherwise, naming the drives and what
// to do. Whether files are still in the pool is the namespace's to say:
// the caller checks that first (admin does, from meta's per-pool usage).
// Errors: ErrNotFound, ErrInUse.
func (s *Store) DeletePool(ctx context.Context, name string) error {
	if _, err := s.GetPool(ctx, name); err != nil {
		return err
	}
	drives, err := s.ListDrives(ctx)
	if err != nil {
		return err
	}
	var in []string
	for _, d := range drives {
		if d.Status != StatusRemoved && (d.Pool == name || d.MoveTo == name) {
			in = append(in, d.ID.String())
		}
	}
	if len(in) > 0 {
		return fmt.Errorf("%w: pool %s still has drives %s: move them to another pool first (weft drive move DRIVE --pool OTHER) or remove them (weft drive remove DRIVE)",
			ErrInUse, name, strings.Join(in, ", "))
	}
	// The drive list and the delete are not one transaction: a drive
	// registered into the pool in between makes its node recreate the
	// pool with its default protection, which is visible and fixable.
	if _, err := s.cli.Delete(ctx, poolKey(name)); err != nil {
		return fmt.Errorf("cluster: delete pool %s: %w", name, err)
	}
	return nil
}

// CheckPoolWidth refuses (ErrInvalid) protection p for pool name when a
// stripe of it is wider than the pool's drives in service (not removed,
// not moving out), or than the cluster's when the pool has none yet (it
// gets drives later).
func (s *Store) CheckPoolWidth(ctx context.Context, name string, p erasure.Protection) error {
	drives, err := s.ListDrives(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, d := range drives {
		if d.Pool == name && d.Status != StatusRemoved && d.MoveTo == "" {
			n++
		}
	}
	if n == 0 {
		return s.checkPlaceable(ctx, name, p)
	}
	if w := p.Width(); w > n {
		return fmt.Errorf("%w: pool %s: protection %s needs %d drives for each stripe (%s), but the pool has %d (see weft pool list): choose a narrower protection, or move drives into the pool first (weft drive move)",
			ErrInvalid, name, p, w, unitsText(p), n)
	}
	return nil
}

// GetPool returns one pool's record (ErrNotFound if unknown).
func (s *Store) GetPool(ctx context.Context, name string) (PoolRecord, error) {
	var p PoolRecord
	_, err := s.getRecord(ctx, poolKey(name), &p)
	if err == ErrNotFound {
		return p, fmt.Errorf("%w: pool %s (see weft pool list)", ErrNotFound, name)
	}
	return p, err
}

// ListPools returns every pool in name order with drive counts and space
// summed over its drives that are up and not removed.
func (s *Store) ListPools(ctx context.Context) ([]Pool, error) {
	drives, err := s.ListDrives(ctx)
	if err != nil {
		return nil, err
	}
	return s.PoolsOf(ctx, drives)
}

// PoolsOf is ListPools for a caller that has just listed the drives
// (ListDrives): it reads only the pool records.
func (s *Store) PoolsOf(ctx context.Context, drives []Drive) ([]Pool, error) {
	var out []Pool
	err := s.scan(ctx, prefixPools, func(k string, v []byte) error {
		var p Pool
		if err := decode(k, v, &p.PoolRecord); err != nil {
			return err
		}
		for _, d := range drives {
			if d.Pool != p.Name || d.Status == StatusRemoved {
				continue
			}
			p.Drives++
			if d.State == Up {
				p.DrivesUp++
				p.TotalBytes += d.Live.TotalBytes
				p.FreeBytes += d.Live.FreeBytes
				p.UsedBytes += d.Live.UsedBytes
			}
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

// checkPlaceable refuses a protection whose stripes are wider than the
// cluster has drives (not removed): such a pool could never place a whole
// stripe, so every write to it would be under-protected or fail. A pool's
// own drives may be fewer for a while (drives are added or moved to it
// after it is created); the cluster's are the bound it can never pass
// without new hardware.
func (s *Store) checkPlaceable(ctx context.Context, pool string, p erasure.Protection) error {
	drives, err := s.ListDrives(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, d := range drives {
		if d.Status != StatusRemoved {
			n++
		}
	}
	if w := p.Width(); w > n {
		return fmt.Errorf("%w: pool %s: protection %s needs %d drives for each stripe (%s), but the cluster has %d (see weft drive list): choose a narrower protection, or add drives first",
			ErrInvalid, pool, p, w, unitsText(p), n)
	}
	return nil
}

// unitsText says what a stripe of p is made of.
func unitsText(p erasure.Protection) string {
	if p.Mirrors > 0 {
		return fmt.Sprintf("%d copies on distinct drives", p.Width())
	}
	return fmt.Sprintf("%d data + %d parity units on distinct drives", p.Data, p.Parity)
}

// CheckFilesFit refuses putting files with protection spec (mirror:N or
// ec:K+M) in pool name: ErrNotFound for an unknown pool; ErrInvalid for a
// bad spec, a pool without drives in service (ready, not moving out), or
// a stripe of spec wider than those drives, each naming the pool and
// what to do. It returns the pool's record.
func (s *Store) CheckFilesFit(ctx context.Context, name, spec string) (PoolRecord, error) {
	rec, err := s.GetPool(ctx, name)
	if err != nil {
		return rec, err
	}
	if spec == "" {
		spec = rec.Protection
	}
	p, err := erasure.ParseProtection(spec)
	if err != nil {
		return rec, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	drives, err := s.ListDrives(ctx)
	if err != nil {
		return rec, err
	}
	n := 0
	for _, d := range drives {
		if d.Pool == name && d.Status == StatusReady && d.MoveTo == "" {
			n++
		}
	}
	switch {
	case n == 0:
		return rec, fmt.Errorf("%w: pool %s has no drives in service: move drives into it first (weft drive move DRIVE --pool %s)", ErrInvalid, name, name)
	case p.Width() > n:
		return rec, fmt.Errorf("%w: protection %s needs %d drives for each stripe (%s), but pool %s has %d in service: choose a narrower protection, or move drives into the pool (weft drive move)",
			ErrInvalid, p, p.Width(), unitsText(p), name, n)
	}
	return rec, nil
}
