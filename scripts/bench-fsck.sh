#!/usr/bin/env bash
# The fsck job's benchmarks (issue 17), all in one run, on fresh local
# clusters (N nodes x 2 drives, embedded etcd members in the first three
# nodes, TLS, --pprof):
#   1. main cluster (3 nodes, mounted): `weft bench populate` writes a
#      consistent namespace of TOPS x DIRS x OBJECTS objects straight into
#      etcd (4 x 222 x 1000: 1,032,000 inodes); recorded: inodes, the etcd
#      database's size (each member's bbolt file, the largest);
#   2. the baseline read: `weft policy test` of one LIST rule that matches
#      nothing, one pass reading every inode (files/s);
#   3. the scan: `weft fsck start --dry-run --only namespace --policy
#      POLICY`; reported: its seconds, each phase's seconds, inodes/s
#      (namespace inodes / job seconds); a 20 s CPU profile of every node
#      is taken meanwhile (PROFILE_DIR, if set, keeps them);
#   4. impact: a client creating empty files through the mount for WINDOW
#      seconds (one python3 process, one file at a time): with no fsck
#      (before and after), and during an fsck dry run at each SPEEDS
#      (per node: the cluster's limit is N x nodes; 0 = no limit), which
#      is stopped after the window; reported: creates/s, the ratio to the
#      mean of the two baselines, and the job's checks/s meanwhile;
#   5. scaling: the scan of step 3 on fresh clusters of each SCALE_NODES
#      (other than 3, which is step 3's), same namespace. The fsck job's
#      workers run on every live node and its tasks are split per node;
#      a local cluster has an etcd member on each of its first three
#      nodes, so 1, 2 and 3 nodes also mean 1, 2 and 3 members;
#   6. repairs: per kind in REPAIR_KINDS, a fresh 3-node cluster with a
#      tree of 1 x 100 x 1 objects (702 inodes, 500 files) and FAULTS
#      files made with the kind's fault (20,000 of 20,500 files with the
#      default); a dry
#      run, a repairing run (`weft fsck start --only namespace`), a dry
#      run that must find nothing; reported: repaired/s of the repairing
#      run, found/s of the dry run.
# Prints one table. Needs root (FUSE: /dev/fuse), Go and python3.
# The machine's speed swings 2-5x between runs: compare ratios of one run.
#   TOPS, DIRS, OBJECTS  the namespace (default 4 222 1000: ~1.03M inodes)
#   POLICY       the scans' impact policy (default high)
#   SPEEDS       fsck --speed values of step 4 (default "0 50000 20000 10000 5000")
#   WINDOW       seconds of each creates window (default 20)
#   SCALE_NODES  cluster sizes of step 5 (default "1 2 3"; "" skips it)
#   REPAIR_KINDS (default "missing-backpointer wrong-entry"; "" skips it)
#   FAULTS       files with a fault per repair cluster (default 20000)
#   SMALL=1      a run of a few minutes: 1 x 20 x 1000 objects (~23k
#                inodes), WINDOW 10, FAULTS 2000
#   BENCH_DIR    work directory (default: a new one under /var/tmp,
#                removed at the end unless KEEP=1)
#   PROFILE_DIR  where to copy step 3's CPU profiles (default: not kept)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${SMALL:-0}" = 1 ]; then
	: "${TOPS:=1}" "${DIRS:=20}" "${WINDOW:=10}" "${FAULTS:=2000}"
fi
tops=${TOPS:-4}
dirs=${DIRS:-222}
objects=${OBJECTS:-1000}
policy=${POLICY:-high}
speeds=${SPEEDS-0 50000 20000 10000 5000}
window=${WINDOW:-20}
scale_nodes=${SCALE_NODES-1 2 3}
repair_kinds=${REPAIR_KINDS-missing-backpointer wrong-entry}
faults=${FAULTS:-20000}
work=${BENCH_DIR:-$(mktemp -d /var/tmp/weft-fsck-bench.XXXXXX)}
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
log() { echo "bench-fsck: $(date -u +%H:%M:%S) $*" >&2; }

