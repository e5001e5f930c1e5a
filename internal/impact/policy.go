package impact

import (
	"fmt"
	"strings"
	"time"
)

// Built-in impact policy names. They always exist, on every node, and cannot
// be modified or deleted.
const (
	PolicyLow      = "low"
	PolicyMedium   = "medium"
	PolicyHigh     = "high"
	PolicyOffHours = "off_hours"
)

// Policy is an impact policy: which level a job runs at, by time of week.
// At any instant at most one window applies (Validate refuses overlaps);
// outside every window Default applies.
type Policy struct {
	// Name is 1 to 63 lower-case letters, digits, '-' or '_', starting
	// with a letter.
	Name        string
	Description string
	// TimeZone is the IANA zone the windows are read in ("Europe/Paris");
	// empty means the cluster's zone (the controller's configured one).
	TimeZone string
	// Default is the level outside every window.
	Default string
	Windows []Window
	// ClientP99 is the policy's client latency target for every pool, in
	// every window: nil means the targets of the level in effect, per
	// drive class (DriveThreshold.ClientP99); 0 means no target; otherwise
	// between MinClientP99 and MaxClientP99.
	ClientP99 *time.Duration `json:",omitempty"`
}

// Bounds of a policy's client latency target: under 100 µs no drive
// answers, so a job would be held at its minimum for nothing; past a
// minute the target is no protection.
const (
	MinClientP99 = 100 * time.Microsecond
	MaxClientP99 = time.Minute
)

// ParseClientP99 reads a client latency target as the command line and
// the admin API take it: "" or "default" is nil (the level's targets),
// "0" or "none" is no target, anything else a duration such as "5ms"
// between MinClientP99 and MaxClientP99. Errors wrap ErrInvalid and name
// the input.
func ParseClientP99(s string) (*time.Duration, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "default":
		return nil, nil
	case "0", "none":
		d := time.Duration(0)
		return &d, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%w: client p99 %q: not a duration; want one such as 5ms or 50ms (none: no target; default: the level's per drive class)", ErrInvalid, s)
	}
	if err := checkClientP99(d); err != nil {
		return nil, fmt.Errorf("%w: client p99 %q: %v", ErrInvalid, s, err)
	}
	return &d, nil
}

// checkClientP99 returns why d is not a valid target, nil if it is.
func checkClientP99(d time.Duration) error {
	if d == 0 || d >= MinClientP99 && d <= MaxClientP99 {
		return nil
	}
	return fmt.Errorf("want a duration from %v to %v (none: no target; default: the level's per drive class)", MinClientP99, MaxClientP99)
}

// FormatClientP99 returns a target as ParseClientP99 reads it: "default",
// "none" or a duration.
func FormatClientP99(d *time.Duration) string {
	switch {
	case d == nil:
		return "default"
	case *d == 0:
		return "none"
	}
	return d.String()
}

// ClientTarget returns the client latency target p sets for a pool of
// drives of class when level applies: its own ClientP99, or the level's
// for the class; 0 is no target.
func (p Policy) ClientTarget(level Level, class string) time.Duration {
	if p.ClientP99 != nil {
		return *p.ClientP99
	}
	return level.Thresholds.ForClass(class).ClientP99
}

// BuiltinPolicies returns the built-in policies, fresh values the caller
// may keep:
//
//	low        always level low
//	medium     always level medium
//	high       always level high
//	off_hours  level low mon-fri 08:00-18:00 in the cluster's zone, high
//	           on nights and weekends
//
// None sets its own client latency target: each follows its level's per
// drive class (low and medium have targets, high none; see Levels).
func BuiltinPolicies() []Policy {
	return []Policy{
		{Name: PolicyLow, Default: LevelLow, Description: "always low impact"},
		{Name: PolicyMedium, Default: LevelMedium, Description: "always medium impact"},
		{Name: PolicyHigh, Default: LevelHigh, Description: "always high impact"},
		{
			Name: PolicyOffHours, Default: LevelHigh,
			Description: "low impact during business hours, high on nights and weekends",
			Windows: []Window{{
				Days:  mustWeekdays("mon-fri"),
				Start: 8 * time.Hour, End: 18 * time.Hour,
				Level: LevelLow,
			}},
		},
	}
}

func mustWeekdays(s string) Weekdays {
	w, err := ParseWeekdays(s)
	if err != nil {
		panic(err)
	}
	return w
}

// BuiltinPolicy returns the built-in policy called name, if there is one.
func BuiltinPolicy(name string) (Policy, bool) {
	for _, p := range BuiltinPolicies() {
		if p.Name == name {
			return p, true
		}
	}
	return Policy{}, false
}

