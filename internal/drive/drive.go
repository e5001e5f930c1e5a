package drive

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// lockFile is the name of the file a Drive holds an exclusive flock on while
// open, so two servers never share a drive directory.
const lockFile = "weft-drive.lock"

// blocksDir is the subdirectory holding the block files.
const blocksDir = "blocks"

// ioBufferSize is the size of the buffers Put and Verify stream data through;
// a multiple of SegmentSize.
const ioBufferSize = 1 << 20

// SyncMode says how Put makes a block durable.
type SyncMode int

const (
	// SyncAlways fdatasyncs each block file and fsyncs its directory before
	// Put returns. The default, and the only mode for real data.
	SyncAlways SyncMode = iota
	// SyncNever skips both syncs: a crash may lose acknowledged blocks (they
	// are then missing, never torn-and-valid). For tests and benchmarks only.
	SyncNever
)

// Options configure Open.
type Options struct {
	// ClusterID is the id of the cluster this node belongs to; required.
	ClusterID string
	// Node is the name of this node; required.
	Node string
	// Class is the drive's class, recorded when the directory becomes a
	// drive (required then); an existing drive keeps its recorded class.
	Class Class
	// AllocID allocates a drive id from the control plane. It is called only
	// when the directory has no identity yet, and then it is required.
	AllocID func() (ID, error)
	// Logger receives the drive's log lines; nil discards them.
	Logger *slog.Logger
	// Sync is the durability mode of Put; the zero value is SyncAlways.
	Sync SyncMode
	// Reserve is the number of bytes of the file system kept free: Put
	// refuses a block that would eat into it. Default 0.
	Reserve int64
	// Capacity caps the bytes of block files the drive holds; 0 means the
	// whole file system. With a capacity, Usage reports TotalBytes =
	// min(file system size, Capacity) and FreeBytes = min(file system free
	// − Reserve, Capacity − used), and Put refuses a block that would go
	// past it (ErrNoSpace). For drives that share a file system (local
	// clusters, tests), where the file system's numbers mean nothing per
	// drive. It is configuration, not identity: reopening a drive with
	// another capacity just applies the new one, even below what it holds.
	Capacity int64
}

// Drive is one open drive directory. All methods are safe for concurrent
// use; block operations take no drive-wide lock (each block is its own file
// and the file system's rename/link atomicity orders concurrent writers).
type Drive struct {
	path     string
	ident    Identity
	log      *slog.Logger
	sync     SyncMode
	reserve  int64
	capacity int64 // 0: the whole file system
	lock     *os.File
	closed   atomic.Bool
	used     atomic.Int64 // bytes in block files
	blocks   atomic.Int64 // number of block files
	counters counters
	// pending is the bytes of Puts that passed the capacity check and are
	// not yet counted in used; guarded by capMu, which also orders their
	// move into used, so that concurrent Puts never overshoot Capacity.
	capMu   sync.Mutex
	pending int64
	bufs    sync.Pool   // *[]byte of ioBufferSize, directAlign-aligned
	direct  atomic.Bool // Put writes with O_DIRECT (see direct_io.go)
	// bufferedReads: a direct read was refused (see readAt); every
	// read goes through the page cache from then on.
	bufferedReads atomic.Bool
	readOnly      bool         // OpenReadOnly: no lock, no writes
	headers       *headerCache // OpenReadOnly: headers of blocks read (nil: none kept)
}

