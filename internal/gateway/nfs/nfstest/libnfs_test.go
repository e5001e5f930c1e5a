package nfstest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/gateway/nfs"
)

// TestLibnfs copies a file to and from the gateway with Debian's userspace
// NFS client (libnfs-utils: nfs-cp, nfs-cat, nfs-ls), the client the HA
// failure tests use.
func TestLibnfs(t *testing.T) {
	for _, tool := range []string{"nfs-cp", "nfs-cat", "nfs-ls"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian package libnfs-utils; scripts/deps.sh installs it)", tool)
		}
	}
	f := New(t, 1, nfs.Export{Path: "/", NoRootSquash: true})
	c, root := mountRoot(t, f, authSys(0, 0))
	c.mkdir(root, "dir", 0o777)

	url := func(p string) string {
		return fmt.Sprintf("nfs://127.0.0.1/%s?nfsport=%d&mountport=%d&version=3&auto-traverse-mounts=0", p, f.Port, f.Port)
	}
	run := func(name string, args ...string) []byte {
		t.Helper()
		cmd := exec.Command(name, args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, errb.String())
			}
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%s %s: no answer in 60 s\n%s", name, strings.Join(args, " "), errb.String())
		}
		return out.Bytes()
	}

	data := bytes.Repeat([]byte("0123456789abcdef"), 3<<16) // 3 MiB: several WRITEs and READs
	src := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	run("nfs-cp", src, url("dir/copy"))
	if got := run("nfs-cat", url("dir/copy")); !bytes.Equal(got, data) {
		t.Fatalf("nfs-cat read %d bytes, not the %d written", len(got), len(data))
	}
	back := filepath.Join(t.TempDir(), "back")
	run("nfs-cp", url("dir/copy"), back)
	if got, err := os.ReadFile(back); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("nfs-cp back: %d bytes, %v", len(got), err)
	}
	ls := string(run("nfs-ls", url("dir")))
	if !strings.Contains(ls, "copy") || !strings.Contains(ls, fmt.Sprint(len(data))) {
		t.Fatalf("nfs-ls of dir:\n%s", ls)
	}
	if st := f.Server.Stats(); st.Ops["WRITE"].Count < 2 || st.Ops["MOUNT"].Count == 0 {
		t.Fatalf("stats after the copies: %+v", st.Ops)
	}
}
