package fuse

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/weftfs/weft/internal/vfs"
)

// Timeouts for the kernel's attribute and entry caches: short, so that
// changes made through other mounts show within a second.
const (
	attrTimeout  = time.Second
	entryTimeout = time.Second
	blockSize    = 4096
)

// rawFS implements gofuse.RawFileSystem over a vfs.FS.
type rawFS struct {
	gofuse.RawFileSystem // ENOSYS for what is not implemented below
	fs                   *vfs.FS
	log                  *slog.Logger
	faults               vfs.FaultLog // EIO replies

	mu      sync.Mutex
	dirs    map[uint64]*dirHandle
	nextDir uint64

	srv atomic.Pointer[gofuse.Server] // set by Init, for notifications
}

// Init keeps the server, to send the kernel invalidations.
func (r *rawFS) Init(s *gofuse.Server) { r.srv.Store(s) }

func newRawFS(fs *vfs.FS, log *slog.Logger) *rawFS {
	return &rawFS{RawFileSystem: gofuse.NewDefaultRawFileSystem(), fs: fs, log: log, faults: vfs.FaultLog{Log: log}, dirs: map[uint64]*dirHandle{}, nextDir: 1}
}

func (r *rawFS) String() string { return "weft" }

// callerCtx returns the context of one request, carrying the caller's
// uid, gid and pid (the kernel's id of the calling thread; for a request
// the kernel makes on its own, such as the write-back of a shared
// mapping's pages, not the writer's), which the QoS statistics of the
// request's block calls show.
//
// It deliberately ignores the kernel's interrupt (the handlers' cancel
// channel): a
// process blocked in a FUSE request is interrupted by any signal, and Go
// programs receive SIGURG many times a second (goroutine preemption), so
// honouring interrupts aborts flushes and writes at random — close(2) then
// fails with EINTR, which Go does not retry. Requests are bounded by the
// layers below (RPC and metadata timeouts) instead.
func callerCtx(h *gofuse.InHeader) context.Context {
	return vfs.WithCaller(context.Background(), vfs.Caller{UID: h.Uid, GID: h.Gid, PID: h.Pid})
}

// fillAttr converts vfs attributes to FUSE's.
func fillAttr(a vfs.Attr, out *gofuse.Attr) {
	out.Ino = uint64(a.LIN)
	out.Size = a.Size
	out.Blocks = (a.Allocated + 511) / 512
	if a.Type != vfs.TypeFile {
		out.Blocks = (a.Size + 511) / 512
	}
	out.Blksize = blockSize
	out.SetTimes(&a.Atime, &a.Mtime, &a.Ctime)
	out.Mode = typeBits(a.Type) | a.Mode&0o7777
	out.Nlink = a.Nlink
	out.Uid, out.Gid = a.UID, a.GID
	out.Rdev = a.Rdev
}

func typeBits(t vfs.FileType) uint32 {
	switch t {
	case vfs.TypeDir:
		return syscall.S_IFDIR
	case vfs.TypeSymlink:
		return syscall.S_IFLNK
	case vfs.TypeFIFO:
		return syscall.S_IFIFO
	case vfs.TypeSocket:
		return syscall.S_IFSOCK
	case vfs.TypeCharDev:
		return syscall.S_IFCHR
	case vfs.TypeBlockDev:
		return syscall.S_IFBLK
	}
	return syscall.S_IFREG
}

func typeOf(mode uint32) vfs.FileType {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return vfs.TypeDir
	case syscall.S_IFLNK:
		return vfs.TypeSymlink
	case syscall.S_IFIFO:
		return vfs.TypeFIFO
	case syscall.S_IFSOCK:
		return vfs.TypeSocket
	case syscall.S_IFCHR:
		return vfs.TypeCharDev
	case syscall.S_IFBLK:
		return vfs.TypeBlockDev
	}
	return vfs.TypeFile
}

func fillEntry(a vfs.Attr, out *gofuse.EntryOut) {
	out.NodeId = uint64(a.LIN)
	out.Generation = 1 // LINs are never reused
	out.SetEntryTimeout(entryTimeout)
	out.SetAttrTimeout(attrTimeout)
	fillAttr(a, &out.Attr)
}

func (r *rawFS) Lookup(cancel <-chan struct{}, h *gofuse.InHeader, name string, out *gofuse.EntryOut) gofuse.Status {
	ctx := callerCtx(h)
	a, err := r.fs.Lookup(ctx, vfs.LIN(h.NodeId), name)
	if err != nil {
		if st := r.status(err); st == gofuse.ENOENT {
			// A negative entry: cache "no such name" briefly.
			out.NodeId = 0
			out.SetEntryTimeout(entryTimeout)
			return gofuse.ENOENT
		}
		return r.status(err)
	}
	fillEntry(a, out)
	return gofuse.OK
}

