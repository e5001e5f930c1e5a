package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/drive"
)

var _ admin.DriveAdder = (*Server)(nil)

// openDriveList returns the node's open drives (a copy).
func (s *Server) openDriveList() []*drive.Drive {
	s.drivesMu.Lock()
	defer s.drivesMu.Unlock()
	return slices.Clone(s.drives)
}

// openDrives opens (first use: formats) every configured drive, then every
// drive added at run time and listed in the data directory's added-drives
// file that is not also configured; it registers each in the control
// plane, creating its pool if missing, and publishes its usage once. The
// drives opened are in s.drives, closed by shutdown, also on error.
func (s *Server) openDrives(ctx context.Context) error {
	s.drivesMu.Lock()
	defer s.drivesMu.Unlock()
	configured := map[string]bool{}
	for _, spec := range s.cfg.Drives {
		configured[spec.Path] = true
		if err := s.openLocal(ctx, spec); err != nil {
			return err
		}
	}
	if s.cfg.DataDir == "" {
		return nil
	}
	added, err := ReadAddedDrives(s.cfg.DataDir)
	if err != nil {
		return err
	}
	for _, a := range added {
		if configured[a.Path] {
			s.log.Info("drive added at run time is also configured; opened once, as configured", "path", a.Path)
			continue
		}
		if err := s.openLocal(ctx, a.Spec()); err != nil {
			return fmt.Errorf("%w (drive %s was added at run time and is listed in %s: repair it, or remove its entry from that file to forget it)",
				err, a.Path, filepath.Join(s.cfg.DataDir, AddedDrivesFile))
		}
	}
	return nil
}

// openLocal opens spec's drive (locking its directory) and keeps it with
// its spec for registerDrives; the caller holds drivesMu. A drive locked by
// another process means that process serves it: most likely this node is
// running already.
func (s *Server) openLocal(ctx context.Context, spec DriveSpec) error {
	d, err := s.openDrive(ctx, spec)
	if errors.Is(err, drive.ErrLocked) {
		return fmt.Errorf("%w: is node %s already running on this machine? (stop it first)", err, s.cfg.Name)
	}
	if err != nil {
		return err
	}
	s.drives = append(s.drives, d)
	s.specs = append(s.specs, spec)
	return nil
}

// held returns the ids of the drives this process has open.
func (s *Server) held() []cluster.DriveID {
	s.drivesMu.Lock()
	defer s.drivesMu.Unlock()
	var ids []cluster.DriveID
	for _, d := range s.drives {
		ids = append(ids, d.ID())
	}
	return ids
}

// registerDrives records the drives opened at startup in the control
// plane and publishes their usage, once the node is registered.
func (s *Server) registerDrives(ctx context.Context) error {
	s.drivesMu.Lock()
	defer s.drivesMu.Unlock()
	for i, d := range s.drives {
		if _, err := s.registerDrive(ctx, d, s.specs[i]); err != nil {
			return err
		}
		s.publishDrive(ctx, d)
	}
	return nil
}

// openDrive opens (first use: formats) the drive of spec, whose fields are
// normalized; a new drive's id comes from the control plane.
func (s *Server) openDrive(ctx context.Context, spec DriveSpec) (*drive.Drive, error) {
	class, err := drive.ParseClass(spec.Class)
	if err != nil {
		return nil, err
	}
	return drive.Open(spec.Path, drive.Options{
		ClusterID: s.store.ClusterID(),
		Node:      s.cfg.Name,
		Class:     class,
		Capacity:  int64(spec.Capacity),
		Logger:    s.log,
		AllocID:   func() (drive.ID, error) { return s.store.AllocDriveID(ctx) },
	})
}

