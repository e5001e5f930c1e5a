package meta

import "testing"

// queuedOn counts the delete queue's entries on drives 1..6.
func queuedOn(t *testing.T, m *Meta) int {
	t.Helper()
	n := 0
	for d := DriveID(1); d <= 6; d++ {
		n += len(must(m.ListDeletes(bg, d, BlockID{}, 10000)))
	}
	return n
}

// testHoles drops stripes (a punched hole, a stripe rewritten as zeros),
// extends a file over a hole, and checks the maps, Allocated, the size and
// the delete queue after each.
func testHoles(t *testing.T, m *Meta) {
	const n = 300 // more than one transaction drops under etcd's limits
	f := must(m.Create(bg, RootLIN, "sparse", NewInode{}))
	for i := uint64(0); i < n; i += 20 {
		var ups []StripeUpdate
		for j := i; j < i+20; j++ {
			s := stripe(j, DriveID(1+j%5), 7)
			s.Units[0].Block[3], s.Units[1].Block[3] = byte(j>>8), byte(j>>8)
			ups = append(ups, StripeUpdate{Stripe: s})
		}
		must(m.CommitStripes(bg, f.LIN, ups, CommitOptions{StripeSize: 100, Size: (i + 20) * 100}))
	}
	q0 := queuedOn(t, m)
	// Punch stripes [10, 290): 280 stripes of 2 blocks each.
	a := must(m.DropStripes(bg, f.LIN, 10, 290, 0))
	got := must(m.GetStripes(bg, f.LIN, 0, 1000))
	if a.Size != n*100 || len(got) != 20 || got[9].Index != 9 || got[10].Index != 290 {
		t.Fatalf("after dropping [10, 290): size %d, %d stripes", a.Size, len(got))
	}
	if a.Allocated != 20*200 {
		t.Fatalf("after dropping [10, 290): %d bytes allocated, want %d", a.Allocated, 20*200)
	}
	if q := queuedOn(t, m) - q0; q != 2*280 {
		t.Fatalf("%d blocks queued, want %d", q, 2*280)
	}
	must(m.DropStripes(bg, f.LIN, 10, 290, 0)) // idempotent
	wantErr(t, second(m.DropStripes(bg, f.LIN, 5, 4, 0)), ErrInvalid)
	wantErr(t, second(m.DropStripes(bg, RootLIN, 0, 1, 0)), ErrIsDir)
	check(t, m)

	// A stripe rewritten as zeros is dropped by a commit, at its generation
	// only; a drop of a hole at generation 0 just grows the file.
	s0 := got[0]
	wantErr(t, second(m.CommitStripes(bg, f.LIN, []StripeUpdate{{Stripe: Stripe{Index: 0}, ExpectGen: s0.Gen + 1, Drop: true}}, CommitOptions{})), ErrStripeConflict)
	bad := Stripe{Index: 0, Units: s0.Units}
	wantErr(t, second(m.CommitStripes(bg, f.LIN, []StripeUpdate{{Stripe: bad, ExpectGen: s0.Gen, Drop: true}}, CommitOptions{})), ErrInvalid)
	out := must(m.CommitStripes(bg, f.LIN, []StripeUpdate{
		{Stripe: Stripe{Index: 0}, ExpectGen: s0.Gen, Drop: true},
		{Stripe: Stripe{Index: 500}, Drop: true},
	}, CommitOptions{Size: 50100}))
	if len(out) != 2 || out[0].Index != 0 || len(out[0].Units) != 0 || out[1].Index != 500 {
		t.Fatalf("dropping commit returned %+v", out)
	}
	a = must(m.GetAttr(bg, f.LIN))
	if got := must(m.GetStripes(bg, f.LIN, 0, 1)); a.Size != 50100 || len(got) != 1 || got[0].Index != 1 || a.Allocated != 19*200 {
		t.Fatalf("after dropping stripe 0: size %d, allocated %d, first stripe %+v", a.Size, a.Allocated, got)
	}
	check(t, m)

	// A drop that also grows the file (buffered writes dropped with it).
	a = must(m.DropStripes(bg, f.LIN, 400, 410, 60000))
	if a.Size != 60000 || a.Allocated != 19*200 {
		t.Fatalf("after a growing drop: size %d, allocated %d", a.Size, a.Allocated)
	}
	if a = must(m.DropStripes(bg, f.LIN, 400, 410, 100)); a.Size != 60000 {
		t.Fatalf("a drop shrank the file to %d", a.Size)
	}
	check(t, m)

	// Extend grows only.
	a = must(m.Extend(bg, f.LIN, 1000))
	if a.Size != 60000 {
		t.Fatalf("Extend to 1000 changed the size to %d", a.Size)
	}
	a = must(m.Extend(bg, f.LIN, 1<<40))
	if a.Size != 1<<40 || a.Allocated != 19*200 {
		t.Fatalf("after Extend to 1 TiB: size %d, allocated %d", a.Size, a.Allocated)
	}
	wantErr(t, second(m.Extend(bg, RootLIN, 1)), ErrIsDir)
	check(t, m)
}
