package meta

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// maxPathDepth bounds Path's walk up to the root.
const maxPathDepth = 4096

// Path returns a path of lin from the root, following each inode's first
// back-pointer ("/" for the root). It reads one inode per level, each in
// its own snapshot, so a rename meanwhile may give a path that never
// existed whole. Errors: ErrNotFound (lin, or an inode on the way, is
// gone or unlinked: an open file without links has no path), ErrCorrupt
// (deeper than 4096 levels), the store's.
func (m *Meta) Path(ctx context.Context, lin LIN) (string, error) {
	var parts []string
	for cur := lin; cur != RootLIN; {
		if len(parts) == maxPathDepth {
			return "", fmt.Errorf("%w: LIN %d is more than %d levels deep", ErrCorrupt, lin, maxPathDepth)
		}
		in, err := m.GetInode(ctx, cur)
		if err != nil {
			return "", err
		}
		if len(in.Links) == 0 {
			return "", fmt.Errorf("%w: LIN %d has no links (unlinked, still open)", ErrNotFound, cur)
		}
		parts = append(parts, in.Links[0].Name)
		cur = in.Links[0].Parent
	}
	slices.Reverse(parts)
	return "/" + strings.Join(parts, "/"), nil
}
