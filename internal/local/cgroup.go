package local

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrNoCgroup2 is returned by Up with Options.Cgroups when this machine has
// no cgroup v2 hierarchy mounted, or it cannot be written.
var ErrNoCgroup2 = errors.New("local: no writable cgroup v2 hierarchy")

// cgroups places each node process in a cgroup v2 of its own,
// ROOT/weft-local-<cluster token>/<node>, where ROOT is the mount point of
// the cgroup v2 hierarchy. Nothing is limited: the cgroup only names the
// node's processes, so that a firewall rule can match the packets they
// send (iptables -m cgroup --path weft-local-…/n3), which on a shared
// loopback address nothing else can.
type cgroups struct {
	root string // the cgroup2 mount point
	rel  string // weft-local-<token>, relative to root
}

// newCgroups creates the cluster's cgroup directory.
func newCgroups(token string) (*cgroups, error) {
	root, err := cgroup2Root()
	if err != nil {
		return nil, err
	}
	cg := &cgroups{root: root, rel: token}
	if err := os.MkdirAll(filepath.Join(root, cg.rel), 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v (run as root, or without --cgroups)", ErrNoCgroup2, err)
	}
	return cg, nil
}

// Path returns node's cgroup relative to the hierarchy's root, the form
// iptables' cgroup match takes.
func (cg *cgroups) Path(node string) string { return cg.rel + "/" + node }

// open creates node's cgroup if needed and opens it, for
// syscall.SysProcAttr.CgroupFD; the caller closes the file once the
// process has started.
func (cg *cgroups) open(node string) (*os.File, error) {
	dir := filepath.Join(cg.root, cg.Path(node))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("local: cgroup of node %s: %w", node, err)
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("local: cgroup of node %s: %w", node, err)
	}
	return f, nil
}

// remove removes the cluster's cgroups once their processes are gone; a
// cgroup still holding a process stays (rmdir refuses it).
func (cg *cgroups) remove() {
	dir := filepath.Join(cg.root, cg.rel)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	_ = os.Remove(dir)
}

// cgroup2Root returns where the cgroup v2 hierarchy is mounted (on a
// hybrid system, usually /sys/fs/cgroup/unified).
func cgroup2Root() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoCgroup2, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options … - fstype source …
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" && len(fields) > 4 {
				return fields[4], nil
			}
		}
	}
	return "", fmt.Errorf("%w: no cgroup2 mount in /proc/self/mountinfo", ErrNoCgroup2)
}
