package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"
	"github.com/willscott/go-nfs-client/nfs/xdr"
)

// NFS is an NFSv3 export as a target. Its client is built here on
// go-nfs-client's RPC transport and XDR codec (its Target has no UNSTABLE
// writes): one TCP connection per session, one call in flight on each, no
// cache. Writes are UNSTABLE and a file's Sync is a COMMIT, as a kernel
// client writes back; a stat is a LOOKUP, as a kernel client's stat of a
// name it has not cached.
type NFS struct {
	// Host is the server's address (an IP address or a name).
	Host string
	// NFSPort and MountPort are the ports of the NFS and MOUNT programs;
	// a weft gateway serves both on one. There is no portmapper lookup.
	NFSPort, MountPort int
	// Export is the exported directory to mount ("/").
	Export string
	// UID and GID are the AUTH_SYS identity of the calls.
	UID, GID uint32
}

// ParseNFSURL parses a libnfs-style URL, as weft local up --nfs prints:
//
//	nfs://HOST[:PORT]/EXPORT?nfsport=P&mountport=P&version=3&uid=N&gid=N
//
// The path is the export to mount. PORT, nfsport and mountport name the
// ports (without them: 2049; mountport defaults to the NFS port, as weft's
// gateways serve both on one). uid and gid default to the caller's.
// version, if given, must be 3; libnfs's auto-traverse-mounts is accepted
// and ignored (this client does not traverse).
func ParseNFSURL(s string) (*NFS, error) {
	bad := func(why string) (*NFS, error) {
		return nil, fmt.Errorf("bench: NFS URL %q: %s (want nfs://HOST[:PORT]/EXPORT?nfsport=P&mountport=P, as weft local up --nfs prints)", s, why)
	}
	u, err := url.Parse(s)
	if err != nil {
		return bad(err.Error())
	}
	if u.Scheme != "nfs" || u.Host == "" {
		return bad("not an nfs:// URL with a host")
	}
	n := &NFS{Host: u.Hostname(), Export: path.Clean("/" + u.Path), UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	port := func(name, v string) (int, error) {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 65535 {
			return 0, fmt.Errorf("%s %q is not a port number (1-65535)", name, v)
		}
		return p, nil
	}
	n.NFSPort = 2049
	if p := u.Port(); p != "" {
		if n.NFSPort, err = port("the port", p); err != nil {
			return bad(err.Error())
		}
	}
	q := u.Query()
	mountSet := false
	for k, vs := range q {
		v := vs[len(vs)-1]
		switch k {
		case "nfsport":
			n.NFSPort, err = port("nfsport", v)
		case "mountport":
			n.MountPort, err = port("mountport", v)
			mountSet = true
		case "version":
			if v != "3" {
				err = fmt.Errorf("version %q: only NFSv3 is spoken", v)
			}
		case "uid", "gid":
			var id uint64
			id, err = strconv.ParseUint(v, 10, 32)
			if err != nil {
				err = fmt.Errorf("%s %q is not a number", k, v)
			} else if k == "uid" {
				n.UID = uint32(id)
			} else {
				n.GID = uint32(id)
			}
		case "auto-traverse-mounts":
		default:
			err = fmt.Errorf("unknown parameter %q (known: nfsport, mountport, version, uid, gid, auto-traverse-mounts)", k)
		}
		if err != nil {
			return bad(err.Error())
		}
	}
	if !mountSet {
		n.MountPort = n.NFSPort
	}
	return n, nil
}

func (n *NFS) String() string {
	host := n.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return fmt.Sprintf("nfs://%s/%s?nfsport=%d&mountport=%d", host, strings.TrimPrefix(n.Export, "/"), n.NFSPort, n.MountPort)
}

// replyTimeout is how long a call waits for its reply before the client
// sends it again (same xid): Linux's default timeo for NFS over TCP. The
// library's own default, 5 s, resends a COMMIT still being done.
const replyTimeout = 60 * time.Second

var setTimeout sync.Once

// Session connects to the server, mounts the export and asks FSINFO for
// the largest READ and WRITE.
func (n *NFS) Session(ctx context.Context) (Session, error) {
	setTimeout.Do(func() { rpc.DefaultReadTimeout = replyTimeout })
	s := &nfsSession{n: n, auth: authSys(n.UID, n.GID), dirs: map[string][]byte{}}
	c, err := dial(net.JoinHostPort(n.Host, strconv.Itoa(n.NFSPort)))
	if err != nil {
		return nil, fmt.Errorf("bench: NFS server %s port %d: %w", n.Host, n.NFSPort, err)
	}
	s.c = c
	mc := c
	if n.MountPort != n.NFSPort {
		if mc, err = dial(net.JoinHostPort(n.Host, strconv.Itoa(n.MountPort))); err != nil {
			c.Close()
			return nil, fmt.Errorf("bench: NFS server %s MOUNT port %d: %w", n.Host, n.MountPort, err)
		}
		defer mc.Close()
	}
	if s.root, err = s.mount(mc); err != nil {
		c.Close()
		return nil, err
	}
	s.dirs[""] = s.root
	var fi nfsc.FSInfo
	if err := s.call("FSINFO", n.Export, &fhArgs{s.hdr(nfsc.NFSProc3FSInfo), s.root}, &fi); err != nil {
		c.Close()
		return nil, err
	}
	s.rtmax, s.wtmax = int(fi.RTMax), int(fi.WTMax)
	if s.rtmax <= 0 || s.wtmax <= 0 {
		c.Close()
		return nil, fmt.Errorf("bench: NFS server %s: FSINFO gives rtmax %d, wtmax %d", n.Host, fi.RTMax, fi.WTMax)
	}
	return s, nil
}

// dial connects go-nfs-client's RPC client to addr. The library binds a
// source port it picks at random from 49152-65535 without asking the
// kernel, so the port may be taken: it is tried again then.
func dial(addr string) (*rpc.Client, error) {
	for i := 0; ; i++ {
		c, err := rpc.DialTCP("tcp", addr, false)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || i == 19 {
			return c, err
		}
	}
}

// authSys is an AUTH_SYS credential of uid and gid and no other groups.
func authSys(uid, gid uint32) rpc.Auth {
	host, _ := os.Hostname()
	var b bytes.Buffer
	_ = xdr.Write(&b, struct {
		Stamp    uint32
		Machine  string
		UID, GID uint32
		GIDs     []uint32
	}{uint32(time.Now().Unix()), host, uid, gid, nil})
	return rpc.Auth{Flavor: 1, Body: b.Bytes()}
}

type nfsSession struct {
	n            *NFS
	c            *rpc.Client
	auth         rpc.Auth
	root         []byte
	dirs         map[string][]byte // directory handles by path, "" the root
	rtmax, wtmax int
}

func (s *nfsSession) header(prog, proc uint32) rpc.Header {
	return rpc.Header{Rpcvers: 2, Prog: prog, Vers: 3, Proc: proc, Cred: s.auth, Verf: rpc.AuthNull}
}

func (s *nfsSession) mount(mc *rpc.Client) ([]byte, error) {
	res, err := mc.Call(&struct {
		rpc.Header
		Dirpath string
	}{s.header(nfsc.MountProg, nfsc.MountProc3MNT), s.n.Export})
	if err != nil {
		return nil, fmt.Errorf("bench: MOUNT %s on %s: %w", s.n.Export, s.n.Host, err)
	}
	st, err := xdr.ReadUint32(res)
	if err != nil {
		return nil, fmt.Errorf("bench: MOUNT %s on %s: reply: %w", s.n.Export, s.n.Host, err)
	}
	if st != 0 {
		hint := ""
		if st == nfsc.MNT3ErrAcces || st == nfsc.MNT3ErrPerm {
			hint = " (is the export open to this client? weft nfs export list)"
		}
		return nil, fmt.Errorf("bench: MOUNT %s on %s: status %d%s", s.n.Export, s.n.Host, st, hint)
	}
	return xdr.ReadOpaque(res)
}

// call makes an NFS call (args begins with its rpc.Header), checks the
// status and decodes the rest of the reply into res (nil: ignored). op and
// p name the call in errors.
func (s *nfsSession) call(op, p string, args, res any) error {
	r, err := s.c.Call(args)
	if err != nil {
		return fmt.Errorf("bench: NFS %s %s: %w", op, p, err)
	}
	st, err := xdr.ReadUint32(r)
	if err != nil {
		return fmt.Errorf("bench: NFS %s %s: reply: %w", op, p, err)
	}
	if st != nfsc.NFS3Ok {
		err := nfsc.NFS3Error(st)
		if st == nfsc.NFS3ErrAcces || st == nfsc.NFS3ErrPerm {
			err = fmt.Errorf("%w (as uid %d gid %d: a root-squashed export maps root to nobody; add uid=N&gid=N to the URL or an export with --no-root-squash)", err, s.n.UID, s.n.GID)
		}
		return fmt.Errorf("bench: NFS %s %s: %w", op, p, err)
	}
	if res == nil {
		return nil
	}
	if err := xdr.Read(r, res); err != nil {
		return fmt.Errorf("bench: NFS %s %s: reply: %w", op, p, err)
	}
	return nil
}

func (s *nfsSession) hdr(proc uint32) rpc.Header { return s.header(nfsc.Nfs3Prog, proc) }

// Procedure numbers go-nfs-client does not name.
const procRmdir = 13

// Call arguments (RFC 1813), each after its header.
type (
	fhArgs struct {
		rpc.Header
		FH []byte
	}
	diropArgs struct {
		rpc.Header
		What nfsc.Diropargs3
	}
	createArgs struct {
		rpc.Header
		Where nfsc.Diropargs3
		How   uint32 // GUARDED (1): fail if the name exists
		Attr  nfsc.Sattr3
	}
	mkdirArgs struct {
		rpc.Header
		Where nfsc.Diropargs3
		Attr  nfsc.Sattr3
	}
	ioArgs struct {
		rpc.Header
		FH     []byte
		Offset uint64
		Count  uint32
	}
	writeArgs struct {
		rpc.Header
		FH     []byte
		Offset uint64
		Count  uint32
		Stable uint32 // UNSTABLE (0)
		Data   []byte
	}
)

// Replies after the status.
type (
	diropRes struct {
		FH   nfsc.PostOpFH3
		Attr nfsc.PostOpAttr
		Dir  nfsc.WccData
	}
	lookupRes struct {
		FH   []byte
		Attr nfsc.PostOpAttr
		Dir  nfsc.PostOpAttr
	}
	readRes struct {
		Attr  nfsc.PostOpAttr
		Count uint32
		EOF   bool
		Data  []byte
	}
	writeRes struct {
		Wcc       nfsc.WccData
		Count     uint32
		Committed uint32
		Verf      uint64
	}
	commitRes struct {
		Wcc  nfsc.WccData
		Verf uint64
	}
)

// where returns the handle of p's directory, looked up once per session,
// and p's last name.
func (s *nfsSession) where(p string) (nfsc.Diropargs3, error) {
	dir, name := path.Split(strings.Trim(p, "/"))
	dir = strings.Trim(dir, "/")
	fh, ok := s.dirs[dir]
	if !ok {
		if strings.Contains(dir, "/") {
			return nfsc.Diropargs3{}, fmt.Errorf("bench: NFS path %q: at most one directory deep", p)
		}
		var r lookupRes
		if err := s.call("LOOKUP", dir, &diropArgs{s.hdr(nfsc.NFSProc3Lookup), nfsc.Diropargs3{FH: s.root, Filename: dir}}, &r); err != nil {
			return nfsc.Diropargs3{}, err
		}
		fh = r.FH
		s.dirs[dir] = fh
	}
	return nfsc.Diropargs3{FH: fh, Filename: name}, nil
}

func mode(m uint32) nfsc.Sattr3 { return nfsc.Sattr3{Mode: nfsc.SetMode{SetIt: true, Mode: m}} }

func (s *nfsSession) Mkdir(p string) error {
	w, err := s.where(p)
	if err != nil {
		return err
	}
	return s.call("MKDIR", p, &mkdirArgs{s.hdr(nfsc.NFSProc3Mkdir), w, mode(0o755)}, nil)
}

func (s *nfsSession) Rmdir(p string) error {
	w, err := s.where(p)
	if err != nil {
		return err
	}
	delete(s.dirs, strings.Trim(p, "/"))
	return s.call("RMDIR", p, &diropArgs{s.hdr(procRmdir), w}, nil)
}

func (s *nfsSession) Remove(p string) error {
	w, err := s.where(p)
	if err != nil {
		return err
	}
	return s.call("REMOVE", p, &diropArgs{s.hdr(nfsc.NFSProc3Remove), w}, nil)
}

func (s *nfsSession) lookup(p string) (lookupRes, error) {
	var r lookupRes
	w, err := s.where(p)
	if err != nil {
		return r, err
	}
	err = s.call("LOOKUP", p, &diropArgs{s.hdr(nfsc.NFSProc3Lookup), w}, &r)
	return r, err
}

func (s *nfsSession) Stat(p string) (int64, error) {
	r, err := s.lookup(p)
	if err != nil {
		return 0, err
	}
	if !r.Attr.IsSet {
		var a nfsc.Fattr
		if err := s.call("GETATTR", p, &fhArgs{s.hdr(nfsc.NFSProc3GetAttr), r.FH}, &a); err != nil {
			return 0, err
		}
		return int64(a.Filesize), nil
	}
	return int64(r.Attr.Attr.Filesize), nil
}

func (s *nfsSession) Create(p string) (File, error) {
	w, err := s.where(p)
	if err != nil {
		return nil, err
	}
	var r diropRes
	if err := s.call("CREATE", p, &createArgs{s.hdr(nfsc.NFSProc3Create), w, 1, mode(0o644)}, &r); err != nil {
		return nil, err
	}
	if !r.FH.IsSet { // the server may leave the handle out: look it up
		l, err := s.lookup(p)
		if err != nil {
			return nil, err
		}
		r.FH.FH = l.FH
	}
	return &nfsFile{s: s, p: p, fh: r.FH.FH}, nil
}

func (s *nfsSession) Open(p string) (File, error) {
	r, err := s.lookup(p)
	if err != nil {
		return nil, err
	}
	return &nfsFile{s: s, p: p, fh: r.FH}, nil
}

func (s *nfsSession) Close() error {
	s.c.Close()
	return nil
}

// nfsFile is a file handle; NFSv3 has no open or close.
type nfsFile struct {
	s     *nfsSession
	p     string
	fh    []byte
	verf  uint64 // the write verifier of the unstable writes since the last COMMIT
	dirty bool
}

// WriteAt sends UNSTABLE WRITEs of at most wtmax bytes.
func (f *nfsFile) WriteAt(b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		chunk := b[n:min(len(b), n+f.s.wtmax)]
		var r writeRes
		if err := f.s.call("WRITE", f.p, &writeArgs{f.s.hdr(nfsc.NFSProc3Write), f.fh, uint64(off) + uint64(n), uint32(len(chunk)), 0, chunk}, &r); err != nil {
			return n, err
		}
		if r.Count == 0 {
			return n, fmt.Errorf("bench: NFS WRITE %s: the server wrote 0 of %d bytes", f.p, len(chunk))
		}
		if f.dirty && r.Verf != f.verf {
			return n, errVerifier(f.p)
		}
		f.verf, f.dirty = r.Verf, true
		n += int(r.Count)
	}
	return n, nil
}

