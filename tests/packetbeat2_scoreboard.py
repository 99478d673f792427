#!/usr/bin/env python3
"""Packetbeat scoreboard, second set: MongoDB, Memcached and Cassandra.

usage: packetbeat2_scoreboard.py WIRELOG_BINARY [--verbose]

Packetbeat's system tests for the protocols of shared/testdata/packetbeat2
(manifest.json there), run against wirelog the way tests/packetbeat_scoreboard.py
runs the first set: this script imports that one and uses its harness (the
fake `self` that executes each test's original statements, the Runner, the
event base), adding the mapping of wirelog's logs of these protocols onto
Packetbeat's events (Cassandra's: map_cassandra). Every assert is one fact: agree, disagree, or not
mappable (a Packetbeat-only field). Every fact that does not agree needs a
reason in tests/packetbeat2_reasons.json; a missing or stale reason fails
the run. Only the protocols of PARSED are run (and of those, not the files
of NOT_RUN_FILES); the others of the manifest (AMQP, run by tests/packetbeat2_amqp.py, Thrift,
TLS/HTTP2) are listed as not run, with why.

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
PARSED = {"mongodb": "mongodb", "memcache": "memcached", "cassandra": "cassandra"}
# Test files of a parsed protocol that are not run (none: Memcached over
# UDP is parsed too).
NOT_RUN_FILES = {}

sb.TX_PROTOS = sb.TX_PROTOS + tuple(v for v in PARSED.values() if v not in sb.TX_PROTOS)


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

# Packetbeat's request type per command (its memcache commandTypeCode).
MC_TYPE = {"set": "Store", "add": "Store", "replace": "Store", "append": "Store", "prepend": "Store",
           "cas": "Store", "touch": "Store", "get": "Load", "gets": "Load", "gat": "Load", "gats": "Load",
           "delete": "Delete", "flush_all": "Delete", "incr": "Counter", "decr": "Counter",
           "stats": "Stats"}
# wirelog's result -> the binary status's name, and the text response's first word.
MC_STATUS = {"miss": "Key not found", "not_found": "Key not found", "exists": "Key exists",
             "not_stored": "Item not stored"}
MC_TEXT_WORD = {"miss": "END", "stored": "STORED", "not_stored": "NOT_STORED", "exists": "EXISTS",
                "not_found": "NOT_FOUND", "deleted": "DELETED", "touched": "TOUCHED", "ok": "OK",
                "hit": "VALUE", "partial_hit": "VALUE", "stats": "STAT", "version": "VERSION"}


def map_memcached(r, e):
    e["type"] = e["network.protocol"] = "memcache"
    cmd = r.get("command")
    binary = r.get("protocol") == "binary"
    e["memcache.protocol_type"] = r.get("protocol")
    e["memcache.request.command"] = cmd
    e["memcache.request.type"] = MC_TYPE.get(cmd, "Info")
    if "key" in r:
        e["memcache.request.keys"] = [r["key"]]
    if binary:
        e["memcache.request.opcode"] = r.get("opcode")
        e["memcache.request.quiet"] = r.get("noreply")
    else:
        e["memcache.request.noreply"] = r.get("noreply")
    result = r.get("result")
    if MC_TYPE.get(cmd) == "Store" and "value_bytes" in r:
        e["memcache.request.bytes"] = r["value_bytes"]
        e["memcache.request.count_values"] = 1
    if result is None:
        return
    rtype = MC_TYPE.get(cmd)
    if rtype in ("Load", "Stats", "Counter"):
        e["memcache.response.type"] = rtype
    else:
        e["memcache.response.type"] = "Success" if result in ("stored", "deleted", "touched", "ok") else "Fail"
    if binary:
        e["memcache.response.opcode"] = r.get("opcode")
        e["memcache.response.status"] = r.get("error_message") or MC_STATUS.get(result, "Success")
    else:
        e["memcache.response.command"] = MC_TEXT_WORD.get(result, result.upper())
    if r.get("hits"):
        e["memcache.response.count_values"] = r["hits"]
        e["memcache.response.bytes"] = r.get("value_bytes")
        # Only the first key is kept; a one-key get's answer names it.
        if "key" in r and r.get("keys") == 1:
            e["memcache.response.keys"] = [r["key"]]


sb.TX_MAP["memcached"] = map_memcached
# The memcache test files' helper methods, inlined by the harness.
sb.HELPER_PARAMS.update({"_run": ["pcap"], "assert_common": ["objs"]})
# Packetbeat-only: values and numbers of the messages wirelog does not keep.
for _f in ("exptime", "opaque", "cas_unique", "delta", "initial", "value", "stats", "flags", "vbucket"):
    sb.PB_ONLY.append("memcache.request." + _f)
    sb.PB_ONLY.append("memcache.response." + _f)
# Packetbeat-only: its `mongodb.*` event map holds the legacy header
# fields (numberToSkip, startingFrom, ...) wirelog does not keep.
sb.PB_ONLY.append("mongodb.fullCollectionName")


# Packetbeat's names of the RESULT kinds (protos/cassandra/internal/gocql,
# frame.go's resultKind names) <- wirelog's `result`.
CQL_RESULT = {"void": "void", "rows": "rows", "set_keyspace": "setKeyspace", "prepared": "prepared",
              "schema_change": "schemaChanged"}


def map_cassandra(r, e):
    e["event.dataset"] = "cassandra"
    op, rop = r.get("op"), r.get("response_op")
    compressed = "compression" in r
    if "query" in r:
        e["cassandra.request.query"] = r["query"]
    # A frame's header: its length is the frame's size less the 9-byte
    # header. wirelog keeps one `compression` per transaction (either
    # frame was compressed); which frame was follows from the spec
    # (native_protocol_v4.spec 2.2 and 4.1.1: nothing is compressed before
    # the STARTUP has set the algorithm, and the STARTUP itself cannot be;
    # its answer is).
    if "request_bytes" in r:
        e["cassandra.request.headers.version"] = str(r["version"])
        e["cassandra.request.headers.op"] = op
        e["cassandra.request.headers.length"] = r["request_bytes"] - 9
        e["cassandra.request.headers.flags"] = "Compress" if compressed and op not in ("STARTUP", "OPTIONS") else "Default"
        e["cassandra.request.headers.stream"] = r.get("stream")
    if "response_bytes" in r:
        e["cassandra.response.headers.version"] = str(r["version"])
        e["cassandra.response.headers.op"] = rop
        e["cassandra.response.headers.length"] = r["response_bytes"] - 9
        e["cassandra.response.headers.flags"] = "Compress" if compressed and op != "OPTIONS" else "Default"
        e["cassandra.response.headers.stream"] = r.get("stream")
    res = r.get("result")
    if res is not None:
        e["cassandra.response.result.type"] = CQL_RESULT.get(res, res)
    if res == "schema_change":
        change, _, target = r.get("change", "").partition(" ")
        e["cassandra.response.result.schema_change.change"] = change
        e["cassandra.response.result.schema_change.target"] = target
        e["cassandra.response.result.schema_change.keyspace"] = r.get("keyspace")
    if res == "rows":
        e["cassandra.response.result.rows.num_rows"] = r.get("rows")
        e["cassandra.response.result.rows.meta.col_count"] = r.get("columns")
        if "keyspace" in r:
            e["cassandra.response.result.rows.meta.keyspace"] = r["keyspace"]
            e["cassandra.response.result.rows.meta.table"] = r.get("table")


sb.TX_MAP["cassandra"] = map_cassandra
# Packetbeat-only: the rows metadata's flags (wirelog keeps the keyspace,
# table and column count they frame, not the flags).
sb.PB_ONLY.append("cassandra.response.result.rows.meta.flags")


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

    # Packetbeat's `cassandra.ignored_ops` publishes no event for those
    # opcodes; wirelog records every request. The option is applied here
    # as Packetbeat's rule, and checked: what it hides is in cassandra.log,
    # answered.
    #
    # Packetbeat finds protocols by port only (its test configuration: HTTP
    # on 80); cassandra_mixed_frame.pcap starts with HTTP to Elasticsearch
    # on 9200, which wirelog finds by content. `--no-detect` is wirelog's
    # port-only mode, so the Cassandra tests run in it.
    def render_config_template(self, **kwargs):
        self.ignored_ops = set(kwargs.pop("cassandra_ignored_ops", []) or [])
        sb.FakeSelf.render_config_template(self, **kwargs)
        if self.suite.proto == "cassandra":
            args, settings = self.options
            self.options = (args + ["--no-detect"], settings)

    def read_output(self, *a, **k):
        evs = sb.FakeSelf.read_output(self, *a, **k)
        ops = getattr(self, "ignored_ops", set())
        hidden = [e for e in evs if dict.get(e, "cassandra.request.headers.op") in ops]
        for e in hidden:
            if dict.get(e, "status") != "OK" or dict.get(e, "cassandra.response.headers.op") is None:
                raise RuntimeError("an ignored op's transaction is not answered: %r" % dict(e))
        if ops and not hidden:
            raise RuntimeError("cassandra_ignored_ops %s hid nothing" % sorted(ops))
        return [e for e in evs if not any(e is h for h in hidden)]


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
                base = os.path.basename(fe["file"])
                if base in NOT_RUN_FILES:
                    n = sum(1 for t in fe["tests"] if t["is_test"])
                    not_run.append("%s (%d tests: %s)" % (base, n, NOT_RUN_FILES[base]))
                    continue
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
