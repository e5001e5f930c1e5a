package job

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Callbacks: administrators' own commands, run for the events of the event
// log they name (weft callback). The registry lives in etcd
// (callbackRecord in schema.go); the coordinator's node runs the commands
// (CallbackWorker, callback_worker.go) and stores each run with its event
// (Event.Callbacks).

// Limits of a callback.
const (
	// DefaultCallbackTimeout is a callback's Timeout when it sets none.
	DefaultCallbackTimeout = 60 * time.Second
	// MaxCallbackTimeout bounds Timeout: the worker runs one command at a
	// time, so a long one delays the callbacks of every later event.
	MaxCallbackTimeout = 10 * time.Minute
	// MaxCallbackOutput is how much of a run's output is kept: the last
	// bytes of its stdout and stderr, interleaved as written.
	MaxCallbackOutput = 4096
	// MaxCallbacks bounds the registry, and so the runs one event keeps.
	MaxCallbacks = 32
	// CallbackAll, as a callback's only event kind, matches every kind.
	CallbackAll = "all"
)

// Bounds of a callback's command line, so that its record stays small.
const (
	maxCallbackArgs   = 32
	maxCallbackArgLen = 1024
)

// Callback is a command the coordinator's node runs for events of the
// kinds it names (see CallbackWorker for how it runs).
type Callback struct {
	// Name identifies it: 1-32 of a-z, 0-9, '-', '_'.
	Name string `json:"name"`
	// Events are the event kinds it runs for (EventKinds()), or the one
	// kind CallbackAll; AddCallback sorts them and drops duplicates.
	Events []string `json:"events"`
	// Command is the absolute path of an executable. It runs without a
	// shell, on whichever node is coordinator: it must exist there (a run
	// where it does not says "not found").
	Command string `json:"command"`
	// Args are its arguments. In each, %id, %kind, %subject, %detail,
	// %job and %time become the event's, %NAME the event's parameter NAME
	// (Event.Params; empty when the event has none of that name), and %%
	// a single % (ExpandArg).
	Args []string `json:"args,omitempty"`
	// Timeout bounds a run; at its end the command's process group is
	// killed. 1 s to MaxCallbackTimeout; DefaultCallbackTimeout when 0
	// at AddCallback.
	Timeout time.Duration `json:"timeout"`
	// Created is when AddCallback stored it: it runs for events recorded
	// from then on, not for older ones.
	Created time.Time `json:"created"`
}

// Matches reports whether c runs for ev: ev's kind is one of c's (or c's
// is CallbackAll) and ev was recorded at or after c was created (both
// times are stamped by nodes' clocks: a skew between them moves the
// boundary by as much).
func (c Callback) Matches(ev Event) bool {
	if ev.Time.Before(c.Created) {
		return false
	}
	return slices.Contains(c.Events, CallbackAll) || slices.Contains(c.Events, ev.Kind)
}

// CallbackRun is one run of a callback for an event, as the event keeps
// it.
type CallbackRun struct {
	// Name is the callback's.
	Name string `json:"name"`
	// Node is where it ran (the coordinator's node then); Started when.
	Node    string    `json:"node"`
	Started time.Time `json:"started"`
	// Seconds is how long it ran.
	Seconds float64 `json:"seconds"`
	// Exit is the command's exit status; -1 when it did not exit by
	// itself (Error says why).
	Exit int `json:"exit"`
	// Error is "" when the command ran and exited, whatever its status;
	// otherwise it starts with what happened, then a colon and the
	// details: "timeout", "not found", "not executable", "signal",
	// "stopped" (the node stopped during the run), "start" (it could not
	// be started).
	Error string `json:"error,omitempty"`
	// Output is the last MaxCallbackOutput bytes of its stdout and
	// stderr, interleaved as written (invalid UTF-8 replaced).
	Output string `json:"output,omitempty"`
}

// Result is the run's outcome in a word or two: "exit 0", "exit 3",
// "timeout", "not found", …
func (r CallbackRun) Result() string {
	if r.Error == "" {
		return fmt.Sprintf("exit %d", r.Exit)
	}
	word, _, _ := strings.Cut(r.Error, ":")
	return word
}

// AddCallback validates c, stamps its Created time, stores it and returns
// it as stored. A malformed name, an unknown event kind, a command that is
// not an absolute path, too many or too long arguments, or a timeout out
// of range is ErrInvalid naming the field; a name in use is ErrExists;
// more than MaxCallbacks is ErrInvalid. Whether the command exists is not
// checked here: it runs on the coordinator's node, which may not be this
// one (a run says "not found" or "not executable").
func (e *Engine) AddCallback(ctx context.Context, c Callback) (Callback, error) {
	c, err := checkCallback(c)
	if err != nil {
		return c, err
	}
	c.Created = now()
	resp, err := e.cfg.Client.Get(ctx, prefixCallbacks, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return c, fmt.Errorf("job: count callbacks: %w", err)
	}
	if resp.Count >= MaxCallbacks {
		return c, fmt.Errorf("%w: callback %s: the cluster has %d callbacks, the most it keeps: delete one first (weft callback delete NAME)", ErrInvalid, c.Name, resp.Count)
	}
	key := callbackKey(c.Name)
	tr, err := e.cfg.Client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, encode(&callbackRecord{Callback: c}))).Commit()
	if err != nil {
		return c, fmt.Errorf("job: add callback %s: %w", c.Name, err)
	}
	if !tr.Succeeded {
		return c, fmt.Errorf("%w: callback %s: choose another name, or delete it first (weft callback delete %s)", ErrExists, c.Name, c.Name)
	}
	e.log.Info("callback added", "callback", c.Name, "events", strings.Join(c.Events, ","), "command", c.Command)
	return c, nil
}

