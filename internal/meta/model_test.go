package meta

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/memkv"
)

// The randomized model test runs long random operation sequences against
// Meta and against a plain in-memory model of the namespace, and compares
// the whole tree (and the orphans) after every step, and every namespace
// invariant every few steps. Long runs are opt-in:
//
//	go test ./internal/meta -run TestModel -model.steps 100000 -model.seed 7
var (
	modelSteps = flag.Int("model.steps", 0, "steps of each randomized model run (0: the default)")
	modelSeed  = flag.Uint64("model.seed", 0, "seed of the randomized model test (0: fixed seeds)")
)

func TestModel(t *testing.T) {
	steps := func(def int) int {
		if *modelSteps > 0 {
			return *modelSteps
		}
		if testing.Short() {
			return def / 4
		}
		return def
	}
	seeds := []uint64{1, 2}
	if *modelSeed != 0 {
		seeds = []uint64{*modelSeed}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("mem/seed=%d", seed), func(t *testing.T) {
			runModel(t, memkv.New(kv.Options{Limits: etcdDefaultLimits}), seed, steps(2500))
		})
		// The same through a kvcache, as mounts run it.
		t.Run(fmt.Sprintf("mem-cache/seed=%d", seed), func(t *testing.T) {
			runModel(t, newCached(t, memkv.New(kv.Options{Limits: etcdDefaultLimits})), seed, steps(2500))
		})
		// The same with write-back: a create or an unlink in a directory
		// the client holds is acknowledged before its commit. Every 50
		// steps a second client compares the committed tree (recalling
		// the delegations).
		t.Run(fmt.Sprintf("mem-writeback/seed=%d", seed), func(t *testing.T) {
			runModel(t, newWriteBackStore(t, memkv.New(kv.Options{Limits: etcdDefaultLimits})), seed, steps(2500))
		})
		// Tiny transactions force every unbounded operation into chunks.
		t.Run(fmt.Sprintf("mem-small-txns/seed=%d", seed), func(t *testing.T) {
			runModel(t, memkv.New(kv.Options{Limits: kv.Limits{MaxOps: 40, MaxBytes: 1 << 20}}), seed, steps(1000))
		})
	}
	for _, b := range backends(t)[2:] {
		t.Run(b.name, func(t *testing.T) { runModel(t, b.newStore(t), seeds[0], steps(300)) })
	}
}

func runModel(t *testing.T, store kv.Store, seed uint64, steps int) {
	m := newMeta(t, store)
	md := newModel()
	r := rand.New(rand.NewPCG(seed, seed))
	h := &harness{t: t, m: m, md: md, r: r}
	var other *Meta
	if w, ok := store.(writeBackStore); ok {
		m.wb.mu.Lock()
		m.wb.coolFor = 0 // take delegations back at once after a recall
		m.wb.mu.Unlock()
		var err error
		if other, err = Open(bg, Config{Store: w.inner}); err != nil {
			t.Fatal(err)
		}
	}
	for step := 0; step < steps; step++ {
		desc, got, want := h.step()
		if !sameErr(got, want) {
			t.Fatalf("seed %d step %d: %s: got error %v, model says %v", seed, step, desc, got, want)
		}
		if gotDump, wantDump := dump(t, m), md.dump(); gotDump != wantDump {
			t.Fatalf("seed %d step %d: %s: tree differs\nmeta:\n%s\nmodel:\n%s", seed, step, desc, gotDump, wantDump)
		}
		if got, want := h.orphans(), md.orphans(); got != want {
			t.Fatalf("seed %d step %d: %s: orphans %s, model %s", seed, step, desc, got, want)
		}
		if step%25 == 0 || step == steps-1 {
			if err := verify(m); err != nil {
				t.Fatalf("seed %d step %d: %s: %v", seed, step, desc, err)
			}
		}
		if other != nil && (step%50 == 0 || step == steps-1) {
			if err := m.Flush(bg); err != nil {
				t.Fatalf("seed %d step %d: %s: flush: %v", seed, step, desc, err)
			}
			if gotDump, wantDump := dump(t, other), md.dump(); gotDump != wantDump {
				t.Fatalf("seed %d step %d: %s: committed tree differs\ncommitted:\n%s\nmodel:\n%s", seed, step, desc, gotDump, wantDump)
			}
		}
	}
	if w, ok := store.(writeBackStore); ok {
		st := w.Stats()
		t.Logf("write-back: %d deferred, %d committed, %d dropped", st.Deferred, st.Committed, st.Dropped)
		if st.Dropped != 0 {
			t.Fatalf("%d deferred transactions dropped", st.Dropped)
		}
	}
	t.Logf("%d steps, %d inodes at the end, ops: %v", steps, len(md.nodes), h.counts)
}

