package harness

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/weftfs/weft/internal/local"
)

// NeedPartitions skips the test unless Cluster.Partition can work here: it
// needs root, the iptables command, and the kernel's cgroup match (xt_cgroup)
// over a cgroup v2 hierarchy. It starts nothing, so call it before Start.
func NeedPartitions(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("harness: partition tests need root (iptables rules and cgroups); run the tests as root")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		tb.Skip("harness: partition tests need iptables (apt-get install iptables): " + err.Error())
	}
	// A throw-away chain with a cgroup rule proves the match works.
	chain := fmt.Sprintf("WEFT-CHK-%d", os.Getpid())
	if out, err := iptables("-N", chain); err != nil {
		tb.Skipf("harness: iptables cannot create a chain here: %v: %s", err, out)
	}
	defer func() {
		_, _ = iptables("-F", chain)
		_, _ = iptables("-X", chain)
	}()
	if out, err := iptables("-A", chain, "-m", "cgroup", "--path", "/", "-j", "RETURN"); err != nil {
		tb.Skipf("harness: iptables' cgroup match does not work here (a cgroup v2 hierarchy and xt_cgroup are needed): %v: %s", err, out)
	}
}

// iptables runs iptables with args, waiting for the xtables lock.
func iptables(args ...string) (string, error) {
	out, err := exec.Command("iptables", append([]string{"-w", "5"}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// Partition cuts node off from the other nodes and from every other
// process until the returned heal is called (heal is idempotent and also
// runs at cleanup, so a failing test never leaves the rules behind). The
// node keeps talking to itself, as a machine on the far side of a cut
// cable does. The cluster must have been started with
// Options.Partitionable.
//
// The rules live in a chain of their own, jumped to first from OUTPUT
// (every loopback packet passes OUTPUT, sent by some local socket):
//
//   - accepted: the node's connections to its own address, new ones
//     marked (CONNMARK) by their first packet, those open already by
//     their 4-tuple;
//   - dropped: every other packet the node's process sends (-m cgroup
//     --path: the node's cgroup), so it can neither answer nor open
//     connections;
//   - dropped: every other packet to the node's address, so nothing
//     reaches its listening ports;
//   - dropped: every packet to the local end of the node's open
//     connections whose local address is not its own (outgoing
//     connections come from 127.0.0.1), by the exact 4-tuple of each,
//     read from /proc once the rules above keep it from opening more.
//
// Like a pulled cable, packets vanish: connections hang until their
// keepalives or timeouts notice, rather than being refused.
func (c *Cluster) Partition(node string) (heal func()) {
	c.tb.Helper()
	st := c.nodeState(node)
	if st.Cgroup == "" || st.Host == "" || st.Host == "127.0.0.1" || !st.Running {
		c.tb.Fatalf("harness: cannot partition node %s (%+v): start the cluster with Options.Partitionable", node, st)
	}
	chain := fmt.Sprintf("WEFT-P%d-%s", os.Getpid(), node)
	if len(chain) > 28 {
		chain = chain[:28]
	}
	mark := fmt.Sprintf("0x5e7f%04x", os.Getpid()&0xffff)
	var once sync.Once
	heal = func() {
		once.Do(func() {
			for _, args := range [][]string{{"-D", "OUTPUT", "-j", chain}, {"-F", chain}, {"-X", chain}} {
				if out, err := iptables(args...); err != nil {
					c.tb.Errorf("harness: heal partition of %s: iptables %s: %v: %s", node, strings.Join(args, " "), err, out)
				}
			}
		})
	}
	c.tb.Cleanup(heal)
	restore := func(rules []string) {
		c.tb.Helper()
		in := "*filter\n" + strings.Join(rules, "\n") + "\nCOMMIT\n"
		cmd := exec.Command("iptables-restore", "-w", "5", "--noflush")
		cmd.Stdin = strings.NewReader(in)
		if out, err := cmd.CombinedOutput(); err != nil {
			c.tb.Fatalf("harness: partition %s: iptables-restore: %v: %s\n%s", node, err, out, in)
		}
	}
	// The node's open connections, read before the rules go in: one
	// iptables-restore then installs every rule at once (while rules
	// that drop the node's packets are in place, a second one was seen
	// to take 10 s here). A connection opened in between is not dropped
	// by its 4-tuple, but the node cannot send on it.
	conns, err := tcpConns(st.PID)
	if err != nil {
		c.tb.Fatalf("harness: partition %s: its connections: %v", node, err)
	}
	rules := []string{":" + chain + " - [0:0]"}
	tuple := func(from, to *net.TCPAddr) string {
		return fmt.Sprintf("-p tcp -s %s --sport %d -d %s --dport %d", from.IP, from.Port, to.IP, to.Port)
	}
	var own, cut int
	for _, cn := range conns {
		if cn.remote.IP.String() == st.Host { // to itself: both directions pass
			rules = append(rules, fmt.Sprintf("-A %s %s -j ACCEPT", chain, tuple(cn.local, cn.remote)),
				fmt.Sprintf("-A %s %s -j ACCEPT", chain, tuple(cn.remote, cn.local)))
			own++
		}
	}
	self := fmt.Sprintf("-m cgroup --path %s -d %s -m conntrack --ctstate NEW", st.Cgroup, st.Host)
	rules = append(rules,
		fmt.Sprintf("-A %s -m connmark --mark %s -j ACCEPT", chain, mark),
		fmt.Sprintf("-A %s %s -j CONNMARK --set-mark %s", chain, self, mark),
		fmt.Sprintf("-A %s %s -j ACCEPT", chain, self),
		fmt.Sprintf("-A %s -m cgroup --path %s -j DROP", chain, st.Cgroup),
		fmt.Sprintf("-A %s -d %s -j DROP", chain, st.Host))
	for _, cn := range conns {
		if cn.remote.IP.String() != st.Host && cn.local.IP.String() != st.Host { // outgoing: what comes back is dropped
			rules = append(rules, fmt.Sprintf("-A %s %s -j DROP", chain, tuple(cn.remote, cn.local)))
			cut++
		}
	}
	restore(append(rules, "-I OUTPUT 1 -j "+chain))
	c.tb.Logf("harness: %s cut off: cgroup %s, address %s, %d outgoing connections; %d connections to itself kept", node, st.Cgroup, st.Host, cut, own)
	return heal
}

// nodeState returns the supervisor's view of one node.
func (c *Cluster) nodeState(name string) local.NodeState {
	c.tb.Helper()
	states, err := c.Ctl.Nodes(context.Background())
	if err != nil {
		c.tb.Fatal(err)
	}
	for _, s := range states {
		if s.Name == name {
			return s
		}
	}
	c.tb.Fatalf("harness: no node %s", name)
	return local.NodeState{}
}

// tcpConn is one TCP socket: its two ends.
type tcpConn struct{ local, remote *net.TCPAddr }

// tcpConns returns the connected TCP sockets process pid holds open (not
// its listening ones), from its descriptors and /proc/PID/net/tcp{,6}.
func tcpConns(pid int) ([]tcpConn, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	var out []tcpConn
	for _, table := range []string{"tcp", "tcp6"} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue // no IPv6
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // header
		for sc.Scan() {
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode …
			fl := strings.Fields(sc.Text())
			if len(fl) < 10 || !inodes[fl[9]] || fl[3] == "0A" { // 0A: LISTEN
				continue
			}
			l, err1 := procAddr(fl[1])
			r, err2 := procAddr(fl[2])
			if err1 != nil || err2 != nil || l.IP.To4() == nil || r.IP.To4() == nil {
				continue
			}
			out = append(out, tcpConn{local: l, remote: r})
		}
		f.Close()
	}
	return out, nil
}

// procAddr parses an address of /proc/net/tcp: the IP as 32-bit words in
// host (little-endian) order, then the port, both in hex.
func procAddr(s string) (*net.TCPAddr, error) {
	ipHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return nil, fmt.Errorf("bad address %q", s)
	}
	b, err := hex.DecodeString(ipHex)
	if err != nil || len(b)%4 != 0 {
		return nil, fmt.Errorf("bad address %q", s)
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return nil, fmt.Errorf("bad port in %q", s)
	}
	ip := net.IP(b)
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	return &net.TCPAddr{IP: ip, Port: int(port)}, nil
}

// AdminAddr returns a node's admin address ("host:port").
func (c *Cluster) AdminAddr(name string) string {
	c.tb.Helper()
	return c.nodeState(name).AdminAddr
}
