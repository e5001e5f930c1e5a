package meta

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	"github.com/weftfs/weft/internal/kv"
)

func inlineStripe(data string) Stripe {
	return Stripe{Index: 0, DataLen: uint64(len(data)), Inline: []byte(data)}
}

func TestInlineStripeRoundTrip(t *testing.T) {
	s := Stripe{Index: 0, Gen: 3, DataLen: 5, Inline: []byte("hello")}
	k := keyStripe(9, 0)
	out, err := decodeStripe(k, encodeStripe(&s))
	if err != nil || !reflect.DeepEqual(s, out) || !out.IsInline() {
		t.Fatalf("round trip: %v\n in %+v\nout %+v", err, s, out)
	}
	// A stripe with units encodes as format 2 did: nothing appended.
	u := stripe(0, 1, 1)
	if got := must(decodeStripe(k, encodeStripe(&u))); got.IsInline() {
		t.Fatalf("a stripe with units decodes as inline: %+v", got)
	}
	// Inline bytes that disagree with the map are corrupt.
	for name, bad := range map[string]Stripe{
		"length":     {DataLen: 4, Inline: []byte("hello")},
		"units":      {DataLen: 5, Inline: []byte("hello"), Protection: Mirror(2), Units: stripe(0, 1, 1).Units},
		"protection": {DataLen: 5, Inline: []byte("hello"), Protection: Mirror(1)},
		"empty":      {Inline: []byte{}},
	} {
		if _, err := decodeStripe(k, encodeStripe(&bad)); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

func TestInlineStripes(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) { testInlineStripes(t, newMeta(t, b.newStore(t))) })
	}
}

func testInlineStripes(t *testing.T, m *Meta) {
	f := must(m.Create(bg, RootLIN, "f", NewInode{}))
	co := CommitOptions{StripeSize: 1 << 20, Size: 5}

	// Malformed inline stripes are refused before anything is read.
	for name, s := range map[string]Stripe{
		"not stripe 0": {Index: 1, DataLen: 1, Inline: []byte("x")},
		"length":       {DataLen: 2, Inline: []byte("x")},
		"empty":        {Inline: []byte{}},
		"too large":    {DataLen: MaxInline + 1, Inline: make([]byte, MaxInline+1)},
		"units":        {DataLen: 1, Inline: []byte("x"), Protection: Mirror(2), Units: stripe(0, 1, 1).Units},
	} {
		_, err := m.CommitStripe(bg, f.LIN, s, 0, co)
		wantErr(t, err, ErrInvalid)
		t.Logf("%s: %v", name, err)
	}
	_, err := m.CommitStripes(bg, f.LIN, []StripeUpdate{{Stripe: inlineStripe("x"), Drop: true}}, co)
	wantErr(t, err, ErrInvalid)

	// A new file's data committed inline: read back by both reads, no
	// block allocated, nothing on a drive.
	got := must(m.CommitStripe(bg, f.LIN, inlineStripe("hello"), 0, co))
	if got.Gen != 1 || !bytes.Equal(got.Inline, []byte("hello")) {
		t.Fatalf("committed %+v", got)
	}
	for name, ss := range map[string][]Stripe{
		"GetStripes":   must(m.GetStripes(bg, f.LIN, 0, 0)),
		"GetStripesAt": must(m.GetStripesAt(bg, f.LIN, 0, 1)),
	} {
		if len(ss) != 1 || !ss[0].IsInline() || string(ss[0].Inline) != "hello" || ss[0].Gen != 1 {
			t.Fatalf("%s: %+v", name, ss)
		}
	}
	if a := must(m.GetAttr(bg, f.LIN)); a.Size != 5 || a.Allocated != 0 || len(a.WDL) != 0 || a.StripeSize != 1<<20 {
		t.Fatalf("attributes %+v", a)
	}
	// Jobs that work on blocks do not see it.
	if ss := must(BlockStripes(m).GetStripes(bg, f.LIN, 0, 1)); len(ss) != 0 {
		t.Fatalf("BlockStripes: %+v", ss)
	}
	check(t, m)

	// Overwritten inline, at its generation only.
	_, err = m.CommitStripe(bg, f.LIN, inlineStripe("stale"), 0, co)
	wantErr(t, err, ErrStripeConflict)
	must(m.CommitStripe(bg, f.LIN, inlineStripe("HELLO!"), 1, CommitOptions{Size: 6}))

	// Grown into blocks: the inline bytes go, nothing is queued.
	must(m.CommitStripe(bg, f.LIN, stripe(0, 1, 1), 2, CommitOptions{Size: 100}))
	ss := must(m.GetStripes(bg, f.LIN, 0, 0))
	if len(ss) != 1 || ss[0].IsInline() || ss[0].Gen != 3 {
		t.Fatalf("after the move to blocks: %+v", ss)
	}
	if a := must(m.GetAttr(bg, f.LIN)); a.Allocated != 200 || len(a.WDL) != 2 {
		t.Fatalf("attributes in blocks %+v", a)
	}
	if q := must(m.ListDeletes(bg, 1, BlockID{}, 10)); len(q) != 0 {
		t.Fatalf("queued %+v", q)
	}

	// Back inline (a writer that found it small again): the blocks go to
	// the delete queue in the same transaction.
	must(m.CommitStripe(bg, f.LIN, inlineStripe("abcdefgh"), 3, CommitOptions{}))
	if a := must(m.GetAttr(bg, f.LIN)); a.Allocated != 0 || len(a.WDL) != 0 {
		t.Fatalf("attributes inline again %+v", a)
	}
	if q := must(m.ListDeletes(bg, 1, BlockID{}, 10)); len(q) != 1 || q[0].LIN != f.LIN {
		t.Fatalf("queued on drive 1: %+v", q)
	}
	check(t, m)

	// A truncate shortens the bytes with the data length.
	must(m.SetAttr(bg, f.LIN, SetSize, Attr{Size: 3}))
	ss = must(m.GetStripesAt(bg, f.LIN, 0, 1))
	if len(ss) != 1 || string(ss[0].Inline) != "abc" || ss[0].DataLen != 3 {
		t.Fatalf("after truncate: %+v", ss)
	}
	// Growing keeps the bytes; the rest reads as zeros.
	must(m.SetAttr(bg, f.LIN, SetSize, Attr{Size: 10}))
	if ss := must(m.GetStripesAt(bg, f.LIN, 0, 1)); string(ss[0].Inline) != "abc" {
		t.Fatalf("after growing: %+v", ss)
	}
	check(t, m)

	// Removed: nothing is left.
	ok(t, m.Unlink(bg, RootLIN, "f"))
	check(t, m)
}

