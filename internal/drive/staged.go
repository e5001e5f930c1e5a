package drive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Staged writes. A client on the machine of the node that owns a drive
// writes a block's bytes into the drive directory itself (Stage, on a
// handle from OpenReadOnly) and then asks the owner, by a small RPC, to
// take the file in (Adopt): the owner checks it, accounts for it and links
// it into place. The data never crosses a socket, which on a machine that
// runs both the client and the nodes (a local cluster, a protocol gateway
// on a storage node) saves the copies in and out of the kernel that a
// remote put costs on both sides; it is the write-side counterpart of the
// short-circuit reads. The owner still decides: a staged file it refuses
// (no space, a header that does not match, a name that is not a temp file
// of that block) is removed and the put fails, as a refused Put would.
//
// A staged file is an ordinary temp file of the drive (tempPrefix), so one
// left by a client that died between Stage and Adopt is removed by the
// owner's next Open, like the temp file of an interrupted Put.

// Stage writes block hdr.ID with data to a new temp file in the block's
// directory — header and data in the block format, through the page
// cache, synced — and returns the file's name (a
// base name) for the owner's Adopt. hdr's segment CRCs are used if it
// carries them (see Put), else computed. Stage neither reserves capacity
// nor counts the block: the owner does both at Adopt. It needs write access
// to the drive directory; the error otherwise wraps fs.ErrPermission.
func (d *Drive) Stage(ctx context.Context, hdr BlockHeader, data []byte) (string, error) {
	return d.stage(ctx, hdr, data, true)
}

// StageUnsynced is Stage without the fdatasync: the file's bytes may
// still be only in the page cache when it returns. It is for a client
// that adopts the block with AdoptUnsynced and makes the drive's file
// system durable itself (FS, syncfs(2)) before anything names the block
// — one sync for many small blocks instead of two for each. A crash of
// the machine before that sync may leave the block missing, or empty or
// zeros where its bytes were (ext4 and XFS expose no stale data): nothing
// names it, and the collect job removes it (CorruptError.Torn) or, whole,
// like any unnamed block.
func (d *Drive) StageUnsynced(ctx context.Context, hdr BlockHeader, data []byte) (string, error) {
	return d.stage(ctx, hdr, data, false)
}

// FS opens the drive's directory for syncfs(2) of the file system it is
// on (see StageUnsynced): the caller keeps it open from before its first
// unsynced write, so that the syncfs reports any write-back error on the
// file system since then (Linux samples the error at open), and closes it
// when done.
func (d *Drive) FS() (*os.File, error) {
	f, err := os.Open(d.path)
	if err != nil {
		return nil, fmt.Errorf("drive %v: opening the drive directory to sync its file system: %w", d.ID(), err)
	}
	return f, nil
}

// stage is Stage, and StageUnsynced when not sync.
func (d *Drive) stage(ctx context.Context, hdr BlockHeader, data []byte, sync bool) (string, error) {
	length := int64(len(data))
	if err := d.checkWrite("stage", hdr.ID, length, false); err != nil {
		return "", err
	}
	need := int64(headerLength(segmentCount(length, SegmentSize))) + length
	if err := d.checkSpace(need); err != nil {
		return "", err
	}
	dir, _ := d.blockPath(hdr.ID)
	var moved int64
	// Not O_DIRECT, unlike Put: Adopt reads the whole file back to check
	// every segment, and a read of pages still cached costs memory
	// bandwidth where a direct write would make it a second pass over the
	// disk (sequential writes through a mount ran at 0.68× of the
	// unverified adoption that way). Adopt drops the pages once it has
	// linked the file, so the cache is not filled with written blocks
	// either.
	tmp, err := d.writeTemp(ctx, dir, &hdr, bytes.NewReader(data), data, length, false, sync, &moved, "drive/stage-before-sync")
	if err != nil {
		return "", err
	}
	if err := d.giveToOwner(tmp); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return filepath.Base(tmp), nil
}

