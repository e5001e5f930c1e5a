package meta

import (
	"context"

	"github.com/weftfs/weft/internal/kv"
)

// StatFS returns inode and space use, per pool and in total, summed over the
// usage shards at one snapshot. Capacity is not known here: the caller adds
// the pools' drive capacities.
func (m *Meta) StatFS(ctx context.Context) (FSStats, error) {
	var st FSStats
	err := m.view(ctx, func(o *op) error {
		pools, err := storedUsage(o.tx)
		if err != nil {
			return err
		}
		st = FSStats{Pools: pools}
		for pool, u := range pools {
			st.Total.add(u)
			if u == (Usage{}) {
				delete(st.Pools, pool)
			}
		}
		return nil
	})
	return st, err
}

// storedUsage sums the usage shards per pool, in tx.
func storedUsage(tx kv.Tx) (map[string]Usage, error) {
	kvs, _, err := tx.Scan([]byte{pfxUsage}, []byte{pfxUsage + 1}, 0)
	if err != nil {
		return nil, err
	}
	pools := map[string]Usage{}
	for _, p := range kvs {
		u, err := decodeUsage(p.Key, p.Value)
		if err != nil {
			return nil, err
		}
		for pool, d := range u {
			pu := pools[pool]
			pu.add(d)
			pools[pool] = pu
		}
	}
	return pools, nil
}
