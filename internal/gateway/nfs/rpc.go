package nfs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"
	"github.com/willscott/go-nfs-client/nfs/xdr"

	"github.com/weftfs/weft/internal/vfs"
)

// ONC RPC (RFC 5531) over TCP: record marking, the call header, the
// credentials, the reply header. The messages are encoded by
// go-nfs-client's xdr package from the structs below and rpc.Header.

const (
	msgCall  = 0
	msgReply = 1

	replyAccepted = 0
	replyDenied   = 1

	acceptSuccess      = 0
	acceptProgUnavail  = 1
	acceptProgMismatch = 2
	acceptProcUnavail  = 3
	acceptGarbageArgs  = 4
	acceptSystemErr    = 5

	rejectRPCMismatch = 0
	rejectAuthError   = 1

	authBadCred = 1
	authTooWeak = 5

	flavorNone = 0
	flavorSys  = 1

	// maxRecord bounds a request: the largest WRITE (maxIO) and headers.
	maxRecord = maxIO + 64<<10
)

type acceptedHeader struct {
	Xid, MsgType, Stat uint32
	Verf               rpc.Auth
	Accept             uint32
}

type deniedHeader struct {
	Xid, MsgType, Stat uint32
	Reject             uint32
}

type mismatch struct{ Low, High uint32 }

var errGarbage = errors.New("nfs: arguments do not decode")

// conn is what a request knows of its connection.
type conn struct {
	remote   netip.AddrPort
	listener string
	verifier uint64
}

// unavailableRetry bounds how long an idempotent request that finds the
// cluster unavailable is tried again before it is answered
// NFS3ERR_JUKEBOX; unavailableDelay is the pause between tries.
const (
	unavailableRetry = 10 * time.Second
	unavailableDelay = 250 * time.Millisecond
)

// connRequests bounds the requests one connection has in progress: a
// client multiplexes many on one connection (a slow COMMIT must not hold
// up its READs), and the bound keeps one client from taking all.
const connRequests = 16

// serveConn reads c's requests and answers each in a goroutine of its own
// (at most connRequests at a time; replies may go out of order, as RPC
// allows). It returns when c fails or is closed, after the requests in
// progress are answered.
func (s *Server) serveConn(ctx context.Context, c net.Conn, listener string, verifier uint64) {
	defer c.Close()
	ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
	cn := &conn{remote: ap, listener: listener, verifier: verifier}
	br := bufio.NewReaderSize(c, 64<<10)
	var (
		wg  sync.WaitGroup
		wmu sync.Mutex
		sem = make(chan struct{}, connRequests)
	)
	defer wg.Wait()
	for {
		rec, err := readRecord(br)
		if err != nil {
			if !errors.Is(err, io.EOF) && ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				s.log.Debug("nfs: connection closed", "client", ap, "err", err)
			}
			return
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			reply := s.handle(ctx, cn, rec)
			if reply == nil {
				return
			}
			var mark [4]byte
			binary.BigEndian.PutUint32(mark[:], uint32(len(reply))|1<<31)
			bufs := net.Buffers{mark[:], reply}
			wmu.Lock()
			defer wmu.Unlock()
			if _, err := bufs.WriteTo(c); err != nil {
				c.Close() // the reader sees it and returns
			}
		}()
	}
}

// readRecord reads one RPC record (its fragments joined).
func readRecord(r io.Reader) ([]byte, error) {
	var rec []byte
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, err
		}
		h := binary.BigEndian.Uint32(hdr[:])
		n := int(h &^ (1 << 31))
		if len(rec)+n > maxRecord {
			return nil, fmt.Errorf("nfs: a request of over %d bytes", maxRecord)
		}
		start := len(rec)
		rec = append(rec, make([]byte, n)...)
		if _, err := io.ReadFull(r, rec[start:]); err != nil {
			return nil, err
		}
		if h&(1<<31) != 0 {
			return rec, nil
		}
	}
}

