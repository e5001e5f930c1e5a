package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestThroughputDir runs the phases on a local directory, as on a FUSE mount.
func TestThroughputDir(t *testing.T) {
	dir := t.TempDir()
	r, err := Throughput(context.Background(), Dir{Path: dir}, ThroughputOptions{Jobs: 2, Size: 256 << 10, Record: 64 << 10, Block: 4096, Ops: 10})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := r.Phase("seqread"); !ok || p.Ops != 8 || p.Bytes != 512<<10 {
		t.Fatalf("seqread %+v", p)
	}
	if p, ok := r.Phase("randwrite"); !ok || p.Ops != 20 {
		t.Fatalf("randwrite %+v", p)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}

// TestCheck: a block of another file or offset, or zeros, fails the check.
func TestCheck(t *testing.T) {
	fill := pattern()
	buf := make([]byte, 3*stamp)
	fill(buf, 2, 8192)
	if err := check(buf, 2, 8192, "f"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file int
		off  int64
	}{{1, 8192}, {2, 4096}} {
		if err := check(buf, c.file, c.off, "f"); err == nil || !strings.Contains(err.Error(), "wrong data") {
			t.Errorf("check as file %d offset %d: %v", c.file, c.off, err)
		}
	}
	clear(buf[stamp : 2*stamp])
	if err := check(buf, 2, 8192, "f"); err == nil || !strings.Contains(err.Error(), "at 12288") {
		t.Errorf("a zeroed second block: %v", err)
	}
}

func TestThroughputOptionsCheck(t *testing.T) {
	ok := ThroughputOptions{Jobs: 1, Size: 1 << 20, Record: 1 << 20, Block: 4096, Ops: 1}
	for _, c := range []struct {
		mod  func(*ThroughputOptions)
		want string
	}{
		{func(o *ThroughputOptions) { o.Jobs = 0 }, "jobs 0"},
		{func(o *ThroughputOptions) { o.Record = 1000 }, "record size 1000"},
		{func(o *ThroughputOptions) { o.Block = 512 }, "block size 512"},
		{func(o *ThroughputOptions) { o.Size = 1<<20 + 4096 }, "file size"},
		{func(o *ThroughputOptions) { o.Ops = 0 }, "runtime or an operation count"},
		{func(o *ThroughputOptions) { o.Tests = []string{"seqwrite", "mixed"} }, `test "mixed"`},
	} {
		o := ok
		c.mod(&o)
		if err := o.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", o, err, c.want)
		}
	}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	if _, err := (Dir{Path: filepath.Join(t.TempDir(), "none")}).Session(context.Background()); err == nil {
		t.Fatal("a session on a missing directory")
	}
}
