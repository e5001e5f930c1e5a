package meta

import (
	"fmt"
	"slices"
	"testing"

	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/etcdkv"
	"github.com/weftfs/weft/internal/kv/memkv"
)

// TestScanInodeKeys: the windowed read returns what one Scan of the whole
// range would, for ranges with gaps of LINs wider than the first window
// (files unlinked and purged), directories' times records and bounds
// inside and past the table.
func TestScanInodeKeys(t *testing.T) {
	m := newMeta(t, memkv.New(kv.Options{Limits: etcdkv.EmbeddedLimits}))
	var lins []LIN
	for i := range 300 {
		var a Attr
		if i%7 == 0 {
			a = must(m.Mkdir(bg, RootLIN, fmt.Sprint(i), 0o755))
			must(m.Create(bg, a.LIN, "x", NewInode{})) // its times record
		} else {
			a = must(m.Create(bg, RootLIN, fmt.Sprint(i), NewInode{}))
		}
		lins = append(lins, a.LIN)
	}
	// A gap of about 150 LINs: files removed outright (no orphan record).
	ok(t, m.store.Update(bg, func(tx kv.Tx) error {
		for _, l := range lins[100:250] {
			tx.Delete(keyInode(l))
		}
		return nil
	}))
	hi := slices.Max(lins) + 1
	for _, r := range []struct{ from, to LIN }{
		{0, hi}, {0, 1 << 62}, {lins[90], lins[260]}, {lins[120], lins[200]}, {hi, hi + 10}, {lins[5], lins[5]}, {lins[6], lins[5]},
	} {
		for _, limit := range []int{1, 2, 3, 10, 64, 1000} {
			name := fmt.Sprintf("[%d,%d) limit %d", r.from, r.to, limit)
			ok(t, m.view(bg, func(o *op) error {
				got, more, err := o.scanInodeKeys(r.from, r.to, limit)
				if err != nil {
					return err
				}
				var want []kv.KV
				var next []byte
				if r.from < r.to {
					if want, next, err = o.tx.Scan(keyInode(r.from), keyInode(r.to), limit); err != nil {
						return err
					}
				}
				if !slices.EqualFunc(got, want, func(a, b kv.KV) bool { return string(a.Key) == string(b.Key) }) {
					t.Errorf("%s: %d records, want %d", name, len(got), len(want))
				}
				// more may be set at a page that ends just at the range's
				// end (a window's end), never missing.
				if next != nil && !more {
					t.Errorf("%s: more false, want true", name)
				}
				if next == nil && more && len(got) < limit {
					t.Errorf("%s: more true after a short page", name)
				}
				return nil
			}))
		}
	}
}
