package nfs

import (
	"encoding/binary"
	"errors"
	"io"
	"time"

	nfsc "github.com/willscott/go-nfs-client/nfs"

	"github.com/weftfs/weft/internal/vfs"
)

// maxIO is the largest READ and WRITE (FSINFO's rtmax and wtmax).
const maxIO = 1 << 20

// nfsProcs are NFSv3's procedures, by number.
var nfsProcs = [...]procedure{
	0:  {name: "NULL", fn: func(*request) (result, error) { return result{noStatus: true}, nil }},
	1:  {name: "GETATTR", fn: (*request).getattr},
	2:  {name: "SETATTR", fn: (*request).setattr, modifies: true, nonIdempotent: true},
	3:  {name: "LOOKUP", fn: (*request).lookup},
	4:  {name: "ACCESS", fn: (*request).access},
	5:  {name: "READLINK", fn: (*request).readlink},
	6:  {name: "READ", fn: (*request).read},
	7:  {name: "WRITE", fn: (*request).write, modifies: true},
	8:  {name: "CREATE", fn: (*request).create, modifies: true, nonIdempotent: true},
	9:  {name: "MKDIR", fn: (*request).mkdir, modifies: true, nonIdempotent: true},
	10: {name: "SYMLINK", fn: (*request).symlink, modifies: true, nonIdempotent: true},
	11: {name: "MKNOD", fn: (*request).mknod, modifies: true, nonIdempotent: true},
	12: {name: "REMOVE", fn: (*request).remove, modifies: true, nonIdempotent: true},
	13: {name: "RMDIR", fn: (*request).rmdir, modifies: true, nonIdempotent: true},
	14: {name: "RENAME", fn: (*request).rename, modifies: true, nonIdempotent: true},
	15: {name: "LINK", fn: (*request).link, modifies: true, nonIdempotent: true},
	16: {name: "READDIR", fn: (*request).readdir},
	17: {name: "READDIRPLUS", fn: (*request).readdirplus},
	18: {name: "FSSTAT", fn: (*request).fsstat},
	19: {name: "FSINFO", fn: (*request).fsinfo},
	20: {name: "PATHCONF", fn: (*request).pathconf},
	21: {name: "COMMIT", fn: (*request).commit, modifies: true},
}

// stale turns "not found" for the inode a handle names into NFS3ERR_STALE:
// the handle outlived its file.
func stale(err error) error {
	if errors.Is(err, vfs.ErrNotFound) {
		return statusError(nfsc.NFS3ErrStale)
	}
	return err
}

// attr returns lin's attributes, and whether it could get them.
func (r *request) attr(lin vfs.LIN) (vfs.Attr, bool) {
	a, err := r.s.fs.GetAttr(r.ctx, lin)
	return a, err == nil
}

func (r *request) verifier(lin vfs.LIN) [8]byte {
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], r.conn.verifier+r.s.files.lostCount(lin))
	return v
}

func (r *request) getattr() (result, error) {
	var args fhArgs
	if err := r.decode(&args); err != nil {
		return result{}, err
	}
	_, a, err := r.targetAttr(args.FH)
	if err != nil {
		return result{status: r.statusOf(err)}, nil
	}
	return result{body: fattr(a)}, nil
}

func (r *request) setattr() (result, error) {
	var args setattrArgs
	if err := r.decode(&args); err != nil {
		return result{}, err
	}
	lin, pre, err := r.targetAttr(args.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: wccData{}}, nil
	}
	if args.Guard.Check && nfsTime(pre.Ctime) != args.Guard.Ctime {
		return result{status: nfsc.NFS3ErrNotSync, body: wcc(pre, true, pre, true)}, nil
	}
	mask, in := setAttrs(args.Attr)
	c := r.caller()
	if mask&vfs.SetSize != 0 && c.UID == pre.UID && !vfs.Allowed(c, pre, vfs.MayWrite) {
		// The owner may truncate a file it cannot write, as knfsd lets
		// it: open(O_CREAT|O_TRUNC) of a file created read-only.
		if _, err := r.s.fs.SetAttr(vfs.WithCaller(r.ctx, vfs.Caller{}), lin, vfs.SetSize, in); err != nil {
			post, ok := r.attr(lin)
			return result{status: r.statusOf(err), body: wcc(pre, true, post, ok)}, nil
		}
		mask &^= vfs.SetSize
	}
	if mask != 0 {
		if _, err := r.s.fs.SetAttr(r.ctx, lin, mask, in); err != nil {
			post, ok := r.attr(lin)
			return result{status: r.statusOf(err), body: wcc(pre, true, post, ok)}, nil
		}
	}
	post, ok := r.attr(lin)
	return result{body: wcc(pre, true, post, ok)}, nil
}

