#!/usr/bin/env python3
"""wirelog's benchmark driver (Python 3.11 standard library only). Run it as `bench/run`.

What one run does, in order:
  1. builds `cargo build --release -p wirelog -p wirelog-bench`;
  2. makes sure the captures exist (mixed, http, mysql, mysql_text), generating missing ones with
     ../shared/bench/gen_{mixed,http,mysql}.sh into $WIRELOG_PEERS_DIR (default target/wirelog-peers);
  3. makes the scaled corpus mixed_x{N}.pcap with `wirelog-bench scale`;
  4. times wirelog and its peers (tcpdump -w, softflowd -> nfcapd in a private network namespace,
     argus, tshark, nfpcapd, pmacctd, ndpiReader, and a `cat` baseline) on every capture, under
     /usr/bin/time -v, with the method of ../shared/bench/bench_offline.sh;
  5. runs the in-memory benchmark `wirelog-bench pipeline`;
  6. writes bench/out/results.md (also printed) and the raw runs as CSV next to it.

Everything it starts (the nfcapd collector, timed commands) is killed by PID, and the network
namespace is deleted, on every exit path.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import math
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import query_bench  # noqa: E402  (bench/query_bench.py, next to this file)

REPO = Path(__file__).resolve().parent.parent
SHARED_BENCH = (REPO / ".." / "shared" / "bench").resolve()
OUT_DIR = REPO / "bench" / "out"
WIRELOG = REPO / "target" / "release" / "wirelog"
WIRELOG_BENCH = REPO / "target" / "release" / "wirelog-bench"

# ---- targets (SPEC.md, "Targets"); ratios are wirelog packets/CPU-s divided by the peer's ---------
E2E_TARGETS = {"tcpdump_w": 0.5, "softflowd": 5.0, "tshark": 50.0}
# Issue 5: with all parsers on, on the MySQL and HTTP captures.
TX_TARGETS = {"pt_query_digest": 100.0, "tshark": 20.0}
NS_PER_PACKET_FEW = 25.0        # decode + tracking in memory, few flows
NS_PER_PACKET_MILLION = 80.0    # ... at >= 1M concurrent flows
MILLION = 1_000_000
BYTES_PER_CONNECTION = 64.0     # judged on the >= 1M flows row

# ---- captures ------------------------------------------------------------------------------------
BASE_PCAPS = ["mixed", "http", "mysql", "mysql_text"]
GEN_SCRIPT = {"mixed": "gen_mixed.sh", "http": "gen_http.sh", "mysql": "gen_mysql.sh",
              "mysql_text": "gen_mysql.sh"}

# ---- peer packages (Debian 12) -------------------------------------------------------------------
PEER_PKGS = ["tcpdump", "tshark", "wireshark-common", "softflowd", "pmacct", "argus-client",
             "argus-server", "nfdump", "libndpi-bin", "time", "iproute2"]

# ---- end-to-end tools ----------------------------------------------------------------------------
# Each command runs under `/usr/bin/time -v bash -c CMD` with PCAP (the capture), W (a scratch
# directory), NS (the network namespace) and WIRELOG in the environment. Commands and flags are
# those of ../shared/bench/bench_offline.sh (except that tcpdump's one stderr line goes to $W/out
# rather than /dev/null, so a failure can be shown); wirelog's is `wirelog read -C --quiet --store DIR --logs DIR` (conn.log, flows.log and the
# Parquet store all written, as by default).
# PREP runs before every run (also inside loops, for every tool alike).
PREP = 'rm -rf "$W/logs" "$W/store" "$W/nfp" "$W/out.argus" "$W/pm.csv"; mkdir -p "$W/nfp"'


@dataclass
class Tool:
    name: str
    cmd: str
    needs: list[str]            # executables that must be installed
    what: str = ""              # what the count column counts
    only_pcaps: str = ""        # run only on captures whose name contains this


TOOLS = [
    Tool("cat", 'cat "$PCAP" >/dev/null', ["cat"]),
    Tool("wirelog", '"$WIRELOG" read -C --quiet --store "$W/store" --logs "$W/logs" "$PCAP" >"$W/out" 2>&1', [],
         "conn.log records"),
    # The default checksum mode (auto: offloaded checksums accepted), beside -C.
    Tool("wirelog_auto", '"$WIRELOG" read --quiet --store "$W/store" --logs "$W/logs" "$PCAP" >"$W/out" 2>&1', [],
         "conn.log records"),
    Tool("tcpdump_w", 'tcpdump -r "$PCAP" -w /dev/null 2>"$W/out"', ["tcpdump"]),
    Tool("softflowd", 'ip netns exec "$NS" softflowd -r "$PCAP" -n 127.0.0.1:9995 -v 9 -6 -d -m 1000000 '
         '>"$W/out" 2>&1', ["softflowd", "nfcapd", "ip"], "bidir flows (all protocols)"),
    Tool("argus", 'argus -r "$PCAP" -w "$W/out.argus" >"$W/out" 2>&1', ["argus"],
         "ra records / racluster flows"),
    Tool("tshark", 'tshark -n -r "$PCAP" -q -z conv,tcp >"$W/out" 2>&1', ["tshark"],
         "TCP conversations (4-tuple)"),
    Tool("nfpcapd", 'nfpcapd -r "$PCAP" -w "$W/nfp" >"$W/out" 2>&1', ["nfpcapd"], "unidir flows"),
    Tool("pmacctd", 'pmacctd -f "$W/pm.conf" >"$W/out" 2>&1', ["pmacctd"], "unidir 5-tuple aggregates"),
    Tool("ndpiReader", 'ndpiReader -i "$PCAP" >"$W/out" 2>&1', ["ndpiReader"], "bidir flows"),
    # As ../shared/bench/bench_offline.sh runs it (the Percona method): MySQL captures only.
    Tool("pt_query_digest", 'tcpdump -r "$PCAP" -s 65535 -x -nn -q -tttt "port 3306" 2>/dev/null | '
         'PERCONA_TOOLKIT_TCP_ERRORS_FILE="$W/errors" pt-query-digest --type tcpdump >"$W/out" 2>&1',
         ["tcpdump", "pt-query-digest"], "queries (wirelog: mysql.log records)", "mysql"),
]
TOOL_BY_NAME = {t.name: t for t in TOOLS}
ALIASES = {"tshark_conv": "tshark", "tcpdump": "tcpdump_w", "ndpireader": "ndpiReader",
           "pt-query-digest": "pt_query_digest"}

PM_CONF = """daemonize: false
pcap_savefile: {pcap}
aggregate: src_host, dst_host, src_port, dst_port, proto
plugins: print
print_output: csv
print_output_file: {w}/pm.csv
print_refresh_time: 3600
plugin_buffer_size: 1048576
plugin_pipe_size: 134217728
logfile: {w}/pm.log
"""

T0 = time.monotonic()


def log(msg: str) -> None:
    el = time.monotonic() - T0
    print(f"[{time.strftime('%H:%M:%S')} +{el:5.0f}s] {msg}", file=sys.stderr, flush=True)


def sh(cmd: list[str] | str, **kw) -> subprocess.CompletedProcess:
    """Run a short, untimed helper command; never raises on failure."""
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    try:
        return subprocess.run(cmd, shell=isinstance(cmd, str), **kw)
    except (OSError, subprocess.SubprocessError) as e:
        return subprocess.CompletedProcess(cmd, 127, "", str(e))


def loadavg1() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


# ---- process bookkeeping -------------------------------------------------------------------------
class Procs:
    """Every background process we start, plus the namespace; torn down by cleanup()."""

    def __init__(self) -> None:
        self.bg: list[subprocess.Popen] = []
        self.current: subprocess.Popen | None = None   # the timed command (or gen script) running now
        self.current_how: tuple[float, bool] = (5.0, True)   # kill()'s grace and group for it
        self.ns: str | None = None
        self.policy_rc: Path | None = None

    def kill(self, p: subprocess.Popen, grace: float = 5.0, group: bool = True) -> None:
        """SIGTERM, then SIGKILL after `grace` s. Our children run in their own session, so their
        process group id is their PID; group=False signals only the child first (a gen script's
        own trap then stops what it started), its group only if it does not exit in time."""
        if p.poll() is not None:
            return
        try:
            if group:
                os.killpg(p.pid, signal.SIGTERM)
            else:
                p.terminate()
        except OSError:
            p.terminate()
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                p.kill()
            p.wait()

    def cleanup(self) -> None:
        if self.current is not None:
            self.kill(self.current, *self.current_how)
            self.current = None
        for p in reversed(self.bg):
            self.kill(p)
        self.bg.clear()
        if self.ns:
            sh(["ip", "netns", "del", self.ns])
            self.ns = None
        if self.policy_rc is not None:
            self.policy_rc.unlink(missing_ok=True)
            self.policy_rc = None


PROCS = Procs()


def on_signal(signum, _frame):
    log(f"got signal {signum}: stopping and cleaning up")
    raise SystemExit(128 + signum)


# ---- setup steps ---------------------------------------------------------------------------------
def build(args) -> tuple[bool, str]:
    """Returns (wirelog_bench_built, message). Exits if wirelog itself cannot be built."""
    if args.no_build:
        msg = "build skipped (--no-build): using the binaries in target/release"
        log(msg)
        return WIRELOG_BENCH.exists(), msg
    cmd = ["cargo", "build", "--release", "-p", "wirelog", "-p", "wirelog-bench"]
    log("building: " + " ".join(cmd))
    r = sh(cmd, cwd=REPO)
    if r.returncode == 0:
        return True, " ".join(cmd)
    err = "\n".join(r.stderr.strip().splitlines()[-6:])
    log(f"building wirelog-bench failed (rc={r.returncode}):\n{err}\n"
        "-> retrying with wirelog alone; in-memory benchmark and scaled corpus will be skipped")
    cmd2 = ["cargo", "build", "--release", "-p", "wirelog"]
    r2 = sh(cmd2, cwd=REPO)
    if r2.returncode != 0:
        sys.exit(f"bench: `{' '.join(cmd2)}` failed (rc={r2.returncode}):\n{r2.stderr[-3000:]}\n"
                 "(use --no-build to benchmark the binaries already in target/release)")
    first = next((l for l in r.stderr.splitlines() if "error" in l), err.splitlines()[-1] if err else "")
    return False, (f"{' '.join(cmd2)} (wirelog-bench did not build: {first.strip()})")


def install_peers(args) -> str:
    missing = [p for p in PEER_PKGS if "install ok installed" not in
               sh(["dpkg-query", "-W", "-f=${Status}", p]).stdout]
    if not missing:
        return "all peer packages installed"
    if args.no_install:
        return "not installed (--no-install): " + " ".join(missing)
    if os.geteuid() != 0:
        return "not root, cannot install: " + " ".join(missing)
    log("installing: " + " ".join(missing))
    sh("echo 'wireshark-common wireshark-common/install-setuid boolean false' | debconf-set-selections")
    policy = Path("/usr/sbin/policy-rc.d")
    if not policy.exists():   # keep the packages from starting their daemons on the host
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
        PROCS.policy_rc = policy
    try:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        sh(["apt-get", "update", "-qq"], env=env)
        r = sh(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], env=env)
    finally:
        if PROCS.policy_rc is not None:
            PROCS.policy_rc.unlink(missing_ok=True)
            PROCS.policy_rc = None
    if r.returncode != 0:
        log(f"apt-get install failed (rc={r.returncode}): {r.stderr.strip()[-500:]}")
        return f"apt-get install {' '.join(missing)} failed (rc={r.returncode})"
    return "installed: " + " ".join(missing)


def running_generators(script: str, peers: Path) -> list[int]:
    """PIDs of `gen_*.sh` runs (started by anyone) writing into the same PEERS_DIR."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
            if not any(a.endswith(script.encode()) for a in argv[:3]):
                continue
            env = dict(x.split(b"=", 1) for x in (d / "environ").read_bytes().split(b"\0") if b"=" in x)
        except (OSError, ValueError):
            continue
        theirs = env.get(b"PEERS_DIR") or env.get(b"TMPDIR", b"/tmp") + b"/wirelog-peers"
        if Path(theirs.decode(errors="replace")).resolve() == peers:
            pids.append(int(d.name))
    return pids


