package cluster

import (
	"encoding/json"
	"fmt"
	"time"
)

// Control-plane key schema, format version 1.
//
// Every key lives under Prefix. Values are JSON objects carrying "v", the
// record's own format version; a reader refuses a record whose "v" is newer
// than it knows.
//
//	/weft/schema                  decimal SchemaVersion of the whole layout;
//	                              written once at bootstrap, checked at Open
//	/weft/cluster/id              cluster id (32 hex chars), written once
//	/weft/cluster/created         RFC 3339 bootstrap time
//	/weft/seq/drive               last allocated drive id (decimal uint32)
//	/weft/nodes/<node>            NodeRecord, persistent
//	/weft/live/nodes/<node>       NodeLive, bound to the node's lease:
//	                              present exactly while the node is up
//	/weft/drives/<d%010d>         DriveRecord, persistent (zero-padded id so
//	                              that a prefix scan lists drives in id order)
//	/weft/live/drives/<d%010d>    DriveLive (usage, health), bound to the
//	                              owning node's lease
//	/weft/pools/<pool>            PoolRecord, persistent (record version
//	                              2: class and thresholds; version 1
//	                              records read with the defaults)
//	/weft/watch                   WatchRecord: the coordinator's event
//	                              watcher's memory (drive ids and node
//	                              names seen, down-since times), written
//	                              by the coordinator with a compare-and-
//	                              swap; absent until the first watch
//	/weft/tokens/<id>             TokenRecord: an admin API bearer token,
//	                              its secret hashed (token.go)
//	/weft/token-names/<name>      the id of the token called name
//	/weft/policy/current          the installed pool policy, a
//	                              policy.Record (policy.go)
//	/weft/policy/versions/<%020d> every installed version of it
//	/weft/qos/config              the QoS configuration, a qos.Config
//	                              (qos.go)
//	/weft/qos/demand/<node>       qos.NodeDemand, bound to the node's
//	                              lease: its QoS demand, every second
//	/weft/nfs/exports             the NFS gateways' exports, a
//	                              NFSExports (nfs.go)
//	/weft/ping                    never written: what every client reads
//	                              to prove a quorum answers (etcdx.PingKey)
//
// Access: etcd's authentication lets node identities do everything,
// client identities read everything and write under MetaPrefix, admin
// identities read everything (access.go).
//
// The namespace (package meta) keeps its keys under MetaPrefix, and the job
// engine (package job, schema in internal/job/schema.go) under /weft/jobs/;
// nothing in this package reads them.
//
// Migration: a change that old binaries could misread bumps SchemaVersion
// and adds a step to migrate() that rewrites version N-1 keys in place;
// Open runs the steps in order before the node serves.
const (
	// SchemaVersion is the control-plane layout this binary reads and writes.
	SchemaVersion = 1
	// RecordVersion is the "v" of every JSON record this binary writes,
	// unless its type says otherwise (PoolRecordVersion,
	// DriveRecordVersion).
	RecordVersion = 1
	// PoolRecordVersion is the "v" of the pool records this binary
	// writes and the newest it reads: 2 added Class, High and Low. A
	// version 1 record reads with no class and the default thresholds.
	PoolRecordVersion = 2
	// DriveRecordVersion is the newest drive record this binary reads.
	// A drive record is written as version 2 only while it carries
	// MoveTo (a move between pools in progress): a binary that knows
	// only version 1 would drain such a drive and retire it, so it must
	// refuse the record rather than misread it. Other drive records stay
	// version 1.
	DriveRecordVersion = 2

	Prefix         = "/weft/"
	keySchema      = Prefix + "schema"
	keyClusterID   = Prefix + "cluster/id"
	keyCreated     = Prefix + "cluster/created"
	keySeqDrive    = Prefix + "seq/drive"
	prefixNodes    = Prefix + "nodes/"
	prefixLiveNode = Prefix + "live/nodes/"
	prefixDrives   = Prefix + "drives/"
	prefixLiveDrv  = Prefix + "live/drives/"
	prefixPools    = Prefix + "pools/"
	keyWatch       = Prefix + "watch"

	// MetaPrefix is the key prefix reserved for the namespace metadata.
	MetaPrefix = Prefix + "meta/"
)

func nodeKey(name string) string     { return prefixNodes + name }
func liveNodeKey(name string) string { return prefixLiveNode + name }
func driveKey(id DriveID) string     { return fmt.Sprintf("%sd%010d", prefixDrives, uint32(id)) }
func liveDriveKey(id DriveID) string { return fmt.Sprintf("%sd%010d", prefixLiveDrv, uint32(id)) }
func poolKey(name string) string     { return prefixPools + name }

// NodeRecord is a node's persistent registration.
type NodeRecord struct {
	V          int       `json:"v"`
	Name       string    `json:"name"`
	GRPCAddr   string    `json:"grpc_addr"`
	AdminAddr  string    `json:"admin_addr"`
	EtcdClient string    `json:"etcd_client,omitempty"` // client URL of an embedded member
	Registered time.Time `json:"registered"`
}

