// Package nfstest runs the NFS gateway (package nfs) over a real vfs.FS on
// an in-process cluster (clienttest), for its tests and those of the
// packages that wire it. An edge's own test files may import only vfs
// (internal/layering), so the gateway's tests live here.
//
// It is test support, not a gateway: nothing but tests imports it.
package nfstest
