package meta

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/kv"
	"github.com/weftfs/weft/internal/kv/etcdkv"
	"github.com/weftfs/weft/internal/kv/memkv"
)

// BenchmarkMeta measures create, stat and unlink throughput with 1, 8 and
// 64 goroutines against memkv and embedded etcd clusters of 1 and 3
// members (members as package etcdx starts them; client, members and
// benchmark share this machine's CPUs). The baselines kvput (one blind Put
// per transaction) and kvget (one Get per View) measure the raw store in the
// same run, so results can be read as ratios. Run:
//
//	go test ./internal/meta -run '^$' -bench BenchmarkMeta -benchtime 3000x
//
// It reports ops/s; docs/metadata.md records the numbers.
func BenchmarkMeta(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) kv.Store
	}{
		{"mem", func(b *testing.B) kv.Store { return memkv.New(kv.Options{Limits: etcdkv.EmbeddedLimits}) }},
		{"etcd-1", func(b *testing.B) kv.Store { return benchEtcd(b, 1) }},
		{"etcd-3", func(b *testing.B) kv.Store { return benchEtcd(b, 3) }},
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			store := st.open(b)
			m := newMeta(b, store)
			for _, op := range []string{"kvput", "kvget", "create", "stat", "unlink"} {
				for _, g := range []int{1, 8, 64} {
					b.Run(fmt.Sprintf("%s/g=%d", op, g), func(b *testing.B) { benchOp(b, store, m, op, g) })
				}
			}
		})
	}
}

func benchEtcd(b *testing.B, members int) kv.Store {
	cli := etcdtest.NewCluster(b, members).Client(b)
	s, err := etcdkv.New(etcdkv.Config{Client: cli, Prefix: "bench/", Options: kv.Options{Limits: etcdkv.EmbeddedLimits}})
	if err != nil {
		b.Fatal(err)
	}
	return s
}

var benchDirs atomic.Int64

// benchOp runs b.N operations of one kind spread over g goroutines, each in
// a fresh directory, and reports ops/s.
func benchOp(b *testing.B, store kv.Store, m *Meta, op string, g int) {
	dir := must(m.Mkdir(bg, RootLIN, fmt.Sprintf("bench%d", benchDirs.Add(1)), 0o755))
	name := func(i int64) string { return fmt.Sprintf("f%09d", i) }
	var lins []LIN
	switch op {
	case "stat", "kvget":
		lins = make([]LIN, min(b.N, 1000))
		fanOut(b, 64, int64(len(lins)), func(i int64) error {
			a, err := m.Create(bg, dir.LIN, name(i), NewInode{Mode: 0o644})
			lins[i] = a.LIN
			return err
		})
	case "unlink":
		fanOut(b, 64, int64(b.N), func(i int64) error {
			_, err := m.Create(bg, dir.LIN, name(i), NewInode{Mode: 0o644})
			return err
		})
	}
	b.ResetTimer()
	start := time.Now()
	fanOut(b, g, int64(b.N), func(i int64) error {
		switch op {
		case "kvput":
			return store.Update(bg, func(tx kv.Tx) error {
				tx.Put([]byte(fmt.Sprintf("bench/%d/%d", dir.LIN, i)), []byte("0123456789abcdef0123456789abcdef"))
				return nil
			})
		case "kvget":
			return store.View(bg, func(tx kv.Tx) error {
				_, err := tx.Get(keyInode(lins[rand.IntN(len(lins))]))
				return err
			})
		case "create":
			_, err := m.Create(bg, dir.LIN, name(i), NewInode{Mode: 0o644})
			return err
		case "stat":
			_, err := m.GetAttr(bg, lins[rand.IntN(len(lins))])
			return err
		default:
			return m.Unlink(bg, dir.LIN, name(i))
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
}

// fanOut runs fn(0..n-1) on g goroutines.
func fanOut(b *testing.B, g int, n int64, fn func(i int64) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
				if err := fn(i); err != nil {
					once.Do(func() { b.Error(err) })
					return
				}
			}
		}()
	}
	wg.Wait()
}
