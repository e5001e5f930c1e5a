package qos

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestSizeOf(t *testing.T) {
	for _, tc := range []struct {
		n     int64
		whole bool
		want  SizeClass
	}{
		{0, false, Size4K},
		{4095, true, Size4K},
		{4096, false, Size64K},
		{64<<10 - 1, false, Size64K},
		{64 << 10, true, Size1M}, // a whole 64 KiB unit: by its bytes
		{1<<20 - 1, false, Size1M},
		{1 << 20, true, SizeUnit},
		{4 << 20, true, SizeUnit},
		{1 << 20, false, SizeLarge}, // a part of a larger unit
		{3 << 20, false, SizeLarge},
	} {
		if got := SizeOf(tc.n, tc.whole); got != tc.want {
			t.Errorf("SizeOf(%d, %v) = %q, want %q", tc.n, tc.whole, got, tc.want)
		}
	}
}

// TestFineArithmetic: a key's counts over two seconds sum, its min and
// max are those of its fastest and slowest I/O (whole and at the drive),
// and its rows' averages divide by the ops and the interval.
func TestFineArithmetic(t *testing.T) {
	st := NewStats()
	t0 := time.Unix(3000, 0)
	k := FineKey{StatKey: StatKey{"p", Other, Read}, Job: "", Client: "mount-1", PID: 42, Size: Size64K}
	ios := []struct {
		at            time.Duration
		queued, drive time.Duration
	}{
		{0, 0, 2 * time.Millisecond},
		{300 * time.Millisecond, 5 * time.Millisecond, 1 * time.Millisecond},
		{1200 * time.Millisecond, 0, 9 * time.Millisecond},
		{1700 * time.Millisecond, 1 * time.Millisecond, 4 * time.Millisecond},
	}
	for _, io := range ios {
		st.RecordFine(t0.Add(io.at), k, 8192, io.queued, io.drive)
	}
	ss, over := st.FineSeconds(t0.Add(2*time.Second), 60)
	if len(ss) != 2 || over != 0 {
		t.Fatalf("FineSeconds = %+v, overflow %d", ss, over)
	}
	if c := ss[0].FineCounts; c.Ops != 2 || c.MinNanos != int64(2*time.Millisecond) || c.MaxNanos != int64(6*time.Millisecond) ||
		c.MinDriveNanos != int64(time.Millisecond) || c.MaxDriveNanos != int64(2*time.Millisecond) || c.QueueNanos != int64(5*time.Millisecond) {
		t.Errorf("second 0: %+v", c)
	}
	rows := FineRows("n1", ss, 3000, 3002, 2)
	if len(rows) != 1 {
		t.Fatalf("FineRows = %+v", rows)
	}
	r := rows[0]
	want := FineRow{Node: "n1", Start: 3000, Seconds: 2, IOPS: 2, MBps: 4 * 8192 / 1e6 / 2,
		AvgMs: (2 + 6 + 9 + 5) / 4.0, MinMs: 2, MaxMs: 9, DriveAvgMs: (2 + 1 + 9 + 4) / 4.0, DriveMinMs: 1, DriveMaxMs: 9,
		Pending: 0.016 / 2, Queued: 0.006 / 2}
	for _, f := range []struct {
		name      string
		got, want float64
	}{
		{"iops", r.IOPS, want.IOPS}, {"mb/s", r.MBps, want.MBps}, {"avg", r.AvgMs, want.AvgMs}, {"min", r.MinMs, want.MinMs},
		{"max", r.MaxMs, want.MaxMs}, {"drive avg", r.DriveAvgMs, want.DriveAvgMs}, {"drive min", r.DriveMinMs, want.DriveMinMs},
		{"drive max", r.DriveMaxMs, want.DriveMaxMs}, {"pending", r.Pending, want.Pending}, {"queued", r.Queued, want.Queued},
	} {
		if math.Abs(f.got-f.want) > 1e-9 {
			t.Errorf("row %s = %v, want %v", f.name, f.got, f.want)
		}
	}
	if r.Node != "n1" || r.Key() != k || r.Ops != 4 || r.Bytes != 4*8192 {
		t.Errorf("row = %+v", r)
	}
}

// TestFineKeyCap: past MaxFineKeys keys in a second, new keys count
// under the Other key of their StatKey and as overflow; keys already
// there go on counting under themselves; the next second starts afresh.
func TestFineKeyCap(t *testing.T) {
	st := NewStats()
	t0 := time.Unix(4000, 0)
	key := func(pid int, class Class) FineKey {
		return FineKey{StatKey: StatKey{"p", class, Write}, Client: "c", PID: pid, Size: Size4K}
	}
	for pid := 1; pid <= MaxFineKeys; pid++ {
		st.RecordFine(t0, key(pid, Other), 100, 0, time.Millisecond)
	}
	for pid := MaxFineKeys + 1; pid <= MaxFineKeys+10; pid++ {
		st.RecordFine(t0, key(pid, Other), 100, 0, time.Millisecond)
	}
	st.RecordFine(t0, key(MaxFineKeys+11, Maintenance), 100, 0, time.Millisecond)
	st.RecordFine(t0, key(1, Other), 100, 0, time.Millisecond) // known: its own key
	st.RecordFine(t0.Add(time.Second), key(MaxFineKeys+20, Other), 100, 0, time.Millisecond)
	ss, over := st.FineSeconds(t0.Add(2*time.Second), 60)
	if over != 11 {
		t.Errorf("overflow = %d, want 11", over)
	}
	got := map[FineKey]int64{}
	for _, s := range ss {
		if s.At == t0.Unix() {
			got[s.Key()] = s.Ops
		}
	}
	if n := len(got); n != MaxFineKeys+2 {
		t.Errorf("%d keys in the first second, want %d and two Other keys", n, MaxFineKeys)
	}
	if got[key(1, Other)] != 2 {
		t.Errorf("pid 1: %d ops, want 2", got[key(1, Other)])
	}
	if o := got[FineKey{StatKey: StatKey{"p", Other, Write}, Other: true}]; o != 10 {
		t.Errorf("other key of p/other/w: %d ops, want 10", o)
	}
	if o := got[FineKey{StatKey: StatKey{"p", Maintenance, Write}, Other: true}]; o != 1 {
		t.Errorf("other key of p/maintenance/w: %d ops, want 1", o)
	}
	if last := ss[len(ss)-1]; last.At != t0.Unix()+1 || last.Other || last.PID != MaxFineKeys+20 {
		t.Errorf("the next second: %+v, want its own key", last)
	}
}

