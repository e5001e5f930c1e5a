package drive

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// BlockID names a block, unique within a cluster with overwhelming
// probability. Its text form (32 lowercase hex digits) is also the block's
// file name.
type BlockID [16]byte

// NewBlockID returns a random block id from crypto/rand.
func NewBlockID() BlockID {
	var id BlockID
	rand.Read(id[:]) // never returns an error (crypto/rand contract since Go 1.24)
	return id
}

// String returns 32 lowercase hex digits.
func (id BlockID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is the zero id, which is never a valid block.
func (id BlockID) IsZero() bool { return id == BlockID{} }

// ParseBlockID parses exactly 32 lowercase hex digits. Every other input
// (upper case, other lengths, separators, "../", NUL) is refused with an error
// wrapping ErrInvalid. This strictness is what keeps a block id from naming a
// path outside the drive: never build a block path from an unparsed string.
func ParseBlockID(s string) (BlockID, error) {
	var id BlockID
	if len(s) != 2*len(id) {
		return id, fmt.Errorf("%w: block id %q: want 32 lowercase hex digits", ErrInvalid, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return id, fmt.Errorf("%w: block id %q: want 32 lowercase hex digits", ErrInvalid, s)
		}
	}
	hex.Decode(id[:], []byte(s)) // cannot fail: validated above
	return id, nil
}
