package meta

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/weftfs/weft/internal/kv"
)

// The namespace checker's checks and repairs (the fsck job drives them;
// this file knows nothing of jobs).
//
// Every committed state of the namespace is consistent: each operation
// changes entries, back-pointers and link counts together in one
// transaction. So an inconsistency seen in one snapshot is real, whatever
// clients do meanwhile, and each check reads everything it decides on in
// one snapshot (one view). A repair runs in one transaction that reads
// the records again and repairs only if the finding still holds there;
// otherwise it does nothing and reports the finding changed meanwhile
// (a client renamed, unlinked or replaced what was found). A repair
// writes as an operation would (generation bumped, parent's times set)
// and recalls a directory delegation before changing the directory's
// entries, as every operation that changes entries does.
//
// Which check finds what, so that one inconsistency is one finding:
//
//   - FsckEntries (a directory's entries, each with its target's inode):
//     entry-type findings, and the entries whose target does not claim
//     them (missing or without the back-pointer), returned as hints: an
//     unclaimed entry is a missing back-pointer, a dangling entry, or the
//     wrong half of a wrong-entry finding, and only the other checks can
//     tell which.
//   - FsckBackpointers (an inode's back-pointers, each with its entry):
//     stale-backpointer and wrong-entry findings.
//   - FsckLinks (an inode, with the hints naming it that no wrong-entry
//     finding explained): missing-backpointer, link-count, unreachable;
//     for a LIN with no inode, dangling-entry.
//
// A directory's link count is checked by counting its subdirectory
// entries in the snapshot, so that check reads the whole directory. weft
// keeps no entry count of its own for a directory (its size is 0) and no
// ".." entry (a directory's parent is its one back-pointer, checked as
// any back-pointer), so the link count is the only count to check. Not
// checked yet: a directory with more than one name.

// FsckKind names a kind of namespace finding.
type FsckKind string

// The kinds of namespace findings.
const (
	// FsckDanglingEntry: an entry names a LIN with no inode. Repair:
	// the entry is removed.
	FsckDanglingEntry FsckKind = "dangling-entry"
	// FsckEntryType: an entry's type differs from its inode's. Repair:
	// the entry takes the inode's type. (A link count counts the
	// subdirectory entries by their type: an entry that misnames a
	// directory, or names a file a directory, also shows as its
	// directory's link-count finding until the entry is repaired.)
	FsckEntryType FsckKind = "entry-type"
	// FsckMissingBackpointer: an entry names an inode that lacks the
	// back-pointer (parent, name), and no other inode claims the entry.
	// Repair: the back-pointer is added (the link count already counted
	// the entry; a link-count finding says otherwise).
	FsckMissingBackpointer FsckKind = "missing-backpointer"
	// FsckStaleBackpointer: an inode lists (parent, name) but the entry is
	// missing, or names another inode that claims it. Repair: the
	// back-pointer is removed and the link count lowered with it; an
	// inode left without links goes to /lost+found.
	FsckStaleBackpointer FsckKind = "stale-backpointer"
	// FsckWrongEntry: an entry names LIN X, which does not claim it (or
	// does not exist), while inode Y claims it. Repair: the entry is
	// pointed at Y.
	FsckWrongEntry FsckKind = "wrong-entry"
	// FsckLinkCount: a non-directory's link count differs from its
	// back-pointers (with the entries a missing-backpointer finding
	// will add), or a directory's from 2 + its subdirectory entries.
	// Repair: the link count is set.
	FsckLinkCount FsckKind = "link-count"
	// FsckUnreachable: an inode with no links and no orphan record (so
	// nobody will purge it), or a directory in a cycle cut off from the
	// root. Repair: it is linked into /lost+found, named by its LIN.
	FsckUnreachable FsckKind = "unreachable"
)

// FsckKinds returns every kind of namespace finding, in report order.
func FsckKinds() []FsckKind {
	return []FsckKind{FsckDanglingEntry, FsckEntryType, FsckMissingBackpointer, FsckStaleBackpointer,
		FsckWrongEntry, FsckLinkCount, FsckUnreachable}
}

// LostFoundName is the root's entry that unreachable inodes are linked
// into (created with mode 0700 by the first repair that needs it).
const LostFoundName = "lost+found"