// registerDrive records d in the control plane, creating its pool with
// the default protection if missing (as a configured drive does). A known
// drive keeps its registered pool. A new one records whether the
// namespace had allocated anything yet (cluster.DriveRecord.JoinedEmpty:
// the drives of a new cluster need no multiscan); a namespace that cannot
// say counts as storing data.
func (s *Server) registerDrive(ctx context.Context, d *drive.Drive, spec DriveSpec) (cluster.DriveRecord, error) {
	if _, err := s.store.CreatePool(ctx, spec.Pool, s.cfg.DefaultProtection, true); err != nil {
		return cluster.DriveRecord{}, err
	}
	st, err := s.meta.StatFS(ctx)
	rec, err := s.store.RegisterDrive(ctx, cluster.DriveRecord{
		ID: d.ID(), Node: s.cfg.Name, Path: spec.Path, Class: spec.Class, Pool: spec.Pool,
		JoinedEmpty: err == nil && st.Total.Allocated == 0,
	})
	if err != nil {
		return rec, err
	}
	if rec.Pool != spec.Pool {
		s.log.Warn("drive stays in its registered pool", "drive", rec.ID, "pool", rec.Pool, "configured", spec.Pool)
	}
	return rec, nil
}

// AddDrive opens directory req.Path as a drive of this node while it runs
// (weft drive add): with the checks of startup (drive.Open refuses another
// cluster's or node's drive and a non-empty foreign directory), and
// refusing a path this node already uses (drive.ErrLocked: the path of one
// of its drives, inside one, or containing one; its data directory or the
// etcd member's files in it) and a
// drive whose record says removed (admin.ErrRefused). A new directory gets
// a fresh drive id from the control plane. The drive is recorded in the
// added-drives file of the data directory first (so that a crash after
// this point still brings it back at startup), then registered (its pool
// created if missing, as at startup), served by the block service and its
// usage published, so that clients place blocks on it at their next
// topology refresh. On an error nothing stays changed but the drive's
// identity file, which a retry reuses.
//
// Locking: adds are serialised by drivesMu; block I/O goes on meanwhile.
func (s *Server) AddDrive(ctx context.Context, req admin.AddDriveRequest) (admin.AddDriveReply, error) {
	if strings.ContainsFunc(req.Path, unicode.IsControl) {
		return admin.AddDriveReply{}, fmt.Errorf("%w: drive add: path %q holds control characters (a NUL byte, a newline); give the directory's absolute path on node %s", drive.ErrInvalid, req.Path, s.cfg.Name)
	}
	if req.Path == "" || !filepath.IsAbs(req.Path) {
		return admin.AddDriveReply{}, fmt.Errorf("%w: drive add: path %q is not absolute; give the directory's absolute path on node %s", drive.ErrInvalid, req.Path, s.cfg.Name)
	}
	spec := DriveSpec{Path: filepath.Clean(req.Path), Class: req.Class, Pool: req.Pool, Capacity: Size(req.Capacity)}
	if err := spec.normalize(); err != nil {
		if !errors.Is(err, drive.ErrInvalid) {
			err = fmt.Errorf("%w: %w", drive.ErrInvalid, err)
		}
		return admin.AddDriveReply{}, err
	}
	if s.cfg.DataDir == "" {
		return admin.AddDriveReply{}, fmt.Errorf("%w: node %s has no data directory (--data-dir) to remember a drive added at run time; restart it with --data-dir, or give the drive with --drive",
			admin.ErrRefused, s.cfg.Name)
	}
	s.drivesMu.Lock()
	defer s.drivesMu.Unlock()
	select {
	case <-s.stop:
		return admin.AddDriveReply{}, fmt.Errorf("%w: node %s is stopping", admin.ErrRefused, s.cfg.Name)
	default:
	}
	if err := s.checkPathFree(spec.Path); err != nil {
		return admin.AddDriveReply{}, err
	}
	// Before the directory is formatted as a drive: a refusal leaves it
	// as it was.
	if err := s.store.CheckDriveClass(ctx, spec.Pool, spec.Class, spec.Path); err != nil {
		return admin.AddDriveReply{}, err
	}
	d, err := s.openDrive(ctx, spec)
	var pe *fs.PathError
	if errors.As(err, &pe) && !errors.Is(err, drive.ErrInvalid) {
		// The directory named cannot be made or opened (a file in the
		// way, no permission): the request's fault, not the node's.
		return admin.AddDriveReply{}, fmt.Errorf("%w: drive add: cannot use %s on node %s: %w", drive.ErrInvalid, spec.Path, s.cfg.Name, err)
	}
	if err != nil {
		return admin.AddDriveReply{}, err
	}
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()
	if old, err := s.store.GetDrive(ctx, d.ID()); err == nil && old.Status == cluster.StatusRemoved {
		return admin.AddDriveReply{}, fmt.Errorf("%w: %s is drive %v, which was removed from the cluster; wipe the directory to add it as a new drive",
			admin.ErrRefused, spec.Path, d.ID())
	} else if err != nil && !errors.Is(err, cluster.ErrNotFound) {
		return admin.AddDriveReply{}, err
	}

	added, err := ReadAddedDrives(s.cfg.DataDir)
	if err != nil {
		return admin.AddDriveReply{}, err
	}
	prev := slices.Clone(added)
	added = slices.DeleteFunc(added, func(a AddedDrive) bool { return a.Path == spec.Path })
	added = append(added, AddedDrive{
		Path: spec.Path, Class: spec.Class, Pool: spec.Pool, Capacity: int64(spec.Capacity),
		ID: d.ID().String(), Added: time.Now().UTC().Truncate(time.Second),
	})
	if err := WriteAddedDrives(s.cfg.DataDir, added); err != nil {
		return admin.AddDriveReply{}, err
	}
	undo := func() {
		if err := WriteAddedDrives(s.cfg.DataDir, prev); err != nil {
			s.log.Warn("drive add failed and its entry could not be taken out of the added-drives file; the drive will be opened at the next start",
				"path", spec.Path, "err", err)
		}
	}
	rec, err := s.registerDrive(ctx, d, spec)
	if err != nil {
		undo()
		return admin.AddDriveReply{}, err
	}
	if err := s.blocks.Add(d); err != nil {
		undo()
		return admin.AddDriveReply{}, fmt.Errorf("%w: %w", admin.ErrRefused, err)
	}
	ok = true
	s.drives = append(s.drives, d)
	s.specs = append(s.specs, spec)
	s.publishDrive(ctx, d)
	s.log.Info("drive added at run time", "drive", d.ID(), "path", spec.Path, "class", spec.Class, "pool", rec.Pool, "capacity", int64(spec.Capacity))
	return admin.AddDriveReply{Drive: rec, Capacity: int64(spec.Capacity)}, nil
}

