package restripe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/meta"
)

// ProblemKind says what is wrong with one unit of a stripe, as
// VerifyStripe found it.
type ProblemKind string

// Kinds of UnitProblem. The first three mean the unit was not checked;
// the others that its stored bytes are wrong or gone (Damaged).
const (
	// ProblemUnplaced: the stripe map has no block for the unit (an
	// under-protected stripe).
	ProblemUnplaced ProblemKind = "unplaced"
	// ProblemDown: the unit's drive is down in the topology.
	ProblemDown ProblemKind = "down"
	// ProblemUnreadable: reading the unit failed for another reason than
	// its content (node unreachable, timeout, I/O error).
	ProblemUnreadable ProblemKind = "unreadable"
	// ProblemMissing: the drive has no block of that id.
	ProblemMissing ProblemKind = "missing"
	// ProblemChecksum: a data segment or the header fails its CRC32C, or
	// the block file is truncated (the drive checks these on read).
	ProblemChecksum ProblemKind = "checksum"
	// ProblemIdentity: the block belongs to another file, stripe or unit
	// than the map says, or the file under the block's name holds another
	// block (a swapped block).
	ProblemIdentity ProblemKind = "identity"
	// ProblemMapCRC: the unit's bytes or length do not match the CRC and
	// length its stripe map records.
	ProblemMapCRC ProblemKind = "map-crc"
	// ProblemInconsistent: the unit passes every check of its own but
	// disagrees with the other units: a parity unit that is not the
	// parity of the data units, or a copy that differs from the first
	// copy.
	ProblemInconsistent ProblemKind = "inconsistent"
)

// Damaged reports whether k means the unit's stored bytes are wrong or
// gone, as opposed to not checked; VerifyStripe with repair rewrites
// damaged units.
func (k ProblemKind) Damaged() bool {
	switch k {
	case ProblemMissing, ProblemChecksum, ProblemIdentity, ProblemMapCRC, ProblemInconsistent:
		return true
	}
	return false
}

// UnitProblem is one finding of VerifyStripe: which unit, where, and
// what is wrong with it.
type UnitProblem struct {
	LIN    meta.LIN     `json:"lin"`
	Stripe uint64       `json:"stripe"`
	Unit   int          `json:"unit"`
	Parity bool         `json:"parity"` // a parity unit, or a copy past the first
	Drive  meta.DriveID `json:"drive,omitempty"`
	Node   string       `json:"node,omitempty"`
	Block  string       `json:"block,omitempty"`
	Kind   ProblemKind  `json:"kind"`
	Detail string       `json:"detail"`
}

// String formats p for a report line.
func (p UnitProblem) String() string {
	return fmt.Sprintf("LIN %d stripe %d unit %d (drive %d, node %s, block %s): %s: %s",
		p.LIN, p.Stripe, p.Unit, p.Drive, p.Node, p.Block, p.Kind, p.Detail)
}

// VerifyResult is what VerifyStripe found in one stripe.
type VerifyResult struct {
	LIN    meta.LIN `json:"lin"`
	Stripe uint64   `json:"stripe"`
	// Gen is the generation of the map verified.
	Gen uint64 `json:"gen"`
	// Gone: the stripe no longer exists (a truncate removed it).
	Gone       bool   `json:"gone,omitempty"`
	Protection string `json:"protection,omitempty"`
	// Units is the stripe's width; Verified counts the units read whole
	// and found good.
	Units     int   `json:"units"`
	Verified  int   `json:"verified"`
	BytesRead int64 `json:"bytes_read"`
	// Problems lists every unit not verified good, in unit order (a unit
	// appears once).
	Problems []UnitProblem `json:"problems,omitempty"`
	// Repair is what the repair did, when one was asked for and a unit
	// was damaged.
	Repair *RepairResult `json:"repair,omitempty"`
	// Lost is set when too few units are left to read the stripe, for
	// good (damaged, missing or not placed: see ErrLost), with or without
	// a repair asked for.
	Lost *LostError `json:"-"`
}

// Damaged counts the problems whose kind is Damaged.
func (r VerifyResult) Damaged() int {
	n := 0
	for _, p := range r.Problems {
		if p.Kind.Damaged() {
			n++
		}
	}
	return n
}

