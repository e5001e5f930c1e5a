package nfs

import (
	"sync"

	nfsc "github.com/willscott/go-nfs-client/nfs"
	"github.com/willscott/go-nfs-client/nfs/xdr"

	"github.com/weftfs/weft/internal/vfs"
)

// READDIR and READDIRPLUS. vfs lists a directory after a name cursor; NFS
// resumes a listing at a 64-bit cookie. The cookie of an entry is its
// position in the listing ("." is 1, ".." 2, the first entry 3), and the
// server remembers the name at each cookie it handed out (cookies), so a
// listing resumes from there at once. A cookie it does not remember (after
// a restart, on another node, or evicted) is resumed by counting entries
// from the start: slower, but the listing stays right. The cookie
// verifier is always zero: a directory changed between two calls may skip
// or repeat an entry, as on most servers.

// dirPref is FSINFO's dtpref, the preferred READDIR size.
const dirPref = 64 << 10

const (
	cookiesKept  = 1 << 16
	readdirBatch = 256
)

type cookieKey struct {
	dir    vfs.LIN
	cookie uint64
}

type cookies struct {
	mu sync.Mutex
	m  map[cookieKey]string
}

func newCookies() *cookies { return &cookies{m: map[cookieKey]string{}} }

func (c *cookies) put(dir vfs.LIN, cookie uint64, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= cookiesKept {
		clear(c.m)
	}
	c.m[cookieKey{dir, cookie}] = name
}

func (c *cookies) get(dir vfs.LIN, cookie uint64) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.m[cookieKey{dir, cookie}]
	return n, ok
}

// listed is one entry of a listing with its cookie.
type listed struct {
	vfs.DirEntry
	cookie uint64
}

// list calls fn for dir's entries from after cookie on, "." and ".."
// included, until fn returns false or the end; it reports whether it got
// to the end.
func (r *request) list(dir vfs.LIN, cookie uint64, fn func(listed) bool) (bool, error) {
	var pos uint64
	if cookie < 2 {
		if cookie < 1 && !fn(listed{vfs.DirEntry{Name: ".", LIN: dir, Type: vfs.TypeDir}, 1}) {
			return false, nil
		}
		parent := dir
		if dir != r.root {
			p, err := r.s.fs.Parent(r.ctx, dir)
			if err != nil {
				return false, err
			}
			parent = p
		}
		if !fn(listed{vfs.DirEntry{Name: "..", LIN: parent, Type: vfs.TypeDir}, 2}) {
			return false, nil
		}
		cookie = 2
	}
	after, known := "", cookie == 2
	pos = 2
	if !known {
		if after, known = r.s.cookies.get(dir, cookie); known {
			pos = cookie
		}
	}
	for {
		es, next, err := r.s.fs.ReadDir(r.ctx, dir, after, readdirBatch)
		if err != nil {
			return false, err
		}
		for _, e := range es {
			pos++
			if pos <= cookie { // counting up to a cookie not remembered
				continue
			}
			if !fn(listed{e, pos}) {
				return false, nil
			}
			r.s.cookies.put(dir, pos, e.Name)
		}
		if next == "" || len(es) == 0 {
			return true, nil
		}
		after = next
	}
}

// xdrSize is the encoded size of v.
func xdrSize(v any) int {
	var n countWriter
	_ = xdr.Write(&n, v)
	return int(n)
}

type countWriter int

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// readdirStart checks dir and the caller's read permission on it.
func (r *request) readdirStart(fh []byte) (vfs.LIN, vfs.Attr, error) {
	dir, a, err := r.targetAttr(fh)
	if err != nil {
		return dir, a, err
	}
	if !a.IsDir() {
		return dir, a, statusError(nfsc.NFS3ErrNotDir)
	}
	if !vfs.Allowed(r.caller(), a, vfs.MayRead) {
		return dir, a, statusError(nfsc.NFS3ErrAcces)
	}
	return dir, a, nil
}

func (r *request) readdir() (result, error) {
	var args readdirArgs
	if err := r.decode(&args); err != nil {
		return result{}, err
	}
	dir, da, err := r.readdirStart(args.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: postOp(da, da.LIN != 0)}, nil
	}
	res := readdirOK{Attr: postOp(da, true)}
	size := 4 + xdrSize(res) // the status, the header and eof
	tail := &res.Entries
	n := 0
	eof, err := r.list(dir, args.Cookie, func(e listed) bool {
		ent := &entry3{Fileid: uint64(e.LIN), Name: e.Name, Cookie: e.cookie}
		es := 4 + xdrSize(ent) // with its "value follows"
		if size+es > int(args.Count) {
			return false
		}
		size += es
		*tail = ent
		tail = &ent.Next
		n++
		return true
	})
	if err != nil {
		return result{status: r.statusOf(err), body: postOp(da, true)}, nil
	}
	if n == 0 && !eof {
		return result{status: nfsc.NFS3ErrTooSmall, body: postOp(da, true)}, nil
	}
	res.EOF = eof
	return result{body: res}, nil
}

func (r *request) readdirplus() (result, error) {
	var args readdirplusArgs
	if err := r.decode(&args); err != nil {
		return result{}, err
	}
	dir, da, err := r.readdirStart(args.FH)
	if err != nil {
		return result{status: r.statusOf(err), body: postOp(da, da.LIN != 0)}, nil
	}
	res := readdirplusOK{Attr: postOp(da, true)}
	size := 4 + xdrSize(res)
	dirSize := 0
	tail := &res.Entries
	n := 0
	eof, err := r.list(dir, args.Cookie, func(e listed) bool {
		ent := &entryPlus3{Fileid: uint64(e.LIN), Name: e.Name, Cookie: e.cookie}
		if a, aerr := r.s.fs.GetAttr(r.ctx, e.LIN); aerr == nil {
			ent.Attr = postOp(a, true)
			ent.FH = nfsc.PostOpFH3{IsSet: true, FH: r.handle(e.LIN)}
		}
		es := 4 + xdrSize(ent)
		ds := 4 + xdrSize(entry3{Fileid: ent.Fileid, Name: ent.Name, Cookie: ent.Cookie})
		if size+es > int(args.MaxCount) || dirSize+ds > int(args.DirCount) {
			return false
		}
		size += es
		dirSize += ds
		*tail = ent
		tail = &ent.Next
		n++
		return true
	})
	if err != nil {
		return result{status: r.statusOf(err), body: postOp(da, true)}, nil
	}
	if n == 0 && !eof {
		return result{status: nfsc.NFS3ErrTooSmall, body: postOp(da, true)}, nil
	}
	res.EOF = eof
	return result{body: res}, nil
}
