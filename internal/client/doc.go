// Package client is weft's file data path: it cuts a file's bytes into
// stripes, erasure-codes or mirrors them, writes the units to the nodes'
// block services in parallel, commits stripe maps with a generation
// compare-and-swap, and reads them back (reconstructing from parity when a
// unit is missing, corrupt or unreachable), with write-behind and readahead.
//
// It is not a POSIX layer: permissions, open-file tracking in meta, errno
// mapping and namespace operations belong to vfs and the gateways; freeing
// queued blocks belongs to the node servers; and re-protecting, moving and
// verifying stored stripes belongs to package restripe, which works
// through this package's whole-unit primitives (Snapshot, ReadUnit,
// ReadBlock, PutUnit, CommitStripes, EnqueueOrphans).
//
// Decisions a caller relies on:
//
//   - Durability: a write is durable once a Flush, Sync or Close after it
//     returns nil. Units are acknowledged by block services only once
//     durable, and a stripe map is committed only after all its placed
//     units were acknowledged, so a committed map never names a block that
//     was not stored.
//   - Consistency: handles of one LIN in one Client share state and see
//     each other's writes at once. Other Clients see flushed data on their
//     next Open (close-to-open), or within Config.MapTTL.
//   - Concurrent writers of one stripe in different Clients never lose
//     each other's non-overlapping writes: a commit that loses the
//     generation compare-and-swap re-reads the stripe and re-applies only
//     the bytes its writer wrote.
//   - Availability: writes go on with drives or nodes down as long as K+1
//     units (2 copies) can be placed; such stripes are recorded as
//     under-protected in meta for repair, and Layout reports the achieved
//     tolerance. Reads reconstruct around any M bad units.
package client
