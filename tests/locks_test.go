package tests

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"

	"github.com/weftfs/weft/internal/namespace"
	"github.com/weftfs/weft/tests/harness"
)

// lockWait bounds how long a blocked waiter may take to get a lock once
// it is free (a watch event and a grant: milliseconds; generous for a
// loaded machine).
const lockWait = 5 * time.Second

// setlk is fcntl F_SETLK (F_SETLKW with wait) of [start, start+n).
func setlk(f *os.File, typ int16, start, n int64, wait bool) error {
	cmd := unix.F_SETLK
	if wait {
		cmd = unix.F_SETLKW
	}
	for {
		err := unix.FcntlFlock(f.Fd(), cmd, &unix.Flock_t{Type: typ, Whence: 0, Start: start, Len: n})
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// getlk is fcntl F_GETLK of [start, start+n).
func getlk(t *testing.T, f *os.File, typ int16, start, n int64) unix.Flock_t {
	t.Helper()
	lk := unix.Flock_t{Type: typ, Whence: 0, Start: start, Len: n}
	if err := unix.FcntlFlock(f.Fd(), unix.F_GETLK, &lk); err != nil {
		t.Fatalf("F_GETLK: %v", err)
	}
	return lk
}

func flockRetry(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

func openRW(t *testing.T, p string) *os.File {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// blocked runs fn in the background and checks that it is still blocked
// after a moment; the returned channel gets its result.
func blocked(t *testing.T, what string, fn func() error) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		t.Fatalf("%s returned at once (%v): it should wait", what, err)
	case <-time.After(500 * time.Millisecond):
	}
	return done
}

// granted waits for a blocked call's result and returns how long it took
// after since.
func granted(t *testing.T, what string, done <-chan error, since time.Time, bound time.Duration) time.Duration {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return time.Since(since)
	case <-time.After(bound):
		t.Fatalf("%s still waits %s after the lock was freed", what, bound)
	}
	return 0
}

// lockRecords counts the lock records in etcd.
func lockRecords(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), namespace.LocksPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// TestLocksAcrossMounts takes flock and fcntl locks through two mounts of
// one cluster (two client machines, as far as weft can tell) and checks
// that each sees the other's, that blocked waiters get the lock right
// after it is freed — by an unlock, by the holder's close — and that a
// mount killed with kill -9 loses its locks within the session TTL. It
// bounds waits in seconds, so it does not run in parallel.
func TestLocksAcrossMounts(t *testing.T) {
	c := harness.Start(t, harness.Options{Nodes: 1, DrivesPerNode: 2, Mount: true})
	mntA := c.Mount
	mntB := filepath.Join(t.TempDir(), "mnt-b")
	c.MountAt(mntB)
	cli := c.Etcd()

	t.Run("flock", func(t *testing.T) {
		fa := openRW(t, filepath.Join(mntA, "flock"))
		defer fa.Close()
		fb := openRW(t, filepath.Join(mntB, "flock"))
		defer fb.Close()
		if err := flockRetry(fa, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			t.Fatalf("flock LOCK_EX on A: %v", err)
		}
		if err := flockRetry(fb, unix.LOCK_EX|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
			t.Fatalf("flock LOCK_EX|LOCK_NB on B while A holds it: %v, want EWOULDBLOCK", err)
		}
		if err := flockRetry(fb, unix.LOCK_SH|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
			t.Fatalf("flock LOCK_SH|LOCK_NB on B while A holds LOCK_EX: %v, want EWOULDBLOCK", err)
		}
		// A blocked flock(1) with a timeout is interrupted by its alarm
		// signal: the wait ends with EINTR (flock exits 1), it does not
		// hang until the lock is free.
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), lockWait)
		defer cancel()
		out, err := exec.CommandContext(ctx, "flock", "--exclusive", "--timeout", "1", filepath.Join(mntB, "flock"), "true").CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("flock --timeout 1 on B while A holds the lock: %v %s, want exit status 1 (timed out)", err, out)
		}
		if d := time.Since(start); d > lockWait {
			t.Fatalf("flock --timeout 1 took %s: the interrupt did not end the wait", d)
		}
		done := blocked(t, "flock LOCK_EX on B", func() error { return flockRetry(fb, unix.LOCK_EX) })
		start = time.Now()
		if err := flockRetry(fa, unix.LOCK_UN); err != nil {
			t.Fatal(err)
		}
		d := granted(t, "flock LOCK_EX on B", done, start, lockWait)
		t.Logf("B's blocked flock got the lock %s after A unlocked", d)
		if err := flockRetry(fa, unix.LOCK_SH|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
			t.Fatalf("flock LOCK_SH|LOCK_NB on A while B holds LOCK_EX: %v, want EWOULDBLOCK", err)
		}
		// Conversion: B downgrades to shared; A may share it.
		if err := flockRetry(fb, unix.LOCK_SH|unix.LOCK_NB); err != nil {
			t.Fatalf("flock conversion to LOCK_SH on B: %v", err)
		}
		if err := flockRetry(fa, unix.LOCK_SH|unix.LOCK_NB); err != nil {
			t.Fatalf("flock LOCK_SH on A beside B's: %v", err)
		}
		// Closing the description releases its flock.
		if err := flockRetry(fa, unix.LOCK_UN); err != nil {
			t.Fatal(err)
		}
		done = blocked(t, "flock LOCK_EX on A", func() error { return flockRetry(fa, unix.LOCK_EX) })
		start = time.Now()
		fb.Close()
		granted(t, "flock LOCK_EX on A after B closed", done, start, lockWait)
		if err := flockRetry(fa, unix.LOCK_UN); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("fcntl", func(t *testing.T) {
		fa := openRW(t, filepath.Join(mntA, "ranges"))
		defer fa.Close()
		fb := openRW(t, filepath.Join(mntB, "ranges"))
		defer fb.Close()
		if err := setlk(fa, unix.F_WRLCK, 0, 100, false); err != nil {
			t.Fatalf("A write-locks [0,100): %v", err)
		}
		if err := setlk(fb, unix.F_WRLCK, 100, 100, false); err != nil {
			t.Fatalf("B write-locks [100,200) beside A's: %v", err)
		}
		if err := setlk(fb, unix.F_RDLCK, 50, 100, false); !errors.Is(err, unix.EAGAIN) {
			t.Fatalf("B read-locks [50,150) over A's: %v, want EAGAIN", err)
		}
		if err := setlk(fa, unix.F_WRLCK, 150, 0, false); !errors.Is(err, unix.EAGAIN) {
			t.Fatalf("A write-locks [150,EOF) over B's: %v, want EAGAIN", err)
		}
		lk := getlk(t, fb, unix.F_WRLCK, 10, 10)
		if lk.Type != unix.F_WRLCK || lk.Start != 0 || lk.Len != 100 || lk.Pid != 0 {
			t.Fatalf("F_GETLK on B of [10,20) = %+v, want A's write lock [0,100) with pid 0 (another mount's)", lk)
		}
		if lk := getlk(t, fb, unix.F_WRLCK, 200, 0); lk.Type != unix.F_UNLCK {
			t.Fatalf("F_GETLK on B of [200,EOF) = %+v, want F_UNLCK", lk)
		}
		// A unlocks the middle of its range: B may take it, not the rest.
		if err := setlk(fa, unix.F_UNLCK, 40, 20, false); err != nil {
			t.Fatal(err)
		}
		if err := setlk(fb, unix.F_RDLCK, 40, 20, false); err != nil {
			t.Fatalf("B read-locks [40,60) that A unlocked: %v", err)
		}
		if err := setlk(fb, unix.F_RDLCK, 30, 20, false); !errors.Is(err, unix.EAGAIN) {
			t.Fatalf("B read-locks [30,50), half of it A's: %v, want EAGAIN", err)
		}
		// A waiter gets the lock when A's process closes the file.
		done := blocked(t, "F_SETLKW on B", func() error { return setlk(fb, unix.F_WRLCK, 0, 40, true) })
		// The waiter holds one of B's FUSE requests, not the mount.
		writeFile(t, filepath.Join(mntB, "beside-the-waiter"), []byte("served"))
		checkFile(t, filepath.Join(mntB, "beside-the-waiter"), []byte("served"))
		if lk := getlk(t, fb, unix.F_RDLCK, 45, 1); lk.Type != unix.F_UNLCK {
			t.Fatalf("F_GETLK on B of [45,46) while its waiter waits = %+v, want F_UNLCK (B's own read lock)", lk)
		}
		start := time.Now()
		fa.Close()
		d := granted(t, "F_SETLKW on B after A closed the file", done, start, lockWait)
		t.Logf("B's F_SETLKW got the lock %s after A's close", d)
		fa2 := openRW(t, filepath.Join(mntA, "ranges"))
		defer fa2.Close()
		if lk := getlk(t, fa2, unix.F_RDLCK, 0, 0); lk.Type != unix.F_WRLCK || lk.Start != 0 || lk.Len != 40 {
			t.Fatalf("F_GETLK on A after B's wait = %+v, want B's write lock [0,40)", lk)
		}
		fb.Close()
		if err := setlk(fa2, unix.F_WRLCK, 0, 0, false); err != nil {
			t.Fatalf("A write-locks the whole file after B closed it: %v", err)
		}
		fa2.Close()
	})

	t.Run("ofd", func(t *testing.T) {
		ofd := func(f *os.File, cmd int, typ int16, start, n int64) error {
			for {
				err := unix.FcntlFlock(f.Fd(), cmd, &unix.Flock_t{Type: typ, Whence: 0, Start: start, Len: n})
				if !errors.Is(err, syscall.EINTR) {
					return err
				}
			}
		}
		fa := openRW(t, filepath.Join(mntA, "ofd"))
		fb := openRW(t, filepath.Join(mntB, "ofd"))
		defer fb.Close()
		if err := ofd(fa, unix.F_OFD_SETLK, unix.F_WRLCK, 0, 10); err != nil {
			t.Fatalf("OFD write lock on A: %v", err)
		}
		if err := ofd(fb, unix.F_OFD_SETLK, unix.F_RDLCK, 5, 10); !errors.Is(err, unix.EAGAIN) {
			t.Fatalf("OFD read lock on B over A's: %v, want EAGAIN", err)
		}
		// A second descriptor of A's open file keeps the lock when the
		// first is closed (that close is a FLUSH of the process's POSIX
		// owner, not of the description).
		dup, err := unix.Dup(int(fa.Fd()))
		if err != nil {
			t.Fatal(err)
		}
		fa.Close()
		if err := ofd(fb, unix.F_OFD_SETLK, unix.F_RDLCK, 5, 10); !errors.Is(err, unix.EAGAIN) {
			t.Fatalf("OFD read lock on B after A closed one of two descriptors: %v, want EAGAIN", err)
		}
		done := blocked(t, "F_OFD_SETLKW on B", func() error { return ofd(fb, unix.F_OFD_SETLKW, unix.F_RDLCK, 5, 10) })
		start := time.Now()
		unix.Close(dup) // the description's last descriptor: RELEASE
		granted(t, "F_OFD_SETLKW on B after A's open file was closed", done, start, lockWait)
		// Unlocked here, not by the close (its RELEASE is sent after
		// close returns), so that the next subtest finds no record.
		if err := ofd(fb, unix.F_OFD_SETLK, unix.F_UNLCK, 0, 0); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("mount without cache", func(t *testing.T) {
		// weft mount --no-meta-cache opens its namespace another way; its
		// locks are its session's all the same.
		m := c.StartMount(filepath.Join(t.TempDir(), "mnt-nocache"), []string{"--no-meta-cache"})
		defer func() {
			_ = m.Kill()
			<-m.Done()
			m.Detach()
		}()
		fa := openRW(t, filepath.Join(mntA, "nocache"))
		defer fa.Close()
		fn := openRW(t, filepath.Join(m.Dir, "nocache"))
		if err := setlk(fn, unix.F_WRLCK, 0, 10, false); err != nil {
			t.Fatalf("lock through the mount without cache: %v", err)
		}
		if err := setlk(fa, unix.F_WRLCK, 5, 1, false); !errors.Is(err, unix.EAGAIN) {
			t.Fatalf("A over the uncached mount's lock: %v, want EAGAIN", err)
		}
		if err := setlk(fn, unix.F_UNLCK, 0, 0, false); err != nil {
			t.Fatal(err)
		}
		fn.Close()
		if err := setlk(fa, unix.F_WRLCK, 5, 1, false); err != nil {
			t.Fatalf("A after the uncached mount unlocked: %v", err)
		}
		if err := setlk(fa, unix.F_UNLCK, 0, 0, false); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("no records left", func(t *testing.T) {
		f := openRW(t, filepath.Join(mntA, "records"))
		if err := setlk(f, unix.F_WRLCK, 0, 10, false); err != nil {
			t.Fatal(err)
		}
		if err := flockRetry(f, unix.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		if n := lockRecords(t, cli); n == 0 {
			t.Fatal("no lock record in etcd while a lock is held")
		}
		if err := setlk(f, unix.F_UNLCK, 0, 0, false); err != nil {
			t.Fatal(err)
		}
		if err := flockRetry(f, unix.LOCK_UN); err != nil {
			t.Fatal(err)
		}
		if n := lockRecords(t, cli); n != 0 {
			t.Fatalf("%d lock records left in etcd after every lock was released", n)
		}
		f.Close()
	})

	t.Run("mount killed", func(t *testing.T) {
		m := c.StartMount(filepath.Join(t.TempDir(), "mnt-c"), nil)
		fc := openRW(t, filepath.Join(m.Dir, "killed"))
		if err := setlk(fc, unix.F_WRLCK, 0, 0, false); err != nil {
			t.Fatal(err)
		}
		if err := flockRetry(fc, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			t.Fatal(err)
		}
		fb := openRW(t, filepath.Join(mntB, "killed"))
		defer fb.Close()
		if err := setlk(fb, unix.F_WRLCK, 0, 1, false); !errors.Is(err, unix.EAGAIN) {
			t.Fatalf("B over the doomed mount's lock: %v, want EAGAIN", err)
		}
		done := blocked(t, "F_SETLKW on B", func() error { return setlk(fb, unix.F_WRLCK, 0, 0, true) })
		start := time.Now()
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
		<-m.Done()
		fc.Close() // its mount is gone: nothing is released through it
		m.Detach()
		d := granted(t, "F_SETLKW on B after the holder's mount was killed", done, start, 45*time.Second)
		t.Logf("B got the killed mount's POSIX lock %s after the kill (session TTL 30 s)", d)
		if err := flockRetry(fb, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			t.Fatalf("B's flock after the killed mount's session expired: %v", err)
		}
	})
}

// BenchmarkLocks measures a lock and unlock round trip (fcntl F_SETLK of
// one byte range, and flock) through a weft mount against the same on a
// plain local directory, whose locks the kernel keeps: what coherence
// across mounts costs. scripts/bench-locks.sh runs it.
func BenchmarkLocks(b *testing.B) {
	c := harness.Start(b, harness.Options{Nodes: 1, DrivesPerNode: 2, Mount: true})
	for _, d := range []struct{ name, dir string }{{"weft", c.Mount}, {"local", b.TempDir()}} {
		f, err := os.OpenFile(filepath.Join(d.dir, "bench-lock"), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(d.name+"/fcntl", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := setlk(f, unix.F_WRLCK, 0, 100, false); err != nil {
					b.Fatal(err)
				}
				if err := setlk(f, unix.F_UNLCK, 0, 100, false); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lock+unlock/s")
		})
		b.Run(d.name+"/flock", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if err := flockRetry(f, unix.LOCK_EX); err != nil {
					b.Fatal(err)
				}
				if err := flockRetry(f, unix.LOCK_UN); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lock+unlock/s")
		})
		f.Close()
	}
}
