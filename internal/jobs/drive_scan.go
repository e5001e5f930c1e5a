package jobs

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/job"
)

// A drive scan works through one drive's blocks by their keys (the first
// 8 bytes of their ids) from its node's block service: collect's sweep
// and mediascan share these helpers, and the tasks' scope names the drive.

// scopeDrive parses a task scope "d7".
func scopeDrive(scope string) (drive.ID, error) {
	n, err := strconv.ParseUint(strings.TrimPrefix(scope, "d"), 10, 32)
	if err != nil || n == 0 || !strings.HasPrefix(scope, "d") {
		return 0, fmt.Errorf("%w: collect: bad task scope %q: want a drive id like d7", job.ErrInvalid, scope)
	}
	return drive.ID(n), nil
}

// The sweep's item keys are the first 8 bytes of block ids, big-endian.
// An item is a bucket of that key space: buckets are aligned on
// 1<<bucketShift, so a drive has at most 65536 of them and a drive of n
// blocks about n/65536 blocks per bucket (block ids are random). Items
// returns, for each non-empty bucket, its last key within the task's range
// (so the engine's cursor, item+1, lands on the next bucket); Process
// sweeps the bucket from its aligned start up to the item. A steal that
// cuts a bucket makes both halves sweep its head: harmless, sweeping is
// idempotent. (A block whose first 8 bytes are all 0xff, one in 2^64, is
// outside every task.)
const bucketShift = 48

func keyOf(id drive.BlockID) uint64 { return binary.BigEndian.Uint64(id[:8]) }

// bucketLast returns the last key of k's bucket.
func bucketLast(k uint64) uint64 { return k | (1<<bucketShift - 1) }

// cursorBefore returns the List cursor whose next id is the first with key
// >= k.
func cursorBefore(k uint64) string {
	if k == 0 {
		return ""
	}
	var id drive.BlockID
	binary.BigEndian.PutUint64(id[:8], k-1)
	for i := 8; i < 16; i++ {
		id[i] = 0xff
	}
	return id.String()
}

// listPage bounds the blocks one List call returns in a sweep.
const listPage = 1000

// blockLister is what a drive scan uses to page through a drive's blocks.
type blockLister interface {
	List(ctx context.Context, d drive.ID, after string, limit int) ([]drive.BlockInfo, string, error)
}

// bucketItems is Items of a drive scan over buckets (see bucketShift):
// the last key within [from, to) of each non-empty bucket of drive d
// (served by node, named in errors), up to limit.
//
// The listing starts at from's bucket, not at from: a range that begins at
// a bucket's item (a steal splits there: the holder drops the item, the
// thief lists from it) must list that bucket although its blocks' keys lie
// below from, or nobody sweeps it (job.Phase's Items contract). Every item
// of from's bucket is at least from (its last key, or to-1).
func bucketItems(ctx context.Context, bc blockLister, d drive.ID, node string, from, to uint64, limit int) ([]uint64, error) {
	return driveKeys(ctx, bc, d, node, from>>bucketShift<<bucketShift, to, limit, listPage, func(k uint64) uint64 { return min(bucketLast(k), to-1) })
}

// driveKeys lists the distinct item keys item(k) of the blocks of drive d
// whose keys k lie in [from, to), in order, up to limit, reading pages of
// page blocks. item must not decrease with k.
func driveKeys(ctx context.Context, bc blockLister, d drive.ID, node string, from, to uint64, limit, page int, item func(uint64) uint64) ([]uint64, error) {
	var out []uint64
	after := cursorBefore(from)
	for {
		blocks, next, err := bc.List(ctx, d, after, page)
		if err != nil {
			return nil, fmt.Errorf("list drive %v on %s: %w", d, node, err)
		}
		for _, b := range blocks {
			k := keyOf(b.ID)
			if k >= to {
				return out, nil
			}
			key := item(k)
			if len(out) > 0 && out[len(out)-1] == key {
				continue
			}
			if len(out) == limit {
				return out, nil
			}
			out = append(out, key)
		}
		if next == "" || len(blocks) == 0 {
			return out, nil
		}
		after = next
	}
}

// eachInBucket calls fn for each block of drive d in the bucket item ends
// (from the bucket's aligned start up to key item), in key order; it stops
// at fn's first error.
func eachInBucket(ctx context.Context, bc blockLister, d drive.ID, node string, item uint64, fn func(drive.BlockInfo) error) error {
	return eachBlock(ctx, bc, d, node, item>>bucketShift<<bucketShift, item, listPage, fn)
}

// eachBlock calls fn for each block of drive d whose key lies in
// [first, last], in key order, reading pages of page blocks; it stops at
// fn's first error.
func eachBlock(ctx context.Context, bc blockLister, d drive.ID, node string, first, last uint64, page int, fn func(drive.BlockInfo) error) error {
	after := cursorBefore(first)
	for {
		blocks, next, err := bc.List(ctx, d, after, page)
		if err != nil {
			return fmt.Errorf("list drive %v on %s: %w", d, node, err)
		}
		for _, b := range blocks {
			if keyOf(b.ID) > last {
				return nil
			}
			if err := fn(b); err != nil {
				return err
			}
		}
		if next == "" || len(blocks) == 0 {
			return nil
		}
		after = next
	}
}
