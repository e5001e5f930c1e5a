package restripe

import (
	"context"
	"sync"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/meta"
)

// The unit transfers of repair and relayout: whole units, in parallel,
// each through the client's restripe primitives. The goroutines end with
// the call (every read or put takes ctx).

// readUnits reads the given units of stripe s of lin whole, in parallel,
// into shards (nil for a unit that failed, with its error in failed), and
// returns the bytes read. The reads check block identity and the map's
// CRC (client.Client.ReadUnit): a rebuild must not start from a unit that
// is not the one committed.
func (r *Restriper) readUnits(ctx context.Context, view *client.Snapshot, lin meta.LIN, s meta.Stripe, units []int, shards [][]byte, failed map[int]error) int64 {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int64
	)
	for _, i := range units {
		ref := client.UnitRef{LIN: lin, Stripe: s.Index, Index: i, Unit: s.Units[i]}
		wg.Add(1)
		go func() {
			defer wg.Done()
			data, err := r.data.ReadUnit(ctx, view, ref)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed[i] = err
				return
			}
			shards[i] = data
			total += int64(len(data))
		}()
	}
	wg.Wait()
	return total
}

// unitPut is one unit for putUnits to store: the new unit (its drive and
// block chosen) with its bytes and their segment CRCs.
type unitPut struct {
	ref  client.UnitRef
	data []byte
	segs []uint32
}

// putUnits stores each put as a block of generation gen, in parallel; the
// error of puts[j] is errs[j].
func (r *Restriper) putUnits(ctx context.Context, view *client.Snapshot, gen uint64, puts []unitPut) (errs []error) {
	errs = make([]error, len(puts))
	var wg sync.WaitGroup
	for j, p := range puts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[j] = r.data.PutUnit(ctx, view, p.ref, gen, p.data, p.segs)
		}()
	}
	wg.Wait()
	return errs
}