// FsckFinding is one inconsistency a check found, with what its repair
// needs to find it again.
type FsckFinding struct {
	Kind FsckKind `json:"kind"`
	// LIN is the inode concerned: the entry's target for entry kinds.
	LIN LIN `json:"lin"`
	// Parent and Name are the entry or back-pointer concerned (zero for
	// link-count and unreachable).
	Parent LIN    `json:"parent,omitempty"`
	Name   string `json:"name,omitempty"`
	// Pending are entries naming LIN without its back-pointer, which a
	// link-count finding counted as links (a missing-backpointer repair
	// adds them).
	Pending []Link `json:"pending,omitempty"`
	// Stripe, Unit, Drive and Block name the unit of a layout finding
	// (missing-unit, bad-header): the stripe map's unit Unit of stripe
	// Stripe names Block on Drive.
	Stripe uint64  `json:"stripe,omitempty"`
	Unit   int     `json:"unit,omitempty"`
	Drive  DriveID `json:"drive,omitempty"`
	Block  BlockID `json:"block,omitzero"`
	// Pool, Delta and Fixes are a usage-counter finding's: the pool, what
	// its counters lack (the namespace's usage less the counters', in one
	// snapshot) and how many corrections the pool had had in that
	// snapshot (FsckUsage).
	Pool  string `json:"pool,omitempty"`
	Delta Usage  `json:"delta,omitzero"`
	Fixes uint64 `json:"fixes,omitempty"`
	// Detail says what was found, for the report.
	Detail string `json:"detail"`
}

// String formats f for logs and reports.
func (f FsckFinding) String() string {
	switch {
	case f.Kind == FsckUsageCounter:
		return fmt.Sprintf("%s: pool %q: %s", f.Kind, f.Pool, f.Detail)
	case f.Kind == FsckMissingUnit || f.Kind == FsckBadHeader:
		return fmt.Sprintf("%s: LIN %d stripe %d unit %d (drive %d, block %s): %s", f.Kind, f.LIN, f.Stripe, f.Unit, f.Drive, f.Block, f.Detail)
	case f.Name != "":
		return fmt.Sprintf("%s: LIN %d, entry %q in LIN %d: %s", f.Kind, f.LIN, f.Name, f.Parent, f.Detail)
	}
	return fmt.Sprintf("%s: LIN %d: %s", f.Kind, f.LIN, f.Detail)
}

// EntryRef is one directory entry: (Parent, Name) names LIN.
type EntryRef struct {
	Parent LIN
	Name   string
	LIN    LIN
}

// FsckEntriesPage is what FsckEntries found in one page of a directory.
type FsckEntriesPage struct {
	// Checked counts the entries read.
	Checked int
	// Findings are entry-type findings.
	Findings []FsckFinding
	// Unclaimed are the entries whose target does not claim them (absent,
	// or without the back-pointer): hints for FsckLinks, not findings.
	Unclaimed []EntryRef
	// Next is the name to pass as after for the next page; "" at the end.
	Next string
}

// FsckEntries checks up to limit entries of directory dir after the name
// after ("" from the start), each with its target inode, in one snapshot;
// see FsckEntriesPage. A dir that is not (or no longer) a directory has
// no entries to check: an empty page. limit < 1 means
// DefaultReadDirLimit. Errors: the store's; ErrCorrupt for a record that
// does not decode.
func (m *Meta) FsckEntries(ctx context.Context, dir LIN, after string, limit int) (FsckEntriesPage, error) {
	if limit < 1 {
		limit = DefaultReadDirLimit
	}
	var page FsckEntriesPage
	err := m.store.View(ctx, func(tx kv.Tx) error {
		page = FsckEntriesPage{}
		o := m.newOp(tx, false)
		start, end := entriesRange(dir)
		if after != "" {
			start = kv.After(keyEntry(dir, after))
		}
		kvs, more, err := tx.Scan(start, end, limit)
		if err != nil {
			return err
		}
		ents := make([]EntryRef, 0, len(kvs))
		types := make([]FileType, 0, len(kvs))
		lins := make([]LIN, 0, len(kvs))
		for _, p := range kvs {
			typ, lin, err := decodeEntry(p.Key, p.Value)
			if err != nil {
				return err
			}
			ents = append(ents, EntryRef{Parent: dir, Name: string(p.Key[9:]), LIN: lin})
			types = append(types, typ)
			lins = append(lins, lin)
		}
		if _, err := o.load(lins); err != nil {
			return err
		}
		for i, e := range ents {
			page.Checked++
			n := o.inodes[e.LIN]
			if n == nil || !slices.Contains(n.links, Link{Parent: dir, Name: e.Name}) {
				page.Unclaimed = append(page.Unclaimed, e)
				continue
			}
			if n.typ != types[i] {
				page.Findings = append(page.Findings, FsckFinding{Kind: FsckEntryType, LIN: e.LIN, Parent: dir, Name: e.Name,
					Detail: fmt.Sprintf("the entry says %s, the inode is a %s", types[i], n.typ)})
			}
		}
		if more != nil && len(ents) > 0 {
			page.Next = ents[len(ents)-1].Name
		}
		return nil
	})
	return page, storeErr(err)
}

