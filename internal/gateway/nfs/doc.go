// Package nfs serves a weft namespace over NFSv3 (RFC 1813) and MOUNT v3,
// on one TCP port, through package vfs: the gateway of issue 18 part 1.
//
// It is a translation layer, not a file system: POSIX semantics and
// permission checks live in vfs (the only weft package it imports; the FS
// must be built with CheckPermissions), and vfs's error classes become
// NFS3ERR_* codes in one place (status.go). It does not wire itself into a
// node, keep exports in etcd, or move service addresses: its callers do.
//
// # Why not go-nfs's server
//
// github.com/willscott/go-nfs v0.0.4 was read first. Its server is built
// around a path-based billy.Filesystem and a Handler whose file handles
// come from an in-memory table (CachingHandler), and it falls short of
// what this gateway must do in ways its extension points cannot fix:
//
//   - WRITE opens, writes and closes the file per request and always
//     replies FILE_SYNC with a random per-process verifier; COMMIT does
//     nothing. UNSTABLE writes and a verifier chosen by the caller (which
//     must change on failover) cannot be expressed.
//   - The RPC credentials never reach the Handler or the billy calls, so
//     AUTH_SYS identities, root squash and per-request permission checks
//     are impossible; nor does the client's address (per-export client
//     lists on every request).
//   - Procedure handlers are registered in a package-global table, once,
//     and take its unexported response type: they cannot be replaced.
//   - Server.Serve cannot be stopped with its connections (a self-fencing
//     gateway must close them), and has no duplicate-request cache.
//
// So this package answers ONC RPC itself (rpc.go: record marking, call
// header, credentials, reply header) and encodes every message with
// go-nfs-client's XDR pieces (github.com/willscott/go-nfs-client/nfs/xdr
// over rasky/go-xdr, driven by structs, wire.go), reusing go-nfs-client's
// NFSv3 types (fattr3, sattr3, wcc_data, post_op_attr, fsinfo3, the status
// and procedure constants). No XDR is encoded by hand. Tests drive it with
// go-nfs-client's own client and with libnfs (nfs-cp, nfs-cat, nfs-ls).
//
// # What it does
//
// File handles (handle.go) carry a format version, the inode's LIN and
// the LIN of the export's directory: no table, so they stay valid across
// restarts and on every node. Requests are checked against their export
// on every call: client address (IP or CIDR list), read-only (ROFS), and
// the caller (AUTH_SYS, or AUTH_NONE as the anonymous user) squashed as
// the export says (root squash by default), carried to vfs with
// vfs.WithCaller. READ and WRITE apply knfsd's owner override.
//
// WRITE: FILE_SYNC and DATA_SYNC writes are made durable (Handle.Fsync)
// before the reply; UNSTABLE writes stay buffered in a cached open handle
// (files.go) until COMMIT, a sync write, or the handle's close; WRITE and
// COMMIT carry the verifier Serve was given (changed for a file whose
// buffered writes were lost at a failed close, so that clients resend).
// Namespace changes (CREATE, MKDIR, REMOVE, RENAME, ...) are made durable
// (FS.FsyncDir) before their reply, as NFS requires.
//
// Non-idempotent procedures go through a duplicate-request cache
// (drc.go), kept in this gateway's memory: a client resending after a lost
// reply gets the first reply. With Config.DRC the replies of those that
// succeeded are also recorded, before they are sent, where every gateway
// finds them (drc_store.go; the node keeps them in etcd), and a request
// that fails is looked up there: a client that fails over to another
// node gets its first reply there too. An idempotent request that finds
// the cluster unavailable is retried for a while, and not answered at
// all once its listener is stopped (the client resends it to the next
// holder of the address).
//
// Long-lived goroutines: an edge may not import the node's runner, so the
// package starts none of its own but the one per connection, which Serve
// owns and waits for (with a goroutine per request in progress, at most
// 16 per connection); idle handles are closed lazily by requests.
package nfs
