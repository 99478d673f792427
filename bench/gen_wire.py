#!/usr/bin/env python3
"""Synthetic captures for bench/tx_cost.sh's MongoDB, Memcached-binary, PostgreSQL
and Redis rows: `gen_wire.py mongodb|memcached_bin|pgsql|redis N OUT.pcap` writes N request/response
transactions over 100 TCP connections (Ethernet, IPv4, checksums left 0:
read with -C), each message in segments of at most 1448 bytes.

mongodb: OP_MSG finds with a two-field filter answered by a cursor of 3
small documents, every tenth an insert with a 2-document sequence
(messages built by tests/mongodb_wire.py). memcached_bin: GetK (hit, 100-byte
value) and Set with a 100-byte value, alternating, every fifth a GetKQ miss
followed by a NoOp. pgsql: simple queries answered by 20 DataRows of two
columns, every fifth an INSERT (issue 36: rows skipped by their lengths).
redis: LRANGE answered by a 20-element array of 17-byte bulks, GET of a
100-byte value and SET, in turn (issue 36: array elements skipped by their
lengths).
mqtt (3.1.1): each connection's first exchange a CONNECT/CONNACK, then in
turn a QoS 1 PUBLISH of 100 bytes and its PUBACK, a SUBSCRIBE and its SUBACK,
a PINGREQ and its PINGRESP. amqp (0-9-1): each connection's first bytes the
protocol header, then in turn queue.declare/declare-ok and basic.get
answered by get-ok with a 100-byte message (method, content header and body
frames) on channel 1. dns: UDP queries for A records of 100 names answered
by one address each, from 100 client ports (`gen_wire.py dns N OUT`).
http1pipe, http1pipe6 (over IPv6): pipelined HTTP/1.1, four GETs in one
segment answered by their four responses (100-byte bodies) in one segment,
N transactions in all (issue 36: what a segment of several transactions
costs the tracker); http1xff: http1pipe with an X-Forwarded-For in each
request."""

import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import mongodb_wire as mw  # noqa: E402

CONNS = 100


def pcap_header():
    return struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)


