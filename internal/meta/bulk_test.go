package meta

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/memkv"
)

// bulkCall is one call of a bulk scenario: a Create (ni set) or a Link of
// the inode made by call target.
type bulkCall struct {
	parent int // index of the call that made the parent; -1: root, -2-i: setup directory i
	name   string
	ni     NewInode
	link   bool
	target int // for a link: the call that made the inode
}

// bulkScenario returns n random calls over the setup directories: nested
// directories, files, symlinks, device nodes, hard links to files made
// earlier (by this batch or an earlier one), names unique
// per directory so that no call fails.
func bulkScenario(seed uint64, n, setup int) []bulkCall {
	r := rand.New(rand.NewPCG(seed, 7))
	var calls []bulkCall
	dirs := []int{-1}
	for i := range setup {
		dirs = append(dirs, -2-i)
	}
	var files []int
	for i := range n {
		c := bulkCall{parent: dirs[r.IntN(len(dirs))], name: fmt.Sprintf("n%d", i)}
		switch k := r.IntN(20); {
		case k < 4:
			c.ni = NewInode{Type: TypeDir, Mode: 0o755}
			if k == 0 {
				c.ni.Pool, c.ni.Protection = "p1", EC(4, 2)
			}
			dirs = append(dirs, i)
		case k < 6 && len(files) > 0:
			c.link, c.target = true, files[r.IntN(len(files))]
		case k == 6:
			c.ni = NewInode{Type: TypeSymlink, Mode: 0o777, Target: "../t" + c.name}
		case k == 7:
			c.ni = NewInode{Type: TypeCharDev, Mode: 0o600, Rdev: 0x0103}
		default:
			c.ni = NewInode{Mode: 0o644}
			files = append(files, i)
		}
		calls = append(calls, c)
	}
	return calls
}

// bulkSetup makes the scenario's setup directories (one setgid, one in
// pool p2) and files through Meta and returns the directories' LINs.
func bulkSetup(t *testing.T, m *Meta, setup int) []LIN {
	t.Helper()
	var lins []LIN
	for i := range setup {
		ni := NewInode{Type: TypeDir, Mode: 0o755}
		switch i % 3 {
		case 1:
			ni.Mode |= 0o2000
		case 2:
			ni.Pool = "p2"
		}
		a := must(m.Create(WithCaller(bg, Caller{UID: 7, GID: 70}), RootLIN, fmt.Sprintf("setup%d", i), ni))
		must(m.Create(bg, a.LIN, "old", NewInode{Mode: 0o600}))
		lins = append(lins, a.LIN)
	}
	return lins
}

// scenarioMetas formats a store and opens two Metas on it: one for the
// setup, one for the calls (so that the calls' LINs start at a fresh
// reservation, as a Bulk's do). Their clock stands at at, or with tick
// moves on a second at each reading.
func scenarioMetas(t *testing.T, store kv.Store, at time.Time, tick bool) (setup, calls *Meta) {
	t.Helper()
	ok(t, Format(bg, store, FormatOptions{Pool: "p0", Now: at}))
	now := at
	clock := func() time.Time {
		if tick {
			now = now.Add(time.Second)
		}
		return now
	}
	open := func() *Meta { return must(Open(bg, Config{Store: store, LINBatch: 64, Now: clock})) }
	return open(), open()
}

