package vfs_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/weftfs/weft/internal/vfs"
	"github.com/weftfs/weft/internal/vfs/vfstest"
)

// TestKillPrivileges: a change of a file's data removes its capabilities
// whoever makes it, and its setuid bit (and setgid with group-exec) when
// made by a caller other than root — at a handle's first write, an
// O_TRUNC open and a truncate — so that the FUSE gateway can leave it to
// vfs (HANDLE_KILLPRIV_V2) and the kernel need not ask before every
// write. Setgid without group-exec stays; KillPrivileges with suidgid
// kills setuid and setgid for any caller.
func TestKillPrivileges(t *testing.T) {
	fs := vfstest.New(t).NewFS()
	root := vfs.WithCaller(context.Background(), vfs.Caller{})
	user := vfs.WithCaller(context.Background(), vfs.Caller{UID: 1000, GID: 1000})
	capv := []byte{1, 0, 0, 2, 0, 32, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	n := 0
	// file makes a file of uid 1000 with mode and capabilities.
	file := func(mode uint32) vfs.LIN {
		n++
		a, _, err := fs.Create(root, vfs.RootLIN, string(rune('a'+n)), vfs.CreateArgs{Type: vfs.TypeFile, Mode: 0o666}, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fs.SetAttr(root, a.LIN, vfs.SetUID|vfs.SetGID, vfs.Attr{UID: 1000, GID: 1000}); err != nil {
			t.Fatal(err)
		}
		if _, err := fs.SetAttr(root, a.LIN, vfs.SetMode, vfs.Attr{Mode: mode}); err != nil {
			t.Fatal(err)
		}
		if err := fs.SetXattr(root, a.LIN, vfs.CapabilityXattr, capv, 0); err != nil {
			t.Fatal(err)
		}
		return a.LIN
	}
	write := func(ctx context.Context, lin vfs.LIN, flags int) {
		t.Helper()
		h, err := fs.Open(ctx, lin, flags)
		if err != nil {
			t.Fatal(err)
		}
		if flags&os.O_TRUNC == 0 {
			for range 2 {
				if _, err := h.Write(ctx, []byte("data"), 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := fs.Release(ctx, h.ID); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, lin vfs.LIN, mode uint32, caps bool) {
		t.Helper()
		a, err := fs.GetAttr(root, lin)
		if err != nil {
			t.Fatal(err)
		}
		_, xerr := fs.GetXattr(root, lin, vfs.CapabilityXattr)
		if a.Mode != mode || (xerr == nil) != caps || (xerr != nil && !errors.Is(xerr, vfs.ErrNoXattr)) {
			t.Errorf("%s: mode %o, capabilities %v (%v); want %o, %v", what, a.Mode, xerr == nil, xerr, mode, caps)
		}
	}

	f := file(0o6775)
	write(user, f, os.O_WRONLY)
	check("a user's write", f, 0o775, false)

	f = file(0o6765) // setgid without group-exec: mandatory locking, kept
	write(user, f, os.O_WRONLY)
	check("a user's write, setgid without group-exec", f, 0o2765, false)

	f = file(0o6775)
	write(root, f, os.O_WRONLY)
	check("root's write", f, 0o6775, false)

	f = file(0o6775)
	write(user, f, os.O_WRONLY|os.O_TRUNC)
	check("a user's O_TRUNC open", f, 0o775, false)

	f = file(0o6775)
	if _, err := fs.SetAttr(user, f, vfs.SetSize, vfs.Attr{Size: 1}); err != nil {
		t.Fatal(err)
	}
	check("a user's truncate", f, 0o775, false)

	f = file(0o6775)
	if _, err := fs.SetAttr(root, f, vfs.SetSize, vfs.Attr{Size: 1}); err != nil {
		t.Fatal(err)
	}
	check("root's truncate", f, 0o6775, false)

	f = file(0o6775)
	if changed, err := fs.KillPrivileges(root, f, true); err != nil || !changed {
		t.Fatalf("KillPrivileges: changed %v, %v", changed, err)
	}
	check("KillPrivileges with suidgid", f, 0o775, false)
	if changed, err := fs.KillPrivileges(root, f, true); err != nil || changed { // nothing left
		t.Fatalf("KillPrivileges again: changed %v, %v", changed, err)
	}
}
