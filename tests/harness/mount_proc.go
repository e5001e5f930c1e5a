package harness

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// MountProc is a `weft mount` process started by StartMount: a mount the
// test expects to die (a failpoint's crash action, say) and watches.
type MountProc struct {
	// Dir is the mount point.
	Dir  string
	cmd  *exec.Cmd
	out  *lockedBuf
	done chan struct{}
}

// StartMount is MountWith for a mount that may die under the test: it
// returns the process, so that the test can wait for its end and read its
// output. At cleanup the process is stopped (SIGTERM) if it still runs,
// and a mount point left behind by a process that died without
// unmounting (a dead FUSE connection) is detached.
func (c *Cluster) StartMount(dir string, flags []string, env ...string) *MountProc {
	c.tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.tb.Fatal(err)
	}
	args := []string{"--admin", strings.Join(adminAddrs(c.Dir), ","), "mount", "--log-level", "warn"}
	if c.PKI != "" {
		args = append(args, "--pki", c.PKI)
	}
	args = append(args, flags...)
	cmd := exec.Command(Binary(c.tb), append(args, dir)...)
	cmd.Env = append(os.Environ(), env...)
	m := &MountProc{Dir: dir, cmd: cmd, out: &lockedBuf{}, done: make(chan struct{})}
	pr, pw, err := os.Pipe()
	if err != nil {
		c.tb.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		c.tb.Fatal(err)
	}
	pw.Close()
	mounted := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			m.out.add(sc.Text())
			if strings.HasPrefix(sc.Text(), "mounted:") {
				close(mounted)
			}
		}
		_ = cmd.Wait()
		close(m.done)
	}()
	c.tb.Cleanup(func() {
		select {
		case <-m.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-m.done:
			case <-time.After(60 * time.Second):
				_ = cmd.Process.Kill()
				<-m.done
			}
		}
		m.Detach()
	})
	select {
	case <-mounted:
	case <-m.done:
		c.tb.Fatalf("harness: weft mount %s exited:\n%s", dir, m.out)
	case <-time.After(time.Minute):
		c.tb.Fatalf("harness: weft mount %s not mounted after a minute:\n%s", dir, m.out)
	}
	return m
}

// Stop ends the process as an unmount by the administrator would
// (SIGTERM: it flushes, unmounts and exits) and waits up to a minute for
// it; it fails the test if the process is still running then.
func (m *MountProc) Stop(tb testing.TB) {
	tb.Helper()
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(time.Minute):
		tb.Fatalf("harness: weft mount %s still running a minute after SIGTERM:\n%s", m.Dir, m.out)
	}
	m.Detach()
}

// Done is closed when the process has exited.
func (m *MountProc) Done() <-chan struct{} { return m.done }

// Killed reports whether the process has exited killed by SIGKILL (as
// the failpoint crash action and kill -9 end it).
func (m *MountProc) Killed() bool {
	select {
	case <-m.done:
	default:
		return false
	}
	ws, ok := m.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// Output returns what the process printed so far (standard output and
// error).
func (m *MountProc) Output() string { return m.out.String() }

// Detach lazily unmounts the mount point of a process that died (which
// leaves its FUSE mount behind: every access fails with ENOTCONN until it
// is unmounted); with nothing mounted there it does nothing. Call it once
// Done is closed.
func (m *MountProc) Detach() {
	_ = syscall.Unmount(m.Dir, syscall.MNT_DETACH) // EINVAL: not mounted
}

// Kill kills the process with SIGKILL (kill -9): the mount dies without
// unmounting or closing its session, whose lease then expires. Wait for
// Done after it.
func (m *MountProc) Kill() error { return m.cmd.Process.Kill() }
