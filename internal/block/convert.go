package block

import (
	"time"

	"github.com/weftfs/weft/internal/drive"
	"github.com/weftfs/weft/internal/rpc/pb"
)

// headerToPB converts a drive header to its wire form.
func headerToPB(h drive.BlockHeader) *pb.BlockHeader {
	p := &pb.BlockHeader{
		Id:            h.ID.String(),
		Owner:         h.Owner,
		Stripe:        h.Stripe,
		Unit:          h.Unit,
		Generation:    h.Generation,
		FormatVersion: uint32(h.Version),
		Length:        h.Length,
		SegmentSize:   h.SegmentSize,
		SegmentCrcs:   h.SegmentCRCs,
	}
	if !h.Created.IsZero() {
		p.CreatedUnixNanos = h.Created.UnixNano()
	}
	return p
}

// headerFromPB converts a wire header; a bad block id is drive.ErrInvalid.
func headerFromPB(p *pb.BlockHeader) (drive.BlockHeader, error) {
	id, err := drive.ParseBlockID(p.GetId())
	if err != nil {
		return drive.BlockHeader{}, err
	}
	h := drive.BlockHeader{
		Version:     uint16(p.GetFormatVersion()),
		ID:          id,
		Owner:       p.GetOwner(),
		Stripe:      p.GetStripe(),
		Unit:        p.GetUnit(),
		Generation:  p.GetGeneration(),
		Length:      p.GetLength(),
		SegmentSize: p.GetSegmentSize(),
		SegmentCRCs: p.GetSegmentCrcs(),
	}
	if p.GetCreatedUnixNanos() != 0 {
		h.Created = time.Unix(0, p.GetCreatedUnixNanos())
	}
	return h, nil
}

// DriveUsage is the usage of one drive of a node, as returned by
// Client.Usage.
type DriveUsage struct {
	Drive drive.ID
	Node  string
	Class drive.Class
	Path  string
	drive.Usage
	// Err is set, and the sizes zero, when the node could not measure the
	// drive.
	Err string
}

func opStatsToPB(s drive.OpStats) *pb.OpStats {
	return &pb.OpStats{
		Ops:            s.Ops,
		Errors:         s.Errors,
		Bytes:          s.Bytes,
		InFlight:       s.InFlight,
		LatencyNanos:   int64(s.Latency),
		LatencyBuckets: s.Buckets[:],
	}
}

func opStatsFromPB(p *pb.OpStats) drive.OpStats {
	s := drive.OpStats{
		Ops:      p.GetOps(),
		Errors:   p.GetErrors(),
		Bytes:    p.GetBytes(),
		InFlight: p.GetInFlight(),
		Latency:  time.Duration(p.GetLatencyNanos()),
	}
	copy(s.Buckets[:], p.GetLatencyBuckets())
	return s
}

func countersToPB(c drive.Counters) *pb.DriveCounters {
	return &pb.DriveCounters{
		DriveId:       uint32(c.Drive),
		TimeUnixNanos: c.Time.UnixNano(),
		Read:          opStatsToPB(c.Read),
		Write:         opStatsToPB(c.Write),
	}
}

func countersFromPB(p *pb.DriveCounters) drive.Counters {
	return drive.Counters{
		Drive: drive.ID(p.GetDriveId()),
		Time:  time.Unix(0, p.GetTimeUnixNanos()),
		Read:  opStatsFromPB(p.GetRead()),
		Write: opStatsFromPB(p.GetWrite()),
	}
}
