package vip

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrLinkDown: a public link check failed.
var ErrLinkDown = errors.New("vip: public link down")

// LinkUp returns a Config.LinkCheck that passes while network interface
// iface is up (administratively, IFF_UP) and has a carrier, as Linux's
// /sys/class/net/IFACE shows: a pulled cable, a switch port down or
// `ip link set IFACE down` fail it within a check interval.
func LinkUp(iface string) func(context.Context) error {
	return func(context.Context) error { return linkUp("/sys/class/net", iface) }
}

func linkUp(sys, iface string) error {
	dir := filepath.Join(sys, iface)
	flags, err := os.ReadFile(filepath.Join(dir, "flags"))
	if err != nil {
		return fmt.Errorf("%w: interface %s: %v", ErrLinkDown, iface, err)
	}
	f, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(flags)), "0x"), 16, 32)
	if err != nil {
		return fmt.Errorf("%w: interface %s: flags %q: %v", ErrLinkDown, iface, bytes.TrimSpace(flags), err)
	}
	if f&0x1 == 0 { // IFF_UP
		return fmt.Errorf("%w: interface %s is administratively down", ErrLinkDown, iface)
	}
	carrier, err := os.ReadFile(filepath.Join(dir, "carrier"))
	if err != nil || strings.TrimSpace(string(carrier)) != "1" {
		return fmt.Errorf("%w: interface %s has no carrier", ErrLinkDown, iface)
	}
	return nil
}

// CommandCheck returns a Config.LinkCheck that runs a command (no shell)
// and passes when it exits 0: e.g. ping -c 1 -W 1 GATEWAY, to see past
// this machine's own link. The check's context bounds it.
func CommandCheck(args []string) func(context.Context) error {
	return func(ctx context.Context) error {
		if len(args) == 0 {
			return nil
		}
		out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s: %v: %s", ErrLinkDown, strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
}
