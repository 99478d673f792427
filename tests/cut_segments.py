#!/usr/bin/env python3
"""Cuts TCP segments out of a capture, as a lossy capture path would, and
says what it removed: the test driver of tests/loss.rs.

    cut_segments.py IN.pcap OUT.pcap --port 80 --every 3

Reads a classic pcap (Ethernet, IPv4, microseconds, either byte order).
In every TCP connection, the payload-carrying segments sent *from* --port
are numbered per connection; those whose number is 2 mod --every (never the
first or the last one, so that the data around each hole is there and
the hole is known to be one) are left out. Prints one JSON object:
{"packets": written, "removed_segments": n, "removed_bytes": payload bytes}.
"""

import json
import struct
import sys


def main():
    args = sys.argv[1:]
    src, dst = args[0], args[1]
    port = int(args[args.index("--port") + 1])
    every = int(args[args.index("--every") + 1])
    data = open(src, "rb").read()
    magic = data[:4]
    if magic == b"\xd4\xc3\xb2\xa1":
        e = "<"
    elif magic == b"\xa1\xb2\xc3\xd4":
        e = ">"
    else:
        sys.exit(f"{src}: not a microsecond pcap")
    if struct.unpack(e + "I", data[20:24])[0] != 1:
        sys.exit(f"{src}: not Ethernet")
    packets = []  # (record bytes, connection, payload length or None)
    off = 24
    while off + 16 <= len(data):
        incl = struct.unpack(e + "I", data[off + 8:off + 12])[0]
        rec = data[off:off + 16 + incl]
        frame = rec[16:]
        off += 16 + incl
        info = None
        if len(frame) >= 34 and frame[12:14] == b"\x08\x00" and frame[23] == 6:
            ihl = (frame[14] & 15) * 4
            ip_total = struct.unpack(">H", frame[16:18])[0]
            tcp = frame[14 + ihl:]
            sport, dport = struct.unpack(">HH", tcp[:4])
            doff = (tcp[12] >> 4) * 4
            plen = ip_total - ihl - doff
            if sport == port and plen > 0:
                conn = (frame[26:30], sport, frame[30:34], dport)
                info = (conn, plen)
        packets.append((rec, info))
    # Each connection's server segments, numbered.
    numbered = {}
    for i, (_, info) in enumerate(packets):
        if info:
            numbered.setdefault(info[0], []).append(i)
    cut = set()
    for idx in numbered.values():
        for n, i in enumerate(idx[1:-1], start=1):
            if n % every == 2 % every:
                cut.add(i)
    out = bytearray(data[:24])
    removed_bytes = 0
    for i, (rec, info) in enumerate(packets):
        if i in cut:
            removed_bytes += info[1]
            continue
        out += rec
    open(dst, "wb").write(out)
    print(json.dumps({"packets": len(packets) - len(cut), "removed_segments": len(cut), "removed_bytes": removed_bytes}))


if __name__ == "__main__":
    main()