func (r *request) lookup() (result, error) {
	var args nfsc.Diropargs3
	if err := r.decode(&args); err != nil {
		return result{}, err
	}
	dir, err := r.target(args.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: postOpAttr{}}, nil
	}
	var a vfs.Attr
	if args.Filename == ".." && dir == r.root {
		// The export's directory is the top of what the client sees.
		if err = r.s.fs.Access(r.ctx, dir, vfs.MayExec); err == nil {
			a, err = r.s.fs.GetAttr(r.ctx, dir)
		}
	} else {
		a, err = r.s.fs.Lookup(r.ctx, dir, args.Filename)
	}
	da, dok := r.attr(dir)
	if err != nil {
		return result{status: r.statusOf(err), body: postOp(da, dok)}, nil
	}
	return result{body: lookupOK{FH: r.handle(a.LIN), Attr: postOp(a, true), DirAttr: postOp(da, dok)}}, nil
}

func (r *request) access() (result, error) {
	var args accessArgs
	if err := r.decode(&args); err != nil {
		return result{}, err
	}
	_, a, err := r.targetAttr(args.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: postOpAttr{}}, nil
	}
	c := r.caller()
	var ok uint32
	if vfs.Allowed(c, a, vfs.MayRead) {
		ok |= accessRead
	}
	if !r.exp.ReadOnly && vfs.Allowed(c, a, vfs.MayWrite) {
		ok |= accessModify | accessExtend
		if a.IsDir() {
			ok |= accessDelete
		}
	}
	if vfs.Allowed(c, a, vfs.MayExec) {
		if a.IsDir() {
			ok |= accessLookup
		} else {
			ok |= accessExecute
		}
	}
	return result{body: accessOK{Attr: postOp(a, true), Access: ok & args.Access}}, nil
}

func (r *request) readlink() (result, error) {
	var args fhArgs
	if err := r.decode(&args); err != nil {
		return result{}, err
	}
	lin, err := r.target(args.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: postOpAttr{}}, nil
	}
	t, err := r.s.fs.Readlink(r.ctx, lin)
	a, ok := r.attr(lin)
	if err != nil {
		return result{status: r.statusOf(stale(err)), body: postOp(a, ok)}, nil
	}
	return result{body: readlinkOK{Attr: postOp(a, ok), Target: t}}, nil
}

// fileFor checks that lin is a regular file the caller may access for
// want: by its mode bits, or as its owner (NFS has no open, so a client
// that created a file read-only, or chmodded it after opening it, still
// writes it as the owner: knfsd's owner override). Reading is also
// allowed with execute permission (a client executing a file reads it).
func (r *request) fileFor(lin vfs.LIN, want uint32) (vfs.Attr, error) {
	a, err := r.s.fs.GetAttr(r.ctx, lin)
	if err != nil {
		return a, stale(err)
	}
	switch a.Type {
	case vfs.TypeFile:
	case vfs.TypeDir:
		return a, statusError(nfsc.NFS3ErrIsDir)
	default:
		return a, statusError(nfsc.NFS3ErrInval)
	}
	c := r.caller()
	if c.UID == a.UID || vfs.Allowed(c, a, want) || (want == vfs.MayRead && vfs.Allowed(c, a, vfs.MayExec)) {
		return a, nil
	}
	return a, statusError(nfsc.NFS3ErrAcces)
}

