package impact

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Impact policy records, format version 2.
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
//	"client_p99"   string  (v2) the client latency target: absent means the
//	                       level's per drive class, "none" no target, else a
//	                       Go duration ("5ms") from MinClientP99 to MaxClientP99
//
// A record is validated after decoding like any new policy: a record that
// does not validate is ErrCorrupt.
//
// Migration: a change an older weft could misread bumps PolicyRecordVersion
// and adds a case to decodePolicy converting the older version on read;
// records are rewritten in the new version when next updated.
//
//	v1 → v2  added "client_p99". A v1 reader would ignore it and run the
//	         policy without its target (or with the level's where it says
//	         none), hence the bump. A v1 record reads as absent
//	         "client_p99": the level's targets, as a policy created now
//	         without --client-p99.
const (
	// PolicyRecordVersion is the "v" this binary writes and the newest it
	// reads.
	PolicyRecordVersion = 2
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
	ClientP99   string         `json:"client_p99,omitempty"` // v2
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
	if p.ClientP99 != nil {
		r.ClientP99 = FormatClientP99(p.ClientP99)
	}
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
	switch hdr.V {
	case 1: // no target in v1: the level's (see the migration above)
		if r.ClientP99 != "" {
			return Policy{}, fmt.Errorf("%w: %s: format version 1 with a client_p99", ErrCorrupt, key)
		}
	default:
		if r.ClientP99 != "" {
			if r.ClientP99 == "default" {
				return Policy{}, fmt.Errorf("%w: %s: client_p99 %q: absent, not \"default\", means the level's", ErrCorrupt, key, r.ClientP99)
			}
			d, err := ParseClientP99(r.ClientP99)
			if err != nil {
				return Policy{}, fmt.Errorf("%w: %s: %v", ErrCorrupt, key, err)
			}
			p.ClientP99 = d
		}
	}
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
