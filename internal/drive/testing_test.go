package drive

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
)

const testCluster = "c-test"

// openTest opens a fresh drive in a temp dir, closing it when the test ends.
func openTest(t testing.TB, mutate ...func(*Options)) *Drive {
	t.Helper()
	return openAt(t, t.TempDir(), mutate...)
}

func testOptions(id ID) Options {
	return Options{
		ClusterID: testCluster,
		Node:      "node-1",
		Class:     ClassSSD,
		AllocID:   func() (ID, error) { return id, nil },
	}
}

func openAt(t testing.TB, dir string, mutate ...func(*Options)) *Drive {
	t.Helper()
	opts := testOptions(7)
	for _, m := range mutate {
		m(&opts)
	}
	d, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// payload returns n deterministic pseudo-random bytes.
func payload(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// putTest stores data under a new id and returns the id.
func putTest(t testing.TB, d *Drive, data []byte) BlockID {
	t.Helper()
	h := BlockHeader{ID: NewBlockID(), Owner: 100, Stripe: 2, Unit: 1, Generation: 5}
	if err := d.Put(context.Background(), h, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put %d bytes: %v", len(data), err)
	}
	return h.ID
}
