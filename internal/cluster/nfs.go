package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/runner"
)

// The NFS gateways' exports (weft nfs export).
//
// Key (see schema.go):
//
//	/weft/nfs/exports   NFSExports: every export, with Version counting
//	                    the changes; absent until the first change, which
//	                    reads as no exports (the gateways then export
//	                    "/" with the defaults: DefaultNFSExport)
//
// Every node that runs a gateway follows the key (NFSExportsFollower) and
// applies each version as it is written.
const keyNFSExports = Prefix + "nfs/exports"

// NFSExportsVersion is the "v" of the exports record this binary writes
// and the newest it reads.
const NFSExportsVersion = 1

// NFSMaxExports bounds the exports of a cluster, so that the record stays
// far below etcd's request size.
const NFSMaxExports = 256

// NFSExport is one exported directory, as the administrator configured
// it. The gateway (internal/gateway/nfs) takes the same fields.
type NFSExport struct {
	// Path is the exported directory, absolute and clean ("/" = all).
	Path string `json:"path"`
	// Clients are the IPs or CIDRs allowed to mount it; empty: any.
	Clients []string `json:"clients,omitempty"`
	// ReadOnly refuses every change through the export.
	ReadOnly bool `json:"read_only,omitempty"`
	// NoRootSquash lets uid 0 act as root; by default root is squashed
	// to AnonUID:AnonGID.
	NoRootSquash bool `json:"no_root_squash,omitempty"`
	// AnonUID and AnonGID are the identity of squashed requests; 0 means
	// 65534 (nobody, nogroup).
	AnonUID uint32 `json:"anon_uid,omitempty"`
	AnonGID uint32 `json:"anon_gid,omitempty"`
	// Sync makes every write durable before its reply (FILE_SYNC), for
	// clients that do not resend uncommitted writes when the write
	// verifier changes: what a failover needs from them.
	Sync bool `json:"sync,omitempty"`
}

// DefaultNFSExport is what the gateways export while no export is
// configured: the whole namespace, to any client, read-write, root
// squashed to 65534:65534.
var DefaultNFSExport = NFSExport{Path: "/"}

// Validate checks e, naming the field at fault and what to do, in an
// error wrapping ErrInvalid. It does not check that the directory exists
// (a gateway refuses to mount an export whose directory is missing).
func (e NFSExport) Validate() error {
	switch {
	case e.Path == "":
		return fmt.Errorf("%w: export path is empty: give the exported directory, absolute in the namespace, such as /projects", ErrInvalid)
	case !path.IsAbs(e.Path):
		return fmt.Errorf("%w: export path %q: want an absolute path in the namespace, such as /%s", ErrInvalid, e.Path, strings.TrimLeft(e.Path, "./"))
	case path.Clean(e.Path) != e.Path:
		return fmt.Errorf("%w: export path %q: want it clean, as %s (no trailing /, no . or .. or //)", ErrInvalid, e.Path, path.Clean(e.Path))
	case len(e.Path) > 4096 || strings.ContainsRune(e.Path, 0):
		return fmt.Errorf("%w: export path %q: longer than 4096 bytes or holding a NUL byte", ErrInvalid, e.Path)
	}
	for _, c := range e.Clients {
		if net.ParseIP(c) != nil {
			continue
		}
		if _, _, err := net.ParseCIDR(c); err != nil {
			return fmt.Errorf("%w: export %s: clients: %q is neither an IP address nor a CIDR: write 10.0.0.7, 10.0.0.0/24 or fd00::/64", ErrInvalid, e.Path, c)
		}
	}
	return nil
}

// NFSExports is the record at /weft/nfs/exports.
type NFSExports struct {
	V int `json:"v"`
	// Version counts the changes (0: never configured).
	Version uint64    `json:"version"`
	Updated time.Time `json:"updated,omitzero"`
	By      string    `json:"by,omitempty"`
	// Exports are sorted by path; no path twice.
	Exports []NFSExport `json:"exports"`
}

func (NFSExports) maxRecordVersion() int { return NFSExportsVersion }

// Effective returns the exports the gateways serve: the configured ones,
// or DefaultNFSExport when there are none.
func (x NFSExports) Effective() []NFSExport {
	if len(x.Exports) == 0 {
		return []NFSExport{DefaultNFSExport}
	}
	return slices.Clone(x.Exports)
}

// Validate checks every export and that no path is exported twice.
func (x NFSExports) Validate() error {
	if len(x.Exports) > NFSMaxExports {
		return fmt.Errorf("%w: %d exports: at most %d", ErrInvalid, len(x.Exports), NFSMaxExports)
	}
	seen := map[string]bool{}
	for _, e := range x.Exports {
		if err := e.Validate(); err != nil {
			return err
		}
		if seen[e.Path] {
			return fmt.Errorf("%w: export path %s is listed twice", ErrInvalid, e.Path)
		}
		seen[e.Path] = true
	}
	return nil
}

