package policy

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// The stored form of an installed policy, record format version 1.
//
// Whoever stores policies (the admin API, under a key of its own schema)
// stores each as this JSON object:
//
//	{
//	  "v": 1,                        record format version (RecordVersion)
//	  "text": "RULE 'default' ...",  the policy as the administrator wrote
//	                                 it, comments included (UTF-8)
//	  "version": 7,                  the policy's version number: 1 for the
//	                                 first installed, +1 for each install
//	  "installed": "2026-01-02T03:04:05Z",  when it was installed (RFC 3339)
//	  "by": "alice",                 who installed it (omitted when empty)
//	  "comment": "colder after 2d"   the administrator's note (omitted
//	                                 when empty)
//	}
//
// The text, not a parsed form, is stored: every reader parses it with
// its own binary, and a construct an older binary does not know fails
// its Parse with a position (refused, never misread).
//
// Migration: version 1 is the first. A change an older binary could
// misread — a field whose absence changes the meaning, or a construct of
// the language whose meaning changes rather than one that is added —
// bumps RecordVersion; Decode then accepts every older "v" and upgrades
// the record in memory (the next install writes the new version), so a
// rolling upgrade needs no offline step, and a binary refuses a record
// newer than it reads with ErrNewerFormat rather than misread it.
// Adding an optional field that older binaries may ignore does not bump
// the version.

// RecordVersion is the newest record format this binary reads, and the
// one it writes.
const RecordVersion = 1

// Record is a stored policy: its text and who installed it when.
type Record struct {
	// Text is the policy as written, comments included.
	Text string
	// Version is the policy's version number (1, 2, ...).
	Version uint64
	// Installed is when it was installed.
	Installed time.Time
	// By is who installed it.
	By string
	// Comment is the administrator's note.
	Comment string
}

// recordV1 is the JSON of a version-1 record.
type recordV1 struct {
	V         int       `json:"v"`
	Text      string    `json:"text"`
	Version   uint64    `json:"version"`
	Installed time.Time `json:"installed"`
	By        string    `json:"by,omitempty"`
	Comment   string    `json:"comment,omitempty"`
}

// Encode returns r's stored form. It refuses (ErrInvalid) fields that
// are not UTF-8, which JSON would silently alter, and a text longer than
// MaxSourceBytes, which no Parse would accept.
func Encode(r Record) ([]byte, error) {
	for _, f := range []struct{ name, v string }{{"text", r.Text}, {"by", r.By}, {"comment", r.Comment}} {
		if !utf8.ValidString(f.v) {
			return nil, fmt.Errorf("%w: the record's %s is not UTF-8", ErrInvalid, f.name)
		}
	}
	if len(r.Text) > MaxSourceBytes {
		return nil, fmt.Errorf("%w: policy of %d bytes: at most %d are accepted", ErrInvalid, len(r.Text), MaxSourceBytes)
	}
	b, err := json.Marshal(recordV1{V: RecordVersion, Text: r.Text, Version: r.Version,
		Installed: r.Installed.UTC(), By: r.By, Comment: r.Comment})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err) // a time outside years 0-9999
	}
	return b, nil
}

// Decode reads a stored record. It returns ErrNewerFormat for a record of
// a newer format than RecordVersion (upgrade this node), and ErrCorrupt
// for one that is not a record (not JSON, no "v"). It does not parse the
// policy's text: Parse does.
func Decode(b []byte) (Record, error) {
	var hdr struct {
		V *int `json:"v"`
	}
	if err := json.Unmarshal(b, &hdr); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	switch {
	case hdr.V == nil || *hdr.V < 1:
		return Record{}, fmt.Errorf("%w: no record version \"v\"", ErrCorrupt)
	case *hdr.V > RecordVersion:
		return Record{}, fmt.Errorf("%w: the policy record has format version %d, this weft reads up to %d: upgrade weft on this node", ErrNewerFormat, *hdr.V, RecordVersion)
	}
	var r recordV1
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return Record{Text: r.Text, Version: r.Version, Installed: r.Installed, By: r.By, Comment: r.Comment}, nil
}
