package vfs

import (
	"errors"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/meta"
)

func TestAllowed(t *testing.T) {
	file := Attr{Type: TypeFile, UID: 100, GID: 200, Mode: 0o640}
	dir := Attr{Type: TypeDir, UID: 100, GID: 200, Mode: 0o700}
	for _, tc := range []struct {
		name string
		c    Caller
		a    Attr
		want uint32
		ok   bool
	}{
		{"owner reads", Caller{UID: 100, GID: 1}, file, MayRead, true},
		{"owner writes", Caller{UID: 100, GID: 1}, file, MayWrite, true},
		{"owner cannot exec", Caller{UID: 100}, file, MayExec, false},
		{"group reads", Caller{UID: 7, GID: 200}, file, MayRead, true},
		{"group cannot write", Caller{UID: 7, GID: 200}, file, MayWrite, false},
		{"supplementary group reads", Caller{UID: 7, GID: 1, Groups: []uint32{5, 200}}, file, MayRead, true},
		{"other denied", Caller{UID: 7, GID: 1}, file, MayRead, false},
		{"owner class wins over group", Caller{UID: 100, GID: 200}, Attr{UID: 100, GID: 200, Mode: 0o070}, MayRead, false},
		{"root reads anything", Caller{}, Attr{Mode: 0}, MayRead | MayWrite, true},
		{"root cannot exec a non-executable file", Caller{}, file, MayExec, false},
		{"root execs with any x bit", Caller{}, Attr{Type: TypeFile, Mode: 0o001}, MayExec, true},
		{"root searches any directory", Caller{}, Attr{Type: TypeDir, Mode: 0}, MayExec, true},
		{"other cannot search 0700 dir", Caller{UID: 9}, dir, MayExec, false},
		{"owner needs both bits", Caller{UID: 100}, Attr{UID: 100, Mode: 0o400}, MayRead | MayWrite, false},
	} {
		if got := Allowed(tc.c, tc.a, tc.want); got != tc.ok {
			t.Errorf("%s: Allowed = %v, want %v", tc.name, got, tc.ok)
		}
	}
}

func TestCheckSetAttr(t *testing.T) {
	cur := Attr{Type: TypeFile, UID: 100, GID: 200, Mode: 0o2755}
	owner := Caller{UID: 100, GID: 200, Groups: []uint32{300}}
	for _, tc := range []struct {
		name     string
		c        Caller
		mask     SetAttrMask
		in       Attr
		err      error
		wantMode uint32
	}{
		{"owner chmod", owner, SetMode, Attr{Mode: 0o600}, nil, 0o600},
		{"other chmod", Caller{UID: 7}, SetMode, Attr{Mode: 0o777}, ErrPerm, 0},
		{"non-root chown", owner, SetUID, Attr{UID: 7}, ErrPerm, 0},
		{"root chown", Caller{}, SetUID, Attr{UID: 7}, nil, 0},
		{"owner chgrp to own group", owner, SetGID, Attr{GID: 300}, nil, 0},
		{"owner chgrp to foreign group", owner, SetGID, Attr{GID: 999}, ErrPerm, 0},
		{"setgid dropped for a non-member", Caller{UID: 100, GID: 1}, SetMode, Attr{Mode: 0o2755}, nil, 0o755},
		{"explicit mtime by other", Caller{UID: 7}, SetMtime, Attr{Mtime: time.Unix(1, 0)}, ErrPerm, 0},
		{"touch by other without write", Caller{UID: 7}, SetMtimeNow, Attr{}, ErrAccess, 0},
		{"truncate by group without write", Caller{UID: 7, GID: 200}, SetSize, Attr{}, ErrAccess, 0},
	} {
		_, in, err := checkSetAttr(tc.c, cur, tc.mask, tc.in)
		if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
			continue
		}
		if err == nil && tc.mask&SetMode != 0 && in.Mode != tc.wantMode {
			t.Errorf("%s: mode = %o, want %o", tc.name, in.Mode, tc.wantMode)
		}
	}
}

func TestRelatime(t *testing.T) {
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		atime, mtime time.Time
		want         bool
	}{
		{now.Add(-time.Hour), now.Add(-2 * time.Hour), false},      // read since the last change
		{now.Add(-2 * time.Hour), now.Add(-time.Hour), true},       // changed since the last read
		{now.Add(-25 * time.Hour), now.Add(-30 * time.Hour), true}, // a day old
	} {
		a := meta.Attr{Atime: tc.atime, Mtime: tc.mtime, Ctime: tc.mtime}
		if got := relatime(a, now); got != tc.want {
			t.Errorf("atime %v mtime %v: relatime = %v", tc.atime, tc.mtime, got)
		}
	}
}
