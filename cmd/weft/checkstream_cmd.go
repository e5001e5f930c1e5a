package main

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weftfs/weft/internal/checkstream"
	"github.com/weftfs/weft/internal/drive"
)

// errNotValid is checkstream check's failure: the report says why.
var errNotValid = errors.New("checkstream: not every byte of the stream is valid (see the report above)")

// newCheckstreamCmd is weft checkstream: write a self-describing stream,
// and check a copy of it.
func newCheckstreamCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "checkstream",
		Short: "Write a self-describing data stream, and check a copy of it byte for byte",
		Long: `weft checkstream proves that a copy lost no byte. "gen" writes a stream
whose every block carries a magic, the format's version, the stream's id,
its own offset, the stream's size and a CRC32C of itself, with a payload
derived from the id and the offset. Copy it however you like — through an
NFS gateway while it fails over, through a mount while a node dies — and
"check" the copy: it reads it (a file, or standard input) and reports which
extents are valid, zero (the data turned to zero bytes), corrupt (a bad
checksum, a block of another stream, a block at the wrong offset, garbage)
or missing (the copy is shorter than its blocks say), each with its offset
and length, then a one-line verdict.

It needs no cluster: it reads and writes local files and pipes.`,
		Example: `  weft checkstream gen /mnt/weft/stream --size 10GiB
  weft checkstream check /mnt/weft/stream
  weft checkstream gen - --size 1GiB | nfs-cp - nfs://10.0.0.50/export/stream
  nfs-cat nfs://10.0.0.50/export/stream | weft checkstream check -`,
	}
	cmd.AddCommand(checkstreamGenCmd(g), checkstreamCheckCmd(g))
	return cmd
}

func checkstreamGenCmd(g *globals) *cobra.Command {
	var sizeFlag, blockFlag, idFlag string
	c := &cobra.Command{
		Use:   "gen FILE|-",
		Short: "Write a stream of --size bytes to FILE (or standard output)",
		Long: `Writes a stream of --size bytes in blocks of --block bytes to FILE, created
or truncated, and flushed to stable storage (fsync) before the command
returns; "-" writes it to standard output. The stream's id is random
unless --id gives it (16 hex digits): "check --id" then refuses blocks of
any other stream. A summary — id, size, block size, speed — goes to
standard output (standard error when the stream does), as JSON with --json.

--size and --block take units: 4096, 64KiB, 10G (K/M/G/T and KiB… are
powers of 1024, KB… of 1000). --block is a multiple of 512 from 512 bytes
to 16MiB; --size is at least 48 bytes (one block header).`,
		Example: `  weft checkstream gen stream.dat --size 1GiB
  weft checkstream gen stream.dat --size 100G --block 4KiB --id 00000000cafef00d
  weft checkstream gen - --size 64MiB > /mnt/weft/stream`,
		Args: exactArgs(1, "one FILE (or - for standard output)"),
		RunE: func(c *cobra.Command, args []string) error {
			s, err := parseGen(sizeFlag, blockFlag, idFlag)
			if err != nil {
				return err
			}
			var w io.Writer = c.OutOrStdout()
			info := c.OutOrStdout()
			var f *os.File
			if args[0] == "-" {
				info = c.ErrOrStderr()
			} else {
				f, err = os.OpenFile(args[0], os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
				if err != nil {
					return usageError{fmt.Errorf("checkstream gen: %w: give a FILE that can be written, or - for standard output", err)}
				}
				defer f.Close()
				w = f
			}
			start := time.Now()
			n, err := s.WriteTo(w)
			if err == nil && f != nil {
				if err = f.Sync(); err == nil {
					err = f.Close()
				}
			}
			if err != nil {
				return fmt.Errorf("checkstream gen: writing %s after %d bytes: %w", args[0], n, err)
			}
			took := time.Since(start)
			sum := genSummary{ID: fmt.Sprintf("%016x", s.ID), Size: s.Size, Block: s.Block, Blocks: s.Blocks(),
				Seconds: took.Seconds(), MBps: mbps(n, took)}
			if g.json {
				return printJSON(info, sum)
			}
			_, err = fmt.Fprintf(info, "checkstream: wrote stream %s: %d bytes in %d blocks of %s in %.2f s (%.0f MB/s)\n",
				sum.ID, s.Size, sum.Blocks, drive.FormatSize(int64(s.Block)), sum.Seconds, sum.MBps)
			return err
		},
	}
	c.Flags().StringVar(&sizeFlag, "size", "", "the stream's size, e.g. 1GiB (required)")
	c.Flags().StringVar(&blockFlag, "block", "64KiB", "block size: a multiple of 512 from 512 to 16MiB")
	c.Flags().StringVar(&idFlag, "id", "", "the stream's id, up to 16 hex digits (default: random)")
	return c
}

// genSummary is what gen prints.
type genSummary struct {
	ID      string  `json:"id"`
	Size    int64   `json:"size"`
	Block   int     `json:"block"`
	Blocks  int64   `json:"blocks"`
	Seconds float64 `json:"seconds"`
	MBps    float64 `json:"mb_per_s"`
}

// parseGen turns gen's flags into a stream, or a usage error naming the
// flag.
func parseGen(sizeFlag, blockFlag, idFlag string) (checkstream.Stream, error) {
	var s checkstream.Stream
	if sizeFlag == "" {
		return s, usageError{errors.New("checkstream gen: give --size, e.g. --size 1GiB")}
	}
	size, err := drive.ParseSize(sizeFlag)
	if err != nil {
		return s, usageError{fmt.Errorf("checkstream gen: --size: %w", err)}
	}
	block, err := drive.ParseSize(blockFlag)
	if err != nil {
		return s, usageError{fmt.Errorf("checkstream gen: --block: %w", err)}
	}
	if block > checkstream.MaxBlock {
		block = checkstream.MaxBlock + 1 // out of range, reported below
	}
	s = checkstream.Stream{Size: size, Block: int(block)}
	if idFlag == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		s.ID = binary.LittleEndian.Uint64(b[:])
	} else if s.ID, err = parseID(idFlag); err != nil {
		return s, err
	}
	if err := s.Validate(); err != nil {
		return s, usageError{fmt.Errorf("checkstream gen: --size %s --block %s: %w", sizeFlag, blockFlag, err)}
	}
	return s, nil
}