// FsckBackpointers checks each back-pointer of inode lin against its
// entry, in one snapshot: stale-backpointer and wrong-entry findings
// (none for a LIN with no inode). Errors: the store's; ErrCorrupt.
func (m *Meta) FsckBackpointers(ctx context.Context, lin LIN) ([]FsckFinding, error) {
	_, out, err := m.FsckBackpointersRange(ctx, lin, lin+1)
	return out, err
}

// FsckBackpointersRange is FsckBackpointers for every inode with from <=
// LIN < to, in one snapshot, reading the entries of a page of inodes
// together; it also returns how many inodes it checked. Errors: the
// store's; ErrCorrupt.
func (m *Meta) FsckBackpointersRange(ctx context.Context, from, to LIN) (int, []FsckFinding, error) {
	var out []FsckFinding
	checked := 0
	err := m.store.View(ctx, func(tx kv.Tx) error {
		out, checked = nil, 0
		o := m.newOp(tx, false)
		ns, err := o.scanRange(from, to)
		if err != nil {
			return err
		}
		var keys [][]byte
		for _, n := range ns {
			for _, l := range n.links {
				keys = append(keys, keyEntry(l.Parent, l.Name))
			}
		}
		if err := o.prefetch(keys); err != nil {
			return err
		}
		for _, n := range ns {
			checked++
			for _, l := range n.links {
				f, err := o.checkBackpointer(n, l)
				if err != nil {
					return err
				}
				if f != nil {
					out = append(out, *f)
				}
			}
		}
		return nil
	})
	return checked, out, storeErr(err)
}

// scanRange reads every inode with from <= LIN < to into o's cache and
// returns them in LIN order (times and open records skipped).
func (o *op) scanRange(from, to LIN) ([]*inode, error) {
	var out []*inode
	if to <= from {
		return nil, nil
	}
	start, end := keyInode(from), keyInode(to)
	for start != nil {
		kvs, next, err := o.tx.Scan(start, end, 1024)
		if err != nil {
			return nil, err
		}
		for _, p := range kvs {
			if len(p.Key) != 9 {
				continue
			}
			lin := linAt(p.Key, 1)
			if err := o.cache(lin, p.Value); err != nil {
				return nil, err
			}
			out = append(out, o.inodes[lin])
		}
		start = next
	}
	return out, nil
}

// prefetch reads keys (those not read yet) in rounds of at most the
// store's transaction size, for getKey.
func (o *op) prefetch(keys [][]byte) error {
	if o.pre == nil {
		o.pre = map[string][]byte{}
	}
	var want [][]byte
	for _, k := range keys {
		if _, ok := o.pre[string(k)]; !ok {
			o.pre[string(k)] = nil // absent unless read below
			want = append(want, k)
		}
	}
	chunk := max(o.m.budget, 1)
	for len(want) > 0 {
		n := min(chunk, len(want))
		vals, err := o.tx.GetMany(want[:n]...)
		if err != nil {
			return err
		}
		for i, v := range vals {
			o.pre[string(want[i])] = v
		}
		want = want[n:]
	}
	return nil
}

// getKey returns key k's value, from what prefetch read if it read k.
func (o *op) getKey(k []byte) ([]byte, error) {
	if v, ok := o.pre[string(k)]; ok {
		return v, nil
	}
	return o.tx.Get(k)
}

