package server

import (
	"context"
	"errors"
	"time"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/meta"
)

// deleteBatch is how many queued blocks one pass frees per drive.
const deleteBatch = 256

// deleterLoop frees the blocks queued for deletion on this node's drives
// (blocks replaced by copy-on-write, or of deleted files): it deletes each
// block file, then removes the entries from the queue. Deleting a block that
// is already gone is fine, so a crash between the two steps only repeats
// work. It runs until the node stops.
//
// This is the node's only background loop outside the job engine, which
// does not exist yet; the collect job will take the queue over (DESIGN §5).
func (s *Server) deleterLoop() {
	defer s.wg.Done()
	idle := time.NewTimer(0)
	defer idle.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-idle.C:
		}
		busy := false
		for _, d := range s.openDriveList() {
			n, err := s.freeQueued(d)
			if err != nil {
				s.log.Warn("delete queue", "drive", d.ID(), "err", err)
			}
			busy = busy || n == deleteBatch
		}
		if busy {
			idle.Reset(0)
		} else {
			idle.Reset(time.Second)
		}
	}
}

// freeQueued frees one batch of d's queued blocks and returns its size.
func (s *Server) freeQueued(d *drive.Drive) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
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
	return len(entries), s.meta.AckDeletes(ctx, entries)
}