func (r *request) read() (result, error) {
	var args readArgs
	if err := r.decode(&args); err != nil {
		return result{}, err
	}
	lin, err := r.target(args.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: postOpAttr{}}, nil
	}
	a, err := r.fileFor(lin, vfs.MayRead)
	if err != nil {
		return result{status: r.statusOf(err), body: postOp(a, a.LIN != 0)}, nil
	}
	of, err := r.s.files.get(r.ctx, lin, false)
	if err != nil {
		return result{status: r.statusOf(stale(err)), body: postOp(a, true)}, nil
	}
	// A view of the mount's cache (it never changes) is encoded into the
	// reply as it is, not copied into buf first.
	data, err := of.h.ReadView(r.ctx, make([]byte, min(args.Count, maxIO)), int64(args.Offset))
	n := len(data)
	r.s.files.put(of)
	eof := errors.Is(err, io.EOF)
	if err != nil && !eof {
		return result{status: r.statusOf(err), body: postOp(a, true)}, nil
	}
	post, ok := r.attr(lin)
	if ok && args.Offset+uint64(n) >= post.Size {
		eof = true
	}
	return result{body: readOK{Attr: postOp(post, ok), Count: uint32(n), EOF: eof, Data: data}}, nil
}

func (r *request) write() (result, error) {
	var args writeArgs
	if err := r.decode(&args); err != nil {
		return result{}, err
	}
	lin, err := r.target(args.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: wccData{}}, nil
	}
	if args.Stable > fileSync {
		return result{status: nfsc.NFS3ErrInval, body: wccData{}}, nil
	}
	pre, err := r.fileFor(lin, vfs.MayWrite)
	if err != nil {
		return result{status: r.statusOf(err), body: wcc(pre, pre.LIN != 0, pre, pre.LIN != 0)}, nil
	}
	data := args.Data
	if uint32(len(data)) > args.Count {
		data = data[:args.Count]
	}
	of, err := r.s.files.get(r.ctx, lin, true)
	if err != nil {
		return result{status: r.statusOf(stale(err)), body: wcc(pre, true, pre, true)}, nil
	}
	n, err := of.h.Write(r.ctx, data, int64(args.Offset))
	committed := unstable
	if err == nil && (args.Stable != unstable || r.exp.Sync) {
		// DATA_SYNC and FILE_SYNC alike (and every write of a sync
		// export): data and metadata durable before the reply.
		err = of.h.Fsync(r.ctx)
		committed = fileSync
	}
	r.s.files.put(of)
	post, ok := r.attr(lin)
	if err != nil {
		return result{status: r.statusOf(err), body: wcc(pre, true, post, ok)}, nil
	}
	return result{body: writeOK{Wcc: wcc(pre, true, post, ok), Count: uint32(n), Committed: committed, Verf: r.verifier(lin)}}, nil
}

func (r *request) commit() (result, error) {
	var args commitArgs
	if err := r.decode(&args); err != nil {
		return result{}, err
	}
	lin, pre, err := r.targetAttr(args.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: wccData{}}, nil
	}
	if pre.Type != vfs.TypeFile {
		return result{status: nfsc.NFS3ErrInval, body: wcc(pre, true, pre, true)}, nil
	}
	// The verifier is read before the flush: a flush failing at an idle
	// close meanwhile changes it after, and the client resends.
	verf := r.verifier(lin)
	of, err := r.s.files.get(r.ctx, lin, false)
	if err == nil {
		// Fsync writes out the buffered writes of every handle of the
		// file in this gateway, the writable one among them.
		err = of.h.Fsync(r.ctx)
		r.s.files.put(of)
	}
	post, ok := r.attr(lin)
	if err != nil {
		return result{status: r.statusOf(stale(err)), body: wcc(pre, true, post, ok)}, nil
	}
	return result{body: commitOK{Wcc: wcc(pre, true, post, ok), Verf: verf}}, nil
}