// checkBackpointer checks n's back-pointer l against its entry: nil if
// the entry names n, else a stale-backpointer or wrong-entry finding.
func (o *op) checkBackpointer(n *inode, l Link) (*FsckFinding, error) {
	k := keyEntry(l.Parent, l.Name)
	b, err := o.getKey(k)
	if err != nil {
		return nil, err
	}
	_, target, ok, err := entryOf(k, b)
	if err != nil {
		return nil, err
	}
	f := &FsckFinding{Kind: FsckStaleBackpointer, LIN: n.lin, Parent: l.Parent, Name: l.Name}
	switch {
	case !ok:
		f.Detail = "the inode lists the entry, which does not exist"
		return f, nil
	case target == n.lin:
		return nil, nil
	}
	if _, err := o.load([]LIN{target}); err != nil {
		return nil, err
	}
	if t := o.inodes[target]; t != nil && slices.Contains(t.links, l) {
		f.Detail = fmt.Sprintf("the entry names LIN %d, which claims it too", target)
		return f, nil
	}
	f.Kind = FsckWrongEntry
	f.Detail = fmt.Sprintf("the entry names LIN %d, which does not claim it; LIN %d does", target, n.lin)
	return f, nil
}

// FsckLinks checks inode lin's links, in one snapshot, given pending: the
// entries an FsckEntries page found naming lin without its back-pointer
// and that no wrong-entry finding explained. It reports a
// missing-backpointer finding for each pending entry that still names lin
// without the back-pointer; then link-count (counting those entries as
// links) and unreachable (no links at all and no orphan record; a
// directory in a cycle cut off from the root, reported for the cycle's
// lowest LIN only). For a LIN with no inode it reports a dangling-entry
// finding for each pending entry still naming it. Errors: the store's;
// ErrCorrupt.
func (m *Meta) FsckLinks(ctx context.Context, lin LIN, pending []Link) ([]FsckFinding, error) {
	_, out, err := m.FsckLinksRange(ctx, lin, lin+1, map[LIN][]Link{lin: pending})
	return out, err
}

// FsckLinksRange is FsckLinks for every inode with from <= LIN < to and
// every LIN pending names (wherever it is), in LIN order and one
// snapshot, reading a page's orphan records and pending entries
// together; it also returns how many LINs it checked. Errors: the
// store's; ErrCorrupt.
func (m *Meta) FsckLinksRange(ctx context.Context, from, to LIN, pending map[LIN][]Link) (int, []FsckFinding, error) {
	var out []FsckFinding
	checked := 0
	err := m.store.View(ctx, func(tx kv.Tx) error {
		out, checked = nil, 0
		o := m.newOp(tx, false)
		ns, err := o.scanRange(from, to)
		if err != nil {
			return err
		}
		lins := make([]LIN, 0, len(ns)+len(pending))
		var keys [][]byte
		for _, n := range ns {
			lins = append(lins, n.lin)
			keys = append(keys, keyOrphan(n.lin))
		}
		for lin, ls := range pending {
			if !slices.Contains(lins, lin) {
				lins = append(lins, lin)
			}
			for _, l := range ls {
				keys = append(keys, keyEntry(l.Parent, l.Name))
			}
		}
		slices.Sort(lins)
		if err := o.prefetch(keys); err != nil {
			return err
		}
		for _, lin := range lins {
			checked++
			fs, err := o.checkLinks(lin, pending[lin])
			if err != nil {
				return err
			}
			out = append(out, fs...)
		}
		return nil
	})
	return checked, out, storeErr(err)
}

