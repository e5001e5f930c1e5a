package bench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"
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
// error. A job should return early once stop is closed (another failed or
// ctx ended).
func parallel(ctx context.Context, jobs int, fn func(job int, stop <-chan struct{}) error) (float64, error) {
	stop := make(chan struct{})
	var once sync.Once
	var first error
	var mu sync.Mutex
	fail := func(err error) {
		mu.Lock()
		if first == nil {
			first = err
		}
		mu.Unlock()
		once.Do(func() { close(stop) })
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := fn(j, stop); err != nil {
				fail(err)
			}
		}()
	}
	unwatch := context.AfterFunc(ctx, func() { fail(ctx.Err()) })
	t0 := time.Now()
	close(start)
	wg.Wait()
	secs := time.Since(t0).Seconds()
	unwatch()
	mu.Lock()
	defer mu.Unlock()
	return secs, first
}

func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
