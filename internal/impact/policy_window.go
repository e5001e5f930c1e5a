package impact

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Weekdays is a set of days of the week: bit d is set when time.Weekday(d)
// is in the set. The zero value is the empty set.
type Weekdays uint8

// EveryDay is the set of all seven days, written "*".
const EveryDay Weekdays = 1<<7 - 1

// dayName returns the three-letter name of d, as ParseWeekdays reads it.
func dayName(d time.Weekday) string {
	return [7]string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}[d%7]
}

// Has reports whether d is in the set.
func (w Weekdays) Has(d time.Weekday) bool { return w&(1<<uint(d)) != 0 }

// ParseWeekdays parses a day set: "*" for every day, or a comma-separated
// list of day names (mon, tue, wed, thu, fri, sat, sun; any case) and
// ranges of them ("mon-fri"; a range may wrap the week: "fri-mon"). An
// empty or unknown item is an error wrapping ErrInvalid naming it.
func ParseWeekdays(s string) (Weekdays, error) {
	w, err := parseWeekdays(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return w, nil
}

// parseWeekdays is ParseWeekdays with errors that do not wrap ErrInvalid,
// for callers that wrap them with more context.
func parseWeekdays(s string) (Weekdays, error) {
	if s == "*" {
		return EveryDay, nil
	}
	var set Weekdays
	for _, item := range strings.Split(s, ",") {
		from, to, isRange := strings.Cut(item, "-")
		a, err := parseDay(from)
		if err != nil {
			return 0, err
		}
		b := a
		if isRange {
			if b, err = parseDay(to); err != nil {
				return 0, err
			}
		}
		for d := a; ; d = (d + 1) % 7 {
			set |= 1 << uint(d)
			if d == b {
				break
			}
		}
	}
	return set, nil
}

func parseDay(s string) (time.Weekday, error) {
	for d := time.Sunday; d <= time.Saturday; d++ {
		if strings.EqualFold(s, dayName(d)) {
			return d, nil
		}
	}
	return 0, fmt.Errorf("unknown day %q: want mon, tue, wed, thu, fri, sat or sun, a range like mon-fri, a list like sat,sun, or *", s)
}

// String returns the set in the syntax ParseWeekdays reads, days in
// Monday-first order, with runs of three or more days as ranges: "*",
// "mon-fri", "sat,sun", "mon,wed-fri". The empty set is "-".
func (w Weekdays) String() string {
	switch w & EveryDay {
	case EveryDay:
		return "*"
	case 0:
		return "-"
	}
	var items []string
	order := [7]time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday, time.Saturday, time.Sunday}
	for i := 0; i < 7; {
		if !w.Has(order[i]) {
			i++
			continue
		}
		j := i
		for j+1 < 7 && w.Has(order[j+1]) {
			j++
		}
		switch {
		case j-i >= 2:
			items = append(items, dayName(order[i])+"-"+dayName(order[j]))
		default:
			for k := i; k <= j; k++ {
				items = append(items, dayName(order[k]))
			}
		}
		i = j + 1
	}
	return strings.Join(items, ",")
}

// Window is one weekly time window of an impact policy: on each of Days,
// from Start to End (wall-clock time in the policy's time zone), jobs run at
// Level, optionally with the level's worker bounds replaced.
//
// A window whose End is not after its Start wraps midnight: "fri
// 18:00-08:00" runs from Friday 18:00 to Saturday 08:00, that is, Days name
// the day a window starts on. End may be 24:00 ("00:00-24:00" is a whole
// day); Start equal to End is refused as empty. Windows follow the wall
// clock, so on a daylight-saving change a night window is an hour shorter or
// longer.
type Window struct {
	Days Weekdays
	// Start and End are offsets from midnight in whole minutes; Start is in
	// [0, 24h), End in [0, 24h].
	Start, End time.Duration
	// Level names a built-in level (LevelPaused … LevelHigh).
	Level string
	// MinWorkers and MaxWorkers, when not nil, replace the level's bounds
	// while this window applies.
	MinWorkers, MaxWorkers *float64
}

