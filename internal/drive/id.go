package drive

import (
	"fmt"
	"strconv"
	"strings"
)

// ID is a drive id, unique within a cluster and allocated by the control
// plane. It is shown as "d" followed by the decimal number, e.g. "d7".
type ID uint32

// String returns the id as "d<n>".
func (id ID) String() string { return "d" + strconv.FormatUint(uint64(id), 10) }

// ParseID parses "d7" or "7". It returns an error wrapping ErrInvalid for
// anything else (empty, signs, spaces, non-digits, out of uint32 range).
func ParseID(s string) (ID, error) {
	digits := strings.TrimPrefix(s, "d")
	if digits == "" || digits[0] < '0' || digits[0] > '9' {
		return 0, fmt.Errorf("%w: drive id %q: want d<number> or <number>, e.g. d7", ErrInvalid, s)
	}
	n, err := strconv.ParseUint(digits, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: drive id %q: want d<number> or <number> below 2^32, e.g. d7", ErrInvalid, s)
	}
	return ID(n), nil
}
