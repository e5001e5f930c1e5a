package drive

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/weftfs/weft/internal/failpoint"
)

// Put stores a block of length bytes read from data, under hdr.ID, with
// hdr's Owner, Stripe, Unit and Generation; it fills in the other header
// fields itself. data must yield exactly length bytes (ErrInvalid otherwise);
// it is streamed through a bounded buffer, never held whole in memory.
//
// Durability: with SyncAlways the block is on stable storage before Put
// returns nil (and its data is written with O_DIRECT where the file system
// allows, see direct_io.go). Crash safety: data and header go to a temp
// file in the block's directory which is then hard-linked to its final
// name, so a torn block is never visible; leftovers are removed by Open.
//
// Checksums: if hdr carries SegmentSize (== SegmentSize) and one CRC per
// segment (see AppendSegmentCRCs), they are stored as the data's checksums
// without computing them again: the writer computed them from its own copy
// of the data, so every later read checks the bytes end to end, against
// what the writer meant to store; a mismatch is corruption found by Get
// and Verify. Otherwise (SegmentSize zero, or CRCs that do not fit the
// length) Put computes them from the bytes it receives.
//
// Idempotency: if the block exists with the same length and segment CRCs,
// Put returns nil (a retried Put); if it exists with other content, it
// returns ErrExists. Other errors: ErrInvalid (zero id, bad length),
// ErrNoSpace (checked against the Capacity and with statfs first, and for
// ENOSPC while writing),
// ctx.Err() wrapped (the temp file is removed), ErrClosed.
//
// Failpoints: drive/put-before-sync, drive/put-before-link and
// drive/put-before-dirsync (see link); drive/put-lose-block, an
// injection point: the put returns nil without storing the block.
func (d *Drive) Put(ctx context.Context, hdr BlockHeader, data io.Reader, length int64) (err error) {
	if err := d.checkWrite("put", hdr.ID, length, true); err != nil {
		return err
	}
	start := d.counters.begin(OpWrite)
	var moved int64
	defer func() { d.counters.end(OpWrite, start, moved, err != nil) }()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("drive %v: put block %v: %w", d.ID(), hdr.ID, err)
	}
	// Injection point for the fsck job's layout checks (any action but
	// off; its error is not returned): the put is acknowledged and the
	// block not stored, as a disk that lost an acknowledged write would.
	if failpoint.Eval("drive/put-lose-block") != nil {
		if _, err := io.CopyN(io.Discard, data, length); err != nil {
			return fmt.Errorf("%w: drive %v: put block %v: reading the data: %v", ErrInvalid, d.ID(), hdr.ID, err)
		}
		return nil
	}

	dir, final := d.blockPath(hdr.ID)
	if stored, ok, err := d.storedHeader(final, hdr.ID); err != nil {
		return err
	} else if ok {
		return d.putExisting(ctx, stored, data, length)
	}

	nseg := segmentCount(length, SegmentSize)
	hlen := int64(headerLength(nseg))
	if err := d.reserveCapacity(hlen + length); err != nil {
		return err
	}
	var stored bool
	defer func() { d.releaseCapacity(hlen+length, stored) }()
	if err := d.checkSpace(hlen + length); err != nil {
		return err
	}
	tmp, err := d.writeTemp(ctx, dir, &hdr, data, nil, length, d.useDirect(length), d.sync == SyncAlways, &moved, "drive/put-before-sync")
	if err != nil {
		return err
	}
	defer os.Remove(tmp) // a no-op error once linked and removed
	// A linked block is counted in used by the deferred releaseCapacity.
	stored, err = d.link(tmp, nil, final, hdr, true, "drive/put-before-link", "drive/put-before-dirsync")
	return err
}

// checkWrite checks the arguments of a write (op: "put", "stage",
// "adopt") of block id with length bytes: the drive is open — and
// writable if owner, that is, the write stores a block rather than staging
// one — the id is set and the length within [0, MaxBlockLength].
func (d *Drive) checkWrite(op string, id BlockID, length int64, owner bool) error {
	if owner && d.readOnly {
		return fmt.Errorf("%w: drive %v (%s)", ErrReadOnly, d.ident.DriveID, d.path)
	}
	if err := d.checkOpen(); err != nil {
		return err
	}
	if id.IsZero() {
		return fmt.Errorf("%w: drive %v: %s: zero block id", ErrInvalid, d.ID(), op)
	}
	if length < 0 || length > MaxBlockLength {
		return fmt.Errorf("%w: drive %v: %s block %v: length %d outside [0, %d]", ErrInvalid, d.ID(), op, id, length, MaxBlockLength)
	}
	return nil
}

// storedHeader returns the header of block id stored at final and true,
// or false if it is not stored; a stored copy that cannot be read is
// ErrExists (a write must not replace it).
func (d *Drive) storedHeader(final string, id BlockID) (BlockHeader, bool, error) {
	stored, _, err := d.readHeaderFile(final, id)
	switch {
	case err == nil:
		return stored, true, nil
	case errors.Is(err, ErrNotFound):
		return BlockHeader{}, false, nil
	default:
		return BlockHeader{}, false, fmt.Errorf("%w: drive %v block %v: the stored copy is unreadable: %v", ErrExists, d.ID(), id, err)
	}
}

