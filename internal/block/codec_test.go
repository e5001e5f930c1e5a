package block

import (
	"bytes"
	"io"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/weftfs/weft/internal/rpc/pb"
)

// split cuts b into buffers of at most n bytes, as gRPC's frames would.
func split(b []byte, n int) mem.BufferSlice {
	var s mem.BufferSlice
	for len(b) > 0 {
		k := min(n, len(b))
		s = append(s, mem.SliceBuffer(bytes.Clone(b[:k])))
		b = b[k:]
	}
	return s
}

// TestWireCodecMarshal: the zero-copy encoding of a data message is the
// protobuf encoding, and other messages are the protobuf codec's.
func TestWireCodecMarshal(t *testing.T) {
	c := newWireCodec()
	for _, m := range []*pb.PutRequest{
		{Msg: &pb.PutRequest_Data{Data: payload(1<<20, 1)}},
		{Msg: &pb.PutRequest_Data{Data: payload(300, 2)}},
		{Msg: &pb.PutRequest_Data{}},
		{Msg: &pb.PutRequest_Start{Start: &pb.PutStart{DriveId: 3, Length: 9, Header: &pb.BlockHeader{Id: "x", SegmentCrcs: []uint32{1, 2}}}}},
		{},
	} {
		got, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		want, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Materialize(), want) {
			t.Errorf("Marshal(%.40v) differs from proto.Marshal", m)
		}
		if d := m.GetData(); len(d) > 0 && &got[len(got)-1].ReadOnlyData()[0] != &d[0] {
			t.Errorf("Marshal copied %d data bytes", len(d))
		}
	}
}

// TestPutFrameDecode decodes every shape of PutRequest encoding, split
// into frames of several sizes, into a putFrame.
func TestPutFrameDecode(t *testing.T) {
	data := payload(100_000, 3)
	start := &pb.PutStart{DriveId: 7, Length: 100_000, Header: &pb.BlockHeader{Id: "ab", Owner: 4}}
	enc := func(m *pb.PutRequest) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	dataMsg := enc(&pb.PutRequest{Msg: &pb.PutRequest_Data{Data: data}})
	// Unknown field 9 before the data: not the fast path's shape.
	unknown := protowire.AppendTag(nil, 9, protowire.VarintType)
	unknown = protowire.AppendVarint(unknown, 5)
	unknown = append(unknown, dataMsg...)
	// Start, then data: a oneof keeps the last.
	both := append(enc(&pb.PutRequest{Msg: &pb.PutRequest_Start{Start: start}}), dataMsg...)
	tests := []struct {
		name      string
		enc       []byte
		wantStart bool
		wantData  []byte
	}{
		{"data", dataMsg, false, data},
		{"small data", enc(&pb.PutRequest{Msg: &pb.PutRequest_Data{Data: data[:5]}}), false, data[:5]},
		{"empty data", enc(&pb.PutRequest{Msg: &pb.PutRequest_Data{}}), false, nil},
		{"start", enc(&pb.PutRequest{Msg: &pb.PutRequest_Start{Start: start}}), true, nil},
		{"nothing", nil, false, nil},
		{"unknown field first", unknown, false, data},
		{"start then data", both, false, data},
	}
	for _, tt := range tests {
		for _, frame := range []int{1, 3, 16 << 10, 1 << 20} {
			var f putFrame
			if err := newWireCodec().Unmarshal(split(tt.enc, frame), &f); err != nil {
				t.Fatalf("%s/%d: %v", tt.name, frame, err)
			}
			if (f.start != nil) != tt.wantStart || (tt.wantStart && !proto.Equal(f.start, start)) {
				t.Errorf("%s/%d: start %v", tt.name, frame, f.start)
			}
			var got []byte
			if f.data != nil {
				got, _ = io.ReadAll(f.data)
			}
			if !bytes.Equal(got, tt.wantData) {
				t.Errorf("%s/%d: %d data bytes, want %d", tt.name, frame, len(got), len(tt.wantData))
			}
			f.release()
		}
	}
	var f putFrame
	if err := newWireCodec().Unmarshal(split([]byte{0x12, 0x05, 1}, 1), &f); err == nil {
		t.Error("a truncated data message decoded without error")
	}
}

func TestBufferPool(t *testing.T) {
	var p bufferPool
	for _, n := range []int{0, 1, 256, 257, 16 << 10, 1<<20 + 5, 4 << 20, 4<<20 + 1} {
		b := p.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d) has length %d", n, len(*b))
		}
		p.Put(b)
		if b := p.Get(n); len(*b) != n {
			t.Fatalf("Get(%d) after Put has length %d", n, len(*b))
		}
	}
}
