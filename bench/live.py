#!/usr/bin/env python3
"""bench/live.py - what live capture costs: CPU per packet at the highest replay rate (few and many
flows, 1 and 2 workers, one and two replays in parallel), idle CPU, wakeups and RSS, and what
--skip-empty-tcp saves on the HTTP and MySQL captures.

The method of goProbe's figures quoted in issue 4: two network namespaces joined by a veth pair
(MTU 1500), `wirelog capture` on one end, `tcpreplay --topspeed` into the other, CPU of the
capturer from /proc (every thread's run time from schedstat, in ns) divided by the packets it
captured. Needs root, ip, tcpreplay; Python 3 standard library only.

usage: bench/live.py [--reps N] [--only cpu,idle,skip] [--no-build]
Writes bench/out/live.md (a table for BENCHMARKS.md) and bench/out/live_runs.csv (every run).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "bench" / "out"
CORPUS = OUT / "live-corpus"
WIRELOG = Path(os.environ.get("WIRELOG") or REPO / "target" / "release" / "wirelog")
BENCH = REPO / "target" / "release" / "wirelog-bench"
TESTDATA = REPO.parent / "shared" / "testdata" / "zeek"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def must(cmd: list[str]) -> str:
    r = run(cmd)
    if r.returncode != 0:
        sys.exit(f"live.py: {' '.join(cmd)}: {r.stderr.strip()}")
    return r.stdout


# ---- corpora ---------------------------------------------------------------------------------

def write_pcap(path: Path, frames) -> int:
    """Writes Ethernet frames (an iterable of bytes) as a pcap with 1 µs apart timestamps."""
    n = 0
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", 1_700_000_000 + i // 1_000_000, i % 1_000_000, len(fr), len(fr)))
            f.write(fr)
            n += 1
    tmp.rename(path)
    return n


def ip_checksum(h: bytes) -> int:
    s = sum(struct.unpack("!10H", h))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def udp_flows(flows: int, packets: int):
    """`packets` UDP datagrams (64 B payload) round-robin over `flows` distinct 5-tuples: every
    flow is a new client address and port talking to one of 16 servers."""
    eth = bytes.fromhex("02000000000202000000000108 00".replace(" ", ""))
    payload = bytes(64)
    for i in range(packets):
        fl = i % flows
        src = bytes([10, (fl >> 16) & 0xFF, (fl >> 8) & 0xFF, fl & 0xFF])
        dst = bytes([192, 168, 0, 1 + fl % 16])
        sport = 1024 + (fl * 7919) % 60000
        udp = struct.pack("!HHHH", sport, 5000, 8 + len(payload), 0) + payload
        h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), i & 0xFFFF, 0, 64, 17, 0, src, dst)
        h = h[:10] + struct.pack("!H", ip_checksum(h)) + h[12:]
        yield eth + h + udp


def corpora() -> dict[str, tuple[Path, str]]:
    """name -> (pcap, description). Made once, kept in bench/out/live-corpus."""
    CORPUS.mkdir(parents=True, exist_ok=True)
    out: dict[str, tuple[Path, str]] = {}
    few = CORPUS / "echo_x10.pcap"
    if not few.exists():
        src = CORPUS / "echo-connections.pcap"
        with gzip.open(TESTDATA / "echo_connections_large" / "echo-connections.pcap.gz") as g:
            src.write_bytes(g.read())
        must([str(BENCH), "scale", "--copies", "10", str(src), str(few)])
        src.unlink()
    out["few"] = (few, "echo-connections trace x10 (addresses rewritten per copy): 825,820 packets, 5,000 TCP connections")
    for name, flows, packets in [("50k", 50_000, 400_000), ("500k", 500_000, 1_000_000)]:
        p = CORPUS / f"udp_{name}.pcap"
        if not p.exists():
            log(f"generating {p.name}")
            write_pcap(p, udp_flows(flows, packets))
        out[name] = (p, f"{packets:,} UDP packets over {flows:,} flows (106-byte frames)")
    return out


def pcap_packets(p: Path) -> int:
    """Packet count of a classic pcap (little-endian, as the corpora are written)."""
    n, data = 0, p.read_bytes()
    off = 24
    while off + 16 <= len(data):
        caplen = struct.unpack_from("<I", data, off + 8)[0]
        off += 16 + caplen
        n += 1
    return n


# ---- namespaces and the capturer ------------------------------------------------------------

class Veth:
    """Namespaces a (capture) and b (replay) joined by a veth pair; removed on close."""

    def __init__(self, mtu: int):
        tag = f"{os.getpid()}{int(time.time() * 1000) % 100000}"
        self.a, self.b, self.va, self.vb = f"wlla{tag}", f"wllb{tag}", f"wla{tag}"[:15], f"wlb{tag}"[:15]
        must(["ip", "netns", "add", self.a])
        must(["ip", "netns", "add", self.b])
        must(["ip", "link", "add", self.va, "netns", self.a, "mtu", str(mtu), "type", "veth", "peer", "name",
              self.vb, "netns", self.b, "mtu", str(mtu)])
        for ns, v in [(self.a, self.va), (self.b, self.vb)]:
            must(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"net.ipv6.conf.{v}.disable_ipv6=1"])
            must(["ip", "-n", ns, "link", "set", v, "up"])

    def close(self) -> None:
        for ns in (self.a, self.b):
            run(["ip", "netns", "del", ns])


def task_ns(pid: int) -> int:
    """CPU time of every thread of a process, in ns (schedstat: run time)."""
    total = 0
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((t / "schedstat").read_text().split()[0])
        except (OSError, ValueError):
            pass
    return total


def wakeups(pid: int) -> int:
    total = 0
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (t / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


class Capturer:
    def __init__(self, v: Veth, work: Path, args: list[str]):
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        self.work = work
        self.err_path = work / "stderr"
        self.err = open(self.err_path, "w+")
        self.p = subprocess.Popen(
            ["ip", "netns", "exec", v.a, str(WIRELOG), "capture", "-i", v.va, "--store", str(work / "store"),
             "--logs", str(work / "logs"), "--stats-interval", "0", *args],
            stdout=subprocess.DEVNULL, stderr=self.err)
        deadline = time.time() + 20
        while "capturing on" not in self.err_path.read_text():
            if self.p.poll() is not None or time.time() > deadline:
                sys.exit(f"live.py: capture did not start: {self.err_path.read_text()}")
            time.sleep(0.05)

    def stop(self) -> dict[str, int]:
        self.p.send_signal(signal.SIGINT)
        if self.p.wait(timeout=120) != 0:
            sys.exit(f"live.py: capture exited {self.p.returncode}: {self.err_path.read_text()}")
        text = self.err_path.read_text()
        line = [x for x in text.splitlines() if x.startswith("wirelog: stats: ")][-1]
        m = re.search(r"stats: (\d+) packets, (\d+) bytes; kernel: (\d+) packets, (\d+) dropped", line)
        per = [int(x) for x in re.findall(r"#\d+ (\d+) packets", line)]
        return {"packets": int(m[1]), "kernel_packets": int(m[3]), "drops": int(m[4]),
                "worker_min": min(per) if per else int(m[1])}


def replay(v: Veth, pcap: Path, parallel: int) -> float:
    """Wall seconds for `parallel` tcpreplay --topspeed runs of pcap at once."""
    t0 = time.time()
    procs = [subprocess.Popen(["ip", "netns", "exec", v.b, "tcpreplay", "--topspeed", "-q", "-i", v.vb,
                               str(pcap)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for _ in range(parallel)]
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            sys.exit(f"live.py: tcpreplay: {err.strip()}")
    return time.time() - t0


# ---- the measurements ------------------------------------------------------------------------

def cpu_runs(reps: int, rows: list[dict], extra: list[str], only: set[str], workers_list: list[int],
             parallels: list[int]) -> list[dict]:
    corp = {k: v for k, v in corpora().items() if not only or k in only}
    v = Veth(1500)
    try:
        for name, (pcap, desc) in corp.items():
            n_file = pcap_packets(pcap)
            for workers in workers_list:
                for parallel in parallels:
                    for rep in range(reps):
                        cap = Capturer(v, OUT / "live-work", ["--workers", str(workers), "--ring-size", "64M", *extra])
                        c0 = task_ns(cap.p.pid)
                        wall = replay(v, pcap, parallel)
                        # The last block is retired within 100 ms of the last packet.
                        time.sleep(0.3)
                        cpu = task_ns(cap.p.pid) - c0
                        hwm = status_kb(cap.p.pid, "VmHWM")
                        st = cap.stop()
                        row = {"corpus": name, "workers": workers, "replays": parallel, "rep": rep,
                               "sent": n_file * parallel, "captured": st["packets"], "drops": st["drops"],
                               "wall_s": round(wall, 3), "pps": round(st["packets"] / wall),
                               "cpu_s": round(cpu / 1e9, 4),
                               "ns_per_packet": round(cpu / max(st["packets"], 1), 1),
                               "peak_rss_mb": round(hwm / 1024, 1), "worker_min": st["worker_min"]}
                        rows.append(row)
                        log(f"{name} w={workers} x{parallel}: {row['captured']:,}/{row['sent']:,} packets, "
                            f"{row['drops']} dropped, {row['pps']:,} pps, {row['ns_per_packet']} ns/packet, "
                            f"peak RSS {row['peak_rss_mb']} MB")
    finally:
        v.close()
    return [{"corpus": n, "desc": d} for n, (_, d) in corp.items()]


def idle_run(secs: int) -> dict:
    v = Veth(1500)
    try:
        cap = Capturer(v, OUT / "live-work", [])
        time.sleep(2)
        c0, w0, t0 = task_ns(cap.p.pid), wakeups(cap.p.pid), time.time()
        time.sleep(secs)
        c1, w1, t1 = task_ns(cap.p.pid), wakeups(cap.p.pid), time.time()
        rss = status_kb(cap.p.pid, "VmRSS")
        cap.stop()
    finally:
        v.close()
    r = {"secs": round(t1 - t0, 1), "cpu_pct": round(100 * (c1 - c0) / 1e9 / (t1 - t0), 5),
         "wakeups_per_s": round((w1 - w0) / (t1 - t0), 3), "rss_mb": round(rss / 1024, 1)}
    log(f"idle {r['secs']} s: {r['cpu_pct']}% CPU, {r['wakeups_per_s']} wakeups/s, RSS {r['rss_mb']} MB")
    return r


def conn_totals(logs: Path) -> tuple[int, int, dict[str, int], int]:
    """(orig_bytes sum, resp_bytes sum, conn_state counts, records) of a conn.log."""
    ob = rb = n = 0
    states: dict[str, int] = {}
    fields: list[str] = []
    for line in (logs / "conn.log").read_text().splitlines():
        if line.startswith("#fields"):
            fields = line.split("\t")[1:]
            continue
        if line.startswith("#"):
            continue
        r = dict(zip(fields, line.split("\t")))
        ob += int(r["orig_bytes"]) if r["orig_bytes"] != "-" else 0
        rb += int(r["resp_bytes"]) if r["resp_bytes"] != "-" else 0
        states[r["conn_state"]] = states.get(r["conn_state"], 0) + 1
        n += 1
    return ob, rb, states, n


def skip_runs() -> list[dict]:
    peers = Path(os.environ.get("WIRELOG_PEERS_DIR") or REPO / "target" / "wirelog-peers") / "pcaps"
    out = []
    # Loopback captures carry up to 64 KiB segments: the largest veth MTU.
    v = Veth(65535)
    try:
        for name in ("http", "mysql"):
            pcap = peers / f"{name}.pcap"
            if not pcap.exists():
                log(f"skip-empty-tcp: {pcap} is missing (make it with ../shared/bench/gen_{name}.sh)")
                continue
            res = {}
            for mode, extra in (("all", []), ("skip", ["--skip-empty-tcp"])):
                # A rate tcpreplay keeps on this machine without kernel drops; the ring is large
                # enough for the bursts of 64 KiB segments.
                cap = Capturer(v, OUT / "live-work", ["--ring-size", "256M", "--no-parse", *extra])
                replay(v, pcap, 1)
                time.sleep(0.3)
                st = cap.stop()
                res[mode] = (st, conn_totals(cap.work / "logs"))
            (sa, ta), (ss, ts) = res["all"], res["skip"]
            row = {"capture": name, "packets": sa["packets"], "packets_skip": ss["packets"],
                   "saved_pct": round(100 * (1 - ss["packets"] / max(sa["packets"], 1)), 1),
                   "drops": sa["drops"] + ss["drops"], "conns": ta[3],
                   "bytes_equal": ta[:2] == ts[:2], "states_equal": ta[2] == ts[2],
                   "orig_bytes": ta[0], "resp_bytes": ta[1]}
            log(f"skip-empty-tcp {name}: {row}")
            out.append(row)
    finally:
        v.close()
    return out


def median_of(rows: list[dict], key: str) -> str:
    vals = [r[key] for r in rows]
    return f"{statistics.median(vals):g}" if len(vals) == 1 else \
        f"{statistics.median(vals):g} ({min(vals):g}-{max(vals):g})"


def render(rows, corp, idle, skips, reps) -> str:
    out = [f"Live capture, {time.strftime('%Y-%m-%d %H:%M %Z')}, {os.cpu_count()} cores, "
           f"`bench/live.py {' '.join(sys.argv[1:])}`; medians (range) of {reps} runs.", ""]
    if rows:
        out += ["| corpus | workers | replays in parallel | packets/s captured | ns CPU/packet | kernel drops | "
                "peak RSS MB |", "|---|---:|---:|---:|---:|---:|---:|"]
        keys = sorted({(r["corpus"], r["workers"], r["replays"]) for r in rows},
                      key=lambda k: (["few", "50k", "500k"].index(k[0]), k[1], k[2]))
        for k in keys:
            rs = [r for r in rows if (r["corpus"], r["workers"], r["replays"]) == k]
            drops = sum(r["drops"] for r in rs)
            out.append(f"| {k[0]} | {k[1]} | {k[2]} | {median_of(rs, 'pps')} | {median_of(rs, 'ns_per_packet')} | "
                       f"{drops} | {median_of(rs, 'peak_rss_mb')} |")
        out += [""] + [f"- {c['corpus']}: {c['desc']}" for c in corp] + [""]
    if idle:
        out += [f"Idle ({idle['secs']} s on an idle veth, default options): {idle['cpu_pct']}% of a core, "
                f"{idle['wakeups_per_s']} wakeups/s, RSS {idle['rss_mb']} MB.", ""]
    if skips:
        out += ["| capture | packets | with --skip-empty-tcp | saved | conns | bytes equal | states equal | "
                "kernel drops |", "|---|---:|---:|---:|---:|---|---|---:|"]
        for s in skips:
            out.append(f"| {s['capture']} | {s['packets']:,} | {s['packets_skip']:,} | {s['saved_pct']}% | "
                       f"{s['conns']:,} | {s['bytes_equal']} | {s['states_equal']} | {s['drops']} |")
        out.append("")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3, help="runs per configuration (default 3)")
    ap.add_argument("--only", default="cpu,idle,skip", help="cpu, idle, skip (comma-separated)")
    ap.add_argument("--idle-secs", type=int, default=20, help="idle measurement length (default 20)")
    ap.add_argument("--no-build", action="store_true", help="use the binaries in target/release")
    ap.add_argument("--corpora", default="", help="cpu: only these corpora (few,50k,500k; default all)")
    ap.add_argument("--workers", default="1,2", help="cpu: worker counts (default 1,2)")
    ap.add_argument("--parallel", default="1,2", help="cpu: replays at once (default 1,2)")
    ap.add_argument("--extra", default="", help="cpu: more capture options, e.g. --extra=--no-parse")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("live.py: needs root (network namespaces, packet sockets)")
    for tool in ("ip", "tcpreplay"):
        if shutil.which(tool) is None:
            sys.exit(f"live.py: {tool} is not installed (apt-get install iproute2 tcpreplay)")
    if not a.no_build:
        log("cargo build --release")
        r = subprocess.run(["cargo", "build", "--release", "--workspace"], cwd=REPO)
        if r.returncode != 0:
            return 1
    only = set(a.only.split(","))
    OUT.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    corp = cpu_runs(a.reps, rows, a.extra.split(), set(filter(None, a.corpora.split(","))),
                    [int(x) for x in a.workers.split(",")], [int(x) for x in a.parallel.split(",")]) \
        if "cpu" in only else []
    idle = idle_run(a.idle_secs) if "idle" in only else None
    skips = skip_runs() if "skip" in only else []
    shutil.rmtree(OUT / "live-work", ignore_errors=True)
    if rows:
        with open(OUT / "live_runs.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    md = render(rows, corp, idle, skips, a.reps)
    (OUT / "live.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
