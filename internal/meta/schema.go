package meta

// Key schema and value encodings of the weft namespace, format version 3.
//
// This file is the only place that knows how metadata is laid out in the KV
// store. Every key starts with a one-byte record type; LINs, stripe indexes
// and session ids are 8-byte big-endian, drive ids 4-byte big-endian, so
// that a scan returns records in numeric order (jobs split work by LIN
// ranges; readdir resumes after the last name).
//
//	key                              value (first byte: record version, 1)
//	"F"                              format: magic "weft-meta", format version, created
//	"L"                              next unallocated LIN (clients take batches)
//	"i" lin                          inode: attributes, back-pointers, WDL, xattr names, symlink target
//	"i" lin "T"                      directory times (mtime, ctime), written blind by entry changes
//	"i" lin "o" session              inode open by session: opened time
//	"e" parent name                  directory entry: child type and LIN
//	"d" lin                          directory delegation: holding session, recalled flag
//	"x" lin name                     xattr value (raw bytes, no version byte)
//	"s" lin index                    stripe: generation, protection, data length, units; inline bytes (format 3)
//	"r" lin index                    under-protected: below its pool's target tolerance (format 2; see below)
//	"l" lin index                    lost: too few units left to read the stripe (format 2)
//	"R"                              protection index incomplete: since (format 2, set by the migration from 1)
//	"O" session lin                  the same open, indexed by session (to close a dead session)
//	"z" lin                          orphan: inode with no links, open or awaiting cleanup
//	"q" drive block                  delete queue: LIN, stripe, length, enqueued time
//	"u" shard                        usage deltas (per pool) of one of UsageShards shards
//	"U" pool                         usage corrections: how many fsck has made to the pool's usage
//	"Kv1/" lin "/" session           file locks (not namespace records: see locks_schema.go)
//
// An inode's times and open records follow its inode key, so one range read
// returns the inode with them (stat, unlink and close each read them
// together); scans of the "i" range skip keys longer than 9 bytes.
//
// Integers in values are unsigned varints (encoding/binary), signed ones
// zig-zag varints, times are Unix nanoseconds as signed varints, strings are
// a uvarint length then bytes. A decoder accepts trailing bytes it does not
// know, so that a minor version can append fields; anything that an older
// binary would misread needs a new FormatVersion.
//
// The "U" keys (added in format 2 without a version bump: no binary
// before them reads or writes them, and an absent key reads as zero
// corrections) let the fsck job's usage check correct a pool's counters
// at most once per snapshot it computed from (see fsck_layout.go).
//
// Version 3 (inline stripes). A stripe value may end with the stripe's
// bytes (a uvarint length, then the bytes): an inline stripe, whose
// protection is zero and which names no units (Stripe.Inline). A small
// file's data is committed so in the transaction that commits its size,
// and read with its map, without a block service. A version 2 binary
// would read such a stripe as one with no units left (unreadable), so the
// format moved to 3; the migration from 2 writes nothing else.
//
// Versions and migrations: FormatVersion is stored in "F" by Format. Open
// refuses a store with a newer version (ErrNewerFormat) and migrates an
// older one step by step (migrations, below), each step one transaction.
//
// Version 2 (the protection index). In version 1 an "r" key marked a
// stripe with units not placed, its value the count of those units. In
// version 2 it marks every stripe committed below its pool's target
// tolerance — units not placed, or placed on too few nodes or drives to
// survive what a stripe of its protection survives when spread over all of
// the pool's drives and nodes (the committer computes both tolerances,
// package placement; meta knows no nodes) — and its value appends the
// stripe's data length, the achieved and target tolerances and the time it
// first went below (a version-1 value still reads: tolerances unknown).
// The "r" key is written, kept or deleted in the transaction that commits
// the stripe map, and deleted with the stripe. "l" keys record stripes a
// job found unrecoverable (the lost-data list); a client commit that
// replaces the stripe, or deleting the stripe, deletes them; a restripe
// commit keeps them. Version 1 binaries wrote stripes on too few nodes
// without an "r" key, so the migration from 1 writes "R": until a repair
// job has checked every stripe against its target (it clears "R"), the
// index may miss stripes.

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/weftfs/weft/internal/kv"
)

