#!/usr/bin/env python3
"""CPU time per thread of one wirelog run: which thread does the work.

Runs the given command, samples /proc/PID/task/*/stat every 10 ms and prints
each thread's user+system CPU (the last sample before it ended, so a thread
loses at most one interval), summed by thread name.

usage: bench/thread_cpu.py [--reps N] -- wirelog read -C --quiet --store S --logs L PCAP
(the store and log directories are emptied before each run)
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def sample(pid, seen):
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                s = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        name = s[s.index("(") + 1 : s.rindex(")")]
        fields = s[s.rindex(")") + 2 :].split()
        seen[tid] = (name, (int(fields[11]) + int(fields[12])) / TICK)


def run(cmd):
    seen = {}
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while p.poll() is None:
        sample(p.pid, seen)
        time.sleep(0.01)
    if p.returncode != 0:
        sys.exit(f"{cmd[0]} exited with {p.returncode}")
    by_name = {}
    for name, cpu in seen.values():
        by_name[name] = by_name.get(name, 0.0) + cpu
    return by_name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    dirs = [cmd[i + 1] for i, x in enumerate(cmd[:-1]) if x in ("--store", "--logs")]
    runs = []
    for _ in range(a.reps):
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
        runs.append(run(cmd))
    names = sorted({n for r in runs for n in r})
    print("| thread | CPU s (median of %d) |" % a.reps)
    print("|---|---:|")
    for n in names:
        print(f"| {n} | {statistics.median(r.get(n, 0.0) for r in runs):.2f} |")


if __name__ == "__main__":
    main()
