// Package etcdkv is the kv.Store backend over an etcd v3 cluster (embedded
// members or an external cluster) through clientv3: snapshot reads at one
// revision, and one Txn per commit guarded by mod-revision compares.
//
// It does not start or own etcd members (see package etcdx) and it keeps
// every key under one prefix, so it can share a cluster with other users.
package etcdkv
