package nfstest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"
	"github.com/willscott/go-nfs-client/nfs/xdr"

	"github.com/weftfs/weft/internal/gateway/nfs"
	"github.com/weftfs/weft/internal/vfs"
)

const (
	nfs3Ok       = nfsc.NFS3Ok
	nfs3Acces    = nfsc.NFS3ErrAcces
	nfs3NoEnt    = nfsc.NFS3ErrNoEnt
	nfs3Exist    = nfsc.NFS3ErrExist
	nfs3ROFS     = nfsc.NFS3ErrROFS
	nfs3NotEmpty = nfsc.NFS3ErrNotEmpty
)

// mountRoot mounts "/" as root with the raw client.
func mountRoot(t testing.TB, f *Fixture, cred rpc.Auth) (*rawClient, []byte) {
	t.Helper()
	c := dialRaw(t, f.Addr, cred)
	st, fh := c.mount("/")
	if st != 0 {
		t.Fatalf("MOUNT /: status %d", st)
	}
	return c, fh
}

// dialTarget connects go-nfs-client's RPC client to addr. The client binds
// a source port it picks at random from 49152-65535 without asking the
// kernel, so the port may be taken (a test's or a TIME_WAIT connection):
// it is tried again then, with another port.
func dialTarget(t testing.TB, addr string) *rpc.Client {
	t.Helper()
	for i := 0; ; i++ {
		rc, err := rpc.DialTCP("tcp", addr, false)
		if err == nil {
			return rc
		}
		if !errors.Is(err, syscall.EADDRINUSE) || i == 9 {
			t.Fatal(err)
		}
	}
}

