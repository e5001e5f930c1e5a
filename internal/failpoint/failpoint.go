// Package failpoint is weft's fault-injection registry: named points in the
// code where a test (or an operator reproducing a bug) makes the program
// fail on purpose, instead of hoping a sleep or a kill lands at the right
// moment.
//
// A point is a call to Eval at the place a fault matters:
//
//	if err := failpoint.Eval("client/before-commit"); err != nil {
//		return err // as if the process had died here
//	}
//
// Points are off unless enabled, and an Eval of a disabled point costs one
// atomic load. They are enabled in-process with Enable, or for a whole
// process with the environment variable WEFT_FAILPOINTS, read at start:
//
//	WEFT_FAILPOINTS='client/before-commit=error;drive/put=2*error(disk on fire)'
//
// An action is one of
//
//	off            disable the point
//	error          Eval returns ErrInjected
//	error(TEXT)    Eval returns ErrInjected with TEXT
//	panic          Eval panics (the goroutine unwinds: deferred calls run)
//	crash          the process dies at once, as kill -9 would (see below)
//	N*ACTION       the action fires N times, then the point turns off;
//	N*crash        the first N-1 hits pass, the N-th kills the process
//
// crash is for crash-consistency tests: the process sends itself SIGKILL
// at the point, after writing one line "failpoint NAME: crash (hit N)" to
// standard error. Nothing of the process runs after it: no deferred call,
// no shutdown, no flush of a user-space buffer; what the process had
// handed to the kernel (written files, sent bytes) stays, what it held in
// memory is gone, and its parent sees it killed by SIGKILL. It is kill -9
// landing exactly at the point. (os.Exit also skips deferred calls, but
// exits with a status of the program's choosing, which a supervisor tells
// apart from a crash.) A power cut differs: it also loses what the kernel
// had not written out, which no failpoint can show.
//
// Point names are "package/step" and documented where Eval is called and
// in docs/architecture.md ("Fault injection"); Names lists those enabled.
package failpoint

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ErrInjected is what an enabled point returns.
var ErrInjected = errors.New("failpoint: injected fault")

// EnvVar names the environment variable read at process start.
const EnvVar = "WEFT_FAILPOINTS"

type kind int

const (
	kindError kind = iota
	kindPanic
	kindCrash
)

type point struct {
	kind  kind
	text  string
	left  int // fires left; < 0: unlimited
	pass  int // hits that pass before the action fires (N*crash: N-1)
	hits  int // hits since enabled
	fired int
}

var (
	mu      sync.Mutex
	points  = map[string]*point{}
	enabled atomic.Int32 // len(points), read without the lock
)

func init() {
	if v := os.Getenv(EnvVar); v != "" {
		if err := EnableAll(v); err != nil {
			// A typo here would silently test nothing: refuse to start.
			panic(fmt.Sprintf("%s=%q: %v", EnvVar, v, err))
		}
	}
}

// Eval returns nil unless the point name is enabled; then it performs the
// point's action: returns an error wrapping ErrInjected, panics, or ends
// the process (crash: Eval does not return). A disabled point costs one
// atomic load.
func Eval(name string) error {
	if enabled.Load() == 0 {
		return nil
	}
	mu.Lock()
	p := points[name]
	if p == nil {
		mu.Unlock()
		return nil
	}
	p.hits++
	if p.hits <= p.pass {
		mu.Unlock()
		return nil
	}
	if p.kind == kindCrash {
		// Under the lock: no other point fires, or changes, meanwhile.
		crash(name, p.hits)
	}
	p.fired++
	if p.left > 0 {
		p.left--
		if p.left == 0 {
			delete(points, name)
			enabled.Store(int32(len(points)))
		}
	}
	k, text := p.kind, p.text
	mu.Unlock()
	msg := name
	if text != "" {
		msg += ": " + text
	}
	if k == kindPanic {
		panic(fmt.Sprintf("failpoint %s", msg))
	}
	return fmt.Errorf("%w at %s", ErrInjected, msg)
}

// crash writes one line to standard error and kills the process with
// SIGKILL; it does not return.
func crash(name string, hit int) {
	// One write(2), unbuffered: the line is in the pipe or log file before
	// the signal, so whoever reads the output can tell this crash from
	// another one.
	fmt.Fprintf(os.Stderr, "failpoint %s: crash (hit %d)\n", name, hit)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	for {
		// The kernel is taking the process down; nothing here runs on.
		time.Sleep(time.Hour)
	}
}

// Enable sets the action of point name (see the package comment); "off"
// disables it.
func Enable(name, action string) error {
	if name == "" || strings.ContainsAny(name, "=; \t") {
		return fmt.Errorf("failpoint: bad point name %q: use letters, digits, '/', '-' and '_'", name)
	}
	p, off, err := parse(action)
	if err != nil {
		return fmt.Errorf("failpoint %s: %w", name, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if off {
		delete(points, name)
	} else {
		points[name] = p
	}
	enabled.Store(int32(len(points)))
	return nil
}

// Disable turns point name off.
func Disable(name string) { _ = Enable(name, "off") }

// EnableAll enables a list "name=action;name=action" (the format of
// WEFT_FAILPOINTS).
func EnableAll(spec string) error {
	for _, f := range strings.Split(spec, ";") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		name, action, ok := strings.Cut(f, "=")
		if !ok {
			return fmt.Errorf("failpoint: %q: want NAME=ACTION, e.g. client/before-commit=error", f)
		}
		if err := Enable(strings.TrimSpace(name), strings.TrimSpace(action)); err != nil {
			return err
		}
	}
	return nil
}

// Names returns the enabled points, sorted.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	out := make([]string, 0, len(points))
	for n := range points {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Fired returns how many times point name fired since it was last
// enabled (0 once it turned itself off after N fires: use a larger N).
func Fired(name string) int {
	mu.Lock()
	defer mu.Unlock()
	if p := points[name]; p != nil {
		return p.fired
	}
	return 0
}

func parse(action string) (*point, bool, error) {
	p := &point{left: -1}
	a := action
	count := 0
	if n, rest, ok := strings.Cut(a, "*"); ok {
		c, err := strconv.Atoi(n)
		if err != nil || c < 1 {
			return nil, false, fmt.Errorf("bad count in %q: want N*ACTION with N >= 1", action)
		}
		p.left, a, count = c, rest, c
	}
	switch {
	case a == "off":
		return nil, true, nil
	case a == "error":
		p.kind = kindError
	case strings.HasPrefix(a, "error(") && strings.HasSuffix(a, ")"):
		p.kind, p.text = kindError, a[len("error("):len(a)-1]
	case a == "panic":
		p.kind = kindPanic
	case a == "crash":
		// A crash fires once: N counts the hits up to it instead.
		p.kind, p.left = kindCrash, -1
		if count > 0 {
			p.pass = count - 1
		}
	default:
		return nil, false, fmt.Errorf("unknown action %q: want off, error, error(TEXT), panic, crash, or N*ACTION", action)
	}
	return p, false, nil
}