// TestBulkSameAsCalls runs random scenarios once call by call (Meta.Create
// and Meta.Link) and once through a Bulk with several batch sizes, at one
// fixed clock, and compares every record of the two stores: they must be
// byte for byte the same, but for the usage shards (a batch's deltas go
// to one shard), which must sum to the same usage. With batches of one
// call the clock ticks at each reading, so that the times each call sets
// are compared too.
func TestBulkSameAsCalls(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		seed         uint64
		n, setup     int
		batch        int
		limits       kv.Limits
		wantMultiple bool
		tick         bool
	}{
		{seed: 1, n: 40, setup: 3, batch: 1000},
		{seed: 2, n: 300, setup: 4, batch: 7, wantMultiple: true},
		{seed: 3, n: 500, setup: 2, batch: 256, limits: etcdDefaultLimits, wantMultiple: true},
		{seed: 4, n: 200, setup: 3, batch: 1, wantMultiple: true, tick: true},
	} {
		t.Run(fmt.Sprintf("seed%d-batch%d", tc.seed, tc.batch), func(t *testing.T) {
			calls := bulkScenario(tc.seed, tc.n, tc.setup)

			one := memkv.New(kv.Options{Limits: tc.limits})
			setupA, ma := scenarioMetas(t, one, at, tc.tick)
			dirsA := bulkSetup(t, setupA, tc.setup)
			lins := make([]LIN, len(calls))
			parentOf := func(c bulkCall, dirs []LIN) LIN {
				switch {
				case c.parent == -1:
					return RootLIN
				case c.parent < -1:
					return dirs[-2-c.parent]
				}
				return lins[c.parent]
			}
			for i, c := range calls {
				ctx := WithCaller(bg, Caller{UID: uint32(100 + i%3), GID: 10})
				if c.link {
					must(ma.Link(ctx, lins[c.target], parentOf(c, dirsA), c.name))
					continue
				}
				lins[i] = must(ma.Create(ctx, parentOf(c, dirsA), c.name, c.ni)).LIN
			}

			bulk := memkv.New(kv.Options{Limits: tc.limits})
			setupB, mb := scenarioMetas(t, bulk, at, tc.tick)
			dirsB := bulkSetup(t, setupB, tc.setup)
			b := mb.NewBulk(BulkOptions{Batch: tc.batch, LINBatch: 64})
			for i, c := range calls {
				ctx := WithCaller(bg, Caller{UID: uint32(100 + i%3), GID: 10})
				if c.link {
					ok(t, b.Link(ctx, lins[c.target], parentOf(c, dirsB), c.name))
					continue
				}
				lin := must(b.Create(ctx, parentOf(c, dirsB), c.name, c.ni))
				if lin != lins[i] {
					t.Fatalf("call %d: bulk gave LIN %d, Create gave %d", i, lin, lins[i])
				}
			}
			ok(t, b.Flush(bg))

			st := b.Stats()
			var wantInodes, wantLinks int64
			for _, c := range calls {
				if c.link {
					wantLinks++
				} else {
					wantInodes++
				}
			}
			if st.Inodes != wantInodes || st.Links != wantLinks || st.Dirs+st.Files != st.Inodes {
				t.Errorf("stats %+v, want %d inodes and %d links", st, wantInodes, wantLinks)
			}
			if tc.wantMultiple != (st.Transactions > 1) {
				t.Errorf("%d transactions for %d calls in batches of %d", st.Transactions, len(calls), tc.batch)
			}
			if diff := diffRecords(t, one, bulk); diff != "" {
				t.Fatalf("records differ (call by call -, bulk +):\n%s", diff)
			}
			sa, sb := must(ma.StatFS(bg)), must(mb.StatFS(bg))
			if fmt.Sprint(sa) != fmt.Sprint(sb) {
				t.Fatalf("StatFS: call by call %+v, bulk %+v", sa, sb)
			}
			check(t, mb)
		})
	}
}

// records returns every key and value of store but the usage shards.
func records(t *testing.T, store kv.Store) []kv.KV {
	t.Helper()
	var out []kv.KV
	ok(t, store.View(bg, func(tx kv.Tx) error {
		out = nil
		for start := []byte{0}; start != nil; {
			page, next, err := tx.Scan(start, []byte{0xff}, 1000)
			if err != nil {
				return err
			}
			for _, p := range page {
				if p.Key[0] != pfxUsage {
					out = append(out, p)
				}
			}
			start = next
		}
		return nil
	}))
	return out
}

// diffRecords lists the records that differ between two stores.
func diffRecords(t *testing.T, a, b kv.Store) string {
	ra, rb := records(t, a), records(t, b)
	var d strings.Builder
	i, j := 0, 0
	for (i < len(ra) || j < len(rb)) && d.Len() < 4000 {
		switch {
		case j >= len(rb) || i < len(ra) && bytes.Compare(ra[i].Key, rb[j].Key) < 0:
			fmt.Fprintf(&d, "- %q = %x\n", ra[i].Key, ra[i].Value)
			i++
		case i >= len(ra) || bytes.Compare(rb[j].Key, ra[i].Key) < 0:
			fmt.Fprintf(&d, "+ %q = %x\n", rb[j].Key, rb[j].Value)
			j++
		default:
			if !bytes.Equal(ra[i].Value, rb[j].Value) {
				fmt.Fprintf(&d, "- %q = %x\n+ %q = %x\n", ra[i].Key, ra[i].Value, rb[j].Key, rb[j].Value)
			}
			i++
			j++
		}
	}
	return d.String()
}

