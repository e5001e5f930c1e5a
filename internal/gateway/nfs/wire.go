package nfs

import (
	nfsc "github.com/willscott/go-nfs-client/nfs"
)

// The XDR shapes of NFSv3 (RFC 1813) and MOUNT v3 arguments and results,
// encoded and decoded by go-nfs-client's xdr package (rasky/go-xdr, driven
// by these structs and their union and optional tags). Where go-nfs-client
// defines a type correctly (fattr3, post_op_attr, wcc_data, sattr3,
// diropargs3, post_op_fh3, fsinfo3resok) it is used as it is; its
// sattrguard3 encodes the ctime even when the guard is off, so the guard is
// defined here.

// Programs and versions served.
const (
	progNFS   = nfsc.Nfs3Prog  // 100003
	progMount = nfsc.MountProg // 100005
	versNFS   = 3
	versMount = 3
)

// NFSv3 status codes beyond go-nfs-client's list.
const (
	nfs3ErrJukebox = 10008
)

// Write stability (stable_how).
const (
	unstable uint32 = 0
	dataSync uint32 = 1
	fileSync uint32 = 2
)

// CREATE modes (createmode3).
const (
	createUnchecked uint32 = 0
	createGuarded   uint32 = 1
	createExclusive uint32 = 2
)

// ACCESS bits.
const (
	accessRead    = nfsc.ACCESS3_READ
	accessLookup  = nfsc.ACCESS3_LOOKUP
	accessModify  = nfsc.ACCESS3_MODIFY
	accessExtend  = nfsc.ACCESS3_EXTEND
	accessDelete  = nfsc.ACCESS3_DELETE
	accessExecute = nfsc.ACCESS3_EXECUTE
)

// FSINFO properties.
const (
	fsfLink        = 0x0001
	fsfSymlink     = 0x0002
	fsfHomogeneous = 0x0008
	fsfCanSetTime  = 0x0010
)

type fhArgs struct{ FH []byte }

type sattrGuard struct {
	Check bool          `xdr:"union"`
	Ctime nfsc.NFS3Time `xdr:"unioncase=1"`
}

type setattrArgs struct {
	FH    []byte
	Attr  nfsc.Sattr3
	Guard sattrGuard
}

type accessArgs struct {
	FH     []byte
	Access uint32
}

type readArgs struct {
	FH     []byte
	Offset uint64
	Count  uint32
}

type writeArgs struct {
	FH     []byte
	Offset uint64
	Count  uint32
	Stable uint32
	Data   []byte
}

type mkdirArgs struct {
	Where nfsc.Diropargs3
	Attr  nfsc.Sattr3
}

type symlinkArgs struct {
	Where  nfsc.Diropargs3
	Attr   nfsc.Sattr3
	Target string
}

type devData struct {
	Attr nfsc.Sattr3
	Spec [2]uint32
}

type renameArgs struct {
	From, To nfsc.Diropargs3
}

type linkArgs struct {
	FH   []byte
	Link nfsc.Diropargs3
}

type readdirArgs struct {
	FH     []byte
	Cookie uint64
	Verf   [8]byte
	Count  uint32
}

type readdirplusArgs struct {
	FH       []byte
	Cookie   uint64
	Verf     [8]byte
	DirCount uint32
	MaxCount uint32
}

type commitArgs struct {
	FH     []byte
	Offset uint64
	Count  uint32
}

// Results: each is written after the nfsstat3.

type postOpAttr = nfsc.PostOpAttr

type wccData = nfsc.WccData

type lookupOK struct {
	FH      []byte
	Attr    postOpAttr
	DirAttr postOpAttr
}

type accessOK struct {
	Attr   postOpAttr
	Access uint32
}

type readlinkOK struct {
	Attr   postOpAttr
	Target string
}

type readOK struct {
	Attr  postOpAttr
	Count uint32
	EOF   bool
	Data  []byte
}

type writeOK struct {
	Wcc       wccData
	Count     uint32
	Committed uint32
	Verf      [8]byte
}

type createOK struct {
	FH   nfsc.PostOpFH3
	Attr postOpAttr
	Dir  wccData
}

type renameRes struct {
	From, To wccData
}

type linkRes struct {
	Attr postOpAttr
	Dir  wccData
}

type entry3 struct {
	Fileid uint64
	Name   string
	Cookie uint64
	Next   *entry3 `xdr:"optional"`
}

type readdirOK struct {
	Attr    postOpAttr
	Verf    [8]byte
	Entries *entry3 `xdr:"optional"`
	EOF     bool
}

type entryPlus3 struct {
	Fileid uint64
	Name   string
	Cookie uint64
	Attr   postOpAttr
	FH     nfsc.PostOpFH3
	Next   *entryPlus3 `xdr:"optional"`
}

type readdirplusOK struct {
	Attr    postOpAttr
	Verf    [8]byte
	Entries *entryPlus3 `xdr:"optional"`
	EOF     bool
}

type fsstatOK struct {
	Attr                   postOpAttr
	Tbytes, Fbytes, Abytes uint64
	Tfiles, Ffiles, Afiles uint64
	Invarsec               uint32
}

type fsinfoOK = nfsc.FSInfo

type pathconfOK struct {
	Attr            postOpAttr
	Linkmax         uint32
	NameMax         uint32
	NoTrunc         bool
	ChownRestricted bool
	CaseInsensitive bool
	CasePreserving  bool
}

type commitOK struct {
	Wcc  wccData
	Verf [8]byte
}

// MOUNT v3.

type mountOK struct {
	FH     []byte
	Flavor []uint32
}

type mountBody struct {
	Host string
	Dir  string
	Next *mountBody `xdr:"optional"`
}

type mountList struct {
	Entries *mountBody `xdr:"optional"`
}

type groupNode struct {
	Name string
	Next *groupNode `xdr:"optional"`
}

type exportNode struct {
	Dir    string
	Groups *groupNode  `xdr:"optional"`
	Next   *exportNode `xdr:"optional"`
}

type exportList struct {
	Entries *exportNode `xdr:"optional"`
}

// authSys is AUTH_SYS's credential body (RFC 5531 appendix A).
type authSys struct {
	Stamp   uint32
	Machine string
	UID     uint32
	GID     uint32
	GIDs    []uint32
}
