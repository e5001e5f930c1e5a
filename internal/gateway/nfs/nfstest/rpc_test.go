package nfstest

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"
	"github.com/willscott/go-nfs-client/nfs/xdr"
)

// rawClient speaks ONC RPC to the gateway with requests built here (go-nfs-
// client's Target lacks LINK, COMMIT, UNSTABLE writes, FSSTAT, PATHCONF,
// MKNOD, READDIR and control over xids), encoded by go-nfs-client's xdr.
type rawClient struct {
	t    testing.TB
	addr string
	c    net.Conn
	cred rpc.Auth
}

var xids atomic.Uint32

func init() { xids.Store(uint32(time.Now().UnixNano())) }

func dialRaw(t testing.TB, addr string, cred rpc.Auth) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{t: t, addr: addr, c: c, cred: cred}
}

// authSys is an AUTH_SYS credential of uid and gid with no other groups.
func authSys(uid, gid uint32) rpc.Auth {
	var b bytes.Buffer
	_ = xdr.Write(&b, struct {
		Stamp    uint32
		Machine  string
		UID, GID uint32
		GIDs     []uint32
	}{1, "test", uid, gid, nil})
	return rpc.Auth{Flavor: 1, Body: b.Bytes()}
}

// reconnect opens a new connection (as a client does after a lost reply).
func (r *rawClient) reconnect() {
	r.c.Close()
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { c.Close() })
	r.c = c
}

// callXid sends a call with xid and returns the reply's accept status and
// its body; it fails the test on anything but an accepted reply.
func (r *rawClient) callXid(xid, prog, proc uint32, args ...any) *bytes.Reader {
	r.t.Helper()
	var b bytes.Buffer
	_ = xdr.Write(&b, xid)
	_ = xdr.Write(&b, uint32(0))
	_ = xdr.Write(&b, rpc.Header{Rpcvers: 2, Prog: prog, Vers: 3, Proc: proc, Cred: r.cred, Verf: rpc.AuthNull})
	for _, a := range args {
		if err := xdr.Write(&b, a); err != nil {
			r.t.Fatal(err)
		}
	}
	hdr := make([]byte, 4)
	binary.BigEndian.PutUint32(hdr, uint32(b.Len())|1<<31)
	_ = r.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := r.c.Write(append(hdr, b.Bytes()...)); err != nil {
		r.t.Fatal(err)
	}
	if _, err := io.ReadFull(r.c, hdr); err != nil {
		r.t.Fatal(err)
	}
	rec := make([]byte, binary.BigEndian.Uint32(hdr)&^(1<<31))
	if _, err := io.ReadFull(r.c, rec); err != nil {
		r.t.Fatal(err)
	}
	rd := bytes.NewReader(rec)
	var h struct {
		Xid, Type, Stat uint32
	}
	if err := xdr.Read(rd, &h); err != nil || h.Xid != xid || h.Type != 1 {
		r.t.Fatalf("reply header %+v: %v", h, err)
	}
	if h.Stat != 0 {
		var why [2]uint32
		_ = xdr.Read(rd, &why)
		r.t.Fatalf("call %d.%d denied: %v", prog, proc, why)
	}
	var verf rpc.Auth
	var accept uint32
	_ = xdr.Read(rd, &verf)
	_ = xdr.Read(rd, &accept)
	if accept != 0 {
		r.t.Fatalf("call %d.%d: accept status %d", prog, proc, accept)
	}
	return rd
}

func (r *rawClient) call(proc uint32, args ...any) (uint32, *bytes.Reader) {
	r.t.Helper()
	rd := r.callXid(xids.Add(1), nfsc.Nfs3Prog, proc, args...)
	var st uint32
	if err := xdr.Read(rd, &st); err != nil {
		r.t.Fatal(err)
	}
	return st, rd
}

