#!/usr/bin/env python3
"""Test-only MongoDB wire protocol peers for tests/mongodb_live.rs, standard
library only: `server PORT` answers a small set of commands over OP_MSG and
the legacy OP_QUERY (hello/isMaster, ping, insert, find with cursors and
getMore, delete; an unknown command fails with code 59, a duplicate _id with
a write error 11000; a getMore with exhaustAllowed streams its batches as
replies with moreToCome; an OP_COMPRESSED request is answered compressed
the same way); `client PORT` runs a script of requests and prints, per
reply, `<command>\t<ok|error|no_response>\t<number it got>` (documents
inserted, returned or deleted, or the error code) and, for a compressed
one, the compressor.

Checksums are CRC-32C (the OP_MSG specification); OP_COMPRESSED follows
mongodb/specifications source/compression/OP_COMPRESSED.md, with zlib
(standard library), snappy in literals (snappy's format_description.txt)
and zstd frames of raw blocks (RFC 8878, 3.1.1), written here."""

import socket
import struct
import sys
import threading
import zlib

OP_REPLY, OP_QUERY, OP_COMPRESSED, OP_MSG = 1, 2004, 2012, 2013
COMPRESSORS = {"noop": 0, "snappy": 1, "zlib": 2, "zstd": 3}


def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC32C = _crc32c_table()