// giveToOwner makes a staged file the drive directory's owner's (the
// server's user), as Adopt requires, when this process runs as root and
// the server does not; otherwise the file is already the right user's.
func (d *Drive) giveToOwner(tmp string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	st, err := os.Stat(d.path)
	if err != nil {
		return fmt.Errorf("drive: %w", err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok || sys.Uid == 0 {
		return nil
	}
	if err := os.Lchown(tmp, int(sys.Uid), int(sys.Gid)); err != nil {
		return fmt.Errorf("drive %v: giving a staged block to the drive's owner (uid %d): %w", d.ID(), sys.Uid, err)
	}
	return nil
}

// Unstage removes a staged file that will not be adopted (the Adopt RPC
// failed in transit). A missing file is not an error: the owner removes
// what it refuses.
func (d *Drive) Unstage(id BlockID, name string) error {
	tmp, err := d.stagedPath(id, name)
	if err != nil {
		return err
	}
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("drive %v: removing staged block %v: %w", d.ID(), id, err)
	}
	return nil
}

// stagedPath returns the path of staged file name of block id, which must
// be a temp file of that block in its directory.
func (d *Drive) stagedPath(id BlockID, name string) (string, error) {
	if id.IsZero() {
		return "", fmt.Errorf("%w: drive %v: staged block: zero block id", ErrInvalid, d.ID())
	}
	prefix := tempPrefix + id.String() + "-"
	if name != filepath.Base(name) || !strings.HasPrefix(name, prefix) || len(name) == len(prefix) {
		return "", fmt.Errorf("%w: drive %v: %q is not a staged file of block %v (want %s<suffix>)", ErrInvalid, d.ID(), name, id, prefix)
	}
	dir, _ := d.blockPath(id)
	return filepath.Join(dir, name), nil
}

// Adopt takes in the staged file name of block hdr.ID (see Stage): it
// checks that the file is a complete, intact block whose header matches
// hdr (owner, stripe, unit, generation, length; segment CRCs if hdr
// carries them) and length — reading it once, to check the CRC of every
// segment as Verify does —, that it is a regular file owned by the
// drive's owner (the server's user: a file another local user managed to
// place there is never taken in), that it fits the drive's Capacity and
// leaves the reserve free, and links the file it checked into place with
// the durability of Put. The staged file is removed whatever the outcome.
// Adopting a block that is already stored with the same content succeeds
// (a retried write); with other content it is ErrExists. A file that is
// missing or not a valid block, or not the owner's, is ErrInvalid; one
// whose header or data do not match their checksums is ErrCorrupt.
func (d *Drive) Adopt(ctx context.Context, hdr BlockHeader, name string, length int64) error {
	return d.adopt(ctx, hdr, name, length, true)
}

// AdoptUnsynced is Adopt of a file staged with StageUnsynced: it links
// the block without syncing its directory, leaving both the data and the
// name to the client's syncfs of the drive's file system.
func (d *Drive) AdoptUnsynced(ctx context.Context, hdr BlockHeader, name string, length int64) error {
	return d.adopt(ctx, hdr, name, length, false)
}

// adopt is Adopt, and AdoptUnsynced when not sync.
func (d *Drive) adopt(ctx context.Context, hdr BlockHeader, name string, length int64, sync bool) (err error) {
	if err := d.checkWrite("adopt", hdr.ID, length, true); err != nil {
		return err
	}
	tmp, err := d.stagedPath(hdr.ID, name)
	if err != nil {
		return err
	}
	removed := false // by link, once the block is stored under its name
	defer func() {
		if !removed {
			_ = unix.Unlink(tmp)
		}
	}()
	start := d.counters.begin(OpWrite)
	var moved int64
	defer func() { d.counters.end(OpWrite, start, moved, err != nil) }()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("drive %v: adopt block %v: %w", d.ID(), hdr.ID, err)
	}

	f, err := os.OpenFile(tmp, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: drive %v: staged file %s of block %v is missing", ErrInvalid, d.ID(), name, hdr.ID)
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%w: drive %v: staged file %s of block %v is a symbolic link", ErrInvalid, d.ID(), name, hdr.ID)
	case err != nil:
		return fmt.Errorf("drive %v: opening staged block %v: %w", d.ID(), hdr.ID, err)
	}
	defer f.Close()
	if err := d.checkStagedFile(f, name, hdr.ID); err != nil {
		return err
	}
	staged, info, err := d.readHeader(f, hdr.ID)
	if err != nil {
		return err
	}
	if staged.Owner != hdr.Owner || staged.Stripe != hdr.Stripe || staged.Unit != hdr.Unit ||
		staged.Generation != hdr.Generation || staged.Length != length ||
		(len(hdr.SegmentCRCs) > 0 && !slices.Equal(staged.SegmentCRCs, hdr.SegmentCRCs)) {
		return fmt.Errorf("%w: drive %v: staged file %s does not hold the block announced: header owner %d stripe %d unit %d generation %d length %d, adopt names owner %d stripe %d unit %d generation %d length %d",
			ErrInvalid, d.ID(), name, staged.Owner, staged.Stripe, staged.Unit, staged.Generation, staged.Length,
			hdr.Owner, hdr.Stripe, hdr.Unit, hdr.Generation, length)
	}
	var read int64
	if err := d.checkData(ctx, f, &staged, info, &read, false); err != nil { // Stage left the pages cached
		return fmt.Errorf("drive %v: staged file %s: %w", d.ID(), name, err)
	}

	_, final := d.blockPath(hdr.ID)
	if stored, ok, err := d.storedHeader(final, hdr.ID); err != nil {
		return err
	} else if ok {
		if sameContent(stored, staged.Length, staged.SegmentCRCs) {
			return nil
		}
		return fmt.Errorf("%w: drive %v block %v is stored with other content", ErrExists, d.ID(), hdr.ID)
	}

	size := info.Size()
	if err := d.reserveCapacity(size); err != nil {
		return err
	}
	var stored bool
	defer func() { d.releaseCapacity(size, stored) }()
	// The staged bytes are already on the file system: what must hold is
	// that they left the drive's reserve untouched.
	if err := d.checkSpace(1); err != nil {
		return err
	}
	// Stage synced the data; link makes the block's name durable (or,
	// unsynced, leaves both to the client's syncfs).
	stored, err = d.link(tmp, f, final, staged, sync, "drive/adopt-before-link", "drive/adopt-before-dirsync")
	if stored {
		moved = size
	}
	removed = stored && err == nil
	// The pages are clean (Stage synced them) and read back once: keep
	// the cache for what is read, as a direct write would have. (Dirty
	// pages of an unsynced stage are written back from here, which the
	// client's syncfs then waits for.)
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	return err
}

// checkStagedFile refuses a staged file that is not a regular file with
// one link, owned by the user the drive's process runs as.
func (d *Drive) checkStagedFile(f *os.File, name string, id BlockID) error {
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("drive %v: stat staged block %v: %w", d.ID(), id, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%w: drive %v: staged file %s of block %v is not a regular file", ErrInvalid, d.ID(), name, id)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if euid := os.Geteuid(); int(st.Uid) != euid {
		return fmt.Errorf("%w: drive %v: staged file %s of block %v is owned by uid %d, not by this server's user (uid %d): it was not staged by a weft client of this machine",
			ErrInvalid, d.ID(), name, id, st.Uid, euid)
	}
	if st.Nlink != 1 {
		return fmt.Errorf("%w: drive %v: staged file %s of block %v has %d links: it is not a file Stage wrote", ErrInvalid, d.ID(), name, id, st.Nlink)
	}
	return nil
}
