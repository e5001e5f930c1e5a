#!/usr/bin/env bash
# The policy dry run over a namespace of about 1,000,000 files, on a fresh
# local cluster (3 nodes x 4 drives, embedded etcd, TLS, no mount):
#   1. `weft bench populate` writes the test namespace straight into etcd
#      (TOPS x DIRS x OBJECTS objects of the fsck mix: 4 x 222 x 1000 is
#      1,002,552 files, 1,032,000 inodes); reported: inodes, seconds,
#      inodes/s;
#   2. the etcd database's size: each member's bbolt file
#      (DIR/nodes/nN/etcd/member/snap/db);
#   3. `weft policy test` with a policy of ten rules (SET POOL, MIGRATE
#      with THRESHOLD and WEIGHT, DELETE, LIST; LIKE, sizes, times, mode,
#      owner) over the whole namespace, with a --timeout long enough to
#      see it whole; reported: files, seconds, files/s;
#   4. the baseline of step 1: the same loader committing one call per
#      transaction (--batch 1, what Create, Mkdir and Link cost one by one)
#      on BASE_DIRS x 1000 objects more, in the loaded cluster;
#   5. with the cluster stopped, `go test -bench . ./internal/policy` in
#      the same session: the evaluation's pure-CPU rate (BenchmarkEvaluate,
#      all 50 rules of its policy per file), for the ratio.
# Prints one table. Needs nothing but Go and python3 (no root, no FUSE).
# The machine's speed swings 2-5x between runs: compare ratios of one run.
#   TOPS, DIRS, OBJECTS  the namespace's shape (default 4 222 1000)
#   TIMEOUT    the dry run's --timeout (default 20m)
#   BASE_DIRS  subdirectories of the baseline (default 5: 5,810 inodes)
#   BENCH_DIR  work directory (default: a new one under /var/tmp, removed
#              at the end unless KEEP=1)
#   CPU_BENCH  0 skips step 5
set -euo pipefail
cd "$(dirname "$0")/.."
tops=${TOPS:-4}
dirs=${DIRS:-222}
objects=${OBJECTS:-1000}
timeout=${TIMEOUT:-20m}
work=${BENCH_DIR:-$(mktemp -d /var/tmp/weft-policy-bench.XXXXXX)}
if [ -e "$work/c" ]; then
	echo "bench-policy: $work/c exists (a cluster of an earlier run): remove it, or set BENCH_DIR to a new directory" >&2
	exit 2
