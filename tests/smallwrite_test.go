package tests

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/weftfs/weft/tests/harness"
)

// TestSmallWritesCrash kills a mount in the middle of writing out
// thousands of buffered 4 KiB random writes (client/before-commit=3*crash
// fires during the fsync that writes them out), after an earlier batch
// of random writes was fsynced through another mount, and checks, through
// a third mount, that every stripe of the file holds either what the
// acknowledged fsync made durable or the whole of what the crashed mount
// had buffered for it — never a mix, never less than the synced data.
// The crashing mount buffers the random writes in sparse stripes (no
// write-out before the fsync: MaxDirty holds them all, and no stripe is
// ever complete), so each stripe's write-out carries hundreds of them.
//
// The crashing mount does nothing but the last batch and its fsync, so
// the hits of client/before-commit it counts are that fsync's write-outs
// only (a commit that loses its compare-and-swap to a repair and is
// retried hits it again, which only moves the crash to another stripe).
func TestSmallWritesCrash(t *testing.T) {
	t.Parallel()
	c := harness.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 2, Mount: true})
	c.KeepLogs()
	const (
		stripe  = 4 * unit // ec:4+2 with the default unit
		stripes = 6
		size    = stripes * stripe
		page    = 4 << 10
		writes  = 2000
	)
	rel := "smallwrites"
	rng := rand.New(rand.NewPCG(5, 5))
	randomWrites := func(fh *os.File, ref []byte, out func() string) {
		for i := range writes {
			off := rng.IntN(size/page) * page
			p := randBytes(rng.Uint64(), page)
			if _, err := fh.WriteAt(p, int64(off)); err != nil {
				t.Fatalf("random write %d at %d: %v%s", i, off, err, out())
			}
			copy(ref[off:], p)
		}
	}
	jobs := func() string {
		out, _ := c.Weft("job", "list", "--all")
		return "\nthe cluster's jobs:\n" + out
	}

	// The synced state, through the cluster's own mount.
	synced := randBytes(1, size)
	fh, err := os.OpenFile(filepath.Join(c.Mount, rel), os.O_CREATE|os.O_RDWR, 0o644)
	must(t, err)
	if _, err := fh.WriteAt(synced, 0); err != nil {
		t.Fatal(err)
	}
	must(t, fh.Sync())
	randomWrites(fh, synced, jobs)
	must(t, fh.Sync()) // acknowledged: every byte of synced is durable
	must(t, fh.Close())

	// The crash: the 3rd write-out of the last fsync dies before its commit.
	m := c.StartMount(filepath.Join(t.TempDir(), "crash"), nil, "WEFT_FAILPOINTS=client/before-commit=3*crash")
	out := func() string { return "\nthe crashing mount's output:\n" + m.Output() + jobs() }
	fh, err = os.OpenFile(filepath.Join(m.Dir, rel), os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("%v%s", err, out())
	}
	defer fh.Close()
	buffered := bytes.Clone(synced)
	randomWrites(fh, buffered, out)
	if err := fh.Sync(); err == nil {
		t.Fatalf("the last fsync was acknowledged: client/before-commit=3*crash did not fire%s", out())
	}
	select {
	case <-m.Done():
	case <-time.After(time.Minute):
		t.Fatalf("the mount did not die at client/before-commit%s", out())
	}
	if !m.Killed() {
		t.Fatalf("the mount exited without the crash%s", out())
	}

	// Read back through a mount that has cached nothing of the file.
	check := filepath.Join(t.TempDir(), "check")
	c.MountAt(check)
	got, err := os.ReadFile(filepath.Join(check, rel))
	must(t, err)
	if len(got) != size {
		t.Fatalf("%s after the crash: %d bytes, want %d", rel, len(got), size)
	}
	var old, fresh int
	for s := range stripes {
		lo, hi := s*stripe, (s+1)*stripe
		switch {
		case bytes.Equal(got[lo:hi], synced[lo:hi]):
			old++
		case bytes.Equal(got[lo:hi], buffered[lo:hi]):
			fresh++
		default:
			t.Errorf("stripe %d is neither the synced data nor the buffered writes (%s)", s, describeMix(got[lo:hi], synced[lo:hi], buffered[lo:hi]))
		}
	}
	t.Logf("after the crash: %d stripes as synced, %d with the unsynced writes", old, fresh)
	if old == 0 {
		t.Errorf("every stripe was written out before the crash: the failpoint fired too late to test anything")
	}
	if t.Failed() {
		t.Log(out())
	}
}

// describeMix says how many 4 KiB pages of a stripe read back as synced,
// as buffered, as both (the writes left them equal) or as neither.
func describeMix(got, synced, buffered []byte) string {
	const page = 4 << 10
	var sy, bu, both, none int
	for lo := 0; lo < len(got); lo += page {
		hi := min(lo+page, len(got))
		s, b := bytes.Equal(got[lo:hi], synced[lo:hi]), bytes.Equal(got[lo:hi], buffered[lo:hi])
		switch {
		case s && b:
			both++
		case s:
			sy++
		case b:
			bu++
		default:
			none++
		}
	}
	return fmt.Sprintf("pages: %d as synced, %d as buffered, %d either, %d neither", sy, bu, both, none)
}
