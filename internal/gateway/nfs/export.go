package nfs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path"
	"strings"

	"github.com/weftfs/weft/internal/vfs"
)

// Export is one exported directory of the namespace.
type Export struct {
	// Path is the exported directory, absolute in the namespace ("/" = all).
	Path string `json:"path"`
	// Clients are the client addresses allowed, as IPs or CIDRs; empty means any.
	Clients  []string `json:"clients,omitempty"`
	ReadOnly bool     `json:"read_only,omitempty"`
	// NoRootSquash lets uid 0 act as root; by default (false) root is squashed
	// to AnonUID/AnonGID.
	NoRootSquash     bool   `json:"no_root_squash,omitempty"`
	AnonUID, AnonGID uint32 // 0 here means 65534 (nobody/nogroup)
	// Sync makes every WRITE durable before its reply, answered
	// FILE_SYNC whatever the client asked: for clients that do not send
	// again what they wrote UNSTABLE when the write verifier changes
	// (libnfs), whose uncommitted writes a failover would otherwise lose.
	Sync bool `json:"sync,omitempty"`
}

// nobody is the anonymous uid and gid when an export names none.
const nobody = 65534

// Validate reports what is wrong with e, naming the field and what to do.
func (e Export) Validate() error {
	if e.Path == "" || !strings.HasPrefix(e.Path, "/") {
		return fmt.Errorf("nfs: export path %q: must be an absolute path in the namespace, such as /projects", e.Path)
	}
	if path.Clean(e.Path) != e.Path {
		return fmt.Errorf("nfs: export path %q: not in canonical form; write it as %q", e.Path, path.Clean(e.Path))
	}
	for _, c := range e.Clients {
		if _, err := parseClient(c); err != nil {
			return fmt.Errorf("nfs: export %s: client %q: not an IP address or CIDR (such as 10.0.0.5 or 10.0.0.0/24)", e.Path, c)
		}
	}
	return nil
}

func parseClient(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// export is an Export with its clients parsed and its directory's LIN,
// looked up when first needed (root: at once).
type export struct {
	Export
	clients []netip.Prefix
	anonUID uint32
	anonGID uint32
}

func newExport(e Export) (*export, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	x := &export{Export: e, anonUID: e.AnonUID, anonGID: e.AnonGID}
	if x.anonUID == 0 {
		x.anonUID = nobody
	}
	if x.anonGID == 0 {
		x.anonGID = nobody
	}
	for _, c := range e.Clients {
		p, _ := parseClient(c)
		x.clients = append(x.clients, p)
	}
	return x, nil
}

// allows reports whether a client at addr may use the export.
func (x *export) allows(addr netip.Addr) bool {
	if len(x.clients) == 0 {
		return true
	}
	addr = addr.Unmap()
	for _, p := range x.clients {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// caller applies the export's squashing to a request's credentials: root
// (uid 0) becomes the anonymous user unless NoRootSquash, and so does
// every caller with AUTH_NONE (anon).
func (x *export) caller(c vfs.Caller, anon bool) vfs.Caller {
	if anon {
		return vfs.Caller{UID: x.anonUID, GID: x.anonGID}
	}
	if x.NoRootSquash {
		return c
	}
	if c.UID == 0 {
		c.UID = x.anonUID
	}
	if c.GID == 0 {
		c.GID = x.anonGID
	}
	for i, g := range c.Groups {
		if g == 0 {
			c.Groups[i] = x.anonGID
		}
	}
	return c
}

// errNoExport is a MOUNT of a path no export covers.
var errNoExport = errors.New("nfs: no export covers the path")

// resolve looks up the export's directory as root.
func resolvePath(ctx context.Context, fs *vfs.FS, p string) (vfs.Attr, error) {
	ctx = vfs.WithCaller(ctx, vfs.Caller{})
	a, err := fs.GetAttr(ctx, vfs.RootLIN)
	if err != nil {
		return a, err
	}
	for _, name := range strings.Split(strings.Trim(p, "/"), "/") {
		if name == "" {
			continue
		}
		if a, err = fs.Lookup(ctx, a.LIN, name); err != nil {
			return a, err
		}
	}
	if a.Type != vfs.TypeDir {
		return a, fmt.Errorf("%w: %s is a %s", vfs.ErrNotDir, p, a.Type)
	}
	return a, nil
}