// writeTemp writes block hdr.ID — the header, completed here, and length
// bytes of data — to a new temp file in dir, with O_DIRECT if direct and
// synced to stable storage if sync, and returns the temp file's path.
// whole, if not nil, is the data in memory (data then reads it). It
// adds the bytes written to *moved. The data's segment CRCs are the ones
// hdr carries if they fit (see Put's Checksums paragraph), else computed
// here. On error nothing is left behind.
//
// Failpoint beforeSync (drive/put-before-sync, drive/stage-before-sync) is
// evaluated once the temp file is written, before it is synced: its error
// fails the write as a failed fdatasync would.
func (d *Drive) writeTemp(ctx context.Context, dir string, hdr *BlockHeader, data io.Reader, whole []byte, length int64, direct, sync bool, moved *int64, beforeSync string) (tmp string, err error) {
	nseg := segmentCount(length, SegmentSize)
	hlen := int64(headerLength(nseg))
	f, err := createTemp(dir, tempPrefix+hdr.ID.String()+"-", direct)
	if err != nil {
		return "", d.writeErr(hdr.ID, hlen+length, err)
	}
	if direct {
		defer func() {
			if err != nil {
				d.directFailed(err)
			}
		}()
	}
	name := f.Name()
	defer func() {
		if f != nil {
			f.Close()
		}
		if err != nil {
			os.Remove(name)
		}
	}()

	crcs := &hdr.SegmentCRCs
	if hdr.SegmentSize == SegmentSize && len(hdr.SegmentCRCs) == nseg {
		hdr.SegmentCRCs = slices.Clone(hdr.SegmentCRCs)
		crcs = nil // carried: see Put's Checksums paragraph
	} else {
		hdr.SegmentCRCs = make([]uint32, 0, nseg)
	}
	if whole != nil && crcs == nil && (!direct || isAligned(whole)) {
		// The bytes are in memory, their CRCs known and, for a direct
		// write, their buffer aligned: write them as they are, without
		// the copy through the drive's buffer.
		if _, err := f.WriteAt(whole, hlen); err != nil {
			return "", d.writeErr(hdr.ID, hlen+length, err)
		}
		*moved += length
	} else if err := d.copyData(ctx, f, hlen, hdr.ID, data, length, crcs, moved); err != nil {
		return "", err
	}
	hdr.Version = BlockFormatVersion
	hdr.Length = length
	hdr.SegmentSize = SegmentSize
	hdr.Created = time.Now()
	hb := hdr.encode()
	if direct {
		hb = append(alignedBuf(len(hb))[:0], hb...)
	}
	if _, err := f.WriteAt(hb, 0); err != nil {
		return "", d.writeErr(hdr.ID, hlen+length, err)
	}
	*moved += hlen
	// A crash here leaves a temp file, maybe not all on disk, that the
	// drive's next Open removes; nothing names it.
	if err := failpoint.Eval(beforeSync); err != nil {
		return "", d.writeErr(hdr.ID, hlen+length, err)
	}
	if sync {
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return "", d.writeErr(hdr.ID, hlen+length, err)
		}
	}
	cerr := f.Close()
	f = nil
	if cerr != nil {
		return "", d.writeErr(hdr.ID, hlen+length, cerr)
	}
	return name, nil
}

// link puts the written temp file tmp into place as block hdr.ID at final
// and counts the block; linked says it did (even if syncing the directory
// then failed). The caller removes tmp afterwards. A block stored
// meanwhile with the same content is success without linking (a retried
// write); with other content it is ErrExists. If open is not nil, it is
// tmp opened, and the file linked is the one it has open, whatever tmp
// names by then (Adopt links exactly the file it checked). With sync
// (and SyncAlways) the directory is synced once the block is linked.
//
// Failpoints: beforeLink (drive/put-before-link, drive/adopt-before-link)
// is evaluated before the link, the temp file synced; its error fails the
// write with nothing linked. beforeDirSync (drive/put-before-dirsync,
// drive/adopt-before-dirsync) is evaluated once the block is linked,
// before the temp name is removed and the directory synced; its error
// fails the write as a failed directory sync would (linked, maybe not
// durably: the caller's retry of the same content succeeds).
func (d *Drive) link(tmp string, open *os.File, final string, hdr BlockHeader, sync bool, beforeLink, beforeDirSync string) (linked bool, err error) {
	need := int64(headerLength(len(hdr.SegmentCRCs))) + hdr.Length
	// A crash here leaves a complete temp file that the next Open removes.
	if err := failpoint.Eval(beforeLink); err != nil {
		return false, d.writeErr(hdr.ID, need, err)
	}
	// Link, not rename: it fails instead of replacing a block that a
	// concurrent Put of the same id stored meanwhile.
	if err := linkFile(tmp, open, final); err != nil {
		if errors.Is(err, fs.ErrExist) {
			stored, _, serr := d.readHeaderFile(final, hdr.ID)
			if serr == nil && sameContent(stored, hdr.Length, hdr.SegmentCRCs) {
				return false, nil
			}
			return false, fmt.Errorf("%w: drive %v block %v was stored concurrently with other content", ErrExists, d.ID(), hdr.ID)
		}
		return false, d.writeErr(hdr.ID, need, err)
	}
	d.blocks.Add(1)
	// A crash here leaves the block under both names, its own and the
	// temp one (which the next Open removes). The write was not
	// acknowledged, so no stripe map names the block: its writer queued
	// it for deletion or the collect job finds it.
	if err := failpoint.Eval(beforeDirSync); err != nil {
		return true, d.writeErr(hdr.ID, need, err)
	}
	os.Remove(tmp)
	if sync && d.sync == SyncAlways {
		// On failure the block may or may not survive a crash; the caller
		// retries, and a retried write of the same content succeeds.
		if err := syncDir(filepath.Dir(final)); err != nil {
			return true, d.writeErr(hdr.ID, need, err)
		}
	}
	return true, nil
}

