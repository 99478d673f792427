#!/usr/bin/env python3
"""Extraction of one connection from a large packet ring (issue 17).

Builds a ring of at least --min-gb GB (default 10) without an intermediate file:

    wirelog-bench scale --copies N --sequential mixed.pcap - \\
      | wirelog read -C --store S --pcap-dir R -

(copy k of the capture follows copy k-1 in time, addresses rewritten per
copy: mixed.pcap is 19 s of traffic, so 80 copies are ~26 minutes spread over
1 GB files as a probe would write them), then times

    wirelog pcap --store S --pcap-dir R --where 'uid = U' -o OUT

for connections early, in the middle and late in the ring, the largest and a
small one of each, cold (`sync; echo 3 > /proc/sys/vm/drop_caches`, needs
root) and warm. For each it reports the wall time, the bytes read from disk
(the child's rusage, cold), the index bytes wirelog says it read and the
store query alone (`wirelog query conns --where 'uid = U'`). Cold and warm
outputs must be identical. The work directory is deleted at the end unless
--keep is given; --reuse times an existing ring again.

    python3 bench/pcap_extract.py [--copies 80] [--work /var/tmp/wirelog-extract]
"""

import argparse
import csv
import hashlib
import io
import os
import re
import resource
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_timed(cmd):
    """Runs cmd; returns (wall s, exit code, stdout, stderr)."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate()
    wall = time.monotonic() - t0
    return wall, p.returncode, out, err.decode(errors="replace")


def children_inblock():
    """Bytes the reaped children read from disk so far: the difference
    around one run_timed is that child's."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_inblock * 512


def cold_and_warm(cmd, root, after=lambda: None):
    """Runs cmd after dropping the page cache (root only; NaNs otherwise),
    then again: per mode, (wall s, bytes read from disk, stderr, what
    `after` returns when that run is done)."""
    res = {}
    for mode in ("cold", "warm"):
        if mode == "cold":
            if not root:
                res[mode] = (float("nan"), float("nan"), "", None)
                continue
            drop_caches()
        before = children_inblock()
        wall, rc, _, err = run_timed(cmd)
        if rc != 0:
            sys.exit(f"{' '.join(cmd)}: exit {rc}: {err}")
        res[mode] = (wall, children_inblock() - before, err, after())
    return res


