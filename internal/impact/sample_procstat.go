package impact

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ProcStat is the Linux CPUSource: it reads the aggregate "cpu" line of
// /proc/stat.
type ProcStat struct {
	// Path is the file to read; empty means /proc/stat.
	Path string
}

var _ CPUSource = ProcStat{}

// CPUTimes reads and parses the file (one small read per call).
func (p ProcStat) CPUTimes() (CPUTimes, error) {
	path := p.Path
	if path == "" {
		path = "/proc/stat"
	}
	f, err := os.Open(path)
	if err != nil {
		return CPUTimes{}, err
	}
	defer f.Close()
	t, err := ParseProcStat(f)
	if err != nil {
		return CPUTimes{}, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseProcStat returns the CPU times of the aggregate "cpu" line of a
// /proc/stat text:
//
//	cpu  user nice system idle iowait irq softirq steal guest guest_nice
//
// Total is the sum of the first eight fields (guest and guest_nice are
// already counted in user and nice); Busy is Total less idle and iowait
// (a CPU waiting for I/O is free to run other work). Kernels older than
// 2.6.33 print fewer fields; at least the first four are required. Errors
// wrap ErrCorrupt and quote the line.
func ParseProcStat(r io.Reader) (CPUTimes, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != "cpu" {
			continue
		}
		vals := fields[1:]
		if len(vals) < 4 {
			return CPUTimes{}, fmt.Errorf("%w: /proc/stat line %q: want at least 4 counters", ErrCorrupt, sc.Text())
		}
		var t CPUTimes
		var idle uint64
		for i, v := range vals[:min(len(vals), 8)] {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return CPUTimes{}, fmt.Errorf("%w: /proc/stat line %q: counter %d: %v", ErrCorrupt, sc.Text(), i+1, err)
			}
			t.Total += n
			if i == 3 || i == 4 { // idle, iowait
				idle += n
			}
		}
		t.Busy = t.Total - idle
		return t, nil
	}
	if err := sc.Err(); err != nil {
		return CPUTimes{}, err
	}
	return CPUTimes{}, fmt.Errorf("%w: /proc/stat has no aggregate \"cpu\" line", ErrCorrupt)
}