// Open opens the drive in directory path, creating the directory and the
// drive identity if the directory is missing or empty.
//
// It refuses, with an error naming the path and the reason: a non-empty
// directory without identity (ErrNotEmpty; lost+found is ignored), a drive of
// another cluster (ErrOtherCluster) or node (ErrOtherNode), an identity of a
// newer format (ErrNewerFormat), an unreadable identity (ErrBadIdentity), a
// drive already open elsewhere (ErrLocked), and bad options (ErrInvalid).
//
// Open removes temp files left by interrupted writes and scans the block
// files to initialise Usage; the scan reads one directory entry per block.
// The directory is made the server's user's alone (DirMode), with a log
// line if it was not.
// Close the drive to release its lock.
func Open(path string, opts Options) (*Drive, error) {
	if opts.ClusterID == "" || opts.Node == "" {
		return nil, fmt.Errorf("%w: opening drive %s: cluster id and node name are required", ErrInvalid, path)
	}
	if opts.Reserve < 0 {
		return nil, fmt.Errorf("%w: opening drive %s: negative reserve %d", ErrInvalid, path, opts.Reserve)
	}
	if opts.Capacity < 0 {
		return nil, fmt.Errorf("%w: opening drive %s: negative capacity %d; use 0 for the whole file system", ErrInvalid, path, opts.Capacity)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("drive: opening %s: %w", path, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Drive{path: abs, log: log.With("drive_path", abs), sync: opts.Sync, reserve: opts.Reserve, capacity: opts.Capacity}
	d.bufs.New = func() any { b := alignedBuf(ioBufferSize); return &b }

	if err := os.MkdirAll(abs, DirMode); err != nil {
		return nil, fmt.Errorf("drive: creating directory %s: %w", abs, err)
	}
	// Refuse a foreign directory before leaving a lock file in it, and a
	// drive of another cluster or node before trying its lock (which that
	// node's process may hold), so that the error says whose it is.
	if ident, err := readIdentity(abs); errors.Is(err, fs.ErrNotExist) {
		if err := checkEmpty(abs); err != nil {
			return nil, err
		}
	} else if err == nil {
		if err := checkOwner(abs, ident, opts); err != nil {
			return nil, err
		}
	}
	if d.lock, err = lockDir(abs); err != nil {
		return nil, err
	}
	if err := d.initIdentity(opts); err != nil {
		d.lock.Close()
		return nil, err
	}
	// Only now that it is known to be this node's drive (or an empty
	// directory made one): a directory refused above keeps its mode.
	if err := secureDir(abs, d.log); err != nil {
		d.lock.Close()
		return nil, err
	}
	d.log = d.log.With("drive", d.ident.DriveID.String())
	if err := d.scan(); err != nil {
		d.lock.Close()
		return nil, err
	}
	d.initDirect()
	d.log.Info("drive open", "cluster", d.ident.ClusterID, "class", d.ident.Class,
		"blocks", d.blocks.Load(), "used_bytes", d.used.Load(), "capacity", d.capacity)
	if d.capacity > 0 && d.used.Load() > d.capacity {
		d.log.Warn("drive holds more than its capacity; it takes no new blocks until it holds less",
			"used_bytes", d.used.Load(), "capacity", d.capacity)
	}
	return d, nil
}

// lockDir takes an exclusive, non-blocking flock on DIR/weft-drive.lock.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("drive: opening lock file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is open by another weft process (or twice in this one); stop it or pick another path", ErrLocked, dir)
		}
		return nil, fmt.Errorf("drive: locking %s: %w", path, err)
	}
	return f, nil
}

// checkEmpty returns ErrNotEmpty if dir holds anything but lost+found, the
// lock file and temp files.
func checkEmpty(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("drive: reading %s: %w", dir, err)
	}
	for _, e := range ents {
		switch n := e.Name(); {
		case n == "lost+found", n == lockFile, isTemp(n):
		default:
			return fmt.Errorf("%w: %s is not empty (it has %q) and has no %s; empty it or pick another path",
				ErrNotEmpty, dir, n, IdentityFile)
		}
	}
	return nil
}

// initIdentity reads the identity, or creates it for an empty directory, and
// checks it against opts. It must run under the drive lock.
func (d *Drive) initIdentity(opts Options) error {
	if err := removeTemps(d.path, d.log); err != nil {
		return err
	}
	ident, err := readIdentity(d.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return d.createIdentity(opts)
	case err != nil:
		return err
	}
	if err := checkOwner(d.path, ident, opts); err != nil {
		return err
	}
	if opts.Class != "" && opts.Class != ident.Class {
		d.log.Warn("drive class differs from the recorded one; keeping the recorded class",
			"recorded", ident.Class, "requested", opts.Class)
	}
	d.ident = ident
	return nil
}

// checkOwner refuses a drive of another cluster or node than opts name.
func checkOwner(path string, ident Identity, opts Options) error {
	switch {
	case ident.ClusterID != opts.ClusterID:
		return fmt.Errorf("%w: %s is drive %v of cluster %q, this node is in cluster %q; wipe it to reuse it here",
			ErrOtherCluster, path, ident.DriveID, ident.ClusterID, opts.ClusterID)
	case ident.Node != opts.Node:
		return fmt.Errorf("%w: %s is drive %v of node %q, not of this node %q; start weft as node %q or move the drive back",
			ErrOtherNode, path, ident.DriveID, ident.Node, opts.Node, ident.Node)
	}
	return nil
}

