#!/usr/bin/env bash
# Repair throughput at each impact policy, with the client throughput seen
# during the repair, against the client alone — all in one run.
#
# For each policy: a fresh 3-node × 4-drive local cluster (ec:4+2), DATA
# bytes written through the mount, node n3 killed, then a repair job at
# that policy while fio reads the data through the mount. Reported: data
# re-protected per second (bytes the repair wrote / its duration), and fio's
# read rate during the repair against fio alone on the same cluster before
# the kill. Needs root (mounts, drop_caches) and fio.
#   DATA   bytes of data to write (default 2g)
#   RUNTIME seconds of the client-alone fio run (default 20)
set -euo pipefail
cd "$(dirname "$0")/.."
data=${DATA:-2g}
runtime=${RUNTIME:-20}
work=$(mktemp -d /var/tmp/weft-repair-bench.XXXXXX)
go build -o "$work/weft-bin" ./cmd/weft
weft="$work/weft-bin"
up=""
cleanup() { [ -n "$up" ] && kill -TERM "$up" 2>/dev/null && wait "$up" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
echo "| policy | data | repair s | repair MB/s (written) | client MB/s alone | client MB/s during repair | client ratio |"
echo "|---|---|---|---|---|---|---|"
for policy in low medium high; do
  dir="$work/$policy"
  mkdir -p "$dir"
  "$weft" local up --dir "$dir/cluster" --mount "$dir/mnt" --lease-ttl 3s --repair-grace 1h >"$dir/up.log" 2>&1 &
  up=$!
  for i in $(seq 1 120); do grep -q '^ready:' "$dir/up.log" && break; sleep 1; done
  export WEFT_ADMIN=$(paste -sd, "$dir/cluster/admin.addrs")
  fio --name=data --directory="$dir/mnt" --rw=write --bs=1m --size="$data" --numjobs=4 --nrfiles=16 --end_fsync=1 \
      --ioengine=psync --group_reporting >/dev/null
  sync; echo 3 >/proc/sys/vm/drop_caches
  alone=$(fio --name=data --directory="$dir/mnt" --rw=read --bs=1m --size="$data" --numjobs=4 --nrfiles=16 --time_based \
      --runtime="$runtime" --ioengine=psync --group_reporting --output-format=json |
      python3 -c 'import json,sys; print("%.0f" % (json.load(sys.stdin)["jobs"][0]["read"]["bw_bytes"]/1e6))')
  "$weft" local node kill n3 --dir "$dir/cluster" >/dev/null
  for i in $(seq 1 60); do "$weft" node list | grep -q '^n3 .*down' && break; sleep 1; done
  sync; echo 3 >/proc/sys/vm/drop_caches
  fio --name=data --directory="$dir/mnt" --rw=read --bs=1m --size="$data" --numjobs=4 --nrfiles=16 --time_based \
      --runtime=3600 --ioengine=psync --group_reporting --output-format=json >"$dir/during.json" &
  fiopid=$!
  id=$("$weft" job start repair --policy "$policy" --priority 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  start=$(date +%s.%N)
  while ! "$weft" job view "$id" --json | python3 -c 'import json,sys; j=json.load(sys.stdin); sys.exit(0 if j["state"] in ("succeeded","failed","cancelled") else 1)'; do sleep 0.5; done
  end=$(date +%s.%N)
  kill -INT $fiopid; wait $fiopid || true
  # fio prints a line about the signal before its JSON.
  during=$(python3 -c 'import json,sys; s=open(sys.argv[1]).read(); print("%.0f" % (json.loads(s[s.index("{"):])["jobs"][0]["read"]["bw_bytes"]/1e6))' "$dir/during.json")
  "$weft" job view "$id" --json >"$dir/repair.json"
  python3 - "$dir/repair.json" "$start" "$end" "$policy" "$data" "$alone" "$during" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); start, end = float(sys.argv[2]), float(sys.argv[3])
policy, data, alone, during = sys.argv[4], sys.argv[5], float(sys.argv[6]), float(sys.argv[7])
written = j["phases"][0]["bytes"]; secs = end - start
print("| %s | %s | %.1f | %.0f | %.0f | %.0f | %.2f |" % (policy, data, secs, written / secs / 1e6, alone, during, during / alone if alone else 0))
PY
  kill -TERM $up; wait $up || true
  up=""
done
