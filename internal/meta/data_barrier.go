package meta

import (
	"context"
	"errors"
	"sync"
)

// Data barriers. The first data of a file born under a delegation is
// committed by the write-back, later than its close (see deferStripes),
// and durable only at fsync; its writer may therefore leave the blocks
// unsynced too, and make them durable in one sync for many files (a
// client staging blocks to the drives of its machine syncs their file
// systems, see client.Client). The metadata then owes it one thing: a
// stripe map naming those blocks is never committed before they are
// durable. A barrier, which the writer registers, runs before every
// commit that may carry such a map: each write-back batch (its error drops
// the batch: kvcache.Store.SetBeforeCommit), and each CommitStripes
// committed at once (its error fails the commit), which a file born under
// a delegation gets when the delegation was given back between its write
// and its commit.

// dataBarriers are the barriers registered with a Meta.
type dataBarriers struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(context.Context) error
}

// AddDataBarrier registers fn to run before every commit of stripes that
// may name blocks written unsynced (see DefersData), and returns the
// function that removes it. fn must make durable everything its writer
// wrote unsynced before fn was called, and report whether it could.
func (m *Meta) AddDataBarrier(fn func(context.Context) error) (remove func()) {
	b := &m.barriers
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fns == nil {
		b.fns = map[int]func(context.Context) error{}
	}
	id := b.next
	b.next++
	b.fns[id] = fn
	return func() {
		b.mu.Lock()
		delete(b.fns, id)
		b.mu.Unlock()
	}
}

// dataBarrier runs the registered barriers, returning their errors.
func (m *Meta) dataBarrier(ctx context.Context) error {
	b := &m.barriers
	b.mu.Lock()
	if len(b.fns) == 0 { // no client of this Meta writes unsynced
		b.mu.Unlock()
		return nil
	}
	fns := make([]func(context.Context) error, 0, len(b.fns))
	for _, fn := range b.fns {
		fns = append(fns, fn)
	}
	b.mu.Unlock()
	var errs []error
	for _, fn := range fns {
		if err := fn(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DefersData reports whether the first commit of lin's stripes would now
// be deferred to the write-back (lin is a file this client created in a
// directory it holds, its create not yet given up): its writer may then
// write the data unsynced, behind a data barrier (AddDataBarrier). It is
// a hint: if the delegation goes meanwhile, the commit is made at once,
// after the barriers.
func (m *Meta) DefersData(lin LIN) bool {
	w := m.wb
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.born[lin]
	return h != nil && h.ready
}