func (r *rawFS) Forget(nodeid, nlookup uint64) {}

func (r *rawFS) GetAttr(cancel <-chan struct{}, in *gofuse.GetAttrIn, out *gofuse.AttrOut) gofuse.Status {
	ctx := callerCtx(&in.InHeader)
	a, err := r.fs.GetAttr(ctx, vfs.LIN(in.NodeId))
	if err != nil {
		return r.status(err)
	}
	out.SetTimeout(attrTimeout)
	fillAttr(a, &out.Attr)
	return gofuse.OK
}

func (r *rawFS) SetAttr(cancel <-chan struct{}, in *gofuse.SetAttrIn, out *gofuse.AttrOut) gofuse.Status {
	ctx := callerCtx(&in.InHeader)
	var mask vfs.SetAttrMask
	var a vfs.Attr
	if m, ok := in.GetMode(); ok {
		mask |= vfs.SetMode
		a.Mode = m & 0o7777
	}
	if u, ok := in.GetUID(); ok {
		mask |= vfs.SetUID
		a.UID = u
	}
	if g, ok := in.GetGID(); ok {
		mask |= vfs.SetGID
		a.GID = g
	}
	if s, ok := in.GetSize(); ok {
		mask |= vfs.SetSize
		a.Size = s
	}
	if in.Valid&gofuse.FATTR_ATIME_NOW != 0 {
		mask |= vfs.SetAtimeNow
	} else if t, ok := in.GetATime(); ok {
		mask |= vfs.SetAtime
		a.Atime = t
	}
	if in.Valid&gofuse.FATTR_MTIME_NOW != 0 {
		mask |= vfs.SetMtimeNow
	} else if t, ok := in.GetMTime(); ok {
		mask |= vfs.SetMtime
		a.Mtime = t
	}
	if t, ok := in.GetCTime(); ok {
		mask |= vfs.SetCtime
		a.Ctime = t
	}
	var res vfs.Attr
	var err error
	if mask == 0 {
		res, err = r.fs.GetAttr(ctx, vfs.LIN(in.NodeId))
	} else {
		res, err = r.fs.SetAttr(ctx, vfs.LIN(in.NodeId), mask, a)
	}
	if err == nil && in.Valid&gofuse.FATTR_KILL_SUIDGID != 0 && mask&vfs.SetMode == 0 {
		// A truncate or chown by an unprivileged caller, which the kernel
		// leaves to us (HANDLE_KILLPRIV_V2).
		if _, err = r.fs.KillPrivileges(ctx, vfs.LIN(in.NodeId), true); err == nil {
			res, err = r.fs.GetAttr(ctx, vfs.LIN(in.NodeId))
		}
	}
	if err != nil {
		return r.status(err)
	}
	out.SetTimeout(attrTimeout)
	fillAttr(res, &out.Attr)
	return gofuse.OK
}

func (r *rawFS) Mknod(cancel <-chan struct{}, in *gofuse.MknodIn, name string, out *gofuse.EntryOut) gofuse.Status {
	ctx := callerCtx(&in.InHeader)
	a, _, err := r.fs.Create(ctx, vfs.LIN(in.NodeId), name, vfs.CreateArgs{Type: typeOf(in.Mode), Mode: in.Mode & 0o7777, Rdev: in.Rdev}, false, 0)
	if err != nil {
		return r.status(err)
	}
	fillEntry(a, out)
	return gofuse.OK
}

func (r *rawFS) Mkdir(cancel <-chan struct{}, in *gofuse.MkdirIn, name string, out *gofuse.EntryOut) gofuse.Status {
	ctx := callerCtx(&in.InHeader)
	a, err := r.fs.Mkdir(ctx, vfs.LIN(in.NodeId), name, in.Mode&0o7777)
	if err != nil {
		return r.status(err)
	}
	fillEntry(a, out)
	return gofuse.OK
}

func (r *rawFS) Unlink(cancel <-chan struct{}, h *gofuse.InHeader, name string) gofuse.Status {
	ctx := callerCtx(h)
	return r.status(r.fs.Unlink(ctx, vfs.LIN(h.NodeId), name))
}

func (r *rawFS) Rmdir(cancel <-chan struct{}, h *gofuse.InHeader, name string) gofuse.Status {
	ctx := callerCtx(h)
	return r.status(r.fs.Rmdir(ctx, vfs.LIN(h.NodeId), name))
}

// Linux renameat2 flags.
const (
	renameNoReplace = 1
	renameExchange  = 2
)

func (r *rawFS) Rename(cancel <-chan struct{}, in *gofuse.RenameIn, oldName, newName string) gofuse.Status {
	ctx := callerCtx(&in.InHeader)
	var flags vfs.RenameFlags
	if in.Flags&renameNoReplace != 0 {
		flags |= vfs.RenameNoReplace
	}
	if in.Flags&renameExchange != 0 {
		flags |= vfs.RenameExchange
	}
	if in.Flags&^(renameNoReplace|renameExchange) != 0 {
		return gofuse.EINVAL
	}
	return r.status(r.fs.Rename(ctx, vfs.LIN(in.NodeId), oldName, vfs.LIN(in.Newdir), newName, flags))
}

