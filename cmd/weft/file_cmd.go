package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/meta"
)

// fuseMagic is the statfs type of a FUSE file system.
const fuseMagic = 0x65735546

func newFileCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "file", Short: "Inspect files: layout, protection, placement"}
	var units bool
	info := &cobra.Command{
		Use:   "info PATH",
		Short: "Show a file's pool, protection, stripes and where their units are",
		Long: `Show how a file on a weft mount is stored: its pool, the protection it asks
for and the protection its stripes achieve (how many drive and node failures
the weakest stripe survives), its size and stripes, and with --units where
every unit is (node, drive, block). A stripe written while drives were down
may be under-protected until a repair job completes it; info never reports
more protection than was placed.

A small file whose data is inline (weft mount --inline-max) has one stripe
of protection "inline": its bytes are in its stripe map in etcd, placed
nowhere else, and it is as safe as the metadata (TOLERANCE "metadata"; the
protection line says it achieves what the metadata survives, which weft
status's etcd line shows, rather than a tolerance of placed units).`,
		Example: `  weft file info /mnt/weft/data/run42.h5
  weft file info --units /mnt/weft/small.txt
  weft file info --json /mnt/weft/big | jq .achieved_tolerance`,
		Args: exactArgs(1, "one path on a weft mount"),
		RunE: func(c *cobra.Command, args []string) error {
			path := args[0]
			lin, err := weftFile("file info", path)
			if err != nil {
				return err
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			l, err := cl.FileLayout(c.Context(), lin)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(c.OutOrStdout(), l)
			}
			w := c.OutOrStdout()
			abs, _ := filepath.Abs(path)
			achieved := "-"
			switch {
			case l.Achieved != nil:
				achieved = l.Achieved.String()
			case len(l.Stripes) > 0 && l.Stripes[0].Inline:
				achieved = "what the metadata survives (inline)"
			}
			fmt.Fprintf(w, "path        %s\n", abs)
			fmt.Fprintf(w, "lin         %d\n", l.LIN)
			fmt.Fprintf(w, "pool        %s\n", l.Pool)
			fmt.Fprintf(w, "protection  %s (from %s): wants %s, achieves %s\n", l.Requested, l.RequestedFrom, l.Wanted, achieved)
			fmt.Fprintf(w, "size        %s in %d stripes of %s, %s allocated\n", humanBytes(l.Size), len(l.Stripes), humanBytes(l.StripeSize), humanBytes(int64(l.Allocated)))
			if l.BelowTarget > 0 {
				fmt.Fprintf(w, "warning     %d stripes below the protection wanted (%d with units not placed): repair re-protects them\n", l.BelowTarget, l.UnderProtected)
			}
			fmt.Fprintln(w)
			head := []string{"STRIPE", "GEN", "OFFSET", "LENGTH", "PROTECTION", "PLACED", "DOWN", "TOLERANCE"}
			if units {
				head = append(head, "UNITS (node/drive/block)")
			}
			t := newTable(w, head...)
			for _, s := range l.Stripes {
				placed, tol := fmt.Sprintf("%d/%d", s.Placed, s.Width), s.Tolerance.String()
				if s.Inline {
					placed, tol = "-", "metadata"
				}
				row := []string{strconv.FormatUint(s.Index, 10), strconv.FormatUint(s.Gen, 10), humanBytes(s.Offset), humanBytes(s.DataLen),
					s.Protection, placed, strconv.Itoa(s.Unavailable), tol}
				if units {
					var us []string
					for _, u := range s.Units {
						if !u.Placed {
							us = append(us, "-")
							continue
						}
						us = append(us, fmt.Sprintf("%s/d%d/%s", u.Node, u.Drive, u.Block[:8]))
					}
					row = append(row, strings.Join(us, " "))
				}
				t.row(row...)
			}
			return t.flush()
		},
	}
	info.Flags().BoolVar(&units, "units", false, "list every unit's node, drive and block")
	cmd.AddCommand(info, newFileListCmd(g), newFileLostCmd(g), newFileSetPoolCmd(g), newFileSetProtectionCmd(g))
	return cmd
}

// weftFile returns the LIN of the regular file at path on a weft mount,
// or an error for cmd naming path and what is wrong.
func weftFile(cmd, path string) (meta.LIN, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("%s: %s: %w", cmd, path, err)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(path, &fs); err != nil || fs.Type != fuseMagic {
		return 0, fmt.Errorf("%s: %s is not on a weft mount", cmd, path)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0, fmt.Errorf("%s: %s is not a regular file", cmd, path)
	}
	return meta.LIN(st.Ino), nil
}
