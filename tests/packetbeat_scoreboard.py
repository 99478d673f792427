#!/usr/bin/env python3
"""Packetbeat scoreboard: Packetbeat's own system tests, run against wirelog.

usage: packetbeat_scoreboard.py WIRELOG_BINARY [--verbose] [--mapping]

For every test in shared/testdata/packetbeat/manifest.json this script maps
the test's Packetbeat configuration onto wirelog options, runs wirelog on
the test's pcap, turns wirelog's JSON logs into Packetbeat-shaped events
(through the explicit table MAPPING below) and then executes the test's
original Python statements one by one against those events, with a fake
`self`. Every assert is one fact (check_fields/check_event: one fact per
key), counted as

  agree          the assert holds on wirelog's output;
  disagree       it does not (the exception says what wirelog produced);
  not mappable   it is about something wirelog does not have by design
                 (a Packetbeat-only field, raw request/response text, ...).

Every test is run twice: with Packetbeat's configuration mapped onto wirelog
options (plus -C: Packetbeat does not verify checksums), and with no options
at all. The board prints both columns and lists the tests whose facts agree
only with the configuration, with what explains it (headers kept only when
named, redaction, a protocol turned off, a non-default port, bad checksums
that are not offloaded); a difference no option explains fails the run.

Every fact that does not agree needs a reason in tests/packetbeat_reasons.json
(keyed by "file::method", then by statement); the script exits 1 when one is
missing, or when a listed reason has become stale (its fact now agrees or is
gone). A parser bug is not a reason: it stays a failure until fixed.

Standard library only.
"""

import ast
import datetime
import decimal
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
import warnings

warnings.filterwarnings("ignore", category=SyntaxWarning)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
REASONS_FILE = os.path.join(HERE, "packetbeat_reasons.json")


def find_data():
    """shared/testdata/packetbeat: WIRELOG_PACKETBEAT_DATA, else ../shared
    next to the repo (CI), else shared/ next to any ancestor (worktrees)."""
    env = os.environ.get("WIRELOG_PACKETBEAT_DATA")
    if env:
        return env
    d = REPO
    while True:
        cand = os.path.join(os.path.dirname(d), "shared", "testdata", "packetbeat")
        if os.path.isfile(os.path.join(cand, "manifest.json")):
            return cand
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return os.path.join(REPO, "..", "shared", "testdata", "packetbeat")


# ---------------------------------------------------------------------------
# Configuration: Packetbeat kwargs -> wirelog options
# ---------------------------------------------------------------------------

TX_PROTOS = ("http", "mysql", "pgsql", "redis", "dns")

# Header names passed as --http-header for http_send_all_headers (wirelog
# keeps headers by name; it has no "keep all" switch).
ALL_HEADERS = [
    "accept", "accept-charset", "accept-encoding", "accept-language",
    "authorization", "cache-control", "connection", "content-encoding",
    "content-language", "content-length", "content-type", "cookie", "date",
    "etag", "expires", "host", "if-modified-since", "if-none-match",
    "keep-alive", "last-modified", "location", "origin", "pragma",
    "proxy-authorization", "referer", "server", "set-cookie",
    "transfer-encoding", "upgrade", "user-agent", "vary", "via",
    "www-authenticate", "x-forwarded-for", "x-forward-for", "x-real-ip",
    "x-powered-by", "age", "accept-ranges",
]

# kwargs honoured by the harness itself (not wirelog options)
HARNESS_KWARGS = {
    "timestamp_precision": "formats @timestamp/event.start/event.end",
    "flows": "flow events are read from flows.log",
    "icmp_enabled": "icmp events are read from conn.log",
}


def map_config(kwargs):
    """Returns (wirelog args, harness settings, ignored kwargs)."""
    args = []
    settings = {"timestamp_precision": "millisecond", "flows": False}
    ignored = []
    headers = []
    redact = False
    for k, v in kwargs.items():
        proto, _, opt = k.partition("_")
        if proto in TX_PROTOS and opt == "ports":
            # an empty list turns the protocol off (`--ports dns=`)
            args += ["--ports", "%s=%s" % (proto, ",".join(str(p) for p in (v or [])))]
        elif k == "http_send_all_headers" and v:
            headers += ALL_HEADERS
        elif k == "http_send_headers":
            headers += [h.lower() for h in v]
        elif k in ("http_redact_authorization", "http_hide_keywords") and v:
            redact = True
        elif k == "http_real_ip_header":
            # wirelog reads X-Forwarded-For, X-Forward-For and X-Real-IP itself
            ignored.append(k)
        elif k == "timestamp_precision":
            settings["timestamp_precision"] = v
        elif k == "flows":
            settings["flows"] = bool(v)
        else:
            ignored.append(k)
    seen = set()
    for h in headers:
        if h not in seen:
            seen.add(h)
            args += ["--http-header", h]
    if redact:
        args.append("--redact")
    return args, settings, ignored


# ---------------------------------------------------------------------------
# Running wirelog and reading its logs
# ---------------------------------------------------------------------------

