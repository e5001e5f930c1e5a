package job

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCronNext: each case's schedule, after a time, yields a sequence of
// fire times (RFC 3339, compared as instants; "never" for none).
func TestCronNext(t *testing.T) {
	for _, c := range []struct {
		name, expr, after string
		want              []string
	}{
		{"every 15 minutes", "*/15 * * * *", "2025-03-04T10:07:30Z",
			[]string{"2025-03-04T10:15:00Z", "2025-03-04T10:30:00Z", "2025-03-04T10:45:00Z", "2025-03-04T11:00:00Z"}},
		{"strictly after a fire time", "0 * * * *", "2025-03-04T10:00:00Z",
			[]string{"2025-03-04T11:00:00Z"}},
		{"range with step", "1-5/2 0 * * *", "2025-03-04T00:00:00Z",
			[]string{"2025-03-04T00:01:00Z", "2025-03-04T00:03:00Z", "2025-03-04T00:05:00Z", "2025-03-05T00:01:00Z"}},
		{"list", "0 6,18 * * *", "2025-03-04T07:00:00Z",
			[]string{"2025-03-04T18:00:00Z", "2025-03-05T06:00:00Z"}},
		{"monthly at 02:00 on the 1st", "0 2 1 * *", "2025-01-31T23:00:00Z",
			[]string{"2025-02-01T02:00:00Z", "2025-03-01T02:00:00Z", "2025-04-01T02:00:00Z"}},
		{"31st skips short months", "0 0 31 * *", "2025-01-31T00:00:00Z",
			[]string{"2025-03-31T00:00:00Z", "2025-05-31T00:00:00Z", "2025-07-31T00:00:00Z", "2025-08-31T00:00:00Z", "2025-10-31T00:00:00Z"}},
		{"Feb 29 waits for a leap year", "0 0 29 2 *", "2025-01-01T00:00:00Z",
			[]string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{"Feb 29 across 2100, not a leap year", "0 0 29 2 *", "2097-01-01T00:00:00Z",
			[]string{"2104-02-29T00:00:00Z"}},
		{"weekday range by name", "30 8 * * mon-fri", "2025-03-07T09:00:00Z", // a Friday
			[]string{"2025-03-10T08:30:00Z", "2025-03-11T08:30:00Z"}},
		{"7 is Sunday", "0 0 * * 7", "2025-03-04T00:00:00Z", []string{"2025-03-09T00:00:00Z", "2025-03-16T00:00:00Z"}},
		{"0 is Sunday", "0 0 * * 0", "2025-03-04T00:00:00Z", []string{"2025-03-09T00:00:00Z"}},
		{"weekday range through 7", "0 0 * * 6-7", "2025-03-04T00:00:00Z",
			[]string{"2025-03-08T00:00:00Z", "2025-03-09T00:00:00Z", "2025-03-15T00:00:00Z"}},
		{"month names", "0 12 1 JAN,jul *", "2025-03-04T00:00:00Z", []string{"2025-07-01T12:00:00Z", "2026-01-01T12:00:00Z"}},
		{"Vixie: both days restricted, either matches", "0 0 1 * mon", "2025-03-01T00:00:00Z", // a Saturday
			[]string{"2025-03-03T00:00:00Z", "2025-03-10T00:00:00Z", "2025-03-17T00:00:00Z", "2025-03-24T00:00:00Z", "2025-03-31T00:00:00Z", "2025-04-01T00:00:00Z"}},
		{"Vixie: a day-of-month starting with * must match too", "0 0 */2 * mon", "2025-03-01T00:00:00Z",
			[]string{"2025-03-03T00:00:00Z", "2025-03-17T00:00:00Z", "2025-03-31T00:00:00Z"}},
		{"Feb 30 or a Monday fires on Mondays", "0 0 30 2 mon", "2025-02-01T00:00:00Z", []string{"2025-02-03T00:00:00Z"}},
		{"@hourly", "@hourly", "2025-03-04T10:07:00Z", []string{"2025-03-04T11:00:00Z"}},
		{"@daily", "@daily", "2025-03-04T10:07:00Z", []string{"2025-03-05T00:00:00Z"}},
		{"@weekly is Sunday midnight", "@weekly", "2025-03-04T10:07:00Z", []string{"2025-03-09T00:00:00Z"}},
		{"@monthly", "@monthly", "2025-03-04T10:07:00Z", []string{"2025-04-01T00:00:00Z"}},
		{"@yearly", "@yearly", "2025-03-04T10:07:00Z", []string{"2026-01-01T00:00:00Z"}},
		{"@annually", "@Annually", "2025-03-04T10:07:00Z", []string{"2026-01-01T00:00:00Z"}},
		{"time zone", "TZ=Asia/Tokyo 0 9 * * *", "2025-03-04T00:00:00Z", []string{"2025-03-05T00:00:00Z"}},
		{"CRON_TZ and a macro", "CRON_TZ=America/New_York @daily", "2025-03-04T00:00:00Z", []string{"2025-03-04T05:00:00Z"}},
		// Europe/Paris: 2025-03-30 02:00 CET -> 03:00 CEST; 2025-10-26
		// 03:00 CEST -> 02:00 CET.
		{"spring forward: a skipped time fires when the gap ends", "TZ=Europe/Paris 30 2 * * *", "2025-03-29T02:00:00Z",
			[]string{"2025-03-30T01:00:00Z", "2025-03-31T00:30:00Z"}},
		{"spring forward: times in the gap fire once", "TZ=Europe/Paris */20 2-3 30 3 *", "2025-03-30T00:00:00Z",
			[]string{"2025-03-30T01:00:00Z", "2025-03-30T01:20:00Z", "2025-03-30T01:40:00Z"}},
		{"fall back: a repeated time fires once, the first time", "TZ=Europe/Paris 30 2 * * *", "2025-10-25T12:00:00Z",
			[]string{"2025-10-26T00:30:00Z", "2025-10-27T01:30:00Z"}},
		{"fall back: the repeated hour is not run twice", "TZ=Europe/Paris */30 * * * *", "2025-10-26T00:15:00Z",
			[]string{"2025-10-26T00:30:00Z", "2025-10-26T02:00:00Z", "2025-10-26T02:30:00Z"}},
		{"fall back: from inside the second pass", "TZ=Europe/Paris 45 2 * * *", "2025-10-26T01:10:00Z", // 02:10 CET
			[]string{"2025-10-27T01:45:00Z"}},
		{"New York spring forward", "TZ=America/New_York 0 2 * * *", "2025-03-08T12:00:00Z",
			[]string{"2025-03-09T07:00:00Z", "2025-03-10T06:00:00Z"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cr, err := ParseCron(c.expr)
			if err != nil {
				t.Fatal(err)
			}
			at := mustTime(t, c.after)
			for i, w := range c.want {
				next := cr.Next(at)
				if !next.Equal(mustTime(t, w)) {
					t.Fatalf("fire %d after %s: got %s, want %s", i+1, at.Format(time.RFC3339), next.UTC().Format(time.RFC3339), w)
				}
				if next.Location() != cr.Location() {
					t.Fatalf("fire time in %s, want the schedule's zone %s", next.Location(), cr.Location())
				}
				at = next
			}
		})
	}
}

// Every error wraps ErrInvalid and names the field and the bad value.
func TestCronParseErrors(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"0 0 * * mon-xyz", `day-of-week field "mon-xyz": "xyz" is not a number (0-7) or a name (sun-sat)`},
		{"60 * * * *", `minute field "60": 60 is out of range: use 0-59`},
		{"0 24 * * *", `hour field "24": 24 is out of range: use 0-23`},
		{"0 0 0 * *", `day-of-month field "0": 0 is out of range: use 1-31`},
		{"0 0 1 13 *", `month field "13": 13 is out of range: use 1-12`},
		{"0 0 1 foo *", `month field "foo": "foo" is not a number (1-12) or a name (jan-dec)`},
		{"*/0 * * * *", `minute field "*/0": step "0" is not a whole number of at least 1`},
		{"5/15 * * * *", `minute field "5/15": a step needs a range: write 5-59/15 or */15`},
		{"0 0 * * fri-mon", `day-of-week field "fri-mon": range fri-mon runs backwards`},
		{"1,,2 * * * *", `minute field "1,,2": empty list item`},
		{"* * * *", `has 4 fields: want 5`},
		{"* * * * * *", `has 6 fields: want 5`},
		{"", `has 0 fields`},
		{"@reboot", `unknown macro @reboot`},
		{"TZ=Mars/Olympus 0 0 * * *", `time zone "Mars/Olympus" is not an IANA zone name`},
		{"TZ=Local 0 0 * * *", `time zone "Local" is not an IANA zone name`},
		{"0 0 30 2 *", `never fires: feb never has a day 30`},
		{"0 0 31 apr,jun *", `never fires: apr, jun never has a day 31`},
		{"0 0 30,31 2 */2", `never fires: feb never has a day 30`},
	} {
		t.Run(c.expr, func(t *testing.T) {
			_, err := ParseCron(c.expr)
			if err == nil {
				t.Fatalf("ParseCron(%q) accepted it", c.expr)
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseCron(%q) = %v, want ErrInvalid with %q", c.expr, err, c.want)
			}
		})
	}
}

// Accepted schedules keep their text; the zone defaults to UTC.
func TestCronString(t *testing.T) {
	c, err := ParseCron("  0 2 1 * *  ")
	if err != nil {
		t.Fatal(err)
	}
	if c.String() != "0 2 1 * *" || c.Location() != time.UTC {
		t.Fatalf("String %q, zone %s", c.String(), c.Location())
	}
}
