package block

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/qos"
	"github.com/weftfs/weft/internal/rpc/pb"
)

// Client talks to the block service of one node. Its methods return the
// drive package's errors (drive.ErrNotFound, *drive.CorruptError, ...) and
// ErrUnknownDrive as if the drives were local, so errors.Is and errors.As
// work across the wire; transport errors (node down) are gRPC status errors.
// A Client is safe for concurrent use.
type Client struct {
	conn  *grpc.ClientConn
	rpc   pb.BlockServiceClient
	codec *wireCodec // sends a Put's data without copying it
}

// ReconnectBackoff is the longest a client waits before it tries again to
// connect to a node it could not reach. gRPC's default back-off grows to
// 120 s: a mount whose connection to a node had failed for a minute (the
// node restarting, the control plane down meanwhile so that the mount
// still thought it up) failed its writes with the last "connection
// refused" for up to a minute more after the node was back. A refused or
// timed-out connection attempt per node per second costs next to nothing.
const ReconnectBackoff = time.Second

// MinConnectTimeout bounds one connection attempt. gRPC's default (20 s)
// let a call made while a node was cut off wait 20 s for a connection the
// node could not answer; with the back-off above, a node that returns is
// connected within about a second either way.
const MinConnectTimeout = 2 * time.Second

// DeadPeerTimeout is how long a connection may have data sent and not
// acknowledged, or a keepalive ping unanswered, before it is given up and
// its calls fail (gRPC sets the socket's TCP_USER_TIMEOUT to the
// keepalive timeout). Acknowledgements come from the peer's kernel, so a
// busy node still sends them; only a node that is gone or cut off does
// not. At 10 s, as before, every write through a mount stalled 10 s when a
// node was cut off (a unit put to it waited for the kernel to give up the
// connection, then was placed on another drive), and reads 7–8 s.
const DeadPeerTimeout = 3 * time.Second

// DialOption changes how Dial connects.
type DialOption func(*dialConfig)

type dialConfig struct {
	tls   *tls.Config
	tag   qos.Tag
	tagOf func(context.Context) qos.Tag
}

// WithTLS connects over TLS with cfg (a pki.Source's ClientTLS: mutual
// TLS, the server verified against the cluster's CAs); without it Dial
// connects in plain text, to a node run with --insecure.
func WithTLS(cfg *tls.Config) DialOption {
	return func(c *dialConfig) { c.tls = cfg }
}

// DialOptions returns the options Dial uses: interceptors that send each
// call's QoS tag (WithTag, WithDefaultTag), transport security as opts
// say (plain text without WithTLS), message size limits matching
// ServerOptions, large flow-control windows, buffers that are not cleared
// (bufferPool), keepalive pings every 30 s and DeadPeerTimeout so that a
// dead or cut-off node is noticed, and a reconnect back-off of at most
// ReconnectBackoff so that a node that returns is used again at once.
func DialOptions(opts ...DialOption) []grpc.DialOption {
	var dc dialConfig
	for _, o := range opts {
		o(&dc)
	}
	creds := insecure.NewCredentials()
	if dc.tls != nil {
		creds = credentials.NewTLS(dc.tls)
	}
	return append(tagInterceptors(dc.tag, dc.tagOf),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: ReconnectBackoff},
			MinConnectTimeout: MinConnectTimeout,
		}),
		experimental.WithBufferPool(&bufferPool{}),
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)),
		grpc.WithInitialWindowSize(streamWindow),
		grpc.WithInitialConnWindowSize(connWindow),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time:                30 * time.Second,
			Timeout:             DeadPeerTimeout,
			PermitWithoutStream: true,
		}),
	)
}

