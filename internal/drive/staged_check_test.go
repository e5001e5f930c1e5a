package drive

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A staged file is read whole before it is adopted: a file whose data do
// not match their segment CRCs (damaged, or written by something that
// lied about them), one owned by another user, a symbolic link and a file
// with other links are refused, and removed.
func TestAdoptChecksStagedFile(t *testing.T) {
	ctx := context.Background()
	data := payload(3*SegmentSize+100, 3)
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, d *Drive, path string)
		want  error
		msg   string
	}{
		{"flipped data byte", func(t *testing.T, d *Drive, path string) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			off := int64(headerLength(segmentCount(int64(len(data)), SegmentSize))) + 2*SegmentSize + 7
			b := []byte{0}
			_, _ = f.ReadAt(b, off)
			b[0] ^= 0x40
			if _, err := f.WriteAt(b, off); err != nil {
				t.Fatal(err)
			}
		}, ErrCorrupt, "segment 2"},
		{"another user's", func(t *testing.T, d *Drive, path string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give a file away")
			}
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, ErrInvalid, "owned by uid 65534"},
		{"symbolic link", func(t *testing.T, d *Drive, path string) {
			target := path + ".target"
			if err := os.Rename(path, target); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(target) })
		}, ErrInvalid, "symbolic link"},
		{"hard-linked", func(t *testing.T, d *Drive, path string) {
			if err := os.Link(path, filepath.Join(d.Path(), "elsewhere")); err != nil {
				t.Fatal(err)
			}
		}, ErrInvalid, "2 links"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := openTest(t)
			h, name := stageTest(t, d, data)
			dir, _ := d.blockPath(h.ID)
			path := filepath.Join(dir, name)
			tc.spoil(t, d, path)
			err := d.Adopt(ctx, h, name, int64(len(data)))
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Adopt = %v, want %v mentioning %q", err, tc.want, tc.msg)
			}
			if _, _, err := d.Get(ctx, h.ID, 0, -1); !errors.Is(err, ErrNotFound) {
				t.Fatalf("a refused staged file was adopted: Get = %v", err)
			}
			if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the refused staged file is still there: %v", err)
			}
		})
	}
}

// A drive directory is its owner's alone: a new one is made so, an old
// one open to others is restricted at Open with a log line; a directory
// Open refuses keeps its mode.
func TestDriveDirMode(t *testing.T) {
	d := openTest(t)
	if st, _ := os.Stat(d.Path()); st.Mode().Perm() != DirMode {
		t.Fatalf("new drive directory has mode %v", st.Mode().Perm())
	}
	dir := d.Path()
	d.Close()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	openAt(t, dir, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&log, nil)) })
	if st, _ := os.Stat(dir); st.Mode().Perm() != DirMode {
		t.Fatalf("reopened drive directory has mode %v", st.Mode().Perm())
	}
	if !strings.Contains(log.String(), "restricted to the server's user") || !strings.Contains(log.String(), "was=-rwxr-xr-x") {
		t.Fatalf("no log line about the restriction:\n%s", log.String())
	}
	foreign := t.TempDir()
	if err := os.Chmod(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(foreign, "mine"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(foreign, testOptions(8)); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("Open of a foreign directory: %v", err)
	}
	if st, _ := os.Stat(foreign); st.Mode().Perm() != 0o755 {
		t.Fatalf("a refused directory's mode changed to %v", st.Mode().Perm())
	}
}

// Staged by root for a drive of another user (a mount run as root beside
// a server run as its own user), the file is given to the drive's owner
// so that the owner adopts it.
func TestStageGivesFileToOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	d := openTest(t)
	if err := os.Chown(d.Path(), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	h, name := stageTest(t, d, payload(100, 1))
	dir, _ := d.blockPath(h.ID)
	st, err := os.Stat(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if sys := st.Sys().(*syscall.Stat_t); sys.Uid != 65534 {
		t.Fatalf("staged file owned by uid %d, want the directory's 65534", sys.Uid)
	}
}
