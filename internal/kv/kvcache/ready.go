package kvcache

import "context"

// Ready waits until the cache serves and is caught up: its follow stream
// has started (a preload and a watch) and has been heard from within
// MaxStale, and it has applied every change committed, by anyone, before
// Ready was called. It returns ctx's error if ctx ends first, and nothing
// else: a stream that breaks meanwhile is waited for again.
//
// A Store answers correctly before it is ready, from the inner store; Ready
// is for callers that must exercise the cache itself (tests, benchmarks)
// or want its speed from the first read. Readiness is not kept: the cache
// stops serving when its stream breaks or falls silent (Stats.Serving).
func (s *Store) Ready(ctx context.Context) error {
	for {
		s.mu.Lock()
		serving, ch := s.servingLocked(), s.changed
		s.mu.Unlock()
		if serving {
			// Sync returns at once if the stream broke meanwhile: look again.
			if err := s.Sync(ctx); err != nil {
				return err
			}
			s.mu.Lock()
			serving = s.servingLocked()
			s.mu.Unlock()
			if serving {
				return nil
			}
			continue
		}
		// changed is closed when the stream starts and at every delivery
		// (progress reports included, asked for every MaxStale/4).
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}
