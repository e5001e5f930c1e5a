package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/weftfs/weft/internal/durable"
)

// Layout file format, version 1: DIR/local.json, written once when a
// directory is first used, read on every later `weft local up` so that the
// cluster comes back on the same ports with the same drives (etcd members
// remember their peers' addresses, so the ports must not change).
//
//	{"v":1, "nodes":3, "drives_per_node":4, "token":"…", "created":"…",
//	 "own_addresses":true,
//	 "members":[{"name":"n1","grpc_addr":"127.0.0.1:P","admin_addr":"…",
//	             "etcd_client":"http://127.0.0.1:P","etcd_peer":"…","embed":true,
//	             "drives":["nodes/n1/disk0",…], "nfs_addr":"127.0.0.1:P"}, …]}
//
// Paths are relative to DIR so that a directory can be moved.
// own_addresses (absent: false) marks a layout whose nodes each listen on a
// loopback address of their own (127.A.B.N for node nN, A.B drawn once per
// cluster) instead of sharing 127.0.0.1; the members' addresses say so
// already, so an older weft that ignores the field runs the same cluster.
// insecure (absent: false) marks a cluster created with --insecure: no
// certificates, plain http etcd URLs. A layout without it whose etcd URLs
// are http:// was made by a weft from before TLS, and is as insecure
// (Layout.IsInsecure); etcd members remember their peers' URLs, so a
// cluster keeps the scheme it was created with.
const LayoutVersion = 1

// ErrLayout is wrapped by errors about DIR/local.json.
var ErrLayout = errors.New("local: bad cluster directory")

// Layout is a local cluster's fixed shape.
type Layout struct {
	V             int       `json:"v"`
	Nodes         int       `json:"nodes"`
	DrivesPerNode int       `json:"drives_per_node"`
	Token         string    `json:"token"`
	Created       time.Time `json:"created"`
	// OwnAddresses: every node listens on a loopback address of its own
	// (see Options.OwnAddresses).
	OwnAddresses bool `json:"own_addresses,omitempty"`
	// Insecure: created with --insecure (see IsInsecure).
	Insecure bool         `json:"insecure,omitempty"`
	Members  []NodeLayout `json:"members"`
}

// IsInsecure reports whether the cluster runs without TLS: created with
// --insecure, or by a weft from before TLS (plain http etcd URLs).
func (l Layout) IsInsecure() bool {
	if l.Insecure {
		return true
	}
	for _, m := range l.Members {
		if strings.HasPrefix(m.EtcdClient, "http://") {
			return true
		}
	}
	return false
}

// NodeLayout is one node of a local cluster.
type NodeLayout struct {
	Name       string   `json:"name"`
	GRPCAddr   string   `json:"grpc_addr"`
	AdminAddr  string   `json:"admin_addr"`
	EtcdClient string   `json:"etcd_client,omitempty"`
	EtcdPeer   string   `json:"etcd_peer,omitempty"`
	Embed      bool     `json:"embed"`
	Drives     []string `json:"drives"`
	// NFSAddr is the node's NFS gateway address (host:port), given the
	// first time the cluster is run with --nfs and kept, as the other
	// ports are ("" until then; an older weft ignores it).
	NFSAddr string `json:"nfs_addr,omitempty"`
}

// MaxEtcdMembers is how many nodes of a local cluster run an etcd member:
// three survive the loss of one.
const MaxEtcdMembers = 3

func layoutPath(dir string) string { return filepath.Join(dir, "local.json") }