func (r *rawFS) Link(cancel <-chan struct{}, in *gofuse.LinkIn, name string, out *gofuse.EntryOut) gofuse.Status {
	ctx := callerCtx(&in.InHeader)
	a, err := r.fs.Link(ctx, vfs.LIN(in.Oldnodeid), vfs.LIN(in.NodeId), name)
	if err != nil {
		return r.status(err)
	}
	fillEntry(a, out)
	return gofuse.OK
}

func (r *rawFS) Symlink(cancel <-chan struct{}, h *gofuse.InHeader, target, name string, out *gofuse.EntryOut) gofuse.Status {
	ctx := callerCtx(h)
	a, err := r.fs.Symlink(ctx, vfs.LIN(h.NodeId), name, target)
	if err != nil {
		return r.status(err)
	}
	fillEntry(a, out)
	return gofuse.OK
}

func (r *rawFS) Readlink(cancel <-chan struct{}, h *gofuse.InHeader) ([]byte, gofuse.Status) {
	ctx := callerCtx(h)
	t, err := r.fs.Readlink(ctx, vfs.LIN(h.NodeId))
	if err != nil {
		return nil, r.status(err)
	}
	return []byte(t), gofuse.OK
}

// Access is only called without default_permissions; answer it all the same.
func (r *rawFS) Access(cancel <-chan struct{}, in *gofuse.AccessIn) gofuse.Status {
	ctx := callerCtx(&in.InHeader)
	return r.status(r.fs.Access(ctx, vfs.LIN(in.NodeId), in.Mask&7))
}

func (r *rawFS) Create(cancel <-chan struct{}, in *gofuse.CreateIn, name string, out *gofuse.CreateOut) gofuse.Status {
	ctx := callerCtx(&in.InHeader)
	a, h, err := r.fs.Create(ctx, vfs.LIN(in.NodeId), name, vfs.CreateArgs{Type: vfs.TypeFile, Mode: in.Mode & 0o7777}, true, int(in.Flags)|vfs.OExcl)
	if err != nil {
		return r.status(err)
	}
	fillEntry(a, &out.EntryOut)
	out.Fh = h.ID
	return gofuse.OK
}

func (r *rawFS) Open(cancel <-chan struct{}, in *gofuse.OpenIn, out *gofuse.OpenOut) gofuse.Status {
	ctx := callerCtx(&in.InHeader)
	h, err := r.fs.Open(ctx, vfs.LIN(in.NodeId), int(in.Flags))
	if err != nil {
		return r.status(err)
	}
	// Close-to-open: vfs.Open saw every change committed before it, but
	// the kernel may hold attributes (the size above all) from a lookup
	// answered before another client's close reached this mount; make it
	// ask again. Offset -1 drops attributes only: no page is touched, so
	// this cannot wait on the file's own I/O (the kernel drops the page
	// cache of an open without FOPEN_KEEP_CACHE anyway).
	r.invalidateAttr(in.NodeId)
	out.Fh = h.ID
	return gofuse.OK
}

// invalidateAttr makes the kernel drop the attributes it caches of node
// (offset -1: no page is touched, so this cannot wait on the file's own
// I/O, and may be called from a request on it).
func (r *rawFS) invalidateAttr(node uint64) {
	if srv := r.srv.Load(); srv != nil {
		if st := srv.InodeNotify(node, -1, 0); st != gofuse.OK && st != gofuse.ENOSYS {
			r.log.Debug("fuse: attribute invalidation", "lin", node, "status", st)
		}
	}
}

func (r *rawFS) Read(cancel <-chan struct{}, in *gofuse.ReadIn, buf []byte) (gofuse.ReadResult, gofuse.Status) {
	h, err := r.fs.Handle(in.Fh)
	if err != nil {
		return nil, r.status(err)
	}
	ctx := callerCtx(&in.InHeader)
	// A view of the mount's cache is sent as it is (it never changes), not
	// copied into buf first.
	b, err := h.ReadView(ctx, buf[:in.Size], int64(in.Offset))
	if err != nil && len(b) == 0 && !isEOF(err) {
		return nil, r.status(err)
	}
	return gofuse.ReadResultData(b), gofuse.OK
}

