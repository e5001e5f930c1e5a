package meta

import (
	"fmt"
	"strconv"
	"strings"
)

// Lock record schema, version 1.
//
// The lock records are not namespace records: meta's transactions never
// read or write them; a LockStore does (package namespace: etcd, in the
// namespace's key space, where mounts may write, with the record type
// 'K' that schema.go reserves). One key per (LIN, session), written under
// the session's lease:
//
//	key (below the namespace's prefix)   value (first byte: record version, 1)
//	"Kv1/" lin "/" session               the session's locks on lin: count, then per
//	                                     lock owner (uvarint), flags (uvarint: 1 flock),
//	                                     type (uvarint: 1 read, 2 write), start, end
//	                                     (uvarint, inclusive), pid (uvarint)
//
// lin and session are 16 lower-case hex digits, so that one prefix holds
// every record of a LIN and keys sort by LIN. "v1" is the key layout's
// version: a new layout gets a new prefix, which a binary that knows only
// v1 never reads. The value's version byte is the record's: a decoder
// accepts trailing bytes it does not know (a minor version appends
// fields), and refuses a newer version with ErrNewerFormat. Locks are
// never migrated: they live no longer than the sessions that hold them,
// so a new layout starts empty, and clients of two layouts must not lock
// the same files at once.

// LockRoot is the key prefix of every lock record.
const LockRoot = "Kv1/"

// LockKeyPrefix returns the key prefix of lin's lock records.
func LockKeyPrefix(lin LIN) string { return fmt.Sprintf("%s%016x/", LockRoot, uint64(lin)) }

// LockKey returns the key of session's lock record on lin.
func LockKey(lin LIN, session SessionID) string {
	return LockKeyPrefix(lin) + fmt.Sprintf("%016x", uint64(session))
}

// ParseLockKey returns the LIN and session of a lock record's key.
// Errors: ErrCorrupt.
func ParseLockKey(key string) (LIN, SessionID, error) {
	rest, root := strings.CutPrefix(key, LockRoot)
	l, s, ok := strings.Cut(rest, "/")
	lin, err1 := strconv.ParseUint(l, 16, 64)
	ses, err2 := strconv.ParseUint(s, 16, 64)
	if !root || !ok || len(l) != 16 || len(s) != 16 || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("%w: lock record key %q: want %s, 16 hex digits, '/', 16 hex digits", ErrCorrupt, key, LockRoot)
	}
	return LIN(lin), SessionID(ses), nil
}

// maxLocksPerRecord bounds a decoded record's count (a corrupt count must
// not allocate gigabytes).
const maxLocksPerRecord = 1 << 20

func encodeLocks(ls []Lock) []byte {
	e := newEnc()
	e.count(len(ls))
	for _, l := range ls {
		e.u(l.Owner.Owner)
		var flags uint64
		if l.Flock {
			flags |= 1
		}
		e.u(flags)
		e.u(uint64(l.Type))
		e.u(l.Start)
		e.u(l.End)
		e.u(uint64(l.PID))
	}
	return e.bytesOut()
}

func decodeLocks(session SessionID, b []byte) ([]Lock, error) {
	d := newDec("lock", b)
	n := d.count(maxLocksPerRecord)
	out := make([]Lock, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		l := Lock{Owner: LockOwner{Session: session, Owner: d.u()}}
		l.Flock = d.u()&1 != 0
		l.Type = LockType(d.u())
		l.Start, l.End = d.u(), d.u()
		l.PID = d.u32()
		d.check(l.Type == LockRead || l.Type == LockWrite, "lock type")
		d.check(l.Start <= l.End && l.End <= MaxLockOffset, "lock range")
		out = append(out, l)
	}
	if err := d.done("lock", []byte(fmt.Sprintf("session %016x", uint64(session)))); err != nil {
		return nil, err
	}
	return out, nil
}