// loadOrCreateLayout reads DIR/local.json, or creates it for nodes×drives
// with free ports, on one loopback address per node if ownAddrs. A
// directory created with another shape is refused unless the caller did not
// ask for a shape (nodes, drives == 0); so is one created on a shared
// address when ownAddrs is asked for.
func loadOrCreateLayout(dir string, nodes, drives int, ownAddrs, insecure bool) (Layout, bool, error) {
	var l Layout
	b, err := os.ReadFile(layoutPath(dir))
	if err == nil {
		if err := json.Unmarshal(b, &l); err != nil {
			return l, false, fmt.Errorf("%w: %s: %v", ErrLayout, layoutPath(dir), err)
		}
		if l.V > LayoutVersion {
			return l, false, fmt.Errorf("%w: %s has version %d, this weft knows %d: upgrade weft", ErrLayout, layoutPath(dir), l.V, LayoutVersion)
		}
		if (nodes != 0 && nodes != l.Nodes) || (drives != 0 && drives != l.DrivesPerNode) {
			return l, false, fmt.Errorf("%w: %s holds a cluster of %d nodes x %d drives; run with the same --nodes/--drives-per-node, or use another --dir for a new cluster",
				ErrLayout, dir, l.Nodes, l.DrivesPerNode)
		}
		if ownAddrs && !l.OwnAddresses {
			return l, false, fmt.Errorf("%w: %s holds a cluster whose nodes share 127.0.0.1; run without --own-addresses, or use another --dir for a new cluster",
				ErrLayout, dir)
		}
		switch {
		case insecure && !l.IsInsecure():
			return l, false, fmt.Errorf("%w: %s holds a cluster created with TLS; run it without --insecure, or use another --dir for an insecure one", ErrLayout, dir)
		case !insecure && l.IsInsecure():
			return l, false, fmt.Errorf("%w: %s holds a cluster created without TLS (--insecure, or by a weft from before TLS): it stays so; "+
				"run it with --insecure, or create a new cluster (with TLS) in another --dir", ErrLayout, dir)
		}
		return l, false, nil
	}
	if !os.IsNotExist(err) {
		return l, false, fmt.Errorf("%w: %v", ErrLayout, err)
	}
	if nodes == 0 {
		nodes = 3
	}
	if drives == 0 {
		drives = 4
	}
	if nodes < 1 || nodes > 64 || drives < 1 || drives > 64 {
		return l, false, fmt.Errorf("%w: --nodes %d and --drives-per-node %d must each be 1..64", ErrLayout, nodes, drives)
	}
	l = Layout{V: LayoutVersion, Nodes: nodes, DrivesPerNode: drives, Token: fmt.Sprintf("weft-local-%d", time.Now().UnixNano()), Created: time.Now().UTC(),
		OwnAddresses: ownAddrs, Insecure: insecure}
	scheme := "https://"
	if insecure {
		scheme = "http://"
	}
	hosts := make([]string, nodes)
	prefix := loopbackPrefix()
	for i := range hosts {
		hosts[i] = "127.0.0.1"
		if ownAddrs {
			hosts[i] = fmt.Sprintf("%s.%d", prefix, i+1)
		}
	}
	var portHosts []string // four ports per node, on its address
	for _, h := range hosts {
		portHosts = append(portHosts, h, h, h, h)
	}
	ports, err := freePorts(portHosts)
	if err != nil {
		return l, false, err
	}
	for i := 0; i < nodes; i++ {
		addr := func(k int) string { return net.JoinHostPort(hosts[i], strconv.Itoa(ports[4*i+k])) }
		n := NodeLayout{
			Name:      fmt.Sprintf("n%d", i+1),
			GRPCAddr:  addr(0),
			AdminAddr: addr(1),
			Embed:     i < MaxEtcdMembers,
		}
		if n.Embed {
			n.EtcdClient = scheme + addr(2)
			n.EtcdPeer = scheme + addr(3)
		}
		for d := 0; d < drives; d++ {
			n.Drives = append(n.Drives, filepath.Join("nodes", n.Name, fmt.Sprintf("disk%d", d)))
		}
		l.Members = append(l.Members, n)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return l, false, fmt.Errorf("%w: %v", ErrLayout, err)
	}
	b, _ = json.MarshalIndent(l, "", "  ")
	if err := writeFileAtomic(layoutPath(dir), append(b, '\n')); err != nil {
		return l, false, err
	}
	return l, true, nil
}

// etcdEndpoints lists the client URLs of the embedded members.
func (l Layout) etcdEndpoints() []string {
	var eps []string
	for _, m := range l.Members {
		if m.Embed {
			eps = append(eps, m.EtcdClient)
		}
	}
	return eps
}

func (l Layout) initialCluster() string {
	var parts []string
	for _, m := range l.Members {
		if m.Embed {
			parts = append(parts, m.Name+"="+m.EtcdPeer)
		}
	}
	return strings.Join(parts, ",")
}

