package local

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
)

// The control API listens on a unix socket of mode 0600 in a directory of
// mode 0700: it kills and starts the cluster's nodes, so only the user who
// runs `weft local up` (and root) may connect. It is DIR/control/local.sock, or,
// when that path is too long for a socket address (108 bytes on Linux),
// weft-local-HASH/local.sock in the temporary directory; DIR/local.addr
// names it either way.
const controlSocket = "local.sock"

// maxSocketPath leaves room under the kernel's sun_path limit.
const maxSocketPath = 100

// listenControl listens on the control socket of the cluster in dir and
// returns the listener and the socket's path.
func listenControl(dir string) (net.Listener, string, error) {
	sockDir := filepath.Join(dir, "control")
	if len(filepath.Join(sockDir, controlSocket)) > maxSocketPath {
		h := sha256.Sum256([]byte(dir))
		sockDir = filepath.Join(os.TempDir(), "weft-local-"+hex.EncodeToString(h[:6]))
	}
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		return nil, "", fmt.Errorf("local: control API: %w", err)
	}
	// The directory is this user's alone (an existing one too): nobody
	// else may reach the socket, even in the moment before its chmod.
	if err := os.Chmod(sockDir, 0o700); err != nil {
		return nil, "", fmt.Errorf("local: control API: %w", err)
	}
	path := filepath.Join(sockDir, controlSocket)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) { // left by a killed supervisor (the directory lock is ours)
		return nil, "", fmt.Errorf("local: control API: %w", err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, "", fmt.Errorf("local: control API: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, "", fmt.Errorf("local: control API: %w", err)
	}
	return l, path, nil
}

// closers closes each in turn.
type closers []io.Closer

func (c closers) Close() error {
	var errs []error
	for _, x := range c {
		errs = append(errs, x.Close())
	}
	return errors.Join(errs...)
}

// removeOnClose removes a file when closed.
type removeOnClose string

func (r removeOnClose) Close() error {
	if err := os.Remove(string(r)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
