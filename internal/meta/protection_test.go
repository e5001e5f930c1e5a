package meta

import (
	"fmt"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/kv"
)

// TestProtection runs the protection index and lost-data list tests on
// every backend, on a clock the tests move.
func TestProtection(t *testing.T) {
	tests := []struct {
		name string
		fn   func(t *testing.T, m *Meta, clock *time.Time)
	}{
		{"Index", testProtectionIndex},
		{"IndexPages", testProtectionIndexPages},
		{"SetStripeTolerance", testSetStripeTolerance},
		{"IndexGoesWithStripes", testIndexGoesWithStripes},
		{"Lost", testLost},
		{"Path", func(t *testing.T, m *Meta, _ *time.Time) { testPath(t, m) }},
	}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					clock := time.Unix(1_700_000_000, 0)
					m := newMetaClock(t, b.newStore(t), &clock)
					tc.fn(t, m, &clock)
					check(t, m)
				})
			}
		})
	}
}

// newMetaClock is newMeta on the clock *clock.
func newMetaClock(tb testing.TB, store kv.Store, clock *time.Time) *Meta {
	tb.Helper()
	ok(tb, Format(bg, store, FormatOptions{Pool: "p0"}))
	cfg := Config{Store: store, LINBatch: 64, Now: func() time.Time { return *clock }}
	if w, isWB := store.(writeBackStore); isWB {
		cfg.Store, cfg.Session, cfg.WriteBack = w.Store, testSession, true
	}
	m := must(Open(bg, cfg))
	tb.Cleanup(func() { ok(tb, m.Close(bg)) })
	return m
}

// Tolerances of the tests: ec:4+2 over 3 nodes can survive a node; on two
// nodes (3 units each) it survives none.
var (
	atTarget = StripeTolerance{Achieved: Tolerance{2, 1}, Target: Tolerance{2, 1}}
	twoNodes = StripeTolerance{Achieved: Tolerance{2, 0}, Target: Tolerance{2, 1}}
	oneDrive = StripeTolerance{Achieved: Tolerance{1, 0}, Target: Tolerance{2, 1}}
)

