package bench

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/weftfs/weft/internal/failpoint"
	"github.com/weftfs/weft/internal/meta"
)

// The test namespace of weft bench populate: the mix of a namespace
// checker's performance test, written straight into the metadata store
// (meta.Bulk, many inodes per transaction). Files have no data (size 0).
//
//	UNDER/
//	  t0000/ … t{T-1}/                 top directories
//	    d00000/ … d{M-1}/              M subdirectories per top directory
//	      N objects, by kind (per 1000):
//	        780  f000000.dat           regular file
//	        183  f000000.log           regular file (the rest of the mix)
//	         30  s000000/ f0.dat … f4.dat    subdirectory of 5 files
//	          4  h000000.dat, h000000.lnk    a file with a second hard link
//	          3  (in top directory k+1, not here)
//	             x0000-00000-000000/ f0.dat … f3.dat
//	                                   a subdirectory of 4 files made for
//	                                   top k, subdirectory d, object j but
//	                                   placed under the next top directory
//	                                   (cross-linked layout; with one top
//	                                   directory it stays in it)
//
// An object's kind is fixed by its index: p = j·7919 mod 1000 (a
// permutation of each thousand consecutive indexes) picks the kind by the
// ranges above in the order s, h, x, .dat, .log, so that the kinds are
// spread through a directory and every thousand objects hold exactly the
// counts above. Names, and therefore the whole tree, depend only on T, M
// and N.

// Kinds of objects, per 1000.
const (
	mixSubdirs = 30
	mixLinked  = 4
	mixCross   = 3
	mixDat     = 780
	mixPer     = 1000

	subdirFiles = 5 // files in each s directory
	crossFiles  = 4 // files in each x directory
)

type objKind int

const (
	kindSubdir objKind = iota
	kindLinked
	kindCross
	kindDat
	kindLog
)

// kindOf returns the kind of object j of a subdirectory.
func kindOf(j int) objKind {
	p := j % mixPer * 7919 % mixPer
	switch {
	case p < mixSubdirs:
		return kindSubdir
	case p < mixSubdirs+mixLinked:
		return kindLinked
	case p < mixSubdirs+mixLinked+mixCross:
		return kindCross
	case p < mixSubdirs+mixLinked+mixCross+mixDat:
		return kindDat
	}
	return kindLog
}

// PopulateOptions describe the namespace Populate makes.
type PopulateOptions struct {
	// Tops, Dirs and Objects are T, M and N (see above); each at least 1.
	Tops, Dirs, Objects int
	// Under is the absolute path of the directory to make it in: created
	// if missing (its parent must exist), or an existing directory that
	// holds no top directory's name.
	Under string
	// Batch is the creates and links per transaction (meta.BulkOptions);
	// zero means meta.DefaultBulkBatch.
	Batch int
	// Progress, if not nil, is called after each subdirectory with the
	// counts committed so far, from Populate's goroutine.
	Progress func(PopulateResult)
	// Inject, if set, is a kind of namespace fault to make after the
	// tree (meta.FsckInjectPoint names those that can be): Faults
	// creates through Meta.Create with the kind's failpoint on, named
	// fsck-KIND-NNNNNN, spread round robin over the subdirectories
	// d00000…, so that fsck has exactly Faults findings of the kind
	// (usage-counter: one, the pool's, whatever Faults; its counters
	// lack Faults inodes).
	// The failpoint is process-wide: nothing else in the process should
	// create meanwhile.
	Inject meta.FsckKind
	// Faults is how many faults Inject makes; at least 1 with Inject.
	Faults int
}

// PopulateResult is what Populate made: the counts committed, the time it
// took and the rate. Inodes includes Under when Populate created it.
type PopulateResult struct {
	Under       string `json:"under"`
	Tops        int    `json:"tops"`
	Dirs        int    `json:"dirs"`
	Objects     int    `json:"objects"`
	Inodes      int64  `json:"inodes"`
	Files       int64  `json:"files"`
	Directories int64  `json:"directories"`
	HardLinks   int64  `json:"hard_links"`
	// Injected is the faults of kind Inject made (their creates are not
	// counted above).
	Inject       meta.FsckKind `json:"inject,omitempty"`
	Injected     int           `json:"injected,omitempty"`
	Transactions int64         `json:"transactions"`
	Seconds      float64       `json:"seconds"`
	InodesPerSec float64       `json:"inodes_per_s"`
}

// PopulateNamespace is what Populate needs of the namespace; *meta.Meta
// implements it.
type PopulateNamespace interface {
	Lookup(ctx context.Context, parent meta.LIN, name string) (meta.Attr, error)
	Mkdir(ctx context.Context, parent meta.LIN, name string, mode uint32) (meta.Attr, error)
	NewBulk(o meta.BulkOptions) *meta.Bulk
	Create(ctx context.Context, parent meta.LIN, name string, ni meta.NewInode) (meta.Attr, error)
}

