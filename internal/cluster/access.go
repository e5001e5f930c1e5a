package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/weftfs/weft/internal/pki"
)

// Who may touch which keys of the control plane: etcd's authentication,
// as weft sets it up (see docs/admin-guide.md, "Who may do what").
//
// With TLS, etcd admits only clients presenting a certificate of the
// cluster's CA, and with authentication on it takes the certificate's
// CommonName ("node:n1", "client:laptop", "admin:alice") as the etcd user
// the request acts as. Every weft identity therefore has an etcd user of
// that name, with no password (a password could not be used: only a
// certificate names the user), and a role by its kind:
//
//	node    etcd's root role: a node bootstraps the control plane, serves
//	        the admin API that registers identities (which in etcd only
//	        root may do), runs the job engine and may host a member (whose
//	        data files hold everything anyway)
//	client  RoleClient: read everything under Prefix (the nodes, drives,
//	        pools a mount needs), read and write the namespace under
//	        MetaPrefix
//	admin   RoleAdmin: read everything under Prefix (to inspect with
//	        etcdctl); every change goes through the admin API
//
// etcd also requires a user named "root" with the root role before it
// enables authentication; weft creates it without a password, and no
// certificate can name it (weft's CommonNames all hold a colon), so nobody
// can act as it. Requests with no certificate user — none pass the TLS
// handshake anyway — and users without a role for a key are refused with
// "etcdserver: permission denied".
//
// EnableAuth runs on every node start: the first node of a new cluster
// creates the roles and users and turns authentication on; later starts
// add the users that are missing. RegisterIdentity adds one identity (weft
// cert issue and weft cert register, through the admin API).
const (
	RoleClient = "weft-client"
	RoleAdmin  = "weft-admin"
	// rootUser is the user etcd requires before it enables authentication.
	rootUser = "root"
	rootRole = "root"
)

// RoleOf returns the etcd role an identity of kind gets.
func RoleOf(kind pki.Kind) string {
	switch kind {
	case pki.KindNode:
		return rootRole
	case pki.KindClient:
		return RoleClient
	default:
		return RoleAdmin
	}
}

// UserOf returns the etcd user of an identity: its certificate's
// CommonName.
func UserOf(id pki.Identity) string { return id.String() }

// prefixEnd returns the end of the key range of every key starting with p.
func prefixEnd(p string) string { return clientv3.GetPrefixRangeEnd(p) }

// rolePerms are the permissions of weft's own roles.
var rolePerms = map[string][]struct {
	key, end string
	perm     clientv3.PermissionType
}{
	RoleClient: {
		{Prefix, prefixEnd(Prefix), clientv3.PermissionType(clientv3.PermRead)},
		{MetaPrefix, prefixEnd(MetaPrefix), clientv3.PermissionType(clientv3.PermReadWrite)},
	},
	RoleAdmin: {
		{Prefix, prefixEnd(Prefix), clientv3.PermissionType(clientv3.PermRead)},
	},
}

// EnableAuth makes sure etcd's authentication is on and that ids have
// their users and roles (see the comment above). The caller must act as a
// node identity. It is idempotent and safe to run from several nodes at
// once: the first to find authentication off creates the roles, the root
// user and ids' users, then turns it on; later calls add only the users
// that are missing. It reports whether it turned authentication on.
//
// Errors wrap ErrAccess when etcd refuses the caller (authentication is on
// and the caller has no root user: register its node identity first).
func EnableAuth(ctx context.Context, cli *clientv3.Client, ids []pki.Identity) (enabled bool, err error) {
	st, err := cli.AuthStatus(ctx)
	if err != nil {
		return false, fmt.Errorf("cluster: etcd authentication status: %w", accessErr(err))
	}
	if !st.Enabled {
		for role := range rolePerms {
			if err := ensureRole(ctx, cli, role); err != nil {
				return false, err
			}
		}
		if err := ensureUser(ctx, cli, rootUser, rootRole); err != nil {
			return false, err
		}
	}
	existing := map[string]bool{}
	if st.Enabled {
		users, err := cli.UserList(ctx)
		if err != nil {
			return false, fmt.Errorf("cluster: list etcd users: %w", accessErr(err))
		}
		for _, u := range users.Users {
			existing[u] = true
		}
	}
	for _, id := range ids {
		if !existing[UserOf(id)] {
			if err := ensureUser(ctx, cli, UserOf(id), RoleOf(id.Kind)); err != nil {
				return false, err
			}
		}
	}
	if st.Enabled {
		return false, nil
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return false, fmt.Errorf("cluster: enable etcd authentication: %w", accessErr(err))
	}
	return true, nil
}

