#!/usr/bin/env bash
# One sequential reader through a weft mount, and where its time goes:
# for each binary, a fresh `weft local up` (3 nodes x 4 drives, ec:4+2)
# with its own `weft mount`, fio writes 1 GiB (1 MiB blocks, end_fsync),
# then PASSES times a cache drop and fio reads it back (1 job, 1 MiB psync,
# the side-by-side's "seq read 1 job"). Each pass prints the rate, the
# mount's CPU (user + system) per MiB read, and the machine's busy and
# iowait shares over the pass (/proc/stat), so that a change can be told
# by the CPU it saves as well as by a rate this machine swings by a fifth
# between runs. The builds take turns REPEAT times. Needs root
# (drop_caches, mounts) and fio.
#   BINS       weft binaries to compare, space-separated (default: one built
#              from this checkout; WEFT_BIN names a single one too)
#   PASSES     reads per run (default 3)
#   REPEAT     runs per binary (default 1)
#   MOUNTARGS  extra `weft mount` flags (e.g. "--readahead 8")
#   BENCH_DIR  work directory (default: new dir under /var/tmp)
set -u
cd "$(dirname "$0")/.."
work=${BENCH_DIR:-$(mktemp -d /var/tmp/weft-onereader.XXXXXX)}
mkdir -p "$work"
. scripts/lib/weft-bin.sh
if [ -n "${BINS:-}" ]; then
  bins=($BINS)
else
  bins=("$(weft_bin bench-onereader "$work")") || exit $?
fi
for b in "${bins[@]}"; do
  [ -x "$b" ] || { echo "bench-onereader: $b is not an executable file" >&2; exit 2; }
done
command -v fio >/dev/null || { echo "bench-onereader: needs fio (apt-get install fio)" >&2; exit 2; }

up_pid= mount_pid= runs=0
stop() {
  [ -n "$mount_pid" ] && { umount "$work/mnt" 2>/dev/null; kill -INT "$mount_pid" 2>/dev/null; wait "$mount_pid" 2>/dev/null; }
  [ -n "$up_pid" ] && { kill -INT "$up_pid" 2>/dev/null; wait "$up_pid" 2>/dev/null; }
  up_pid= mount_pid=
  umount -l "$work/mnt" 2>/dev/null
  # Moved aside, deleted at the end: ext4 passes over recently deleted
  # inodes when it allocates new ones (see bench-smallfiles.sh).
  if [ -d "$work/cluster" ]; then runs=$((runs + 1)); mv "$work/cluster" "$work/done.$runs"; fi
}
trap 'stop; rm -rf "$work"/done.*' EXIT

# busy_wait: "busy iowait" jiffies of the whole machine so far.
busy_wait() { awk '/^cpu /{print $2+$3+$4+$7+$8, $6}' /proc/stat; }

echo "| build | run | pass | MB/s | mount CPU ms/MiB | machine busy % | iowait % |"
echo "|---|---|---|---|---|---|---|"
for run in $(seq "${REPEAT:-1}"); do
  for b in "${bins[@]}"; do
    mkdir -p "$work/mnt"
    "$b" local up --dir "$work/cluster" --mount "" >"$work/up.log" 2>&1 &
    up_pid=$!
    for _ in $(seq 120); do grep -q '^ready:' "$work/up.log" && break; sleep 1; done
    grep -q '^ready:' "$work/up.log" || { echo "bench-onereader: cluster did not start, see $work/up.log" >&2; exit 1; }
    "$b" --admin "$(cat "$work/cluster/admin.addr")" --pki "$work/cluster/pki" mount ${MOUNTARGS:-} "$work/mnt" >"$work/mount.log" 2>&1 &
    mount_pid=$!
    for _ in $(seq 60); do mountpoint -q "$work/mnt" && break; sleep 1; done
    mountpoint -q "$work/mnt" || { echo "bench-onereader: mount failed, see $work/mount.log" >&2; exit 1; }
    fio --name=w --directory="$work/mnt" --filename=seq --rw=write --bs=1M --size=1g --ioengine=psync --end_fsync=1 >/dev/null
    for pass in $(seq "${PASSES:-3}"); do
      sync; echo 3 >/proc/sys/vm/drop_caches
      read -r b0 w0 < <(busy_wait)
      c0=$(awk '{print $14 + $15}' "/proc/$mount_pid/stat")
      t0=$(awk '{print $1}' /proc/uptime)
      kib=$(fio --name=r --directory="$work/mnt" --filename=seq --rw=read --bs=1M --size=1g --ioengine=psync --output-format=terse --terse-version=3 | awk -F';' '{print $7}')
      t1=$(awk '{print $1}' /proc/uptime)
      c1=$(awk '{print $14 + $15}' "/proc/$mount_pid/stat")
      read -r b1 w1 < <(busy_wait)
      python3 - "$(basename "$b")" "$run" "$pass" "$kib" "$c0" "$c1" "$b0" "$b1" "$w0" "$w1" "$t0" "$t1" "$(getconf CLK_TCK)" "$(nproc)" <<'EOF'
import sys
name, run, p, kib, c0, c1, b0, b1, w0, w1, t0, t1, hz, cpus = sys.argv[1:]
kib, hz, cpus = float(kib), float(hz), int(cpus)
secs = float(t1) - float(t0)
ticks = secs * hz * cpus
print(f"| {name} | {run} | {p} | {kib * 1.024 / 1000:,.0f} | {(float(c1) - float(c0)) / hz * 1000 / 1024:.2f} | "
      f"{100 * (float(b1) - float(b0)) / ticks:.0f} | {100 * (float(w1) - float(w0)) / ticks:.0f} |")
EOF
    done
    stop
  done
done
