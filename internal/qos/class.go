package qos

import (
	"strings"
	"time"
)

// Class is the I/O class of a block call. The zero value is not a class;
// ParseClass turns anything unknown into Misc.
type Class string

// The I/O classes.
const (
	// Other is client I/O: mounts and gateways.
	Other Class = "other"
	// Maintenance is the job engine's I/O: repair, drain, rebalance,
	// tier, scans, fsck, collect.
	Maintenance Class = "maintenance"
	// Misc is everything else (and any call that names no class).
	Misc Class = "misc"
)

// Classes returns the classes in the order the tables show them.
func Classes() []Class { return []Class{Misc, Other, Maintenance} }

// ParseClass returns the class named s (case-insensitive; "maint" is
// Maintenance). Anything else, "" included, is Misc: an unknown class is
// never an error, so that an older or newer caller is served all the same.
func ParseClass(s string) Class {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "other":
		return Other
	case "maintenance", "maint":
		return Maintenance
	}
	return Misc
}

// Valid reports whether c is one of the three classes.
func (c Class) Valid() bool { return c == Other || c == Maintenance || c == Misc }

// Tag is what a block call carries for QoS and statistics: its class, and
// as far as the caller knows them the pool of the drive, the job, the
// client (a mount's id) and the pid the kernel gave the FUSE request.
type Tag struct {
	Class  Class
	Pool   string
	Job    string
	Client string
	PID    int
	// P99 is the caller's own p99 of its recent calls to Pool (a
	// client's Meter), 0 if it has none; see meter.go.
	P99 time.Duration
}

// Dir is the direction of a block I/O.
type Dir string

// The directions.
const (
	// Read is a block read (get, verify).
	Read Dir = "r"
	// Write is a block write (put, the adoption of a staged write).
	Write Dir = "w"
)

// Or returns t with its empty fields taken from def.
func (t Tag) Or(def Tag) Tag {
	if t.Class == "" {
		t.Class = def.Class
	}
	if t.Pool == "" {
		t.Pool = def.Pool
	}
	if t.Job == "" {
		t.Job = def.Job
	}
	if t.Client == "" {
		t.Client = def.Client
	}
	if t.PID == 0 {
		t.PID = def.PID
	}
	if t.P99 == 0 {
		t.P99 = def.P99
	}
	return t
}
