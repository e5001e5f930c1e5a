package kv

import (
	"context"
	"errors"
	"time"
)

// Errors returned by stores. Backends wrap them with %w and detail; check them
// with errors.Is.
var (
	// ErrConflict means a transaction kept conflicting with concurrent ones
	// until Options.MaxRetries ran out. It is retryable: the store did not
	// change.
	ErrConflict = errors.New("kv: transaction conflict")
	// ErrTooLarge means a transaction holds more operations, compares or bytes
	// than the backend accepts in one atomic commit (see Limits). Nothing was
	// written. Retrying the same transaction fails the same way: split the work.
	ErrTooLarge = errors.New("kv: transaction too large")
	// ErrReadOnly means a transaction run by View tried to write.
	ErrReadOnly = errors.New("kv: write in a read-only transaction")
	// ErrClosed means the store was closed.
	ErrClosed = errors.New("kv: store closed")
	// ErrUnavailable means the backend did not answer (network, no quorum).
	// For a commit the outcome is unknown: the transaction may have been
	// applied. It is retryable once the caller re-reads.
	ErrUnavailable = errors.New("kv: store unavailable")
)

// Retryable reports whether err belongs to the retryable class: a conflict or
// an unavailable backend. A caller may run the whole operation again.
func Retryable(err error) bool {
	return errors.Is(err, ErrConflict) || errors.Is(err, ErrUnavailable)
}

// Store is a transactional, ordered key-value store.
//
// Keys are non-empty byte strings ordered bytewise; values are byte strings,
// possibly empty. A Store is safe for concurrent use.
type Store interface {
	// Update runs fn in a read-write transaction and commits its writes
	// atomically. The transaction is serializable: it commits only if no key
	// it read (and no key in a range it scanned) changed since its snapshot;
	// otherwise fn runs again on a fresh snapshot, up to Options.MaxRetries
	// times with a randomized back-off, and Update then returns an error
	// wrapping ErrConflict. fn must have no side effects beyond tx (it may
	// run several times) and must not keep tx after it returns. An error from
	// fn aborts the transaction and is returned as is (unless it wraps
	// ErrConflict, which retries). A commit beyond Limits returns ErrTooLarge.
	// ctx bounds the whole call including retries.
	Update(ctx context.Context, fn func(tx Tx) error) error
	// View runs fn on a consistent snapshot taken when the first key is
	// read; the snapshot is at least as new as every Update that returned
	// before View started. Writes fail with ErrReadOnly. fn may run more than
	// once (when the snapshot becomes unreadable, e.g. compacted).
	View(ctx context.Context, fn func(tx Tx) error) error
	// Limits returns the most one transaction may hold. Callers that do
	// unbounded work (deleting a large file) split it into transactions that
	// stay under these limits.
	Limits() Limits
	// Close releases the store. Later calls fail with ErrClosed. It is
	// idempotent. It does not close a client handed in by the caller.
	Close() error
}

// Tx is one transaction. Reads see the transaction's snapshot plus its own
// earlier writes. A Tx is not safe for concurrent use.
type Tx interface {
	// Get returns the value of key, or nil (and no error) if key is absent.
	// A present key with an empty value returns a non-nil empty slice. The
	// returned slice belongs to the caller.
	Get(key []byte) ([]byte, error)
	// GetMany returns the values of keys, in order, with nil for absent keys;
	// it costs one round trip where Get costs one per key.
	GetMany(keys ...[]byte) ([][]byte, error)
	// Scan returns the pairs with start <= key < end in ascending key order,
	// at most limit of them (limit <= 0: no limit; page large ranges). next
	// is nil when the range is exhausted; otherwise Scan(next, end, …)
	// continues after the last pair returned (the page may then be empty).
	// In Update, the scanned range joins the read set: a concurrent insert,
	// change or delete of a key in it makes the transaction conflict.
	Scan(start, end []byte, limit int) (pairs []KV, next []byte, err error)
	// Put sets key to value when the transaction commits. It copies both.
	// A Put does not join the read set: a blind write never conflicts.
	Put(key, value []byte)
	// Delete removes key (absent keys are fine) when the transaction commits.
	Delete(key []byte)
}

// KV is one key-value pair.
type KV struct {
	Key   []byte
	Value []byte
}

// Limits bound one transaction. A zero field means "no limit".
type Limits struct {
	// MaxOps is the most writes (puts + deletes) and, separately, the most
	// read-set entries (keys read plus ranges scanned) of one Update.
	MaxOps int
	// MaxBytes is the most bytes of one commit request: keys and values
	// written plus keys and ranges compared, with a per-entry overhead.
	MaxBytes int
}

// Options tune a store's transaction machinery; backends embed them.
type Options struct {
	// MaxRetries is how many times Update runs fn before giving up with
	// ErrConflict. Zero means DefaultMaxRetries.
	MaxRetries int
	// MinBackoff and MaxBackoff bound the randomized, doubling sleep between
	// attempts. Zero means 500 µs and 100 ms.
	MinBackoff, MaxBackoff time.Duration
	// Limits are the per-transaction limits enforced before commit. Backends
	// fill in their own when zero.
	Limits Limits
}

// DefaultMaxRetries is the attempts Update makes when Options.MaxRetries is 0.
const DefaultMaxRetries = 64

// PrefixEnd returns the smallest key greater than every key starting with
// prefix, for Scan(prefix, PrefixEnd(prefix), …). For a prefix of only 0xff
// bytes it returns nil, which no Scan accepts; weft keys never are.
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// After returns the smallest key greater than key: key followed by a zero byte.
func After(key []byte) []byte {
	out := make([]byte, len(key)+1)
	copy(out, key)
	return out
}
