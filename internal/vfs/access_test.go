package vfs

import (
	"errors"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/meta"
)

func TestAllowed(t *testing.T) {
	file := meta.Attr{Type: meta.TypeFile, UID: 100, GID: 200, Mode: 0o640}
	dir := meta.Attr{Type: meta.TypeDir, UID: 100, GID: 200, Mode: 0o700}
	for _, tc := range []struct {
		name string
		c    meta.Caller
		a    meta.Attr
		want uint32
		ok   bool
	}{
		{"owner reads", meta.Caller{UID: 100, GID: 1}, file, MayRead, true},
		{"owner writes", meta.Caller{UID: 100, GID: 1}, file, MayWrite, true},
		{"owner cannot exec", meta.Caller{UID: 100}, file, MayExec, false},
		{"group reads", meta.Caller{UID: 7, GID: 200}, file, MayRead, true},
		{"group cannot write", meta.Caller{UID: 7, GID: 200}, file, MayWrite, false},
		{"supplementary group reads", meta.Caller{UID: 7, GID: 1, Groups: []uint32{5, 200}}, file, MayRead, true},
		{"other denied", meta.Caller{UID: 7, GID: 1}, file, MayRead, false},
		{"owner class wins over group", meta.Caller{UID: 100, GID: 200}, meta.Attr{UID: 100, GID: 200, Mode: 0o070}, MayRead, false},
		{"root reads anything", meta.Caller{}, meta.Attr{Mode: 0}, MayRead | MayWrite, true},
		{"root cannot exec a non-executable file", meta.Caller{}, file, MayExec, false},
		{"root execs with any x bit", meta.Caller{}, meta.Attr{Type: meta.TypeFile, Mode: 0o001}, MayExec, true},
		{"root searches any directory", meta.Caller{}, meta.Attr{Type: meta.TypeDir, Mode: 0}, MayExec, true},
		{"other cannot search 0700 dir", meta.Caller{UID: 9}, dir, MayExec, false},
		{"owner needs both bits", meta.Caller{UID: 100}, meta.Attr{UID: 100, Mode: 0o400}, MayRead | MayWrite, false},
	} {
		if got := Allowed(tc.c, tc.a, tc.want); got != tc.ok {
			t.Errorf("%s: Allowed = %v, want %v", tc.name, got, tc.ok)
		}
	}
}

func TestCheckSetAttr(t *testing.T) {
	cur := meta.Attr{Type: meta.TypeFile, UID: 100, GID: 200, Mode: 0o2755}
	owner := meta.Caller{UID: 100, GID: 200, Groups: []uint32{300}}
	for _, tc := range []struct {
		name     string
		c        meta.Caller
		mask     meta.SetAttrMask
		in       meta.Attr
		err      error
		wantMode uint32
	}{
		{"owner chmod", owner, meta.SetMode, meta.Attr{Mode: 0o600}, nil, 0o600},
		{"other chmod", meta.Caller{UID: 7}, meta.SetMode, meta.Attr{Mode: 0o777}, ErrPerm, 0},
		{"non-root chown", owner, meta.SetUID, meta.Attr{UID: 7}, ErrPerm, 0},
		{"root chown", meta.Caller{}, meta.SetUID, meta.Attr{UID: 7}, nil, 0},
		{"owner chgrp to own group", owner, meta.SetGID, meta.Attr{GID: 300}, nil, 0},
		{"owner chgrp to foreign group", owner, meta.SetGID, meta.Attr{GID: 999}, ErrPerm, 0},
		{"setgid dropped for a non-member", meta.Caller{UID: 100, GID: 1}, meta.SetMode, meta.Attr{Mode: 0o2755}, nil, 0o755},
		{"explicit mtime by other", meta.Caller{UID: 7}, meta.SetMtime, meta.Attr{Mtime: time.Unix(1, 0)}, ErrPerm, 0},
		{"touch by other without write", meta.Caller{UID: 7}, meta.SetMtimeNow, meta.Attr{}, ErrAccess, 0},
		{"truncate by group without write", meta.Caller{UID: 7, GID: 200}, meta.SetSize, meta.Attr{}, ErrAccess, 0},
	} {
		_, in, err := checkSetAttr(tc.c, cur, tc.mask, tc.in)
		if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
			continue
		}
		if err == nil && tc.mask&meta.SetMode != 0 && in.Mode != tc.wantMode {
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