// NFSExports returns the exports record and the revision of its key (a
// record of version 0 and revision 0 if never configured). Errors: the
// control plane's; ErrNewerSchema, ErrCorruptRecord for a record this
// binary cannot read.
func (s *Store) NFSExports(ctx context.Context) (NFSExports, int64, error) {
	var x NFSExports
	rev, err := s.getRecord(ctx, keyNFSExports, &x)
	if err == ErrNotFound {
		return NFSExports{Exports: []NFSExport{}}, 0, nil
	}
	if x.Exports == nil {
		x.Exports = []NFSExport{}
	}
	return x, rev, err
}

// UpdateNFSExports changes the exports with change (which gets the
// current record and returns the new exports, or an error returned as it
// is), checks them (ErrInvalid) and stores them, sorted by path, as the
// next version, recording when and by whom. It retries when another
// change raced it, then fails with ErrConflict.
func (s *Store) UpdateNFSExports(ctx context.Context, by string, change func(NFSExports) ([]NFSExport, error)) (NFSExports, error) {
	for range 10 {
		cur, rev, err := s.NFSExports(ctx)
		if err != nil {
			return NFSExports{}, err
		}
		exports, err := change(cur)
		if err != nil {
			return NFSExports{}, err
		}
		next := NFSExports{V: NFSExportsVersion, Version: cur.Version + 1, Updated: time.Now().UTC().Truncate(time.Second), By: by,
			Exports: slices.Clone(exports)}
		if next.Exports == nil {
			next.Exports = []NFSExport{}
		}
		slices.SortFunc(next.Exports, func(a, b NFSExport) int { return strings.Compare(a.Path, b.Path) })
		if err := next.Validate(); err != nil {
			return NFSExports{}, err
		}
		t, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(keyNFSExports), "=", rev)).
			Then(clientv3.OpPut(keyNFSExports, encode(next))).Commit()
		if err != nil {
			return NFSExports{}, fmt.Errorf("cluster: store NFS exports version %d: %w", next.Version, err)
		}
		if t.Succeeded {
			return next, nil
		}
	}
	return NFSExports{}, fmt.Errorf("%w: the NFS exports kept changing under this change: look at weft nfs export list, then try again", ErrConflict)
}

// NFSExportsFollower keeps a copy of the exports record, following its
// key with an etcd watch as QoSFollower does the QoS configuration: its
// Step is a runner worker ("nfs-exports") whose one blocking step watches
// until the stream breaks or ctx ends. A record this binary cannot read
// keeps the exports it had, and is logged.
//
// Locking: the current record is an atomic pointer; changed is called
// from Load and Step, one call at a time.
type NFSExportsFollower struct {
	store   *Store
	log     *slog.Logger
	cur     atomic.Pointer[NFSExports]
	rev     atomic.Int64
	changed func(NFSExports)
}

var _ runner.Worker = (*NFSExportsFollower)(nil)

// NewNFSExportsFollower returns a follower over s (with no exports
// configured until Load), which calls changed (may be nil) with each
// record it applies.
func NewNFSExportsFollower(s *Store, log *slog.Logger, changed func(NFSExports)) *NFSExportsFollower {
	if log == nil {
		log = slog.Default()
	}
	f := &NFSExportsFollower{store: s, log: log, changed: changed}
	f.cur.Store(&NFSExports{Exports: []NFSExport{}})
	return f
}

// Current returns the record last read.
func (f *NFSExportsFollower) Current() NFSExports { return *f.cur.Load() }

// Load reads the record once. Errors are the control plane's; a record it
// cannot read is logged and skipped.
func (f *NFSExportsFollower) Load(ctx context.Context) error {
	r, err := f.store.cli.Get(ctx, keyNFSExports)
	if err != nil {
		return fmt.Errorf("cluster: read the NFS exports %s: %w", keyNFSExports, err)
	}
	if len(r.Kvs) == 0 {
		f.set(NFSExports{Exports: []NFSExport{}})
	} else {
		f.apply(r.Kvs[0].Value)
	}
	f.rev.Store(r.Header.Revision)
	return nil
}

func (f *NFSExportsFollower) apply(b []byte) {
	var x NFSExports
	err := decode(keyNFSExports, b, &x)
	if err == nil {
		err = x.Validate()
	}
	if err != nil {
		f.log.Warn("cannot read the NFS exports: keeping the previous ones", "kept_version", f.Current().Version, "err", err)
		return
	}
	if x.Exports == nil {
		x.Exports = []NFSExport{}
	}
	f.set(x)
}

func (f *NFSExportsFollower) set(x NFSExports) {
	f.cur.Store(&x)
	if f.changed != nil {
		f.changed(x)
	}
}

// Step watches the exports key from the revision last seen and applies
// each change; it returns when ctx ends (Done) or the stream breaks (an
// error, after which the runner backs off and the next step reloads).
func (f *NFSExportsFollower) Step(ctx context.Context) (runner.State, error) {
	if err := f.Load(ctx); err != nil {
		if ctx.Err() != nil {
			return runner.Done, nil
		}
		return runner.Idle, err
	}
	return followKey(ctx, f.store.cli, keyNFSExports, "the NFS exports", &f.rev, f.apply, func() { f.set(NFSExports{Exports: []NFSExport{}}) })
}
