package restripe_test

import (
	"bytes"
	"hash/crc32"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/restripe"
)

// damage is one way to damage a stripe for TestVerify: it returns the
// problem VerifyStripe must then report, per unit.
type damage struct {
	name string
	do   func(t *testing.T, f *clienttest.Fixture, lin meta.LIN, s meta.Stripe) map[int]restripe.ProblemKind
}

var damages = []damage{
	{"flipped byte", func(t *testing.T, f *clienttest.Fixture, _ meta.LIN, s meta.Stripe) map[int]restripe.ProblemKind {
		clienttest.FlipByte(t, f.BlockFile(s.Units[0]), 10)
		return map[int]restripe.ProblemKind{0: restripe.ProblemChecksum}
	}},
	{"block deleted", func(t *testing.T, f *clienttest.Fixture, _ meta.LIN, s meta.Stripe) map[int]restripe.ProblemKind {
		if err := f.Drive(s.Units[1].Drive).Delete(drive.BlockID(s.Units[1].Block)); err != nil {
			t.Fatal(err)
		}
		return map[int]restripe.ProblemKind{1: restripe.ProblemMissing}
	}},
	{"units swapped in the map", func(t *testing.T, f *clienttest.Fixture, lin meta.LIN, s meta.Stripe) map[int]restripe.ProblemKind {
		ns := s
		ns.Units = slices.Clone(s.Units)
		ns.Units[0], ns.Units[1] = ns.Units[1], ns.Units[0]
		if _, err := f.Meta.CommitStripe(bg, lin, ns, s.Gen, meta.CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		return map[int]restripe.ProblemKind{0: restripe.ProblemIdentity, 1: restripe.ProblemIdentity}
	}},
	{"block file swapped", func(t *testing.T, f *clienttest.Fixture, _ meta.LIN, s meta.Stripe) map[int]restripe.ProblemKind {
		b, err := os.ReadFile(f.BlockFile(s.Units[1]))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.BlockFile(s.Units[0]), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return map[int]restripe.ProblemKind{0: restripe.ProblemIdentity}
	}},
	{"wrong parity, right checksums", func(t *testing.T, f *clienttest.Fixture, lin meta.LIN, s meta.Stripe) map[int]restripe.ProblemKind {
		// A block with correct segment CRCs, header and map CRC whose
		// bytes are not the parity (or copy) of the others.
		last := len(s.Units) - 1
		u := s.Units[last]
		d := f.Drive(u.Drive)
		b, hdr, err := d.Get(bg, drive.BlockID(u.Block), 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		b[7] ^= 0x5a
		id := drive.NewBlockID()
		if err := d.Put(bg, drive.BlockHeader{ID: id, Owner: hdr.Owner, Stripe: hdr.Stripe, Unit: hdr.Unit, Generation: s.Gen + 1}, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
		ns := s
		ns.Units = slices.Clone(s.Units)
		ns.Units[last] = meta.Unit{Drive: u.Drive, Block: meta.BlockID(id), Length: u.Length, CRC: crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))}
		if _, err := f.Meta.CommitStripe(bg, lin, ns, s.Gen, meta.CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		return map[int]restripe.ProblemKind{last: restripe.ProblemInconsistent}
	}},
}

// TestVerify damages the first stripe of a file in each way above, for
// each protection: VerifyStripe reports exactly the damaged units (with
// their drive, node and block), the data still reads, a verify with
// repair rewrites them from the others, and a last verify finds the
// stripe whole.
func TestVerify(t *testing.T) {
	for _, tc := range repairCases {
		for _, dm := range damages {
			t.Run(tc.name+"/"+dm.name, func(t *testing.T) {
				f := clienttest.New(t)
				c := f.Client(testUnit)
				rs := newRestriper(f, c)
				data := clienttest.RandBytes(tc.size, 7)
				lin := f.WriteClosed(c, "f", tc.prot, data)
				clean, err := rs.VerifyStripe(bg, lin, 0, false)
				if err != nil || len(clean.Problems) != 0 || clean.Verified != clean.Units {
					t.Fatalf("verify before damage: %+v, %v", clean, err)
				}
				want := dm.do(t, f, lin, f.Stripes(lin)[0])
				s := f.Stripes(lin)[0]

				vr, err := rs.VerifyStripe(bg, lin, 0, false)
				if err != nil {
					t.Fatal(err)
				}
				got := map[int]restripe.ProblemKind{}
				for _, p := range vr.Problems {
					got[p.Unit] = p.Kind
					u := s.Units[p.Unit]
					if p.LIN != lin || p.Stripe != 0 || p.Drive != u.Drive || p.Block != u.Block.String() || p.Node != f.Node(u.Drive).Name || p.Detail == "" {
						t.Fatalf("problem %+v does not name the unit %+v", p, u)
					}
				}
				if !maps.Equal(got, want) || vr.Damaged() != len(want) || vr.Verified != vr.Units-len(want) || vr.Repair != nil {
					t.Fatalf("verify: %+v, want problems %v", vr, want)
				}
				clienttest.MustEqual(t, "damaged", f.ReadBack(lin), data)

				fixed, err := rs.VerifyStripe(bg, lin, 0, true)
				if err != nil {
					t.Fatal(err)
				}
				if r := fixed.Repair; r == nil || !r.Committed || r.Rebuilt != len(want) || r.StillUnderProtected {
					t.Fatalf("verify with repair: %+v, repair %+v", fixed, fixed.Repair)
				}
				after := f.Stripes(lin)[0]
				for i := range want {
					if !f.Queued(s.Units[i]) || after.Units[i].Block == s.Units[i].Block {
						t.Fatalf("unit %d: damaged block %v not replaced and queued", i, s.Units[i].Block)
					}
				}
				again, err := rs.VerifyStripe(bg, lin, 0, false)
				if err != nil || len(again.Problems) != 0 || again.Verified != again.Units {
					t.Fatalf("verify after repair: %+v, %v", again, err)
				}
				clienttest.MustEqual(t, "repaired", f.ReadBack(lin), data)
			})
		}
	}
}

// TestVerifyFile verifies a whole file: clean, it reads every unit (its
// allocated bytes); with a drive down, those units are reported as not
// checked and not repaired; with two stripes damaged, a verify with repair
// fixes both.
func TestVerifyFile(t *testing.T) {
	f := clienttest.New(t)
	c := f.Client(testUnit)
	rs := newRestriper(f, c)
	data := clienttest.RandBytes(3*4*testUnit+5000, 8)
	lin := f.WriteClosed(c, "f", "ec:4+2", data)
	a, err := f.Meta.GetAttr(bg, lin)
	if err != nil {
		t.Fatal(err)
	}
	res, err := rs.VerifyFile(bg, lin, false)
	if err != nil || res.Stripes != 4 || res.Units != 3*6+3 || res.Verified != res.Units || res.BytesRead != int64(a.Allocated) || len(res.Problems) != 0 {
		t.Fatalf("clean file: %+v, %v (allocated %d)", res, err, a.Allocated)
	}

	ss := f.Stripes(lin)
	d := ss[0].Units[3].Drive
	f.SetDriveDown(d, true)
	down, err := rs.VerifyFile(bg, lin, true)
	if err != nil || down.Damaged != 0 || down.Unchecked != f.UnitsOn(lin, d) || down.Repaired != 0 {
		t.Fatalf("drive down: %+v, %v", down, err)
	}
	for _, p := range down.Problems {
		if p.Kind != restripe.ProblemDown || p.Drive != d {
			t.Fatalf("drive down: problem %v", p)
		}
	}
	f.SetDriveDown(d, false)

	clienttest.FlipByte(t, f.BlockFile(ss[1].Units[4]), 100)
	clienttest.FlipByte(t, f.BlockFile(ss[3].Units[1]), 100) // the tail: 3 copies
	fixed, err := rs.VerifyFile(bg, lin, true)
	if err != nil || fixed.Damaged != 2 || fixed.Repaired != 2 || fixed.Failed != 0 {
		t.Fatalf("two stripes damaged: %+v, %v", fixed, err)
	}
	if again, err := rs.VerifyFile(bg, lin, false); err != nil || len(again.Problems) != 0 {
		t.Fatalf("after repair: %+v, %v", again, err)
	}
	clienttest.MustEqual(t, "repaired", f.ReadBack(lin), data)
}
