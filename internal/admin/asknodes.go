package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/weftfs/weft/internal/cluster"
)

// nodeAskTimeout bounds one node's answer to askNodes: a node the control
// plane still shows up but that does not answer is reported in errs, not
// allowed to hold the whole request.
const nodeAskTimeout = 5 * time.Second

// askNodes asks every node that is up for its T at path (this one through
// own, the others through their admin API, at once, each within
// nodeAskTimeout) and returns the answers sorted by node name; errs says
// which did not answer, and why; err is the control plane's, or
// errUnavailable when no node answered. name gives the node an answer
// says it is from, which must be the node asked. The goroutines are the
// request's: each ends with its node's answer or its deadline.
func askNodes[T any](ctx context.Context, h *handler, path string, own func() (T, error), name func(T) string) (out []T, errs []string, err error) {
	nodes, err := h.store.ListNodes(ctx)
	if err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, n := range nodes {
		if n.State != cluster.Up {
			continue
		}
		wg.Go(func() {
			var v T
			var err error
			if n.Name == h.node.Name {
				v, err = own()
			} else {
				nctx, cancel := context.WithTimeout(ctx, nodeAskTimeout)
				defer cancel()
				err = NewClient(n.AdminAddr, h.peer...).do(nctx, http.MethodGet, path, nil, &v)
				if err == nil && name(v) != n.Name {
					err = fmt.Errorf("its admin address %s is answered by node %q", n.AdminAddr, name(v))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Sprintf("node %s: %v", n.Name, err))
				return
			}
			out = append(out, v)
		})
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b T) int { return cmp.Compare(name(a), name(b)) })
	slices.Sort(errs)
	if len(out) == 0 && len(errs) > 0 {
		return nil, errs, fmt.Errorf("%w: no node answered: %v", errUnavailable, errors.New(errs[0]))
	}
	return out, errs, nil
}
