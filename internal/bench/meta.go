package bench

import (
	"context"
	"fmt"
)

// MetaResult is the outcome of Meta: operations per second of each phase.
type MetaResult struct {
	Dir       string  `json:"dir"`
	Files     int     `json:"files"`
	Jobs      int     `json:"jobs"`
	CreatePS  float64 `json:"creates_per_s"`
	StatPS    float64 `json:"stats_per_s"`
	RemovePS  float64 `json:"removes_per_s"`
	CreateSec float64 `json:"create_seconds"`
	StatSec   float64 `json:"stat_seconds"`
	RemoveSec float64 `json:"remove_seconds"`
}

// Meta creates n empty files in a new subdirectory of t's root, jobs
// sessions at once (each its share of the names), then stats each (an NFS
// LOOKUP), then removes each, and reports the rate of each phase: files
// over the phase's time. A create is an exclusive create (and, on a
// directory, the close that follows). The subdirectory is removed
// afterwards.
func Meta(ctx context.Context, t Target, n, jobs int) (r MetaResult, err error) {
	r = MetaResult{Dir: t.String(), Files: n, Jobs: jobs}
	if n < 1 || jobs < 1 {
		return r, fmt.Errorf("bench: %d files and %d jobs: want at least one of each", n, jobs)
	}
	jobs = min(jobs, n)
	r.Jobs = jobs
	ss, closeAll, err := sessions(ctx, t, jobs)
	if err != nil {
		return r, err
	}
	defer closeAll()
	sub := workDir("meta")
	if err := ss[0].Mkdir(sub); err != nil {
		return r, fmt.Errorf("bench: %w", err)
	}
	// Per job, its names removed[j] … created[j]-1 exist.
	created, removed := make([]int, jobs), make([]int, jobs)
	defer func() {
		for j, k := range created {
			for i := removed[j]; i < k; i++ {
				_ = ss[0].Remove(metaName(sub, j, i, jobs))
			}
		}
		if rerr := ss[0].Rmdir(sub); rerr != nil && err == nil {
			err = fmt.Errorf("bench: %w", rerr)
		}
	}()
	share := func(j int) int { return (n - j + jobs - 1) / jobs } // names j, j+jobs, …
	phase := func(fn func(s Session, j, i int) error) (float64, error) {
		return parallel(ctx, jobs, func(ctx context.Context, j int) error {
			for i := range share(j) {
				if ctx.Err() != nil {
					return nil
				}
				if err := fn(ss[j], j, i); err != nil {
					return fmt.Errorf("bench: %w", err)
				}
			}
			return nil
		})
	}
	if r.CreateSec, err = phase(func(s Session, j, i int) error {
		f, err := s.Create(metaName(sub, j, i, jobs))
		if err != nil {
			return err
		}
		created[j]++
		return f.Close()
	}); err != nil {
		return r, err
	}
	if r.StatSec, err = phase(func(s Session, j, i int) error {
		_, err := s.Stat(metaName(sub, j, i, jobs))
		return err
	}); err != nil {
		return r, err
	}
	if r.RemoveSec, err = phase(func(s Session, j, i int) error {
		if err := s.Remove(metaName(sub, j, i, jobs)); err != nil {
			return err
		}
		removed[j]++
		return nil
	}); err != nil {
		return r, err
	}
	r.CreatePS, r.StatPS, r.RemovePS = float64(n)/r.CreateSec, float64(n)/r.StatSec, float64(n)/r.RemoveSec
	return r, nil
}

// metaName is the i-th name of job j: the files are f0000000… in order,
// dealt round-robin to the jobs.
func metaName(sub string, j, i, jobs int) string {
	return fmt.Sprintf("%s/f%07d", sub, i*jobs+j)
}
