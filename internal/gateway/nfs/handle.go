package nfs

import (
	"encoding/binary"
	"errors"

	"github.com/weftfs/weft/internal/vfs"
)

// A file handle (nfs_fh3) names an inode and the export it was reached
// through, from numbers alone, so that it stays valid across gateway
// restarts and on every node serving the namespace:
//
//	byte 0      format version (handleV1)
//	bytes 1-8   the inode's LIN, big endian
//	bytes 9-16  the LIN of the export's directory, big endian
//
// LINs are never reused, so no generation is needed: a handle of a
// deleted inode stays stale forever. The export's LIN ties the handle to
// the export's client list, squashing and read-only flag; a handle whose
// export is gone (or whose directory was replaced) is stale. A later
// format gets a new version byte; decodeHandle refuses versions it does
// not know (NFS3ERR_BADHANDLE), so old gateways never misread new handles.
const (
	handleV1  = 1
	handleLen = 17
)

var errBadHandle = errors.New("nfs: malformed file handle")

func encodeHandle(lin, export vfs.LIN) []byte {
	b := make([]byte, handleLen)
	b[0] = handleV1
	binary.BigEndian.PutUint64(b[1:], uint64(lin))
	binary.BigEndian.PutUint64(b[9:], uint64(export))
	return b
}

func decodeHandle(b []byte) (lin, export vfs.LIN, err error) {
	if len(b) != handleLen || b[0] != handleV1 {
		return 0, 0, errBadHandle
	}
	lin = vfs.LIN(binary.BigEndian.Uint64(b[1:]))
	export = vfs.LIN(binary.BigEndian.Uint64(b[9:]))
	if lin == 0 || export == 0 {
		return 0, 0, errBadHandle
	}
	return lin, export, nil
}