func (r *rawClient) mount(path string) (uint32, []byte) {
	r.t.Helper()
	rd := r.callXid(xids.Add(1), nfsc.MountProg, 1, path)
	var st uint32
	_ = xdr.Read(rd, &st)
	if st != 0 {
		return st, nil
	}
	var fh []byte
	_ = xdr.Read(rd, &fh)
	return 0, fh
}

func read[T any](t testing.TB, rd io.Reader) T {
	t.Helper()
	var v T
	if err := xdr.Read(rd, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// Procedure numbers.
const (
	pGetattr     = 1
	pSetattr     = 2
	pLookup      = 3
	pAccess      = 4
	pReadlink    = 5
	pRead        = 6
	pWrite       = 7
	pCreate      = 8
	pMkdir       = 9
	pSymlink     = 10
	pMknod       = 11
	pRemove      = 12
	pRmdir       = 13
	pRename      = 14
	pLink        = 15
	pReaddir     = 16
	pReaddirplus = 17
	pFsstat      = 18
	pFsinfo      = 19
	pPathconf    = 20
	pCommit      = 21
)

type diropres struct {
	FH   nfsc.PostOpFH3
	Attr nfsc.PostOpAttr
	Dir  nfsc.WccData
}

type lookupres struct {
	FH   []byte
	Attr nfsc.PostOpAttr
	Dir  nfsc.PostOpAttr
}

type writeres struct {
	Wcc       nfsc.WccData
	Count     uint32
	Committed uint32
	Verf      uint64
}

type readres struct {
	Attr  nfsc.PostOpAttr
	Count uint32
	EOF   bool
	Data  []byte
}

func dirop(fh []byte, name string) nfsc.Diropargs3 { return nfsc.Diropargs3{FH: fh, Filename: name} }

func modeAttr(mode uint32) nfsc.Sattr3 {
	return nfsc.Sattr3{Mode: nfsc.SetMode{SetIt: true, Mode: mode}}
}

// create makes a file (GUARDED) and returns its handle, failing the test
// unless the status is want.
func (r *rawClient) create(dir []byte, name string, mode uint32, want uint32) []byte {
	r.t.Helper()
	st, rd := r.call(pCreate, dirop(dir, name), uint32(1), modeAttr(mode))
	if st != want {
		r.t.Fatalf("CREATE %s: status %d, want %d", name, st, want)
	}
	if st != 0 {
		return nil
	}
	return read[diropres](r.t, rd).FH.FH
}

func (r *rawClient) mkdir(dir []byte, name string, mode uint32) []byte {
	r.t.Helper()
	st, rd := r.call(pMkdir, dirop(dir, name), modeAttr(mode))
	if st != 0 {
		r.t.Fatalf("MKDIR %s: status %d", name, st)
	}
	return read[diropres](r.t, rd).FH.FH
}

func (r *rawClient) lookup(dir []byte, name string) (uint32, []byte) {
	r.t.Helper()
	st, rd := r.call(pLookup, dirop(dir, name))
	if st != 0 {
		return st, nil
	}
	return 0, read[lookupres](r.t, rd).FH
}

func (r *rawClient) getattr(fh []byte) (uint32, nfsc.Fattr) {
	r.t.Helper()
	st, rd := r.call(pGetattr, fh)
	if st != 0 {
		return st, nfsc.Fattr{}
	}
	return 0, read[nfsc.Fattr](r.t, rd)
}

func (r *rawClient) write(fh []byte, off uint64, data []byte, stable uint32) (uint32, writeres) {
	r.t.Helper()
	st, rd := r.call(pWrite, fh, off, uint32(len(data)), stable, data)
	if st != 0 {
		return st, writeres{}
	}
	return 0, read[writeres](r.t, rd)
}

func (r *rawClient) read(fh []byte, off uint64, n uint32) (uint32, readres) {
	r.t.Helper()
	st, rd := r.call(pRead, fh, off, n)
	if st != 0 {
		return st, readres{}
	}
	return 0, read[readres](r.t, rd)
}

var authNone = rpc.Auth{}