// TestPOSIX drives the gateway with go-nfs-client's Target (MOUNT, LOOKUP,
// CREATE, WRITE, READ, RENAME, SYMLINK, READDIRPLUS, REMOVE) and the raw
// client for what Target lacks, checking POSIX behaviours over NFSv3.
func TestPOSIX(t *testing.T) {
	f := New(t, 1)
	rc := dialTarget(t, f.Addr)
	defer rc.Close()
	m := &nfsc.Mount{Client: rc}
	tg, err := m.Mount("/", authSys(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tg.Mkdir("d", 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile := func(p string, data []byte) {
		t.Helper()
		w, err := tg.OpenFile(p, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	readFile := func(p string) []byte {
		t.Helper()
		r, err := tg.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if _, err := b.ReadFrom(r); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	writeFile("d/f", []byte("hello"))
	if got := readFile("d/f"); string(got) != "hello" {
		t.Fatalf("d/f reads %q", got)
	}

	// Rename, and rename over an existing file.
	if err := tg.Rename("d/f", "d/g"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tg.Lookup("d/f"); !os.IsNotExist(err) {
		t.Fatalf("lookup of the renamed name: %v", err)
	}
	writeFile("d/h", []byte("other"))
	if err := tg.Rename("d/g", "d/h"); err != nil {
		t.Fatal(err)
	}
	if got := readFile("d/h"); string(got) != "hello" {
		t.Fatalf("d/h after rename over it reads %q", got)
	}

	raw, root := mountRoot(t, f, authSys(0, 0))
	_, dfh := raw.lookup(root, "d")
	_, hfh := raw.lookup(dfh, "h")

	// Hard links and nlink.
	if st, _ := raw.call(pLink, hfh, dirop(dfh, "l")); st != 0 {
		t.Fatalf("LINK: %d", st)
	}
	if _, a := raw.getattr(hfh); a.Nlink != 2 {
		t.Fatalf("nlink after LINK: %d", a.Nlink)
	}
	if err := tg.Remove("d/h"); err != nil {
		t.Fatal(err)
	}
	if _, a := raw.getattr(hfh); a.Nlink != 1 {
		t.Fatalf("nlink after REMOVE of one link: %d", a.Nlink)
	}
	if got := readFile("d/l"); string(got) != "hello" {
		t.Fatalf("d/l reads %q", got)
	}
	_, ffh := raw.lookup(dfh, "l")
	if st, _ := raw.call(pRemove, dirop(dfh, "l2")); st != nfs3NoEnt {
		t.Fatalf("REMOVE of a missing name: %d", st)
	}
	if st, _ := raw.call(pLink, ffh, dirop(dfh, "l2")); st != 0 {
		t.Fatalf("LINK: %d", st)
	}
	if err := tg.Remove("d/l2"); err != nil {
		t.Fatal(err)
	}

	// Symlinks.
	if err := tg.Symlink("some/target", "d/s"); err != nil {
		t.Fatal(err)
	}
	_, sfh := raw.lookup(dfh, "s")
	st, rd := raw.call(pReadlink, sfh)
	if st != 0 {
		t.Fatalf("READLINK: %d", st)
	}
	rl := read[struct {
		Attr   nfsc.PostOpAttr
		Target string
	}](t, rd)
	if rl.Target != "some/target" || rl.Attr.Attr.Type != nfsc.NF3Lnk {
		t.Fatalf("READLINK: %+v", rl)
	}

	// Truncate with SETATTR size, and times set and read back.
	_, lfh := raw.lookup(dfh, "l")
	sa := nfsc.Sattr3{Size: nfsc.SetSize{SetIt: true, Size: 2},
		Mtime: nfsc.SetTime{SetIt: nfsc.SetToClientTime, Time: nfsc.NFS3Time{Seconds: 1_000_000_000, Nseconds: 500}},
		Atime: nfsc.SetTime{SetIt: nfsc.SetToClientTime, Time: nfsc.NFS3Time{Seconds: 1_100_000_000}}}
	if st, _ := raw.call(pSetattr, lfh, sa, false); st != 0 {
		t.Fatalf("SETATTR: %d", st)
	}
	_, a := raw.getattr(lfh)
	if a.Filesize != 2 || a.Mtime != (nfsc.NFS3Time{Seconds: 1_000_000_000, Nseconds: 500}) || a.Atime.Seconds != 1_100_000_000 {
		t.Fatalf("after SETATTR size 2 and times: %+v", a)
	}
	if got := readFile("d/l"); string(got) != "he" {
		t.Fatalf("truncated file reads %q", got)
	}
	// A guarded SETATTR with a stale ctime is refused.
	if st, _ := raw.call(pSetattr, lfh, modeAttr(0o600), true, nfsc.NFS3Time{Seconds: 1}); st != nfsc.NFS3ErrNotSync {
		t.Fatalf("guarded SETATTR with a wrong ctime: %d", st)
	}

	gone := raw.create(dfh, "gone", 0o644, nfs3Ok)
	if st, _ := raw.call(pRemove, dirop(dfh, "gone")); st != 0 {
		t.Fatalf("REMOVE: %d", st)
	}
	if st, _ := raw.getattr(gone); st != nfsc.NFS3ErrStale {
		t.Fatalf("GETATTR of a removed file's handle: %d, want STALE", st)
	}

	// Directories: RMDIR of a non-empty one, MKNOD of a FIFO.
	if err := tg.RmDir("d"); err == nil {
		t.Fatal("RMDIR of a non-empty directory succeeded")
	}
	if st, rd := raw.call(pMknod, dirop(dfh, "fifo"), uint32(nfsc.NF3FIFO), modeAttr(0o600)); st != 0 {
		t.Fatalf("MKNOD: %d", st)
	} else if res := read[diropres](t, rd); res.Attr.Attr.Type != nfsc.NF3FIFO {
		t.Fatalf("MKNOD made a %d", res.Attr.Attr.Type)
	}
	if st, _ := raw.call(pRmdir, dirop(root, "d")); st != nfs3NotEmpty {
		t.Fatalf("RMDIR of a non-empty directory: %d", st)
	}

	// FSSTAT, FSINFO, PATHCONF.
	st, rd = raw.call(pFsstat, root)
	fsst := read[struct {
		Attr                   nfsc.PostOpAttr
		Tbytes, Fbytes, Abytes uint64
		Tfiles, Ffiles, Afiles uint64
		Invarsec               uint32
	}](t, rd)
	if st != 0 || fsst.Tbytes != CapacityTotal || fsst.Fbytes != CapacityFree || fsst.Tfiles <= fsst.Ffiles || !fsst.Attr.IsSet {
		t.Fatalf("FSSTAT: %d %+v", st, fsst)
	}
	st, rd = raw.call(pFsinfo, root)
	fi := read[nfsc.FSInfo](t, rd)
	if st != 0 || fi.RTMax != 1<<20 || fi.WTMax != 1<<20 || fi.Properties&0x1b != 0x1b || fi.TimeDelta.Nseconds != 1 {
		t.Fatalf("FSINFO: %d %+v", st, fi)
	}
	st, rd = raw.call(pPathconf, root)
	pc := read[struct {
		Attr                                                    nfsc.PostOpAttr
		Linkmax, NameMax                                        uint32
		NoTrunc, ChownRestricted, CaseInsensitive, CasePreserve bool
	}](t, rd)
	if st != 0 || pc.Linkmax != vfs.MaxLinks || pc.NameMax != vfs.MaxNameLen || !pc.NoTrunc || !pc.ChownRestricted || pc.CaseInsensitive || !pc.CasePreserve {
		t.Fatalf("PATHCONF: %d %+v", st, pc)
	}

	stats := f.Server.Stats()
	if stats.Ops["CREATE"].Count == 0 || stats.Ops["LOOKUP"].Errors == 0 || len(stats.Clients) < 2 || len(stats.Listeners) != 1 {
		t.Fatalf("stats: %+v", stats)
	}
}

// TestWriteStability: an UNSTABLE write is reported unstable with the
// verifier Serve was given and is durable after COMMIT; a FILE_SYNC write
// is durable at its reply — seen by another FS over the namespace, as
// another node would see it.
func TestWriteStability(t *testing.T) {
	f := New(t, 0xfeed)
	c, root := mountRoot(t, f, authSys(0, 0))
	fh := c.create(root, "u", 0o644, nfs3Ok)
	data := bytes.Repeat([]byte("unstable"), 100)
	st, w := c.write(fh, 0, data, 0)
	if st != 0 || w.Committed != 0 || w.Count != uint32(len(data)) || w.Verf != 0xfeed {
		t.Fatalf("UNSTABLE WRITE: %d %+v", st, w)
	}
	other := f.NewFS()
	lin, _ := linOf(t, c, fh)
	if a, err := other.GetAttr(context.Background(), lin); err != nil || a.Size != 0 {
		t.Fatalf("an uncommitted UNSTABLE write is visible to another node: %+v %v", a, err)
	}
	st, rd := c.call(pCommit, fh, uint64(0), uint32(0))
	cm := read[struct {
		Wcc  nfsc.WccData
		Verf uint64
	}](t, rd)
	if st != 0 || cm.Verf != 0xfeed {
		t.Fatalf("COMMIT: %d %+v", st, cm)
	}
	mustRead(t, other, lin, data)

	fh2 := c.create(root, "s", 0o644, nfs3Ok)
	st, w = c.write(fh2, 0, []byte("synced"), 2)
	if st != 0 || w.Committed != 2 || w.Verf != 0xfeed {
		t.Fatalf("FILE_SYNC WRITE: %d %+v", st, w)
	}
	lin2, _ := linOf(t, c, fh2)
	mustRead(t, other, lin2, []byte("synced"))

	// A read through the gateway sees unstable writes at once.
	if st, w = c.write(fh2, 6, []byte("+more"), 0); st != 0 {
		t.Fatal(st)
	}
	if st, r := c.read(fh2, 0, 100); st != 0 || string(r.Data) != "synced+more" || !r.EOF {
		t.Fatalf("READ after an UNSTABLE write: %d %q eof %v", st, r.Data, r.EOF)
	}

	// A restarted gateway has a new verifier, and the handles still work.
	f.Start(0xbeef, nfs.Export{Path: "/", NoRootSquash: true})
	c2 := dialRaw(t, f.Addr, authSys(0, 0))
	if st, w := c2.write(fh2, 11, []byte("!"), 0); st != 0 || w.Verf != 0xbeef {
		t.Fatalf("WRITE after restart: %d %+v", st, w)
	}
	if st, r := c2.read(fh, 0, 1000); st != 0 || !bytes.Equal(r.Data, data) {
		t.Fatalf("READ with a handle from before the restart: %d %d bytes", st, len(r.Data))
	}
	// The close at the old server's Close flushed its unstable write.
	mustRead(t, other, lin2, []byte("synced+more"))
}

func linOf(t testing.TB, c *rawClient, fh []byte) (vfs.LIN, nfsc.Fattr) {
	t.Helper()
	st, a := c.getattr(fh)
	if st != 0 {
		t.Fatalf("GETATTR: %d", st)
	}
	return vfs.LIN(a.Fileid), a
}

func mustRead(t *testing.T, fs *vfs.FS, lin vfs.LIN, want []byte) {
	t.Helper()
	ctx := context.Background()
	h, err := fs.Open(ctx, lin, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Release(ctx, h.ID)
	got := make([]byte, len(want)+10)
	n, _ := h.Read(ctx, got, 0)
	if !bytes.Equal(got[:n], want) {
		t.Fatalf("another FS reads %q, want %q", got[:n], want)
	}
}

// TestCloseIdle: an open file idle past Config.IdleClose is closed by
// CloseIdle, which writes its UNSTABLE writes out; the file opens again
// for the next write.
func TestCloseIdle(t *testing.T) {
	f := New(t, 7)
	f.IdleClose = time.Millisecond
	f.Start(7, nfs.Export{Path: "/", NoRootSquash: true})
	c, root := mountRoot(t, f, authSys(0, 0))
	fh := c.create(root, "idle", 0o644, nfs3Ok)
	if st, w := c.write(fh, 0, []byte("buffered"), 0); st != 0 || w.Committed != 0 {
		t.Fatalf("UNSTABLE WRITE: %d %+v", st, w)
	}
	lin, _ := linOf(t, c, fh)
	other := f.NewFS()
	if a, _ := other.GetAttr(context.Background(), lin); a.Size != 0 {
		t.Fatalf("the unstable write is out before the close: size %d", a.Size)
	}
	time.Sleep(10 * time.Millisecond) // past IdleClose (a threshold, not a race)
	f.Server.CloseIdle(context.Background())
	mustRead(t, other, lin, []byte("buffered"))
	if st, w := c.write(fh, 8, []byte("+"), 2); st != 0 || w.Verf != 7 {
		t.Fatalf("WRITE after the idle close: %d %+v", st, w)
	}
	mustRead(t, other, lin, []byte("buffered+"))
}

// TestSyncExport: on a sync export an UNSTABLE WRITE is durable before its
// reply, which says FILE_SYNC: another node reads it without a COMMIT.
func TestSyncExport(t *testing.T) {
	f := New(t, 7, nfs.Export{Path: "/", NoRootSquash: true, Sync: true})
	c, root := mountRoot(t, f, authSys(0, 0))
	fh := c.create(root, "f", 0o644, nfs3Ok)
	st, w := c.write(fh, 0, []byte("durable"), 0)
	if st != 0 || w.Committed != 2 {
		t.Fatalf("UNSTABLE WRITE on a sync export: %d %+v; want FILE_SYNC (2)", st, w)
	}
	lin, _ := linOf(t, c, fh)
	mustRead(t, f.NewFS(), lin, []byte("durable"))
}

// TestMaxConns: a listener holding Config.MaxConns connections closes the
// next one at once and counts it; once a client goes, a new one is served.
func TestMaxConns(t *testing.T) {
	f := New(t, 7)
	f.MaxConns = 2
	f.Start(7, nfs.Export{Path: "/", NoRootSquash: true})
	a, _ := mountRoot(t, f, authSys(0, 0))
	b, _ := mountRoot(t, f, authSys(0, 0))
	extra, err := net.Dial("tcp", f.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	_ = extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := extra.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("a third connection to a listener of 2: read %d bytes, %v; want it closed (EOF)", n, err)
	}
	if got := f.Server.Stats().RefusedConns; got != 1 {
		t.Fatalf("Stats.RefusedConns = %d, want 1", got)
	}
	a.mount("/") // the first two are still served
	if err := nullCall(f.Addr); err == nil {
		t.Fatal("a NULL call on a third connection was answered")
	}
	b.c.Close()
	// The listener counts b out once its reader sees the close.
	deadline := time.Now().Add(10 * time.Second)
	for nullCall(f.Addr) != nil {
		if time.Now().After(deadline) {
			t.Fatal("no new connection served 10 s after a client went")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := f.Server.Stats().RefusedConns; got < 2 {
		t.Fatalf("Stats.RefusedConns = %d, want at least 2", got)
	}
}

// nullCall makes a NULL call to MOUNT on a new connection to addr and
// reads its reply.
func nullCall(addr string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	var b bytes.Buffer
	_ = xdr.Write(&b, xids.Add(1))
	_ = xdr.Write(&b, uint32(0))
	_ = xdr.Write(&b, rpc.Header{Rpcvers: 2, Prog: nfsc.MountProg, Vers: 3, Proc: 0, Cred: rpc.AuthNull, Verf: rpc.AuthNull})
	hdr := binary.BigEndian.AppendUint32(nil, uint32(b.Len())|1<<31)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(append(hdr, b.Bytes()...)); err != nil {
		return err
	}
	_, err = io.ReadFull(c, hdr)
	return err
}