class Runner:
    """Runs wirelog on a case's pcap. `bare`: with no options at all (no
    -C, no --ports, no headers, no redaction): what a user gets who tells
    wirelog nothing. Only the harness's plumbing stays (JSON logs in a
    scratch directory, no store, flows for the whole capture)."""

    def __init__(self, binary, data, bare=False):
        self.binary = binary
        self.data = data
        self.bare = bare
        self.cache = {}
        # per pcap: packets with bad checksums that are not offloaded (bare runs)
        self.bad = {}
        self.tmp = tempfile.mkdtemp(prefix="wirelog-pb-")

    def close(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run(self, pcap, args):
        if self.bare:
            args = []
        key = (pcap, tuple(args))
        if key in self.cache:
            return self.cache[key]
        out = os.path.join(self.tmp, "run%d" % len(self.cache))
        path = os.path.join(self.data, "pcaps", pcap)
        cmd = [self.binary, "read", "--no-store", "--logs", out,
               "--log-format", "json", "--flow-interval", "24h"]
        if not self.bare:
            # Packetbeat does not verify checksums (loopback captures
            # and checksum offload leave them wrong)
            cmd += ["--quiet", "-C"]
        cmd += args + [path]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0:
            raise RuntimeError("wirelog failed (%d): %s\n%s" % (
                p.returncode, " ".join(cmd), p.stderr.decode(errors="replace")))
        if self.bare:
            m = re.search(r"checksums \(auto\): \d+ valid, \d+ offloaded, (\d+) bad",
                          p.stderr.decode(errors="replace"))
            self.bad[pcap] = int(m.group(1)) if m else 0
        logs = {}
        for name in ("conn", "flows") + TX_PROTOS:
            f = os.path.join(out, name + ".log")
            rows = []
            if os.path.exists(f):
                with open(f) as fh:
                    for line in fh:
                        line = line.strip()
                        if line:
                            rows.append(json.loads(line, parse_float=decimal.Decimal))
            logs[name] = rows
        self.cache[key] = (logs, cmd)
        return self.cache[key]


# ---------------------------------------------------------------------------
# wirelog records -> Packetbeat events
# ---------------------------------------------------------------------------

# The explicit mapping table: Packetbeat field <- wirelog source. Printed by
# --mapping; the code below implements exactly these rows.
MAPPING = [
    # transactions (http.log, dns.log, mysql.log, pgsql.log, redis.log)
    ("type", "the log's protocol (http, dns, mysql, pgsql, redis)"),
    ("status", "status: ok -> OK, error/no_response/no_request -> Error"),
    ("@timestamp, event.start", "ts (precision per timestamp_precision: ms by default)"),
    ("event.end", "ts + first_byte_latency"),
    ("event.duration", "first_byte_latency in ns (Packetbeat: request's first packet to response's first packet)"),
    ("client.ip, source.ip", "id.orig_h"),
    ("client.port, source.port", "id.orig_p"),
    ("server.ip, destination.ip", "id.resp_h"),
    ("server.port, destination.port", "id.resp_p"),
    ("related.ip", "id.orig_h, id.resp_h (distinct)"),
    ("source.bytes, client.bytes", "request_bytes"),
    ("destination.bytes, server.bytes", "response_bytes"),
    ("network.bytes", "request_bytes + response_bytes"),
    ("network.type", "ipv4/ipv6 from the address family of id.orig_h"),
    ("network.transport", "conn.log proto of the same uid (dns.log: proto)"),
    ("network.community_id", "conn.log community_id of the same uid"),
    ("network.protocol", "the log's protocol"),
    ("error.message", "status no_request -> 'Unmatched response', no_response -> 'Unmatched request'; "
                      "http request_missed_bytes / response_missed_bytes > 0 -> 'Packet loss while capturing the "
                      "request' / '... the response'"),
    # http.log
    ("http.request.method, method", "method"),
    ("http.request.bytes, http.response.bytes", "request_bytes, response_bytes"),
    ("server.domain, destination.domain, url.domain, related.hosts", "host without port"),
    ("url.path, url.query", "uri split at the first '?'"),
    ("url.full", "'http://' + host + uri"),
    ("query", "http: method + ' ' + url.path"),
    ("http.response.status_code", "status_code"),
    ("http.response.status_phrase", "status_msg, lower-cased"),
    ("http.request.headers", "headers ('name: value', names lower-case); content-length <- request_body_len "
                             "and content-type <- request_content_type when not kept (Packetbeat always sends both)"),
    ("http.response.headers", "response_headers; content-length <- response_body_len, "
                              "content-type <- response_content_type likewise"),
    ("http.request.body.bytes", "request_body_len"),
    ("http.response.body.bytes", "response_body_len"),
    ("user_agent.original", "user_agent"),
    ("http.version", "version"),
    ("network.forwarded_ip", "forwarded_for"),
    ("http.response.mime_type / request.mime_type", "not mapped: content sniffing is Packetbeat's"),
    # mysql.log
    ("method", "mysql: first word of arg upper-cased for query/stmt_* commands, else cmd upper-cased "
               "(MysqlTx::method); pgsql: first word of query; redis: cmd; dns: opcode_name"),
    ("query", "mysql: arg; pgsql: query; redis: cmd + args; dns: 'class C, type T, qname'"),
    ("params", "mysql: params"),
    ("mysql.num_rows", "rows"),
    ("mysql.affected_rows", "affected_rows"),
    ("mysql.insert_id", "insert_id"),
    ("mysql.error_code", "error_code"),
    ("mysql.error_message", "sql_state + ': ' + response (mysql.log keeps the error text in response)"),
    ("(mysql.log records other than cmd query/stmt_prepare/stmt_execute)",
     "not mapped to events: Packetbeat publishes none for login, ping, quit, init_db, ..."),
    # pgsql.log / redis.log
    ("(pgsql.log records of kind startup/ssl_request/cancel/terminate, and extended-protocol 'SET ...')",
     "not mapped to events: Packetbeat publishes none for them"),
    ("pgsql.num_rows", "rows"),
    ("pgsql.error_code, pgsql.error_message, pgsql.error_severity", "error_code, error_message, error_severity"),
    ("redis.return_value", "reply"),
    # dns.log
    ("dns.id", "trans_id"),
    ("dns.op_code", "opcode_name upper-cased"),
    ("dns.question.name, resource", "query"),
    ("dns.resolved_ip", "answers of type A/AAAA (also added to related.ip)"),
    ("dns.header_flags", "those of AA, TC, RD, RA that are set (dns.log has no AD/CD)"),
    ("dns.question.type", "qtype_name"),
    ("dns.question.class", "qclass as IN/CH/HS/NONE/ANY"),
    ("dns.response_code", "rcode_name"),
    ("dns.answers", "answer_names, answer_types, TTLs, answers zipped into {name,type,ttl,data}"),
    ("dns.answers_count", "number of answers"),
    ("dns.authorities_count", "authority_count"),
    ("dns.flags.*", "AA, TC, RD, RA"),
    ("dns.opt.udp_size, dns.opt.version, dns.opt.do", "edns_udp_size, edns_version (as text), edns_do"),
    ("dns.opt.ext_rcode", "rcode_name when EDNS is present (wirelog's rcode includes the EDNS extension)"),
    # conn.log (icmp)
    ("icmp events", "conn.log records with proto icmp"),
    ("icmp.version", "4 for ip_proto 1, 6 for ip_proto 58"),
    ("icmp.request.type", "id.orig_p (Zeek's ICMP convention)"),
    ("icmp.response.type", "id.resp_p: the counterpart type of a request/reply pair, when resp_pkts > 0"),
    ("icmp.request.message / response.message", "name of the type (Packetbeat's names)"),
    ("icmp.request.code / response.code", "not mapped: conn.log keeps no ICMP codes"),
    ("path (icmp)", "id.resp_h"),
    ("status (icmp)", "OK when the responder answered (resp_pkts > 0), else Error"),
    ("source.bytes / destination.bytes (icmp)", "orig_bytes / resp_bytes"),
    ("event.duration (icmp)", "duration in ns"),
    # flows.log (flows)
    ("flow events", "flows.log rows (--flow-interval 24h, so one row per flow key)"),
    ("source.ip, destination.ip, destination.port", "client, server, server_port"),
    ("source.port", "id.orig_p of the single conn.log record of the flow (when conns == 1)"),
    ("network.transport", "proto number -> name"),
    ("source.bytes/packets, destination.bytes/packets", "bytes_out/pkts_out, bytes_in/pkts_in"),
    ("network.bytes/packets", "sums of both directions"),
    ("event.start, event.end, event.duration", "first, last, last - first"),
]

# Packetbeat fields that wirelog does not have by design. A fact that fails
# only because it needs one of these is "not mappable".
PB_ONLY = [
    "request", "response", "agent.", "@metadata.", "ecs.", "host.",
    "event.kind", "event.category", "event.type", "event.dataset", "event.action",
    "http.request.body.content", "http.response.body.content",
    "http.request.mime_type", "http.response.mime_type",
    "source.mac", "destination.mac", "flow.", "transport",
    "dns.authorities", "dns.additionals",
    "dns.question.etld_plus_one", "dns.question.registered_domain",
    "dns.question.subdomain", "dns.question.top_level_domain", "dns.type",
    "dns.additionals_count", "dns.flags.authentic_data", "dns.flags.checking_disabled",
    "resource", "path", "network.direction", "destination.domain",
    "url.domain", "url.scheme", "url.port", "http.request.referrer",
    "user_agent.", "params", "pgsql.", "redis.",
]


def pb_only(key):
    for p in PB_ONLY:
        if p.endswith("."):
            if key.startswith(p):
                return True
        elif key == p:
            return True
    return False


class NotMappable(Exception):
    pass


# Names of Packetbeat-only fields a statement asked for (cleared per fact).
ASKED = []


class Event(dict):
    """A flattened Packetbeat event; asking for a Packetbeat-only field that
    wirelog cannot fill is recorded (membership) or raises NotMappable."""

    def __init__(self, *a, **kw):
        dict.__init__(self, *a, **kw)
        # fields that this event cannot have in wirelog, with why
        self.unmappable = {}

    def pb_only(self, k):
        return pb_only(k) or k in self.unmappable

    def __getitem__(self, k):
        if not dict.__contains__(self, k) and self.pb_only(k):
            ASKED.append(k)
            raise NotMappable(unmappable_detail(self, k))
        return dict.__getitem__(self, k)

    def __contains__(self, k):
        if not dict.__contains__(self, k) and self.pb_only(k):
            ASKED.append(k)
        return dict.__contains__(self, k)


def unmappable_detail(ev, k):
    why = getattr(ev, "unmappable", {}).get(k)
    return "Packetbeat-only field %r%s" % (k, ": " + why if why else "")


def fmt_ts(secs, precision):
    secs = decimal.Decimal(secs)
    whole = int(secs // 1)
    frac = secs - whole
    ns = int((frac * 1000000000).to_integral_value(rounding=decimal.ROUND_HALF_EVEN))
    t = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=whole)
    base = t.strftime("%Y-%m-%dT%H:%M:%S")
    if precision == "nanosecond":
        s = ("%09d" % ns).rstrip("0")
        return base + ("." + s if s else "") + "Z"
    if precision == "microsecond":
        return base + ".%06d" % (ns // 1000) + "Z"
    return base + ".%03d" % (ns // 1000000) + "Z"


def ns(secs):
    return int((decimal.Decimal(secs) * 1000000000).to_integral_value())


def common_tx(r, proto, conn_by_uid, prec):
    e = Event()
    e["type"] = proto
    e["network.protocol"] = proto
    e["status"] = "OK" if r.get("status") == "ok" else "Error"
    e["@timestamp"] = e["event.start"] = fmt_ts(r["ts"], prec)
    # Packetbeat times a transaction from the request's first packet to the
    # response's first packet: wirelog's first_byte_latency
    lat = r.get("first_byte_latency", r.get("latency"))
    if lat is not None:
        e["event.duration"] = ns(lat)
        e["event.end"] = fmt_ts(decimal.Decimal(r["ts"]) + lat, prec)
    e["client.ip"] = e["source.ip"] = r["id.orig_h"]
    e["client.port"] = e["source.port"] = r["id.orig_p"]
    e["server.ip"] = e["destination.ip"] = r["id.resp_h"]
    e["server.port"] = e["destination.port"] = r["id.resp_p"]
    e["related.ip"] = list(dict.fromkeys([r["id.orig_h"], r["id.resp_h"]]))
    if "request_bytes" in r:
        e["source.bytes"] = e["client.bytes"] = r["request_bytes"]
    if "response_bytes" in r:
        e["destination.bytes"] = e["server.bytes"] = r["response_bytes"]
    if "request_bytes" in r or "response_bytes" in r:
        e["network.bytes"] = r.get("request_bytes", 0) + r.get("response_bytes", 0)
    e["network.type"] = "ipv6" if ":" in r["id.orig_h"] else "ipv4"
    c = conn_by_uid.get(r.get("uid"))
    if c is not None:
        e["network.transport"] = c.get("proto")
        if "community_id" in c:
            e["network.community_id"] = c["community_id"]
    if r.get("status") == "no_request":
        e["error.message"] = "Unmatched response"
    elif r.get("status") == "no_response":
        e["error.message"] = "Unmatched request"
    return e


def header_dict(items, body_len, content_type):
    d = {}
    for it in items or []:
        k, _, v = it.partition(": ")
        k = k.lower()
        d[k] = d[k] + ", " + v if k in d else v
    if "content-length" in d:
        try:
            d["content-length"] = int(d["content-length"])
        except ValueError:
            pass
    elif body_len is not None:
        d["content-length"] = body_len
    if "content-type" not in d and content_type:
        d["content-type"] = content_type
    return d


def map_http(r, e):
    if "method" in r:
        e["http.request.method"] = e["method"] = r["method"]
    if "request_bytes" in r:
        e["http.request.bytes"] = r["request_bytes"]
    if "response_bytes" in r:
        e["http.response.bytes"] = r["response_bytes"]
    if "host" in r:
        host = r["host"].rsplit(":", 1)[0] if r["host"].count(":") == 1 else r["host"]
        e["server.domain"] = e["destination.domain"] = e["url.domain"] = host
        e["related.hosts"] = [host]
    e.unmappable["user.name"] = e.unmappable["related.user"] = \
        "Packetbeat decodes Basic auth credentials; wirelog never decodes or stores them"
    if "uri" in r:
        path, q, query = r["uri"].partition("?")
        e["url.path"] = path
        if q:
            e["url.query"] = query
        elif r.get("method") == "POST":
            e.unmappable["url.query"] = "Packetbeat fills url.query of a form POST from its body"
        e["url.original"] = r["uri"]
        if "host" in r:
            e["url.full"] = "http://" + r["host"] + r["uri"]
        if "method" in r:
            e["query"] = "%s %s" % (r["method"], path)
    if "status_code" in r:
        e["http.response.status_code"] = r["status_code"]
    if "status_msg" in r:
        e["http.response.status_phrase"] = r["status_msg"].lower()
    if "version" in r:
        e["http.version"] = r["version"]
    if "user_agent" in r:
        e["user_agent.original"] = r["user_agent"]
    if "forwarded_for" in r:
        e["network.forwarded_ip"] = r["forwarded_for"]
    if "request_body_len" in r:
        e["http.request.body.bytes"] = r["request_body_len"]
    if "response_body_len" in r:
        e["http.response.body.bytes"] = r["response_body_len"]
    if r.get("status") != "no_request":
        e["http.request.headers"] = header_dict(r.get("headers"), r.get("request_body_len"),
                                                r.get("request_content_type"))
    if r.get("status") != "no_response":
        e["http.response.headers"] = header_dict(r.get("response_headers"), r.get("response_body_len"),
                                                 r.get("response_content_type"))
    if "error.message" not in e:
        if r.get("request_missed_bytes", 0) > 0:
            e["error.message"] = "Packet loss while capturing the request"
        elif r.get("response_missed_bytes", 0) > 0:
            e["error.message"] = "Packet loss while capturing the response"


def mysql_method(cmd, arg):
    if arg is not None and (cmd == "query" or cmd.startswith("stmt_")):
        w = arg.split()
        if w:
            return w[0].rstrip(";").upper()
    return cmd.upper()


# Packetbeat publishes MySQL events only for these commands
MYSQL_PB_COMMANDS = ("query", "stmt_prepare", "stmt_execute")


def map_mysql(r, e):
    cmd = r.get("cmd", "")
    e["method"] = mysql_method(cmd, r.get("arg"))
    if "arg" in r:
        e["query"] = r["arg"]
    if r.get("params"):
        e["params"] = r["params"]
    for src, dst in (("rows", "mysql.num_rows"), ("affected_rows", "mysql.affected_rows"),
                     ("insert_id", "mysql.insert_id"), ("error_code", "mysql.error_code")):
        if src in r:
            e[dst] = r[src]
    if "error_code" in r:
        msg = r.get("response", "")
        e["mysql.error_message"] = ("%s: %s" % (r["sql_state"], msg)) if "sql_state" in r else msg


def pgsql_published(r):
    """Whether Packetbeat publishes an event for this pgsql.log record: not
    for the session's startup, SSL/cancel requests or Terminate, and not for
    extended-protocol statements starting with "SET " (its parseExtReq sets
    toExport = false for them)."""
    kind = r.get("kind")
    if kind in ("startup", "ssl_request", "cancel", "terminate"):
        return False
    if kind in ("execute", "parse", "bind", "describe") and r.get("query", "").startswith("SET "):
        return False
    return True


def map_pgsql(r, e):
    q = r.get("query")
    if q is not None:
        e["query"] = q
        w = q.split()
        if w:
            e["method"] = w[0].rstrip(";").upper()
    for src, dst in (("rows", "pgsql.num_rows"), ("error_code", "pgsql.error_code"),
                     ("error_message", "pgsql.error_message"),
                     ("error_severity", "pgsql.error_severity")):
        if src in r:
            e[dst] = r[src]


def map_redis(r, e):
    if "cmd" in r:
        e["method"] = r["cmd"].upper()
        e["query"] = (r["cmd"] + " " + r["args"]) if r.get("args") else r["cmd"]
    if "reply" in r:
        e["redis.return_value"] = r["reply"]


DNS_CLASS = {1: "IN", 3: "CH", 4: "HS", 254: "NONE", 255: "ANY"}


def map_dns(r, e):
    if "proto" in r:
        e["network.transport"] = r["proto"]
    if "opcode_name" in r:
        e["method"] = e["dns.op_code"] = r["opcode_name"].upper()
    if "trans_id" in r:
        e["dns.id"] = r["trans_id"]
    cls = DNS_CLASS.get(r.get("qclass"), str(r.get("qclass")))
    if "query" in r:
        e["dns.question.name"] = e["resource"] = r["query"]
        e["query"] = "class %s, type %s, %s" % (cls, r.get("qtype_name"), r["query"])
    e["dns.question.class"] = cls
    if "qtype_name" in r:
        e["dns.question.type"] = r["qtype_name"]
    if "rcode_name" in r:
        e["dns.response_code"] = r["rcode_name"]
    if r.get("status") != "no_response":
        data = r.get("answers", [])
        names = r.get("answer_names", [])
        typs = r.get("answer_types", [])
        ttls = r.get("TTLs", [])
        ans = []
        for i, d in enumerate(data):
            a = {"data": d}
            if i < len(names):
                a["name"] = names[i]
            if i < len(typs):
                a["type"] = typs[i]
            if i < len(ttls):
                a["ttl"] = str(int(decimal.Decimal(str(ttls[i]))))
            ans.append(a)
        if ans:
            e["dns.answers"] = ans
            resolved = [a["data"] for a in ans if a.get("type") in ("A", "AAAA")]
            if resolved:
                e["dns.resolved_ip"] = resolved
            e["related.ip"] = e["related.ip"] + [
                x for x in resolved if x not in e["related.ip"]]
        e["dns.answers_count"] = len(data)
    if "authority_count" in r:
        e["dns.authorities_count"] = r["authority_count"]
    flags = []
    for src, dst in (("AA", "dns.flags.authoritative"), ("TC", "dns.flags.truncated_response"),
                     ("RD", "dns.flags.recursion_desired"), ("RA", "dns.flags.recursion_available")):
        if src in r:
            e[dst] = r[src]
            if r[src]:
                flags.append(src)
    e["dns.header_flags"] = flags
    if "edns_udp_size" in r:
        e["dns.opt.udp_size"] = r["edns_udp_size"]
        if "edns_version" in r:
            e["dns.opt.version"] = str(r["edns_version"])
        if "edns_do" in r:
            e["dns.opt.do"] = r["edns_do"]
        if "rcode_name" in r:
            e["dns.opt.ext_rcode"] = r["rcode_name"]


TX_MAP = {"http": map_http, "mysql": map_mysql, "pgsql": map_pgsql,
          "redis": map_redis, "dns": map_dns}

ICMP4_NAMES = {0: "EchoReply", 3: "DestinationUnreachable", 4: "SourceQuench",
               5: "Redirect", 8: "EchoRequest", 9: "RouterAdvertisement",
               10: "RouterSolicitation", 11: "TimeExceeded", 12: "ParameterProblem",
               13: "TimestampRequest", 14: "TimestampReply", 15: "InfoRequest",
               16: "InfoReply", 17: "AddressMaskRequest", 18: "AddressMaskReply"}
ICMP6_NAMES = {1: "DestinationUnreachable", 2: "PacketTooBig", 3: "TimeExceeded",
               4: "ParameterProblem", 128: "EchoRequest", 129: "EchoReply",
               133: "RouterSolicitation", 134: "RouterAdvertisement",
               135: "NeighborSolicitation", 136: "NeighborAdvertisement"}
ICMP4_REPLY = {8: 0, 13: 14, 15: 16, 17: 18, 10: 9}
ICMP6_REPLY = {128: 129, 133: 134, 135: 136}
IP_PROTO = {1: "icmp", 6: "tcp", 17: "udp", 58: "ipv6-icmp", 132: "sctp"}


def icmp_event(c, prec):
    e = Event()
    v6 = c.get("ip_proto") == 58 or ":" in c["id.orig_h"]
    e["type"] = "icmp"
    e["icmp.version"] = 6 if v6 else 4
    e["@timestamp"] = e["event.start"] = fmt_ts(c["ts"], prec)
    if "duration" in c:
        e["event.duration"] = ns(c["duration"])
        e["event.end"] = fmt_ts(decimal.Decimal(c["ts"]) + c["duration"], prec)
    e["client.ip"] = e["source.ip"] = c["id.orig_h"]
    e["server.ip"] = e["destination.ip"] = e["path"] = c["id.resp_h"]
    e["related.ip"] = list(dict.fromkeys([c["id.orig_h"], c["id.resp_h"]]))
    e["network.type"] = "ipv6" if v6 else "ipv4"
    e["network.transport"] = IP_PROTO.get(c.get("ip_proto"), c.get("proto"))
    if "community_id" in c:
        e["network.community_id"] = c["community_id"]
    answered = c.get("resp_pkts", 0) > 0
    e["status"] = "OK" if answered else "Error"
    if "orig_bytes" in c:
        e["source.bytes"] = c["orig_bytes"]
    if "resp_bytes" in c:
        e["destination.bytes"] = c["resp_bytes"]
    names = ICMP6_NAMES if v6 else ICMP4_NAMES
    replies = ICMP6_REPLY if v6 else ICMP4_REPLY
    # Zeek's convention: id.orig_p is the ICMP type, id.resp_p the
    # counterpart type of a request/reply pair (else the code).
    t, t2 = c["id.orig_p"], c["id.resp_p"]
    e["icmp.request.type"] = t
    e["icmp.request.message"] = names.get(t, "Unknown")
    e.unmappable["icmp.request.code"] = e.unmappable["icmp.response.code"] = \
        "conn.log keeps ICMP types (Zeek's id.orig_p/id.resp_p), not codes"
    if answered and t in replies:
        e["icmp.response.type"] = t2
        e["icmp.response.message"] = names.get(t2, "Unknown")
    return e


def flow_event(f, conns, prec):
    e = Event()
    e["type"] = "flow"
    e["source.ip"] = f["client"]
    e["destination.ip"] = f["server"]
    if "server_port" in f:
        e["destination.port"] = f["server_port"]
    e["network.transport"] = IP_PROTO.get(f["proto"], str(f["proto"]))
    e["network.type"] = "ipv6" if ":" in f["client"] else "ipv4"
    e["source.bytes"] = f["bytes_out"]
    e["source.packets"] = f["pkts_out"]
    e["destination.bytes"] = f["bytes_in"]
    e["destination.packets"] = f["pkts_in"]
    e["network.bytes"] = f["bytes_out"] + f["bytes_in"]
    e["network.packets"] = f["pkts_out"] + f["pkts_in"]
    e["@timestamp"] = e["event.start"] = fmt_ts(f["first"], prec)
    e["event.end"] = fmt_ts(f["last"], prec)
    e["event.duration"] = ns(decimal.Decimal(f["last"]) - decimal.Decimal(f["first"]))
    mine = [c for c in conns if c["id.orig_h"] == f["client"] and c["id.resp_h"] == f["server"]
            and IP_PROTO.get(c.get("ip_proto")) == e["network.transport"]
            and (f.get("server_port") is None or c["id.resp_p"] == f["server_port"]
                 or e["network.transport"] in ("icmp", "ipv6-icmp"))]
    if f.get("conns") == 1 and len(mine) == 1 and e["network.transport"] in ("tcp", "udp"):
        e["source.port"] = mine[0]["id.orig_p"]
    if len(mine) == 1 and "community_id" in mine[0]:
        e["network.community_id"] = mine[0]["community_id"]
    return e


def build_events(logs, settings):
    prec = settings["timestamp_precision"]
    conn_by_uid = {c["uid"]: c for c in logs["conn"] if "uid" in c}
    evs = []
    for proto in TX_PROTOS:
        for r in logs[proto]:
            if proto == "mysql" and r.get("cmd") not in MYSQL_PB_COMMANDS:
                continue
            if proto == "pgsql" and not pgsql_published(r):
                continue
            e = common_tx(r, proto, conn_by_uid, prec)
            TX_MAP[proto](r, e)
            evs.append((decimal.Decimal(r["ts"]), e))
    for c in logs["conn"]:
        if c.get("proto") == "icmp":
            evs.append((decimal.Decimal(c["ts"]), icmp_event(c, prec)))
    if settings["flows"]:
        for f in logs["flows"]:
            evs.append((decimal.Decimal(f["first"]), flow_event(f, logs["conn"], prec)))
    evs.sort(key=lambda x: x[0])
    return [e for _, e in evs]


# ---------------------------------------------------------------------------
# Executing the tests' statements
# ---------------------------------------------------------------------------

HELPER_PARAMS = {
    "run_with_options": ["send_request", "send_response"],
    "assert_common_fields": ["objs"],
    "assert_common_icmp4_fields": ["obj"],
    "assert_common_icmp6_fields": ["obj"],
}

TRANS_REQUIRED_FIELDS = []
FLOWS_REQUIRED_FIELDS = []


def parse_timestamp(s):
    s = s.rstrip("Z")
    base, _, frac = s.partition(".")
    t = datetime.datetime.strptime(base, "%Y-%m-%dT%H:%M:%S")
    return (t - datetime.datetime(1970, 1, 1)).total_seconds() + float("0." + (frac or "0"))


class Fact:
    def __init__(self, suite, test, stmt, result, detail):
        self.suite, self.test, self.stmt = suite, test, stmt
        self.result, self.detail = result, detail


def is_fact(stmt):
    return bool(re.search(r"\bassert\b|assertEqual|\bcheck_fields\(|\bcheck_event\(", stmt))


def group_statements(stmts):
    """Joins a compound statement (`for ...:`) with its indented body."""
    out = []
    for s in stmts:
        s = re.sub(r"\\\s+", " ", s)  # line continuations flattened by the extractor
        if out and s[:1] in (" ", "\t") and out[-1].split("\n")[0].rstrip().endswith(":"):
            out[-1] += "\n" + s
        else:
            out.append(s)
    return out


def describe_failure(stmt, ns_, exc):
    """What wirelog produced, for a failed `assert LEFT op RIGHT`."""
    msg = "%s: %s" % (type(exc).__name__, exc) if str(exc) else type(exc).__name__
    try:
        tree = ast.parse(stmt.strip())
        node = tree.body[0]
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
            left = eval(compile(ast.Expression(node.test.left), "<s>", "eval"), ns_)
            right = eval(compile(ast.Expression(node.test.comparators[0]), "<s>", "eval"), ns_)
            r = repr(left)
            if len(r) > 300:
                r = r[:300] + "..."
            msg = "wirelog: %s (Packetbeat: %r)" % (r, right)
    except BaseException:  # noqa
        pass
    return msg


class Suite:
    """Runs one test file's tests."""

    def __init__(self, proto, file_entry, runner, facts):
        self.proto = proto
        self.file = os.path.basename(file_entry["file"])
        self.methods = {t["method"]: t for t in file_entry["tests"]}
        self.runner = runner
        self.facts = facts
        self.ignored = set()
        # test -> [(pcap, wirelog args of Packetbeat's configuration)]
        self.used = {}

    def run_test(self, method):
        ctx = FakeSelf(self, method)
        name = "%s::%s" % (self.file, method)
        ctx.exec_statements(self.methods[method], {}, name, prefix="")


class FakeSelf:
    def __init__(self, suite, method):
        self.suite = suite
        self.method = method
        self.today = datetime.date.today().strftime("%Y%m%d")
        self.options = None
        self.events = []
        self.render_calls = 0
        self.current_test = None

    # -- Packetbeat harness methods --
    def render_config_template(self, **kwargs):
        args, settings, ignored = map_config(kwargs)
        self.options = (args, settings)
        self.suite.ignored.update(ignored)

    def run_packetbeat(self, pcap, debug_selectors=None, real_time=False, **_):
        if self.options is None:
            self.render_config_template()
        args, settings = self.options
        logs, _cmd = self.suite.runner.run(pcap, args)
        self.suite.used.setdefault(self.current_test, []).append((pcap, args))
        self.events = build_events(logs, settings)

    def read_output(self, types=None, required_fields=None, output_file=None, **_):
        evs = self.events
        if types is not None:
            evs = [e for e in evs if e.get("type") in types]
        return list(evs)

    def check_community_id(self, pcap):
        raise NotMappable("pcap %s is not shipped in testdata (the test's own pcaps/community_id dir)" % pcap)

    def assertEqual(self, a, b):
        assert a == b, "%r != %r" % (a, b)

    def __getattr__(self, name):
        entry = self.suite.methods.get(name)
        if entry is None:
            raise AttributeError(name)
        params = HELPER_PARAMS.get(name)
        if params is None:
            raise AttributeError("helper %s has no known signature" % name)

        def call(*args):
            ns_ = dict(zip(params, args))
            return self.exec_statements(entry, ns_, self.current_test,
                                        prefix=self.current_stmt + " > ")
        return call

    # -- statement execution --
    def exec_statements(self, entry, local, test, prefix):
        self.current_test = test
        ns_ = {"self": self, "re": re, "six": types.SimpleNamespace(string_types=(str,), itervalues=lambda d: iter(d.values())),
               "pprint": lambda *a, **k: None, "check_event": None, "check_fields": None,
               "parse_timestamp": parse_timestamp, "TRANS_REQUIRED_FIELDS": TRANS_REQUIRED_FIELDS,
               "FLOWS_REQUIRED_FIELDS": FLOWS_REQUIRED_FIELDS}
        ns_.update(local)
        render_steps = [s for s in entry["steps"] if s["call"] == "render_config_template"]
        render_i = 0
        blocked = None
        seen = {}
        for stmt in group_statements(entry["statements_in_order"]):
            key_base = prefix + stmt.strip()
            seen[key_base] = seen.get(key_base, 0) + 1
            key = key_base if seen[key_base] == 1 else "%s #%d" % (key_base, seen[key_base])
            code = stmt.strip()
            if code.startswith("self.render_config_template("):
                kw = render_steps[render_i]["kwargs"] if render_i < len(render_steps) else {}
                render_i += 1
                if "#" in code and not any(isinstance(v, dict) and "expr" in v for v in kw.values()):
                    # the extractor kept comments on one line: use the parsed kwargs
                    code = "self.render_config_template(**%r)" % (kw,)
            m = re.match(r"return\s+(.*)$", code, re.S)
            self.current_stmt = prefix + stmt.strip()
            if blocked is not None:
                if is_fact(code) or re.search(r"self\.assert_common", code):
                    self.record(test, key, blocked[0], "blocked: " + blocked[1])
                continue
            if re.match(r"check_(fields|event)\(", code):
                self.exec_check(code, ns_, test, key)
                continue
            del ASKED[:]
            try:
                if m:
                    return eval(m.group(1), ns_)
                exec(compile(code, "<%s>" % test, "exec"), ns_)
                if is_fact(code):
                    self.record(test, key, "agree", "")
            except NotMappable as ex:
                if is_fact(code):
                    self.record(test, key, "not mappable", str(ex))
                else:
                    blocked = ("not mappable", "%s (%s)" % (stmt.strip(), ex))
            except Exception as ex:  # noqa
                if is_fact(code):
                    if ASKED:
                        ev = next((v for v in ns_.values() if isinstance(v, Event)
                                   and v.pb_only(ASKED[0])), None)
                        self.record(test, key, "not mappable", unmappable_detail(ev, ASKED[0]))
                    else:
                        self.record(test, key, "disagree", describe_failure(code, ns_, ex))
                else:
                    blocked = ("disagree", "%s raised %s: %s" % (stmt.strip(), type(ex).__name__, ex))
        return None

    def exec_check(self, code, ns_, test, key):
        """check_fields(obj, {k: v}) / check_event: one fact per key."""
        tree = ast.parse(code)
        call = tree.body[0].value
        try:
            obj = eval(compile(ast.Expression(call.args[0]), "<s>", "eval"), ns_)
        except Exception as ex:  # noqa
            obj, err = None, ex
        expected = eval(compile(ast.Expression(call.args[1]), "<s>", "eval"), ns_)
        for k, v in expected.items():
            fkey = "%s [%s]" % (key, k)
            if obj is None:
                self.record(test, fkey, "disagree", "blocked: %s: %s" % (type(err).__name__, err))
                continue
            if not dict.__contains__(obj, k):
                if obj.pb_only(k):
                    self.record(test, fkey, "not mappable", unmappable_detail(obj, k))
                else:
                    self.record(test, fkey, "disagree", "wirelog has no %r (Packetbeat: %r)" % (k, v))
            elif dict.__getitem__(obj, k) != v:
                self.record(test, fkey, "disagree",
                            "wirelog: %r (Packetbeat: %r)" % (dict.__getitem__(obj, k), v))
            else:
                self.record(test, fkey, "agree", "")

    def record(self, test, key, result, detail):
        self.suite.facts.append(Fact(self.suite.proto, test, key, result, detail))


# ---------------------------------------------------------------------------
# Golden file comparison
# ---------------------------------------------------------------------------

def flatten(d, prefix="", out=None, keep=()):
    out = {} if out is None else out
    for k, v in d.items():
        kk = prefix + k
        if isinstance(v, dict) and kk not in keep:
            flatten(v, kk + ".", out, keep)
        else:
            out[kk] = v
    return out


def golden(data, manifest, runner, facts, used):
    for g in manifest.get("golden", []):
        with open(os.path.join(data, g["expected"])) as fh:
            expected = json.load(fh)
        args, settings, _ = map_config(g.get("config", {}))
        logs, _ = runner.run(g["pcap"], args)
        evs = build_events(logs, settings)
        test = "golden::%s" % os.path.basename(g["expected"])
        used.setdefault(test, []).append((g["pcap"], args))
        drop = set(re.findall(r"[\w@.]+", g["comparison"].split("keys:", 1)[1].split(";")[0]))

        def rec(key, result, detail):
            facts.append(Fact("golden", test, key, result, detail))

        rec("len(events)", "agree" if len(evs) == len(expected) else "disagree",
            "" if len(evs) == len(expected) else "wirelog: %d (Packetbeat: %d)" % (len(evs), len(expected)))
        for i, exp in enumerate(expected):
            exp = flatten(exp, keep=("http.request.headers", "http.response.headers"))
            # the produced event of the same type and client port
            cand = [e for e in evs if dict.get(e, "type") == exp.get("type")
                    and dict.get(e, "client.port") == exp.get("client.port")]
            got = cand[0] if cand else None
            for k in sorted(exp):
                if k in drop:
                    continue
                v = exp[k]
                key = "event[%d] %s" % (i, k)
                if got is None:
                    rec(key, "disagree", "no wirelog event of type %s from port %s" %
                        (exp.get("type"), exp.get("client.port")))
                elif k.startswith(("http.request.headers.", "http.response.headers.")):
                    side, name = k.rsplit(".", 1)[0], k.rsplit(".", 1)[1]
                    hd = dict.get(got, side, {})
                    if name in hd:
                        w = hd[name]
                        rec(key, "agree" if w == v else "disagree",
                            "" if w == v else "wirelog: %r (Packetbeat: %r)" % (w, v))
                    elif name not in ALL_HEADERS:
                        rec(key, "not mappable", "Packetbeat-only field %r: wirelog keeps headers by "
                            "name (--http-header) and %r is not among the names passed for "
                            "http_send_all_headers" % (k, name))
                    else:
                        rec(key, "disagree", "wirelog has no %r (Packetbeat: %r)" % (k, v))
                elif not dict.__contains__(got, k):
                    if got.pb_only(k):
                        rec(key, "not mappable", unmappable_detail(got, k))
                    else:
                        rec(key, "disagree", "wirelog has no %r (Packetbeat: %r)" % (k, v))
                else:
                    w = dict.__getitem__(got, k)
                    if isinstance(v, dict) and isinstance(w, dict):
                        # headers: compare the names wirelog keeps
                        bad = {h: (w.get(h), v[h]) for h in v if h in w and str(w[h]) != str(v[h])}
                        missing = sorted(h for h in v if h not in w)
                        if bad:
                            rec(key, "disagree", "wirelog/Packetbeat: %r" % bad)
                        elif missing:
                            rec(key, "disagree", "wirelog lacks headers %s" % missing)
                        else:
                            rec(key, "agree", "")
                    elif w == v:
                        rec(key, "agree", "")
                    else:
                        rec(key, "disagree", "wirelog: %r (Packetbeat: %r)" % (w, v))


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------

DEFAULT_PORTS = {"http": {80, 8000, 8080, 8888}, "mysql": {3306}, "pgsql": {5432},
                 "redis": {6379}, "dns": {53, 137, 5353, 5355}}


def why_bare_differs(runs, bad):
    """What Packetbeat's configuration gave that no options do not, for the
    runs of one test: its options with an effect, and bad checksums."""
    why = []
    for pcap, args in runs:
        for i, a in enumerate(args):
            if a == "--ports":
                proto, _, ports = args[i + 1].partition("=")
                ps = {int(p) for p in ports.split(",") if p}
                if not ps:
                    why.append("the configuration turns %s off (%s)" % (proto, args[i + 1]))
                elif not ps <= DEFAULT_PORTS.get(proto, set()):
                    why.append("non-default %s port(s) %s" % (proto, ",".join(map(str, sorted(ps)))))
            elif a == "--http-header":
                why.append("headers are kept only when named (--http-header)")
            elif a == "--redact":
                why.append("redaction asked (--redact)")
        if bad.get(pcap):
            why.append("%s: %d packets with bad checksums that are not offloaded (rejected "
                       "without -C, as Zeek does)" % (pcap, bad[pcap]))
    out = []
    for w in why:
        if w not in out:
            out.append(w)
    return out or ["no option of the test explains it"]


def report_bare(facts, bare_facts, used, bad, crashed):
    """Which tests' facts agree with Packetbeat's configuration but not with
    no options at all, and why."""
    bare = {(f.test, f.stmt): f for f in bare_facts}
    lost, won = {}, {}
    for f in facts:
        b = bare.get((f.test, f.stmt))
        res = b.result if b else "missing"
        if f.result == "agree" and res != "agree":
            lost.setdefault(f.test, []).append((f, b))
        elif f.result != "agree" and res == "agree":
            won.setdefault(f.test, []).append(f)
    unexplained = []
    n = sum(len(v) for v in lost.values())
    print("With no options at all, %d facts of %d tests no longer agree:" % (n, len(lost)))
    for test in sorted(lost):
        fs = lost[test]
        why = why_bare_differs(used.get(test, []), bad)
        if why == ["no option of the test explains it"]:
            unexplained.append(test)
        print("  %s: %d facts; why: %s" % (test, len(fs), "; ".join(why)))
        f, b = fs[0]
        print("      e.g. %s -> %s" % (f.stmt[:100], (b.detail if b else "not reached")[:160]))
    if won:
        print("Facts that agree only with no options: %s" % ", ".join(
            "%s (%d)" % (t, len(v)) for t, v in sorted(won.items())))
    if crashed:
        print("wirelog failed with no options on:")
        for c in crashed:
            print("  " + c)
    print()
    return unexplained + ["(no options) " + c for c in crashed]


def load_reasons():
    with open(REASONS_FILE) as fh:
        doc = json.load(fh)
    return doc.get("fields", {}), doc.get("facts", {})


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    binary = os.path.abspath(argv[1])
    verbose = "--verbose" in argv
    if "--mapping" in argv:
        for pb, wl in MAPPING:
            print("%-50s <- %s" % (pb, wl))
        return 0
    data = find_data()
    with open(os.path.join(data, "manifest.json")) as fh:
        manifest = json.load(fh)
    facts = []
    counts = {}
    ignored = set()
    crashed = []
    used = {}
    # The same facts with no options at all (second column).
    bare_facts = []
    bare_crashed = []
    bare_runner = None
    for bare in (False, True):
        runner = Runner(binary, data, bare=bare)
        out_facts, out_crashed = (bare_facts, bare_crashed) if bare else (facts, crashed)
        try:
            for proto, files in manifest["protocols"].items():
                for fe in files:
                    suite = Suite(proto, fe, runner, out_facts)
                    for t in fe["tests"]:
                        if not t["is_test"]:
                            continue
                        if not bare:
                            counts.setdefault(proto, 0)
                            counts[proto] += 1
                        try:
                            suite.run_test(t["method"])
                        except RuntimeError as ex:
                            out_crashed.append("%s::%s: %s" % (suite.file, t["method"], ex))
                    if not bare:
                        ignored |= suite.ignored
                        used.update(suite.used)
            golden(data, manifest, runner, out_facts, used if not bare else {})
            counts["golden"] = len(manifest.get("golden", []))
        finally:
            runner.close()
        if bare:
            bare_runner = runner

    field_reasons, fact_reasons = load_reasons()
    used_fields = set()
    used_facts = set()
    missing = []
    rows = []
    for f in facts:
        if f.result == "agree":
            continue
        r = fact_reasons.get(f.test, {}).get(f.stmt)
        if r is not None:
            used_facts.add((f.test, f.stmt))
        else:
            m = re.search(r"Packetbeat-only field '([^']+)'", f.detail)
            if f.result == "not mappable" and m:
                fld = m.group(1)
                for pat in field_reasons:
                    if pat == fld or (pat.endswith("*") and fld.startswith(pat[:-1])):
                        r = field_reasons[pat]
                        used_fields.add(pat)
                        break
        if r is None:
            missing.append(f)
        rows.append((f, r))
    stale = []
    for test, stmts in fact_reasons.items():
        for stmt in stmts:
            if (test, stmt) not in used_facts:
                stale.append("%s: %s" % (test, stmt))
    for pat in field_reasons:
        if pat not in used_fields:
            stale.append("fields: %s" % pat)

    print("Packetbeat scoreboard (wirelog %s, data %s)" % (binary, data))
    print()
    print("Columns: with Packetbeat's configuration of each test (its ports, headers, redaction; -C);")
    print("'agreeing, no options': the same facts with wirelog given no option at all.")
    print()
    hdr = "%-8s %6s %6s %9s %12s %13s %22s" % ("protocol", "tests", "facts", "agreeing", "disagreeing",
                                               "not mappable", "agreeing, no options")
    print(hdr)
    print("-" * len(hdr))
    tot = [0, 0, 0, 0, 0, 0]
    for proto in list(manifest["protocols"]) + ["golden"]:
        fs = [f for f in facts if f.suite == proto]
        a = sum(f.result == "agree" for f in fs)
        d = sum(f.result == "disagree" for f in fs)
        n = sum(f.result == "not mappable" for f in fs)
        b = sum(f.result == "agree" for f in bare_facts if f.suite == proto)
        row = [counts.get(proto, 0), len(fs), a, d, n, b]
        tot = [x + y for x, y in zip(tot, row)]
        print("%-8s %6d %6d %9d %12d %13d %22d" % tuple([proto] + row))
    print("-" * len(hdr))
    print("%-8s %6d %6d %9d %12d %13d %22d" % tuple(["total"] + tot))
    print()
    unexplained = report_bare(facts, bare_facts, used, bare_runner.bad, bare_crashed)
    if ignored:
        print("Packetbeat options with no wirelog meaning (ignored): %s" % ", ".join(sorted(ignored)))
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
    if unexplained:
        ok = False
        print()
        print("With no options, facts stop agreeing where no option of the test explains it "
              "(a capture that needs a flag to be read right): %s" % ", ".join(unexplained))
    if crashed:
        ok = False
        print()
        print("wirelog failed on:")
        for c in crashed:
            print("  " + c)
    if missing:
        ok = False
        print()
        print("%d non-agreeing facts have no reason in %s:" % (len(missing), os.path.relpath(REASONS_FILE, REPO)))
        for f in missing:
            print("  %s  |  %s  |  %s  |  %s" % (f.test, f.stmt, f.result, f.detail))
    if stale:
        ok = False
        print()
        print("%d stale reasons (the fact agrees now or no longer exists):" % len(stale))
        for s in stale:
            print("  " + s)
    if "--json" in argv:
        with open(argv[argv.index("--json") + 1], "w") as fh:
            json.dump([{"suite": f.suite, "test": f.test, "statement": f.stmt, "result": f.result,
                        "detail": f.detail, "reason": r} for f, r in rows], fh, indent=1)
    print()
    print("RESULT: %s" % ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
