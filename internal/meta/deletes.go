package meta

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/weftfs/weft/internal/kv"
)

// EnqueueDeletes adds blocks to the delete queue, for blocks that no stripe
// references: a writer's blocks whose commit lost a stripe conflict, or
// blocks a collect job found unreferenced. Entries with a zero Enqueued get
// now. It is idempotent (one queue entry per drive and block) and runs in
// as many transactions as needed; on error, a prefix may be enqueued.
func (m *Meta) EnqueueDeletes(ctx context.Context, entries []DeleteEntry) error {
	for _, e := range entries {
		if e.Drive == 0 || e.Block.IsZero() {
			return fmt.Errorf("%w: delete entry without drive or block: %+v", ErrInvalid, e)
		}
	}
	return m.chunked(ctx, len(entries), func(o *op, i int) {
		e := entries[i]
		if e.Enqueued.IsZero() {
			e.Enqueued = m.now()
		}
		o.put(keyDelete(e.Drive, e.Block), encodeDelete(e))
	})
}

// ListDeletes returns up to limit queued deletes of drive whose block id
// sorts after after (zero: from the start), in block id order.
func (m *Meta) ListDeletes(ctx context.Context, drive DriveID, after BlockID, limit int) ([]DeleteEntry, error) {
	var out []DeleteEntry
	err := m.view(ctx, func(o *op) error {
		out = nil
		start := keyDelete(drive, after)
		if !after.IsZero() {
			start = kv.After(start)
		}
		end := binary.BigEndian.AppendUint32([]byte{pfxDelete}, uint32(drive)+1)
		if drive == ^DriveID(0) {
			end = []byte{pfxDelete + 1}
		}
		kvs, _, err := o.tx.Scan(start, end, limit)
		if err != nil {
			return err
		}
		for _, p := range kvs {
			e, err := decodeDelete(p.Key, p.Value)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	return out, err
}

// AckDeletes removes deleted blocks from the queue (only Drive and Block of
// each entry matter). It is idempotent and runs in as many transactions as
// needed.
func (m *Meta) AckDeletes(ctx context.Context, entries []DeleteEntry) error {
	return m.chunked(ctx, len(entries), func(o *op, i int) {
		o.del(keyDelete(entries[i].Drive, entries[i].Block))
	})
}

// chunked runs blind writes for items 0..n-1, as many per transaction as
// the budget allows.
func (m *Meta) chunked(ctx context.Context, n int, write func(o *op, i int)) error {
	for done := 0; done < n; {
		end := min(n, done+m.budget)
		if err := m.update(ctx, func(o *op) error {
			for i := done; i < end; i++ {
				write(o, i)
			}
			return nil
		}); err != nil {
			return err
		}
		done = end
	}
	return nil
}
