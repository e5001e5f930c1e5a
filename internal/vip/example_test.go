package vip_test

import (
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/runner"
	"github.com/weftfs/weft/internal/vip"
)

// ExampleManager wires a Manager to a server that listens on each
// service address while it holds it: how a node's gateway uses it.
func ExampleManager() {
	var cli *clientv3.Client // the node's etcd client
	run := runner.New(runner.Config{})
	var mu sync.Mutex
	listeners := map[netip.Addr]net.Listener{}
	m, err := vip.New(vip.Config{
		Client: cli,
		Node:   "node1",
		Addrs:  []string{"10.0.0.50", "10.0.0.51"},
		Hook:   vip.MachineHook("eth0", 24), // ip addr add 10.0.0.50/24 dev eth0; arping -U
		// Give the addresses up when the service interface loses its link.
		LinkCheck: vip.LinkUp("eth0"),
		OnAcquire: func(a netip.Addr, epoch int64) error {
			// The write verifier changes with every holding.
			var verf [8]byte
			binary.BigEndian.PutUint64(verf[:], uint64(epoch))
			l, err := net.Listen("tcp", net.JoinHostPort(a.String(), strconv.Itoa(2049)))
			if err != nil {
				return err // the address is given up, and left to the others
			}
			mu.Lock()
			listeners[a] = l
			mu.Unlock()
			// ... serve l with verf ...
			return nil
		},
		OnRelease: func(a netip.Addr) {
			// Stop serving at once: close the listener and every
			// connection accepted on it.
			mu.Lock()
			if l := listeners[a]; l != nil {
				l.Close()
			}
			delete(listeners, a)
			mu.Unlock()
		},
		Runner: run,
		Log:    slog.Default(),
	})
	if err != nil {
		return // a bad configuration, named in err
	}
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		return
	}
	// ... at shutdown, before the runner stops: release the addresses so
	// that the others take them over at once.
	_ = m.Close(ctx)
	_ = run.Stop(ctx)
}
