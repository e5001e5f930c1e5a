package tests

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/tests/harness"
)

// Tiering end to end. Two pools: fast on three ssd drives of 64 MiB
// (mirror:2), capacity on three hdd drives (ec:2+1). The default rule
// places new files in fast; filling fast past 80 % and installing a
// policy whose 'cold' rule has THRESHOLD(80,40) WEIGHT(KB_ALLOCATED)
// starts a tier job by itself (a pool-threshold event) that moves the
// files of highest weight to capacity until fast is at or below 40 %,
// while a reader and a writer keep working on them without an error;
// policy test, run just before, predicted exactly the files moved; the
// DELETE rule removes exactly its files; the LIST rule's file lists its
// own; a bad rule is refused with its line and column.
func TestTierMovesByThreshold(t *testing.T) {
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
	// fast's own thresholds stay out of the way: the rule's decide.
	weft("pool", "create", "fast", "--protection", "mirror:2", "--class", "ssd", "--threshold", "98,95")
	weft("pool", "create", "capacity", "--protection", "ec:2+1", "--class", "hdd")
	for _, n := range []string{"n1", "n2", "n3"} {
		weft("drive", "add", n, filepath.Join(c.Dir, "nodes", n, "ssd"), "--pool", "fast", "--class", "ssd", "--capacity", "64MiB")
		weft("drive", "add", n, filepath.Join(c.Dir, "nodes", n, "hdd"), "--pool", "capacity", "--class", "hdd", "--capacity", "128MiB")
	}
	// A pool of a class takes drives of that class only.
	if out, code := c.Weft("drive", "add", "n1", filepath.Join(c.Dir, "nodes", "n1", "wrong"), "--pool", "capacity"); code == 0 || !strings.Contains(out, "pool capacity holds hdd drives and this one is ssd") {
		t.Fatalf("an ssd drive added to the hdd pool: exit %d:\n%s", code, out)
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	weft("policy", "install", write("place.pol", "RULE 'default' SET POOL 'fast'\n"))

	// A bad rule: refused with its line and column, nothing installed.
	bad := write("bad.pol", "RULE 'default' SET POOL 'fast'\nRULE 'cold' MIGRATE FROM POOL 'fast' THRESHOLD(80) TO POOL 'capacity'\n")
	if out, code := c.Weft("policy", "install", bad); code == 0 || !strings.Contains(out, "line 2, column") {
		t.Fatalf("a bad rule: exit %d:\n%s", code, out)
	}

	poolOf := func(p string) client.FileLayout { return layout(t, c, p) }
	// The files: three big ones (24, 20 and 16 MiB: 48, 40 and 32 MiB
	// in fast as mirror:2), ten of 1.5 MiB, and /scratch with four .tmp
	// files and one to keep: 155 MiB of fast's 192, 81 % with the
	// blocks' headers. Moving big24 leaves 56 %, big20 then 35 %: the
	// plan stops there, and big16 stays. (A drive keeps room for a
	// client's copy-on-write rewrite of a stripe meanwhile: 12 MiB.)
	content := map[string][]byte{}
	put := func(name string, size int) {
		p := filepath.Join(c.Mount, name)
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rand.Uint32())
		}
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, data, 0o644))
		content[name] = data
	}
	put("big24", 24<<20)
	put("big20", 20<<20)
	put("big16", 16<<20)
	for i := range 10 {
		put(fmt.Sprintf("small/%02d", i), 1536<<10)
	}
	for i := range 4 {
		put(fmt.Sprintf("scratch/run%d.tmp", i), 512<<10)
	}
	put("scratch/keep.dat", 512<<10)
	for name := range content {
		poll(t, 10*time.Second, name+" placed in fast", func() bool { return poolOf(filepath.Join(c.Mount, name)).Pool == "fast" })
	}
	fastUse := func() float64 {
		var pools []cluster.Pool
		weftJSON(t, c, &pools, "pool", "list")
		for _, p := range pools {
			if p.Name == "fast" && p.TotalBytes > 0 {
				return float64(p.UsedBytes) * 100 / float64(p.TotalBytes)
			}
		}
		t.Fatalf("no pool fast with a size")
		return 0
	}
	poll(t, 20*time.Second, "fast past 80% (drives publish their use)", func() bool { return fastUse() > 80 })
	// The prediction and the job's plan must see the same use: let the
	// multiscan the drive adds started end, and the pool's use settle
	// (the drainers free replaced blocks within seconds; nodes publish
	// their drives' use every few).
	poll(t, 2*time.Minute, "no job running", func() bool {
		var jobs []job.JobView
		weftJSON(t, c, &jobs, "job", "list")
		for _, j := range jobs {
			if !j.State.Terminal() {
				return false
			}
		}
		return true
	})
	last := -1.0
	poll(t, time.Minute, "fast's use settled", func() bool {
		u := fastUse()
		same := u == last
		last = u
		if !same {
			time.Sleep(3 * time.Second)
		}
		return same
	})

	full := write("full.pol", `RULE 'default' SET POOL 'fast'
RULE 'scratch' DELETE WHERE PATH_NAME LIKE '/scratch/%' AND NAME LIKE '%.tmp'
RULE 'cold' MIGRATE FROM POOL 'fast' THRESHOLD(80,40) WEIGHT(KB_ALLOCATED) TO POOL 'capacity'
RULE 'big' LIST 'big' WHERE FILE_SIZE > 8M
`)
	// The prediction, before the policy is installed (and the event
	// starts the job).
	var rep admin.PolicyTestReport
	weftJSON(t, c, &rep, "policy", "test", full, "--files")
	ruleOf := func(name string) admin.RuleResult {
		for _, r := range rep.Rules {
			if r.Rule == name {
				return r
			}
		}
		t.Fatalf("policy test has no rule %s", name)
		return admin.RuleResult{}
	}
	predicted := ruleOf("cold").Samples
	slices.Sort(predicted)
	if want := []string{"/big20", "/big24"}; !slices.Equal(predicted, want) {
		t.Fatalf("policy test predicts %v to move, want %v (the heaviest until 40%%): %+v", predicted, want, ruleOf("cold"))
	}
	delPred := ruleOf("scratch").Samples
	slices.Sort(delPred)

	weft("policy", "install", full)
	var tierJob job.JobID
	poll(t, 30*time.Second, "a pool-threshold event starts a tier job", func() bool {
		var evs []job.Event
		weftJSON(t, c, &evs, "job", "events", "list")
		for _, e := range evs {
			if e.Kind == job.EventPoolThreshold && e.Subject == "pool fast" && e.Job != 0 {
				tierJob = e.Job
				return true
			}
		}
		return false
	})

	// The job plans from the pools' usage as it finds it, and the writer
	// below makes copy-on-write garbage that its node's drainer frees a
	// second later: started before the plan, it can raise fast's usage
	// past what the prediction saw (a loaded CI run: 87 % planned against
	// 81 %, a third file moved). The clients run during the move.
	poll(t, time.Minute, "the tier job's plan phase ends", func() bool {
		var v job.JobView
		weftJSON(t, c, &v, "job", "view", tierJob.String())
		if v.State.Terminal() {
			return true
		}
		for _, ph := range v.Phases {
			if ph.Name == "plan" {
				return ph.State == job.PhaseSucceeded
			}
		}
		return false
	})

	// A reader and a writer on the files that move, until the job ends.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ioErrs []error
	reads, writes := 0, 0
	fail := func(err error) {
		mu.Lock()
		ioErrs = append(ioErrs, err)
		mu.Unlock()
	}
	movers := []string{"big24", "big20", "big16"}
	wg.Add(2)
	go func() { // the reader: whole files, compared
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := movers[i%len(movers)]
			got, err := os.ReadFile(filepath.Join(c.Mount, name))
			if err == nil && !bytes.Equal(got, content[name]) {
				err = fmt.Errorf("%s read back different", name)
			}
			if err != nil {
				fail(err)
				return
			}
			reads++
		}
	}()
	// The writer rewrites 64 KiB pieces with the same bytes, open to
	// close, as fast as it can with 20 ms between: each rewrite replaces a
	// whole 1 MiB stripe copy-on-write (2 MiB of new blocks in mirror:2)
	// while the old blocks wait a second for their node's drainer, more
	// than a pool 81 % full (12 MiB free per drive) holds; a flush short of
	// space waits for the drainers rather than failing.
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			name := movers[i%2] // the two that move
			off := rand.IntN(len(content[name])-65536) &^ 4095
			f, err := os.OpenFile(filepath.Join(c.Mount, name), os.O_WRONLY, 0)
			if err == nil {
				_, err = f.WriteAt(content[name][off:off+65536], int64(off))
				if cerr := f.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				fail(fmt.Errorf("writing %s: %w", name, err))
				return
			}
			writes++
		}
	}()
	j := c.WaitJob(tierJob, 3*time.Minute)
	close(stop)
	wg.Wait()
	if j.State != job.Succeeded {
		t.Fatalf("tier job %d: %+v", tierJob, j)
	}
	if len(ioErrs) > 0 || reads == 0 || writes == 0 {
		drives, _ := c.Weft("drive", "list")
		logs, _ := filepath.Glob(filepath.Join(c.Dir, "*.log"))
		more, _ := filepath.Glob(filepath.Join(c.Dir, "*", "*.log"))
		nodes, _ := filepath.Glob(filepath.Join(c.Dir, "nodes", "*", "*.log"))
		for _, p := range append(append(logs, more...), nodes...) {
			data, _ := os.ReadFile(p)
			for _, ln := range strings.Split(string(data), "\n") {
				if strings.Contains(ln, "capacity of") || strings.Contains(ln, "bytes for a block") {
					t.Logf("%s: %s", filepath.Base(p), ln)
				}
			}
		}
		t.Logf("drives:\n%s", drives)
		t.Fatalf("clients during the tier job: %d reads, %d writes, errors %v", reads, writes, ioErrs)
	}
	t.Logf("weft job view %d:\n%s\nweft job events list:\n%s", tierJob, weft("job", "view", tierJob.String()), weft("job", "events", "list"))

	// What moved is what was predicted: every unit on capacity's drives.
	var drives []cluster.Drive
	weftJSON(t, c, &drives, "drive", "list")
	capDrives := map[meta.DriveID]bool{}
	for _, d := range drives {
		if d.Pool == "capacity" {
			capDrives[meta.DriveID(d.ID)] = true
		}
	}
	var moved []string
	for name := range content {
		p := filepath.Join(c.Mount, name)
		if strings.HasSuffix(name, ".tmp") {
			continue
		}
		l := poolOf(p)
		if l.Pool != "capacity" {
			continue
		}
		moved = append(moved, "/"+name)
		for _, s := range l.Stripes {
			for _, u := range s.Units {
				if !capDrives[u.Drive] {
					t.Errorf("%s stripe %d unit %d on drive %d, not one of capacity's", name, s.Index, u.Unit, u.Drive)
				}
			}
		}
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, content[name]) {
			t.Errorf("%s after the move: %v (equal %v)", name, err, bytes.Equal(got, content[name]))
		}
	}
	slices.Sort(moved)
	if !slices.Equal(moved, predicted) {
		t.Fatalf("the job moved %v, policy test predicted %v", moved, predicted)
	}

	// DELETE removed exactly its files.
	var deleted []string
	for name := range content {
		if _, err := os.Stat(filepath.Join(c.Mount, name)); os.IsNotExist(err) {
			deleted = append(deleted, "/"+name)
		}
	}
	slices.Sort(deleted)
	if want := []string{"/scratch/run0.tmp", "/scratch/run1.tmp", "/scratch/run2.tmp", "/scratch/run3.tmp"}; !slices.Equal(deleted, want) || !slices.Equal(delPred, want) {
		t.Fatalf("deleted %v, predicted %v, want %v", deleted, delPred, want)
	}

	// The LIST rule's file.
	list, err := os.ReadFile(filepath.Join(c.Mount, ".weft", "lists", fmt.Sprintf("big.%d", tierJob)))
	if err != nil || string(list) != "/big24\n/big20\n/big16\n" {
		t.Fatalf("list big: %q, %v", list, err)
	}

	// fast ends at or below 40 % once the old blocks are deleted.
	poll(t, 30*time.Second, "fast at or below 40%", func() bool { return fastUse() <= 40 })
	t.Logf("fast at %.1f%% after the job; %d reads and %d writes ran meanwhile", fastUse(), reads, writes)
}
