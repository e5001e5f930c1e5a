package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/weftfs/weft/internal/cluster"
	"github.com/weftfs/weft/internal/etcdx/etcdtest"
	"github.com/weftfs/weft/internal/meta"
)

// fakeNS is a Namespace with a fixed protection index and lost-data list.
type fakeNS struct {
	st    meta.ProtectionStats
	under []meta.UnderProtectedFile
	lost  []meta.LostFile
	// usage is StatFS's per-pool usage; attrs, the files GetAttr and
	// SetAttr know.
	usage map[string]meta.Usage
	attrs map[meta.LIN]meta.Attr
}

func (f *fakeNS) StatFS(context.Context) (meta.FSStats, error) {
	return meta.FSStats{Pools: f.usage}, nil
}

func (f *fakeNS) GetAttr(_ context.Context, lin meta.LIN) (meta.Attr, error) {
	a, ok := f.attrs[lin]
	if !ok {
		return a, fmt.Errorf("%w: LIN %d", meta.ErrNotFound, lin)
	}
	return a, nil
}

func (f *fakeNS) SetAttr(ctx context.Context, lin meta.LIN, mask meta.SetAttrMask, a meta.Attr) (meta.Attr, error) {
	cur, err := f.GetAttr(ctx, lin)
	if err != nil {
		return cur, err
	}
	if mask&meta.SetPool != 0 {
		cur.Pool = a.Pool
	}
	if mask&meta.SetProtection != 0 {
		cur.Protection = a.Protection
	}
	f.attrs[lin] = cur
	return cur, nil
}

func (f *fakeNS) ProtectionStats(context.Context, int) (meta.ProtectionStats, error) {
	return f.st, nil
}

func (f *fakeNS) ListUnderProtectedFiles(_ context.Context, after meta.LIN, limit int) ([]meta.UnderProtectedFile, error) {
	var out []meta.UnderProtectedFile
	for _, u := range f.under {
		if u.LIN > after && len(out) < limit {
			out = append(out, u)
		}
	}
	return out, nil
}

func (f *fakeNS) ListLost(_ context.Context, after meta.LIN, limit int) ([]meta.LostFile, error) {
	var out []meta.LostFile
	for _, l := range f.lost {
		if l.LIN > after && len(out) < limit {
			out = append(out, l)
		}
	}
	return out, nil
}

func (f *fakeNS) Path(_ context.Context, lin meta.LIN) (string, error) {
	if lin == 99 {
		return "", meta.ErrNotFound
	}
	return "/f" + strings.Repeat("x", int(lin)%3), nil
}

// The status's health follows the data: degraded with files below their
// protection, critical with lost data, healthy with neither (a cluster
// without drives has no other problem). The lists page by LIN.
func TestDataHealthAndFileLists(t *testing.T) {
	ctx := context.Background()
	store, err := cluster.Open(ctx, etcdtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	ns := &fakeNS{}
	srv := httptest.NewServer(NewHandler(Deps{Store: store, Namespace: ns, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	c := NewClient(srv.URL)
	health := func() Status {
		t.Helper()
		st, err := c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := health(); st.Health != cluster.Healthy || st.Data == nil || len(st.Problems) != 0 {
		t.Fatalf("nothing below, nothing lost: %+v", st)
	}
	ns.st = meta.ProtectionStats{UnderFiles: 2, UnderStripes: 5, UnderBytes: 5 << 20}
	if st := health(); st.Health != cluster.Degraded || len(st.Problems) != 1 || !strings.Contains(st.Problems[0], "2 files (5.0 MiB in 5 stripes) are below their pool's protection") {
		t.Fatalf("files below their protection: %+v", st)
	}
	ns.st.LostFiles, ns.st.LostStripes, ns.st.LostBytes, ns.st.Partial = 1, 1, 100, true
	if st := health(); st.Health != HealthCritical || len(st.Problems) != 2 || !strings.Contains(st.Problems[0], "at least 1 files have lost data") {
		t.Fatalf("lost data: %+v", st)
	}

	for lin := meta.LIN(16); lin < 21; lin++ {
		ns.under = append(ns.under, meta.UnderProtectedFile{LIN: lin, Stripes: 1})
	}
	ns.under = append(ns.under, meta.UnderProtectedFile{LIN: 99, Stripes: 3})
	var got []string
	for after := meta.LIN(0); ; {
		page, err := c.UnderProtectedFiles(ctx, after, 4)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range page.Files {
			got = append(got, f.Path)
		}
		if page.Next == 0 {
			break
		}
		after = page.Next
	}
	if strings.Join(got, " ") != "/fx /fxx /f /fx /fxx " {
		t.Fatalf("under-protected pages: %q", got)
	}
	since := time.Unix(1_700_000_000, 0).UTC()
	ns.lost = []meta.LostFile{{LIN: 17, Size: 250, StripeSize: 100, Since: since,
		Stripes: []meta.LostStripe{{Index: 0, DataLen: 100}, {Index: 1, DataLen: 100}, {Index: 2, DataLen: 100}}}}
	l, err := c.LostFiles(ctx, 0, 0)
	if err != nil || len(l.Files) != 1 || l.Files[0].Path != "/fxx" || l.Files[0].Bytes != 250 || len(l.Files[0].Ranges) != 1 ||
		l.Files[0].Ranges[0] != (meta.ByteRange{Offset: 0, Length: 250}) || !l.Files[0].Since.Equal(since) || l.Next != 0 {
		t.Fatalf("lost list: %+v, %v", l, err)
	}
	var ae *Error
	if _, err := c.LostFiles(ctx, 0, MaxFileListLimit+1); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(err.Error(), "limit=") {
		t.Fatalf("limit too large: %v", err)
	}
}