// Dial returns a Client of the block service at addr ("host:port"). It does
// not wait for a connection: the first call connects. Close releases it.
func Dial(addr string, opts ...DialOption) (*Client, error) {
	conn, err := grpc.NewClient(addr, DialOptions(opts...)...)
	if err != nil {
		return nil, fmt.Errorf("block: dial %s: %w", addr, err)
	}
	return &Client{conn: conn, rpc: pb.NewBlockServiceClient(conn), codec: newWireCodec()}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Put stores data as block hdr.ID on drive d (see drive.Drive.Put for the
// contract: durable on return, idempotent for identical content,
// drive.ErrExists otherwise). data is sent in ChunkSize messages sliced from
// it, without copying; the caller must not modify data until Put returns.
// (After a failed Put gRPC may still read data for a moment while it
// resets the stream: bytes changed meanwhile reach at most a block whose
// put was not acknowledged, which the caller does not commit.)
// hdr may carry data's segment CRCs (drive.AppendSegmentCRCs), which the
// node then stores instead of computing them (see drive.Drive.Put).
func (c *Client) Put(ctx context.Context, d drive.ID, hdr drive.BlockHeader, data []byte) error {
	return c.put(ctx, d, hdr, int64(len(data)), func(off, n int64) ([]byte, error) {
		return data[off : off+n], nil
	})
}

// Adopt asks the node to take in block hdr.ID of length bytes, which this
// machine staged in drive d's directory under the name staged (see
// drive.Drive.Stage and drive.Drive.Adopt). The node removes the staged
// file whatever the outcome; on a transport error it may remain, and the
// caller removes it (drive.Drive.Unstage).
func (c *Client) Adopt(ctx context.Context, d drive.ID, hdr drive.BlockHeader, length int64, staged string) error {
	return c.adopt(ctx, &pb.AdoptRequest{DriveId: uint32(d), Header: headerToPB(hdr), Length: length, StagedName: staged})
}

// AdoptUnsynced is Adopt of a file staged unsynced
// (drive.Drive.StageUnsynced): the node links it without syncing its
// directory, and this machine syncs the drive's file system itself
// before anything names the block.
func (c *Client) AdoptUnsynced(ctx context.Context, d drive.ID, hdr drive.BlockHeader, length int64, staged string) error {
	return c.adopt(ctx, &pb.AdoptRequest{DriveId: uint32(d), Header: headerToPB(hdr), Length: length, StagedName: staged, Unsynced: true})
}

func (c *Client) adopt(ctx context.Context, req *pb.AdoptRequest) error {
	_, err := c.rpc.Adopt(ctx, req)
	return fromStatus(err)
}

// PutStream is Put for data read from r, which must yield length bytes
// (drive.ErrInvalid otherwise). It reads ChunkSize at a time into fresh
// buffers (gRPC may hold a sent message). If r fails or ends early, the
// remote Put is canceled and nothing is stored.
func (c *Client) PutStream(ctx context.Context, d drive.ID, hdr drive.BlockHeader, r io.Reader, length int64) error {
	return c.put(ctx, d, hdr, length, func(off, n int64) ([]byte, error) {
		chunk := make([]byte, n)
		if _, err := io.ReadFull(r, chunk); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("%w: put block %v: data ended before the announced %d bytes", drive.ErrInvalid, hdr.ID, length)
			}
			return nil, fmt.Errorf("block: put block %v: reading data: %w", hdr.ID, err)
		}
		return chunk, nil
	})
}

// put runs a Put stream of length bytes, getting the n bytes at off from
// chunk.
func (c *Client) put(ctx context.Context, d drive.ID, hdr drive.BlockHeader, length int64, chunk func(off, n int64) ([]byte, error)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // on an early return, cancels the remote Put
	stream, err := c.rpc.Put(ctx, grpc.ForceCodecV2(c.codec))
	if err != nil {
		return fromStatus(err)
	}
	start := &pb.PutRequest{Msg: &pb.PutRequest_Start{Start: &pb.PutStart{
		DriveId: uint32(d), Header: headerToPB(hdr), Length: length,
	}}}
	if err := stream.Send(start); err != nil {
		return putSendErr(stream, err)
	}
	for sent := int64(0); sent < length; {
		n := min(length-sent, ChunkSize)
		b, err := chunk(sent, n)
		if err != nil {
			return err
		}
		if err := stream.Send(&pb.PutRequest{Msg: &pb.PutRequest_Data{Data: b}}); err != nil {
			return putSendErr(stream, err)
		}
		sent += n
	}
	_, err = stream.CloseAndRecv()
	return fromStatus(err)
}

// putSendErr returns the real error after a failed Send: io.EOF means the
// server ended the call, and its status comes from CloseAndRecv.
func putSendErr(stream pb.BlockService_PutClient, err error) error {
	if errors.Is(err, io.EOF) {
		_, err = stream.CloseAndRecv()
	}
	return fromStatus(err)
}

// Get returns length bytes (-1: to the end) of block id on drive d from
// offset off, and the block's header. The server verifies the checksums of
// the range first: a mismatch is a *drive.CorruptError naming drive, block
// and segment.
func (c *Client) Get(ctx context.Context, d drive.ID, id drive.BlockID, off, length int64) ([]byte, drive.BlockHeader, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.rpc.Get(ctx, &pb.GetRequest{DriveId: uint32(d), BlockId: id.String(), Offset: off, Length: length})
	if err != nil {
		return nil, drive.BlockHeader{}, fromStatus(err)
	}
	var (
		data []byte
		hdr  drive.BlockHeader
		got  bool
		want int64
	)
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, drive.BlockHeader{}, fromStatus(err)
		}
		if !got {
			if hdr, err = headerFromPB(m.GetHeader()); err != nil {
				return nil, drive.BlockHeader{}, fmt.Errorf("block: get block %v: bad header from server: %w", id, err)
			}
			want = m.GetRangeLength()
			if want < 0 || want > drive.MaxBlockLength {
				return nil, drive.BlockHeader{}, fmt.Errorf("block: get block %v: server announced %d bytes", id, want)
			}
			got = true
			if int64(len(m.GetData())) == want { // the whole range in one chunk: no copy
				data = m.GetData()
				continue
			}
			data = make([]byte, 0, want)
		}
		data = append(data, m.GetData()...)
	}
	if !got {
		return nil, drive.BlockHeader{}, fmt.Errorf("block: get block %v: server sent no data", id)
	}
	if int64(len(data)) != want {
		return nil, drive.BlockHeader{}, fmt.Errorf("block: get block %v: server sent %d of %d bytes", id, len(data), want)
	}
	return data, hdr, nil
}

