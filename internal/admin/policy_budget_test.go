package admin

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/meta"
)

// deadlineNS records the deadline of the dry run's scan.
type deadlineNS struct {
	treeAPI
	left *time.Duration
}

func (d deadlineNS) ScanInodes(ctx context.Context, from, to meta.LIN, limit int) ([]meta.Inode, meta.LIN, error) {
	if dl, ok := ctx.Deadline(); ok {
		*d.left = time.Until(dl)
	}
	return d.treeAPI.ScanInodes(ctx, from, to, limit)
}

// TestPolicyTestBudget checks that a dry run request's timeout_seconds
// becomes the scan's deadline (20 s without one), that one out of range
// is a 400 naming it, and that the client waits past its own 30 s for a
// longer budget.
func TestPolicyTestBudget(t *testing.T) {
	ctx := context.Background()
	var left time.Duration
	c := newPolicyAPI(t, deadlineNS{treeAPI: treeAPI{treeNS: newTreeNS(8), fakeNS: &fakeNS{}}, left: &left})
	const text = "RULE 'l' LIST 'tars' WHERE NAME LIKE '%.tar'"
	for _, tc := range []struct {
		budget, want time.Duration
	}{
		{0, dryRunBudget},
		{10 * time.Minute, 10 * time.Minute},
		{MaxDryRunBudget, MaxDryRunBudget},
	} {
		left = 0
		rep, err := c.TestPolicyWithin(ctx, PolicyTestRequest{Text: text}, tc.budget)
		if err != nil || !rep.Complete || rep.Files != 8 {
			t.Fatalf("budget %s: %+v %v", tc.budget, rep, err)
		}
		if left > tc.want || left < tc.want-5*time.Second {
			t.Errorf("budget %s: the scan's deadline was %s away, want %s", tc.budget, left, tc.want)
		}
	}
	for _, bad := range []time.Duration{-time.Second, MaxDryRunBudget + time.Second} {
		_, err := c.TestPolicyWithin(ctx, PolicyTestRequest{Text: text}, bad)
		if httpStatus(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "timeout_seconds") {
			t.Errorf("budget %s: %v (status %d), want a 400 naming timeout_seconds", bad, err, httpStatus(err))
		}
	}
}

// TestPolicyTestWithinWaits checks that the client waits as long as the
// budget asks, past its own 30 s, without changing itself.
func TestPolicyTestWithinWaits(t *testing.T) {
	c := NewClient("127.0.0.1:1")
	if w := c.waiting(dryRunBudget + requestTimeout); w != c {
		t.Errorf("the default budget changed the client's timeout to %s", w.http.Timeout)
	}
	w := c.waiting(10*time.Minute + requestTimeout)
	if w.http.Timeout != 10*time.Minute+requestTimeout || c.http.Timeout != 30*time.Second {
		t.Errorf("waiting 10m10s: the copy waits %s, the client %s", w.http.Timeout, c.http.Timeout)
	}
	if w.http.Transport != c.http.Transport || len(w.bases) != len(c.bases) {
		t.Errorf("the copy lost the client's transport or addresses")
	}
}