func sameErr(got, want error) bool {
	if want == nil || got == nil {
		return got == want
	}
	if u := errors.Unwrap(want); u != nil {
		want = u // the model reuses ValidName, whose errors wrap the sentinel
	}
	return errors.Is(got, want)
}

// model is the reference namespace: plain maps, obviously correct.
type model struct {
	nodes map[LIN]*mnode
}

type mnode struct {
	lin        LIN
	typ        FileType
	mode       uint32
	size       uint64
	links      []Link
	kids       map[string]LIN
	target     string
	xattrs     map[string]string
	hasStripes bool // a stripe was ever committed: StripeSize is set
	stripes    map[uint64]*mstripe
	opens      map[SessionID]bool
}

type mstripe struct{ gen, dataLen uint64 }

const modelStripeSize = 100

func newModel() *model {
	return &model{nodes: map[LIN]*mnode{RootLIN: {lin: RootLIN, typ: TypeDir, mode: 0o755, kids: map[string]LIN{}}}}
}

func (md *model) nlink(n *mnode) uint32 {
	if n.typ != TypeDir {
		return uint32(len(n.links))
	}
	c := uint32(2)
	for _, k := range n.kids {
		if md.nodes[k].typ == TypeDir {
			c++
		}
	}
	return c
}

func (md *model) dir(lin LIN) (*mnode, error) {
	n := md.nodes[lin]
	switch {
	case n == nil:
		return nil, ErrNotFound
	case n.typ != TypeDir:
		return nil, ErrNotDir
	}
	return n, nil
}

func (md *model) dump() string {
	var b strings.Builder
	var walk func(d *mnode, path string)
	walk = func(d *mnode, path string) {
		names := make([]string, 0, len(d.kids))
		for name := range d.kids {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			n := md.nodes[d.kids[name]]
			fmt.Fprintf(&b, "%s/%s %s lin=%d nlink=%d size=%d mode=%o", path, name, n.typ, n.lin, md.nlink(n), n.size, n.mode)
			if n.target != "" {
				fmt.Fprintf(&b, " -> %s", n.target)
			}
			if len(n.xattrs) > 0 {
				xs := make([]string, 0, len(n.xattrs))
				for x := range n.xattrs {
					xs = append(xs, x)
				}
				sort.Strings(xs)
				fmt.Fprintf(&b, " xattrs=%v", xs)
			}
			if n.hasStripes {
				fmt.Fprint(&b, " stripes=")
				idx := make([]uint64, 0, len(n.stripes))
				for i := range n.stripes {
					idx = append(idx, i)
				}
				slices.Sort(idx)
				for _, i := range idx {
					fmt.Fprintf(&b, "%d:g%d:%d,", i, n.stripes[i].gen, n.stripes[i].dataLen)
				}
			}
			b.WriteByte('\n')
			if n.typ == TypeDir {
				walk(n, path+"/"+name)
			}
		}
	}
	walk(md.nodes[RootLIN], "")
	return b.String()
}

func (md *model) orphans() string {
	var lins []LIN
	for lin, n := range md.nodes {
		if lin != RootLIN && len(n.links) == 0 {
			lins = append(lins, lin)
		}
	}
	slices.Sort(lins)
	return fmt.Sprint(lins)
}

// unlinkFrom removes the link (p, name) of n; a node left without links is
// deleted unless open.
func (md *model) unlinkFrom(p *mnode, name string, n *mnode) {
	delete(p.kids, name)
	i := slices.Index(n.links, Link{p.lin, name})
	n.links = slices.Delete(n.links, i, i+1)
	md.maybeDelete(n)
}

