package drive

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
)

// ErrReadOnly is returned by Put and Delete on a drive opened with
// OpenReadOnly.
var ErrReadOnly = errors.New("drive: opened read-only")

// OpenReadOnly opens the drive in directory path for reading only, beside
// the node that owns it: a client on the same machine as a node reads its
// blocks straight from the file system (a short-circuit read) instead of
// through the node's block service. It takes no lock, removes nothing and
// does not scan; Get, Stat, Verify and List work, Put and Delete fail with
// ErrReadOnly, and Usage counts nothing. Stage writes a block for the owner
// to Adopt (a staged write, see staged.go). The identity must name cluster
// and drive id want (ErrOtherCluster, ErrBadIdentity otherwise), so that a
// path that now holds another drive is never read as this one.
//
// Reads see what the owner has renamed into place: a block is either
// whole or absent, as for the owner's own reads.
func OpenReadOnly(path, clusterID string, want ID) (*Drive, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("drive: opening %s: %w", path, err)
	}
	ident, err := readIdentity(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s has no drive identity", ErrBadIdentity, abs)
	}
	if err != nil {
		return nil, err
	}
	if ident.ClusterID != clusterID {
		return nil, fmt.Errorf("%w: %s is a drive of cluster %q, not %q", ErrOtherCluster, abs, ident.ClusterID, clusterID)
	}
	if ident.DriveID != want {
		return nil, fmt.Errorf("%w: %s is drive %v, not %v", ErrBadIdentity, abs, ident.DriveID, want)
	}
	d := &Drive{path: abs, ident: ident, readOnly: true, log: slog.New(slog.DiscardHandler), headers: &headerCache{}}
	d.bufs.New = func() any { b := alignedBuf(ioBufferSize); return &b }
	return d, nil
}
