package drive

import "sync"

// headerCacheMax bounds a read-only handle's cache of block headers
// (about 200 bytes each for a 1 MiB block).
const headerCacheMax = 8192

// headerCache holds the checked headers of blocks a read-only handle (a
// client's short-circuit reads) has read, so that a small read of a block
// read before costs one read of its data instead of two. A block's header
// never changes: a block id is written once (Put links, never replaces)
// and never reused, so a cached header is the block's for as long as the
// block exists; a deleted block's file is gone, and opening it still
// fails with ErrNotFound.
type headerCache struct {
	mu sync.Mutex
	m  map[BlockID]BlockHeader
}

func (c *headerCache) get(id BlockID) (BlockHeader, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.m[id]
	return h, ok
}

// put remembers h, forgetting an arbitrary other header when full.
func (c *headerCache) put(h BlockHeader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[BlockID]BlockHeader{}
	}
	if len(c.m) >= headerCacheMax {
		for id := range c.m {
			delete(c.m, id)
			break
		}
	}
	c.m[h.ID] = h
}