func (md *model) maybeDelete(n *mnode) {
	if n.lin != RootLIN && len(n.links) == 0 && (n.typ == TypeDir || len(n.opens) == 0) {
		delete(md.nodes, n.lin)
	}
}

// ancestorLoop mirrors checkNotAncestor.
func (md *model) ancestorLoop(dir, start LIN) bool {
	for cur := start; ; {
		if cur == dir {
			return true
		}
		if cur == RootLIN {
			return false
		}
		cur = md.nodes[cur].links[0].Parent
	}
}

// harness draws random operations and applies them to both sides.
type harness struct {
	t      *testing.T
	m      *Meta
	md     *model
	r      *rand.Rand
	block  uint32
	counts map[string]int
}

func (h *harness) orphans() string {
	os, err := h.m.ListOrphans(bg, 0, 1000)
	if err != nil {
		h.t.Fatal(err)
	}
	var lins []LIN
	for _, o := range os {
		lins = append(lins, o.LIN)
	}
	return fmt.Sprint(lins)
}

var modelNames = []string{"a", "b", "c", "d", "e", "f", "g"}

func (h *harness) name() string {
	if h.r.IntN(40) == 0 {
		return []string{"", ".", "..", "x/y", "n\x00", strings.Repeat("l", 256)}[h.r.IntN(6)]
	}
	return modelNames[h.r.IntN(len(modelNames))]
}

// pick returns a random LIN of the model with a type accepted by keep
// (reachable or orphan), or occasionally one that does not exist.
func (h *harness) pick(keep func(*mnode) bool) LIN {
	if h.r.IntN(30) == 0 {
		return 999999
	}
	var lins []LIN
	for lin, n := range h.md.nodes {
		if keep == nil || keep(n) {
			lins = append(lins, lin)
		}
	}
	if len(lins) == 0 {
		return 999999
	}
	slices.Sort(lins)
	return lins[h.r.IntN(len(lins))]
}

func isDir(n *mnode) bool  { return n.typ == TypeDir }
func notDir(n *mnode) bool { return n.typ != TypeDir }

func (h *harness) step() (string, error, error) {
	type opFn func() (string, error, error)
	ops := []struct {
		name   string
		weight int
		fn     opFn
	}{
		{"create", 14, h.create},
		{"mkdir", 9, h.mkdir},
		{"symlink", 3, h.symlink},
		{"link", 6, h.link},
		{"unlink", 9, h.unlink},
		{"rmdir", 6, h.rmdir},
		{"rename", 14, h.rename},
		{"chmod", 3, h.chmod},
		{"truncate", 6, h.truncate},
		{"commit", 14, h.commit},
		{"setxattr", 4, h.setxattr},
		{"removexattr", 2, h.removexattr},
		{"open", 4, h.open},
		{"release", 4, h.release},
	}
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	x := h.r.IntN(total)
	for _, o := range ops {
		if x < o.weight {
			if h.counts == nil {
				h.counts = map[string]int{}
			}
			h.counts[o.name]++
			return o.fn()
		}
		x -= o.weight
	}
	panic("unreachable")
}

func (h *harness) createAny(typ FileType, target string) (string, error, error) {
	parent, name := h.pick(isDir), h.name()
	desc := fmt.Sprintf("create %s %d/%q", typ, parent, name)
	a, got := h.m.Create(bg, parent, name, NewInode{Type: typ, Mode: 0o640, Target: target})
	want := ValidName(name)
	var p *mnode
	if want == nil {
		p, want = h.md.dir(parent)
	}
	if want == nil && p.kids[name] != 0 {
		want = ErrExists
	}
	if want == nil && got == nil {
		n := &mnode{lin: a.LIN, typ: typ, mode: 0o640, links: []Link{{parent, name}}, target: target, size: uint64(len(target))}
		if typ == TypeDir {
			n.kids = map[string]LIN{}
			if p.mode&0o2000 != 0 {
				n.mode |= 0o2000 // setgid directories pass it on
			}
		}
		h.md.nodes[a.LIN] = n
		p.kids[name] = a.LIN
	}
	return desc, got, want
}

