package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/tests/harness"
)

const unit = 1 << 20 // the default unit size

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint64())
	}
	return b
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync %s: %v", path, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close %s: %v", path, err)
	}
}

func checkFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: read %d bytes (sha %x), want %d (sha %x)", path, len(got), sha256.Sum256(got), len(want), sha256.Sum256(want))
	}
}

// fileInfo runs `weft file info --json` on a path.
func fileInfo(t *testing.T, c *harness.Cluster, path string) map[string]any {
	t.Helper()
	out, code := c.Weft("file", "info", "--json", path)
	if code != 0 {
		t.Fatalf("weft file info %s: exit %d:\n%s", path, code, out)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("weft file info --json: %v\n%s", err, out)
	}
	return m
}

// TestMount exercises the file system through the FUSE mount of a 3-node,
// 12-drive cluster with the default ec:4+2.
func TestMount(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.Both, func(t *testing.T, m harness.Mode) {
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 4, Mount: true})
		mnt := c.Mount

		t.Run("sizes", func(t *testing.T) {
			for i, n := range []int{0, 1, 4096, unit - 1, unit, unit + 1, 4*unit - 1, 4 * unit, 4*unit + 1, 100 << 20} {
				p := filepath.Join(mnt, fmt.Sprintf("size-%d", n))
				data := randBytes(uint64(i+1), n)
				writeFile(t, p, data)
				checkFile(t, p, data)
				if st, err := os.Stat(p); err != nil || st.Size() != int64(n) {
					t.Fatalf("stat %s: %v %v", p, st, err)
				}
			}
		})

		t.Run("file info", func(t *testing.T) {
			info := fileInfo(t, c, filepath.Join(mnt, fmt.Sprintf("size-%d", 100<<20)))
			b, _ := json.Marshal(info)
			s := string(b)
			if !strings.Contains(s, "ec:4+2") {
				t.Fatalf("file info lacks ec:4+2: %s", s)
			}
			out, code := c.Weft("file", "info", filepath.Join(mnt, fmt.Sprintf("size-%d", unit-1)))
			if code != 0 || !strings.Contains(out, "mirror:3") {
				t.Fatalf("small file info (%d):\n%s", code, out)
			}
			// At most 4 KiB (weft mount --inline-max): the data is in the
			// stripe map, no block anywhere.
			for _, n := range []int{1, 4096} {
				info := layout(t, c, filepath.Join(mnt, fmt.Sprintf("size-%d", n)))
				if len(info.Stripes) != 1 || !info.Stripes[0].Inline || info.Allocated != 0 || len(info.Stripes[0].Units) != 0 {
					t.Fatalf("file info of a %d-byte file: %+v", n, info)
				}
			}
			if out, code := c.Weft("file", "info", filepath.Join(mnt, "size-1")); code != 0 || !strings.Contains(out, "inline") {
				t.Fatalf("inline file info (%d):\n%s", code, out)
			}
		})

		t.Run("overwrite append truncate", func(t *testing.T) {
			p := filepath.Join(mnt, "rw")
			ref := randBytes(7, 6*unit+123)
			writeFile(t, p, ref)
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < 40; i++ {
				off := r.IntN(len(ref) + unit)
				n := 1 + r.IntN(3*unit/2)
				buf := randBytes(uint64(100+i), n)
				if _, err := f.WriteAt(buf, int64(off)); err != nil {
					t.Fatal(err)
				}
				if off+n > len(ref) {
					ref = append(ref, make([]byte, off+n-len(ref))...)
				}
				copy(ref[off:], buf)
			}
			if err := f.Truncate(int64(len(ref) - 5*unit/2)); err != nil {
				t.Fatal(err)
			}
			ref = ref[:len(ref)-5*unit/2]
			if err := f.Truncate(int64(len(ref) + 3000)); err != nil {
				t.Fatal(err)
			}
			ref = append(ref, make([]byte, 3000)...)
			f.Close()
			checkFile(t, p, ref)
			af, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			tail := randBytes(999, unit+17)
			af.Write(tail)
			af.Close()
			checkFile(t, p, append(ref, tail...))
		})

		t.Run("concurrent writers", func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					data := randBytes(uint64(200+w), 9*unit+w)
					p := filepath.Join(mnt, fmt.Sprintf("conc-%d", w))
					if err := os.WriteFile(p, data, 0o644); err != nil {
						errs <- err
						return
					}
					if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
						errs <- fmt.Errorf("%s mismatch (%v)", p, err)
					}
				}()
			}
			// Four writers into one file, each its own 2-stripe region.
			shared := filepath.Join(mnt, "shared")
			f, err := os.Create(shared)
			if err != nil {
				t.Fatal(err)
			}
			region := 8 * unit
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					data := randBytes(uint64(300+w), region)
					for off := 0; off < region; off += 256 << 10 {
						if _, err := f.WriteAt(data[off:off+256<<10], int64(w*region+off)); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			f.Close()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			got, err := os.ReadFile(shared)
			if err != nil {
				t.Fatal(err)
			}
			for w := 0; w < 4; w++ {
				if !bytes.Equal(got[w*region:(w+1)*region], randBytes(uint64(300+w), region)) {
					t.Fatalf("shared file region %d mismatch", w)
				}
			}
		})

		t.Run("namespace", func(t *testing.T) {
			d := filepath.Join(mnt, "ns")
			must(t, os.MkdirAll(filepath.Join(d, "a", "b"), 0o755))
			writeFile(t, filepath.Join(d, "a", "f"), []byte("hello"))
			must(t, os.Rename(filepath.Join(d, "a", "f"), filepath.Join(d, "a", "b", "g")))
			must(t, os.Link(filepath.Join(d, "a", "b", "g"), filepath.Join(d, "h")))
			st, err := os.Stat(filepath.Join(d, "h"))
			if err != nil || st.Sys().(*syscall.Stat_t).Nlink != 2 {
				t.Fatalf("link count after link: %v %v", st, err)
			}
			must(t, os.Symlink("a/b/g", filepath.Join(d, "s")))
			if tg, err := os.Readlink(filepath.Join(d, "s")); err != nil || tg != "a/b/g" {
				t.Fatalf("readlink = %q %v", tg, err)
			}
			checkFile(t, filepath.Join(d, "s"), []byte("hello"))
			must(t, os.Remove(filepath.Join(d, "a", "b", "g")))
			checkFile(t, filepath.Join(d, "h"), []byte("hello"))
			must(t, os.Chmod(filepath.Join(d, "h"), 0o600))
			must(t, os.Chown(filepath.Join(d, "h"), 1234, 5678))
			mt := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
			must(t, os.Chtimes(filepath.Join(d, "h"), mt, mt))
			st, _ = os.Stat(filepath.Join(d, "h"))
			sys := st.Sys().(*syscall.Stat_t)
			if st.Mode().Perm() != 0o600 || sys.Uid != 1234 || sys.Gid != 5678 || !st.ModTime().Equal(mt) {
				t.Fatalf("after chmod/chown/utimes: mode %v uid %d gid %d mtime %v", st.Mode(), sys.Uid, sys.Gid, st.ModTime())
			}
			must(t, syscall.Setxattr(filepath.Join(d, "h"), "user.color", []byte("blue"), 0))
			buf := make([]byte, 64)
			n, err := syscall.Getxattr(filepath.Join(d, "h"), "user.color", buf)
			if err != nil || string(buf[:n]) != "blue" {
				t.Fatalf("getxattr = %q %v", buf[:n], err)
			}
			if _, err := syscall.Getxattr(filepath.Join(d, "h"), "user.none", buf); !errors.Is(err, syscall.ENODATA) {
				t.Fatalf("missing xattr: %v", err)
			}
			ents, err := os.ReadDir(d)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if strings.Join(names, ",") != "a,h,s" {
				t.Fatalf("readdir = %v", names)
			}
			if err := os.Remove(filepath.Join(d, "a")); !errors.Is(err, syscall.ENOTEMPTY) {
				t.Fatalf("rmdir of a non-empty dir: %v", err)
			}
			if err := os.Rename(d, filepath.Join(d, "a", "inside")); !errors.Is(err, syscall.EINVAL) {
				t.Fatalf("rename into itself: %v", err)
			}
			// A directory with more entries than one readdir page.
			big := filepath.Join(d, "big")
			must(t, os.Mkdir(big, 0o755))
			for i := 0; i < 1500; i++ {
				must(t, os.WriteFile(filepath.Join(big, fmt.Sprintf("e%04d", i)), nil, 0o644))
			}
			ents, err = os.ReadDir(big)
			if err != nil || len(ents) != 1500 {
				t.Fatalf("readdir of 1500 entries: %d %v", len(ents), err)
			}
			if !sort.SliceIsSorted(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() }) {
				t.Fatal("readdir not in name order")
			}
		})

		t.Run("unlink while open", func(t *testing.T) {
			p := filepath.Join(mnt, "doomed")
			data := randBytes(55, 3*unit)
			writeFile(t, p, data)
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			must(t, os.Remove(p))
			got, err := io.ReadAll(f)
			f.Close()
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read of an unlinked open file: %v", err)
			}
		})

		t.Run("two mounts", func(t *testing.T) {
			other := filepath.Join(filepath.Dir(mnt), "mnt2")
			c.MountAt(other)
			data := randBytes(66, 2*unit+3)
			writeFile(t, filepath.Join(mnt, "across"), data)
			checkFile(t, filepath.Join(other, "across"), data)
			// Held open on one mount once the open is recorded in the
			// namespace (vfs.RegisterDelay after it), unlinked through the
			// other: the data stays until the last close, then its blocks
			// are freed.
			ctx := context.Background()
			p := filepath.Join(mnt, "across")
			blocks := blocksOf(t, c, p)
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			lin := linOf(t, f)
			ns := c.Namespace()
			waitFor(t, "the open recorded in the namespace", time.Minute, func() bool {
				s, err := ns.OpenSessions(ctx, lin)
				return err == nil && len(s) == 1
			})
			must(t, os.Remove(filepath.Join(other, "across")))
			waitFor(t, "the unlink committed", time.Minute, func() bool {
				in, err := ns.GetInode(ctx, lin)
				return err == nil && in.Nlink == 0
			})
			// Every node's drainer frees what is queued: a block the
			// unlink had wrongly queued would be gone after this.
			waitDrainers(t, c)
			got, err := io.ReadAll(f)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("file unlinked on another mount while open here: %v", err)
			}
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("unlinked name still there: %v", err)
			}
			must(t, f.Close())
			waitFor(t, "the blocks of the unlinked file freed after its last close", time.Minute, func() bool {
				all := allBlocks(t, c)
				for _, b := range blocks {
					if all[b] {
						return false
					}
				}
				return true
			})
		})

		// A mount on the nodes' machine writes their units into the drive
		// directories itself and has the nodes adopt them (staged writes): the
		// mount's metrics count them, the data reads back through another
		// mount, and no staged file stays behind.
		t.Run("staged writes", func(t *testing.T) {
			addr := freeAddr(t)
			other := filepath.Join(filepath.Dir(mnt), "mnt-staged")
			c.MountWith(other, harness.MountOptions{Metrics: addr})
			data := randBytes(67, 9*unit+5)
			writeFile(t, filepath.Join(other, "staged"), data)
			checkFile(t, filepath.Join(mnt, "staged"), data)
			m := mountMetrics(t, addr)
			local, written := m[`weft_mount_local_units_total{op="write"}`], m[`weft_mount_bytes_total{op="write"}`]
			// 9 MiB + 5 B: 3 stripes, 2 whole and a short one, all local.
			if local < 12 || written != float64(len(data)) {
				t.Fatalf("metrics after a staged write: %g local unit writes, %g bytes written\n%v", local, written, m)
			}
			// Files created in a directory the mount holds: their units
			// are staged unsynced and synced by the write-back's data
			// barrier, before the commit that names them.
			dir := filepath.Join(other, "unsynced")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			small := map[string][]byte{}
			for i := range 20 {
				name := fmt.Sprintf("f%02d", i)
				small[name] = randBytes(uint64(200+i), 70<<10+i)
				writeFile(t, filepath.Join(dir, name), small[name])
			}
			if err := syncDir(dir); err != nil {
				t.Fatal(err)
			}
			m = mountMetrics(t, addr)
			if unsynced, syncs := m["weft_mount_unsynced_units_total"], m["weft_mount_data_syncs_total"]; unsynced < 20 || syncs < 1 {
				t.Fatalf("metrics after writing 20 files in a directory the mount holds: %g units unsynced, %g data syncs", unsynced, syncs)
			}
			for name, want := range small {
				checkFile(t, filepath.Join(mnt, "unsynced", name), want)
			}
			filepath.WalkDir(c.Dir, func(path string, e fs.DirEntry, err error) error {
				if err == nil && strings.HasPrefix(e.Name(), ".tmp-") {
					t.Errorf("staged file left behind: %s", path)
				}
				return nil
			})
		})

		// A mount opens the files of a directory it holds the delegation
		// of without asking etcd (weft_mount_opens_total{how="covered"}),
		// and still sees, at its next open, data another mount wrote
		// through a file descriptor it opened before: that mount's commit
		// recalls the delegation first.
		t.Run("covered opens", func(t *testing.T) {
			addr := freeAddr(t)
			other := filepath.Join(filepath.Dir(mnt), "mnt-cov")
			c.MountWith(other, harness.MountOptions{Metrics: addr})
			opens := func() (covered, synced float64) {
				m := mountMetrics(t, addr)
				return m[`weft_mount_opens_total{how="covered"}`], m[`weft_mount_opens_total{how="sync"}`]
			}
			must(t, os.Mkdir(filepath.Join(mnt, "cov"), 0o755))
			old, fresh := randBytes(68, 3000), randBytes(69, 3000)
			w, err := os.OpenFile(filepath.Join(mnt, "cov", "f"), os.O_CREATE|os.O_RDWR, 0o644)
			must(t, err)
			defer w.Close()
			_, err = w.Write(old)
			must(t, err)
			must(t, w.Sync())
			// The other mount takes the directory: its first create there
			// recalls it, and once its cooldown is over a second takes it.
			writeFile(t, filepath.Join(other, "cov", "g0"), nil)
			waitFor(t, "the other mount holding cov", time.Minute, func() bool {
				writeFile(t, filepath.Join(other, "cov", fmt.Sprintf("g%d", time.Now().UnixNano())), nil)
				c0, _ := opens()
				checkFile(t, filepath.Join(other, "cov", "f"), old)
				c1, _ := opens()
				return c1 > c0
			})
			// Written through the descriptor opened before, by LIN: the
			// commit at close recalls the delegation.
			_, err = w.WriteAt(fresh, 0)
			must(t, err)
			must(t, w.Close())
			_, s0 := opens()
			checkFile(t, filepath.Join(other, "cov", "f"), fresh)
			if _, s1 := opens(); s1 != s0+1 {
				t.Fatalf("the open after another mount's write was not synchronous: %g synced opens, want %g", s1, s0+1)
			}
		})

		// Creates and unlinks are written back (acknowledged before their
		// commit) in a directory the mount holds: another mount listing the
		// directory gets the delegation back first and sees every one of them.
		t.Run("write-back across mounts", func(t *testing.T) {
			other := filepath.Join(filepath.Dir(mnt), "mnt-wb")
			c.MountAt(other)
			dir := filepath.Join(mnt, "wb")
			must(t, os.Mkdir(dir, 0o755))
			want := map[string]bool{}
			for i := 0; i < 300; i++ {
				name := fmt.Sprintf("f%03d", i)
				must(t, os.WriteFile(filepath.Join(dir, name), nil, 0o644))
				want[name] = true
			}
			for i := 0; i < 300; i += 3 {
				name := fmt.Sprintf("f%03d", i)
				must(t, os.Remove(filepath.Join(dir, name)))
				delete(want, name)
			}
			ents, err := os.ReadDir(filepath.Join(other, "wb"))
			must(t, err)
			got := map[string]bool{}
			for _, e := range ents {
				got[e.Name()] = true
			}
			if !maps.Equal(got, want) {
				t.Fatalf("the other mount lists %d names, want %d", len(got), len(want))
			}
			// And the other way round, with data.
			data := randBytes(67, 5000)
			writeFile(t, filepath.Join(other, "wb", "back"), data)
			checkFile(t, filepath.Join(dir, "back"), data)
			// The namespace as the cluster's jobs see it.
			if info := fileInfo(t, c, filepath.Join(dir, "f001")); info["size"] != float64(0) {
				t.Fatalf("weft file info of a written-back create: %v", info)
			}
		})

		t.Run("permissions", func(t *testing.T) {
			d := filepath.Join(mnt, "perm")
			// Let other users reach the mount point through the test's
			// private temporary directories.
			for p := filepath.Dir(mnt); p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
				must(t, os.Chmod(p, 0o755))
			}
			must(t, os.Mkdir(d, 0o755))
			must(t, syscall.Chmod(d, 0o1777)) // sticky, world-writable, like /tmp (os.Chmod wants os.ModeSticky)
			writeFile(t, filepath.Join(d, "rootfile"), []byte("root"))
			must(t, os.Chmod(filepath.Join(d, "rootfile"), 0o644))
			as := func(uid uint32, script string) (string, error) {
				cmd := exec.Command("sh", "-c", script)
				cmd.Dir = d
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
				out, err := cmd.CombinedOutput()
				return string(out), err
			}
			if out, err := as(1000, "echo x >> rootfile"); err == nil || !strings.Contains(out, "ermission denied") {
				t.Fatalf("uid 1000 appended to a 0644 root file: %v %s", err, out)
			}
			if out, err := as(1000, "cat rootfile"); err != nil || out != "root" {
				t.Fatalf("uid 1000 cannot read a 0644 file: %v %s", err, out)
			}
			if out, err := as(1000, "echo mine > u1000 && chmod 4755 u1000 && echo more >> u1000 && stat -c %a u1000"); err != nil || strings.TrimSpace(out) != "755" {
				t.Fatalf("setuid not cleared by a write: %v %q", err, out)
			}
			// The mount leaves killing privileges to weft (the kernel
			// stops asking for security.capability before each write):
			// a write removes a file's capabilities, even root's.
			capFile := filepath.Join(d, "capfile")
			writeFile(t, capFile, []byte("x"))
			capv := []byte{1, 0, 0, 2, 0, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0} // v2, effective, cap_net_raw
			must(t, unix.Setxattr(capFile, "security.capability", capv, 0))
			if _, err := unix.Getxattr(capFile, "security.capability", make([]byte, 64)); err != nil {
				t.Fatalf("capabilities not set: %v", err)
			}
			if out, err := as(0, "echo more >> capfile"); err != nil {
				t.Fatalf("root's append: %v %s", err, out)
			}
			if _, err := unix.Getxattr(capFile, "security.capability", make([]byte, 64)); !errors.Is(err, unix.ENODATA) {
				t.Fatalf("capabilities after a write: %v, want ENODATA", err)
			}
			if out, err := as(1001, "rm -f u1000; r=$?; ls -ln; exit $r"); err == nil {
				t.Fatalf("uid 1001 removed uid 1000's file from a sticky directory: %s", out)
			}
			if out, err := as(1000, "rm u1000"); err != nil {
				t.Fatalf("owner cannot remove its file: %v %s", err, out)
			}
		})

		// A shared mapping, written through and synced. The mapping is made
		// by a child process (TestMmapHelper): in-process, a page fault on a
		// FUSE mapping in the process serving it can deadlock the Go
		// runtime (see local.InProcess).
		t.Run("mmap", func(t *testing.T) {
			p := filepath.Join(mnt, "mapped")
			data := randBytes(77, 2*unit)
			writeFile(t, p, data)
			cmd := exec.Command(os.Args[0], "-test.run=^TestMmapHelper$", "-test.v")
			cmd.Env = append(os.Environ(), mmapHelperEnv+"="+p)
			if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "--- PASS: TestMmapHelper") {
				t.Fatalf("mmap through a child process: %v\n%s", err, out)
			}
			copy(data[unit-3:], "through mmap")
			checkFile(t, p, data)
		})

		t.Run("fio verify", func(t *testing.T) {
			if _, err := exec.LookPath("fio"); err != nil {
				t.Skip("fio not installed (scripts/deps.sh installs it)")
			}
			for _, rw := range []string{"write", "randwrite"} {
				out, err := exec.Command("fio", "--name=verify-"+rw, "--directory="+mnt, "--rw="+rw, "--bs=64k",
					"--size=32m", "--numjobs=2", "--verify=crc32c", "--do_verify=1", "--fallocate=none",
					"--end_fsync=1", "--ioengine=psync", "--verify_state_save=0").CombinedOutput()
				if err != nil || strings.Contains(string(out), "verify: bad") {
					t.Fatalf("fio %s: %v\n%s", rw, err, out)
				}
			}
		})
	})
}

