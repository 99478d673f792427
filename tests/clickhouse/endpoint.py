#!/usr/bin/env python3
"""A ClickHouse HTTP front over one chdb session, for wirelog's tests only.

Every statement a client sends is executed by the real ClickHouse engine
(chdb, in-process): DDL, SELECT, and INSERT with the exact body the client
sent in its format (RowBinary, Native, ..., LZ4-framed when `decompress=1`).
Only the HTTP front is ours; it answers the way ClickHouse's HTTP interface
does where the `clickhouse` crate looks: status codes, the error text
"Code: N. DB::Exception: ...", `X-ClickHouse-Exception-Code`,
`X-ClickHouse-Summary`, `X-ClickHouse-User`/`X-ClickHouse-Key` auth.

Faults are per data port, so tests sharing one endpoint do not disturb each
other. A control server (its port printed first) takes:
  GET /port/new[?user=U&password=P]    -> a new data port (auth optional)
  GET /port/P/down[?secs=N]            close the listener (connections are
                                       refused), reopen after N s if given
  GET /port/P/up                       listen again
  GET /port/P/fault?mode=M&count=N     the next N INSERTs on P fail:
        fail500  read half the body, answer 500 with an exception, execute nothing
        fail503  read the body, answer 503 (a server or proxy overloaded), execute nothing
        hang     execute the INSERT, then never answer (the client times out)
        drop     read the body, close the connection without an answer
  GET /port/P/flaky?every=N            from now on every Nth INSERT on P gets a 503,
                                       executing nothing (every=0: none)
  GET /port/P/stats                    inserts executed, faults served, answers to queries
                                       (count, bytes, the last statement)
  POST /sql  (body: SQL; ?database=D)  run a statement, TSV back (test assertions)
The endpoint exits when its standard input closes (the test process ended)
and removes its data directory.

Usage: endpoint.py   (prints "control PORT" on stdout once ready)
"""

import http.server
import json
import os
import re
import shutil
import signal
import socket
import socketserver
import struct
import sys
import tempfile
import threading
import time
import urllib.parse

import lz4.block
from chdb import session
from clickhouse_cityhash.cityhash import CityHash128

DATA_DIR = tempfile.mkdtemp(prefix="wirelog-chdb-")
SESSION = session.Session(os.path.join(DATA_DIR, "db"))
LOCK = threading.Lock()  # one chdb session: one statement at a time
VERSION = "26.9 (chdb test endpoint)"

# URL parameters that are not settings (ClickHouse's HTTP handler knows them).
NOT_SETTINGS = {"query", "database", "default_format", "compress", "decompress", "user", "password",
                "query_id", "session_id", "session_timeout", "session_check", "role", "buffer_size",
                "wait_end_of_query"}
CODE_STATUS = {60: 404, 81: 404, 62: 400, 27: 400, 36: 400, 516: 403, 192: 403}


class ChError(Exception):
    def __init__(self, code, text):
        super().__init__(text)
        self.code = code


def run(sql, database=None, settings=(), infile=None, fmt="TabSeparated"):
    """Executes one statement in the shared session; returns (bytes, rows_written)."""
    with LOCK:
        try:
            SESSION.query("USE " + (database or "default"))
            for k, v in settings:
                SESSION.query("SET %s = '%s'" % (k, v.replace("\\", "\\\\").replace("'", "\\'")))
            try:
                if infile is not None:
                    m = re.match(r"(?is)\s*(INSERT\s+INTO\s+.*?)\s+FORMAT\s+(\w+)\s*$", sql)
                    if not m:
                        raise ChError(62, "Code: 62. DB::Exception: the endpoint expects INSERT INTO ... FORMAT F with a body. (SYNTAX_ERROR)")
                    sql = "%s FROM INFILE '%s' FORMAT %s" % (m.group(1), infile, m.group(2))
                r = SESSION.query(sql, fmt)
                return r.bytes(), r.rows_written()
            finally:
                for k, _ in settings:
                    SESSION.query("SET %s = DEFAULT" % k)
        except ChError:
            raise
        except Exception as e:  # chdb's error carries ClickHouse's own text
            text = str(e).strip()
            m = re.search(r"Code: (\d+)\.", text)
            raise ChError(int(m.group(1)) if m else 1002, text)


