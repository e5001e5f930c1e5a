package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/erasure"
	"github.com/weftfs/weft/internal/policy"
)

// The installed pool policy and its history (weft policy install|show|
// history).
//
// Keys (see schema.go):
//
//	/weft/policy/current          the installed policy: a policy.Record
//	                              (internal/policy/record.go: its own "v",
//	                              text as written, version, installed,
//	                              by, comment); absent until the first
//	                              install
//	/weft/policy/versions/<%020d> every version ever installed, the same
//	                              record, kept for history and show
//	                              --version (zero-padded so that a prefix
//	                              scan lists them in order)
//
// The current record is a copy of the newest version's, so that a mount
// follows one key (WatchPolicy) and a reader needs one get. Both are
// written in one transaction that compares the current key's version, so
// two installs racing never get the same number: the loser gets
// ErrConflict. The stored form is policy.Record's, whose "v" is checked
// by policy.Decode (a record of a newer format is refused, never
// misread).
const (
	keyPolicyCurrent    = Prefix + "policy/current"
	prefixPolicyVersion = Prefix + "policy/versions/"
)

func policyVersionKey(v uint64) string { return fmt.Sprintf("%s%020d", prefixPolicyVersion, v) }

// PolicyKey is the key a client watches to follow the installed policy.
const PolicyKey = keyPolicyCurrent

// PolicyVersion is one installed version as history lists it.
type PolicyVersion struct {
	Version   uint64    `json:"version"`
	Installed time.Time `json:"installed"`
	By        string    `json:"by,omitempty"`
	Comment   string    `json:"comment,omitempty"`
	// Rules is how many rules the policy has.
	Rules int `json:"rules"`
	// Checksum is the first 16 hex digits of the SHA-256 of the text as
	// written: two versions with one checksum have the same text.
	Checksum string `json:"checksum"`
}

// InstalledPolicy is a stored version with its text.
type InstalledPolicy struct {
	PolicyVersion
	Text string `json:"text"`
}

// PolicyChecksum returns the checksum PolicyVersion shows for text.
func PolicyChecksum(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:8])
}

// PolicyCatalog is the policy.Catalog of the cluster as it is now: the
// pools it has, and the protections a pool of it could use. Build it with
// Store.PolicyCatalog; it is a snapshot.
type PolicyCatalog struct {
	pools  map[string]bool
	drives int
}

var _ policy.Catalog = PolicyCatalog{}

// PoolExists implements policy.Catalog.
func (c PolicyCatalog) PoolExists(name string) bool { return c.pools[name] }

// ValidProtection implements policy.Catalog: a spec erasure parses whose
// stripes are not wider than the cluster has drives (as pool create
// demands: a file asking for more could never be fully protected).
func (c PolicyCatalog) ValidProtection(spec string) error {
	p, err := erasure.ParseProtection(spec)
	if err != nil {
		return err
	}
	if p.Width() > c.drives {
		return fmt.Errorf("protection %s needs %d drives for each stripe, but the cluster has %d (see weft drive list)", p, p.Width(), c.drives)
	}
	return nil
}

// PolicyCatalog returns the catalog that Parse checks a policy against:
// the pools defined now and the cluster's drives (not removed).
func (s *Store) PolicyCatalog(ctx context.Context) (PolicyCatalog, error) {
	cat := PolicyCatalog{pools: map[string]bool{}}
	err := s.scan(ctx, prefixPools, func(k string, v []byte) error {
		var p PoolRecord
		if err := decode(k, v, &p); err != nil {
			return err
		}
		cat.pools[p.Name] = true
		return nil
	})
	if err != nil {
		return cat, err
	}
	drives, err := s.ListDrives(ctx)
	if err != nil {
		return cat, err
	}
	for _, d := range drives {
		if d.Status != StatusRemoved {
			cat.drives++
		}
	}
	return cat, nil
}

// CheckPolicy parses text against the cluster's catalog. A policy that is
// not valid returns the *policy.Errors of policy.Parse (wrapping
// policy.ErrInvalid), every problem with its line and column.
func (s *Store) CheckPolicy(ctx context.Context, text string) (*policy.Policy, error) {
	cat, err := s.PolicyCatalog(ctx)
	if err != nil {
		return nil, err
	}
	return policy.Parse(text, cat)
}