// handle answers one record; nil means no reply (not a call, or a resent
// request still in progress).
func (s *Server) handle(ctx context.Context, cn *conn, rec []byte) []byte {
	rd := bytes.NewReader(rec)
	var xid, mtype uint32
	if err := xdr.Read(rd, &xid); err != nil {
		return nil
	}
	if err := xdr.Read(rd, &mtype); err != nil || mtype != msgCall {
		return nil
	}
	var h rpc.Header
	if err := xdr.Read(rd, &h); err != nil {
		return accepted(xid, acceptGarbageArgs, nil)
	}
	if h.Rpcvers != 2 {
		return denied(xid, rejectRPCMismatch, mismatch{2, 2})
	}
	var p *procedure
	var vers uint32
	switch h.Prog {
	case progNFS:
		vers = versNFS
		if int(h.Proc) < len(nfsProcs) {
			p = &nfsProcs[h.Proc]
		}
	case progMount:
		vers = versMount
		if int(h.Proc) < len(mountProcs) {
			p = &mountProcs[h.Proc]
		}
	default:
		return accepted(xid, acceptProgUnavail, nil)
	}
	if h.Vers != vers {
		return accepted(xid, acceptProgMismatch, mismatch{vers, vers})
	}
	if p == nil || p.fn == nil {
		return accepted(xid, acceptProcUnavail, nil)
	}

	start := time.Now()
	s.files.sweep(ctx)
	r := &request{s: s, ctx: ctx, base: ctx, conn: cn, args: rd, proc: p}
	if h.Proc != 0 { // NULL takes any credentials
		if stat := r.credentials(h.Cred); stat != 0 {
			s.record(p.name, cn.remote, cn.listener, true, time.Since(start))
			return denied(xid, rejectAuthError, stat)
		}
	}

	var key drcKey
	if p.nonIdempotent {
		args := rec[len(rec)-rd.Len():]
		key = drcKey{ip: cn.remote.Addr(), xid: xid, prog: h.Prog, proc: h.Proc, sum: crc32.ChecksumIEEE(args)}
		cached, busy := s.drc.start(key, start)
		if busy {
			return nil
		}
		if cached != nil {
			s.record(p.name, cn.remote, cn.listener, false, time.Since(start))
			return cached
		}
	}

	argStart := len(rec) - rd.Len()
	res, err := p.fn(r)
	// An idempotent request that found the cluster unavailable is tried
	// again here for a while rather than answered NFS3ERR_JUKEBOX, which
	// some clients (libnfs) take as a failure; once the address is being
	// stopped (a fence, a handover: ctx ends) it is not answered at all,
	// so that the client resends it to the next holder, as knfsd drops a
	// reply it cannot give.
	for err == nil && res.status == nfs3ErrJukebox && !p.nonIdempotent && ctx.Err() == nil && time.Since(start) < unavailableRetry {
		select {
		case <-ctx.Done():
		case <-time.After(unavailableDelay):
		}
		if ctx.Err() != nil {
			break
		}
		r = &request{s: s, ctx: ctx, base: ctx, conn: cn, args: bytes.NewReader(rec[argStart:]), proc: p}
		if h.Proc != 0 {
			r.credentials(h.Cred)
		}
		res, err = p.fn(r)
	}
	if err == nil && res.status == nfs3ErrJukebox && ctx.Err() != nil {
		s.record(p.name, cn.remote, cn.listener, true, time.Since(start))
		if p.nonIdempotent {
			s.drc.abandon(key)
		}
		return nil
	}
	var reply []byte
	switch {
	case errors.Is(err, errGarbage):
		reply = accepted(xid, acceptGarbageArgs, nil)
	case err != nil:
		s.log.Error("nfs: encoding a reply", "proc", p.name, "err", err)
		reply = accepted(xid, acceptSystemErr, nil)
	default:
		// Header, status and body encoded once, into one buffer.
		var b bytes.Buffer
		if rd, ok := res.body.(readOK); ok {
			b.Grow(len(rd.Data) + 256)
		}
		err = xdr.Write(&b, acceptedHeader{Xid: xid, MsgType: msgReply, Stat: replyAccepted, Verf: rpc.AuthNull, Accept: acceptSuccess})
		if err == nil && !res.noStatus {
			err = xdr.Write(&b, res.status)
		}
		if err == nil && res.body != nil {
			err = xdr.Write(&b, res.body)
		}
		if err != nil {
			s.log.Error("nfs: encoding a reply", "proc", p.name, "err", err)
			reply = accepted(xid, acceptSystemErr, nil)
		} else {
			reply = b.Bytes()
		}
	}
	failed := err != nil || res.status != 0
	if p.nonIdempotent {
		if s.store != nil {
			reply, failed = s.shared(ctx, key, reply, failed)
		}
		s.drc.finish(key, reply)
	}
	s.record(p.name, cn.remote, cn.listener, failed, time.Since(start))
	return reply
}

