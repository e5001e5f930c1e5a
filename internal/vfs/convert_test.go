package vfs

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/meta"
)

func TestFileTypes(t *testing.T) {
	for _, tc := range []struct {
		m    meta.FileType
		v    FileType
		name string
	}{
		{meta.TypeFile, TypeFile, "file"},
		{meta.TypeDir, TypeDir, "dir"},
		{meta.TypeSymlink, TypeSymlink, "symlink"},
		{meta.TypeFIFO, TypeFIFO, "fifo"},
		{meta.TypeSocket, TypeSocket, "socket"},
		{meta.TypeCharDev, TypeCharDev, "chardev"},
		{meta.TypeBlockDev, TypeBlockDev, "blockdev"},
		{0, 0, "type(0)"},
	} {
		if got := typeFromMeta(tc.m); got != tc.v {
			t.Errorf("typeFromMeta(%v) = %v, want %v", tc.m, got, tc.v)
		}
		if got := typeToMeta(tc.v); got != tc.m {
			t.Errorf("typeToMeta(%v) = %v, want %v", tc.v, got, tc.m)
		}
		if tc.v.String() != tc.name {
			t.Errorf("%d.String() = %q, want %q", uint8(tc.v), tc.v.String(), tc.name)
		}
	}
	if got := typeFromMeta(99); got != 0 {
		t.Errorf("typeFromMeta(99) = %v, want no type", got)
	}
}

func TestAttrFromMeta(t *testing.T) {
	at := func(s int64) time.Time { return time.Unix(s, 7) }
	m := meta.Attr{
		LIN: 42, Type: meta.TypeCharDev, Mode: 0o4755, UID: 1000, GID: 100, Size: 12345, Nlink: 3, Rdev: 0x0801,
		Atime: at(1), Mtime: at(2), Ctime: at(3), Btime: at(4), Generation: 9,
		Pool: "ssd", Protection: meta.EC(4, 2), StripeSize: 4 << 20, Allocated: 6 << 20, WDL: []meta.DriveID{1, 2},
	}
	want := Attr{
		LIN: 42, Type: TypeCharDev, Mode: 0o4755, UID: 1000, GID: 100, Size: 12345, Allocated: 6 << 20, Nlink: 3,
		Rdev: 0x0801, Atime: at(1), Mtime: at(2), Ctime: at(3), Btime: at(4), Generation: 9,
	}
	got := attrFromMeta(m)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("attrFromMeta:\n got %+v\nwant %+v", got, want)
	}
	if !reflect.DeepEqual(attrFromMeta(attrToMeta(got)), got) {
		t.Errorf("attrToMeta loses fields of %+v", got)
	}
	// Every field of Attr is set above, so a field added to Attr without a
	// conversion fails here.
	v := reflect.ValueOf(want)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("Attr.%s is not covered by this test", v.Type().Field(i).Name)
		}
	}
}