def drop_caches():
    subprocess.run(["sync"], check=True)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=80)
    ap.add_argument("--min-gb", type=float, default=10.0)
    ap.add_argument("--pcap", default=os.path.join(ROOT, "target/wirelog-peers/pcaps/mixed.pcap"))
    ap.add_argument("--work", default="/var/tmp/wirelog-extract")
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/wirelog"))
    ap.add_argument("--bench-bin", default=os.path.join(ROOT, "target/release/wirelog-bench"))
    ap.add_argument("--keep", action="store_true", help="keep the ring and store")
    ap.add_argument("--reuse", action="store_true", help="time an existing ring in --work")
    a = ap.parse_args()

    store, ring, outd = (os.path.join(a.work, d) for d in ("store", "ring", "out"))
    if not a.reuse:
        if not os.path.exists(a.pcap):
            sys.exit(f"{a.pcap}: no such capture (bench/run --pcaps mixed makes it, or give --pcap)")
        need = os.path.getsize(a.pcap) * a.copies * 1.15
        os.makedirs(a.work, exist_ok=True)
        free = shutil.disk_usage(a.work).free
        if need > free - 10e9:
            sys.exit(f"{a.work}: {free / 1e9:.0f} GB free, the ring needs ~{need / 1e9:.0f} GB and 10 GB are left free")
        shutil.rmtree(store, ignore_errors=True)
        shutil.rmtree(ring, ignore_errors=True)
        t0 = time.monotonic()
        scale = subprocess.Popen([a.bench_bin, "scale", "--copies", str(a.copies), "--sequential", a.pcap, "-"],
                                 stdout=subprocess.PIPE)
        read = subprocess.run([a.bin, "read", "-C", "--store", store, "--pcap-dir", ring, "-"],
                              stdin=scale.stdout, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        scale.stdout.close()
        scale.wait()
        if read.returncode != 0 or scale.returncode != 0:
            sys.exit(f"building the ring failed: {read.stderr.decode(errors='replace')}")
        summary = [l for l in read.stderr.decode(errors="replace").splitlines() if "pcap:" in l]
        print(f"built in {time.monotonic() - t0:.0f} s; {' '.join(summary)}")
    os.makedirs(outd, exist_ok=True)

    files = sorted(f for f in os.listdir(ring) if f.endswith(".pcap"))
    pcap_bytes = sum(os.path.getsize(os.path.join(ring, f)) for f in files)
    idx_bytes = sum(os.path.getsize(os.path.join(ring, f[:-5] + ".idx")) for f in files)
    sorted_idx = sum(1 for f in files if open(os.path.join(ring, f[:-5] + ".idx"), "rb").read(9)[8] == 2)
    print(f"ring: {len(files)} files, {pcap_bytes / 1e9:.2f} GB of pcap, {idx_bytes / 1e6:.1f} MB of index "
          f"({sorted_idx} sorted)")
    if pcap_bytes < a.min_gb * 1e9:
        print(f"warning: the ring is smaller than {a.min_gb} GB (raise --copies)")

    q = subprocess.run([a.bin, "query", "conns", "--store", store, "--by", "uid,ts", "--sort", "packets",
                        "--top", "0", "--format", "csv"], capture_output=True, text=True, check=True)
    rows = list(csv.DictReader(io.StringIO(q.stdout)))
    pk = next(k for k in rows[0] if k in ("packets", "pkts"))
    rows.sort(key=lambda r: r["ts"])  # RFC 3339, UTC: sorts as text
    print(f"store: {len(rows)} connections")
    picks = []
    for name, lo, hi in (("early", 0.0, 0.1), ("middle", 0.45, 0.55), ("late", 0.9, 1.0)):
        part = rows[int(lo * len(rows)):int(hi * len(rows))]
        large = max(part, key=lambda r: int(r[pk]))
        small = next(r for r in part if int(r[pk]) >= 2)
        picks += [(f"{name}, largest", large), (f"{name}, small", small)]

    root = os.geteuid() == 0
    print("\n| connection | packets | cold s (read from disk) | warm s | index bytes read (files looked up) "
          "| store query alone, cold s (read from disk) | store query alone, warm s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, r in picks:
        uid = r["uid"]
        out = os.path.join(outd, uid + ".pcap")
        cmd = [a.bin, "pcap", "--store", store, "--pcap-dir", ring, "--where", f"uid = {uid}", "-o", out]
        res = {}
        digest = lambda: hashlib.sha256(open(out, "rb").read()).hexdigest()
        for mode, (wall, disk, err, sha) in cold_and_warm(cmd, root, digest).items():
            m = re.search(r"(\d+) packets from (\d+) files \((\d+) indexes looked up, (\d+) bytes of index read\)", err)
            res[mode] = (wall, disk, m.groups() if m else None, sha)
        if root and res["cold"][3] != res["warm"][3]:
            sys.exit(f"{uid}: cold and warm outputs differ")
        # The store query alone (what finds the uid and its time window),
        # cold when root, then warm: what is left is the extraction.
        qcmd = [a.bin, "query", "conns", "--store", store, "--where", f"uid = {uid}", "--by", "uid,ts,duration"]
        q = cold_and_warm(qcmd, root)
        packets, _, looked, ix = res["warm"][2]
        cold = res["cold"]
        print(f"| {name} ({uid}) | {packets} | {cold[0]:.2f} ({cold[1] / 1e6:.1f} MB) | {res['warm'][0]:.2f} | "
              f"{ix} ({looked} indexes) | {q['cold'][0]:.2f} ({q['cold'][1] / 1e6:.1f} MB) | {q['warm'][0]:.2f} |")
    if not a.keep:
        shutil.rmtree(a.work, ignore_errors=True)
        print(f"\ndeleted {a.work}")


if __name__ == "__main__":
    main()
