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
    (500, 69) to an ephemeral port;
  - ICMP whose first message is an echo reply (127.0.0.11 -> .12), and a
    one-way message, destination unreachable code 1 (127.0.0.13 -> .14).
Phase `bcast`: a datagram 67 -> 68 to 255.255.255.255 from 10.77.0.2
(v0), not DHCP.
Phase `dhcp` (in the client namespace, which holds v1): a DHCPDISCOVER
(RFC 2131) broadcast out of v1 from port 68; the dnsmasq the test runs on v0
answers with an offer, awaited here.
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


def icmp(src, dst, typ, code, body):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.bind((src, 0))
    # RFC 792: type, code, checksum, then the rest of the message.
    m = struct.pack("!BBH", typ, code, 0) + body
    m = m[:2] + struct.pack("!H", checksum(m)) + m[4:]
    s.sendto(m, (dst, 0))
    s.close()
    time.sleep(0.02)


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
    # Echo reply (type 0): identifier 7, sequence 1, 8 bytes of data.
    icmp("127.0.0.11", "127.0.0.12", 0, 0, struct.pack("!HH", 7, 1) + b"pingdata")
    # Destination unreachable (type 3), host unreachable (code 1): unused
    # word, then an IP header and 8 bytes of the datagram it is about.
    inner = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28, 1, 0, 64, 17, 0,
                        socket.inet_aton("127.0.0.14"), socket.inet_aton("127.0.0.99")) + struct.pack("!HHHH", 40013, 9, 8, 0)
    icmp("127.0.0.13", "127.0.0.14", 3, 1, b"\0\0\0\0" + inner)


def bcast():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    s.bind(("10.77.0.2", 67))
    s.sendto(b"\x02" + b"\0" * 299, ("255.255.255.255", 68))
    s.close()


def dhcp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"v1")
    s.bind(("0.0.0.0", 68))
    with open("/sys/class/net/v1/address") as f:
        mac = bytes(int(x, 16) for x in f.read().strip().split(":"))
    # op, htype, hlen, hops, xid, secs, flags (broadcast: the client has no
    # address yet, so the offer comes to 255.255.255.255), ciaddr..giaddr,
    # chaddr, sname, file.
    m = struct.pack("!BBBBIHH16s16s64s128s", 1, 1, 6, 0, 0x5A5A0001, 0, 0x8000, b"", mac, b"", b"")
    # The magic cookie, message type DISCOVER, parameter request list, end.
    m += bytes([99, 130, 83, 99, 53, 1, 1, 55, 3, 1, 3, 6, 255])
    s.settimeout(1.0)
    for _ in range(10):
        s.sendto(m, ("255.255.255.255", 67))
        try:
            while True:
                data, _ = s.recvfrom(2048)
                if data[0] == 2 and data[4:8] == m[4:8]:
                    return
        except socket.timeout:
            continue
    sys.exit("no DHCP offer from dnsmasq")


{"lo": lo, "bcast": bcast, "dhcp": dhcp}[sys.argv[1]]()
