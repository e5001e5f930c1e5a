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
