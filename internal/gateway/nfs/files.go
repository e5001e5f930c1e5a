package nfs

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/weftfs/weft/internal/vfs"
)

// NFSv3 has no open or close: every READ and WRITE names a file by its
// handle. Opening a vfs handle per request would cost a metadata round
// trip each time and, worse, a write-out and commit at each close, which
// would make UNSTABLE writes as slow as FILE_SYNC ones. So the gateway
// keeps open vfs handles per LIN (files), one for reading and one for
// reading and writing, shared by every client: vfs buffers UNSTABLE writes
// in them until a COMMIT, a FILE_SYNC write, or the handle's close writes
// them out.
//
// A handle unused for idleClose is closed (flushing its writes), as is the
// least recently used one beyond maxOpen. There is no goroutine for it (an
// edge may not use the node's runner): requests sweep, at most once per
// sweepEvery, and so does Server.CloseIdle, which the wiring may call from
// a worker of its runner so that a gateway no client talks to any more
// lets its files go too. If the flush at a close fails, the buffered writes are gone:
// the file's write verifier changes (lost), so that a client that wrote
// UNSTABLE and has not committed yet sees a new verifier at its COMMIT and
// resends its writes, as it would after a server restart.
const (
	idleClose  = 30 * time.Second
	maxOpen    = 1024
	sweepEvery = time.Second
)

type openFile struct {
	h        *vfs.Handle
	lin      vfs.LIN
	writable bool
	busy     int
	used     time.Time
}

type fileKey struct {
	lin      vfs.LIN
	writable bool
}

type files struct {
	fs   *vfs.FS
	log  *slog.Logger
	idle time.Duration // idleClose, or Config.IdleClose

	mu        sync.Mutex
	open      map[fileKey]*openFile
	lost      map[vfs.LIN]uint64 // failed flushes at close, by LIN
	lastSweep time.Time
	closed    bool
}

func newFiles(fs *vfs.FS, log *slog.Logger, idle time.Duration) *files {
	if idle <= 0 {
		idle = idleClose
	}
	return &files{fs: fs, log: log, idle: idle, open: map[fileKey]*openFile{}, lost: map[vfs.LIN]uint64{}}
}

var errServerClosed = errors.New("nfs: server closed")

// get returns an open handle of lin, writable if asked; reading uses a
// writable one if there is one, so that it reads through the same
// buffers. The caller must put it back. The handle is opened as root: the
// procedures check the caller's permission themselves (NFS's owner
// override needs it), and a cached handle serves every caller.
func (f *files) get(ctx context.Context, lin vfs.LIN, writable bool) (*openFile, error) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil, errServerClosed
	}
	of := f.open[fileKey{lin, true}]
	if of == nil && !writable {
		of = f.open[fileKey{lin, false}]
	}
	if of != nil {
		of.busy++
		f.mu.Unlock()
		return of, nil
	}
	f.mu.Unlock()

	flags := os.O_RDONLY
	if writable {
		flags = os.O_RDWR
	}
	h, err := f.fs.Open(vfs.WithCaller(ctx, vfs.Caller{PID: vfs.CallerFrom(ctx).PID}), lin, flags)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k := fileKey{lin, writable}
	if of := f.open[k]; of != nil || f.closed { // raced with another opener
		f.mu.Unlock()
		if err := f.fs.Release(ctx, h.ID); err != nil {
			f.log.Warn("nfs: release duplicate handle", "lin", lin, "err", err)
		}
		f.mu.Lock()
		if f.closed {
			return nil, errServerClosed
		}
		of = f.open[k]
		if of == nil {
			return nil, errServerClosed
		}
		of.busy++
		return of, nil
	}
	of = &openFile{h: h, lin: lin, writable: writable, busy: 1, used: time.Now()}
	f.open[k] = of
	return of, nil
}

func (f *files) put(of *openFile) {
	f.mu.Lock()
	of.busy--
	of.used = time.Now()
	f.mu.Unlock()
}

// lostCount is the number of failed flushes of lin's handles, which
// changes its write verifier.
func (f *files) lostCount(lin vfs.LIN) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lost[lin]
}

// sweep closes handles idle for f.idle and the least recently used
// beyond maxOpen, at most once per sweepEvery.
func (f *files) sweep(ctx context.Context) { f.sweepIf(ctx, false) }

// sweepIf sweeps; force ignores sweepEvery.
func (f *files) sweepIf(ctx context.Context, force bool) {
	now := time.Now()
	f.mu.Lock()
	if !force && now.Sub(f.lastSweep) < sweepEvery {
		f.mu.Unlock()
		return
	}
	f.lastSweep = now
	var idle, rest []*openFile
	for _, of := range f.open {
		if of.busy > 0 {
			continue
		}
		if now.Sub(of.used) >= f.idle {
			idle = append(idle, of)
		} else {
			rest = append(rest, of)
		}
	}
	if over := len(f.open) - len(idle) - maxOpen; over > 0 {
		sort.Slice(rest, func(i, j int) bool { return rest[i].used.Before(rest[j].used) })
		idle = append(idle, rest[:min(over, len(rest))]...)
	}
	for _, of := range idle {
		delete(f.open, fileKey{of.lin, of.writable})
	}
	f.mu.Unlock()
	for _, of := range idle {
		f.release(ctx, of)
	}
}

// drop closes lin's idle handles (after its last link may have gone, so
// that vfs frees an unlinked file's data).
func (f *files) drop(ctx context.Context, lin vfs.LIN) {
	var rel []*openFile
	f.mu.Lock()
	for _, w := range []bool{false, true} {
		if of := f.open[fileKey{lin, w}]; of != nil && of.busy == 0 {
			delete(f.open, fileKey{lin, w})
			rel = append(rel, of)
		}
	}
	f.mu.Unlock()
	for _, of := range rel {
		f.release(ctx, of)
	}
}

func (f *files) release(ctx context.Context, of *openFile) error {
	err := f.fs.Release(context.WithoutCancel(ctx), of.h.ID)
	if err != nil && of.writable {
		f.mu.Lock()
		f.lost[of.lin]++
		f.mu.Unlock()
		f.log.Error("nfs: flushing a file's unstable writes at close failed; its write verifier changes so that clients resend",
			"lin", of.lin, "err", err)
	}
	return err
}

// close releases every handle, flushing buffered writes; it returns the
// first error.
func (f *files) close(ctx context.Context) error {
	f.mu.Lock()
	f.closed = true
	all := f.open
	f.open = map[fileKey]*openFile{}
	f.mu.Unlock()
	var first error
	for _, of := range all {
		if err := f.release(ctx, of); err != nil && first == nil {
			first = err
		}
	}
	return first
}
