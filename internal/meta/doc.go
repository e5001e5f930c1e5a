// Package meta is weft's namespace — inodes (LINs), directory entries, hard
// links with back-pointers, symlinks, xattrs, rename, open-file tracking,
// stripe maps, the block delete queue and per-pool usage — written once over
// the transactional kv.Store interface; schema.go documents every key.
//
// It is not a POSIX layer (permission checks, errno mapping, file handles and
// caching belong to vfs and the gateways) and it never touches block data.
package meta
