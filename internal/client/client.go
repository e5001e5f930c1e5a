package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/weftfs/weft/internal/block"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/qos"
)

// Defaults of Config.
const (
	// DefaultReadahead is the number of stripes read ahead of a sequential
	// reader.
	DefaultReadahead = 4
	// DefaultMaxDirty is the most bytes buffered per open file before
	// WriteAt waits for write-out. Complete stripes are written out at
	// once, so it holds mostly a random writer's small writes (sparse
	// stripes hold what was written, see dstripe), whose stripes each cost
	// a read-modify-write: the more it holds, the more writes one carries.
	DefaultMaxDirty = 1 << 30
	// The default of Config.MaxDirtyTotal is an eighth of the machine's
	// memory (like the kernel's dirty page limits), within these bounds.
	minDefaultDirtyTotal = 256 << 20
	maxDefaultDirtyTotal = 4 << 30
	// DefaultWriteBehind is the number of stripes one Client writes out at
	// once (each to K+M drives in parallel), over all its open files: 16
	// stripes of ec:4+2 with 1 MiB units hold 96 MiB of buffers.
	DefaultWriteBehind = 16
	// DefaultCacheBytes bounds the stripe data a Client caches for
	// sequential readers, over all files.
	DefaultCacheBytes = 256 << 20
	// raStreams is how many readers at once get a full readahead window
	// (Readahead stripes in flight each); more share the slots.
	raStreams = 4
	// DefaultIOTimeout bounds one block RPC.
	DefaultIOTimeout = 30 * time.Second
	// DefaultMapTTL is how long a cached stripe map is trusted before it is
	// read again from meta. Stale maps are harmless for writes (the commit
	// compare-and-swap catches them) and for reads of moved blocks ("not
	// found" re-reads the map); they only delay seeing another client's
	// writes, like NFS attribute caching.
	DefaultMapTTL = 2 * time.Second
	// DefaultInlineMax is the largest file whose data is committed inline,
	// in its stripe map (see Config.InlineMax): an inode's worth, like the
	// data-in-inode of file systems with 4 KiB inodes.
	DefaultInlineMax = 4 << 10
)

// Tuning limits.
const (
	// maxCommitAttempts bounds read-modify-write retries after stripe
	// generation conflicts.
	maxCommitAttempts = 8
	// maxPutRounds bounds re-placing units whose put failed.
	maxPutRounds = 3
	// mapBatch is how many stripe maps one meta read fetches.
	mapBatch = 64
	// maxRepairNotes bounds the set of stripes noted as needing repair.
	maxRepairNotes = 4096
)

