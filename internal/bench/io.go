package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// I/O patterns of IO.
const (
	// Sequential: each task writes, then reads, its own file front to
	// back in records.
	Sequential = "sequential"
	// Random: each task writes, then reads, every record of its own file
	// once, in a random order.
	Random = "random"
	// Strided: the tasks share one file of records interleaved task by
	// task (record s·N+i is task i's record of segment s), as ior's
	// "hard" tests do; each task writes its records, then reads those its
	// neighbour wrote (task i reads task (i+1) mod N's), so that no task
	// reads what it wrote itself.
	Strided = "strided"
)

// DefaultStridedRecord is the record size of the strided pattern: ior
// hard's 47,008 bytes, which is neither page- nor block-aligned.
const DefaultStridedRecord = 47008

// IOOptions say what IO does.
type IOOptions struct {
	// Dir is the directory the files are made in (a new subdirectory of
	// it, removed afterwards).
	Dir string
	// Pattern is Sequential, Random or Strided.
	Pattern string
	// Tasks is the number of tasks (goroutines, each with its own open
	// file) that run at once.
	Tasks int
	// Record is the size of each write and read in bytes.
	Record int
	// Segments is the number of records of each task: the strided file
	// holds Tasks·Segments records, each other pattern's file Segments.
	Segments int
	// Fsync syncs each task's file after its writes (the write phase
	// ends when every task's data is durable).
	Fsync bool
	// Keep leaves the files in place.
	Keep bool
}

// IOResult is the outcome of IO: what ran and each phase's rates.
type IOResult struct {
	Dir       string  `json:"dir"`
	Pattern   string  `json:"pattern"`
	Tasks     int     `json:"tasks"`
	Record    int     `json:"record_bytes"`
	Segments  int     `json:"segments"`
	Files     int     `json:"files"`
	Bytes     int64   `json:"bytes"`
	WriteSec  float64 `json:"write_seconds"`
	WriteMBps float64 `json:"write_mb_per_s"`
	WriteOps  float64 `json:"write_ops_per_s"`
	ReadSec   float64 `json:"read_seconds"`
	ReadMBps  float64 `json:"read_mb_per_s"`
	ReadOps   float64 `json:"read_ops_per_s"`
}

// IO has o.Tasks tasks write records in the pattern o.Pattern, then read
// them back and check them (every record carries its index and a pattern
// derived from it), and reports the rate of each phase. Errors name the
// option that is wrong, or the file and record that failed or read back
// wrong. Once ctx ends, or a task fails, the other tasks stop at their
// next record.
func IO(ctx context.Context, o IOOptions) (IOResult, error) {
	r := IOResult{Dir: o.Dir, Pattern: o.Pattern, Tasks: o.Tasks, Record: o.Record, Segments: o.Segments}
	switch {
	case o.Pattern != Sequential && o.Pattern != Random && o.Pattern != Strided:
		return r, fmt.Errorf("bench: pattern %q: want %s, %s or %s", o.Pattern, Sequential, Random, Strided)
	case o.Tasks < 1:
		return r, fmt.Errorf("bench: %d tasks: want at least 1", o.Tasks)
	case o.Record < 16:
		return r, fmt.Errorf("bench: record of %d bytes: want at least 16", o.Record)
	case o.Segments < 1:
		return r, fmt.Errorf("bench: %d segments: want at least 1", o.Segments)
	}
	sub, err := os.MkdirTemp(o.Dir, "weft-bench-io-")
	if err != nil {
		return r, fmt.Errorf("bench: %w", err)
	}
	if !o.Keep {
		defer os.RemoveAll(sub)
	}
	r.Dir = sub
	n := int64(o.Tasks) * int64(o.Segments)
	r.Bytes = n * int64(o.Record)
	// where returns the file and offset of task t's k-th record, and
	// the record's index (what it holds).
	where := func(t, k int) (string, int64, int64) {
		if o.Pattern == Strided {
			i := int64(k)*int64(o.Tasks) + int64(t)
			return filepath.Join(sub, "shared"), i * int64(o.Record), i
		}
		return filepath.Join(sub, fmt.Sprintf("task%04d", t)), int64(k) * int64(o.Record), int64(t)*int64(o.Segments) + int64(k)
	}
	r.Files = o.Tasks
	if o.Pattern == Strided {
		r.Files = 1
		f, err := os.Create(filepath.Join(sub, "shared"))
		if err != nil {
			return r, fmt.Errorf("bench: %w", err)
		}
		f.Close()
	}
	// order returns the order task t does its records in.
	order := func(t int) []int {
		ks := make([]int, o.Segments)
		for k := range ks {
			ks[k] = k
		}
		if o.Pattern == Random {
			rand.New(rand.NewPCG(uint64(t), 7)).Shuffle(len(ks), func(i, j int) { ks[i], ks[j] = ks[j], ks[i] })
		}
		return ks
	}
	// phase runs fn for every task at once (parallel); fn returns early
	// once its ctx ends.
	phase := func(fn func(ctx context.Context, t int) error) (float64, error) {
		return parallel(ctx, o.Tasks, func(ctx context.Context, t int) error {
			if err := fn(ctx, t); err != nil {
				return fmt.Errorf("bench: task %d: %w", t, err)
			}
			return nil
		})
	}
	r.WriteSec, err = phase(func(ctx context.Context, t int) error {
		name, _, _ := where(t, 0)
		f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		buf := make([]byte, o.Record)
		for _, k := range order(t) {
			if ctx.Err() != nil {
				break
			}
			name, off, idx := where(t, k)
			fill(buf, idx)
			if _, err := f.WriteAt(buf, off); err != nil {
				f.Close()
				return fmt.Errorf("%s: record %d: %w", name, idx, err)
			}
		}
		if o.Fsync {
			if err := f.Sync(); err != nil {
				f.Close()
				return err
			}
		}
		return f.Close()
	})
	if err != nil {
		return r, err
	}
	r.ReadSec, err = phase(func(ctx context.Context, t int) error {
		src := t
		if o.Pattern == Strided {
			src = (t + 1) % o.Tasks // not its own records
		}
		name, _, _ := where(src, 0)
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		buf, want := make([]byte, o.Record), make([]byte, o.Record)
		for _, k := range order(src) {
			if ctx.Err() != nil {
				return nil
			}
			name, off, idx := where(src, k)
			if _, err := f.ReadAt(buf, off); err != nil {
				return fmt.Errorf("%s: record %d: %w", name, idx, err)
			}
			fill(want, idx)
			if !bytes.Equal(buf, want) {
				return fmt.Errorf("%s: record %d at offset %d reads back wrong", name, idx, off)
			}
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	mb := float64(r.Bytes) / 1e6
	r.WriteMBps, r.WriteOps = mb/r.WriteSec, float64(n)/r.WriteSec
	r.ReadMBps, r.ReadOps = mb/r.ReadSec, float64(n)/r.ReadSec
	return r, nil
}

// fill writes record idx's contents into buf: its index, then bytes that
// depend on it.
func fill(buf []byte, idx int64) {
	binary.LittleEndian.PutUint64(buf, uint64(idx))
	x := uint64(idx)*0x9E3779B97F4A7C15 + 1
	for i := 8; i < len(buf); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], x)
		copy(buf[i:], w[:])
	}
}
