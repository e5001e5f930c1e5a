package meta

import (
	"fmt"

	"github.com/weftfs/weft/internal/failpoint"
)

// Fault injection for the namespace checker: failpoints in Create that,
// when enabled (any action but off: the action's error is not returned),
// make the create write one inconsistency of a kind the checker finds
// (docs/architecture.md, "Fault injection", lists them):
//
//	meta/create-no-backpointer  the inode without its back-pointer       → missing-backpointer
//	meta/entry-wrong-lin        the entry names a LIN never allocated    → wrong-entry
//	meta/wrong-nlink            the inode's link count one too high      → link-count
//	meta/orphan-inode           the inode only: no entry, no link, no
//	                            orphan record                            → unreachable
//	meta/dangling-entry         the entry only: no inode                 → dangling-entry
//	meta/create-no-usage        the inode and entry without the usage
//	                            counters' +1 inode (a usage update
//	                            skipped)                                 → usage-counter
//
// Each create evaluates the points once, before its transaction, so that
// N*error injects exactly N faults however often the transaction retries.

// createFault is what one Create injects.
type createFault struct {
	noBackpointer, wrongLIN, wrongNlink, orphan, dangling, noUsage bool
}

// wrongLINBit makes the LIN an injected entry names: far above any LIN
// the counter will hand out.
const wrongLINBit LIN = 1 << 62

func evalCreateFault() createFault {
	on := func(name string) bool { return failpoint.Eval(name) != nil }
	return createFault{
		noBackpointer: on("meta/create-no-backpointer"),
		wrongLIN:      on("meta/entry-wrong-lin"),
		wrongNlink:    on("meta/wrong-nlink"),
		orphan:        on("meta/orphan-inode"),
		dangling:      on("meta/dangling-entry"),
		noUsage:       on("meta/create-no-usage"),
	}
}

// any reports whether the create injects a fault.
func (f createFault) any() bool { return f != createFault{} }

// createFaulty writes what a create of n, named name in directory p,
// writes with fault f injected (see above), in place of the consistent
// records.
func (o *op) createFaulty(p, n *inode, name string, f createFault) {
	entryLIN := n.lin
	if f.wrongLIN {
		entryLIN |= wrongLINBit
	}
	if f.noBackpointer || f.orphan {
		n.links = nil
	}
	if f.wrongNlink {
		n.nlink++
	}
	if f.orphan {
		n.nlink = 0
	} else {
		o.put(keyEntry(p.lin, name), encodeEntry(n.typ, entryLIN))
		o.touchDir(p.lin)
		if n.typ == TypeDir {
			p.nlink++
			o.change(p)
		}
	}
	if !f.dangling {
		o.inodes[n.lin] = n
		o.mark(n)
		if !f.noUsage {
			o.addUsage(n.pool, Usage{Inodes: 1})
		}
	}
}

// FsckInjectPoint returns the failpoint of Create that injects faults of
// kind k (see above). Errors: ErrInvalid for a kind no failpoint injects,
// naming those that one does.
func FsckInjectPoint(k FsckKind) (string, error) {
	switch k {
	case FsckMissingBackpointer:
		return "meta/create-no-backpointer", nil
	case FsckWrongEntry:
		return "meta/entry-wrong-lin", nil
	case FsckLinkCount:
		return "meta/wrong-nlink", nil
	case FsckUnreachable:
		return "meta/orphan-inode", nil
	case FsckDanglingEntry:
		return "meta/dangling-entry", nil
	case FsckUsageCounter:
		return "meta/create-no-usage", nil
	}
	return "", fmt.Errorf("%w: no failpoint injects %q: want %s, %s, %s, %s, %s or %s", ErrInvalid, k,
		FsckMissingBackpointer, FsckWrongEntry, FsckLinkCount, FsckUnreachable, FsckDanglingEntry, FsckUsageCounter)
}
