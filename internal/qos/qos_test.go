package qos

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		specs []string
		want  map[string]PoolLimits // nil: an error
		err   string                // in the error
	}{
		{specs: []string{"pool=fast,maintenance=300IOPS,other=unlimited"},
			want: map[string]PoolLimits{"fast": {Maintenance: {IOPS: 300}, Other: {}}}},
		{specs: []string{"pool=*,maintenance=100MB/s"},
			want: map[string]PoolLimits{"*": {Maintenance: {BytesPerSec: 100e6}}}},
		{specs: []string{"pool=fast,maintenance=300IOPS", "pool=*,maint=2MiB/s+50iops,misc=inf"},
			want: map[string]PoolLimits{"fast": {Maintenance: {IOPS: 300}}, "*": {Maintenance: {IOPS: 50, BytesPerSec: 2 << 20}, Misc: {}}}},
		{specs: []string{"pool=a, other = 1.5GB/s"}, want: map[string]PoolLimits{"a": {Other: {BytesPerSec: 1.5e9}}}},
		{specs: nil, err: "no limits given"},
		{specs: []string{"maintenance=300IOPS"}, err: `"maintenance=300IOPS": a specification starts with pool=NAME`},
		{specs: []string{"pool=fast"}, err: "names no class"},
		{specs: []string{"pool=fast,gold=3IOPS"}, err: `unknown class "gold"`},
		{specs: []string{"pool=fast,other"}, err: `"other" in "pool=fast,other": want CLASS=LIMIT`},
		{specs: []string{"pool=fast,other=300"}, err: `limit "300": want unlimited`},
		{specs: []string{"pool=fast,other=-3IOPS"}, err: "not a positive number"},
		{specs: []string{"pool=fast,other=0IOPS"}, err: "not a positive number"},
		{specs: []string{"pool=fast,other=3IOPS+4IOPS"}, err: "IOPS twice"},
		{specs: []string{"pool=fast,other=3IOPS,other=4MB/s"}, err: "given twice"},
	} {
		got, err := Parse(tc.specs)
		if tc.want == nil {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %v, %v; want an ErrInvalid containing %q", tc.specs, got, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.specs, err)
			continue
		}
		if Config(Config{Pools: got}).Specs() == nil || strings.Join(Config{Pools: got}.Specs(), " ") != strings.Join(Config{Pools: tc.want}.Specs(), " ") {
			t.Errorf("Parse(%q) = %v, want %v", tc.specs, Config{Pools: got}.Specs(), Config{Pools: tc.want}.Specs())
		}
	}
}

func TestConfigResolveMergeRoundTrip(t *testing.T) {
	set, err := Parse([]string{"pool=*,maintenance=100IOPS", "pool=fast,maintenance=unlimited,other=10MB/s"})
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Enabled: true}.Merge(set, false)
	for _, tc := range []struct {
		pool  string
		class Class
		want  Limit
	}{
		{"slow", Maintenance, Limit{IOPS: 100}},
		{"fast", Maintenance, Limit{}},
		{"fast", Other, Limit{BytesPerSec: 10e6}},
		{"slow", Other, Limit{}},
	} {
		if got := c.Resolve(tc.pool, tc.class); got != tc.want {
			t.Errorf("Resolve(%s, %s) = %v, want %v", tc.pool, tc.class, got, tc.want)
		}
	}
	if want := "pool=fast,other=10MB/s,maintenance=unlimited pool=*,maintenance=100IOPS"; strings.Join(c.Specs(), " ") != want {
		t.Errorf("Specs = %q, want %q", c.Specs(), want)
	}
	more, _ := Parse([]string{"pool=fast,other=unlimited"})
	if m := c.Merge(more, false); m.Resolve("fast", Other) != (Limit{}) || m.Resolve("slow", Maintenance) != (Limit{IOPS: 100}) {
		t.Errorf("Merge kept %v", m.Specs())
	}
	if m := c.Merge(more, true); len(m.Pools) != 1 {
		t.Errorf("Merge with replace = %v", m.Specs())
	}
	got, err := Decode(Encode(c))
	if err != nil || strings.Join(got.Specs(), " ") != strings.Join(c.Specs(), " ") || !got.Enabled {
		t.Errorf("Decode(Encode) = %v, %v", got, err)
	}
	if _, err := Decode([]byte(`{"v":99}`)); !errors.Is(err, ErrNewerFormat) {
		t.Errorf("Decode of a newer record: %v", err)
	}
	if _, err := Decode([]byte(`{"v":1,"pools":{"a":{"gold":{"iops":3}}}}`)); !errors.Is(err, ErrInvalid) {
		t.Errorf("Decode of an unknown class: %v", err)
	}
}