// FormatVersion is the namespace format this package writes and reads.
const FormatVersion = 3

// formatMagic starts the format record.
const formatMagic = "weft-meta"

// recordVersion is the first byte of every versioned value.
const recordVersion = 1

// UsageShards is the number of usage-counter keys. Each transaction that
// changes usage picks one, round robin per client, so that concurrent
// creates do not all conflict on one counter. StatFS sums them.
const UsageShards = 256

// Record-type prefixes.
const (
	pfxFormat   = 'F'
	pfxNextLIN  = 'L'
	pfxInode    = 'i'
	pfxEntry    = 'e'
	pfxXattr    = 'x'
	pfxStripe   = 's'
	pfxUnder    = 'r'
	pfxLost     = 'l'
	pfxMarker   = 'R'
	pfxSession  = 'O'
	pfxOrphan   = 'z'
	pfxDelete   = 'q'
	pfxUsage    = 'u'
	pfxUsageFix = 'U'
	pfxDeleg    = 'd'
)

// Suffixes of keys that follow an inode's key.
const (
	dirTimesSuffix = 'T'
	openSuffix     = 'o'
)

func be64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }

func keyFormat() []byte  { return []byte{pfxFormat} }
func keyNextLIN() []byte { return []byte{pfxNextLIN} }

func keyInode(lin LIN) []byte { return be64([]byte{pfxInode}, uint64(lin)) }

func keyDirTimes(lin LIN) []byte { return append(keyInode(lin), dirTimesSuffix) }

// keyInodeEnd bounds the scan of an inode's keys: the inode and its times.
func keyInodeEnd(lin LIN) []byte { return kv.PrefixEnd(keyInode(lin)) }

func keyEntry(parent LIN, name string) []byte {
	return append(be64([]byte{pfxEntry}, uint64(parent)), name...)
}

func entriesRange(parent LIN) (start, end []byte) {
	start = be64([]byte{pfxEntry}, uint64(parent))
	return start, kv.PrefixEnd(start)
}

func keyDeleg(dir LIN) []byte { return be64([]byte{pfxDeleg}, uint64(dir)) }

func keyXattr(lin LIN, name string) []byte {
	return append(be64([]byte{pfxXattr}, uint64(lin)), name...)
}

func keyStripe(lin LIN, idx uint64) []byte {
	return be64(be64([]byte{pfxStripe}, uint64(lin)), idx)
}

func stripesEnd(lin LIN) []byte { return kv.PrefixEnd(be64([]byte{pfxStripe}, uint64(lin))) }

func keyUnder(lin LIN, idx uint64) []byte { return be64(be64([]byte{pfxUnder}, uint64(lin)), idx) }

func keyLost(lin LIN, idx uint64) []byte { return be64(be64([]byte{pfxLost}, uint64(lin)), idx) }

// linRange is the range of a LIN's keys of record type p ("r", "l").
func linRange(p byte, lin LIN) (start, end []byte) {
	start = be64([]byte{p}, uint64(lin))
	return start, kv.PrefixEnd(start)
}

func keyMarker() []byte { return []byte{pfxMarker} }

func keyOpen(lin LIN, s SessionID) []byte { return be64(append(keyInode(lin), openSuffix), uint64(s)) }

func opensRange(lin LIN) (start, end []byte) {
	start = append(keyInode(lin), openSuffix)
	return start, kv.PrefixEnd(start)
}

func keySessionOpen(s SessionID, lin LIN) []byte {
	return be64(be64([]byte{pfxSession}, uint64(s)), uint64(lin))
}

func sessionRange(s SessionID) (start, end []byte) {
	start = be64([]byte{pfxSession}, uint64(s))
	return start, kv.PrefixEnd(start)
}

func keyOrphan(lin LIN) []byte { return be64([]byte{pfxOrphan}, uint64(lin)) }

func keyDelete(d DriveID, b BlockID) []byte {
	k := binary.BigEndian.AppendUint32([]byte{pfxDelete}, uint32(d))
	return append(k, b[:]...)
}

func keyUsage(shard int) []byte {
	return binary.BigEndian.AppendUint16([]byte{pfxUsage}, uint16(shard))
}

func keyUsageFix(pool string) []byte { return append([]byte{pfxUsageFix}, pool...) }

