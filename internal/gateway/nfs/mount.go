package nfs

import (
	"errors"
	"path"
	"slices"
	"strings"

	nfsc "github.com/willscott/go-nfs-client/nfs"

	"github.com/weftfs/weft/internal/vfs"
)

// mountProcs are MOUNT v3's procedures, by number. MOUNT is served on the
// same port as NFS (clients are told both ports, as go-nfs does).
var mountProcs = [...]procedure{
	0: {name: "MOUNT_NULL", fn: func(*request) (result, error) { return result{noStatus: true}, nil }},
	1: {name: "MOUNT", fn: (*request).mnt},
	2: {name: "MOUNT_DUMP", fn: (*request).dump},
	3: {name: "MOUNT_UMNT", fn: (*request).umnt},
	4: {name: "MOUNT_UMNTALL", fn: (*request).umntall},
	5: {name: "MOUNT_EXPORT", fn: (*request).exportList},
}

// mnt answers MNT: the handle of the directory asked for, which is an
// export's directory or below one (the longest export path that is a
// prefix of it), if the client may use that export. The directories below
// the export are looked up as the caller (search permission).
func (r *request) mnt() (result, error) {
	var dirpath string
	if err := r.decode(&dirpath); err != nil {
		return result{}, err
	}
	p := path.Clean("/" + dirpath)
	x := r.s.exportFor(p)
	if x == nil {
		r.s.log.Info("nfs: mount refused: no export", "client", r.conn.remote, "path", p)
		return result{status: nfsc.MNT3ErrNoEnt}, nil
	}
	if !x.allows(r.conn.remote.Addr()) {
		r.s.log.Info("nfs: mount refused: client not in the export's list", "client", r.conn.remote, "path", p)
		return result{status: nfsc.MNT3ErrAcces}, nil
	}
	// Look the export's directory up again: a MOUNT is when a renamed or
	// replaced export directory is noticed.
	root, err := resolvePath(r.base, r.s.fs, x.Path)
	if err != nil {
		return result{status: mountStatus(err)}, nil
	}
	r.s.setRoot(x, root.LIN)
	ctx := vfs.WithCaller(r.base, x.caller(r.cred, r.anon))
	a := root
	rest := strings.TrimPrefix(strings.TrimPrefix(p, x.Path), "/")
	for _, name := range strings.Split(rest, "/") {
		if name == "" {
			continue
		}
		if a, err = r.s.fs.Lookup(ctx, a.LIN, name); err != nil {
			return result{status: mountStatus(err)}, nil
		}
	}
	if !a.IsDir() {
		return result{status: nfsc.MNT3ErrNotDir}, nil
	}
	r.s.mu.Lock()
	r.s.mounts[mountEntry{r.conn.remote.Addr().String(), p}] = true
	r.s.mu.Unlock()
	return result{body: mountOK{FH: encodeHandle(a.LIN, root.LIN), Flavor: []uint32{flavorSys, flavorNone}}}, nil
}

// exportFor returns the export covering p (the longest path prefix).
func (s *Server) exportFor(p string) *export {
	s.mu.Lock()
	defer s.mu.Unlock()
	var best *export
	for _, x := range s.exports {
		if x.Path == "/" || p == x.Path || strings.HasPrefix(p, x.Path+"/") {
			if best == nil || len(x.Path) > len(best.Path) {
				best = x
			}
		}
	}
	return best
}

func mountStatus(err error) uint32 {
	switch {
	case errors.Is(err, vfs.ErrNotFound):
		return nfsc.MNT3ErrNoEnt
	case errors.Is(err, vfs.ErrNotDir):
		return nfsc.MNT3ErrNotDir
	case errors.Is(err, vfs.ErrAccess), errors.Is(err, vfs.ErrPerm):
		return nfsc.MNT3ErrAcces
	case errors.Is(err, vfs.ErrNameTooLong):
		return nfsc.MNT3ErrNameTooLong
	}
	return nfsc.MNT3ErrIO
}

func (r *request) umnt() (result, error) {
	var dirpath string
	if err := r.decode(&dirpath); err != nil {
		return result{}, err
	}
	r.s.mu.Lock()
	delete(r.s.mounts, mountEntry{r.conn.remote.Addr().String(), path.Clean("/" + dirpath)})
	r.s.mu.Unlock()
	return result{noStatus: true}, nil
}

func (r *request) umntall() (result, error) {
	host := r.conn.remote.Addr().String()
	r.s.mu.Lock()
	for m := range r.s.mounts {
		if m.host == host {
			delete(r.s.mounts, m)
		}
	}
	r.s.mu.Unlock()
	return result{noStatus: true}, nil
}

// dump lists the mounts this gateway answered (since it started; clients
// that mounted through another gateway are not in it).
func (r *request) dump() (result, error) {
	r.s.mu.Lock()
	ms := make([]mountEntry, 0, len(r.s.mounts))
	for m := range r.s.mounts {
		ms = append(ms, m)
	}
	r.s.mu.Unlock()
	slices.SortFunc(ms, func(a, b mountEntry) int {
		return strings.Compare(a.host+"\x00"+a.dir, b.host+"\x00"+b.dir)
	})
	var l mountList
	tail := &l.Entries
	for _, m := range ms {
		b := &mountBody{Host: m.host, Dir: m.dir}
		*tail = b
		tail = &b.Next
	}
	return result{body: l, noStatus: true}, nil
}

// exportList answers EXPORT: every export with its client list (empty:
// everyone).
func (r *request) exportList() (result, error) {
	r.s.mu.Lock()
	xs := slices.Clone(r.s.exports)
	r.s.mu.Unlock()
	var l exportList
	tail := &l.Entries
	for _, x := range xs {
		n := &exportNode{Dir: x.Path}
		gt := &n.Groups
		for _, c := range x.Clients {
			g := &groupNode{Name: c}
			*gt = g
			gt = &g.Next
		}
		*tail = n
		tail = &n.Next
	}
	return result{body: l, noStatus: true}, nil
}
