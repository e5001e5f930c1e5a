package nfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	nfsc "github.com/willscott/go-nfs-client/nfs"

	"github.com/weftfs/weft/internal/vfs"
)

func TestHandleRoundTrip(t *testing.T) {
	for _, c := range []struct{ lin, root vfs.LIN }{{1, 1}, {42, 7}, {1<<64 - 1, 1 << 40}} {
		b := encodeHandle(c.lin, c.root)
		if len(b) != handleLen || b[0] != handleV1 {
			t.Fatalf("handle %x", b)
		}
		lin, root, err := decodeHandle(b)
		if err != nil || lin != c.lin || root != c.root {
			t.Fatalf("decode(encode(%d, %d)) = %d, %d, %v", c.lin, c.root, lin, root, err)
		}
	}
	good := encodeHandle(5, 1)
	for name, b := range map[string][]byte{
		"empty":         nil,
		"short":         good[:16],
		"long":          append(append([]byte{}, good...), 0),
		"other version": append([]byte{2}, good[1:]...),
		"LIN 0":         encodeHandle(0, 1),
		"export 0":      encodeHandle(5, 0),
	} {
		if _, _, err := decodeHandle(b); !errors.Is(err, errBadHandle) {
			t.Errorf("%s handle: %v, want errBadHandle", name, err)
		}
	}
}

