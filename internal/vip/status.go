package vip

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Status is who holds which address, and which nodes are candidates, as
// etcd has it: any node (or the admin API) can read it.
type Status struct {
	// Addresses lists the held addresses, in address order; an address
	// no node holds is absent (Manager.Status adds the configured ones).
	Addresses []AddressStatus `json:"addresses"`
	// Candidates are the nodes ready to take addresses, by name.
	Candidates []CandidateStatus `json:"candidates"`
	// Revision is the etcd revision read.
	Revision int64 `json:"revision"`
}

// AddressStatus is one address: its holding, or Node "" if free.
type AddressStatus struct {
	Holding
	// Unreadable is set when the holder's record is of a newer version.
	Unreadable bool `json:"unreadable,omitempty"`
}

// CandidateStatus is one candidate node.
type CandidateStatus struct {
	Node  string    `json:"node"`
	Since time.Time `json:"since"`
}

// ReadStatus reads the status under prefix ("" for KeyPrefix).
func ReadStatus(ctx context.Context, cli *clientv3.Client, prefix string) (Status, error) {
	if prefix == "" {
		prefix = KeyPrefix
	}
	rs, err := readRecords(ctx, cli, prefix)
	if err != nil {
		return Status{}, fmt.Errorf("vip: read the service addresses' status: %w", err)
	}
	st := Status{Revision: rs.rev, Addresses: []AddressStatus{}, Candidates: []CandidateStatus{}}
	for _, r := range rs.addrs {
		st.Addresses = append(st.Addresses, AddressStatus{Holding: r.h, Unreadable: r.err != nil})
	}
	for _, c := range rs.candidates {
		st.Candidates = append(st.Candidates, CandidateStatus{Node: c.Node, Since: c.Since})
	}
	slices.SortFunc(st.Addresses, func(a, b AddressStatus) int {
		return netip.MustParseAddr(a.Addr).Compare(netip.MustParseAddr(b.Addr))
	})
	slices.SortFunc(st.Candidates, func(a, b CandidateStatus) int { return strings.Compare(a.Node, b.Node) })
	return st, nil
}

// Status is ReadStatus with every configured address listed, free ones
// with no node.
func (m *Manager) Status(ctx context.Context) (Status, error) {
	st, err := ReadStatus(ctx, m.cli, m.prefix)
	if err != nil {
		return st, err
	}
	have := map[string]bool{}
	for _, a := range st.Addresses {
		have[a.Addr] = true
	}
	for _, a := range m.addrs {
		if !have[a.String()] {
			st.Addresses = append(st.Addresses, AddressStatus{Holding: Holding{Addr: a.String()}})
		}
	}
	slices.SortFunc(st.Addresses, func(a, b AddressStatus) int {
		return netip.MustParseAddr(a.Addr).Compare(netip.MustParseAddr(b.Addr))
	})
	return st, nil
}
