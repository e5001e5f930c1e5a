package meta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/failpoint"
	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/etcdkv"
	"github.com/weftfs/weft/internal/kv/kvcache"
	"github.com/weftfs/weft/internal/kv/memkv"
)

// writeBackPair returns, over one store, a Meta with write-back (a
// mount), a plain one (a job, or fsck) and a second mount with its own
// cache and write-back: on memkv, and (unless -short) on a 3-member etcd.
// dead lists sessions that SessionAlive reports gone.
func writeBackPair(t *testing.T, dead map[SessionID]bool) map[string][3]*Meta {
	alive := func(_ context.Context, s SessionID) (bool, error) { return !dead[s], nil }
	mk := func(inner kv.Follower, plain kv.Store) [3]*Meta {
		a := newMeta(t, newWriteBackStore(t, inner))
		b, err := Open(bg, Config{Store: plain, SessionAlive: alive})
		if err != nil {
			t.Fatal(err)
		}
		c, err := Open(bg, Config{Store: newCached(t, inner), Session: testSession + 1, WriteBack: true, SessionAlive: alive})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ok(t, c.Close(bg)) })
		return [3]*Meta{a, b, c}
	}
	mem := memkv.New(kv.Options{Limits: etcdDefaultLimits})
	out := map[string][3]*Meta{"mem": mk(mem, mem)}
	if testing.Short() {
		return out
	}
	c := etcdtest.NewCluster(t, 3)
	store := func(sessionReads bool) *etcdkv.Store {
		s, err := etcdkv.New(etcdkv.Config{Client: c.Client(t), Prefix: "wb/", Options: kv.Options{Limits: etcdkv.EmbeddedLimits}, SessionReads: sessionReads})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	out["etcd"] = mk(store(true), store(false))
	return out
}