var _ PopulateNamespace = (*meta.Meta)(nil)

// PopulateExpected returns the inodes, files, directories and hard links
// Populate makes for o below o.Under (Under itself not counted), without
// touching anything. Error: o's shape is invalid (see Validate).
func PopulateExpected(o PopulateOptions) (PopulateResult, error) {
	if err := o.Validate(); err != nil {
		return PopulateResult{}, err
	}
	var per PopulateResult // one subdirectory's objects
	for j := range o.Objects {
		switch kindOf(j) {
		case kindSubdir:
			per.Directories++
			per.Files += subdirFiles
		case kindLinked:
			per.Files++
			per.HardLinks++
		case kindCross:
			per.Directories++
			per.Files += crossFiles
		default:
			per.Files++
		}
	}
	subdirs := int64(o.Tops) * int64(o.Dirs)
	r := PopulateResult{Under: o.Under, Tops: o.Tops, Dirs: o.Dirs, Objects: o.Objects}
	r.Directories = int64(o.Tops) + subdirs + subdirs*per.Directories
	r.Files = subdirs * per.Files
	r.HardLinks = subdirs * per.HardLinks
	r.Inodes = r.Directories + r.Files
	return r, nil
}

// maxPopulateInodes bounds one Populate: more is a typing mistake, and
// beyond what one etcd serves (see docs/benchmarks.md).
const maxPopulateInodes = 1 << 31

// Validate returns an error naming the first bad field of o: counts below
// 1 or too many inodes in all, an Under that is not an absolute path.
func (o PopulateOptions) Validate() error {
	switch {
	case o.Tops < 1 || o.Dirs < 1 || o.Objects < 1:
		return fmt.Errorf("bench: populate: --tops %d, --dirs %d, --objects %d: each must be at least 1", o.Tops, o.Dirs, o.Objects)
	case float64(o.Tops)*float64(o.Dirs)*float64(o.Objects)*1.2 > maxPopulateInodes:
		return fmt.Errorf("bench: populate: --tops %d × --dirs %d × --objects %d is over %d inodes: make fewer", o.Tops, o.Dirs, o.Objects, maxPopulateInodes)
	case !strings.HasPrefix(o.Under, "/"):
		return fmt.Errorf("bench: populate: --under %q: want an absolute path in the file system, such as /populate", o.Under)
	case o.Batch < 0:
		return fmt.Errorf("bench: populate: --batch %d: want a positive number of creates per transaction", o.Batch)
	case o.Inject != "" && o.Faults < 1:
		return fmt.Errorf("bench: populate: --inject %s --faults %d: want at least 1 fault", o.Inject, o.Faults)
	case o.Inject == "" && o.Faults != 0:
		return fmt.Errorf("bench: populate: --faults %d without --inject: name the kind of fault", o.Faults)
	}
	if o.Inject != "" {
		if _, err := meta.FsckInjectPoint(o.Inject); err != nil {
			return fmt.Errorf("bench: populate: --inject: %w", err)
		}
	}
	return nil
}

// Populate makes the test namespace of o (see above) in ns through a
// meta.Bulk, as the root user, and returns what it made. It is not
// idempotent: run again on the same Under, it fails on the first top
// directory's name (meta.ErrExists) before writing anything below Under.
// On any other error the batches committed before it stay; the result
// counts them.
func Populate(ctx context.Context, ns PopulateNamespace, o PopulateOptions) (PopulateResult, error) {
	if err := o.Validate(); err != nil {
		return PopulateResult{}, err
	}
	start := time.Now()
	res := PopulateResult{Under: path.Clean(o.Under), Tops: o.Tops, Dirs: o.Dirs, Objects: o.Objects}
	under, made, err := mkdirPath(ctx, ns, res.Under)
	if err != nil {
		return res, err
	}
	if made {
		res.Inodes, res.Directories = 1, 1
	}
	b := ns.NewBulk(meta.BulkOptions{Batch: o.Batch})
	base := res
	update := func() {
		st := b.Stats()
		res.Inodes = base.Inodes + st.Inodes
		res.Directories = base.Directories + st.Dirs
		res.Files = st.Files
		res.HardLinks = st.Links
		res.Transactions = st.Transactions
		res.Seconds = time.Since(start).Seconds()
		if res.Seconds > 0 {
			res.InodesPerSec = float64(res.Inodes) / res.Seconds
		}
	}
	var subdirs []meta.LIN
	subdirs, err = populate(ctx, b, under, o, func() {
		if o.Progress != nil {
			update()
			o.Progress(res)
		}
	})
	if err == nil {
		err = b.Flush(ctx)
	}
	update()
	if err == nil && o.Inject != "" {
		res.Inject = o.Inject
		res.Injected, err = inject(ctx, ns, subdirs, o.Inject, o.Faults)
	}
	if err != nil {
		return res, fmt.Errorf("bench: populate %s: %w", res.Under, err)
	}
	return res, nil
}

