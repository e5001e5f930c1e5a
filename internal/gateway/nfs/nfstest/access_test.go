package nfstest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	nfsc "github.com/willscott/go-nfs-client/nfs"

	"github.com/weftfs/weft/internal/gateway/nfs"
)

// TestPermissions: vfs's permission checks apply to AUTH_SYS callers.
func TestPermissions(t *testing.T) {
	f := New(t, 1)
	root, rfh := mountRoot(t, f, authSys(0, 0))
	priv := root.mkdir(rfh, "private", 0o700)
	root.create(priv, "secret", 0o600, nfs3Ok)
	pub := root.mkdir(rfh, "pub", 0o777)

	u := dialRaw(t, f.Addr, authSys(1000, 1000))
	if st, _ := u.lookup(priv, "secret"); st != nfs3Acces {
		t.Fatalf("uid 1000 LOOKUP in a root 0700 directory: %d, want ACCES", st)
	}
	mine := u.create(pub, "mine", 0o644, nfs3Ok)
	if _, a := u.getattr(mine); a.UID != 1000 || a.GID != 1000 {
		t.Fatalf("a file uid 1000 created is owned by %d:%d", a.UID, a.GID)
	}
	if st, _ := u.write(mine, 0, []byte("by 1000"), 2); st != 0 {
		t.Fatalf("owner WRITE: %d", st)
	}
	other := dialRaw(t, f.Addr, authSys(1001, 1001))
	if st, _ := other.write(mine, 0, []byte("by 1001"), 2); st != nfs3Acces {
		t.Fatalf("uid 1001 WRITE to uid 1000's 0644 file: %d, want ACCES", st)
	}
	if st, r := other.read(mine, 0, 100); st != 0 || string(r.Data) != "by 1000" {
		t.Fatalf("uid 1001 READ of a 0644 file: %d %q", st, r.Data)
	}
	if st, _ := other.call(pRemove, dirop(priv, "secret")); st != nfs3Acces {
		t.Fatalf("uid 1001 REMOVE in a root 0700 directory: %d, want ACCES", st)
	}
	// chown is root's; chmod the owner's.
	chown := nfsc.Sattr3{UID: nfsc.SetUID{SetIt: true, UID: 1001}}
	if st, _ := u.call(pSetattr, mine, chown, false); st != nfsc.NFS3ErrPerm {
		t.Fatalf("uid 1000 chown: %d, want PERM", st)
	}
	if st, _ := other.call(pSetattr, mine, modeAttr(0o666), false); st != nfsc.NFS3ErrPerm {
		t.Fatalf("uid 1001 chmod of uid 1000's file: %d, want PERM", st)
	}
	// ACCESS reports what the caller may do.
	st, rd := other.call(pAccess, mine, uint32(0x3f))
	acc := read[struct {
		Attr   nfsc.PostOpAttr
		Access uint32
	}](t, rd)
	if st != 0 || acc.Access != nfsc.ACCESS3_READ {
		t.Fatalf("ACCESS of uid 1001 to a 0644 file of uid 1000: %d %#x, want READ only", st, acc.Access)
	}
	// The owner writes a file it made read-only (knfsd's owner override:
	// a client opened it before the chmod).
	ro := u.create(pub, "ro", 0o444, nfs3Ok)
	if st, _ := u.write(ro, 0, []byte("x"), 2); st != 0 {
		t.Fatalf("owner WRITE to its 0444 file: %d", st)
	}
}

