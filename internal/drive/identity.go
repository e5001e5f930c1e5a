package drive

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/weftfs/weft/internal/durable"
)

// Identity file format, version 1.
//
// DIR/weft-drive.json, written once when a directory becomes a drive
// (temp file + fsync + rename + directory fsync), never rewritten in place:
//
//	{
//	  "format_version": 1,          // IdentityFormatVersion; newer is refused
//	  "cluster_id": "c-2f9a…",      // the cluster the drive belongs to
//	  "drive_id": 7,                // uint32, shown as "d7"
//	  "node": "node-1",             // the node that hosts the drive
//	  "class": "ssd",               // nvme | ssd | hdd
//	  "created": "2026-01-02T15:04:05Z"  // RFC 3339, UTC
//	}
//
// Unknown fields are ignored so an older binary can read a newer minor
// addition; a change that older binaries must not ignore bumps the version.
// Migration: version 1 is the only version so far. When a version 2 appears,
// readIdentity keeps decoding version 1 and Open rewrites the file in the
// current version (durably, as above) before using the drive.
const (
	// IdentityFormatVersion is the identity format this binary writes and
	// the newest it reads.
	IdentityFormatVersion = 1
	// IdentityFile is the identity file's name inside the drive directory.
	IdentityFile = "weft-drive.json"
)

// Identity is what a drive directory says about itself.
type Identity struct {
	FormatVersion int       `json:"format_version"`
	ClusterID     string    `json:"cluster_id"`
	DriveID       ID        `json:"drive_id"`
	Node          string    `json:"node"`
	Class         Class     `json:"class"`
	Created       time.Time `json:"created"`
}

// readIdentity reads DIR/weft-drive.json. It returns an error satisfying
// os.IsNotExist when there is none, ErrNewerFormat for a newer version and
// ErrBadIdentity when the file cannot be parsed or misses fields.
func readIdentity(dir string) (Identity, error) {
	var id Identity
	path := filepath.Join(dir, IdentityFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return id, err
	}
	if err := json.Unmarshal(b, &id); err != nil {
		return id, fmt.Errorf("%w: %s: %v; restore the file from a backup or wipe the drive and add it again", ErrBadIdentity, path, err)
	}
	switch {
	case id.FormatVersion > IdentityFormatVersion:
		return id, fmt.Errorf("%w: %s has identity format version %d, this weft supports up to %d; upgrade weft",
			ErrNewerFormat, path, id.FormatVersion, IdentityFormatVersion)
	case id.FormatVersion < 1:
		return id, fmt.Errorf("%w: %s: format_version %d", ErrBadIdentity, path, id.FormatVersion)
	case id.ClusterID == "":
		return id, fmt.Errorf("%w: %s: empty cluster_id", ErrBadIdentity, path)
	case id.Node == "":
		return id, fmt.Errorf("%w: %s: empty node", ErrBadIdentity, path)
	}
	if _, err := ParseClass(string(id.Class)); err != nil {
		return id, fmt.Errorf("%w: %s: %v", ErrBadIdentity, path, err)
	}
	return id, nil
}

// writeIdentity writes id durably as DIR/weft-drive.json.
func writeIdentity(dir string, id Identity) error {
	b, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteFile(filepath.Join(dir, IdentityFile), append(b, '\n'), 0o644)
}
