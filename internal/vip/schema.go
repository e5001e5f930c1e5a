package vip

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Key schema, version 1 (the "v1" in KeyPrefix: a layout that older
// binaries could misread moves to a new prefix, which they do not read,
// and a migration is then a node of the new version taking the addresses
// over as the old ones stop).
//
//	/weft/vip/v1/addr/<addr>   Holder: the node serving <addr> (netip
//	                           text form), bound to that node's lease and
//	                           created only if absent. Its create revision
//	                           is the holding's epoch: every new holding,
//	                           by any node, has a higher one.
//	/weft/vip/v1/node/<node>   Candidate: <node> is up, its public link
//	                           works and it will take addresses; bound to
//	                           its lease.
//
// Values are JSON objects carrying "v", the record's version; a reader
// refuses a record whose "v" is newer than it knows (it then treats the
// address as held, by a node it cannot read: it never takes an address
// over a record it cannot read).
const (
	// KeyPrefix is where the keys of this schema live.
	KeyPrefix = "/weft/vip/v1/"
	// RecordVersion is the "v" of the records this binary writes and the
	// newest it reads.
	RecordVersion = 1

	addrDir = "addr/"
	nodeDir = "node/"
)

// Holder is the record of an address's holder.
type Holder struct {
	V    int    `json:"v"`
	Node string `json:"node"`
	// Incarnation is random per Manager: a restarted node is another
	// incarnation, and leaves the keys of the earlier one to expire.
	Incarnation string `json:"incarnation"`
	Addr        string `json:"addr"`
	// Since is when the holder took the address, by its own clock (for
	// display only: nothing compares clocks of two nodes).
	Since time.Time `json:"since"`
	// Lease is the holder's etcd lease, in hex.
	Lease string `json:"lease"`
}

// Candidate is the record of a node that will take addresses.
type Candidate struct {
	V           int       `json:"v"`
	Node        string    `json:"node"`
	Incarnation string    `json:"incarnation"`
	Since       time.Time `json:"since"`
}

func addrKey(prefix string, a netip.Addr) string { return prefix + addrDir + a.String() }
func nodeKey(prefix, node string) string         { return prefix + nodeDir + node }

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("vip: encode %T: %v", v, err)) // plain structs: cannot fail
	}
	return string(b)
}

// decode reads a record of version at most RecordVersion into v.
func decode(key string, b []byte, v any) error {
	var hdr struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(b, &hdr); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrRecord, key, err)
	}
	if hdr.V < 1 || hdr.V > RecordVersion {
		return fmt.Errorf("%w: %s has record version %d; this binary reads up to %d: upgrade it", ErrRecord, key, hdr.V, RecordVersion)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrRecord, key, err)
	}
	return nil
}

// splitKey returns a key's directory ("addr/" or "node/") and name.
func splitKey(prefix, key string) (dir, name string, ok bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return "", "", false
	}
	for _, d := range []string{addrDir, nodeDir} {
		if n, ok := strings.CutPrefix(rest, d); ok && n != "" {
			return d, n, true
		}
	}
	return "", "", false
}

// records are the keys below a prefix, decoded: the service addresses'
// holdings and the candidates.
type records struct {
	rev        int64
	addrs      []addrRecord
	candidates []Candidate
}

// addrRecord is an address's key: its holding, or, when this binary
// cannot read the record, err (the holding then has only the address,
// epoch and lease).
type addrRecord struct {
	addr netip.Addr
	h    Holding
	err  error
}

// readRecords reads every key below prefix. Keys that are not an
// address's or a candidate's, and candidates that do not decode, are
// skipped.
func readRecords(ctx context.Context, cli *clientv3.Client, prefix string) (records, error) {
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return records{}, err
	}
	rs := records{rev: resp.Header.Revision}
	for _, kv := range resp.Kvs {
		dir, name, ok := splitKey(prefix, string(kv.Key))
		if !ok {
			continue
		}
		switch dir {
		case addrDir:
			a, err := netip.ParseAddr(name)
			if err != nil {
				continue
			}
			var h Holder
			if err := decode(string(kv.Key), kv.Value, &h); err != nil {
				rs.addrs = append(rs.addrs, addrRecord{addr: a, h: Holding{Addr: a.String(), Epoch: kv.CreateRevision, Lease: leaseHex(kv.Lease)}, err: err})
				continue
			}
			rs.addrs = append(rs.addrs, addrRecord{addr: a, h: holding(a, h, kv.CreateRevision, kv.Lease)})
		case nodeDir:
			var c Candidate
			if decode(string(kv.Key), kv.Value, &c) == nil {
				rs.candidates = append(rs.candidates, c)
			}
		}
	}
	return rs, nil
}