// TestRootSquash: by default root is nobody (65534); with NoRootSquash it
// is root.
func TestRootSquash(t *testing.T) {
	f := New(t, 1, nfs.Export{Path: "/"})
	c, root := mountRoot(t, f, authSys(0, 0))
	if st, _ := c.call(pCreate, dirop(root, "x"), uint32(1), modeAttr(0o644)); st != nfs3Acces {
		t.Fatalf("squashed root CREATE in the 0755 root directory: %d, want ACCES", st)
	}
	f.Server.SetExports([]nfs.Export{{Path: "/", NoRootSquash: true}})
	pub := c.mkdir(root, "pub", 0o777)
	f.Server.SetExports([]nfs.Export{{Path: "/"}})
	fh := c.create(pub, "x", 0o600, nfs3Ok)
	if _, a := c.getattr(fh); a.UID != 65534 || a.GID != 65534 {
		t.Fatalf("squashed root's file is owned by %d:%d, want 65534:65534", a.UID, a.GID)
	}
	f.Server.SetExports([]nfs.Export{{Path: "/", AnonUID: 4000, AnonGID: 4001}})
	fh = c.create(pub, "y", 0o600, nfs3Ok)
	if _, a := c.getattr(fh); a.UID != 4000 || a.GID != 4001 {
		t.Fatalf("squashed root's file with AnonUID 4000: owned by %d:%d", a.UID, a.GID)
	}
	// AUTH_NONE is the anonymous user too.
	anon := dialRaw(t, f.Addr, authNone)
	fh = anon.create(pub, "z", 0o600, nfs3Ok)
	if _, a := anon.getattr(fh); a.UID != 4000 {
		t.Fatalf("AUTH_NONE's file is owned by %d", a.UID)
	}
}

// TestReadOnlyExport: modifications get ROFS; reads work.
func TestReadOnlyExport(t *testing.T) {
	f := New(t, 1)
	c, root := mountRoot(t, f, authSys(0, 0))
	fh := c.create(root, "f", 0o644, nfs3Ok)
	c.write(fh, 0, []byte("data"), 2)
	f.Server.SetExports([]nfs.Export{{Path: "/", ReadOnly: true, NoRootSquash: true}})
	c.create(root, "g", 0o644, nfs3ROFS)
	if st, _ := c.write(fh, 0, []byte("x"), 2); st != nfs3ROFS {
		t.Fatalf("WRITE on a read-only export: %d", st)
	}
	if st, _ := c.call(pRemove, dirop(root, "f")); st != nfs3ROFS {
		t.Fatalf("REMOVE on a read-only export: %d", st)
	}
	if st, _ := c.call(pSetattr, fh, modeAttr(0o600), false); st != nfs3ROFS {
		t.Fatalf("SETATTR on a read-only export: %d", st)
	}
	if st, r := c.read(fh, 0, 10); st != 0 || string(r.Data) != "data" {
		t.Fatalf("READ on a read-only export: %d %q", st, r.Data)
	}
}

