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
// thousands of buffered 4 KiB random writes (client/before-commit=3*crash,
// normally during the fsync that writes them out), after an earlier batch
// of random writes was fsynced through another mount, and checks, through
// a third mount, that every stripe of the file holds what the
// acknowledged fsync made durable with a prefix, in order, of the writes
// the crashed mount made to it applied: none if its write-out did not
// commit, all if the fsync's did, a prefix if the mount wrote the stripe
// out earlier — never a mix, never less than the synced data. The
// crashing mount buffers the random writes in sparse stripes, so each
// stripe's write-out carries hundreds of them, and does nothing but this
// batch and its fsync, so the hits of client/before-commit it counts are
// its write-outs only.
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
	type write struct {
		off int
		p   []byte
	}
	// randomWrites makes the random 4 KiB writes through fh, in order,
	// and returns those acknowledged: all of them, or those before the
	// first that failed, and its error.
	randomWrites := func(fh *os.File) ([]write, error) {
		var made []write
		for i := range writes {
			w := write{rng.IntN(size/page) * page, randBytes(rng.Uint64(), page)}
			if _, err := fh.WriteAt(w.p, int64(w.off)); err != nil {
				return made, fmt.Errorf("random write %d at %d: %w", i, w.off, err)
			}
			made = append(made, w)
		}
		return made, nil
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
	made, err := randomWrites(fh)
	if err != nil {
		t.Fatalf("%v%s", err, jobs())
	}
	for _, w := range made {
		copy(synced[w.off:], w.p)
	}
	must(t, fh.Sync()) // acknowledged: every byte of synced is durable
	must(t, fh.Close())

	// The crash: the mount dies before its 3rd stripe commit, normally
	// within the last fsync. A write-out may also start before it (the
	// mount may write buffered stripes out whenever it likes), so the
	// crash may come while the writes are still being made: the writes
	// from the failed one on were never acknowledged.
	m := c.StartMount(filepath.Join(t.TempDir(), "crash"), nil, "WEFT_FAILPOINTS=client/before-commit=3*crash")
	out := func() string { return "\nthe crashing mount's output:\n" + m.Output() + jobs() }
	fh, err = os.OpenFile(filepath.Join(m.Dir, rel), os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("%v%s", err, out())
	}
	defer fh.Close()
	made, err = randomWrites(fh)
	if err == nil && fh.Sync() == nil {
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
	// Each stripe holds the synced data with the first k of the writes
	// made to it applied, in order, for some k: a write-out commits what
	// was buffered when it began, whole or not at all.
	var old, fresh, partial int
	for s := range stripes {
		lo, hi := s*stripe, (s+1)*stripe
		state := bytes.Clone(synced[lo:hi])
		var mine []write
		for _, w := range made {
			if w.off >= lo && w.off < hi {
				mine = append(mine, w)
			}
		}
		k := -1
		if bytes.Equal(got[lo:hi], state) {
			k = 0
		}
		for i, w := range mine {
			copy(state[w.off-lo:], w.p)
			if bytes.Equal(got[lo:hi], state) {
				k = i + 1
			}
		}
		switch {
		case k < 0:
			t.Errorf("stripe %d is not the synced data with any prefix of its %d writes applied (%s)", s, len(mine), describeMix(got[lo:hi], synced[lo:hi], state))
		case k == 0:
			old++
		case k == len(mine):
			fresh++
		default:
			partial++
		}
	}
	t.Logf("after the crash (%d of %d writes made): %d stripes as synced, %d with all their writes, %d with a prefix of them", len(made), writes, old, fresh, partial)
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
