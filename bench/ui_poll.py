#!/usr/bin/env python3
"""bench/ui_poll.py - what an open web UI with `#...&refresh=1` asks a wirelog server, once a second,
until SIGTERM: the requests app.js makes for the overview page (the store's extent, the conns
timeline at the step the page would choose, the four top-N panels) plus the health view's
/api/health. One request at a time, as one page does. On SIGTERM prints one line:
`polls N requests R errors E p50_ms X max_ms Y`.

usage: bench/ui_poll.py http://127.0.0.1:PORT [--every SECONDS]
Python 3 standard library only; bench/live.py --only listen runs it.
"""

from __future__ import annotations

import json
import signal
import statistics
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

# app.js's STEPS, in ms: the page picks the first giving at most 100 points.
STEPS = [("1ms", 1), ("5ms", 5), ("10ms", 10), ("50ms", 50), ("100ms", 100), ("500ms", 500), ("1s", 1e3),
         ("5s", 5e3), ("10s", 1e4), ("30s", 3e4), ("1m", 6e4), ("5m", 3e5), ("15m", 9e5), ("1h", 3.6e6),
         ("6h", 2.16e7), ("1d", 8.64e7)]
PANELS = ["orig_h", "service", "resp_p", "resp_h"]

stop = False


def on_term(*_):
    global stop
    stop = True


def iso(ms: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1e3)) + ".%03dZ" % (int(ms) % 1000)


def main() -> int:
    base = sys.argv[1].rstrip("/")
    every = float(sys.argv[sys.argv.index("--every") + 1]) if "--every" in sys.argv else 1.0
    signal.signal(signal.SIGTERM, on_term)
    lat: list[float] = []
    errors = polls = 0

    def get(path: str, **params):
        nonlocal errors
        url = f"{base}/api/{path}?{urllib.parse.urlencode(params)}"
        t0 = time.perf_counter()
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                body = json.loads(r.read())
        except (urllib.error.URLError, OSError, ValueError):
            errors += 1
            body = None
        lat.append((time.perf_counter() - t0) * 1e3)
        return body

    while not stop:
        t0 = time.monotonic()
        kinds = get("extent") or []
        timed = [k for k in kinds if k.get("kind") != "flows"]
        firsts = [k["first_ns"] / 1e6 for k in timed if k.get("first_ns") is not None]
        lasts = [k["last_ns"] / 1e6 + 1 for k in timed if k.get("last_ns") is not None]
        now = time.time() * 1e3
        first, last = (min(firsts), max(lasts)) if firsts else (now - 3.6e6, now)
        last = max(last, first + 1)
        step, step_ms = next((s for s in STEPS if (last - first) / s[1] <= 100), STEPS[-1])
        get("query", kind="conns", every=step, **{"from": iso(first), "to": iso(last + step_ms)})
        for by in PANELS:
            get("query", kind="conns", by=by, top=10)
        get("health")
        polls += 1
        while not stop and time.monotonic() - t0 < every:
            time.sleep(0.05)
    p50 = statistics.median(lat) if lat else 0.0
    print(f"polls {polls} requests {len(lat)} errors {errors} p50_ms {p50:.1f} max_ms {max(lat or [0]):.1f}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