func (o *op) checkLinks(lin LIN, pending []Link) ([]FsckFinding, error) {
	var out []FsckFinding
	if _, err := o.load([]LIN{lin}); err != nil {
		return nil, err
	}
	n := o.inodes[lin]
	valid, err := o.stillUnclaimed(lin, n, pending)
	if err != nil {
		return nil, err
	}
	if n == nil {
		for _, l := range valid {
			out = append(out, FsckFinding{Kind: FsckDanglingEntry, LIN: lin, Parent: l.Parent, Name: l.Name,
				Detail: fmt.Sprintf("the entry names LIN %d, which does not exist", lin)})
		}
		return out, nil
	}
	for _, l := range valid {
		out = append(out, FsckFinding{Kind: FsckMissingBackpointer, LIN: lin, Parent: l.Parent, Name: l.Name,
			Detail: "the entry names the inode, which lacks the back-pointer"})
	}
	if lin == RootLIN {
		want, err := o.dirNlink(lin)
		if err != nil {
			return nil, err
		}
		if n.nlink != want {
			out = append(out, linkCountFinding(n, want, nil))
		}
		return out, nil
	}
	orphan, err := o.getKey(keyOrphan(lin))
	if err != nil {
		return nil, err
	}
	links := len(n.links) + len(valid)
	if links == 0 {
		if orphan == nil {
			out = append(out, FsckFinding{Kind: FsckUnreachable, LIN: lin,
				Detail: fmt.Sprintf("a %s with link count %d, no entry names it and no orphan record", n.typ, n.nlink)})
		}
		return out, nil // an orphan: the collect job purges it
	}
	want := uint32(links)
	if n.typ == TypeDir {
		if want, err = o.dirNlink(lin); err != nil {
			return nil, err
		}
		if len(valid) == 0 {
			cut, err := o.cutOff(n)
			if err != nil {
				return nil, err
			}
			if cut {
				out = append(out, FsckFinding{Kind: FsckUnreachable, LIN: lin,
					Detail: "the directory is in a cycle of directories cut off from the root"})
			}
		}
	}
	if n.nlink != want {
		out = append(out, linkCountFinding(n, want, valid))
	}
	return out, nil
}

func linkCountFinding(n *inode, want uint32, pending []Link) FsckFinding {
	why := fmt.Sprintf("%d back-pointers", len(n.links))
	if len(pending) > 0 {
		why += fmt.Sprintf(" and %d entries missing theirs", len(pending))
	}
	if n.typ == TypeDir {
		why = fmt.Sprintf("2 + %d subdirectories", want-2)
	}
	return FsckFinding{Kind: FsckLinkCount, LIN: n.lin, Pending: pending,
		Detail: fmt.Sprintf("link count %d, want %d (%s)", n.nlink, want, why)}
}

