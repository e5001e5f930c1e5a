#!/usr/bin/env bash
# NFS service address failover times: runs the failure test
# (tests/nfs_failover_test.go, TestNFSFailover: a 3-node cluster, one
# service address, nfs-cp of a checkstream stream while a fault is
# injected) RUNS times and prints, per fault kind, every time from the
# fault to the first request served again (a client's nfs-ls probing
# every 100 ms), the median and the worst. Each run also checks that every
# byte of every copy is valid; a failed run is reported and its times are
# kept. Needs root, iptables, iproute2 and libnfs-utils (nfs-cp, nfs-cat,
# nfs-ls), as the test does. About 3 minutes a run.
#   usage: scripts/bench-nfs-failover.sh [RUNS]   (default 5)
#   WEFT_BINARY  a weft binary to test (default: built by the test)
# A failed run's cluster logs are kept under the logs directory it prints.
set -euo pipefail
runs=${1:-5}
case $runs in ''|*[!0-9]*|0) echo "usage: $0 [RUNS]   (RUNS: a positive number of runs, default 5)" >&2; exit 2;; esac
cd "$(dirname "$0")/.."
out=$(mktemp -d /var/tmp/weft-nfs-failover.XXXXXX)
echo "logs in $out"
for i in $(seq "$runs"); do
  # the cluster's logs of a failed run are kept under $out/logs
  if WEFT_TEST_LOGS="$out/logs" go test ./tests/ -run '^TestNFSFailover$' -count 1 -v -timeout 15m >"$out/run$i.log" 2>&1; then
    echo "run $i: ok"
  else
    echo "run $i: FAILED (see $out/run$i.log)"
  fi
  grep '^nfs-failover ' "$out/run$i.log" >>"$out/times" || true
done
[ -s "$out/times" ] || { echo "no failover time measured" >&2; exit 1; }
echo
printf '%-12s %5s %9s %9s   %s\n' KIND RUNS MEDIAN_S WORST_S TIMES
for kind in kill restart public-link etcd-link etcd-leader; do
  grep "/$kind " "$out/times" | awk '{print $3}' | sort -n >"$out/k" || true
  n=$(wc -l <"$out/k")
  [ "$n" -gt 0 ] || continue
  awk -v kind="$kind" '{v[NR]=$1} END {
    if (NR % 2) med = v[(NR+1)/2]; else med = (v[NR/2] + v[NR/2+1]) / 2
    all = ""; for (i = 1; i <= NR; i++) all = all sprintf("%.2f ", v[i])
    printf "%-12s %5d %9.2f %9.2f   %s\n", kind, NR, med, v[NR], all }' "$out/k"
done