func testProtectionIndex(t *testing.T, m *Meta, clock *time.Time) {
	f := must(m.Create(bg, RootLIN, "f", NewInode{}))
	t0 := *clock
	// Stripe 0 is committed on two nodes, stripe 1 at its target.
	must(m.CommitStripes(bg, f.LIN, []StripeUpdate{{Stripe: stripe(0, 1, 1), Tolerance: twoNodes}, {Stripe: stripe(1, 3, 1), Tolerance: atTarget}},
		CommitOptions{StripeSize: 100, Size: 200}))
	us := must(m.UnderProtectedStripes(bg, f.LIN))
	if len(us) != 1 || us[0].Index != 0 || !us[0].Known || us[0].Tolerance != twoNodes || us[0].DataLen != 100 || !us[0].Since.Equal(t0) || us[0].Missing != 0 {
		t.Fatalf("index after the first commit: %+v", us)
	}
	if refs := must(m.ListUnderProtected(bg, StripeRef{}, 10)); len(refs) != 1 || refs[0] != (StripeRef{f.LIN, 0}) {
		t.Fatalf("ListUnderProtected: %v", refs)
	}
	// A restripe still below keeps the entry and its since, with the new
	// tolerance.
	*clock = clock.Add(time.Hour)
	must(commitOne(m, f.LIN, StripeUpdate{Stripe: stripe(0, 2, 2), ExpectGen: 1, Tolerance: oneDrive}, CommitOptions{Restripe: true}))
	us = must(m.UnderProtectedStripes(bg, f.LIN))
	if len(us) != 1 || us[0].Tolerance != oneDrive || !us[0].Since.Equal(t0) {
		t.Fatalf("index after a restripe still below: %+v", us)
	}
	// A unit not placed is indexed whatever the tolerance says.
	s := stripe(1, 3, 3)
	s.Units[1] = Unit{}
	must(commitOne(m, f.LIN, StripeUpdate{Stripe: s, ExpectGen: 1}, CommitOptions{}))
	us = must(m.UnderProtectedStripes(bg, f.LIN))
	if len(us) != 2 || us[1].Index != 1 || us[1].Missing != 1 || !us[1].Since.Equal(*clock) {
		t.Fatalf("index with a unit not placed: %+v", us)
	}
	files := must(m.ListUnderProtectedFiles(bg, 0, 10))
	// The weakest stripe is the one committed without tolerances.
	want := UnderProtectedFile{LIN: f.LIN, Stripes: 2, Missing: 1, Bytes: 200, Achieved: Tolerance{0, 0}, Target: Tolerance{0, 0}, Since: t0}
	if len(files) != 1 || fmt.Sprint(files[0]) != fmt.Sprint(want) {
		t.Fatalf("ListUnderProtectedFiles: %+v, want %+v", files, want)
	}
	st := must(m.ProtectionStats(bg, 0))
	if st.UnderFiles != 1 || st.UnderStripes != 2 || st.UnderBytes != 200 || !st.NewestUnder.Equal(*clock) || st.Partial || st.Incomplete || st.LostFiles != 0 {
		t.Fatalf("ProtectionStats: %+v", st)
	}
	if st := must(m.ProtectionStats(bg, 1)); st.UnderStripes != 1 || !st.Partial {
		t.Fatalf("ProtectionStats bounded to 1 entry: %+v", st)
	}
	// Commits at the target (a repair, a client rewrite) take them out.
	must(commitOne(m, f.LIN, StripeUpdate{Stripe: stripe(0, 4, 4), ExpectGen: 2, Tolerance: atTarget}, CommitOptions{Restripe: true}))
	must(commitOne(m, f.LIN, StripeUpdate{Stripe: stripe(1, 1, 5), ExpectGen: 2, Tolerance: atTarget}, CommitOptions{}))
	if us := must(m.UnderProtectedStripes(bg, f.LIN)); len(us) != 0 {
		t.Fatalf("index after commits at the target: %+v", us)
	}
	if st := must(m.ProtectionStats(bg, 0)); st != (ProtectionStats{}) {
		t.Fatalf("ProtectionStats of an empty index: %+v", st)
	}
}

// commitOne commits one update (CommitStripes with one stripe).
func commitOne(m *Meta, lin LIN, up StripeUpdate, co CommitOptions) (Stripe, error) {
	out, err := m.CommitStripes(bg, lin, []StripeUpdate{up}, co)
	if err != nil {
		return Stripe{}, err
	}
	return out[0], nil
}

// Listings page by file: a file's entries are never split between pages,
// however many it has.
func testProtectionIndexPages(t *testing.T, m *Meta, _ *time.Time) {
	var lins []LIN
	for i, n := range []int{3, 1, indexPage + 7, 2} {
		f := must(m.Create(bg, RootLIN, fmt.Sprintf("f%d", i), NewInode{}))
		lins = append(lins, f.LIN)
		for j := 0; j < n; j += 16 {
			var ups []StripeUpdate
			for k := j; k < min(n, j+16); k++ {
				s := stripe(uint64(k), 1, byte(i))
				s.Units[0].Block[3], s.Units[1].Block[3] = byte(k>>8), byte(k>>8)
				ups = append(ups, StripeUpdate{Stripe: s, Tolerance: twoNodes})
			}
			must(m.CommitStripes(bg, f.LIN, ups, CommitOptions{StripeSize: 100, Size: uint64(n) * 100}))
		}
	}
	var got []string
	for after := LIN(0); ; {
		page := must(m.ListUnderProtectedFiles(bg, after, 2))
		if len(page) == 0 {
			break
		}
		for _, f := range page {
			got = append(got, fmt.Sprintf("%d:%d", f.LIN-lins[0], f.Stripes))
			after = f.LIN
		}
	}
	if fmt.Sprint(got) != fmt.Sprintf("[0:3 1:1 2:%d 3:2]", indexPage+7) {
		t.Fatalf("pages: %v", got)
	}
	if st := must(m.ProtectionStats(bg, 0)); st.UnderFiles != 4 || st.UnderStripes != indexPage+13 {
		t.Fatalf("stats: %+v", st)
	}
}