// stillUnclaimed returns the entries of pending that name lin while n
// (nil: absent) lacks their back-pointer.
func (o *op) stillUnclaimed(lin LIN, n *inode, pending []Link) ([]Link, error) {
	if len(pending) == 0 {
		return nil, nil
	}
	keys := make([][]byte, len(pending))
	for i, l := range pending {
		keys[i] = keyEntry(l.Parent, l.Name)
	}
	if err := o.prefetch(keys); err != nil {
		return nil, err
	}
	var out []Link
	for i, l := range pending {
		v, err := o.getKey(keys[i])
		if err != nil {
			return nil, err
		}
		_, target, ok, err := entryOf(keys[i], v)
		if err != nil {
			return nil, err
		}
		if ok && target == lin && (n == nil || !slices.Contains(n.links, l)) && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out, nil
}

// dirNlink returns 2 + the subdirectory entries of directory lin.
func (o *op) dirNlink(lin LIN) (uint32, error) {
	want := uint32(2)
	start, end := entriesRange(lin)
	for start != nil {
		kvs, next, err := o.tx.Scan(start, end, 1024)
		if err != nil {
			return 0, err
		}
		for _, p := range kvs {
			typ, _, err := decodeEntry(p.Key, p.Value)
			if err != nil {
				return 0, err
			}
			if typ == TypeDir {
				want++
			}
		}
		start = next
	}
	return want, nil
}

// cutOff reports whether directory n's first back-pointers lead, through
// its ancestors, back to a directory on the way (a cycle that does not
// reach the root) and n is the cycle's lowest LIN. A chain that ends at
// an inode without links or a missing one is another check's finding
// (stale-backpointer, unreachable), not n's.
func (o *op) cutOff(n *inode) (bool, error) {
	seen := map[LIN]bool{n.lin: true}
	low := n.lin
	cur := n
	for range maxDepth {
		if len(cur.links) == 0 {
			return false, nil
		}
		p := cur.links[0].Parent
		if p == RootLIN {
			return false, nil
		}
		if seen[p] {
			return p == n.lin && low == n.lin, nil
		}
		seen[p] = true
		low = min(low, p)
		if _, err := o.load([]LIN{p}); err != nil {
			return false, err
		}
		if cur = o.inodes[p]; cur == nil {
			return false, nil
		}
	}
	return false, nil
}

// FsckRepair repairs f in one transaction, after checking again that f
// still holds there: it reports true if it repaired, false if f no longer
// holds (changed meanwhile: nothing written). A repair that needs
// /lost+found creates it (mode 0700, owned by root) if the root has no
// such entry. A usage-counter finding is repaired by FsckRepairUsage.
// Idempotent: a repaired finding no longer holds. Errors: ErrInvalid (an
// unknown kind, or a layout kind whose repair is a restripe's),
// ErrExists (/lost+found is not a directory, or already has the entry
// named by the LIN: rename it), the store's.
func (m *Meta) FsckRepair(ctx context.Context, f FsckFinding) (bool, error) {
	if f.Kind == FsckUsageCounter {
		return m.FsckRepairUsage(ctx, f)
	}
	if !slices.Contains(FsckKinds(), f.Kind) {
		return false, fmt.Errorf("%w: finding kind %q: meta repairs %v and %s", ErrInvalid, f.Kind, FsckKinds(), FsckUsageCounter)
	}
	// A repair may link an inode into /lost+found, which it may have to
	// create: its LIN is taken before the transaction (unused if not).
	var lf LIN
	if f.Kind == FsckStaleBackpointer || f.Kind == FsckUnreachable {
		var err error
		if lf, err = m.allocLIN(ctx); err != nil {
			return false, err
		}
	}
	repaired := false
	err := m.update(ctx, func(o *op) error {
		var err error
		repaired, err = o.repair(f, lf)
		return err
	})
	return repaired, err
}

func (o *op) repair(f FsckFinding, lf LIN) (bool, error) {
	o.withUsage()
	var dirs []LIN
	if f.Parent != 0 {
		dirs = []LIN{f.Parent}
	}
	var extra [][]byte
	if f.Name != "" {
		extra = [][]byte{keyEntry(f.Parent, f.Name)}
	}
	vals, err := o.loadDirs(dirs, []LIN{f.LIN}, extra...)
	if err != nil {
		return false, err
	}
	n := o.inodes[f.LIN]
	var typ FileType
	var target LIN
	var ok bool
	if len(vals) > 0 {
		if typ, target, ok, err = entryOf(extra[0], vals[0]); err != nil {
			return false, err
		}
	}
	link := Link{Parent: f.Parent, Name: f.Name}
	switch f.Kind {
	case FsckDanglingEntry:
		if !ok || target != f.LIN || n != nil {
			return false, nil
		}
		o.removeEntry(f.Parent, f.Name, typ)
		return true, nil
	case FsckEntryType:
		if !ok || target != f.LIN || n == nil || !slices.Contains(n.links, link) || n.typ == typ {
			return false, nil
		}
		o.put(extra[0], encodeEntry(n.typ, n.lin))
		return true, nil
	case FsckMissingBackpointer:
		if !ok || target != f.LIN || n == nil || slices.Contains(n.links, link) {
			return false, nil
		}
		n.links = append(n.links, link)
		o.change(n)
		if typ != n.typ {
			o.put(extra[0], encodeEntry(n.typ, n.lin))
		}
		return true, nil
	case FsckStaleBackpointer, FsckWrongEntry:
		if n == nil || !slices.Contains(n.links, link) {
			return false, nil
		}
		g, err := o.checkBackpointer(n, link)
		if err != nil || g == nil || g.Kind != f.Kind {
			return false, err
		}
		if f.Kind == FsckWrongEntry {
			o.put(extra[0], encodeEntry(n.typ, n.lin))
			if (typ == TypeDir) != (n.typ == TypeDir) {
				p, err := o.inode(f.Parent)
				if err != nil {
					return false, err
				}
				if n.typ == TypeDir {
					p.nlink++
				} else if p.nlink > 2 {
					p.nlink--
				}
				o.change(p)
			}
			o.touchDir(f.Parent)
			return true, nil
		}
		n.removeLink(f.Parent, f.Name)
		if n.typ != TypeDir && n.nlink > 0 {
			n.nlink--
		}
		o.change(n)
		if len(n.links) > 0 {
			return true, nil
		}
		return true, o.linkLostFound(n, lf)
	case FsckLinkCount:
		if n == nil {
			return false, nil
		}
		valid, err := o.stillUnclaimed(n.lin, n, f.Pending)
		if err != nil {
			return false, err
		}
		want := uint32(len(n.links) + len(valid))
		if n.typ == TypeDir {
			if want, err = o.dirNlink(n.lin); err != nil {
				return false, err
			}
		}
		if n.nlink == want || n.lin != RootLIN && len(n.links)+len(valid) == 0 {
			return false, nil
		}
		n.nlink = want
		o.change(n)
		return true, nil
	case FsckUnreachable:
		if n == nil {
			return false, nil
		}
		g, err := o.checkLinks(n.lin, nil)
		if err != nil {
			return false, err
		}
		if !slices.ContainsFunc(g, func(x FsckFinding) bool { return x.Kind == FsckUnreachable }) {
			return false, nil
		}
		if len(n.links) > 0 { // a directory in a cycle: cut it out
			l := n.links[0]
			if _, err := o.loadDirs([]LIN{l.Parent}, nil); err != nil {
				return false, err
			}
			o.removeEntry(l.Parent, l.Name, TypeDir)
			n.links = nil
		}
		return true, o.linkLostFound(n, lf)
	}
	return false, nil
}

// removeEntry deletes entry (parent, name) of type typ, with the
// parent's link count for a directory.
func (o *op) removeEntry(parent LIN, name string, typ FileType) {
	o.del(keyEntry(parent, name))
	o.touchDir(parent)
	if typ == TypeDir {
		if p, err := o.inode(parent); err == nil && p.nlink > 2 {
			p.nlink--
			o.change(p)
		}
	}
}

// linkLostFound links n, which has no links, into /lost+found as its
// LIN in decimal, creating /lost+found (as LIN lf) if the root has no
// such entry. A non-directory's link count becomes 1; a directory keeps
// its own (2 + subdirectories) and raises /lost+found's.
func (o *op) linkLostFound(n *inode, lf LIN) error {
	k := keyEntry(RootLIN, LostFoundName)
	vals, err := o.loadDirs([]LIN{RootLIN}, nil, k)
	if err != nil {
		return err
	}
	root, err := o.dir(RootLIN)
	if err != nil {
		return err
	}
	typ, dir, ok, err := entryOf(k, vals[0])
	if err != nil {
		return err
	}
	var d *inode
	switch {
	case !ok:
		d = newInode(root, lf, LostFoundName, NewInode{Type: TypeDir, Mode: 0o700}, Caller{}, o.now)
		d.uid, d.gid = 0, 0
		o.inodes[lf] = d
		o.mark(d)
		o.put(k, encodeEntry(TypeDir, lf))
		root.nlink++
		o.change(root)
		o.touchDir(RootLIN)
		o.addUsage(d.pool, Usage{Inodes: 1})
	case typ != TypeDir:
		return fmt.Errorf("%w: /%s is a %s, not a directory: rename it so that fsck can create the directory", ErrExists, LostFoundName, typ)
	default:
		if _, err := o.loadDirs([]LIN{dir}, nil); err != nil {
			return err
		}
		if d, err = o.dir(dir); err != nil {
			return err
		}
	}
	name := strconv.FormatUint(uint64(n.lin), 10)
	ek := keyEntry(d.lin, name)
	if ok {
		b, err := o.tx.Get(ek)
		if err != nil {
			return err
		}
		if b != nil {
			return fmt.Errorf("%w: /%s/%s exists: rename it so that fsck can link LIN %d there", ErrExists, LostFoundName, name, n.lin)
		}
	}
	o.put(ek, encodeEntry(n.typ, n.lin))
	o.touchDir(d.lin)
	n.links = []Link{{Parent: d.lin, Name: name}}
	if n.typ == TypeDir {
		d.nlink++
		o.change(d)
		want, err := o.dirNlink(n.lin)
		if err != nil {
			return err
		}
		n.nlink = want
	} else {
		n.nlink = 1
	}
	o.change(n)
	return nil
}