func (r *rawFS) Write(cancel <-chan struct{}, in *gofuse.WriteIn, data []byte) (uint32, gofuse.Status) {
	h, err := r.fs.Handle(in.Fh)
	if err != nil {
		return 0, r.status(err)
	}
	ctx := callerCtx(&in.InHeader)
	// The kernel leaves killing privileges to us (HANDLE_KILLPRIV_V2,
	// mount.go), setuid and setgid with WRITE_KILL_SUIDGID (a writer
	// without CAP_FSETID); when the mode changes, its cached attributes
	// are stale: drop them (attributes only, as Open does).
	if changed, err := h.KillPrivileges(ctx, in.WriteFlags&gofuse.WRITE_KILL_SUIDGID != 0); err != nil {
		return 0, r.status(err)
	} else if changed {
		r.invalidateAttr(in.NodeId)
	}
	n, err := h.Write(ctx, data, int64(in.Offset))
	if err != nil {
		return uint32(n), r.status(err)
	}
	return uint32(n), gofuse.OK
}

func (r *rawFS) Flush(cancel <-chan struct{}, in *gofuse.FlushIn) gofuse.Status {
	h, err := r.fs.Handle(in.Fh)
	if err != nil {
		return r.status(err)
	}
	ctx := callerCtx(&in.InHeader)
	err = h.Flush(ctx)
	// A close by a process: its POSIX locks on the file go (locks.go).
	if lerr := h.UnlockOwner(ctx, in.LockOwner); err == nil {
		err = lerr
	}
	return r.status(err)
}

func (r *rawFS) Fsync(cancel <-chan struct{}, in *gofuse.FsyncIn) gofuse.Status {
	h, err := r.fs.Handle(in.Fh)
	if err != nil {
		return r.status(err)
	}
	ctx := callerCtx(&in.InHeader)
	return r.status(h.Fsync(ctx))
}

func (r *rawFS) FsyncDir(cancel <-chan struct{}, in *gofuse.FsyncIn) gofuse.Status {
	return r.status(r.fs.FsyncDir(callerCtx(&in.InHeader)))
}

func (r *rawFS) Release(cancel <-chan struct{}, in *gofuse.ReleaseIn) {
	ctx := callerCtx(&in.InHeader)
	if err := r.fs.Release(context.WithoutCancel(ctx), in.Fh); err != nil {
		r.log.Warn("release", "lin", in.NodeId, "err", err)
	}
}

func (r *rawFS) StatFs(cancel <-chan struct{}, h *gofuse.InHeader, out *gofuse.StatfsOut) gofuse.Status {
	ctx := callerCtx(h)
	st, err := r.fs.StatFS(ctx)
	if err != nil {
		return r.status(err)
	}
	out.Bsize = blockSize
	out.Frsize = blockSize
	out.Blocks = uint64(st.TotalBytes) / blockSize
	out.Bfree = uint64(st.FreeBytes) / blockSize
	out.Bavail = out.Bfree
	out.Files = uint64(st.Files)
	out.Ffree = 1 << 40
	out.NameLen = vfs.MaxNameLen
	return gofuse.OK
}

func (r *rawFS) GetXAttr(cancel <-chan struct{}, h *gofuse.InHeader, name string, dest []byte) (uint32, gofuse.Status) {
	ctx := callerCtx(h)
	v, err := r.fs.GetXattr(ctx, vfs.LIN(h.NodeId), name)
	if err != nil {
		return 0, r.status(err)
	}
	if len(dest) < len(v) {
		return uint32(len(v)), gofuse.ERANGE
	}
	return uint32(copy(dest, v)), gofuse.OK
}

func (r *rawFS) ListXAttr(cancel <-chan struct{}, h *gofuse.InHeader, dest []byte) (uint32, gofuse.Status) {
	ctx := callerCtx(h)
	names, err := r.fs.ListXattr(ctx, vfs.LIN(h.NodeId))
	if err != nil {
		return 0, r.status(err)
	}
	var b []byte
	for _, n := range names {
		b = append(append(b, n...), 0)
	}
	if len(dest) < len(b) {
		return uint32(len(b)), gofuse.ERANGE
	}
	return uint32(copy(dest, b)), gofuse.OK
}

// Linux setxattr flags.
const (
	xattrCreate  = 1
	xattrReplace = 2
)

func (r *rawFS) SetXAttr(cancel <-chan struct{}, in *gofuse.SetXAttrIn, name string, data []byte) gofuse.Status {
	ctx := callerCtx(&in.InHeader)
	var flags vfs.XattrFlags
	if in.Flags&xattrCreate != 0 {
		flags |= vfs.XattrCreate
	}
	if in.Flags&xattrReplace != 0 {
		flags |= vfs.XattrReplace
	}
	return r.status(r.fs.SetXattr(ctx, vfs.LIN(in.NodeId), name, data, flags))
}

func (r *rawFS) RemoveXAttr(cancel <-chan struct{}, h *gofuse.InHeader, name string) gofuse.Status {
	ctx := callerCtx(h)
	return r.status(r.fs.RemoveXattr(ctx, vfs.LIN(h.NodeId), name))
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
