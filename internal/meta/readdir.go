package meta

import (
	"context"
	"fmt"

	"github.com/weftfs/weft/internal/kv"
)

// DefaultReadDirLimit is the page size of ReadDir when limit <= 0.
const DefaultReadDirLimit = 1024

// ReadDir returns up to limit entries of directory dir whose names sort
// after the name after ("" starts at the beginning), in byte order of name,
// and the cursor for the next page ("" when the directory is exhausted).
// "." and ".." are not stored and not returned.
//
// Paging stays correct while the directory changes: an entry that exists
// during the whole listing is returned exactly once; one added or removed
// meanwhile may or may not be. Errors: ErrNotFound, ErrNotDir.
func (m *Meta) ReadDir(ctx context.Context, dir LIN, after string, limit int) ([]DirEntry, string, error) {
	if limit <= 0 {
		limit = DefaultReadDirLimit
	}
	var out []DirEntry
	var next string
	err := m.view(ctx, func(o *op) error {
		out, next = nil, ""
		if _, err := o.loadDirs([]LIN{dir}, nil); err != nil {
			return err
		}
		if _, err := o.dir(dir); err != nil {
			return err
		}
		start, end := entriesRange(dir)
		if after != "" {
			start = kv.After(keyEntry(dir, after))
		}
		kvs, more, err := o.tx.Scan(start, end, limit)
		if err != nil {
			return err
		}
		out = make([]DirEntry, 0, len(kvs))
		for _, p := range kvs {
			typ, lin, err := decodeEntry(p.Key, p.Value)
			if err != nil {
				return err
			}
			out = append(out, DirEntry{Name: string(p.Key[9:]), LIN: lin, Type: typ})
		}
		if more != nil && len(out) > 0 {
			next = out[len(out)-1].Name
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("readdir LIN %d: %w", dir, err)
	}
	return out, next, nil
}
