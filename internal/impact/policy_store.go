package impact

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// PolicyStore reads and writes impact policies: the built-ins, compiled in,
// and custom ones in etcd under PolicyPrefix (format in policy_schema.go).
// It is safe for concurrent use and keeps no state: every call is one etcd
// round trip (none for a built-in), so a change made through any node is
// seen by every node's next call.
type PolicyStore struct {
	cli *clientv3.Client
}

// NewPolicyStore returns a store over cli.
func NewPolicyStore(cli *clientv3.Client) *PolicyStore { return &PolicyStore{cli: cli} }

// Get returns the policy called name: a built-in, else the stored custom
// one. Errors: ErrUnknownPolicy, ErrNewerFormat, ErrCorrupt,
// or etcd's.
func (s *PolicyStore) Get(ctx context.Context, name string) (Policy, error) {
	if p, ok := BuiltinPolicy(name); ok {
		return p, nil
	}
	r, err := s.cli.Get(ctx, policyKey(name))
	if err != nil {
		return Policy{}, fmt.Errorf("impact: get impact policy %q: %w", name, err)
	}
	if len(r.Kvs) == 0 {
		return Policy{}, fmt.Errorf("%w: %q: `weft job policy list` shows the policies", ErrUnknownPolicy, name)
	}
	return decodePolicy(string(r.Kvs[0].Key), r.Kvs[0].Value)
}

// List returns the built-in policies, then the custom ones in name order.
// A stored record that cannot be read (newer format, corrupt) is left out
// and named in the returned error, joined with the others, so one bad
// record does not hide the rest: callers may use the policies even when
// err is not nil. An etcd failure returns no policies and the error.
func (s *PolicyStore) List(ctx context.Context) ([]Policy, error) {
	r, err := s.cli.Get(ctx, PolicyPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("impact: list impact policies: %w", err)
	}
	out := BuiltinPolicies()
	var errs []error
	for _, kv := range r.Kvs {
		p, err := decodePolicy(string(kv.Key), kv.Value)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if _, builtin := BuiltinPolicy(p.Name); builtin {
			continue // never stored by this package; the built-in wins
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

// Create stores a new custom policy after validating it. Errors:
// ErrInvalid, ErrPolicyBuiltin (a built-in's name), ErrPolicyExists,
// or etcd's.
func (s *PolicyStore) Create(ctx context.Context, p Policy) error {
	return s.put(ctx, p, "create", false)
}

// Update replaces the custom policy p.Name with p after validating it.
// Running jobs with that policy follow the change at the controller's next
// tick. Errors: ErrInvalid, ErrPolicyBuiltin, ErrUnknownPolicy, or
// etcd's.
func (s *PolicyStore) Update(ctx context.Context, p Policy) error {
	return s.put(ctx, p, "update", true)
}

// put writes p if it is stored already (update) or not yet (create).
func (s *PolicyStore) put(ctx context.Context, p Policy, verb string, update bool) error {
	if _, ok := BuiltinPolicy(p.Name); ok {
		return fmt.Errorf("%w: cannot %s %q; create a custom policy with another name", ErrPolicyBuiltin, verb, p.Name)
	}
	if err := p.Validate(); err != nil {
		return err
	}
	b, err := encodePolicy(p)
	if err != nil {
		return fmt.Errorf("impact: %s impact policy %q: %w", verb, p.Name, err)
	}
	key := policyKey(p.Name)
	cmp, errFail := clientv3.Compare(clientv3.CreateRevision(key), "=", 0), ErrPolicyExists
	if update {
		cmp, errFail = clientv3.Compare(clientv3.CreateRevision(key), ">", 0), ErrUnknownPolicy
	}
	r, err := s.cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(key, string(b))).Commit()
	if err != nil {
		return fmt.Errorf("impact: %s impact policy %q: %w", verb, p.Name, err)
	}
	if !r.Succeeded {
		return fmt.Errorf("%w: %q", errFail, p.Name)
	}
	return nil
}

// Delete removes the custom policy name. Jobs still naming it run at the
// low level from the controller's next tick. Errors: ErrPolicyBuiltin,
// ErrUnknownPolicy, or etcd's.
func (s *PolicyStore) Delete(ctx context.Context, name string) error {
	if _, ok := BuiltinPolicy(name); ok {
		return fmt.Errorf("%w: cannot delete %q", ErrPolicyBuiltin, name)
	}
	r, err := s.cli.Delete(ctx, policyKey(name))
	if err != nil {
		return fmt.Errorf("impact: delete impact policy %q: %w", name, err)
	}
	if r.Deleted == 0 {
		return fmt.Errorf("%w: %q", ErrUnknownPolicy, name)
	}
	return nil
}
