package vfs

import "github.com/weftfs/weft/internal/meta"

// Conversions between the namespace's types (package meta) and the ones vfs
// offers gateways. They are the only place where the two meet: vfs's API is
// written in its own types so that gateways never import meta.

// fileTypes pairs each vfs file type with meta's.
var fileTypes = [...]struct {
	v FileType
	m meta.FileType
}{
	{TypeFile, meta.TypeFile},
	{TypeDir, meta.TypeDir},
	{TypeSymlink, meta.TypeSymlink},
	{TypeFIFO, meta.TypeFIFO},
	{TypeSocket, meta.TypeSocket},
	{TypeCharDev, meta.TypeCharDev},
	{TypeBlockDev, meta.TypeBlockDev},
}

// typeFromMeta converts a file type; an unknown one becomes 0 (no type).
func typeFromMeta(t meta.FileType) FileType {
	for _, p := range fileTypes {
		if p.m == t {
			return p.v
		}
	}
	return 0
}

// typeToMeta converts a file type; 0 (and anything unknown) stays 0, which
// meta's Create reads as a regular file and refuses elsewhere.
func typeToMeta(t FileType) meta.FileType {
	for _, p := range fileTypes {
		if p.v == t {
			return p.m
		}
	}
	return 0
}

// attrFromMeta converts attributes. The namespace's placement fields
// (pool, protection, stripe size, drives) are not an edge's business.
func attrFromMeta(a meta.Attr) Attr {
	return Attr{
		LIN: LIN(a.LIN), Type: typeFromMeta(a.Type), Mode: a.Mode, UID: a.UID, GID: a.GID,
		Size: a.Size, Allocated: a.Allocated, Nlink: a.Nlink, Rdev: a.Rdev,
		Atime: a.Atime, Mtime: a.Mtime, Ctime: a.Ctime, Btime: a.Btime, Generation: a.Generation,
	}
}

// attrToMeta converts the fields SetAttr may change (and those its
// permission checks read); the rest stay zero.
func attrToMeta(a Attr) meta.Attr {
	return meta.Attr{
		LIN: meta.LIN(a.LIN), Type: typeToMeta(a.Type), Mode: a.Mode, UID: a.UID, GID: a.GID,
		Size: a.Size, Allocated: a.Allocated, Nlink: a.Nlink, Rdev: a.Rdev,
		Atime: a.Atime, Mtime: a.Mtime, Ctime: a.Ctime, Btime: a.Btime, Generation: a.Generation,
	}
}

// setAttrBits pairs each SetAttr field of vfs with meta's.
var setAttrBits = [...]struct {
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
}

// maskToMeta converts a SetAttr mask; bits vfs does not define are dropped.
func maskToMeta(mask SetAttrMask) meta.SetAttrMask {
	var m meta.SetAttrMask
	for _, b := range setAttrBits {
		if mask&b.v != 0 {
			m |= b.m
		}
	}
	return m
}

// renameToMeta converts rename flags (FS.Rename refuses unknown bits).
func renameToMeta(f RenameFlags) meta.RenameFlags {
	var m meta.RenameFlags
	if f&RenameNoReplace != 0 {
		m |= meta.RenameNoReplace
	}
	if f&RenameExchange != 0 {
		m |= meta.RenameExchange
	}
	return m
}

// xattrToMeta converts setxattr flags (FS.SetXattr refuses unknown bits).
func xattrToMeta(f XattrFlags) meta.XattrFlags {
	var m meta.XattrFlags
	if f&XattrCreate != 0 {
		m |= meta.XattrCreate
	}
	if f&XattrReplace != 0 {
		m |= meta.XattrReplace
	}
	return m
}

// createToMeta converts create arguments.
func createToMeta(c CreateArgs) meta.NewInode {
	return meta.NewInode{Type: typeToMeta(c.Type), Mode: c.Mode, Rdev: c.Rdev}
}

// entriesFromMeta converts a page of directory entries.
func entriesFromMeta(es []meta.DirEntry) []DirEntry {
	if es == nil {
		return nil
	}
	out := make([]DirEntry, len(es))
	for i, e := range es {
		out[i] = DirEntry{Name: e.Name, LIN: LIN(e.LIN), Type: typeFromMeta(e.Type)}
	}
	return out
}

func callerToMeta(c Caller) meta.Caller {
	return meta.Caller{UID: c.UID, GID: c.GID, Groups: c.Groups}
}

func callerFromMeta(c meta.Caller) Caller {
	return Caller{UID: c.UID, GID: c.GID, Groups: c.Groups}
}
