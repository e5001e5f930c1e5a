package cluster

import (
	"context"
	"fmt"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/weftfs/weft/internal/etcdx"
)

// Health values of a Status.
const (
	Healthy  = "healthy"
	Degraded = "degraded"
)

// EtcdMember is one control-plane member's health.
type EtcdMember struct {
	Name      string `json:"name"`
	ClientURL string `json:"client_url"`
	Healthy   bool   `json:"healthy"`
	Leader    bool   `json:"leader"`
	Error     string `json:"error,omitempty"`
	// DB is the member's database against its quota (nil: no answer).
	DB *etcdx.Space `json:"db,omitempty"`
}

// EtcdSpaceWarn is the fraction of its quota past which a member's
// database is a problem of `weft status`: inline small files stopped at
// half (etcdx.DefaultSpaceLimit); what grows it now is inodes, entries
// and stripe maps, and at the quota every write stops.
const EtcdSpaceWarn = 0.8

// Status is the cluster summary shown by `weft status`.
type Status struct {
	ClusterID     string         `json:"cluster_id"`
	SchemaVersion int            `json:"schema_version"`
	Health        string         `json:"health"`
	Problems      []string       `json:"problems,omitempty"`
	NodesUp       int            `json:"nodes_up"`
	Nodes         int            `json:"nodes"`
	DrivesUp      int            `json:"drives_up"`
	Drives        int            `json:"drives"`
	DriveStatus   map[string]int `json:"drive_status"`
	TotalBytes    int64          `json:"total_bytes"`
	FreeBytes     int64          `json:"free_bytes"`
	UsedBytes     int64          `json:"used_bytes"`
	Pools         []Pool         `json:"pools"`
	Etcd          []EtcdMember   `json:"etcd"`
	// EtcdDB is the fullest member's database against its quota (nil: no
	// member answered).
	EtcdDB *etcdx.Space `json:"etcd_db,omitempty"`
}

// Status gathers the cluster summary. Health is "healthy" when every node,
// every drive in service and every etcd member is up; otherwise "degraded",
// with one line per problem.
func (s *Store) Status(ctx context.Context) (Status, error) {
	st := Status{ClusterID: s.clusterID, SchemaVersion: SchemaVersion, DriveStatus: map[string]int{}}
	nodes, err := s.ListNodes(ctx)
	if err != nil {
		return st, err
	}
	for _, n := range nodes {
		st.Nodes++
		if n.State == Up {
			st.NodesUp++
		} else {
			st.Problems = append(st.Problems, fmt.Sprintf("node %s is down", n.Name))
		}
	}
	drives, err := s.ListDrives(ctx)
	if err != nil {
		return st, err
	}
	for _, d := range drives {
		st.DriveStatus[string(d.Status)]++
		if d.Status == StatusRemoved {
			continue
		}
		st.Drives++
		switch {
		case d.State == Up:
			st.DrivesUp++
			st.TotalBytes += d.Live.TotalBytes
			st.FreeBytes += d.Live.FreeBytes
			st.UsedBytes += d.Live.UsedBytes
		case d.Live != nil && d.Live.Error != "":
			st.Problems = append(st.Problems, fmt.Sprintf("drive %s on %s is down: %s", d.ID, d.Node, d.Live.Error))
		default:
			st.Problems = append(st.Problems, fmt.Sprintf("drive %s on %s is down", d.ID, d.Node))
		}
		if d.Status != StatusReady {
			st.Problems = append(st.Problems, fmt.Sprintf("drive %s on %s is %s", d.ID, d.Node, d.Status))
		}
	}
	if st.Pools, err = s.ListPools(ctx); err != nil {
		return st, err
	}
	st.Etcd = s.etcdHealth(ctx)
	for _, m := range st.Etcd {
		if !m.Healthy {
			st.Problems = append(st.Problems, fmt.Sprintf("etcd member %s (%s) is unhealthy: %s", m.Name, m.ClientURL, m.Error))
		}
		if m.DB == nil {
			continue
		}
		if st.EtcdDB == nil || m.DB.Fraction() > st.EtcdDB.Fraction() {
			st.EtcdDB = m.DB
		}
		if m.DB.Fraction() >= EtcdSpaceWarn {
			st.Problems = append(st.Problems, fmt.Sprintf("etcd member %s's database is %.0f%% of its quota (%d of %d MiB): at the quota every write stops; "+
				"compact and defragment it (etcdctl defrag), or raise its quota (weft server --etcd-quota for an embedded member, --quota-backend-bytes for an external etcd)", m.Name, 100*m.DB.Fraction(), m.DB.Used>>20, m.DB.Quota>>20))
		}
	}
	st.Health = Healthy
	if len(st.Problems) > 0 {
		st.Health = Degraded
	}
	return st, nil
}

// etcdHealth asks every etcd member for its status, each with a short
// timeout so that a dead member does not stall the summary.
func (s *Store) etcdHealth(ctx context.Context) []EtcdMember {
	ml, err := s.cli.MemberList(ctx)
	if err != nil {
		return []EtcdMember{{Name: "?", Error: err.Error()}}
	}
	out := make([]EtcdMember, len(ml.Members))
	var urls []string
	for i, m := range ml.Members {
		out[i].Name = m.Name
		if len(m.ClientURLs) == 0 {
			out[i].Error = "not started"
			continue
		}
		out[i].ClientURL = m.ClientURLs[0]
		urls = append(urls, out[i].ClientURL)
	}
	answers := etcdx.AskStatus(ctx, urls, 1500*time.Millisecond, func(ctx context.Context, url string) (*pb.StatusResponse, error) {
		sr, err := s.cli.Status(ctx, url)
		return (*pb.StatusResponse)(sr), err
	})
	for i, a := 0, 0; i < len(out); i++ {
		if out[i].ClientURL == "" {
			continue
		}
		sr := answers[a]
		a++
		if sr.Err != nil {
			out[i].Error = sr.Err.Error()
			continue
		}
		out[i].Healthy = len(sr.Resp.Errors) == 0
		out[i].Leader = sr.Resp.Leader == sr.Resp.Header.MemberId
		if db, ok := etcdx.MemberSpace(sr); ok {
			out[i].DB = &db
		}
		if len(sr.Resp.Errors) > 0 {
			out[i].Error = sr.Resp.Errors[0]
		}
	}
	return out
}
