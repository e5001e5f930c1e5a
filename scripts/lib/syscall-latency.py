#!/usr/bin/env python3
"""Per-system-call latency from `strace -T` output (with or without -f).

usage: syscall-latency.py TRACE [PATH_SUBSTRING]

Prints a markdown table: for each system call, how many were made and
their 10th, 50th and 90th percentile and mean time in microseconds, and
the total seconds. With PATH_SUBSTRING, calls that name a path count only
when the path contains it (an openat of the mount, not of a library), and
calls on a file descriptor, or relative to one (openat(fd, "name")),
only when that descriptor was opened on such a path, itself or relative
to one; an openat with O_CREAT is listed as "create". Times under strace are
inflated by its own cost: compare calls with each other, not with runs
without it.
"""
import re
import sys

LINE = re.compile(r'^(?:(\d+)\s+)?(\w+)\((.*)\)\s+=\s+(-?\d+|0x[0-9a-f]+)[^<]*<([\d.]+)>$')


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__.strip().splitlines()[2])
    trace, want = sys.argv[1], (sys.argv[2] if len(sys.argv) == 3 else None)
    times = {}
    fds = {}  # (pid, fd) -> opened on a wanted path
    for raw in open(trace, errors='replace'):
        m = LINE.match(raw.strip())
        if not m:
            continue
        pid, call, args, ret, secs = m.groups()
        pid = pid or '0'
        parts = [a.strip() for a in args.split(',')]
        first = parts[0]
        if call == 'symlinkat' and len(parts) > 1:
            first = parts[1]  # symlinkat(target, newdirfd, linkpath)
        proc = re.match(r'"/proc/self/fd/(\d+)"', first)
        if proc:
            first = proc.group(1)  # chmod("/proc/self/fd/5"): tar's way with O_PATH
        if first.isdigit():
            # a call on a descriptor, or a *at call relative to one
            ok = want is None or fds.get((pid, first), False)
        else:
            path = re.match(r'(?:AT_FDCWD, )?"([^"]*)"', args)
            ok = want is None or (path is not None and want in path.group(1))
        if call in ('openat', 'open', 'creat') and ret.isdigit():
            fds[(pid, ret)] = ok
        if call == 'close' and first.isdigit():
            fds.pop((pid, first), None)
        if not ok:
            continue
        if call in ('openat', 'open') and 'O_CREAT' in args:
            call = 'create'
        times.setdefault(call, []).append(float(secs) * 1e6)
    print('| call | count | p10 µs | p50 µs | p90 µs | mean µs | total s |')
    print('|---|---|---|---|---|---|---|')
    for call, ts in sorted(times.items(), key=lambda kv: -sum(kv[1])):
        ts.sort()
        n = len(ts)
        print(f'| {call} | {n} | {ts[n // 10]:.0f} | {ts[n // 2]:.0f} | {ts[n * 9 // 10]:.0f} | {sum(ts) / n:.0f} | {sum(ts) / 1e6:.2f} |')


if __name__ == '__main__':
    main()
