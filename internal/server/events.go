package server

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/job"
)

// DefaultRepairGrace is how long a drive (or its node) may be down before
// a repair job re-protects its data: long enough to ride out a reboot, short
// enough to limit the window with reduced protection.
const DefaultRepairGrace = 10 * time.Minute

// eventLoop turns cluster events into jobs, on the coordinator's node only:
// a drive in service that has been down for longer than the repair grace
// period starts a repair job at priority 1, unless one is already queued
// or running.
//
// The down-since times are kept in memory by the coordinator: after a
// coordinator change the grace period starts again (erring on the side of
// waiting, never of repairing early).
func (s *Server) eventLoop() {
	defer s.wg.Done()
	downSince := map[cluster.DriveID]time.Time{}
	t := time.NewTicker(min(s.cfg.RepairGrace/4+time.Second, 5*time.Second))
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if !s.jobs.IsCoordinator() {
			clear(downSince)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := s.checkDownDrives(ctx, downSince); err != nil {
			s.log.Warn("events", "err", err)
		}
		cancel()
	}
}

func (s *Server) checkDownDrives(ctx context.Context, downSince map[cluster.DriveID]time.Time) error {
	drives, err := s.store.ListDrives(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	var overdue []string
	seen := map[cluster.DriveID]bool{}
	for _, d := range drives {
		if d.State == cluster.Up || d.Status == cluster.StatusRemoved {
			continue
		}
		seen[d.ID] = true
		since, ok := downSince[d.ID]
		if !ok {
			downSince[d.ID] = now
			s.log.Warn("drive down; repair starts after the grace period unless it returns", "drive", d.ID, "node", d.Node, "grace", s.cfg.RepairGrace)
			continue
		}
		if now.Sub(since) >= s.cfg.RepairGrace {
			overdue = append(overdue, d.ID.String())
		}
	}
	for id := range downSince {
		if !seen[id] {
			delete(downSince, id) // back up (or removed): start over if it fails again
		}
	}
	if len(overdue) == 0 {
		return nil
	}
	jobs, err := s.jobs.List(ctx)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if j.Type == "repair" && !j.State.Terminal() {
			return nil // a repair is already queued or running; it sees the down drives
		}
	}
	sort.Strings(overdue)
	id, err := s.jobs.Submit(ctx, "repair", job.Options{Priority: 1, Params: map[string]string{
		"reason": fmt.Sprintf("drives down for more than %s: %s", s.cfg.RepairGrace, strings.Join(overdue, ",")),
	}})
	if err != nil {
		return fmt.Errorf("start repair: %w", err)
	}
	s.log.Warn("repair started by the down-drive event", "job", id, "drives", strings.Join(overdue, ","))
	// Give the repair the whole grace period before another could start.
	for id := range downSince {
		downSince[id] = time.Now()
	}
	return nil
}
