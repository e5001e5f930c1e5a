package job

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // every node resolves a schedule's TZ= the same way, with or without /usr/share/zoneinfo
)

// Cron is a parsed job schedule: a standard five-field cron expression
//
//	minute hour day-of-month month day-of-week
//
// optionally preceded by "TZ=<IANA zone> " (or "CRON_TZ="), or one of the
// macros @hourly, @daily (@midnight), @weekly, @monthly, @yearly
// (@annually). A field is a comma-separated list of "*", a value N, or a
// range N-M, each optionally followed by a step "/S" ("*/15", "1-5/2").
// Months may be named jan-dec, weekdays sun-sat (case-insensitive); 0 and
// 7 are both Sunday. Ranges do not wrap ("fri-mon" is refused: use
// "fri-sat,sun-mon").
//
// Days follow Vixie cron: when both day-of-month and day-of-week are
// restricted (neither starts with "*"), a day matches if either does
// ("0 0 1 * mon": the 1st and every Monday); otherwise both must (so
// "0 0 */2 * mon" is the odd-numbered days that are Mondays).
//
// Times are wall-clock times in the schedule's zone: UTC unless the
// expression names one, so that every node (the coordinator may move)
// computes the same instants. Across a daylight-saving change, a wall
// time that occurs twice fires once, at its first occurrence, and one
// that does not occur fires when the gap ends (02:30 on a spring-forward
// night fires at 03:00).
//
// A Cron is immutable and safe for concurrent use.
type Cron struct {
	expr string
	loc  *time.Location
	// Bit i set: value i matches. dow uses 0-6 (7 is folded into 0).
	minute, hour, dom, month, dow uint64
	// domStar, dowStar: the field started with "*" (Vixie's day rule).
	domStar, dowStar bool
}

var cronMacros = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

type cronField struct {
	name     string
	min, max int
	names    []string // names[i] is value min+i
}

var (
	fieldMinute = cronField{name: "minute", min: 0, max: 59}
	fieldHour   = cronField{name: "hour", min: 0, max: 23}
	fieldDom    = cronField{name: "day-of-month", min: 1, max: 31}
	fieldMonth  = cronField{name: "month", min: 1, max: 12,
		names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}}
	fieldDow = cronField{name: "day-of-week", min: 0, max: 7,
		names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}}
)

// ParseCron parses a schedule (see Cron). Errors wrap ErrInvalid and name
// the field and its value (`day-of-week field "mon-xyz": "xyz" is not a
// number or a name (sun-sat)`). A schedule that can never fire
// ("0 0 30 2 *") is refused too.
func ParseCron(expr string) (*Cron, error) {
	c := &Cron{expr: strings.TrimSpace(expr), loc: time.UTC}
	spec := c.expr
	for _, p := range []string{"TZ=", "CRON_TZ="} {
		if rest, ok := strings.CutPrefix(spec, p); ok {
			zone, rest, _ := strings.Cut(rest, " ")
			loc, err := time.LoadLocation(zone)
			if err != nil || zone == "" || strings.EqualFold(zone, "local") {
				return nil, fmt.Errorf("%w: schedule %q: time zone %q is not an IANA zone name: use e.g. TZ=Europe/Paris or TZ=UTC", ErrInvalid, expr, zone)
			}
			c.loc, spec = loc, strings.TrimSpace(rest)
			break
		}
	}
	if strings.HasPrefix(spec, "@") {
		m, ok := cronMacros[strings.ToLower(spec)]
		if !ok {
			return nil, fmt.Errorf("%w: schedule %q: unknown macro %s: use @hourly, @daily, @weekly, @monthly or @yearly, or five fields", ErrInvalid, expr, spec)
		}
		spec = m
	}
	fields := strings.Fields(spec)
	if len(fields) != 5 {
		return nil, fmt.Errorf("%w: schedule %q has %d fields: want 5 (minute hour day-of-month month day-of-week), e.g. \"0 2 1 * *\" for 02:00 on the 1st of each month", ErrInvalid, expr, len(fields))
	}
	var err error
	for i, f := range []struct {
		spec string
		def  cronField
		into *uint64
	}{
		{fields[0], fieldMinute, &c.minute},
		{fields[1], fieldHour, &c.hour},
		{fields[2], fieldDom, &c.dom},
		{fields[3], fieldMonth, &c.month},
		{fields[4], fieldDow, &c.dow},
	} {
		if *f.into, err = f.def.parse(f.spec); err != nil {
			return nil, err
		}
		if i == 4 && *f.into&(1<<7) != 0 {
			*f.into = *f.into&^(1<<7) | 1 // 7 is Sunday
		}
	}
	c.domStar, c.dowStar = strings.HasPrefix(fields[2], "*"), strings.HasPrefix(fields[4], "*")
	if err := c.possible(); err != nil {
		return nil, fmt.Errorf("%w: schedule %q never fires: %v", ErrInvalid, expr, err)
	}
	return c, nil
}

