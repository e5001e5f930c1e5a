package meta

import (
	"fmt"
	"maps"
	"testing"

	"github.com/weftfs/weft/internal/failpoint"
	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/memkv"
)

// The usage check: a consistent namespace (files in two pools, with
// stripes, truncated and unlinked ones) has no finding; usage updates
// skipped by meta/create-no-usage and a counter written wrong are found
// per pool, with exactly what the counters lack; a dry run changes
// nothing; a client write between the check and the repair is not
// "repaired" (the counters end exact); a finding applied once is not
// applied again; a second check finds nothing.
func TestFsckUsage(t *testing.T) {
	m := newMeta(t, memkv.New(kv.Options{Limits: etcdDefaultLimits}))
	d := must(m.Mkdir(bg, RootLIN, "d", 0o755))
	for i, pool := range []string{"p0", "p0", "p1"} {
		f := must(m.Create(bg, d.LIN, "f"+string(rune('a'+i)), NewInode{Mode: 0o644, Pool: pool}))
		must(m.CommitStripe(bg, f.LIN, stripe(0, 1, byte(i+1)), 0, CommitOptions{StripeSize: 1024, Size: 100}))
		must(m.CommitStripe(bg, f.LIN, stripe(1, 3, byte(i+1)), 0, CommitOptions{StripeSize: 1024, Size: 1124}))
	}
	g := must(m.Create(bg, d.LIN, "gone", NewInode{Mode: 0o644}))
	must(m.CommitStripe(bg, g.LIN, stripe(0, 1, 9), 0, CommitOptions{StripeSize: 1024, Size: 100}))
	ok(t, m.Unlink(bg, d.LIN, "gone"))
	clean := func() FsckUsageResult {
		t.Helper()
		r := must(m.FsckUsage(bg))
		if len(r.Findings) != 0 || r.Disagree != 0 {
			t.Fatalf("usage findings in a consistent namespace: %+v", r)
		}
		st := must(m.StatFS(bg))
		for pool, u := range r.Counted {
			if st.Pools[pool] != u {
				t.Fatalf("pool %s: counted %+v, StatFS %+v", pool, u, st.Pools[pool])
			}
		}
		return r
	}
	r := clean()
	if r.Stripes != 6 || r.Counted["p1"] != (Usage{Inodes: 1, Bytes: 1124, Allocated: 400}) {
		t.Fatalf("counted %+v", r)
	}

	ok(t, failpoint.Enable("meta/create-no-usage", "3*error"))
	must(m.Create(bg, d.LIN, "s1", NewInode{Mode: 0o644}))
	must(m.Create(bg, d.LIN, "s2", NewInode{Mode: 0o644}))
	must(m.Create(bg, d.LIN, "s3", NewInode{Mode: 0o644, Pool: "p1"}))
	failpoint.Disable("meta/create-no-usage")
	// A counter written wrong: shard 7 gets 777 bytes allocated in p1
	// that nothing holds. The shard keeps what it had (the meta's
	// operations pick shards from a random base, so it may hold deltas).
	ok(t, m.store.Update(bg, func(tx kv.Tx) error {
		b, err := tx.Get(keyUsage(7))
		if err != nil {
			return err
		}
		sh, err := decodeUsage(keyUsage(7), b)
		if err != nil {
			return err
		}
		u := sh["p1"]
		u.Allocated += 777
		sh["p1"] = u
		tx.Put(keyUsage(7), encodeUsage(sh))
		return nil
	}))
	r = must(m.FsckUsage(bg))
	if len(r.Findings) != 2 {
		t.Fatalf("findings %+v", r.Findings)
	}
	p0, p1 := r.Findings[0], r.Findings[1]
	if p0.Kind != FsckUsageCounter || p0.Pool != "p0" || p0.Delta != (Usage{Inodes: 2}) ||
		p1.Pool != "p1" || p1.Delta != (Usage{Inodes: 1, Allocated: -777}) {
		t.Fatalf("findings %+v", r.Findings)
	}
	if again := must(m.FsckUsage(bg)); len(again.Findings) != 2 {
		t.Fatalf("a check changed something: %+v", again.Findings)
	}

	// A client's create and write between the check and the repair.
	f := must(m.Create(bg, d.LIN, "late", NewInode{Mode: 0o644}))
	must(m.CommitStripe(bg, f.LIN, stripe(0, 5, 7), 0, CommitOptions{StripeSize: 1024, Size: 100}))
	for _, fd := range r.Findings {
		if !must(m.FsckRepair(bg, fd)) {
			t.Fatalf("repair of %s: changed meanwhile", fd)
		}
		if must(m.FsckRepair(bg, fd)) {
			t.Fatalf("the same finding repaired twice: %s", fd)
		}
	}
	clean()
	if _, err := m.FsckRepairUsage(bg, FsckFinding{Kind: FsckUsageCounter, Pool: "p0"}); err == nil {
		t.Fatal("a finding with nothing to add was accepted")
	}
	if _, err := m.FsckRepair(bg, FsckFinding{Kind: FsckMissingUnit}); err == nil {
		t.Fatal("meta repaired a missing unit")
	}
}

// TestFsckUsagePages: the usage check reads the inodes and the stripe
// maps a page at a time, each stripe read ending where the inodes read
// so far end: over more than a page of files with stripes (and a file
// of more than a page of stripes), every map is counted once, and the
// counts agree with the counters.
func TestFsckUsagePages(t *testing.T) {
	m := newMeta(t, memkv.New(kv.Options{Limits: etcdDefaultLimits}))
	d := must(m.Mkdir(bg, RootLIN, "d", 0o755))
	const files = fsckScanPage + 300
	for i := range files {
		f := must(m.Create(bg, d.LIN, fmt.Sprintf("f%05d", i), NewInode{Mode: 0o644}))
		must(m.CommitStripe(bg, f.LIN, stripe(0, 1, byte(i)), 0, CommitOptions{StripeSize: 1024, Size: 100}))
		if i == 7 {
			for s := uint64(1); s <= fsckScanPage+10; s++ {
				must(m.CommitStripe(bg, f.LIN, stripe(s, 1, byte(s)), 0, CommitOptions{StripeSize: 1024, Size: 100 + s*1024}))
			}
		}
	}
	r := must(m.FsckUsage(bg))
	if len(r.Findings) != 0 || r.Disagree != 0 {
		t.Fatalf("usage findings in a consistent namespace: %+v", r)
	}
	if want := files + fsckScanPage + 10; r.Stripes != want {
		t.Fatalf("%d stripe maps counted, want %d", r.Stripes, want)
	}
	if st := must(m.StatFS(bg)); len(r.Counted) != 1 || !maps.Equal(st.Pools, r.Counted) {
		t.Fatalf("counted %+v, StatFS %+v", r.Counted, st.Pools)
	}
}
