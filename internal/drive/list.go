package drive

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// DefaultListLimit is the page size List uses for a limit <= 0, and
// MaxListLimit the largest it accepts.
const (
	DefaultListLimit = 1000
	MaxListLimit     = 100000
)

// BlockInfo is a List entry: a block's id and its file's size and
// modification time. List does not open the block, so it says nothing about
// its health.
type BlockInfo struct {
	ID      BlockID
	Size    int64
	ModTime time.Time
}

// List returns up to limit blocks with ids greater than the cursor after,
// ordered by id, and the cursor of the next page ("" when this page is the
// last). An empty after starts at the beginning. limit <= 0 means
// DefaultListLimit; above MaxListLimit it is capped. A bad cursor returns
// ErrInvalid. Blocks put or deleted while paging may or may not be seen.
func (d *Drive) List(after string, limit int) ([]BlockInfo, string, error) {
	if err := d.checkOpen(); err != nil {
		return nil, "", err
	}
	if after != "" {
		if _, err := ParseBlockID(after); err != nil {
			return nil, "", fmt.Errorf("drive %v: list: bad cursor: %w", d.ID(), err)
		}
	}
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	var out []BlockInfo
	startPrefix := uint64(0)
	if after != "" {
		startPrefix, _ = strconv.ParseUint(after[:2], 16, 8) // validated above
	}
	for p := startPrefix; p < 256; p++ {
		sub := filepath.Join(d.path, blocksDir, fmt.Sprintf("%02x", p))
		ents, err := os.ReadDir(sub) // sorted by name
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, "", fmt.Errorf("drive %v: list %s: %w", d.ID(), sub, err)
		}
		for _, e := range ents {
			name := e.Name()
			if name <= after {
				continue
			}
			id, err := ParseBlockID(name)
			if err != nil {
				continue // temp or stray file
			}
			if len(out) == limit {
				return out, out[len(out)-1].ID.String(), nil
			}
			info, err := e.Info()
			if err != nil {
				continue // deleted meanwhile
			}
			out = append(out, BlockInfo{ID: id, Size: info.Size(), ModTime: info.ModTime()})
		}
	}
	return out, "", nil
}