func TestParseClass(t *testing.T) {
	for in, want := range map[string]Class{"other": Other, "MAINTENANCE": Maintenance, "maint": Maintenance, "misc": Misc, "": Misc, "gold": Misc} {
		if got := ParseClass(in); got != want {
			t.Errorf("ParseClass(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestBucketHoldsRate drives a bucket with a fake clock: 8 streams of
// I/O, each trying again when the bucket says (at most maxSleep later),
// start at once and go as fast as the bucket lets them; the count in every
// two seconds, after the first, is the rate within 5 %.
func TestBucketHoldsRate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit Limit
		size  int64
		want  func(ops, bytes float64) float64 // the measure held
		rate  float64
	}{
		{"iops", Limit{IOPS: 40}, 1 << 20, func(o, b float64) float64 { return o }, 40},
		{"iops high", Limit{IOPS: 3000}, 4096, func(o, b float64) float64 { return o }, 3000},
		{"bytes", Limit{BytesPerSec: 10e6}, 1 << 20, func(o, b float64) float64 { return b }, 10e6},
		{"bytes small I/O", Limit{BytesPerSec: 1e6}, 4096, func(o, b float64) float64 { return b }, 1e6},
		{"both, iops binds", Limit{IOPS: 10, BytesPerSec: 100e6}, 1 << 20, func(o, b float64) float64 { return o }, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Unix(1000, 0)
			b := newBucket(t0, tc.limit)
			next := make([]time.Time, 8)
			for i := range next {
				next[i] = t0
			}
			perSec := map[int64][2]float64{}
			for {
				i := 0
				for j := range next {
					if next[j].Before(next[i]) {
						i = j
					}
				}
				now := next[i]
				if now.Sub(t0) >= 10*time.Second {
					break
				}
				ok, wait := b.try(now, tc.size)
				if !ok {
					next[i] = now.Add(min(wait, maxSleep))
					continue
				}
				s := perSec[now.Unix()]
				perSec[now.Unix()] = [2]float64{s[0] + 1, s[1] + float64(tc.size)}
			}
			// Windows of 2 s: 1 MiB I/Os at 10 MB/s are 9 in one second
			// and 10 in the next.
			for sec := t0.Unix() + 1; sec < t0.Unix()+9; sec += 2 {
				got := (tc.want(perSec[sec][0], perSec[sec][1]) + tc.want(perSec[sec+1][0], perSec[sec+1][1])) / 2
				if math.Abs(got-tc.rate) > 0.05*tc.rate {
					t.Errorf("seconds %d-%d: %.0f per second, want %.0f ± 5 %%", sec-t0.Unix(), sec-t0.Unix()+1, got, tc.rate)
				}
			}
		})
	}
}

// TestGateAdmit runs real I/Os through a gate at 50 IOPS for a short
// while: the first 100 ms burst, then the rate; and a canceled wait
// returns its context's error.
func TestGateAdmit(t *testing.T) {
	st := NewStats()
	g := NewGate(st)
	g.SetLimits(map[Key]Limit{{"p", Maintenance}: {IOPS: 50}})
	ctx := context.Background()
	tag := Tag{Class: Maintenance, Pool: "p"}
	for range 10 {
		done, err := g.Admit(ctx, tag, Read, 4096)
		if err != nil {
			t.Fatal(err)
		}
		done(false)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := g.Admit(cctx, tag, Read, 4096); !errors.Is(err, context.Canceled) {
		t.Errorf("Admit with a canceled context: %v", err)
	}
	if _, err := g.Admit(cctx, Tag{Class: Other, Pool: "p"}, Read, 4096); err != nil {
		t.Errorf("Admit of an unlimited class: %v", err)
	}
	var ops, queued int64
	for _, c := range st.Totals() {
		ops += c.Ops
		queued += c.QueueNanos
	}
	if ops != 10 || queued == 0 {
		t.Errorf("stats: %d ops, %d ns queued; want 10 ops and some queueing", ops, queued)
	}
	if len(g.Waiting()) != 0 {
		t.Errorf("waiting after all I/Os: %v", g.Waiting())
	}
	g.SetLimits(nil)
	if len(g.Limits()) != 0 {
		t.Errorf("limits after SetLimits(nil): %v", g.Limits())
	}
}

func TestShare(t *testing.T) {
	for _, tc := range []struct {
		limit, own float64
		all        []float64
		want       float64
	}{
		{90, 0, nil, 90},
		{90, 5, []float64{5}, 90},
		{90, 0, []float64{0, 0, 0}, 30},
		{90, 10, []float64{10, 10, 10}, 30},
		{100, 30, []float64{30, 10, 0, 0}, 2.5 + 90*0.75},
		{100, 0, []float64{30, 10, 0, 0}, 2.5},
	} {
		if got := Share(tc.limit, tc.own, tc.all); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Share(%v, %v, %v) = %v, want %v", tc.limit, tc.own, tc.all, got, tc.want)
		}
	}
	cfg := Config{Enabled: true, Pools: map[string]PoolLimits{AllPools: {Maintenance: {IOPS: 40}}, "b": {Maintenance: {}, Other: {BytesPerSec: 9e6}}}}
	demands := []NodeDemand{
		{Node: "n1", Pools: []string{"a", "b"}, Demand: []KeyDemand{{Pool: "a", Class: Maintenance, Ops: 30}, {Pool: "b", Class: Other, Bytes: 1e6}}},
		{Node: "n2", Pools: []string{"a", "b"}, Demand: []KeyDemand{{Pool: "a", Class: Maintenance, Ops: 10}}},
		{Node: "n3", Pools: []string{"b"}},
	}
	var sumA float64
	for _, n := range []string{"n1", "n2"} {
		sh := Shares(cfg, n, []string{"a", "b"}, demands)
		sumA += sh[Key{"a", Maintenance}].IOPS
		if _, ok := sh[Key{"b", Maintenance}]; ok {
			t.Errorf("%s: pool b's maintenance is unlimited, got a share %v", n, sh)
		}
	}
	if math.Abs(sumA-40) > 1e-9 {
		t.Errorf("shares of pool a's 40 IOPS sum to %v", sumA)
	}
	if sh := Shares(cfg, "n1", []string{"a", "b"}, demands); math.Abs(sh[Key{"a", Maintenance}].IOPS-(2+36*0.75)) > 1e-9 || math.Abs(sh[Key{"b", Other}].BytesPerSec-(0.3e6+8.1e6)) > 1e-3 {
		t.Errorf("n1's shares: %v", sh)
	}
	if sh := Shares(Config{Pools: cfg.Pools}, "n1", []string{"a"}, demands); len(sh) != 0 {
		t.Errorf("shares of a disabled configuration: %v", sh)
	}
	// A node not yet in the demand records counts as one more with none.
	if sh := Shares(cfg, "n4", []string{"a"}, demands); math.Abs(sh[Key{"a", Maintenance}].IOPS-40*FloorFraction/3) > 1e-9 {
		t.Errorf("n4's share: %v", sh)
	}
}

func TestStatsRows(t *testing.T) {
	st := NewStats()
	t0 := time.Unix(2000, 0)
	for i := range 10 {
		at := t0.Add(time.Duration(i) * 500 * time.Millisecond) // 2 per second
		st.Record(at, StatKey{"p", Maintenance, Read}, 1e6, 250*time.Millisecond, 100*time.Millisecond)
	}
	st.Record(t0.Add(5*time.Second), StatKey{"p", Other, Write}, 4096, 0, time.Millisecond) // the current second: not yet
	ss := st.Seconds(t0.Add(5*time.Second), 60)
	if len(ss) != 5 || ss[0].At != 2000 || ss[0].Ops != 2 {
		t.Fatalf("Seconds = %+v", ss)
	}
	rows := Rows(ss, 2000, 2005, 2)
	if len(rows) != 2 {
		t.Fatalf("Rows = %+v", rows)
	}
	r := rows[0]
	if r.IOPS != 2 || r.MBps != 2 || math.Abs(r.Queued-0.5) > 1e-9 || math.Abs(r.Pending-0.2) > 1e-9 {
		t.Errorf("row = %+v", r)
	}
	d := MeasureDemand(st, map[Key]int64{{"p", Maintenance}: 3}, t0.Add(5*time.Second))
	if len(d) != 1 || d[0].Ops != 5 || d[0].Bytes != 2e6 {
		t.Errorf("MeasureDemand = %+v", d)
	}
}

// TestBound: while the nodes' demand records disagree (each sees only
// its own demand and aims at nearly the whole limit), the shares they
// hold never sum past the limit, round after round, and they reach the
// targets of a consistent view; a share falls to a lower target at once;
// a record without Held counts at its Share; a share waiting for slack
// is small but never 0 (unlimited).
func TestBound(t *testing.T) {
	const limit = 40.0
	cfg := Config{Enabled: true, Pools: map[string]PoolLimits{AllPools: {Maintenance: {IOPS: limit}}}}
	k := Key{"a", Maintenance}
	nodes := []string{"n1", "n2", "n3"}
	held := map[string]map[Key]Limit{}
	for _, n := range nodes {
		held[n] = map[Key]Limit{k: {IOPS: limit / 3}} // idle: even shares
	}
	record := func(n string, ops float64) NodeDemand {
		return NodeDemand{Node: n, Pools: []string{"a"}, Demand: []KeyDemand{{Pool: "a", Class: Maintenance, Ops: ops}}, Held: HeldList(held[n])}
	}
	// Round 1: the load starts; each node sees its own demand, the
	// others' records still idle. Round 2 on: everyone's demand seen.
	for round := 1; round <= 4; round++ {
		next := map[string]map[Key]Limit{}
		for _, n := range nodes {
			var recs []NodeDemand
			for _, m := range nodes {
				ops := 0.0
				if m == n || round > 1 {
					ops = 100
				}
				recs = append(recs, record(m, ops))
			}
			targets := Shares(cfg, n, []string{"a"}, recs)
			if round == 1 && targets[k].IOPS < limit*0.9 {
				t.Fatalf("round 1: %s aims at %v; the test wants it to see only its own demand", n, targets[k])
			}
			next[n] = Bound(cfg, n, []string{"a"}, recs, targets, held[n])
		}
		held = next
		var sum float64
		for _, n := range nodes {
			sum += held[n][k].IOPS
		}
		if sum > limit+1e-9 {
			t.Fatalf("round %d: the shares sum to %.2f IOPS, over the limit of %.0f", round, sum, limit)
		}
		if round >= 2 && math.Abs(sum-limit) > 1e-9 {
			t.Fatalf("round %d: the shares sum to %.2f, want the whole limit", round, sum)
		}
	}

	// Only n1 has demand: n2 and n3 fall to the floor at once, n1 rises
	// into what they release by the next round.
	demand := func(n string) float64 {
		if n == "n1" {
			return 100
		}
		return 0
	}
	for round := 1; round <= 4; round++ {
		next := map[string]map[Key]Limit{}
		var recs []NodeDemand
		for _, m := range nodes {
			recs = append(recs, record(m, demand(m)))
		}
		for _, n := range nodes {
			next[n] = Bound(cfg, n, []string{"a"}, recs, Shares(cfg, n, []string{"a"}, recs), held[n])
		}
		if round == 1 && (next["n2"][k].IOPS != limit*FloorFraction/3 || next["n1"][k].IOPS != held["n1"][k].IOPS) {
			t.Errorf("round 1 of one node's demand: n1 %v (held %v), n2 %v; want n1 unchanged (no slack yet), n2 at the floor", next["n1"][k], held["n1"][k], next["n2"][k])
		}
		held = next
	}
	floor := limit * FloorFraction / 3
	if math.Abs(held["n2"][k].IOPS-floor) > 1e-9 || math.Abs(held["n1"][k].IOPS-(limit-2*floor)) > 0.01*limit {
		t.Errorf("one node with demand, 4 rounds: n1 %v, n2 %v; want %v (within 1 %%) and %v", held["n1"][k], held["n2"][k], limit-2*floor, floor)
	}

	// A record without Held counts at its Share; with the others
	// holding everything, a node waits with a share that is not 0.
	recs := []NodeDemand{
		{Node: "n1", Pools: []string{"a"}},
		{Node: "n2", Pools: []string{"a"}, Demand: []KeyDemand{{Pool: "a", Class: Maintenance, Ops: 100}}},
	}
	target := Shares(cfg, "n1", []string{"a"}, recs)[k].IOPS
	other := Shares(cfg, "n2", []string{"a"}, recs)[k].IOPS
	got := Bound(cfg, "n1", []string{"a"}, recs, map[Key]Limit{k: {IOPS: target}}, nil)[k]
	if want := (limit - other) * target / limit; math.Abs(got.IOPS-want) > 1e-9 {
		t.Errorf("beside a record without Held: %v, want %v", got, want)
	}
	recs[1].Held = []KeyLimit{{Pool: "a", Class: Maintenance, Limit: Limit{IOPS: limit}}}
	if got := Bound(cfg, "n1", []string{"a"}, recs, map[Key]Limit{k: {IOPS: target}}, nil)[k]; got.Unlimited() || got.IOPS > 0.1 {
		t.Errorf("with no slack: %v, want a tiny share", got)
	}
}
