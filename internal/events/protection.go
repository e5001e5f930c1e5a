package events

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/job"
)

// Protection is what the namespace's protection index holds (the
// wiring reads it: meta.Meta.ProtectionStats): stripes committed below
// their pool's target tolerance, written while drives or nodes were
// down.
type Protection struct {
	Files, Stripes int
	Bytes          uint64
	// Newest is when the newest entry counted went below its target.
	Newest time.Time
	// Incomplete: the index may miss stripes (a namespace upgraded from
	// format 1) since IncompleteSince, until a repair checks every file.
	Incomplete      bool
	IncompleteSince time.Time
}

// protectionSubject is the subject of under-protected events.
const protectionSubject = "protection index"

// protectionCooldown is how long after a repair ended the watcher waits
// before it starts another for stripes that went below their protection
// while every drive was up: such stripes mean the pool cannot place better
// (a node full), and a repair every few seconds would not help.
const protectionCooldown = 5 * time.Minute

// checkProtection starts a repair when stripes are below their pool's
// protection and the cluster may now place them better:
//
//   - drives came back up (returned: their names) while the index is not
//     empty — the stripes written while they were down can spread again;
//   - every drive in service is up and the index holds an entry newer
//     than the last repair job's submission (writes that were in flight
//     when the drives came back, or a namespace upgraded from format 1),
//     unless a repair ended less than protectionCooldown ago.
//
// Each is recorded as an under-protected event, once per job it names
// (a repair already queued or running covers it; drives coming back are
// covered only by a repair that has not started: notStartedRepair). An
// empty index records nothing.
//
// Job times and index times are wall clocks (the engine's and the
// committers'), so the cooldown is judged by time.Now, not by the
// watcher's Config.Now.
func (w *Watcher) checkProtection(ctx context.Context, drives []cluster.Drive, returned []string) error {
	if w.cfg.Protection == nil {
		return nil
	}
	p, err := w.cfg.Protection(ctx)
	if err != nil {
		return err
	}
	if p.Stripes == 0 && !p.Incomplete {
		delete(w.reported, protectionSubject) // a new shortfall is a new event
		return nil
	}
	var why string
	cover := liveOf("repair")
	switch {
	case len(returned) > 0:
		why = fmt.Sprintf("%s back up", strings.Join(returned, ","))
		cover = notStartedRepair
	case allUp(drives):
		jobs, err := w.listJobs(ctx)
		if err != nil {
			return err
		}
		var last, ended time.Time
		for _, j := range jobs {
			if j.Type == "repair" {
				last = maxTime(last, j.Created)
				ended = maxTime(ended, j.Ended)
			}
		}
		switch {
		case p.Newest.After(last) && time.Since(ended) >= protectionCooldown:
			why = "stripes went below their protection since the last repair was submitted"
		case p.Incomplete && p.IncompleteSince.After(last):
			why = "the namespace was upgraded from format 1: a repair checks every stripe once"
		}
	}
	if why == "" {
		return nil
	}
	detail := fmt.Sprintf("%s; %d stripes of %d files (%.1f MiB) are below their pool's protection", why, p.Stripes, p.Files, float64(p.Bytes)/(1<<20))
	id, outcome := w.submit(ctx, "repair", job.Options{Params: map[string]string{"reason": "under-protected stripes: " + why}}, cover)
	if strings.HasPrefix(outcome, "started") {
		w.cfg.Log.Warn("repair started for under-protected stripes", "job", id, "why", why, "stripes", p.Stripes, "files", p.Files)
	}
	return w.record(ctx, job.Event{Kind: job.EventUnderProtected, Subject: protectionSubject, Detail: detail, Job: id, Outcome: outcome,
		Params: map[string]string{"stripes": fmt.Sprint(p.Stripes), "files": fmt.Sprint(p.Files)}})
}

// notStartedRepair accepts a repair that covers drives coming back: one
// queued (it will see them up), or paused by a user (whose decision
// stands). A repair running, or paused by the system, may have passed the
// stripes while the drives were down and left them as they were.
func notStartedRepair(j job.JobView) bool {
	return j.Type == "repair" && (j.State == job.Queued || j.State == job.Paused)
}

// allUp reports whether every drive in service (not removed) is up.
func allUp(drives []cluster.Drive) bool {
	for _, d := range drives {
		if d.Status != cluster.StatusRemoved && d.State != cluster.Up {
			return false
		}
	}
	return true
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
