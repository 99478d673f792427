#!/usr/bin/env python3
"""CPU of `wirelog serve` per question, for before/after comparisons on a loaded machine
(where wall time is mostly waiting for a core): for each binary in turn, starts it on STORE,
and for each of bench/serve_latency.py's --ui questions whose name holds one of TEXT, asks it
twice (warm), then REPS times, and prints the server's utime+stime per request
(/proc/PID/stat) and instructions when perf can count them.

usage: bench/serve_cpu.py BIN[,BIN...] STORE REPS TEXT...
"""
import os, re, signal, subprocess, sys, time, urllib.request
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_latency as sl
bins, store, reps, only = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3]), sys.argv[4:]
tck = os.sysconf("SC_CLK_TCK")
def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1000 / tck
for b in bins:
    srv = subprocess.Popen([b, "serve", "--store", store, "--listen", "127.0.0.1:0"], stderr=subprocess.PIPE, text=True)
    addr = re.search(r"http://([0-9.:]+)/", srv.stderr.readline()).group(1)
    qs = [(n, p) for n, p in sl.ui_questions(addr) if any(o in n for o in only)]
    for name, path in qs:
        url = f"http://{addr}/api/{path}"
        for _ in range(2):
            urllib.request.urlopen(url, timeout=120).read()
        perf = subprocess.Popen(["perf", "stat", "-x,", "-e", "instructions:u", "-p", str(srv.pid)], stderr=subprocess.PIPE, text=True)
        time.sleep(0.3)
        c0, t0 = cpu(srv.pid), time.perf_counter()
        walls = []
        for _ in range(reps):
            t = time.perf_counter()
            urllib.request.urlopen(url, timeout=120).read()
            walls.append((time.perf_counter() - t) * 1e3)
        c1 = cpu(srv.pid)
        perf.send_signal(signal.SIGINT)
        out = perf.communicate()[1]
        ins = next((int(l.split(",")[0]) for l in out.splitlines() if "instructions" in l and l.split(",")[0].isdigit()), -1)
        walls.sort()
        print(f"{os.path.basename(b)} | {name} | {f'{ins / reps / 1e6:.1f} M' if ins >= 0 else 'n/a'} instr/request | {(c1 - c0) / reps:.1f} ms CPU/request | wall p50 {walls[len(walls)//2]:.0f} ms | load {open('/proc/loadavg').read().split()[0]}", flush=True)
    srv.kill(); srv.wait()
