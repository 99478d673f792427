#!/usr/bin/env python3
"""The Overview of a running capture (`capture --listen`) in headless
Chromium, as serve_ui.py drives it (its Browser and Api are used as they
are): prints "ready" once the page is up with nothing yet, waits for "go"
on stdin (the traffic starts then), and reports how long it took until the
page, refreshing on its own, showed connections; then, on "settled", that
the Overview's lists equal the API's and the API's counts, printed as JSON
for the test to hold against the capture's final lines.

usage: live_overview.py URL OUTDIR
Exit 0 when every check passed; prints what failed otherwise.
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_ui  # noqa: E402
from serve_ui import Api, Browser, check, check_overview, dom_list, shown_range  # noqa: E402


def talkers(b):
    return dom_list(b, "top-talkers") or []


def main():
    base, out = sys.argv[1].rstrip("/"), sys.argv[2]
    os.makedirs(out, exist_ok=True)
    api = Api(base, None)
    b = Browser()
    try:
        b.open(base + "/#view=overview", "overview")
        check(b.js("!!document.getElementById('pause')"), "a live page has a pause button")
        check(talkers(b) == [], f"before any traffic the Overview lists {talkers(b)}")
        print("ready", flush=True)
        check(sys.stdin.readline().strip() == "go", "the test said go")
        t0 = time.time()
        shown = None
        while time.time() - t0 < 30:
            if talkers(b):
                shown = time.time() - t0
                break
            time.sleep(0.1)
        print(f"shown_after_s {shown}", flush=True)
        check(shown is not None, "the Overview showed no connection within 30 s")
        # The test waits until the capture has ended every connection.
        check(sys.stdin.readline().strip() == "settled", "the test said settled")
        # The page as it stands then, against the API.
        b.open(base + "/#view=overview", "overview after the traffic")
        rng = shown_range(b)
        check_overview(b, api, rng, "live overview")
        conns = api.get("query", kind="conns", by="conn_state", top=0, **rng)
        states = {r["conn_state"]: r["conns"] for r in conns["rows"]}
        txs = {}
        for k in api.get("extent"):
            if k["kind"] not in ("flows", "conns", "x509", "loss") and k["rows"] > 0:
                t = api.get("query", kind=k["kind"], by="status", top=0, **rng)
                txs[k["kind"]] = t["total"]["count"]
        b.screenshot(f"{out}/ui-live-overview.png")
        print("counts " + json.dumps({"conns": conns["total"]["conns"], "states": states, "transactions": txs}), flush=True)
    finally:
        b.close()
    if serve_ui.FAILS:
        print(f"{len(serve_ui.FAILS)} checks failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
