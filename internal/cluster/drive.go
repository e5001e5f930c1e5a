package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/erasure"
)

// Drive is a drive as listed: its record with availability and usage.
type Drive struct {
	DriveRecord
	State Availability `json:"state"`
	Live  *DriveLive   `json:"live,omitempty"`
}

// CheckDriveClass refuses (ErrInvalid) a new drive of class at path for
// pool when the pool has a class and it is another: a pool of a class
// (weft pool create --class) holds drives of that class only, so that a
// policy moving files to "the hdd pool" moves them to hdds. A pool without
// a class, or one that does not exist yet, takes any. MoveDrive applies
// the same rule to a drive changing pools.
func (s *Store) CheckDriveClass(ctx context.Context, pool, class, path string) error {
	p, err := s.GetPool(ctx, pool)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if p.Class != "" && p.Class != class {
		return fmt.Errorf("%w: drive %s: pool %s holds %s drives and this one is %s: give --class %s if it is one, or add it to a pool of class %s",
			ErrInvalid, path, pool, p.Class, class, p.Class, class)
	}
	return nil
}

// RegisterDrive records a drive a node has opened. A new drive gets status
// ready, if its class fits its pool's (CheckDriveClass), and keeps
// rec.JoinedEmpty. For a known drive the stored pool, status and
// JoinedEmpty win over rec (they are changed only by administrative
// commands, or never), but the node, path and class are updated; a drive
// claimed by a different node is refused unless that node is down. It
// returns the stored record.
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
		if err := s.CheckDriveClass(ctx, rec.Pool, rec.Class, rec.Path); err != nil {
			return rec, err
		}
		now := time.Now().UTC()
		rec.Status, rec.Added, rec.Changed = StatusReady, now, now
	default:
		return rec, err
	}
	rec.stamp()
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
	d, _, err := s.updateDrive(ctx, id, fmt.Sprintf("set drive %s %s", id, to), func(d *DriveRecord) (bool, error) {
		if d.Status == to {
			return false, nil
		}
		if !CanTransition(d.Status, to) {
			return false, fmt.Errorf("%w: drive %s is %s and cannot become %s", ErrBadTransition, id, d.Status, to)
		}
		d.Status, d.Changed = to, time.Now().UTC()
		if to != StatusDraining {
			d.MoveTo = "" // a move ends with the drain it rides on
		}
		return true, nil
	})
	return d, err
}

