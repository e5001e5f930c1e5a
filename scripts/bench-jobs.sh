#!/usr/bin/env bash
# Rebalance and treedelete rates at each impact policy, on fresh local
# clusters (one per policy and job, so runs do not disturb each other).
#
# rebalance: 3 nodes × 2 drives of SIZE, filled to about half through the
#   mount (fio), automatic jobs off (rebalance threshold 0, multiscan
#   disabled); one empty drive of SIZE added on each node, then
#   `weft job start rebalance --policy P`. Reported: MB moved (the job's
#   bytes written), its run time, MB/s, and the pool's spread before and
#   after.
# treedelete: FILES files of 4 KiB under one directory tree (fio, 8
#   writers), then `weft job start treedelete --path /tree --policy P`.
#   Reported: files, run time, files/s.
# Needs root (FUSE) and fio. Run it on a quiet machine.
#   SIZE   drive capacity, in MiB (default 256MiB)
#   FILES  treedelete's files (default 10000)
#   POLICIES  (default "low medium high")
set -euo pipefail
cd "$(dirname "$0")/.."
size=${SIZE:-256MiB}
files=${FILES:-10000}
policies=${POLICIES:-low medium high}
work=$(mktemp -d /var/tmp/weft-jobs-bench.XXXXXX)
go build -o "$work/weft-bin" ./cmd/weft
weft="$work/weft-bin"
up=""
down() { [ -n "$up" ] && kill -TERM "$up" 2>/dev/null && wait "$up" 2>/dev/null; up=""; }
cleanup() { down; rm -rf "$work"; }
trap cleanup EXIT

start_cluster() { # DIR
	"$weft" local up --dir "$1/c" --mount "$1/mnt" --nodes 3 --drives-per-node 2 --drive-size "$size" >"$1/up.log" 2>&1 &
	up=$!
	for _ in $(seq 1 120); do grep -q '^ready:' "$1/up.log" && break; sleep 1; done
	grep -q '^ready:' "$1/up.log" || { echo "cluster not ready:" >&2; cat "$1/up.log" >&2; exit 1; }
	export WEFT_ADMIN=$(paste -sd, "$1/c/admin.addrs")
	"$weft" job settings --rebalance-threshold 0 >/dev/null
	"$weft" job types modify multiscan --enabled false >/dev/null
}

wait_job() { # ID -> prints the job's JSON when it ends
	while ! "$weft" job view "$1" --json | python3 -c 'import json,sys; j=json.load(sys.stdin); sys.exit(0 if j["state"] in ("succeeded","failed","cancelled") else 1)'; do sleep 0.5; done
	"$weft" job view "$1" --json
}

spread() {
	"$weft" drive list --json | python3 -c '
import json,sys
f=[d["live"]["used_bytes"]/d["live"]["total_bytes"] for d in json.load(sys.stdin) if d.get("live") and d["live"]["total_bytes"]]
print("%.1f%%-%.1f%%" % (100*min(f), 100*max(f)))'
}

printf '%-10s %-8s %10s %9s %9s %s\n' JOB POLICY AMOUNT SECONDS RATE NOTE
for p in $policies; do
	d="$work/rb-$p"; mkdir -p "$d"
	start_cluster "$d"
	# 45 % of 6 drives in ec:4+2 (1.5 bytes stored per byte), over 4 writers.
	per=$(python3 -c "import re;m=re.fullmatch(r'(\d+)MiB','$size');print(int(m.group(1))*6*45//100*2//3//4)")
	fio --name=fill --directory="$d/mnt" --rw=write --bs=1m --size="${per}m" --numjobs=4 --nrfiles=8 \
		--ioengine=psync --end_fsync=1 >/dev/null
	for n in n1 n2 n3; do "$weft" drive add "$n" "$d/c/nodes/$n/disk-new" --capacity "$size" >/dev/null; done
	sleep 3 # let every node publish the new drives' usage
	before=$(spread)
	id=$("$weft" job start rebalance --policy "$p" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
	wait_job "$id" >"$d/job.json"
	sleep 2
	after=$(spread)
	python3 - "$d/job.json" "$p" "$before" "$after" <<'PY'
import json, sys
from datetime import datetime
j = json.load(open(sys.argv[1]))
def t(s): return datetime.fromisoformat(s.replace("Z", "+00:00"))
sec = (t(j["ended"]) - t(j["started"])).total_seconds()
mb = sum(ph.get("bytes", 0) for ph in j["phases"]) / 1e6
print("%-10s %-8s %8.0f MB %9.1f %6.1f MB/s %s, spread %s -> %s" % ("rebalance", sys.argv[2], mb, sec, mb / sec, j["state"], sys.argv[3], sys.argv[4]))
PY
	down

	d="$work/td-$p"; mkdir -p "$d"
	start_cluster "$d"
	mkdir -p "$d/mnt/tree"
	fio --name=tree --directory="$d/mnt/tree" --rw=write --bs=4k --filesize=4k --nrfiles=$((files / 8)) --numjobs=8 \
		--ioengine=psync --create_on_open=1 --openfiles=1 --file_service_type=sequential >/dev/null
	n=$(find "$d/mnt/tree" -type f | wc -l)
	id=$("$weft" job start treedelete --path /tree --policy "$p" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
	wait_job "$id" >"$d/job.json"
	python3 - "$d/job.json" "$p" "$n" <<'PY'
import json, sys
from datetime import datetime
j = json.load(open(sys.argv[1]))
def t(s): return datetime.fromisoformat(s.replace("Z", "+00:00"))
sec = (t(j["ended"]) - t(j["started"])).total_seconds()
n = int(sys.argv[3])
print("%-10s %-8s %7d files %7.1f %6.0f files/s %s" % ("treedelete", sys.argv[2], n, sec, n / sec, j["state"]))
PY
	down
done