// MaxFileProblems bounds the problems a FileVerifyResult lists; the
// counts go on past it.
const MaxFileProblems = 1000

// FileVerifyResult sums VerifyStripe over the stripes of one file.
type FileVerifyResult struct {
	LIN      meta.LIN `json:"lin"`
	Stripes  int      `json:"stripes"`
	Units    int      `json:"units"`
	Verified int      `json:"verified"`
	// BytesRead counts the unit bytes read, by repairs too.
	BytesRead int64 `json:"bytes_read"`
	// Damaged counts damaged units; Unchecked units not placed, on down
	// drives or unreadable.
	Damaged   int `json:"damaged"`
	Unchecked int `json:"unchecked"`
	// Repaired counts stripes whose repair committed a new map; Failed
	// stripes whose check or repair returned an error.
	Repaired int `json:"repaired"`
	Failed   int `json:"failed"`
	// Lost lists the stripes found lost, for the lost-data list.
	Lost []meta.LostStripe `json:"lost,omitempty"`
	// Problems lists the first MaxFileProblems problems; ProblemsDropped
	// counts the others.
	Problems        []UnitProblem `json:"problems,omitempty"`
	ProblemsDropped int           `json:"problems_dropped,omitempty"`
}

// maxVerifyAttempts bounds re-verifying a stripe whose map moved while it
// was read (blocks not found because a writer or restriper replaced them).
const maxVerifyAttempts = 3

// VerifyStripe checks the integrity of stripe index of file lin: it reads
// every placed unit (data and parity, or every copy) whole, lets the drive
// check the header and every segment CRC, checks that each block's header
// names this file, stripe and unit, that each unit matches the length and
// CRC of the stripe map, and that the units agree with each other: for
// erasure coding, the units beyond the first K good ones must equal what
// those K give (data units are trusted first, so a wrong parity unit is
// the one reported); for a mirror, every copy must equal the first good
// one. Each unit not found good is reported once, with its drive, node
// and block. Units on down drives and unplaced units are reported as not
// checked. A unit not found is re-checked against a fresh map first (a
// writer may have replaced the stripe meanwhile).
//
// With repair, damaged units (ProblemKind.Damaged) are rewritten from the
// others through RepairStripe's copy-on-write path (which also re-protects
// unplaced units and units on down drives of that stripe); the result is
// in VerifyResult.Repair and its error is returned.
//
// Problems are findings, not errors. Errors: client.ErrCorrupt for a
// malformed stripe map; client.ErrClosed; the repair's errors
// (client.ErrUnavailable, ...); meta's errors (meta.ErrNotFound: the file
// was deleted) and context errors, wrapped.
func (r *Restriper) VerifyStripe(ctx context.Context, lin meta.LIN, index uint64, repair bool) (VerifyResult, error) {
	vr := VerifyResult{LIN: lin, Stripe: index}
	got, err := r.meta.GetStripes(ctx, lin, index, 1)
	if err != nil {
		return vr, fmt.Errorf("restripe: verifying LIN %d stripe %d: %w", lin, index, err)
	}
	if len(got) == 0 || got[0].Index != index {
		vr.Gone = true
		return vr, nil
	}
	return r.verifyStripe(ctx, lin, got[0], repair)
}

// VerifyFile runs VerifyStripe over every stripe of lin (maps read in
// pages) and sums the results. A stripe whose check or repair fails (a
// malformed map, client.ErrUnavailable) does not stop the others: the
// first such error is returned (wrapped, with the count) after all were
// checked; context errors, client.ErrClosed and failures to read the maps
// stop at once.
func (r *Restriper) VerifyFile(ctx context.Context, lin meta.LIN, repair bool) (FileVerifyResult, error) {
	res := FileVerifyResult{LIN: lin}
	var first error
	err := r.eachStripe(ctx, lin, func(s meta.Stripe) error {
		vr, err := r.verifyStripe(ctx, lin, s, repair)
		res.Stripes++
		res.Units += vr.Units
		res.Verified += vr.Verified
		res.BytesRead += vr.BytesRead
		for _, p := range vr.Problems {
			if p.Kind.Damaged() {
				res.Damaged++
			} else {
				res.Unchecked++
			}
			if len(res.Problems) < MaxFileProblems {
				res.Problems = append(res.Problems, p)
			} else {
				res.ProblemsDropped++
			}
		}
		if vr.Repair != nil {
			res.BytesRead += vr.Repair.BytesRead
			if vr.Repair.Committed {
				res.Repaired++
			}
		}
		if vr.Lost != nil {
			res.Lost = append(res.Lost, vr.Lost.Stripe)
		}
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || errors.Is(err, client.ErrClosed) {
			return err
		}
		res.Failed++
		if first == nil {
			first = err
		}
		return nil
	})
	if err != nil {
		return res, err
	}
	if first != nil {
		return res, fmt.Errorf("restripe: verifying LIN %d: %d of %d stripes failed, the first: %w", lin, res.Failed, res.Stripes, first)
	}
	return res, nil
}