// inject makes n faults of kind k, one create each with the kind's
// failpoint on, round robin over dirs; it returns how many it made.
func inject(ctx context.Context, ns PopulateNamespace, dirs []meta.LIN, k meta.FsckKind, n int) (int, error) {
	point, err := meta.FsckInjectPoint(k)
	if err != nil {
		return 0, err
	}
	if err := failpoint.Enable(point, fmt.Sprintf("%d*error", n)); err != nil {
		return 0, err
	}
	defer failpoint.Disable(point)
	for i := range n {
		if _, err := ns.Create(ctx, dirs[i%len(dirs)], fmt.Sprintf("fsck-%s-%06d", k, i), meta.NewInode{Mode: 0o644}); err != nil {
			return i, fmt.Errorf("bench: populate: inject %s (fault %d of %d): %w", k, i+1, n, err)
		}
	}
	return n, nil
}

// populate queues the whole tree into b; it returns the subdirectories
// (d00000…) in the order made.
func populate(ctx context.Context, b *meta.Bulk, under meta.LIN, o PopulateOptions, progress func()) ([]meta.LIN, error) {
	var subdirs []meta.LIN
	tops := make([]meta.LIN, o.Tops)
	for k := range tops {
		var err error
		if tops[k], err = b.Mkdir(ctx, under, fmt.Sprintf("t%04d", k), 0o755); err != nil {
			return nil, err
		}
	}
	// Flush the top directories alone: a name taken under Under fails
	// here, before anything else is written.
	if err := b.Flush(ctx); errors.Is(err, meta.ErrExists) {
		return nil, fmt.Errorf("%w: populate under a new --under directory, or remove the old tree first", err)
	} else if err != nil {
		return nil, err
	}
	file := meta.NewInode{Mode: 0o644}
	files := func(dir meta.LIN, n int) error {
		for f := range n {
			if _, err := b.Create(ctx, dir, fmt.Sprintf("f%d.dat", f), file); err != nil {
				return err
			}
		}
		return nil
	}
	for k, top := range tops {
		for d := range o.Dirs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			dir, err := b.Mkdir(ctx, top, fmt.Sprintf("d%05d", d), 0o755)
			if err != nil {
				return nil, err
			}
			subdirs = append(subdirs, dir)
			for j := range o.Objects {
				switch kindOf(j) {
				case kindDat:
					_, err = b.Create(ctx, dir, fmt.Sprintf("f%06d.dat", j), file)
				case kindLog:
					_, err = b.Create(ctx, dir, fmt.Sprintf("f%06d.log", j), file)
				case kindSubdir:
					var s meta.LIN
					if s, err = b.Mkdir(ctx, dir, fmt.Sprintf("s%06d", j), 0o755); err == nil {
						err = files(s, subdirFiles)
					}
				case kindLinked:
					var f meta.LIN
					if f, err = b.Create(ctx, dir, fmt.Sprintf("h%06d.dat", j), file); err == nil {
						err = b.Link(ctx, f, dir, fmt.Sprintf("h%06d.lnk", j))
					}
				case kindCross:
					var x meta.LIN
					if x, err = b.Mkdir(ctx, tops[(k+1)%len(tops)], fmt.Sprintf("x%04d-%05d-%06d", k, d, j), 0o755); err == nil {
						err = files(x, crossFiles)
					}
				}
				if err != nil {
					return nil, err
				}
			}
			progress()
		}
	}
	return subdirs, nil
}

// mkdirPath returns the directory at p, making its last element if it is
// missing (made reports that); the elements before it must exist.
func mkdirPath(ctx context.Context, ns PopulateNamespace, p string) (lin meta.LIN, made bool, err error) {
	lin = meta.RootLIN
	parts := strings.Split(strings.Trim(p, "/"), "/")
	if p == "/" {
		return lin, false, nil
	}
	for i, name := range parts {
		a, err := ns.Lookup(ctx, lin, name)
		if errors.Is(err, meta.ErrNotFound) && i == len(parts)-1 {
			if a, err = ns.Mkdir(ctx, lin, name, 0o755); err != nil {
				return 0, false, fmt.Errorf("bench: populate: make %s: %w", p, err)
			}
			return a.LIN, true, nil
		}
		at := "/" + strings.Join(parts[:i+1], "/")
		if errors.Is(err, meta.ErrNotFound) {
			return 0, false, fmt.Errorf("bench: populate: --under %s: %s does not exist: make it first, or populate under an existing directory", p, at)
		}
		if err != nil {
			return 0, false, fmt.Errorf("bench: populate: --under %s: look up %s: %w", p, at, err)
		}
		if !a.IsDir() {
			return 0, false, fmt.Errorf("bench: populate: --under %s: %s is a %s, not a directory", p, at, a.Type)
		}
		lin = a.LIN
	}
	return lin, false, nil
}
