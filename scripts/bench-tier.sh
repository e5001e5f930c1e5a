#!/usr/bin/env bash
# Migration throughput of the tier job at each impact policy, against a
# plain copy of the same files between two raw directories on the same
# disk — all in one run.
#
# One 3-node local cluster (insecure: the cost measured is the job's, not
# TLS's) with two pools on directories of this disk: fast (mirror:2, ssd)
# and capacity (ec:2+1, hdd), three drives each. SIZE bytes of files of
# mixed sizes are written through the mount into fast (by a SET POOL rule):
# 50 % of the bytes in 64 MiB files, 30 % in 4 MiB, 15 % in 1 MiB and 5 %
# in 64 KiB (10 GiB: about 10,600 files). For each impact policy a MIGRATE rule moves them all to
# capacity (weft policy apply --policy P), timed by the job's act phase;
# between runs they go back to fast at the high policy (not reported).
# The baseline copies the same files with cp between two directories of
# the disk, then syncs. Needs root (mount).
#   SIZE   bytes of data (default 2g; the issue's figure is 10g)
set -euo pipefail
cd "$(dirname "$0")/.."
size=${SIZE:-2g}
work=$(mktemp -d /var/tmp/weft-tier-bench.XXXXXX)
go build -o "$work/weft-bin" ./cmd/weft
weft="$work/weft-bin"
up=""
cleanup() { [ -n "$up" ] && kill -TERM "$up" 2>/dev/null && wait "$up" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
bytes=$(python3 -c 'import sys; s=sys.argv[1].lower(); m={"k":1<<10,"m":1<<20,"g":1<<30}; print(int(float(s[:-1])*m[s[-1]]) if s[-1] in m else int(s))' "$size")

# The files, once, on the raw disk.
mkdir -p "$work/src"
python3 - "$work/src" "$bytes" <<'PY'
import os, sys
d, total = sys.argv[1], int(sys.argv[2])
n = 0
for share, fsize in ((0.5, 64 << 20), (0.3, 4 << 20), (0.15, 1 << 20), (0.05, 64 << 10)):
    sub = os.path.join(d, "f%d" % fsize)
    os.makedirs(sub, exist_ok=True)
    for i in range(max(1, int(total * share) // fsize)):
        with open(os.path.join(sub, "%06d" % i), "wb") as f:
            f.write(os.urandom(fsize))
        n += 1
print(n, file=sys.stderr)
PY
files=$(find "$work/src" -type f | wc -l)
sync; echo 3 >/proc/sys/vm/drop_caches
start=$(date +%s.%N)
cp -r "$work/src" "$work/copy"
sync
end=$(date +%s.%N)
raw=$(python3 -c 'import sys; print("%.1f" % (float(sys.argv[1]) / (float(sys.argv[3]) - float(sys.argv[2])) / 1e6))' "$bytes" "$start" "$end")
rawfs=$(python3 -c 'import sys; print("%.0f" % (float(sys.argv[1]) / (float(sys.argv[3]) - float(sys.argv[2]))))' "$files" "$start" "$end")
rm -rf "$work/copy"

"$weft" local up --insecure --nodes 3 --drives-per-node 2 --dir "$work/cluster" --mount "$work/mnt" >"$work/up.log" 2>&1 &
up=$!
for i in $(seq 1 120); do grep -q '^ready:' "$work/up.log" && break; sleep 1; done
grep -q '^ready:' "$work/up.log" || { cat "$work/up.log"; exit 1; }
export WEFT_ADMIN=$(paste -sd, "$work/cluster/admin.addrs")
"$weft" pool create fast --protection mirror:2 --class ssd >/dev/null
"$weft" pool create capacity --protection ec:2+1 --class hdd >/dev/null
for n in n1 n2 n3; do
  "$weft" drive add $n "$work/cluster/nodes/$n/ssd" --pool fast --class ssd >/dev/null
  "$weft" drive add $n "$work/cluster/nodes/$n/hdd" --pool capacity --class hdd >/dev/null
done
echo "RULE 'default' SET POOL 'fast'" >"$work/place.pol"
"$weft" policy install "$work/place.pol" >/dev/null
sleep 3 # the mount follows the policy by a watch
cp -r "$work/src" "$work/mnt/data"
sync

idle() { # wait until no job runs (the multiscan that added drives start)
  while "$weft" job list --json | python3 -c 'import json,sys; sys.exit(0 if any(j["state"] in ("running","queued","system_paused","cancelling") for j in json.load(sys.stdin)) else 1)'; do
    sleep 2
  done
}

apply() { # POLICY FROM TO -> job view JSON path
  idle
  printf "RULE 'default' SET POOL 'fast'\nRULE 'm' MIGRATE FROM POOL '%s' TO POOL '%s'\n" "$2" "$3" >"$work/m.pol"
  "$weft" policy install "$work/m.pol" >/dev/null
  id=$("$weft" policy apply --policy "$1" --priority 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  while ! "$weft" job view "$id" --json >"$work/job.json" 2>/dev/null ||
        ! python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["state"] in ("succeeded","failed","cancelled") else 1)' "$work/job.json"; do
    sleep 1
  done
  echo "$work/job.json"
}

echo "data: $size in $files files (50% 64 MiB, 30% 4 MiB, 15% 1 MiB, 5% 64 KiB)"
echo
echo "| copy | MB/s | files/s | ratio to raw copy |"
echo "|---|---|---|---|"
echo "| raw cp + sync, same disk | $raw | $rawfs | 1.00 |"
for policy in low medium high; do
  j=$(apply "$policy" fast capacity)
  python3 - "$j" "$bytes" "$files" "$raw" "$policy" <<'PY'
import json, sys
from datetime import datetime
j = json.load(open(sys.argv[1])); total, files, raw, policy = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
if j["state"] != "succeeded":
    print("| tier job at %s | %s: %s | | |" % (policy, j["state"], j.get("reason", ""))); sys.exit(0)
act = [p for p in j["phases"] if p["name"] == "act"][0]
t = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))
secs = (t(act["ended"]) - t(act["started"])).total_seconds()
print("| tier job at %s (act phase %.1f s) | %.1f | %.0f | %.2f |" % (policy, secs, total / secs / 1e6, act["items"] / secs, total / secs / 1e6 / raw))
PY
  apply high capacity fast >/dev/null
done
