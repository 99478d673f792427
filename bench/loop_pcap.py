#!/usr/bin/env python3
"""bench/loop_pcap.py - a classic pcap replayed N times as one file, as a live replay sees it.

`tcpreplay --loop N --topspeed` (bench/goprobe.py's gptest) sends the same packets N times, the same
5-tuples each time, at the rate the link takes, and the capture stamps them on arrival. This writes
that: loop k's packet i gets the time START + (k * packets + i) / RATE (one rate for every packet, in
file order; the file's own times, out of order in goProbe's test capture, are dropped), so that the
replays follow one another in time and a connection of one replay may still be open at the next.

usage: bench/loop_pcap.py IN.pcap OUT.pcap LOOPS [RATE packets/s, default 350000]
(350 k packets/s: what tcpreplay reached on an idle machine, BENCHMARKS.md "Against goProbe".)
Classic little-endian microsecond pcap only (goProbe's test capture is one).
"""

import struct
import sys

START = 1_700_000_000


def main() -> None:
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__.strip().splitlines()[-3])
    src, dst, loops = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rate = int(sys.argv[4]) if len(sys.argv) == 5 else 350_000
    data = open(src, "rb").read()
    if len(data) < 24 or struct.unpack("<I", data[:4])[0] != 0xA1B2C3D4:
        sys.exit(f"loop_pcap.py: {src}: not a little-endian microsecond pcap")
    records, at = [], 24
    while at + 16 <= len(data):
        caplen = struct.unpack("<I", data[at + 8:at + 12])[0]
        if at + 16 + caplen > len(data):
            sys.exit(f"loop_pcap.py: {src}: record at byte {at} cut short")
        records.append((data[at + 8:at + 16], data[at + 16:at + 16 + caplen]))
        at += 16 + caplen
    out = [data[:24]]
    for k in range(loops):
        for i, (lens, frame) in enumerate(records):
            us = (k * len(records) + i) * 1_000_000 // rate
            out.append(struct.pack("<II", START + us // 1_000_000, us % 1_000_000) + lens)
            out.append(frame)
    open(dst, "wb").write(b"".join(out))
    print(f"{dst}: {len(records):,} packets x{loops}")


if __name__ == "__main__":
    main()