// TestClientList: a client not in the export's list is refused at MOUNT
// and on every request with a handle it got before.
func TestClientList(t *testing.T) {
	f := New(t, 1, nfs.Export{Path: "/", NoRootSquash: true, Clients: []string{"127.0.0.0/8"}})
	c, root := mountRoot(t, f, authSys(0, 0))
	sub := c.mkdir(root, "sub", 0o755)
	if err := f.Server.SetExports([]nfs.Export{{Path: "/", Clients: []string{"10.1.2.3", "192.168.0.0/16"}}}); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.mount("/"); st != nfsc.MNT3ErrAcces {
		t.Fatalf("MOUNT from a client not listed: %d", st)
	}
	if st, _ := c.getattr(sub); st != nfs3Acces {
		t.Fatalf("GETATTR from a client not listed: %d", st)
	}
	// Exports of sub-directories: MOUNT of a path no export covers fails.
	if err := f.Server.SetExports([]nfs.Export{{Path: "/sub"}}); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.mount("/other"); st != nfsc.MNT3ErrNoEnt {
		t.Fatalf("MOUNT of an unexported path: %d", st)
	}
	st, sfh := c.mount("/sub")
	if st != 0 {
		t.Fatalf("MOUNT /sub: %d", st)
	}
	// The old handle was of export "/", gone now: stale.
	if st, _ := c.getattr(root); st != nfsc.NFS3ErrStale {
		t.Fatalf("GETATTR with a handle of a removed export: %d", st)
	}
	// ".." of the export's directory is itself.
	_, up := c.lookup(sfh, "..")
	_, a1 := c.getattr(up)
	_, a2 := c.getattr(sfh)
	if a1.Fileid != a2.Fileid {
		t.Fatalf("LOOKUP .. of the export's directory left the export")
	}
	// EXPORT lists the exports with their clients; DUMP the mounts.
	f.Server.SetExports([]nfs.Export{{Path: "/sub", Clients: []string{"127.0.0.1", "10.0.0.0/8"}}, {Path: "/"}})
	type group struct {
		Name string
		Next *group `xdr:"optional"`
	}
	type exportNode struct {
		Dir    string
		Groups *group      `xdr:"optional"`
		Next   *exportNode `xdr:"optional"`
	}
	ex := read[struct {
		Entries *exportNode `xdr:"optional"`
	}](t, c.callXid(xids.Add(1), nfsc.MountProg, 5))
	var got []string
	for e := ex.Entries; e != nil; e = e.Next {
		s := e.Dir
		for g := e.Groups; g != nil; g = g.Next {
			s += " " + g.Name
		}
		got = append(got, s)
	}
	if fmt.Sprint(got) != "[/sub 127.0.0.1 10.0.0.0/8 /]" {
		t.Fatalf("EXPORT: %q", got)
	}
	type mountBody struct {
		Host, Dir string
		Next      *mountBody `xdr:"optional"`
	}
	dump := read[struct {
		Entries *mountBody `xdr:"optional"`
	}](t, c.callXid(xids.Add(1), nfsc.MountProg, 2))
	if dump.Entries == nil || dump.Entries.Host != "127.0.0.1" {
		t.Fatalf("DUMP: %+v", dump.Entries)
	}
	c.callXid(xids.Add(1), nfsc.MountProg, 4) // UMNTALL
	dump = read[struct {
		Entries *mountBody `xdr:"optional"`
	}](t, c.callXid(xids.Add(1), nfsc.MountProg, 2))
	if dump.Entries != nil {
		t.Fatalf("DUMP after UMNTALL: %+v", dump.Entries)
	}

	for _, bad := range []nfs.Export{{Path: "rel"}, {Path: "/a/../b"}, {Path: "/", Clients: []string{"nonsense"}}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted it", bad)
		}
	}
}

// TestDuplicateRequests: a resent non-idempotent request (same xid, new
// connection) gets the first reply instead of failing.
func TestDuplicateRequests(t *testing.T) {
	f := New(t, 1)
	c, root := mountRoot(t, f, authSys(0, 0))
	const xid = 0x5eed
	args := []any{dirop(root, "once"), uint32(1), modeAttr(0o644)}
	first := c.callXid(xid, nfsc.Nfs3Prog, pCreate, args...)
	b1 := make([]byte, first.Len())
	first.Read(b1)
	c.reconnect() // the reply was lost; the client reconnects and resends
	again := c.callXid(xid, nfsc.Nfs3Prog, pCreate, args...)
	b2 := make([]byte, again.Len())
	again.Read(b2)
	if !bytes.Equal(b1, b2) || b1[3] != 0 {
		t.Fatalf("resent CREATE: reply %x, first %x", b2[:4], b1[:4])
	}
	// A new request (new xid) is run: GUARDED on an existing name fails.
	c.create(root, "once", 0o644, nfs3Exist)

	rm := []any{dirop(root, "once")}
	r1 := c.callXid(xid+1, nfsc.Nfs3Prog, pRemove, rm...)
	r2 := c.callXid(xid+1, nfsc.Nfs3Prog, pRemove, rm...)
	s1, s2 := read[uint32](t, r1), read[uint32](t, r2)
	if s1 != 0 || s2 != 0 {
		t.Fatalf("REMOVE and its resend: %d, %d", s1, s2)
	}
	if st, _ := c.call(pRemove, rm...); st != nfs3NoEnt {
		t.Fatalf("a new REMOVE of the removed name: %d", st)
	}
}

