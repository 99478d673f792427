#!/usr/bin/env python3
"""Drives headless Chromium over its DevTools pipe (--remote-debugging-pipe:
NUL-separated JSON on fds 3 and 4, no extra packages) through wirelog's UI,
checks the numbers the pages show against the JSON API, and saves
screenshots.

usage: serve_ui.py URL OUTDIR [--token T] [--live] [--any-span]
  URL     the server, e.g. http://127.0.0.1:9180
  OUTDIR  where the screenshots go (ui-<view>.png)
  --live  a capture --listen server: checks the health view's live figures
  --any-span  a store whose records span decades (1970..2026): every view
          renders in the default window and over the whole store
  --map-scale N  a store of N services (synth::service): the map's size,
          names, subnet sums (computed here from /api/query), zoom and pan
Exit 0 when every check passed; prints what failed otherwise.
"""

import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

FAILS = []


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what, flush=True)
    return cond


class Browser:
    def __init__(self):
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if not exe:
            sys.exit("chromium is not installed (scripts/test.sh installs it)")
        self.profile = tempfile.mkdtemp(prefix="wirelog-ui-")
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        # Above 10 so that placing them at 3 and 4 in the child clobbers nothing.
        hi_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)
        hi_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)

        def place():
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions",
             "--remote-debugging-pipe", f"--user-data-dir={self.profile}",
             "--window-size=1280,900", "about:blank"],
            pass_fds=(3, 4), preexec_fn=place,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for fd in (to_child_r, from_child_w, hi_r, hi_w):
            os.close(fd)
        self.w = os.fdopen(to_child_w, "wb", buffering=0)
        self.r = os.fdopen(from_child_r, "rb", buffering=0)
        self.buf = b""
        self.next_id = 0
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.page("Page.enable")
        self.page("Emulation.setDeviceMetricsOverride",
                  {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})

    def _read(self):
        while b"\0" not in self.buf:
            chunk = self.r.read(65536)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.w.write(json.dumps(msg).encode() + b"\0")
        while True:
            m = self._read()
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})

    def page(self, method, params=None):
        return self.call(method, params, self.session)

    def js(self, expr):
        r = self.page("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expr[:80]}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_ready(self, what, timeout=30, error_ok=False):
        end = time.time() + timeout
        while time.time() < end:
            if self.js("document.readyState === 'complete' && document.body && document.body.dataset.ready === '1'"):
                err = self.js("document.getElementById('error').textContent")
                check(error_ok or not err, f"{what}: the page shows an error: {err}")
                return err
            time.sleep(0.1)
        check(False, f"{what}: not rendered within {timeout} s")

    def open(self, url, what):
        self.page("Page.navigate", {"url": url})
        time.sleep(0.2)
        self.wait_ready(what)

    def hash(self, h, what):
        """Goes to a view by its hash, as a link would."""
        self.js(f"document.body.dataset.ready = 'x'; location.hash = {json.dumps(h)}; true")
        self.wait_ready(what)

    def after(self, action_js, what, error_ok=False):
        """Runs JS that changes the view (a click, a submit) and waits for it."""
        self.js("document.body.dataset.ready = 'x'; true")
        self.js(action_js)
        return self.wait_ready(what, error_ok=error_ok)

    def screenshot(self, path):
        height = self.js("Math.min(3000, Math.ceil(document.documentElement.scrollHeight))") or 900
        self.page("Emulation.setDeviceMetricsOverride",
                  {"width": 1280, "height": max(900, height), "deviceScaleFactor": 1, "mobile": False})
        time.sleep(0.2)
        data = self.page("Page.captureScreenshot", {"format": "png"})["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        self.page("Emulation.setDeviceMetricsOverride",
                  {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})

    def mouse(self, kind, x, y, buttons):
        self.page("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left",
                                               "buttons": buttons, "clickCount": 1})

    def close(self):
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


class Api:
    def __init__(self, base, token):
        self.base, self.token = base, token

    def get(self, path, **params):
        q = urllib.parse.urlencode({k: v for k, v in params.items() if v not in (None, "")})
        req = urllib.request.Request(f"{self.base}/api/{path}?{q}")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())


