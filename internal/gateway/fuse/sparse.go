package fuse

import (
	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/weftfs/weft/internal/vfs"
)

// lseek's whence values for holes (Linux's); the kernel answers SEEK_SET,
// SEEK_CUR and SEEK_END itself and sends only these.
const (
	seekData = 3
	seekHole = 4
)

// Lseek answers SEEK_DATA and SEEK_HOLE from the file's stripe maps and
// this mount's buffered writes (vfs.Handle.SeekData, SeekHole). It relies
// on every write having reached vfs: the kernel's fuse_lseek does not
// write its dirty pages back first, so a mount that turns on the kernel's
// writeback cache (CAP_WRITEBACK_CACHE; off today) would answer holes over
// data still in the page cache, and must then refuse Lseek (ENOSYS: the
// kernel falls back to "all data") or have those pages written back.
func (r *rawFS) Lseek(cancel <-chan struct{}, in *gofuse.LseekIn, out *gofuse.LseekOut) gofuse.Status {
	h, err := r.fs.Handle(in.Fh)
	if err != nil {
		return r.status(err)
	}
	ctx := callerCtx(&in.InHeader)
	var off int64
	switch in.Whence {
	case seekData:
		off, err = h.SeekData(ctx, int64(in.Offset))
	case seekHole:
		off, err = h.SeekHole(ctx, int64(in.Offset))
	default:
		return gofuse.EINVAL
	}
	if err != nil {
		return r.status(err)
	}
	out.Offset = uint64(off)
	return gofuse.OK
}

// Fallocate is fallocate(2): modes 0, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE and
// ZERO_RANGE (with or without KEEP_SIZE); others are EOPNOTSUPP (see
// vfs.Handle.Allocate).
func (r *rawFS) Fallocate(cancel <-chan struct{}, in *gofuse.FallocateIn) gofuse.Status {
	h, err := r.fs.Handle(in.Fh)
	if err != nil {
		return r.status(err)
	}
	ctx := callerCtx(&in.InHeader)
	return r.status(h.Allocate(ctx, int64(in.Offset), int64(in.Length), vfs.AllocMode(in.Mode)))
}
