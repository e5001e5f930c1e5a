package impact

import (
	"fmt"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // zones for the tests, whatever the machine has installed
)

// TestPolicyDataDriven runs the scenarios under testdata/policy. Commands:
//
//	window                 input: window specs; prints each one's canonical
//	                       form (ParseWindow then String) or its error
//	policy name=N [tz=Z] [default=L]
//	                       input: window specs; builds and validates a
//	                       custom policy (NewPolicy), which becomes current;
//	                       prints ok or the error
//	builtin name=N         makes a built-in policy current
//	zone name=Z            sets the cluster's zone (default UTC)
//	at                     input: RFC 3339 times; prints the level the
//	                       current policy selects at each
func TestPolicyDataDriven(t *testing.T) {
	runTDFiles(t, "testdata/policy", func(t *testing.T) func(tdCase) string {
		s := &policyScenario{t: t, zone: time.UTC}
		return s.run
	})
}

type policyScenario struct {
	t      *testing.T
	zone   *time.Location
	policy *Policy
}

func (s *policyScenario) run(c tdCase) string {
	switch c.Cmd {
	case "window":
		var out []string
		for _, spec := range c.Input {
			w, err := ParseWindow(spec)
			if err != nil {
				out = append(out, "error: "+err.Error())
				continue
			}
			// The canonical form must parse back to itself.
			again, err := ParseWindow(w.String())
			if err != nil || again.String() != w.String() {
				s.t.Errorf("%s: %q does not round-trip: %q, %v", c.Pos, w.String(), again.String(), err)
			}
			out = append(out, w.String())
		}
		return strings.Join(out, "\n")
	case "policy":
		p, err := NewPolicy(c.Arg("name", ""), c.Arg("tz", ""), c.Arg("default", ""), c.Input)
		if err != nil {
			return "error: " + err.Error()
		}
		s.policy = &p
		return "ok"
	case "builtin":
		p, ok := BuiltinPolicy(c.Arg("name", ""))
		if !ok {
			s.t.Fatalf("%s: no built-in policy %q", c.Pos, c.Arg("name", ""))
		}
		if err := p.Validate(); err != nil {
			s.t.Fatalf("%s: built-in does not validate: %v", c.Pos, err)
		}
		s.policy = &p
		return "ok"
	case "zone":
		loc, err := time.LoadLocation(c.Arg("name", ""))
		if err != nil {
			s.t.Fatalf("%s: %v", c.Pos, err)
		}
		s.zone = loc
		return "ok"
	case "at":
		if s.policy == nil {
			s.t.Fatalf("%s: no current policy", c.Pos)
		}
		loc, err := s.policy.Location(s.zone)
		if err != nil {
			s.t.Fatalf("%s: %v", c.Pos, err)
		}
		var out []string
		for _, line := range c.Input {
			at, err := time.Parse(time.RFC3339, strings.TrimSpace(line))
			if err != nil {
				s.t.Fatalf("%s: %v", c.Pos, err)
			}
			local := at.In(loc)
			imp, err := s.policy.ImpactAt(local)
			if err != nil {
				s.t.Fatalf("%s: %v", c.Pos, err)
			}
			where := "default"
			if imp.Window >= 0 {
				where = fmt.Sprintf("window %d %q", imp.Window+1, s.policy.Windows[imp.Window].String())
			}
			out = append(out, fmt.Sprintf("%s: %s %s-%s (%s)", local.Format("Mon 2006-01-02 15:04 MST"),
				imp.Level.Name, formatWorkers(imp.Level.MinWorkers), formatWorkers(imp.Level.MaxWorkers), where))
		}
		return strings.Join(out, "\n")
	}
	s.t.Fatalf("%s: unknown command %q", c.Pos, c.Cmd)
	return ""
}