// BlockStripes pages as GetStripes does: a full page of stripes with
// units comes back even when an inline stripe 0 leads it.
func TestBlockStripesPage(t *testing.T) {
	r := fakeStripes{inlineStripe("x"), stripe(1, 1, 1), stripe(2, 1, 1), stripe(3, 1, 1)}
	var idx []uint64
	ok(t, EachStripe(bg, BlockStripes(r), 7, 2, func(s Stripe) error {
		if s.IsInline() {
			t.Fatalf("inline stripe %+v", s)
		}
		idx = append(idx, s.Index)
		return nil
	}))
	if !reflect.DeepEqual(idx, []uint64{1, 2, 3}) {
		t.Fatalf("stripes %v", idx)
	}
	if ss := must(BlockStripes(r).GetStripes(bg, 7, 0, 1)); len(ss) != 1 || ss[0].Index != 1 {
		t.Fatalf("one from 0: %+v", ss)
	}
	if ss := must(BlockStripes(fakeStripes{inlineStripe("x")}).GetStripes(bg, 7, 0, 0)); len(ss) != 0 {
		t.Fatalf("only inline: %+v", ss)
	}
}

type fakeStripes []Stripe

func (f fakeStripes) GetStripes(ctx context.Context, lin LIN, from uint64, n int) ([]Stripe, error) {
	var out []Stripe
	for _, s := range f {
		if s.Index >= from && (n <= 0 || len(out) < n) {
			out = append(out, s)
		}
	}
	return out, nil
}

// A namespace of format 2 is migrated to 3 when opened, and then holds
// inline stripes; a binary of format 2 would refuse it (ErrNewerFormat,
// as TestFormatOpen shows for any newer version).
func TestMigrateFromFormat2(t *testing.T) {
	mem := backends(t)[0].newStore(t)
	m := newMeta(t, mem)
	f := must(m.Create(bg, RootLIN, "f", NewInode{}))
	ok(t, mem.Update(bg, func(tx kv.Tx) error {
		tx.Put(keyFormat(), encodeFormat(formatRecord{version: 2, created: 5}))
		return nil
	}))
	m2 := must(Open(bg, Config{Store: mem}))
	if fr := storedFormat(t, mem); fr.version != 3 || fr.created != 5 {
		t.Fatalf("format after the migration %+v", fr)
	}
	must(m2.CommitStripe(bg, f.LIN, inlineStripe("x"), 0, CommitOptions{StripeSize: 1 << 20, Size: 1}))
}

// storedFormat reads the format record of store.
func storedFormat(t *testing.T, store kv.Store) formatRecord {
	t.Helper()
	var fr formatRecord
	ok(t, store.View(bg, func(tx kv.Tx) error {
		b, err := tx.Get(keyFormat())
		if err == nil {
			fr, err = decodeFormat(b)
		}
		return err
	}))
	return fr
}
