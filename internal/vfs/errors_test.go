package vfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/meta"
)

// TestClassify checks every translation of the table: the error gets its
// class, keeps its message (no doubled prefixes) and its chain.
func TestClassify(t *testing.T) {
	cases := []struct {
		from, class error
	}{
		{meta.ErrNotFound, ErrNotFound},
		{meta.ErrExists, ErrExists},
		{meta.ErrNotDir, ErrNotDir},
		{meta.ErrIsDir, ErrIsDir},
		{meta.ErrNotEmpty, ErrNotEmpty},
		{meta.ErrNameTooLong, ErrNameTooLong},
		{meta.ErrNotPermitted, ErrPerm},
		{meta.ErrTooManyLinks, ErrTooManyLinks},
		{meta.ErrRenameLoop, ErrInvalid},
		{meta.ErrNoXattr, ErrNoXattr},
		{meta.ErrXattrTooLarge, ErrXattrTooLarge},
		{meta.ErrBusy, ErrBusy},
		{meta.ErrLocked, ErrLocked},
		{meta.ErrLocksLost, ErrNoLocks},
		{meta.ErrInvalid, ErrInvalid},
		{client.ErrNoSpace, ErrNoSpace},
		{client.ErrNoData, ErrNoData},
		{meta.ErrTooLarge, ErrFileTooLarge},
		{meta.ErrUnavailable, ErrUnavailable},
		{meta.ErrConflict, ErrUnavailable},
		{client.ErrUnavailable, ErrUnavailable},
		{client.ErrConflict, ErrUnavailable},
	}
	tested := map[error]bool{}
	for _, tc := range cases {
		tested[tc.from] = true
		in := fmt.Errorf("write LIN 17: %w: detail", tc.from)
		got := classify(in)
		if !errors.Is(got, tc.class) {
			t.Errorf("classify(%v): not %v", in, tc.class)
		}
		if !errors.Is(got, tc.from) {
			t.Errorf("classify(%v): lost %v from its chain", in, tc.from)
		}
		if got.Error() != in.Error() {
			t.Errorf("classify(%v) says %q", in, got.Error())
		}
		for _, other := range allClasses() {
			if other != tc.class && errors.Is(got, other) {
				t.Errorf("classify(%v) is also %v", in, other)
			}
		}
		if again := classify(got); again != got {
			t.Errorf("classify is not idempotent on %v", got)
		}
	}
	for _, c := range classes {
		if !tested[c.from] {
			t.Errorf("the translation table maps %v, which this test does not: add it to the cases", c.from)
		}
	}
	// Errors of no class, vfs's own and nil pass as they are.
	for _, in := range []error{
		nil,
		io.EOF,
		context.Canceled,
		fmt.Errorf("read: %w", client.ErrCorrupt),
		fmt.Errorf("%w: LIN 3", ErrAccess),
		fmt.Errorf("%w: 7", ErrBadHandle),
	} {
		if got := classify(in); got != in {
			t.Errorf("classify(%v) = %v, want it unchanged", in, got)
		}
	}
	// A lower class keeps context.Canceled findable for the gateway.
	in := fmt.Errorf("%w: %w", client.ErrUnavailable, context.Canceled)
	if got := classify(in); !errors.Is(got, ErrUnavailable) || !errors.Is(got, context.Canceled) {
		t.Errorf("classify(%v) = %v: class or context.Canceled lost", in, got)
	}
}

func allClasses() []error {
	return []error{ErrNotFound, ErrExists, ErrNotDir, ErrIsDir, ErrNotEmpty, ErrNameTooLong, ErrPerm, ErrAccess,
		ErrTooManyLinks, ErrInvalid, ErrNoXattr, ErrXattrTooLarge, ErrBusy, ErrLocked, ErrNoLocks, ErrBadHandle, ErrNoSpace, ErrFileTooLarge,
		ErrNotSupported, ErrNoData, ErrUnavailable}
}

// TestErrorsFromMeta drives real failures through an FS over a namespace:
// each comes out of vfs in its class, with meta's message.
func TestErrorsFromMeta(t *testing.T) {
	fs, m := newTestFS(t)
	ctx := context.Background()
	dir, err := fs.Mkdir(ctx, RootLIN, "d", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Mkdir(ctx, dir.LIN, "sub", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := m.Create(ctx, meta.RootLIN, "f", meta.NewInode{})
	if err != nil {
		t.Fatal(err)
	}
	_, lookupErr := fs.Lookup(ctx, RootLIN, "missing")
	_, mkdirErr := fs.Mkdir(ctx, RootLIN, "d", 0o755)
	_, notDirErr := fs.Lookup(ctx, LIN(f.LIN), "x")
	_, longErr := fs.Mkdir(ctx, RootLIN, strings.Repeat("n", MaxNameLen+1), 0o755)
	_, linkErr := fs.Link(ctx, dir.LIN, RootLIN, "dirlink")
	_, xattrErr := fs.GetXattr(ctx, dir.LIN, "user.none")
	_, readlinkErr := fs.Readlink(ctx, dir.LIN)
	_, parentErr := fs.Parent(ctx, LIN(f.LIN))
	for _, tc := range []struct {
		what  string
		err   error
		class error
	}{
		{"lookup of a missing name", lookupErr, ErrNotFound},
		{"mkdir of a taken name", mkdirErr, ErrExists},
		{"lookup in a file", notDirErr, ErrNotDir},
		{"a name too long", longErr, ErrNameTooLong},
		{"a link to a directory", linkErr, ErrPerm},
		{"rmdir of a non-empty directory", fs.Rmdir(ctx, RootLIN, "d"), ErrNotEmpty},
		{"unlink of a directory", fs.Unlink(ctx, RootLIN, "d"), ErrIsDir},
		{"a directory moved into itself", fs.Rename(ctx, RootLIN, "d", dir.LIN, "in", 0), ErrInvalid},
		{"rename with unknown flags", fs.Rename(ctx, RootLIN, "d", RootLIN, "e", 1<<5), ErrInvalid},
		{"a missing xattr", xattrErr, ErrNoXattr},
		{"an xattr too large", fs.SetXattr(ctx, dir.LIN, "user.big", make([]byte, 65<<10), 0), ErrXattrTooLarge},
		{"setxattr exclusive twice", setTwice(fs, dir.LIN), ErrExists},
		{"readlink of a directory", readlinkErr, ErrInvalid},
		{"the parent of a file", parentErr, ErrNotDir},
		{"a released handle", fs.Release(ctx, 99), ErrBadHandle},
	} {
		if !errors.Is(tc.err, tc.class) {
			t.Errorf("%s: %v, want %v", tc.what, tc.err, tc.class)
			continue
		}
		if msg := tc.err.Error(); strings.Count(msg, "not found") > 1 || strings.Contains(msg, "vfs: ") && strings.Contains(msg, "meta: ") {
			t.Errorf("%s: doubled message %q", tc.what, msg)
		}
	}
	if !strings.HasPrefix(lookupErr.Error(), "meta: not found") {
		t.Errorf("lookup error %q: want meta's message", lookupErr)
	}
}

func setTwice(fs *FS, lin LIN) error {
	ctx := context.Background()
	if err := fs.SetXattr(ctx, lin, "user.once", []byte("1"), XattrCreate); err != nil {
		return err
	}
	return fs.SetXattr(ctx, lin, "user.once", []byte("2"), XattrCreate)
}
