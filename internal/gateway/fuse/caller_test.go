package fuse

import (
	"testing"

	gofuse "github.com/hanwen/go-fuse/v2/fuse"

	"github.com/weftfs/weft/internal/vfs"
)

// TestCallerCtx: a request's context carries the uid, gid and pid of its
// header as vfs reads them (whence the data path tags its block calls:
// internal/vfs's TestCallerPIDReachesBlockCalls).
func TestCallerCtx(t *testing.T) {
	h := &gofuse.InHeader{Caller: gofuse.Caller{Owner: gofuse.Owner{Uid: 1001, Gid: 1002}, Pid: 4242}}
	if got := vfs.CallerFrom(callerCtx(h)); got.UID != 1001 || got.GID != 1002 || got.PID != 4242 {
		t.Errorf("caller of a request from uid 1001, gid 1002, pid 4242: %+v", got)
	}
	if got := vfs.CallerFrom(callerCtx(&gofuse.InHeader{})); got.PID != 0 {
		t.Errorf("caller of a request with no pid: %+v", got)
	}
}