// targetAttr resolves fh and reads its attributes: the file a procedure
// works on, or the directory whose entry it changes (its attributes
// before, for the reply's wcc data). A handle of a file removed since is
// an error that answers NFS3ERR_STALE.
func (r *request) targetAttr(fh []byte) (vfs.LIN, vfs.Attr, error) {
	dir, err := r.target(fh)
	if err != nil {
		return 0, vfs.Attr{}, err
	}
	pre, err := r.s.fs.GetAttr(r.ctx, dir)
	return dir, pre, stale(err)
}

// created finishes CREATE, MKDIR, SYMLINK and MKNOD: the namespace change
// is made durable before the reply (NFS requires it of every reply).
func (r *request) created(dir vfs.LIN, pre vfs.Attr, a vfs.Attr, err error) (result, error) {
	if err == nil {
		err = r.s.fs.FsyncDir(r.ctx)
	}
	post, ok := r.attr(dir)
	if err != nil {
		return result{status: r.statusOf(err), body: wcc(pre, true, post, ok)}, nil
	}
	return result{body: createOK{FH: nfsc.PostOpFH3{IsSet: true, FH: r.handle(a.LIN)}, Attr: postOp(a, true),
		Dir: wcc(pre, true, post, ok)}}, nil
}

func (r *request) create() (result, error) {
	var where nfsc.Diropargs3
	var how uint32
	if err := r.decode(&where); err != nil {
		return result{}, err
	}
	if err := r.decode(&how); err != nil {
		return result{}, err
	}
	var sattr nfsc.Sattr3
	var verf [8]byte
	switch how {
	case createUnchecked, createGuarded:
		if err := r.decode(&sattr); err != nil {
			return result{}, err
		}
	case createExclusive:
		if err := r.decode(&verf); err != nil {
			return result{}, err
		}
	default:
		return result{}, errGarbage
	}
	dir, pre, err := r.targetAttr(where.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: wccData{}}, nil
	}
	mask, in := setAttrs(sattr)
	mode := uint32(0o644)
	if mask&vfs.SetMode != 0 {
		mode = in.Mode
	}
	a, _, err := r.s.fs.Create(r.ctx, dir, where.Filename, vfs.CreateArgs{Type: vfs.TypeFile, Mode: mode}, false, 0)
	switch {
	case err == nil && how == createExclusive:
		// The verifier is kept in the times until the client sets
		// them (RFC 1813, 3.3.8), so that a resent CREATE finds it.
		vt := vfs.Attr{Mtime: verfTime(verf[:4]), Atime: verfTime(verf[4:])}
		a, err = r.s.fs.SetAttr(r.ctx, a.LIN, vfs.SetAtime|vfs.SetMtime, vt)
	case err == nil:
		if rest := mask &^ vfs.SetMode; rest != 0 {
			a, err = r.s.fs.SetAttr(r.ctx, a.LIN, rest, in)
		}
	case errors.Is(err, vfs.ErrExists) && how == createExclusive:
		var cur vfs.Attr
		if cur, err = r.s.fs.Lookup(r.ctx, dir, where.Filename); err == nil {
			if cur.Type == vfs.TypeFile && cur.Mtime.Equal(verfTime(verf[:4])) && cur.Atime.Equal(verfTime(verf[4:])) {
				a = cur // the same CREATE again: it succeeded
			} else {
				err = statusError(nfsc.NFS3ErrExist)
			}
		}
	case errors.Is(err, vfs.ErrExists) && how == createUnchecked:
		// UNCHECKED on an existing file succeeds, applying only a size
		// (open(O_CREAT|O_TRUNC)).
		if a, err = r.s.fs.Lookup(r.ctx, dir, where.Filename); err == nil {
			if a.Type != vfs.TypeFile {
				err = statusError(nfsc.NFS3ErrExist)
			} else if mask&vfs.SetSize != 0 {
				a, err = r.s.fs.SetAttr(r.ctx, a.LIN, vfs.SetSize, in)
			}
		}
	}
	return r.created(dir, pre, a, err)
}

// verfTime is half an EXCLUSIVE create's verifier as a time.
func verfTime(b []byte) time.Time { return time.Unix(int64(binary.BigEndian.Uint32(b)), 0) }

