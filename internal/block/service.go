package block

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/qos"
	"github.com/weftfs/weft/internal/rpc/pb"
)

// Sentinel errors of the service, in addition to the drive package's.
var (
	// ErrUnknownDrive: the node serves no drive with the requested id.
	ErrUnknownDrive = errors.New("block: unknown drive")
	// ErrDuplicateDrive: a drive with this id is already served.
	ErrDuplicateDrive = errors.New("block: duplicate drive")
)

// Sizes of the wire protocol.
const (
	// ChunkSize is the most data bytes a Put or Get message carries.
	ChunkSize = 1 << 20
	// MaxMessageSize is the receive and send limit on both sides; it leaves
	// room above ChunkSize for headers and for larger chunks from future
	// clients.
	MaxMessageSize = 16 << 20
	// streamWindow and connWindow are the HTTP/2 flow-control windows; the
	// defaults (64 KiB, growing by BDP estimation) stall MiB-sized streams
	// on fast links.
	streamWindow = 8 << 20
	connWindow   = 32 << 20
)

// ServerOptions returns the gRPC server options the block service needs:
// the interceptors that read each call's QoS tag (TagOf), its codec (wireCodec: the Put handler requires it), message size limits
// matching the Client, flow-control windows for large transfers, buffers
// that are not cleared (bufferPool), and a keepalive policy that admits the
// Client's pings. The server wiring passes them to grpc.NewServer (with
// its own additions); the codec serves every other service of that server
// as gRPC's default protobuf codec would.
func ServerOptions() []grpc.ServerOption {
	return append(tagServerOptions(),
		grpc.ForceServerCodecV2(newWireCodec()),
		experimental.BufferPool(&bufferPool{}),
		grpc.MaxRecvMsgSize(MaxMessageSize),
		grpc.MaxSendMsgSize(MaxMessageSize),
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             10 * time.Second,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(keepalive.ServerParameters{
			Time:    time.Minute,
			Timeout: 20 * time.Second,
		}),
	)
}

// Service is the block service of one node: the set of drives it serves,
// addressed by drive id. Drives can be added and removed while serving.
//
// Locking: a RWMutex guards the drive map only; block I/O runs without it.
// Service does not own the drives: Remove does not close them.
type Service struct {
	log    *slog.Logger
	mu     sync.RWMutex
	drives map[drive.ID]*drive.Drive
	// pools is the pool of each drive, for QoS (SetPools); under mu.
	pools map[drive.ID]string
	// secure: calls must carry an authorized identity (RequireIdentity).
	secure bool
	// gate is the node's QoS (SetGate); nil admits every I/O at once.
	gate atomic.Pointer[qos.Gate]
}

// NewService returns a Service serving drives. logger may be nil. It fails
// with ErrDuplicateDrive if two drives share an id.
func NewService(logger *slog.Logger, drives ...*drive.Drive) (*Service, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{log: logger, drives: make(map[drive.ID]*drive.Drive)}
	for _, d := range drives {
		if err := s.Add(d); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Add starts serving d. It fails with ErrDuplicateDrive if a drive with
// d's id is served already.
func (s *Service) Add(d *drive.Drive) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.drives[d.ID()]; ok {
		return fmt.Errorf("%w: %v is served from %s already, cannot add %s", ErrDuplicateDrive, d.ID(), old.Path(), d.Path())
	}
	s.drives[d.ID()] = d
	return nil
}

// Remove stops serving drive id and returns it (nil if it was not served).
// Requests in progress on it complete.
func (s *Service) Remove(id drive.ID) *drive.Drive {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.drives[id]
	delete(s.drives, id)
	return d
}

// Drive returns the served drive id, or ErrUnknownDrive.
func (s *Service) Drive(id drive.ID) (*drive.Drive, error) {
	s.mu.RLock()
	d, ok := s.drives[id]
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: this node serves no drive %v", ErrUnknownDrive, id)
	}
	return d, nil
}

// Drives returns the served drives ordered by id.
func (s *Service) Drives() []*drive.Drive {
	s.mu.RLock()
	out := make([]*drive.Drive, 0, len(s.drives))
	for _, d := range s.drives {
		out = append(out, d)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *drive.Drive) int { return int(int64(a.ID()) - int64(b.ID())) })
	return out
}

// RequireIdentity makes the handlers that change a drive from a file on
// the node's machine (Adopt) refuse a caller without an authorized
// identity (see SecureServerOptions, which every secure server uses). Call
// it before Register.
func (s *Service) RequireIdentity() { s.secure = true }

// Register registers the block service on g, which must have been built
// with ServerOptions (the Put handler needs its codec).
func (s *Service) Register(g *grpc.Server) {
	pb.RegisterBlockServiceServer(g, &server{s: s})
}