// InstallPolicy checks text (CheckPolicy) and installs it as the next
// version, recording when, by whom and the comment. It returns the new
// version. Errors: the *policy.Errors of an invalid policy;
// policy.ErrInvalid for a text or comment that is not UTF-8;
// ErrConflict when another install won the race (run it again); the
// errors of a current record that does not decode (policy.ErrNewerFormat:
// upgrade this node). Installing the text already installed makes a new
// version all the same: history records every install.
func (s *Store) InstallPolicy(ctx context.Context, text, by, comment string) (PolicyVersion, error) {
	pol, err := s.CheckPolicy(ctx, text)
	if err != nil {
		return PolicyVersion{}, err
	}
	cur, rev, err := s.currentPolicy(ctx)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return PolicyVersion{}, err
	}
	rec := policy.Record{Text: text, Version: cur.Version + 1, Installed: time.Now().UTC().Truncate(time.Second), By: by, Comment: comment}
	b, err := policy.Encode(rec)
	if err != nil {
		return PolicyVersion{}, err
	}
	t, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(keyPolicyCurrent), "=", rev)).
		Then(clientv3.OpPut(keyPolicyCurrent, string(b)), clientv3.OpPut(policyVersionKey(rec.Version), string(b))).
		Commit()
	if err != nil {
		return PolicyVersion{}, fmt.Errorf("cluster: install policy version %d: %w", rec.Version, err)
	}
	if !t.Succeeded {
		return PolicyVersion{}, fmt.Errorf("%w: another policy was installed while this one was (version %d is taken): look at weft policy history, then install again", ErrConflict, rec.Version)
	}
	return versionOf(rec, len(pol.Rules())), nil
}

// currentPolicy reads the current record and its key's revision (0 when
// none is installed, with ErrNotFound).
func (s *Store) currentPolicy(ctx context.Context) (policy.Record, int64, error) {
	r, err := s.cli.Get(ctx, keyPolicyCurrent)
	if err != nil {
		return policy.Record{}, 0, fmt.Errorf("cluster: get %s: %w", keyPolicyCurrent, err)
	}
	if len(r.Kvs) == 0 {
		return policy.Record{}, 0, fmt.Errorf("%w: no policy is installed (weft policy install FILE)", ErrNotFound)
	}
	rec, err := decodePolicy(keyPolicyCurrent, r.Kvs[0].Value)
	return rec, r.Kvs[0].ModRevision, err
}

// decodePolicy decodes a stored policy record, naming its key.
func decodePolicy(key string, b []byte) (policy.Record, error) {
	rec, err := policy.Decode(b)
	if err != nil {
		return rec, fmt.Errorf("key %s: %w", key, err)
	}
	return rec, nil
}

// Policy returns the installed policy of version v, or the current one
// for v = 0. Errors: ErrNotFound (none installed, or no such version),
// policy.ErrNewerFormat, policy.ErrCorrupt.
func (s *Store) Policy(ctx context.Context, v uint64) (InstalledPolicy, error) {
	var rec policy.Record
	if v == 0 {
		var err error
		if rec, _, err = s.currentPolicy(ctx); err != nil {
			return InstalledPolicy{}, err
		}
	} else {
		r, err := s.cli.Get(ctx, policyVersionKey(v))
		if err != nil {
			return InstalledPolicy{}, fmt.Errorf("cluster: get policy version %d: %w", v, err)
		}
		if len(r.Kvs) == 0 {
			return InstalledPolicy{}, fmt.Errorf("%w: policy version %d (see weft policy history)", ErrNotFound, v)
		}
		if rec, err = decodePolicy(policyVersionKey(v), r.Kvs[0].Value); err != nil {
			return InstalledPolicy{}, err
		}
	}
	return InstalledPolicy{PolicyVersion: versionOf(rec, countRules(rec.Text)), Text: rec.Text}, nil
}

// PolicyHistory returns every installed version, oldest first (empty when
// none was installed).
func (s *Store) PolicyHistory(ctx context.Context) ([]PolicyVersion, error) {
	out := []PolicyVersion{}
	err := s.scan(ctx, prefixPolicyVersion, func(k string, v []byte) error {
		rec, err := decodePolicy(k, v)
		if err != nil {
			return err
		}
		out = append(out, versionOf(rec, countRules(rec.Text)))
		return nil
	})
	return out, err
}

func versionOf(rec policy.Record, rules int) PolicyVersion {
	return PolicyVersion{Version: rec.Version, Installed: rec.Installed, By: rec.By, Comment: rec.Comment,
		Rules: rules, Checksum: PolicyChecksum(rec.Text)}
}

// countRules counts a stored policy's rules. A stored text was valid when
// installed, but pools may have gone since, so it is parsed without a
// catalog; one this binary cannot parse (written by a newer one) counts
// -1.
func countRules(text string) int {
	pol, err := policy.Parse(text, nil)
	if err != nil {
		return -1
	}
	return len(pol.Rules())
}

// DecodeInstalledPolicy decodes the value of PolicyKey, as a watcher
// receives it, and parses its text without a catalog (a pool removed
// since the install does not make the installed policy unreadable: its
// rules then place files in a pool that does not exist, which the caller
// handles). Errors: those of policy.Decode and policy.Parse.
func DecodeInstalledPolicy(b []byte) (policy.Record, *policy.Policy, error) {
	rec, err := decodePolicy(keyPolicyCurrent, b)
	if err != nil {
		return rec, nil, err
	}
	pol, err := policy.Parse(rec.Text, nil)
	if err != nil {
		return rec, nil, fmt.Errorf("installed policy version %d: %w", rec.Version, err)
	}
	return rec, pol, nil
}