// TestExclusiveCreate: EXCLUSIVE keeps its verifier, so a resend with a
// new xid succeeds and a different verifier is refused.
func TestExclusiveCreate(t *testing.T) {
	f := New(t, 1)
	c, root := mountRoot(t, f, authSys(0, 0))
	v := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	st, rd := c.call(pCreate, dirop(root, "ex"), uint32(2), v)
	if st != 0 {
		t.Fatalf("EXCLUSIVE CREATE: %d", st)
	}
	fh := read[diropres](t, rd).FH.FH
	st, rd = c.call(pCreate, dirop(root, "ex"), uint32(2), v)
	if st != 0 || !bytes.Equal(read[diropres](t, rd).FH.FH, fh) {
		t.Fatalf("EXCLUSIVE CREATE resent with its verifier: %d", st)
	}
	if st, _ := c.call(pCreate, dirop(root, "ex"), uint32(2), [8]byte{9}); st != nfs3Exist {
		t.Fatalf("EXCLUSIVE CREATE with another verifier: %d", st)
	}
}

// TestReaddirPlusPages: a directory listed over many READDIRPLUS (and
// READDIR) replies gives every entry once, with attributes and handles;
// a cookie from another server (not remembered) resumes right.
func TestReaddirPlusPages(t *testing.T) {
	f := New(t, 1)
	c, root := mountRoot(t, f, authSys(0, 0))
	dir := c.mkdir(root, "many", 0o755)
	const n = 150
	for i := range n {
		c.create(dir, fmt.Sprintf("file-%03d", i), 0o644, nfs3Ok)
	}
	type entry struct {
		Fileid uint64
		Name   string
		Cookie uint64
		Attr   nfsc.PostOpAttr
		FH     nfsc.PostOpFH3
		Next   *entry `xdr:"optional"`
	}
	type reply struct {
		Attr    nfsc.PostOpAttr
		Verf    uint64
		Entries *entry `xdr:"optional"`
		EOF     bool
	}
	seen := map[string]bool{}
	var cookie uint64
	replies := 0
	for restart := false; ; {
		st, rd := c.call(pReaddirplus, dir, cookie, uint64(0), uint32(1024), uint32(4096))
		if st != 0 {
			t.Fatalf("READDIRPLUS: %d", st)
		}
		r := read[reply](t, rd)
		replies++
		for e := r.Entries; e != nil; e = e.Next {
			if seen[e.Name] {
				t.Fatalf("%s listed twice", e.Name)
			}
			seen[e.Name] = true
			if !e.Attr.IsSet || !e.FH.IsSet || e.Attr.Attr.Fileid != e.Fileid {
				t.Fatalf("entry %s without attributes or handle", e.Name)
			}
			cookie = e.Cookie
		}
		if r.EOF {
			break
		}
		if replies == 3 && !restart {
			// Continue on a new server: it has never seen the cookie.
			restart = true
			f.Start(1, nfs.Export{Path: "/", NoRootSquash: true})
			c = dialRaw(t, f.Addr, authSys(0, 0))
		}
	}
	if len(seen) != n+2 || !seen["."] || !seen[".."] || replies < 3 {
		t.Fatalf("READDIRPLUS listed %d entries in %d replies, want %d in several", len(seen), replies, n+2)
	}

	// READDIR too.
	type entry3 struct {
		Fileid uint64
		Name   string
		Cookie uint64
		Next   *entry3 `xdr:"optional"`
	}
	type reply3 struct {
		Attr    nfsc.PostOpAttr
		Verf    uint64
		Entries *entry3 `xdr:"optional"`
		EOF     bool
	}
	seen, cookie, replies = map[string]bool{}, 0, 0
	for {
		st, rd := c.call(pReaddir, dir, cookie, uint64(0), uint32(1024))
		if st != 0 {
			t.Fatalf("READDIR: %d", st)
		}
		r := read[reply3](t, rd)
		replies++
		for e := r.Entries; e != nil; e = e.Next {
			if seen[e.Name] {
				t.Fatalf("%s listed twice", e.Name)
			}
			seen[e.Name] = true
			cookie = e.Cookie
		}
		if r.EOF {
			break
		}
	}
	if len(seen) != n+2 || replies < 2 {
		t.Fatalf("READDIR listed %d entries in %d replies", len(seen), replies)
	}
}