// linAt decodes the 8-byte LIN at key[off:].
func linAt(key []byte, off int) LIN { return LIN(binary.BigEndian.Uint64(key[off : off+8])) }

// enc appends a value encoding.
type enc struct{ b []byte }

func newEnc() *enc               { return &enc{b: []byte{recordVersion}} }
func (e *enc) u(v uint64)        { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) i(v int64)         { e.b = binary.AppendVarint(e.b, v) }
func (e *enc) s(v string)        { e.u(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) raw(v []byte)      { e.b = append(e.b, v...) }
func (e *enc) prot(p Protection) { e.b = append(e.b, byte(p.Scheme), p.Data, p.Parity) }
func (e *enc) fixed32(v uint32)  { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *enc) bytesOut() []byte  { return e.b }
func (e *enc) time(t int64)      { e.i(t) }
func (e *enc) lin(l LIN)         { e.u(uint64(l)) }
func (e *enc) drive(d DriveID)   { e.u(uint64(d)) }
func (e *enc) block(b BlockID)   { e.raw(b[:]) }
func (e *enc) typ(t FileType)    { e.b = append(e.b, byte(t)) }
func (e *enc) count(n int)       { e.u(uint64(n)) }

// dec reads a value encoding; the first error sticks.
type dec struct {
	b   []byte
	err error
}

func newDec(what string, b []byte) *dec {
	d := &dec{b: b}
	switch {
	case len(b) == 0:
		d.err = fmt.Errorf("%w: empty %s record", ErrCorrupt, what)
	case b[0] > recordVersion:
		d.err = fmt.Errorf("%w: %s record version %d, this weft reads up to %d: upgrade weft", ErrNewerFormat, what, b[0], recordVersion)
	case b[0] != recordVersion:
		d.err = fmt.Errorf("%w: %s record version %d", ErrCorrupt, what, b[0])
	default:
		d.b = b[1:]
	}
	return d
}

func (d *dec) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated or bad %s", ErrCorrupt, what)
	}
	d.b = nil
}

func (d *dec) u() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) i() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) raw(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.fail("bytes")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) s() string      { return string(d.raw(int(d.count(1 << 20)))) }
func (d *dec) u32() uint32    { v := d.u(); d.check(v <= 1<<32-1, "u32"); return uint32(v) }
func (d *dec) lin() LIN       { return LIN(d.u()) }
func (d *dec) drive() DriveID { return DriveID(d.u32()) }
func (d *dec) fixed32() uint32 {
	b := d.raw(4)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}
func (d *dec) byte1() byte {
	b := d.raw(1)
	if b == nil {
		return 0
	}
	return b[0]
}
func (d *dec) block() (b BlockID) { copy(b[:], d.raw(16)); return b }
func (d *dec) prot() Protection {
	p := Protection{Scheme: Scheme(d.byte1()), Data: d.byte1(), Parity: d.byte1()}
	d.check(p.Validate() == nil, "protection")
	return p
}

// count reads a length, refusing more than max (a corrupt length must not
// allocate gigabytes).
func (d *dec) count(max int) int {
	n := d.u()
	if n > uint64(max) {
		d.fail("count")
		return 0
	}
	return int(n)
}

func (d *dec) check(ok bool, what string) {
	if !ok {
		d.fail(what)
	}
}

func (d *dec) done(what string, key []byte) error {
	if d.err != nil {
		return fmt.Errorf("%w (key %q, %s)", d.err, key, what)
	}
	return nil
}

// Format record.

type formatRecord struct {
	version uint64
	created int64
}

func encodeFormat(f formatRecord) []byte {
	e := newEnc()
	e.s(formatMagic)
	e.u(f.version)
	e.time(f.created)
	return e.bytesOut()
}

func decodeFormat(b []byte) (formatRecord, error) {
	d := newDec("format", b)
	var f formatRecord
	magic := d.s()
	f.version = d.u()
	f.created = d.i()
	if d.err == nil && magic != formatMagic {
		d.err = fmt.Errorf("%w: format record magic %q, want %q: this store holds something else", ErrCorrupt, magic, formatMagic)
	}
	return f, d.done("format", keyFormat())
}

// LIN counter.

func encodeNextLIN(l LIN) []byte { e := newEnc(); e.lin(l); return e.bytesOut() }

