package meta

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/etcdkv"
	"github.com/weftfs/weft/internal/kv/kvcache"
	"github.com/weftfs/weft/internal/kv/memkv"
)

var bg = context.Background()

// etcdDefaultLimits are etcd's defaults: meta must work within them.
var etcdDefaultLimits = kv.Limits{MaxOps: 128, MaxBytes: 1536 * 1024}

// backend makes fresh stores of one kind.
type backend struct {
	name     string
	newStore func(tb testing.TB) kv.Store
}

// backends returns the backends a suite runs on: memkv with etcd's default
// limits, and (unless -short) an embedded etcd member, each store under its
// own prefix, with etcd's default limits too.
func backends(t *testing.T) []backend {
	bs := []backend{{"mem", func(tb testing.TB) kv.Store {
		return memkv.New(kv.Options{Limits: etcdDefaultLimits})
	}}, {"memcache", func(tb testing.TB) kv.Store {
		return newCached(tb, memkv.New(kv.Options{Limits: etcdDefaultLimits}))
	}}, {"writeback", func(tb testing.TB) kv.Store {
		return newWriteBackStore(tb, memkv.New(kv.Options{Limits: etcdDefaultLimits}))
	}}}
	if testing.Short() {
		return bs
	}
	var cli *clientv3.Client
	var n atomic.Int64
	return append(bs, backend{"etcd", func(tb testing.TB) kv.Store {
		if cli == nil {
			cli = etcdtest.New(t)
		}
		s, err := etcdkv.New(etcdkv.Config{Client: cli, Prefix: fmt.Sprintf("meta%d/", n.Add(1)), Options: kv.Options{Limits: etcdDefaultLimits}})
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}})
}

// newCached returns a kvcache over inner, configured as for a mount, once
// it is ready (so that tests exercise the cache, not its fallback).
func newCached(tb testing.TB, inner kv.Follower) *kvcache.Store {
	preload, presume := CacheRanges()
	c, err := kvcache.New(kvcache.Config{Inner: inner, Preload: preload, Presume: presume})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	if err := c.Ready(ctx); err != nil {
		tb.Fatalf("kvcache never became ready: %v (%s)", err, c)
	}
	return c
}

// writeBackStore marks a store for a Meta with write-back (newMeta).
type writeBackStore struct {
	*kvcache.Store
	inner kv.Follower
}

// newWriteBackStore returns a kvcache over inner for a Meta with write-back.
func newWriteBackStore(tb testing.TB, inner kv.Follower) writeBackStore {
	return writeBackStore{Store: newCached(tb, inner), inner: inner}
}

// testSession is the session of write-back Metas in tests.
const testSession SessionID = 0x7e57

// newMeta formats store and opens a Meta on it (with write-back and a
// session for a writeBackStore; Close runs at the test's end).
func newMeta(tb testing.TB, store kv.Store) *Meta {
	tb.Helper()
	if err := Format(bg, store, FormatOptions{Pool: "p0"}); err != nil {
		tb.Fatal(err)
	}
	cfg := Config{Store: store, LINBatch: 64}
	if w, ok := store.(writeBackStore); ok {
		cfg.Store, cfg.Session, cfg.WriteBack = w.Store, testSession, true
	}
	m, err := Open(bg, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := m.Close(bg); err != nil {
			tb.Error(err)
		}
	})
	return m
}

// countingStore counts transactions and attempts, to see conflicts.
type countingStore struct {
	kv.Store
	calls, attempts atomic.Int64
}

func (c *countingStore) Update(ctx context.Context, fn func(kv.Tx) error) error {
	c.calls.Add(1)
	return c.Store.Update(ctx, func(tx kv.Tx) error { c.attempts.Add(1); return fn(tx) })
}

// check verifies the whole namespace against its invariants — what fsck
// will check — and fails the test on the first violation.
func check(tb testing.TB, m *Meta) {
	tb.Helper()
	if err := verify(m); err != nil {
		tb.Fatal(err)
	}
}

