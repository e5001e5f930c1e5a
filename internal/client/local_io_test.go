package client

import (
	"bytes"
	"os"
	"testing"
)

// TestLocalReads reads units of drives on "this machine" straight from
// their directories: the data is the same, no block-service read happens,
// and a damaged local block is still detected and rebuilt from parity.
func TestLocalReads(t *testing.T) {
	f := newFixture(t)
	f.topo.set(func(*DriveState) bool { return true }, func(d *DriveState) {
		d.LocalPath = f.drive(d.ID).Path()
	})
	w := f.client(testUnit)
	data := randBytes(3*4*testUnit+5, 7)
	lin, _, err := f.writeFile(w, "f", "ec:4+2", data)
	if err != nil {
		t.Fatal(err)
	}
	c := f.client(testUnit, func(cfg *Config) { cfg.ClusterID = "c-test" })
	fh, err := c.Open(bg, lin, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, fh, 100*kib); !bytes.Equal(got, data) {
		t.Fatal("local read differs")
	}
	fh.Close(bg)
	st := c.Stats()
	if st.LocalReads == 0 || st.DegradedReads != 0 {
		t.Fatalf("stats after a local read: %+v", st)
	}

	// A flipped byte in a local block: detected, rebuilt.
	u := f.stripes(lin)[1].Units[0]
	path := f.blockFile(u)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	c2 := f.client(testUnit, func(cfg *Config) { cfg.ClusterID = "c-test" })
	fh, _ = c2.Open(bg, lin, false)
	if got := readAll(t, fh, 100*kib); !bytes.Equal(got, data) {
		t.Fatal("read with a damaged local block differs")
	}
	fh.Close(bg)
	if c2.Stats().DegradedReads == 0 || c2.Stats().CorruptUnits == 0 {
		t.Fatalf("damaged local block not noticed: %+v", c2.Stats())
	}

	// A path that is not this drive (a wrong cluster id) falls back to
	// the block services.
	c3 := f.client(testUnit, func(cfg *Config) { cfg.ClusterID = "another-cluster" })
	fh, _ = c3.Open(bg, lin, false)
	if got := readAll(t, fh, 100*kib); !bytes.Equal(got, data) {
		t.Fatal("fallback read differs")
	}
	fh.Close(bg)
	if c3.Stats().LocalReads != 0 {
		t.Fatalf("read a foreign drive locally: %+v", c3.Stats())
	}
}
