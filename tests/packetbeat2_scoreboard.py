#!/usr/bin/env python3
"""Packetbeat scoreboard, second set: MongoDB, Memcached and Cassandra.

usage: packetbeat2_scoreboard.py WIRELOG_BINARY [--verbose]

Packetbeat's system tests for the protocols of shared/testdata/packetbeat2
(manifest.json there), run against wirelog the way tests/packetbeat_scoreboard.py
runs the first set: this script imports that one and uses its harness (the
fake `self` that executes each test's original statements, the Runner, the
event base), adding the mapping of wirelog's logs of these protocols onto
Packetbeat's events. Every assert is one fact: agree, disagree, or not
mappable (a Packetbeat-only field). Every fact that does not agree needs a
reason in tests/packetbeat2_reasons.json; a missing or stale reason fails
the run. Only the protocols of PARSED are run; the others of the manifest
(AMQP, Thrift, TLS/HTTP2, and those not parsed yet) are listed as such.

Standard library only.
"""

import decimal
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import packetbeat_scoreboard as sb  # noqa: E402

REASONS_FILE = os.path.join(HERE, "packetbeat2_reasons.json")

# manifest protocol -> wirelog protocol (its log's stem and --ports name)
PARSED = {"mongodb": "mongodb"}

sb.TX_PROTOS = sb.TX_PROTOS + tuple(PARSED.values())


def map_mongodb(r, e):
    e["method"] = r.get("command")
    if "database" in r:
        e["resource"] = r["database"] + ("." + r["collection"] if "collection" in r else "")
    e["mongodb.cursorId"] = r.get("cursor_id")
    if "docs_returned" in r:
        e["mongodb.numberReturned"] = r["docs_returned"]
    if "error_message" in r:
        e["mongodb.error"] = r["error_message"]


sb.TX_MAP["mongodb"] = map_mongodb
# Packetbeat-only: its `mongodb.*` event map holds the legacy header
# fields (numberToSkip, startingFrom, ...) wirelog does not keep.
sb.PB_ONLY.append("mongodb.fullCollectionName")


class LogLines(sb.NotMappable):
    pass


class FakeSelf2(sb.FakeSelf):
    """Packetbeat's harness, plus its log-reading helpers: wirelog writes
    no line per message to read (malformed messages are counted in the
    run's summary instead), so a fact about Packetbeat's own log lines is
    not mappable."""

    def log_contains_count(self, *_a, **_k):
        raise LogLines("Packetbeat's own debug log lines (wirelog counts malformed messages "
                       "in the run's summary, not a line per message)")

    def log_contains_countmap(self, *_a, **_k):
        return self.log_contains_count()


class Suite2(sb.Suite):
    def run_test(self, method):
        ctx = FakeSelf2(self, method)
        name = "%s::%s" % (self.file, method)
        ctx.exec_statements(self.methods[method], {}, name, prefix="")


def find_data():
    env = os.environ.get("WIRELOG_PACKETBEAT2_DATA")
    if env:
        return env
    return os.path.join(os.path.dirname(sb.find_data()), "packetbeat2")


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    binary = os.path.abspath(argv[1])
    verbose = "--verbose" in argv
    data = find_data()
    with open(os.path.join(data, "manifest.json")) as fh:
        manifest = json.load(fh)
    facts, crashed, counts, not_run = [], [], {}, []
    runner = sb.Runner(binary, data)
    try:
        for proto, files in manifest["protocols"].items():
            if proto not in PARSED:
                n = sum(1 for fe in files for t in fe["tests"] if t["is_test"])
                not_run.append("%s (%d tests)" % (proto, n))
                continue
            for fe in files:
                suite = Suite2(proto, fe, runner, facts)
                for t in fe["tests"]:
                    if not t["is_test"]:
                        continue
                    counts[proto] = counts.get(proto, 0) + 1
                    try:
                        suite.run_test(t["method"])
                    except RuntimeError as ex:
                        crashed.append("%s::%s: %s" % (suite.file, t["method"], ex))
    finally:
        runner.close()

    with open(REASONS_FILE) as fh:
        doc = json.load(fh)
    field_reasons, fact_reasons = doc.get("fields", {}), doc.get("facts", {})
    used_fields, used_facts, missing, rows = set(), set(), [], []
    for f in facts:
        if f.result == "agree":
            continue
        r = fact_reasons.get(f.test, {}).get(f.stmt)
        if r is not None:
            used_facts.add((f.test, f.stmt))
        elif f.result == "not mappable":
            m = re.search(r"Packetbeat-only field '([^']+)'", f.detail)
            key = m.group(1) if m else ("log lines" if "debug log lines" in f.detail else None)
            if key in field_reasons:
                r = field_reasons[key]
                used_fields.add(key)
        if r is None:
            missing.append(f)
        rows.append((f, r))
    stale = ["%s: %s" % (t, s) for t, ss in fact_reasons.items() for s in ss if (t, s) not in used_facts]
    stale += ["fields: %s" % k for k in field_reasons if k not in used_fields]

    print("Packetbeat scoreboard, second set (wirelog %s, data %s)" % (binary, data))
    print()
    hdr = "%-10s %6s %6s %9s %12s %13s" % ("protocol", "tests", "facts", "agreeing", "disagreeing", "not mappable")
    print(hdr)
    print("-" * len(hdr))
    for proto in PARSED:
        fs = [f for f in facts if f.suite == proto]
        print("%-10s %6d %6d %9d %12d %13d" % (
            proto, counts.get(proto, 0), len(fs), sum(f.result == "agree" for f in fs),
            sum(f.result == "disagree" for f in fs), sum(f.result == "not mappable" for f in fs)))
    print()
    print("Not run (not parsed by wirelog on this branch): %s" % ", ".join(not_run))
    print()
    print("Facts that do not agree:")
    for f, r in rows:
        print("  [%s] %s\n      %s\n      what: %s\n      reason: %s" % (
            f.result, f.test, f.stmt, f.detail, r if r is not None else "MISSING"))
    if verbose:
        print()
        print("Agreeing facts:")
        for f in facts:
            if f.result == "agree":
                print("  %s: %s" % (f.test, f.stmt))
    ok = True
    if crashed:
        ok = False
        print("\nwirelog failed on:\n  " + "\n  ".join(crashed))
    if missing:
        ok = False
        print("\n%d non-agreeing facts have no reason in %s:" % (len(missing), os.path.basename(REASONS_FILE)))
        for f in missing:
            print("  %s  |  %s  |  %s  |  %s" % (f.test, f.stmt, f.result, f.detail))
    if stale:
        ok = False
        print("\n%d stale reasons:\n  %s" % (len(stale), "\n  ".join(stale)))
    print()
    print("RESULT: %s" % ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