func testSetStripeTolerance(t *testing.T, m *Meta, clock *time.Time) {
	f := must(m.Create(bg, RootLIN, "f", NewInode{}))
	s := must(m.CommitStripe(bg, f.LIN, stripe(0, 1, 1), 0, CommitOptions{StripeSize: 100, Size: 100}))
	if us := must(m.UnderProtectedStripes(bg, f.LIN)); len(us) != 0 {
		t.Fatalf("a commit without tolerances indexed %+v", us)
	}
	// Found below its target by a check (written by format 1, say).
	if changed := must(m.SetStripeTolerance(bg, f.LIN, 0, s.Gen+1, twoNodes)); changed {
		t.Fatal("a stale generation changed the index")
	}
	if changed := must(m.SetStripeTolerance(bg, f.LIN, 7, 1, twoNodes)); changed {
		t.Fatal("a stripe that does not exist changed the index")
	}
	if !must(m.SetStripeTolerance(bg, f.LIN, 0, s.Gen, twoNodes)) || must(m.SetStripeTolerance(bg, f.LIN, 0, s.Gen, twoNodes)) {
		t.Fatal("indexing a stripe found below its target: want a change, then none")
	}
	t0 := *clock
	*clock = clock.Add(time.Minute)
	if !must(m.SetStripeTolerance(bg, f.LIN, 0, s.Gen, oneDrive)) {
		t.Fatal("a new tolerance did not change the entry")
	}
	if us := must(m.UnderProtectedStripes(bg, f.LIN)); len(us) != 1 || us[0].Tolerance != oneDrive || !us[0].Since.Equal(t0) {
		t.Fatalf("entry %+v", us)
	}
	// The pool lost a node: the target is lower and the stripe meets it.
	lower := StripeTolerance{Achieved: Tolerance{2, 0}, Target: Tolerance{2, 0}}
	if !must(m.SetStripeTolerance(bg, f.LIN, 0, s.Gen, lower)) || len(must(m.UnderProtectedStripes(bg, f.LIN))) != 0 {
		t.Fatal("a stripe at its (lower) target stayed indexed")
	}
}

// Truncating below an indexed or lost stripe, and deleting the file, take
// its entries away with the stripes.
func testIndexGoesWithStripes(t *testing.T, m *Meta, _ *time.Time) {
	for _, name := range []string{"trunc", "del", "big"} {
		f := must(m.Create(bg, RootLIN, name, NewInode{}))
		n := 3
		if name == "big" {
			n = 40 // deleted in several transactions
		}
		for j := 0; j < n; j += 10 {
			var ups []StripeUpdate
			for k := j; k < min(n, j+10); k++ {
				ups = append(ups, StripeUpdate{Stripe: stripe(uint64(k), 1, byte(len(name))), Tolerance: twoNodes})
			}
			must(m.CommitStripes(bg, f.LIN, ups, CommitOptions{StripeSize: 100, Size: uint64(n) * 100}))
		}
		_, added := must2(m.RecordLost(bg, f.LIN, []LostStripe{{Index: 1, Gen: 1}, {Index: 2, Gen: 1}}))
		if added != 2 {
			t.Fatalf("%s: %d lost stripes recorded", name, added)
		}
	}
	trunc := must(m.Lookup(bg, RootLIN, "trunc"))
	must(m.SetAttr(bg, trunc.LIN, SetSize, Attr{Size: 150}))
	if us := must(m.UnderProtectedStripes(bg, trunc.LIN)); len(us) != 2 {
		t.Fatalf("after truncating to 1.5 stripes: %+v", us)
	}
	lost := must(m.ListLost(bg, 0, 10))
	if len(lost) != 3 || lost[0].LIN != trunc.LIN || len(lost[0].Stripes) != 1 || fmt.Sprint(lost[0].Ranges()) != "[100-149]" {
		t.Fatalf("lost list after the truncate: %+v", lost)
	}
	ok(t, m.Unlink(bg, RootLIN, "del"))
	ok(t, m.Unlink(bg, RootLIN, "big"))
	if st := must(m.ProtectionStats(bg, 0)); st.UnderFiles != 1 || st.UnderStripes != 2 || st.LostFiles != 1 || st.LostStripes != 1 {
		t.Fatalf("stats after deleting two files: %+v", st)
	}
}

