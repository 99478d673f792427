#!/usr/bin/env python3
"""Makes a capture taken on loopback (TCP segments of up to 64 KiB) fit a
link of --mtu bytes, as the sender's TCP would have cut it there, and
leaves out its empty TCP segments (no payload, none of SYN/FIN/RST): the
test driver of tests/capture_live.rs `cpu_budget_step3_counts_connections_step_1b_stopped`.

    fit_segments.py IN.pcap --mtu 9000 --parts 80000 40000 OUT1.pcap OUT2.pcap

Reads a classic pcap (Ethernet, IPv4, microseconds, little-endian). A TCP
segment longer than the MTU becomes consecutive segments of at most the MTU
(same timestamp, sequence numbers following, PSH on the last one only, IP
and TCP checksums computed). tcpreplay cannot send a frame above the MTU,
so without this each one is a hole in the stream the replay makes. Writes
the first --parts N1 packets to OUT1 and the next N2 to OUT2; prints the
packets written to each.
"""

import struct
import sys


def checksum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def main():
    args = sys.argv[1:]
    src = args[0]
    mtu = int(args[args.index("--mtu") + 1])
    i = args.index("--parts")
    counts = [int(args[i + 1]), int(args[i + 2])]
    outs = [args[i + 3], args[i + 4]]
    data = open(src, "rb").read()
    if data[:4] != b"\xd4\xc3\xb2\xa1":
        sys.exit(f"{src}: not a little-endian microsecond pcap")
    frames = []
    at = 24
    want = counts[0] + counts[1]
    while at + 16 <= len(data) and len(frames) < want:
        ts1, ts2, caplen, _ = struct.unpack("<IIII", data[at:at + 16])
        f = data[at + 16:at + 16 + caplen]
        at += 16 + caplen
        if len(f) < 34 or f[12:14] != b"\x08\x00" or f[23] != 6:
            frames.append((ts1, ts2, f))
            continue
        ip = f[14:]
        ihl = (ip[0] & 15) * 4
        total = struct.unpack("!H", ip[2:4])[0]
        tcp = ip[ihl:total]
        doff = (tcp[12] >> 4) * 4
        payload = tcp[doff:]
        if not payload and tcp[13] & 7 == 0:
            continue
        if total <= mtu:
            frames.append((ts1, ts2, f))
            continue
        seq = struct.unpack("!I", tcp[4:8])[0]
        mss = mtu - ihl - doff
        for o in range(0, len(payload), mss):
            chunk = payload[o:o + mss]
            h = bytearray(tcp[:doff])
            h[4:8] = struct.pack("!I", (seq + o) & 0xFFFFFFFF)
            if o + mss < len(payload):
                h[13] &= ~0x08
            h[16:18] = b"\0\0"
            iph = bytearray(ip[:ihl])
            iph[2:4] = struct.pack("!H", ihl + doff + len(chunk))
            iph[10:12] = b"\0\0"
            iph[10:12] = struct.pack("!H", checksum(bytes(iph)))
            pseudo = ip[12:20] + struct.pack("!BBH", 0, 6, doff + len(chunk))
            h[16:18] = struct.pack("!H", checksum(pseudo + bytes(h) + chunk))
            frames.append((ts1, ts2, f[:14] + bytes(iph) + bytes(h) + chunk))
    if len(frames) < want:
        sys.exit(f"{src}: {len(frames)} packets, {want} wanted")
    frames = frames[:want]
    written = []
    for out, part in zip(outs, [frames[:counts[0]], frames[counts[0]:]]):
        with open(out, "wb") as w:
            w.write(data[:24])
            for ts1, ts2, f in part:
                w.write(struct.pack("<IIII", ts1, ts2, len(f), len(f)) + f)
        written.append(len(part))
    print(" ".join(map(str, written)))


if __name__ == "__main__":
    main()