def crc32c(b):
    c = 0xFFFFFFFF
    for x in b:
        c = CRC32C[(c ^ x) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def varint(n):
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


def pack(name, b):
    if name == "noop":
        return b
    if name == "zlib":
        return zlib.compress(b)
    if name == "snappy":
        out = varint(len(b))
        for i in range(0, len(b), 60):
            c = b[i:i + 60]
            out += bytes([(len(c) - 1) << 2]) + c
        return out
    # zstd: magic, a single-segment frame header with a 4-byte content
    # size, raw blocks (the last flagged).
    out = struct.pack("<IB", 0xFD2FB528, 0xA0) + struct.pack("<I", len(b))
    chunks = [b[i:i + 65536] for i in range(0, len(b), 65536)] or [b""]
    for k, c in enumerate(chunks):
        last = 1 if k == len(chunks) - 1 else 0
        out += struct.pack("<I", (len(c) << 3) | last)[:3] + c
    return out


def unpack(cid, b, size):
    if cid == 0:
        return b
    if cid == 2:
        return zlib.decompress(b)
    if cid == 1:
        i, n, shift = 0, 0, 0
        while True:
            x = b[i]; i += 1
            n |= (x & 0x7F) << shift; shift += 7
            if x < 0x80:
                break
        out = bytearray()
        while i < len(b):
            tag = b[i]; i += 1
            assert tag & 3 == 0 and tag >> 2 < 60, "literals only"
            ln = (tag >> 2) + 1
            out += b[i:i + ln]; i += ln
        return bytes(out)
    magic, fhd = struct.unpack_from("<IB", b)
    assert magic == 0xFD2FB528 and fhd == 0xA0
    i, out = 9, bytearray()
    while True:
        h = int.from_bytes(b[i:i + 3], "little"); i += 3
        assert (h >> 1) & 3 == 0, "raw blocks only"
        out += b[i:i + (h >> 3)]; i += h >> 3
        if h & 1:
            return bytes(out)


def compressed(m, name):
    """The message `m` as an OP_COMPRESSED with compressor `name`."""
    n, rid, to, op = struct.unpack_from("<iiii", m)
    body = struct.pack("<iiB", op, len(m) - 16, COMPRESSORS[name]) + pack(name, m[16:])
    return message(rid, to, OP_COMPRESSED, body)


def enc(d):
    b = b""
    for k, v in d.items():
        kb = k.encode() + b"\0"
        if isinstance(v, bool):
            b += b"\x08" + kb + (b"\1" if v else b"\0")
        elif isinstance(v, int):
            b += (b"\x10" + kb + struct.pack("<i", v)) if -2**31 <= v < 2**31 else (b"\x12" + kb + struct.pack("<q", v))
        elif isinstance(v, float):
            b += b"\x01" + kb + struct.pack("<d", v)
        elif isinstance(v, str):
            s = v.encode() + b"\0"
            b += b"\x02" + kb + struct.pack("<i", len(s)) + s
        elif isinstance(v, dict):
            b += b"\x03" + kb + enc(v)
        elif isinstance(v, list):
            b += b"\x04" + kb + enc({str(i): x for i, x in enumerate(v)})
        else:
            raise TypeError(type(v))
    return struct.pack("<i", len(b) + 5) + b + b"\0"


def dec(b, i=0):
    n = struct.unpack_from("<i", b, i)[0]
    end = i + n
    i += 4
    d = {}
    while b[i] != 0:
        t = b[i]
        j = b.index(b"\0", i + 1)
        k = b[i + 1:j].decode()
        i = j + 1
        if t == 1:
            v = struct.unpack_from("<d", b, i)[0]; i += 8
        elif t == 2:
            ln = struct.unpack_from("<i", b, i)[0]; v = b[i + 4:i + 3 + ln].decode(); i += 4 + ln
        elif t in (3, 4):
            v, i = dec(b, i)
            if t == 4:
                v = list(v.values())
        elif t == 8:
            v = b[i] == 1; i += 1
        elif t == 0x10:
            v = struct.unpack_from("<i", b, i)[0]; i += 4
        elif t == 0x12:
            v = struct.unpack_from("<q", b, i)[0]; i += 8
        else:
            raise ValueError("BSON type %d" % t)
        d[k] = v
    return d, end


def message(rid, to, op, body):
    return struct.pack("<iiii", 16 + len(body), rid, to, op) + body


def op_msg(rid, to, doc, flags=0, seqs=(), bad_crc=False):
    body = struct.pack("<I", flags) + b"\0" + enc(doc)
    for ident, docs in seqs:
        payload = ident.encode() + b"\0" + b"".join(enc(x) for x in docs)
        body += b"\1" + struct.pack("<i", 4 + len(payload)) + payload
    if flags & 1:
        # The CRC-32C of the whole message before it (the server's
        # op_msg.cpp); `bad_crc` flips a bit of it.
        m = message(rid, to, OP_MSG, body + b"\0\0\0\0")
        return m[:-4] + struct.pack("<I", crc32c(m[:-4]) ^ (1 if bad_crc else 0))
    return message(rid, to, OP_MSG, body)


def read_msg(f, seen=None):
    """The next message (an OP_COMPRESSED read as the one it wraps; its
    compressor's id appended to `seen`)."""
    h = f.read(16)
    if len(h) < 16:
        return None
    n, rid, to, op = struct.unpack("<iiii", h)
    body = f.read(n - 16)
    if op == OP_COMPRESSED:
        op, size, cid = struct.unpack_from("<iiB", body)
        body = unpack(cid, body[9:], size)
        assert len(body) == size
        if seen is not None:
            seen.append(cid)
    return rid, to, op, body


def parse_op_msg(body):
    flags = struct.unpack_from("<I", body)[0]
    end = len(body) - (4 if flags & 1 else 0)
    i, doc, seqs = 4, None, {}
    while i < end:
        kind = body[i]
        if kind == 0:
            doc, i = dec(body, i + 1)
        else:
            size = struct.unpack_from("<i", body, i + 1)[0]
            j = body.index(b"\0", i + 5)
            ident = body[i + 5:j].decode()
            k, docs = j + 1, []
            while k < i + 1 + size:
                d, k = dec(body, k)
                docs.append(d)
            seqs[ident] = docs
            i += 1 + size
    return flags, doc, seqs


def matches(doc, flt):
    for k, cond in flt.items():
        v = doc.get(k)
        if isinstance(cond, dict):
            for op, x in cond.items():
                if v is None or not {"$gt": v > x, "$lt": v < x}[op]:
                    return False
        elif v != cond:
            return False
    return True


class Server:
    def __init__(self):
        self.docs = []
        self.cursors = {}
        self.next_cursor = 1000
        self.lock = threading.Lock()

    def command(self, cmd, seqs):
        name = next(iter(cmd))
        if name in ("hello", "isMaster", "ismaster"):
            return {"isWritablePrimary": True, "ismaster": True, "maxWireVersion": 17, "ok": 1.0}
        if name == "ping":
            return {"ok": 1.0}
        if name == "insert":
            docs = cmd.get("documents") or seqs.get("documents", [])
            n, errors = 0, []
            for idx, d in enumerate(docs):
                if any(x["_id"] == d["_id"] for x in self.docs):
                    errors.append({"index": idx, "code": 11000, "errmsg": "E11000 duplicate key error"})
                else:
                    self.docs.append(d)
                    n += 1
            reply = {"n": n, "ok": 1.0}
            if errors:
                reply["writeErrors"] = errors
            return reply
        if name == "find":
            found = [d for d in self.docs if matches(d, cmd.get("filter", {}))]
            size = cmd.get("batchSize", 101)
            cid = 0
            if len(found) > size:
                cid = self.next_cursor
                self.next_cursor += 1
                self.cursors[cid] = found[size:]
            return {"cursor": {"firstBatch": found[:size], "id": cid, "ns": "shop." + cmd["find"]}, "ok": 1.0}
        if name == "getMore":
            rest = self.cursors.pop(cmd["getMore"], [])
            size = cmd.get("batchSize", 101)
            cid = 0
            if len(rest) > size:
                cid = cmd["getMore"]
                self.cursors[cid] = rest[size:]
            return {"cursor": {"nextBatch": rest[:size], "id": cid, "ns": "shop." + cmd["collection"]}, "ok": 1.0}
        if name == "delete":
            n = 0
            for st in cmd.get("deletes") or seqs.get("deletes", []):
                keep = [d for d in self.docs if not matches(d, st["q"])]
                n += len(self.docs) - len(keep)
                self.docs = keep
            return {"n": n, "ok": 1.0}
        return {"ok": 0.0, "errmsg": "no such command: '%s'" % name, "code": 59, "codeName": "CommandNotFound"}

    def serve(self, conn):
        f = conn.makefile("rb")
        rid = 500
        names = {v: k for k, v in COMPRESSORS.items()}
        while True:
            comp = []
            m = read_msg(f, comp)
            if m is None:
                break
            req_id, _, op, body = m
            rid += 1
            # A compressed request is answered in the same compressor.
            wrap = (lambda x: compressed(x, names[comp[0]])) if comp else (lambda x: x)
            with self.lock:
                if op == OP_MSG:
                    flags, doc, seqs = parse_op_msg(body)
                    if flags & 0x10000 and "getMore" in doc:
                        # exhaustAllowed: every batch, each reply answering
                        # the one before it, moreToCome on all but the last.
                        to = req_id
                        while True:
                            reply = self.command(doc, seqs)
                            more = reply["cursor"]["id"] != 0
                            conn.sendall(wrap(op_msg(rid, to, reply, flags=2 if more else 0)))
                            if not more:
                                break
                            to, rid = rid, rid + 1
                        continue
                    reply = self.command(doc, seqs)
                    if not flags & 2:
                        conn.sendall(wrap(op_msg(rid, req_id, reply)))
                elif op == OP_QUERY:
                    j = body.index(b"\0", 4)
                    ns = body[4:j].decode()
                    query, _ = dec(body, j + 9)
                    if ns.endswith(".$cmd"):
                        docs = [self.command(query, {})]
                    else:
                        docs = [d for d in self.docs if matches(d, query)]
                    reply = struct.pack("<iqii", 0, 0, 0, len(docs)) + b"".join(enc(d) for d in docs)
                    conn.sendall(message(rid, req_id, OP_REPLY, reply))
        conn.close()


def server(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(8)
    srv = Server()
    while True:
        c, _ = s.accept()
        threading.Thread(target=srv.serve, args=(c,), daemon=True).start()


def client(port):
    s = socket.create_connection(("127.0.0.1", port))
    f = s.makefile("rb")
    rid = [0]

    def out(*a):
        print("\t".join(str(x) for x in a), flush=True)

    def ask(doc, flags=0, seqs=()):
        rid[0] += 1
        s.sendall(op_msg(rid[0], 0, doc, flags, seqs))
        if flags & 2:
            return None
        _, to, op, body = read_msg(f)
        assert op == OP_MSG and to == rid[0], (op, to, rid[0])
        return parse_op_msg(body)[1]

    def legacy(ns, query):
        rid[0] += 1
        body = struct.pack("<i", 0) + ns.encode() + b"\0" + struct.pack("<ii", 0, -1) + enc(query)
        s.sendall(message(rid[0], 0, OP_QUERY, body))
        _, to, op, body = read_msg(f)
        assert op == OP_REPLY and to == rid[0]
        n = struct.unpack_from("<i", body, 16)[0]
        return n, dec(body, 20)[0] if n else None

    n, doc = legacy("admin.$cmd", {"isMaster": 1})
    out("isMaster", "ok" if doc["ok"] else "error", n)
    r = ask({"insert": "items", "ordered": True, "$db": "shop"},
            seqs=[("documents", [{"_id": i, "sku": "s%d" % i, "qty": i * 10} for i in range(25)])])
    out("insert", "ok", r["n"])
    r = ask({"find": "items", "filter": {"qty": {"$gt": 100}}, "batchSize": 5, "$db": "shop"})
    out("find", "ok", len(r["cursor"]["firstBatch"]))
    cid = r["cursor"]["id"]
    while cid:
        r = ask({"getMore": cid, "collection": "items", "batchSize": 5, "$db": "shop"})
        out("getMore", "ok", len(r["cursor"]["nextBatch"]))
        cid = r["cursor"]["id"]
    r = ask({"delete": "items", "$db": "shop"}, flags=1, seqs=[("deletes", [{"q": {"qty": {"$lt": 50}}, "limit": 0}])])
    out("delete", "ok", r["n"])
    r = ask({"insert": "items", "documents": [{"_id": 7}], "$db": "shop"})
    out("insert", "error" if "writeErrors" in r else "ok", r["writeErrors"][0]["code"] if "writeErrors" in r else r["n"])
    r = ask({"nosuchcommand": 1, "$db": "shop"})
    out("nosuchcommand", "ok" if r["ok"] else "error", r.get("code", 0))
    ask({"insert": "items", "documents": [{"_id": 100}], "writeConcern": {"w": 0}, "$db": "shop"}, flags=2)
    out("insert", "no_response", 0)
    n, _ = legacy("shop.items", {"_id": 12})
    out("find", "ok", n)
    r = ask({"ping": 1, "$db": "shop"})
    out("ping", "ok" if r["ok"] else "error", 0)
    # A cursor read by exhaust: the find, then one getMore with
    # exhaustAllowed answered by a reply per batch.
    r = ask({"find": "items", "filter": {"qty": {"$gt": 100}}, "batchSize": 4, "$db": "shop"})
    out("find", "ok", len(r["cursor"]["firstBatch"]))
    rid[0] += 1
    s.sendall(op_msg(rid[0], 0, {"getMore": r["cursor"]["id"], "collection": "items", "batchSize": 4, "$db": "shop"}, flags=0x10000))
    to = rid[0]
    while True:
        rr, t, op, body = read_msg(f)
        assert op == OP_MSG and t == to, (op, t, to)
        flags, doc, _ = parse_op_msg(body)
        out("getMore", "ok", len(doc["cursor"]["nextBatch"]))
        if not flags & 2:
            break
        to = rr
    # Compressed requests, each answered compressed the same way.
    for name in ("snappy", "zlib", "zstd", "noop"):
        rid[0] += 1
        s.sendall(compressed(op_msg(rid[0], 0, {"find": "items", "filter": {"_id": 12}, "$db": "shop"}), name))
        comp = []
        _, t, op, body = read_msg(f, comp)
        assert op == OP_MSG and t == rid[0] and comp == [COMPRESSORS[name]], (op, t, comp)
        out("find", "ok", len(parse_op_msg(body)[1]["cursor"]["firstBatch"]), name)
    # A checksum that does not match (the test server does not check it).
    rid[0] += 1
    s.sendall(op_msg(rid[0], 0, {"ping": 1, "$db": "shop"}, flags=1, bad_crc=True))
    _, t, op, body = read_msg(f)
    out("ping", "ok" if parse_op_msg(body)[1]["ok"] else "error", 0)
    s.close()


if __name__ == "__main__":
    {"server": server, "client": client}[sys.argv[1]](int(sys.argv[2]))
