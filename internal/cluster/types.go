package cluster

import (
	"fmt"

	"github.com/weftfs/weft/internal/drive"
)

// DriveID identifies a drive cluster-wide: the id in the drive's identity
// file, allocated from etcd by AllocDriveID and shown as "d7".
type DriveID = drive.ID

// ParseDriveID accepts "d7" or "7" (never d0, which is not allocated).
func ParseDriveID(s string) (DriveID, error) {
	id, err := drive.ParseID(s)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%w: drive id %q: want d<N>, e.g. d3 (see weft drive list)", ErrInvalid, s)
	}
	return id, nil
}

// Availability says whether a node or drive can serve I/O now.
type Availability string

// Availabilities.
const (
	Up   Availability = "up"
	Down Availability = "down"
)

// DriveStatus is the administrator-controlled state of a drive.
type DriveStatus string

// Drive statuses. Suspended drives take no new allocations; draining drives
// are being emptied by a drain job; removed drives are empty and retired.
const (
	StatusReady     DriveStatus = "ready"
	StatusSuspended DriveStatus = "suspended"
	StatusDraining  DriveStatus = "draining"
	StatusRemoved   DriveStatus = "removed"
)

// transitions lists the allowed status changes.
var transitions = map[DriveStatus][]DriveStatus{
	StatusReady:     {StatusSuspended, StatusDraining},
	StatusSuspended: {StatusReady, StatusDraining},
	StatusDraining:  {StatusReady, StatusSuspended, StatusRemoved},
	StatusRemoved:   {},
}

// CanTransition reports whether a drive may go from one status to another.
// A no-op (from == to) is allowed.
func CanTransition(from, to DriveStatus) bool {
	if from == to {
		return true
	}
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// ValidName reports whether s is usable as a node or pool name: 1–63
// characters of [a-z0-9_-.], starting with a letter or digit.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '-' || c == '_' || c == '.') && i > 0:
		default:
			return false
		}
	}
	return true
}