func TestMaskAndFlags(t *testing.T) {
	for _, tc := range []struct {
		v SetAttrMask
		m meta.SetAttrMask
	}{
		{SetMode, meta.SetMode},
		{SetUID, meta.SetUID},
		{SetGID, meta.SetGID},
		{SetSize, meta.SetSize},
		{SetAtime, meta.SetAtime},
		{SetMtime, meta.SetMtime},
		{SetAtimeNow, meta.SetAtimeNow},
		{SetMtimeNow, meta.SetMtimeNow},
		{SetCtime, meta.SetCtime},
		{SetMode | SetSize | SetCtime, meta.SetMode | meta.SetSize | meta.SetCtime},
		{0, 0},
	} {
		if got := maskToMeta(tc.v); got != tc.m {
			t.Errorf("maskToMeta(%#x) = %#x, want %#x", tc.v, got, tc.m)
		}
	}
	if got := maskToMeta(SetCtime << 1); got != 0 {
		t.Errorf("an unknown SetAttr bit became %#x", got)
	}
	for _, tc := range []struct {
		v RenameFlags
		m meta.RenameFlags
	}{
		{0, 0},
		{RenameNoReplace, meta.RenameNoReplace},
		{RenameExchange, meta.RenameExchange},
	} {
		if got := renameToMeta(tc.v); got != tc.m {
			t.Errorf("renameToMeta(%#x) = %#x, want %#x", tc.v, got, tc.m)
		}
	}
	for _, tc := range []struct {
		v XattrFlags
		m meta.XattrFlags
	}{
		{0, 0},
		{XattrCreate, meta.XattrCreate},
		{XattrReplace, meta.XattrReplace},
	} {
		if got := xattrToMeta(tc.v); got != tc.m {
			t.Errorf("xattrToMeta(%#x) = %#x, want %#x", tc.v, got, tc.m)
		}
	}
	if got := createToMeta(CreateArgs{Type: TypeFIFO, Mode: 0o640, Rdev: 5}); got != (meta.NewInode{Type: meta.TypeFIFO, Mode: 0o640, Rdev: 5}) {
		t.Errorf("createToMeta = %+v", got)
	}
	es := entriesFromMeta([]meta.DirEntry{{Name: "a", LIN: 20, Type: meta.TypeDir}, {Name: "b", LIN: 21, Type: meta.TypeSymlink}})
	if want := []DirEntry{{"a", 20, TypeDir}, {"b", 21, TypeSymlink}}; !reflect.DeepEqual(es, want) {
		t.Errorf("entriesFromMeta = %+v, want %+v", es, want)
	}
}

// TestCaller checks that the caller a gateway puts in a context is the
// one meta sees (the owner of what it creates), and back.
func TestCaller(t *testing.T) {
	c := Caller{UID: 1000, GID: 100, Groups: []uint32{4, 27}}
	ctx := WithCaller(context.Background(), c)
	if got := CallerFrom(ctx); !reflect.DeepEqual(got, c) {
		t.Errorf("CallerFrom = %+v, want %+v", got, c)
	}
	if got := meta.CallerFrom(ctx); got.UID != 1000 || got.GID != 100 || !reflect.DeepEqual(got.Groups, c.Groups) {
		t.Errorf("meta sees %+v, want %+v", got, c)
	}
	if got := CallerFrom(context.Background()); got.UID != 0 || got.GID != 0 {
		t.Errorf("no caller: %+v, want root", got)
	}

	fs, _ := newTestFS(t)
	a, err := fs.Mkdir(ctx, RootLIN, "mine", 0o750)
	if err != nil {
		t.Fatal(err)
	}
	if a.UID != 1000 || a.GID != 100 || a.Type != TypeDir || a.Mode != 0o750 {
		t.Errorf("mkdir as %+v: %+v", c, a)
	}
}

func TestParent(t *testing.T) {
	fs, _ := newTestFS(t)
	ctx := context.Background()
	a, err := fs.Mkdir(ctx, RootLIN, "a", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	b, err := fs.Mkdir(ctx, a.LIN, "b", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	c, err := fs.Mkdir(ctx, RootLIN, "c", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir, want LIN
	}{
		{RootLIN, RootLIN},
		{a.LIN, RootLIN},
		{b.LIN, a.LIN},
	} {
		if got, err := fs.Parent(ctx, tc.dir); err != nil || got != tc.want {
			t.Errorf("Parent(%d) = %d, %v; want %d", tc.dir, got, err, tc.want)
		}
	}
	// A rename moves the parent.
	if err := fs.Rename(ctx, a.LIN, "b", c.LIN, "b", 0); err != nil {
		t.Fatal(err)
	}
	if got, err := fs.Parent(ctx, b.LIN); err != nil || got != c.LIN {
		t.Errorf("Parent after rename = %d, %v; want %d", got, err, c.LIN)
	}
	// Lookup of ".." agrees.
	if got, err := fs.Lookup(ctx, b.LIN, ".."); err != nil || got.LIN != c.LIN {
		t.Errorf("Lookup(..) = %d, %v; want %d", got.LIN, err, c.LIN)
	}
	if _, err := fs.Parent(ctx, 999999); !errors.Is(err, ErrNotFound) {
		t.Errorf("Parent of a missing LIN: %v, want ErrNotFound", err)
	}
}
