#!/usr/bin/env bash
# What a repair costs a client, and what QoS costs the data path — all
# against baselines measured in the same run (issue 16's "client
# protection" and "cost" benchmarks).
#
# 1. Client protection, twice: the repair at the low policy (its client
#    latency targets the drive class's: 10 ms for ssd), and at a policy
#    "guard" of low with --client-p99 at GUARD (default 1.2) times the
#    block services' own client p99 with n3 down. Each: a fresh 3-node x
#    4-drive local cluster (ec:4+2), DATA bytes written through the
#    mount, the page cache dropped. fio reads the data at random (BS
#    blocks) as fast as it can for 10 s: the client's ceiling (O_DIRECT:
#    the mount's reads, not the page cache's); then at a steady rate of
#    RATE_PCT % of it in windows of WINDOW s: one with every node up and
#    one with node n3 killed (for reference: a third of the reads are
#    degraded now, whatever a repair does), then ROUNDS1 rounds of a
#    window with the repair paused — the baseline, "the same run without
#    repair" — and one with it running. Reported: each window's MB/s and
#    p99 completion latency, and the means' ratios, running / paused.
#    Targets: >= 0.90 of the throughput, p99 <= 1.20x.
# 2. Repair at high, clients idle. The same cluster shape, fresh, the
#    same data, n3 killed, a repair at the high policy with no client.
#    Its rate at the disk (bytes read and written by the disk holding
#    the cluster, from /proc/diskstats, over the job's duration from
#    its start to its end as the job records them; also
#    from the nodes' weft_drive_bytes_total counters, which on one
#    machine miss a node's short-circuit reads of another node's drives)
#    against the raw drive bandwidth measured just before by
#    the live nodes' block files read cold (cat, after dropping the page
#    cache) and as many bytes written by dd (O_DIRECT, 1 MiB, to a
#    scratch file beside them); and the machine's CPU busy meanwhile
#    (/proc/stat). Target: >= 0.70.
# 3. Cost. Sequential writes through the mount (fio, 1 MiB, WSIZE), ROUNDS
#    times alternating QoS disabled and QoS enabled with every class
#    unlimited: the medians, and their ratio. Target: within 3 %.
# Needs root (mount, drop_caches), fio and python3. The machine's speed
# swings 2-5x between runs: compare the ratios of one run.
#   DATA      bytes written for parts 1 and 2 (default 1g)
#   BS        fio's random read block size (default 64k)
#   RATE_PCT  the steady rate, % of the measured ceiling (default 50)
#   WINDOW    seconds of each window of part 1 (default 10)
#   ROUNDS1   rounds of part 1, a window paused and one running (default 4)
#   WSIZE     bytes of each sequential write round (default 512m)
#   ROUNDS    rounds of part 3 per setting (default 5)
#   PARTS     which parts to run (default "1 2 3")
#   WEFT_BIN  the weft binary to measure (default: one built from this tree)
set -euo pipefail
cd "$(dirname "$0")/.."
data=${DATA:-1g}
bs=${BS:-64k}
ratepct=${RATE_PCT:-50}
window=${WINDOW:-10}
altrounds=${ROUNDS1:-4}
wsize=${WSIZE:-512m}
rounds=${ROUNDS:-5}
parts=${PARTS:-1 2 3}
work=$(mktemp -d /var/tmp/weft-qos-client.XXXXXX)
. scripts/lib/weft-bin.sh
weft=$(weft_bin bench-qos-client "$work") || exit $?
. scripts/lib/repair-bench.sh

