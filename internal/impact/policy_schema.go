package impact

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Impact policy records, format version 1.
//
// Custom policies live in etcd, one key each; built-ins are compiled in and
// never stored:
//
//	/weft/jobs/policies/<name>   policyRecord as JSON
//
// policyRecord keys:
//
//	"v"            int     record format version; a reader refuses a record
//	                       newer than PolicyRecordVersion (ErrNewerFormat)
//	"name"         string  the policy name, equal to <name>
//	"description"  string  free text, optional
//	"time_zone"    string  IANA zone the windows are read in; absent or ""
//	                       means the cluster's zone
//	"default"      string  level outside every window: paused|low|medium|high
//	"windows"      list of objects, in the policy's order:
//	    "days"         string  day set as ParseWeekdays reads it ("mon-fri", "*")
//	    "start","end"  string  "HH:MM"; end "24:00" allowed; end <= start wraps midnight
//	    "level"        string  paused|low|medium|high
//	    "min_workers"  number  optional: replaces the level's minimum workers
//	    "max_workers"  number  optional: replaces the level's maximum workers
//
// A record is validated after decoding like any new policy: a record that
// does not validate is ErrCorrupt.
//
// Migration: a change an older weft could misread bumps PolicyRecordVersion
// and adds a case to decodePolicy converting the older version on read;
// records are rewritten in the new version when next updated.
const (
	// PolicyRecordVersion is the "v" this binary writes and the newest it
	// reads.
	PolicyRecordVersion = 1
	// PolicyPrefix is the etcd key prefix of custom impact policies.
	PolicyPrefix = "/weft/jobs/policies/"
)

// policyKey returns the etcd key of the custom policy name.
func policyKey(name string) string { return PolicyPrefix + name }

type policyRecord struct {
	V           int            `json:"v"`
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	TimeZone    string         `json:"time_zone,omitempty"`
	Default     string         `json:"default"`
	Windows     []windowRecord `json:"windows,omitempty"`
}

type windowRecord struct {
	Days       string   `json:"days"`
	Start      string   `json:"start"`
	End        string   `json:"end"`
	Level      string   `json:"level"`
	MinWorkers *float64 `json:"min_workers,omitempty"`
	MaxWorkers *float64 `json:"max_workers,omitempty"`
}

// encodePolicy returns p as a version PolicyRecordVersion record. p must
// have been validated.
func encodePolicy(p Policy) ([]byte, error) {
	r := policyRecord{V: PolicyRecordVersion, Name: p.Name, Description: p.Description, TimeZone: p.TimeZone, Default: p.Default}
	for _, w := range p.Windows {
		r.Windows = append(r.Windows, windowRecord{
			Days: w.Days.String(), Start: formatTimeOfDay(w.Start), End: formatTimeOfDay(w.End),
			Level: w.Level, MinWorkers: w.MinWorkers, MaxWorkers: w.MaxWorkers,
		})
	}
	return json.Marshal(r)
}

// decodePolicy decodes the record stored at key. A record newer than
// PolicyRecordVersion is ErrNewerFormat; one that does not parse,
// has no version, or does not validate is ErrCorrupt.
func decodePolicy(key string, b []byte) (Policy, error) {
	var hdr struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(b, &hdr); err != nil {
		return Policy{}, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
	}
	switch {
	case hdr.V > PolicyRecordVersion:
		return Policy{}, fmt.Errorf("%w: %s is format version %d, this weft reads up to %d: upgrade weft on this node", ErrNewerFormat, key, hdr.V, PolicyRecordVersion)
	case hdr.V < 1:
		return Policy{}, fmt.Errorf("%w: %s: no format version", ErrCorrupt, key)
	}
	var r policyRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return Policy{}, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
	}
	if want := strings.TrimPrefix(key, PolicyPrefix); r.Name != want {
		return Policy{}, fmt.Errorf("%w: %s holds policy %q", ErrCorrupt, key, r.Name)
	}
	p := Policy{Name: r.Name, Description: r.Description, TimeZone: r.TimeZone, Default: r.Default}
	for i, wr := range r.Windows {
		w, err := wr.window()
		if err != nil {
			return Policy{}, fmt.Errorf("%w: %s: window %d: %v", ErrCorrupt, key, i+1, err)
		}
		p.Windows = append(p.Windows, w)
	}
	if err := p.Validate(); err != nil {
		return Policy{}, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
	}
	return p, nil
}

func (wr windowRecord) window() (Window, error) {
	w := Window{Level: wr.Level, MinWorkers: wr.MinWorkers, MaxWorkers: wr.MaxWorkers}
	var err error
	if w.Days, err = parseWeekdays(wr.Days); err != nil {
		return w, err
	}
	if w.Start, err = parseTimeOfDay(wr.Start); err != nil {
		return w, err
	}
	w.End, err = parseTimeOfDay(wr.End)
	return w, err
}
