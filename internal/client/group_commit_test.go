package client_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/meta"
)

// batchMeta is a metaStore that records the stripes of every CommitStripes
// call and runs a hook first, which may fail the call.
type batchMeta struct {
	*meta.Meta
	mu    sync.Mutex
	calls [][]uint64
	hook  func(call int, ups []meta.StripeUpdate) error
}

func (b *batchMeta) CommitStripes(ctx context.Context, lin meta.LIN, ups []meta.StripeUpdate, co meta.CommitOptions) ([]meta.Stripe, error) {
	idx := make([]uint64, len(ups))
	for i, up := range ups {
		idx[i] = up.Stripe.Index
	}
	b.mu.Lock()
	b.calls = append(b.calls, idx)
	n, hook := len(b.calls), b.hook
	b.mu.Unlock()
	if hook != nil {
		if err := hook(n, ups); err != nil {
			return nil, err
		}
	}
	return b.Meta.CommitStripes(ctx, lin, ups, co)
}

// sizes returns the number of stripes of each call so far.
func (b *batchMeta) sizes() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []int
	for _, c := range b.calls {
		out = append(out, len(c))
	}
	return out
}

// waitPending waits until n commits of lin wait in c's group commit.
func waitPending(t *testing.T, c *client.Client, lin meta.LIN, n int) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := c.PendingCommits(lin)
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d commits pending, want %d", got, n)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGroupCommit writes 8 stripes of one file with 8 write-outs at once
// and holds the first commit until the 7 others wait: they go to meta
// together, in one transaction. A stripe of the batch that lost its
// compare-and-swap is retried alone and the others committed without it;
// a batch that failed and may have committed is every stripe's failure,
// not committed again in another shape (the stripes stay buffered and the
// flush writes them again, to new blocks); a batch refused as invalid is
// retried one stripe at a time.
func TestGroupCommit(t *testing.T) {
	const stripes = 8
	ss := 4 * testUnit
	tests := []struct {
		name      string
		overwrite bool // the file exists: stripes have a generation to lose
		second    func(f *clienttest.Fixture, lin meta.LIN, ups []meta.StripeUpdate) error
		want      []int // stripes per CommitStripes call (the first ones)
		conflicts int64 // stripe commits that lost their compare-and-swap
	}{
		{name: "batched", want: []int{1, 7}},
		{name: "conflict", overwrite: true, second: func(f *clienttest.Fixture, lin meta.LIN, ups []meta.StripeUpdate) error {
			// Another writer commits the batch's last stripe first.
			cur := f.Stripes(lin)[ups[len(ups)-1].Stripe.Index]
			_, err := f.Meta.CommitStripe(bg, lin, cur, cur.Gen, meta.CommitOptions{})
			return err
		}, want: []int{1, 7, 6, 1}, conflicts: 1},
		{name: "unknown outcome", second: func(*clienttest.Fixture, meta.LIN, []meta.StripeUpdate) error {
			return fmt.Errorf("injected: %w", context.DeadlineExceeded)
		}, want: []int{1, 7}},
		{name: "committed, reply lost", second: func(f *clienttest.Fixture, lin meta.LIN, ups []meta.StripeUpdate) error {
			co := meta.CommitOptions{StripeSize: uint64(ss), Size: uint64(stripes * ss)}
			if _, err := f.Meta.CommitStripes(bg, lin, ups, co); err != nil {
				return err
			}
			return fmt.Errorf("injected: %w", context.DeadlineExceeded)
		}, want: []int{1, 7}, conflicts: 7}, // each rewrite loses to the lost reply's commit once
		{name: "invalid", second: func(*clienttest.Fixture, meta.LIN, []meta.StripeUpdate) error {
			return fmt.Errorf("injected: %w", meta.ErrInvalid)
		}, want: []int{1, 7, 1, 1, 1, 1, 1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := clienttest.New(t)
			lin := f.Create("f", "ec:4+2")
			if tt.overwrite {
				w := f.Client(testUnit)
				fh, _ := w.Open(bg, lin, true)
				clienttest.WriteAll(t, fh, clienttest.RandBytes(stripes*ss, 1), ss)
				if err := fh.Close(bg); err != nil {
					t.Fatal(err)
				}
			}
			bm := &batchMeta{Meta: f.Meta}
			c, err := client.NewOver(bm, client.Config{Meta: f.Meta, Topology: f.Topo, UnitSize: testUnit, WriteBehind: stripes})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			bm.hook = func(call int, ups []meta.StripeUpdate) error {
				switch {
				case call == 1:
					waitPending(t, c, lin, stripes-1)
				case call == 2 && tt.second != nil:
					return tt.second(f, lin, ups)
				}
				return nil
			}
			fh, err := c.Open(bg, lin, true)
			if err != nil {
				t.Fatal(err)
			}
			data := clienttest.RandBytes(stripes*ss, 2)
			clienttest.WriteAll(t, fh, data, ss)
			if err := fh.Flush(bg); err != nil {
				t.Fatal(err)
			}
			got := bm.sizes()
			if !slices.Equal(got[:min(len(tt.want), len(got))], tt.want) {
				t.Errorf("stripes per commit %v, want %v first", got, tt.want)
			}
			if n := c.Stats().Conflicts; n != tt.conflicts {
				t.Errorf("%d conflicts, want %d", n, tt.conflicts)
			}
			if err := fh.Close(bg); err != nil {
				t.Fatal(err)
			}
			clienttest.MustEqual(t, "file", f.ReadBack(lin), data)
		})
	}
}