def fmt_num(n):
    """charts.js's fmtNum for whole numbers."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e4, "k")):
        if abs(n) >= div:
            return f"{n / div:.1f}{suffix}"
    return str(n)


def dom_list(b, el_id):
    return b.js(f"[...document.querySelectorAll('#{el_id} li')].map(li => [li.dataset.key, Number(li.dataset.value)])")


def api_list(api, by, rng):
    t = api.get("query", kind="conns", by=by, top=10, **rng)
    rows = [[str(r[by] if r[by] is not None else ""), r["bytes"]] for r in t["rows"]]
    if t["other"]:
        rows.append(["(other)", t["other"]["bytes"]])
    return rows


def shown_range(b):
    """The range the views show (the selection, else the timeline's window)."""
    return b.js("(() => { const r = document.getElementById('range').dataset; return {from: r.shownFrom, to: r.shownTo}; })()")


def check_failures(b, api, rng, what):
    """The failures panel: each count equals the API's for its filter."""
    rows = b.js("[...document.querySelectorAll('#failures tr[data-failure]')].map(tr => [tr.dataset.failure, Number(tr.dataset.count), Number(tr.dataset.total)])")
    check(rows, f"{what}: the failures panel is empty")
    where = b.js("Object.fromEntries([...document.querySelectorAll('#failures tr[data-failure]')].map(tr => [tr.dataset.failure, tr.dataset.failure]))")
    for fid, n, total in rows or []:
        spec = FAILURES[fid]
        t = api.get("query", kind=spec[0], by=spec[2], where=spec[1], top=0, **rng)["total"]
        want = t.get("count", t.get("conns"))
        check(n == want, f"{what}: failures {fid} shows {n}, the API says {want}")
    return rows


# The failure classes of app.js's FAILURES: kind, filter, breakdown field.
FAILURES = {
    "conn-fail": ("conns", "conn_state in (REJ, RSTO, RSTR, RSTOS0, RSTRH, S0, SH, SHR)", "conn_state"),
    "http-4xx": ("http", "status_code >= 400 and status_code < 500", "status_code"),
    "http-5xx": ("http", "status_code >= 500", "status_code"),
    "mysql-err": ("mysql", "status = error", "error_code"),
    "pgsql-err": ("pgsql", "status = error", "error_code"),
    "redis-err": ("redis", "status = error", "reply_type"),
    "dns-rcode": ("dns", 'rcode_name not in (NOERROR, "")', "rcode_name"),
    "tls-fail": ("tls", 'last_alert != "" or status = error', "last_alert"),
}


def check_overview(b, api, rng, what, nonempty=True):
    for el_id, by in [("top-talkers", "orig_h"), ("top-services", "service"), ("top-ports", "resp_p"), ("top-servers", "resp_h")]:
        got, want = dom_list(b, el_id), api_list(api, by, rng)
        check(got == want, f"{what}: #{el_id} shows {got}, the API says {want}")
        check(not nonempty or len(got) > 0, f"{what}: #{el_id} is empty")


# The map at scale: the page stays within this height (px, at 1280 px wide)
# whatever the number of nodes; the map itself is a 620-px window.
MAP_PAGE_MAX_PX = 1400


def api_error(api, path, **params):
    """The status and JSON body of a refused request."""
    try:
        api.get(path, **params)
        return 200, {}
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def subnet_of(addr):
    """/24 or /64 as the server writes it."""
    import ipaddress
    a = ipaddress.ip_address(addr)
    if a.version == 4:
        return str(ipaddress.ip_network(f"{addr}/24", strict=False).network_address) + "/24"
    return str(ipaddress.ip_network(f"{addr}/64", strict=False).network_address) + "/64"


def map_pairs(api, rng):
    """Every (client, server, port, protocol, source, calls) of the range,
    from /api/query alone: transactions per kind, then the connections of
    pairs with no transaction (the map's rule, written again here)."""
    kinds = [k["kind"] for k in api.get("schema")["kinds"] if k["protocol"]]
    pairs, parsed = [], set()
    for kind in kinds:
        t = api.get("query", kind=kind, by="client,server,server_port", top=0, **rng)
        check(t["shown"] == t["groups"], f"{kind}: {t['groups']} pairs, {t['shown']} given")
        for r in t["rows"]:
            parsed.add((r["client"], r["server"], r["server_port"]))
            pairs.append((r["client"], r["server"], r["server_port"], kind, kind, r["count"]))
    t = api.get("query", kind="conns", by="orig_h,resp_h,resp_p,service", top=0, **rng)
    check(t["shown"] == t["groups"], f"conns: {t['groups']} pairs, {t['shown']} given")
    for r in t["rows"]:
        if (r["orig_h"], r["resp_h"], r["resp_p"]) not in parsed:
            pairs.append((r["orig_h"], r["resp_h"], r["resp_p"], r["service"] or "other", "conns", r["conns"]))
    return pairs


def check_map_scale(b, api, out, services):
    ext = api.get("extent")
    check(any(k["kind"] == "conns" and k["rows"] > 0 for k in ext), "the map store has no connections")
    b.hash("view=map&range=all", "map, whole store")
    rng = shown_range(b)
    t = api.get("query", kind="conns", by="resp_h,resp_p", top=0, **rng)
    check(t["groups"] == services, f"the store has {t['groups']} services, not {services}")
    # Size: a fixed window, at most 2 x top + 2 nodes, nothing wider than the screen.
    size = b.js("(() => { const s = document.getElementById('map-svg').getBoundingClientRect(); return {h: Math.ceil(document.documentElement.scrollHeight), w: document.documentElement.scrollWidth, svg: Math.round(s.height), nodes: document.querySelectorAll('#map-svg g.node').length, edges: document.querySelectorAll('#map-svg path.edge').length}; })()")
    print("map at scale, default:", size, flush=True)
    check(size["h"] <= MAP_PAGE_MAX_PX and size["w"] <= 1280 and size["svg"] == 620, f"map page size {size}: at most {MAP_PAGE_MAX_PX} px tall, 1280 wide, a 620-px map")
    check(0 < size["nodes"] <= 2 * 200 + 2 and size["edges"] <= 201, f"map: {size['nodes']} nodes, {size['edges']} edges (top 200)")
    m = api.get("map", top=200, **rng)
    got = b.js("[...document.querySelectorAll('#map-svg path.edge')].map(p => [p.dataset.from, p.dataset.to, p.dataset.protocol, Number(p.dataset.count)])")
    want = [[e["from"], e["to"], e["protocol"], e["count"]] for e in m["edges"]]
    check(got == want, f"map edges: page {got[:5]}..., API {want[:5]}...")
    pairs = map_pairs(api, rng)
    every = sum(p[5] for p in pairs)
    check(sum(e[3] for e in got) == every == m["total"]["count"], f"map: the edges hold {sum(e[3] for e in got)} calls, /api/query {every}, the map's total {m['total']['count']}")
    # Labels fitted to their boxes; services named by their process.
    wide = b.js("Math.max(...[...document.querySelectorAll('#map-svg g.node text')].map(t => t.getComputedTextLength()))")
    check(wide <= 216, f"a node label is {wide} px wide in a 230-px box")
    names = b.js("[...document.querySelectorAll('#map-svg g.node.service')].map(g => [g.dataset.name, g.querySelector('text').textContent])")
    procs = {"nginx", "mysqld", "postgres", "redis-server", "unbound", "haproxy"}
    named = [n for n in names if n[0].split(" ")[0] in procs and n[1].startswith(n[0][:10])]
    check(len(named) >= len(names) - 1 and named, f"services named by process: {names[:6]}")
    b.screenshot(f"{out}/ui-map-scale.png")
    # Grouped by subnet, top 50 edges: the sums the pairs give, the rest in one edge.
    b.hash("view=map&range=all&group=subnet&top=50", "map by subnet")
    got = b.js("[...document.querySelectorAll('#map-svg path.edge')].map(p => [p.dataset.from, p.dataset.to, p.dataset.protocol, p.dataset.source, Number(p.dataset.count)])")
    want = {}
    for c, s_, port, proto, source, n in pairs:
        key = (subnet_of(c), f"{subnet_of(s_)}:{port}", proto, source)
        want[key] = want.get(key, 0) + n
    shown = [e for e in got if e[0] != "other clients"]
    other = [[e[0], e[1], e[2], e[4]] for e in got if e[0] == "other clients"]
    bad = [(e, want.get(tuple(e[:4]))) for e in shown if want.get(tuple(e[:4])) != e[4]]
    check(not bad, f"map by subnet: edges unlike the sums of /api/query: {bad[:5]}")
    ranked = sorted(want.values(), reverse=True)
    check([e[4] for e in shown] == ranked[:len(shown)], f"map by subnet: not the top edges by calls: {[e[4] for e in shown][:10]} vs {ranked[:10]}")
    check(len(shown) == min(50, len(want)), f"map by subnet: {len(shown)} edges shown of {len(want)}, top 50")
    if len(want) > 50:
        rest = sum(ranked[50:])
        check(len(other) == 1 and other[0][3] == rest, f"map by subnet: the other edge {other}, the rest holds {rest} calls in {len(want) - 50} edges")
        held = b.js("Number(document.querySelector('#map-svg path.edge.other') ? 1 : 0)")
        check(held == 1, "the other edge is drawn as such")
        text = b.js("document.getElementById('map-count').textContent")
        check(f"the other {len(want) - 50} edges" in text, f"map count line: {text!r}")
    ids = b.js("[...document.querySelectorAll('#map-svg g.node:not(.other)')].map(g => g.dataset.id)")
    check(ids and all("/24" in i or "/64" in i for i in ids), f"map by subnet, nodes {ids[:8]}")
    b.screenshot(f"{out}/ui-map-subnet.png")
    # Zoom and pan: the wheel, a drag, the keys and the buttons move the viewBox.
    b.hash("view=map&range=all", "map again")
    vb = lambda: b.js("document.getElementById('map-svg').getAttribute('viewBox')")
    home = vb()
    r = b.js("(() => { const r = document.getElementById('map-svg').getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()")
    b.page("Input.dispatchMouseEvent", {"type": "mouseWheel", "x": r[0], "y": r[1], "deltaX": 0, "deltaY": -120})
    time.sleep(0.2)
    z1 = vb()
    zoom = b.js("Number(document.getElementById('map-svg').dataset.zoom)")
    check(z1 != home and zoom > 1, f"the wheel did not zoom: {home} -> {z1} (zoom {zoom})")
    b.mouse("mousePressed", r[0], r[1], 1)
    for k in range(1, 6):
        b.mouse("mouseMoved", r[0] - 20 * k, r[1] - 15 * k, 1)
    b.mouse("mouseReleased", r[0] - 100, r[1] - 75, 0)
    time.sleep(0.2)
    z2 = vb()
    x1, y1 = map(float, z1.split()[:2])
    x2, y2 = map(float, z2.split()[:2])
    check(x2 > x1 and y2 > y1 and z2.split()[2:] == z1.split()[2:], f"a drag did not pan: {z1} -> {z2}")
    b.js("document.getElementById('map-svg').focus(); true")
    b.page("Input.dispatchKeyEvent", {"type": "keyDown", "key": "+", "text": "+"})
    b.page("Input.dispatchKeyEvent", {"type": "keyUp", "key": "+"})
    z3 = vb()
    check(float(z3.split()[2]) < float(z2.split()[2]), f"the + key did not zoom in: {z2} -> {z3}")
    b.page("Input.dispatchKeyEvent", {"type": "keyDown", "key": "ArrowDown", "code": "ArrowDown", "windowsVirtualKeyCode": 40})
    z4 = vb()
    check(float(z4.split()[1]) > float(z3.split()[1]), f"the down arrow did not pan: {z3} -> {z4}")
    b.screenshot(f"{out}/ui-map-zoomed.png")
    b.js("document.getElementById('map-zoom-out').click(); true")
    check(float(vb().split()[2]) > float(z4.split()[2]), "the − button did not zoom out")
    b.js("document.getElementById('map-zoom-reset').click(); true")
    check(vb() == home, f"reset: {vb()}, first view {home}")
    # Strict parameters, as the rest of /api.
    for params, name in ((dict(group="ip"), "group"), (dict(rank="speed"), "rank"), (dict(top=0), "top"),
                         (dict(top=5000), "top"), (dict(top="x"), "top"), (dict(zoom=2), "zoom"), (dict(find="x" * 201), "find")):
        code, body = api_error(api, "map", **params)
        check(code == 400 and body.get("parameter") == name, f"/api/map {params}: {code} {body}")
    # Ranked by bytes, errors and latency: the first edge is the largest.
    for rank, field in (("bytes", "bytes"), ("errors", "errors"), ("latency", "p95_s")):
        m = api.get("map", rank=rank, top=10, **rng)
        vals = [e[field] or 0 for e in m["edges"] if not e["other"]]
        check(vals == sorted(vals, reverse=True) and vals and vals[0] > 0, f"map by {rank}: {vals}")
    # Process and container grouping name services by their program.
    m = api.get("map", group="process", top=2000, **rng)
    to = {e["to"] for e in m["edges"]}
    check({"mysqld:3306", "nginx:80"} <= to, f"map by process: services {sorted(to)[:8]}")
    m = api.get("map", group="container", top=2000, **rng)
    check(any(e["to"].startswith("docker:svc") for e in m["edges"]), "map by container: no container node")


def check_completeness(b, api, what, live):
    """The completeness line above the view: the API's for the range shown."""
    got = b.js("document.getElementById('completeness').textContent")
    c = api.get("completeness", **shown_range(b))
    want = ("Estimated numbers: " if c["estimated"] else "") + c["text"]
    check(got == want, f"{what}: completeness line {got!r}, the API says {want!r}")
    # A store a probe wrote has loss rows for its range (the demo's read
    # does); a synthetic store (serve-store's map at scale) has none, and
    # the line says so rather than inventing a figure.
    if c["minutes"] > 0:
        check(live or "% of packets seen" in got, f"{what}: completeness line {got!r}")
    else:
        check(got == "no completeness record for this range", f"{what}: completeness line {got!r} with no loss rows")


class AnySpanDone(Exception):
    """The any-span checks replace the rest of the walk."""


def check_any_span(b, api, out):
    """A store spanning 1970..2026: the default window (the last 15 minutes
    of data) and the whole store render in every view with no error."""
    ext = api.get("extent")
    first = min(k["first_ns"] for k in ext if k["first_ns"] is not None and k["rows"] > 0)
    check(first < 86400 * 10**9 * 365, f"the store's first record is at {first} ns, not near 1970")
    for rng_name in ("", "all"):
        h = "range=all&" if rng_name else ""
        for view in ("conns", "tx", "map", "health", "overview"):
            b.hash(f"{h}view={view}", f"{view} {rng_name or 'default window'}")
            check(b.js("document.querySelectorAll('#timeline-svg rect.bar').length") > 0, f"{view} {rng_name}: no timeline bars")
            if view == "overview":
                win = b.js("(() => { const d = document.getElementById('timeline-total').dataset; return {from: d.from, to: d.to, step: d.step}; })()")
                whole = api.get("query", kind="conns", by="proto", top=0, **{k: win[k] for k in ("from", "to")})["total"]["bytes"]
                shown = b.js("Number(document.getElementById('timeline-total').dataset.value)")
                check(shown == whole and whole > 0, f"{rng_name} timeline {win}: {shown} bytes, API {whole}")
                rng = shown_range(b)
                check_overview(b, api, rng, f"overview {rng_name}")
                check_failures(b, api, rng, f"overview {rng_name}")
                if rng_name:
                    all_bytes = api.get("query", kind="conns", by="proto", top=0)["total"]["bytes"]
                    check(shown == all_bytes, f"range=all shows {shown} bytes of the store's {all_bytes}")
                    b.screenshot(f"{out}/ui-any-span.png")
            if view == "conns":
                n = b.js("Number(document.getElementById('grid-count').dataset.groups)")
                rng = shown_range(b)
                t = api.get("query", kind="conns", by="proto", top=0, **rng)["total"]["conns"]
                check(n == t and n > 0, f"conns {rng_name}: grid says {n} records, API {t}")
            if view == "tx" and rng_name:
                got = b.js("Number(document.getElementById('tx-total').dataset.count)")
                kind = dict(urllib.parse.parse_qsl(b.js("location.hash.slice(1)"))).get("kind") or next(
                    k["kind"] for k in ext if k["kind"] not in ("flows", "conns", "x509", "loss") and k["rows"] > 0)
                t = api.get("query", kind=kind, by="status", top=0, **shown_range(b))["total"]["count"]
                check(got == t and got > 0, f"tx {kind} over the whole store: page {got}, API {t}")


def main():
    args = sys.argv[1:]
    base, out = args[0].rstrip("/"), args[1]
    token = args[args.index("--token") + 1] if "--token" in args else None
    live = "--live" in args
    any_span = "--any-span" in args
    map_scale = int(args[args.index("--map-scale") + 1]) if "--map-scale" in args else None
    os.makedirs(out, exist_ok=True)
    api = Api(base, token)
    b = Browser()
    try:
        start = base + "/" + (f"?token={urllib.parse.quote(token)}" if token else "")
        b.open(start + "#view=overview", "overview")
        if token:
            href = b.js("location.href")
            check("token" not in href, f"the token stays in the address bar: {href}")
        win = b.js("(() => { const d = document.getElementById('timeline-total').dataset; return {from: d.from, to: d.to}; })()")
        whole = api.get("query", kind="conns", by="proto", top=0, **win)["total"]["bytes"]
        shown = b.js("Number(document.getElementById('timeline-total').dataset.value)")
        check(shown == whole, f"timeline: {shown} bytes, the API's conns total in {win} is {whole}")
        bars = b.js("document.querySelectorAll('#timeline-svg rect.bar').length")
        check(live or bars > 1, f"timeline has {bars} bars")
        rng0 = shown_range(b)
        check(rng0 == win, f"with nothing selected the views show the window: {rng0} vs {win}")
        check_overview(b, api, rng0, "overview", nonempty=not live)
        if not live:
            check_failures(b, api, rng0, "overview")
        b.screenshot(f"{out}/ui-overview.png")
        # Every view states how complete the data of its range is.
        for view in ("conns", "tx", "map", "health", "overview"):
            b.hash(f"view={view}", f"{view}: completeness")
            check_completeness(b, api, view, live)
        if any_span:
            check_any_span(b, api, out)
            raise AnySpanDone()
        if map_scale:
            check_map_scale(b, api, out, map_scale)
            raise AnySpanDone()

        if not live:
            # The whole store (the demo's few seconds) in the window, then a
            # drag across the middle of the timeline with real mouse events.
            b.after("document.querySelector('#ranges button[data-range=all]').click()", "quick range: all")
            check("range=all" in b.js("location.hash"), "the quick range is not in the URL")
            box = b.js("(() => { const r = document.getElementById('timeline-svg').getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()")
            x0, x1, y = box[0] + box[2] * 0.30, box[0] + box[2] * 0.70, box[1] + box[3] * 0.5
            b.js("document.body.dataset.ready = 'x'; true")
            b.mouse("mouseMoved", x0, y, 0)
            b.mouse("mousePressed", x0, y, 1)
            for i in range(1, 11):
                b.mouse("mouseMoved", x0 + (x1 - x0) * i / 10, y, 1)
            b.mouse("mouseReleased", x1, y, 0)
            b.wait_ready("after the drag")
            h = dict(urllib.parse.parse_qsl(b.js("location.hash.slice(1)")))
            check("from" in h and "to" in h, f"the drag wrote no from/to into the URL: {h}")
            rng = {"from": h.get("from"), "to": h.get("to")}
            sel_range = b.js("[document.getElementById('range').dataset.from, document.getElementById('range').dataset.to]")
            check(sel_range == [rng["from"], rng["to"]], f"range shown {sel_range} vs URL {rng}")
            sel = b.js("document.querySelector('#timeline-svg rect.selection').getAttribute('width')")
            check(float(sel) > 100, f"selection rectangle width {sel}")
            check_overview(b, api, rng, "overview after the drag")
            part = api.get("query", kind="conns", by="proto", top=0, **rng)["total"]["bytes"]
            check(0 < part < whole, f"the selection holds {part} of {whole} bytes: not a strict part")
            talkers = sum(v for _, v in dom_list(b, "top-talkers"))
            check(talkers == part, f"top talkers after the drag sum to {talkers}, the selection has {part}")
            b.screenshot(f"{out}/ui-selection.png")
            # The selection carries to the other views through their links.
            b.after("document.querySelector('#nav a[data-view=tx]').click()", "tx view from the nav")
            h2 = dict(urllib.parse.parse_qsl(b.js("location.hash.slice(1)")))
            check(h2.get("from") == rng["from"] and h2.get("to") == rng["to"], f"tx view lost the range: {h2}")
            kind = h2.get("kind") or "http"
            got = b.js("Number(document.getElementById('tx-total').dataset.count)")
            want = api.get("query", kind=kind, by="status", top=0, **rng)["total"]["count"]
            check(got == want, f"tx view in the selection: {got} transactions, API {want}")
            # Zoom: the selection becomes the timeline's window, and back.
            b.after("document.getElementById('zoom-in').click()", "zoom to the selection")
            h3 = dict(urllib.parse.parse_qsl(b.js("location.hash.slice(1)")))
            check(h3.get("vfrom") == rng["from"] and h3.get("vto") == rng["to"] and "from" not in h3, f"zoom: {h3}")
            tl = b.js("document.getElementById('timeline-total').dataset.from")
            check(tl == rng["from"], f"the zoomed timeline starts at {tl}, not {rng['from']}")
            b.after("document.getElementById('zoom-back').click()", "back from the zoom")
            h4 = dict(urllib.parse.parse_qsl(b.js("location.hash.slice(1)")))
            check(h4.get("from") == rng["from"] and "vfrom" not in h4, f"back: {h4}")
            b.after("document.querySelector('#range + button').click()", "clear the selection")
            check("from=" not in b.js("location.hash"), "clear left the range in the URL")
            # The time zone toggle is kept in the URL.
            b.after("document.getElementById('tz').click()", "local time")
            check("tz=local" in b.js("location.hash"), "the time zone toggle is not in the URL")
            b.after("document.getElementById('tz').click()", "UTC again")

        # A live capture writes its store every 5 minutes: its views are the
        # overview (checked above) and the health.
        if not live:
            # Transactions by protocol.
            kinds = [k["kind"] for k in api.get("extent") if k["kind"] not in ("flows", "conns", "loss") and k["rows"] > 0]
            check(live or len(kinds) >= 3, f"transaction kinds in the store: {kinds}")
            for kind in kinds:
                b.hash(f"view=tx&kind={kind}", f"tx {kind}")
                got = b.js("[Number(document.getElementById('tx-total').dataset.count), Number(document.getElementById('tx-total').dataset.errors)]")
                t = api.get("query", kind=kind, by="status", top=0, **rng0)["total"]
                check(got == [t["count"], t["errors"]], f"tx {kind}: page {got}, API {[t['count'], t['errors']]}")
                fp = {"http": "host,uri", "mysql": "fingerprint", "pgsql": "fingerprint", "redis": "command", "dns": "query,qtype_name"}[kind]
                first = fp.split(",")[0]
                slow = api.get("query", kind=kind, by=fp, sort="p99", top=10, **rng0)
                got_rows = b.js(f"[...document.querySelectorAll('#tx-slowest tbody tr')].map(tr => [tr.querySelector('td[data-col={first}]').textContent, tr.querySelector('td[data-col=latency_p99_s]').dataset.raw || '-'])")
                want_rows = [[r[first] if r[first] not in (None, "") else ("-" if r[first] is None else ""), str(r["latency_p99_s"]) if r["latency_p99_s"] is not None else "-"] for r in slow["rows"]]
                # JSON numbers print as JS numbers: compare as floats.
                norm = lambda rows: [[a, float(p) if p not in ("-", "") else None] for a, p in rows]
                check(norm(got_rows) == norm(want_rows), f"tx {kind} slowest: page {got_rows}, API {want_rows}")
                lines = b.js("document.querySelectorAll('#tx-latency polyline').length")
                check(lines == 3, f"tx {kind}: {lines} latency lines")
                if kind == "http":
                    b.screenshot(f"{out}/ui-transactions.png")
                    # Drill-down from the slowest table to its records.
                    b.after("document.querySelector('#tx-slowest td.link').click()", "drill-down from slowest")
                    h = dict(urllib.parse.parse_qsl(b.js("location.hash.slice(1)")))
                    recs = api.get("records", kind="http", where=h.get("where"), limit=100, **rng0)
                    n = b.js("Number(document.getElementById('grid-count').dataset.rows)")
                    check(h.get("view") == "records" and n == len(recs["rows"]) and n > 0, f"drill-down {h}: {n} rows, API {len(recs['rows'])}")

            # Connections grid with a filter typed in the query language.
            b.hash("view=conns", "conns")
            flt = "resp_p = 80 or resp_p = 53" if not live else "proto = tcp"
            b.after(f"document.getElementById('filter').value = {json.dumps(flt)}; document.querySelector('form.filter').requestSubmit(); true", "conns filtered")
            recs = api.get("records", kind="conns", where=flt, limit=100, **rng0)
            uids = b.js("[...document.querySelectorAll('#grid td[data-col=uid]')].map(td => td.textContent)")
            check(uids == [r["uid"] for r in recs["rows"]] and len(uids) > 0, f"conns grid {flt}: page {uids}, API {[r['uid'] for r in recs['rows']]}")
            # Newest first by default; any column sorts on the server, pages page.
            ts = [r["ts"] for r in recs["rows"]]
            check(ts == sorted(ts, reverse=True), "the grid is not newest first")
            b.hash("range=all&view=conns&size=20", "conns, 20 a page")
            b.after("document.getElementById('page-next').click()", "conns page 2")
            page2 = api.get("records", kind="conns", limit=20, offset=20, **rng0)
            uids = b.js("[...document.querySelectorAll('#grid td[data-col=uid]')].map(td => td.textContent)")
            off = b.js("Number(document.getElementById('grid-count').dataset.offset)")
            check(off == 20 and uids == [r["uid"] for r in page2["rows"]] and uids, f"conns page 2: offset {off}, {uids[:3]}..., API {[r['uid'] for r in page2['rows']][:3]}...")
            b.after("document.querySelector('button.sort[data-col=duration]').click()", "sort by duration")
            check("sort=duration%3Adesc" in b.js("location.hash"), "sorting is not in the URL")
            byd = api.get("records", kind="conns", limit=20, sort="duration:desc", **rng0)
            raw = b.js("[...document.querySelectorAll('#grid td[data-col=duration]')].map(td => td.dataset.raw)")
            check([float(x) if x else None for x in raw] == [r["duration"] for r in byd["rows"]], f"sorted by duration: page {raw[:5]}, API {[r['duration'] for r in byd['rows']][:5]}")
            # Units: bytes and seconds read as such; the raw value stays in the tooltip.
            cellv = b.js("(() => { const td = document.querySelector('#grid td[data-col=duration]'); return [td.textContent, td.title]; })()")
            check(cellv[0].endswith(("s", "µs", "ms", "-")) and (cellv[0] == "-" or cellv[1].endswith(" s")), f"duration cell {cellv}")
            bad = b.after("document.getElementById('filter').value = 'resp_p = '; document.querySelector('form.filter').requestSubmit(); true", "bad filter", error_ok=True)
            check("where" in (bad or ""), f"a bad filter shows the API's message naming 'where': {bad!r}")
            b.hash("view=conns&where=" + urllib.parse.quote(flt), "conns filtered again")
            b.screenshot(f"{out}/ui-connections.png")

            # Sequence of the connection with the most transactions.
            best = None
            for kind in kinds:
                for r in api.get("query", kind=kind, by="uid", top=1)["rows"]:
                    if not best or r["count"] > best[1]:
                        best = (r["uid"], r["count"])
            if check(best is not None, "no transactions to show a sequence of"):
                uid = best[0]
                b.hash(f"view=conns&where=uid%20%3D%20{uid}", "conn of the sequence")
                b.after("document.querySelector('#grid td[data-col=uid]').click()", "sequence")
                seq = api.get("sequence", uid=uid, offset=0, limit=200)
                got = b.js("Number(document.getElementById('sequence').dataset.calls)")
                total = b.js("Number(document.getElementById('seq-count').dataset.total)")
                check(total == seq["total"] == best[1], f"sequence total: page {total}, API {seq['total']}, query {best[1]}")
                lat = b.js("[...document.querySelectorAll('#sequence-svg .reply-label')].map(t => t.dataset.latency)")
                check(got == len(seq["calls"]) == best[1], f"sequence {uid}: page {got}, API {len(seq['calls'])}, query {best[1]}")
                want_lat = [c["latency"] for c in seq["calls"]]
                check([None if x is None else float(x) for x in lat] == want_lat, f"sequence latencies: page {lat}, API {want_lat}")
                # With kept packets (serve --pcap-dir) the connection links to
                # its packets; the browser gets a pcap file through that link.
                link = b.js("(() => { const a = document.getElementById('pcap-link'); return a ? a.getAttribute('href') : null; })()")
                check(link == seq.get("pcap"), f"pcap link: page {link!r}, API {seq.get('pcap')!r}")
                if link:
                    got = b.js(f"fetch({json.dumps(link)}).then(r => r.arrayBuffer()).then(x => [x.byteLength, new DataView(x).getUint32(0, true)])")
                    check(got and got[0] > 40 and got[1] == 0xA1B23C4D, f"the pcap link gives a nanosecond pcap file: {got}")
                b.screenshot(f"{out}/ui-sequence.png")

            # Service map.
            b.hash("view=map", "map")
            m = api.get("map", top=200, **rng0)
            got = b.js("[...document.querySelectorAll('#map-svg path.edge')].map(p => [p.dataset.from, p.dataset.to, p.dataset.protocol, Number(p.dataset.count)])")
            want = [[e["from"], e["to"], e["protocol"], e["count"]] for e in m["edges"]]
            check(got == want and len(got) > 0, f"map edges: page {got}, API {want}")
            b.screenshot(f"{out}/ui-map.png")
            # Grouped by subnet: fewer or as many edges, the same calls.
            b.hash("view=map&group=subnet", "map by subnet")
            got = b.js("[...document.querySelectorAll('#map-svg path.edge')].map(p => Number(p.dataset.count))")
            check(0 < len(got) <= len(want) and sum(got) == sum(e[3] for e in want), f"map by subnet: {len(got)} edges, {sum(got)} calls; by host {len(want)} edges, {sum(e[3] for e in want)} calls")
            ids = b.js("[...document.querySelectorAll('#map-svg g.node')].map(g => g.dataset.id)")
            check(all(i.endswith(("/24", "/64")) or "/24:" in i or "/64:" in i for i in ids), f"map by subnet, nodes {ids}")

        # Health.
        b.hash("view=health", "health")
        rss = b.js("document.querySelector('[data-figure=rss] dd').textContent")
        check(rss and rss != "-", f"health RSS {rss!r}")
        if live:
            h = api.get("health")
            total = sum(w["packets"] for w in h["live"]["workers"])
            pk = b.js("document.querySelector('[data-figure=packets] dd').textContent")
            check(total > 0 and pk == fmt_num(total), f"live health packets {pk!r}, API {total}")
            lines = b.js("document.querySelectorAll('#h-pps polyline, #h-drops polyline').length")
            check(lines == 3, f"live health charts: {lines} lines")
        b.screenshot(f"{out}/ui-health.png")
        if not live:
            # A dark browser gets the dark theme.
            b.page("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
            b.hash("view=overview", "overview, dark")
            bg = b.js("getComputedStyle(document.body).backgroundColor")
            check(bg not in ("rgb(246, 247, 249)", "rgb(255, 255, 255)"), f"dark browser, light page: {bg}")
            b.screenshot(f"{out}/ui-dark.png")
            b.page("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})
        # refresh=1 redraws by itself: the uptime moves without any navigation.
        b.hash("view=health&refresh=1", "health with refresh")
        up0 = b.js("document.querySelector('[data-figure=uptime] dd').textContent")
        time.sleep(2.5)
        b.wait_ready("health refreshed")
        up1 = b.js("document.querySelector('[data-figure=uptime] dd').textContent")
        check(up0 != up1, f"refresh=1 did not redraw: uptime {up0!r} then {up1!r}")
    except AnySpanDone:
        pass
    finally:
        b.close()
    if FAILS:
        print(f"{len(FAILS)} UI checks failed", flush=True)
        sys.exit(1)
    print("UI checks passed", flush=True)


if __name__ == "__main__":
    main()