func decodeNextLIN(b []byte) (LIN, error) {
	d := newDec("next LIN", b)
	l := d.lin()
	return l, d.done("next LIN", keyNextLIN())
}

// Inode record.

// inode is the stored inode. Times are Unix nanoseconds.
type inode struct {
	lin                        LIN
	typ                        FileType
	mode, uid, gid             uint32
	size                       uint64
	nlink                      uint32
	rdev                       uint32
	atime, mtime, ctime, btime int64
	gen                        uint64
	pool                       string
	prot                       Protection
	stripeSize                 uint64
	allocated                  uint64
	links                      []Link     // back-pointers
	wdl                        []driveRef // sorted by drive
	xattrs                     []string   // sorted
	target                     string     // symlink target
}

// driveRef counts the units of a file on one drive; the WDL is the drives
// with refs > 0.
type driveRef struct {
	drive DriveID
	refs  uint32
}

func encodeInode(n *inode) []byte {
	e := newEnc()
	e.typ(n.typ)
	e.u(uint64(n.mode))
	e.u(uint64(n.uid))
	e.u(uint64(n.gid))
	e.u(n.size)
	e.u(uint64(n.nlink))
	e.u(uint64(n.rdev))
	e.time(n.atime)
	e.time(n.mtime)
	e.time(n.ctime)
	e.time(n.btime)
	e.u(n.gen)
	e.s(n.pool)
	e.prot(n.prot)
	e.u(n.stripeSize)
	e.u(n.allocated)
	e.count(len(n.links))
	for _, l := range n.links {
		e.lin(l.Parent)
		e.s(l.Name)
	}
	e.count(len(n.wdl))
	for _, r := range n.wdl {
		e.drive(r.drive)
		e.u(uint64(r.refs))
	}
	e.count(len(n.xattrs))
	for _, x := range n.xattrs {
		e.s(x)
	}
	e.s(n.target)
	return e.bytesOut()
}

func decodeInode(lin LIN, b []byte) (*inode, error) {
	d := newDec("inode", b)
	n := &inode{lin: lin}
	n.typ = FileType(d.byte1())
	d.check(n.typ.valid(), "file type")
	n.mode = d.u32()
	n.uid = d.u32()
	n.gid = d.u32()
	n.size = d.u()
	n.nlink = d.u32()
	n.rdev = d.u32()
	n.atime, n.mtime, n.ctime, n.btime = d.i(), d.i(), d.i(), d.i()
	n.gen = d.u()
	n.pool = d.s()
	n.prot = d.prot()
	n.stripeSize = d.u()
	n.allocated = d.u()
	if c := d.count(MaxLinks); c > 0 {
		n.links = make([]Link, c)
		for i := range n.links {
			n.links[i] = Link{Parent: d.lin(), Name: d.s()}
		}
	}
	if c := d.count(1 << 24); c > 0 {
		n.wdl = make([]driveRef, c)
		for i := range n.wdl {
			n.wdl[i] = driveRef{drive: d.drive(), refs: d.u32()}
		}
	}
	if c := d.count(MaxXattrListLen); c > 0 {
		n.xattrs = make([]string, c)
		for i := range n.xattrs {
			n.xattrs[i] = d.s()
		}
	}
	n.target = d.s()
	return n, d.done("inode", keyInode(lin))
}

// Directory times.

type dirTimes struct{ mtime, ctime int64 }

func encodeDirTimes(t dirTimes) []byte {
	e := newEnc()
	e.time(t.mtime)
	e.time(t.ctime)
	return e.bytesOut()
}

func decodeDirTimes(lin LIN, b []byte) (dirTimes, error) {
	d := newDec("directory times", b)
	t := dirTimes{mtime: d.i(), ctime: d.i()}
	return t, d.done("directory times", keyDirTimes(lin))
}

// Directory entry.

func encodeEntry(typ FileType, child LIN) []byte {
	e := newEnc()
	e.typ(typ)
	e.lin(child)
	return e.bytesOut()
}

func decodeEntry(key, b []byte) (FileType, LIN, error) {
	d := newDec("entry", b)
	typ := FileType(d.byte1())
	d.check(typ.valid(), "file type")
	lin := d.lin()
	return typ, lin, d.done("entry", key)
}

