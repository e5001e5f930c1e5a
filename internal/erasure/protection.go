package erasure

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrBadProtection is wrapped by ParseProtection for any malformed spec.
var ErrBadProtection = errors.New("erasure: bad protection")

// Limits on protection parameters. K+M is bounded by the Reed–Solomon
// field (256 shards) and, more tightly, by what a sane stripe spreads over.
const (
	MaxDataUnits   = 32
	MaxParityUnits = 8
	MaxMirrors     = 8
)

// Protection is a file's requested data protection: either N mirrors
// (Mirrors > 0) or K data units plus M parity units per stripe.
// The zero value is invalid.
type Protection struct {
	Mirrors int // N of mirror:N; 0 for erasure coding
	Data    int // K of ec:K+M
	Parity  int // M of ec:K+M
}

// ParseProtection parses "mirror:N" (1 ≤ N ≤ MaxMirrors) or "ec:K+M"
// (1 ≤ K ≤ MaxDataUnits, 1 ≤ M ≤ MaxParityUnits). Errors wrap
// ErrBadProtection and quote the input.
func ParseProtection(s string) (Protection, error) {
	bad := func(why string) (Protection, error) {
		return Protection{}, fmt.Errorf("%w %q: %s (want mirror:N or ec:K+M, e.g. ec:4+2)", ErrBadProtection, s, why)
	}
	kind, arg, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return bad("no ':'")
	}
	switch kind {
	case "mirror":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 || n > MaxMirrors {
			return bad(fmt.Sprintf("mirror count must be 1..%d", MaxMirrors))
		}
		return Protection{Mirrors: n}, nil
	case "ec":
		ks, ms, ok := strings.Cut(arg, "+")
		if !ok {
			return bad("no '+' between K and M")
		}
		k, err1 := strconv.Atoi(ks)
		m, err2 := strconv.Atoi(ms)
		if err1 != nil || err2 != nil {
			return bad("K and M must be numbers")
		}
		if k < 1 || k > MaxDataUnits {
			return bad(fmt.Sprintf("K must be 1..%d", MaxDataUnits))
		}
		if m < 1 || m > MaxParityUnits {
			return bad(fmt.Sprintf("M must be 1..%d", MaxParityUnits))
		}
		return Protection{Data: k, Parity: m}, nil
	default:
		return bad(fmt.Sprintf("unknown kind %q", kind))
	}
}

// String returns the canonical spec ("mirror:3", "ec:4+2").
func (p Protection) String() string {
	if p.Mirrors > 0 {
		return fmt.Sprintf("mirror:%d", p.Mirrors)
	}
	return fmt.Sprintf("ec:%d+%d", p.Data, p.Parity)
}

// Width is the number of units (and so distinct drives) a full stripe uses.
func (p Protection) Width() int {
	if p.Mirrors > 0 {
		return p.Mirrors
	}
	return p.Data + p.Parity
}

// Tolerance is the number of unit losses a full stripe survives.
func (p Protection) Tolerance() int {
	if p.Mirrors > 0 {
		return p.Mirrors - 1
	}
	return p.Parity
}

// IsZero reports whether p is the invalid zero value.
func (p Protection) IsZero() bool { return p == Protection{} }
