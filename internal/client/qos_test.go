package client_test

import (
	"testing"
	"time"

	"github.com/weftfs/weft/internal/client"
	"github.com/weftfs/weft/internal/client/clienttest"
	"github.com/weftfs/weft/internal/qos"
)

// TestQoSClassOfBlockCalls: a client's block calls arrive at the block
// services with its class and the pool of their drive.
func TestQoSClassOfBlockCalls(t *testing.T) {
	f := clienttest.New(t)
	stats := make([]*qos.Stats, len(f.Nodes))
	for i, n := range f.Nodes {
		stats[i] = qos.NewStats()
		n.Svc.SetGate(qos.NewGate(stats[i]))
	}
	c := f.Client(testUnit, func(cfg *client.Config) { cfg.Class, cfg.ClientID = qos.Maintenance, "m1" })
	data := clienttest.RandBytes(3*testUnit*4, 1)
	lin := f.WriteClosed(c, "f", "", data)
	file, err := c.Open(bg, lin, false)
	if err != nil {
		t.Fatal(err)
	}
	clienttest.MustEqual(t, "read back", clienttest.ReadAll(t, file, 1<<20), data)
	file.Close(bg)
	sum := map[qos.StatKey]int64{}
	for _, st := range stats {
		for k, c := range st.Totals() {
			sum[k] += c.Ops
		}
	}
	if sum[qos.StatKey{Pool: "p0", Class: qos.Maintenance, Dir: qos.Write}] < 18 || sum[qos.StatKey{Pool: "p0", Class: qos.Maintenance, Dir: qos.Read}] < 12 || len(sum) != 2 {
		t.Errorf("block I/O by pool, class and direction: %v; want p0 maintenance writes (18 units) and reads (12) only", sum)
	}
}

// TestQoSClientReportsItsP99: a client of the class the job throttle
// protects measures its own unit reads and writes, and once it has made
// enough of them its calls report their p99 to the block services, whose
// ClientP99 then answers at least it; a maintenance client reports
// nothing.
func TestQoSClientReportsItsP99(t *testing.T) {
	for _, class := range []qos.Class{qos.Other, qos.Maintenance} {
		f := clienttest.New(t)
		stats := make([]*qos.Stats, len(f.Nodes))
		for i, n := range f.Nodes {
			stats[i] = qos.NewStats()
			n.Svc.SetGate(qos.NewGate(stats[i]))
		}
		c := f.Client(testUnit, func(cfg *client.Config) { cfg.Class, cfg.ClientID = class, "m1" })
		data := clienttest.RandBytes(3*testUnit*4, 2)
		lin := f.WriteClosed(c, "f", "", data)
		// The write's 18 unit puts fill the meter; 250 ms on (its
		// figures are recomputed every 200 ms) the read's calls carry it.
		time.Sleep(250 * time.Millisecond)
		file, err := c.Open(bg, lin, false)
		if err != nil {
			t.Fatal(err)
		}
		clienttest.MustEqual(t, "read back", clienttest.ReadAll(t, file, 1<<20), data)
		file.Close(bg)
		reported := false
		for _, st := range stats {
			if l, ok := st.ClientP99(time.Now())["p0"]; ok && l.Reported {
				reported = true
			}
		}
		if reported != (class == qos.Other) {
			t.Errorf("class %s: a node holds the client's own p99: %v, want %v", class, reported, class == qos.Other)
		}
	}
}
