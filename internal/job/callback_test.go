package job

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
)

// checkCallback normalises what it accepts and refuses the rest, naming
// the field.
func TestCheckCallback(t *testing.T) {
	ok := Callback{Name: "page", Events: []string{EventLowSpace}, Command: "/usr/local/bin/page"}
	with := func(f func(*Callback)) Callback {
		c := ok
		c.Events = slices.Clone(ok.Events)
		f(&c)
		return c
	}
	got, err := checkCallback(with(func(c *Callback) { c.Events = []string{EventLowSpace, EventDriveDown, EventLowSpace} }))
	if err != nil || !slices.Equal(got.Events, []string{EventDriveDown, EventLowSpace}) || got.Timeout != DefaultCallbackTimeout {
		t.Fatalf("checkCallback = %+v, %v; want sorted, deduplicated events and the default timeout", got, err)
	}
	if got, err := checkCallback(with(func(c *Callback) { c.Events, c.Timeout = []string{CallbackAll}, MaxCallbackTimeout })); err != nil || got.Timeout != MaxCallbackTimeout {
		t.Fatalf("all, max timeout: %+v, %v", got, err)
	}
	for _, tc := range []struct {
		c    Callback
		want string
	}{
		{with(func(c *Callback) { c.Name = "Page" }), `callback name "Page"`},
		{with(func(c *Callback) { c.Name = "" }), `callback name ""`},
		{with(func(c *Callback) { c.Events = nil }), "no event kinds"},
		{with(func(c *Callback) { c.Events = []string{"disk-on-fire"} }), `event kind "disk-on-fire"`},
		{with(func(c *Callback) { c.Events = []string{CallbackAll, EventLowSpace} }), "give it alone"},
		{with(func(c *Callback) { c.Command = "" }), "no command"},
		{with(func(c *Callback) { c.Command = "page.sh" }), `command "page.sh": give an absolute`},
		{with(func(c *Callback) { c.Command = "/usr/../bin/page" }), `command "/usr/../bin/page"`},
		{with(func(c *Callback) { c.Args = make([]string, 33) }), "33 arguments"},
		{with(func(c *Callback) { c.Args = []string{"a", strings.Repeat("x", 2000)} }), "argument 2"},
		{with(func(c *Callback) { c.Timeout = 500 * time.Millisecond }), "timeout 500ms: use 1s to 10m0s"},
		{with(func(c *Callback) { c.Timeout = 11 * time.Minute }), "timeout 11m0s"},
	} {
		if _, err := checkCallback(tc.c); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("checkCallback(%+v) = %v, want ErrInvalid with %q", tc.c, err, tc.want)
		}
	}
}

// The registry: add, list by name, a name twice, delete, a name not
// there, and the bound on its size.
func TestCallbackRegistry(t *testing.T) {
	ctx := context.Background()
	e := newStoreEngine(t, etcdtest.New(t), 0)
	b, err := e.AddCallback(ctx, Callback{Name: "b", Events: []string{EventDriveDown}, Command: "/bin/true", Args: []string{"%subject"}})
	if err != nil || b.Created.IsZero() || b.Timeout != DefaultCallbackTimeout {
		t.Fatalf("AddCallback = %+v, %v", b, err)
	}
	if _, err := e.AddCallback(ctx, Callback{Name: "a", Events: []string{CallbackAll}, Command: "/bin/false", Timeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddCallback(ctx, Callback{Name: "b", Events: []string{EventLowSpace}, Command: "/bin/true"}); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "callback b") {
		t.Fatalf("second b: %v, want ErrExists naming it", err)
	}
	if _, err := e.AddCallback(ctx, Callback{Name: "c", Events: []string{EventLowSpace}, Command: "bin/true"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("relative command: %v, want ErrInvalid", err)
	}
	cbs, err := e.Callbacks(ctx)
	if err != nil || len(cbs) != 2 || cbs[0].Name != "a" || cbs[1].Name != "b" || !cbs[1].Created.Equal(b.Created) || cbs[1].Args[0] != "%subject" {
		t.Fatalf("Callbacks = %+v, %v", cbs, err)
	}
	if err := e.DeleteCallback(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteCallback(ctx, "a"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "callback a") {
		t.Fatalf("delete a twice: %v, want ErrNotFound naming it", err)
	}
	if err := e.DeleteCallback(ctx, "A/b"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("delete a malformed name: %v, want ErrInvalid", err)
	}
	for i := len(cbs) - 1; i < MaxCallbacks; i++ {
		if _, err := e.AddCallback(ctx, Callback{Name: fmt.Sprintf("x%d", i), Events: []string{EventLowSpace}, Command: "/bin/true"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.AddCallback(ctx, Callback{Name: "one-more", Events: []string{EventLowSpace}, Command: "/bin/true"}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "delete one first") {
		t.Fatalf("callback %d: %v, want ErrInvalid", MaxCallbacks+1, err)
	}
}
