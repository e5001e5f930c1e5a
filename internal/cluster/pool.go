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
// (erasure.ParseProtection). An existing pool is ErrExists unless
// ifMissing is set, in which case the call is a no-op.
func (s *Store) CreatePool(ctx context.Context, name, protection string, ifMissing bool) (PoolRecord, error) {
	if !ValidName(name) {
		return PoolRecord{}, fmt.Errorf("%w: pool name %q: use 1-63 characters of a-z, 0-9, '-', '_', '.'", ErrInvalid, name)
	}
	p, err := erasure.ParseProtection(protection)
	if err != nil {
		return PoolRecord{}, fmt.Errorf("%w: pool %s: %w", ErrInvalid, name, err)
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
