package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/failpoint"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/runner"
)

// deleteBatch is how many queued blocks one pass frees per drive.
const deleteBatch = 256

// drainIdle is how long the drainer rests when every queue was drained.
const drainIdle = time.Second

// drainWorker is the node's "drainer": it frees the blocks queued for
// deletion on this node's drives (blocks replaced by copy-on-write, or of
// deleted files), one batch per drive per step: it deletes each block
// file, then removes the entries from the queue. Deleting a block that is
// already gone is fine, so a crash between the two only repeats work. A
// step that filled a batch asks for another at once (Busy); otherwise the
// drainer rests drainIdle. A failure on one drive does not keep the others
// from their batch; it is reported, and the runner retries after
// drainIdle.
//
// It is the delete queue's one drainer: the collect job's queue phase
// waits for it instead of deleting queued blocks itself. Freeing a block
// is a local file delete, done within about a second of the commit that
// queued it whether or not collect ever runs (the FUSE tests and the
// benchmark scripts wait for freed space); collect keeps what only a scan
// can find (blocks nothing queued: torn writes, crashed clients).
type drainWorker struct{ s *Server }

func (w drainWorker) Step(ctx context.Context) (runner.State, error) {
	busy := false
	var errs []error
	for _, d := range w.s.openDriveList() {
		n, err := w.s.freeQueued(ctx, d)
		if err != nil {
			errs = append(errs, fmt.Errorf("delete queue of drive %s: %w", d.ID(), err))
		}
		busy = busy || n == deleteBatch
	}
	switch {
	case len(errs) > 0:
		return runner.Idle, errors.Join(errs...)
	case busy:
		return runner.Busy, nil
	}
	return runner.Idle, nil
}

// freeQueued frees one batch of d's queued blocks and returns its size.
func (s *Server) freeQueued(ctx context.Context, d *drive.Drive) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	entries, err := s.meta.ListDeletes(ctx, meta.DriveID(d.ID()), meta.BlockID{}, deleteBatch)
	if err != nil || len(entries) == 0 {
		return 0, err
	}
	for _, e := range entries {
		if err := d.Delete(drive.BlockID(e.Block)); err != nil && !errors.Is(err, drive.ErrNotFound) {
			return 0, err
		}
	}
	// Failpoint server/drain-before-ack: the batch's block files are
	// deleted, its queue entries not: a crash leaves them queued, and the
	// next drainer deletes them again (not found: fine) and acks them.
	// Its error fails the step the same way.
	if err := failpoint.Eval("server/drain-before-ack"); err != nil {
		return 0, err
	}
	return len(entries), s.meta.AckDeletes(ctx, entries)
}