func (d *Drive) createIdentity(opts Options) error {
	if err := checkEmpty(d.path); err != nil {
		return err
	}
	if _, err := ParseClass(string(opts.Class)); err != nil {
		return fmt.Errorf("initialising drive %s: %w", d.path, err)
	}
	if opts.AllocID == nil {
		return fmt.Errorf("%w: initialising drive %s: no drive id allocator", ErrInvalid, d.path)
	}
	id, err := opts.AllocID()
	if err != nil {
		return fmt.Errorf("drive: initialising %s: allocating a drive id: %w", d.path, err)
	}
	ident := Identity{
		FormatVersion: IdentityFormatVersion,
		ClusterID:     opts.ClusterID,
		DriveID:       id,
		Node:          opts.Node,
		Class:         opts.Class,
		Created:       time.Now().UTC().Truncate(time.Second),
	}
	if err := writeIdentity(d.path, ident); err != nil {
		return fmt.Errorf("drive: initialising %s: writing identity: %w", d.path, err)
	}
	d.ident = ident
	d.log.Info("drive initialised", "drive", id.String(), "cluster", ident.ClusterID, "class", ident.Class)
	return nil
}

// removeTemps removes temp files directly in dir and logs how many.
func removeTemps(dir string, log *slog.Logger) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("drive: reading %s: %w", dir, err)
	}
	n := 0
	for _, e := range ents {
		if isTemp(e.Name()) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("drive: removing leftover temp file: %w", err)
			}
			n++
		}
	}
	if n > 0 {
		log.Info("removed leftover temp files", "dir", dir, "count", n)
	}
	return nil
}

// scan creates the 256 block subdirectories if missing, removes leftover
// temp files in them and counts the block files and their bytes.
func (d *Drive) scan() error {
	root := filepath.Join(d.path, blocksDir)
	if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(root, 0o755); err != nil {
			return fmt.Errorf("drive: creating %s: %w", root, err)
		}
		if err := syncDir(d.path); err != nil {
			return fmt.Errorf("drive: syncing %s: %w", d.path, err)
		}
	}
	created := false
	var temps, blocks, used, strays int64
	for i := 0; i < 256; i++ {
		sub := filepath.Join(root, fmt.Sprintf("%02x", i))
		ents, err := os.ReadDir(sub)
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(sub, 0o755); err != nil {
				return fmt.Errorf("drive: creating %s: %w", sub, err)
			}
			created = true
			continue
		}
		if err != nil {
			return fmt.Errorf("drive: reading %s: %w", sub, err)
		}
		for _, e := range ents {
			name := e.Name()
			if isTemp(name) {
				if err := os.Remove(filepath.Join(sub, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("drive: removing leftover temp file: %w", err)
				}
				temps++
				continue
			}
			if id, err := ParseBlockID(name); err != nil || id.String()[:2] != filepath.Base(sub) {
				strays++
				continue
			}
			info, err := e.Info()
			if err != nil {
				continue // deleted meanwhile
			}
			blocks++
			used += info.Size()
		}
	}
	if created {
		if err := syncDir(root); err != nil {
			return fmt.Errorf("drive: syncing %s: %w", root, err)
		}
	}
	if temps > 0 {
		d.log.Info("removed leftover temp files of interrupted writes", "count", temps)
	}
	if strays > 0 {
		d.log.Warn("ignoring files that are not blocks in the blocks directory", "count", strays)
	}
	d.blocks.Store(blocks)
	d.used.Store(used)
	return nil
}

// Close releases the drive's lock. Operations after Close return ErrClosed;
// Close waits for none of the operations in progress. Closing twice is a
// no-op.
func (d *Drive) Close() error {
	if d.readOnly {
		d.closed.Store(true)
		return nil
	}
	if d.closed.Swap(true) {
		return nil
	}
	return d.lock.Close()
}

func (d *Drive) checkOpen() error {
	if d.closed.Load() {
		return fmt.Errorf("%w: drive %v (%s)", ErrClosed, d.ident.DriveID, d.path)
	}
	return nil
}

// Identity returns the drive's identity.
func (d *Drive) Identity() Identity { return d.ident }

// Path returns the drive's absolute directory.
func (d *Drive) Path() string { return d.path }

// Capacity returns the drive's configured capacity in bytes, 0 for the
// whole file system.
func (d *Drive) Capacity() int64 { return d.capacity }

// ID returns the drive's id.
func (d *Drive) ID() ID { return d.ident.DriveID }

// Counters returns a snapshot of the drive's I/O counters; cheap (atomics
// only) and safe to call concurrently with I/O.
func (d *Drive) Counters() Counters {
	return Counters{
		Drive: d.ident.DriveID,
		Time:  time.Now(),
		Read:  d.counters.ops[OpRead].snapshot(),
		Write: d.counters.ops[OpWrite].snapshot(),
	}
}

// blockPath returns the file of block id. The id's text form is hex only,
// so the path never leaves the drive.
func (d *Drive) blockPath(id BlockID) (dir, file string) {
	s := id.String()
	dir = filepath.Join(d.path, blocksDir, s[:2])
	return dir, filepath.Join(dir, s)
}
