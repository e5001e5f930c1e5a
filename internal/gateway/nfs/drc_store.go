package nfs

import (
	"context"
	"fmt"
	"net/netip"
	"time"
)

// The shared duplicate-request cache. The in-memory cache (drc.go) is
// lost when a service address moves to another gateway: a client whose
// reply was lost with the connection resends the request there, and
// running, say, a GUARDED CREATE or a REMOVE again fails (EXIST, NOENT)
// although the first run succeeded. So, with Config.DRC, a gateway
//
//   - records the reply of every non-idempotent request that succeeded
//     (DRCStore.Put) before it sends it: a reply a client can have seen
//     is in the store;
//   - looks a request up in the store only when it failed (which is what
//     a replay of a request that succeeded the first time does, and what
//     it would not do had it not run: the failure is the replay's
//     signature), and then answers with the recorded reply. The common,
//     successful path costs one Put, which the store may batch with the
//     puts of other requests in flight.
//
// A replay that succeeds (a SETATTR, an UNCHECKED CREATE) is answered by
// its own run, as NFSv3 servers without a shared cache do. The records
// expire after a few minutes (the store's business), well past a
// client's retransmissions.

// DRCStore keeps the replies of non-idempotent requests where every
// gateway of the cluster finds them. Implementations are safe for
// concurrent use.
type DRCStore interface {
	// Put records reply under k, durably before it returns (its reply
	// is sent after). Errors: the store's; the reply is sent anyway.
	Put(ctx context.Context, k DRCKey, reply []byte) error
	// Get returns the reply recorded under k; ok is false if none is.
	Get(ctx context.Context, k DRCKey) (reply []byte, ok bool, err error)
}

// DRCKey names one request: the client's IP (not its port: a client that
// reconnects comes from a new one), its xid, the RPC program and
// procedure and a checksum of the arguments (two clients behind one
// address may reuse an xid).
type DRCKey struct {
	Client     netip.Addr
	XID        uint32
	Prog, Proc uint32
	Sum        uint32
}

// Name is k's name below its client: "<xid>-<prog>-<proc>-<sum>", in
// hexadecimal, fixed width.
func (k DRCKey) Name() string {
	return fmt.Sprintf("%08x-%08x-%02x-%08x", k.XID, k.Prog, k.Proc, k.Sum)
}

// drcStoreTimeout bounds one call to the store: a store that does not
// answer delays the reply, never holds it.
const drcStoreTimeout = 2 * time.Second

// shared records reply in the store (a success) or answers a failure with
// the reply recorded for k, if any; it returns the reply to send and
// whether it is a failure.
func (s *Server) shared(ctx context.Context, k drcKey, reply []byte, failed bool) ([]byte, bool) {
	dk := DRCKey{Client: k.ip, XID: k.xid, Prog: k.prog, Proc: k.proc, Sum: k.sum}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drcStoreTimeout)
	defer cancel()
	if !failed {
		if err := s.store.Put(ctx, dk, reply); err != nil {
			s.log.Warn("nfs: recording a reply in the shared duplicate-request cache (a resend after a failover runs again)", "client", k.ip, "xid", k.xid, "err", err)
		}
		return reply, false
	}
	first, ok, err := s.store.Get(ctx, dk)
	if err != nil {
		s.log.Warn("nfs: looking a failed request up in the shared duplicate-request cache", "client", k.ip, "xid", k.xid, "err", err)
		return reply, true
	}
	if !ok {
		return reply, true
	}
	s.log.Info("nfs: a resent request answered with its first reply, from the shared duplicate-request cache", "client", k.ip, "xid", k.xid, "proc", k.proc)
	return first, false
}
