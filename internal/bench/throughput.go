package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"
)

// ThroughputTests are the phases of Throughput, in the order they run.
var ThroughputTests = []string{"seqwrite", "seqread", "randread", "randwrite"}

// ThroughputOptions shape a Throughput run.
type ThroughputOptions struct {
	// Jobs is the number of sessions at once (NFS: connections), each
	// with a file of its own.
	Jobs int
	// Size is the size of each job's file.
	Size int64
	// Record is the size of a sequential read or write (1 MiB).
	Record int
	// Block is the size of a random read or write (4 KiB).
	Block int
	// Runtime bounds each random phase; Ops bounds the operations of each
	// job in it (0: no bound). One of them must be set.
	Runtime time.Duration
	Ops     int
	// Tests are the phases to report, of ThroughputTests (none: all). seqwrite
	// always runs: it writes the files the others read and write.
	Tests []string
}

// PhaseResult is one phase of Throughput: its bytes, operations and time, with
// every job counted.
type PhaseResult struct {
	Test    string  `json:"test"`
	Bytes   int64   `json:"bytes"`
	Ops     int64   `json:"ops"`
	Seconds float64 `json:"seconds"`
	MBps    float64 `json:"mb_per_s"` // 10^6 bytes per second
	IOPS    float64 `json:"iops"`
}

// ThroughputResult is the outcome of Throughput.
type ThroughputResult struct {
	Target string        `json:"target"`
	Jobs   int           `json:"jobs"`
	Size   int64         `json:"file_bytes"`
	Record int           `json:"record_bytes"`
	Block  int           `json:"block_bytes"`
	Phases []PhaseResult `json:"phases"`
}

// Phase returns the result of test, and whether it ran.
func (r ThroughputResult) Phase(test string) (PhaseResult, bool) {
	for _, p := range r.Phases {
		if p.Test == test {
			return p, true
		}
	}
	return PhaseResult{}, false
}

// stamp is the granule of the data pattern: every 4 KiB block of a file
// begins with its file's number and its own offset, so that a read
// returning the wrong bytes (another file's, another offset's, stale
// zeros) is caught.
const stamp = 4096

// Check validates o, naming the option at fault.
func (o *ThroughputOptions) Check() error {
	switch {
	case o.Jobs < 1:
		return fmt.Errorf("bench: jobs %d: want at least 1", o.Jobs)
	case o.Record < stamp || o.Record%stamp != 0:
		return fmt.Errorf("bench: record size %d: want a multiple of 4KiB", o.Record)
	case o.Block < stamp || o.Block%stamp != 0:
		return fmt.Errorf("bench: block size %d: want a multiple of 4KiB", o.Block)
	case o.Size < int64(o.Record) || o.Size%int64(o.Record) != 0:
		return fmt.Errorf("bench: file size %d: want a multiple of the record size %d", o.Size, o.Record)
	case o.Runtime <= 0 && o.Ops <= 0:
		return errors.New("bench: the random tests need a runtime or an operation count")
	case o.Runtime < 0 || o.Ops < 0:
		return errors.New("bench: runtime and operation count must not be negative")
	}
	for _, t := range o.Tests {
		if !slices.Contains(ThroughputTests, t) {
			return fmt.Errorf("bench: test %q: want one of %v", t, ThroughputTests)
		}
	}
	return nil
}

