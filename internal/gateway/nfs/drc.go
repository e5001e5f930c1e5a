package nfs

import (
	"net/netip"
	"sync"
	"time"
)

// The duplicate-request cache. A client that lost a reply resends the
// request with the same xid; for a non-idempotent procedure (CREATE,
// MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR, RENAME, LINK, SETATTR) running it
// again would fail (EEXIST, ENOENT) although the first run succeeded. So
// the replies of those procedures are kept, keyed by the client's IP (not
// its port: a client that reconnects after a lost reply usually comes
// from a new port), the xid, the program and procedure, and a checksum of
// the arguments (two clients behind one address may reuse an xid), and a
// resent request gets the reply of the first run. A resend that arrives
// while the first run is in progress is dropped: the client resends it
// again later and then gets the reply.
//
// The cache lives in this gateway's memory: it covers lost replies and
// reconnections to the same gateway; a failover to another node is
// covered by the shared store, Config.DRC (drc_store.go).
const (
	drcEntries = 8192
	drcTTL     = 5 * time.Minute
)

type drcKey struct {
	ip         netip.Addr
	xid        uint32
	prog, proc uint32
	sum        uint32
}

type drcEntry struct {
	reply []byte // nil while in progress
	at    time.Time
}

type drc struct {
	mu    sync.Mutex
	m     map[drcKey]*drcEntry
	order []drcKey // insertion order, for eviction
}

func newDRC() *drc { return &drc{m: map[drcKey]*drcEntry{}} }

// start looks k up: a finished entry's reply (resend it), or inProgress
// (drop the request), or neither (run it, then finish or abandon k).
func (d *drc) start(k drcKey, now time.Time) (reply []byte, inProgress bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.m[k]; e != nil && now.Sub(e.at) < drcTTL {
		if e.reply == nil {
			return nil, true
		}
		return e.reply, false
	}
	d.evict(now)
	d.m[k] = &drcEntry{at: now}
	d.order = append(d.order, k)
	return nil, false
}

// finish records k's reply.
func (d *drc) finish(k drcKey, reply []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.m[k]; e != nil {
		e.reply = reply
	}
}

// abandon forgets k (the request got no reply to keep).
func (d *drc) abandon(k drcKey) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, k)
}

// evict drops expired entries, and the oldest beyond drcEntries (in
// progress or not: a resend of an evicted request runs again).
func (d *drc) evict(now time.Time) {
	i := 0
	for ; i < len(d.order); i++ {
		k := d.order[i]
		e := d.m[k]
		if e != nil && len(d.order)-i < drcEntries && now.Sub(e.at) < drcTTL {
			break
		}
		delete(d.m, k)
	}
	d.order = d.order[i:]
}
