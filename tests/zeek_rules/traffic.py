#!/usr/bin/env python3
"""Test driver for tests/zeek_rules.rs: traffic for Zeek's reuse and
orientation rules, run inside a network namespace (lo up; veth v0 with
10.77.0.1/24, its peer v1 captured) while tcpdump records it.

Phase `lo`:
  - a client retrying a refused connect() three times from source port
    40001 (the kernel picks a new initial sequence number each time);
  - three SYNs with the same sequence number from port 40002 (a raw
    socket: a scanner, or a stack that reuses its ISN), each refused;
  - UDP between two well-known ports (53 and 123), in both orders;
  - UDP whose first datagram comes from a likely server port (123) to an
    ephemeral port, and from ports no default Zeek script registers
    (500, 69) to an ephemeral port.
Phase `bcast`: a DHCP-style datagram 67 -> 68 to 255.255.255.255 (v0).
"""
import socket
import struct
import sys
import time


def refused_connects():
    for _ in range(3):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 40001))
        try:
            s.connect(("127.0.0.1", 9))
            sys.exit("port 9 accepted a connection")
        except ConnectionRefusedError:
            pass
        s.close()
        time.sleep(0.02)


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def raw_syns():
    src, dst = "127.0.0.1", "127.0.0.1"
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
    for _ in range(3):
        # RFC 793 header: ports, seq, ack, data offset 5 words, SYN, window.
        hdr = struct.pack("!HHIIBBHHH", 40002, 9, 0x01020304, 0, 5 << 4, 0x02, 65535, 0, 0)
        pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, socket.IPPROTO_TCP, len(hdr))
        c = checksum(pseudo + hdr)
        hdr = hdr[:16] + struct.pack("!H", c) + hdr[18:]
        s.sendto(hdr, (dst, 0))
        time.sleep(0.02)
    s.close()


def udp_pair(a, b, first_from_a=True):
    sa = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sb = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sa.bind(a)
    sb.bind(b)
    (x, y, ya) = (sa, sb, b) if first_from_a else (sb, sa, a)
    xa = a if first_from_a else b
    x.sendto(b"first", ya)
    y.recvfrom(100)
    y.sendto(b"reply", xa)
    x.recvfrom(100)
    sa.close()
    sb.close()
    time.sleep(0.02)


def lo():
    refused_connects()
    raw_syns()
    udp_pair(("127.0.0.1", 53), ("127.0.0.2", 123))
    udp_pair(("127.0.0.3", 53), ("127.0.0.4", 123), first_from_a=False)
    udp_pair(("127.0.0.5", 123), ("127.0.0.6", 40010))
    udp_pair(("127.0.0.7", 500), ("127.0.0.8", 40011))
    udp_pair(("127.0.0.9", 69), ("127.0.0.10", 40012))


def bcast():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    s.bind(("10.77.0.1", 67))
    s.sendto(b"\x02" + b"\0" * 299, ("255.255.255.255", 68))
    s.close()


{"lo": lo, "bcast": bcast}[sys.argv[1]]()
