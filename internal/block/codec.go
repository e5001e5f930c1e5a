package block

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/weftfs/weft/internal/rpc/pb"
)

// wireCodec is the gRPC codec of the block service: gRPC's protobuf codec,
// except for the data messages of a Put, which carry almost every byte
// written and so skip its copies. The bytes on the wire are the same
// protobuf either way, so either side may use the plain codec.
//
//   - Marshal of a PutRequest holding data returns the tag, the length and
//     the caller's data slice itself, not a copy: the sender must not
//     modify the data until the call is over (Client.Put's contract).
//   - Unmarshal into a *putFrame (the server's Put handler) keeps a data
//     message in the buffers gRPC read it into, for the handler to copy
//     once, straight into the drive's write buffer; the plain codec would
//     gather them into one buffer and copy that again into the message.
//
// Every other message goes to the protobuf codec.
type wireCodec struct{ proto encoding.CodecV2 }

var _ encoding.CodecV2 = (*wireCodec)(nil)

func newWireCodec() *wireCodec {
	return &wireCodec{proto: encoding.GetCodecV2(protocodec.Name)}
}

// Name is the protobuf codec's: the content type does not change.
func (c *wireCodec) Name() string { return protocodec.Name }

// putDataField is the field number of PutRequest.data.
const putDataField = 2

func (c *wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*pb.PutRequest); ok {
		if d, ok := m.GetMsg().(*pb.PutRequest_Data); ok {
			prefix := protowire.AppendTag(make([]byte, 0, 2*binary.MaxVarintLen64), putDataField, protowire.BytesType)
			prefix = protowire.AppendVarint(prefix, uint64(len(d.Data)))
			return mem.BufferSlice{mem.SliceBuffer(prefix), mem.SliceBuffer(d.Data)}, nil
		}
	}
	return c.proto.Marshal(v)
}

func (c *wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if f, ok := v.(*putFrame); ok {
		return f.decode(data)
	}
	return c.proto.Unmarshal(data, v)
}

// putFrame is one message of a Put stream as the server's handler receives
// it: the start, or data (possibly none). Data is held in gRPC's receive
// buffers, which it references until it is read to the end or released.
type putFrame struct {
	start *pb.PutStart
	data  *mem.Reader
}

// decode fills f from one encoded PutRequest. The usual data message —
// exactly one data field — is kept in data's buffers; any other encoding
// (the start, unknown or repeated fields) is decoded by the protobuf
// package.
func (f *putFrame) decode(data mem.BufferSlice) error {
	f.release()
	r := data.Reader() // takes a reference to every buffer
	if tag, err := binary.ReadUvarint(r); err == nil && tag == uint64(protowire.EncodeTag(putDataField, protowire.BytesType)) {
		if n, err := binary.ReadUvarint(r); err == nil && n == uint64(r.Remaining()) {
			f.data = r
			return nil
		}
	}
	r.Close()
	var m pb.PutRequest
	if err := proto.Unmarshal(data.Materialize(), &m); err != nil {
		return fmt.Errorf("block: decoding a put message: %w", err)
	}
	f.start = m.GetStart()
	if d, ok := m.GetMsg().(*pb.PutRequest_Data); ok {
		f.data = mem.BufferSlice{mem.SliceBuffer(d.Data)}.Reader()
	}
	return nil
}

// release drops f's contents and its references to gRPC's buffers.
func (f *putFrame) release() {
	if f.data != nil {
		f.data.Close()
	}
	*f = putFrame{}
}
