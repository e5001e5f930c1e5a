package policy

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// likePattern is a compiled LIKE pattern: '%' matches any run of
// characters, '_' exactly one character (a UTF-8 code point; a byte that
// is not UTF-8 counts as one), anything else itself, case-sensitively.
// An escape character makes the character after it literal.
//
// The pattern is split at its '%'s into segments; a segment is matched at
// the start (the first), at the end (the last) or at its leftmost place
// after the previous one (the others). Leftmost is always right for a
// segment between two '%'s, so matching never backtracks: it is linear in
// the string for literal segments (strings.Index) and at most the
// string's length times the segment's for segments with '_'.
type likePattern struct {
	segs [][]likeItem
	// shape selects a fast path for patterns without '_':
	// 'e' exact, 'p' prefix%, 's' %suffix, 'c' %contains%, 'b' prefix%suffix;
	// 0 is the general case.
	shape     byte
	pre, post string
}

// likeItem is a run of literal text, or one '_' (any is true).
type likeItem struct {
	lit string
	any bool
}

var errLikeEscape = errors.New("the escape character must be followed by %, _ or itself")

// compileLike compiles pat with escape character esc ("" for none).
func compileLike(pat, esc string) (*likePattern, error) {
	escRune := rune(-1)
	if esc != "" {
		escRune, _ = utf8.DecodeRuneInString(esc)
	}
	p := &likePattern{}
	var seg []likeItem
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			seg = append(seg, likeItem{lit: lit.String()})
			lit.Reset()
		}
	}
	underscores := false
	for i := 0; i < len(pat); {
		r, w := utf8.DecodeRuneInString(pat[i:])
		switch {
		case r == escRune:
			r2, w2 := utf8.DecodeRuneInString(pat[i+w:])
			if i+w >= len(pat) || r2 != '%' && r2 != '_' && r2 != escRune {
				return nil, errLikeEscape
			}
			lit.WriteString(pat[i+w : i+w+w2])
			w += w2
		case r == '%':
			flush()
			p.segs = append(p.segs, seg)
			seg = nil
		case r == '_':
			flush()
			seg = append(seg, likeItem{any: true})
			underscores = true
		default:
			lit.WriteString(pat[i : i+w])
		}
		i += w
	}
	flush()
	p.segs = append(p.segs, seg)
	if !underscores {
		p.pickShape()
	}
	return p, nil
}

// pickShape chooses a fast path for a pattern of literal segments.
func (p *likePattern) pickShape() {
	text := func(seg []likeItem) string {
		if len(seg) == 0 {
			return ""
		}
		return seg[0].lit
	}
	n := len(p.segs)
	first, last := text(p.segs[0]), text(p.segs[n-1])
	switch {
	case n == 1:
		p.shape, p.pre = 'e', first
	case n == 2 && last == "":
		p.shape, p.pre = 'p', first
	case n == 2 && first == "":
		p.shape, p.post = 's', last
	case n == 2:
		p.shape, p.pre, p.post = 'b', first, last
	case n == 3 && first == "" && last == "":
		p.shape, p.pre = 'c', text(p.segs[1])
	}
}

// match reports whether s matches the whole pattern.
func (p *likePattern) match(s string) bool {
	switch p.shape {
	case 'e':
		return s == p.pre
	case 'p':
		return strings.HasPrefix(s, p.pre)
	case 's':
		return strings.HasSuffix(s, p.post)
	case 'c':
		return strings.Contains(s, p.pre)
	case 'b':
		return len(s) >= len(p.pre)+len(p.post) && strings.HasPrefix(s, p.pre) && strings.HasSuffix(s, p.post)
	}
	n := len(p.segs)
	end, ok := matchAt(p.segs[0], s, 0)
	if !ok {
		return false
	}
	if n == 1 {
		return end == len(s)
	}
	for _, seg := range p.segs[1 : n-1] {
		if end, ok = findSeg(seg, s, end); !ok {
			return false
		}
	}
	return matchEnd(p.segs[n-1], s, end)
}

// matchAt matches seg at s[i:], returning where the match ends.
func matchAt(seg []likeItem, s string, i int) (int, bool) {
	for _, it := range seg {
		if it.any {
			if i >= len(s) {
				return 0, false
			}
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
			continue
		}
		if !strings.HasPrefix(s[i:], it.lit) {
			return 0, false
		}
		i += len(it.lit)
	}
	return i, true
}

// findSeg matches seg at its leftmost place in s[from:], returning where
// that match ends.
func findSeg(seg []likeItem, s string, from int) (int, bool) {
	if len(seg) == 0 {
		return from, true
	}
	for i := from; i <= len(s); {
		if !seg[0].any {
			j := strings.Index(s[i:], seg[0].lit)
			if j < 0 {
				return 0, false
			}
			i += j
		}
		if end, ok := matchAt(seg, s, i); ok {
			return end, true
		}
		if i == len(s) {
			break
		}
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	return 0, false
}

// matchEnd reports whether seg matches a suffix of s that starts at or
// after from.
func matchEnd(seg []likeItem, s string, from int) bool {
	if len(seg) == 0 {
		return true
	}
	if len(seg) == 1 && !seg[0].any {
		return len(s)-len(seg[0].lit) >= from && strings.HasSuffix(s, seg[0].lit)
	}
	for i := from; i <= len(s); {
		if end, ok := matchAt(seg, s, i); ok && end == len(s) {
			return true
		}
		if i == len(s) {
			break
		}
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	return false
}
