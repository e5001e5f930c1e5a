// Package durable writes small files atomically and durably: a crash leaves
// either the old content or the new one, never a mix, and a returned write
// survives power loss.
//
// It is not a block store (package drive keeps block files with headers and
// checksums) and not a general file library: it does one thing, the
// write-temp, fsync, rename, fsync-directory sequence, in one place.
package durable