// updateDrive applies change to drive id's record and stores it if change
// says to write, compare-and-swapped on the record's revision (again from
// a fresh read if another writer came between). what names the update in
// errors. It returns the record as stored, or as read when nothing was
// written, and whether it wrote.
func (s *Store) updateDrive(ctx context.Context, id DriveID, what string, change func(*DriveRecord) (bool, error)) (DriveRecord, bool, error) {
	for {
		var d DriveRecord
		rev, err := s.getRecord(ctx, driveKey(id), &d)
		if err == ErrNotFound {
			return d, false, fmt.Errorf("%w: drive %s (see weft drive list)", ErrNotFound, id)
		}
		if err != nil {
			return d, false, err
		}
		write, err := change(&d)
		if err != nil || !write {
			return d, false, err
		}
		d.stamp()
		t, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(driveKey(id)), "=", rev)).
			Then(clientv3.OpPut(driveKey(id), encode(d))).Commit()
		if err != nil {
			return d, false, fmt.Errorf("cluster: %s: %w", what, err)
		}
		if t.Succeeded {
			return d, true, nil
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

// MoveDrive starts moving drive id to pool: the drive becomes draining
// with MoveTo set, so that a drain job empties it of its current pool's
// data and then puts it in pool, ready (FinishDriveMove), instead of
// retiring it. The drive's record, not a node's configuration, says which
// pool it is in: a node restarted meanwhile with the old pool in its
// flags re-registers the drive without changing its pool or the move
// (RegisterDrive keeps both).
//
// It is refused (ErrInvalid) when the pool does not exist, the drive is
// already in it, the pool has a class and the drive is of another, or
// the drive's pool would keep fewer drives in service than its
// protection's stripe width while some remain; ErrBadTransition when the
// drive is removed; ErrNotFound for an unknown drive. Moving a drive that
// is already moving to pool is a no-op; to another pool, it retargets
// the move. Resuming the drive (SetDriveStatus ready) cancels the move.
func (s *Store) MoveDrive(ctx context.Context, id DriveID, pool string) (DriveRecord, error) {
	target, err := s.GetPool(ctx, pool)
	if err != nil {
		return DriveRecord{}, err
	}
	d, _, err := s.updateDrive(ctx, id, fmt.Sprintf("move drive %s to pool %s", id, pool), func(d *DriveRecord) (bool, error) {
		switch {
		case d.Status == StatusRemoved:
			return false, fmt.Errorf("%w: drive %s is removed and cannot join pool %s: add its directory again as a new drive (weft drive add)", ErrBadTransition, id, pool)
		case d.Pool == pool && d.MoveTo == "":
			return false, fmt.Errorf("%w: drive %s is already in pool %s", ErrInvalid, id, pool)
		case d.MoveTo == pool:
			return false, nil
		case target.Class != "" && d.Class != target.Class:
			return false, fmt.Errorf("%w: drive %s is %s, pool %s is for %s drives: choose a pool of class %s, or change the pool's class (weft pool modify %s --class %s)",
				ErrInvalid, id, d.Class, pool, target.Class, d.Class, pool, d.Class)
		}
		if d.Pool != pool {
			if err := s.checkLeaving(ctx, *d); err != nil {
				return false, err
			}
		}
		d.Status, d.MoveTo, d.Changed = StatusDraining, pool, time.Now().UTC()
		if d.Pool == pool { // moving back where it is: cancel the move
			d.Status, d.MoveTo = StatusReady, ""
		}
		return true, nil
	})
	return d, err
}

// checkLeaving refuses (ErrInvalid) taking drive d out of its pool when
// the pool would keep some drives in service, but fewer than a stripe of
// its protection needs: its files could no longer be fully protected. A
// pool left with no drives is allowed (the drain then needs its files
// to have moved elsewhere first, and says so).
func (s *Store) checkLeaving(ctx context.Context, d DriveRecord) error {
	p, err := s.GetPool(ctx, d.Pool)
	if err != nil {
		return nil // a pool only a drive names: nothing to keep protected
	}
	prot, err := erasure.ParseProtection(p.Protection)
	if err != nil {
		return nil
	}
	drives, err := s.ListDrives(ctx)
	if err != nil {
		return err
	}
	left := 0
	for _, o := range drives {
		if o.ID != d.ID && o.Pool == d.Pool && o.Status != StatusRemoved && o.MoveTo == "" {
			left++
		}
	}
	if left > 0 && left < prot.Width() {
		return fmt.Errorf("%w: moving drive %s out of pool %s would leave it %d drives, fewer than its protection %s needs (%d): move all of its drives, or lower its protection first (weft pool modify %s --protection ...)",
			ErrInvalid, d.ID, d.Pool, left, prot, prot.Width(), d.Pool)
	}
	return nil
}

// FinishDriveMove ends the move of drive id once a drain has emptied it:
// a draining drive with MoveTo set joins that pool, ready. It reports
// whether it did; a drive that is not moving is left alone (false). It is
// idempotent.
func (s *Store) FinishDriveMove(ctx context.Context, id DriveID) (DriveRecord, bool, error) {
	return s.updateDrive(ctx, id, fmt.Sprintf("finish moving drive %s", id), func(d *DriveRecord) (bool, error) {
		if d.Status != StatusDraining || d.MoveTo == "" {
			return false, nil
		}
		d.Pool, d.MoveTo, d.Status, d.Changed = d.MoveTo, "", StatusReady, time.Now().UTC()
		return true, nil
	})
}
