package nfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/weftfs/weft/internal/vfs"
)

// Config configures a Server.
type Config struct {
	FS      *vfs.FS // built with vfs.Config.CheckPermissions = true
	Log     *slog.Logger
	Exports []Export
	// IdleClose is how long an open file no request uses stays open
	// (its buffered writes with it); 0 means 30 s.
	IdleClose time.Duration
	// DRC, if set, keeps the replies of non-idempotent requests where
	// every gateway finds them (drc_store.go): a request resent to
	// another gateway after a failover gets the reply of its first run.
	// Nil: the in-memory cache only.
	DRC DRCStore
	// MaxConns bounds the client connections one Serve holds open: a
	// connection beyond it is closed at once (the client retries, as
	// after a gateway restart) and counted in Stats.Refused. 0 means
	// DefaultMaxConns.
	MaxConns int
}

// DefaultMaxConns is Config.MaxConns's default: far more than the clients
// of one gateway node (a Linux client opens one connection per server),
// few enough that a client opening connections in a loop cannot make the
// gateway hold goroutines and buffers without bound.
const DefaultMaxConns = 1024

// Server answers MOUNT v3 and NFSv3 over vfs. It is safe for concurrent
// use; one Server may Serve several listeners.
type Server struct {
	fs       *vfs.FS
	log      *slog.Logger
	faults   vfs.FaultLog // NFS3ERR_IO answers
	maxConns int

	files   *files
	drc     *drc
	store   DRCStore
	cookies *cookies

	mu        sync.Mutex
	exports   []*export
	roots     map[vfs.LIN]*export // exports by their directory's LIN, once looked up
	listeners map[string]int
	mounts    map[mountEntry]bool
	clients   map[string]*ClientStat
	ops       map[string]*OpStat
	refused   uint64 // connections closed beyond MaxConns
	refusedAt time.Time
}

type mountEntry struct{ host, dir string }

