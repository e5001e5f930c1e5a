package meta

import (
	"testing"
	"time"
)

// A restripe commit (repair, drain) changes the layout but not the file's
// times or size; a client commit moves mtime and ctime.
func TestRestripeKeepsTimes(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			now := time.Unix(1_000_000, 0)
			store := b.newStore(t)
			if err := Format(bg, store, FormatOptions{Pool: "p0"}); err != nil {
				t.Fatal(err)
			}
			m, err := Open(bg, Config{Store: store, Now: func() time.Time { return now }})
			if err != nil {
				t.Fatal(err)
			}
			f := must(m.Create(bg, RootLIN, "f", NewInode{}))
			s := must(m.CommitStripe(bg, f.LIN, stripe(0, 1, 1), 0, CommitOptions{StripeSize: 1024, Size: 100}))
			before := must(m.GetAttr(bg, f.LIN))

			now = now.Add(time.Hour)
			moved := stripe(0, 5, 2)
			moved.DataLen = s.DataLen
			must(m.CommitStripe(bg, f.LIN, moved, s.Gen, CommitOptions{Restripe: true, Size: 1 << 20}))
			after := must(m.GetAttr(bg, f.LIN))
			if !after.Mtime.Equal(before.Mtime) || !after.Ctime.Equal(before.Ctime) || after.Size != before.Size {
				t.Fatalf("restripe moved times or size: before %+v after %+v", before, after)
			}
			if after.Generation <= before.Generation || len(after.WDL) != 2 || after.WDL[0] != 5 {
				t.Fatalf("restripe did not record the new layout: %+v", after)
			}

			now = now.Add(time.Hour)
			must(m.CommitStripe(bg, f.LIN, stripe(0, 1, 3), s.Gen+1, CommitOptions{}))
			if a := must(m.GetAttr(bg, f.LIN)); !a.Mtime.Equal(now) || !a.Ctime.Equal(now) {
				t.Fatalf("client commit left times at mtime %v ctime %v, want %v", a.Mtime, a.Ctime, now)
			}
			check(t, m)
		})
	}
}
