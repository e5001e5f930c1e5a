package impact

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

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
		PolicyPrefix + "future":  `{"v":2,"name":"future","default":"low","windows":[{"days":"*","start":"00:00","end":"24:00","level":"ludicrous"}]}`,
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

// TestPolicyRecordEncoding pins the JSON of version 1, documented in
// policy_schema.go, so a change to it is a deliberate format change.
func TestPolicyRecordEncoding(t *testing.T) {
	p, err := NewPolicy("nights", "Europe/Paris", LevelLow, []string{"fri 20:00-08:00 high min=0.5 max=8", "sat,sun 10:00-24:00 medium"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := encodePolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"v":1,"name":"nights","time_zone":"Europe/Paris","default":"low","windows":[` +
		`{"days":"fri","start":"20:00","end":"08:00","level":"high","min_workers":0.5,"max_workers":8},` +
		`{"days":"sat,sun","start":"10:00","end":"24:00","level":"medium"}]}`
	if string(b) != want {
		t.Fatalf("encoded\n%s\nwant\n%s", b, want)
	}
	back, err := decodePolicy(policyKey("nights"), b)
	if err != nil || !reflect.DeepEqual(back, p) {
		t.Fatalf("decode = %+v, %v; want %+v", back, err, p)
	}
}