// New returns a Server over cfg.FS with cfg.Exports. Errors: an invalid
// export (Export.Validate), two exports of one path, a nil FS.
func New(cfg Config) (*Server, error) {
	if cfg.FS == nil {
		return nil, errors.New("nfs: Config.FS is nil: give the server the file system to export")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MaxConns < 0 {
		return nil, fmt.Errorf("nfs: Config.MaxConns %d: give a positive bound, or 0 for %d", cfg.MaxConns, DefaultMaxConns)
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	s := &Server{fs: cfg.FS, log: cfg.Log, faults: vfs.FaultLog{Log: cfg.Log}, maxConns: cfg.MaxConns, files: newFiles(cfg.FS, cfg.Log, cfg.IdleClose), drc: newDRC(), store: cfg.DRC, cookies: newCookies(),
		listeners: map[string]int{}, mounts: map[mountEntry]bool{}, clients: map[string]*ClientStat{}, ops: map[string]*OpStat{}}
	if err := s.SetExports(cfg.Exports); err != nil {
		return nil, err
	}
	return s, nil
}

// SetExports replaces the exports for the requests that follow. Errors:
// an invalid export, two exports of one path; the exports in force stay.
func (s *Server) SetExports(es []Export) error {
	xs := make([]*export, 0, len(es))
	seen := map[string]bool{}
	for _, e := range es {
		x, err := newExport(e)
		if err != nil {
			return err
		}
		if seen[e.Path] {
			return fmt.Errorf("nfs: export path %s given twice: merge the two exports into one", e.Path)
		}
		seen[e.Path] = true
		xs = append(xs, x)
	}
	s.mu.Lock()
	s.exports = xs
	s.roots = map[vfs.LIN]*export{}
	s.mu.Unlock()
	return nil
}

// exportAt returns the export whose directory is LIN root, looking up
// the directories of exports not yet resolved; nil if none.
func (s *Server) exportAt(ctx context.Context, root vfs.LIN) *export {
	s.mu.Lock()
	if x := s.roots[root]; x != nil {
		s.mu.Unlock()
		return x
	}
	var todo []*export
	for _, x := range s.exports {
		if !s.resolved(x) {
			todo = append(todo, x)
		}
	}
	s.mu.Unlock()
	for _, x := range todo {
		if a, err := resolvePath(ctx, s.fs, x.Path); err == nil {
			s.setRoot(x, a.LIN)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.roots[root]
}

func (s *Server) resolved(x *export) bool {
	for _, y := range s.roots {
		if y == x {
			return true
		}
	}
	return false
}

// setRoot records that x's directory is lin (replacing what it was).
func (s *Server) setRoot(x *export, lin vfs.LIN) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !containsExport(s.exports, x) {
		return // replaced meanwhile
	}
	for l, y := range s.roots {
		if y == x {
			delete(s.roots, l)
		}
	}
	s.roots[lin] = x
}

func containsExport(xs []*export, x *export) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// Serve answers MOUNT and NFSv3 on l until l is closed or ctx ends, then
// closes every connection it accepted on l and returns. verifier is the
// write verifier of WRITE and COMMIT replies on l: the caller passes a new one
// whenever the gateway restarts or an address moves to it. It returns nil
// when l was closed or ctx ended, else the error accepting failed with.
//
// Each connection is read by one goroutine that lives as long as the
// connection and answers its requests in order; Serve waits for all of
// them before it returns.
func (s *Server) Serve(ctx context.Context, l net.Listener, verifier uint64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	addr := l.Addr().String()
	s.mu.Lock()
	s.listeners[addr]++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.listeners[addr]--; s.listeners[addr] <= 0 {
			delete(s.listeners, addr)
		}
		s.mu.Unlock()
	}()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()

	var (
		wg    sync.WaitGroup
		cmu   sync.Mutex
		conns = map[net.Conn]bool{}
		err   error
		delay time.Duration
	)
	for {
		c, aerr := l.Accept()
		if aerr != nil {
			var ne net.Error
			if errors.As(aerr, &ne) && ne.Timeout() && ctx.Err() == nil {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			if ctx.Err() == nil && !errors.Is(aerr, net.ErrClosed) {
				err = fmt.Errorf("nfs: accept on %s: %w", addr, aerr)
			}
			break
		}
		delay = 0
		cmu.Lock()
		full := len(conns) >= s.maxConns
		if !full {
			conns[c] = true
		}
		cmu.Unlock()
		if full {
			s.refuse(addr, c.RemoteAddr()) // counted before the client sees the close
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(ctx, c, addr, verifier)
			cmu.Lock()
			delete(conns, c)
			cmu.Unlock()
		}()
	}
	cancel()
	cmu.Lock()
	for c := range conns {
		c.Close()
	}
	cmu.Unlock()
	wg.Wait()
	return err
}

// Close flushes and releases what the server holds open (cached vfs
// handles); it returns the first flush error. Call it after every Serve
// returned.
func (s *Server) Close(ctx context.Context) error {
	return s.files.close(ctx)
}

// CloseIdle closes the open files no request used for Config.IdleClose,
// flushing their buffered writes. Requests do it too (at most once a second); a
// node calls it from a worker of its runner so that a gateway no client
// talks to any more releases its files. It does not block requests.
func (s *Server) CloseIdle(ctx context.Context) { s.files.sweepIf(ctx, true) }

// Stats is a snapshot of the gateway's activity, for `weft nfs status` and
// the node's Prometheus metrics.
type Stats struct {
	Listeners []string // addresses being served
	Clients   []ClientStat
	Ops       map[string]OpStat // by procedure name ("READ", "WRITE", "MOUNT", ...)
	// RefusedConns counts the connections closed at once because a
	// listener held Config.MaxConns.
	RefusedConns uint64
}

// ClientStat is one client connection's activity.
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

// Stats returns a snapshot of the server's activity: listeners and
// clients sorted by address, procedures counted since New.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Ops: map[string]OpStat{}, RefusedConns: s.refused}
	for l := range s.listeners {
		st.Listeners = append(st.Listeners, l)
	}
	for _, c := range s.clients {
		st.Clients = append(st.Clients, *c)
	}
	for n, o := range s.ops {
		st.Ops[n] = *o
	}
	sortStrings(st.Listeners)
	sortClients(st.Clients)
	return st
}

// refuse counts a connection from client closed at once on listener
// (MaxConns reached) and logs it, at most once a minute.
func (s *Server) refuse(listener string, client net.Addr) {
	s.mu.Lock()
	s.refused++
	n, quiet := s.refused, time.Since(s.refusedAt) < time.Minute
	if !quiet {
		s.refusedAt = time.Now()
	}
	s.mu.Unlock()
	if !quiet {
		s.log.Warn("nfs: connection refused: the listener holds its maximum of connections (Config.MaxConns)",
			"listener", listener, "client", client.String(), "max", s.maxConns, "refused_total", n)
	}
}

// clientsKept bounds the clients Stats remembers: the least recently seen
// are forgotten beyond it.
const clientsKept = 1024

func (s *Server) record(op string, client netip.AddrPort, listener string, failed bool, d time.Duration) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.ops[op]
	if o == nil {
		o = &OpStat{}
		s.ops[op] = o
	}
	o.Count++
	if failed {
		o.Errors++
	}
	o.Seconds += d.Seconds()
	k := client.String()
	c := s.clients[k]
	if c == nil {
		if len(s.clients) >= clientsKept {
			var oldest string
			var t time.Time
			for a, c := range s.clients {
				if oldest == "" || c.LastSeen.Before(t) {
					oldest, t = a, c.LastSeen
				}
			}
			delete(s.clients, oldest)
		}
		c = &ClientStat{Addr: k, Listener: listener}
		s.clients[k] = c
	}
	c.Ops++
	c.LastSeen = now
}
