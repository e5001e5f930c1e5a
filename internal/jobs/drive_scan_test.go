package jobs

import (
	"context"
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/weftfs/weft/internal/drive"
)

// keyBlocks is a blockLister over blocks whose ids start with the given
// keys (big-endian), listing pages as a drive does.
type keyBlocks []drive.BlockID

func newKeyBlocks(keys ...uint64) keyBlocks {
	var out keyBlocks
	for i, k := range keys {
		var id drive.BlockID
		binary.BigEndian.PutUint64(id[:8], k)
		id[15] = byte(i)
		out = append(out, id)
	}
	slices.SortFunc(out, func(a, b drive.BlockID) int { return strings.Compare(a.String(), b.String()) })
	return out
}

func (kb keyBlocks) List(_ context.Context, _ drive.ID, after string, limit int) ([]drive.BlockInfo, string, error) {
	var out []drive.BlockInfo
	for _, id := range kb {
		if id.String() > after {
			out = append(out, drive.BlockInfo{ID: id})
		}
	}
	if len(out) > limit {
		return out[:limit], out[limit-1].ID.String(), nil
	}
	return out, "", nil
}

// TestCursorBefore: the cursor before key k lists from the first id whose
// key is k or more.
func TestCursorBefore(t *testing.T) {
	kb := newKeyBlocks(0, 1, 1<<48-1, 1<<48, 1<<48+5, 1<<63)
	for _, k := range []uint64{0, 1, 2, 1 << 48, 1<<48 + 1, 1 << 63} {
		got, _, _ := kb.List(bg, 1, cursorBefore(k), 1)
		want := slices.IndexFunc(kb, func(id drive.BlockID) bool { return keyOf(id) >= k })
		if len(got) != 1 || got[0].ID != kb[want] {
			t.Errorf("cursorBefore(%#x) lists %v first, want %v", k, got, kb[want])
		}
	}
	if got := bucketLast(1<<48 + 5); got != 2<<48-1 {
		t.Errorf("bucketLast = %#x", got)
	}
}

// TestDriveKeys lists one item per non-empty bucket within the range, up
// to the limit, over pages of any size; eachBlock visits a key range.
func TestDriveKeys(t *testing.T) {
	kb := newKeyBlocks(5, 7, 1<<48, 1<<48+1, 3<<48, 3<<48+9, 5<<48)
	bucket := func(k uint64) uint64 { return min(bucketLast(k), 4<<48-1) }
	for _, page := range []int{1, 2, 1000} {
		got, err := driveKeys(bg, kb, 1, "n1", 0, 4<<48, 10, page, bucket)
		want := []uint64{1<<48 - 1, 2<<48 - 1, 4<<48 - 1}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("page %d: keys %#x, %v; want %#x", page, got, err, want)
		}
		got, _ = driveKeys(bg, kb, 1, "n1", 1<<48+1, 4<<48, 1, page, bucket)
		if !slices.Equal(got, []uint64{2<<48 - 1}) {
			t.Errorf("page %d, from the middle of a bucket, limit 1: %#x", page, got)
		}
		var seen []uint64
		err = eachBlock(bg, kb, 1, "n1", 7, 3<<48, page, func(b drive.BlockInfo) error {
			seen = append(seen, keyOf(b.ID))
			return nil
		})
		if err != nil || !slices.Equal(seen, []uint64{7, 1 << 48, 1<<48 + 1, 3 << 48}) {
			t.Errorf("page %d: eachBlock saw %#x, %v", page, seen, err)
		}
	}
}

// TestBucketItemsFromAnItem: a range that starts at a bucket's item (where
// a steal splits a task: the holder drops the item, the thief lists from
// it) lists that bucket, whose blocks' keys lie below the item, and
// listings from any lower start include it: every item is listed from its
// own key (job.Phase's Items contract). Without it collect's sweep left a
// bucket to nobody, and an orphan block stayed (TestTreeDeleteAndCollect,
// 1 run in 2).
func TestBucketItemsFromAnItem(t *testing.T) {
	kb := newKeyBlocks(5, 7, 1<<48, 1<<48+1, 3<<48, 3<<48+9, 5<<48)
	to := uint64(6 << 48)
	all, err := bucketItems(bg, kb, 1, "n1", 0, to, 100)
	if err != nil || !slices.Equal(all, []uint64{1<<48 - 1, 2<<48 - 1, 4<<48 - 1, 6<<48 - 1}) {
		t.Fatalf("items of [0, %#x): %#x, %v", to, all, err)
	}
	for i, item := range all {
		for _, from := range []uint64{item, item>>bucketShift<<bucketShift + 1} {
			got, err := bucketItems(bg, kb, 1, "n1", from, to, 100)
			if err != nil || !slices.Equal(got, all[i:]) {
				t.Errorf("items of [%#x, %#x): %#x, %v; want %#x", from, to, got, err, all[i:])
			}
		}
	}
}