// parse returns the bit set a field's spec selects.
func (f cronField) parse(spec string) (uint64, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s field %q: %s", ErrInvalid, f.name, spec, fmt.Sprintf(format, a...))
	}
	if spec == "" {
		return 0, bad("empty")
	}
	var set uint64
	for item := range strings.SplitSeq(spec, ",") {
		rng, stepStr, hasStep := strings.Cut(item, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepStr)
			if err != nil || n < 1 {
				return 0, bad("step %q is not a whole number of at least 1", stepStr)
			}
			step = n
		}
		var lo, hi int
		switch {
		case rng == "*":
			lo, hi = f.min, f.max
			if f.name == fieldDow.name {
				hi = 6 // "*" and "*/2" count Sunday once
			}
		case rng == "":
			return 0, bad("empty list item: use values separated by single commas")
		default:
			a, b, isRange := strings.Cut(rng, "-")
			var err error
			if lo, err = f.value(a); err != nil {
				return 0, bad("%v", err)
			}
			hi = lo
			if isRange {
				if hi, err = f.value(b); err != nil {
					return 0, bad("%v", err)
				}
				if hi < lo {
					return 0, bad("range %s-%s runs backwards: ranges do not wrap, use two (e.g. fri-sat,sun-mon)", a, b)
				}
			} else if hasStep {
				return 0, bad("a step needs a range: write %s-%d/%d or */%d", a, f.max, step, step)
			}
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << v
		}
	}
	return set, nil
}

// value parses one value of the field: a number in range or a name.
func (f cronField) value(s string) (int, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < f.min || n > f.max {
			return 0, fmt.Errorf("%d is out of range: use %d-%d", n, f.min, f.max)
		}
		return n, nil
	}
	for i, name := range f.names {
		if strings.EqualFold(s, name) {
			return f.min + i, nil
		}
	}
	if f.names != nil {
		return 0, fmt.Errorf("%q is not a number (%d-%d) or a name (%s-%s)", s, f.min, f.max, f.names[0], f.names[len(f.names)-1])
	}
	return 0, fmt.Errorf("%q is not a number (%d-%d)", s, f.min, f.max)
}

// maxDays is the most days each month (1-12) can have.
var maxDays = [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// possible reports why the schedule never fires, or nil: only a
// day-of-month restricted alone can name days none of its months has.
func (c *Cron) possible() error {
	if c.domStar || !c.dowStar {
		return nil // every day, or any weekday too (Vixie's either rule)
	}
	first := bits.TrailingZeros64(c.dom)
	var months []string
	for m := 1; m <= 12; m++ {
		if c.month&(1<<m) != 0 {
			if first <= maxDays[m] {
				return nil
			}
			months = append(months, fieldMonth.names[m-1])
		}
	}
	return fmt.Errorf("%s never has a day %d: choose days that exist (e.g. 1-28) or other months", strings.Join(months, ", "), first)
}

// String returns the expression as given to ParseCron (trimmed).
func (c *Cron) String() string { return c.expr }

// Location is the schedule's time zone (UTC unless it names one).
func (c *Cron) Location() *time.Location { return c.loc }

// cronHorizon bounds Next's search: a leap day on a weekday-restricted
// schedule recurs within 28 years, and every schedule ParseCron accepts
// fires within that.
const cronHorizon = 30

// Next returns the first instant strictly after after at which the
// schedule fires (see Cron for daylight-saving changes), in the schedule's
// zone, at a whole minute. It returns the zero time if there is none
// within cronHorizon years (ParseCron refuses such schedules).
func (c *Cron) Next(after time.Time) time.Time {
	// Search wall-clock times, carried as UTC times (a calendar without
	// daylight saving), then map each match to an instant in the zone.
	w := after.In(c.loc)
	t := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), 0, 0, time.UTC).Add(time.Minute)
	limit := t.Year() + cronHorizon
	for t.Year() <= limit {
		switch {
		case c.month&(1<<int(t.Month())) == 0:
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		case !c.dayMatches(t):
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
		case c.hour&(1<<t.Hour()) == 0:
			t = t.Truncate(time.Hour).Add(time.Hour)
		case c.minute&(1<<t.Minute()) == 0:
			t = t.Add(time.Minute)
		default:
			if i := instant(t, c.loc); i.After(after) {
				return i
			}
			t = t.Add(time.Minute) // a repeated wall time seen again
		}
	}
	return time.Time{}
}

func (c *Cron) dayMatches(t time.Time) bool {
	dom := c.dom&(1<<t.Day()) != 0
	dow := c.dow&(1<<int(t.Weekday())) != 0
	if c.domStar || c.dowStar {
		return dom && dow
	}
	return dom || dow
}

// instant maps a wall-clock time (carried in UTC) to the first instant
// that shows it in loc, or, if loc skips it, to the end of the skip.
func instant(wall time.Time, loc *time.Location) time.Time {
	u := wall.Unix()
	var first time.Time
	// The offsets in force a day either side cover every transition
	// near u (zones change offset at most once in a day).
	for _, probe := range []int64{u - 86400, u, u + 86400} {
		_, off := time.Unix(probe, 0).In(loc).Zone()
		i := time.Unix(u-int64(off), 0).In(loc)
		if sameWall(i, wall) && (first.IsZero() || i.Before(first)) {
			first = i
		}
	}
	if !first.IsZero() {
		return first
	}
	// In a gap: with the offset from before it, u lands after the
	// change, in the zone period that starts where the gap ends.
	_, off := time.Unix(u-86400, 0).In(loc).Zone()
	start, _ := time.Unix(u-int64(off), 0).In(loc).ZoneBounds()
	return start
}

func sameWall(i, wall time.Time) bool {
	y, m, d := i.Date()
	wy, wm, wd := wall.Date()
	return y == wy && m == wm && d == wd && i.Hour() == wall.Hour() && i.Minute() == wall.Minute()
}
