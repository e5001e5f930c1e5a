package drive

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits maps a size suffix (lower case) to its multiplier. Bare
// letters and the "i" forms are binary (as in dd, fio and truncate: 10G is
// 10 GiB); the "B" forms with no "i" are decimal (10GB is 10^10 bytes).
var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
	"p": 1 << 50, "pib": 1 << 50, "pb": 1e15,
}

// sizeForm is the expected form, quoted by ParseSize's errors.
const sizeForm = "a number of bytes with an optional unit, e.g. 64MiB, 10G, 1.5TiB, 500GB (K/M/G/T/P and KiB…PiB are powers of 1024, KB…PB of 1000)"

// ParseSize parses a human size such as "64MiB", "10G", "1.5TiB", "500GB"
// or "4096" into bytes (rounded down). Units are case-insensitive; K, M, G,
// T, P and KiB…PiB are powers of 1024, KB…PB powers of 1000. It returns an
// error wrapping ErrInvalid, naming s and the expected form, for anything
// else, a negative size or one past 2^63-1 bytes.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("%w: size %q: want %s", ErrInvalid, s, sizeForm)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: size %q: want %s", ErrInvalid, s, sizeForm)
	}
	b := math.Floor(v * mult)
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("%w: size %q is too large (at most 8EiB)", ErrInvalid, s)
	}
	return int64(b), nil
}

// FormatSize formats n bytes in the largest binary unit that divides it
// exactly ("64MiB", "1536KiB", "100"), so that ParseSize(FormatSize(n))
// == n.
func FormatSize(n int64) string {
	if n <= 0 {
		return strconv.FormatInt(n, 10)
	}
	for _, u := range []struct {
		name string
		mult int64
	}{{"PiB", 1 << 50}, {"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}
