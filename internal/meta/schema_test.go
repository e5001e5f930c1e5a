package meta

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestInodeRoundTrip(t *testing.T) {
	in := &inode{
		lin: 42, typ: TypeFile, mode: 0o4755, uid: 1000, gid: 1 << 31, size: 1 << 40, nlink: 2, rdev: 7,
		atime: -5, mtime: 1, ctime: time.Now().UnixNano(), btime: 3, gen: 9, pool: "fast", prot: EC(8, 3),
		stripeSize: 4 << 20, allocated: 6 << 20,
		links:  []Link{{1, "a"}, {77, "b\xff"}},
		wdl:    []driveRef{{1, 2}, {1 << 31, 1}},
		xattrs: []string{"user.a", "user.b"},
		target: "",
	}
	out, err := decodeInode(42, encodeInode(in))
	if err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip: %v\n in %+v\nout %+v", err, in, out)
	}
}

func TestStripeRoundTrip(t *testing.T) {
	s := Stripe{Index: 3, Gen: 5, Protection: EC(4, 2), DataLen: 4 << 20, Units: []Unit{
		{Drive: 1, Block: BlockID{1}, Length: 1 << 20, CRC: 0xdeadbeef}, {}, {Drive: 3, Block: BlockID{3}, Length: 1, CRC: 1},
		{Drive: 4, Block: BlockID{4}}, {Drive: 5, Block: BlockID{5}}, {Drive: 6, Block: BlockID{6}},
	}}
	k := keyStripe(9, 3)
	out, err := decodeStripe(k, encodeStripe(&s))
	if err != nil || !reflect.DeepEqual(s, out) {
		t.Fatalf("round trip: %v\n in %+v\nout %+v", err, s, out)
	}
	if s.Missing() != 1 {
		t.Fatalf("missing %d", s.Missing())
	}
}

func TestOtherRecordsRoundTrip(t *testing.T) {
	q := DeleteEntry{Drive: 7, Block: BlockID{9, 9}, LIN: 5, Stripe: 2, Length: 100, Enqueued: time.Unix(0, 12345)}
	if got, err := decodeDelete(keyDelete(q.Drive, q.Block), encodeDelete(q)); err != nil || got != q {
		t.Fatalf("delete entry: %+v %v", got, err)
	}
	u := usageShard{"a": {1, -2, 3}, "b": {Inodes: -1}}
	if got, err := decodeUsage(keyUsage(3), encodeUsage(u)); err != nil || !reflect.DeepEqual(got, u) {
		t.Fatalf("usage: %+v %v", got, err)
	}
	if typ, lin, err := decodeEntry(nil, encodeEntry(TypeSymlink, 1<<60)); err != nil || typ != TypeSymlink || lin != 1<<60 {
		t.Fatalf("entry: %v %v %v", typ, lin, err)
	}
	if tm, err := decodeDirTimes(1, encodeDirTimes(dirTimes{-1, 2})); err != nil || tm != (dirTimes{-1, 2}) {
		t.Fatalf("times: %+v %v", tm, err)
	}
	if o, err := decodeOrphan(keyOrphan(8), encodeOrphan(99)); err != nil || o.LIN != 8 || o.Since.UnixNano() != 99 {
		t.Fatalf("orphan: %+v %v", o, err)
	}
}

