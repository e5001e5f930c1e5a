package fuse

import (
	"context"
	"sync"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/weftfs/weft/internal/vfs"
)

// dirHandle is an open directory. FUSE resumes a listing by offset; vfs
// resumes by name. Offsets are positions in the stream (1, 2 for "." and
// ".."; then one per entry), and the handle remembers the name at each
// offset of the last two pages so that the kernel can resume anywhere in
// the page it last received. An unknown offset (seekdir to an old
// position) restarts the listing and skips to that position.
type dirHandle struct {
	lin vfs.LIN

	mu          sync.Mutex
	names, prev map[uint64]string // offset → name of the entry ending there
	done        bool              // the last page reached the end
}

// pageSize is how many entries one ReadDir asks vfs for.
const pageSize = 512

func (r *rawFS) OpenDir(cancel <-chan struct{}, in *gofuse.OpenIn, out *gofuse.OpenOut) gofuse.Status {
	ctx := callerCtx(&in.InHeader)
	a, err := r.fs.GetAttr(ctx, vfs.LIN(in.NodeId))
	if err != nil {
		return r.status(err)
	}
	if a.Type != vfs.TypeDir {
		return gofuse.ENOTDIR
	}
	r.mu.Lock()
	out.Fh = r.nextDir
	r.nextDir++
	r.dirs[out.Fh] = &dirHandle{lin: a.LIN, names: map[uint64]string{}}
	r.mu.Unlock()
	return gofuse.OK
}

func (r *rawFS) ReleaseDir(in *gofuse.ReleaseIn) {
	r.mu.Lock()
	delete(r.dirs, in.Fh)
	r.mu.Unlock()
}

func (r *rawFS) ReadDir(cancel <-chan struct{}, in *gofuse.ReadIn, out *gofuse.DirEntryList) gofuse.Status {
	r.mu.Lock()
	d := r.dirs[in.Fh]
	r.mu.Unlock()
	if d == nil {
		return gofuse.EBADF
	}
	ctx := callerCtx(&in.InHeader)
	d.mu.Lock()
	defer d.mu.Unlock()

	off := in.Offset
	if off < 2 {
		parent := uint64(d.lin)
		if off == 0 && !out.AddDirEntry(gofuse.DirEntry{Name: ".", Ino: uint64(d.lin), Mode: gofuse.S_IFDIR, Off: 1}) {
			return gofuse.OK
		}
		if p, err := r.fs.Parent(ctx, d.lin); err == nil {
			parent = uint64(p)
		}
		if !out.AddDirEntry(gofuse.DirEntry{Name: "..", Ino: parent, Mode: gofuse.S_IFDIR, Off: 2}) {
			return gofuse.OK
		}
		off = 2
	}
	after, ok := "", true
	if off > 2 {
		if after, ok = d.names[off]; !ok {
			after, ok = d.prev[off]
		}
	}
	if !ok {
		// Unknown position: list from the start, skipping off-2 entries.
		var err error
		if after, err = r.skipTo(ctx, d.lin, off-2); err != nil {
			return r.status(err)
		}
	}
	d.prev, d.names = d.names, map[uint64]string{}
	for {
		ents, next, err := r.fs.ReadDir(ctx, d.lin, after, pageSize)
		if err != nil {
			return r.status(err)
		}
		for _, e := range ents {
			off++
			if !out.AddDirEntry(gofuse.DirEntry{Name: e.Name, Ino: uint64(e.LIN), Mode: typeBits(e.Type), Off: off}) {
				return gofuse.OK
			}
			d.names[off] = e.Name
			after = e.Name
		}
		if next == "" {
			return gofuse.OK
		}
	}
}

// skipTo returns the name of the n-th entry of dir (1-based), "" for 0.
func (r *rawFS) skipTo(ctx context.Context, dir vfs.LIN, n uint64) (string, error) {
	after := ""
	for n > 0 {
		ents, next, err := r.fs.ReadDir(ctx, dir, after, int(min(n, pageSize)))
		if err != nil {
			return "", err
		}
		if len(ents) == 0 {
			return after, nil
		}
		after = ents[len(ents)-1].Name
		n -= uint64(len(ents))
		if next == "" {
			return after, nil
		}
	}
	return after, nil
}
