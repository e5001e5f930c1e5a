package client

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/failpoint"
	"github.com/weftfs/weft/internal/meta"
	"golang.org/x/sys/unix"
)

// Unsynced writes. The data of a file born under a delegation is durable
// at fsync, like its create, and its first commit goes with the
// write-back (meta.Meta.DefersData); all a close promises is that the file
// is whole if it is there at all. So its units staged on a drive of this
// machine skip the data sync of Stage and the directory sync of Adopt
// (drive.Drive.StageUnsynced, AdoptUnsynced), and this client syncs the
// drives' file systems (syncfs(2)) in the data barrier the metadata runs
// before any commit that may name them (meta.Meta.AddDataBarrier): one
// sync of each file system for a write-back batch of files, where each
// unit cost two. Units put through a node, and units over
// maxUnsyncedUnit, are synced at the put, as always.
//
// A syncfs that fails means data written unsynced may be lost, and which
// files it belonged to is not known: the barrier then fails from that
// moment on, so that no commit names such data — the write-back's
// batches are dropped (the next fsync reports it) and stripe commits fail
// — until the client is opened again (the mount restarted). The failure
// is a write error of a drive's file system, which the drive's node sees
// too.

// maxUnsyncedUnit is the largest unit written unsynced: past it the
// unit's own write dominates its sync, and a barrier would wait for much
// data of many files at once (a large file's 1 MiB units are synced one
// by one, as before).
const maxUnsyncedUnit = 256 << 10

// dataSyncer is what the client uses of *meta.Meta for unsynced writes.
type dataSyncer interface {
	AddDataBarrier(fn func(context.Context) error) (remove func())
	DefersData(lin meta.LIN) bool
}

// unsyncedWrites is the client's state of unsynced writes.
type unsyncedWrites struct {
	meta   dataSyncer // nil: every unit is written synced
	remove func()     // unregisters the barrier

	syncMu sync.Mutex // one barrier at a time

	mu      sync.Mutex
	fs      map[meta.DriveID]*driveFS // opened before the drive's first unsynced write
	pending map[meta.DriveID]bool     // drives written unsynced since the last barrier
	failed  error                     // a barrier's failure, for good
	closed  bool

	writes, syncs atomic.Int64
}

// driveFS is drive id's directory, held open for syncfs, and the device
// of its file system (one syncfs serves the drives that share it).
type driveFS struct {
	id  meta.DriveID
	f   *os.File
	dev uint64
}

// initUnsynced turns unsynced writes on when the metadata store can defer
// data (a mount's, with write-back) and units may be staged locally.
func (c *Client) initUnsynced(m metaStore, cfg Config) {
	ds, ok := m.(dataSyncer)
	if !ok || cfg.ClusterID == "" {
		return
	}
	c.unsynced.meta = ds
	c.unsynced.fs = map[meta.DriveID]*driveFS{}
	c.unsynced.pending = map[meta.DriveID]bool{}
	c.unsynced.remove = ds.AddDataBarrier(c.syncUnsynced)
}

// mayDeferSync reports whether lin's units of unitLen bytes and
// generation gen may be written unsynced: they are small, for a stripe's
// first commit (generation 1), and the metadata defers lin's.
func (c *Client) mayDeferSync(lin meta.LIN, gen uint64, unitLen int) bool {
	return gen == 1 && unitLen <= maxUnsyncedUnit && c.unsynced.meta != nil && c.unsynced.meta.DefersData(lin)
}

// beginUnsynced prepares an unsynced write to drive d (ld, on this
// machine): it reports false, and the unit is then written synced, if a
// barrier has failed or the drive's file system cannot be held open.
func (c *Client) beginUnsynced(d meta.DriveID, ld *drive.Drive) bool {
	u := &c.unsynced
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.failed != nil || u.closed {
		return false
	}
	if u.fs[d] != nil {
		return true
	}
	f, err := ld.FS()
	if err != nil {
		c.log.Debug("unsynced writes off for a drive", "drive", d, "err", err)
		return false
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		c.log.Debug("unsynced writes off for a drive", "drive", d, "err", err)
		return false
	}
	u.fs[d] = &driveFS{id: d, f: f, dev: uint64(st.Dev)}
	return true
}

// doneUnsynced records a unit written unsynced to drive d and adopted: the
// next barrier syncs d's file system. (Recorded once the write is done,
// so that a barrier that takes it finds its bytes in the page cache.)
func (c *Client) doneUnsynced(d meta.DriveID) {
	u := &c.unsynced
	u.mu.Lock()
	u.pending[d] = true
	u.mu.Unlock()
	u.writes.Add(1)
}

// syncUnsynced is the client's data barrier: it syncs the file system of
// every drive written unsynced since the last barrier, each file system
// once.
//
// Failpoint client/before-data-sync: evaluated when there is something to
// sync, before the syncs; its error fails the barrier as a failed syncfs
// would (for good).
func (c *Client) syncUnsynced(ctx context.Context) error {
	u := &c.unsynced
	u.syncMu.Lock()
	defer u.syncMu.Unlock()
	u.mu.Lock()
	if u.failed != nil {
		err := u.failed
		u.mu.Unlock()
		return err
	}
	var todo []*driveFS
	seen := map[uint64]bool{}
	for d := range u.pending {
		fs := u.fs[d]
		if !seen[fs.dev] {
			seen[fs.dev] = true
			todo = append(todo, fs)
		}
	}
	clear(u.pending)
	u.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	err := failpoint.Eval("client/before-data-sync")
	for i := 0; err == nil && i < len(todo); i++ {
		if serr := unix.Syncfs(int(todo[i].f.Fd())); serr != nil {
			err = fmt.Errorf("syncfs of drive %d's file system (%s): %w", todo[i].id, todo[i].f.Name(), serr)
		}
	}
	if err != nil {
		err = fmt.Errorf("client: data written unsynced to this machine's drives may be lost (%w): no commit names it; writes fail until the client is restarted (remount)", err)
		c.log.Error("client: a data barrier failed", "err", err)
		u.mu.Lock()
		u.failed = err
		u.mu.Unlock()
		return err
	}
	u.syncs.Add(1)
	return nil
}

// closeUnsynced makes what was written unsynced durable (a last barrier),
// closes the drives' directories and, unless a barrier failed (a failure
// every later commit must still see), unregisters the barrier.
func (c *Client) closeUnsynced() {
	u := &c.unsynced
	if u.meta == nil {
		return
	}
	if err := c.syncUnsynced(context.Background()); err == nil {
		u.remove()
	}
	u.syncMu.Lock()
	defer u.syncMu.Unlock()
	u.mu.Lock()
	defer u.mu.Unlock()
	u.closed = true
	for _, fs := range u.fs {
		fs.f.Close()
	}
	u.fs = map[meta.DriveID]*driveFS{}
}
