package meta

import (
	"context"
)

// StatFS returns inode and space use, per pool and in total, summed over the
// usage shards at one snapshot. Capacity is not known here: the caller adds
// the pools' drive capacities.
func (m *Meta) StatFS(ctx context.Context) (FSStats, error) {
	var st FSStats
	err := m.view(ctx, func(o *op) error {
		st = FSStats{Pools: map[string]Usage{}}
		kvs, _, err := o.tx.Scan([]byte{pfxUsage}, []byte{pfxUsage + 1}, 0)
		if err != nil {
			return err
		}
		for _, p := range kvs {
			u, err := decodeUsage(p.Key, p.Value)
			if err != nil {
				return err
			}
			for pool, d := range u {
				pu := st.Pools[pool]
				pu.add(d)
				st.Pools[pool] = pu
				st.Total.add(d)
			}
		}
		for pool, u := range st.Pools {
			if u == (Usage{}) {
				delete(st.Pools, pool)
			}
		}
		return nil
	})
	return st, err
}
