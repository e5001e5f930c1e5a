package client_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/meta"
)

// TestModel runs random writes, reads, truncates, flushes and re-opens
// through two handles of one file and compares every read with an
// in-memory reference; now and then it flushes and reads the file whole
// through a fresh client. Tiny units (4 KiB) make every operation cross
// unit and stripe boundaries, and a small MaxDirty forces write-outs of
// partial stripes (read-modify-write) in the middle of the run.
func TestModel(t *testing.T) {
	ops := 300
	if clienttest.RaceEnabled || testing.Short() {
		ops = 150
	}
	for _, prot := range []string{"ec:2+1", "ec:4+2", "mirror:2"} {
		for seed := uint64(1); seed <= 2; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", prot, seed), func(t *testing.T) {
				runModel(t, prot, seed, ops)
			})
		}
	}
}

// modelFile is a file under a model test: two handles of it on one
// client with tiny units, and the in-memory reference of its bytes.
type modelFile struct {
	t      *testing.T
	f      *clienttest.Fixture
	c      *client.Client
	lin    meta.LIN
	stripe int
	ref    []byte
	hs     [2]*client.File
	rng    *rand.Rand
}

// newModelFile creates a file of protection prot and opens its two
// handles; the random choices come from seed and stream.
func newModelFile(t *testing.T, prot string, seed, stream uint64) *modelFile {
	const unit = 4 * kib
	f := clienttest.New(t)
	m := &modelFile{t: t, f: f, rng: rand.New(rand.NewPCG(seed, stream))}
	m.c = f.Client(unit, func(cfg *client.Config) { cfg.MaxDirty = 40 * kib; cfg.Readahead = 2 })
	m.lin = f.Create("m", prot)
	m.stripe = m.c.MustStripeSize(t, m.lin)
	m.open(0)
	m.open(1)
	return m
}

func (m *modelFile) open(i int) {
	h, err := m.c.Open(bg, m.lin, true)
	if err != nil {
		m.t.Fatal(err)
	}
	m.hs[i] = h
}

// grow extends the reference with zeros to end.
func (m *modelFile) grow(end int) {
	if end > len(m.ref) {
		m.ref = append(m.ref, make([]byte, end-len(m.ref))...)
	}
}

// write writes p at off through h.
func (m *modelFile) write(op int, h *client.File, p []byte, off int) {
	if got, err := h.WriteAt(bg, p, int64(off)); err != nil || got != len(p) {
		m.t.Fatalf("op %d: WriteAt(%d at %d) = %d, %v", op, len(p), off, got, err)
	}
	m.grow(off + len(p))
	copy(m.ref[off:], p)
}

// read reads n bytes at off through h and checks them, and that a short
// read is one that reached the end.
func (m *modelFile) read(op int, h *client.File, off, n int) {
	p := make([]byte, n)
	got, err := h.ReadAt(bg, p, int64(off))
	want := max(0, min(len(p), len(m.ref)-off))
	if got != want || (got < len(p)) != (err == io.EOF) || (err != nil && err != io.EOF) {
		m.t.Fatalf("op %d: ReadAt(%d at %d) = %d, %v; want %d bytes (size %d)", op, len(p), off, got, err, want, len(m.ref))
	}
	if got > 0 {
		clienttest.MustEqual(m.t, fmt.Sprintf("op %d: read %d at %d", op, len(p), off), p[:got], m.ref[off:off+got])
	}
}

func (m *modelFile) flush(op int, h *client.File) {
	if err := h.Flush(bg); err != nil {
		m.t.Fatalf("op %d: Flush: %v", op, err)
	}
}

// reopen closes one handle, chosen at random, and opens it again.
func (m *modelFile) reopen(op int) {
	i := m.rng.IntN(2)
	if err := m.hs[i].Close(bg); err != nil {
		m.t.Fatalf("op %d: Close: %v", op, err)
	}
	m.open(i)
}

// fresh flushes both handles and reads the file whole through a fresh
// client.
func (m *modelFile) fresh(op int) {
	for _, h := range m.hs {
		m.flush(op, h)
	}
	clienttest.MustEqual(m.t, fmt.Sprintf("op %d: fresh client", op), m.f.ReadBack(m.lin), m.ref)
}

// checkSize checks h's size against the reference.
func (m *modelFile) checkSize(op int, h *client.File) {
	if s := h.Size(); s != int64(len(m.ref)) {
		m.t.Fatalf("op %d: Size = %d, want %d", op, s, len(m.ref))
	}
}

// finish closes both handles, reads the file back whole and checks the
// size meta holds.
func (m *modelFile) finish() {
	for _, h := range m.hs {
		if err := h.Close(bg); err != nil {
			m.t.Fatal(err)
		}
	}
	clienttest.MustEqual(m.t, "final", m.f.ReadBack(m.lin), m.ref)
	a, err := m.f.Meta.GetAttr(bg, m.lin)
	if err != nil || a.Size != uint64(len(m.ref)) {
		m.t.Fatalf("meta size %d, %v; want %d", a.Size, err, len(m.ref))
	}
}

func runModel(t *testing.T, prot string, seed uint64, ops int) {
	m := newModelFile(t, prot, seed, 99)
	rng, stripe := m.rng, m.stripe
	for op := 0; op < ops; op++ {
		h := m.hs[rng.IntN(2)]
		switch k := rng.IntN(100); {
		case k < 40: // write
			off := rng.IntN(len(m.ref) + 2*stripe + 1)
			n := 1 + rng.IntN(stripe/2)
			if rng.IntN(5) == 0 {
				n = 1 + rng.IntN(3*stripe)
			}
			m.write(op, h, clienttest.RandBytes(n, rng.Uint64()), off)
		case k < 70: // read
			off := rng.IntN(len(m.ref) + stripe + 1)
			m.read(op, h, off, 1+rng.IntN(2*stripe))
		case k < 75: // sequential read of everything
			clienttest.MustEqual(t, fmt.Sprintf("op %d: sequential read", op), clienttest.ReadAll(t, h, 1+rng.IntN(stripe)), m.ref)
		case k < 83: // truncate
			size := rng.IntN(len(m.ref) + 2*stripe + 1)
			if err := h.Truncate(bg, int64(size)); err != nil {
				t.Fatalf("op %d: Truncate(%d): %v", op, size, err)
			}
			if size < len(m.ref) {
				m.ref = m.ref[:size]
			} else {
				m.grow(size)
			}
		case k < 90:
			m.flush(op, h)
		case k < 95: // close and reopen one handle
			m.reopen(op)
		default: // another client sees the flushed file
			m.fresh(op)
		}
		m.checkSize(op, h)
	}
	m.finish()
}
