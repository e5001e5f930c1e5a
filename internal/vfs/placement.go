package vfs

import (
	"context"
	"path"

	"github.com/weftfs/weft/internal/meta"
)

// Placer chooses where a new regular file's data goes, from what is
// known when it is created: its path and name, owner, group and mode
// (the size, times and the rest are not known yet). The mount wires it
// to the installed pool policy (its SET POOL rules); without one, or
// when it does not place a file, the file takes its parent directory's
// pool and protection.
type Placer interface {
	// Place returns where f goes; ok false leaves it to the parent. An
	// error fails the create: it should wrap one of vfs's classes
	// (ErrNoSpace for a pool that cannot take data).
	Place(ctx context.Context, f NewFile) (p Placement, ok bool, err error)
}

// NewFile is what is known of a file when it is created.
type NewFile struct {
	// Path returns the file's path from the root ("/a/b"). It costs a
	// walk up the directory tree: call it only if the rules read it.
	Path func() (string, error)
	// Name is the file's name in its directory.
	Name string
	// UID and GID are its owner and group; Mode its POSIX st_mode, type
	// bits included (0o100644 for a regular file).
	UID, GID, Mode uint32
}

// Placement is where a Placer puts a file.
type Placement struct {
	// Pool is the pool its data goes to.
	Pool string
	// Protection is a protection spec ("ec:4+2"), or "" for the pool's
	// default.
	Protection string
}

// modeRegular is S_IFREG.
const modeRegular = 0o100000

// placeNew asks the Placer where a new regular file named name in parent
// goes and sets ni's pool and protection; without a Placer, or when it
// places nothing, ni keeps the parent's.
func (fs *FS) placeNew(ctx context.Context, parent meta.LIN, name string, ni *meta.NewInode) error {
	if fs.cfg.Placer == nil || ni.Type != meta.TypeFile {
		return nil
	}
	c := CallerFrom(ctx)
	f := NewFile{Name: name, UID: c.UID, GID: c.GID, Mode: modeRegular | ni.Mode&0o7777,
		Path: func() (string, error) {
			dir, err := fs.m.Path(ctx, parent)
			if err != nil {
				return "", err
			}
			return path.Join(dir, name), nil
		}}
	pl, ok, err := fs.cfg.Placer.Place(ctx, f)
	if err != nil || !ok {
		return err
	}
	prot, err := meta.ParseProtection(pl.Protection)
	if err != nil {
		return err
	}
	ni.Pool, ni.Protection, ni.PoolDefault = pl.Pool, prot, pl.Protection == ""
	return nil
}
