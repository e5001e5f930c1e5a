package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// MetaResult is the outcome of Meta: operations per second of each phase.
type MetaResult struct {
	Dir       string  `json:"dir"`
	Files     int     `json:"files"`
	CreatePS  float64 `json:"creates_per_s"`
	StatPS    float64 `json:"stats_per_s"`
	RemovePS  float64 `json:"removes_per_s"`
	CreateSec float64 `json:"create_seconds"`
	StatSec   float64 `json:"stat_seconds"`
	RemoveSec float64 `json:"remove_seconds"`
}

// Meta creates n empty files in a new subdirectory of dir from one thread,
// stats each, removes each, and reports the rate of each phase. The
// subdirectory is removed afterwards.
func Meta(dir string, n int) (MetaResult, error) {
	r := MetaResult{Dir: dir, Files: n}
	sub, err := os.MkdirTemp(dir, "weft-bench-meta-")
	if err != nil {
		return r, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(sub)
	names := make([]string, n)
	for i := range names {
		names[i] = filepath.Join(sub, fmt.Sprintf("f%07d", i))
	}
	phase := func(fn func(string) error) (float64, error) {
		start := time.Now()
		for _, p := range names {
			if err := fn(p); err != nil {
				return 0, fmt.Errorf("bench: %w", err)
			}
		}
		return time.Since(start).Seconds(), nil
	}
	if r.CreateSec, err = phase(func(p string) error {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	}); err != nil {
		return r, err
	}
	if r.StatSec, err = phase(func(p string) error { _, err := os.Stat(p); return err }); err != nil {
		return r, err
	}
	if r.RemoveSec, err = phase(os.Remove); err != nil {
		return r, err
	}
	r.CreatePS, r.StatPS, r.RemovePS = float64(n)/r.CreateSec, float64(n)/r.StatSec, float64(n)/r.RemoveSec
	return r, nil
}
