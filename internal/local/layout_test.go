package local

import (
	"fmt"
	"net"
	"testing"
)

// The ports of a new layout are distinct, free, and outside the kernel's
// ephemeral range, where outgoing connections could take them before the
// nodes bind them.
func TestFreePortsBelowEphemeral(t *testing.T) {
	lo, hi := belowEphemeral()
	if hi == 0 {
		t.Skip("no /proc/sys/net/ipv4/ip_local_port_range here")
	}
	hosts := make([]string, 48)
	for i := range hosts {
		hosts[i] = "127.0.0.1"
	}
	ports, err := freePorts(hosts)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] || p < lo || p >= hi {
			t.Fatalf("port %d: repeated or outside [%d, %d): %v", p, lo, hi, ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
}

// TestWithNFS: the first run with --nfs gives every node an NFS address
// on its own host, distinct from the node's other ports, and records them
// in the layout; a later run keeps them.
func TestWithNFS(t *testing.T) {
	dir := t.TempDir()
	l, created, err := loadOrCreateLayout(dir, 2, 1, false, true)
	if err != nil || !created {
		t.Fatalf("create: %v", err)
	}
	l, err = withNFS(dir, l)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, m := range l.Members {
		host, _, err := net.SplitHostPort(m.NFSAddr)
		if err != nil || host != "127.0.0.1" || used[m.NFSAddr] || m.NFSAddr == m.GRPCAddr || m.NFSAddr == m.AdminAddr {
			t.Fatalf("node %s: NFS address %q (grpc %s, admin %s)", m.Name, m.NFSAddr, m.GRPCAddr, m.AdminAddr)
		}
		used[m.NFSAddr] = true
	}
	again, _, err := loadOrCreateLayout(dir, 0, 0, false, true)
	if err != nil {
		t.Fatal(err)
	}
	if again.Members[0].NFSAddr != l.Members[0].NFSAddr || again.Members[1].NFSAddr != l.Members[1].NFSAddr {
		t.Fatalf("the addresses were not recorded: %+v, then %+v", l.Members, again.Members)
	}
	kept, err := withNFS(dir, again)
	if err != nil || kept.Members[0].NFSAddr != l.Members[0].NFSAddr || kept.Members[1].NFSAddr != l.Members[1].NFSAddr {
		t.Fatalf("a second run changed them: %+v %v", kept.Members, err)
	}
	if u := NFSURL("127.0.0.1:20490"); u != "nfs://127.0.0.1/?nfsport=20490&mountport=20490&version=3&auto-traverse-mounts=0" {
		t.Errorf("URL %s", u)
	}
}
