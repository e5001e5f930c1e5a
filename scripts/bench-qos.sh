#!/usr/bin/env bash
# QoS adherence: a maintenance limit held while a repair runs, and what a
# reading client keeps — against no limit, in one run.
#
# For each LIMIT (a maintenance limit for every pool, as weft qos set
# takes it, or "none"): a fresh 3-node x 4-drive local cluster (ec:4+2),
# DATA bytes written through the mount, node n3 killed, the limit set and
# QoS enabled, then a repair at the high impact policy while fio reads the
# data through the mount. Every 30 s during the repair the script keeps
# `weft qos stats --seconds 30 --interval 10`: the maintenance class's
# IOPS and MB/s per 10-second interval, summed over the nodes from each
# block service's own per-second counters. Reported per limit: the
# intervals (those wholly inside the repair), their min, median and max,
# how many are within +-5 % of the limit, the repair's duration, and fio's
# read rate during the repair against fio alone before the kill.
# Needs root (mount, drop_caches) and fio. The mount is weft local up's
# own, which reads the drives of this machine directly (see
# scripts/lib/repair-bench.sh): the client's rate is of those reads.
#   DATA    bytes of data to write (default 1g)
#   LIMITS  space-separated limits (default "none 300IOPS 20MB/s")
set -euo pipefail
cd "$(dirname "$0")/.."
data=${DATA:-1g}
limits=${LIMITS:-none 300IOPS 20MB/s}
work=$(mktemp -d /var/tmp/weft-qos-bench.XXXXXX)
go build -o "$work/weft-bin" ./cmd/weft
weft="$work/weft-bin"
. scripts/lib/repair-bench.sh
fioread() { # RUNTIME -> MB/s
  fio --name=data --directory="$dir/mnt" --rw=read --bs=1m --size="$data" --numjobs=2 --nrfiles=8 --time_based \
      --runtime="$1" --ioengine=psync --group_reporting --output-format=json |
    python3 -c 'import json,sys; print("%.0f" % (json.load(sys.stdin)["jobs"][0]["read"]["bw_bytes"]/1e6))'
}
echo "| maintenance limit | 10-s intervals | min | median | max | within +-5 % | repair s | client MB/s alone | during | ratio |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for limit in $limits; do
  bench_up "$work/$(echo "$limit" | tr '/' '_')" local
  bench_write "$data"
  alone=$(fioread 15)
  bench_kill n3
  if [ "$limit" != none ]; then
    "$weft" qos set "pool=*,maintenance=$limit,other=unlimited" >/dev/null
    "$weft" qos enable >/dev/null
    sleep 3 # every node follows the configuration and publishes its demand
  fi
  sync; echo 3 >/proc/sys/vm/drop_caches
  fio --name=data --directory="$dir/mnt" --rw=read --bs=1m --size="$data" --numjobs=2 --nrfiles=8 --time_based \
      --runtime=3600 --ioengine=psync --group_reporting --output-format=json >"$dir/during.json" &
  fiopid=$!
  id=$(bench_repair high)
  start=$(date +%s)
  : >"$dir/stats.jsonl"
  last=$start
  while ! bench_ended "$id"; do
    sleep 1
    if [ $(( $(date +%s) - last )) -ge 30 ]; then
      "$weft" qos stats --seconds 30 --interval 10 --json >>"$dir/stats.jsonl"; echo >>"$dir/stats.jsonl"
      last=$(date +%s)
    fi
  done
  end=$(date +%s)
  "$weft" qos stats --seconds $(( end - last < 60 ? (end - last > 10 ? end - last : 10) : 60 )) --interval 10 --json >>"$dir/stats.jsonl"
  kill -INT $fiopid; wait $fiopid || true
  during=$(python3 -c 'import json,sys; s=open(sys.argv[1]).read(); print("%.0f" % (json.loads(s[s.index("{"):])["jobs"][0]["read"]["bw_bytes"]/1e6))' "$dir/during.json")
  python3 - "$dir/stats.jsonl" "$start" "$end" "$limit" "$alone" "$during" <<'PY'
import json, sys, statistics
path, start, end, limit, alone, during = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5]), float(sys.argv[6])
dec = json.JSONDecoder(); text = open(path).read(); i = 0; rows = {}
while True:
    while i < len(text) and text[i].isspace(): i += 1
    if i >= len(text): break
    obj, i = dec.raw_decode(text, i)
    for r in obj.get("rows") or []:
        if r["class"] == "maintenance" and r["start"] >= start and r["start"] + r["seconds"] <= end:
            rows[(r["start"], r["pool"])] = r
by = {}
for (s, _), r in rows.items():
    v = by.setdefault(s, [0.0, 0.0]); v[0] += r["iops"]; v[1] += r["mb_per_sec"]
unit = "MB/s" if limit.endswith("MB/s") else "IOPS"
vals = [v[1] if unit == "MB/s" else v[0] for _, v in sorted(by.items())]
if not vals:
    print("| %s | 0 | | | | | %d | %.0f | %.0f | %.2f |" % (limit, end - start, alone, during, during / alone if alone else 0)); sys.exit(0)
within = "-"
if limit != "none":
    n = float(limit[:-len(unit)])
    within = "%d of %d" % (sum(1 for v in vals if abs(v - n) <= 0.05 * n), len(vals))
print("| %s | %d | %.1f %s | %.1f | %.1f | %s | %d | %.0f | %.0f | %.2f |" % (limit, len(vals), min(vals), unit, statistics.median(vals), max(vals), within, end - start, alone, during, during / alone if alone else 0))
PY
  bench_down
done