// Directory delegation.

// delegation is a directory's delegation record: the session that holds
// it, and whether another client asked for it back.
type delegation struct {
	session  SessionID
	recalled bool
}

func encodeDeleg(d delegation) []byte {
	e := newEnc()
	e.u(uint64(d.session))
	var flags uint64
	if d.recalled {
		flags |= 1
	}
	e.u(flags)
	return e.bytesOut()
}

func decodeDeleg(dir LIN, b []byte) (delegation, error) {
	d := newDec("delegation", b)
	out := delegation{session: SessionID(d.u())}
	out.recalled = d.u()&1 != 0
	return out, d.done("delegation", keyDeleg(dir))
}

// Stripe.

func encodeStripe(s *Stripe) []byte {
	e := newEnc()
	e.u(s.Gen)
	e.prot(s.Protection)
	e.u(s.DataLen)
	e.count(len(s.Units))
	for _, u := range s.Units {
		e.drive(u.Drive)
		e.block(u.Block)
		e.u(uint64(u.Length))
		e.fixed32(u.CRC)
	}
	if s.Inline != nil {
		e.u(uint64(len(s.Inline)))
		e.raw(s.Inline)
	}
	return e.bytesOut()
}

func decodeStripe(key, b []byte) (Stripe, error) {
	d := newDec("stripe", b)
	s := Stripe{Index: binary.BigEndian.Uint64(key[9:17])}
	s.Gen = d.u()
	s.Protection = d.prot()
	s.DataLen = d.u()
	if c := d.count(MaxWidth); c > 0 {
		s.Units = make([]Unit, c)
		for i := range s.Units {
			s.Units[i] = Unit{Drive: d.drive(), Block: d.block(), Length: d.u32(), CRC: d.fixed32()}
		}
	}
	if d.err == nil && len(d.b) > 0 { // format 3: an inline stripe's bytes
		s.Inline = slices.Clone(d.raw(d.count(MaxInline)))
		d.check(len(s.Units) == 0 && s.Protection.IsZero() && uint64(len(s.Inline)) == s.DataLen && s.DataLen > 0, "inline stripe")
	}
	return s, d.done("stripe", key)
}

// Under-protected stripe ("r"): the units not placed, then (format 2)
// the data length, the achieved and target tolerances (zig-zag: -1 is
// "not readable") and since when the stripe is below its target.

func encodeUnder(u UnderStripe) []byte {
	e := newEnc()
	e.count(u.Missing)
	e.u(u.DataLen)
	e.i(int64(u.Tolerance.Achieved.Drives))
	e.i(int64(u.Tolerance.Achieved.Nodes))
	e.i(int64(u.Tolerance.Target.Drives))
	e.i(int64(u.Tolerance.Target.Nodes))
	e.time(u.Since.UnixNano())
	return e.bytesOut()
}

func decodeUnder(key, b []byte) (UnderStripe, error) {
	d := newDec("under-protected", b)
	u := UnderStripe{LIN: linAt(key, 1), Index: uint64(linAt(key, 9))}
	u.Missing = d.count(MaxWidth)
	if d.err == nil && len(d.b) > 0 { // format 2 appended the rest
		u.Known = true
		u.DataLen = d.u()
		u.Tolerance.Achieved = Tolerance{Drives: int(d.i()), Nodes: int(d.i())}
		u.Tolerance.Target = Tolerance{Drives: int(d.i()), Nodes: int(d.i())}
		u.Since = time.Unix(0, d.i())
	}
	return u, d.done("under-protected", key)
}

// Lost stripe ("l"): since when, the generation and data length found
// lost, the units left and needed, and why.

func encodeLost(l LostStripe) []byte {
	e := newEnc()
	e.time(l.Since.UnixNano())
	e.u(l.Gen)
	e.u(l.DataLen)
	e.count(l.Readable)
	e.count(l.Needed)
	e.s(clipReason(l.Reason))
	return e.bytesOut()
}

func decodeLost(key, b []byte) (LostStripe, error) {
	d := newDec("lost stripe", b)
	l := LostStripe{Index: uint64(linAt(key, 9))}
	l.Since = time.Unix(0, d.i())
	l.Gen = d.u()
	l.DataLen = d.u()
	l.Readable = d.count(MaxWidth)
	l.Needed = d.count(MaxWidth)
	l.Reason = d.s()
	return l, d.done("lost stripe", key)
}