// Config configures a Client.
type Config struct {
	// Meta is the namespace; required.
	Meta *meta.Meta
	// Topology tells drives, nodes and pools; required.
	Topology Topology
	// Session identifies this client in log lines (the vfs layer does the
	// open-file tracking in meta with it).
	Session meta.SessionID
	// UnitSize is the unit (block) size of new files' stripes: a multiple
	// of erasure.UnitAlign; 0 means erasure.DefaultUnitSize. A file keeps
	// the stripe size of its first commit.
	UnitSize int
	// Log receives warnings (degraded reads, under-protected writes); nil
	// discards them.
	Log *slog.Logger
	// Readahead is the number of stripes prefetched ahead of a sequential
	// reader; 0 means DefaultReadahead, negative disables readahead.
	Readahead int
	// PrefetchCap bounds how far one reader's prefetch reads ahead of it,
	// in bytes: stripes ahead of a sequential reader (at most Readahead),
	// records ahead of a strided one. 0 means no bound beyond Readahead;
	// a cap below a stripe stops stripe readahead; negative turns every
	// prefetch off (as a negative Readahead does).
	PrefetchCap int64
	// CacheBytes bounds the stripe data cached for sequential readers
	// over all files; 0 means DefaultCacheBytes. Past it, readers read
	// ranges directly and readahead pauses.
	CacheBytes int64
	// MaxDirty is the most bytes buffered per open file (per LIN) before
	// WriteAt waits for write-out; 0 means DefaultMaxDirty.
	MaxDirty int64
	// MaxDirtyTotal is the most bytes buffered over all files: a WriteAt
	// that finds more writes out its own file's stripes first. 0 means an
	// eighth of the machine's memory, at least 256 MiB and at most 4 GiB.
	MaxDirtyTotal int64
	// WriteBehind is the number of stripes the Client writes out at once;
	// 0 means DefaultWriteBehind.
	WriteBehind int
	// IOTimeout bounds one block RPC; 0 means DefaultIOTimeout.
	IOTimeout time.Duration
	// MapTTL is the lifetime of cached stripe maps; 0 means DefaultMapTTL.
	MapTTL time.Duration
	// InlineMax is the largest file, in bytes, whose data a write-out
	// commits inline — in the file's stripe map in the namespace
	// (meta.Stripe.Inline), replicated by it, in the transaction that
	// commits the file's size — rather than in blocks on the drives. Such
	// a file costs one metadata transaction to write and is read with its
	// map, without any block I/O. A file that grows past it moves to
	// blocks at its next write-out. 0 means DefaultInlineMax; negative
	// stores every file in blocks; at most meta.MaxInline.
	InlineMax int
	// InlineAllowed, if set, is asked before each inline commit: false
	// sends the file's data to blocks instead (a mount and a node answer
	// false while the fullest etcd member's database is past half its
	// quota: etcd.SpaceWatcher).
	InlineAllowed func() bool
	// Dial connects to a node's block service; nil means block.Dial (with
	// BlockTLS). Tests use it to inject faults.
	Dial func(addr string) (BlockClient, error)
	// BlockTLS, if set, is the TLS configuration of the connections to the
	// block services (a pki.Source's ClientTLS: this process's node or
	// client identity); nil connects in plain text, to nodes run with
	// --insecure.
	BlockTLS *tls.Config
	// ClusterID enables short-circuit I/O with drives of nodes on this
	// machine (DriveState.LocalPath), after checking that the directory
	// holds that drive of this cluster: units are read straight from the
	// drive directory, with the same checksum checks, and written into it
	// and adopted by the node (staged writes, see stageUnit); "" reads
	// and writes everything through the block services.
	ClusterID string
	// LocalIO, if set, is asked before each short-circuit read or staged
	// write: false sends the I/O through the block service instead. QoS
	// is enforced at the block services, so a client whose class is
	// limited must not go around them (the node's job client turns local
	// I/O off while the maintenance class is limited).
	LocalIO func() bool
	// OwnDrive, if set, returns the drive id when this process serves it
	// (a node's own drives), else nil: short-circuit I/O to it goes
	// through that open drive rather than a read-only copy the client
	// opens, so the drive's counters — its metrics, and the load the
	// node's impact throttle reads — and its header cache include this
	// client's I/O. LocalIO still decides whether I/O may go around the
	// block service at all.
	OwnDrive func(meta.DriveID) *drive.Drive
	// Class is the QoS class of this client's block I/O (qos.Other for a
	// mount, qos.Maintenance for a node's jobs); "" is qos.Misc. A call's
	// context may say otherwise (block.WithTag).
	Class qos.Class
	// ClientID names this client in QoS statistics (a mount's session
	// id); "" leaves it out.
	ClientID string
	// JobOf, if set, names the job whose work a call's context does ("":
	// none), for the QoS tag of its block calls.
	JobOf func(context.Context) string
}

// metaStore is the part of *meta.Meta the client uses.
type metaStore interface {
	GetAttr(ctx context.Context, lin meta.LIN) (meta.Attr, error)
	GetStripes(ctx context.Context, lin meta.LIN, from uint64, n int) ([]meta.Stripe, error)
	GetStripesAt(ctx context.Context, lin meta.LIN, from, to uint64) ([]meta.Stripe, error)
	CommitStripes(ctx context.Context, lin meta.LIN, ups []meta.StripeUpdate, co meta.CommitOptions) ([]meta.Stripe, error)
	SetAttr(ctx context.Context, lin meta.LIN, mask meta.SetAttrMask, a meta.Attr) (meta.Attr, error)
	// Extend and DropStripes make holes (see sparse.go).
	Extend(ctx context.Context, lin meta.LIN, size uint64) (meta.Attr, error)
	DropStripes(ctx context.Context, lin meta.LIN, from, to, size uint64) (meta.Attr, error)
	EnqueueDeletes(ctx context.Context, entries []meta.DeleteEntry) error
	// Sync waits until a metadata cache has seen every change committed
	// before the call (see meta.Meta.Sync).
	Sync(ctx context.Context) error
	// Path names a file in log lines (see meta.Meta.Path).
	Path(ctx context.Context, lin meta.LIN) (string, error)
}

var _ metaStore = (*meta.Meta)(nil)

