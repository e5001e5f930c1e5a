package erasure

import (
	"errors"
	"testing"
)

func TestParseProtection(t *testing.T) {
	for _, tc := range []struct {
		in        string
		want      string
		width, tl int
	}{
		{"ec:4+2", "ec:4+2", 6, 2},
		{" ec:8+2 ", "ec:8+2", 10, 2},
		{"mirror:3", "mirror:3", 3, 2},
		{"mirror:1", "mirror:1", 1, 0},
		{"ec:1+1", "ec:1+1", 2, 1},
	} {
		p, err := ParseProtection(tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if p.String() != tc.want || p.Width() != tc.width || p.Tolerance() != tc.tl {
			t.Errorf("%q = %v width %d tol %d", tc.in, p, p.Width(), p.Tolerance())
		}
	}
	for _, in := range []string{"", "ec", "ec:4", "ec:4+", "ec:0+2", "ec:4+0", "ec:33+2", "ec:4+9",
		"mirror:0", "mirror:9", "mirror:x", "raid:5", "ec:-1+2", "ec:a+b"} {
		if _, err := ParseProtection(in); !errors.Is(err, ErrBadProtection) {
			t.Errorf("%q: err = %v, want ErrBadProtection", in, err)
		}
	}
}