// maxLostReason bounds the reason a lost stripe keeps.
const maxLostReason = 300

func clipReason(s string) string {
	if len(s) > maxLostReason {
		return s[:maxLostReason]
	}
	return s
}

// Protection-index marker ("R"): since when the index may be incomplete.

func encodeMarker(since int64) []byte { e := newEnc(); e.time(since); return e.bytesOut() }

func decodeMarker(b []byte) (time.Time, error) {
	d := newDec("protection marker", b)
	t := time.Unix(0, d.i())
	return t, d.done("protection marker", keyMarker())
}

// Migrations: migrations[v] takes a store from format v to v+1 in one
// transaction (the caller has read "F" in it and found version v).
var migrations = map[uint64]func(tx kv.Tx, now int64) error{
	// 1 → 2: the "r" values of version 1 stay valid (a stripe with units
	// not placed is below its target); stripes version 1 placed on too
	// few nodes are not indexed, so the index is marked incomplete until
	// a repair has checked every stripe (see Meta.ProtectionMarker).
	1: func(tx kv.Tx, now int64) error {
		tx.Put(keyMarker(), encodeMarker(now))
		return nil
	},
	// 2 → 3: inline stripes; no record of version 2 changes meaning.
	2: func(tx kv.Tx, now int64) error { return nil },
}

// Open record (both "o" and "O" keys).

func encodeOpen(at int64) []byte { e := newEnc(); e.time(at); return e.bytesOut() }

// Orphan record.

func encodeOrphan(since int64) []byte { e := newEnc(); e.time(since); return e.bytesOut() }

func decodeOrphan(key, b []byte) (Orphan, error) {
	d := newDec("orphan", b)
	o := Orphan{LIN: linAt(key, 1), Since: time.Unix(0, d.i())}
	return o, d.done("orphan", key)
}

// Delete-queue entry.

func encodeDelete(q DeleteEntry) []byte {
	e := newEnc()
	e.lin(q.LIN)
	e.u(q.Stripe)
	e.u(uint64(q.Length))
	e.time(q.Enqueued.UnixNano())
	return e.bytesOut()
}

func decodeDelete(key, b []byte) (DeleteEntry, error) {
	d := newDec("delete queue", b)
	var q DeleteEntry
	if len(key) != 1+4+16 {
		d.fail("key length")
	} else {
		q.Drive = DriveID(binary.BigEndian.Uint32(key[1:5]))
		copy(q.Block[:], key[5:])
	}
	q.LIN = d.lin()
	q.Stripe = d.u()
	q.Length = d.u32()
	q.Enqueued = time.Unix(0, d.i())
	return q, d.done("delete queue", key)
}

// Usage shard: per pool, the deltas applied through this shard.

type usageShard map[string]Usage

func encodeUsage(u usageShard) []byte {
	e := newEnc()
	pools := make([]string, 0, len(u))
	for p := range u {
		pools = append(pools, p)
	}
	slices.Sort(pools)
	e.count(len(pools))
	for _, p := range pools {
		e.s(p)
		e.i(u[p].Inodes)
		e.i(u[p].Bytes)
		e.i(u[p].Allocated)
	}
	return e.bytesOut()
}

func decodeUsage(key, b []byte) (usageShard, error) {
	u := usageShard{}
	if b == nil {
		return u, nil
	}
	d := newDec("usage", b)
	for c := d.count(1 << 16); c > 0 && d.err == nil; c-- {
		p := d.s()
		u[p] = Usage{Inodes: d.i(), Bytes: d.i(), Allocated: d.i()}
	}
	return u, d.done("usage", key)
}

// Usage corrections record ("U" pool): the number of corrections fsck
// made to the pool's usage counters (absent: none).

func encodeUsageFix(fixes uint64) []byte { e := newEnc(); e.u(fixes); return e.bytesOut() }

func decodeUsageFix(key, b []byte) (uint64, error) {
	if b == nil {
		return 0, nil
	}
	d := newDec("usage corrections", b)
	fixes := d.u()
	return fixes, d.done("usage corrections", key)
}