// ParseWindow parses the compact syntax of a window, as given to
// `--window`:
//
//	DAYS HH:MM-HH:MM LEVEL [min=N] [max=N]
//
// for example "mon-fri 08:00-18:00 low", "* 18:00-08:00 high",
// "sat,sun 00:00-24:00 medium max=4". DAYS is as for ParseWeekdays; N may
// be fractional (0.5 is one worker half of each second). It checks the
// syntax and that the level exists, not the ranges (see Policy.Validate).
// Errors wrap ErrInvalid and quote spec.
func ParseWindow(spec string) (Window, error) {
	w, err := parseWindow(spec)
	if err != nil {
		return Window{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return w, nil
}

// parseWindow is ParseWindow with errors that do not wrap ErrInvalid.
func parseWindow(spec string) (Window, error) {
	var w Window
	fields := strings.Fields(spec)
	if len(fields) < 3 {
		return w, fmt.Errorf("window %q: want \"DAYS HH:MM-HH:MM LEVEL [min=N] [max=N]\", e.g. \"mon-fri 08:00-18:00 low\"", spec)
	}
	wrap := func(err error) error { return fmt.Errorf("window %q: %v", spec, err) }
	var err error
	if w.Days, err = parseWeekdays(fields[0]); err != nil {
		return w, wrap(err)
	}
	from, to, ok := strings.Cut(fields[1], "-")
	if !ok {
		return w, wrap(fmt.Errorf("time range %q: want HH:MM-HH:MM", fields[1]))
	}
	if w.Start, err = parseTimeOfDay(from); err != nil {
		return w, wrap(err)
	}
	if w.End, err = parseTimeOfDay(to); err != nil {
		return w, wrap(err)
	}
	w.Level = strings.ToLower(fields[2])
	if _, err := levelByName(w.Level); err != nil {
		return w, wrap(err)
	}
	for _, opt := range fields[3:] {
		k, v, _ := strings.Cut(opt, "=")
		n, err := parseWorkers(v)
		if err != nil {
			return w, wrap(fmt.Errorf("option %q: %v", opt, err))
		}
		switch k {
		case "min":
			w.MinWorkers = &n
		case "max":
			w.MaxWorkers = &n
		default:
			return w, wrap(fmt.Errorf("unknown option %q: want min=N or max=N", opt))
		}
	}
	return w, nil
}

// parseTimeOfDay parses "HH:MM" (00:00 to 24:00) into an offset from
// midnight.
func parseTimeOfDay(s string) (time.Duration, error) {
	hh, mm, ok := strings.Cut(s, ":")
	h, errH := strconv.Atoi(hh)
	m, errM := strconv.Atoi(mm)
	if !ok || len(hh) != 2 || len(mm) != 2 || errH != nil || errM != nil ||
		h < 0 || m < 0 || m > 59 || h > 24 || (h == 24 && m != 0) {
		return 0, fmt.Errorf("time %q: want HH:MM from 00:00 to 24:00", s)
	}
	return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute, nil
}

func parseWorkers(s string) (float64, error) {
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
		return 0, fmt.Errorf("want a number of workers like 2 or 0.5")
	}
	return n, nil
}

// formatTimeOfDay returns d (an offset from midnight) as "HH:MM".
func formatTimeOfDay(d time.Duration) string {
	m := int(d / time.Minute)
	return fmt.Sprintf("%02d:%02d", m/60, m%60)
}

func formatWorkers(n float64) string { return strconv.FormatFloat(n, 'f', -1, 64) }

// String returns w in the syntax ParseWindow reads.
func (w Window) String() string {
	s := w.Days.String() + " " + formatTimeOfDay(w.Start) + "-" + formatTimeOfDay(w.End) + " " + w.Level
	if w.MinWorkers != nil {
		s += " min=" + formatWorkers(*w.MinWorkers)
	}
	if w.MaxWorkers != nil {
		s += " max=" + formatWorkers(*w.MaxWorkers)
	}
	return s
}

// effectiveLevel returns the window's level with its worker bounds
// replaced by the window's own, if set. It fails for an unknown level, or
// bounds out of [0, MaxWorkersPerNode] or min > max; its errors do not wrap
// ErrInvalid.
func (w Window) effectiveLevel() (Level, error) {
	lv, err := levelByName(w.Level)
	if err != nil {
		return Level{}, err
	}
	if w.MinWorkers != nil {
		lv.MinWorkers = *w.MinWorkers
	}
	if w.MaxWorkers != nil {
		lv.MaxWorkers = *w.MaxWorkers
	}
	return lv, checkBounds(lv.MinWorkers, lv.MaxWorkers)
}

func checkBounds(lo, hi float64) error {
	switch {
	case math.IsNaN(lo) || lo < 0 || lo > MaxWorkersPerNode:
		return fmt.Errorf("min workers %s: want 0 to %d", formatWorkers(lo), MaxWorkersPerNode)
	case math.IsNaN(hi) || hi < 0 || hi > MaxWorkersPerNode:
		return fmt.Errorf("max workers %s: want 0 to %d", formatWorkers(hi), MaxWorkersPerNode)
	case lo > hi:
		return fmt.Errorf("min workers %s > max workers %s", formatWorkers(lo), formatWorkers(hi))
	}
	return nil
}

// validate checks everything about w but overlaps with other windows. Its
// errors do not wrap ErrInvalid.
func (w Window) validate() error {
	switch {
	case w.Days&EveryDay == 0:
		return errors.New("no days")
	case w.Start < 0 || w.Start >= 24*time.Hour || w.Start%time.Minute != 0:
		return fmt.Errorf("start %s: want whole minutes from 00:00 to 23:59", formatTimeOfDay(w.Start))
	case w.End < 0 || w.End > 24*time.Hour || w.End%time.Minute != 0:
		return fmt.Errorf("end %s: want whole minutes from 00:00 to 24:00", formatTimeOfDay(w.End))
	case w.Start == w.End:
		return fmt.Errorf("empty window (start = end %s); 00:00-24:00 is a whole day", formatTimeOfDay(w.Start))
	}
	_, err := w.effectiveLevel()
	return err
}

// Minutes of a week, Sunday 00:00 being minute 0 (as time.Weekday counts).
const (
	minutesPerDay  = 24 * 60
	minutesPerWeek = 7 * minutesPerDay
)

// span is a half-open interval [from, to) of minutes of the week, within
// [0, minutesPerWeek].
type span struct{ from, to int }

// spans returns the minutes of the week w covers, split at the week's end
// so that every span is linear. Matching and overlap checks both use it, so
// they cannot disagree.
func (w Window) spans() []span {
	start, end := int(w.Start/time.Minute), int(w.End/time.Minute)
	length := end - start
	if length <= 0 {
		length += minutesPerDay // wraps midnight
	}
	var out []span
	for d := 0; d < 7; d++ {
		if !w.Days.Has(time.Weekday(d)) {
			continue
		}
		from := d*minutesPerDay + start
		to := from + length
		if to <= minutesPerWeek {
			out = append(out, span{from, to})
			continue
		}
		out = append(out, span{from, minutesPerWeek}, span{0, to - minutesPerWeek})
	}
	return out
}

// minuteOfWeek returns t's minute of the week in t's own location.
func minuteOfWeek(t time.Time) int {
	return int(t.Weekday())*minutesPerDay + t.Hour()*60 + t.Minute()
}

// Contains reports whether w covers the wall-clock time of t, read in t's
// location (convert t to the policy's zone first).
func (w Window) Contains(t time.Time) bool {
	m := minuteOfWeek(t)
	for _, s := range w.spans() {
		if s.from <= m && m < s.to {
			return true
		}
	}
	return false
}

// overlap returns the first minute of the week both a and b cover, or -1.
func overlap(a, b Window) int {
	first := -1
	for _, x := range a.spans() {
		for _, y := range b.spans() {
			from, to := max(x.from, y.from), min(x.to, y.to)
			if from < to && (first < 0 || from < first) {
				first = from
			}
		}
	}
	return first
}

// formatMinuteOfWeek returns minute m of the week as "mon 17:00".
func formatMinuteOfWeek(m int) string {
	return dayName(time.Weekday(m/minutesPerDay)) + " " + formatTimeOfDay(time.Duration(m%minutesPerDay)*time.Minute)
}
