package layering

// EdgeAPI is the one weft package a gateway (Kind Edge) may import: the
// file system's whole API for the data edges.
const EdgeAPI = "internal/vfs"

// Weft returns weft's import table. It is the one place where the allowed
// directions are written; docs/architecture.md prints it (regenerate with
// `go test ./internal/layering -update`).
//
// To add a package, add a row: its path below the module, its kind (which
// brings that kind's rules, see Kind) and the weft packages it may import.
// A package importing a Shared package needs no entry for it. To let a
// package import a new one, add the new one to the importer's row. For
// example, a runner of background workers that everything but the edges
// may use is
//
//	{Pkg: "internal/runner", Kind: Shared},
//
// a policy evaluator that must stay free of the domain
//
//	{Pkg: "internal/policy", Kind: Leaf},
//
// and an NFS gateway
//
//	{Pkg: "internal/gateway/nfs", Kind: Edge, Imports: []string{EdgeAPI},
//		Libraries: []string{"github.com/willscott/go-nfs", "github.com/go-git/go-billy/v5"}},
//
// Rows are listed from the top of the stack down; the document keeps that
// order.
func Weft() Table {
	return Table{
		Rules: []Rule{
			// Processes and their wiring.
			{Pkg: "cmd/weft", Kind: Wiring, Imports: []string{"internal/admin", "internal/bench", "internal/checkstream", "internal/cluster", "internal/pki",
				"internal/drive", "internal/etcdx", "internal/events", "internal/impact", "internal/job", "internal/local", "internal/meta",
				"internal/mount", "internal/namespace", "internal/qos", "internal/server"}},
			{Pkg: "internal/namespace", Kind: Wiring, Imports: []string{"internal/cluster", "internal/kv", "internal/kv/etcdkv",
				"internal/kv/kvcache", "internal/meta"}},
			{Pkg: "internal/local", Kind: Wiring, Imports: []string{"internal/admin", "internal/mount", "internal/pki", "internal/server"}},
			{Pkg: "internal/server", Kind: Wiring, Imports: []string{"internal/admin", "internal/block", "internal/client", "internal/pki",
				"internal/cluster", "internal/drive", "internal/erasure", "internal/etcdx", "internal/events", "internal/impact",
				"internal/job", "internal/jobs", "internal/meta", "internal/namespace", "internal/qos", "internal/restripe", "internal/topology",
				"internal/gateway/nfs", "internal/mount", "internal/vfs", "internal/vip"}},
			{Pkg: "internal/mount", Kind: Wiring, Imports: []string{"internal/admin", "internal/client", "internal/cluster", "internal/pki",
				"internal/etcdx", "internal/gateway/fuse", "internal/kv/kvcache", "internal/meta", "internal/namespace", "internal/policy",
				"internal/qos", "internal/topology", "internal/vfs"}},

			// The data edges.
			{Pkg: "internal/gateway/fuse", Kind: Edge, Imports: []string{EdgeAPI},
				Libraries: []string{"github.com/hanwen/go-fuse/v2"}},
			{Pkg: "internal/gateway/nfs", Kind: Edge, Imports: []string{EdgeAPI},
				Libraries: []string{"github.com/willscott/go-nfs-client"}},

			// The file system.
			{Pkg: "internal/admin", Kind: Part, Imports: []string{"internal/client", "internal/cluster", "internal/drive", "internal/pki",
				"internal/impact", "internal/job", "internal/meta", "internal/policy", "internal/qos", "internal/tier"}},
			{Pkg: "internal/bench", Kind: Part, Imports: []string{"internal/meta"}},
			{Pkg: "internal/jobs", Kind: Part, Imports: []string{"internal/block", "internal/client", "internal/cluster",
				"internal/drive", "internal/job", "internal/meta", "internal/policy", "internal/restripe", "internal/tier"}},
			// What a policy's rules do to the namespace's files, for the
			// tier job and the dry run.
			{Pkg: "internal/tier", Kind: Part, Imports: []string{"internal/cluster", "internal/meta", "internal/policy"}},
			{Pkg: "internal/restripe", Kind: Part, Imports: []string{"internal/client", "internal/drive", "internal/erasure",
				"internal/meta", "internal/placement"}},
			{Pkg: "internal/topology", Kind: Part, Imports: []string{"internal/client", "internal/cluster", "internal/erasure",
				"internal/meta"}},
			{Pkg: "internal/vfs", Kind: Part, Imports: []string{"internal/client", "internal/meta", "internal/qos"}},
			{Pkg: "internal/client", Kind: Part, Imports: []string{"internal/block", "internal/drive",
				"internal/erasure", "internal/meta", "internal/placement", "internal/qos"}},
			{Pkg: "internal/cluster", Kind: Part, Imports: []string{"internal/drive", "internal/erasure", "internal/etcdx", "internal/pki", "internal/policy", "internal/qos"}},
			{Pkg: "internal/meta", Kind: Part, Imports: []string{"internal/erasure", "internal/kv"}},
			{Pkg: "internal/block", Kind: Part, Imports: []string{"internal/drive", "internal/pki", "internal/qos", "internal/rpc/pb"}},

			{Pkg: "internal/impact", Kind: Part, Imports: []string{"internal/job"}},
			{Pkg: "internal/events", Kind: Part, Imports: []string{"internal/cluster", "internal/job", "internal/policy"}},

			// Self-contained parts.
			{Pkg: "internal/job", Kind: Leaf},
			// The stream writer and checker of weft checkstream.
			{Pkg: "internal/checkstream", Kind: Leaf},
			{Pkg: "internal/qos", Kind: Leaf},
			{Pkg: "internal/placement", Kind: Leaf},
			{Pkg: "internal/policy", Kind: Leaf},
			{Pkg: "internal/erasure", Kind: Leaf},
			{Pkg: "internal/drive", Kind: Leaf},
			{Pkg: "internal/kv", Kind: Leaf},
			{Pkg: "internal/kv/etcdkv", Kind: Leaf, Imports: []string{"internal/kv"}},
			{Pkg: "internal/kv/kvcache", Kind: Leaf, Imports: []string{"internal/kv"}},
			{Pkg: "internal/kv/memkv", Kind: Leaf, Imports: []string{"internal/kv"}},
			{Pkg: "internal/etcdx", Kind: Leaf},
			// Floating service addresses held through etcd leases (the
			// NFS gateway's HA); it speaks etcd's client directly.
			{Pkg: "internal/vip", Kind: Leaf},
			{Pkg: "internal/pki", Kind: Leaf},
			{Pkg: "internal/rpc", Kind: Leaf},
			{Pkg: "internal/rpc/pb", Kind: Leaf},

			// Infrastructure.
			{Pkg: "internal/failpoint", Kind: Shared},
			{Pkg: "internal/durable", Kind: Shared},
			{Pkg: "internal/runner", Kind: Shared},

			// Test support.
			{Pkg: "internal/datadriven", Kind: Test},
			// The NFS gateway's tests: an edge's own test files see only
			// vfs, so they live here, over a real vfs.FS.
			{Pkg: "internal/gateway/nfs/nfstest", Kind: Test, Imports: []string{"internal/gateway/nfs", "internal/vfs",
				"internal/vfs/vfstest"}},
			// A real vfs.FS for the gateways' tests, over an in-process
			// cluster: the one place test support below vfs is named.
			{Pkg: "internal/vfs/vfstest", Kind: Test, Imports: []string{"internal/client", "internal/client/clienttest", "internal/vfs"}},
			{Pkg: "internal/client/clienttest", Kind: Test, Imports: []string{"internal/block", "internal/client",
				"internal/drive", "internal/erasure", "internal/kv", "internal/kv/memkv", "internal/meta"}},
			{Pkg: "internal/etcdx/etcdtest", Kind: Test, Imports: []string{"internal/etcdx", "internal/pki", "internal/pki/pkitest"}},
			{Pkg: "internal/pki/pkitest", Kind: Test, Imports: []string{"internal/pki"}},
			{Pkg: "internal/kv/kvtest", Kind: Test, Imports: []string{"internal/kv"}},
			{Pkg: "internal/layering", Kind: Test},
			{Pkg: "tests", Kind: Test},
			{Pkg: "tests/harness", Kind: Test, Imports: []string{"internal/admin", "internal/block", "internal/cluster", "internal/etcdx", "internal/pki",
				"internal/job", "internal/local", "internal/meta", "internal/namespace"}},
		},
		Forbidden: []Forbid{
			{From: "internal/meta", To: "internal/client",
				Why: "the namespace never touches block data; the data path is written over it"},
			{From: "internal/meta", To: "internal/cluster",
				Why: "the namespace knows nothing of the control plane that hosts it"},
			{From: "internal/cluster", To: "internal/meta",
				Why: "the control plane knows nodes, drives and pools; the wiring (internal/namespace) opens the namespace"},
			{From: "internal/cluster", To: "internal/kv",
				Why: "the control plane speaks etcd directly; the namespace's store is the wiring's business"},
		},
	}
}
