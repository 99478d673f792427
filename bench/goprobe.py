#!/usr/bin/env python3
"""bench/goprobe.py - wirelog and goProbe side by side on the same veth replays (issue 36).

goProbe (github.com/els0r/goProbe) is built from its source: --src names a checkout, or a bare git
directory (as the search tool's `fetch` leaves it), which is exported with `git archive` first:
`CGO_ENABLED=0 go build -tags jsoniter,slimcap_nomock ./cmd/goProbe` (Go modules from the module
proxy). --goprobe takes an already built binary instead.

The method is bench/live.py's (its namespaces, capturer and replay are reused): two network
namespaces joined by a veth pair (MTU 1500), the tool capturing on one end, `tcpreplay --topspeed`
into the other. Per run one tool; the tools alternate within each repetition so the machine's load
hits them alike. For each run: user CPU and total CPU (every thread's run time from schedstat) of
the capturing process over the replay window, divided by the packets the capture interface received
(the same denominator for both tools: the veth's rx_packets); peak RSS (VmHWM) after the replay; and
the CPU and the peak RSS of the whole process to exit (wait4 rusage: includes goProbe's final DB
write-out and wirelog's end of every connection and last flush).

Corpora (made once in bench/out/goprobe-corpus):
  36k     288,000 UDP packets over 36,000 flows (8 per flow; live.py's generator)
  540k    1,080,000 UDP packets over 540,000 flows (2 per flow)
  gptest  goProbe's own test capture pkg/e2etest/testdata/default.pcap.gz (38,642 packets, a third
          of them not IP) replayed --gptest-loop times (default 100: 3.86 M packets)

Configurations: goProbe (config: the capture interface, ring 64 x 1 MiB blocks, the DB in the
run's directory), `wirelog capture --no-parse` and `wirelog capture` (parsing on), both with
`--ring-size 64M --workers 1` and live.py's --store/--logs.

usage: bench/goprobe.py [--src DIR | --goprobe BIN] [--reps 3] [--corpora 36k,540k,gptest]
                        [--gptest-loop 100] [--no-build] [--wirelog-extra "..."] [--wirelog-before BIN]
Writes bench/out/goprobe.md (a table for BENCHMARKS.md) and bench/out/goprobe_runs.csv.
Needs root, ip, tcpreplay, go (for the build); Python 3 standard library only.
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
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import live  # noqa: E402  (bench/live.py: corpus writer, namespaces, capturer, replay)

REPO = live.REPO
OUT = REPO / "bench" / "out"
CORPUS = OUT / "goprobe-corpus"
GOPROBE_BUILD = OUT / "goprobe-build"
TICK = os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    live.log(msg)


# ---- goProbe: build and run ------------------------------------------------------------------

def source_tree(src: Path) -> Path:
    """goProbe's source tree. A bare git directory is exported first (its large binary blobs, which a
    partial snapshot may lack, are outside what the build needs: presentations/, img/)."""
    tree = src
    if (src / "HEAD").exists() and (src / "objects").exists():
        tree = GOPROBE_BUILD / "src"
        if not (tree / "go.mod").exists():
            shutil.rmtree(tree, ignore_errors=True)
            tree.mkdir(parents=True)
            arch = subprocess.Popen(["git", f"--git-dir={src}", "archive", "HEAD", "--", "cmd", "pkg", "plugins",
                                     "go.mod", "go.sum", "doc.go"], stdout=subprocess.PIPE)
            subprocess.run(["tar", "-x", "-C", str(tree)], stdin=arch.stdout, check=True)
            if arch.wait() != 0:
                sys.exit(f"goprobe.py: git archive of {src} failed")
    return tree


def build_goprobe(tree: Path) -> Path:
    binary = GOPROBE_BUILD / "goProbe"
    if not binary.exists():
        if shutil.which("go") is None:
            sys.exit("goprobe.py: go is not installed (needed to build goProbe)")
        log(f"building goProbe from {tree}")
        t0 = time.time()
        env = dict(os.environ, CGO_ENABLED="0")
        r = subprocess.run(["go", "build", "-tags", "jsoniter,slimcap_nomock", "-o", str(binary), "./cmd/goProbe"],
                           cwd=tree, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"goprobe.py: goProbe did not build:\n{r.stderr}")
        log(f"goProbe built in {time.time() - t0:.0f} s")
    return binary


class GoProbe:
    """goProbe capturing on the veth's capture end, its DB and log in `work`."""

    def __init__(self, binary: Path, v: live.Veth, work: Path):
        shutil.rmtree(work, ignore_errors=True)
        (work / "db").mkdir(parents=True)
        self.work = work
        cfg = work / "goprobe.yaml"
        # Same ring as wirelog's --ring-size 64M; the API on a unix socket (nothing listens on the net).
        cfg.write_text(f"""db:
  path: {work / 'db'}
interfaces:
  {v.va}:
    promisc: false
    ring_buffer:
      num_blocks: 64
      block_size: 1048576
api:
  addr: "unix:{work / 'api.sock'}"
  metrics: false
  profiling: false
logging:
  level: info
  encoding: logfmt
  destination: {work / 'goprobe.log'}
""")
        self.err = open(work / "stderr", "w+")
        self.p = subprocess.Popen(["ip", "netns", "exec", v.a, str(binary), "--config", str(cfg)],
                                  stdout=self.err, stderr=subprocess.STDOUT)
        deadline = time.time() + 20
        # goProbe logs each interface's capture start; the API socket appears once it serves.
        while not (work / "api.sock").exists():
            if self.p.poll() is not None or time.time() > deadline:
                sys.exit(f"goprobe.py: goProbe did not start: {(work / 'stderr').read_text()} "
                         f"{(work / 'goprobe.log').read_text() if (work / 'goprobe.log').exists() else ''}")
            time.sleep(0.05)
        time.sleep(0.5)

    def stop(self) -> tuple[int, int]:
        """Ends it (SIGTERM: it writes its flows out); the CPU ns and the peak RSS (KB) of its whole life."""
        self.p.send_signal(signal.SIGTERM)
        _, status, ru = os.wait4(self.p.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code not in (0, -signal.SIGTERM):
            sys.exit(f"goprobe.py: goProbe exited {code}: {(self.work / 'stderr').read_text()}")
        return int((ru.ru_utime + ru.ru_stime) * 1e9), ru.ru_maxrss


# ---- what is measured ------------------------------------------------------------------------

def user_ticks(pid: int) -> int:
    """User CPU of the whole process (every thread), in clock ticks (/proc/PID/stat utime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11])


def rx_packets(v: live.Veth) -> int:
    out = live.must(["ip", "netns", "exec", v.a, "cat", f"/sys/class/net/{v.va}/statistics/rx_packets"])
    return int(out.strip())


def corpora(names: list[str], src_tree: Path | None, gptest_loop: int) -> dict[str, tuple[Path, int, str]]:
    """name -> (pcap, replays of it per run, description)."""
    CORPUS.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, flows, packets in [("36k", 36_000, 288_000), ("540k", 540_000, 1_080_000)]:
        if name not in names:
            continue
        p = CORPUS / f"udp_{name}.pcap"
        if not p.exists():
            log(f"generating {p.name}")
            live.write_pcap(p, live.udp_flows(flows, packets))
        out[name] = (p, 1, f"{packets:,} UDP packets over {flows:,} flows ({packets // flows} per flow, 106-byte frames)")
    if "gptest" in names:
        p = CORPUS / "goprobe_default.pcap"
        if not p.exists():
            gz = (src_tree or Path("/nonexistent")) / "pkg" / "e2etest" / "testdata" / "default.pcap.gz"
            if not gz.exists():
                sys.exit(f"goprobe.py: goProbe's test capture {gz} is missing (give --src)")
            with gzip.open(gz) as g:
                p.write_bytes(g.read())
        n = live.pcap_packets(p)
        out["gptest"] = (p, gptest_loop, f"goProbe's pkg/e2etest/testdata/default.pcap ({n:,} packets) x{gptest_loop}")
    return out


def one_run(tool: str, gp_bin: Path, v: live.Veth, pcap: Path, loop: int, wl_extra: list[str],
            before: Path | None = None) -> dict:
    work = OUT / "goprobe-work"
    if tool == "goprobe":
        proc = GoProbe(gp_bin, v, work)
        pid = proc.p.pid
    else:
        args = ["--workers", "1", "--ring-size", "64M", *wl_extra]
        if tool.startswith("wirelog-noparse"):
            args.append("--no-parse")
        # "-before": the same run with the --wirelog-before binary.
        this = live.WIRELOG
        if tool.endswith("-before"):
            live.WIRELOG = before
        try:
            proc = live.Capturer(v, work, args)
        finally:
            live.WIRELOG = this
        pid = proc.p.pid
    r0, u0, c0 = rx_packets(v), user_ticks(pid), live.task_ns(pid)
    wall = live.replay(v, pcap, 1, loop)
    time.sleep(0.3)  # the last ring block is retired within 100 ms (both tools)
    r1, u1, c1 = rx_packets(v), user_ticks(pid), live.task_ns(pid)
    hwm = live.status_kb(pid, "VmHWM")
    drops, ring, evicted = "", "", ""
    if tool == "goprobe":
        life, life_rss = proc.stop()
    else:
        st = proc.stop()
        life, drops, life_rss = st["life_cpu_ns"], st["drops"], st["life_maxrss_kb"]
        # Packets through the ring: what the socket filter passed, less the
        # non-IP packets the socket program counted in the kernel (issue 36).
        m = re.search(r"socket program: (\d+) packets not IP", proc.err_path.read_text())
        ring = st["kernel_packets"] - (int(m[1]) if m else 0)
        # Whether every flow was held: a peak RSS of a run that evicted
        # connections or wrote flows early is not the RSS of the whole corpus.
        m = re.findall(r"probe: (\d+) connections evicted, (\d+) flows written early", proc.err_path.read_text())
        evicted = f"{m[-1][0]}/{m[-1][1]}" if m else "?"
    pk = max(r1 - r0, 1)
    return {"tool": tool, "packets": r1 - r0, "wall_s": round(wall, 3), "pps": round(pk / wall),
            "user_ns_per_packet": round((u1 - u0) * 1e9 / TICK / pk, 1),
            "cpu_ns_per_packet": round((c1 - c0) / pk, 1),
            "life_ns_per_packet": round(life / pk, 1),
            "peak_rss_mb": round(hwm / 1024, 1), "exit_rss_mb": round(life_rss / 1024, 1),
            "wirelog_kernel_drops": drops, "ring_packets": ring, "evicted_written_early": evicted}


def med(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def rng(rows: list[dict], key: str) -> str:
    vals = [r[key] for r in rows]
    return f"{statistics.median(vals):g}" if len(vals) == 1 else \
        f"{statistics.median(vals):g} ({min(vals):g}-{max(vals):g})"


def render(rows: list[dict], corp: dict, reps: int, goprobe_rev: str) -> str:
    out = [f"wirelog against goProbe ({goprobe_rev}), {time.strftime('%Y-%m-%d %H:%M %Z')}, "
           f"load average {os.getloadavg()[0]:.1f} at the end, `bench/goprobe.py {' '.join(sys.argv[1:])}`; "
           f"medians (range) of {reps} alternated runs; per packet received by the capture interface. User CPU is "
           f"counted in clock ticks ({1000 // TICK} ms): read the all-CPU columns (ns resolution) for small differences.", "",
           "| corpus | tool | packets/s | user ns CPU/packet | user / goProbe | all CPU ns/packet (replay window) | "
           "all / goProbe | to exit ns/packet | peak RSS MB | peak RSS to exit MB | wirelog kernel drops | "
           "packets through the ring |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    names = {"goprobe": "goProbe", "wirelog-noparse": "wirelog capture --no-parse", "wirelog-parse": "wirelog capture",
             "wirelog-noparse-before": "wirelog capture --no-parse (--wirelog-before)",
             "wirelog-parse-before": "wirelog capture (--wirelog-before)"}
    for c in corp:
        gp = [r for r in rows if r["corpus"] == c and r["tool"] == "goprobe"]
        for tool in names:
            rs = [r for r in rows if r["corpus"] == c and r["tool"] == tool]
            if not rs:
                continue
            def ratio(key: str) -> str:
                return f"{med(rs, key) / med(gp, key):.2f}x" if gp and med(gp, key) else "-"
            drops = sum(int(r["wirelog_kernel_drops"]) for r in rs) if tool != "goprobe" else "-"
            out.append(f"| {c} | {names[tool]} | {med(rs, 'pps'):,.0f} | {rng(rs, 'user_ns_per_packet')} | "
                       f"{ratio('user_ns_per_packet')} | {rng(rs, 'cpu_ns_per_packet')} | {ratio('cpu_ns_per_packet')} | "
                       f"{rng(rs, 'life_ns_per_packet')} | {rng(rs, 'peak_rss_mb')} | {rng(rs, 'exit_rss_mb')} | {drops} | "
                       f"{rng(rs, 'ring_packets') if tool != 'goprobe' else '-'} |")
    out += [""] + [f"- {c}: {d}" for c, (_, _, d) in corp.items()] + [""]
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", type=Path, help="goProbe's source: a checkout or a bare git directory")
    ap.add_argument("--goprobe", type=Path, help="an already built goProbe binary (--src then only finds the gptest capture)")
    ap.add_argument("--reps", type=int, default=3, help="alternated runs per corpus and tool (default 3)")
    ap.add_argument("--corpora", default="36k,540k,gptest", help="36k, 540k, gptest (default all)")
    ap.add_argument("--gptest-loop", type=int, default=100, help="replays of goProbe's test capture per run")
    ap.add_argument("--tools", default="goprobe,wirelog-noparse,wirelog-parse", help="which of the three")
    ap.add_argument("--wirelog-extra", default="", help="more wirelog capture options, e.g. '--memory 1G'")
    ap.add_argument("--no-build", action="store_true", help="use wirelog in target/release as it is")
    ap.add_argument("--wirelog-before", type=Path,
                    help="another wirelog binary, run as the tools wirelog-noparse-before/wirelog-parse-before "
                         "(a before/after in one run)")
    a = ap.parse_args()
    live.require_root_and_replay("goprobe.py")
    if a.goprobe is None and a.src is None:
        sys.exit("goprobe.py: give --src (goProbe's source) or --goprobe (a built binary)")
    if not a.no_build:
        log("cargo build --release -p wirelog -p wirelog-bench")
        if subprocess.run(["cargo", "build", "--release", "-p", "wirelog", "-p", "wirelog-bench"], cwd=REPO).returncode:
            return 1
    tree = None
    rev = "goProbe"
    if a.src is not None:
        tree = source_tree(a.src.resolve())
        if (a.src / "HEAD").exists():
            rev = "goProbe " + live.must(["git", f"--git-dir={a.src}", "rev-parse", "--short=7", "HEAD"]).strip()
    gp_bin = a.goprobe.resolve() if a.goprobe is not None else build_goprobe(tree)
    tools = a.tools.split(",")
    corp = corpora(a.corpora.split(","), tree, a.gptest_loop)
    rows: list[dict] = []
    v = live.Veth(1500)
    try:
        for rep in range(a.reps):
            for c, (pcap, loop, _) in corp.items():
                # Rotate the order each repetition, so no tool always runs first after a corpus change.
                for tool in tools[rep % len(tools):] + tools[:rep % len(tools)]:
                    row = {"corpus": c, "rep": rep,
                           **one_run(tool, gp_bin, v, pcap, loop, a.wirelog_extra.split(), a.wirelog_before)}
                    rows.append(row)
                    log(f"{c} {tool} rep{rep}: {row['packets']:,} packets, {row['pps']:,} pps, "
                        f"user {row['user_ns_per_packet']} ns/packet, all {row['cpu_ns_per_packet']}, "
                        f"to exit {row['life_ns_per_packet']}, peak RSS {row['peak_rss_mb']} MB ({row['exit_rss_mb']} to exit), "
                        f"drops {row['wirelog_kernel_drops']}, evicted/written early {row['evicted_written_early']}")
    finally:
        v.close()
        shutil.rmtree(OUT / "goprobe-work", ignore_errors=True)
    with open(OUT / "goprobe_runs.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    md = render(rows, corp, a.reps, rev)
    (OUT / "goprobe.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