# randread OUT [RATE]: fio random reads of the data, time-based, into OUT
# (json); with RATE (bytes/s) at that steady rate.
randread() {
  local out=$1 rate=${2:-} secs=${3:-$window}
  fio --name=data --directory="$dir/mnt" --rw=randread --bs="$bs" --size="$data" --numjobs=2 --nrfiles=8 --direct=1 \
      --time_based --runtime="$secs" --ioengine=psync --group_reporting --output-format=json \
      ${rate:+--rate="$((rate / 2))"} >"$out"
}
fiojson() { # FILE FIELD: read MB/s ("bw") or p99 ms ("p99") of a fio json
  python3 - "$1" "$2" <<'PY'
import json, sys
s = open(sys.argv[1]).read(); r = json.loads(s[s.index("{"):])["jobs"][0]["read"]
if sys.argv[2] == "bw": print("%.2f" % (r["bw_bytes"] / 1e6))
else: print("%.3f" % (r["clat_ns"]["percentile"]["99.000000"] / 1e6))
PY
}
diskbytes() { # bytes read + written by the disk holding the cluster (/proc/diskstats)
  local dev
  dev=$(basename "$(df --output=source "$dir" | tail -1)")
  awk -v d="$dev" '$3 == d { printf "%.0f\n", ($6 + $10) * 512 }' /proc/diskstats
}
drivebytes() { # the live nodes' drive bytes, read + written, summed
  for a in $(cat "$dir/cluster/admin.addrs"); do curl -s --max-time 5 "http://$a/metrics" || true; done |
    awk '/^weft_drive_bytes_total/ { s += $NF } END { printf "%.0f\n", s }'
}

# protect POLICY LABEL: part 1 on a fresh cluster with the repair at
# POLICY ("guard" is made first: low with --client-p99 at GUARD x the
# block services' client p99 measured during the baseline).
protect() {
  local policy=$1 label=$2
  bench_up "$work/p1-$label" remote
  bench_write "$data"
  randread "$dir/ceiling.json" "" 10
  ceiling=$(fiojson "$dir/ceiling.json" bw)
  rate=$(python3 -c "print(int($ceiling * 1e6 * $ratepct / 100))")
  sync; echo 3 >/proc/sys/vm/drop_caches
  randread "$dir/up.json" "$rate" "$window"
  bench_kill n3
  # The block services' client p99 with n3 down and no repair, for the
  # guard policy's target.
  sync; echo 3 >/proc/sys/vm/drop_caches
  randread "$dir/down.json" "$rate" "$window" &
  local fio=$!
  sleep $((window - 3))
  local blockp99
  blockp99=$(blockp99)
  wait $fio
  local target=""
  if [ "$policy" = guard ]; then
    if [ "$blockp99" = 0.000000 ]; then
      echo "bench-qos-client: no weft_qos_client_p99_seconds during the baseline (too few client I/Os?)" >&2; exit 1
    fi
    target=$(python3 -c "print('%dus' % max(1, round($blockp99 * ${GUARD:-1.2} * 1e6)))")
    "$weft" job policies create guard --default low --client-p99 "$target" >/dev/null
  fi
  # The repair, paused and running in turns: each round a window with it
  # paused (the baseline: the same run without repair) and one with it
  # running, so that both see the same degraded reads, page cache and
  # machine. A resumed job starts again from its level's minimum, and the
  # latency control acts within a second or two of each window's start.
  id=$(bench_repair "$policy")
  "$weft" job pause "$id" >/dev/null
  local i t0 ran=0
  : >"$dir/windows.txt"
  : >"$dir/ended.txt"
  for i in $(seq 1 "$altrounds"); do
    sleep 1
    randread "$dir/paused$i.json" "$rate" "$window"
    "$weft" job resume "$id" >/dev/null 2>&1 || break # it ended
    t0=$(date +%s)
    randread "$dir/running$i.json" "$rate" "$window"
    ran=$((ran + $(date +%s) - t0))
    if bench_ended "$id"; then # during the window: not a window of repair
      echo "the repair ended during round $i's running window; the round is left out" >"$dir/ended.txt"
      break
    fi
    echo "$i $(fiojson "$dir/paused$i.json" bw) $(fiojson "$dir/paused$i.json" p99) $(fiojson "$dir/running$i.json" bw) $(fiojson "$dir/running$i.json" p99)" >>"$dir/windows.txt"
    "$weft" job pause "$id" >/dev/null 2>&1 || break # it ended
  done
  local progress
  progress=$("$weft" job view "$id" --json | python3 -c 'import json,sys; j=json.load(sys.stdin); p=j["phases"][0]; print("%s, %d files repaired" % (j["state"], p.get("items", 0)))' 2>/dev/null || echo "?")
  bench_down
  python3 - "$label" "$ceiling" "$rate" "$(fiojson "$dir/up.json" bw)" "$(fiojson "$dir/up.json" p99)" \
    "$(fiojson "$dir/down.json" p99)" "$blockp99" "${target:--}" "$dir/windows.txt" "$ran" "$progress" "$(cat "$dir/ended.txt")" <<'PY'
import sys, statistics
label, ceil, rate, ub, up, dp, blk, target, windows, ran, progress, ended = sys.argv[1:]
rows = [list(map(float, l.split()[1:])) for l in open(windows) if l.strip()]
print("Client protection, repair at %s (fio randread, O_DIRECT, at %.1f MB/s, %d%% of its %s MB/s ceiling; the block services' client p99 with n3 down %.3f ms; target %s):" % (label, int(rate) / 1e6, round(float(rate) / float(ceil) / 1e4), ceil, float(blk) * 1e3, target))
print("| window | MB/s | p99 ms |")
print("|---|---|---|")
print("| every node up, no repair (for reference) | %s | %s |" % (ub, up))
print("| n3 down, before the repair (for reference) | | %s |" % dp)
for i, (pb, pp, rb, rp) in enumerate(rows, 1):
    print("| round %d: repair paused / running | %.2f / %.2f | %.3f / %.3f |" % (i, pb, rb, pp, rp))
if not rows:
    print("(the repair ended before a round was measured: %s)" % (ended or progress))
    sys.exit()
pb, pp, rb, rp = (statistics.mean(r[k] for r in rows) for k in range(4))
print("| mean of %d rounds: paused (the baseline) / running | %.2f / %.2f | %.3f / %.3f |" % (len(rows), pb, rb, pp, rp))
print("| running / paused (target >= 0.90, <= 1.20) | **%.2f** | **%.2f** |" % (rb / pb, rp / pp))
print("(the repair ran %s s in all; then: %s%s)" % (ran, progress, "; " + ended if ended else ""))
print()
PY
}
blockp99() { # the highest weft_qos_client_p99_seconds of the live nodes
  for a in $(cat "$dir/cluster/admin.addrs"); do curl -s --max-time 5 "http://$a/metrics" || true; done |
    awk '/^weft_qos_client_p99_seconds/ { if ($NF > m) m = $NF } END { printf "%.6f\n", m }'
}

