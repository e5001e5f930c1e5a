package drive

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenCreatesIdentity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "drive")
	d := openAt(t, dir)
	id := d.Identity()
	if id.FormatVersion != IdentityFormatVersion || id.ClusterID != testCluster || id.DriveID != 7 ||
		id.Node != "node-1" || id.Class != ClassSSD || id.Created.IsZero() {
		t.Fatalf("identity = %+v", id)
	}
	if d.ID() != 7 || d.Path() != dir {
		t.Fatalf("ID %v Path %s", d.ID(), d.Path())
	}
	raw, err := os.ReadFile(filepath.Join(dir, IdentityFile))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"format_version", "cluster_id", "drive_id", "node", "class", "created"} {
		if _, ok := m[k]; !ok {
			t.Errorf("identity file lacks %q: %s", k, raw)
		}
	}
	d.Close()
	// Reopen: no new allocation, same identity.
	d2 := openAt(t, dir, func(o *Options) {
		o.AllocID = func() (ID, error) { t.Fatal("AllocID called on reopen"); return 0, nil }
	})
	if d2.Identity() != id {
		t.Fatalf("reopened identity %+v, want %+v", d2.Identity(), id)
	}
}

func TestOpenIgnoresLostFound(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	openAt(t, dir)
}

func writeIdent(t *testing.T, dir string, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, IdentityFile), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefuses(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string)
		opts    func(*Options)
		want    error
		wantSub []string
	}{
		{
			name: "non-empty foreign dir",
			setup: func(t *testing.T, dir string) {
				os.WriteFile(filepath.Join(dir, "photo.jpg"), []byte("x"), 0o644)
			},
			want:    ErrNotEmpty,
			wantSub: []string{"not empty", "photo.jpg", "empty it or pick another path"},
		},
		{
			name:    "other cluster",
			setup:   func(t *testing.T, dir string) { openAt(t, dir).Close() },
			opts:    func(o *Options) { o.ClusterID = "c-other" },
			want:    ErrOtherCluster,
			wantSub: []string{"c-test", "c-other", "d7"},
		},
		{
			name:    "other node",
			setup:   func(t *testing.T, dir string) { openAt(t, dir).Close() },
			opts:    func(o *Options) { o.Node = "node-2" },
			want:    ErrOtherNode,
			wantSub: []string{`node "node-1"`, "node-2"},
		},
		{
			name: "newer format",
			setup: func(t *testing.T, dir string) {
				writeIdent(t, dir, `{"format_version":2,"cluster_id":"c-test","drive_id":7,"node":"node-1","class":"ssd"}`)
			},
			want:    ErrNewerFormat,
			wantSub: []string{"version 2", "supports up to 1", "upgrade weft"},
		},
		{
			name:    "garbage identity",
			setup:   func(t *testing.T, dir string) { writeIdent(t, dir, `{"format_version":`) },
			want:    ErrBadIdentity,
			wantSub: []string{IdentityFile},
		},
		{
			name: "identity without cluster",
			setup: func(t *testing.T, dir string) {
				writeIdent(t, dir, `{"format_version":1,"drive_id":7,"node":"node-1","class":"ssd"}`)
			},
			want:    ErrBadIdentity,
			wantSub: []string{"empty cluster_id"},
		},
		{
			name: "identity with bad class",
			setup: func(t *testing.T, dir string) {
				writeIdent(t, dir, `{"format_version":1,"cluster_id":"c-test","drive_id":7,"node":"node-1","class":"tape"}`)
			},
			want:    ErrBadIdentity,
			wantSub: []string{"tape"},
		},
		{
			name:    "bad class on create",
			opts:    func(o *Options) { o.Class = "fast" },
			want:    ErrInvalid,
			wantSub: []string{`"fast"`, "nvme, ssd, hdd"},
		},
		{
			name:    "no allocator",
			opts:    func(o *Options) { o.AllocID = nil },
			want:    ErrInvalid,
			wantSub: []string{"allocator"},
		},
		{
			name:  "already open",
			setup: func(t *testing.T, dir string) { openAt(t, dir) },
			want:  ErrLocked,
		},
		{
			name: "no cluster id",
			opts: func(o *Options) { o.ClusterID = "" },
			want: ErrInvalid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			opts := testOptions(7)
			if tt.opts != nil {
				tt.opts(&opts)
			}
			d, err := Open(dir, opts)
			if err == nil {
				d.Close()
				t.Fatalf("Open succeeded, want %v", tt.want)
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Open error = %v, want %v", err, tt.want)
			}
			for _, s := range append(tt.wantSub, dir) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func TestOpenForeignDirLeftUntouched(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "data"), []byte("x"), 0o644)
	if _, err := Open(dir, testOptions(1)); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("Open = %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("Open left files in a foreign directory: %v", ents)
	}
}

func TestOpenRemovesTempFilesAndCountsUsage(t *testing.T) {
	dir := t.TempDir()
	d := openAt(t, dir)
	a := putTest(t, d, payload(1000, 1))
	putTest(t, d, payload(SegmentSize*2+5, 2))
	before, err := d.Usage()
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	// Leftovers of interrupted writes, next to a block and at the top.
	sub := filepath.Join(dir, blocksDir, a.String()[:2])
	for _, p := range []string{
		filepath.Join(sub, tempPrefix+a.String()+"-123"),
		filepath.Join(dir, blocksDir, "ff", tempPrefix+"x"),
		filepath.Join(dir, tempPrefix+IdentityFile+"-9"),
	} {
		if err := os.WriteFile(p, make([]byte, 5000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d = openAt(t, dir)
	after, err := d.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if after.Blocks != 2 || after.UsedBytes != before.UsedBytes || before.UsedBytes != 4096+1000+4096+2*SegmentSize+5 {
		t.Fatalf("usage before %+v after reopen %+v", before, after)
	}
	for _, p := range []string{sub, filepath.Join(dir, blocksDir, "ff"), dir} {
		ents, _ := os.ReadDir(p)
		for _, e := range ents {
			if isTemp(e.Name()) {
				t.Errorf("temp file %s left in %s", e.Name(), p)
			}
		}
	}
	if after.TotalBytes <= 0 || after.FreeBytes <= 0 {
		t.Fatalf("usage %+v", after)
	}
}

func TestClosedDrive(t *testing.T) {
	d := openTest(t)
	d.Close()
	if _, err := d.Usage(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Usage after Close = %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}