func (h *harness) create() (string, error, error) { return h.createAny(TypeFile, "") }
func (h *harness) mkdir() (string, error, error)  { return h.createAny(TypeDir, "") }
func (h *harness) symlink() (string, error, error) {
	return h.createAny(TypeSymlink, "t"+modelNames[h.r.IntN(len(modelNames))])
}

func (h *harness) link() (string, error, error) {
	lin, parent, name := h.pick(nil), h.pick(isDir), h.name()
	desc := fmt.Sprintf("link %d as %d/%q", lin, parent, name)
	_, got := h.m.Link(bg, lin, parent, name)
	want := ValidName(name)
	n := h.md.nodes[lin]
	var p *mnode
	switch {
	case want != nil:
	case n == nil:
		want = ErrNotFound
	case n.typ == TypeDir:
		want = ErrNotPermitted
	case len(n.links) == 0:
		want = ErrNotFound
	}
	if want == nil {
		p, want = h.md.dir(parent)
	}
	if want == nil && p.kids[name] != 0 {
		want = ErrExists
	}
	if want == nil && got == nil {
		n.links = append(n.links, Link{parent, name})
		p.kids[name] = lin
	}
	return desc, got, want
}

// entry picks a directory and a name in it (usually an existing one).
func (h *harness) entry() (LIN, string) {
	parent := h.pick(isDir)
	if p := h.md.nodes[parent]; p != nil && len(p.kids) > 0 && h.r.IntN(4) > 0 {
		names := make([]string, 0, len(p.kids))
		for n := range p.kids {
			names = append(names, n)
		}
		sort.Strings(names)
		return parent, names[h.r.IntN(len(names))]
	}
	return parent, h.name()
}

func (h *harness) unlink() (string, error, error) {
	parent, name := h.entry()
	desc := fmt.Sprintf("unlink %d/%q", parent, name)
	got := h.m.Unlink(bg, parent, name)
	want := ValidName(name)
	var p *mnode
	if want == nil {
		p, want = h.md.dir(parent)
	}
	if want == nil {
		switch c := p.kids[name]; {
		case c == 0:
			want = ErrNotFound
		case h.md.nodes[c].typ == TypeDir:
			want = ErrIsDir
		}
	}
	if want == nil && got == nil {
		h.md.unlinkFrom(p, name, h.md.nodes[p.kids[name]])
	}
	return desc, got, want
}

func (h *harness) rmdir() (string, error, error) {
	parent, name := h.entry()
	desc := fmt.Sprintf("rmdir %d/%q", parent, name)
	got := h.m.Rmdir(bg, parent, name)
	want := ValidName(name)
	var p *mnode
	if want == nil {
		p, want = h.md.dir(parent)
	}
	if want == nil {
		switch c := p.kids[name]; {
		case c == 0:
			want = ErrNotFound
		case h.md.nodes[c].typ != TypeDir:
			want = ErrNotDir
		case len(h.md.nodes[c].kids) > 0:
			want = ErrNotEmpty
		}
	}
	if want == nil && got == nil {
		h.md.unlinkFrom(p, name, h.md.nodes[p.kids[name]])
	}
	return desc, got, want
}

func (h *harness) rename() (string, error, error) {
	sp, sn := h.entry()
	dp, dn := h.entry()
	if h.r.IntN(3) == 0 {
		dn = h.name()
	}
	var flags RenameFlags
	switch h.r.IntN(10) {
	case 0:
		flags = RenameNoReplace
	case 1:
		flags = RenameExchange
	}
	desc := fmt.Sprintf("rename %d/%q -> %d/%q flags %d", sp, sn, dp, dn, flags)
	got := h.m.Rename(bg, sp, sn, dp, dn, flags)
	want := h.modelRename(sp, sn, dp, dn, flags, got == nil)
	return desc, got, want
}

