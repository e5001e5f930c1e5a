#!/usr/bin/env bash
# mediascan read rate per drive against a plain read of the same block
# files — both in one run, on one cluster.
#
# A fresh 3-node × 4-drive local cluster; DATA bytes written through the
# mount; then, after dropping the page cache each time:
#   1. mediascan at policy high (priority 1): each drive's bytes read (the
#      scan report's per-drive bytes) over the scan phase's duration (all
#      drives are scanned at once, so this is each drive's share while they
#      all run; a drive that finishes early is under-rated);
#   2. cat of every block file of every drive, all drives at once (one
#      reader per drive, as the scan runs one node's tasks per drive):
#      each drive's bytes over its own cat time.
# Reported per drive and in total: MB/s of each, and the ratio scan / cat.
# The scan verifies CRCs and goes through the block service and the job
# engine, so a ratio well below 1 on fast storage is expected; on a disk
# the two should be close. Needs root (mount, drop_caches) and fio.
#   DATA  bytes of data to write (default 2g)
set -euo pipefail
cd "$(dirname "$0")/.."
data=${DATA:-2g}
work=$(mktemp -d /var/tmp/weft-mediascan-bench.XXXXXX)
go build -o "$work/weft-bin" ./cmd/weft
weft="$work/weft-bin"
up=""
cleanup() { [ -n "$up" ] && kill -TERM "$up" 2>/dev/null && wait "$up" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }

"$weft" local up --dir "$work/cluster" --mount "$work/mnt" --nodes 3 --drives-per-node 4 >"$work/up.log" 2>&1 &
up=$!
for i in $(seq 1 120); do grep -q '^ready:' "$work/up.log" && break; sleep 1; done
grep -q '^ready:' "$work/up.log" || { echo "cluster not ready:" >&2; cat "$work/up.log" >&2; exit 1; }
export WEFT_ADMIN=$(paste -sd, "$work/cluster/admin.addrs")
fio --name=data --directory="$work/mnt" --rw=write --bs=1m --size="$data" --numjobs=4 --nrfiles=16 --end_fsync=1 \
    --ioengine=psync --group_reporting >/dev/null
"$weft" drive list --json >"$work/drives.json"

# 1. mediascan.
drop
id=$("$weft" job start mediascan --policy high --priority 1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
while ! "$weft" job view "$id" --json | python3 -c 'import json,sys; j=json.load(sys.stdin); sys.exit(0 if j["state"] in ("succeeded","failed","cancelled") else 1)'; do sleep 0.5; done
"$weft" job view "$id" --json >"$work/scan.json"

# 2. cat of every drive's block files, all drives at once.
drop
python3 - "$work/drives.json" >"$work/cat.tsv" <<'PY'
import json, os, subprocess, sys, threading, time
drives = json.load(open(sys.argv[1]))
out = {}
def read(d):
    files = [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(d["path"], "blocks")) for f in fs]
    size = sum(os.path.getsize(f) for f in files)
    t = time.monotonic()
    # cat in batches: one process per drive at a time, like one scanner.
    for i in range(0, len(files), 500):
        subprocess.run(["cat"] + files[i:i + 500], stdout=subprocess.DEVNULL, check=True)
    out[d["id"]] = (size, time.monotonic() - t)
threads = [threading.Thread(target=read, args=(d,)) for d in drives]
for t in threads: t.start()
for t in threads: t.join()
for k, (size, secs) in out.items():
    print("%s\t%d\t%.3f" % (k, size, secs))
PY

python3 - "$work/scan.json" "$work/cat.tsv" "$work/drives.json" "$data" <<'PY'
import json, sys
from datetime import datetime
j = json.load(open(sys.argv[1]))
scan = j["phases"][0]
if j["state"] != "succeeded":
    sys.exit("mediascan %s: %s" % (j["state"], j.get("reason", "")))
def ts(s): return datetime.fromisoformat(s.replace("Z", "+00:00"))
secs = (ts(scan["ended"]) - ts(scan["started"])).total_seconds()
cat = {}
for line in open(sys.argv[2]):
    k, size, t = line.split("\t"); cat[int(k)] = (int(size), float(t))
node = {d["id"]: d["node"] for d in json.load(open(sys.argv[3]))}
print("data %s; scan phase %.1f s; policy high" % (sys.argv[4], secs))
print("| drive | node | scan MB | scan MB/s | cat MB | cat MB/s | scan/cat |")
print("|---|---|---|---|---|---|---|")
tot_s = tot_c = 0; cat_max = 0
for s in scan.get("scopes", []):
    d = int(s["scope"].lstrip("d")); b = s.get("bytes", 0)
    cb, ct = cat.get(d, (0, 0))
    sr, cr = b / secs / 1e6, (cb / ct / 1e6 if ct else 0)
    tot_s += b; tot_c += cb; cat_max = max(cat_max, ct)
    print("| %s | %s | %.0f | %.1f | %.0f | %.1f | %.2f |" % (s["scope"], node.get(d, "?"), b / 1e6, sr, cb / 1e6, cr, sr / cr if cr else 0))
ts_, tc = tot_s / secs / 1e6, (tot_c / cat_max / 1e6 if cat_max else 0)
print("| total | | %.0f | %.1f | %.0f | %.1f | %.2f |" % (tot_s / 1e6, ts_, tot_c / 1e6, tc, ts_ / tc if tc else 0))
PY