// loopbackPrefix draws the first three bytes of a cluster's own loopback
// addresses, "127.A.B" with A in 100..254: Linux routes all of 127.0.0.0/8
// to the loopback interface, and a /24 of its own keeps one cluster's
// addresses (and any firewall rule a test puts on them) apart from other
// processes on 127.0.0.1 and from other clusters on this machine.
func loopbackPrefix() string {
	return fmt.Sprintf("127.%d.%d", 100+rand.IntN(155), rand.IntN(256))
}

// freePorts returns one port per entry of hosts, free on that address
// and distinct from the others.
//
// The nodes bind them later, when they start, so a port must stay free in
// between. Ports the kernel hands out by itself (port 0, and the local
// end of every outgoing connection — the first node's etcd and gRPC
// clients make many) come from the ephemeral range; a port picked from it
// can be taken by a connection before its node binds it ("address already
// in use" at start-up). So the ports are drawn below that range, where
// only explicit binds land; the kernel's own choice is the fallback when
// the range cannot be read or leaves no room.
func freePorts(hosts []string) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	n := len(hosts)
	var ports []int
	taken := map[int]bool{}
	lo, hi := belowEphemeral()
	for tries := 0; len(ports) < n && hi-lo >= n && tries < 50*n; tries++ {
		port := lo + rand.IntN(hi-lo)
		if taken[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(hosts[len(ports)], strconv.Itoa(port)))
		if err != nil {
			continue // taken; draw another
		}
		ls = append(ls, l)
		ports = append(ports, port)
		taken[port] = true
	}
	for len(ports) < n {
		l, err := net.Listen("tcp", net.JoinHostPort(hosts[len(ports)], "0"))
		if err != nil {
			return nil, fmt.Errorf("local: find a free port on %s: %w", hosts[len(ports)], err)
		}
		ls = append(ls, l)
		port := l.Addr().(*net.TCPAddr).Port
		if taken[port] {
			continue // kept open, so the kernel will not hand it out again
		}
		ports = append(ports, port)
		taken[port] = true
	}
	return ports, nil
}

// belowEphemeral returns the ports [lo, hi) between 10000 and the start of
// the kernel's ephemeral range (empty if it cannot be read).
func belowEphemeral() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	start, err := strconv.Atoi(f[0])
	if err != nil || start <= 10000 {
		return 0, 0
	}
	return 10000, start
}

// writeFileAtomic writes a file atomically and durably (package durable).
func writeFileAtomic(path string, b []byte) error {
	if err := durable.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("local: %w", err)
	}
	return nil
}

// withNFS gives every node of l that has none an NFS address, on a free
// port of the node's own address, and rewrites DIR/local.json if it did
// (an older weft reading it ignores the addresses).
func withNFS(dir string, l Layout) (Layout, error) {
	var hosts []string
	var need []int
	for i, m := range l.Members {
		if m.NFSAddr == "" {
			host, _, err := net.SplitHostPort(m.GRPCAddr)
			if err != nil {
				return l, fmt.Errorf("%w: node %s: grpc_addr %q: %v", ErrLayout, m.Name, m.GRPCAddr, err)
			}
			hosts = append(hosts, host)
			need = append(need, i)
		}
	}
	if len(need) == 0 {
		return l, nil
	}
	ports, err := freePorts(hosts)
	if err != nil {
		return l, err
	}
	l.Members = append([]NodeLayout(nil), l.Members...)
	for k, i := range need {
		l.Members[i].NFSAddr = net.JoinHostPort(hosts[k], strconv.Itoa(ports[k]))
	}
	b, _ := json.MarshalIndent(l, "", "  ")
	if err := writeFileAtomic(layoutPath(dir), append(b, '\n')); err != nil {
		return l, err
	}
	return l, nil
}

// NFSURL is a libnfs URL of the NFS gateway at addr (host:port), MOUNT
// and NFS on the one port, NFSv3: what nfs-ls, nfs-cp and nfs-cat take
// (a file goes before the "?": nfs://HOST/dir/file?...). It turns off
// libnfs's traversal of nested exports (auto-traverse-mounts=0), with
// which libnfs 5's nfs-cp and nfs-cat fail to mount ("mount_cb: (null)").
func NFSURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("nfs://%s/?nfsport=%s&mountport=%s&version=3&auto-traverse-mounts=0", host, port, port)
}