// TestFineAddsUpToCoarse: random I/Os recorded once each sum, over the
// fine samples of every second, to the coarse samples, key by StatKey —
// and both to what was recorded, as do the totals since the start.
func TestFineAddsUpToCoarse(t *testing.T) {
	st := NewStats()
	r := rand.New(rand.NewPCG(1, 2))
	t0 := time.Unix(5000, 0)
	recorded := map[StatKey]Counts{}
	for i := range 20000 {
		k := FineKey{StatKey: StatKey{Pool: fmt.Sprint("p", r.IntN(2)), Class: Classes()[r.IntN(3)], Dir: []Dir{Read, Write}[r.IntN(2)]},
			Job: fmt.Sprint(r.IntN(3)), Client: fmt.Sprint("m", r.IntN(4)), PID: r.IntN(200), Size: SizeClasses()[r.IntN(5)]}
		at := t0.Add(time.Duration(i) * 200 * time.Microsecond) // 4 s
		n, q, d := int64(r.IntN(1<<20)), time.Duration(r.IntN(1e6)), time.Duration(r.IntN(1e7))
		st.RecordFine(at, k, n, q, d)
		c := recorded[k.StatKey]
		c.add(Counts{Ops: 1, Bytes: n, QueueNanos: int64(q), DriveNanos: int64(d)})
		recorded[k.StatKey] = c
	}
	now := t0.Add(5 * time.Second)
	coarse := map[StatKey]Counts{}
	for _, s := range st.Seconds(now, 60) {
		c := coarse[StatKey{s.Pool, s.Class, s.Dir}]
		c.add(s.Counts)
		coarse[StatKey{s.Pool, s.Class, s.Dir}] = c
	}
	fss, over := st.FineSeconds(now, 60)
	if over == 0 {
		t.Fatalf("no overflow: the test wants keys past the cap")
	}
	fine := map[StatKey]Counts{}
	for _, s := range fss {
		c := fine[s.Key().StatKey]
		c.add(s.Counts)
		fine[s.Key().StatKey] = c
	}
	if len(coarse) != 12 || len(fine) != len(coarse) {
		t.Fatalf("%d coarse keys, %d fine StatKeys; want 12 each", len(coarse), len(fine))
	}
	for k, c := range coarse {
		if fine[k] != c {
			t.Errorf("%v: fine %+v, coarse %+v", k, fine[k], c)
		}
	}
	totals := st.Totals()
	for k, c := range recorded {
		if coarse[k] != c || totals[k] != c {
			t.Errorf("%v: recorded %+v, coarse %+v, totals %+v", k, c, coarse[k], totals[k])
		}
	}
}

// BenchmarkRecordFine records I/Os over 64 fine keys (64 pids of one
// mount), the cost every block I/O pays; /coarse records them through
// Record, whose fine key has no job, client or pid (one key), for the
// ratio of the bigger map.
func BenchmarkRecordFine(b *testing.B) {
	keys := make([]FineKey, 64)
	for i := range keys {
		keys[i] = FineKey{StatKey: StatKey{"default", Other, Read}, Job: "", Client: "mount-1f2e3d", PID: 1000 + i, Size: Size64K}
	}
	t0 := time.Unix(6000, 0)
	b.Run("fine", func(b *testing.B) {
		st := NewStats()
		for i := 0; b.Loop(); i++ {
			st.RecordFine(t0.Add(time.Duration(i)*time.Microsecond), keys[i%len(keys)], 8192, 0, time.Millisecond)
		}
	})
	b.Run("coarse", func(b *testing.B) {
		st := NewStats()
		for i := 0; b.Loop(); i++ {
			st.Record(t0.Add(time.Duration(i)*time.Microsecond), keys[i%len(keys)].StatKey, 8192, 0, time.Millisecond)
		}
	})
}

// BenchmarkAdmit passes I/Os through a gate with nothing limited (QoS
// enabled, every class unlimited) and records them, Admit and its Done:
// all the CPU QoS adds to a block I/O then, 64 pids of one mount as in
// BenchmarkRecordFine; /parallel from every CPU at once, for the
// gate's and the statistics' locks.
func BenchmarkAdmit(b *testing.B) {
	tags := make([]Tag, 64)
	for i := range tags {
		tags[i] = Tag{Class: Other, Pool: "default", Client: "mount-1f2e3d", PID: 1000 + i}
	}
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		g := NewGate(NewStats())
		for i := 0; b.Loop(); i++ {
			done, err := g.Admit(ctx, tags[i%len(tags)], Read, 1<<20)
			if err != nil {
				b.Fatal(err)
			}
			done(true)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		g := NewGate(NewStats())
		b.RunParallel(func(pb *testing.PB) {
			for i := 0; pb.Next(); i++ {
				done, err := g.Admit(ctx, tags[i%len(tags)], Read, 1<<20)
				if err != nil {
					b.Error(err)
					return
				}
				done(true)
			}
		})
	})
}
