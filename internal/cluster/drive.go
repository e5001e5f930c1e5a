package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Drive is a drive as listed: its record with availability and usage.
type Drive struct {
	DriveRecord
	State Availability `json:"state"`
	Live  *DriveLive   `json:"live,omitempty"`
}

// RegisterDrive records a drive a node has opened. A new drive gets status
// ready. For a known drive the stored pool and status win over rec (they are
// changed only by administrative commands), but the node, path and class
// are updated; a drive claimed by a different node is refused unless that
// node is down. It returns the stored record.
func (s *Store) RegisterDrive(ctx context.Context, rec DriveRecord) (DriveRecord, error) {
	if !ValidName(rec.Pool) {
		return rec, fmt.Errorf("%w: pool name %q for drive %s", ErrInvalid, rec.Pool, rec.Path)
	}
	var old DriveRecord
	rev, err := s.getRecord(ctx, driveKey(rec.ID), &old)
	switch {
	case err == nil:
		if old.Node != rec.Node {
			if r, _ := s.cli.Get(ctx, liveNodeKey(old.Node)); r != nil && len(r.Kvs) > 0 {
				return old, fmt.Errorf("%w: drive %s at %s is registered to node %s, which is up; stop it before moving the drive",
					ErrInvalid, rec.ID, rec.Path, old.Node)
			}
		}
		old.Node, old.Path, old.Class = rec.Node, rec.Path, rec.Class
		rec = old
	case err == ErrNotFound:
		now := time.Now().UTC()
		rec.Status, rec.Added, rec.Changed = StatusReady, now, now
	default:
		return rec, err
	}
	rec.V = RecordVersion
	t, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(driveKey(rec.ID)), "=", rev)).
		Then(clientv3.OpPut(driveKey(rec.ID), encode(rec))).Commit()
	if err != nil {
		return rec, fmt.Errorf("cluster: register drive %s: %w", rec.ID, err)
	}
	if !t.Succeeded {
		return s.RegisterDrive(ctx, rec)
	}
	return rec, nil
}

// GetDrive returns one drive's record (ErrNotFound if unknown).
func (s *Store) GetDrive(ctx context.Context, id DriveID) (DriveRecord, error) {
	var d DriveRecord
	_, err := s.getRecord(ctx, driveKey(id), &d)
	if err == ErrNotFound {
		return d, fmt.Errorf("%w: drive %s (see weft drive list)", ErrNotFound, id)
	}
	return d, err
}

// SetDriveStatus changes a drive's status if the transition is allowed
// (ErrBadTransition otherwise). It is idempotent. It returns the new record.
func (s *Store) SetDriveStatus(ctx context.Context, id DriveID, to DriveStatus) (DriveRecord, error) {
	for {
		var d DriveRecord
		rev, err := s.getRecord(ctx, driveKey(id), &d)
		if err == ErrNotFound {
			return d, fmt.Errorf("%w: drive %s (see weft drive list)", ErrNotFound, id)
		}
		if err != nil {
			return d, err
		}
		if d.Status == to {
			return d, nil
		}
		if !CanTransition(d.Status, to) {
			return d, fmt.Errorf("%w: drive %s is %s and cannot become %s", ErrBadTransition, id, d.Status, to)
		}
		d.Status, d.Changed, d.V = to, time.Now().UTC(), RecordVersion
		t, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(driveKey(id)), "=", rev)).
			Then(clientv3.OpPut(driveKey(id), encode(d))).Commit()
		if err != nil {
			return d, fmt.Errorf("cluster: set drive %s %s: %w", id, to, err)
		}
		if t.Succeeded {
			return d, nil
		}
	}
}

// ListDrives returns every drive in id order with availability: a drive is
// up when its node published it under a live lease without an error.
func (s *Store) ListDrives(ctx context.Context) ([]Drive, error) {
	live := map[string]*DriveLive{}
	err := s.scan(ctx, prefixLiveDrv, func(k string, v []byte) error {
		var dl DriveLive
		if err := decode(k, v, &dl); err != nil {
			return err
		}
		live[strings.TrimPrefix(k, prefixLiveDrv)] = &dl
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []Drive
	err = s.scan(ctx, prefixDrives, func(k string, v []byte) error {
		var d Drive
		if err := decode(k, v, &d.DriveRecord); err != nil {
			return err
		}
		d.State = Down
		if l := live[strings.TrimPrefix(k, prefixDrives)]; l != nil {
			d.Live = l
			if l.Error == "" {
				d.State = Up
			}
		}
		out = append(out, d)
		return nil
	})
	return out, err
}
