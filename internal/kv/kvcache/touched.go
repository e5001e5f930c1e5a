package kvcache

import "bytes"

// maxTouched bounds the keys TouchedKeys keeps between two calls; past it
// the list is dropped and reported incomplete.
const maxTouched = 1024

// touched notes the keys under one prefix that the follow stream changed,
// for a caller that watches them (the write-back's delegation records:
// TouchedKeys). Guarded by the Store's mu.
type touched struct {
	prefix []byte
	keys   [][]byte
	lost   bool   // more than maxTouched since the last call
	epoch  uint64 // the stream's run at the last call
}

// WatchPrefix makes the Store note the keys under prefix that its follow
// stream changes (other clients' commits, and its own as the stream
// delivers them), for TouchedKeys. One prefix per Store; a later call
// replaces it.
func (s *Store) WatchPrefix(prefix []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.touch = touched{prefix: bytes.Clone(prefix), epoch: s.epoch, lost: true}
}

// TouchedKeys returns the keys under the watched prefix that deliveries
// of the follow stream changed since its last call, and whether that is
// all of them. It is not when more changed than it keeps (1024), when the
// stream started over since (a change made in between was not delivered
// as one), on the first call after WatchPrefix, and while the cache does
// not serve: the caller must then look at every key it cares about.
func (s *Store) TouchedKeys() ([][]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &s.touch
	keys, complete := t.keys, !t.lost && t.epoch == s.epoch && s.servingLocked()
	t.keys, t.lost, t.epoch = nil, false, s.epoch
	return keys, complete
}

// noteTouchedLocked notes a key the stream changed, if it is watched.
func (s *Store) noteTouchedLocked(key []byte) {
	t := &s.touch
	if t.prefix == nil || !bytes.HasPrefix(key, t.prefix) || t.lost {
		return
	}
	if len(t.keys) == maxTouched {
		t.keys, t.lost = nil, true
		return
	}
	t.keys = append(t.keys, bytes.Clone(key))
}
