#!/usr/bin/env python3
"""bench/floods.py - captures of a flood of first payloads from many sources (issues 35/36: a parser's
state charged to the stream memory; BENCHMARKS.md "A flood of first payloads").

Kinds (one flow per request, each from its own source address and port):
  http-heads  TCP to PORT (default 80): SYN, SYN-ACK, ACK, then one HTTP request head not ended
              ("GET /index.html HTTP/1.1" and a Host line, no blank line): 4 packets a connection,
              8 us apart between connections; the shape of tests/memory_budget.rs's
              `a_flood_of_first_payloads_stays_within_the_memory_budget`.
  dns         UDP to PORT (default 53): one standard query (id 0x1234, RD, example.com A IN), 2 us apart;
              the shape of `common::udp_flows_pcap` in tests/memory_budget.rs.
  memcached   UDP to PORT (default 11211): the 8-byte frame header (request id 1, datagram 0 of 1)
              then `get user:1042`, 2 us apart.
Flow i comes from source address 10.X.Y.Z number i % SOURCES (counting from 10.10.0.0 for TCP,
10.0.0.0 for UDP) and source port 40000 + i // SOURCES, so COUNT flows are distinct whatever SOURCES.
Classic pcap (microseconds, Ethernet), checksums right, times from 2023-11-14 22:13:20 UTC.

usage: bench/floods.py KIND OUT.pcap [--count 300000] [--sources COUNT] [--port PORT]
Bounded: COUNT at most 5,000,000 (an http-heads flood of 300,000 is 96 MB); COUNT / SOURCES below 25,536.
"""

import argparse
import struct
import sys

MAX_COUNT = 5_000_000
START_US = 1_700_000_000 * 1_000_000
DEFAULT_PORTS = {"http-heads": 80, "dns": 53, "memcached": 11211}
HTTP_HEAD = b"GET /index.html HTTP/1.1\r\nHost: example\r\n"
DNS_QUERY = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01"
MEMCACHED_GET = b"\x00\x01\x00\x00\x00\x01\x00\x00get user:1042\r\n"
ETHERNET = b"\x02\x00\x00\x00\x00\x01\x02\x00\x00\x00\x00\x02\x08\x00"


def checksum(data, start=0):
    """The Internet checksum (RFC 1071) of data, with start (a partial sum) added."""
    if len(data) % 2:
        data += b"\x00"
    total = start + sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ipv4(src, dst, proto, transport):
    """An IPv4 header (no options, DF) around transport, whose checksum field is filled in here."""
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(transport), 0, 0x4000, 64, proto, 0, src, dst)
    header = header[:10] + struct.pack("!H", checksum(header)) + header[12:]
    pseudo = checksum(src + dst + struct.pack("!BBH", 0, proto, len(transport)))
    at = 16 if proto == 6 else 6
    # The pseudo-header's sum, not yet complemented, starts the transport's.
    start = ~pseudo & 0xFFFF
    # A UDP checksum of 0 means none: all ones instead (RFC 768).
    sum16 = checksum(transport, start) or (0xFFFF if proto == 17 else 0)
    transport = transport[:at] + struct.pack("!H", sum16) + transport[at + 2:]
    return header + transport


def tcp(sport, dport, seq, ack, flags, payload):
    return struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 65535, 0, 0) + payload


def udp(sport, dport, payload):
    return struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


def source(i, sources, first):
    """The address and port of flow i."""
    n = first + i % sources
    return struct.pack("!I", n), 40000 + i // sources


def frames(kind, count, sources, port):
    """Yields (time in microseconds, Ethernet frame) in capture order."""
    if kind == "http-heads":
        server = bytes([10, 9, 0, 1])
        for i in range(count):
            client, cport = source(i, sources, (10 << 24) | (10 << 16))
            t = START_US + 8 * i
            yield t, ipv4(client, server, 6, tcp(cport, port, 1000, 0, 0x02, b""))
            yield t + 1, ipv4(server, client, 6, tcp(port, cport, 5000, 1001, 0x12, b""))
            yield t + 2, ipv4(client, server, 6, tcp(cport, port, 1001, 5001, 0x10, b""))
            yield t + 3, ipv4(client, server, 6, tcp(cport, port, 1001, 5001, 0x18, HTTP_HEAD))
    else:
        server = bytes([10, 200, 0, 1])
        payload = DNS_QUERY if kind == "dns" else MEMCACHED_GET
        for i in range(count):
            client, cport = source(i, sources, 10 << 24)
            yield START_US + 2 * i, ipv4(client, server, 17, udp(cport, port, payload))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=sorted(DEFAULT_PORTS))
    ap.add_argument("out", help="the pcap to write")
    ap.add_argument("--count", type=int, default=300_000, help="flows (one first payload each)")
    ap.add_argument("--sources", type=int, help="distinct source addresses (default: --count)")
    ap.add_argument("--port", type=int, help="the server port (default: the kind's)")
    args = ap.parse_args()
    sources = args.count if args.sources is None else args.sources
    port = DEFAULT_PORTS[args.kind] if args.port is None else args.port
    if not 0 < args.count <= MAX_COUNT:
        sys.exit("floods.py: --count %d: must be 1..%d" % (args.count, MAX_COUNT))
    if not 0 < sources <= min(args.count, 1 << 24) or (args.count - 1) // sources >= 65536 - 40000:
        sys.exit("floods.py: --sources %d: must be 1..min(--count, 2^24), with --count / --sources < 25,536" % sources)
    if not 0 < port < 65536:
        sys.exit("floods.py: --port %d: must be 1..65535" % port)
    with open(args.out, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        n = 0
        for t, ip in frames(args.kind, args.count, sources, port):
            frame = ETHERNET + ip
            out.write(struct.pack("<IIII", t // 1_000_000, t % 1_000_000, len(frame), len(frame)))
            out.write(frame)
            n += 1
    print("%s: %d packets, %d %s flows from %d sources to port %d"
          % (args.out, n, args.count, args.kind, sources, port))


if __name__ == "__main__":
    main()