func accepted(xid, stat uint32, body any) []byte {
	var b bytes.Buffer
	_ = xdr.Write(&b, acceptedHeader{Xid: xid, MsgType: msgReply, Stat: replyAccepted, Verf: rpc.AuthNull, Accept: stat})
	if body != nil {
		_ = xdr.Write(&b, body)
	}
	return b.Bytes()
}

func denied(xid, stat uint32, body any) []byte {
	var b bytes.Buffer
	_ = xdr.Write(&b, deniedHeader{Xid: xid, MsgType: msgReply, Stat: replyDenied, Reject: stat})
	_ = xdr.Write(&b, body)
	return b.Bytes()
}

// procedure is one RPC procedure of NFS or MOUNT.
type procedure struct {
	name string
	fn   func(*request) (result, error)
	// modifies: refused (NFS3ERR_ROFS) on a read-only export.
	modifies bool
	// nonIdempotent: its replies go to the duplicate-request cache.
	nonIdempotent bool
}

// result is a procedure's reply: its status (nfsstat3, mountstat3) and
// the body after it.
type result struct {
	status   uint32
	body     any
	noStatus bool // the reply has no status (MOUNT's DUMP, EXPORT)
}

// request is one call being answered.
type request struct {
	s    *Server
	base context.Context // the connection's
	ctx  context.Context // base, with the caller once the export is known
	conn *conn
	args *bytes.Reader
	proc *procedure

	cred vfs.Caller
	anon bool // AUTH_NONE
	exp  *export
	root vfs.LIN // the export's directory
}

// credentials reads the call's credentials; it returns an auth_stat to
// refuse the call with, or 0.
func (r *request) credentials(a rpc.Auth) uint32 {
	switch a.Flavor {
	case flavorNone:
		r.anon = true
		return 0
	case flavorSys:
		var as authSys
		if err := xdr.Read(bytes.NewReader(a.Body), &as); err != nil || len(as.Machine) > 255 || len(as.GIDs) > 16 {
			return authBadCred
		}
		r.cred = vfs.Caller{UID: as.UID, GID: as.GID, Groups: slices.Clone(as.GIDs)}
		return 0
	}
	return authTooWeak
}

func (r *request) decode(v any) error {
	if err := xdr.Read(r.args, v); err != nil {
		return fmt.Errorf("%w: %v", errGarbage, err)
	}
	return nil
}

// target decodes a file handle and checks the client against its export:
// errors are statusErrors (BADHANDLE, STALE, ACCES, XDEV between two
// exports, ROFS for a modifying procedure on a read-only export). It sets
// the request's context to carry the export's view of the caller.
func (r *request) target(fh []byte) (vfs.LIN, error) {
	lin, root, err := decodeHandle(fh)
	if err != nil {
		return 0, statusError(nfsc.NFS3ErrBadHandle)
	}
	if r.exp != nil {
		if root != r.root {
			return 0, statusError(nfsc.NFS3ErrXDev)
		}
		return lin, nil
	}
	x := r.s.exportAt(r.base, root)
	if x == nil {
		return 0, statusError(nfsc.NFS3ErrStale)
	}
	if !x.allows(r.conn.remote.Addr()) {
		return 0, statusError(nfsc.NFS3ErrAcces)
	}
	if r.proc.modifies && x.ReadOnly {
		return 0, statusError(nfsc.NFS3ErrROFS)
	}
	r.exp, r.root = x, root
	r.ctx = vfs.WithCaller(r.base, x.caller(r.cred, r.anon))
	return lin, nil
}

func (r *request) caller() vfs.Caller { return vfs.CallerFrom(r.ctx) }

func (r *request) handle(lin vfs.LIN) []byte { return encodeHandle(lin, r.root) }

func sortStrings(s []string) { slices.Sort(s) }

func sortClients(cs []ClientStat) {
	slices.SortFunc(cs, func(a, b ClientStat) int { return strings.Compare(a.Addr, b.Addr) })
}
