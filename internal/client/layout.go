package client

import (
	"context"
	"fmt"

	"github.com/weftfs/weft/internal/meta"
	"github.com/weftfs/weft/internal/placement"
)

// FileLayout is where a file's data lives and how well it is protected,
// for `weft file info`.
type FileLayout struct {
	LIN  meta.LIN `json:"lin"`
	Pool string   `json:"pool"`
	// Requested is the protection new stripes get ("ec:4+2"), and
	// RequestedFrom says whether the file asks for it ("file") or inherits
	// its pool's ("pool").
	Requested     string `json:"requested"`
	RequestedFrom string `json:"requested_from"`
	// Size is the file size in bytes (with this client's buffered
	// writes); StripeSize the file bytes per stripe (0: never written).
	Size       int64  `json:"size"`
	StripeSize int64  `json:"stripe_size"`
	Allocated  uint64 `json:"allocated_bytes"`
	// Wanted is the tolerance a stripe of the requested protection gets
	// when placed over all the pool's nodes and drives in service (its
	// target: placement.TargetTolerance).
	Wanted placement.Tolerance `json:"wanted_tolerance"`
	// Achieved is the tolerance of the file's weakest stripe in blocks
	// (nil: the file has none; an inline stripe is the namespace's). It
	// is never more than what was placed.
	Achieved *placement.Tolerance `json:"achieved_tolerance,omitempty"`
	// UnderProtected counts stripes with units not placed; BelowTarget
	// the stripes (those included) whose placement survives fewer drive
	// or node failures than their target — repair re-places them.
	UnderProtected int          `json:"under_protected_stripes"`
	BelowTarget    int          `json:"below_target_stripes"`
	Stripes        []StripeInfo `json:"stripes"`
}

// StripeInfo is one stripe of a FileLayout.
type StripeInfo struct {
	Index   uint64 `json:"index"`
	Gen     uint64 `json:"gen"`
	Offset  int64  `json:"offset"`
	DataLen int64  `json:"data_len"`
	// Protection is the stripe's own protection: the file's, or mirror:M+1
	// for the small stripe of an ec:K+M file.
	Protection string `json:"protection"`
	Width      int    `json:"width"`
	Placed     int    `json:"placed"`
	// Tolerance is what the placed units survive: any Drives drives or any
	// Nodes nodes may fail (-1: not readable); Target what the stripe's
	// pool could give it, and BelowTarget whether Tolerance falls short.
	Tolerance      placement.Tolerance `json:"tolerance"`
	Target         placement.Tolerance `json:"target"`
	BelowTarget    bool                `json:"below_target"`
	UnderProtected bool                `json:"under_protected"`
	// Inline says the stripe's bytes are in its map, in the namespace
	// (Config.InlineMax): Protection is "inline", there are no units, and
	// the stripe is as safe as the namespace itself, which no placement
	// here measures: its Tolerance and Target are zero, and it counts
	// neither in the file's Achieved nor as below its target.
	Inline bool `json:"inline,omitempty"`
	// Unavailable counts units on drives that are down now.
	Unavailable int        `json:"unavailable_units"`
	Units       []UnitInfo `json:"units"`
}

// UnitInfo is one unit of a stripe.
type UnitInfo struct {
	Unit   int          `json:"unit"`
	Parity bool         `json:"parity"` // parity unit, or a copy past the first
	Placed bool         `json:"placed"`
	Drive  meta.DriveID `json:"drive,omitempty"`
	Node   string       `json:"node,omitempty"`
	Block  string       `json:"block,omitempty"`
	Length uint32       `json:"length,omitempty"`
	Up     bool         `json:"up"` // its drive is up now
}

