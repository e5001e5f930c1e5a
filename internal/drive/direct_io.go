package drive

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Direct I/O. With SyncAlways a block's bytes go to the device before Put
// returns anyway; writing them with O_DIRECT, from the drive's own aligned
// buffers, skips the copy into the page cache and the writeback work of
// the fdatasync (about a fifth of a node's CPU time per byte written, on
// the 2-core test machine). A block whose length is not a multiple of
// directAlign (small mirrored blocks) is written through the page cache, as
// is everything on a file system that refuses O_DIRECT (Open tries it
// once: tmpfs before Linux 6.6, some FUSE file systems). Large aligned
// reads go around the page cache too (readAt). Another process reading a block
// sees the same bytes either way: the kernel keeps direct I/O and the page
// cache coherent.

// directAlign is the alignment O_DIRECT needs of buffers, offsets and
// lengths: the logical block size of the device, at most the page size.
// Block data starts at a multiple of HeaderAlign, so it qualifies.
const directAlign = 4096

// alignedBuf returns a zeroed buffer of n bytes whose first byte is
// directAlign-aligned. (Go's garbage collector does not move objects.)
func alignedBuf(n int) []byte {
	b := make([]byte, n+directAlign)
	off := (directAlign - int(uintptr(unsafe.Pointer(unsafe.SliceData(b)))%directAlign)) % directAlign
	return b[off : off+n : off+n]
}

// probeDirect reports whether files in dir can be written with O_DIRECT: it
// writes one aligned page to a temp file (removed at once; a leftover is
// a temp file that Open removes).
func probeDirect(dir string) error {
	f, err := createTemp(dir, tempPrefix+"direct-probe-", true)
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.WriteAt(alignedBuf(directAlign), 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// createTemp creates a new file dir/prefix<random> for reading and writing,
// like os.CreateTemp, with O_DIRECT if direct.
func createTemp(dir, prefix string, direct bool) (*os.File, error) {
	flag := os.O_RDWR | os.O_CREATE | os.O_EXCL
	if direct {
		flag |= syscall.O_DIRECT
	}
	for try := 0; ; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(rand.Uint64(), 36))
		f, err := os.OpenFile(name, flag, 0o600)
		if errors.Is(err, fs.ErrExist) && try < 100 {
			continue
		}
		return f, err
	}
}

// useDirect reports whether Put writes a block of length bytes with
// O_DIRECT.
func (d *Drive) useDirect(length int64) bool {
	return d.direct.Load() && length%directAlign == 0
}

// directFailed turns direct I/O off for the drive after a direct write
// failed with EINVAL (an alignment the device wants and the probe did not
// see): later Puts write through the page cache.
func (d *Drive) directFailed(err error) {
	if errors.Is(err, syscall.EINVAL) && d.direct.CompareAndSwap(true, false) {
		d.log.Warn("direct writes refused; writing blocks through the page cache from now on", "err", err)
	}
}

// initDirect turns direct I/O on if the drive syncs its writes and its file
// system takes O_DIRECT.
func (d *Drive) initDirect() {
	if d.sync != SyncAlways {
		return
	}
	if err := probeDirect(d.path); err != nil {
		d.log.Info("O_DIRECT not available; writing blocks through the page cache", "err", fmt.Sprint(err))
		return
	}
	d.direct.Store(true)
}

// isAligned reports whether b starts at a directAlign boundary in memory,
// so that a direct write can take it as it is. (Go's allocator puts large
// objects at page boundaries, so whole stripe buffers, and units cut from
// them at multiples of the unit size, are.)
func isAligned(b []byte) bool {
	return len(b) == 0 || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%directAlign == 0
}

// directReadMin is the smallest read that goes around the page cache: a
// read of whole units (a reader's stripes, a repair's or a rebalance's
// sources) or a scan's (Verify). The client caches what it streams, and
// blocks are written around the cache (Put) or dropped from it once
// adopted (Stage): through the page cache such a read costs a copy and the
// pages' allocation and reclaim (1.19x the sequential read rate with four
// readers without them, docs/benchmarks.md), and pushes out the small
// blocks and headers that are read again. A scrub must read the disk, not
// pages the cache happens to hold.
const directReadMin = 256 << 10

// readAt reads block file f at off into buf, with O_DIRECT if the read is
// large and aligned enough (see directReadMin): buf and off aligned to
// directAlign (a length that is not is read in two parts). *direct is
// whether O_DIRECT is on for f (off when it is opened: its header is read
// through the page cache); readAt turns it on or off as each read needs.
// A nil direct reads through the page cache. A kernel or file system that refuses it
// (tmpfs before Linux 6.6, an alignment the device wants) gets the read
// again through the page cache, and so does every later read of the drive.
func (d *Drive) readAt(f *os.File, buf []byte, off int64, direct *bool) (int, error) {
	if direct == nil {
		return f.ReadAt(buf, off)
	}
	want := !d.bufferedReads.Load() && len(buf) >= directReadMin && off%directAlign == 0 && isAligned(buf)
	if head := len(buf) &^ (directAlign - 1); want && head != len(buf) {
		// A block's last bytes that are not a whole page: the pages
		// before them directly, the rest through the cache.
		n, err := d.readAt(f, buf[:head], off, direct)
		if err != nil || n < head {
			return n, err
		}
		m, err := d.readAt(f, buf[head:], off+int64(head), direct)
		return n + m, err
	}
	if want != *direct {
		if err := setFlags(f, unix.O_DIRECT, want); err != nil {
			if !want {
				return 0, fmt.Errorf("drive %v: reading a block through the page cache: %w", d.ID(), err)
			}
			d.directReadFailed(err)
			return f.ReadAt(buf, off)
		}
		*direct = want
	}
	n, err := f.ReadAt(buf, off)
	if *direct && errors.Is(err, syscall.EINVAL) {
		d.directReadFailed(err)
		return d.readAt(f, buf, off, direct)
	}
	return n, err
}

func (d *Drive) directReadFailed(err error) {
	if d.bufferedReads.CompareAndSwap(false, true) {
		d.log.Info("direct reads refused; reading blocks through the page cache from now on", "err", fmt.Sprint(err))
	}
}

// setFlags sets (on) or clears file status flags of the open file f.
func setFlags(f *os.File, flags int, on bool) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		if err != nil {
			ferr = err
			return
		}
		if on {
			fl |= flags
		} else {
			fl &^= flags
		}
		_, ferr = unix.FcntlInt(fd, unix.F_SETFL, fl)
	}); err != nil {
		return err
	}
	return ferr
}