// parseID parses --id.
func parseID(s string) (uint64, error) {
	id, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	if err != nil {
		return 0, usageError{fmt.Errorf("checkstream: --id %q: want up to 16 hex digits, e.g. 00000000cafef00d", s)}
	}
	return id, nil
}

func checkstreamCheckCmd(g *globals) *cobra.Command {
	var idFlag string
	c := &cobra.Command{
		Use:   "check FILE|-",
		Short: "Check a copy of a stream and report its valid, zero, corrupt and missing extents",
		Long: `Reads FILE ("-": standard input) to its end and reports its extents, each
with its offset and length in bytes:

  valid    the stream's own bytes at their own offsets
  zero     zero bytes where the stream has data (a write that was lost
           and left a hole, or a file extended without its data)
  corrupt  bytes that differ from the stream's (with what the checker
           saw: a changed byte, a block of another stream, a block at the
           wrong offset, data past the stream's end)
  missing  the copy ends before the size its blocks state

Adjacent extents of one kind are merged into one. The stream's id, size
and block size are learnt from its first valid block (within its first
32 MiB); --id makes blocks of any other stream corrupt. The last line is
the verdict, "checkstream: VALID N bytes (stream ID)" or
"checkstream: FAILED valid=… zero=… corrupt=… missing=…".

Exit status: 0 when every byte of the stream is valid and nothing follows
it; 1 when not (or the read failed); 2 for a usage error, such as a FILE
that cannot be opened. --json prints the report as JSON (extents,
totals, the stream found, "ok").`,
		Example: `  weft checkstream check /mnt/weft/stream
  nfs-cat nfs://10.0.0.50/export/stream | weft checkstream check -
  weft checkstream check copy.dat --id 00000000cafef00d --json`,
		Args: exactArgs(1, "one FILE (or - for standard input)"),
		RunE: func(c *cobra.Command, args []string) error {
			var o checkstream.Options
			if idFlag != "" {
				id, err := parseID(idFlag)
				if err != nil {
					return err
				}
				o.ID = &id
			}
			name := args[0]
			var r io.Reader = c.InOrStdin()
			if name == "-" {
				name = "stdin"
			} else {
				f, err := os.Open(name)
				if err != nil {
					return usageError{fmt.Errorf("checkstream check: %w: give a readable FILE, or - for standard input", err)}
				}
				defer f.Close()
				r = f
			}
			start := time.Now()
			rep, err := checkstream.Check(r, o)
			if err != nil {
				return fmt.Errorf("checkstream check %s: %w", name, err)
			}
			took := time.Since(start)
			out := c.OutOrStdout()
			if g.json {
				err = printJSON(out, checkReport{Report: rep, Seconds: took.Seconds(), MBps: mbps(rep.Read, took)})
			} else {
				err = printCheck(out, name, rep, took)
			}
			if err != nil {
				return err
			}
			if !rep.OK {
				return errNotValid
			}
			return nil
		},
	}
	c.Flags().StringVar(&idFlag, "id", "", "the stream expected, 16 hex digits: blocks of any other stream are corrupt")
	return c
}

// checkReport is check's JSON.
type checkReport struct {
	*checkstream.Report
	Seconds float64 `json:"seconds"`
	MBps    float64 `json:"mb_per_s"`
}

// printCheck prints a check's report as text: the stream, the extents as
// a table, the speed, and the verdict last.
func printCheck(w io.Writer, name string, rep *checkstream.Report, took time.Duration) error {
	if s := rep.Stream; s != nil {
		fmt.Fprintf(w, "checkstream[%s]: stream %s: %d bytes in %d blocks of %s\n", name, s.ID, s.Size, s.Blocks, drive.FormatSize(int64(s.Block)))
	}
	t := newTable(w, "CLASS", "OFFSET", "BYTES", "NOTE")
	for _, e := range rep.Extents {
		t.row(string(e.Class), strconv.FormatInt(e.Offset, 10), strconv.FormatInt(e.Bytes, 10), e.Note)
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "checkstream[%s]: read %d bytes in %.2f s (%.0f MB/s)\n", name, rep.Read, took.Seconds(), mbps(rep.Read, took))
	_, err := fmt.Fprintln(w, rep.Verdict())
	return err
}

// mbps is n bytes over d in MB/s.
func mbps(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / 1e6 / d.Seconds()
}
