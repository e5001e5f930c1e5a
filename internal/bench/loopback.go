package bench

import (
	"context"
	"fmt"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Loopback mounts src at mnt through go-fuse's loopback file system with
// kernel passthrough refused, so that every read and write crosses the FUSE
// protocol and a Go server, as weft's do, and uses the same mount options
// as weft (1 MiB requests). It returns the server; Unmount stops it.
func Loopback(src, mnt string) (*fuse.Server, error) {
	root := &fs.LoopbackRoot{Path: src, NewNode: newNoPassthroughNode}
	var st syscall.Stat_t
	if err := syscall.Stat(src, &st); err != nil {
		return nil, fmt.Errorf("bench: loopback source %s: %w", src, err)
	}
	root.Dev = uint64(st.Dev)
	root.RootNode = newNoPassthroughNode(root, nil, "", &st)
	return fs.Mount(mnt, root.RootNode, &fs.Options{MountOptions: fuse.MountOptions{
		AllowOther: true, MaxWrite: 1 << 20, MaxReadAhead: 1 << 20, MaxBackground: 64,
		FsName: "loopback:" + src, Name: "weft-bench-loopback", DirectMount: true,
	}})
}

// noPassthroughNode is a loopback node whose open files refuse passthrough.
type noPassthroughNode struct{ fs.LoopbackNode }

func newNoPassthroughNode(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
	return &noPassthroughNode{fs.LoopbackNode{RootData: r}}
}

var (
	_ fs.NodeOpener  = (*noPassthroughNode)(nil)
	_ fs.NodeCreater = (*noPassthroughNode)(nil)
)

// noPassthroughFile hides LoopbackFile's passthrough descriptor.
type noPassthroughFile struct{ *fs.LoopbackFile }

// PassthroughFd refuses passthrough.
func (noPassthroughFile) PassthroughFd() (int, bool) { return 0, false }

func wrap(fh fs.FileHandle) fs.FileHandle {
	if lf, ok := fh.(*fs.LoopbackFile); ok {
		return noPassthroughFile{lf}
	}
	return fh
}

func (n *noPassthroughNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	return wrap(fh), fl, errno
}

func (n *noPassthroughNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ch, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	return ch, wrap(fh), fl, errno
}
