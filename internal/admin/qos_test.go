package admin

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// TestQoSRoutes: changes are validated (a bad specification is a 400
// naming its token) and stored as versions; show and stats answer with no
// node up (no node state, no rows).
func TestQoSRoutes(t *testing.T) {
	ctx := context.Background()
	c, _ := newAPI(t)
	for _, tc := range []struct {
		ch   QoSChange
		want string
	}{
		{QoSChange{}, "needs enable or set"},
		{QoSChange{Set: []string{"pool=fast,maintenance=300"}}, `limit "300"`},
		{QoSChange{Set: []string{"maintenance=3IOPS"}}, "starts with pool=NAME"},
	} {
		_, err := c.ChangeQoS(ctx, tc.ch)
		var ae *Error
		if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Msg, tc.want) {
			t.Errorf("ChangeQoS(%+v) = %v; want a 400 saying %q", tc.ch, err, tc.want)
		}
	}
	on := true
	cfg, err := c.ChangeQoS(ctx, QoSChange{Enable: &on, Set: []string{"pool=fast,maintenance=300IOPS,other=unlimited", "pool=*,maintenance=100MB/s"}})
	if err != nil || cfg.Version != 1 || !cfg.Enabled {
		t.Fatalf("first change: %+v %v", cfg, err)
	}
	off := false
	if cfg, err = c.ChangeQoS(ctx, QoSChange{Enable: &off}); err != nil || cfg.Version != 2 || cfg.Enabled {
		t.Fatalf("disable: %+v %v", cfg, err)
	}
	show, err := c.QoS(ctx)
	if err != nil || show.Config.Version != 2 || strings.Join(show.Specs, " ") != "pool=fast,other=unlimited,maintenance=300IOPS pool=*,maintenance=100MB/s" {
		t.Fatalf("show: %+v %v", show, err)
	}
	if _, err := c.QoSStats(ctx, 61, 1); err == nil || !strings.Contains(err.Error(), "seconds=\"61\"") {
		t.Errorf("stats over 61 s: %v", err)
	}
	if st, err := c.QoSStats(ctx, 10, 5); err != nil || st.To-st.From != 10 || len(st.Rows) != 0 {
		t.Errorf("stats with no node up: %+v %v", st, err)
	}
}