// Client is the file data path of one process (a FUSE mount, a gateway):
// it opens files of the namespace for reading and writing their data.
//
// Handles of the same LIN opened through one Client share its state —
// size, buffered writes, stripe map and data caches — so that each sees the
// others' writes at once. Handles in different Clients see each other's
// data once it is flushed, within MapTTL (at once after a re-open).
//
// Background work (write-behind, readahead) runs on goroutines bounded by
// WriteBehind and Readahead and stops at Close.
//
// Locking: mu guards the table of open inodes, the connection cache and
// the repair notes; each inode has its own lock (see inode). A Client is
// safe for concurrent use.
type Client struct {
	meta      metaStore
	topo      Topology
	freshAt   atomic.Int64 // unix nanoseconds of FreshSnapshot's last read past the cache
	log       *slog.Logger
	session   meta.SessionID
	unitSize  int
	readahead int
	// prefetchCap is Config.PrefetchCap (0: none).
	prefetchCap int64
	maxDirty    int64
	maxTotal    int64        // Config.MaxDirtyTotal
	dirty       atomic.Int64 // bytes of write buffers over all files (inode.buffered)
	maxCache    int64
	cached      atomic.Int64 // bytes of stripe data cached (or loading) over all files
	ioTimeout   time.Duration
	mapTTL      time.Duration
	inlineMax   int64       // Config.InlineMax (0: none)
	inlineOK    func() bool // Config.InlineAllowed
	dial        func(addr string) (BlockClient, error)
	codec       *erasure.Codec
	bufs        bufPool
	wsem        chan struct{} // write-out slots
	rasem       chan struct{} // readahead slots
	seed        uint64
	st          counters

	ctx    context.Context // background work; canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool
	inodes map[meta.LIN]*inode
	conns  map[string]BlockClient
	repair map[meta.StripeRef]bool
	// unreadable holds the files a read found unreadable (logged once
	// each; at most maxRepairNotes).
	unreadable map[meta.LIN]bool
	// Short-circuit reads: drives opened read-only, and drives that could
	// not be opened, with when to try again.
	clusterID string
	local     map[meta.DriveID]*drive.Drive
	noLocal   map[meta.DriveID]time.Time
	// Staged writes: drives whose directory refused one, with when to
	// try again.
	noStage  map[meta.DriveID]time.Time
	localIO  func() bool
	ownDrive func(meta.DriveID) *drive.Drive
	jobOf    func(context.Context) string
	// unsynced: units of files born under a delegation, written unsynced
	// (unsynced.go).
	unsynced unsyncedWrites
	// tag is the QoS tag of every block call (Config.Class, ClientID).
	tag qos.Tag
	// meter measures the client's own unit reads and writes per pool,
	// whose p99 its calls carry (qos.Tag.P99), when its class is the one
	// the job throttle protects (qos.LatencyClass); nil otherwise.
	meter *qos.Meter
}

// New returns a Client. It fails with an error wrapping ErrInvalid when
// Meta or Topology is missing or UnitSize is not a valid unit size.
func New(cfg Config) (*Client, error) {
	if cfg.Meta == nil || cfg.Topology == nil {
		return nil, fmt.Errorf("%w: Config.Meta and Config.Topology are required", ErrInvalid)
	}
	return newClient(cfg.Meta, cfg)
}