// checkPathFree refuses path if it is, is inside, or contains one of this
// node's drives, if it is or contains its data directory, or lies in the
// embedded etcd member's directory. The caller holds drivesMu.
func (s *Server) checkPathFree(path string) error {
	// Drives may live below the data directory (local clusters put them
	// there), but not be it, contain it or sit in the etcd member's files.
	if dataDir, err := filepath.Abs(s.cfg.DataDir); err == nil {
		etcdDir := filepath.Join(dataDir, "etcd")
		if path == dataDir || within(dataDir, path) || path == etcdDir || within(path, etcdDir) {
			return fmt.Errorf("%w: %s overlaps node %s's own state in %s; pick another directory", drive.ErrLocked, path, s.cfg.Name, dataDir)
		}
	}
	for _, d := range s.drives {
		switch {
		case d.Path() == path:
			return fmt.Errorf("%w: %s is already drive %v of node %s (see weft drive list)", drive.ErrLocked, path, d.ID(), s.cfg.Name)
		case within(path, d.Path()):
			return fmt.Errorf("%w: %s is inside drive %v (%s) of node %s; pick a directory outside every drive", drive.ErrLocked, path, d.ID(), d.Path(), s.cfg.Name)
		case within(d.Path(), path):
			return fmt.Errorf("%w: %s contains drive %v (%s) of node %s; pick a directory outside every drive", drive.ErrLocked, path, d.ID(), d.Path(), s.cfg.Name)
		}
	}
	return nil
}

// within reports whether path is strictly inside dir (both clean and
// absolute).
func within(path, dir string) bool {
	return strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}
