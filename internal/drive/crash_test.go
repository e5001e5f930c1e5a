package drive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/weftfs/weft/internal/failpoint"
)

// crashChild names the environment variable that makes TestCrashPoints
// the child process: "DIR OP BLOCKID" — open the drive in DIR and write
// block BLOCKID with OP (put, stage, adopt) until a failpoint kills it.
const crashChild = "WEFT_DRIVE_CRASH_CHILD"

// crashPayload is the block every crash test writes: a few segments and a
// tail, so that a torn write would show in the CRCs.
func crashPayload() []byte { return payload(3*SegmentSize+777, 41) }

func crashHeader(id BlockID) BlockHeader {
	h := BlockHeader{ID: id, Owner: 100, Stripe: 2, Unit: 1, Generation: 5, SegmentSize: SegmentSize}
	h.SegmentCRCs, _ = AppendSegmentCRCs(nil, crashPayload())
	return h
}

func crashChildMain(spec string) error {
	f := strings.Fields(spec)
	if len(f) != 3 {
		return fmt.Errorf("bad %s %q", crashChild, spec)
	}
	dir, op := f[0], f[1]
	id, err := ParseBlockID(f[2])
	if err != nil {
		return err
	}
	ctx := context.Background()
	h, data := crashHeader(id), crashPayload()
	if op == "stage" {
		r, err := OpenReadOnly(dir, testCluster, 7)
		if err != nil {
			return err
		}
		_, err = r.Stage(ctx, h, data)
		return err
	}
	d, err := Open(dir, testOptions(7))
	if err != nil {
		return err
	}
	if op == "put" {
		return d.Put(ctx, h, bytes.NewReader(data), int64(len(data)))
	}
	r, err := OpenReadOnly(dir, testCluster, 7)
	if err != nil {
		return err
	}
	name, err := r.Stage(ctx, h, data)
	if err != nil {
		return err
	}
	return d.Adopt(ctx, h, name, int64(len(data)))
}

// A write killed at each of its durability steps (failpoint crash, as
// kill -9) leaves the drive in one of two states, which the next Open
// tidies: before the link, no block and a temp file that Open removes;
// after it, the whole block (every CRC good) and a temp name Open
// removes. Either way a retry of the write succeeds and reads back.
func TestCrashPoints(t *testing.T) {
	if spec := os.Getenv(crashChild); spec != "" {
		err := crashChildMain(spec)
		fmt.Printf("no crash: %v\n", err)
		os.Exit(0)
	}
	for _, tc := range []struct {
		op, point string
		stored    bool // the block is whole after the crash
	}{
		{"put", "drive/put-before-sync", false},
		{"put", "drive/put-before-link", false},
		{"put", "drive/put-before-dirsync", true},
		{"stage", "drive/stage-before-sync", false},
		{"adopt", "drive/adopt-before-link", false},
		{"adopt", "drive/adopt-before-dirsync", true},
	} {
		t.Run(tc.point, func(t *testing.T) {
			dir := t.TempDir()
			d := openAt(t, dir)
			d.Close()
			id := NewBlockID()
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashPoints$")
			cmd.Env = append(os.Environ(), crashChild+"="+dir+" "+tc.op+" "+id.String(), failpoint.EnvVar+"="+tc.point+"=crash")
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child: %v, want killed by the failpoint:\n%s", err, out)
			}
			if want := "failpoint " + tc.point + ": crash"; !strings.Contains(string(out), want) {
				t.Fatalf("child's output lacks %q:\n%s", want, out)
			}
			sub, final := filepath.Split(blockPathIn(dir, id))
			temps := tempsIn(t, sub)
			if temps != 1 {
				t.Fatalf("the crash left %d temp files in %s, want 1", temps, sub)
			}
			if _, err := os.Stat(filepath.Join(sub, final)); (err == nil) != tc.stored {
				t.Fatalf("block file after the crash: %v, want stored=%v", err, tc.stored)
			}

			d = openAt(t, dir)
			if n := tempsIn(t, sub); n != 0 {
				t.Fatalf("Open left %d temp files", n)
			}
			ctx := context.Background()
			got, _, err := d.Get(ctx, id, 0, -1)
			switch {
			case tc.stored && (err != nil || !bytes.Equal(got, crashPayload())):
				t.Fatalf("the block linked before the crash reads %d bytes, %v", len(got), err)
			case !tc.stored && !errors.Is(err, ErrNotFound):
				t.Fatalf("Get of the block not linked before the crash: %v", err)
			}
			u, err := d.Usage()
			if want := map[bool]int64{true: 1, false: 0}[tc.stored]; err != nil || u.Blocks != want {
				t.Fatalf("Open counted %d blocks (%v), want %d", u.Blocks, err, want)
			}
			// The writer's retry, as the client makes it.
			data := crashPayload()
			if err := d.Put(ctx, crashHeader(id), bytes.NewReader(data), int64(len(data))); err != nil {
				t.Fatalf("retried put: %v", err)
			}
			if got, _, err := d.Get(ctx, id, 0, -1); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("after the retry: %d bytes, %v", len(got), err)
			}
		})
	}
}

// blockPathIn is the path of block id in drive directory dir.
func blockPathIn(dir string, id BlockID) string {
	s := id.String()
	return filepath.Join(dir, blocksDir, s[:2], s)
}

func tempsIn(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if isTemp(e.Name()) {
			n++
		}
	}
	return n
}

// The error action of each write point fails the write as the step's own
// failure would, leaving no temp file; past the link the block is stored
// (a failed directory sync), and the retry succeeds either way.
func TestWritePointErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		op, point string
		stored    bool
	}{
		{"put", "drive/put-before-sync", false},
		{"put", "drive/put-before-link", false},
		{"put", "drive/put-before-dirsync", true},
		{"stage", "drive/stage-before-sync", false},
		{"adopt", "drive/adopt-before-link", false},
		{"adopt", "drive/adopt-before-dirsync", true},
	} {
		t.Run(tc.point, func(t *testing.T) {
			d := openTest(t)
			h, data := crashHeader(NewBlockID()), crashPayload()
			var name string
			if tc.op == "adopt" {
				name = stageAs(t, d, h, data)
			}
			if err := failpoint.Enable(tc.point, "1*error"); err != nil {
				t.Fatal(err)
			}
			defer failpoint.Disable(tc.point)
			var err error
			switch tc.op {
			case "put":
				err = d.Put(ctx, h, bytes.NewReader(data), int64(len(data)))
			case "stage":
				var r *Drive
				if r, err = OpenReadOnly(d.Path(), testCluster, d.ID()); err != nil {
					t.Fatal(err)
				}
				_, err = r.Stage(ctx, h, data)
				r.Close()
			case "adopt":
				err = d.Adopt(ctx, h, name, int64(len(data)))
			}
			if !errors.Is(err, failpoint.ErrInjected) {
				t.Fatalf("%s with %s=error: %v", tc.op, tc.point, err)
			}
			sub, _ := filepath.Split(blockPathIn(d.Path(), h.ID))
			if n := tempsIn(t, sub); n != 0 {
				t.Fatalf("the failed %s left %d temp files", tc.op, n)
			}
			if _, _, err := d.Get(ctx, h.ID, 0, -1); (err == nil) != tc.stored {
				t.Fatalf("Get after the failed %s: %v, want stored=%v", tc.op, err, tc.stored)
			}
			if err := d.Put(ctx, h, bytes.NewReader(data), int64(len(data))); err != nil {
				t.Fatalf("retried put: %v", err)
			}
		})
	}
}
