package meta

import (
	"encoding/hex"
	"fmt"
	"time"

	"github.com/weftfs/weft/internal/erasure"
)

// LIN is an inode number: 64 bits, allocated in batches, never reused.
type LIN uint64

// RootLIN is the root directory's LIN. LINs below FirstLIN are reserved.
const RootLIN LIN = 1

// FirstLIN is the first LIN handed out to new inodes.
const FirstLIN LIN = 16

// DriveID names a drive cluster-wide; 0 means "no drive".
type DriveID uint32

// BlockID names a block: 16 random bytes, written as 32 lower-case hex digits.
type BlockID [16]byte

// String returns the block id as 32 lower-case hex digits.
func (b BlockID) String() string { return hex.EncodeToString(b[:]) }

// IsZero reports whether b is the zero id, which names no block.
func (b BlockID) IsZero() bool { return b == BlockID{} }

// ParseBlockID parses 32 hex digits. Errors wrap ErrInvalid.
func ParseBlockID(s string) (BlockID, error) {
	var b BlockID
	if len(s) != 32 {
		return b, fmt.Errorf("%w: block id %q: want 32 hex digits", ErrInvalid, s)
	}
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		return b, fmt.Errorf("%w: block id %q: %v", ErrInvalid, s, err)
	}
	return b, nil
}

// SessionID identifies a client session (for example its etcd lease id) for
// open-file tracking.
type SessionID uint64

// FileType is an inode's type.
type FileType uint8

// File types. The zero value is not a type.
const (
	TypeFile FileType = iota + 1
	TypeDir
	TypeSymlink
	TypeFIFO
	TypeSocket
	TypeCharDev
	TypeBlockDev
)