func must2[T, U any](a T, b U, err error) (T, U) {
	if err != nil {
		panic(fmt.Sprintf("unexpected error: %v", err))
	}
	return a, b
}

func testLost(t *testing.T, m *Meta, clock *time.Time) {
	f := must(m.Create(bg, RootLIN, "f", NewInode{}))
	var ups []StripeUpdate
	for i := uint64(0); i < 4; i++ {
		ups = append(ups, StripeUpdate{Stripe: stripe(i, 1, 1), Tolerance: atTarget})
	}
	must(m.CommitStripes(bg, f.LIN, ups, CommitOptions{StripeSize: 100, Size: 350}))
	t0 := *clock
	first, added := must2(m.RecordLost(bg, f.LIN, []LostStripe{{Index: 0, Gen: 1, Readable: 3, Needed: 4, Reason: "units 1, 2: missing"}, {Index: 3, Gen: 1}}))
	if !first || added != 2 {
		t.Fatalf("first record: first %v, added %d", first, added)
	}
	*clock = clock.Add(time.Hour)
	// Again (a later scan): nothing new; a stale generation is not lost.
	first, added = must2(m.RecordLost(bg, f.LIN, []LostStripe{{Index: 0, Gen: 1}, {Index: 1, Gen: 9}}))
	if first || added != 0 {
		t.Fatalf("second record: first %v, added %d", first, added)
	}
	first, added = must2(m.RecordLost(bg, f.LIN, []LostStripe{{Index: 1, Gen: 1}}))
	if first || added != 1 {
		t.Fatalf("third record: first %v, added %d", first, added)
	}
	files := must(m.ListLost(bg, 0, 10))
	if len(files) != 1 || files[0].LIN != f.LIN || len(files[0].Stripes) != 3 || !files[0].Since.Equal(t0) || files[0].Size != 350 {
		t.Fatalf("ListLost: %+v", files)
	}
	if s := files[0].Stripes[0]; s.Readable != 3 || s.Needed != 4 || s.Reason != "units 1, 2: missing" || !s.Since.Equal(t0) || s.DataLen != 100 {
		t.Fatalf("lost stripe 0: %+v", s)
	}
	if r := fmt.Sprint(files[0].Ranges()); r != "[0-199 300-349]" || files[0].Bytes() != 250 {
		t.Fatalf("ranges %s, bytes %d", r, files[0].Bytes())
	}
	if st := must(m.ProtectionStats(bg, 0)); st.LostFiles != 1 || st.LostStripes != 3 || st.LostBytes != 300 {
		t.Fatalf("stats: %+v", st)
	}
	// A restripe keeps the entry; a client commit replaces the data.
	must(commitOne(m, f.LIN, StripeUpdate{Stripe: stripe(0, 3, 2), ExpectGen: 1, Tolerance: atTarget}, CommitOptions{Restripe: true}))
	must(commitOne(m, f.LIN, StripeUpdate{Stripe: stripe(1, 3, 2), ExpectGen: 1, Tolerance: atTarget}, CommitOptions{}))
	files = must(m.ListLost(bg, 0, 10))
	if len(files) != 1 || len(files[0].Stripes) != 2 || files[0].Stripes[0].Index != 0 || files[0].Stripes[1].Index != 3 {
		t.Fatalf("after a restripe of 0 and a rewrite of 1: %+v", files)
	}
	wantErr(t, third(m.RecordLost(bg, f.LIN+100, []LostStripe{{Index: 0, Gen: 1}})), ErrNotFound)
	wantErr(t, third(m.RecordLost(bg, RootLIN, []LostStripe{{Index: 0, Gen: 1}})), ErrInvalid)
	ok(t, m.Unlink(bg, RootLIN, "f"))
	if files := must(m.ListLost(bg, 0, 10)); len(files) != 0 {
		t.Fatalf("a deleted file is still listed: %+v", files)
	}
}