func errVerifier(p string) error {
	return fmt.Errorf("bench: NFS %s: the server's write verifier changed (it restarted or failed over) before COMMIT: unstable writes may have to be sent again; run the benchmark again", p)
}

// ReadAt sends READs of at most rtmax bytes; it returns io.EOF at the end.
func (f *nfsFile) ReadAt(b []byte, off int64) (int, error) {
	n := 0
	for n < len(b) {
		want := min(len(b)-n, f.s.rtmax)
		var r readRes
		if err := f.s.call("READ", f.p, &ioArgs{f.s.hdr(nfsc.NFSProc3Read), f.fh, uint64(off) + uint64(n), uint32(want)}, &r); err != nil {
			return n, err
		}
		if len(r.Data) > want {
			return n, fmt.Errorf("bench: NFS READ %s: asked for %d bytes, got %d", f.p, want, len(r.Data))
		}
		n += copy(b[n:], r.Data)
		if r.EOF && n < len(b) {
			return n, io.EOF
		}
		if len(r.Data) == 0 {
			return n, fmt.Errorf("bench: NFS READ %s at %d: 0 bytes and no EOF", f.p, off+int64(n))
		}
	}
	return n, nil
}

// Sync COMMITs the file's unstable writes and checks the verifier.
func (f *nfsFile) Sync() error {
	var r commitRes
	if err := f.s.call("COMMIT", f.p, &ioArgs{f.s.hdr(nfsc.NFSProc3Commit), f.fh, 0, 0}, &r); err != nil {
		return err
	}
	if f.dirty && r.Verf != f.verf {
		return errVerifier(f.p)
	}
	f.dirty = false
	return nil
}

func (f *nfsFile) Close() error { return nil }
