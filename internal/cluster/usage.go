package cluster

import (
	"cmp"
	"slices"
)

// DriveUsage is one drive's space, as its node last published it.
type DriveUsage struct {
	ID         DriveID `json:"id"`
	Node       string  `json:"node"`
	TotalBytes int64   `json:"total_bytes"`
	FreeBytes  int64   `json:"free_bytes"`
	UsedBytes  int64   `json:"used_bytes"`
}

// UsedFraction is UsedBytes / TotalBytes (0 for a drive of no size).
func (d DriveUsage) UsedFraction() float64 {
	if d.TotalBytes <= 0 {
		return 0
	}
	return float64(d.UsedBytes) / float64(d.TotalBytes)
}

// PoolUsage is a pool's space over its drives in service: up, with status
// ready (not suspended, draining or removed) and a published size.
type PoolUsage struct {
	Pool string `json:"pool"`
	// Drives are the drives in service, in id order.
	Drives     []DriveUsage `json:"drives"`
	TotalBytes int64        `json:"total_bytes"`
	FreeBytes  int64        `json:"free_bytes"`
}

// FreeFraction is FreeBytes / TotalBytes (1 for a pool of no size).
func (p PoolUsage) FreeFraction() float64 {
	if p.TotalBytes <= 0 {
		return 1
	}
	return float64(p.FreeBytes) / float64(p.TotalBytes)
}

// Spread returns the pool's fullest and emptiest drive by used fraction
// (the lower id on a tie) and the difference of their used fractions; ok
// is false with fewer than two drives, where balance means nothing.
func (p PoolUsage) Spread() (fullest, emptiest DriveUsage, spread float64, ok bool) {
	if len(p.Drives) < 2 {
		return DriveUsage{}, DriveUsage{}, 0, false
	}
	fullest, emptiest = p.Drives[0], p.Drives[0]
	for _, d := range p.Drives[1:] {
		if d.UsedFraction() > fullest.UsedFraction() {
			fullest = d
		}
		if d.UsedFraction() < emptiest.UsedFraction() {
			emptiest = d
		}
	}
	return fullest, emptiest, fullest.UsedFraction() - emptiest.UsedFraction(), true
}

// InService reports whether a drive counts in its pool's usage: up, ready,
// and with a published size.
func (d Drive) InService() bool {
	return d.State == Up && d.Status == StatusReady && d.Live != nil && d.Live.TotalBytes > 0
}

// PoolUsages groups the drives in service by pool, in pool name order. A
// pool without any drive in service is absent. It is a pure function of
// drives (as ListDrives returns them).
func PoolUsages(drives []Drive) []PoolUsage {
	byPool := map[string]*PoolUsage{}
	for _, d := range drives {
		if !d.InService() {
			continue
		}
		p := byPool[d.Pool]
		if p == nil {
			p = &PoolUsage{Pool: d.Pool}
			byPool[d.Pool] = p
		}
		p.Drives = append(p.Drives, DriveUsage{ID: d.ID, Node: d.Node, TotalBytes: d.Live.TotalBytes, FreeBytes: d.Live.FreeBytes, UsedBytes: d.Live.UsedBytes})
		p.TotalBytes += d.Live.TotalBytes
		p.FreeBytes += d.Live.FreeBytes
	}
	out := make([]PoolUsage, 0, len(byPool))
	for _, p := range byPool {
		slices.SortFunc(p.Drives, func(a, b DriveUsage) int { return cmp.Compare(a.ID, b.ID) })
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b PoolUsage) int { return cmp.Compare(a.Pool, b.Pool) })
	return out
}