func (r *request) mkdir() (result, error) {
	var args mkdirArgs
	if err := r.decode(&args); err != nil {
		return result{}, err
	}
	dir, pre, err := r.targetAttr(args.Where.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: wccData{}}, nil
	}
	mask, in := setAttrs(args.Attr)
	mode := uint32(0o755)
	if mask&vfs.SetMode != 0 {
		mode = in.Mode
	}
	a, err := r.s.fs.Mkdir(r.ctx, dir, args.Where.Filename, mode)
	return r.created(dir, pre, a, err)
}

func (r *request) symlink() (result, error) {
	var args symlinkArgs
	if err := r.decode(&args); err != nil {
		return result{}, err
	}
	dir, pre, err := r.targetAttr(args.Where.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: wccData{}}, nil
	}
	a, err := r.s.fs.Symlink(r.ctx, dir, args.Where.Filename, args.Target)
	return r.created(dir, pre, a, err)
}

func (r *request) mknod() (result, error) {
	var where nfsc.Diropargs3
	var typ uint32
	if err := r.decode(&where); err != nil {
		return result{}, err
	}
	if err := r.decode(&typ); err != nil {
		return result{}, err
	}
	ca := vfs.CreateArgs{}
	var sattr nfsc.Sattr3
	switch typ {
	case nfsc.NF3Chr, nfsc.NF3Blk:
		var d devData
		if err := r.decode(&d); err != nil {
			return result{}, err
		}
		sattr = d.Attr
		ca.Rdev = mkdev(d.Spec[0], d.Spec[1])
		ca.Type = vfs.TypeCharDev
		if typ == nfsc.NF3Blk {
			ca.Type = vfs.TypeBlockDev
		}
	case nfsc.NF3Sock, nfsc.NF3FIFO:
		if err := r.decode(&sattr); err != nil {
			return result{}, err
		}
		ca.Type = vfs.TypeSocket
		if typ == nfsc.NF3FIFO {
			ca.Type = vfs.TypeFIFO
		}
	}
	dir, pre, err := r.targetAttr(where.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: wccData{}}, nil
	}
	if ca.Type == 0 {
		return result{status: nfsc.NFS3ErrBadType, body: wcc(pre, true, pre, true)}, nil
	}
	mask, in := setAttrs(sattr)
	ca.Mode = 0o644
	if mask&vfs.SetMode != 0 {
		ca.Mode = in.Mode
	}
	a, _, err := r.s.fs.Create(r.ctx, dir, where.Filename, ca, false, 0)
	return r.created(dir, pre, a, err)
}

// victim returns the LIN name in dir has now, to release its cached
// handles once it is removed or replaced (0: none).
func (r *request) victim(dir vfs.LIN, name string) vfs.LIN {
	a, err := r.s.fs.Lookup(vfs.WithCaller(r.ctx, vfs.Caller{}), dir, name)
	if err != nil {
		return 0
	}
	return a.LIN
}

// removed finishes REMOVE and RMDIR.
func (r *request) removed(dir vfs.LIN, pre vfs.Attr, victim vfs.LIN, err error) (result, error) {
	if err == nil {
		err = r.s.fs.FsyncDir(r.ctx)
		if victim != 0 {
			r.s.files.drop(r.ctx, victim)
		}
	}
	post, ok := r.attr(dir)
	return result{status: r.statusOf(err), body: wcc(pre, true, post, ok)}, nil
}

func (r *request) remove() (result, error) {
	var args nfsc.Diropargs3
	if err := r.decode(&args); err != nil {
		return result{}, err
	}
	dir, pre, err := r.targetAttr(args.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: wccData{}}, nil
	}
	v := r.victim(dir, args.Filename)
	return r.removed(dir, pre, v, r.s.fs.Unlink(r.ctx, dir, args.Filename))
}

func (r *request) rmdir() (result, error) {
	var args nfsc.Diropargs3
	if err := r.decode(&args); err != nil {
		return result{}, err
	}
	dir, pre, err := r.targetAttr(args.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: wccData{}}, nil
	}
	return r.removed(dir, pre, 0, r.s.fs.Rmdir(r.ctx, dir, args.Filename))
}

