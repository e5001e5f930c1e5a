package meta

import (
	"context"

	"github.com/weftfs/weft/internal/kv"
)

// cache is what Meta uses of a caching store (package kvcache) when its
// store is one: fresh LIN batches are declared known-empty, so that the
// cache answers for every key of inodes this client creates (negative
// lookups in its new directories, an unlink's check for open records)
// without asking the store.
type cache interface {
	Epoch() uint64
	KnownEmpty(epoch uint64, ranges ...kv.Range)
	Sync(ctx context.Context) error
}

// CacheRanges are the key ranges a caching store in front of a namespace
// should preload (small, read whole at every start: the format record, the
// LIN counter and the usage shards) and presume absent in optimistic
// transactions (directory entries: a create reads a name that is nearly
// always free, and the commit checks it; delegation records, which every
// change of a file reads for each of its directories, see checkCovered).
func CacheRanges() (preload, presume []kv.Range) {
	one := func(p byte) kv.Range { return kv.Range{Start: []byte{p}, End: []byte{p + 1}} }
	return []kv.Range{one(pfxFormat), one(pfxNextLIN), one(pfxUsage)}, []kv.Range{one(pfxEntry), one(pfxDeleg)}
}

// freshRanges are the key ranges of the LINs [first, limit): no key of
// them exists before the batch is allocated.
func freshRanges(first, limit LIN) []kv.Range {
	var rs []kv.Range
	for _, p := range []byte{pfxInode, pfxEntry, pfxXattr, pfxStripe, pfxUnder, pfxLost, pfxDeleg} {
		rs = append(rs, kv.Range{Start: be64([]byte{p}, uint64(first)), End: be64([]byte{p}, uint64(limit))})
	}
	return rs
}

// Sync waits until a caching store has seen every change committed before
// the call, by any client (see kvcache.Store.Sync); without a cache it
// returns at once. Tests use it for cross-client checks; it is the price
// of close-to-open coherence with a cache.
func (m *Meta) Sync(ctx context.Context) error { return m.sync(ctx) }

func (m *Meta) sync(ctx context.Context) error {
	if c, ok := m.store.(cache); ok {
		return storeErr(c.Sync(ctx))
	}
	return nil
}
