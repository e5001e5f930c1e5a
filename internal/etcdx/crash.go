package etcdx

import (
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// Crash stops the member as a kill of its process would, for clusters run
// inside one process (tests): it leaves raft at once, with no leadership
// transfer (if it led, the others elect a new leader after their election
// timeout), the connections it accepted from clients and peers end at once
// (their ends see the connection reset and turn to the other members), and
// nothing more is written: what it acknowledged is in its WAL, as after a
// kill. It then releases its listeners and data directory, so that a
// member of the same name may start again on them in this process.
// Crash and Close may be called in any order and more than once; only the
// first stops the member.
//
// The listeners close before the server stops, as a dead process's do:
// a request that reaches a stopped server can read its closed backend
// (the peers' version probe does, every few seconds), and etcd then
// panics inside its read transaction with a lock held (etcd-io/etcd#22189),
// which leaves the stopped member's handlers blocked for good.
//
// Crash panics, with every goroutine's stack on stderr, if the member has
// not stopped within crashDeadline: a deadlock inside etcd, which would
// otherwise hang the test until its timeout with nothing to show where.
func (m *Member) Crash() {
	if m == nil || m.etcd == nil {
		return
	}
	m.stopOnce.Do(func() {
		watchdog := time.AfterFunc(crashDeadline, func() {
			buf := make([]byte, 64<<20)
			os.Stderr.Write(buf[:runtime.Stack(buf, true)])
			panic(fmt.Sprintf("etcdx: member %s did not stop within %s of Crash (goroutines above)", m.cfg.Name, crashDeadline))
		})
		defer watchdog.Stop()
		for _, p := range m.etcd.Peers {
			_ = p.Listener.Close()
		}
		for _, l := range m.etcd.Clients {
			_ = l.Close()
		}
		sever(m.cfg.ClientURL, m.cfg.PeerURL)
		m.etcd.Server.HardStop()
		sever(m.cfg.ClientURL, m.cfg.PeerURL) // any accepted meanwhile
		m.etcd.Close()
	})
}

// crashDeadline bounds Crash (see there).
const crashDeadline = 2 * time.Minute

// sever shuts down every connection this process accepted on the ports of
// urls (the sockets whose local port is one of them and that do not
// listen), as the kernel does when a process dies. Linux only: it reads
// the process's descriptors from /proc/self/fd.
func sever(urls ...string) {
	ports := map[int]bool{}
	for _, u := range urls {
		if pu, err := url.Parse(u); err == nil {
			if p, err := strconv.Atoi(pu.Port()); err == nil {
				ports[p] = true
			}
		}
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		sa, err := syscall.Getsockname(fd)
		if err != nil {
			continue // not a socket
		}
		port := 0
		switch a := sa.(type) {
		case *syscall.SockaddrInet4:
			port = a.Port
		case *syscall.SockaddrInet6:
			port = a.Port
		}
		if !ports[port] {
			continue
		}
		if listening, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN); err != nil || listening != 0 {
			continue // the listener: Close closes it
		}
		_ = syscall.Shutdown(fd, syscall.SHUT_RDWR)
	}
}