fi
mkdir -p "$work"
weft="$work/weft"
up=""
down() {
	if [ -n "$up" ]; then
		kill -TERM "$up" 2>/dev/null || true
		wait "$up" 2>/dev/null || true
		up=""
	fi
}
cleanup() {
	down
	[ "${KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

echo "bench-policy: building weft, starting a cluster in $work/c" >&2
go build -o "$weft" ./cmd/weft
"$weft" local up --dir "$work/c" --mount "" >"$work/up.log" 2>&1 &
up=$!
for _ in $(seq 1 120); do grep -q '^ready:' "$work/up.log" && break; sleep 1; done
grep -q '^ready:' "$work/up.log" || { echo "bench-policy: cluster not ready:" >&2; cat "$work/up.log" >&2; exit 1; }
WEFT_ADMIN=$(paste -sd, "$work/c/admin.addrs")
WEFT_PKI="$work/c/pki"
export WEFT_ADMIN WEFT_PKI
sleep 5 # let the new cluster's own start-up work finish

# 1. The namespace.
"$weft" bench populate --tops "$tops" --dirs "$dirs" --objects "$objects" --json >"$work/populate.json"

# 2. The etcd database, once its writes have settled.
sleep 2
dbsize=$(python3 - "$work/c/nodes" <<'PY'
import glob, os, sys
sizes = [os.path.getsize(p) for p in glob.glob(os.path.join(sys.argv[1], "*", "etcd", "member", "snap", "db"))]
print(max(sizes) if sizes else 0)
PY
)

# 3. The dry run: pools the rules name, then the policy over everything.
"$weft" pool create capacity --protection ec:4+2 >/dev/null
"$weft" pool create fast --protection mirror:3 >/dev/null
cat >"$work/bench.pol" <<'POL'
/* scripts/bench-policy.sh: ten rules over the populated namespace */
DEFINE(age, CURRENT_TIMESTAMP - MODIFICATION_TIME)
RULE 'logs' SET POOL 'capacity' PROTECTION 'ec:4+2' WHERE NAME LIKE '%.log'
RULE 'linked' SET POOL 'fast' WHERE NAME LIKE 'h%.dat' OR NAME LIKE '%.lnk'
RULE 'default' SET POOL 'default'
RULE 'cold' MIGRATE FROM POOL 'default' THRESHOLD(80,60) WEIGHT(DAYS(age) * KB_ALLOCATED)
     TO POOL 'capacity' WHERE age > INTERVAL '30' DAYS AND FILE_SIZE < 1M
RULE 'warm' MIGRATE FROM POOL 'capacity' TO POOL 'fast' LIMIT(90)
     WHERE CURRENT_TIMESTAMP - ACCESS_TIME < INTERVAL '1' HOURS
RULE 'tmp' DELETE WHERE NAME LIKE '%.tmp'
     OR (PATH_NAME LIKE '/populate/t0001/%' AND MODIFICATION_TIME < TIMESTAMP '2000-01-01')
RULE 'huge' DELETE WHERE FILE_SIZE > 10G AND age > INTERVAL '365' DAYS
RULE 'cross' LIST 'cross-linked' WHERE PATH_NAME LIKE '/populate/t%/x%/f%.dat'
RULE 'linked-list' LIST 'hard-linked' WHERE NLINK > 1 AND FILE_SIZE = 0
RULE 'root-644' LIST 'root-files' WHERE MODE = '-rw-r--r--' AND USER_ID = 0
     AND CREATION_TIME > TIMESTAMP '2020-01-01'
POL
start=$(date +%s.%N)
"$weft" policy test "$work/bench.pol" --timeout "$timeout" --json >"$work/dryrun.json"
end=$(date +%s.%N)

# 4. The baseline: one call per transaction.
"$weft" bench populate --tops 1 --dirs "${BASE_DIRS:-5}" --objects 1000 --under /baseline --batch 1 --json 2>/dev/null >"$work/baseline.json"
down

# 5. The evaluation alone, same session.
: >"$work/cpu.txt"
if [ "${CPU_BENCH:-1}" != 0 ]; then
	go test -run '^$' -bench . ./internal/policy >"$work/cpu.txt"
fi

python3 - "$work" "$start" "$end" "$dbsize" <<'PY'
import json, re, sys
work, start, end, db = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
p = json.load(open(work + "/populate.json"))
b = json.load(open(work + "/baseline.json"))
d = json.load(open(work + "/dryrun.json"))
cpu = {}
for line in open(work + "/cpu.txt"):
    m = re.match(r"Benchmark(\w+?)(-\d+)?\s+\d+\s.*?([\d.e+]+) files/s", line)
    if m:
        cpu[m.group(1)] = float(m.group(3))
rows = [
    ("namespace", "%d inodes, %d files, %d directories, %d hard links" % (p["inodes"], p["files"], p["directories"], p["hard_links"])),
    ("etcd db (largest member)", "%.0f MiB, %.0f bytes/inode" % (db / 2**20, db / max(p["inodes"], 1))),
    ("populate", "%.1f s, %.0f inodes/s, %d transactions" % (p["seconds"], p["inodes_per_s"], p["transactions"])),
    ("populate --batch 1", "%d inodes in %.1f s, %.0f inodes/s" % (b["inodes"], b["seconds"], b["inodes_per_s"])),
    ("populate / --batch 1", "%.1f" % (p["inodes_per_s"] / b["inodes_per_s"])),
    ("dry run (node)", "%d files of %d inodes in %.1f s: %.0f files/s%s" % (d["files"], d["scanned"], d["seconds"], d["files"] / max(d["seconds"], 1e-9),
        "" if d["complete"] else " (PARTIAL: stopped at LIN %d)" % d.get("next_lin", 0))),
    ("dry run (CLI, wall)", "%.1f s" % (end - start)),
]
for name in ("Evaluate", "EvaluateByRule", "Place"):
    if name in cpu:
        rows.append(("CPU %s (50 rules)" % name, "%.0f files/s" % cpu[name]))
if "Evaluate" in cpu and d["seconds"] > 0:
    rows.append(("dry run / CPU Evaluate", "%.3f" % ((d["files"] / d["seconds"]) / cpu["Evaluate"])))
w = max(len(r[0]) for r in rows)
for k, v in rows:
    print("%-*s  %s" % (w, k, v))
print()
print("%-12s %-9s %9s %9s" % ("RULE", "KIND", "MATCHED", "ACTS ON"))
for r in d["rules"]:
    print("%-12s %-9s %9d %9d" % (r["rule"], r["kind"], r["matched"], r["selected"]))
PY
