package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"
)

// A Target is where the I/O and metadata benchmarks run: a directory of the
// machine's file system (a weft FUSE mount, a local disk) or an NFSv3
// export. The same benchmark code drives both, so that their figures
// compare like for like.
type Target interface {
	// Session opens a new client of the target: for NFS a connection of
	// its own, as another client machine would have. Each job of a
	// benchmark has one.
	Session(ctx context.Context) (Session, error)
	// String names the target in results.
	String() string
}

// A Session works on the target's paths: slash-separated, relative to the
// target's root, at most a directory and a name ("d/f").
type Session interface {
	Mkdir(path string) error
	Rmdir(path string) error
	// Create makes a new regular file (mode 0644), failing if it exists,
	// and opens it for reading and writing.
	Create(path string) (File, error)
	// Open opens an existing regular file for reading and writing.
	Open(path string) (File, error)
	// Stat looks path up and returns its size.
	Stat(path string) (int64, error)
	Remove(path string) error
	Close() error
}

// A File is an open regular file of a Session.
type File interface {
	WriteAt(p []byte, off int64) (int, error)
	ReadAt(p []byte, off int64) (int, error)
	// Sync makes what was written durable: fsync on a directory target,
	// COMMIT on NFS (whose writes are UNSTABLE, as a kernel client's).
	Sync() error
	Close() error
}

// Dir is a directory target. With Direct, files are opened with O_DIRECT,
// so that reads and writes reach the file system's server (a FUSE mount's
// weft process) instead of the kernel's page cache, as every NFS READ and
// WRITE of this package's client reaches the gateway; buffers are then
// aligned to 4 KiB, and record sizes must be multiples of it.
type Dir struct {
	Path   string
	Direct bool
}

func (d Dir) String() string { return d.Path }

// Session returns a session on the directory; there is no connection.
func (d Dir) Session(context.Context) (Session, error) {
	st, err := os.Stat(d.Path)
	if err != nil {
		return nil, fmt.Errorf("bench: target %s: %w", d.Path, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("bench: target %s is not a directory: give a directory or an nfs:// URL", d.Path)
	}
	return dirSession(d), nil
}

type dirSession Dir

func (d dirSession) p(path string) string { return filepath.Join(d.Path, filepath.FromSlash(path)) }

func (d dirSession) Mkdir(path string) error  { return os.Mkdir(d.p(path), 0o755) }
func (d dirSession) Rmdir(path string) error  { return os.Remove(d.p(path)) }
func (d dirSession) Remove(path string) error { return os.Remove(d.p(path)) }
func (d dirSession) Close() error             { return nil }

func (d dirSession) Stat(path string) (int64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(d.p(path), &st); err != nil {
		return 0, &os.PathError{Op: "stat", Path: d.p(path), Err: err}
	}
	return st.Size, nil
}

func (d dirSession) open(path string, flags int) (File, error) {
	if d.Direct {
		flags |= syscall.O_DIRECT
	}
	f, err := os.OpenFile(d.p(path), flags|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	return dirFile{f}, nil
}

func (d dirSession) Create(path string) (File, error) { return d.open(path, os.O_CREATE|os.O_EXCL) }
func (d dirSession) Open(path string) (File, error)   { return d.open(path, 0) }

type dirFile struct{ *os.File }

func (f dirFile) Sync() error { return f.File.Sync() }

// alignedBuf returns n bytes starting at a 4 KiB boundary, as O_DIRECT
// wants.
func alignedBuf(n int) []byte {
	const align = 4096
	b := make([]byte, n+align)
	off := int(uintptr(unsafe.Pointer(&b[0])) & (align - 1))
	if off != 0 {
		off = align - off
	}
	return b[off : off+n : off+n]
}

// ParseTarget returns the target s names: an nfs:// URL (see ParseNFSURL)
// or a directory.
func ParseTarget(s string, direct bool) (Target, error) {
	if strings.HasPrefix(s, "nfs://") {
		return ParseNFSURL(s)
	}
	if strings.Contains(s, "://") {
		return nil, fmt.Errorf("bench: target %q: want a directory or an nfs:// URL", s)
	}
	return Dir{Path: s, Direct: direct}, nil
}
