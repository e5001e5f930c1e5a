package vip

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
)

// Hook puts a service address on this machine and takes it off. Add is
// called after the address's key is taken and before OnAcquire; Del after
// OnRelease, and at Start for every configured address (a crashed earlier
// process may have left it on the machine). Both are bounded by ctx, must
// be idempotent in effect, and should return in well under the fencing
// margin (Config.Margin).
type Hook interface {
	Add(ctx context.Context, addr netip.Addr) error
	Del(ctx context.Context, addr netip.Addr) error
}

// NoHook moves nothing: for addresses this machine has already (on Linux
// every 127.0.0.0/8 address is local without an alias), or when the
// serving code binds them itself.
type NoHook struct{}

// Add does nothing.
func (NoHook) Add(context.Context, netip.Addr) error { return nil }

// Del does nothing.
func (NoHook) Del(context.Context, netip.Addr) error { return nil }

// CommandHook runs commands, without a shell: each argument is a template
// in which {addr} is the address, {prefix} the prefix length and {iface}
// the interface.
type CommandHook struct {
	// AddArgs, DelArgs are the commands that add and remove an address,
	// e.g. ip addr add {addr}/{prefix} dev {iface}.
	AddArgs, DelArgs []string
	// AnnounceArgs, if set, runs after a successful add, e.g. a
	// gratuitous ARP (arping -U -c 2 -I {iface} {addr}) so that the
	// network's caches learn the address's new machine at once; its
	// failure is returned as Add's.
	AnnounceArgs []string
	// Prefix is the prefix length; 0 is the full length (32 or 128).
	Prefix int
	// Iface is the interface; "" is "lo".
	Iface string
}

var _ Hook = (*CommandHook)(nil)

// LoopbackHook is the default hook: the address as a /32 (/128) alias of
// the loopback interface, ip addr add|del {addr}/{prefix} dev lo (it needs
// CAP_NET_ADMIN). On a network, use MachineHook.
func LoopbackHook() *CommandHook {
	return &CommandHook{
		AddArgs: []string{"ip", "addr", "add", "{addr}/{prefix}", "dev", "{iface}"},
		DelArgs: []string{"ip", "addr", "del", "{addr}/{prefix}", "dev", "{iface}"},
	}
}

// MachineHook is the hook of a machine on a network: the address with
// prefix length prefix on interface iface, announced by a gratuitous ARP
// (IPv4; arping from iputils).
func MachineHook(iface string, prefix int) *CommandHook {
	h := LoopbackHook()
	h.Iface, h.Prefix = iface, prefix
	h.AnnounceArgs = []string{"arping", "-U", "-c", "2", "-I", "{iface}", "{addr}"}
	return h
}

// ParseCommand splits a command template given as one string (a flag's
// value) into arguments at white space, and checks its placeholders:
// {addr}, {prefix} and {iface}. An empty string is no command.
func ParseCommand(s string) ([]string, error) {
	args := strings.Fields(s)
	for _, a := range args {
		rest := a
		for {
			i := strings.IndexByte(rest, '{')
			if i < 0 {
				break
			}
			j := strings.IndexByte(rest[i:], '}')
			if j < 0 {
				return nil, fmt.Errorf("%w: command %q: unclosed %q", ErrConfig, s, rest[i:])
			}
			switch ph := rest[i : i+j+1]; ph {
			case "{addr}", "{prefix}", "{iface}":
			default:
				return nil, fmt.Errorf("%w: command %q: unknown placeholder %s (use {addr}, {prefix}, {iface})", ErrConfig, s, ph)
			}
			rest = rest[i+j+1:]
		}
	}
	return args, nil
}

// NewCommandHook returns the hook of three command templates given as
// strings (flags' values; see ParseCommand): add and del are required,
// announce may be empty. iface "" is "lo"; prefix 0 the full length.
func NewCommandHook(add, del, announce, iface string, prefix int) (*CommandHook, error) {
	h := &CommandHook{Iface: iface, Prefix: prefix}
	var err error
	if h.AddArgs, err = ParseCommand(add); err != nil {
		return nil, err
	}
	if h.DelArgs, err = ParseCommand(del); err != nil {
		return nil, err
	}
	if h.AnnounceArgs, err = ParseCommand(announce); err != nil {
		return nil, err
	}
	if len(h.AddArgs) == 0 || len(h.DelArgs) == 0 {
		return nil, fmt.Errorf("%w: an address hook needs both an add and a del command, e.g. %q and %q",
			ErrConfig, "ip addr add {addr}/{prefix} dev {iface}", "ip addr del {addr}/{prefix} dev {iface}")
	}
	if prefix < 0 || prefix > 128 {
		return nil, fmt.Errorf("%w: prefix length %d: want 0 (the full length) to 128", ErrConfig, prefix)
	}
	return h, nil
}

// Add runs AddArgs, then AnnounceArgs.
func (h *CommandHook) Add(ctx context.Context, addr netip.Addr) error {
	if err := h.run(ctx, h.AddArgs, addr); err != nil {
		return err
	}
	return h.run(ctx, h.AnnounceArgs, addr)
}

// Del runs DelArgs.
func (h *CommandHook) Del(ctx context.Context, addr netip.Addr) error {
	return h.run(ctx, h.DelArgs, addr)
}

// Expand returns a command template's arguments for addr.
func (h *CommandHook) Expand(tmpl []string, addr netip.Addr) []string {
	prefix := h.Prefix
	if prefix <= 0 {
		prefix = addr.BitLen()
	}
	iface := h.Iface
	if iface == "" {
		iface = "lo"
	}
	r := strings.NewReplacer("{addr}", addr.String(), "{prefix}", strconv.Itoa(prefix), "{iface}", iface)
	out := make([]string, len(tmpl))
	for i, a := range tmpl {
		out[i] = r.Replace(a)
	}
	return out
}

func (h *CommandHook) run(ctx context.Context, tmpl []string, addr netip.Addr) error {
	if len(tmpl) == 0 {
		return nil
	}
	args := h.Expand(tmpl, addr)
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s: %v: %s", ErrHook, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
