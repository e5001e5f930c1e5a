package checkstream

import (
	"bufio"
	"io"
)

// WriteTo writes the whole stream s to w, block after block, and returns
// the bytes written. s must be valid (Validate); the first error of w ends
// it.
func (s Stream) WriteTo(w io.Writer) (int64, error) {
	if err := s.Validate(); err != nil {
		return 0, err
	}
	cw := &countWriter{w: w}
	bw := bufio.NewWriterSize(cw, max(1<<20, s.Block+HeaderSize))
	buf := make([]byte, s.Block+HeaderSize)
	for k, n := int64(0), s.Blocks(); k < n; k++ {
		off, ln := s.BlockAt(k)
		b := buf[:ln]
		s.fill(b, off)
		if _, err := bw.Write(b); err != nil {
			return cw.n, err
		}
	}
	err := bw.Flush()
	return cw.n, err
}

// countWriter counts the bytes its writer took.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// BlockData returns block k of s (0 ≤ k < Blocks()), as WriteTo writes it: for
// tests and tools that damage or move blocks on purpose.
func (s Stream) BlockData(k int64) []byte {
	off, n := s.BlockAt(k)
	b := make([]byte, n)
	s.fill(b, off)
	return b
}