def wait_generators(script: str, peers: Path, limit: float = 1800) -> bool:
    """A capture being written by someone else's gen script must not be read half-written, and two
    runs of one script would share its namespace and ports: wait (bounded) for theirs to finish."""
    deadline = time.monotonic() + limit
    pids = running_generators(script, peers)
    if pids:
        log(f"{script} is already running for {peers} (pid {', '.join(map(str, pids))}): waiting "
            f"for it (at most {limit / 60:.0f} min)")
    while pids:
        if time.monotonic() > deadline:
            return False
        time.sleep(5)
        pids = running_generators(script, peers)
    return True


def ensure_captures(names: list[str], peers: Path, logs: Path) -> dict[str, str]:
    """Generate missing captures. Returns {name: problem} for those still missing."""
    pcaps = peers / "pcaps"
    problems: dict[str, str] = {}
    done_scripts: set[str] = set()
    for name in names:
        if not wait_generators(GEN_SCRIPT[name], peers):
            problems[name] = f"{GEN_SCRIPT[name]} of another run was still writing it after 30 min"
            continue
        if (pcaps / f"{name}.pcap").exists():
            continue
        script = GEN_SCRIPT[name]
        if script not in done_scripts:
            done_scripts.add(script)
            path = SHARED_BENCH / script
            lf = logs / f"{script}.log"
            if not path.exists():
                problems[name] = f"missing, and {path} does not exist"
                continue
            if os.geteuid() != 0:
                problems[name] = f"missing, and {script} needs root"
                continue
            log(f"{name}.pcap missing: running PEERS_DIR={peers} bash {path} (a few minutes; log {lf})")
            with open(lf, "w") as f:
                p = subprocess.Popen(["bash", str(path)], env=dict(os.environ, PEERS_DIR=str(peers)),
                                     stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
                PROCS.current, PROCS.current_how = p, (60.0, False)
                rc = p.wait()
                PROCS.current = None
            if rc != 0:
                log(f"{script} failed (rc={rc}); see {lf}")
        if not (pcaps / f"{name}.pcap").exists():
            problems.setdefault(name, f"missing: {script} did not produce it (see {logs / (script + '.log')})")
    return problems


def make_scaled(src: Path, copies: int, snap: int) -> tuple[Path | None, str, str]:
    """Returns (path or None, command, problem)."""
    out = src.with_name(f"{src.stem}_x{copies}.pcap")
    cmd = [str(WIRELOG_BENCH), "scale", "--copies", str(copies), "--snap", str(snap), str(src), str(out)]
    cmd_s = " ".join(shlex.quote(c) for c in cmd)
    if out.exists() and out.stat().st_mtime >= max(src.stat().st_mtime, WIRELOG_BENCH.stat().st_mtime):
        log(f"scaled corpus up to date: {out}")
        return out, cmd_s, ""
    log(f"making the scaled corpus: {cmd_s}")
    tmp = out.with_suffix(".pcap.part")
    r = sh(cmd[:-1] + [str(tmp)])
    if r.returncode != 0 or not tmp.exists():
        tmp.unlink(missing_ok=True)
        return None, cmd_s, f"wirelog-bench scale failed (rc={r.returncode}): {r.stderr.strip()[-300:]}"
    tmp.rename(out)
    return out, cmd_s, ""


def packet_count(p: Path) -> int | None:
    r = sh(["capinfos", "-M", "-c", str(p)])
    m = re.search(r"Number of packets:\s*(\d+)", r.stdout)
    return int(m.group(1)) if m else None


# ---- timing --------------------------------------------------------------------------------------
@dataclass
class Unit:
    """One timed unit: n back-to-back runs under one /usr/bin/time."""
    n: int
    wall: float = math.nan
    user: float = math.nan
    sys: float = math.nan
    rss_kb: int = 0
    rc: int = 0
    load: str = ""
    timeout: bool = False

    @property
    def cpu_per_run(self) -> float:
        return (self.user + self.sys) / self.n

    @property
    def wall_per_run(self) -> float:
        return self.wall / self.n


def parse_time_v(path: Path) -> tuple[float, float, float, int]:
    wall = user = sys_ = math.nan
    rss = 0
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return wall, user, sys_, rss
    for line in text.splitlines():
        key, _, val = line.strip().rpartition(": ")
        if key.startswith("Elapsed (wall clock)"):
            wall = 0.0
            for part in val.split(":"):
                wall = wall * 60 + float(part)
        elif key == "User time (seconds)":
            user = float(val)
        elif key == "System time (seconds)":
            sys_ = float(val)
        elif key == "Maximum resident set size (kbytes)":
            rss = int(val)
    return wall, user, sys_, rss


def timed(script: str, env: dict, n: int, tfile: Path, timeout: float) -> Unit:
    if n > 1:
        body = f'for ((i=0;i<{n};i++)); do {PREP}; {{ {script} ; }} || exit $?; done'
    else:
        body = f"{PREP}; {script}"
    u = Unit(n=n, load=loadavg1())
    tfile.unlink(missing_ok=True)
    p = subprocess.Popen(["/usr/bin/time", "-v", "-o", str(tfile), "bash", "-c", body], env=env,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    PROCS.current, PROCS.current_how = p, (5.0, True)
    try:
        u.rc = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        PROCS.kill(p)
        u.rc, u.timeout = -1, True
    PROCS.current = None   # (on an exception it stays set: cleanup() kills it)
    u.wall, u.user, u.sys, u.rss_kb = parse_time_v(tfile)
    return u


# ---- counts (untimed, after the last unit) -------------------------------------------------------
def tool_count(tool: str, w: Path) -> str:
    def out_text() -> str:
        try:
            return (w / "out").read_text(errors="replace")
        except OSError:
            return ""

    def last(pattern: str, text: str) -> str:
        m = re.findall(pattern, text)
        return m[-1] if m else "?"

    try:
        if tool in ("wirelog", "wirelog_auto"):
            def records(name: str) -> int:
                try:
                    with open(w / "logs" / name, errors="replace") as f:
                        return sum(1 for l in f if l and not l.startswith("#"))
                except OSError:
                    return 0
            txs = {n: records(f"{n}.log") for n in ("http", "mysql", "pgsql", "redis", "dns")}
            extra = ", ".join(f"{n} {c}" for n, c in txs.items() if c)
            return str(records("conn.log")) + (f" ({extra})" if extra else "")
        if tool == "pt_query_digest":
            return last(r"# Overall: ([\d.]+[kM]?) total", out_text())
        if tool == "tshark":
            return str(out_text().count("<->"))
        if tool == "softflowd":
            return last(r"Flows exported:\s*(\d+)", out_text())
        if tool == "ndpiReader":
            return last(r"Unique flows:\s*(\d+)", out_text())
        if tool == "pmacctd":
            with open(w / "pm.csv") as f:
                return str(sum(1 for _ in f) - 1)
        if tool == "nfpcapd":
            return last(r"Flows:\s*(\d+)", sh(["nfdump", "-R", str(w / "nfp"), "-I"]).stdout)
        if tool == "argus":
            a = w / "out.argus"
            ra = sh(["ra", "-n", "-r", str(a), "-", "not man"]).stdout.count("\n") - 1
            rc = sh(["racluster", "-n", "-r", str(a), "-", "not man"]).stdout.count("\n") - 1
            return f"{max(ra, 0)}/{max(rc, 0)}"
    except OSError:
        return "?"
    return ""


# ---- results -------------------------------------------------------------------------------------
@dataclass
class E2E:
    pcap: str
    tool: str
    status: str = "ok"          # ok | not installed | failed rc=N | timeout | skipped: ...
    units: list[Unit] = field(default_factory=list)
    probe: Unit | None = None
    count: str = ""

    def med(self, attr: str) -> float:
        vals = [getattr(u, attr) for u in self.units if not math.isnan(getattr(u, attr))]
        return statistics.median(vals) if vals else math.nan

    @property
    def cpu(self) -> float:
        return self.med("cpu_per_run")

    @property
    def wall(self) -> float:
        return self.med("wall_per_run")

    @property
    def rss_mb(self) -> float:
        vals = [u.rss_kb for u in self.units if u.rss_kb]
        return statistics.median(vals) / 1024 if vals else math.nan


def bench_tool(tool: Tool, pcap_name: str, pcap: Path, work: Path, errdir: Path, env: dict,
               args, unavailable: str) -> E2E:
    res = E2E(pcap_name, tool.name)
    if tool.only_pcaps and tool.only_pcaps not in pcap_name:
        res.status = f"not run (only on {tool.only_pcaps} captures)"
        return res
    if unavailable:
        res.status = unavailable
        return res
    w = work / f"{pcap_name}.{tool.name}"
    shutil.rmtree(w, ignore_errors=True)
    w.mkdir(parents=True)
    if tool.name == "pmacctd":
        (w / "pm.conf").write_text(PM_CONF.format(pcap=pcap, w=w))
    env = dict(env, PCAP=str(pcap), W=str(w))
    tfile = work / f"{pcap_name}.{tool.name}.time"

    def failed(u: Unit) -> bool:
        if u.timeout:
            res.status = f"timeout (> {args.timeout:.0f} s)"
        elif u.rc != 0:
            res.status = f"failed rc={u.rc}"
        else:
            return False
        ef = errdir / f"{pcap_name}.{tool.name}.txt"
        tail = ""
        if (w / "out").exists():
            tail = (w / "out").read_text(errors="replace")[-4000:]
        ef.write_text(f"command: {tool.cmd}\nPCAP={pcap}\nstatus: {res.status}\n\n{tail}")
        log(f"  {pcap_name} {tool.name}: {res.status}; output in {ef}")
        return True

    # a first run decides between single runs and loops (as bench_offline.sh's loop phase):
    # runs under --loop-below CPU-s are repeated back-to-back so a unit takes ~--loop-cpu CPU-s,
    # and /usr/bin/time's 10 ms resolution stops mattering.
    probe = timed(tool.cmd, env, 1, tfile, args.timeout)
    res.probe = probe
    if failed(probe):
        return res
    cpu = probe.user + probe.sys
    if cpu >= args.loop_below:
        n = 1
        res.units.append(probe)
    else:
        n = max(2, min(args.loop_max, math.ceil(args.loop_cpu / max(cpu, 0.005))))
    while len(res.units) < args.reps:
        u = timed(tool.cmd, env, n, tfile, args.timeout)
        if failed(u):
            res.units.append(u)
            return res
        res.units.append(u)
    res.count = tool_count(tool.name, w)
    log(f"  {pcap_name:<12} {tool.name:<11} cpu/run={res.cpu:.4f}s (x{n}, {len(res.units)} units) "
        f"rss={res.rss_mb:.0f}MB count={res.count} load={loadavg1()}")
    return res


def parse_kv_lines(text: str) -> list[dict[str, str]]:
    runs = []
    for line in text.splitlines():
        kv = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
        if kv:
            runs.append(kv)
    return runs


def as_float(v: str | None) -> float | None:
    if v is None:
        return None
    try:
        return float(v.rstrip("%"))
    except ValueError:
        return None


@dataclass
class Pipe:
    label: str
    cmd: list[str]
    kind: str                    # few | million
    status: str = "ok"
    runs: list[dict[str, str]] = field(default_factory=list)
    unit: Unit | None = None

    def med(self, key: str) -> float | None:
        vals = [x for x in (as_float(r.get(key)) for r in self.runs) if x is not None]
        return statistics.median(vals) if vals else None


def bench_pipeline(pipes: list[Pipe], work: Path, errdir: Path, args) -> None:
    for p in pipes:
        if p.status != "ok":
            continue
        cmd_s = " ".join(shlex.quote(c) for c in p.cmd)
        log(f"in-memory: {cmd_s}")
        out = work / "pipeline.out"
        tfile = work / "pipeline.time"
        u = timed(f"{cmd_s} >{shlex.quote(str(out))} 2>&1", dict(os.environ, W=str(work)), 1, tfile,
                  args.timeout)
        p.unit = u
        text = out.read_text(errors="replace") if out.exists() else ""
        p.runs = [r for r in parse_kv_lines(text) if "ns_per_packet" in r]
        if u.timeout or u.rc != 0 or not p.runs:
            p.status = (f"timeout (> {args.timeout:.0f} s)" if u.timeout else
                        f"failed rc={u.rc}" if u.rc else "no ns_per_packet= lines in output")
            ef = errdir / f"pipeline.{p.label.split()[0]}.{p.kind}.txt"
            ef.write_text(f"command: {cmd_s}\nstatus: {p.status}\n\n{text[-4000:]}")
            log(f"  {p.status}; output in {ef}")
        else:
            log(f"  ns/packet={p.med('ns_per_packet')} peak_connections={p.med('peak_connections')} "
                f"bytes/conn={p.med('bytes_per_connection')} ({len(p.runs)} runs)")


# ---- report --------------------------------------------------------------------------------------
def fmt_rate(x: float) -> str:
    if math.isnan(x) or math.isinf(x):
        return "-"
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k"
    return f"{x:.0f}"


def fmt(x: float | None, spec: str = ".3f") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return format(x, spec)


def machine_info() -> dict[str, str]:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        m = re.search(r"MemTotal:\s*(\d+)", Path("/proc/meminfo").read_text())
        mem = f"{int(m.group(1)) / 1024 / 1024:.1f} GiB" if m else "?"
    except OSError:
        pass
    try:
        la = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        la = "?"
    rev = sh(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]).stdout.strip() or "?"
    dirty = sh(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"]).stdout.strip()
    os_name = "?"
    try:
        m = re.search(r'PRETTY_NAME="([^"]*)"', Path("/etc/os-release").read_text())
        os_name = m.group(1) if m else "?"
    except OSError:
        pass
    return {"nproc": str(os.cpu_count()), "cpu": cpu, "memory": mem, "kernel": platform.release(),
            "os": os_name, "loadavg": la,
            "commit": rev + (f" (+{len(dirty.splitlines())} modified files)" if dirty else ""),
            "rustc": sh(["rustc", "-V"]).stdout.strip() or "?"}


def tool_versions() -> str:
    vs = []
    probes = [("tcpdump", ["tcpdump", "--version"]), ("tshark", ["tshark", "-v"]),
              ("softflowd", ["dpkg-query", "-W", "-f=${Version}", "softflowd"]),
              ("argus", ["dpkg-query", "-W", "-f=${Version}", "argus-server"]),
              ("nfdump", ["dpkg-query", "-W", "-f=${Version}", "nfdump"]),
              ("pmacct", ["dpkg-query", "-W", "-f=${Version}", "pmacct"]),
              ("nDPI", ["dpkg-query", "-W", "-f=${Version}", "libndpi-bin"])]
    for name, cmd in probes:
        r = sh(cmd)
        text = (r.stdout or r.stderr).strip()
        if r.returncode != 0 or not text:
            continue
        m = re.search(r"\d+[\d.:+~a-z-]*", text.splitlines()[0])
        vs.append(f"{name} {m.group(0) if m else text.splitlines()[0]}")
    return ", ".join(vs)


def fnum(x: float | None) -> str:
    return "?" if x is None else f"{x:,.0f}"


def met(ok: bool) -> str:
    return "met" if ok else "**not met**"


def render(ctx: dict) -> str:
    a = ctx["args"]
    L: list[str] = []
    L.append(f"# wirelog benchmark results ({ctx['started']})\n")
    L.append(f"Mode: {'--quick' if a.quick else 'full'}; REPS={a.reps}; total run time "
             f"{ctx['elapsed']:.0f} s ({ctx['elapsed'] / 60:.1f} min). CPU s = user+sys from "
             "`/usr/bin/time -v`, median over REPS timed units; runs under "
             f"{a.loop_below} CPU-s are timed as loops of back-to-back runs (column `runs/unit`).\n")
    for note in ctx["notes"]:
        L.append(f"- {note}")
    if ctx["notes"]:
        L.append("")

    # ---- (a) end to end
    L.append("## End to end: reading a capture file\n")
    res: dict[tuple[str, str], E2E] = ctx["e2e"]
    pcaps = ctx["pcaps"]
    if not res:
        L.append("(no end-to-end tools selected)\n")
    else:
        L.append("Targets (SPEC): wirelog packets per CPU-second >= 0.5x `tcpdump -r f -w /dev/null`, "
                 ">= 5x softflowd, >= 50x tshark. Ratio = wirelog packets/CPU-s divided by the tool's.\n")
        # summary of targets
        L.append("| capture | packets | " + " | ".join(f"wirelog / {t} (target >= {v:g}x)"
                                                        for t, v in E2E_TARGETS.items()) + " |")
        L.append("|---|---:|" + "---|" * len(E2E_TARGETS))
        for pc in pcaps:
            wl = res.get((pc.name, "wirelog"))
            cells = []
            for t, target in E2E_TARGETS.items():
                peer = res.get((pc.name, t))
                if wl is None or peer is None:
                    cells.append("not run")
                elif wl.status != "ok" or not wl.units:
                    cells.append(f"wirelog {wl.status}")
                elif peer.status != "ok" or not peer.units:
                    cells.append(f"{t} {peer.status}")
                else:
                    r = peer.cpu / wl.cpu if wl.cpu > 0 else math.inf
                    cells.append(f"{r:.2f}x {met(r >= target)}")
            L.append(f"| {pc.name} | {fnum(pc.packets)} | " + " | ".join(cells) + " |")
        L.append("")
        for pc in pcaps:
            L.append(f"### {pc.name} ({pc.path.name}, {fnum(pc.packets)} packets, {pc.size / 1e6:.0f} MB)\n")
            if pc.problem:
                L.append(f"Not measured: {pc.problem}\n")
                continue
            wl = res.get((pc.name, "wirelog"))
            L.append("| tool | CPU s/run (median) | packets per CPU-s | max RSS MB | wall s/run | "
                     "runs/unit x units | output count | wirelog / tool | target | |")
            L.append("|---|---:|---:|---:|---:|---:|---|---:|---:|---|")
            for t in ctx["tools"]:
                r = res.get((pc.name, t.name))
                if r is None:
                    continue
                if r.status != "ok" or not r.units:
                    L.append(f"| {t.name} | {r.status} | | | | | | | | |")
                    continue
                pps = pc.packets / r.cpu if pc.packets and r.cpu > 0 else math.inf
                ratio = tgt = verdict = ""
                if t.name != "wirelog" and wl is not None and wl.status == "ok" and wl.units:
                    rr = r.cpu / wl.cpu if wl.cpu > 0 else math.inf
                    ratio = f"{rr:.2f}x"
                    targets = dict(E2E_TARGETS)
                    if pc.name.startswith(("mysql", "http")):
                        # Issue 5's targets apply to these captures (wirelog parses them).
                        targets.update(TX_TARGETS)
                    if t.name in targets:
                        tgt = f">= {targets[t.name]:g}x"
                        verdict = met(rr >= targets[t.name])
                what = f" ({t.what})" if t.what and r.count else ""
                L.append(f"| {t.name} | {r.cpu:.4f} | {fmt_rate(pps)} | {r.rss_mb:.0f} | {r.wall:.4f} | "
                         f"{r.units[0].n} x {len(r.units)} | {r.count}{what} | {ratio} | {tgt} | {verdict} |")
            L.append("")

    # ---- (b) in memory
    L.append("## In memory: decode + flow/connection tracking (`wirelog-bench pipeline`)\n")
    pipes: list[Pipe] = ctx["pipes"]
    if not pipes:
        L.append("(not selected)\n")
    else:
        L.append(f"Targets (SPEC): <= {NS_PER_PACKET_FEW:g} ns/packet with few flows, <= "
                 f"{NS_PER_PACKET_MILLION:g} ns/packet at >= 1M concurrent flows (per core); <= "
                 f"{BYTES_PER_CONNECTION:g} bytes per connection (judged at >= 1M flows). Values are "
                 "medians over the runs the benchmark prints; targets are judged on `ns_per_packet`, "
                 "`cpu_ns_per_packet` (CPU time, if printed) is shown beside it.\n")
        L.append("| corpus | runs | ns/packet | CPU ns/packet | packets | connections | peak connections | "
                 "bytes/connection | max RSS MB | target ns/packet | | target bytes/conn | |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
        for p in pipes:
            if p.status != "ok":
                L.append(f"| {p.label} | {p.status} | | | | | | | | | | | |")
                continue
            ns = p.med("ns_per_packet")
            peak = p.med("peak_connections")
            bpc = p.med("bytes_per_connection")
            rss = p.med("max_rss_mb")
            if rss is None and p.unit is not None and p.unit.rss_kb:
                rss = p.unit.rss_kb / 1024
            t_ns = v_ns = t_b = v_b = ""
            if p.kind == "few":
                t_ns = f"<= {NS_PER_PACKET_FEW:g}"
                v_ns = met(ns is not None and ns <= NS_PER_PACKET_FEW)
            elif p.kind == "info":
                t_ns = "(many short flows: no target)"
            elif peak is not None and peak >= MILLION:
                t_ns = f"<= {NS_PER_PACKET_MILLION:g}"
                v_ns = met(ns is not None and ns <= NS_PER_PACKET_MILLION)
                t_b = f"<= {BYTES_PER_CONNECTION:g}"
                v_b = met(bpc is not None and bpc <= BYTES_PER_CONNECTION)
            else:
                t_ns = "n/a: peak < 1M, raise --million-copies"
            L.append(f"| {p.label} | {len(p.runs)} | {fmt(ns, '.1f')} | {fmt(p.med('cpu_ns_per_packet'), '.1f')} | "
                     f"{fnum(p.med('packets'))} | "
                     f"{fnum(p.med('connections'))} | {fnum(peak)} | {fmt(bpc, '.1f')} | {fmt(rss, '.0f')} | "
                     f"{t_ns} | {v_ns} | {t_b} | {v_b} |")
        L.append("")
        keys: list[str] = []
        for p in pipes:
            for r in p.runs:
                keys += [k for k in r if k not in keys]
        if keys:
            L.append("All keys printed by `wirelog-bench pipeline` (median over runs):\n")
            L.append("| corpus | " + " | ".join(keys) + " |")
            L.append("|---|" + "---:|" * len(keys))
            for p in pipes:
                if not p.runs:
                    continue
                cells = []
                for k in keys:
                    m = p.med(k)
                    if m is None:
                        cells.append(p.runs[-1].get(k, ""))
                    else:
                        cells.append(f"{int(m):,}" if m == int(m) else f"{m:.6g}")
                L.append(f"| {p.label} | " + " | ".join(cells) + " |")
            L.append("")

    if ctx.get("query"):
        L.extend(query_bench.render(ctx["query"]))

    # ---- (c) how
    L.append("## How this was measured\n")
    mi = ctx["machine"]
    L.append(f"- Date: {ctx['started']} (finished {ctx['finished']})")
    L.append(f"- Machine: {mi['nproc']} CPUs, {mi['cpu']}, {mi['memory']} RAM; kernel {mi['kernel']}; "
             f"{mi['os']}")
    L.append(f"- Load average at start: {mi['loadavg']}; at end: {ctx['load_end']} "
             "(other jobs on this machine inflate wall time more than CPU time)")
    L.append(f"- wirelog commit {mi['commit']}; {mi['rustc']}")
    L.append(f"- Peers: {ctx['versions']}; packages: {ctx['install']}")
    L.append(f"- Build: `{ctx['build']}`")
    L.append(f"- Captures: {ctx['peers']}/pcaps (generated by `PEERS_DIR={ctx['peers']} bash "
             f"{SHARED_BENCH}/gen_{{mixed,http,mysql}}.sh` when missing)")
    if ctx.get("scale_cmd"):
        L.append(f"- Scaled corpus: `{ctx['scale_cmd']}`")
    L.append("- Each capture is read once with `cat` first (page cache warm). Every tool command runs as "
             "`/usr/bin/time -v bash -c 'PREP; CMD'`. A first run (`probe`) measures the CPU time; if it "
             f"is at least {a.loop_below} s it counts as the first unit, if it is under {a.loop_below} s, each timed unit is `for ((i=0;i<N;i++)); do PREP; CMD; "
             f"done` with N = ceil({a.loop_cpu} s / CPU of one run), at most {a.loop_max}, and CPU is divided "
             f"by N. REPS={a.reps} units per tool and capture; the table shows medians.")
    L.append(f"- PREP: `{PREP}`")
    L.append("- softflowd exports NetFlow v9 to `nfcapd -w DIR -b 127.0.0.1 -p 9995 -B 8388608` running in "
             "a private network namespace ($NS), as in ../shared/bench/bench_offline.sh; pmacctd uses "
             "bench_offline.sh's config (print plugin, csv, 5-tuple aggregate, `pcap_savefile`).")
    L.append("- Commands ($PCAP = the capture, $W = a scratch directory):\n")
    for t in ctx["tools"]:
        cmd = t.cmd.replace('"$WIRELOG"', str(WIRELOG.relative_to(REPO)))
        L.append(f"  - {t.name}: `{cmd}`")
    for p in pipes:
        L.append(f"  - in memory, {p.label}: `{' '.join(shlex.quote(c) for c in p.cmd)}`")
    L.append(f"- Raw runs: `{ctx['csv'].name}` (end to end, one row per timed unit, `probe` = the first "
             f"run), `{ctx['pcsv'].name}` (in memory, one row per run printed).")
    L.append("")
    return "\n".join(L)


@dataclass
class Pcap:
    name: str
    path: Path
    problem: str = ""
    packets: int | None = None
    size: int = 0


# ---- main ----------------------------------------------------------------------------------------
def parse_args(argv: list[str]):
    ap = argparse.ArgumentParser(
        prog="bench/run", description=__doc__.split("\n\n")[0],
        epilog="Tools for --only: " + ", ".join(t.name for t in TOOLS) + ", pipeline (the in-memory "
        "benchmark). Captures for --pcaps: mixed, http, mysql, mysql_text, scaled (mixed_x{N}), or a "
        "path to a pcap file.", formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="fast smoke run: REPS=1, only mixed and http, no scaled corpus, small copies")
    ap.add_argument("--reps", type=int, help="timed units per tool and capture (default 3; --quick: 1)")
    ap.add_argument("--only", help="comma-separated tools to run (default: all)")
    ap.add_argument("--pcaps", help="comma-separated captures (default: mixed,http,mysql,mysql_text,scaled)")
    ap.add_argument("--scale-copies", type=int, default=20,
                    help="copies of mixed.pcap in the scaled end-to-end corpus (default 20)")
    ap.add_argument("--scale-snap", type=int, default=128, help="snap length of the scaled corpus (128)")
    ap.add_argument("--million-copies", type=int,
                    help="--copies of the in-memory run that must reach >= 1M connections "
                         "(default 600; --quick: 20)")
    ap.add_argument("--million-snap", type=int, default=128,
                    help="--snap of that run (default 128; 0 = do not pass --snap)")
    ap.add_argument("--timeout", type=float, default=1800,
                    help="seconds before one timed unit is killed (default 1800)")
    ap.add_argument("--loop-below", type=float, default=0.3,
                    help="runs under this many CPU-s are timed as loops (default 0.3)")
    ap.add_argument("--loop-cpu", type=float, default=1.0, help="CPU-s aimed at per loop unit (default 1)")
    ap.add_argument("--loop-max", type=int, default=50, help="most runs per loop unit (default 50)")
    ap.add_argument("--no-build", action="store_true", help="use the binaries already in target/release")
    ap.add_argument("--no-install", action="store_true", help="never apt-get install peer tools")
    ap.add_argument("--keep-work", action="store_true", help="keep bench/out/work (tool outputs)")
    a = ap.parse_args(argv)
    if a.reps is None:
        a.reps = 1 if a.quick else 3
    if a.million_copies is None:
        # mixed.pcap peaks at 6,474 concurrent connections: 160 copies reach 1.04 M.
        a.million_copies = 20 if a.quick else 160
    if a.reps < 1 or a.scale_copies < 1 or a.million_copies < 1 or a.loop_max < 1:
        ap.error("--reps, --scale-copies, --million-copies and --loop-max must be >= 1")
    known = [t.name for t in TOOLS] + ["pipeline", "query"]
    if a.only:
        sel = []
        for x in a.only.split(","):
            x = ALIASES.get(x.strip(), x.strip())
            if x not in known:
                ap.error(f"--only: unknown tool {x!r} (known: {', '.join(known)})")
            sel.append(x)
        a.only = sel
    else:
        a.only = known
    if a.pcaps:
        a.pcaps = [x.strip() for x in a.pcaps.split(",") if x.strip()]
        for x in a.pcaps:
            if x not in BASE_PCAPS + ["scaled"] and not Path(x).is_file():
                ap.error(f"--pcaps: {x!r} is neither one of {', '.join(BASE_PCAPS + ['scaled'])} nor a file")
    else:
        a.pcaps = ["mixed", "http"] if a.quick else BASE_PCAPS + ["scaled"]
    return a


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    started = dt.datetime.now().astimezone()
    machine = machine_info()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    errdir = OUT_DIR / "errors"
    shutil.rmtree(errdir, ignore_errors=True)
    errdir.mkdir()
    work = OUT_DIR / "work"
    peers = Path(os.environ.get("WIRELOG_PEERS_DIR") or REPO / "target" / "wirelog-peers").resolve()
    (peers / "pcaps").mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    log(f"wirelog benchmark, {'quick' if args.quick else 'full'} run; load average {machine['loadavg']}; "
        f"captures in {peers}/pcaps")

    try:
        have_bench, build_msg = build(args)
        if not WIRELOG.exists():
            sys.exit(f"bench: {WIRELOG} does not exist")
        if not have_bench:
            notes.append("wirelog-bench is not available (did not build): the scaled corpus and the "
                         "in-memory benchmark are skipped.")
        install_msg = install_peers(args)

        # captures
        want_e2e = [t for t in TOOLS if t.name in args.only]
        names_needed = [x for x in args.pcaps if x in BASE_PCAPS]
        if "scaled" in args.pcaps or "pipeline" in args.only:
            names_needed += ["mixed"]
        if "pipeline" in args.only:
            names_needed += ["http"]
        if "query" in args.only:
            names_needed += ["mixed"]
        names_needed = list(dict.fromkeys(names_needed))
        problems = ensure_captures(names_needed, peers, OUT_DIR)
        for n, pr in problems.items():
            notes.append(f"{n}.pcap {pr}")
        pdir = peers / "pcaps"
        pcaps: list[Pcap] = []
        scale_cmd = ""
        for x in args.pcaps:
            if x == "scaled":
                name = f"mixed_x{args.scale_copies}"
                src = pdir / "mixed.pcap"
                if not want_e2e:
                    continue
                if "mixed" in problems:
                    pcaps.append(Pcap(name, pdir / f"{name}.pcap", "mixed.pcap is missing"))
                elif not have_bench:
                    pcaps.append(Pcap(name, pdir / f"{name}.pcap", "wirelog-bench is not available"))
                else:
                    path, scale_cmd, pr = make_scaled(src, args.scale_copies, args.scale_snap)
                    pcaps.append(Pcap(name, path or pdir / f"{name}.pcap", pr))
            elif x in BASE_PCAPS:
                pcaps.append(Pcap(x, pdir / f"{x}.pcap", problems.get(x, "")))
            else:
                pcaps.append(Pcap(Path(x).stem, Path(x).resolve()))
        for pc in pcaps:
            if not pc.problem:
                pc.packets = packet_count(pc.path)
                pc.size = pc.path.stat().st_size
                if not pc.packets:
                    pc.problem = "capinfos could not count its packets"

        # namespace + collector for softflowd
        env = dict(os.environ, WIRELOG=str(WIRELOG), LC_ALL="C")
        unavailable: dict[str, str] = {}
        for t in want_e2e:
            missing = [x for x in t.needs if shutil.which(x) is None]
            if missing:
                unavailable[t.name] = "not installed (" + ", ".join(missing) + ")"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        if any(t.name == "softflowd" for t in want_e2e) and "softflowd" not in unavailable:
            ns = f"wlbench{os.getpid()}"
            r = sh(["ip", "netns", "add", ns])
            if r.returncode != 0:
                unavailable["softflowd"] = f"skipped: ip netns add failed ({r.stderr.strip()})"
            else:
                PROCS.ns = ns
                env["NS"] = ns
                sh(["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"])
                (work / "nfcapd").mkdir()
                nf = subprocess.Popen(["ip", "netns", "exec", ns, "nfcapd", "-w", str(work / "nfcapd"),
                                       "-b", "127.0.0.1", "-p", "9995", "-B", "8388608"],
                                      stdout=open(work / "nfcapd.log", "w"), stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
                PROCS.bg.append(nf)
                time.sleep(1)
                if nf.poll() is not None:
                    unavailable["softflowd"] = (f"skipped: nfcapd collector exited rc={nf.returncode} "
                                                f"({(work / 'nfcapd.log').read_text()[-200:].strip()})")

        # end to end
        e2e: dict[tuple[str, str], E2E] = {}
        csv_path = OUT_DIR / "results_runs.csv"
        for pc in pcaps:
            if pc.problem or not want_e2e:
                if pc.problem:
                    log(f"{pc.name}: not measured: {pc.problem}")
                continue
            log(f"{pc.name}: {pc.packets:,} packets, {pc.size / 1e6:.0f} MB")
            sh(f"cat {shlex.quote(str(pc.path))} >/dev/null")   # warm the page cache
            for t in want_e2e:
                why = unavailable.get(t.name, "")
                if t.name == "softflowd" and not why and PROCS.bg and PROCS.bg[0].poll() is not None:
                    why = f"skipped: nfcapd collector died (rc={PROCS.bg[0].returncode})"
                e2e[(pc.name, t.name)] = bench_tool(t, pc.name, pc.path, work, errdir, env, args, why)
        with open(csv_path, "w", newline="") as f:
            cw = csv.writer(f)
            cw.writerow(["pcap", "packets", "tool", "unit", "runs_in_unit", "wall_s", "user_s", "sys_s",
                         "cpu_s_per_run", "maxrss_kb", "rc", "timeout", "status", "count", "loadavg1"])
            pk = {pc.name: pc.packets for pc in pcaps}
            for (pn, tn), r in e2e.items():
                units = ([("probe", r.probe)] if r.probe else []) + [(str(i + 1), u) for i, u in
                                                                      enumerate(r.units)]
                if not units:
                    cw.writerow([pn, pk.get(pn), tn, "", "", "", "", "", "", "", "", "", r.status, "", ""])
                for label, u in units:
                    cw.writerow([pn, pk.get(pn), tn, label, u.n, f"{u.wall:.3f}", f"{u.user:.2f}",
                                 f"{u.sys:.2f}", f"{u.cpu_per_run:.5f}", u.rss_kb, u.rc, int(u.timeout),
                                 r.status, r.count, u.load])

        # in memory
        pipes: list[Pipe] = []
        if "pipeline" in args.only:
            mixed, http = pdir / "mixed.pcap", pdir / "http.pcap"
            big = [str(WIRELOG_BENCH), "pipeline", "--copies", str(args.million_copies)]
            if args.million_snap:
                big += ["--snap", str(args.million_snap)]
            wb = str(WIRELOG_BENCH)
            # Few flows: sysbench's 4 long MariaDB connections. http and mixed are
            # thousands of short connections (3-20 packets each): shown, not judged.
            few = [] if args.quick else [
                Pipe("mysql (few flows)", [wb, "pipeline", "--reps", "5", str(pdir / "mysql.pcap")], "few"),
                Pipe("mysql_text (few flows)", [wb, "pipeline", "--reps", "5", str(pdir / "mysql_text.pcap")], "few")]
            # The same with application parsing on (as `wirelog read` by default).
            parsed = [] if args.quick else [
                Pipe("mysql, parsing on", [wb, "pipeline", "--parse", "--reps", "5", str(pdir / "mysql.pcap")], "info"),
                Pipe("http, parsing on", [wb, "pipeline", "--parse", str(http)], "info")]
            pipes = few + parsed + [Pipe("http (3,751 short connections)", [wb, "pipeline", str(http)], "info"),
                     Pipe("mixed (8,087 short connections)", [wb, "pipeline", str(mixed)], "info"),
                     Pipe(f"mixed x{args.million_copies}"
                          + (f" snap {args.million_snap}" if args.million_snap else "")
                          + (" (>= 1M flows)" if not args.quick else " (quick: few copies)"),
                          big + [str(mixed)], "million")]
            for p in pipes:
                pcap_arg = Path(p.cmd[-1]).stem
                if not have_bench:
                    p.status = "skipped: wirelog-bench not available"
                elif pcap_arg in problems:
                    p.status = f"skipped: {pcap_arg}.pcap {problems[pcap_arg]}"
            bench_pipeline(pipes, work, errdir, args)
            for p in pipes:
                if p.kind == "million" and p.status == "ok" and not args.quick:
                    peak = p.med("peak_connections")
                    if peak is None or peak < MILLION:
                        notes.append(f"in-memory run with --copies {args.million_copies} reached "
                                     f"peak_connections={peak}, under 1M: raise --million-copies.")
        pcsv = OUT_DIR / "pipeline_runs.csv"
        keys: list[str] = []
        for p in pipes:
            for r in p.runs:
                keys += [k for k in r if k not in keys]
        with open(pcsv, "w", newline="") as f:
            cw = csv.writer(f)
            cw.writerow(["corpus", "status", "run", *keys, "time_v_user_s", "time_v_sys_s", "time_v_maxrss_kb"])
            for p in pipes:
                tv = [p.unit.user, p.unit.sys, p.unit.rss_kb] if p.unit else ["", "", ""]
                for i, r in enumerate(p.runs or [{}]):
                    cw.writerow([p.label, p.status, i + 1 if p.runs else "", *[r.get(k, "") for k in keys], *tv])

        # store and query
        qctx = None
        if "query" in args.only:
            if not have_bench:
                notes.append("query benchmarks skipped: wirelog-bench is not available")
            elif "mixed" in problems:
                notes.append(f"query benchmarks skipped: mixed.pcap {problems['mixed']}")
            else:
                qctx = query_bench.run(WIRELOG, WIRELOG_BENCH, pdir / "mixed.pcap", work, args.reps, args.quick,
                                       args.timeout, log)

        PROCS.cleanup()
        versions = tool_versions()
        finished = dt.datetime.now().astimezone()
        ctx = dict(args=args, started=started.strftime("%Y-%m-%d %H:%M:%S %Z"),
                   finished=finished.strftime("%H:%M:%S"), elapsed=time.monotonic() - T0, notes=notes,
                   e2e=e2e, pcaps=pcaps, tools=want_e2e, pipes=pipes, machine=machine,
                   load_end=" ".join(Path("/proc/loadavg").read_text().split()[:3]), versions=versions,
                   install=install_msg, build=build_msg, peers=peers, scale_cmd=scale_cmd, csv=csv_path,
                   pcsv=pcsv, query=qctx)
        report = render(ctx)
        (OUT_DIR / "results.md").write_text(report)
        print(report)
        log(f"wrote {OUT_DIR / 'results.md'}, {csv_path.name}, {pcsv.name} in {ctx['elapsed']:.0f} s")
        if not any(errdir.iterdir()):
            errdir.rmdir()
        return 0
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        PROCS.cleanup()
        if not args.keep_work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
