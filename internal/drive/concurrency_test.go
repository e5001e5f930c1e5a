package drive

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
)

// TestConcurrentPutGet runs puts, gets, deletes and counter snapshots at
// once; run it with -race.
func TestConcurrentPutGet(t *testing.T) {
	ctx := context.Background()
	d := openTest(t, func(o *Options) { o.Sync = SyncNever })
	const workers, perWorker = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers*perWorker)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				data := payload(SegmentSize*(i%5)+w, uint64(w*1000+i))
				h := BlockHeader{ID: NewBlockID(), Owner: uint64(w)}
				if err := d.Put(ctx, h, bytes.NewReader(data), int64(len(data))); err != nil {
					errs <- err
					return
				}
				got, _, err := d.Get(ctx, h.ID, 0, -1)
				if err != nil || !bytes.Equal(got, data) {
					errs <- errors.Join(err, errors.New("data mismatch"))
					return
				}
				if i%3 == 0 {
					if err := d.Delete(h.ID); err != nil {
						errs <- err
						return
					}
				}
				d.Counters()
			}
		}(w)
	}
	// Racing puts of one id with the same content all succeed, exactly one
	// block is stored.
	same := payload(3*SegmentSize, 42)
	shared := BlockHeader{ID: NewBlockID()}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.Put(ctx, shared, bytes.NewReader(same), int64(len(same))); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	u, err := d.Usage()
	if err != nil {
		t.Fatal(err)
	}
	wantBlocks := int64(workers*(perWorker-(perWorker+2)/3) + 1)
	if u.Blocks != wantBlocks {
		t.Fatalf("blocks = %d, want %d", u.Blocks, wantBlocks)
	}
	list, _, _ := d.List("", MaxListLimit)
	if int64(len(list)) != wantBlocks {
		t.Fatalf("listed %d blocks, want %d", len(list), wantBlocks)
	}
	c := d.Counters()
	if c.Read.InFlight != 0 || c.Write.InFlight != 0 || c.Write.Ops != workers*perWorker+workers {
		t.Fatalf("counters %+v", c)
	}
	assertNoTemps(t, d)
}