// Delete removes block id from drive d; drive.ErrNotFound if it is missing.
func (c *Client) Delete(ctx context.Context, d drive.ID, id drive.BlockID) error {
	_, err := c.rpc.Delete(ctx, &pb.DeleteRequest{DriveId: uint32(d), BlockId: id.String()})
	return fromStatus(err)
}

// Stat returns block id's header, file size and modification time.
func (c *Client) Stat(ctx context.Context, d drive.ID, id drive.BlockID) (drive.BlockHeader, int64, time.Time, error) {
	resp, err := c.rpc.Stat(ctx, &pb.StatRequest{DriveId: uint32(d), BlockId: id.String()})
	if err != nil {
		return drive.BlockHeader{}, 0, time.Time{}, fromStatus(err)
	}
	hdr, err := headerFromPB(resp.GetHeader())
	if err != nil {
		return drive.BlockHeader{}, 0, time.Time{}, fmt.Errorf("block: stat block %v: bad header from server: %w", id, err)
	}
	return hdr, resp.GetSize(), time.Unix(0, resp.GetMtimeUnixNanos()), nil
}

// List returns a page of drive d's blocks after cursor after (see
// drive.Drive.List) and the next cursor, "" after the last page.
func (c *Client) List(ctx context.Context, d drive.ID, after string, limit int) ([]drive.BlockInfo, string, error) {
	resp, err := c.rpc.List(ctx, &pb.ListRequest{DriveId: uint32(d), After: after, Limit: int32(min(limit, drive.MaxListLimit))})
	if err != nil {
		return nil, "", fromStatus(err)
	}
	out := make([]drive.BlockInfo, 0, len(resp.GetBlocks()))
	for _, b := range resp.GetBlocks() {
		id, err := drive.ParseBlockID(b.GetId())
		if err != nil {
			return nil, "", fmt.Errorf("block: list drive %v: bad id from server: %w", d, err)
		}
		out = append(out, drive.BlockInfo{ID: id, Size: b.GetSize(), ModTime: time.Unix(0, b.GetMtimeUnixNanos())})
	}
	return out, resp.GetNext(), nil
}

// Verify has the node read block id whole and check every checksum.
func (c *Client) Verify(ctx context.Context, d drive.ID, id drive.BlockID) error {
	_, err := c.rpc.Verify(ctx, &pb.VerifyRequest{DriveId: uint32(d), BlockId: id.String()})
	return fromStatus(err)
}

// Usage returns the usage of every drive of the node, ordered by drive id.
func (c *Client) Usage(ctx context.Context) ([]DriveUsage, error) {
	resp, err := c.rpc.DriveUsage(ctx, &pb.DriveUsageRequest{})
	if err != nil {
		return nil, fromStatus(err)
	}
	out := make([]DriveUsage, 0, len(resp.GetDrives()))
	for _, u := range resp.GetDrives() {
		out = append(out, DriveUsage{
			Drive: drive.ID(u.GetDriveId()), Node: u.GetNode(), Class: drive.Class(u.GetClass()), Path: u.GetPath(),
			Usage: drive.Usage{TotalBytes: u.GetTotalBytes(), FreeBytes: u.GetFreeBytes(), UsedBytes: u.GetUsedBytes(), Blocks: u.GetBlocks()},
			Err:   u.GetError(),
		})
	}
	return out, nil
}

// Counters returns I/O counter snapshots of every drive of the node,
// ordered by drive id; compare two with drive.Counters.Since.
func (c *Client) Counters(ctx context.Context) ([]drive.Counters, error) {
	resp, err := c.rpc.DriveCounters(ctx, &pb.DriveCountersRequest{})
	if err != nil {
		return nil, fromStatus(err)
	}
	out := make([]drive.Counters, 0, len(resp.GetDrives()))
	for _, dc := range resp.GetDrives() {
		out = append(out, countersFromPB(dc))
	}
	return out, nil
}
