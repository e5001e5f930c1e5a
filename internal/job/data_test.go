package job

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Job data: puts, gets and paged lists in key order under a prefix, and
// nothing left once the job ends; what a phase wrote is there for the
// next phase on another node.
func TestJobData(t *testing.T) {
	typ := newFakeType("twostep", SetNone, 40, 1)
	c := newTestCluster(t, 2, nil, typ)
	e := c.engines[0]

	// Errors first, on a job that need not exist.
	if err := e.PutData(bg, 99, "", nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty key: %v", err)
	}
	if err := e.PutData(bg, 99, "k", make([]byte, MaxDataValue+1)); !errors.Is(err, ErrDataTooLarge) {
		t.Errorf("too large: %v", err)
	}
	if _, err := e.ListData(bg, 99, "a/", "b/1", 3); !errors.Is(err, ErrInvalid) {
		t.Errorf("after outside prefix: %v", err)
	}

	var seen atomic.Int64
	c.d.setHook(func(ctx context.Context, node string, id JobID, phase int, item uint64) error {
		eng := e // any node's engine reads and writes the same keys
		switch phase {
		case 0:
			return eng.PutData(ctx, id, fmt.Sprintf("p/%04d", item), []byte(node))
		case 1:
			n, after := 0, ""
			for {
				page, err := eng.ListData(ctx, id, "p/", after, 7)
				if err != nil {
					return err
				}
				for _, d := range page {
					if !strings.HasPrefix(d.Key, "p/") || d.Key <= after {
						return fmt.Errorf("entry %q after %q", d.Key, after)
					}
					after = d.Key
					n++
				}
				if len(page) < 7 {
					break
				}
			}
			v, ok, err := eng.GetData(ctx, id, "p/0007")
			if err != nil || !ok || len(v) == 0 {
				return fmt.Errorf("get p/0007: %q %v %v", v, ok, err)
			}
			seen.Store(int64(n))
		}
		return nil
	})
	id, err := e.Submit(bg, "twostep", Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.waitState(e, id, Succeeded)
	if seen.Load() != 40 {
		t.Fatalf("phase 1 listed %d entries, want 40", seen.Load())
	}
	resp, err := c.clients[0].Get(bg, prefixData, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Fatalf("%d job data keys left after the job ended (%v)", resp.Count, err)
	}
}
