package nfs

import (
	"time"

	nfsc "github.com/willscott/go-nfs-client/nfs"

	"github.com/weftfs/weft/internal/vfs"
)

// fsid is the file system id every gateway reports, so that a client sees
// one file system whichever node answers.
const fsid = 0x77656674 // "weft"

var nfsTypes = map[vfs.FileType]uint32{
	vfs.TypeFile:     nfsc.NF3Reg,
	vfs.TypeDir:      nfsc.NF3Dir,
	vfs.TypeSymlink:  nfsc.NF3Lnk,
	vfs.TypeFIFO:     nfsc.NF3FIFO,
	vfs.TypeSocket:   nfsc.NF3Sock,
	vfs.TypeCharDev:  nfsc.NF3Chr,
	vfs.TypeBlockDev: nfsc.NF3Blk,
}

// fattr converts vfs attributes to fattr3.
func fattr(a vfs.Attr) nfsc.Fattr {
	return nfsc.Fattr{
		Type:     nfsTypes[a.Type],
		FileMode: a.Mode & 0o7777,
		Nlink:    a.Nlink,
		UID:      a.UID,
		GID:      a.GID,
		Filesize: a.Size,
		Used:     a.Allocated,
		SpecData: [2]uint32{major(a.Rdev), minor(a.Rdev)},
		FSID:     fsid,
		Fileid:   uint64(a.LIN),
		Atime:    nfsTime(a.Atime),
		Mtime:    nfsTime(a.Mtime),
		Ctime:    nfsTime(a.Ctime),
	}
}

func postOp(a vfs.Attr, ok bool) postOpAttr {
	if !ok {
		return postOpAttr{}
	}
	return postOpAttr{IsSet: true, Attr: fattr(a)}
}

// wcc is the weak cache consistency data of an operation on an object
// whose attributes were pre before it and post after (either may be
// missing).
func wcc(pre vfs.Attr, preOK bool, post vfs.Attr, postOK bool) wccData {
	var w wccData
	if preOK {
		w.Before.IsSet = true
		w.Before.Size = pre.Size
		w.Before.MTime = nfsTime(pre.Mtime)
		w.Before.CTime = nfsTime(pre.Ctime)
	}
	w.After = postOp(post, postOK)
	return w
}

func nfsTime(t time.Time) nfsc.NFS3Time {
	if t.IsZero() {
		return nfsc.NFS3Time{}
	}
	return nfsc.NFS3Time{Seconds: uint32(t.Unix()), Nseconds: uint32(t.Nanosecond())}
}

func goTime(t nfsc.NFS3Time) time.Time { return time.Unix(int64(t.Seconds), int64(t.Nseconds)) }

// Linux dev_t encoding of vfs.Attr.Rdev.
func major(dev uint32) uint32 { return (dev >> 8) & 0xfff }
func minor(dev uint32) uint32 { return dev&0xff | (dev>>12)&0xfff00 }
func mkdev(maj, min uint32) uint32 {
	return min&0xff | (maj&0xfff)<<8 | (min&^0xff)<<12
}

// setAttrs converts sattr3 to a vfs mask and attributes.
func setAttrs(s nfsc.Sattr3) (vfs.SetAttrMask, vfs.Attr) {
	var mask vfs.SetAttrMask
	var a vfs.Attr
	if s.Mode.SetIt {
		mask |= vfs.SetMode
		a.Mode = s.Mode.Mode & 0o7777
	}
	if s.UID.SetIt {
		mask |= vfs.SetUID
		a.UID = s.UID.UID
	}
	if s.GID.SetIt {
		mask |= vfs.SetGID
		a.GID = s.GID.UID
	}
	if s.Size.SetIt {
		mask |= vfs.SetSize
		a.Size = s.Size.Size
	}
	switch s.Atime.SetIt {
	case nfsc.SetToServerTime:
		mask |= vfs.SetAtimeNow
	case nfsc.SetToClientTime:
		mask |= vfs.SetAtime
		a.Atime = goTime(s.Atime.Time)
	}
	switch s.Mtime.SetIt {
	case nfsc.SetToServerTime:
		mask |= vfs.SetMtimeNow
	case nfsc.SetToClientTime:
		mask |= vfs.SetMtime
		a.Mtime = goTime(s.Mtime.Time)
	}
	return mask, a
}