// memDRC is a DRCStore in memory, shared by the gateways of a test as
// etcd is by a cluster's.
type memDRC struct {
	mu   sync.Mutex
	m    map[nfs.DRCKey][]byte
	puts int
}

func (d *memDRC) Put(_ context.Context, k nfs.DRCKey, reply []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.m[k] = bytes.Clone(reply)
	d.puts++
	return nil
}

func (d *memDRC) Get(_ context.Context, k nfs.DRCKey) ([]byte, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.m[k]
	return r, ok, nil
}

// TestDuplicateRequestsAcrossFailover: requests whose replies were lost
// when the address moved to another gateway (a new Server, its in-memory
// cache empty) are resent there with their xids, and get their first
// replies from the shared store: a GUARDED CREATE, MKDIR, SYMLINK, LINK,
// RENAME, REMOVE, RMDIR; without the store the same resends fail.
func TestDuplicateRequestsAcrossFailover(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			f := New(t, 1)
			store := &memDRC{m: map[nfs.DRCKey][]byte{}}
			if shared {
				f.DRC = store
				f.Start(2, nfs.Export{Path: "/", NoRootSquash: true})
			}
			c, root := mountRoot(t, f, authSys(0, 0))
			sub := c.mkdir(root, "sub", 0o755)
			file := c.create(root, "target", 0o644, nfs3Ok)
			c.create(root, "r1", 0o644, nfs3Ok)
			c.mkdir(root, "old", 0o755)
			xid := xids.Add(100)
			reqs := []struct {
				proc uint32
				args []any
			}{
				{pCreate, []any{dirop(root, "new"), uint32(1), modeAttr(0o644)}}, // GUARDED, as nfs-cp creates
				{pMkdir, []any{dirop(root, "dir"), modeAttr(0o755)}},
				{pSymlink, []any{dirop(root, "sym"), modeAttr(0o777), "target"}},
				{pLink, []any{file, dirop(sub, "hard")}},
				{pRename, []any{dirop(root, "r1"), dirop(sub, "moved")}},
				{pRemove, []any{dirop(root, "target")}},
				{pRmdir, []any{dirop(root, "old")}},
			}
			first := make([][]byte, len(reqs))
			for i, r := range reqs {
				rd := c.callXid(xid+uint32(i), nfsc.Nfs3Prog, r.proc, r.args...)
				first[i] = make([]byte, rd.Len())
				rd.Read(first[i])
				if st := binary.BigEndian.Uint32(first[i]); st != 0 {
					t.Fatalf("request %d (proc %d): status %d", i, r.proc, st)
				}
			}
			// The address moves: a new gateway, the client reconnects to it.
			f.Start(3, nfs.Export{Path: "/", NoRootSquash: true})
			c.addr = f.Addr
			c.reconnect()
			for i, r := range reqs {
				rd := c.callXid(xid+uint32(i), nfsc.Nfs3Prog, r.proc, r.args...)
				again := make([]byte, rd.Len())
				rd.Read(again)
				st := binary.BigEndian.Uint32(again)
				if shared && !bytes.Equal(again, first[i]) {
					t.Errorf("resent request %d (proc %d) after the failover: status %d, not the first reply", i, r.proc, st)
				}
				if !shared && st == 0 {
					t.Errorf("resent request %d (proc %d) without the shared cache succeeded: the test shows nothing", i, r.proc)
				}
			}
			if shared && store.puts != len(reqs)+4 {
				t.Errorf("%d replies recorded, want %d (the successes only)", store.puts, len(reqs)+4)
			}
		})
	}
}