// modelRename mirrors Rename's checks in order, and applies the rename to the
// model if it succeeds in both.
func (h *harness) modelRename(sp LIN, sn string, dp LIN, dn string, flags RenameFlags, apply bool) error {
	md := h.md
	if err := ValidName(sn); err != nil {
		return err
	}
	if err := ValidName(dn); err != nil {
		return err
	}
	s, err := md.dir(sp)
	if err != nil {
		return err
	}
	d, err := md.dir(dp)
	if err != nil {
		return err
	}
	slin := s.kids[sn]
	if slin == 0 {
		return ErrNotFound
	}
	if sp == dp && sn == dn {
		return nil
	}
	dlin := d.kids[dn]
	switch {
	case dlin != 0 && flags&RenameNoReplace != 0:
		return ErrExists
	case dlin == 0 && flags&RenameExchange != 0:
		return ErrNotFound
	case dlin == slin:
		return nil
	}
	src, dst := md.nodes[slin], md.nodes[dlin]
	move := func(n *mnode, fp LIN, fn string, tp LIN, tn string) {
		i := slices.Index(n.links, Link{fp, fn})
		n.links[i] = Link{tp, tn}
	}
	if flags&RenameExchange != 0 {
		if sp != dp && (src.typ == TypeDir && md.ancestorLoop(slin, dp) || dst.typ == TypeDir && md.ancestorLoop(dlin, sp)) {
			return ErrRenameLoop
		}
		if apply {
			s.kids[sn], d.kids[dn] = dlin, slin
			move(src, sp, sn, dp, dn)
			move(dst, dp, dn, sp, sn)
		}
		return nil
	}
	if dst != nil {
		switch {
		case src.typ == TypeDir && dst.typ != TypeDir:
			return ErrNotDir
		case src.typ != TypeDir && dst.typ == TypeDir:
			return ErrIsDir
		case dst.typ == TypeDir && len(dst.kids) > 0:
			return ErrNotEmpty
		}
	}
	if src.typ == TypeDir && sp != dp && md.ancestorLoop(slin, dp) {
		return ErrRenameLoop
	}
	if apply {
		if dst != nil {
			md.unlinkFrom(d, dn, dst)
		}
		delete(s.kids, sn)
		d.kids[dn] = slin
		move(src, sp, sn, dp, dn)
	}
	return nil
}

func (h *harness) chmod() (string, error, error) {
	lin, mode := h.pick(nil), uint32(h.r.IntN(0o10000))
	desc := fmt.Sprintf("chmod %d %o", lin, mode)
	_, got := h.m.SetAttr(bg, lin, SetMode, Attr{Mode: mode})
	var want error
	if n := h.md.nodes[lin]; n == nil {
		want = ErrNotFound
	} else if got == nil {
		n.mode = mode
	}
	return desc, got, want
}

func (h *harness) truncate() (string, error, error) {
	lin, size := h.pick(notDir), uint64(h.r.IntN(7*modelStripeSize))
	if h.r.IntN(3) == 0 {
		size = size / modelStripeSize * modelStripeSize
	}
	desc := fmt.Sprintf("truncate %d to %d", lin, size)
	_, got := h.m.SetAttr(bg, lin, SetSize, Attr{Size: size})
	n := h.md.nodes[lin]
	var want error
	switch {
	case n == nil:
		want = ErrNotFound
	case n.typ != TypeFile:
		want = ErrInvalid
	}
	if want != nil || got != nil {
		return desc, got, want
	}
	if size < n.size && n.hasStripes {
		first := (size + modelStripeSize - 1) / modelStripeSize
		for i := range n.stripes {
			if i >= first {
				delete(n.stripes, i)
			}
		}
		if s := n.stripes[first-1]; first > 0 && s != nil && size%modelStripeSize != 0 {
			if keep := size - (first-1)*modelStripeSize; s.dataLen > keep {
				s.dataLen = keep
				s.gen++
			}
		}
	}
	n.size = size
	return desc, got, want
}