func testPath(t *testing.T, m *Meta) {
	a := must(m.Mkdir(bg, RootLIN, "a", 0o755))
	b := must(m.Mkdir(bg, a.LIN, "b", 0o755))
	f := must(m.Create(bg, b.LIN, "f", NewInode{}))
	if p := must(m.Path(bg, f.LIN)); p != "/a/b/f" {
		t.Fatalf("path %q", p)
	}
	if p := must(m.Path(bg, RootLIN)); p != "/" {
		t.Fatalf("root path %q", p)
	}
	ok(t, m.Open(bg, 5, f.LIN))
	ok(t, m.Unlink(bg, b.LIN, "f"))
	wantErr(t, second(m.Path(bg, f.LIN)), ErrNotFound)
	ok(t, m.Release(bg, 5, f.LIN))
}

// A namespace of format 1 is migrated when opened: its "r" values (units
// not placed) still read, and the index is marked incomplete until a
// repair has checked every stripe.
func TestMigrateFromFormat1(t *testing.T) {
	for _, b := range backends(t) {
		if b.name == "writeback" || b.name == "memcache" {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			store := b.newStore(t)
			clock := time.Unix(1_700_000_000, 0)
			m := newMetaClock(t, store, &clock)
			f := must(m.Create(bg, RootLIN, "f", NewInode{}))
			must(m.CommitStripe(bg, f.LIN, stripe(0, 1, 1), 0, CommitOptions{StripeSize: 100, Size: 100}))
			// What format 1 wrote: its format record, an "r" value of one
			// count, no marker.
			ok(t, store.Update(bg, func(tx kv.Tx) error {
				tx.Put(keyFormat(), encodeFormat(formatRecord{version: 1, created: clock.UnixNano()}))
				e := newEnc()
				e.count(1)
				tx.Put(keyUnder(f.LIN, 0), e.bytesOut())
				tx.Delete(keyMarker())
				return nil
			}))
			if _, found, err := m.ProtectionMarker(bg); err != nil || found {
				t.Fatalf("marker before the migration: %v %v", found, err)
			}
			clock = clock.Add(time.Hour)
			m2 := must(Open(bg, Config{Store: store, Now: func() time.Time { return clock }}))
			if f2 := storedFormat(t, store); f2.version != FormatVersion || f2.created != clock.Add(-time.Hour).UnixNano() {
				t.Fatalf("format record after the migration: %+v", f2)
			}
			us := must(m2.UnderProtectedStripes(bg, f.LIN))
			if len(us) != 1 || us[0].Known || us[0].Missing != 1 {
				t.Fatalf("a format 1 entry reads as %+v", us)
			}
			st := must(m2.ProtectionStats(bg, 0))
			if !st.Incomplete || !st.IncompleteSince.Equal(clock) || st.UnderFiles != 1 {
				t.Fatalf("stats after the migration: %+v", st)
			}
			// Opening again migrates nothing more.
			clock = clock.Add(time.Hour)
			must(Open(bg, Config{Store: store, Now: func() time.Time { return clock }}))
			if since, _, _ := m2.ProtectionMarker(bg); !since.Equal(clock.Add(-time.Hour)) {
				t.Fatalf("marker moved to %v", since)
			}
			// A repair that started before the marker does not clear it.
			if cleared := must(m2.ClearProtectionMarker(bg, clock.Add(-2*time.Hour))); cleared {
				t.Fatal("an older repair cleared the marker")
			}
			if !must(m2.ClearProtectionMarker(bg, clock)) || must(m2.ClearProtectionMarker(bg, clock)) {
				t.Fatal("clearing the marker: want cleared once")
			}
			if st := must(m2.ProtectionStats(bg, 0)); st.Incomplete {
				t.Fatalf("marker still set: %+v", st)
			}
		})
	}
}