// NodeLive is what a running node publishes under its lease.
type NodeLive struct {
	V       int       `json:"v"`
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	BootID  string    `json:"boot_id"` // random per process start
	Version string    `json:"version"`
	Started time.Time `json:"started"`
	// MachineBoot is the machine's boot id and ProcStart the process's
	// start time in clock ticks since boot (see ProcessStart): with Host
	// and PID they tell a restarting node whether this incarnation is
	// gone. Absent in records of older nodes.
	MachineBoot string `json:"machine_boot,omitempty"`
	ProcStart   uint64 `json:"proc_start,omitempty"`
}

// DriveRecord is a drive's persistent registration.
type DriveRecord struct {
	V       int         `json:"v"`
	ID      DriveID     `json:"id"`
	Node    string      `json:"node"`
	Path    string      `json:"path"`
	Class   string      `json:"class"`
	Pool    string      `json:"pool"`
	Status  DriveStatus `json:"status"`
	Added   time.Time   `json:"added"`
	Changed time.Time   `json:"changed"`
	// MoveTo is the pool the drive moves to (weft drive move): while it
	// is set the drive is draining out of Pool, and the drain job that
	// empties it puts it in MoveTo, ready, instead of retiring it.
	// Absent otherwise (record version 2 while present).
	MoveTo string `json:"move_to,omitempty"`
	// JoinedEmpty: the namespace had allocated no byte when the drive was
	// first registered, so every file was placed with the drive known
	// (give or take the moment a client's view of the drives takes to
	// follow), and its arrival needs no multiscan to spread files onto it
	// — the drives of a new cluster, written to as soon as it is up. Set
	// once, at the first registration. Absent in records of older nodes,
	// read as false: such a drive counts as added to a cluster storing
	// data, as before (an older binary ignores the field; the record
	// stays version 1).
	JoinedEmpty bool `json:"joined_empty,omitempty"`
}

func (DriveRecord) maxRecordVersion() int { return DriveRecordVersion }

// stamp sets d's record version: 2 while it carries MoveTo, else 1, so
// that only records an older binary would misread are refused by it.
func (d *DriveRecord) stamp() {
	d.V = RecordVersion
	if d.MoveTo != "" {
		d.V = DriveRecordVersion
	}
}

// DriveLive is a drive's usage and health as last published by its node.
type DriveLive struct {
	V          int   `json:"v"`
	TotalBytes int64 `json:"total_bytes"`
	FreeBytes  int64 `json:"free_bytes"`
	UsedBytes  int64 `json:"used_bytes"`
	Blocks     int64 `json:"blocks"`
	// CapacityBytes is the drive's configured capacity (TotalBytes is at
	// most this); 0: the whole file system. Absent in records of older
	// nodes, which read as 0.
	CapacityBytes int64     `json:"capacity_bytes,omitempty"`
	Error         string    `json:"error,omitempty"` // non-empty: the drive is down
	Updated       time.Time `json:"updated"`
}

// PoolRecord is a pool's persistent definition. A pool's drives are the
// drives whose DriveRecord.Pool names it.
//
// Version 2 added Class (the drive class the pool is meant for: nvme,
// ssd or hdd; "" for a pool made by an older weft or by a node naming it
// in its drive flags, which says nothing about class) and the space
// thresholds High and Low (percent of the pool's capacity; 0 < Low <
// High <= 100): the pool counts as full past High, and a move out of it
// (a migration rule's) stops once it is below Low. A version 1 record
// reads with the defaults DefaultHigh and DefaultLow.
type PoolRecord struct {
	V          int       `json:"v"`
	Name       string    `json:"name"`
	Protection string    `json:"protection"`
	Class      string    `json:"class,omitempty"`
	High       int       `json:"high"`
	Low        int       `json:"low"`
	Created    time.Time `json:"created"`
	Changed    time.Time `json:"changed,omitzero"`
}

func (PoolRecord) maxRecordVersion() int { return PoolRecordVersion }

// upgrade fills what a version 1 record lacks with the defaults.
func (p *PoolRecord) upgrade() {
	if p.V < 2 && p.High == 0 && p.Low == 0 {
		p.High, p.Low = DefaultHigh, DefaultLow
	}
}

// versioned is a record type with its own newest version (default
// RecordVersion).
type versioned interface{ maxRecordVersion() int }

// decode unmarshals a record and refuses one newer than its type's
// newest version (RecordVersion unless the type says otherwise).
func decode(key string, b []byte, into any) error {
	var hdr struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(b, &hdr); err != nil {
		return fmt.Errorf("%w: key %s: %v", ErrCorruptRecord, key, err)
	}
	newest := RecordVersion
	if v, ok := into.(versioned); ok {
		newest = v.maxRecordVersion()
	}
	if hdr.V > newest {
		return fmt.Errorf("%w: key %s has record version %d, this weft reads up to %d: upgrade weft", ErrNewerSchema, key, hdr.V, newest)
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("%w: key %s: %v", ErrCorruptRecord, key, err)
	}
	if p, ok := into.(*PoolRecord); ok {
		p.upgrade()
	}
	return nil
}

func encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("cluster: encode %T: %v", v, err)) // only plain structs are encoded
	}
	return string(b)
}
