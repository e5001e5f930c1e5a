// Package client is weft's file data path: it cuts a file's bytes into
// stripes, erasure-codes or mirrors them, writes the units to the nodes'
// block services in parallel, commits stripe maps with a generation
// compare-and-swap, and reads them back (reconstructing from parity when a
// unit is missing, corrupt or unreachable), with write-behind and readahead.
//
// It is not a POSIX layer: permissions, open-file tracking in meta, errno
// mapping and namespace operations belong to vfs and the gateways, and
// freeing queued blocks belongs to the node servers.
package client
