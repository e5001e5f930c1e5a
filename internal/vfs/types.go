package vfs

import (
	"fmt"
	"time"

	"github.com/weftfs/weft/internal/meta"
)

// LIN is an inode number as gateways see it: FUSE's node id, NFS's fileid,
// stat's st_ino. LINs are never reused, so a LIN alone names one file for
// its whole life and file handles need no generation beside it.
type LIN uint64

// RootLIN is the root directory's LIN (FUSE's root node id).
const RootLIN LIN = 1

// Limits gateways report (pathconf, statfs). Longer names or more links are
// refused with ErrNameTooLong and ErrTooManyLinks.
const (
	// MaxNameLen is the longest entry name, in bytes.
	MaxNameLen = meta.MaxNameLen
	// MaxLinks is the most hard links one inode may have.
	MaxLinks = meta.MaxLinks
)

// FileType is an inode's type.
type FileType uint8

// File types. The zero value is not a type.
const (
	TypeFile FileType = iota + 1
	TypeDir
	TypeSymlink
	TypeFIFO
	TypeSocket
	TypeCharDev
	TypeBlockDev
)

// String returns the type's name ("file", "dir", …).
func (t FileType) String() string {
	switch t {
	case TypeFile:
		return "file"
	case TypeDir:
		return "dir"
	case TypeSymlink:
		return "symlink"
	case TypeFIFO:
		return "fifo"
	case TypeSocket:
		return "socket"
	case TypeCharDev:
		return "chardev"
	case TypeBlockDev:
		return "blockdev"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Attr is an inode's attributes, as gateways report them (stat, FUSE attr,
// NFS fattr3).
type Attr struct {
	// LIN is the inode number (NFS fileid).
	LIN  LIN
	Type FileType
	// Mode holds the permission bits with setuid, setgid and sticky
	// (07777); the type is in Type.
	Mode     uint32
	UID, GID uint32
	// Size is in bytes: file data (with this mount's buffered writes), or
	// the length of a symlink's target.
	Size uint64
	// Allocated is the bytes the file's data takes on the drives, parity
	// included (st_blocks, NFS "used"); 0 for anything but a regular file.
	Allocated uint64
	Nlink     uint32
	// Rdev is the device number of a character or block device (Linux
	// dev_t encoding).
	Rdev                       uint32
	Atime, Mtime, Ctime, Btime time.Time
	// Generation counts changes to the inode record (attributes, links,
	// layout) and never decreases; changes to a directory's entries move
	// its times, not its generation. It is not a file-handle generation:
	// LINs are never reused, so a handle needs none.
	Generation uint64
}

// IsDir reports whether the inode is a directory.
func (a Attr) IsDir() bool { return a.Type == TypeDir }

// DirEntry is one directory entry. "." and ".." are not entries: a gateway
// adds them itself (FS.Parent gives ".."'s LIN).
type DirEntry struct {
	Name string
	LIN  LIN
	Type FileType
}

// CreateArgs describe an inode FS.Create makes.
type CreateArgs struct {
	// Type is the inode type; zero means TypeFile. Directories and
	// symlinks have their own methods (Mkdir, Symlink).
	Type FileType
	// Mode keeps the 07777 bits.
	Mode uint32
	// Rdev is the device number of a device node.
	Rdev uint32
}

// SetAttrMask selects the fields FS.SetAttr changes.
type SetAttrMask uint32

// SetAttr fields.
const (
	SetMode SetAttrMask = 1 << iota
	SetUID
	SetGID
	SetSize
	SetAtime
	SetMtime
	// SetAtimeNow and SetMtimeNow set the time to now (ignoring Attr).
	SetAtimeNow
	SetMtimeNow
	// SetCtime sets ctime to Attr.Ctime instead of now.
	SetCtime
)

// RenameFlags modify FS.Rename, like renameat2(2)'s.
type RenameFlags uint8

// Rename flags.
const (
	// RenameNoReplace fails with ErrExists if the destination exists.
	RenameNoReplace RenameFlags = 1 << iota
	// RenameExchange swaps source and destination, which must both exist.
	RenameExchange
)

// XattrFlags modify FS.SetXattr, like setxattr(2)'s.
type XattrFlags uint8

// SetXattr flags.
const (
	// XattrCreate fails with ErrExists if the attribute exists.
	XattrCreate XattrFlags = 1 << iota
	// XattrReplace fails with ErrNoXattr if the attribute does not exist.
	XattrReplace
)

// StatFS is what statfs reports.
type StatFS struct {
	TotalBytes, FreeBytes int64
	Files                 int64
}
