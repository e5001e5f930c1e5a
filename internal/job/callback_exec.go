package job

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// How a callback's command runs: the process it starts, its environment
// and arguments, and what is kept of its output.

// callbackWaitDelay is how long a run waits, once its command has exited
// or been killed, for processes it left behind to close its output (they
// are in its process group and are killed with it at the timeout, unless
// they left the group).
const callbackWaitDelay = 5 * time.Second

// runCallback runs c's command for ev on this node (named node) and
// returns the run: its exit status, or why it has none, its duration and
// the tail of its output. The command runs without a shell in "/", with
// this process's environment (less inherited WEFT_EVENT_* and
// WEFT_PARAM_* variables) plus the event's (CallbackEnv), its arguments
// expanded (ExpandArg), stdin empty, in a process group of its own that
// is killed (SIGKILL) at c.Timeout or when ctx ends. It never fails: a
// command that cannot run is a run with an Error.
func runCallback(ctx context.Context, c Callback, ev Event, node string) CallbackRun {
	run := CallbackRun{Name: c.Name, Node: node, Started: now(), Exit: -1}
	fi, err := os.Stat(c.Command)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		run.Error = fmt.Sprintf("not found: %s does not exist on node %s", c.Command, node)
		return run
	case err != nil:
		run.Error = fmt.Sprintf("not found: %s on node %s: %v", c.Command, node, err)
		return run
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
		run.Error = fmt.Sprintf("not executable: %s on node %s is %s (chmod +x it, or point the callback at an executable file)", c.Command, node, fi.Mode())
		return run
	}
	tctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	vars := callbackVars(ev)
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = ExpandArg(a, vars)
	}
	cmd := exec.CommandContext(tctx, c.Command, args...)
	cmd.Dir = "/"
	cmd.Env = CallbackEnv(os.Environ(), ev)
	out := &tailWriter{max: MaxCallbackOutput}
	cmd.Stdout, cmd.Stderr = out, out // one writer: one pipe, written in order
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = callbackWaitDelay
	start := time.Now()
	err = cmd.Run()
	run.Seconds = time.Since(start).Seconds()
	run.Output = out.String()
	var ee *exec.ExitError
	switch {
	case err == nil:
		run.Exit = 0
	case errors.Is(tctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		run.Error = fmt.Sprintf("timeout: killed after %s (the callback's --timeout)", c.Timeout)
	case ctx.Err() != nil:
		run.Error = fmt.Sprintf("stopped: node %s stopped its callbacks during the run; the command was killed", node)
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			run.Error = fmt.Sprintf("signal: the command was killed by %s", ws.Signal())
		} else {
			run.Exit = ee.ExitCode()
		}
	case errors.Is(err, exec.ErrWaitDelay) && cmd.ProcessState != nil:
		// It exited; something it started kept its output open.
		run.Exit = cmd.ProcessState.ExitCode()
	default:
		run.Error = fmt.Sprintf("start: %s on node %s: %v", c.Command, node, err)
	}
	return run
}

// callbackVars are the names ExpandArg substitutes for ev: its parameters,
// then (taking precedence) id, kind, subject, detail, job ("" when none)
// and time (RFC 3339).
func callbackVars(ev Event) map[string]string {
	vars := maps.Clone(ev.Params)
	if vars == nil {
		vars = map[string]string{}
	}
	vars["id"] = strconv.FormatUint(ev.ID, 10)
	vars["kind"] = ev.Kind
	vars["subject"] = ev.Subject
	vars["detail"] = ev.Detail
	vars["job"] = ""
	if ev.Job != 0 {
		vars["job"] = strconv.FormatUint(uint64(ev.Job), 10)
	}
	vars["time"] = ev.Time.UTC().Format(time.RFC3339)
	return vars
}

// ExpandArg returns arg with every %NAME (NAME: a-z, 0-9, '_') replaced by
// vars[NAME] ("" when vars has none) and every %% by %; a % followed by
// anything else stays. It is a pure function.
func ExpandArg(arg string, vars map[string]string) string {
	if !strings.Contains(arg, "%") {
		return arg
	}
	var b strings.Builder
	for i := 0; i < len(arg); {
		if arg[i] != '%' {
			b.WriteByte(arg[i])
			i++
			continue
		}
		if i+1 < len(arg) && arg[i+1] == '%' {
			b.WriteByte('%')
			i += 2
			continue
		}
		j := i + 1
		for j < len(arg) && isParamByte(arg[j]) {
			j++
		}
		if j == i+1 {
			b.WriteByte('%')
			i++
			continue
		}
		b.WriteString(vars[arg[i+1:j]])
		i = j
	}
	return b.String()
}

func isParamByte(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' }

// CallbackEnv returns the environment of a callback's command for ev:
// base without its WEFT_EVENT_* and WEFT_PARAM_* variables (so none is
// inherited from the server's own environment), then WEFT_EVENT_ID,
// WEFT_EVENT_KIND, WEFT_EVENT_SUBJECT, WEFT_EVENT_DETAIL, WEFT_EVENT_JOB
// ("" when none), WEFT_EVENT_TIME (RFC 3339) and WEFT_PARAM_<KEY> for each
// parameter, KEY upper-cased, in key order. It is a pure function.
func CallbackEnv(base []string, ev Event) []string {
	env := make([]string, 0, len(base)+6+len(ev.Params))
	for _, kv := range base {
		if !strings.HasPrefix(kv, "WEFT_EVENT_") && !strings.HasPrefix(kv, "WEFT_PARAM_") {
			env = append(env, kv)
		}
	}
	vars := callbackVars(ev)
	for _, k := range []string{"id", "kind", "subject", "detail", "job", "time"} {
		env = append(env, "WEFT_EVENT_"+strings.ToUpper(k)+"="+vars[k])
	}
	for _, k := range slices.Sorted(maps.Keys(ev.Params)) {
		env = append(env, "WEFT_PARAM_"+strings.ToUpper(k)+"="+ev.Params[k])
	}
	return env
}

// tailWriter keeps the last max bytes written to it.
//
// Locking: mu guards buf (exec writes from its copying goroutine; String
// is called after the command ended, but a process it left behind may
// still write).
type tailWriter struct {
	max int

	mu  sync.Mutex
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > 2*w.max { // trim now and then, not at every write
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-w.max:]...)
	}
	return len(p), nil
}

// String returns the last max bytes, starting at a whole character, with
// invalid UTF-8 replaced.
func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := w.buf
	if len(b) > w.max {
		b = b[len(b)-w.max:]
		for i := 0; i < utf8.UTFMax && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
			b = b[1:]
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
