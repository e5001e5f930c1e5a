package client

import (
	"fmt"

	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/meta"
)

// The namespace (meta.Protection: scheme, K, M as bytes, mirror:N stored as
// 1+(N-1)) and the codec (erasure.Protection: Mirrors or Data+Parity ints)
// spell protection differently; these two functions are the only bridge.

// MetaProtection converts a codec protection to the namespace's form
// (the client's writes and restripe's relayout). It returns an error
// wrapping ErrInvalid for the zero value or values over 255.
func MetaProtection(p erasure.Protection) (meta.Protection, error) {
	switch {
	case p.Mirrors > 0 && p.Mirrors <= 255:
		return meta.Mirror(uint8(p.Mirrors)), nil
	case p.Mirrors == 0 && p.Data > 0 && p.Parity >= 0 && p.Data <= 255 && p.Parity <= 255:
		return meta.EC(uint8(p.Data), uint8(p.Parity)), nil
	}
	return meta.Protection{}, fmt.Errorf("%w: protection %+v has no namespace form", ErrInvalid, p)
}

// toErasure converts a namespace protection to the codec's form. The zero
// value (inherit) converts to the zero value; an unknown scheme is an error
// wrapping ErrInvalid.
func toErasure(p meta.Protection) (erasure.Protection, error) {
	switch p.Scheme {
	case 0:
		return erasure.Protection{}, nil
	case meta.SchemeMirror:
		return erasure.Protection{Mirrors: p.Width()}, nil
	case meta.SchemeEC:
		return erasure.Protection{Data: int(p.Data), Parity: int(p.Parity)}, nil
	}
	return erasure.Protection{}, fmt.Errorf("%w: protection %v has an unknown scheme", ErrInvalid, p)
}
