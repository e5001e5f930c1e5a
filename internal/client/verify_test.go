package client

import (
	"bytes"
	"hash/crc32"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/meta"
)

// damage is one way to damage a stripe for TestVerify: it returns the
// problem VerifyStripe must then report, per unit.
type damage struct {
	name string
	do   func(t *testing.T, f *fixture, lin meta.LIN, s meta.Stripe) map[int]ProblemKind
}

var damages = []damage{
	{"flipped byte", func(t *testing.T, f *fixture, _ meta.LIN, s meta.Stripe) map[int]ProblemKind {
		flipByte(t, f.blockFile(s.Units[0]), 10)
		return map[int]ProblemKind{0: ProblemChecksum}
	}},
	{"block deleted", func(t *testing.T, f *fixture, _ meta.LIN, s meta.Stripe) map[int]ProblemKind {
		if err := f.drive(s.Units[1].Drive).Delete(drive.BlockID(s.Units[1].Block)); err != nil {
			t.Fatal(err)
		}
		return map[int]ProblemKind{1: ProblemMissing}
	}},
	{"units swapped in the map", func(t *testing.T, f *fixture, lin meta.LIN, s meta.Stripe) map[int]ProblemKind {
		ns := s
		ns.Units = slices.Clone(s.Units)
		ns.Units[0], ns.Units[1] = ns.Units[1], ns.Units[0]
		if _, err := f.meta.CommitStripe(bg, lin, ns, s.Gen, meta.CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		return map[int]ProblemKind{0: ProblemIdentity, 1: ProblemIdentity}
	}},
	{"block file swapped", func(t *testing.T, f *fixture, _ meta.LIN, s meta.Stripe) map[int]ProblemKind {
		b, err := os.ReadFile(f.blockFile(s.Units[1]))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.blockFile(s.Units[0]), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return map[int]ProblemKind{0: ProblemIdentity}
	}},
	{"wrong parity, right checksums", func(t *testing.T, f *fixture, lin meta.LIN, s meta.Stripe) map[int]ProblemKind {
		// A block with correct segment CRCs, header and map CRC whose
		// bytes are not the parity (or copy) of the others.
		last := len(s.Units) - 1
		u := s.Units[last]
		d := f.drive(u.Drive)
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
		ns.Units[last] = meta.Unit{Drive: u.Drive, Block: meta.BlockID(id), Length: u.Length, CRC: crc32.Checksum(b, castagnoli())}
		if _, err := f.meta.CommitStripe(bg, lin, ns, s.Gen, meta.CommitOptions{}); err != nil {
			t.Fatal(err)
		}
		return map[int]ProblemKind{last: ProblemInconsistent}
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
				f := newFixture(t)
				c := f.client(testUnit)
				data := randBytes(tc.size, 7)
				lin := f.writeClosed(c, "f", tc.prot, data)
				clean, err := c.VerifyStripe(bg, lin, 0, false)
				if err != nil || len(clean.Problems) != 0 || clean.Verified != clean.Units {
					t.Fatalf("verify before damage: %+v, %v", clean, err)
				}
				want := dm.do(t, f, lin, f.stripes(lin)[0])
				s := f.stripes(lin)[0]

				vr, err := c.VerifyStripe(bg, lin, 0, false)
				if err != nil {
					t.Fatal(err)
				}
				got := map[int]ProblemKind{}
				for _, p := range vr.Problems {
					got[p.Unit] = p.Kind
					u := s.Units[p.Unit]
					if p.LIN != lin || p.Stripe != 0 || p.Drive != u.Drive || p.Block != u.Block.String() || p.Node != f.node(u.Drive).name || p.Detail == "" {
						t.Fatalf("problem %+v does not name the unit %+v", p, u)
					}
				}
				if !maps.Equal(got, want) || vr.Damaged() != len(want) || vr.Verified != vr.Units-len(want) || vr.Repair != nil {
					t.Fatalf("verify: %+v, want problems %v", vr, want)
				}
				mustEqual(t, "damaged", f.readBack(lin), data)

				fixed, err := c.VerifyStripe(bg, lin, 0, true)
				if err != nil {
					t.Fatal(err)
				}
				if r := fixed.Repair; r == nil || !r.Committed || r.Rebuilt != len(want) || r.StillUnderProtected {
					t.Fatalf("verify with repair: %+v, repair %+v", fixed, fixed.Repair)
				}
				after := f.stripes(lin)[0]
				for i := range want {
					if !f.queued(s.Units[i]) || after.Units[i].Block == s.Units[i].Block {
						t.Fatalf("unit %d: damaged block %v not replaced and queued", i, s.Units[i].Block)
					}
				}
				again, err := c.VerifyStripe(bg, lin, 0, false)
				if err != nil || len(again.Problems) != 0 || again.Verified != again.Units {
					t.Fatalf("verify after repair: %+v, %v", again, err)
				}
				mustEqual(t, "repaired", f.readBack(lin), data)
			})
		}
	}
}

// TestVerifyFile verifies a whole file: clean, it reads every unit (its
// allocated bytes); with a drive down, those units are reported as not
// checked and not repaired; with two stripes damaged, a verify with repair
// fixes both.
func TestVerifyFile(t *testing.T) {
	f := newFixture(t)
	c := f.client(testUnit)
	data := randBytes(3*4*testUnit+5000, 8)
	lin := f.writeClosed(c, "f", "ec:4+2", data)
	a, err := f.meta.GetAttr(bg, lin)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.VerifyFile(bg, lin, false)
	if err != nil || res.Stripes != 4 || res.Units != 3*6+3 || res.Verified != res.Units || res.BytesRead != int64(a.Allocated) || len(res.Problems) != 0 {
		t.Fatalf("clean file: %+v, %v (allocated %d)", res, err, a.Allocated)
	}

	ss := f.stripes(lin)
	d := ss[0].Units[3].Drive
	f.setDriveDown(d, true)
	down, err := c.VerifyFile(bg, lin, true)
	if err != nil || down.Damaged != 0 || down.Unchecked != f.unitsOn(lin, d) || down.Repaired != 0 {
		t.Fatalf("drive down: %+v, %v", down, err)
	}
	for _, p := range down.Problems {
		if p.Kind != ProblemDown || p.Drive != d {
			t.Fatalf("drive down: problem %v", p)
		}
	}
	f.setDriveDown(d, false)

	flipByte(t, f.blockFile(ss[1].Units[4]), 100)
	flipByte(t, f.blockFile(ss[3].Units[1]), 100) // the tail: 3 copies
	fixed, err := c.VerifyFile(bg, lin, true)
	if err != nil || fixed.Damaged != 2 || fixed.Repaired != 2 || fixed.Failed != 0 {
		t.Fatalf("two stripes damaged: %+v, %v", fixed, err)
	}
	if again, err := c.VerifyFile(bg, lin, false); err != nil || len(again.Problems) != 0 {
		t.Fatalf("after repair: %+v, %v", again, err)
	}
	mustEqual(t, "repaired", f.readBack(lin), data)
}
