package nfs

import (
	"context"
	"errors"
	"fmt"

	nfsc "github.com/willscott/go-nfs-client/nfs"

	"github.com/weftfs/weft/internal/vfs"
)

// statusTable turns vfs's error classes into NFSv3 status codes, checked in
// order; this is the one place the gateway does it. An error of no class
// (a fault below vfs) is NFS3ERR_IO. Retryable conditions (the metadata
// store or drives not answering, a request cut short) are NFS3ERR_JUKEBOX,
// which tells the client to retry later rather than fail the application.
var statusTable = []struct {
	err    error
	status uint32
}{
	{vfs.ErrNotFound, nfsc.NFS3ErrNoEnt},
	{vfs.ErrExists, nfsc.NFS3ErrExist},
	{vfs.ErrNotDir, nfsc.NFS3ErrNotDir},
	{vfs.ErrIsDir, nfsc.NFS3ErrIsDir},
	{vfs.ErrNotEmpty, nfsc.NFS3ErrNotEmpty},
	{vfs.ErrNameTooLong, nfsc.NFS3ErrNameTooLong},
	{vfs.ErrPerm, nfsc.NFS3ErrPerm},
	{vfs.ErrAccess, nfsc.NFS3ErrAcces},
	{vfs.ErrTooManyLinks, nfsc.NFS3ErrMLink},
	{vfs.ErrInvalid, nfsc.NFS3ErrInval},
	{vfs.ErrXattrTooLarge, nfsc.NFS3ErrInval},
	{vfs.ErrNoXattr, nfsc.NFS3ErrIO},
	{vfs.ErrBusy, nfs3ErrJukebox},
	{vfs.ErrBadHandle, nfsc.NFS3ErrServerFault},
	{vfs.ErrNoSpace, nfsc.NFS3ErrNoSpc},
	{vfs.ErrFileTooLarge, nfsc.NFS3ErrFBig},
	{vfs.ErrNotSupported, nfsc.NFS3ErrNotSupp},
	{vfs.ErrUnavailable, nfs3ErrJukebox},
	{context.Canceled, nfs3ErrJukebox},
	{context.DeadlineExceeded, nfs3ErrJukebox},
}

// statusOf returns the NFSv3 status of err (NFS3_OK for nil).
func statusOf(err error) uint32 {
	st, _ := classified(err)
	return st
}

// classified is statusOf, and whether err had a class: an error of none
// (a fault below vfs) is NFS3ERR_IO.
func classified(err error) (uint32, bool) {
	if err == nil {
		return nfsc.NFS3Ok, true
	}
	var se statusError
	if errors.As(err, &se) {
		return uint32(se), true
	}
	for _, e := range statusTable {
		if errors.Is(err, e.err) {
			return e.status, true
		}
	}
	return nfsc.NFS3ErrIO, false
}

// statusOf is statusOf of err, and a fault (an error of no class) also
// logged with the procedure (vfs.FaultLog): the client sees only
// NFS3ERR_IO, so the cause must reach the gateway's log.
func (r *request) statusOf(err error) uint32 {
	st, ok := classified(err)
	if !ok {
		r.s.faults.Note(r.proc.name, err)
	}
	return st
}

// statusError is a status the gateway decides itself (a stale or bad
// handle, a read-only export).
type statusError uint32

func (e statusError) Error() string { return fmt.Sprintf("nfs: status %d", uint32(e)) }
