#!/usr/bin/env bash
# Installs what building and testing weft needs on a fresh Debian machine:
# Debian packages (fuse3 for mounts, fio for I/O tests and benchmarks,
# iptables for the partition tests, libnfs-utils for the NFS gateway's
# userspace-client tests) and the Go modules. Safe to run again: it installs only what is missing.
set -euo pipefail

need=()
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
command -v fio >/dev/null 2>&1 || need+=(fio)
command -v iptables >/dev/null 2>&1 || [ -x /usr/sbin/iptables ] || need+=(iptables)
command -v nfs-cp >/dev/null 2>&1 || need+=(libnfs-utils)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "deps: installing Debian packages: ${need[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! command -v go >/dev/null 2>&1; then
  echo "deps: Go is not installed; install Go 1.26 or newer (https://go.dev/doc/install)" >&2
  exit 1
fi
go mod download