func verify(m *Meta) error {
	var inodes = map[LIN]Inode{}
	for from := LIN(1); ; {
		page, next, err := m.ScanInodes(bg, from, 0, 100)
		if err != nil {
			return err
		}
		for _, in := range page {
			inodes[in.LIN] = in
		}
		if next == 0 {
			break
		}
		from = next
	}
	// Entries ↔ back-pointers, link counts, types.
	seenLinks := map[Link]LIN{}
	subdirs := map[LIN]uint32{}
	for lin, in := range inodes {
		if in.Type != TypeDir {
			continue
		}
		for after := ""; ; {
			ents, next, err := m.ReadDir(bg, lin, after, 50)
			if err != nil {
				return err
			}
			for _, e := range ents {
				child, ok := inodes[e.LIN]
				if !ok {
					return fmt.Errorf("entry %q in %d points to missing LIN %d", e.Name, lin, e.LIN)
				}
				if child.Type != e.Type {
					return fmt.Errorf("entry %q in %d has type %s, inode %d is %s", e.Name, lin, e.Type, e.LIN, child.Type)
				}
				seenLinks[Link{lin, e.Name}] = e.LIN
				if e.Type == TypeDir {
					subdirs[lin]++
				}
			}
			if next == "" {
				break
			}
			after = next
		}
	}
	usage := map[string]Usage{}
	orphans := map[LIN]bool{}
	for after := LIN(0); ; {
		os, err := m.ListOrphans(bg, after, 100)
		if err != nil {
			return err
		}
		for _, o := range os {
			orphans[o.LIN] = true
			after = o.LIN
		}
		if len(os) == 0 {
			break
		}
	}
	nLinks := 0
	for lin, in := range inodes {
		u := usage[in.Pool]
		u.Inodes++
		if in.Type == TypeFile {
			u.Bytes += int64(in.Size)
		}
		u.Allocated += int64(in.Allocated)
		usage[in.Pool] = u
		for _, l := range in.Links {
			if seenLinks[l] != lin {
				return fmt.Errorf("LIN %d has back-pointer %+v without a matching entry", lin, l)
			}
		}
		nLinks += len(in.Links)
		switch {
		case in.Type == TypeDir && lin == RootLIN:
			if len(in.Links) != 0 || in.Nlink != 2+subdirs[lin] {
				return fmt.Errorf("root: %d links, nlink %d, %d subdirs", len(in.Links), in.Nlink, subdirs[lin])
			}
		case in.Type == TypeDir:
			if len(in.Links) != 1 || in.Nlink != 2+subdirs[lin] {
				return fmt.Errorf("dir %d: %d back-pointers, nlink %d, %d subdirs", lin, len(in.Links), in.Nlink, subdirs[lin])
			}
		default:
			if int(in.Nlink) != len(in.Links) {
				return fmt.Errorf("LIN %d: nlink %d, %d back-pointers", lin, in.Nlink, len(in.Links))
			}
		}
		if in.Nlink == 0 && !orphans[lin] {
			return fmt.Errorf("LIN %d has no links and no orphan record", lin)
		}
		if in.Nlink > 0 && orphans[lin] {
			return fmt.Errorf("LIN %d has links and an orphan record", lin)
		}
		if err := verifyStripes(m, in); err != nil {
			return err
		}
	}
	// No index entry outlives its file.
	for after := (StripeRef{}); ; {
		refs, err := m.ListUnderProtected(bg, after, 100)
		if err != nil {
			return err
		}
		for _, r := range refs {
			if _, ok := inodes[r.LIN]; !ok {
				return fmt.Errorf("protection index names LIN %d stripe %d, which does not exist", r.LIN, r.Index)
			}
			after = r
		}
		if len(refs) < 100 {
			break
		}
	}
	err := m.eachIndexed(bg, pfxLost, 0, func(p kv.KV) (bool, error) {
		if _, ok := inodes[linAt(p.Key, 1)]; !ok {
			return false, fmt.Errorf("lost-data list names LIN %d, which does not exist", linAt(p.Key, 1))
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if nLinks != len(seenLinks) {
		return fmt.Errorf("%d entries, %d back-pointers", len(seenLinks), nLinks)
	}
	st, err := m.StatFS(bg)
	if err != nil {
		return err
	}
	for p, u := range usage {
		if st.Pools[p] != u {
			return fmt.Errorf("pool %s usage %+v, inodes sum to %+v", p, st.Pools[p], u)
		}
	}
	if len(st.Pools) != len(usage) {
		return fmt.Errorf("usage pools %v, inodes in %v", st.Pools, usage)
	}
	return nil
}

func verifyStripes(m *Meta, in Inode) error {
	var alloc uint64
	drives := map[DriveID]bool{}
	exists := map[uint64]bool{}
	missing := map[uint64]bool{}
	for from := uint64(0); ; {
		ss, err := m.GetStripes(bg, in.LIN, from, 64)
		if err != nil {
			return err
		}
		for _, s := range ss {
			if s.DataLen > in.StripeSize {
				return fmt.Errorf("LIN %d stripe %d: DataLen %d > stripe size %d", in.LIN, s.Index, s.DataLen, in.StripeSize)
			}
			alloc += unitBytes(s.Units)
			for _, u := range s.Units {
				if u.Placed() {
					drives[u.Drive] = true
				}
			}
			exists[s.Index] = true
			if s.Missing() > 0 {
				missing[s.Index] = true
			}
			from = s.Index + 1
		}
		if len(ss) == 0 {
			break
		}
	}
	if alloc != in.Allocated {
		return fmt.Errorf("LIN %d: Allocated %d, stripes hold %d", in.LIN, in.Allocated, alloc)
	}
	if len(drives) != len(in.WDL) {
		return fmt.Errorf("LIN %d: WDL %v, stripes use %v", in.LIN, in.WDL, drives)
	}
	for _, d := range in.WDL {
		if !drives[d] {
			return fmt.Errorf("LIN %d: WDL has drive %d, no stripe uses it", in.LIN, d)
		}
	}
	// The protection index holds every stripe with units not placed (and
	// those committed below their target), and names only stripes that
	// exist; so does the lost-data list.
	refs, err := m.ListUnderProtected(bg, StripeRef{LIN: in.LIN - 1, Index: math.MaxUint64}, 1000)
	if err != nil {
		return err
	}
	indexed := map[uint64]bool{}
	for _, r := range refs {
		if r.LIN != in.LIN {
			continue
		}
		indexed[r.Index] = true
		if !exists[r.Index] {
			return fmt.Errorf("LIN %d: protection index names stripe %d, which does not exist", in.LIN, r.Index)
		}
	}
	for idx := range missing {
		if !indexed[idx] {
			return fmt.Errorf("LIN %d: stripe %d has units not placed and no protection index entry", in.LIN, idx)
		}
	}
	lost, err := m.ListLost(bg, in.LIN-1, 1)
	if err != nil {
		return err
	}
	for _, f := range lost {
		for _, l := range f.Stripes {
			if f.LIN == in.LIN && !exists[l.Index] {
				return fmt.Errorf("LIN %d: lost-data list names stripe %d, which does not exist", in.LIN, l.Index)
			}
		}
	}
	return nil
}

// walkTree reads the tree below the root depth first, in name order,
// calling visit with each entry's path, the entry, and its inode (or the
// error reading it); it descends into an entry when visit says so.
func walkTree(tb testing.TB, m *Meta, visit func(path string, e DirEntry, in Inode, err error) (descend bool)) {
	tb.Helper()
	var walk func(dir LIN, path string)
	walk = func(dir LIN, path string) {
		for after := ""; ; {
			ents, next, err := m.ReadDir(bg, dir, after, 100)
			if err != nil {
				tb.Fatal(err)
			}
			for _, e := range ents {
				in, err := m.GetInode(bg, e.LIN)
				if visit(path+"/"+e.Name, e, in, err) {
					walk(e.LIN, path+"/"+e.Name)
				}
			}
			if next == "" {
				return
			}
			after = next
		}
	}
	walk(RootLIN, "")
}

// dump renders the tree below root, one line per path, for comparisons.
func dump(tb testing.TB, m *Meta) string {
	tb.Helper()
	var b strings.Builder
	walkTree(tb, m, func(p string, e DirEntry, in Inode, err error) bool {
		if err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s lin=%d nlink=%d size=%d mode=%o", p, in.Type, in.LIN, in.Nlink, in.Size, in.Mode)
		if in.Target != "" {
			fmt.Fprintf(&b, " -> %s", in.Target)
		}
		if len(in.Xattrs) > 0 {
			fmt.Fprintf(&b, " xattrs=%v", in.Xattrs)
		}
		if in.StripeSize > 0 {
			ss, err := m.GetStripes(bg, in.LIN, 0, 1000)
			if err != nil {
				tb.Fatal(err)
			}
			fmt.Fprint(&b, " stripes=")
			for _, s := range ss {
				fmt.Fprintf(&b, "%d:g%d:%d,", s.Index, s.Gen, s.DataLen)
			}
		}
		b.WriteByte('\n')
		return e.Type == TypeDir
	})
	return b.String()
}
