package tests

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/tests/harness"
)

// The pool policy end to end: a policy with a mistake is refused with its
// line and column; an installed one places new files through the mount
// at once (first matching rule; a pool with no drives refuses the create
// with ENOSPC); a new version applies without a remount; history lists
// the versions; policy test predicts per-rule counts.
func TestPolicyPlacesNewFiles(t *testing.T) {
	t.Parallel()
	c := harness.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 2, Mount: true})
	weft := func(args ...string) string {
		t.Helper()
		out, code := c.Weft(args...)
		if code != 0 {
			t.Fatalf("weft %s: exit %d:\n%s", strings.Join(args, " "), code, out)
		}
		return out
	}
	weft("pool", "create", "fast", "--protection", "mirror:2")
	weft("pool", "create", "empty", "--protection", "mirror:2")
	for _, n := range []string{"n1", "n2"} {
		weft("drive", "add", n, filepath.Join(c.Dir, "nodes", n, "fast-disk"), "--pool", "fast")
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}

	bad := write("bad.pol", "RULE 'tars' SET POOL 'default' WHERE NAME LIKE '%.tar'\nRULE 'all' SET POOL 'fsat'\n")
	out, code := c.Weft("policy", "install", bad)
	if code != 1 || !strings.Contains(out, "line 2, column 21: pool 'fsat' does not exist") {
		t.Fatalf("a bad policy: exit %d:\n%s", code, out)
	}

	good := write("good.pol", `-- archives to the default (ec:4+2) pool, the rest to fast
RULE 'tars' SET POOL 'default' WHERE NAME LIKE '%.tar'
RULE 'void' SET POOL 'empty' WHERE NAME LIKE '%.void'
RULE 'all' SET POOL 'fast'
`)
	if out := weft("policy", "install", good, "--comment", "first"); !strings.Contains(out, "policy version 1 installed: 3 rules") {
		t.Fatalf("install: %s", out)
	}
	poolOf := func(p string) string {
		t.Helper()
		var l client.FileLayout
		out := weft("file", "info", p, "--json")
		must(t, json.Unmarshal([]byte(out), &l))
		return l.Pool
	}
	// The mount follows the install through its watch: the first file
	// created after it is placed by it (nothing to wait for but the
	// watch's delivery, which poll allows for).
	probe := filepath.Join(c.Mount, "probe")
	poll(t, 10*time.Second, "the mount follows the installed policy", func() bool {
		must(t, os.WriteFile(probe, []byte("x"), 0o644))
		pool := poolOf(probe)
		must(t, os.Remove(probe))
		return pool == "fast"
	})
	must(t, os.MkdirAll(filepath.Join(c.Mount, "proj"), 0o755))
	files := map[string]string{"a.dat": "fast", "b.dat": "fast", "proj/c.dat": "fast", "x.tar": "default", "proj/y.tar": "default"}
	for name, want := range files {
		p := filepath.Join(c.Mount, name)
		must(t, os.WriteFile(p, []byte(strings.Repeat(name, 1000)), 0o644))
		if got := poolOf(p); got != want {
			t.Errorf("%s is in pool %s, want %s", name, got, want)
		}
	}
	_, err := os.Create(filepath.Join(c.Mount, "nowhere.void"))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("a file placed in a pool without drives: %v, want ENOSPC", err)
	}

	out = weft("policy", "history", "--json")
	var hist []cluster.PolicyVersion
	must(t, json.Unmarshal([]byte(out), &hist))
	if len(hist) != 1 || hist[0].Rules != 3 || hist[0].Comment != "first" || !strings.HasPrefix(hist[0].By, "admin:") {
		t.Fatalf("history: %s", out)
	}
	if out := weft("policy", "show"); !strings.Contains(out, "-- archives to the default") {
		t.Fatalf("show: %s", out)
	}

	// policy test predicts: 2 tars listed, 3 files elsewhere than a
	// policy putting everything on default would want.
	try := write("try.pol", "RULE 'l' LIST 'tars' WHERE NAME LIKE '%.tar'\nRULE 'proj' LIST 'proj' WHERE PATH_NAME LIKE '/proj/%'\nRULE 'd' SET POOL 'default'\n")
	out = weft("policy", "test", try, "--json")
	var rep admin.PolicyTestReport
	must(t, json.Unmarshal([]byte(out), &rep))
	if !rep.Complete || rep.Files != 5 || rep.Rules[0].Selected != 2 || rep.Rules[1].Selected != 2 || rep.Rules[2].Selected != 5 || rep.Rules[2].Elsewhere != 3 {
		t.Fatalf("policy test: %s", out)
	}
	out = weft("policy", "test", try, "--path", "/proj", "--json")
	must(t, json.Unmarshal([]byte(out), &rep))
	if rep.Files != 2 || rep.Rules[0].Selected != 1 {
		t.Fatalf("policy test --path /proj: %s", out)
	}
	t.Logf("policy test: %d inodes in %.3fs", rep.Scanned, rep.Seconds)
	// What an administrator sees (docs/admin-guide.md quotes it).
	t.Logf("weft policy install bad.pol:\n%s\nweft policy history:\n%s\nweft policy test try.pol:\n%s",
		func() string { o, _ := c.Weft("policy", "install", bad); return o }(), weft("policy", "history"), weft("policy", "test", try))

	// A new version applies without a remount.
	weft("policy", "install", write("v2.pol", "RULE 'all' SET POOL 'default'\n"))
	poll(t, 10*time.Second, "the mount follows version 2", func() bool {
		must(t, os.WriteFile(probe, []byte("x"), 0o644))
		pool := poolOf(probe)
		must(t, os.Remove(probe))
		return pool == "default"
	})
	if out := weft("policy", "show", "--version", "1"); !strings.Contains(out, "RULE 'void'") {
		t.Fatalf("show --version 1: %s", out)
	}
}
