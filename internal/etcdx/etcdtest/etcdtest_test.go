package etcdtest

import (
	"context"
	"testing"
)

func TestClusterServes(t *testing.T) {
	for _, n := range []int{1, 3} {
		c := NewCluster(t, n)
		cli := c.Client(t)
		if _, err := cli.Put(context.Background(), "k", "v"); err != nil {
			t.Fatalf("%d members: put: %v", n, err)
		}
		r, err := cli.Get(context.Background(), "k")
		if err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "v" {
			t.Fatalf("%d members: get = %v, %v", n, r, err)
		}
	}
}