// TestStatusOf: every error class of statusTable maps to its status when
// wrapped (no entry shadows another); the statuses clients act on —
// ENOENT, JUKEBOX for what is worth a retry, IO for what is not known,
// STALE for a handle's vanished inode — are what they must be; a status
// error passes through.
func TestStatusOf(t *testing.T) {
	for _, e := range statusTable {
		if got := statusOf(fmt.Errorf("op: %w", e.err)); got != e.status {
			t.Errorf("statusOf(wrapped %v) = %d, want %d (an earlier entry shadows it?)", e.err, got, e.status)
		}
	}
	for _, c := range []struct {
		err  error
		want uint32
	}{
		{nil, nfsc.NFS3Ok},
		{vfs.ErrNotFound, nfsc.NFS3ErrNoEnt},
		{vfs.ErrUnavailable, nfs3ErrJukebox},
		{vfs.ErrBusy, nfs3ErrJukebox},
		{context.Canceled, nfs3ErrJukebox},
		{errors.New("a corrupt record"), nfsc.NFS3ErrIO},
		{statusError(nfsc.NFS3ErrStale), nfsc.NFS3ErrStale},
		{fmt.Errorf("x: %w", statusError(nfsc.NFS3ErrROFS)), nfsc.NFS3ErrROFS},
		{stale(vfs.ErrNotFound), nfsc.NFS3ErrStale},
	} {
		if got := statusOf(c.err); got != c.want {
			t.Errorf("statusOf(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

func TestExportValidate(t *testing.T) {
	for _, c := range []struct {
		e  Export
		ok bool
	}{
		{Export{Path: "/"}, true},
		{Export{Path: "/a/b", Clients: []string{"10.0.0.1", "10.1.0.0/16", "::1", "fd00::/8"}}, true},
		{Export{Path: ""}, false},
		{Export{Path: "a"}, false},
		{Export{Path: "/a/"}, false},
		{Export{Path: "/a//b"}, false},
		{Export{Path: "/a", Clients: []string{"10.0.0.300"}}, false},
		{Export{Path: "/a", Clients: []string{"host.example"}}, false},
		{Export{Path: "/a", Clients: []string{"10.0.0.0/33"}}, false},
	} {
		if err := c.e.Validate(); (err == nil) != c.ok {
			t.Errorf("Validate(%+v) = %v", c.e, err)
		}
	}
}

func TestExportClientsAndSquash(t *testing.T) {
	x, err := newExport(Export{Path: "/", Clients: []string{"10.0.0.5", "192.168.0.0/16"}})
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{
		"10.0.0.5": true, "10.0.0.6": false, "192.168.7.9": true, "::ffff:192.168.1.1": true, "127.0.0.1": false,
	} {
		if got := x.allows(netip.MustParseAddr(addr)); got != want {
			t.Errorf("allows(%s) = %v", addr, got)
		}
	}
	any, _ := newExport(Export{Path: "/"})
	if !any.allows(netip.MustParseAddr("203.0.113.9")) {
		t.Error("an export without clients refuses a client")
	}

	root := vfs.Caller{UID: 0, GID: 0, Groups: []uint32{0, 5}}
	if c := x.caller(root, false); c.UID != 65534 || c.GID != 65534 || c.Groups[0] != 65534 || c.Groups[1] != 5 {
		t.Errorf("root squashed: %+v", c)
	}
	if c := x.caller(vfs.Caller{UID: 1000, GID: 1000}, false); c.UID != 1000 || c.GID != 1000 {
		t.Errorf("a user squashed: %+v", c)
	}
	if c := x.caller(vfs.Caller{UID: 1000, GID: 1000}, true); c.UID != 65534 {
		t.Errorf("AUTH_NONE: %+v", c)
	}
	nrs, _ := newExport(Export{Path: "/", NoRootSquash: true, AnonUID: 7, AnonGID: 8})
	if c := nrs.caller(vfs.Caller{}, false); c.UID != 0 || c.GID != 0 {
		t.Errorf("root with NoRootSquash: %+v", c)
	}
	if c := nrs.caller(vfs.Caller{}, true); c.UID != 7 || c.GID != 8 {
		t.Errorf("AUTH_NONE with AnonUID 7: %+v", c)
	}
}

func TestDRC(t *testing.T) {
	d := newDRC()
	now := time.Now()
	k := drcKey{ip: netip.MustParseAddr("10.0.0.1"), xid: 9, prog: progNFS, proc: 8, sum: 1}
	if r, busy := d.start(k, now); r != nil || busy {
		t.Fatal("a new request found in the cache")
	}
	if _, busy := d.start(k, now); !busy {
		t.Fatal("a resend during the first run is not reported in progress")
	}
	d.finish(k, []byte("reply"))
	if r, _ := d.start(k, now.Add(time.Minute)); string(r) != "reply" {
		t.Fatalf("resend got %q", r)
	}
	other := k
	other.sum = 2 // same xid, other arguments: another client's request
	if r, busy := d.start(other, now); r != nil || busy {
		t.Fatal("a request with other arguments hit the cache")
	}
	if r, busy := d.start(k, now.Add(drcTTL+time.Second)); r != nil || busy {
		t.Fatal("an expired entry was replayed")
	}
	// Bounded.
	for i := range drcEntries + 100 {
		kk := drcKey{xid: uint32(1000 + i)}
		d.start(kk, now)
		d.finish(kk, []byte{1})
	}
	if len(d.m) > drcEntries+1 {
		t.Fatalf("the cache holds %d entries", len(d.m))
	}
}

func TestDevNumbers(t *testing.T) {
	for _, c := range []struct{ maj, min uint32 }{{0, 0}, {8, 1}, {259, 3}, {4095, 1 << 19}} {
		d := mkdev(c.maj, c.min)
		if major(d) != c.maj || minor(d) != c.min {
			t.Errorf("mkdev(%d, %d) = %#x -> %d, %d", c.maj, c.min, d, major(d), minor(d))
		}
	}
}

// TestFaultLogged: a fault (an error of no class) answered NFS3ERR_IO is
// logged with the procedure and its cause; a classified error is not,
// even one whose status is NFS3ERR_IO too.
func TestFaultLogged(t *testing.T) {
	var buf bytes.Buffer
	r := &request{s: &Server{faults: vfs.FaultLog{Log: slog.New(slog.NewTextHandler(&buf, nil))}}, proc: &procedure{name: "WRITE"}}
	for _, err := range []error{fmt.Errorf("x: %w", vfs.ErrNotFound), fmt.Errorf("x: %w", vfs.ErrNoXattr)} {
		r.statusOf(err)
	}
	if buf.Len() != 0 {
		t.Fatalf("classified errors logged: %q", buf.String())
	}
	if st := r.statusOf(errors.New("block: drive d3 unreachable")); st != nfsc.NFS3ErrIO {
		t.Fatalf("status %d, want NFS3ERR_IO", st)
	}
	if out := buf.String(); !strings.Contains(out, "op=WRITE") || !strings.Contains(out, "d3 unreachable") {
		t.Fatalf("fault logged as %q, want the procedure and the cause", out)
	}
}
