package cluster

import (
	"context"
	"fmt"
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

// CreatePool defines a pool. The protection spec is validated
// (erasure.ParseProtection) and, unless ifMissing is set (a node creating
// the pool its drives name), refused (ErrInvalid) when a stripe of it is
// wider than the cluster has drives. An existing pool is ErrExists unless
// ifMissing is set, in which case the call is a no-op.
func (s *Store) CreatePool(ctx context.Context, name, protection string, ifMissing bool) (PoolRecord, error) {
	if !ValidName(name) {
		return PoolRecord{}, fmt.Errorf("%w: pool name %q: use 1-63 characters of a-z, 0-9, '-', '_', '.'", ErrInvalid, name)
	}
	p, err := erasure.ParseProtection(protection)
	if err != nil {
		return PoolRecord{}, fmt.Errorf("%w: pool %s: %w", ErrInvalid, name, err)
	}
	if !ifMissing {
		if err := s.checkPlaceable(ctx, name, p); err != nil {
			return PoolRecord{}, err
		}
	}
	rec := PoolRecord{V: RecordVersion, Name: name, Protection: p.String(), Created: time.Now().UTC()}
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
		return rec, fmt.Errorf("%w: pool %s", ErrExists, name)
	}
	return rec, nil
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
	var out []Pool
	err = s.scan(ctx, prefixPools, func(k string, v []byte) error {
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