// TestBulkErrors checks what a call refuses at once (the Bulk stays
// usable) and what a batch refuses (nothing of the batch is written, and
// the Bulk is done).
func TestBulkErrors(t *testing.T) {
	store := memkv.New(kv.Options{Limits: etcdDefaultLimits})
	m := newMeta(t, store)
	taken := must(m.Create(bg, RootLIN, "taken", NewInode{}))
	olddir := must(m.Mkdir(bg, RootLIN, "olddir", 0o755))

	b := m.NewBulk(BulkOptions{})
	d := must(b.Mkdir(bg, RootLIN, "d", 0o755))
	f := must(b.Create(bg, d, "f", NewInode{}))
	_, err := b.Create(bg, d, "f", NewInode{})
	wantErr(t, err, ErrExists)
	_, err = b.Create(bg, f, "x", NewInode{})
	wantErr(t, err, ErrNotDir)
	wantErr(t, b.Link(bg, d, RootLIN, "dirlink"), ErrNotPermitted)
	_, err = b.Create(bg, d, "a/b", NewInode{})
	wantErr(t, err, ErrInvalid)
	wantErr(t, b.Link(bg, f, d, ""), ErrInvalid)
	ok(t, b.Link(bg, f, d, "f2"))
	ok(t, b.Flush(bg))
	if st := b.Stats(); st.Inodes != 2 || st.Links != 1 || st.Transactions != 1 {
		t.Fatalf("stats %+v", st)
	}
	a := must(m.GetAttr(bg, f))
	if a.Nlink != 2 {
		t.Fatalf("linked file: nlink %d", a.Nlink)
	}

	// What only the store knows fails the batch, and the Bulk after it.
	for _, tc := range []struct {
		name string
		call func(b *Bulk) error
		want error
	}{
		{"taken", func(b *Bulk) error { _, err := b.Create(bg, RootLIN, "taken", NewInode{}); return err }, ErrExists},
		{"no parent", func(b *Bulk) error { _, err := b.Create(bg, 999999, "x", NewInode{}); return err }, ErrNotFound},
		{"parent a file", func(b *Bulk) error { _, err := b.Create(bg, taken.LIN, "x", NewInode{}); return err }, ErrNotDir},
		{"link a directory", func(b *Bulk) error { return b.Link(bg, olddir.LIN, RootLIN, "x") }, ErrNotPermitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := records(t, store)
			b := m.NewBulk(BulkOptions{})
			must(b.Mkdir(bg, RootLIN, "new-"+strings.ReplaceAll(tc.name, " ", "-"), 0o755))
			ok(t, tc.call(b))
			err := b.Flush(bg)
			wantErr(t, err, tc.want)
			// The batch wrote nothing; only the LIN reservation moved.
			after := records(t, store)
			if len(after) != len(before) {
				t.Fatalf("a failed batch wrote: %d records before, %d after", len(before), len(after))
			}
			_, err2 := b.Create(bg, RootLIN, "later", NewInode{})
			wantErr(t, err2, tc.want)
			if b.Stats().Transactions != 0 {
				t.Fatalf("stats %+v after a failed batch", b.Stats())
			}
		})
	}
	check(t, m)
}

// TestBulkLINs checks that a Bulk's LINs come from the shared counter:
// a client creating meanwhile never gets one of them.
func TestBulkLINs(t *testing.T) {
	store := memkv.New(kv.Options{})
	m := newMeta(t, store)
	other := must(Open(bg, Config{Store: store, LINBatch: 8}))
	b := m.NewBulk(BulkOptions{Batch: 3, LINBatch: 5})
	used := map[LIN]string{}
	for i := range 40 {
		lin := must(b.Create(bg, RootLIN, fmt.Sprintf("b%d", i), NewInode{}))
		a := must(other.Create(bg, RootLIN, fmt.Sprintf("o%d", i), NewInode{}))
		for _, u := range []struct {
			lin LIN
			by  string
		}{{lin, "bulk"}, {a.LIN, "client"}} {
			if by, dup := used[u.lin]; dup {
				t.Fatalf("LIN %d handed out to the %s and the %s", u.lin, by, u.by)
			}
			used[u.lin] = u.by
		}
	}
	ok(t, b.Flush(bg))
	bound := must(m.LINBound(bg))
	for lin := range used {
		if lin >= bound {
			t.Fatalf("LIN %d at or above the counter %d", lin, bound)
		}
	}
	check(t, m)
}