// newClient is New over any metaStore (tests wrap *meta.Meta).
func newClient(m metaStore, cfg Config) (*Client, error) {
	if _, err := erasure.NewGeometry(erasure.Protection{Data: 1, Parity: 1}, cfg.UnitSize); err != nil {
		return nil, fmt.Errorf("%w: Config.UnitSize: %w", ErrInvalid, err)
	}
	codec, err := erasure.NewCodec(erasure.Protection{Data: 4, Parity: 2})
	if err != nil {
		return nil, err
	}
	c := &Client{
		meta: m, topo: cfg.Topology, log: cfg.Log, session: cfg.Session,
		unitSize: cfg.UnitSize, readahead: cfg.Readahead, prefetchCap: cfg.PrefetchCap, maxDirty: cfg.MaxDirty, maxTotal: cfg.MaxDirtyTotal, maxCache: cfg.CacheBytes,
		ioTimeout: cfg.IOTimeout, mapTTL: cfg.MapTTL, dial: cfg.Dial, codec: codec,
		seed:   rand.Uint64(),
		inodes: map[meta.LIN]*inode{}, conns: map[string]BlockClient{}, repair: map[meta.StripeRef]bool{},
		unreadable: map[meta.LIN]bool{},
		clusterID:  cfg.ClusterID, local: map[meta.DriveID]*drive.Drive{}, noLocal: map[meta.DriveID]time.Time{},
		noStage: map[meta.DriveID]time.Time{}, localIO: cfg.LocalIO, ownDrive: cfg.OwnDrive, jobOf: cfg.JobOf, inlineOK: cfg.InlineAllowed,
		tag: qos.Tag{Class: cfg.Class, Client: cfg.ClientID},
	}
	if cfg.Class == qos.LatencyClass {
		c.meter = qos.NewMeter()
	}
	c.initUnsynced(m, cfg)
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.log = c.log.With("session", uint64(c.session))
	if c.unitSize == 0 {
		c.unitSize = erasure.DefaultUnitSize
	}
	switch {
	case c.readahead == 0:
		c.readahead = DefaultReadahead
	case c.readahead < 0:
		c.readahead = 0
	}
	if c.prefetchCap < 0 {
		c.readahead, c.prefetchCap = 0, 0
	}
	if c.maxDirty <= 0 {
		c.maxDirty = DefaultMaxDirty
	}
	if c.maxTotal <= 0 {
		c.maxTotal = defaultDirtyTotal()
	}
	if c.maxCache <= 0 {
		c.maxCache = DefaultCacheBytes
	}
	wb := cfg.WriteBehind
	if wb <= 0 {
		wb = DefaultWriteBehind
	}
	if c.ioTimeout <= 0 {
		c.ioTimeout = DefaultIOTimeout
	}
	if c.mapTTL <= 0 {
		c.mapTTL = DefaultMapTTL
	}
	switch {
	case cfg.InlineMax == 0:
		c.inlineMax = DefaultInlineMax
	case cfg.InlineMax > meta.MaxInline:
		return nil, fmt.Errorf("%w: Config.InlineMax %d: at most %d bytes (meta.MaxInline)", ErrInvalid, cfg.InlineMax, meta.MaxInline)
	case cfg.InlineMax > 0:
		c.inlineMax = int64(cfg.InlineMax)
	}
	if c.dial == nil {
		var opts []block.DialOption
		if cfg.BlockTLS != nil {
			opts = append(opts, block.WithTLS(cfg.BlockTLS))
		}
		c.dial = func(addr string) (BlockClient, error) { return block.Dial(addr, opts...) }
	}
	c.wsem = make(chan struct{}, wb)
	// Readahead slots: a full window for a few files read at once.
	c.rasem = make(chan struct{}, max(c.readahead, 1)*raStreams)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Close stops background work, waits for it, and closes the connections
// to block services. Buffered writes of files not flushed are lost: flush
// or close every File first. Close is idempotent; afterwards every method
// returns ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.closeUnsynced()
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for addr, bc := range c.conns {
		if err := bc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("client: closing connection to %s: %w", addr, err))
		}
	}
	c.conns = nil
	for _, d := range c.local {
		_ = d.Close()
	}
	c.local = nil
	return errors.Join(errs...)
}

// goBackground runs fn on a goroutine tracked by Close, unless the Client
// is closed (then it reports false and does not run fn).
func (c *Client) goBackground(fn func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
	return true
}

// isClosed reports whether Close was called.
func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Size returns the size of lin including buffered, uncommitted writes, and
// true, if lin is open in this Client with writes not yet committed; else
// false (meta's size is then current). For getattr.
func (c *Client) Size(lin meta.LIN) (int64, bool) {
	ino := c.openInode(lin)
	if ino == nil {
		return 0, false
	}
	ino.mu.Lock()
	defer ino.mu.Unlock()
	if len(ino.dirty) == 0 && len(ino.inflight) == 0 {
		return 0, false
	}
	return ino.size, true
}

// Flush writes out and commits the buffered writes of lin, if it is open
// in this Client with writes buffered (see File.Flush); else it does
// nothing. A change of the file's mtime calls it first: the commit of
// writes made before the change sets mtime, and must not set it after.
func (c *Client) Flush(ctx context.Context, lin meta.LIN) error {
	if ino := c.openInode(lin); ino != nil {
		return ino.flush(ctx) // nothing buffered: returns at once
	}
	return nil
}

// openInode returns lin's inode if the file is open in this Client, else
// nil.
func (c *Client) openInode(lin meta.LIN) *inode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inodes[lin]
}

// rng returns a fresh random source for one placement (placement.Request
// wants one per goroutine).
func (c *Client) rng() *rand.Rand {
	return rand.New(rand.NewPCG(c.seed, c.st.seq.Add(1)))
}

// defaultDirtyTotal is the default of Config.MaxDirtyTotal.
func defaultDirtyTotal() int64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return minDefaultDirtyTotal
	}
	return min(max(int64(si.Totalram)*int64(si.Unit)/8, minDefaultDirtyTotal), maxDefaultDirtyTotal)
}