# start_cluster DIR NODES MOUNT: a fresh cluster in DIR/c, mounted at
# MOUNT unless it is "".
start_cluster() {
	if [ -e "$1/c" ]; then
		echo "bench-fsck: $1/c exists (a cluster of an earlier run): remove it, or set BENCH_DIR to a new directory" >&2
		exit 2
	fi
	mkdir -p "$1"
	"$weft" local up --dir "$1/c" --nodes "$2" --drives-per-node 2 --mount "$3" --pprof >"$1/up.log" 2>&1 &
	up=$!
	for _ in $(seq 1 180); do grep -q '^ready:' "$1/up.log" && break; sleep 1; done
	grep -q '^ready:' "$1/up.log" || { echo "bench-fsck: cluster not ready:" >&2; cat "$1/up.log" >&2; exit 1; }
	WEFT_ADMIN=$(paste -sd, "$1/c/admin.addrs")
	WEFT_PKI="$1/c/pki"
	export WEFT_ADMIN WEFT_PKI
	"$weft" job types modify multiscan --enabled false >/dev/null 2>&1 || true
	sleep 5 # let the new cluster's own start-up work finish
}

dbsize() { # DIR -> the largest member's bbolt file, in bytes
	python3 - "$1/c/nodes" <<'PY'
import glob, os, sys
sizes = [os.path.getsize(p) for p in glob.glob(os.path.join(sys.argv[1], "*", "etcd", "member", "snap", "db"))]
print(max(sizes) if sizes else 0)
PY
}

ended() { # JSON file of a job view -> 0 once the job has ended
	python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["state"] in ("succeeded","failed","cancelled") else 1)' "$1"
}

