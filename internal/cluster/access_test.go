package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/weftfs/weft/internal/etcdx"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/pki"
)

// EnableAuth against embedded etcd over mutual TLS: after it, each
// identity can do what its kind may, an identity without a user nothing,
// and a node can register more identities; a second run (another node
// starting) changes nothing.
func TestEnableAuth(t *testing.T) {
	ctx := context.Background()
	ec := etcdtest.NewTLSCluster(t, 1)
	n1 := pki.Identity{Kind: pki.KindNode, Name: "m1"}
	mnt := pki.Identity{Kind: pki.KindClient, Name: "mnt"}
	alice := pki.Identity{Kind: pki.KindAdmin, Name: "alice"}
	late := pki.Identity{Kind: pki.KindClient, Name: "late"}
	node := ec.ClientAs(t, n1)
	if _, err := Open(ctx, node); err != nil { // bootstraps the schema as a node does
		t.Fatal(err)
	}
	on, err := EnableAuth(ctx, node, []pki.Identity{n1, mnt, alice})
	if err != nil || !on {
		t.Fatalf("EnableAuth = %v, %v", on, err)
	}
	if on, err := EnableAuth(ctx, node, []pki.Identity{n1, mnt, alice}); err != nil || on {
		t.Fatalf("EnableAuth again = %v, %v", on, err)
	}
	// The node reads and writes anything.
	if _, err := node.Put(ctx, "/weft/nodes/x", "{}"); err != nil {
		t.Fatalf("node put: %v", err)
	}
	// A client reads the control plane and writes the namespace only.
	cl := ec.ClientAs(t, mnt)
	if _, err := Open(ctx, cl); err != nil {
		t.Fatalf("client opens the control plane: %v", err)
	}
	if _, err := cl.Put(ctx, MetaPrefix+"x", "1"); err != nil {
		t.Fatalf("client writes the namespace: %v", err)
	}
	if _, err := cl.Put(ctx, "/weft/nodes/x", "{}"); !denied(err) {
		t.Fatalf("client writes a node record: %v", err)
	}
	if _, err := cl.Get(ctx, "other"); !denied(err) {
		t.Fatalf("client reads outside /weft/: %v", err)
	}
	if _, err := cl.UserAdd(ctx, "client:evil", "pw"); !denied(err) {
		t.Fatalf("client adds an etcd user: %v", err)
	}
	if err := RegisterIdentity(ctx, cl, late); !errors.Is(err, ErrAccess) {
		t.Fatalf("client registers an identity: %v", err)
	}
	// An admin only reads.
	ad := ec.ClientAs(t, alice)
	if _, err := ad.Get(ctx, "/weft/schema"); err != nil {
		t.Fatalf("admin reads: %v", err)
	}
	if _, err := ad.Put(ctx, MetaPrefix+"x", "2"); !denied(err) {
		t.Fatalf("admin writes: %v", err)
	}
	// An identity of the cluster's CA without a user is refused outright,
	// until a node registers it.
	if cli, err := ec.DialAs(t, late); !errors.Is(err, etcdx.ErrDenied) {
		t.Fatalf("unregistered identity: %v, %v", cli, err)
	}
	if err := RegisterIdentity(ctx, node, late); err != nil {
		t.Fatal(err)
	}
	if err := RegisterIdentity(ctx, node, late); err != nil {
		t.Fatalf("registering twice: %v", err)
	}
	if _, err := ec.ClientAs(t, late).Put(ctx, MetaPrefix+"y", "1"); err != nil {
		t.Fatalf("registered identity: %v", err)
	}
	ids, err := Identities(ctx, node)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, u := range ids {
		got[u.Identity.String()] = u.Roles[0]
	}
	want := map[string]string{"admin:alice": RoleAdmin, "client:late": RoleClient, "client:mnt": RoleClient, "node:m1": "root"}
	if len(got) != len(want) {
		t.Fatalf("Identities = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("Identities = %v, want %v", got, want)
		}
	}
}

func denied(err error) bool { return errors.Is(accessErr(err), ErrAccess) }