def frame(ts_us, src, dst, sport, dport, seq, ack, flags, payload):
    tcp = struct.pack(">HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, 65535, 0, 0)
    if len(src) == 16:
        ip = struct.pack(">IHBB16s16s", 6 << 28, 20 + len(payload), 6, 64, bytes(src), bytes(dst))
        eth = b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + b"\x86\xdd"
    else:
        ip_len = 20 + 20 + len(payload)
        ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0x4000, 64, 6, 0, bytes(src), bytes(dst))
        eth = b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + b"\x08\x00"
    pkt = eth + ip + tcp + payload
    return struct.pack("<IIII", ts_us // 1_000_000, ts_us % 1_000_000, len(pkt), len(pkt)) + pkt


class Conn:
    def __init__(self, i, port, v6=False):
        self.c, self.s = [10, 0, i // 250, i % 250 + 1], [10, 1, 0, 1]
        if v6:
            self.c, self.s = [0xfd, 0] + [0] * 12 + [i // 250, i % 250 + 1], [0xfd, 1] + [0] * 13 + [1]
        self.cp, self.sp = 30000 + i, port
        self.cseq, self.sseq = 1000, 5000

    def open(self, ts, out):
        out.append(frame(ts, self.c, self.s, self.cp, self.sp, self.cseq, 0, 0x02, b""))
        out.append(frame(ts + 1, self.s, self.c, self.sp, self.cp, self.sseq, self.cseq + 1, 0x12, b""))
        self.cseq += 1
        self.sseq += 1
        out.append(frame(ts + 2, self.c, self.s, self.cp, self.sp, self.cseq, self.sseq, 0x10, b""))

    def send(self, ts, data, to_server, out):
        for i in range(0, len(data), 1448):
            chunk = data[i:i + 1448]
            if to_server:
                out.append(frame(ts, self.c, self.s, self.cp, self.sp, self.cseq, self.sseq, 0x18, chunk))
                self.cseq += len(chunk)
            else:
                out.append(frame(ts, self.s, self.c, self.sp, self.cp, self.sseq, self.cseq, 0x18, chunk))
                self.sseq += len(chunk)

    def close(self, ts, out):
        out.append(frame(ts, self.c, self.s, self.cp, self.sp, self.cseq, self.sseq, 0x11, b""))
        out.append(frame(ts + 1, self.s, self.c, self.sp, self.cp, self.sseq, self.cseq + 1, 0x11, b""))
        out.append(frame(ts + 2, self.c, self.s, self.cp, self.sp, self.cseq + 1, self.sseq + 1, 0x10, b""))


def mongodb_pair(i):
    if i % 10 == 9:
        req = mw.op_msg(i + 1, 0, {"insert": "items", "$db": "shop"},
                        seqs=[("documents", [{"_id": i, "sku": "s%d" % i}, {"_id": -i, "sku": "t"}])])
        resp = mw.op_msg(100000 + i, i + 1, {"n": 2, "ok": 1.0})
    else:
        req = mw.op_msg(i + 1, 0, {"find": "items", "filter": {"sku": "s%d" % i, "qty": {"$gt": i}},
                                   "limit": 3, "lsid": {"id": i}, "$db": "shop"})
        docs = [{"_id": i * 3 + k, "sku": "s%d" % i, "qty": i + k + 1} for k in range(3)]
        resp = mw.op_msg(100000 + i, i + 1, {"cursor": {"firstBatch": docs, "id": 0, "ns": "shop.items"}, "ok": 1.0})
    return [(req, resp)]


def mc(magic, op, opaque, key=b"", extras=b"", value=b"", status=0):
    return struct.pack(">BBHBBHII8x", magic, op, len(key), len(extras), 0, status,
                       len(extras) + len(key) + len(value), opaque) + extras + key + value


def memcached_pair(i):
    key = b"key:%d" % i
    value = bytes(100)
    if i % 5 == 4:
        # A quiet miss and the NoOp that passes it: two transactions.
        req = mc(0x80, 0x0d, i * 2, b"gone:%d" % i) + mc(0x80, 0x0a, i * 2 + 1)
        return [(req, mc(0x81, 0x0a, i * 2 + 1))]
    if i % 2:
        return [(mc(0x80, 0x01, i * 2, key, struct.pack(">II", 0, 0), value), mc(0x81, 0x01, i * 2))]
    return [(mc(0x80, 0x0c, i * 2, key), mc(0x81, 0x0c, i * 2, key, struct.pack(">I", 0), value))]


def pg(ty, body):
    return ty + struct.pack(">I", 4 + len(body)) + body


def pgsql_pair(i):
    if i % 5 == 4:
        req = pg(b"Q", b"INSERT INTO items (id, name) VALUES (%d, 'n%d')\0" % (i, i))
        return [(req, pg(b"C", b"INSERT 0 1\0") + pg(b"Z", b"I"))]
    req = pg(b"Q", b"SELECT id, name FROM items WHERE grp = %d\0" % i)
    field = lambda name, oid: name + b"\0" + struct.pack(">IhIhih", 0, 0, oid, 4, -1, 0)  # noqa: E731
    resp = pg(b"T", struct.pack(">h", 2) + field(b"id", 23) + field(b"name", 25))
    for k in range(20):
        v1, v2 = b"%d" % (i * 20 + k), b"name-%08d" % k
        resp += pg(b"D", struct.pack(">hi", 2, len(v1)) + v1 + struct.pack(">i", len(v2)) + v2)
    return [(req, resp + pg(b"C", b"SELECT 20\0") + pg(b"Z", b"I"))]


def resp_cmd(*args):
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def redis_pair(i):
    key = b"list:%d" % (i % 1000)
    if i % 3 == 0:
        items = [b"item-%012d" % (i * 20 + k) for k in range(20)]
        return [(resp_cmd(b"LRANGE", key, b"0", b"19"),
                 b"*20\r\n" + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in items))]
    if i % 3 == 1:
        return [(resp_cmd(b"GET", b"key:%d" % i), b"$100\r\n" + bytes(100) + b"\r\n")]
    return [(resp_cmd(b"SET", b"key:%d" % i, bytes(100)), b"+OK\r\n")]


def rl(n):
    """MQTT's Remaining Length (a varint of 7 bits a byte)."""
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def mqtt_str(b):
    return struct.pack(">H", len(b)) + b


def mqtt_pair(i):
    pid = i % 65535 + 1
    out = []
    if i < CONNS:
        body = mqtt_str(b"MQTT") + bytes([4, 0x02]) + struct.pack(">H", 60) + mqtt_str(b"bench-%d" % i)
        out.append((b"\x10" + rl(len(body)) + body, b"\x20\x02\x00\x00"))
    if i % 3 == 0:
        body = mqtt_str(b"sensors/%d/temp" % (i % 50)) + struct.pack(">H", pid) + bytes(100)
        out.append((b"\x32" + rl(len(body)) + body, b"\x40\x02" + struct.pack(">H", pid)))
    elif i % 3 == 1:
        body = struct.pack(">H", pid) + mqtt_str(b"alerts/%d/#" % (i % 50)) + b"\x01"
        out.append((b"\x82" + rl(len(body)) + body, b"\x90\x03" + struct.pack(">H", pid) + b"\x01"))
    else:
        out.append((b"\xc0\x00", b"\xd0\x00"))
    return out


def amqp_method(channel, cls, meth, args):
    payload = struct.pack(">HH", cls, meth) + args
    return struct.pack(">BHI", 1, channel, len(payload)) + payload + b"\xce"


def shortstr(b):
    return bytes([len(b)]) + b


def amqp_pair(i):
    out = []
    q = b"queue-%d" % (i % 50)
    if i % 2 == 0:
        req = amqp_method(1, 50, 10, struct.pack(">H", 0) + shortstr(q) + b"\x02" + struct.pack(">I", 0))
        resp = amqp_method(1, 50, 11, shortstr(q) + struct.pack(">II", i, 0))
    else:
        req = amqp_method(1, 60, 70, struct.pack(">H", 0) + shortstr(q) + b"\x01")
        body = bytes(100)
        resp = amqp_method(1, 60, 71, struct.pack(">Q", i) + b"\x00" + shortstr(b"") + shortstr(q) + struct.pack(">I", 0))
        header = struct.pack(">HHQH", 60, 0, len(body), 0)
        resp += struct.pack(">BHI", 2, 1, len(header)) + header + b"\xce"
        resp += struct.pack(">BHI", 3, 1, len(body)) + body + b"\xce"
    if i < CONNS:
        req = b"AMQP\x00\x00\x09\x01" + req
    out.append((req, resp))
    return out


PIPELINED = 4


def http_pipelined(i, xff=b""):
    reqs, resps = b"", b""
    for k in range(PIPELINED):
        reqs += b"GET /items/%d HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: gen/1\r\n%s\r\n" % (i * PIPELINED + k, xff)
        resps += (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n"
                  + b"x" * 100)
    return [(reqs, resps)]


def udp_frame(ts_us, src, dst, sport, dport, payload):
    ip_len = 20 + 8 + len(payload)
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0x4000, 64, 17, 0, bytes(src), bytes(dst))
    udp = struct.pack(">HHHH", sport, dport, 8 + len(payload), 0)
    eth = b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + b"\x08\x00"
    pkt = eth + ip + udp + payload
    return struct.pack("<IIII", ts_us // 1_000_000, ts_us % 1_000_000, len(pkt), len(pkt)) + pkt


def dns_main(n, path):
    ts = 1_700_000_000_000_000
    c, srv = [10, 0, 0, 1], [10, 1, 0, 53]
    with open(path, "wb") as f:
        f.write(pcap_header())
        out = []
        for i in range(n):
            qid = i % 65536
            name = b"".join(shortstr(x) for x in (b"host%d" % (i % 100), b"example", b"com")) + b"\0"
            q = name + struct.pack(">HH", 1, 1)
            query = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + q
            answer = struct.pack(">HHHHHH", qid, 0x8180, 1, 1, 0, 0) + q + b"\xc0\x0c" + struct.pack(">HHIH4s", 1, 1, 300, 4, bytes([10, 2, i % 250, 1]))
            sport = 40000 + i % CONNS
            out.append(udp_frame(ts, c, srv, sport, 53, query))
            out.append(udp_frame(ts + 50, srv, c, 53, sport, answer))
            ts += 100
            if len(out) > 10000:
                f.write(b"".join(out))
                out = []
        f.write(b"".join(out))


def main():
    kind, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if kind == "dns":
        return dns_main(n, path)
    pair, port = {"mongodb": (mongodb_pair, 27017), "memcached_bin": (memcached_pair, 11211),
                  "pgsql": (pgsql_pair, 5432), "redis": (redis_pair, 6379),
                  "mqtt": (mqtt_pair, 1883), "amqp": (amqp_pair, 5672),
                  "http1pipe": (http_pipelined, 80), "http1pipe6": (http_pipelined, 80),
                  "http1xff": (lambda i: http_pipelined(i, b"X-Forwarded-For: 203.0.113.7, 10.0.0.1\r\n"), 80)}[kind]
    if kind.startswith("http1"):
        n //= PIPELINED
    conns = [Conn(i, port, kind.endswith("6")) for i in range(CONNS)]
    ts = 1_700_000_000_000_000
    with open(path, "wb") as f:
        f.write(pcap_header())
        out = []
        for c in conns:
            c.open(ts, out)
            ts += 10
        for i in range(n):
            c = conns[i % CONNS]
            for req, resp in pair(i):
                c.send(ts, req, True, out)
                c.send(ts + 50, resp, False, out)
            ts += 100
            if len(out) > 10000:
                f.write(b"".join(out))
                out = []
        for c in conns:
            c.close(ts, out)
            ts += 10
        f.write(b"".join(out))


if __name__ == "__main__":
    main()