// verifyStripe is VerifyStripe with the stripe map already read.
func (r *Restriper) verifyStripe(ctx context.Context, lin meta.LIN, s meta.Stripe, repair bool) (VerifyResult, error) {
	var vr VerifyResult
	var read int64
	for attempt := 1; ; attempt++ {
		view, err := r.data.Snapshot(ctx)
		if err != nil {
			return VerifyResult{LIN: lin, Stripe: s.Index}, fmt.Errorf("restripe: verifying LIN %d stripe %d: %w", lin, s.Index, err)
		}
		vr, err = r.checkStripe(ctx, lin, s, view)
		read += vr.BytesRead
		vr.BytesRead = read
		if err != nil {
			return vr, err
		}
		missing := false
		for _, p := range vr.Problems {
			missing = missing || p.Kind == ProblemMissing
		}
		if !missing || attempt >= maxVerifyAttempts {
			break
		}
		got, err := r.meta.GetStripes(ctx, lin, s.Index, 1)
		if err != nil {
			return vr, fmt.Errorf("restripe: verifying LIN %d stripe %d: %w", lin, s.Index, err)
		}
		if len(got) == 0 || got[0].Index != s.Index {
			return VerifyResult{LIN: lin, Stripe: s.Index, Gone: true, BytesRead: read}, nil
		}
		if got[0].Gen == s.Gen {
			break
		}
		s = got[0]
	}
	vr.Lost = lostFrom(lin, s, vr)
	if !repair || vr.Damaged() == 0 {
		return vr, nil
	}
	damaged := map[unitID]string{}
	for _, p := range vr.Problems {
		if u := s.Units[p.Unit]; p.Kind.Damaged() {
			damaged[unitID{u.Drive, u.Block}] = fmt.Sprintf("%s: %s", p.Kind, p.Detail)
		}
	}
	rr, err := r.repairStripe(ctx, repairRequest{lin: lin, index: s.Index, damaged: damaged})
	vr.Repair = &rr
	vr.Lost = nil
	var lost *LostError
	if errors.As(err, &lost) {
		vr.Lost = lost
	}
	return vr, err
}

// lostFrom returns the LostError of stripe s if what VerifyStripe found
// leaves fewer units than a read needs: damaged and unplaced units are
// gone, units on down or unreachable drives may come back.
func lostFrom(lin meta.LIN, s meta.Stripe, vr VerifyResult) *LostError {
	l, err := client.StoredLayout(lin, s)
	if err != nil {
		return nil
	}
	gone := map[int]string{}
	for _, p := range vr.Problems {
		if p.Kind.Damaged() || p.Kind == ProblemUnplaced {
			gone[p.Unit] = fmt.Sprintf("%s: %s", p.Kind, p.Detail)
		}
	}
	return lostOf(lin, s, l.Needed(), gone)
}