func (h *harness) commit() (string, error, error) {
	lin, idx := h.pick(notDir), uint64(h.r.IntN(6))
	n := h.md.nodes[lin]
	var expect uint64
	if n != nil && n.stripes[idx] != nil {
		expect = n.stripes[idx].gen
	}
	if h.r.IntN(6) == 0 {
		expect += uint64(1 + h.r.IntN(2))
	}
	dataLen := uint64(1 + h.r.IntN(modelStripeSize))
	d := DriveID(1 + h.r.IntN(6))
	s := Stripe{Index: idx, Protection: Mirror(2), DataLen: dataLen, Units: []Unit{
		{Drive: d, Block: h.newBlock(), Length: uint32(dataLen)},
		{Drive: d%6 + 1, Block: h.newBlock(), Length: uint32(dataLen)},
	}}
	if h.r.IntN(8) == 0 {
		s.Units[1] = Unit{} // under-protected
	}
	size := idx*modelStripeSize + dataLen
	desc := fmt.Sprintf("commit %d stripe %d expect g%d len %d", lin, idx, expect, dataLen)
	_, got := h.m.CommitStripe(bg, lin, s, expect, CommitOptions{StripeSize: modelStripeSize, Size: size})
	var want error
	switch {
	case n == nil:
		want = ErrNotFound
	case n.typ != TypeFile:
		want = ErrInvalid
	case (n.stripes[idx] == nil && expect != 0) || (n.stripes[idx] != nil && n.stripes[idx].gen != expect):
		want = ErrStripeConflict
	}
	if want == nil && got == nil {
		if n.stripes == nil {
			n.stripes = map[uint64]*mstripe{}
		}
		n.stripes[idx] = &mstripe{gen: expect + 1, dataLen: dataLen}
		n.hasStripes = true
		n.size = max(n.size, size)
	}
	return desc, got, want
}

func (h *harness) newBlock() BlockID {
	h.block++
	return BlockID{0xb, byte(h.block >> 24), byte(h.block >> 16), byte(h.block >> 8), byte(h.block)}
}

var modelXattrs = []string{"user.a", "user.b", "user.c"}

func (h *harness) setxattr() (string, error, error) {
	lin, name := h.pick(nil), modelXattrs[h.r.IntN(len(modelXattrs))]
	flags := XattrFlags(h.r.IntN(3))
	desc := fmt.Sprintf("setxattr %d %s flags %d", lin, name, flags)
	got := h.m.SetXattr(bg, lin, name, []byte(desc), flags)
	n := h.md.nodes[lin]
	var want error
	switch {
	case n == nil:
		want = ErrNotFound
	case flags == XattrCreate && n.xattrs[name] != "":
		want = ErrExists
	case flags == XattrReplace && n.xattrs[name] == "":
		want = ErrNoXattr
	}
	if want == nil && got == nil {
		if n.xattrs == nil {
			n.xattrs = map[string]string{}
		}
		n.xattrs[name] = desc
	}
	return desc, got, want
}

func (h *harness) removexattr() (string, error, error) {
	lin, name := h.pick(nil), modelXattrs[h.r.IntN(len(modelXattrs))]
	desc := fmt.Sprintf("removexattr %d %s", lin, name)
	got := h.m.RemoveXattr(bg, lin, name)
	n := h.md.nodes[lin]
	var want error
	switch {
	case n == nil:
		want = ErrNotFound
	case n.xattrs[name] == "":
		want = ErrNoXattr
	}
	if want == nil && got == nil {
		delete(n.xattrs, name)
	}
	return desc, got, want
}

func (h *harness) open() (string, error, error) {
	lin, s := h.pick(notDir), SessionID(1+h.r.IntN(2))
	desc := fmt.Sprintf("open %d by %d", lin, s)
	got := h.m.Open(bg, s, lin)
	n := h.md.nodes[lin]
	var want error
	if n == nil || (len(n.links) == 0 && len(n.opens) == 0) {
		want = ErrNotFound
	}
	if want == nil && got == nil {
		if n.opens == nil {
			n.opens = map[SessionID]bool{}
		}
		n.opens[s] = true
	}
	return desc, got, want
}

func (h *harness) release() (string, error, error) {
	lin, s := h.pick(notDir), SessionID(1+h.r.IntN(2))
	desc := fmt.Sprintf("release %d by %d", lin, s)
	got := h.m.Release(bg, s, lin)
	if n := h.md.nodes[lin]; n != nil && got == nil {
		delete(n.opens, s)
		h.md.maybeDelete(n)
	}
	return desc, got, nil
}
