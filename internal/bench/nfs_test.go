package bench

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/gateway/nfs"
	"github.com/weftfs/weft/internal/gateway/nfs/nfstest"
	"github.com/weftfs/weft/internal/vfs"
)

// nfsTarget is the fixture's gateway as a target, as root.
func nfsTarget(f *nfstest.Fixture) *NFS {
	return &NFS{Host: "127.0.0.1", NFSPort: f.Port, MountPort: f.Port, Export: "/"}
}

// rootEntries lists the names in the fixture's root directory.
func rootEntries(t *testing.T, f *nfstest.Fixture) []string {
	t.Helper()
	ents, _, err := f.FS.ReadDir(context.Background(), vfs.RootLIN, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if e.Name != "." && e.Name != ".." {
			names = append(names, e.Name)
		}
	}
	return names
}

// TestNFSFile writes through one session (UNSTABLE WRITEs larger than the
// gateway's wtmax, split; COMMIT), reads through vfs and another session,
// and checks Stat, EOF, Remove and the errors of a missing file.
func TestNFSFile(t *testing.T) {
	f := nfstest.New(t, 1)
	ctx := context.Background()
	tg := nfsTarget(f)
	s, err := tg.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Mkdir("d"); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 3<<20+4096) // more than 3 WRITEs of wtmax (1 MiB)
	fill := pattern()
	fill(data, 7, 0)
	w, err := s.Create("d/f")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.WriteAt(data, 0); err != nil || n != len(data) {
		t.Fatalf("WriteAt: %d, %v", n, err)
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create("d/f"); err == nil || !strings.Contains(err.Error(), "CREATE d/f") {
		t.Fatalf("a second exclusive create: %v, want an error naming CREATE d/f", err)
	}

	// What vfs holds.
	d, err := f.FS.Lookup(ctx, vfs.RootLIN, "d")
	if err != nil {
		t.Fatal(err)
	}
	a, err := f.FS.Lookup(ctx, d.LIN, "f")
	if err != nil {
		t.Fatal(err)
	}
	h, err := f.FS.Open(ctx, a.LIN, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if n, _ := h.Read(ctx, got, 0); n != len(data) || !bytes.Equal(got, data) {
		t.Fatalf("vfs reads %d bytes, equal %v", n, bytes.Equal(got, data))
	}
	_ = f.FS.Release(ctx, h.ID)

	// Another session: Stat, a read across the READ size, a read at EOF.
	s2, err := tg.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if size, err := s2.Stat("d/f"); err != nil || size != int64(len(data)) {
		t.Fatalf("Stat: %d, %v; want %d", size, err, len(data))
	}
	r, err := s2.Open("d/f")
	if err != nil {
		t.Fatal(err)
	}
	clear(got)
	if n, err := r.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadAt: %d, %v, equal %v", n, err, bytes.Equal(got, data))
	}
	if err := check(got[1<<20:], 7, 1<<20, "d/f"); err != nil {
		t.Fatal(err)
	}
	if err := check(got[1<<20:], 7, 0, "d/f"); err == nil {
		t.Fatal("check passes a block read from another offset")
	}
	if n, err := r.ReadAt(make([]byte, 8192), int64(len(data))-4096); n != 4096 || !errors.Is(err, io.EOF) {
		t.Fatalf("a read past the end: %d, %v; want 4096, EOF", n, err)
	}
	if err := s2.Remove("d/f"); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Stat("d/f"); err == nil || !strings.Contains(err.Error(), "LOOKUP d/f") {
		t.Fatalf("Stat of a removed file: %v", err)
	}
	if err := s2.Rmdir("d"); err != nil {
		t.Fatal(err)
	}
	if names := rootEntries(t, f); len(names) != 0 {
		t.Fatalf("left in /: %v", names)
	}
}

// TestThroughputNFS runs every phase through the gateway with three connections
// and checks the counts, the figures and that nothing is left behind.
func TestThroughputNFS(t *testing.T) {
	f := nfstest.New(t, 1)
	o := ThroughputOptions{Jobs: 3, Size: 2 << 20, Record: 1 << 20, Block: 4096, Ops: 25}
	r, err := Throughput(context.Background(), nfsTarget(f), o)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int64{ // ops, bytes
		"seqwrite": {6, 6 << 20}, "seqread": {6, 6 << 20}, "randread": {75, 75 * 4096}, "randwrite": {75, 75 * 4096},
	}
	if len(r.Phases) != len(want) {
		t.Fatalf("phases %+v", r.Phases)
	}
	for _, p := range r.Phases {
		w := want[p.Test]
		if p.Ops != w[0] || p.Bytes != w[1] || p.Seconds <= 0 || p.MBps <= 0 || p.IOPS <= 0 {
			t.Errorf("%s: %+v, want %d ops, %d bytes and positive rates", p.Test, p, w[0], w[1])
		}
	}
	if names := rootEntries(t, f); len(names) != 0 {
		t.Fatalf("left in /: %v", names)
	}

	// Tests picks the phases reported; Runtime bounds the random ones.
	o = ThroughputOptions{Jobs: 1, Size: 1 << 20, Record: 1 << 20, Block: 8192, Runtime: 200 * time.Millisecond, Tests: []string{"randwrite"}}
	start := time.Now()
	r, err = Throughput(context.Background(), nfsTarget(f), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Phases) != 1 || r.Phases[0].Test != "randwrite" || r.Phases[0].Ops == 0 || time.Since(start) > 30*time.Second {
		t.Fatalf("phases %+v after %s", r.Phases, time.Since(start))
	}
}