// TestCorruptRecords: every truncation of a valid record, and some garbage,
// decode to ErrCorrupt (or ErrNewerFormat), never a panic or a silent success.
func TestCorruptRecords(t *testing.T) {
	in := &inode{typ: TypeDir, mode: 0o755, pool: "p", links: []Link{{1, "x"}}, xattrs: []string{"user.a"}, wdl: []driveRef{{1, 1}}}
	s := Stripe{Gen: 1, Protection: Mirror(2), DataLen: 1, Units: []Unit{{Drive: 1, Block: BlockID{1}}, {}}}
	records := map[string]func(b []byte) error{
		"inode":  func(b []byte) error { _, err := decodeInode(1, b); return err },
		"stripe": func(b []byte) error { _, err := decodeStripe(keyStripe(1, 0), b); return err },
		"entry":  func(b []byte) error { _, _, err := decodeEntry(nil, b); return err },
		"format": func(b []byte) error { _, err := decodeFormat(b); return err },
		"times":  func(b []byte) error { _, err := decodeDirTimes(1, b); return err },
	}
	valid := map[string][]byte{
		"inode":  encodeInode(in),
		"stripe": encodeStripe(&s),
		"entry":  encodeEntry(TypeFile, 3),
		"format": encodeFormat(formatRecord{version: 1, created: 5}),
		"times":  encodeDirTimes(dirTimes{1, 2}),
	}
	for name, dec := range records {
		b := valid[name]
		if err := dec(b); err != nil {
			t.Fatalf("%s: valid record: %v", name, err)
		}
		for n := 0; n < len(b); n++ {
			err := dec(b[:n])
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s truncated to %d bytes: %v, want ErrCorrupt", name, n, err)
			}
		}
		for _, g := range [][]byte{{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} { // an overlong varint
			if err := dec(g); err == nil {
				t.Fatalf("%s: garbage %x decoded", name, g)
			}
		}
		if err := dec(append([]byte{2}, b[1:]...)); !errors.Is(err, ErrNewerFormat) {
			t.Fatalf("%s with a newer record version: %v", name, err)
		}
	}
	// A huge count must not allocate.
	e := newEnc()
	e.typ(TypeFile)
	for i := 0; i < 11; i++ {
		e.u(0)
	}
	e.s("")
	e.prot(Protection{})
	e.u(0)
	e.u(0)
	e.u(1 << 40) // links
	if _, err := decodeInode(1, e.bytesOut()); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("huge link count: %v", err)
	}
}

func TestKeysOrderByLIN(t *testing.T) {
	for _, pair := range [][2][]byte{
		{keyInode(1), keyInode(2)},
		{keyInode(255), keyInode(256)},
		{keyDirTimes(255), keyInode(256)},
		{keyInode(1 << 40), keyInode(1<<40 + 1)},
		{keyStripe(3, 255), keyStripe(3, 256)},
		{keyStripe(3, 1<<63), keyStripe(4, 0)},
		{keyEntry(5, "a"), keyEntry(5, "b")},
		{keyEntry(5, "zzz"), keyEntry(6, "")},
		{keyDelete(1, BlockID{0xff}), keyDelete(2, BlockID{})},
	} {
		if bytes.Compare(pair[0], pair[1]) >= 0 {
			t.Errorf("%x does not sort before %x", pair[0], pair[1])
		}
	}
}

func TestParseProtection(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Protection
		err  bool
	}{
		{"mirror:3", Mirror(3), false},
		{"mirror:1", Mirror(1), false},
		{"ec:4+2", EC(4, 2), false},
		{"ec:16+4", EC(16, 4), false},
		{"", Protection{}, false},
		{"inherit", Protection{}, false},
		{"mirror:0", Protection{}, true},
		{"ec:0+2", Protection{}, true},
		{"ec:60+10", Protection{}, true},
		{"ec:4", Protection{}, true},
		{"raid5", Protection{}, true},
		{"mirror:x", Protection{}, true},
	} {
		got, err := ParseProtection(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseProtection(%q) = %v, %v", tc.in, got, err)
		}
		if err == nil && got.String() != tc.in && tc.in != "" {
			t.Errorf("%q prints as %q", tc.in, got.String())
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseProtection(%q) error %v is not ErrInvalid", tc.in, err)
		}
	}
}

func TestValidNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		want error
	}{
		{"a", nil},
		{strings.Repeat("a", 255), nil},
		{"with space\t\xff", nil},
		{"", ErrInvalid},
		{".", ErrInvalid},
		{"..", ErrInvalid},
		{"...", nil},
		{"a/b", ErrInvalid},
		{"/", ErrInvalid},
		{"a\x00", ErrInvalid},
		{strings.Repeat("a", 256), ErrNameTooLong},
	} {
		if err := ValidName(tc.name); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("ValidName(%q) = %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"default", true}, {"ssd-tier_1.a", true}, {"", false}, {"a b", false}, {"a/b", false}, {strings.Repeat("p", 65), false},
	} {
		if err := ValidPoolName(tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidPoolName(%q) = %v", tc.name, err)
		}
	}
	id := BlockID{0xab, 1}
	if got, err := ParseBlockID(id.String()); err != nil || got != id {
		t.Errorf("ParseBlockID(%s) = %v, %v", id, got, err)
	}
	for _, bad := range []string{"", "xyz", strings.Repeat("g", 32), strings.Repeat("a", 31)} {
		if _, err := ParseBlockID(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseBlockID(%q) = %v", bad, err)
		}
	}
}
