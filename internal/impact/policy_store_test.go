package impact

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
)

func TestPolicyStore(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.New(t)
	s := NewPolicyStore(cli)

	nights, err := NewPolicy("nights", "Europe/Paris", LevelLow, []string{
		"mon-thu 20:00-06:00 high max=8",
		"fri 20:00-24:00 high",
		"sat,sun 00:00-24:00 medium min=0.5",
	})
	if err != nil {
		t.Fatal(err)
	}
	nights.Description = "catch up at night"

	// Round trip: what Get and List return is what was created.
	if err := s.Create(ctx, nights); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "nights")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, nights) {
		t.Fatalf("Get = %+v, want %+v", got, nights)
	}
	if err := s.Create(ctx, nights); !errors.Is(err, ErrPolicyExists) {
		t.Fatalf("second Create: %v, want ErrPolicyExists", err)
	}

	// Update replaces; List has the built-ins first, then customs by name.
	nights.Windows = nights.Windows[:1]
	nights.TimeZone = ""
	if err := s.Update(ctx, nights); err != nil {
		t.Fatal(err)
	}
	early, _ := NewPolicy("early", "", LevelPaused, []string{"* 05:00-07:00 high"})
	if err := s.Create(ctx, early); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := append(BuiltinPolicies(), early, nights)
	if !reflect.DeepEqual(list, want) {
		t.Fatalf("List =\n%+v\nwant\n%+v", list, want)
	}

	// Built-ins are read-only and always there.
	for _, p := range BuiltinPolicies() {
		if got, err := s.Get(ctx, p.Name); err != nil || !reflect.DeepEqual(got, p) {
			t.Errorf("Get(%s) = %+v, %v", p.Name, got, err)
		}
		if err := s.Create(ctx, p); !errors.Is(err, ErrPolicyBuiltin) {
			t.Errorf("Create(%s): %v, want ErrPolicyBuiltin", p.Name, err)
		}
		if err := s.Update(ctx, p); !errors.Is(err, ErrPolicyBuiltin) {
			t.Errorf("Update(%s): %v, want ErrPolicyBuiltin", p.Name, err)
		}
		if err := s.Delete(ctx, p.Name); !errors.Is(err, ErrPolicyBuiltin) {
			t.Errorf("Delete(%s): %v, want ErrPolicyBuiltin", p.Name, err)
		}
	}

	// Invalid policies are refused before anything is written.
	bad := Policy{Name: "bad", Default: LevelLow, Windows: []Window{{Days: EveryDay, Start: 0, End: 0, Level: LevelLow}}}
	if err := s.Create(ctx, bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Create(invalid): %v, want ErrInvalid", err)
	}
	if _, err := s.Get(ctx, "bad"); !errors.Is(err, ErrUnknownPolicy) {
		t.Fatalf("Get(bad) after a refused Create: %v, want ErrUnknownPolicy", err)
	}

	// Delete, then the policy is gone.
	if err := s.Delete(ctx, "early"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "early"); !errors.Is(err, ErrUnknownPolicy) {
		t.Fatalf("second Delete: %v, want ErrUnknownPolicy", err)
	}
	if err := s.Update(ctx, early); !errors.Is(err, ErrUnknownPolicy) {
		t.Fatalf("Update(deleted): %v, want ErrUnknownPolicy", err)
	}

	// Records a newer weft wrote, or garbage, are refused with the key;
	// List still returns the readable ones.
	for key, value := range map[string]string{
		PolicyPrefix + "future":  `{"v":3,"name":"future","default":"low","windows":[{"days":"*","start":"00:00","end":"24:00","level":"ludicrous"}]}`,
		PolicyPrefix + "garbage": `{"v":1,`,
		PolicyPrefix + "misfile": `{"v":1,"name":"other","default":"low"}`,
		PolicyPrefix + "badwin":  `{"v":1,"name":"badwin","default":"low","windows":[{"days":"mon","start":"9:00","end":"10:00","level":"low"}]}`,
	} {
		if _, err := cli.Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Get(ctx, "future"); !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), "upgrade weft") {
		t.Fatalf("Get(future): %v, want ErrNewerFormat saying to upgrade", err)
	}
	for _, name := range []string{"garbage", "misfile", "badwin"} {
		if _, err := s.Get(ctx, name); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), PolicyPrefix+name) {
			t.Errorf("Get(%s): %v, want ErrCorrupt naming the key", name, err)
		}
	}
	list, err = s.List(ctx)
	if !errors.Is(err, ErrNewerFormat) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("List error %v, want ErrNewerFormat and ErrCorrupt", err)
	}
	if want := append(BuiltinPolicies(), nights); !reflect.DeepEqual(list, want) {
		t.Fatalf("List with bad records =\n%+v\nwant\n%+v", list, want)
	}

	// When etcd cannot answer List returns nothing, so that a caller keeps
	// what it had rather than losing the custom policies.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if list, err := s.List(cancelled); err == nil || list != nil {
		t.Fatalf("List without etcd = %v, %v; want nil and an error", list, err)
	}
}