// checkCallback returns c with its events sorted and deduplicated and its
// timeout defaulted, or ErrInvalid naming the field that is wrong. It is
// a pure function.
func checkCallback(c Callback) (Callback, error) {
	if !validName(c.Name) {
		return c, fmt.Errorf("%w: callback name %q: use 1-32 of a-z, 0-9, '-', '_'", ErrInvalid, c.Name)
	}
	if len(c.Events) == 0 {
		return c, fmt.Errorf("%w: callback %s: no event kinds: name one or more of %s, or %s", ErrInvalid, c.Name, strings.Join(EventKinds(), ", "), CallbackAll)
	}
	evs := slices.Clone(c.Events)
	for _, k := range evs {
		if k != CallbackAll && !slices.Contains(EventKinds(), k) {
			return c, fmt.Errorf("%w: callback %s: event kind %q: use one of %s, or %s", ErrInvalid, c.Name, k, strings.Join(EventKinds(), ", "), CallbackAll)
		}
	}
	slices.Sort(evs)
	c.Events = slices.Compact(evs)
	if len(c.Events) > 1 && slices.Contains(c.Events, CallbackAll) {
		return c, fmt.Errorf("%w: callback %s: event kinds %s: %s already means every kind; give it alone", ErrInvalid, c.Name, strings.Join(c.Events, ","), CallbackAll)
	}
	switch {
	case c.Command == "":
		return c, fmt.Errorf("%w: callback %s: no command: give the absolute path of an executable", ErrInvalid, c.Name)
	case !filepath.IsAbs(c.Command) || filepath.Clean(c.Command) != c.Command:
		return c, fmt.Errorf("%w: callback %s: command %q: give an absolute, clean path (such as /usr/local/bin/page-oncall); it runs without a shell and without $PATH", ErrInvalid, c.Name, c.Command)
	case len(c.Command) > maxCallbackArgLen || strings.ContainsRune(c.Command, 0):
		return c, fmt.Errorf("%w: callback %s: command %.40q…: at most %d bytes, without NUL", ErrInvalid, c.Name, c.Command, maxCallbackArgLen)
	}
	if len(c.Args) > maxCallbackArgs {
		return c, fmt.Errorf("%w: callback %s: %d arguments: at most %d", ErrInvalid, c.Name, len(c.Args), maxCallbackArgs)
	}
	for i, a := range c.Args {
		if len(a) > maxCallbackArgLen || strings.ContainsRune(a, 0) {
			return c, fmt.Errorf("%w: callback %s: argument %d: at most %d bytes, without NUL", ErrInvalid, c.Name, i+1, maxCallbackArgLen)
		}
	}
	switch {
	case c.Timeout == 0:
		c.Timeout = DefaultCallbackTimeout
	case c.Timeout < time.Second || c.Timeout > MaxCallbackTimeout:
		return c, fmt.Errorf("%w: callback %s: timeout %s: use 1s to %s", ErrInvalid, c.Name, c.Timeout, MaxCallbackTimeout)
	}
	return c, nil
}

// Callbacks returns the registered callbacks, by name.
func (e *Engine) Callbacks(ctx context.Context) ([]Callback, error) {
	resp, err := e.cfg.Client.Get(ctx, prefixCallbacks, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("job: read callbacks: %w", err)
	}
	out := make([]Callback, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r callbackRecord
		if err := decode(string(kv.Key), kv.Value, &r); err != nil {
			return nil, err
		}
		out = append(out, r.Callback)
	}
	return out, nil
}

// DeleteCallback removes the callback called name; one without that name
// is ErrNotFound. A run in progress finishes, and is stored with its
// event.
func (e *Engine) DeleteCallback(ctx context.Context, name string) error {
	if !validName(name) {
		return fmt.Errorf("%w: callback name %q: use 1-32 of a-z, 0-9, '-', '_'", ErrInvalid, name)
	}
	resp, err := e.cfg.Client.Delete(ctx, callbackKey(name))
	if err != nil {
		return fmt.Errorf("job: delete callback %s: %w", name, err)
	}
	if resp.Deleted == 0 {
		return fmt.Errorf("%w: callback %s: no such callback (weft callback list shows them)", ErrNotFound, name)
	}
	e.log.Info("callback deleted", "callback", name)
	return nil
}