// TestMetaNFS creates, looks up and removes files through the gateway from
// several connections.
func TestMetaNFS(t *testing.T) {
	f := nfstest.New(t, 1)
	r, err := Meta(context.Background(), nfsTarget(f), 40, 3)
	if err != nil {
		t.Fatal(err)
	}
	if r.Files != 40 || r.Jobs != 3 || r.CreatePS <= 0 || r.StatPS <= 0 || r.RemovePS <= 0 {
		t.Fatalf("%+v", r)
	}
	if names := rootEntries(t, f); len(names) != 0 {
		t.Fatalf("left in /: %v", names)
	}
}

// TestNFSSquashed: as root on a root-squashed export, the run stops with
// an error saying what to do, and a missing export is named.
func TestNFSSquashed(t *testing.T) {
	f := nfstest.New(t, 1, nfs.Export{Path: "/"})
	_, err := Throughput(context.Background(), nfsTarget(f), ThroughputOptions{Jobs: 1, Size: 1 << 20, Record: 1 << 20, Block: 4096, Ops: 1})
	if err == nil || !strings.Contains(err.Error(), "MKDIR") || !strings.Contains(err.Error(), "--no-root-squash") {
		t.Fatalf("Throughput as squashed root: %v", err)
	}
	tg := nfsTarget(f)
	tg.Export = "/nonesuch"
	if _, err := tg.Session(context.Background()); err == nil || !strings.Contains(err.Error(), "MOUNT /nonesuch") {
		t.Fatalf("a missing export: %v", err)
	}
}

func TestParseNFSURL(t *testing.T) {
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	for _, c := range []struct {
		url  string
		want NFS
		err  string
	}{
		{url: "nfs://127.0.0.1/?nfsport=15449&mountport=15449&version=3&auto-traverse-mounts=0",
			want: NFS{Host: "127.0.0.1", NFSPort: 15449, MountPort: 15449, Export: "/", UID: uid, GID: gid}},
		{url: "nfs://10.0.0.5:2050/projects?uid=1000&gid=100",
			want: NFS{Host: "10.0.0.5", NFSPort: 2050, MountPort: 2050, Export: "/projects", UID: 1000, GID: 100}},
		{url: "nfs://host", want: NFS{Host: "host", NFSPort: 2049, MountPort: 2049, Export: "/", UID: uid, GID: gid}},
		{url: "nfs://h/?nfsport=1&mountport=2", want: NFS{Host: "h", NFSPort: 1, MountPort: 2, Export: "/", UID: uid, GID: gid}},
		{url: "nfs://[::1]:2050/a/b", want: NFS{Host: "::1", NFSPort: 2050, MountPort: 2050, Export: "/a/b", UID: uid, GID: gid}},
		{url: "nfs://h/?version=4", err: `version "4"`},
		{url: "nfs://h/?nfsport=70000", err: `nfsport "70000" is not a port`},
		{url: "nfs://h/?uid=x", err: `uid "x" is not a number`},
		{url: "nfs://h/?readahead=1", err: `unknown parameter "readahead"`},
		{url: "nfs:///x", err: "with a host"},
	} {
		got, err := ParseNFSURL(c.url)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), c.url) {
				t.Errorf("%s: %v, want an error naming the URL and %q", c.url, err, c.err)
			}
			continue
		}
		if err != nil || *got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.url, got, err, c.want)
			continue
		}
		if again, err := ParseNFSURL(got.String()); err != nil || again.Host != got.Host || again.Export != got.Export ||
			again.NFSPort != got.NFSPort || again.MountPort != got.MountPort {
			t.Errorf("%s: String %s parses as %+v, %v", c.url, got.String(), again, err)
		}
	}
	if _, err := ParseTarget("http://x/", false); err == nil {
		t.Error("ParseTarget takes an http URL")
	}
}
