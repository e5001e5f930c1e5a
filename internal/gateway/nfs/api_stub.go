// Package nfs is weft's NFSv3 gateway over internal/vfs.
//
// This file is a placeholder until branch nfs-gw lands; deleted at merge.
// It implements the agreed API (/work/notes/nfs-api.md) over a plain TCP
// listener that accepts connections and closes them at once, so that the
// wiring (internal/server, weft nfs) builds and its tests run. It answers
// no NFS or MOUNT request; the gateway proper replaces this whole file.
package nfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path"
	"slices"
	"sync"
	"time"

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
}

// Validate reports what is wrong with e, naming the field and what to do.
func (e Export) Validate() error {
	if !path.IsAbs(e.Path) || path.Clean(e.Path) != e.Path {
		return fmt.Errorf("nfs: export path %q: want an absolute, clean path such as /projects", e.Path)
	}
	for _, c := range e.Clients {
		if net.ParseIP(c) == nil {
			if _, _, err := net.ParseCIDR(c); err != nil {
				return fmt.Errorf("nfs: export %s: client %q: want an IP address or a CIDR such as 10.0.0.0/24", e.Path, c)
			}
		}
	}
	return nil
}

// Config configures a Server.
type Config struct {
	FS      *vfs.FS // built with vfs.Config.CheckPermissions = true
	Log     *slog.Logger
	Exports []Export
}

// Server is the gateway (placeholder: it serves no request).
type Server struct {
	log *slog.Logger

	mu        sync.Mutex
	exports   []Export
	listeners map[net.Listener]bool
}

// New returns a server over cfg.
func New(cfg Config) (*Server, error) {
	if cfg.FS == nil {
		return nil, errors.New("nfs: Config.FS is nil")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &Server{log: cfg.Log, listeners: map[net.Listener]bool{}}
	if err := s.SetExports(cfg.Exports); err != nil {
		return nil, err
	}
	return s, nil
}

// Serve accepts connections on l and closes them until l is closed or ctx
// ends (placeholder for MOUNT and NFSv3); verifier is unused here.
func (s *Server) Serve(ctx context.Context, l net.Listener, verifier uint64) error {
	s.mu.Lock()
	s.listeners[l] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return nil
			}
			return err
		}
		c.Close()
	}
}

// SetExports replaces the exports for the requests that follow.
func (s *Server) SetExports(e []Export) error {
	for _, x := range e {
		if err := x.Validate(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.exports = slices.Clone(e)
	s.mu.Unlock()
	return nil
}

// Stats is a snapshot of the gateway's activity.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Ops: map[string]OpStat{}}
	for l := range s.listeners {
		st.Listeners = append(st.Listeners, l.Addr().String())
	}
	slices.Sort(st.Listeners)
	return st
}

// Close releases what the server holds open.
func (s *Server) Close(ctx context.Context) error { return nil }

// Stats is a snapshot of the gateway's activity, for `weft nfs status` and
// the node's Prometheus metrics.
type Stats struct {
	Listeners []string // addresses being served
	Clients   []ClientStat
	Ops       map[string]OpStat // by procedure name ("READ", "WRITE", "MOUNT", ...)
}

// ClientStat is one client's activity.
type ClientStat struct {
	Addr     string // client ip:port
	Listener string // the address it reached
	Ops      uint64
	LastSeen time.Time
}

// OpStat is one procedure's activity.
type OpStat struct {
	Count, Errors uint64
	Seconds       float64 // total time spent answering
}