// Throughput measures data throughput on t: each of Jobs sessions writes a file of
// Size bytes of its own in a new directory of t, in Record-sized writes,
// and syncs it (NFS: UNSTABLE WRITEs and a COMMIT) — seqwrite; reads it
// back in Records, checking every byte's stamp — seqread; reads Blocks at
// random aligned offsets, checking them — randread; writes Blocks at
// random aligned offsets and syncs — randwrite. The files and directory
// are removed at the end. A phase's time runs from the start of every job
// to the end of the last, sync included.
func Throughput(ctx context.Context, t Target, o ThroughputOptions) (r ThroughputResult, err error) {
	r = ThroughputResult{Target: t.String(), Jobs: o.Jobs, Size: o.Size, Record: o.Record, Block: o.Block}
	if err := o.Check(); err != nil {
		return r, err
	}
	want := func(test string) bool { return len(o.Tests) == 0 || slices.Contains(o.Tests, test) }
	ss, closeAll, err := sessions(ctx, t, o.Jobs)
	if err != nil {
		return r, err
	}
	defer closeAll()
	sub := workDir("io")
	if err := ss[0].Mkdir(sub); err != nil {
		return r, fmt.Errorf("bench: %w", err)
	}
	name := func(j int) string { return fmt.Sprintf("%s/j%03d", sub, j) }
	files := make([]File, o.Jobs)
	defer func() {
		for j, f := range files {
			if f != nil {
				_ = f.Close()
				_ = ss[0].Remove(name(j))
			}
		}
		if rerr := ss[0].Rmdir(sub); rerr != nil && err == nil {
			err = fmt.Errorf("bench: %w", rerr)
		}
	}()
	fill := pattern()
	add := func(test string, secs float64, ops, size int64) {
		p := PhaseResult{Test: test, Bytes: ops * size, Ops: ops, Seconds: secs}
		if secs > 0 {
			p.MBps, p.IOPS = float64(p.Bytes)/secs/1e6, float64(ops)/secs
		}
		if want(test) {
			r.Phases = append(r.Phases, p)
		}
	}

	recs := o.Size / int64(o.Record)
	secs, err := parallel(ctx, o.Jobs, func(ctx context.Context, j int) error {
		f, err := ss[j].Create(name(j))
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		files[j] = f
		buf := alignedBuf(o.Record)
		for i := range recs {
			if ctx.Err() != nil {
				return nil
			}
			off := i * int64(o.Record)
			fill(buf, j, off)
			if n, err := f.WriteAt(buf, off); err != nil || n != len(buf) {
				return ioErr("write", name(j), off, n, len(buf), err)
			}
		}
		return wrapErr(f.Sync())
	})
	if err != nil {
		return r, err
	}
	add("seqwrite", secs, int64(o.Jobs)*recs, int64(o.Record))

	if want("seqread") {
		secs, err := parallel(ctx, o.Jobs, func(ctx context.Context, j int) error {
			buf := alignedBuf(o.Record)
			for i := range recs {
				if ctx.Err() != nil {
					return nil
				}
				off := i * int64(o.Record)
				if n, err := files[j].ReadAt(buf, off); n != len(buf) {
					return ioErr("read", name(j), off, n, len(buf), err)
				}
				if err := check(buf, j, off, name(j)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return r, err
		}
		add("seqread", secs, int64(o.Jobs)*recs, int64(o.Record))
	}

	blocks := o.Size / int64(o.Block)
	random := func(test string, write bool) error {
		ops := make([]int64, o.Jobs)
		secs, err := parallel(ctx, o.Jobs, func(ctx context.Context, j int) error {
			rng := rand.New(rand.NewPCG(uint64(j), uint64(time.Now().UnixNano())))
			buf := alignedBuf(o.Block)
			deadline := time.Now().Add(o.Runtime)
			for o.Ops == 0 || ops[j] < int64(o.Ops) {
				if ctx.Err() != nil || (o.Runtime > 0 && ops[j]%16 == 0 && time.Now().After(deadline)) {
					break
				}
				off := rng.Int64N(blocks) * int64(o.Block)
				if write {
					fill(buf, j, off)
					if n, err := files[j].WriteAt(buf, off); err != nil || n != len(buf) {
						return ioErr("write", name(j), off, n, len(buf), err)
					}
				} else {
					if n, err := files[j].ReadAt(buf, off); n != len(buf) {
						return ioErr("read", name(j), off, n, len(buf), err)
					}
					if err := check(buf, j, off, name(j)); err != nil {
						return err
					}
				}
				ops[j]++
			}
			if write {
				return wrapErr(files[j].Sync())
			}
			return nil
		})
		if err != nil {
			return err
		}
		var total int64
		for _, n := range ops {
			total += n
		}
		add(test, secs, total, int64(o.Block))
		return nil
	}
	if want("randread") {
		if err := random("randread", false); err != nil {
			return r, err
		}
	}
	if want("randwrite") {
		if err := random("randwrite", true); err != nil {
			return r, err
		}
	}
	return r, nil
}

func wrapErr(err error) error {
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

func ioErr(op, name string, off int64, n, want int, err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		err = fmt.Errorf("%d of %d bytes", n, want)
	}
	return fmt.Errorf("bench: %s %s at %d: %w", op, name, off, err)
}

// pattern returns the filler of buffers: random bytes (the same for the
// run) with every 4 KiB block stamped with its file and offset.
func pattern() func(buf []byte, file int, off int64) {
	noise := make([]byte, stamp)
	for i := range noise {
		noise[i] = byte(rand.Uint32())
	}
	return func(buf []byte, file int, off int64) {
		for i := 0; i < len(buf); i += stamp {
			copy(buf[i:i+stamp], noise)
			binary.LittleEndian.PutUint64(buf[i:], uint64(file)+1)
			binary.LittleEndian.PutUint64(buf[i+8:], uint64(off)+uint64(i))
		}
	}
}

// check verifies the stamps of buf, read from file at off.
func check(buf []byte, file int, off int64, name string) error {
	for i := 0; i < len(buf); i += stamp {
		f, o := binary.LittleEndian.Uint64(buf[i:]), binary.LittleEndian.Uint64(buf[i+8:])
		if f != uint64(file)+1 || o != uint64(off)+uint64(i) {
			return fmt.Errorf("bench: read %s at %d: wrong data: the block holds file %d offset %d's stamp, not file %d offset %d's",
				name, off+int64(i), int64(f)-1, o, file, off+int64(i))
		}
	}
	return nil
}
