package events

import (
	"fmt"
	"strings"

	"github.com/weftfs/weft/internal/cluster"
)

// The parameters of the events the watcher records (job.Event.Params):
// what a callback receives as WEFT_PARAM_<KEY> and %key. Percentages are
// of the bytes of the drives in service, with one decimal.

// driveParams are a drive event's: drive, node, pool.
func driveParams(d cluster.Drive) map[string]string {
	return map[string]string{"drive": d.ID.String(), "node": d.Node, "pool": d.Pool}
}

// spaceParams are a low-space or space-recovered event's: threshold
// (percent free) and, when the event is about a pool ("pool NAME"), pool,
// usage and free (percent of the pool's drives in service).
func spaceParams(drives []cluster.Drive, subject string, threshold int) map[string]string {
	p := map[string]string{"threshold": fmt.Sprint(threshold)}
	name, ok := strings.CutPrefix(subject, "pool ")
	if !ok {
		return p
	}
	p["pool"] = name
	for _, u := range cluster.PoolUsages(drives) {
		if u.Pool == name {
			p["usage"] = fmt.Sprintf("%.1f", 100*(1-u.FreeFraction()))
			p["free"] = fmt.Sprintf("%.1f", 100*u.FreeFraction())
		}
	}
	return p
}

// balanceParams are a pool-unbalanced event's: pool, spread (points of
// used space between its fullest and emptiest drive) and those drives.
func balanceParams(b imbalance) map[string]string {
	return map[string]string{"pool": b.Pool, "spread": fmt.Sprintf("%.1f", b.Points),
		"fullest": b.Fullest.ID.String(), "emptiest": b.Emptiest.ID.String()}
}
