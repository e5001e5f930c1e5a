// Package mount wires a client mount of a weft cluster — control-plane
// connection, namespace, data path, vfs and the FUSE server — and runs it
// until stopped. `weft mount` and `weft local up` use it.
//
// It holds no file system logic: that is in vfs, client and meta.
package mount
