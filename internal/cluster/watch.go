package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// WatchRecord is what the coordinator's event watcher remembers across
// coordinator changes: the drive ids and node names it has seen (one it
// has not is a group change: a drive or node added) and since when each
// drive it saw down has been down (the repair grace period runs from
// there, not from when a new coordinator first looked).
type WatchRecord struct {
	V int `json:"v"`
	// Drives and Nodes are every drive id and node name seen, sorted.
	Drives []DriveID `json:"drives"`
	Nodes  []string  `json:"nodes"`
	// DownSince maps a drive that is down now (by its "d7" name) to when
	// the watcher first saw it down.
	DownSince map[string]time.Time `json:"down_since,omitempty"`
	Updated   time.Time            `json:"updated"`
}

// Added returns the drives and nodes that w has not seen, in the order
// given. Removed drives are never new (they left the cluster).
func (w *WatchRecord) Added(drives []Drive, nodes []Node) (newDrives []Drive, newNodes []Node) {
	for _, d := range drives {
		if d.Status != StatusRemoved && !slices.Contains(w.Drives, d.ID) {
			newDrives = append(newDrives, d)
		}
	}
	for _, n := range nodes {
		if !slices.Contains(w.Nodes, n.Name) {
			newNodes = append(newNodes, n)
		}
	}
	return newDrives, newNodes
}

// Remember adds the drives' ids and the nodes' names to w (each once,
// sorted); it reports whether anything was added.
func (w *WatchRecord) Remember(drives []Drive, nodes []Node) bool {
	before := len(w.Drives) + len(w.Nodes)
	for _, d := range drives {
		if !slices.Contains(w.Drives, d.ID) {
			w.Drives = append(w.Drives, d.ID)
		}
	}
	for _, n := range nodes {
		if !slices.Contains(w.Nodes, n.Name) {
			w.Nodes = append(w.Nodes, n.Name)
		}
	}
	slices.Sort(w.Drives)
	slices.Sort(w.Nodes)
	return len(w.Drives)+len(w.Nodes) != before
}

// Clone returns a deep copy of w.
func (w *WatchRecord) Clone() WatchRecord {
	c := *w
	c.Drives = slices.Clone(w.Drives)
	c.Nodes = slices.Clone(w.Nodes)
	c.DownSince = maps.Clone(w.DownSince)
	return c
}

// Watch returns the watcher's record and its revision; found is false
// (and the revision 0) in a cluster never watched.
func (s *Store) Watch(ctx context.Context) (w WatchRecord, rev int64, found bool, err error) {
	rev, err = s.getRecord(ctx, keyWatch, &w)
	if err == ErrNotFound {
		return WatchRecord{}, 0, false, nil
	}
	return w, rev, err == nil, err
}

// SaveWatch writes the watcher's record if the stored one still has
// revision rev (0: none stored), and returns the new revision. If another
// writer came first it returns ErrConflict: read it again with Watch.
func (s *Store) SaveWatch(ctx context.Context, w WatchRecord, rev int64) (int64, error) {
	w.V, w.Updated = RecordVersion, time.Now().UTC()
	t, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(keyWatch), "=", rev)).
		Then(clientv3.OpPut(keyWatch, encode(w))).Commit()
	if err != nil {
		return rev, fmt.Errorf("cluster: save event watcher state: %w", err)
	}
	if !t.Succeeded {
		return rev, fmt.Errorf("%w: %s changed since revision %d (another coordinator?)", ErrConflict, keyWatch, rev)
	}
	return t.Header.Revision, nil
}
