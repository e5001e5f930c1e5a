package jobs

import (
	"context"
	"fmt"
	"path"

	"github.com/weftfs/weft/internal/meta"
)

// maxPathDepth bounds the walk from a file to the root.
const maxPathDepth = 4096

// pathOf returns a path of lin from the root (its first link at every
// level), or "<LIN n>" if it has none (unlinked) or the walk fails.
func pathOf(ctx context.Context, m *meta.Meta, lin meta.LIN) string {
	var parts []string
	cur := lin
	for i := 0; cur != meta.RootLIN; i++ {
		in, err := m.GetInode(ctx, cur)
		if err != nil || len(in.Links) == 0 || i == maxPathDepth {
			return fmt.Sprintf("<LIN %d>", lin)
		}
		parts = append(parts, in.Links[0].Name)
		cur = in.Links[0].Parent
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return "/" + path.Join(parts...)
}