# fsck OUT ARGS...: starts an fsck job, waits for its end, leaves its
# view in OUT.
fsck() {
	local out=$1 id
	shift
	id=$("$weft" fsck start --only namespace --policy "$policy" "$@" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
	until "$weft" job view "$id" --json >"$out" 2>/dev/null && ended "$out"; do sleep 1; done
}

# profile DIR SECONDS: a CPU profile of every node of DIR's cluster.
profile() {
	local i=0 a crt
	crt=$(ls "$1"/c/pki/admin-*.crt | head -1)
	for a in $(tr ',' ' ' <"$1/c/admin.addrs"); do
		i=$((i + 1))
		curl -sk --cert "$crt" --key "${crt%.crt}.key" \
			-o "$1/cpu-n$i.pprof" "https://$a/debug/pprof/profile?seconds=$2" &
	done
	wait
}

creates() { # DIR SECONDS -> creates/s of one process making empty files in DIR
	mkdir -p "$1"
	python3 - "$1" "$2" <<'PY'
import os, sys, time
d, secs = sys.argv[1], float(sys.argv[2])
n, t0 = 0, time.monotonic()
while time.monotonic() - t0 < secs:
    os.close(os.open(os.path.join(d, "f%07d" % n), os.O_CREAT | os.O_WRONLY, 0o644))
    n += 1
print(n / (time.monotonic() - t0))
PY
}

log "building weft"
go build -o "$weft" ./cmd/weft
: >"$work/rows.txt"
row() { printf '%s\t%s\n' "$1" "$2" >>"$work/rows.txt"; }

# 1. The main cluster and its namespace.
m="$work/main"
log "main cluster: 3 nodes, populate $tops x $dirs x $objects"
start_cluster "$m" 3 "$m/mnt"
"$weft" bench populate --tops "$tops" --dirs "$dirs" --objects "$objects" --json >"$m/populate.json"
sleep 2
echo "$(dbsize "$m")" >"$m/db"
python3 - "$m" "$work/rows.txt" <<'PY'
import json, sys
m, rows = sys.argv[1], open(sys.argv[2], "a")
p = json.load(open(m + "/populate.json"))
db = int(open(m + "/db").read())
rows.write("namespace\t%d inodes (%d files, %d directories, %d hard links)\n" % (p["inodes"], p["files"], p["directories"], p["hard_links"]))
rows.write("etcd db (largest of 3 members)\t%.0f MiB, %.0f bytes/inode\n" % (db / 2**20, db / max(p["inodes"], 1)))
rows.write("populate\t%.1f s, %.0f inodes/s\n" % (p["seconds"], p["inodes_per_s"]))
PY

# 2. One pass reading every inode (the policy engine's dry run).
cat >"$m/none.pol" <<'POL'
RULE 'none' LIST 'none' WHERE FILE_SIZE < 0
POL
log "baseline read: policy test"
"$weft" policy test "$m/none.pol" --timeout 30m --json >"$m/read.json" 2>"$m/read.err" || true

# 3. The scan, profiled.
log "scan: fsck --dry-run --policy $policy"
(sleep 10; profile "$m" 20) &
prof=$!
fsck "$m/scan.json" --dry-run
wait "$prof" || true
if [ -n "${PROFILE_DIR:-}" ]; then mkdir -p "$PROFILE_DIR" && cp "$m"/cpu-n*.pprof "$PROFILE_DIR"/ 2>/dev/null || true; fi

# 4. Impact on a client creating files.
base1=$(creates "$m/mnt/impact/base1" "$window")
log "impact: no fsck: $base1 creates/s"
: >"$m/impact.txt"
for s in $speeds; do
	sp=(); [ "$s" != 0 ] && sp=(--speed "$s")
	id=$("$weft" fsck start --dry-run --only namespace --policy "$policy" "${sp[@]}" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
	sleep 2 # past the first phase's split
	r=$(creates "$m/mnt/impact/s$s" "$window")
	"$weft" job view "$id" --json >"$m/imp-$s.json"
	"$weft" fsck stop >/dev/null 2>&1 || true
	until "$weft" job view "$id" --json >"$m/imp-$s-end.json" 2>/dev/null && ended "$m/imp-$s-end.json"; do sleep 1; done
	log "impact: speed $s: $r creates/s"
	echo "$s $r $m/imp-$s.json" >>"$m/impact.txt"
done
base2=$(creates "$m/mnt/impact/base2" "$window")
log "impact: no fsck, after: $base2 creates/s"
down

# 5. Scaling over nodes.
: >"$work/scale.txt"
for n in $scale_nodes; do
	if [ "$n" = 3 ]; then
		echo "3 $m/scan.json $m/db" >>"$work/scale.txt"
		continue
	fi
	d="$work/scale$n"
	log "scaling: $n nodes"
	start_cluster "$d" "$n" ""
	"$weft" bench populate --tops "$tops" --dirs "$dirs" --objects "$objects" --json >"$d/populate.json"
	sleep 2
	echo "$(dbsize "$d")" >"$d/db"
	fsck "$d/scan.json" --dry-run
	down
	echo "$n $d/scan.json $d/db" >>"$work/scale.txt"
done

# 6. Repairs.
: >"$work/repair.txt"
for k in $repair_kinds; do
	d="$work/repair-$k"
	log "repair: $k x $faults"
	start_cluster "$d" 3 ""
	"$weft" bench populate --tops 1 --dirs 100 --objects 1 --inject "$k" --faults "$faults" --json >"$d/populate.json"
	fsck "$d/dry.json" --dry-run
	fsck "$d/repair.json"
	fsck "$d/after.json" --dry-run
	down
	echo "$k $d" >>"$work/repair.txt"
done

python3 - "$work" "$m" "$base1" "$base2" "$policy" <<'PY'
import json, sys
from datetime import datetime
work, m, b1, b2, policy = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
rows = [tuple(l.rstrip("\n").split("\t", 1)) for l in open(work + "/rows.txt")]

def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")) if s else None

def secs(j):
    a, b = ts(j.get("started")), ts(j.get("ended"))
    return (b - a).total_seconds() if a and b else float("nan")

def counts(j):
    c = {}
    for p in j["phases"]:
        for s in p.get("scopes") or []:
            for k, v in (s.get("counts") or {}).items():
                c[k] = c.get(k, 0) + v
    return c

def phases(j):
    return ", ".join("%s %.1f" % (p["name"], (ts(p["ended"]) - ts(p["started"])).total_seconds())
                     for p in j["phases"] if p.get("started") and p.get("ended"))

inodes = json.load(open(m + "/populate.json"))["inodes"]
try:
    r = json.load(open(m + "/read.json"))
    read = r["scanned"] / r["seconds"]
    rows.append(("read every inode (policy test)", "%d inodes in %.1f s: %.0f inodes/s" % (r["scanned"], r["seconds"], read)))
except Exception as e:
    read = None
    rows.append(("read every inode (policy test)", "failed: %s" % open(m + "/read.err").read().strip()[:200]))
s = json.load(open(m + "/scan.json"))
rate = inodes / secs(s)
rows.append(("fsck dry run, 3 nodes, %s" % policy, "%s, %.1f s: %.0f inodes/s (phases s: %s); checked %d, findings %d" % (
    s["state"], secs(s), rate, phases(s), counts(s).get("checked", 0), sum(v for k, v in counts(s).items() if k.endswith(".found")))))
if read:
    rows.append(("fsck dry run / read", "%.3f" % (rate / read)))
rows.append(("target 100,000 inodes/s", "%.2f of it" % (rate / 1e5)))
w = max(len(r[0]) for r in rows)
for k, v in rows:
    print("%-*s  %s" % (w, k, v))

print("\nIMPACT: one client creating empty files through the mount, %s fsck dry run (speed per node; 3 nodes)" % policy)
base = (b1 + b2) / 2
print("%-14s %10s %8s %16s" % ("FSCK SPEED", "CREATES/S", "RATIO", "FSCK CHECKS/S"))
print("%-14s %10.0f %8s %16s" % ("none (before)", b1, "%.2f" % (b1 / base), "-"))
for l in open(m + "/impact.txt"):
    sp, r, f = l.split()
    j = json.load(open(f))
    c = counts(j).get("checked", 0)
    el = (datetime.now().astimezone() - ts(j["started"])).total_seconds() if j.get("started") else 0
    # the job view was taken at the window's end: checks over its run so far
    el = (ts(json.load(open(f.replace(".json", "-end.json"))).get("ended") or j["started"]) - ts(j["started"])).total_seconds() if j.get("started") else 0
    print("%-14s %10.0f %8.2f %16s" % ("unlimited" if sp == "0" else sp, float(r), float(r) / base, "%.0f" % (c / el) if el > 0 else "-"))
print("%-14s %10.0f %8s %16s" % ("none (after)", b2, "%.2f" % (b2 / base), "-"))

print("\nSCALING: the same dry run, fresh cluster of N nodes (N etcd members, at most 3)")
print("%-6s %10s %9s %12s %10s %s" % ("NODES", "INODES", "SECONDS", "INODES/S", "ETCD MiB", "PHASES (s)"))
for l in open(work + "/scale.txt"):
    n, f, db = l.split()
    j = json.load(open(f))
    pop = json.load(open(f.replace("scan.json", "populate.json")))
    print("%-6s %10d %9.1f %12.0f %10.0f %s" % (n, pop["inodes"], secs(j), pop["inodes"] / secs(j), int(open(db).read()) / 2**20, phases(j)))

print("\nREPAIR: 3 nodes, tree of 1 x 100 x 1 objects + FAULTS files each with the fault")
print("%-20s %8s %8s %9s %10s %9s %10s %s" % ("KIND", "INODES", "FOUND", "DRY s", "FOUND/S", "REPAIR s", "REPAIRED/S", "AFTER"))
for l in open(work + "/repair.txt"):
    k, d = l.split()
    pop = json.load(open(d + "/populate.json"))
    dry, rep, aft = (json.load(open(d + "/%s.json" % x)) for x in ("dry", "repair", "after"))
    fd = counts(dry).get(k + ".found", 0)
    rp = counts(rep).get(k + ".repaired", 0)
    left = sum(v for kk, v in counts(aft).items() if kk.endswith(".found"))
    print("%-20s %8d %8d %9.1f %10.0f %9.1f %10.0f %s" % (k, pop["inodes"] + pop.get("injected", 0), fd, secs(dry), fd / secs(dry), secs(rep), rp / secs(rep),
        "%d findings (%s)" % (left, aft["state"])))
PY
