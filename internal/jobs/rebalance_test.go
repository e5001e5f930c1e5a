package jobs

import (
	"errors"
	"testing"

	"github.com/weftfs/weft/internal/job"
)

func TestRebalanceParams(t *testing.T) {
	r := Rebalance().(job.ParamChecker)
	for _, ok := range []map[string]string{{}, {"pool": "default", "threshold": "3"}, {"threshold": "5%", "dry-run": "true"}} {
		if err := r.CheckParams(ok); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	for _, bad := range []map[string]string{{"pool": "a b"}, {"threshold": "0"}, {"threshold": "x"}, {"dry-run": "yes"}} {
		if err := r.CheckParams(bad); !errors.Is(err, job.ErrInvalid) {
			t.Errorf("%v: %v", bad, err)
		}
	}
	m := Multiscan().(job.ParamChecker)
	if err := m.CheckParams(map[string]string{"grace": "-1s"}); !errors.Is(err, job.ErrInvalid) {
		t.Errorf("multiscan grace: %v", err)
	}
}
