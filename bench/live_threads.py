#!/usr/bin/env python3
"""bench/live_threads.py - bench/live.py's method (veth pair, tcpreplay --topspeed of the `few` corpus,
one worker), split per wirelog thread, with and without `capture --processes`, interleaved: the
worker thread's ns/packet and the resolver thread's CPU. 3 rounds. Needs what bench/live.py needs.
"""
import sys, time
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
import live
def per_thread(pid):
    out = {}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (t / "comm").read_text().strip()
            ns = int((t / "schedstat").read_text().split()[0])
        except OSError:
            continue
        key = "worker" if name.startswith("wirelog-w") else name
        out[key] = out.get(key, 0) + ns
    return out
corp = live.corpora()
pcap, _ = corp["few"]
n = live.pcap_packets(pcap)
v = live.Veth(1500)
try:
    for rep in range(3):
        for extra in ([], ["--processes"]):
            cap = live.Capturer(v, live.OUT / "live-work", ["--workers", "1", "--ring-size", "64M", *extra])
            time.sleep(1.0)  # the resolver's first /proc index is built before the window
            c0 = per_thread(cap.p.pid)
            live.replay(v, pcap, 1)
            time.sleep(0.3)
            c1 = per_thread(cap.p.pid)
            err_text = ""
            st = cap.stop()
            d = {k: (c1.get(k, 0) - c0.get(k, 0)) for k in c1}
            tot = sum(d.values())
            pk = st["packets"]
            print(f"{'on ' if extra else 'off'} rep{rep}: {pk} packets; worker {d.get('worker',0)/pk:.1f} ns/pkt; "
                  f"total {tot/pk:.1f} ns/pkt; " + ", ".join(f"{k} {v/1e6:.1f} ms" for k, v in sorted(d.items())), flush=True)
finally:
    v.close()