// NewPolicy builds a policy from the compact syntax of the command line
// (`--window` specs as for ParseWindow, `--default`, `--tz`) and validates
// it. Errors wrap ErrInvalid and name the input.
func NewPolicy(name, timeZone, defaultLevel string, windowSpecs []string) (Policy, error) {
	p := Policy{Name: name, TimeZone: timeZone, Default: defaultLevel}
	for _, spec := range windowSpecs {
		w, err := parseWindow(spec)
		if err != nil {
			return Policy{}, fmt.Errorf("%w: policy %q: %v", ErrInvalid, name, err)
		}
		p.Windows = append(p.Windows, w)
	}
	return p, p.Validate()
}

// validPolicyName reports whether name is 1 to 63 lower-case letters,
// digits, '-' or '_', starting with a letter.
func validPolicyName(name string) bool {
	if len(name) == 0 || len(name) > 63 || name[0] < 'a' || name[0] > 'z' {
		return false
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Validate checks the name, the time zone (it must load), the default level,
// the client latency target (0, or MinClientP99 to MaxClientP99) and
// every window: known level, times, worker bounds (0 ≤ min ≤ max ≤
// MaxWorkersPerNode), and that no two windows overlap. Errors wrap
// ErrInvalid and name the policy, the window (by number from 1 and in
// compact syntax) and, for an overlap, the first minute both cover.
func (p Policy) Validate() error {
	if !validPolicyName(p.Name) {
		return fmt.Errorf("%w: policy name %q: use 1 to 63 lower-case letters, digits, '-' or '_', starting with a letter", ErrInvalid, p.Name)
	}
	if p.TimeZone != "" {
		if _, err := time.LoadLocation(p.TimeZone); err != nil {
			return fmt.Errorf("%w: policy %q: time zone %q: %v; use an IANA name like Europe/Paris, or none for the cluster's zone", ErrInvalid, p.Name, p.TimeZone, err)
		}
	}
	if p.Default == "" {
		return fmt.Errorf("%w: policy %q: no default level (used outside the windows)", ErrInvalid, p.Name)
	}
	if _, err := levelByName(p.Default); err != nil {
		return fmt.Errorf("%w: policy %q: default level: %v", ErrInvalid, p.Name, err)
	}
	if p.ClientP99 != nil {
		if err := checkClientP99(*p.ClientP99); err != nil {
			return fmt.Errorf("%w: policy %q: client p99 %v: %v", ErrInvalid, p.Name, *p.ClientP99, err)
		}
	}
	for i, w := range p.Windows {
		if err := w.validate(); err != nil {
			return fmt.Errorf("%w: policy %q: window %d (%q): %v", ErrInvalid, p.Name, i+1, w.String(), err)
		}
	}
	for i, a := range p.Windows {
		for j, b := range p.Windows[:i] {
			if m := overlap(a, b); m >= 0 {
				return fmt.Errorf("%w: policy %q: window %d (%q) overlaps window %d (%q) from %s",
					ErrInvalid, p.Name, i+1, a.String(), j+1, b.String(), formatMinuteOfWeek(m))
			}
		}
	}
	return nil
}

// Location returns the zone p's windows are read in: its own TimeZone, or
// cluster when it has none. An unknown zone is an error wrapping
// ErrInvalid.
func (p Policy) Location(cluster *time.Location) (*time.Location, error) {
	if p.TimeZone == "" {
		return cluster, nil
	}
	loc, err := time.LoadLocation(p.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("%w: policy %q: time zone %q: %v", ErrInvalid, p.Name, p.TimeZone, err)
	}
	return loc, nil
}

// Impact is the level a policy selects at one instant.
type Impact struct {
	// Level is the selected level, with the window's worker bounds.
	Level Level
	// Window is the index in Policy.Windows of the window that applies, or
	// -1 when none does and Default applies.
	Window int
}

// ImpactAt returns the level p selects at the wall-clock time of t, read in
// t's location: convert t to p.Location first. It fails (ErrInvalid)
// only for a policy that does not validate.
func (p Policy) ImpactAt(t time.Time) (Impact, error) {
	for i, w := range p.Windows {
		if w.Contains(t) {
			lv, err := w.effectiveLevel()
			if err != nil {
				return Impact{}, fmt.Errorf("%w: policy %q: window %d (%q): %v", ErrInvalid, p.Name, i+1, w.String(), err)
			}
			return Impact{Level: lv, Window: i}, nil
		}
	}
	lv, err := levelByName(p.Default)
	if err != nil {
		return Impact{}, fmt.Errorf("%w: policy %q: default level: %v", ErrInvalid, p.Name, err)
	}
	return Impact{Level: lv, Window: -1}, nil
}
