#!/usr/bin/env python3
"""Packetbeat's AMQP system tests (shared/testdata/packetbeat2/manifest.json,
protocols.amqp), run against wirelog, the way tests/packetbeat_scoreboard.py
runs the first set.

usage: packetbeat2_amqp.py WIRELOG_BINARY

For each test: wirelog reads the test's pcap (-C: Packetbeat does not check
checksums; the test's amqp_ports as --ports), its amqp.log (JSON) becomes
Packetbeat-shaped events through MAPPING below, and the test's own assert
statements run one by one on them. Each assert is one fact:

  agree          it holds on wirelog's output;
  disagree       it does not;
  not mappable   it names a field wirelog does not have by design
                 (tests/packetbeat2_amqp_reasons.json, "fields").

Packetbeat hides the connection's set-up and orderly closes by default
(`hide_connection_information`: packetbeat/protos/amqp/amqp.go,
`addConnectionMethods`, and amqp_parser.go, `mustHideCloseMethod`: a close
with a reply code under 300); wirelog records them. That difference is
applied here as Packetbeat's own rule (HIDDEN, hidden()), and checked: every
event so hidden must be in wirelog's log, with status ok.

Exits 1 when a fact disagrees, when a not-mappable fact has no reason, or
when a listed reason is stale. Standard library only.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
REASONS_FILE = os.path.join(HERE, "packetbeat2_amqp_reasons.json")


def find_data():
    """shared/testdata/packetbeat2: WIRELOG_PACKETBEAT2_DATA, else shared/
    next to the repo or any ancestor (worktrees)."""
    env = os.environ.get("WIRELOG_PACKETBEAT2_DATA")
    if env:
        return env
    d = REPO
    while True:
        cand = os.path.join(os.path.dirname(d), "shared", "testdata", "packetbeat2")
        if os.path.isfile(os.path.join(cand, "manifest.json")):
            return cand
        parent = os.path.dirname(d)
        if parent == d:
            return os.path.join(REPO, "..", "shared", "testdata", "packetbeat2")
        d = parent


# Methods Packetbeat reports only with hide_connection_information off.
HIDDEN = {"connection.start", "connection.start-ok", "connection.tune", "connection.tune-ok",
          "connection.open", "channel.open", "channel.flow", "basic.qos"}


def hidden(row):
    if row["method"] in HIDDEN:
        return True
    return row["method"] in ("connection.close", "channel.close") and row.get("reply_code", 0) < 300


# The flags each method has, in Packetbeat's field names (which are the
# spec's); wirelog's `flags` lists those that were set.
FLAGS = {
    "exchange.declare": ["passive", "durable", "auto-delete", "internal", "no-wait"],
    "queue.declare": ["passive", "durable", "exclusive", "auto-delete", "no-wait"],
    "queue.bind": ["no-wait"],
    "basic.consume": ["no-local", "no-ack", "exclusive", "no-wait"],
    "basic.publish": ["mandatory", "immediate"],
    "basic.deliver": ["redelivered"],
    "basic.get": ["no-ack"],
}

# Packetbeat field <- wirelog amqp.log field.
MAPPING = {
    "amqp.queue": "queue",
    "amqp.exchange": "exchange",
    "amqp.exchange-type": "exchange_type",
    "amqp.routing-key": "routing_key",
    "amqp.content-type": "content_type",
    "amqp.delivery-tag": "delivery_tag",
    "amqp.reply-code": "reply_code",
    "amqp.reply-text": "reply_text",
}


def event(row):
    e = {
        "type": "amqp",
        "server.port": row["id.resp_p"],
        "method": row["method"],
        "event.action": "amqp." + row["method"],
        "status": {"ok": "OK", "error": "Error"}.get(row["status"], row["status"]),
    }
    for pb, ours in MAPPING.items():
        if ours in row:
            e[pb] = row[ours]
    set_flags = set(filter(None, row.get("flags", "").split(",")))
    for f in FLAGS.get(row["method"], []):
        e["amqp." + f] = f in set_flags
    return e


class Missing(Exception):
    pass


class Event(dict):
    def __getitem__(self, k):
        if k not in self:
            raise Missing(k)
        return dict.__getitem__(self, k)


def run_wirelog(binary, data, run, tmp):
    out = os.path.join(tmp, run["pcap"].replace("/", "_"))
    cmd = [binary, "read", "--no-store", "--quiet", "-C", "--logs", out, "--log-format", "json"]
    ports = run["config"].get("amqp_ports")
    if ports:
        cmd += ["--ports", "amqp=" + ",".join(str(p) for p in ports)]
    cmd.append(os.path.join(data, "pcaps", run["pcap"]))
    subprocess.run(cmd, check=True)
    rows = []
    path = os.path.join(out, "amqp.log")
    if os.path.exists(path):
        with open(path) as f:
            rows = [json.loads(l) for l in f if l.strip()]
    rows.sort(key=lambda r: r["ts"])
    return rows


def main():
    binary = sys.argv[1]
    data = find_data()
    manifest = json.load(open(os.path.join(data, "manifest.json")))
    reasons = json.load(open(REASONS_FILE))
    used_reasons = set()
    tmp = tempfile.mkdtemp(prefix="wirelog-pb2-amqp-")
    failures = []
    counts = {"agree": 0, "disagree": 0, "not mappable": 0}
    try:
        for f in manifest["protocols"]["amqp"]:
            for t in f["tests"]:
                if not t["is_test"]:
                    continue
                name = "%s::%s" % (os.path.basename(f["file"]), t["method"])
                (run,) = t["runs"]
                rows = run_wirelog(binary, data, run, tmp)
                shown = [r for r in rows if not hidden(r)]
                hid = [r for r in rows if hidden(r)]
                # The deliberate difference, checked: what Packetbeat hides
                # is recorded, and went well.
                for r in hid:
                    if r["status"] != "ok":
                        failures.append("%s: hidden %s is %s" % (name, r["method"], r["status"]))
                if not any(r["method"] == "connection.open" for r in hid):
                    failures.append("%s: no connection.open recorded" % name)
                objs = [Event(event(r)) for r in shown]
                for stmt in t["asserts"]:
                    try:
                        ok = eval(compile(stmt.replace("assert ", "", 1), name, "eval"), {}, {"objs": objs})
                    except Missing as e:
                        field = e.args[0]
                        if field in reasons["fields"]:
                            used_reasons.add(field)
                            counts["not mappable"] += 1
                            print("  n/a    %s: %s (%s)" % (name, stmt, field))
                            continue
                        ok = False
                    except Exception as e:  # an index out of range: fewer events
                        ok = False
                        stmt += "  [%r]" % e
                    if ok:
                        counts["agree"] += 1
                    else:
                        counts["disagree"] += 1
                        failures.append("%s: %s" % (name, stmt))
                        print("  FAIL   %s: %s" % (name, stmt))
                        print("         wirelog: %s" % json.dumps([dict(o) for o in objs], default=str))
        for field in reasons["fields"]:
            if field not in used_reasons:
                failures.append("stale reason: %s" % field)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("Packetbeat AMQP facts: %(agree)d agree, %(disagree)d disagree, %(not mappable)d not mappable" % counts)
    if counts["agree"] == 0:
        failures.append("no fact checked")
    for f in failures:
        print("FAILED: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
