package tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/tests/harness"
)

// mediascan finds a byte flipped in one stored block, on the node that
// serves the block's drive, restripes the stripe away from it, and reports
// it in the per-drive table; every file still reads back.
func TestMediaScan(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.Both, func(t *testing.T, m harness.Mode) {
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 4, Mount: true})
		ctx := context.Background()
		files := map[string][]byte{}
		for i, n := range []int{8*unit + 3, 3 * unit, 300 << 10, 5000} {
			p := filepath.Join(c.Mount, fmt.Sprintf("m%d", i))
			files[p] = randBytes(uint64(700+i), n)
			writeFile(t, p, files[p])
		}
		big := filepath.Join(c.Mount, "m0")
		u := layout(t, c, big).Stripes[1].Units[2]
		drives, err := c.Admin.Drives(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var dpath, dnode string
		nodeOf := map[string]string{}
		for _, d := range drives {
			nodeOf[fmt.Sprintf("d%d", uint32(d.ID))] = d.Node
			if uint32(d.ID) == uint32(u.Drive) {
				dpath, dnode = d.Path, d.Node
			}
		}
		if len(drives) != 12 || dpath == "" || dnode != u.Node {
			t.Fatalf("drives %d; the unit's drive d%d at %q on %q (layout says %q)", len(drives), uint32(u.Drive), dpath, dnode, u.Node)
		}
		scope := fmt.Sprintf("d%d", uint32(u.Drive))
		bf := filepath.Join(dpath, "blocks", u.Block[:2], u.Block)
		b, err := os.ReadFile(bf)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-7] ^= 0x20
		must(t, os.WriteFile(bf, b, 0o644))

		id := startJob(t, c, "mediascan", "--policy", "high")
		j := c.WaitJob(id, 3*time.Minute)
		if j.State != job.Succeeded || len(j.Phases) != 2 || j.Priority != 8 {
			t.Fatalf("mediascan: %+v", j)
		}
		scan := j.Phases[0]
		if scan.Errors != 1 || len(scan.Scopes) != 12 {
			t.Fatalf("scan report: %d errors, %d drive scopes (want 1, 12): %+v", scan.Errors, len(scan.Scopes), scan)
		}
		var scanned int64
		for _, s := range scan.Scopes {
			// Every drive's tasks ran on the node serving it, and only there.
			if s.Affinity != nodeOf[s.Scope] || !reflect.DeepEqual(s.Nodes, []string{nodeOf[s.Scope]}) {
				t.Fatalf("drive %s (node %s): pinned to %q, ran on %v", s.Scope, nodeOf[s.Scope], s.Affinity, s.Nodes)
			}
			bad, fixed := s.Counts["bad"], s.Counts["fixed"]
			if s.Scope == scope && (bad != 1 || fixed != 1) || s.Scope != scope && (bad != 0 || fixed != 0) {
				t.Fatalf("drive %s: %d bad, %d fixed; the flipped block is on %s", s.Scope, bad, fixed, scope)
			}
			if s.Counts["transient"]+s.Counts["unfixable"]+s.Counts["orphaned"] != 0 {
				t.Fatalf("drive %s: unexpected findings %v", s.Scope, s.Counts)
			}
			scanned += s.Counts["scanned"]
		}
		if scanned < 20 || scan.Bytes < int64(len(files[big])) {
			t.Fatalf("scanned %d blocks, %d bytes: too few for the files written", scanned, scan.Bytes)
		}
		// The summary's row for the drive: DRIVE NODE SCANNED MIB BAD FIXED ...
		var row []string
		for line := range strings.SplitSeq(j.Phases[1].Summary, "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == scope {
				row = f
			}
		}
		if len(row) != 9 || row[1] != dnode || row[4] != "1" || row[5] != "1" {
			t.Fatalf("summary row of %s = %q in:\n%s", scope, row, j.Phases[1].Summary)
		}
		out, code := c.Weft("job", "view", id.String())
		if code != 0 || !strings.Contains(out, "summary:") || !strings.Contains(out, "UNFIXABLE") {
			t.Fatalf("weft job view:\n%s", out)
		}
		t.Logf("weft job view:\n%s", out)

		// The stripe map no longer names the bad block, and every file reads.
		for _, s := range layout(t, c, big).Stripes {
			for _, x := range s.Units {
				if x.Block == u.Block {
					t.Fatalf("stripe %d still references the bad block %s on d%d", s.Index, u.Block, uint32(x.Drive))
				}
			}
		}
		for p, want := range files {
			checkFile(t, p, want)
		}

		// A second scan, limited to that drive, fixes nothing: the only bad
		// block it may still meet is the replaced one, unreferenced, until the
		// delete queue removes it.
		j2 := c.WaitJob(startJob(t, c, "mediascan", "--param", "drives="+scope), 3*time.Minute)
		if j2.State != job.Succeeded || len(j2.Phases[0].Scopes) != 1 || j2.Phases[0].Scopes[0].Scope != scope {
			t.Fatalf("second scan of %s: %+v", scope, j2.Phases)
		}
		if c2 := j2.Phases[0].Scopes[0].Counts; c2["fixed"] != 0 || c2["bad"] != c2["orphaned"] || c2["bad"] > 1 {
			t.Fatalf("second scan of %s: %v", scope, c2)
		}
	})
}
