#!/usr/bin/env bash
# One sequential reader through a weft mount with the kernel's readahead
# for the mount (the FUSE bdi's read_ahead_kb) at its default and larger:
# a fresh `weft local up` (3 nodes x 4 drives, ec:4+2), its own `weft
# mount`, fio writes 1 GiB (1 MiB blocks, end_fsync), then ROUNDS times,
# for each readahead of RA_KB, a cache drop and fio reads it back (1 job,
# 1 MiB psync). Prints MiB/s per round and readahead. Needs root
# (drop_caches, mounts, /sys/class/bdi) and fio.
#   WEFT_BIN   weft binary (default: built from this checkout)
#   RA_KB      readaheads to try besides the default (default "4096 16384")
#   ROUNDS     rounds (default 3)
#   BENCH_DIR  work directory (default: new dir under /var/tmp)
set -u
cd "$(dirname "$0")/.."
W=${BENCH_DIR:-$(mktemp -d /var/tmp/weft-readahead.XXXXXX)}
mkdir -p "$W"
. scripts/lib/weft-bin.sh
B=$(weft_bin bench-readahead "$W") || exit $?
rm -rf "$W/mnt" "$W/cl"; mkdir -p $W/mnt; cd $W
$B local up --dir $W/cl --mount "" > up.log 2>&1 &
UP=$!
for i in $(seq 120); do grep -q '^ready' up.log && break; sleep 1; done
ADMIN=$(cat $W/cl/admin.addr); PKI=$W/cl/pki
$B --admin $ADMIN --pki $PKI mount --as mount $W/mnt > mount.log 2>&1 &
MP=$!
for i in $(seq 60); do mountpoint -q $W/mnt && break; sleep 1; done
bdi=$(mountpoint -d $W/mnt); echo "bdi $bdi default ra $(cat /sys/class/bdi/$bdi/read_ahead_kb)"
mkdir $W/mnt/d
fio --name=w --directory=$W/mnt/d --rw=write --bs=1M --size=1g --numjobs=1 --ioengine=psync --end_fsync=1 --output-format=terse --terse-version=3 >/dev/null
def=$(cat /sys/class/bdi/$bdi/read_ahead_kb)
for round in $(seq "${ROUNDS:-3}"); do
for ra in $def ${RA_KB:-4096 16384}; do
  echo $ra > /sys/class/bdi/$bdi/read_ahead_kb
  sync; echo 3 > /proc/sys/vm/drop_caches
  bw=$(fio --name=w --directory=$W/mnt/d --rw=read --bs=1M --size=1g --numjobs=1 --ioengine=psync --output-format=json | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["jobs"][0]["read"]["bw"]/1024))')
  echo "round $round ra ${ra}KiB: $bw MiB/s"
done
done
echo $def > /sys/class/bdi/$bdi/read_ahead_kb
umount $W/mnt; kill $MP 2>/dev/null; wait $MP
kill -INT $UP; wait $UP
