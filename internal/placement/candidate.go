package placement

// DriveID identifies a drive cluster-wide (the id in its identity file).
// It is an alias so that ids from internal/drive and internal/cluster pass
// without conversion, while this package imports neither.
type DriveID = uint32

// Candidate is one drive of the pool as the caller sees it at placement
// time. Only drives that are Up, Usable and have at least the request's
// UnitBytes free are eligible.
type Candidate struct {
	ID         DriveID
	Node       string // failure domain holding the drive
	FreeBytes  int64  // free space; the weight of the drive in draws
	TotalBytes int64  // capacity; informational (reports), not used by the draw
	Up         bool   // availability: false for a down drive
	Usable     bool   // status ready: false for suspended, draining or removed drives
}

// Unit is one placed unit of a stripe: the drive holding it and that
// drive's node. A stripe map resolved against the cluster's drive table
// gives the []Unit that ComputeTolerance takes.
type Unit struct {
	Drive DriveID
	Node  string
}
