package block

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// bufferPool is the gRPC buffer pool of the block service's connections
// (frames read, messages marshaled). gRPC's default pool clears every
// buffer it hands out again; gRPC fills every buffer it gets from a pool
// before anyone reads it (a frame read with io.ReadFull, a message
// marshaled into it), so the clearing only costs a pass over every byte
// moved — on a node receiving puts, one more than the copy itself. This
// pool hands buffers out as they were returned.
//
// Buffers come in power-of-two classes from 256 bytes to 4 MiB; larger
// ones are allocated and left to the garbage collector.
type bufferPool struct {
	classes [maxPoolClass - minPoolClass + 1]sync.Pool
}

var _ mem.BufferPool = (*bufferPool)(nil)

const (
	minPoolClass = 8  // 256 bytes
	maxPoolClass = 22 // 4 MiB
)

// poolClass returns the index of the smallest class holding n bytes, or -1.
func poolClass(n int) int {
	switch {
	case n <= 1<<minPoolClass:
		return 0
	case n > 1<<maxPoolClass:
		return -1
	}
	return bits.Len(uint(n-1)) - minPoolClass
}

// Get returns a buffer of length n with arbitrary contents.
func (p *bufferPool) Get(n int) *[]byte {
	c := poolClass(n)
	if c < 0 {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(c+minPoolClass))
	return &b
}

// Put returns a buffer of Get for reuse; others are dropped.
func (p *bufferPool) Put(b *[]byte) {
	n := cap(*b)
	if c := poolClass(n); c >= 0 && n == 1<<(c+minPoolClass) {
		p.classes[c].Put(b)
	}
}
