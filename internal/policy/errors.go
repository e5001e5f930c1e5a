package policy

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors of the package; returned errors wrap them with the
// details, check them with errors.Is (and errors.As for *Errors).
var (
	// ErrInvalid is wrapped by every error of Parse: the policy text is
	// malformed, mistyped or names what the catalog does not know. The
	// error is an *Errors listing each problem with its position.
	ErrInvalid = errors.New("policy: invalid policy")

	// ErrNotMigrate is returned by Rule.Plan for a rule that is not a
	// MIGRATE rule: a caller bug.
	ErrNotMigrate = errors.New("policy: not a MIGRATE rule")

	// ErrNewerFormat is returned by Decode for a record written by a newer
	// weft (its "v" is above RecordVersion): upgrade this node.
	ErrNewerFormat = errors.New("policy: record of a newer format")

	// ErrCorrupt is returned by Decode for a record that does not decode.
	ErrCorrupt = errors.New("policy: corrupt record")
)

// Pos is a position in a policy's text: Line and Col count from 1, and Col
// counts characters (Unicode code points, a tab is one), not bytes.
type Pos struct {
	Line, Col int
}

// String returns "line L, column C".
func (p Pos) String() string { return fmt.Sprintf("line %d, column %d", p.Line, p.Col) }

// less orders positions in the text.
func (p Pos) less(q Pos) bool { return p.Line < q.Line || p.Line == q.Line && p.Col < q.Col }

// Error is one problem of a policy's text, at Pos.
type Error struct {
	Pos Pos
	// Msg says what was wrong and, where it can, what to write instead.
	Msg string
}

// Error returns "line L, column C: Msg".
func (e Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// MaxErrors is how many errors Parse reports at most; Errors.Omitted
// counts the others it found.
const MaxErrors = 20

// Errors is the error of Parse: every problem it found, in the order of
// their positions (at most MaxErrors of them). It wraps ErrInvalid.
type Errors struct {
	List []Error
	// Omitted is how many more problems were found and not listed. Parsing
	// stops after a few hundred, so it is a lower bound.
	Omitted int
}

// Error returns the problems, one a line, after a first line naming the
// package's error ("policy: invalid policy: line 1, column 9: ..." for
// one problem).
func (e *Errors) Error() string {
	if len(e.List) == 1 && e.Omitted == 0 {
		return ErrInvalid.Error() + ": " + e.List[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d errors", ErrInvalid, len(e.List)+e.Omitted)
	for _, x := range e.List {
		b.WriteString("\n" + x.Error())
	}
	if e.Omitted > 0 {
		fmt.Fprintf(&b, "\n(and %d more)", e.Omitted)
	}
	return b.String()
}

// Unwrap returns ErrInvalid.
func (e *Errors) Unwrap() error { return ErrInvalid }