// TestPolicyRecordEncoding pins the JSON of version 2, documented in
// policy_schema.go, so a change to it is a deliberate format change.
func TestPolicyRecordEncoding(t *testing.T) {
	p, err := NewPolicy("nights", "Europe/Paris", LevelLow, []string{"fri 20:00-08:00 high min=0.5 max=8", "sat,sun 10:00-24:00 medium"})
	if err != nil {
		t.Fatal(err)
	}
	const windows = `"windows":[` +
		`{"days":"fri","start":"20:00","end":"08:00","level":"high","min_workers":0.5,"max_workers":8},` +
		`{"days":"sat,sun","start":"10:00","end":"24:00","level":"medium"}]`
	for _, tc := range []struct {
		target string // as ParseClientP99 reads it
		want   string // the record's client_p99 member, with its comma
	}{
		{"", ""},
		{"none", `,"client_p99":"none"`},
		{"7.5ms", `,"client_p99":"7.5ms"`},
	} {
		if p.ClientP99, err = ParseClientP99(tc.target); err != nil {
			t.Fatal(err)
		}
		b, err := encodePolicy(p)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"v":2,"name":"nights","time_zone":"Europe/Paris","default":"low",` + windows + tc.want + `}`
		if string(b) != want {
			t.Fatalf("target %q: encoded\n%s\nwant\n%s", tc.target, b, want)
		}
		back, err := decodePolicy(policyKey("nights"), b)
		if err != nil || !reflect.DeepEqual(back, p) {
			t.Fatalf("target %q: decode = %+v, %v; want %+v", tc.target, back, err, p)
		}
	}
}

// TestPolicyRecordMigration reads records of every version this weft
// knows, and refuses client latency targets a record cannot hold.
func TestPolicyRecordMigration(t *testing.T) {
	ms := func(n int) *time.Duration { d := time.Duration(n) * time.Millisecond; return &d }
	for _, tc := range []struct {
		record string
		want   *time.Duration // the decoded ClientP99
		err    error          // nil: decodes
	}{
		// Version 1, as weft wrote it before client latency targets: the
		// level's targets.
		{record: `{"v":1,"name":"p","default":"low","windows":[{"days":"*","start":"01:00","end":"05:00","level":"high"}]}`},
		{record: `{"v":2,"name":"p","default":"low"}`},
		{record: `{"v":2,"name":"p","default":"low","client_p99":"none"}`, want: ms(0)},
		{record: `{"v":2,"name":"p","default":"low","client_p99":"25ms"}`, want: ms(25)},
		{record: `{"v":1,"name":"p","default":"low","client_p99":"25ms"}`, err: ErrCorrupt},
		{record: `{"v":2,"name":"p","default":"low","client_p99":"default"}`, err: ErrCorrupt},
		{record: `{"v":2,"name":"p","default":"low","client_p99":"-3ms"}`, err: ErrCorrupt},
		{record: `{"v":2,"name":"p","default":"low","client_p99":"fast"}`, err: ErrCorrupt},
		{record: `{"v":2,"name":"p","default":"low","client_p99":"2h"}`, err: ErrCorrupt},
		{record: `{"v":3,"name":"p","default":"low","client_p99":"5ms"}`, err: ErrNewerFormat},
	} {
		p, err := decodePolicy(policyKey("p"), []byte(tc.record))
		switch {
		case tc.err != nil:
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), policyKey("p")) {
				t.Errorf("%s: %v, want %v naming the key", tc.record, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.record, err)
		case !reflect.DeepEqual(p.ClientP99, tc.want):
			t.Errorf("%s: client p99 %s, want %s", tc.record, FormatClientP99(p.ClientP99), FormatClientP99(tc.want))
		}
	}
}

func TestParseClientP99(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want: FormatClientP99 of the result, or the error's text
		ok       bool
	}{
		{"", "default", true},
		{"Default", "default", true},
		{"none", "none", true},
		{"0", "none", true},
		{"5ms", "5ms", true},
		{" 250us ", "250µs", true},
		{"1m", "1m0s", true},
		{"-3ms", `client p99 "-3ms": want a duration from 100µs to 1m0s`, false},
		{"50us", `client p99 "50us": want a duration from 100µs`, false},
		{"fast", `client p99 "fast": not a duration; want one such as 5ms`, false},
		{"5", `client p99 "5": not a duration`, false},
	} {
		d, err := ParseClientP99(tc.in)
		if !tc.ok {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseClientP99(%q) = %v, want ErrInvalid containing %q", tc.in, err, tc.want)
			}
			continue
		}
		if err != nil || FormatClientP99(d) != tc.want {
			t.Errorf("ParseClientP99(%q) = %s, %v; want %s", tc.in, FormatClientP99(d), err, tc.want)
		}
	}
	// A policy built in code is validated too.
	bad := -time.Millisecond
	if err := (Policy{Name: "p", Default: LevelLow, ClientP99: &bad}).Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `policy "p": client p99 -1ms`) {
		t.Errorf("Validate with -1ms: %v", err)
	}
}