func (r *request) rename() (result, error) {
	var args renameArgs
	if err := r.decode(&args); err != nil {
		return result{}, err
	}
	from, fpre, err := r.targetAttr(args.From.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: renameRes{}}, nil
	}
	to, tpre, err := r.targetAttr(args.To.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: renameRes{From: wcc(fpre, true, fpre, true)}}, nil
	}
	v := r.victim(to, args.To.Filename)
	err = r.s.fs.Rename(r.ctx, from, args.From.Filename, to, args.To.Filename, 0)
	if err == nil {
		err = r.s.fs.FsyncDir(r.ctx)
		if v != 0 {
			r.s.files.drop(r.ctx, v)
		}
	}
	fpost, fok := r.attr(from)
	tpost, tok := r.attr(to)
	return result{status: r.statusOf(err), body: renameRes{From: wcc(fpre, true, fpost, fok), To: wcc(tpre, true, tpost, tok)}}, nil
}

func (r *request) link() (result, error) {
	var args linkArgs
	if err := r.decode(&args); err != nil {
		return result{}, err
	}
	lin, err := r.target(args.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: linkRes{}}, nil
	}
	dir, pre, err := r.targetAttr(args.Link.FH)
	if err != nil {
		a, ok := r.attr(lin)
		return result{status: r.statusOf(err), body: linkRes{Attr: postOp(a, ok)}}, nil
	}
	_, err = r.s.fs.Link(r.ctx, lin, dir, args.Link.Filename)
	if err == nil {
		err = r.s.fs.FsyncDir(r.ctx)
	}
	a, ok := r.attr(lin)
	post, dok := r.attr(dir)
	return result{status: r.statusOf(err), body: linkRes{Attr: postOp(a, ok), Dir: wcc(pre, true, post, dok)}}, nil
}

// fsProc answers FSSTAT, FSINFO or PATHCONF: their arguments are a file
// handle, their failure body its post-op attributes; fn gets the
// attributes (ok false if they could not be read) and gives the result.
func (r *request) fsProc(fn func(a vfs.Attr, ok bool) result) (result, error) {
	var args fhArgs
	if err := r.decode(&args); err != nil {
		return result{}, err
	}
	lin, err := r.target(args.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: postOpAttr{}}, nil
	}
	a, ok := r.attr(lin)
	return fn(a, ok), nil
}

func (r *request) fsstat() (result, error) {
	return r.fsProc(func(a vfs.Attr, ok bool) result {
		st, err := r.s.fs.StatFS(r.ctx)
		if err != nil {
			return result{status: r.statusOf(err), body: postOp(a, ok)}
		}
		// The namespace has no inode limit: report as many free as a
		// 64-bit count comfortably holds.
		const freeFiles = 1 << 48
		used := uint64(max(st.Files, 0))
		return result{body: fsstatOK{Attr: postOp(a, ok),
			Tbytes: uint64(max(st.TotalBytes, 0)), Fbytes: uint64(max(st.FreeBytes, 0)), Abytes: uint64(max(st.FreeBytes, 0)),
			Tfiles: used + freeFiles, Ffiles: freeFiles, Afiles: freeFiles}}
	})
}

func (r *request) fsinfo() (result, error) {
	return r.fsProc(func(a vfs.Attr, ok bool) result {
		return result{body: fsinfoOK{Attr: postOp(a, ok),
			RTMax: maxIO, RTPref: maxIO, RTMult: 4096, WTMax: maxIO, WTPref: maxIO, WTMult: 4096,
			DTPref: dirPref, Size: 1<<63 - 1, TimeDelta: nfsc.NFS3Time{Nseconds: 1},
			Properties: fsfLink | fsfSymlink | fsfHomogeneous | fsfCanSetTime}}
	})
}

func (r *request) pathconf() (result, error) {
	return r.fsProc(func(a vfs.Attr, ok bool) result {
		return result{body: pathconfOK{Attr: postOp(a, ok), Linkmax: vfs.MaxLinks, NameMax: vfs.MaxNameLen,
			NoTrunc: true, ChownRestricted: true, CaseInsensitive: false, CasePreserving: true}}
	})
}
