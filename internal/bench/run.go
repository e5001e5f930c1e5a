package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
)

// workDir returns a new name for a benchmark's directory below a target's
// root.
func workDir(kind string) string {
	return fmt.Sprintf("weft-bench-%s-%d-%d", kind, os.Getpid(), time.Now().UnixNano())
}

// sessions opens n sessions of t, closing them all if one fails.
func sessions(ctx context.Context, t Target, n int) ([]Session, func(), error) {
	ss := make([]Session, 0, n)
	done := func() {
		for _, s := range ss {
			_ = s.Close()
		}
	}
	for range n {
		s, err := t.Session(ctx)
		if err != nil {
			done()
			return nil, nil, err
		}
		ss = append(ss, s)
	}
	return ss, done, nil
}

// parallel runs fn(job) for every job at once, starting them together, and
// returns the time from the start to the end of the last and the first
// error (errgroup): the jobs' ctx ends once one fails or ctx ends, and a
// job should then return early. A ctx that ended is the error when no job
// failed.
func parallel(ctx context.Context, jobs int, fn func(ctx context.Context, job int) error) (float64, error) {
	g, gctx := errgroup.WithContext(ctx)
	start := make(chan struct{})
	for j := range jobs {
		g.Go(func() error {
			<-start
			return fn(gctx, j)
		})
	}
	t0 := time.Now()
	close(start)
	err := g.Wait()
	secs := time.Since(t0).Seconds()
	if err == nil {
		err = ctx.Err()
	}
	return secs, err
}
