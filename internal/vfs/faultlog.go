package vfs

import (
	"log/slog"
	"sync"
	"time"
)

// FaultLogEvery is how often a FaultLog writes a line at most.
const FaultLogEvery = time.Second

// FaultLog rate-limits a gateway's warnings of the faults it answers an
// application with (EIO through FUSE, NFS3ERR_IO over NFS): the
// application sees only the code, so the cause must reach the gateway's
// log. The first is logged at once, then at most one every FaultLogEvery,
// each line with the number of others since the last one logged (a node
// or etcd that cannot be reached fails every request for a while; a line
// a second says so, with the cause). The zero value logs to
// slog.Default.
type FaultLog struct {
	Log *slog.Logger

	mu     sync.Mutex
	last   time.Time
	missed int
	now    func() time.Time // tests set it; nil is time.Now
}

// Note records that operation op answered err as a fault.
func (l *FaultLog) Note(op string, err error) {
	l.mu.Lock()
	now := time.Now()
	if l.now != nil {
		now = l.now()
	}
	if !l.last.IsZero() && now.Sub(l.last) < FaultLogEvery {
		l.missed++
		l.mu.Unlock()
		return
	}
	missed := l.missed
	l.last, l.missed = now, 0
	l.mu.Unlock()
	log := l.Log
	if log == nil {
		log = slog.Default()
	}
	log.Warn("I/O error returned to an application", "op", op, "err", err, "not_logged_since_last", missed)
}
