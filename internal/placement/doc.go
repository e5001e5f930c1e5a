// Package placement chooses the drives that hold the units of a stripe,
// spread over distinct nodes (failure domains) as far as the pool allows and
// weighted by free space, and computes the failure tolerance a placement
// achieves.
//
// It is pure: it does no I/O and reads no cluster state; the caller passes a
// snapshot of the pool's drives (from internal/cluster) and a *rand.Rand.
package placement
