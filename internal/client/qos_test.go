package client_test

import (
	"testing"

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
