package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// A node's live record names the process serving it (an incarnation):
// host, machine boot id, pid and the process's start time. When a node
// starts while the live key of an earlier incarnation of it still exists —
// the earlier process crashed, and its lease has not expired, or cannot
// expire because the etcd members that would expire it are down — the new
// process takes the registration over if the earlier one is provably gone,
// instead of waiting for a lease expiry that may need the quorum the node
// itself is bringing back (see staleIncarnation).

// MachineBoot returns this machine's boot id (a new random id at every
// boot, from /proc/sys/kernel/random/boot_id), or "" when it cannot be
// read.
func MachineBoot() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// ProcessStart returns when process pid started, in clock ticks since the
// machine booted (field 22 of /proc/PID/stat): with the boot id and the
// pid, it names one process for good, even after its pid is reused. ok is
// false when no such process runs.
func ProcessStart(pid int) (start uint64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces
	// and parentheses: the fields after it start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	return v, err == nil
}

// processGone reports whether the process a live record names has
// certainly ended, as seen from a process on machine (host, boot): the
// machine rebooted since, or no process with that pid and start time
// runs. It cannot tell for a record of another machine.
func processGone(cur NodeLive, host, boot string, alive func(pid int) (uint64, bool)) (string, bool) {
	if cur.Host == "" || cur.Host != host {
		return "", false
	}
	if cur.MachineBoot != "" && boot != "" && cur.MachineBoot != boot {
		return fmt.Sprintf("the machine %s rebooted since pid %d registered", host, cur.PID), true
	}
	if cur.MachineBoot == "" || cur.MachineBoot != boot || cur.PID <= 0 {
		return "", false
	}
	start, running := alive(cur.PID)
	if !running {
		return fmt.Sprintf("pid %d on %s no longer runs", cur.PID, host), true
	}
	if cur.ProcStart != 0 && start != cur.ProcStart {
		return fmt.Sprintf("pid %d on %s is another process now", cur.PID, host), true
	}
	return "", false
}

// staleIncarnation decides whether the registration cur of node name,
// left by another process, may be taken over by the one registering with
// live and holding drives: it returns why, or ok false. The earlier
// process is provably gone when
//
//   - it ran on this machine, and the machine rebooted since or that
//     process no longer runs (processGone); or
//   - the registering process holds every drive the control plane has for
//     the node (not removed), open and locked: a process serving the node
//     would hold them, and a drive's lock is its directory's, wherever
//     the node ran before.
//
// A node with no drives can prove nothing by them.
func (s *Store) staleIncarnation(ctx context.Context, name string, cur, live NodeLive, holds []DriveID, alive func(int) (uint64, bool)) (string, bool, error) {
	if why, ok := processGone(cur, live.Host, live.MachineBoot, alive); ok {
		return why, true, nil
	}
	if len(holds) == 0 {
		return "", false, nil
	}
	drives, err := s.ListDrives(ctx)
	if err != nil {
		return "", false, err
	}
	var own []DriveID
	for _, d := range drives {
		if d.Node == name && d.Status != StatusRemoved {
			own = append(own, d.ID)
		}
	}
	if len(own) == 0 {
		return "", false, nil
	}
	for _, id := range own {
		if !slices.Contains(holds, id) {
			return "", false, nil
		}
	}
	return fmt.Sprintf("this process holds all %d of the node's drives, locked", len(own)), true, nil
}
