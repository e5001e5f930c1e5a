package impact

import (
	"errors"
	"testing"
	"time"
)

// TestWindowWeekdaysRoundTrip checks every one of the 127 non-empty day
// sets prints in a form that parses back to the same set.
func TestWindowWeekdaysRoundTrip(t *testing.T) {
	for w := Weekdays(1); w <= EveryDay; w++ {
		got, err := ParseWeekdays(w.String())
		if err != nil || got != w {
			t.Errorf("ParseWeekdays(%q) = %07b, %v; want %07b", w.String(), got, err, w)
		}
	}
}

func TestWindowParseWeekdays(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // canonical form, or "" for an error
	}{
		{"*", "*"},
		{"mon-fri", "mon-fri"},
		{"Mon-FRI", "mon-fri"},
		{"fri-mon", "mon,fri-sun"},
		{"sun-sat", "*"},
		{"sat,sun", "sat,sun"},
		{"sun,sat", "sat,sun"},
		{"wed", "wed"},
		{"wed-wed", "wed"},
		{"mon,tue,wed,fri", "mon-wed,fri"},
		{"", ""},
		{"monday", ""},
		{"mon-", ""},
		{"-fri", ""},
		{"mon,,fri", ""},
		{"**", ""},
	} {
		got, err := ParseWeekdays(tc.in)
		switch {
		case tc.want == "" && !errors.Is(err, ErrInvalid):
			t.Errorf("ParseWeekdays(%q) = %v, %v; want ErrInvalid", tc.in, got, err)
		case tc.want != "" && (err != nil || got.String() != tc.want):
			t.Errorf("ParseWeekdays(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestWindowContains(t *testing.T) {
	// 2026-03-02 is a Monday; times are UTC wall clock.
	at := func(day int, hhmm string) time.Time {
		d, err := time.Parse("15:04", hhmm)
		if err != nil {
			t.Fatal(err)
		}
		return time.Date(2026, 3, 1+day, d.Hour(), d.Minute(), 0, 0, time.UTC)
	}
	const sun, mon, fri, sat = 0, 1, 5, 6
	for _, tc := range []struct {
		window string
		day    int
		hhmm   string
		want   bool
	}{
		{"mon-fri 08:00-18:00 low", mon, "07:59", false},
		{"mon-fri 08:00-18:00 low", mon, "08:00", true},
		{"mon-fri 08:00-18:00 low", mon, "17:59", true},
		{"mon-fri 08:00-18:00 low", mon, "18:00", false},
		{"mon-fri 08:00-18:00 low", sat, "12:00", false},
		// Wrapping midnight: the night belongs to the day it starts on.
		{"fri 22:00-06:00 high", fri, "21:59", false},
		{"fri 22:00-06:00 high", fri, "22:00", true},
		{"fri 22:00-06:00 high", sat, "05:59", true},
		{"fri 22:00-06:00 high", sat, "06:00", false},
		{"fri 22:00-06:00 high", fri, "05:00", false},
		// Across the end of the week (Saturday night into Sunday, Sunday
		// night into Monday).
		{"sat 23:00-01:00 high", sun, "00:30", true},
		{"sun 23:00-01:00 high", mon, "00:30", true},
		{"sun 23:00-01:00 high", sun, "00:30", false},
		// 24:00 ends at midnight; 00:00 as an end wraps to midnight too.
		{"mon 22:00-24:00 high", mon, "23:59", true},
		{"mon 22:00-24:00 high", mon + 1, "00:00", false},
		{"mon 22:00-00:00 high", mon, "23:59", true},
		{"mon 22:00-00:00 high", mon + 1, "00:00", false},
		{"* 00:00-24:00 low", sun, "00:00", true},
		{"* 00:00-24:00 low", sat, "23:59", true},
	} {
		w, err := ParseWindow(tc.window)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.Contains(at(tc.day, tc.hhmm)); got != tc.want {
			t.Errorf("%q contains %s %s = %v, want %v", tc.window, dayName(time.Weekday(tc.day%7)), tc.hhmm, got, tc.want)
		}
	}
}

// TestPolicyBuiltins checks the built-ins validate and their levels exist.
func TestPolicyBuiltins(t *testing.T) {
	for _, p := range BuiltinPolicies() {
		if err := p.Validate(); err != nil {
			t.Errorf("built-in %s: %v", p.Name, err)
		}
	}
	for _, lv := range Levels() {
		if err := checkBounds(lv.MinWorkers, lv.MaxWorkers); err != nil {
			t.Errorf("level %s: %v", lv.Name, err)
		}
	}
	if _, err := LookupLevel("turbo"); !errors.Is(err, ErrInvalid) {
		t.Errorf("LookupLevel(turbo): %v, want ErrInvalid", err)
	}
}
