package jobs

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/weftfs/weft/internal/job"
	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/memkv"
	"github.com/weftfs/weft/internal/meta"
)

var bg = context.Background()

func newMeta(t *testing.T) *meta.Meta {
	t.Helper()
	store := memkv.New(kv.Options{})
	if err := meta.Format(bg, store, meta.FormatOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := meta.Open(bg, meta.Config{Store: store, LINBatch: 16})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestParseDrives(t *testing.T) {
	got, err := parseDrives("d3, 7,d3")
	if err != nil || len(got) != 2 || !got[3] || !got[7] {
		t.Fatalf("parseDrives = %v, %v", got, err)
	}
	for _, bad := range []string{"", " , ", "x", "d0", "d-1"} {
		if _, err := parseDrives(bad); err == nil {
			t.Errorf("parseDrives(%q) accepted", bad)
		}
	}
	if _, err := parseDrives(""); !errors.Is(err, job.ErrInvalid) {
		t.Errorf("empty drives: %v", err)
	}
}

func TestLINScan(t *testing.T) {
	m := newMeta(t)
	d, err := m.Mkdir(bg, meta.RootLIN, "dir", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	var files []meta.LIN
	for i := 0; i < 50; i++ {
		a, err := m.Create(bg, d.LIN, fmt.Sprintf("f%02d", i), meta.NewInode{Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, a.LIN)
	}
	tasks, err := splitLINs(bg, m, 7)
	if err != nil || len(tasks) == 0 {
		t.Fatalf("split: %v %v", tasks, err)
	}
	// The tasks tile the LIN space; listing each finds every file once.
	seen := map[uint64]int{}
	prevTo := uint64(meta.FirstLIN)
	for _, tk := range tasks {
		if tk.From != prevTo || tk.To <= tk.From {
			t.Fatalf("tasks do not tile: %+v", tasks)
		}
		prevTo = tk.To
		for from := tk.From; ; {
			lins, err := listLINs(bg, m, from, tk.To, 4, func(meta.Inode) bool { return true })
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range lins {
				seen[l]++
			}
			if len(lins) < 4 {
				break
			}
			from = lins[len(lins)-1] + 1
		}
	}
	if len(seen) != len(files) {
		t.Fatalf("listed %d files, want %d (directories are not items)", len(seen), len(files))
	}
	for l, n := range seen {
		if n != 1 {
			t.Fatalf("LIN %d listed %d times", l, n)
		}
	}
	if p := pathOf(bg, m, files[7]); p != "/dir/f07" {
		t.Fatalf("pathOf = %q", p)
	}
	if err := m.Unlink(bg, d.LIN, "f07"); err != nil {
		t.Fatal(err)
	}
	if p := pathOf(bg, m, files[7]); p != fmt.Sprintf("<LIN %d>", files[7]) {
		t.Fatalf("pathOf an unlinked file = %q", p)
	}
}
