package failpoint

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestEvalActions(t *testing.T) {
	if err := Eval("t/none"); err != nil {
		t.Fatalf("disabled point fired: %v", err)
	}
	if err := Enable("t/err", "error(disk on fire)"); err != nil {
		t.Fatal(err)
	}
	defer Disable("t/err")
	err := Eval("t/err")
	if !errors.Is(err, ErrInjected) || !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), "t/err") {
		t.Fatalf("Eval = %v", err)
	}
	if Fired("t/err") != 1 {
		t.Fatalf("fired %d", Fired("t/err"))
	}

	if err := Enable("t/twice", "2*error"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := Eval("t/twice"); !errors.Is(err, ErrInjected) {
			t.Fatalf("fire %d: %v", i, err)
		}
	}
	if err := Eval("t/twice"); err != nil {
		t.Fatalf("third fire of 2*error: %v", err)
	}

	if err := Enable("t/panic", "panic"); err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic action did not panic")
			}
		}()
		_ = Eval("t/panic")
	}()
	Disable("t/panic")
	if err := Eval("t/panic"); err != nil {
		t.Fatalf("disabled: %v", err)
	}
}

func TestEnableAllAndBadSpecs(t *testing.T) {
	if err := EnableAll("a/x=error; b/y=3*error(z)"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(Names(), ","); got != "a/x,b/y" {
		t.Fatalf("names %q", got)
	}
	Disable("a/x")
	Disable("b/y")
	for _, bad := range []string{"a/x", "a/x=explode", "a/x=0*error", "=error", "a x=error"} {
		if err := EnableAll(bad); err == nil {
			t.Errorf("EnableAll(%q) accepted", bad)
		}
	}
	if len(Names()) != 0 {
		t.Fatalf("bad specs left points: %v", Names())
	}
}

// crashChild names the environment variable that makes
// TestCrashActionKillsTheProcess the child process: it evaluates point
// t/crash until the process dies, printing each hit that passed.
const crashChild = "WEFT_FAILPOINT_TEST_CHILD"

func crashChildMain() {
	buf := bufio.NewWriter(os.Stdout)
	buf.WriteString("buffered, never flushed\n")
	defer fmt.Println("deferred call ran")
	for i := 1; i <= 5; i++ {
		if err := Eval("t/crash"); err != nil {
			fmt.Println("error:", err)
		}
		fmt.Printf("hit %d passed\n", i) // unbuffered: one write each
	}
	fmt.Println("no crash")
}

// The crash action kills the process at the N-th hit of the point, as
// kill -9 would: the parent sees SIGKILL, the hits before it passed,
// nothing after it ran (no deferred call, no flush of a buffer), and the
// last line on standard error names the point and the hit.
func TestCrashActionKillsTheProcess(t *testing.T) {
	if os.Getenv(crashChild) != "" {
		crashChildMain()
		os.Exit(0)
	}
	for _, tc := range []struct {
		spec   string
		passed int // hits printed before the crash
	}{
		{"t/crash=crash", 0},
		{"t/crash=1*crash", 0},
		{"t/other=error; t/crash=3*crash", 2},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashActionKillsTheProcess$")
			cmd.Env = append(os.Environ(), crashChild+"=1", EnvVar+"="+tc.spec)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("child: %v, want killed\nstdout:\n%s", err, stdout.String())
			}
			ws, ok := ee.Sys().(syscall.WaitStatus)
			if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
				t.Fatalf("child ended with %v, want SIGKILL\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			var want strings.Builder
			for i := 1; i <= tc.passed; i++ {
				fmt.Fprintf(&want, "hit %d passed\n", i)
			}
			if got := stdout.String(); got != want.String() {
				t.Errorf("child's stdout:\n%s\nwant:\n%s", got, want.String())
			}
			line := fmt.Sprintf("failpoint t/crash: crash (hit %d)\n", tc.passed+1)
			if !strings.HasSuffix(stderr.String(), line) {
				t.Errorf("child's stderr ends %q, want %q", stderr.String(), line)
			}
		})
	}
}

func TestCrashSpecs(t *testing.T) {
	for _, bad := range []string{"t/c=0*crash", "t/c=crash(now)", "t/c=-1*crash"} {
		if err := EnableAll(bad); err == nil {
			t.Errorf("EnableAll(%q) accepted", bad)
		}
	}
	if err := EnableAll("t/c=4*crash"); err != nil {
		t.Fatal(err)
	}
	defer Disable("t/c")
	for i := 0; i < 3; i++ {
		if err := Eval("t/c"); err != nil {
			t.Fatalf("hit %d of 4*crash: %v", i+1, err)
		}
	}
	if Fired("t/c") != 0 {
		t.Fatalf("hits before the crash counted as fired: %d", Fired("t/c"))
	}
	if got := strings.Join(Names(), ","); got != "t/c" {
		t.Fatalf("names %q", got)
	}
}

// BenchmarkEvalDisabled measures a point when no point is enabled: one
// atomic load.
func BenchmarkEvalDisabled(b *testing.B) {
	for b.Loop() {
		if err := Eval("t/bench"); err != nil {
			b.Fatal(err)
		}
	}
}