// waitReady waits until m holds dir's delegation and may defer there.
func waitReady(t *testing.T, m *Meta, dir LIN) {
	t.Helper()
	for i := 0; i < 5000; i++ {
		m.wb.mu.Lock()
		h := m.wb.held[dir]
		ready := h != nil && h.ready
		m.wb.mu.Unlock()
		if ready {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no delegation of directory LIN %d", dir)
}

// waitGiven waits until m has finished giving dir's delegation back (its
// worker forgets it after deleting the record, which is what a recaller
// waits for): until then m does not take it again.
func waitGiven(t *testing.T, m *Meta, dir LIN) {
	t.Helper()
	for i := 0; i < 5000; i++ {
		m.wb.mu.Lock()
		_, held := m.wb.held[dir]
		m.wb.mu.Unlock()
		if !held {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("directory LIN %d still held", dir)
}

// delegatedDir makes directory "d" with a file named name through a,
// whose create takes the directory's delegation, and waits until a may
// defer changes there.
func delegatedDir(t *testing.T, a *Meta, name string) (d, f Attr) {
	t.Helper()
	d = must(a.Mkdir(bg, RootLIN, "d", 0o755))
	f = must(a.Create(bg, d.LIN, name, NewInode{Mode: 0o644}))
	waitReady(t, a, d.LIN)
	return d, f
}

func (m *Meta) wbStats(t *testing.T) (deferred, dropped int64) {
	st := m.store.(*kvcache.Store).Stats()
	return st.Deferred, st.Dropped
}

// deferredBy returns how many operations m deferred while fn ran.
func (m *Meta) deferredBy(t *testing.T, fn func()) int64 {
	before, _ := m.wbStats(t)
	fn()
	after, _ := m.wbStats(t)
	return after - before
}

// untarAttrs makes on lin the changes tar makes after extracting a file or
// a directory — chown 1000:100, chmod mode, utimes mtime — and returns
// what each returned.
func untarAttrs(t *testing.T, m *Meta, lin LIN, mode uint32, mtime time.Time) [3]Attr {
	t.Helper()
	return [3]Attr{
		must(m.SetAttr(bg, lin, SetUID|SetGID, Attr{UID: 1000, GID: 100})),
		must(m.SetAttr(bg, lin, SetMode, Attr{Mode: mode})),
		must(m.SetAttr(bg, lin, SetMtime|SetAtime, Attr{Mtime: mtime, Atime: mtime})),
	}
}

// wantUntarAttrs fails unless a holds what untarAttrs set.
func wantUntarAttrs(t *testing.T, who string, a Attr, mode uint32, mtime time.Time) {
	t.Helper()
	if a.UID != 1000 || a.GID != 100 || a.Mode != mode || !a.Mtime.Equal(mtime) || !a.Atime.Equal(mtime) {
		t.Fatalf("%s: %+v, want owner 1000:100, mode %o, mtime and atime %v", who, a, mode, mtime)
	}
}

// wantCommitted fails if a dropped a deferred operation, then checks the
// namespace through b.
func wantCommitted(t *testing.T, a, b *Meta) {
	t.Helper()
	if _, dropped := a.wbStats(t); dropped != 0 {
		t.Fatalf("%d deferred operations dropped", dropped)
	}
	check(t, b)
}

// TestWriteBack: a client holding a directory's delegation acknowledges
// creates and unlinks there before committing them, and sees them at once
// itself; another client that reads or changes the directory recalls the
// delegation and then sees every acknowledged change; the namespace stays
// consistent throughout.
func TestWriteBack(t *testing.T) {
	for name, p := range writeBackPair(t, nil) {
		t.Run(name, func(t *testing.T) {
			a, b, c := p[0], p[1], p[2]
			d := must(a.Mkdir(bg, RootLIN, "d", 0o755))
			// The second mount caches a name as absent.
			_, err := c.Lookup(bg, d.LIN, "f199")
			wantErr(t, err, ErrNotFound)
			must(a.Create(bg, d.LIN, "f000", NewInode{Mode: 0o644})) // takes the delegation
			waitReady(t, a, d.LIN)
			before, _ := a.wbStats(t)
			const n = 200
			for i := 1; i < n; i++ {
				must(a.Create(bg, d.LIN, fmt.Sprintf("f%03d", i), NewInode{Mode: 0o644}))
			}
			for i := 0; i < n; i += 2 {
				ok(t, a.Unlink(bg, d.LIN, fmt.Sprintf("f%03d", i)))
			}
			deferred, _ := a.wbStats(t)
			if got := deferred - before; got != n-1+n/2 {
				t.Fatalf("%d operations deferred, want %d", got, n-1+n/2)
			}
			// The holder sees its changes whether committed or not.
			if _, err := a.Lookup(bg, d.LIN, "f199"); err != nil {
				t.Fatal(err)
			}
			_, err = a.Lookup(bg, d.LIN, "f198")
			wantErr(t, err, ErrNotFound)
			// A synchronous change of a new file commits the deferred ones
			// first (its inode must exist).
			ok(t, a.SetXattr(bg, must(a.Lookup(bg, d.LIN, "f001")).LIN, "user.k", []byte("v"), 0))
			// Another mount recalls the delegation and sees everything,
			// although its cache held the name as absent: once it has
			// caught up with what was committed before (Sync, as an open
			// does), it sees the delegation, which was committed before
			// any of the changes it covers were acknowledged.
			ok(t, c.Sync(bg))
			if _, err := c.Lookup(bg, d.LIN, "f199"); err != nil {
				t.Fatalf("other mount's lookup of an acknowledged create: %v", err)
			}
			if ents := readAll(t, c, d.LIN); len(ents) != n/2 {
				t.Fatalf("other mount lists %d entries, want %d", len(ents), n/2)
			}
			// So does a client without a cache.
			if _, err := b.Lookup(bg, d.LIN, "f199"); err != nil {
				t.Fatalf("other client's lookup of an acknowledged create: %v", err)
			}
			ents := readAll(t, b, d.LIN)
			if len(ents) != n/2 {
				t.Fatalf("other client lists %d entries, want %d", len(ents), n/2)
			}
			// Both mounts and the plain client change the directory in
			// turns: each recalls what another took.
			for i := 0; i < 20; i++ {
				must(b.Create(bg, d.LIN, fmt.Sprintf("b%02d", i), NewInode{Mode: 0o644}))
				must(a.Create(bg, d.LIN, fmt.Sprintf("a%02d", i), NewInode{Mode: 0o644}))
				must(c.Create(bg, d.LIN, fmt.Sprintf("c%02d", i), NewInode{Mode: 0o644}))
				ok(t, c.Unlink(bg, d.LIN, fmt.Sprintf("a%02d", i)))
			}
			ok(t, a.Flush(bg))
			ok(t, c.Flush(bg))
			if ents := readAll(t, b, d.LIN); len(ents) != n/2+40 {
				t.Fatalf("at the end %d entries, want %d", len(ents), n/2+40)
			}
			wantCommitted(t, a, b)
		})
	}
}

// readAll lists directory dir through m.
func readAll(t *testing.T, m *Meta, dir LIN) []DirEntry {
	t.Helper()
	var out []DirEntry
	for after := ""; ; {
		ents, next, err := m.ReadDir(bg, dir, after, 37)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ents...)
		if next == "" {
			return out
		}
		after = next
	}
}

// testClock is a Meta's clock (Config.Now) that moves only when the test
// moves it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock {
	return &testClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// logBuffer collects a Meta's log.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// onClock opens another plain client of m's store, with m's session
// check, on clk, logging to logs.
func onClock(t *testing.T, m *Meta, clk *testClock, logs *logBuffer) *Meta {
	t.Helper()
	mc, err := Open(bg, Config{Store: m.store, SessionAlive: m.alive, Now: clk.Now, Log: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// TestDelegationOfDeadSession: the delegation record of a client that
// crashed (its session is gone) is taken back by the next client that
// needs the directory, at once — because the session is gone, not after
// RecallTimeout: that client's clock stands still, so the timeout never
// passes; what the crashed client had not committed is simply not there.
func TestDelegationOfDeadSession(t *testing.T) {
	const crashed SessionID = 0xdead
	for name, p := range writeBackPair(t, map[SessionID]bool{crashed: true}) {
		t.Run(name, func(t *testing.T) {
			var logs logBuffer
			b := onClock(t, p[1], newTestClock(), &logs)
			d := must(b.Mkdir(bg, RootLIN, "d", 0o755))
			ok(t, b.store.Update(bg, func(tx kv.Tx) error {
				tx.Put(keyDeleg(d.LIN), encodeDeleg(delegation{session: crashed}))
				return nil
			}))
			// A guard against a hang, not a timing: with the clock
			// standing still, only the session check can end the recall.
			ctx, cancel := context.WithTimeout(bg, time.Minute)
			defer cancel()
			if _, err := b.Create(ctx, d.LIN, "f", NewInode{Mode: 0o644}); err != nil {
				t.Fatalf("create in a directory delegated to a crashed client: %v\n%s", err, logs.String())
			}
			if out := logs.String(); !strings.Contains(out, "its session has ended") {
				t.Fatalf("the delegation was not taken back for its ended session; log:\n%s", out)
			}
			check(t, b)
		})
	}
}

// TestRecallTimeout: a live holder that does not give a delegation back
// (a client that hangs) keeps the directory until RecallTimeout has
// passed on the recalling client's clock; then the recall takes it.
func TestRecallTimeout(t *testing.T) {
	const hung SessionID = 0x4a1
	for name, p := range writeBackPair(t, nil) {
		t.Run(name, func(t *testing.T) {
			var logs logBuffer
			clk := newTestClock()
			b := onClock(t, p[1], clk, &logs)
			d := must(b.Mkdir(bg, RootLIN, "d", 0o755))
			ok(t, b.store.Update(bg, func(tx kv.Tx) error {
				tx.Put(keyDeleg(d.LIN), encodeDeleg(delegation{session: hung}))
				return nil
			}))
			ctx, cancel := context.WithTimeout(bg, time.Minute) // against a hang
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := b.Create(ctx, d.LIN, "f", NewInode{Mode: 0o644})
				done <- err
			}()
			// The recall asks the holder first (the record's flag)...
			for {
				var cur *delegation
				ok(t, b.store.View(bg, func(tx kv.Tx) error {
					var err error
					cur, err = getDeleg(tx, d.LIN)
					return err
				}))
				if cur == nil || cur.recalled {
					break
				}
				select {
				case err := <-done:
					t.Fatalf("the create ended (%v) before recalling the delegation", err)
				case <-ctx.Done():
					t.Fatal("the recall never flagged the delegation")
				case <-time.After(time.Millisecond):
				}
			}
			// ...and waits while the clock stays short of the timeout.
			clk.Add(RecallTimeout)
			select {
			case err := <-done:
				t.Fatalf("the create ended (%v) with RecallTimeout not passed yet; log:\n%s", err, logs.String())
			default:
			}
			clk.Add(time.Millisecond)
			if err := <-done; err != nil {
				t.Fatalf("create after RecallTimeout passed: %v", err)
			}
			if out := logs.String(); !strings.Contains(out, "not given back within "+RecallTimeout.String()) {
				t.Fatalf("the delegation was not taken back for its timeout; log:\n%s", out)
			}
			check(t, b)
		})
	}
}

// TestDeferredUnlinkOfFileOpenElsewhere: a deferred unlink decides at its
// commit, on current data, whether the file goes or stays as an orphan: a
// file another client opened meanwhile stays until that client releases
// it.
func TestDeferredUnlinkOfFileOpenElsewhere(t *testing.T) {
	for name, p := range writeBackPair(t, nil) {
		t.Run(name, func(t *testing.T) {
			a, b := p[0], p[1]
			d, f := delegatedDir(t, a, "f")
			// b opens the file by its LIN (as a client that looked it up
			// earlier); a, not knowing yet, unlinks it.
			ok(t, b.Open(bg, 9, f.LIN))
			ok(t, a.Sync(bg))
			before, _ := a.wbStats(t)
			ok(t, a.Unlink(bg, d.LIN, "f"))
			if after, _ := a.wbStats(t); after != before+1 {
				t.Fatal("the unlink was not deferred")
			}
			ok(t, a.Flush(bg))
			in, err := b.GetInode(bg, f.LIN)
			if err != nil || in.Nlink != 0 {
				t.Fatalf("open file after the unlink: %+v, %v; want it kept with no links", in, err)
			}
			ok(t, b.Release(bg, 9, f.LIN))
			if _, err := b.GetInode(bg, f.LIN); !errors.Is(err, ErrNotFound) {
				t.Fatalf("after the last release: %v, want ErrNotFound", err)
			}
			check(t, b)
		})
	}
}

// TestWriteBackInExistingDirectory: in a directory another client made
// (and filled), the mount, once it holds the delegation, has the entries
// loaded whole and defers creates there too.
func TestWriteBackInExistingDirectory(t *testing.T) {
	for name, p := range writeBackPair(t, nil) {
		t.Run(name, func(t *testing.T) {
			a, b := p[0], p[1]
			d := must(b.Mkdir(bg, RootLIN, "d", 0o755))
			for i := 0; i < 50; i++ {
				must(b.Create(bg, d.LIN, fmt.Sprintf("old%02d", i), NewInode{Mode: 0o644}))
			}
			ok(t, a.Sync(bg))
			must(a.Create(bg, d.LIN, "new00", NewInode{Mode: 0o644})) // takes the delegation
			waitReady(t, a, d.LIN)
			// The entries load in the background: create until one
			// create is deferred; from then on every one must be.
			for j := 0; ; j++ {
				before, _ := a.wbStats(t)
				must(a.Create(bg, d.LIN, fmt.Sprintf("probe%04d", j), NewInode{Mode: 0o644}))
				if after, _ := a.wbStats(t); after > before {
					break
				}
				if j > 1000 {
					t.Fatal("no create deferred in a delegated directory")
				}
				time.Sleep(time.Millisecond)
			}
			before, _ := a.wbStats(t)
			for i := 0; i < 50; i++ {
				must(a.Create(bg, d.LIN, fmt.Sprintf("new%02d", i+1), NewInode{Mode: 0o644}))
			}
			var err error
			_, err = a.Create(bg, d.LIN, "old07", NewInode{Mode: 0o644})
			wantErr(t, err, ErrExists)
			if after, _ := a.wbStats(t); after-before != 50 {
				t.Fatalf("%d creates deferred, want 50", after-before)
			}
			ok(t, a.Flush(bg))
			check(t, b)
		})
	}
}

// TestDeferredSetAttr: the chown, chmod and utimes of a file a client has
// just created by a deferred create (an untar's) are deferred with it,
// and seen by others once they recall the directory; those of a file
// others may reach — created before the delegation, renamed, hard-linked,
// or once the directory was given back — are synchronous.
func TestDeferredSetAttr(t *testing.T) {
	for name, p := range writeBackPair(t, nil) {
		t.Run(name, func(t *testing.T) {
			a, b := p[0], p[1]
			d, old := delegatedDir(t, a, "old")
			mtime := time.Unix(1_600_000_000, 0)
			var f Attr
			if n := a.deferredBy(t, func() {
				f = must(a.Create(bg, d.LIN, "f", NewInode{Mode: 0o600}))
				wantUntarAttrs(t, "attributes returned", untarAttrs(t, a, f.LIN, 0o755, mtime)[2], 0o755, mtime)
			}); n != 4 {
				t.Fatalf("%d operations deferred, want 4 (the create and its 3 attribute changes)", n)
			}
			deferred, _ := a.wbStats(t)
			// Not deferred: a file created before the delegation was
			// taken (others may hold it), a size change, a directory.
			must(a.SetAttr(bg, old.LIN, SetMode, Attr{Mode: 0o600}))
			g := must(a.Create(bg, d.LIN, "g", NewInode{Mode: 0o644}))
			must(a.SetAttr(bg, g.LIN, SetSize, Attr{Size: 10}))
			if n, _ := a.wbStats(t); n-deferred != 1 {
				t.Fatalf("%d operations deferred after the first 4, want 1 (g's create)", n-deferred)
			}
			// Renamed or linked, a file is no longer only this client's.
			h := must(a.Create(bg, d.LIN, "h", NewInode{Mode: 0o644}))
			ok(t, a.Rename(bg, d.LIN, "h", RootLIN, "h", 0))
			l := must(a.Create(bg, d.LIN, "l", NewInode{Mode: 0o644}))
			must(a.Link(bg, l.LIN, RootLIN, "l"))
			if n := a.deferredBy(t, func() {
				must(a.SetAttr(bg, h.LIN, SetMode, Attr{Mode: 0o600}))
				must(a.SetAttr(bg, l.LIN, SetMode, Attr{Mode: 0o600}))
			}); n != 0 {
				t.Fatalf("%d attribute changes of a renamed or linked file deferred", n)
			}
			// Another client sees the deferred changes once it reads the
			// directory (recalling it) or the holder flushes.
			wantUntarAttrs(t, "the other client sees", must(b.Lookup(bg, d.LIN, "f")), 0o755, mtime)
			// Given back, the directory's new files are everyone's.
			k := must(a.Create(bg, d.LIN, "k", NewInode{Mode: 0o644}))
			if a.deferredBy(t, func() { must(a.SetAttr(bg, k.LIN, SetMode, Attr{Mode: 0o600})) }) != 0 {
				t.Fatalf("an attribute change deferred after the directory was recalled")
			}
			wantCommitted(t, a, b)
		})
	}
}

// TestDeferredDirectory: a directory made in one this client holds is
// delegated from birth (the creates in it are deferred at once) and its
// own attribute changes are deferred like a new file's (an untar sets each
// directory's owner, mode and times when it leaves it); another client
// sees them all once it reaches the directory (a recall). A directory made
// where the client holds nothing is not.
func TestDeferredDirectory(t *testing.T) {
	for name, p := range writeBackPair(t, nil) {
		t.Run(name, func(t *testing.T) {
			a, b := p[0], p[1]
			d, _ := delegatedDir(t, a, "old")
			var sub, deep Attr
			if n := a.deferredBy(t, func() {
				sub = must(a.Mkdir(bg, d.LIN, "sub", 0o750))
				deep = must(a.Mkdir(bg, sub.LIN, "deep", 0o750))
			}); n != 2 {
				t.Fatalf("%d operations deferred, want 2 (a mkdir in a delegated directory, one in the directory it made)", n)
			}
			waitReady(t, a, sub.LIN)
			if got := must(a.GetAttr(bg, d.LIN)).Nlink; got != 3 {
				t.Fatalf("the holder sees link count %d for the parent of a deferred mkdir, want 3", got)
			}
			mtime := time.Unix(1_600_000_000, 0)
			if n := a.deferredBy(t, func() {
				must(a.Create(bg, sub.LIN, "f", NewInode{Mode: 0o644}))
				cur := must(a.GetAttr(bg, sub.LIN)) // its mtime: f's create
				got := untarAttrs(t, a, sub.LIN, 0o700, mtime)
				if !got[0].Mtime.Equal(cur.Mtime) || !got[1].Mtime.Equal(cur.Mtime) {
					t.Fatalf("chown and chmod of the directory returned mtimes %v and %v, it is %v", got[0].Mtime, got[1].Mtime, cur.Mtime)
				}
				if got[2].Type != TypeDir || got[2].Nlink != 3 { // "deep" is in it
					t.Fatalf("attributes returned: %+v", got[2])
				}
				wantUntarAttrs(t, "attributes returned", got[2], 0o700, mtime)
			}); n != 4 {
				t.Fatalf("%d operations deferred, want 4 (a create in the new directory and its 3 attribute changes)", n)
			}
			wantUntarAttrs(t, "the other client sees", must(b.Lookup(bg, d.LIN, "sub")), 0o700, mtime)
			must(b.Lookup(bg, sub.LIN, "f"))
			if got := must(b.Lookup(bg, sub.LIN, "deep")); got.LIN != deep.LIN || got.Nlink != 2 {
				t.Fatalf("the other client sees %+v for the nested directory, want LIN %d with 2 links", got, deep.LIN)
			}
			if got := must(b.GetAttr(bg, d.LIN)).Nlink; got != 3 {
				t.Fatalf("the other client sees link count %d for the parent, want 3", got)
			}
			if got := must(b.GetAttr(bg, sub.LIN)).Nlink; got != 3 {
				t.Fatalf("the other client sees link count %d for the new directory, want 3", got)
			}

			top := must(a.Mkdir(bg, RootLIN, "top", 0o755))
			if a.deferredBy(t, func() { must(a.SetAttr(bg, top.LIN, SetMode, Attr{Mode: 0o700})) }) != 0 {
				t.Fatalf("an attribute change of a directory made outside a delegation deferred")
			}
			wantCommitted(t, a, b)
		})
	}
}

// TestDeferredStripes: the first commit of a new file's stripes (what
// close after an untar's write commits) is deferred with the file's
// create (both commit in the write-back's next batch); a rewrite, and the
// stripes of a file others may reach, commit at once; another client sees
// the deferred stripes once it reaches the file through its directory (a
// recall), and the namespace checks clean.
func TestDeferredStripes(t *testing.T) {
	for name, p := range writeBackPair(t, nil) {
		t.Run(name, func(t *testing.T) {
			a, b := p[0], p[1]
			d, old := delegatedDir(t, a, "old")
			f := must(a.Create(bg, d.LIN, "f", NewInode{Mode: 0o644}))
			before, _ := a.wbStats(t)
			ss := must(a.CommitStripes(bg, f.LIN, []StripeUpdate{{Stripe: stripe(0, 1, 1)}, {Stripe: stripe(1, 2, 1)}}, CommitOptions{StripeSize: 100, Size: 150}))
			if len(ss) != 2 || ss[0].Gen != 1 || ss[1].Gen != 1 {
				t.Fatalf("deferred commit returned %+v", ss)
			}
			if n, _ := a.wbStats(t); n-before != 1 {
				t.Fatalf("%d transactions deferred for the first commit of a new file's stripes, want 1", n-before)
			}
			// The holder reads them at once.
			if got := must(a.GetStripes(bg, f.LIN, 0, 10)); len(got) != 2 || must(a.GetAttr(bg, f.LIN)).Size != 150 {
				t.Fatalf("the holder reads %+v", got)
			}
			// Not deferred: a rewrite (generation 1 to 2), a new stripe of
			// a file created before the delegation, a hole.
			n0, _ := a.wbStats(t)
			must(a.CommitStripe(bg, f.LIN, stripe(0, 3, 2), 1, CommitOptions{}))
			must(a.CommitStripe(bg, old.LIN, stripe(0, 1, 4), 0, CommitOptions{StripeSize: 100, Size: 100}))
			g := must(a.Create(bg, d.LIN, "g", NewInode{Mode: 0o644}))
			must(a.CommitStripes(bg, g.LIN, []StripeUpdate{{Stripe: Stripe{Index: 0}, Drop: true}}, CommitOptions{StripeSize: 100}))
			// Once committed, stripe 0 of f is not absent any more: a
			// second first-commit of it fails its compare-and-swap.
			_, err := a.CommitStripe(bg, f.LIN, stripe(0, 4, 5), 0, CommitOptions{})
			wantErr(t, err, ErrStripeConflict)
			if n, _ := a.wbStats(t); n-n0 != 1 {
				t.Fatalf("%d transactions deferred, want 1 (g's create)", n-n0)
			}
			e := must(b.Lookup(bg, d.LIN, "f")) // recalls the directory
			if got := must(b.GetStripes(bg, e.LIN, 0, 10)); len(got) != 2 || got[0].Gen != 2 || e.Size != 150 {
				t.Fatalf("after the recall the other client reads %+v, size %d", got, e.Size)
			}
			wantCommitted(t, a, b)
		})
	}
}

// TestCheckReadsTouchedDelegations: between its full looks (one per
// delegationsIdle on the Meta's clock), the delegations worker reads only
// the records the cache saw change: a change elsewhere costs it no read of
// the twenty records held; a recall of one is answered (the recalling
// mount's create does not wait out RecallTimeout, and the holder drops
// just that one); the next full look gives back the ones gone idle.
func TestCheckReadsTouchedDelegations(t *testing.T) {
	mem := memkv.New(kv.Options{Limits: etcdDefaultLimits})
	ok(t, Format(bg, mem, FormatOptions{Pool: "p0"}))
	clk := newTestClock()
	store := newCached(t, mem)
	a := must(Open(bg, Config{Store: store, Session: testSession, WriteBack: true, Now: clk.Now, LINBatch: 64}))
	t.Cleanup(func() { ok(t, a.Close(bg)) })
	c := must(Open(bg, Config{Store: newCached(t, mem), Session: testSession + 1, WriteBack: true}))
	t.Cleanup(func() { ok(t, c.Close(bg)) })
	b := must(Open(bg, Config{Store: mem}))

	const n = 20
	var dirs []LIN
	for i := 0; i < n; i++ {
		d := must(a.Mkdir(bg, RootLIN, fmt.Sprintf("d%02d", i), 0o755))
		must(a.Create(bg, d.LIN, "f", NewInode{Mode: 0o644})) // takes d's delegation
		waitReady(t, a, d.LIN)
		dirs = append(dirs, d.LIN)
	}
	heldBy := func(m *Meta) int {
		m.wb.mu.Lock()
		defer m.wb.mu.Unlock()
		return len(m.wb.held)
	}
	clk.Add(delegationsIdle)
	a.wb.check(bg, false) // a full look: none idle yet
	if got := heldBy(a); got != n {
		t.Fatalf("%d delegations held after a full look, want %d", got, n)
	}

	must(b.Mkdir(bg, RootLIN, "elsewhere", 0o755))
	ok(t, a.Sync(bg))
	reads := func() int64 { st := store.Stats(); return st.Hits + st.Misses }
	before := reads()
	a.wb.check(bg, false)
	if got := reads() - before; got != 0 {
		t.Fatalf("check read %d keys after a change elsewhere, want none", got)
	}

	// c recalls one: a's worker, woken by the change of its record,
	// gives it back; a's clock stands still, so no full look helps it.
	start := time.Now()
	must(c.Create(bg, dirs[3], "g", NewInode{Mode: 0o644}))
	if took := time.Since(start); took >= RecallTimeout {
		t.Fatalf("the recall took %v: the holder never gave the delegation back", took)
	}
	// a drops it from its set just after deleting the record.
	for i := 0; i < 5000 && heldBy(a) != n-1; i++ {
		time.Sleep(time.Millisecond)
	}
	a.wb.mu.Lock()
	_, still := a.wb.held[dirs[3]]
	a.wb.mu.Unlock()
	if still || heldBy(a) != n-1 {
		t.Fatalf("after the recall of one: still held %v, %d held; want %d", still, heldBy(a), n-1)
	}

	clk.Add(DelegationIdle + delegationsIdle)
	a.wb.check(bg, false)
	if got := heldBy(a); got != 0 {
		t.Fatalf("%d delegations held after a full look past DelegationIdle, want none", got)
	}
}

// TestDeferredStripesNotWaitedFor: the first commit of a new file's
// stripes returns before the write-back commits it (close does not wait
// for etcd), the holder reads them at once, nobody else sees the file
// until the commit, and an fsync (Flush) commits it. With commits failing
// (kvcache/before-commit), a commit that waited would never return.
func TestDeferredStripesNotWaitedFor(t *testing.T) {
	for name, p := range writeBackPair(t, nil) {
		t.Run(name, func(t *testing.T) {
			a, b := p[0], p[1]
			d, _ := delegatedDir(t, a, "old")
			ok(t, a.Flush(bg))
			if err := failpoint.Enable("kvcache/before-commit", "error"); err != nil {
				t.Fatal(err)
			}
			defer failpoint.Disable("kvcache/before-commit")
			f := must(a.Create(bg, d.LIN, "f", NewInode{Mode: 0o644}))
			ctx, cancel := context.WithTimeout(bg, 5*time.Second)
			defer cancel()
			ss, err := a.CommitStripes(ctx, f.LIN, []StripeUpdate{{Stripe: stripe(0, 1, 1)}}, CommitOptions{StripeSize: 100, Size: 60})
			if err != nil || len(ss) != 1 || ss[0].Gen != 1 {
				t.Fatalf("the deferred commit returned %+v, %v: it waited for the write-back", ss, err)
			}
			if got := must(a.GetStripes(bg, f.LIN, 0, 10)); len(got) != 1 || must(a.GetAttr(bg, f.LIN)).Size != 60 {
				t.Fatalf("the holder reads %+v", got)
			}
			if _, err := b.GetAttr(bg, f.LIN); !errors.Is(err, ErrNotFound) {
				t.Fatalf("another client found the uncommitted file: %v", err)
			}
			failpoint.Disable("kvcache/before-commit")
			ok(t, a.Flush(bg))
			if got := must(b.GetStripes(bg, f.LIN, 0, 10)); len(got) != 1 || got[0].Gen != 1 || must(b.GetAttr(bg, f.LIN)).Size != 60 {
				t.Fatalf("after the flush the other client reads %+v", got)
			}
			wantCommitted(t, a, b)
		})
	}
}

// TestCoveredOpen: a client holding a directory's delegation opens the
// files linked there alone without a round trip (OpenAttr answers from
// its cache), and still sees every change committed before the open: a
// change of such a file by another mount, or by a client without a
// session, recalls the delegation first, however the changer reached the
// file (here by its LIN, as with a kernel's cached dentry). A file linked
// twice is not covered; a restripe, which leaves the data as it is, does
// not recall.
func TestCoveredOpen(t *testing.T) {
	for name, p := range writeBackPair(t, nil) {
		t.Run(name, func(t *testing.T) {
			a, b, c := p[0], p[1], p[2]
			d, f := delegatedDir(t, a, "f")
			must(a.CommitStripe(bg, f.LIN, stripe(0, 1, 1), 0, CommitOptions{StripeSize: 100, Size: 100}))
			ok(t, a.Flush(bg))
			opens := func(m *Meta, lin LIN) (Attr, int64) {
				t.Helper()
				c0, _ := m.OpenCounts()
				at := must(m.OpenAttr(bg, lin))
				c1, _ := m.OpenCounts()
				return at, c1 - c0
			}
			if at, cov := opens(a, f.LIN); cov != 1 || at.Size != 100 {
				t.Fatalf("the holder's open: size %d, covered %d, want 100 and 1", at.Size, cov)
			}
			// A restripe by a client without a session leaves it held.
			must(b.CommitStripe(bg, f.LIN, stripe(0, 5, 2), 1, CommitOptions{Restripe: true}))
			if _, cov := opens(a, f.LIN); cov != 1 {
				t.Fatal("a restripe took the delegation back")
			}
			// Another mount changes the file by its LIN: it recalls the
			// directory first, so the holder's next open sees the change.
			must(c.SetAttr(bg, f.LIN, SetSize, Attr{Size: 30}))
			if at, cov := opens(a, f.LIN); at.Size != 30 || cov != 0 {
				t.Fatalf("after another mount's truncate the holder opens size %d (covered %d), want 30 after a sync", at.Size, cov)
			}
			// Taken again by a create there (after the cooldown), then a
			// client without a session changes the file: recalled too.
			a.wb.mu.Lock()
			a.wb.coolFor = 0
			a.wb.mu.Unlock()
			waitGiven(t, a, d.LIN)
			must(a.Create(bg, d.LIN, "g", NewInode{Mode: 0o644}))
			waitReady(t, a, d.LIN)
			if _, cov := opens(a, f.LIN); cov != 1 {
				t.Fatal("not covered after the delegation was taken again")
			}
			must(b.SetAttr(bg, f.LIN, SetMode, Attr{Mode: 0o600}))
			if at, cov := opens(a, f.LIN); at.Mode != 0o600 || cov != 0 {
				t.Fatalf("after a chmod by a client without a session the holder opens mode %o (covered %d)", at.Mode, cov)
			}
			// A file linked twice is not covered.
			waitGiven(t, a, d.LIN)
			must(a.Create(bg, d.LIN, "h", NewInode{Mode: 0o644}))
			waitReady(t, a, d.LIN)
			h := must(a.Lookup(bg, d.LIN, "h"))
			must(a.Link(bg, h.LIN, RootLIN, "h2"))
			if _, cov := opens(a, h.LIN); cov != 0 {
				t.Fatal("a file linked twice was opened covered")
			}
			wantCommitted(t, a, b)
		})
	}
}
