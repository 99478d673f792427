#!/usr/bin/env python3
"""bench/kernel_accounting.py - what `capture --kernel-accounting` saves on bulk TCP (issue 18).

bench/live.py's method: two network namespaces joined by a veth pair, `wirelog capture --no-parse`
on one end, tcpreplay into the other at a fixed rate; the capturer's CPU (user + system time of
the process from /proc/PID/stat, just before it is stopped), the packets that crossed the ring
(its stats line) and those counted in the kernel (its kernel-accounting line), and the whole
machine's busy CPU during the replay (/proc/stat: every CPU, softirq included, which is where the
filter itself runs). Runs alternate with and without the option. The capture is synthetic:
CONNS bulk connections of SEGS 1400-byte segments each, one pure ACK per two, closed by FIN,
optionally with a 200 ms pause every N segments.

With --bin given more than once, each repetition runs every binary in turn (before/after
interleaved); the binary's own `map calls` figure (bpf() calls of its trackers) is shown when it
prints one.

usage: bench/kernel_accounting.py [--reps N] [--conns N] [--segs N] [--pps N] [--pause-every N] [--bin PATH]...   (root; ip, tcpreplay)
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import struct
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = REPO / "target" / "release" / "wirelog"


def csum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(src, dst, sp, dp, flags, seq, ack, payload: bytes) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", sp, dp, seq, ack, 5 << 4, flags, 65535, 0, 0) + payload
    pseudo = bytes(src) + bytes(dst) + struct.pack("!BBH", 0, 6, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", csum(pseudo + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0, bytes(src), bytes(dst))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return bytes.fromhex("020000000001020000000002") + b"\x08\x00" + ip + tcp


def bulk_pcap(path: Path, conns: int, segs: int, pause_every: int) -> int:
    payload = bytes(range(256)) * 5 + bytes(120)
    n = 0
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        t = 1_700_000_000_000_000

        def put(fr: bytes):
            nonlocal t, n
            f.write(struct.pack("<IIII", t // 1_000_000, t % 1_000_000, len(fr), len(fr)) + fr)
            t += 10
            n += 1

        for c in range(conns):
            cl, sv = (10, 88, c >> 8, c & 255), (10, 89, 0, 1)
            cp, sp = 30000 + c, 5001
            cs, ss = 1000, 5000
            put(frame(cl, sv, cp, sp, 0x02, cs, 0, b""))
            put(frame(sv, cl, sp, cp, 0x12, ss, cs + 1, b""))
            cs += 1
            ss += 1
            put(frame(cl, sv, cp, sp, 0x10, cs, ss, b""))
            put(frame(cl, sv, cp, sp, 0x18, cs, ss, payload[:100]))
            cs += 100
            for i in range(segs):
                if pause_every and i % pause_every == 0:
                    t += 200_000  # a pause longer than the ring's block timeout
                put(frame(sv, cl, sp, cp, 0x18, ss, cs, payload))
                ss += len(payload)
                if i % 2:
                    put(frame(cl, sv, cp, sp, 0x10, cs, ss, b""))
            put(frame(sv, cl, sp, cp, 0x11, ss, cs, b""))
            put(frame(cl, sv, cp, sp, 0x11, cs, ss + 1, b""))
            put(frame(sv, cl, sp, cp, 0x10, ss + 1, cs + 1, b""))
    return n


def sh(*a):
    subprocess.run(a, check=True, stdout=subprocess.DEVNULL)


def busy_jiffies() -> int:
    f = open("/proc/stat").readline().split()[1:]
    v = list(map(int, f))
    return sum(v) - v[3] - v[4]  # minus idle and iowait


def run(ns_a, ns_b, va, vb, pcap, pps, kacct: bool, out: Path, binary: Path = BIN, strace: bool = False):
    logs = out / ("k" if kacct else "p")
    args = ["ip", "netns", "exec", ns_a, str(binary), "capture", "-i", va, "--no-parse", "--no-store", "--logs", str(logs)]
    if kacct:
        args.append("--kernel-accounting")
    p = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    assert "capturing on" in p.stderr.readline()
    time.sleep(0.3)
    tracer = None
    if strace:
        # Every thread of the capturer: bpf() calls, counted (not timed fairly).
        tids = [a for t in os.listdir(f"/proc/{p.pid}/task") for a in ("-p", t)]
        tracer = subprocess.Popen(["strace", "-c", "-e", "trace=bpf", "-o", str(out / "strace.txt"), *tids], stderr=subprocess.DEVNULL)
        time.sleep(0.5)
    j0, w0 = busy_jiffies(), time.time()
    rate = ["--pps", str(pps)] if pps else []
    sh("ip", "netns", "exec", ns_b, "tcpreplay", *rate, "-q", "-i", vb, str(pcap))
    time.sleep(0.3)
    j1, w1 = busy_jiffies(), time.time()
    st = open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()
    cpu_s = (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")
    p.send_signal(signal.SIGINT)
    err = p.stderr.read()
    p.wait()
    if tracer:
        tracer.wait()
        m = re.search(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)(?:\s+\d+)?\s+bpf$", (out / "strace.txt").read_text(), re.M)
        print(f"strace: {m.group(1) if m else 0} bpf() calls during the run ({binary}, {'with' if kacct else 'without'} the option)", flush=True)
    ring = int(re.search(r"wirelog: stats: (\d+) packets", err).group(1))
    m = re.search(r"kernel accounting: (\d+) packets", err)
    counted = int(m.group(1)) if m else 0
    drops = re.search(r"(\d+) dropped", err).group(1)
    m = re.search(r"(\d+) map calls", err)
    calls = m.group(1) if m else ("-" if not kacct else "?")
    return cpu_s, ring, counted, (j1 - j0) / os.sysconf("SC_CLK_TCK"), w1 - w0, drops, calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--conns", type=int, default=20)
    ap.add_argument("--segs", type=int, default=10000)
    ap.add_argument("--pps", type=int, default=0, help="replay rate (default: the capture's own timing, 10 us apart)")
    ap.add_argument("--pause-every", type=int, default=0, help="a 200 ms pause every N segments of a connection")
    ap.add_argument("--strace", action="store_true", help="count the capturer's bpf() calls with strace (CPU figures then include the tracing)")
    ap.add_argument("--bin", action="append", type=Path, help="wirelog binary (repeat to interleave several; default target/release/wirelog)")
    a = ap.parse_args()
    bins = a.bin or [BIN]
    out = REPO / "bench" / "out" / "kacct"
    out.mkdir(parents=True, exist_ok=True)
    pcap = out / "bulk.pcap"
    total = bulk_pcap(pcap, a.conns, a.segs, a.pause_every)
    tag = str(os.getpid())
    ns_a, ns_b, va, vb = f"wlka{tag}", f"wlkb{tag}", f"wka{tag}", f"wkb{tag}"
    sh("ip", "netns", "add", ns_a)
    sh("ip", "netns", "add", ns_b)
    try:
        sh("ip", "link", "add", va, "netns", ns_a, "type", "veth", "peer", "name", vb, "netns", ns_b)
        for n, v in ((ns_a, va), (ns_b, vb)):
            sh("ip", "netns", "exec", n, "sysctl", "-q", "-w", f"net.ipv6.conf.{v}.disable_ipv6=1")
            sh("ip", "-n", n, "link", "set", v, "up")
        print(f"{total} packets per replay, {a.conns} connections, --pps {a.pps or 'pcap timing'}, pause every {a.pause_every or '-'} segments")
        print("| binary | run | capturer CPU s | ns/packet replayed | packets through the ring | counted in the kernel | machine busy CPU s | ring drops | map calls |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in range(a.reps):
            for b in bins:
                for k in (False, True):
                    cpu, ring, counted, busy, _, drops, calls = run(ns_a, ns_b, va, vb, pcap, a.pps, k, out, b, a.strace)
                    name = "--kernel-accounting" if k else "without"
                    print(f"| {b} | {name} #{r + 1} | {cpu:.2f} | {cpu * 1e9 / total:.0f} | {ring} | {counted} | {busy:.2f} | {drops} | {calls} |", flush=True)
    finally:
        subprocess.run(["ip", "netns", "del", ns_a])
        subprocess.run(["ip", "netns", "del", ns_b])


if __name__ == "__main__":
    main()