// checkStripe reads every unit of s and checks it (see VerifyStripe).
func (r *Restriper) checkStripe(ctx context.Context, lin meta.LIN, s meta.Stripe, view *client.Snapshot) (VerifyResult, error) {
	vr := VerifyResult{LIN: lin, Stripe: s.Index, Gen: s.Gen, Units: len(s.Units)}
	l, err := client.StoredLayout(lin, s)
	if err != nil {
		return vr, err
	}
	vr.Protection = l.StripeProtection().String()
	problems := make([]*UnitProblem, len(s.Units))
	report := func(i int, kind ProblemKind, format string, args ...any) {
		u := s.Units[i]
		p := &UnitProblem{LIN: lin, Stripe: s.Index, Unit: i, Parity: i >= l.Data, Kind: kind, Detail: fmt.Sprintf(format, args...)}
		if u.Placed() {
			p.Drive, p.Node, p.Block = u.Drive, view.Node(u.Drive), u.Block.String()
		}
		problems[i] = p
	}
	data := make([][]byte, len(s.Units))
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for i, u := range s.Units {
		switch {
		case !u.Placed():
			report(i, ProblemUnplaced, "the stripe map has no block for it (under-protected stripe)")
			continue
		case !view.Up(u.Drive):
			report(i, ProblemDown, "drive %d is down: not checked", u.Drive)
			continue
		}
		ref := client.UnitRef{LIN: lin, Stripe: s.Index, Index: i, Unit: u}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, hdr, err := r.data.ReadBlock(ctx, view, ref)
			mu.Lock()
			defer mu.Unlock()
			vr.BytesRead += int64(len(b))
			switch {
			case err != nil:
				kind := classifyUnitErr(err)
				report(i, kind, "%v", err)
			case hdr.Owner != uint64(lin) || hdr.Stripe != s.Index || hdr.Unit != uint32(i):
				report(i, ProblemIdentity, "the block belongs to LIN %d stripe %d unit %d", hdr.Owner, hdr.Stripe, hdr.Unit)
			case len(b) != int(u.Length):
				report(i, ProblemMapCRC, "the block holds %d bytes, the stripe map says %d", len(b), u.Length)
			case crc32.Checksum(b, castagnoli()) != u.CRC:
				report(i, ProblemMapCRC, "the block's bytes do not match the CRC %08x of the stripe map", u.CRC)
			default:
				data[i] = b
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return vr, err
	}
	r.checkConsistent(l, data, report)
	for _, p := range problems {
		if p != nil {
			vr.Problems = append(vr.Problems, *p)
		}
	}
	for i := range data {
		if data[i] != nil && problems[i] == nil {
			vr.Verified++
		}
	}
	return vr, nil
}

// castagnoli returns the CRC32C table of the stripe maps' unit CRCs
// (crc32.MakeTable returns one shared table for it: the call is cheap).
func castagnoli() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// checkConsistent reports the good units (non-nil in data) that disagree
// with the others. Erasure coding: the first K good units (data units
// first) rebuild the rest, which must equal the units read. Mirror: every
// copy must equal the first good one.
func (r *Restriper) checkConsistent(l erasure.StripeLayout, data [][]byte, report func(int, ProblemKind, string, ...any)) {
	var good []int
	for i, b := range data {
		if b != nil {
			good = append(good, i)
		}
	}
	if len(good) <= l.Needed() || l.UnitLen == 0 {
		return // nothing to compare with
	}
	if l.Mirrored {
		ref := good[0]
		for _, i := range good[1:] {
			if !bytes.Equal(data[i], data[ref]) {
				report(i, ProblemInconsistent, "copy %d passes its checksums but differs from copy %d", i, ref)
			}
		}
		return
	}
	basis := good[:l.Needed()]
	shards := make([][]byte, l.Width())
	for _, i := range basis {
		shards[i] = data[i]
	}
	if err := r.codec.Reconstruct(shards, l); err != nil {
		return // cannot happen with K units of the right length
	}
	for _, i := range good[l.Needed():] {
		if bytes.Equal(shards[i], data[i]) {
			continue
		}
		what := "parity"
		if i < l.Data {
			what = "data"
		}
		report(i, ProblemInconsistent, "%s unit %d passes its checksums but differs from what units %v give", what, i, basis)
	}
}

// classifyUnitErr turns a failed block read into a problem kind.
func classifyUnitErr(err error) ProblemKind {
	var ce *drive.CorruptError
	switch {
	case errors.Is(err, drive.ErrNotFound):
		return ProblemMissing
	// The drive says so when the file under a block's name holds another
	// block (its header names another id).
	case errors.As(err, &ce) && ce.Segment == drive.HeaderSegment && strings.HasPrefix(ce.Reason, "header names block"):
		return ProblemIdentity
	case errors.Is(err, drive.ErrCorrupt):
		return ProblemChecksum
	}
	return ProblemUnreadable
}