// String returns the type's name ("file", "dir", …).
func (t FileType) String() string {
	switch t {
	case TypeFile:
		return "file"
	case TypeDir:
		return "dir"
	case TypeSymlink:
		return "symlink"
	case TypeFIFO:
		return "fifo"
	case TypeSocket:
		return "socket"
	case TypeCharDev:
		return "chardev"
	case TypeBlockDev:
		return "blockdev"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

func (t FileType) valid() bool { return t >= TypeFile && t <= TypeBlockDev }

// Scheme is a protection scheme.
type Scheme uint8

// Protection schemes. The zero value means "not set": inherit.
const (
	SchemeMirror Scheme = iota + 1
	SchemeEC
)

// Protection is a requested or applied protection level: "mirror:N" (N
// copies) or "ec:K+M" (K data units, M parity units). The zero value means
// "inherit from the parent directory, else the pool's default".
type Protection struct {
	Scheme Scheme
	// Data and Parity are K and M for ec; for mirror, Data is 1 and Parity
	// is the number of extra copies.
	Data, Parity uint8
}

// Mirror returns mirror:n.
func Mirror(n uint8) Protection { return Protection{Scheme: SchemeMirror, Data: 1, Parity: n - 1} }

// EC returns ec:k+m.
func EC(k, m uint8) Protection { return Protection{Scheme: SchemeEC, Data: k, Parity: m} }

// IsZero reports whether p is unset.
func (p Protection) IsZero() bool { return p == Protection{} }

// Width is the number of units of a stripe: K+M, or N for mirror:N.
func (p Protection) Width() int { return int(p.Data) + int(p.Parity) }

// MaxWidth bounds Protection.Width.
const MaxWidth = 64

// Validate returns an error wrapping ErrInvalid unless p is zero or a usable
// level (1 <= K, K+M <= MaxWidth; mirror has K = 1).
func (p Protection) Validate() error {
	switch {
	case p.IsZero():
		return nil
	case p.Scheme == SchemeMirror && p.Data == 1 && p.Width() <= MaxWidth:
		return nil
	case p.Scheme == SchemeEC && p.Data >= 1 && p.Width() <= MaxWidth:
		return nil
	}
	return fmt.Errorf("%w: protection %+v: want mirror:N or ec:K+M with K >= 1 and at most %d units", ErrInvalid, p, MaxWidth)
}

// String returns "mirror:N", "ec:K+M" or "inherit"; ParseProtection reads it.
func (p Protection) String() string {
	switch p.Scheme {
	case 0:
		return "inherit"
	case SchemeMirror:
		return fmt.Sprintf("mirror:%d", p.Width())
	case SchemeEC:
		return fmt.Sprintf("ec:%d+%d", p.Data, p.Parity)
	}
	return fmt.Sprintf("scheme(%d):%d+%d", p.Scheme, p.Data, p.Parity)
}

// ParseProtection parses "mirror:N", "ec:K+M" (the syntax and limits of
// erasure.ParseProtection, the one parser of protection specs) or
// "inherit"/"" (zero). Errors wrap ErrInvalid.
func ParseProtection(s string) (Protection, error) {
	if s == "" || s == "inherit" {
		return Protection{}, nil
	}
	ep, err := erasure.ParseProtection(s)
	if err != nil {
		return Protection{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	var p Protection
	if ep.Mirrors > 0 {
		p = Mirror(uint8(ep.Mirrors))
	} else {
		p = EC(uint8(ep.Data), uint8(ep.Parity))
	}
	if err := p.Validate(); err != nil {
		return Protection{}, err
	}
	return p, nil
}

// Attr is an inode's attributes as callers see them.
type Attr struct {
	LIN  LIN
	Type FileType
	// Mode holds the permission bits with setuid, setgid and sticky (07777);
	// the type is in Type.
	Mode     uint32
	UID, GID uint32
	// Size is in bytes: file data, or the target length of a symlink.
	Size  uint64
	Nlink uint32
	// Rdev is the device number of a character or block device.
	Rdev                       uint32
	Atime, Mtime, Ctime, Btime time.Time
	// Generation counts changes to the inode record (attributes, links,
	// layout); it never decreases. Changes to a directory's entries bump its
	// times, not its generation. LINs are never reused, so file handles need
	// no separate generation.
	Generation uint64
	// Pool is the storage pool the file's data lives in.
	Pool string
	// Protection is the requested protection (zero: the pool's default).
	Protection Protection
	// StripeSize is the bytes of file data per stripe, fixed by the first
	// stripe commit; 0 while the file has no stripe.
	StripeSize uint64
	// Allocated is the bytes of all placed units (data and parity).
	Allocated uint64
	// WDL is the set of drives holding units of the file, ascending.
	WDL []DriveID
}

// IsDir reports whether the inode is a directory.
func (a Attr) IsDir() bool { return a.Type == TypeDir }

// Link is one directory entry naming an inode: a back-pointer.
type Link struct {
	Parent LIN
	Name   string
}

// Inode is an inode with its back-pointers, as ScanInodes and GetInode
// return it.
type Inode struct {
	Attr
	// Links lists every (parent, name) entry naming the inode; for a
	// directory, exactly its one entry (none for the root).
	Links []Link
	// Target is a symlink's target.
	Target string
	// Xattrs lists the names of the inode's extended attributes, sorted.
	Xattrs []string
}

// DirEntry is one directory entry.
type DirEntry struct {
	Name string
	LIN  LIN
	Type FileType
}

// Unit is one unit of a stripe: a block on a drive. A unit with Drive 0 is
// not placed (the stripe is under-protected).
type Unit struct {
	Drive  DriveID
	Block  BlockID
	Length uint32 // bytes in the block
	CRC    uint32 // CRC32C of the unit's bytes
}

// Placed reports whether the unit has a block on a drive.
func (u Unit) Placed() bool { return u.Drive != 0 }

// Stripe is one protection group of a file: file bytes
// [Index*StripeSize, Index*StripeSize+DataLen) cut into Protection.Width()
// units — or, for an inline stripe, held in the stripe map itself.
type Stripe struct {
	Index uint64
	// Gen is the stripe's generation: 1 at the first commit, +1 at each
	// commit after. Commits compare-and-swap on it.
	Gen        uint64
	Protection Protection
	DataLen    uint64
	Units      []Unit
	// Inline, when not nil, is the stripe's bytes (DataLen of them),
	// stored in the namespace with the map rather than in blocks (format
	// 3): a small file's only stripe, index 0, at most MaxInline bytes.
	// An inline stripe has no protection and no units: the namespace's
	// own replication protects it, and jobs that move, rebuild, scrub or
	// collect blocks have nothing to do for it.
	Inline []byte
}

// MaxInline bounds an inline stripe's bytes (Stripe.Inline).
const MaxInline = 64 << 10

// IsInline reports whether s holds its bytes in the map (Stripe.Inline).
func (s Stripe) IsInline() bool { return s.Inline != nil }

// Missing is the number of units not placed.
func (s Stripe) Missing() int {
	n := 0
	for _, u := range s.Units {
		if !u.Placed() {
			n++
		}
	}
	return n
}

// StripeRef names one stripe of one file.
type StripeRef struct {
	LIN   LIN
	Index uint64
}

// Usage is space and inode use, per pool or in total. Fields are signed
// because they are sums of deltas.
type Usage struct {
	Inodes int64
	// Bytes is the logical size of regular files.
	Bytes int64
	// Allocated is the bytes of placed units, parity included.
	Allocated int64
}

func (u *Usage) add(d Usage) {
	u.Inodes += d.Inodes
	u.Bytes += d.Bytes
	u.Allocated += d.Allocated
}

// FSStats is the namespace's usage, as StatFS returns it. Capacity is not
// here: it is the drives' (package cluster).
type FSStats struct {
	Total Usage
	Pools map[string]Usage
}

// DeleteEntry is one block waiting to be deleted from its drive.
type DeleteEntry struct {
	Drive DriveID
	Block BlockID
	// LIN and Stripe say where the block was used (0, 0 if unknown).
	LIN      LIN
	Stripe   uint64
	Length   uint32
	Enqueued time.Time
}

// Orphan is an inode without links, kept until its last opener closes it
// or until its cleanup finishes.
type Orphan struct {
	LIN   LIN
	Since time.Time
}