// RegisterIdentity gives identity id its etcd user and role (idempotent),
// so that a process presenting id's certificate may use the control plane.
// The caller must act as a node identity (etcd's root role); otherwise the
// error wraps ErrAccess.
func RegisterIdentity(ctx context.Context, cli *clientv3.Client, id pki.Identity) error {
	if _, err := pki.ParseKind(string(id.Kind)); err != nil || !pki.ValidName(id.Name) {
		return fmt.Errorf("%w: identity %q: want node, client or admin and a name of 1-63 of a-z, A-Z, 0-9, '-', '_', '.', '@'", ErrInvalid, id)
	}
	return ensureUser(ctx, cli, UserOf(id), RoleOf(id.Kind))
}

// IdentityUser is a weft identity's etcd user and its roles.
type IdentityUser struct {
	Identity pki.Identity `json:"identity"`
	Roles    []string     `json:"roles"`
}

// Identities lists the etcd users of weft identities, by name (the root
// user and users that name no weft identity are left out). The caller
// must act as a node identity.
func Identities(ctx context.Context, cli *clientv3.Client) ([]IdentityUser, error) {
	users, err := cli.UserList(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster: list etcd users: %w", accessErr(err))
	}
	var out []IdentityUser
	for _, u := range users.Users {
		id, err := pki.ParseIdentity(u)
		if err != nil {
			continue
		}
		g, err := cli.UserGet(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("cluster: etcd user %s: %w", u, accessErr(err))
		}
		roles := slices.Clone(g.Roles)
		sort.Strings(roles)
		out = append(out, IdentityUser{Identity: id, Roles: roles})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Identity.String() < out[j].Identity.String() })
	return out, nil
}

// ensureRole creates role with its permissions unless it exists.
func ensureRole(ctx context.Context, cli *clientv3.Client, role string) error {
	if _, err := cli.RoleAdd(ctx, role); err != nil && !errors.Is(rpctypes.Error(err), rpctypes.ErrRoleAlreadyExist) {
		return fmt.Errorf("cluster: add etcd role %s: %w", role, accessErr(err))
	}
	for _, p := range rolePerms[role] {
		if _, err := cli.RoleGrantPermission(ctx, role, p.key, p.end, p.perm); err != nil {
			return fmt.Errorf("cluster: grant etcd role %s on %s: %w", role, p.key, accessErr(err))
		}
	}
	return nil
}

// ensureUser creates user without a password, unless it exists, and
// grants it role.
func ensureUser(ctx context.Context, cli *clientv3.Client, user, role string) error {
	_, err := cli.UserAddWithOptions(ctx, user, "", &clientv3.UserAddOptions{NoPassword: true})
	if err != nil && !errors.Is(rpctypes.Error(err), rpctypes.ErrUserAlreadyExist) {
		return fmt.Errorf("cluster: add etcd user %s: %w", user, accessErr(err))
	}
	if _, err := cli.UserGrantRole(ctx, user, role); err != nil {
		return fmt.Errorf("cluster: grant etcd role %s to %s: %w", role, user, accessErr(err))
	}
	return nil
}

// accessErr marks etcd's authentication refusals with ErrAccess.
func accessErr(err error) error {
	e := rpctypes.Error(err)
	for _, d := range []error{rpctypes.ErrPermissionDenied, rpctypes.ErrUserEmpty, rpctypes.ErrUserNotFound, rpctypes.ErrAuthFailed} {
		if errors.Is(e, d) {
			return fmt.Errorf("%w: %w (only a node identity may manage etcd users; is this node's user registered?)", ErrAccess, err)
		}
	}
	return err
}
