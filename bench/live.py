#!/usr/bin/env python3
"""bench/live.py - what live capture costs: CPU per packet at the highest replay rate (few and many
flows, 1 and 2 workers, one and two replays in parallel), idle CPU, wakeups and RSS, and what
--skip-empty-tcp saves on the HTTP and MySQL captures.

The method of goProbe's figures quoted in issue 4: two network namespaces joined by a veth pair
(MTU 1500), `wirelog capture` on one end, `tcpreplay --topspeed` into the other, CPU of the
capturer from /proc (every thread's run time from schedstat, in ns) divided by the packets it
captured. Needs root, ip, tcpreplay; Python 3 standard library only.

`--only listen` (issue 12) and `--only clickhouse` (issue 15) replay the `few` corpus --loop times
into two captures, alternating in one run so the machine's load hits both alike: without and with
`--listen` while bench/ui_poll.py asks what an open UI refreshing every second asks; without and with
`--clickhouse` into tests/clickhouse/endpoint.py (chdb) in the capture's namespace, rows counted in
chdb afterwards. CPU per thread (worker threads, the server's, the sink's) and the whole process's
until exit (wait4's rusage: includes the final store flush and the sink's drain).

usage: bench/live.py [--reps N] [--only cpu,idle,skip,listen,clickhouse] [--loop N] [--no-build]
Writes bench/out/live.md (a table for BENCHMARKS.md) and bench/out/live_runs.csv (every run;
bench/out/live_pairs.csv for listen/clickhouse).
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
        # The UI server and the ClickHouse endpoint listen on the capture namespace's loopback.
        must(["ip", "-n", self.a, "link", "set", "lo", "up"])

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
    def __init__(self, v: Veth, work: Path, args: list[str], seed: Path | None = None):
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        if seed is not None:
            shutil.copytree(seed, work / "store")
            # The capture writes it as the user it becomes (nobody), as a store it made itself.
            must(["chown", "-R", "nobody", str(work / "store")])
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
        # wait4, not wait: the rusage of the whole run, every thread, to the last flush.
        _, status, ru = os.wait4(self.p.pid, 0)
        self.p.returncode = os.waitstatus_to_exitcode(status)
        if self.p.returncode != 0:
            sys.exit(f"live.py: capture exited {self.p.returncode}: {self.err_path.read_text()}")
        text = self.err_path.read_text()
        line = [x for x in text.splitlines() if x.startswith("wirelog: stats: ")][-1]
        m = re.search(r"stats: (\d+) packets, (\d+) bytes; kernel: (\d+) packets, (\d+) dropped", line)
        per = [int(x) for x in re.findall(r"#\d+ (\d+) packets", line)]
        return {"packets": int(m[1]), "kernel_packets": int(m[3]), "drops": int(m[4]),
                "worker_min": min(per) if per else int(m[1]),
                "life_cpu_ns": int((ru.ru_utime + ru.ru_stime) * 1e9), "life_maxrss_kb": ru.ru_maxrss}


def replay(v: Veth, pcap: Path, parallel: int, loop: int = 1) -> float:
    """Wall seconds for `parallel` tcpreplay --topspeed runs of pcap (each `loop` times) at once."""
    t0 = time.time()
    procs = [subprocess.Popen(["ip", "netns", "exec", v.b, "tcpreplay", "--topspeed", "-q", "-i", v.vb,
                               f"--loop={loop}", str(pcap)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
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


# ---- side by side: --listen with a polling UI, --clickhouse -------------------------------------

ENDPOINT = REPO / "tests" / "clickhouse" / "endpoint.py"
LISTEN = "127.0.0.1:19180"


def per_thread(pid: int) -> dict[str, int]:
    """Run time (ns) per thread group: worker (wirelog-w*), serve (wirelog-serve*), the others by name."""
    out: dict[str, int] = {}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (t / "comm").read_text().strip()
            ns = int((t / "schedstat").read_text().split()[0])
        except (OSError, ValueError):
            continue
        key = "worker" if name.startswith("wirelog-w") else "serve" if name.startswith("wirelog-serve") else name
        out[key] = out.get(key, 0) + ns
    return out


class Chdb:
    """tests/clickhouse/endpoint.py in the capture namespace; it exits when its stdin closes."""

    def __init__(self, ns: str):
        self.ns = ns
        self.p = subprocess.Popen(["ip", "netns", "exec", ns, "python3", str(ENDPOINT)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if not line.startswith("control "):
            sys.exit(f"live.py: the ClickHouse endpoint said {line!r} (needs python3 chdb, lz4, clickhouse_cityhash)")
        self.control = int(line.split()[1])

    def curl(self, path: str, data: str | None = None) -> str:
        cmd = ["ip", "netns", "exec", self.ns, "curl", "-sf", f"http://127.0.0.1:{self.control}{path}"]
        return must(cmd + (["--data-binary", data] if data is not None else []))

    def new_port(self) -> int:
        return int(self.curl("/port/new").strip())

    def rows(self, db: str) -> dict[str, int]:
        text = self.curl("/sql", f"SELECT table, sum(rows) FROM system.parts WHERE database = '{db}' AND active "
                                 "GROUP BY table ORDER BY table")
        return {t: int(n) for t, n in (line.split("\t") for line in text.splitlines() if line)}

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(timeout=60)


def seed_store(pcap: Path) -> Path:
    """A store with the corpus's records read once, so the UI's questions read files, not nothing."""
    seed = CORPUS / "seed-store"
    if not seed.exists():
        tmp = CORPUS / "seed-store.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        must([str(WIRELOG), "read", "-q", "--store", str(tmp), "--no-parse", str(pcap)])
        tmp.rename(seed)
    return seed


def pair_runs(mode: str, reps: int, loop: int, pairs: list[dict]) -> None:
    pcap, _ = corpora()["few"]
    n_file = pcap_packets(pcap)
    v = Veth(1500)
    ch = Chdb(v.a) if mode == "clickhouse" else None
    seed = seed_store(pcap) if mode == "listen" else None
    try:
        for rep in range(reps):
            for on in (False, True):
                extra, db = [], f"bench{rep}"
                if on and mode == "listen":
                    extra = ["--listen", LISTEN]
                if on and ch is not None:
                    url = f"http://127.0.0.1:{ch.new_port()}"
                    must(["ip", "netns", "exec", v.a, str(WIRELOG), "clickhouse", "init", "--clickhouse", url,
                          "--clickhouse-database", db])
                    extra = ["--clickhouse", url, "--clickhouse-database", db]
                cap = Capturer(v, OUT / "live-work", ["--workers", "1", "--ring-size", "64M", *extra], seed)
                poll = None
                if on and mode == "listen":
                    poll = subprocess.Popen(["ip", "netns", "exec", v.a, "python3", str(REPO / "bench" / "ui_poll.py"),
                                             f"http://{LISTEN}"], stdout=subprocess.PIPE, text=True)
                # Both sides wait alike: the poller is in its steady once-a-second rhythm at the start.
                time.sleep(1.5)
                c0 = per_thread(cap.p.pid)
                wall = replay(v, pcap, 1, loop)
                time.sleep(0.3)
                c1 = per_thread(cap.p.pid)
                polled = ""
                if poll is not None:
                    poll.send_signal(signal.SIGTERM)
                    polled = poll.communicate(timeout=60)[0].strip()
                st = cap.stop()
                d = {k: c1.get(k, 0) - c0.get(k, 0) for k in c1}
                pk = max(st["packets"], 1)
                row = {"mode": mode, "on": on, "rep": rep, "sent": n_file * loop, "captured": st["packets"],
                       "drops": st["drops"], "wall_s": round(wall, 3), "pps": round(st["packets"] / wall),
                       "ns_per_packet": round(sum(d.values()) / pk, 1),
                       "worker_ns_per_packet": round(d.get("worker", 0) / pk, 1),
                       "serve_ms": round(d.get("serve", 0) / 1e6, 1),
                       "sink_ms": round(d.get("wirelog-clickho", 0) / 1e6, 1),  # comm holds 15 characters
                       "life_ns_per_packet": round(st["life_cpu_ns"] / pk, 1), "polled": polled,
                       "threads_ms": ";".join(f"{k}={x / 1e6:.1f}" for k, x in sorted(d.items()))}
                if on and ch is not None:
                    rows = ch.rows(db)
                    local = must([str(WIRELOG), "store", "--store", str(cap.work / "store")])
                    row["ch_rows"] = ";".join(f"{t}={n}" for t, n in rows.items())
                    row["local_store"] = " | ".join(x.strip() for x in local.splitlines() if x.strip())
                pairs.append(row)
                log(f"{mode} {'on ' if on else 'off'} rep{rep}: {row['captured']:,}/{row['sent']:,} packets, "
                    f"{row['drops']} dropped, {row['ns_per_packet']} ns/packet (worker {row['worker_ns_per_packet']}), "
                    f"to exit {row['life_ns_per_packet']}; {row['threads_ms']} {polled} {row.get('ch_rows', '')}")
    finally:
        if ch is not None:
            ch.close()
        v.close()


def render_pairs(pairs: list[dict], reps: int, loop: int) -> str:
    out = [f"Side by side, {time.strftime('%Y-%m-%d %H:%M %Z')}, load average {os.getloadavg()[0]:.1f} at the end, "
           f"`bench/live.py {' '.join(sys.argv[1:])}`; `few` corpus x{loop} per run, 1 worker, medians (range) "
           f"of {reps} alternating runs.", "",
           "| mode | side | packets/s | ns CPU/packet, process (replay window) | worker threads ns/packet | "
           "server / sink thread ms | ns CPU/packet, process to exit | kernel drops |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    for mode in dict.fromkeys(r["mode"] for r in pairs):
        for on in (False, True):
            rs = [r for r in pairs if r["mode"] == mode and r["on"] == on]
            if not rs:
                continue
            side = ("--listen + UI polling" if mode == "listen" else "--clickhouse") if on else "off"
            thr = median_of(rs, "serve_ms" if mode == "listen" else "sink_ms")
            pps = [r["pps"] for r in rs]
            out.append(f"| {mode} | {side} | {statistics.median(pps):,.0f} ({min(pps):,}-{max(pps):,}) | {median_of(rs, 'ns_per_packet')} | "
                       f"{median_of(rs, 'worker_ns_per_packet')} | {thr} | {median_of(rs, 'life_ns_per_packet')} | "
                       f"{sum(r['drops'] for r in rs)} |")
    out.append("")
    return "\n".join(out)


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


def require_root_and_replay(script: str) -> None:
    """Exits, naming `script`, unless run as root with ip and tcpreplay
    installed (network namespaces, packet sockets, replays)."""
    if os.geteuid() != 0:
        sys.exit(f"{script}: needs root (network namespaces, packet sockets)")
    for tool in ("ip", "tcpreplay"):
        if shutil.which(tool) is None:
            sys.exit(f"{script}: {tool} is not installed (apt-get install iproute2 tcpreplay)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3, help="runs per configuration (default 3)")
    ap.add_argument("--only", default="cpu,idle,skip",
                    help="cpu, idle, skip, listen, clickhouse (comma-separated; default cpu,idle,skip)")
    ap.add_argument("--loop", type=int, default=3, help="listen, clickhouse: replays of the corpus per run (default 3)")
    ap.add_argument("--idle-secs", type=int, default=20, help="idle measurement length (default 20)")
    ap.add_argument("--no-build", action="store_true", help="use the binaries in target/release")
    ap.add_argument("--corpora", default="", help="cpu: only these corpora (few,50k,500k; default all)")
    ap.add_argument("--workers", default="1,2", help="cpu: worker counts (default 1,2)")
    ap.add_argument("--parallel", default="1,2", help="cpu: replays at once (default 1,2)")
    ap.add_argument("--extra", default="", help="cpu: more capture options, e.g. --extra=--no-parse")
    a = ap.parse_args()
    require_root_and_replay("live.py")
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
    pairs: list[dict] = []
    for mode in ("listen", "clickhouse"):
        if mode in only:
            pair_runs(mode, a.reps, a.loop, pairs)
    shutil.rmtree(OUT / "live-work", ignore_errors=True)
    if rows:
        with open(OUT / "live_runs.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    if pairs:
        keys = list(dict.fromkeys(k for r in pairs for k in r))
        with open(OUT / "live_pairs.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(pairs)
    md = render(rows, corp, idle, skips, a.reps) + (render_pairs(pairs, a.reps, a.loop) if pairs else "")
    (OUT / "live.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
