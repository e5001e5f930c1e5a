package drive

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func testHeader(length int64) BlockHeader {
	h := BlockHeader{
		Version:     BlockFormatVersion,
		ID:          BlockID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		Owner:       0x1122334455667788,
		Stripe:      42,
		Unit:        3,
		Generation:  9,
		Length:      length,
		SegmentSize: SegmentSize,
		Created:     time.Unix(1700000000, 123456789),
	}
	for i := 0; i < segmentCount(length, SegmentSize); i++ {
		h.SegmentCRCs = append(h.SegmentCRCs, uint32(i*7919+1))
	}
	return h
}

func TestBlockHeaderRoundTrip(t *testing.T) {
	tests := []struct {
		length  int64
		wantLen int
	}{
		{0, 4096},
		{1, 4096},
		{SegmentSize, 4096},
		{SegmentSize + 1, 4096},
		{1 << 20, 4096},
		{1001 * SegmentSize, 4096},
		{1002 * SegmentSize, 8192},
		{MaxBlockLength, 20480},
	}
	for _, tt := range tests {
		h := testHeader(tt.length)
		b := h.encode()
		if len(b) != tt.wantLen || h.HeaderLength() != tt.wantLen {
			t.Errorf("length %d: header is %d bytes (HeaderLength %d), want %d", tt.length, len(b), h.HeaderLength(), tt.wantLen)
		}
		got, err := decodeBlockHeader(b)
		if err != nil {
			t.Fatalf("length %d: decode: %v", tt.length, err)
		}
		if len(h.SegmentCRCs) == 0 {
			h.SegmentCRCs = []uint32{}
		}
		if !reflect.DeepEqual(got, h) {
			t.Errorf("length %d: decoded %+v, want %+v", tt.length, got, h)
		}
	}
}

func TestBlockHeaderDecodeErrors(t *testing.T) {
	good := testHeader(3 * SegmentSize)
	tests := []struct {
		name    string
		mutate  func([]byte) []byte
		wantSub string
		newer   bool
	}{
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, "bad magic", false},
		{"short", func(b []byte) []byte { return b[:50] }, "shorter than the 88-byte fixed header", false},
		{"shorter than header", func(b []byte) []byte { return b[:1000] }, "shorter than its 4096-byte header", false},
		{"header length", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[12:], 4097); return b }, "bad header length", false},
		{"crc", func(b []byte) []byte { b[40] ^= 1; return b }, "header crc mismatch", false},
		{"segment crc", func(b []byte) []byte { b[headerFixedLen] ^= 1; return b }, "header crc mismatch", false},
		{"newer", func(b []byte) []byte { binary.LittleEndian.PutUint16(b[8:], BlockFormatVersion+1); return b }, "this weft reads up to", true},
		{"version 0", func(b []byte) []byte { binary.LittleEndian.PutUint16(b[8:], 0); return b }, "bad format version", false},
		{"count", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[76:], 2000); return b }, "does not fit", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeBlockHeader(tt.mutate(good.encode()))
			if err == nil || !strings.Contains(err.Error(), tt.wantSub) {
				t.Fatalf("decode error = %v, want it to contain %q", err, tt.wantSub)
			}
			var newer errNewerBlock
			if errors.As(err, &newer) != tt.newer {
				t.Fatalf("newer = %v, want %v", !tt.newer, tt.newer)
			}
		})
	}
}
