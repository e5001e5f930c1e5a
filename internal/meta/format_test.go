package meta

import (
	"testing"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/memkv"
)

func TestFormatOpen(t *testing.T) {
	store := memkv.New(kv.Options{})
	_, err := Open(bg, Config{Store: store})
	wantErr(t, err, ErrNotFormatted)
	ok(t, Format(bg, store, FormatOptions{}))
	wantErr(t, Format(bg, store, FormatOptions{}), ErrExists)
	m := must(Open(bg, Config{Store: store}))
	root := must(m.GetAttr(bg, RootLIN))
	if root.Pool != "default" || root.Mode != 0o755 || root.Nlink != 2 {
		t.Fatalf("root %+v", root)
	}
	wantErr(t, Format(bg, memkv.New(kv.Options{}), FormatOptions{Pool: "bad pool"}), ErrInvalid)

	// A newer format is refused with a clear error; garbage is corrupt.
	for _, tc := range []struct {
		name  string
		value []byte
		want  error
	}{
		{"newer", encodeFormat(formatRecord{version: FormatVersion + 1}), ErrNewerFormat},
		{"zero", encodeFormat(formatRecord{version: 0}), ErrCorrupt},
		{"garbage", []byte{1, 2, 3}, ErrCorrupt},
		{"other magic", func() []byte { e := newEnc(); e.s("something"); e.u(1); e.i(0); return e.bytesOut() }(), ErrCorrupt},
		{"newer record version", []byte{9}, ErrNewerFormat},
		{"record version 0", []byte{0}, ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok(t, store.Update(bg, func(tx kv.Tx) error { tx.Put(keyFormat(), tc.value); return nil }))
			_, err := Open(bg, Config{Store: store})
			wantErr(t, err, tc.want)
			t.Log(err)
		})
	}
}
