package server

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/weftfs/weft/internal/admin"
	"github.com/weftfs/weft/internal/vip"
)

// The NFS service addresses (weft server --nfs-address IP,...): a
// vip.Manager on the node's runner makes the node a candidate for each;
// while it holds one, the gateway serves it (NFSRole.Serve at --nfs-port,
// with the write verifier of the holding's epoch), and it stops serving
// (NFSRole.Stop: the listener and connections closed, the requests in
// progress answered, within nfsReleaseBound) when the Manager releases it
// — a fence before its lease can expire, a failed public link, a node
// stopping (which hands the addresses over at once by revoking the
// lease).

// nfsReleaseBound is the share of the fencing margin that NFSRole.Stop
// may take to wait for the requests in progress on a released address;
// the rest is the hook's Del.
func nfsReleaseBound(margin time.Duration) time.Duration { return margin * 2 / 3 }

// nfsAddressHook builds the address hook of c: explicit commands, or the
// machine hook of an interface, or none (loopback addresses).
func nfsAddressHook(c NFSConfig) (vip.Hook, error) {
	switch {
	case c.HookAdd != "":
		h, err := vip.NewCommandHook(c.HookAdd, c.HookDel, c.HookAnnounce, c.Iface, c.Prefix)
		if err != nil {
			return nil, fmt.Errorf("%w: --nfs-hook-add/--nfs-hook-del: %w", ErrConfig, err)
		}
		return h, nil
	case c.Iface != "":
		return vip.MachineHook(c.Iface, c.Prefix), nil
	default:
		return vip.NoHook{}, nil
	}
}

// nfsLinkCheck builds the public link check of c (nil: always up).
func nfsLinkCheck(c NFSConfig) (func(context.Context) error, error) {
	switch {
	case c.LinkCheck != "":
		args, err := vip.ParseCommand(c.LinkCheck)
		if err != nil {
			return nil, fmt.Errorf("%w: --nfs-link-check: %w", ErrConfig, err)
		}
		return vip.CommandCheck(args), nil
	case c.LinkIface != "":
		return vip.LinkUp(c.LinkIface), nil
	case c.Iface != "":
		return vip.LinkUp(c.Iface), nil
	}
	return nil, nil
}

// startNFSAddresses makes the node a candidate for the service addresses
// and serves each it holds through role.
func (s *Server) startNFSAddresses(ctx context.Context, role *NFSRole) error {
	c := s.cfg.NFS
	hook, err := nfsAddressHook(c)
	if err != nil {
		return err
	}
	check, err := nfsLinkCheck(c)
	if err != nil {
		return err
	}
	ttl := c.AddressTTL
	if ttl == 0 {
		ttl = vip.DefaultTTL
	}
	margin := ttl / 4
	port := strconv.Itoa(c.Port)
	log := s.log.With("role", "nfs-address")
	m, err := vip.New(vip.Config{
		Client: s.etcd, Node: s.cfg.Name, Addrs: c.Addresses, TTL: ttl, Margin: margin,
		Hook: hook, LinkCheck: check, Runner: s.run, Log: log,
		OnAcquire: func(a netip.Addr, epoch int64) error {
			return role.Serve(net.JoinHostPort(a.String(), port), uint64(epoch))
		},
		OnRelease: func(a netip.Addr) {
			sctx, cancel := context.WithTimeout(context.Background(), nfsReleaseBound(margin))
			defer cancel()
			if err := role.Stop(sctx, net.JoinHostPort(a.String(), port)); err != nil {
				log.Warn("stopping the NFS service address: requests still in progress were left to finish", "addr", a, "err", err)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("%w: --nfs-address: %w", ErrConfig, err)
	}
	if err := m.Start(ctx); err != nil {
		return fmt.Errorf("server: nfs service addresses: %w", err)
	}
	s.vip = m
	return nil
}

// stopNFSAddresses hands the node's service addresses over: it stops
// serving them and revokes their lease, so that another gateway takes
// them at once.
func (s *Server) stopNFSAddresses(ctx context.Context) {
	if s.vip == nil {
		return
	}
	if err := s.vip.Close(ctx); err != nil {
		s.log.Warn("handing the NFS service addresses over (they move when their lease expires)", "err", err)
	}
}

// nfsAddresses reads who holds each service address (admin.Deps.NFSAddresses).
func (s *Server) nfsAddresses(ctx context.Context) ([]admin.NFSAddress, error) {
	st, err := vip.ReadStatus(ctx, s.etcd, "")
	if err != nil {
		return nil, err
	}
	out := make([]admin.NFSAddress, 0, len(st.Addresses))
	for _, a := range st.Addresses {
		out = append(out, admin.NFSAddress{Addr: a.Addr, Node: a.Node, Since: a.Since.UTC(), Epoch: a.Epoch})
	}
	return out, nil
}