if [[ " $parts " == *" 1 "* ]]; then
  protect low low
  protect guard guard
fi

if [[ " $parts " == *" 2 "* ]]; then
  bench_up "$work/p2" remote
  bench_write "$data"
  bench_kill n3
  # Raw drive bandwidth: the live nodes' block files read cold, and as
  # many bytes written with O_DIRECT beside them.
  blocks=$(find "$dir/cluster/nodes/n1" "$dir/cluster/nodes/n2" -path '*/blocks/*' -type f 2>/dev/null | awk 'NR <= 2000')
  total=$(echo "$blocks" | xargs -r stat -c %s | awk '{ s += $1 } END { print s + 0 }')
  sync; echo 3 >/proc/sys/vm/drop_caches
  r0=$(date +%s.%N)
  echo "$blocks" | xargs -r -n 64 cat >/dev/null
  r1=$(date +%s.%N)
  scratch=$(dirname "$(echo "$blocks" | head -1)")/../dd-scratch
  w0=$(date +%s.%N)
  dd if=/dev/zero of="$scratch" bs=1M count=$((total / 1048576 + 1)) oflag=direct conv=fsync status=none
  w1=$(date +%s.%N)
  rm -f "$scratch"
  before=$(drivebytes)
  disk0=$(diskbytes)
  cpu0=$(awk '/^cpu / { print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8 }' /proc/stat)
  id=$(bench_repair high)
  # One process follows the job (polling it over the API each second);
  # its duration is the job's own, from its record. A shell loop
  # starting a weft and a python each half second took a sixth of the
  # two cores from the repair it timed.
  "$weft" job view "$id" --watch >/dev/null
  read -r t0 t1 < <("$weft" job view "$id" --json | python3 -c '
import json, sys
from datetime import datetime
j = json.load(sys.stdin)
ts = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
print(ts(j["started"]), ts(j["ended"]))')
  after=$(drivebytes)
  disk1=$(diskbytes)
  cpu1=$(awk '/^cpu / { print $2+$3+$4+$7+$8, $2+$3+$4+$5+$6+$7+$8 }' /proc/stat)
  bench_down
  python3 - "$total" "$r0" "$r1" "$w0" "$w1" "$before" "$after" "$t0" "$t1" "$disk0" "$disk1" $cpu0 $cpu1 <<'PY'
import sys
total, r0, r1, w0, w1, b, a, t0, t1, d0, d1, busy0, all0, busy1, all1 = map(float, sys.argv[1:])
rd, wr = total / (r1 - r0) / 1e6, total / (w1 - w0) / 1e6
raw = 2 / (1 / rd + 1 / wr)  # the bandwidth of moving each byte once, half read half written
rep = (a - b) / (t1 - t0) / 1e6
disk = (d1 - d0) / (t1 - t0) / 1e6
print()
print("Repair at high, clients idle (%.0f MB of block files as the raw sample):" % (total / 1e6))
print("| | MB/s |")
print("|---|---|")
print("| raw read (cat of the block files, cold) | %.1f |" % rd)
print("| raw write (dd, O_DIRECT) | %.1f |" % wr)
print("| raw, reads and writes mixed (harmonic mean) | %.1f |" % raw)
print("| repair at the disk (/proc/diskstats, read + written, %.1f s) | %.1f |" % (t1 - t0, disk))
print("| repair at the drives (weft_drive_bytes_total; on one machine a node's short-circuit reads of another node's drives are not in it) | %.1f |" % rep)
print("| repair / raw, at the disk (target >= 0.70) | **%.2f** |" % (disk / raw))
print("| the machine's CPU busy during the repair | %.0f %% |" % (100 * (busy1 - busy0) / (all1 - all0)))
PY
fi

if [[ " $parts " == *" 3 "* ]]; then
  bench_up "$work/p3" remote
  : >"$dir/rounds.txt"
  for i in $(seq 1 "$rounds"); do
    for mode in off on; do
      if [ $mode = on ]; then
        "$weft" qos set "pool=*,maintenance=unlimited,other=unlimited,misc=unlimited" >/dev/null
        "$weft" qos enable >/dev/null
      else
        "$weft" qos disable >/dev/null
      fi
      sleep 2 # every node follows the configuration
      rm -f "$dir/mnt/seq."*
      bw=$(fio --name=seq --directory="$dir/mnt" --rw=write --bs=1m --size="$wsize" --numjobs=1 --end_fsync=1 \
          --ioengine=psync --output-format=json | python3 -c 'import json,sys; s=sys.stdin.read(); print("%.2f" % (json.loads(s[s.index("{"):])["jobs"][0]["write"]["bw_bytes"]/1e6))')
      echo "$mode $bw" >>"$dir/rounds.txt"
    done
  done
  bench_down
  python3 - "$work/p3/rounds.txt" <<'PY'
import sys, statistics
r = {"off": [], "on": []}
for line in open(sys.argv[1]):
    m, v = line.split(); r[m].append(float(v))
off, on = statistics.median(r["off"]), statistics.median(r["on"])
print()
print("Cost (sequential write through the mount, median of %d rounds each, alternating):" % len(r["off"]))
print("| QoS | MB/s (rounds) | median |")
print("|---|---|---|")
print("| disabled | %s | %.1f |" % (", ".join("%.1f" % v for v in r["off"]), off))
print("| enabled, all unlimited | %s | %.1f |" % (", ".join("%.1f" % v for v in r["on"]), on))
print("| enabled / disabled (target within 3 %%) | | **%.3f** |" % (on / off))
PY
fi
