package client

import (
	"context"
	"testing"

	"github.com/weftfs/weft/internal/meta"
)

// Internals for the tests of package client_test (which share the
// clienttest fixture, so they cannot be in this package).

// MaxCommitAttempts is maxCommitAttempts.
const MaxCommitAttempts = maxCommitAttempts

// NewOver is New over any namespace implementing the client's metaStore
// (tests wrap *meta.Meta to hook its commits).
func NewOver(m metaStore, cfg Config) (*Client, error) {
	return newClient(m, cfg)
}

// PrefetchesInFlight returns how many readahead loads are running.
func (c *Client) PrefetchesInFlight() int { return len(c.rasem) }

// CachedBytes returns the stripe data cached (or loading) over all files.
func (c *Client) CachedBytes() int64 { return c.cached.Load() }

// PendingCommits returns how many stripe commits of lin wait in its group
// commit (0 if lin is not open).
func (c *Client) PendingCommits(lin meta.LIN) int {
	c.mu.Lock()
	ino := c.inodes[lin]
	c.mu.Unlock()
	if ino == nil {
		return 0
	}
	ino.commits.mu.Lock()
	defer ino.commits.mu.Unlock()
	return len(ino.commits.pending)
}

// MustStripeSize returns the file bytes per stripe lin gets in c.
func (c *Client) MustStripeSize(tb testing.TB, lin meta.LIN) int {
	a, err := c.meta.GetAttr(context.Background(), lin)
	if err != nil {
		tb.Fatal(err)
	}
	g, _, _, err := c.geometry(context.Background(), a)
	if err != nil {
		tb.Fatal(err)
	}
	return int(g.StripeDataSize())
}

// DirtyBytes returns the bytes of write buffers over all files.
func (c *Client) DirtyBytes() int64 { return c.dirty.Load() }