// linkFile hard-links tmp, or the file open has open, to final.
func linkFile(tmp string, open *os.File, final string) error {
	if open == nil {
		return os.Link(tmp, final)
	}
	// linkat(2) of /proc/self/fd/N with AT_SYMLINK_FOLLOW links the open
	// file itself; without /proc, tmp's name.
	err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(open.Fd())), unix.AT_FDCWD, final, unix.AT_SYMLINK_FOLLOW)
	if errors.Is(err, syscall.ENOENT) {
		if _, serr := os.Stat("/proc/self/fd"); serr != nil {
			return os.Link(tmp, final)
		}
	}
	if err != nil {
		return &os.LinkError{Op: "link", Old: tmp, New: final, Err: err}
	}
	return nil
}

// copyData copies length bytes from data to f at offset off, appending one
// CRC32C per segment to *crcs (unless crcs is nil) and adding the bytes
// written to *moved. It fails with ErrInvalid if data is shorter or longer
// than length.
func (d *Drive) copyData(ctx context.Context, f *os.File, off int64, id BlockID, data io.Reader, length int64, crcs *[]uint32, moved *int64) error {
	bp := d.bufs.Get().(*[]byte)
	defer d.bufs.Put(bp)
	buf := *bp
	tab := castagnoli()
	for done := int64(0); done < length; {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("drive %v: put block %v: %w", d.ID(), id, err)
		}
		chunk := buf[:min(int64(len(buf)), length-done)]
		if err := readData(data, chunk, done, length); err != nil {
			return fmt.Errorf("drive %v: put block %v: %w", d.ID(), id, err)
		}
		for s := 0; crcs != nil && s < len(chunk); s += SegmentSize {
			*crcs = append(*crcs, crc32.Checksum(chunk[s:min(s+SegmentSize, len(chunk))], tab))
		}
		if f != nil {
			if _, err := f.WriteAt(chunk, off+done); err != nil {
				return d.writeErr(id, off+length, err)
			}
			*moved += int64(len(chunk))
		}
		done += int64(len(chunk))
	}
	var one [1]byte
	if n, _ := io.ReadFull(data, one[:]); n > 0 {
		return fmt.Errorf("%w: drive %v: put block %v: data is longer than the announced %d bytes", ErrInvalid, d.ID(), id, length)
	}
	return nil
}

// readData fills chunk from data; a short read is ErrInvalid.
func readData(data io.Reader, chunk []byte, done, length int64) error {
	n, err := io.ReadFull(data, chunk)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: data ended after %d of the announced %d bytes", ErrInvalid, done+int64(n), length)
	default:
		return fmt.Errorf("reading data: %w", err)
	}
}

// putExisting handles a Put of an id that is stored: it consumes data to
// compute its CRCs and succeeds only if they match the stored ones.
func (d *Drive) putExisting(ctx context.Context, stored BlockHeader, data io.Reader, length int64) error {
	if stored.Length != length {
		return fmt.Errorf("%w: drive %v block %v is stored with length %d, put has %d", ErrExists, d.ID(), stored.ID, stored.Length, length)
	}
	crcs := make([]uint32, 0, len(stored.SegmentCRCs))
	var moved int64
	if err := d.copyData(ctx, nil, 0, stored.ID, data, length, &crcs, &moved); err != nil {
		return err
	}
	if !sameContent(stored, length, crcs) {
		return fmt.Errorf("%w: drive %v block %v is stored with other content", ErrExists, d.ID(), stored.ID)
	}
	return nil
}

func sameContent(h BlockHeader, length int64, crcs []uint32) bool {
	return h.Length == length && h.SegmentSize == SegmentSize && slices.Equal(h.SegmentCRCs, crcs)
}

// writeErr wraps an error of writing a block of need bytes, turning ENOSPC
// into ErrNoSpace.
func (d *Drive) writeErr(id BlockID, need int64, err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: drive %v (%s) ran out of space writing block %v of %d bytes: %v",
			ErrNoSpace, d.ID(), d.path, id, need, err)
	}
	return fmt.Errorf("drive %v: writing block %v: %w", d.ID(), id, err)
}