// Layout returns the layout of file lin from meta and the topology. It
// reads every stripe map of the file (in pages), so it costs one meta read
// per 256 stripes. Errors: meta's (meta.ErrNotFound), ErrInvalid for a
// LIN that is not a regular file, ErrCorrupt for a malformed stripe map,
// topology errors.
func (c *Client) Layout(ctx context.Context, lin meta.LIN) (FileLayout, error) {
	a, err := c.meta.GetAttr(ctx, lin)
	if err != nil {
		return FileLayout{}, fmt.Errorf("client: layout of LIN %d: %w", lin, err)
	}
	if a.Type != meta.TypeFile {
		return FileLayout{}, fmt.Errorf("%w: LIN %d is a %s, not a regular file: only files have a layout (weft file info shows one for a file)", ErrInvalid, lin, a.Type)
	}
	g, req, fromPool, err := c.geometry(ctx, a)
	if err != nil {
		return FileLayout{}, err
	}
	view, err := c.view(ctx)
	if err != nil {
		return FileLayout{}, fmt.Errorf("client: layout of LIN %d: %w", lin, err)
	}
	fl := FileLayout{
		LIN: lin, Pool: a.Pool, Requested: req.String(), RequestedFrom: "file",
		Size: int64(a.Size), StripeSize: int64(a.StripeSize), Allocated: a.Allocated,
		Wanted: view.TargetTolerance(a.Pool, g.Layout(int(g.StripeDataSize()))),
	}
	if fromPool {
		fl.RequestedFrom = "pool"
	}
	if size, ok := c.Size(lin); ok {
		fl.Size = size
	}
	err = c.eachStripe(ctx, lin, func(s meta.Stripe) error {
		si, err := stripeInfo(lin, s, int64(a.StripeSize), view, a.Pool)
		if err != nil {
			return err
		}
		fl.Stripes = append(fl.Stripes, si)
		if si.Inline {
			return nil
		}
		if si.UnderProtected {
			fl.UnderProtected++
		}
		if si.BelowTarget {
			fl.BelowTarget++
		}
		if fl.Achieved == nil {
			t := si.Tolerance
			fl.Achieved = &t
		} else {
			fl.Achieved.Drives = min(fl.Achieved.Drives, si.Tolerance.Drives)
			fl.Achieved.Nodes = min(fl.Achieved.Nodes, si.Tolerance.Nodes)
		}
		return nil
	})
	if err != nil {
		return FileLayout{}, err
	}
	return fl, nil
}

// stripeInfo describes one stripe map.
func stripeInfo(lin meta.LIN, s meta.Stripe, stripeSize int64, view *Snapshot, pool string) (StripeInfo, error) {
	if s.IsInline() {
		return StripeInfo{Index: s.Index, Gen: s.Gen, DataLen: int64(s.DataLen), Protection: "inline", Inline: true}, nil
	}
	l, err := StoredLayout(lin, s)
	if err != nil {
		return StripeInfo{}, err
	}
	si := StripeInfo{
		Index: s.Index, Gen: s.Gen, Offset: int64(s.Index) * stripeSize, DataLen: int64(s.DataLen),
		Protection: l.StripeProtection().String(), Width: l.Width(),
	}
	var placed []placement.Unit
	for i, u := range s.Units {
		ui := UnitInfo{Unit: i, Parity: i >= l.Data, Placed: u.Placed()}
		if u.Placed() {
			ui.Drive, ui.Node, ui.Block, ui.Length, ui.Up = u.Drive, view.Node(u.Drive), u.Block.String(), u.Length, view.Up(u.Drive)
			placed = append(placed, placement.Unit{Drive: placement.DriveID(u.Drive), Node: ui.Node})
			if !ui.Up {
				si.Unavailable++
			}
		}
		si.Units = append(si.Units, ui)
	}
	si.Placed = len(placed)
	si.UnderProtected = si.Placed < si.Width
	si.Tolerance = placement.ComputeTolerance(placed, l.Needed())
	si.Target = view.TargetTolerance(pool, l)
	si.BelowTarget = si.UnderProtected || si.Tolerance.Drives < si.Target.Drives || si.Tolerance.Nodes < si.Target.Nodes
	return si, nil
}

// layoutPage is how many stripe maps Layout reads at once.
const layoutPage = 256

// eachStripe calls fn for every stripe map of lin, in index order, read in
// pages; it stops at fn's first error.
func (c *Client) eachStripe(ctx context.Context, lin meta.LIN, fn func(meta.Stripe) error) error {
	var ferr error
	err := meta.EachStripe(ctx, c.meta, lin, layoutPage, func(s meta.Stripe) error {
		ferr = fn(s)
		return ferr
	})
	if err != nil && err != ferr {
		return fmt.Errorf("client: stripe maps of LIN %d: %w", lin, err)
	}
	return err
}