def read_body(rfile, headers, limit=None):
    """The request body, chunked or with a length; `limit` stops early (fault injection)."""
    out = bytearray()
    if headers.get("Transfer-Encoding", "").lower() == "chunked":
        while True:
            size = int(rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                rfile.readline()
                break
            out += rfile.read(size)
            rfile.readline()
            if limit is not None and len(out) >= limit:
                break
    else:
        n = int(headers.get("Content-Length") or 0)
        out += rfile.read(n if limit is None else min(n, limit))
    return bytes(out)


def decompress(data):
    """ClickHouse's compressed blocks: checksum(16) method(1) size(4) raw_size(4) data."""
    out = bytearray()
    i = 0
    while i < len(data):
        if len(data) - i < 25:
            raise ChError(432, "Code: 432. DB::Exception: truncated compressed block. (UNKNOWN_CODEC)")
        checksum = data[i:i + 16]
        method = data[i + 16]
        size, raw_size = struct.unpack_from("<II", data, i + 17)
        block = data[i + 16:i + 16 + size]
        h = CityHash128(block)
        if struct.pack("<QQ", h >> 64, h & (2**64 - 1)) != checksum:
            raise ChError(40, "Code: 40. DB::Exception: Checksum doesn't match: corrupted data. (CHECKSUM_DOESNT_MATCH)")
        payload = block[9:]
        if method == 0x82:
            out += lz4.block.decompress(payload, uncompressed_size=raw_size)
        elif method == 0x02:
            out += payload
        else:
            raise ChError(432, "Code: 432. DB::Exception: Unknown codec family code: %d. (UNKNOWN_CODEC)" % method)
        i += 16 + size
    return bytes(out)


class Port:
    """One data listener and its faults."""

    def __init__(self, user=None, password=None):
        self.user, self.password = user, password
        self.faults = []  # modes, consumed one per INSERT
        self.flaky = 0  # every Nth INSERT answers 503 (0: none)
        self.insert_count = 0
        # selects: answers to queries; select_bytes: their bodies; last_select: the
        # statement of the last one (benchmarks count its rows through /sql).
        self.stats = {"inserts": 0, "rows": 0, "faults": 0, "requests": 0,
                      "selects": 0, "select_bytes": 0, "last_select": ""}
        self.server = None
        self.port = 0
        self.up()

    def up(self):
        if self.server is not None:
            return
        port = self

        class Handler(DataHandler):
            owner = port
        srv = Server(("127.0.0.1", self.port), Handler)
        self.port = srv.server_address[1]
        self.server = srv
        threading.Thread(target=srv.serve_forever, daemon=True).start()

    def down(self, secs=None):
        srv, self.server = self.server, None
        if srv is not None:
            srv.shutdown()
            srv.server_close()
        if secs:
            threading.Timer(secs, self.up).start()


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class DataHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    owner = None

    def log_message(self, *a):
        pass

    def do_GET(self):
        self.handle_query()

    def do_POST(self):
        self.handle_query()

    def answer(self, status, body, headers=()):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def fail(self, e):
        body = ("%s (version %s)\n" % (str(e), VERSION)).encode()
        self.answer(CODE_STATUS.get(e.code, 500), body,
                    [("X-ClickHouse-Exception-Code", str(e.code)), ("Content-Type", "text/plain; charset=UTF-8")])

    def handle_query(self):
        port = self.owner
        port.stats["requests"] += 1
        url = urllib.parse.urlparse(self.path)
        params = urllib.parse.parse_qsl(url.query, keep_blank_values=True)
        p = dict(params)
        user = self.headers.get("X-ClickHouse-User") or p.get("user") or "default"
        key = self.headers.get("X-ClickHouse-Key") or p.get("password") or ""
        sql = p.get("query", "")
        is_insert = bool(re.match(r"(?is)\s*INSERT\s+INTO\s+.*\s+FORMAT\s+\w+\s*$", sql))
        fault = port.faults.pop(0) if is_insert and port.faults else None
        if is_insert:
            port.insert_count += 1
            if fault is None and port.flaky and port.insert_count % port.flaky == 0:
                fault = "fail503"
        if fault == "fail500":
            port.stats["faults"] += 1
            read_body(self.rfile, self.headers, limit=1)
            self.fail(ChError(1000, "Code: 1000. DB::Exception: injected failure in the middle of the batch. (POCO_EXCEPTION)"))
            self.close_connection = True
            return
        body = read_body(self.rfile, self.headers)
        if fault == "fail503":
            port.stats["faults"] += 1
            self.answer(503, b"Service Unavailable\n", [("Content-Type", "text/plain; charset=UTF-8")])
            return
        if fault == "drop":
            port.stats["faults"] += 1
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        try:
            if port.user is not None and (user != port.user or key != port.password):
                raise ChError(516, "Code: 516. DB::Exception: %s: Authentication failed: password is incorrect, or there is no user with such name. (AUTHENTICATION_FAILED)" % user)
            if p.get("decompress") == "1":
                body = decompress(body)
            settings = [(k, v) for k, v in params if k not in NOT_SETTINGS and not k.startswith("param_")]
            if is_insert:
                fd, path = tempfile.mkstemp(dir=DATA_DIR, suffix=".body")
                try:
                    os.write(fd, body)
                    os.close(fd)
                    _, rows = run(sql, p.get("database"), settings, infile=path)
                finally:
                    os.unlink(path)
                port.stats["inserts"] += 1
                port.stats["rows"] += rows
                out = b""
                summary = {"written_rows": str(rows), "read_rows": "0"}
            else:
                text = sql + ("\n" if sql and body else "") + body.decode("utf-8", "replace")
                out, rows = run(text, p.get("database"), settings, fmt=p.get("default_format", "TabSeparated"))
                port.stats["selects"] += 1
                port.stats["select_bytes"] += len(out)
                port.stats["last_select"] = text
                summary = {"written_rows": str(rows), "read_rows": "0"}
        except ChError as e:
            self.fail(e)
            return
        if fault == "hang":
            port.stats["faults"] += 1
            time.sleep(3600)
            return
        self.answer(200, out, [("X-ClickHouse-Summary", json.dumps(summary)),
                               ("X-ClickHouse-Query-Id", "%x" % id(self)),
                               ("Content-Type", "application/octet-stream")])


PORTS = {}


class ControlHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, status, text):
        body = text.encode() if isinstance(text, str) else text
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        parts = url.path.strip("/").split("/")
        if parts == ["port", "new"]:
            p = Port(q.get("user"), q.get("password"))
            PORTS[p.port] = p
            return self.reply(200, str(p.port))
        if len(parts) == 3 and parts[0] == "port" and int(parts[1]) in PORTS:
            p = PORTS[int(parts[1])]
            if parts[2] == "down":
                p.down(float(q["secs"]) if "secs" in q else None)
            elif parts[2] == "up":
                p.up()
            elif parts[2] == "flaky":
                p.flaky = int(q.get("every", "0"))
            elif parts[2] == "fault":
                p.faults.extend([q["mode"]] * int(q.get("count", "1")))
            elif parts[2] == "stats":
                return self.reply(200, json.dumps(p.stats))
            else:
                return self.reply(404, "unknown command")
            return self.reply(200, "ok")
        self.reply(404, "unknown command")

    def do_POST(self):
        url = urllib.parse.urlparse(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        sql = read_body(self.rfile, self.headers).decode()
        try:
            out, _ = run(sql, q.get("database"), fmt=q.get("format", "TabSeparated"))
            self.reply(200, out)
        except ChError as e:
            self.reply(500, str(e))


def main():
    # A SIGTERM (a test harness stopping us) also removes the data directory.
    signal.signal(signal.SIGTERM, lambda *_: (shutil.rmtree(DATA_DIR, ignore_errors=True), os._exit(0)))
    control = Server(("127.0.0.1", 0), ControlHandler)
    threading.Thread(target=control.serve_forever, daemon=True).start()
    print("control %d" % control.server_address[1], flush=True)
    try:
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        shutil.rmtree(DATA_DIR, ignore_errors=True)
        os._exit(0)


if __name__ == "__main__":
    main()