// mmapHelperEnv names the file TestMmapHelper maps.
const mmapHelperEnv = "WEFT_TEST_MMAP_FILE"

// TestMmapHelper is no test of its own: it is the child process in which
// TestMount's "mmap" maps a file of the mount shared, checks it reads the
// file's data (randBytes(77, 2 units)), writes "through mmap" at one unit
// less 3 bytes, and syncs it.
func TestMmapHelper(t *testing.T) {
	t.Parallel()
	p := os.Getenv(mmapHelperEnv)
	if p == "" {
		t.Skip("TestMount's mmap helper: runs as its child process")
	}
	data := randBytes(77, 2*unit)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, len(data), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	if !bytes.Equal(m, data) {
		t.Fatal("mmap read differs")
	}
	copy(m[unit-3:], "through mmap")
	if err := syscall.Munmap(m); err != nil {
		t.Fatal(err)
	}
	must(t, f.Sync())
	must(t, f.Close())
}

// TestMountSurvivesNodeLoss kills a node while files are open and checks
// that every byte still reads and new writes still succeed, and that a
// flipped byte in a stored block is corrected on read.
func TestMountSurvivesNodeLoss(t *testing.T) {
	t.Parallel()
	harness.Run(t, harness.Both, func(t *testing.T, m harness.Mode) {
		c := m.Start(t, harness.Options{Nodes: 3, DrivesPerNode: 4, Mount: true, LeaseTTL: 3 * time.Second})
		mnt := c.Mount
		files := map[string][]byte{}
		for i, n := range []int{1, 100 << 10, 5*unit + 7, 24 * unit} {
			p := filepath.Join(mnt, fmt.Sprintf("f%d", i))
			files[p] = randBytes(uint64(i+10), n)
			writeFile(t, p, files[p])
		}
		open := map[string]*os.File{}
		for p := range files {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			open[p] = f
			defer f.Close()
		}

		// A flipped byte in one stored block: reads still return the right data.
		// The block is on n2, the node killed next, so that no stripe loses
		// more units than ec:4+2 tolerates (nothing repairs the block meanwhile).
		drives, err := c.Admin.Drives(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var n2drives []cluster.Drive
		for _, d := range drives {
			if d.Node == "n2" {
				n2drives = append(n2drives, d)
			}
		}
		flipped := flipOneBlock(t, n2drives)
		for p, want := range files {
			checkFile(t, p, want)
		}
		t.Logf("flipped a byte in %s; all files still read correctly", flipped)

		if err := c.Ctl.Kill(context.Background(), "n2"); err != nil {
			t.Fatal(err)
		}
		c.WaitNode(c.NodeAdmin("n1"), "n2", cluster.Down, 30*time.Second)
		for p, want := range files {
			got, err := io.ReadAll(io.NewSectionReader(open[p], 0, int64(len(want))))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("read of open %s with n2 dead: %v", p, err)
			}
			checkFile(t, p, want)
		}
		data := randBytes(4242, 9*unit+1)
		writeFile(t, filepath.Join(mnt, "written-degraded"), data)
		checkFile(t, filepath.Join(mnt, "written-degraded"), data)
		info := fileInfo(t, c, filepath.Join(mnt, "written-degraded"))
		t.Logf("file written with n2 down: %v", info)

		must(t, c.Ctl.Start(context.Background(), "n2"))
		c.WaitNode(c.NodeAdmin("n1"), "n2", cluster.Up, time.Minute)
		checkFile(t, filepath.Join(mnt, "written-degraded"), data)
	})
}

// flipOneBlock flips a byte in the data of the largest block file it finds.
func flipOneBlock(t *testing.T, drives []cluster.Drive) string {
	t.Helper()
	var best string
	var bestSize int64
	for _, d := range drives {
		_ = filepath.Walk(filepath.Join(d.Path, "blocks"), func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() && fi.Size() > bestSize {
				best, bestSize = p, fi.Size()
			}
			return nil
		})
	}
	if best == "" {
		t.Fatal("no block files found")
	}
	f, err := os.OpenFile(best, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	off := bestSize - 100
	f.ReadAt(b, off)
	b[0] ^= 0x40
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	// Drop the page cache copy so the next read sees the flipped byte.
	_ = f.Sync()
	return best
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
