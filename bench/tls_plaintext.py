#!/usr/bin/env python3
"""What `capture --tls-plaintext` costs the programs it watches, and itself.

One Python process talks HTTP/1.1 to itself over TLS on a loopback TCP
connection (client and server sockets in the same process, Python's ssl
module on the system's OpenSSL): each round is a request and a response,
four TLS calls (client SSL_write, server SSL_read, server SSL_write, client
SSL_read). The process's CPU time per round is measured without a capture,
then with `wirelog capture -i lo --tls-plaintext` running (which probes
libssl for every process on the host), alternating RUNS times; the
difference per TLS call is what the uprobes, the syscall tracepoint programs
and the ring buffer add to the application. The capture's own CPU (its
`reader CPU` line and the process total) per transaction is printed too.

With BODY (bytes of each response's body, default 2) and RING (the
capture's --tls-plaintext-ring, default its own 8M), the same loop is a
load on the ring: large responses as fast as one process makes them, and
the capture's `ring records lost` says what the ring could not hold (a
body above one TLS record, 16 KiB, takes more calls a round than the four
the per-call figure divides by).

Usage (root): bench/tls_plaintext.py [WIRELOG] [ROUNDS] [RUNS] [BODY] [RING]
"""

import os
import re
import resource
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

WIRELOG = sys.argv[1] if len(sys.argv) > 1 else "target/release/wirelog"
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
RUNS = int(sys.argv[3]) if len(sys.argv) > 3 else 3

BODY = int(sys.argv[4]) if len(sys.argv) > 4 else 2
RING = sys.argv[5] if len(sys.argv) > 5 else None

REQ = b"GET /bench HTTP/1.1\r\nHost: bench\r\n\r\n"
RESP = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % BODY + b"k" * BODY


def pair(tmp):
    """A TLS client and server socket of one loopback TCP connection."""
    key, cert = os.path.join(tmp, "k.pem"), os.path.join(tmp, "c.pem")
    if not os.path.exists(cert):
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-days", "1", "-subj", "/CN=bench", "-keyout", key, "-out", cert],
                       check=True, capture_output=True)
    l = socket.socket()
    l.bind(("127.0.0.1", 0))
    l.listen(1)
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(cert, key)
    cctx = ssl._create_unverified_context()
    out = {}

    def accept():
        s, _ = l.accept()
        out["s"] = sctx.wrap_socket(s, server_side=True)

    t = threading.Thread(target=accept)
    t.start()
    c = cctx.wrap_socket(socket.create_connection(l.getsockname()))
    t.join()
    # The listener stays open: the capture names the server's end by its
    # listening port.
    return c, out["s"], l


def run(tmp):
    c, s, l = pair(tmp)
    t0 = time.process_time()
    for _ in range(ROUNDS):
        c.sendall(REQ)
        s.recv(4096)
        s.sendall(RESP)
        got = 0
        while got < len(RESP):
            got += len(c.recv(65536))
    cpu = time.process_time() - t0
    c.close()
    s.close()
    l.close()
    return cpu / (ROUNDS * 4)


def capture_start(tmp):
    logs = os.path.join(tmp, "logs")
    ring = ["--tls-plaintext-ring", RING] if RING else []
    p = subprocess.Popen([WIRELOG, "capture", "-i", "lo", "--tls-plaintext", "--no-store", "--logs", logs,
                          "--stats-interval", "0", "--user", "root"] + ring,
                         stderr=subprocess.PIPE, text=True)
    line = p.stderr.readline()
    assert "capturing on" in line, line
    return p


def capture_stop(p):
    p.send_signal(signal.SIGINT)
    err = p.stderr.read()
    p.wait()
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return err, ru.ru_utime + ru.ru_stime


def main():
    tmp = tempfile.mkdtemp(prefix="wl-tlsbench-")
    base, probed = [], []
    cap_cpu_before = 0.0
    for i in range(RUNS):
        base.append(run(tmp))
        p = capture_start(tmp)
        time.sleep(0.5)
        probed.append(run(tmp))
        time.sleep(1.0)
        err, children = capture_stop(p)
        cap_cpu = children - cap_cpu_before
        cap_cpu_before = children
        stats = next((l for l in err.splitlines() if "wirelog: tls-plaintext:" in l and "events" in l), "")
        txs = int(re.search(r"(\d+) transactions", stats).group(1)) if stats else 0
        reader = float(re.search(r"reader CPU ([\d.]+) s", stats).group(1)) if stats else 0.0
        lost = re.search(r"(\d+) ring records lost", stats)
        print(f"run {i + 1}: {base[-1] * 1e6:.2f} us/call without, {probed[-1] * 1e6:.2f} us/call with; "
              f"capture: {txs} transactions, reader CPU {reader:.3f} s ({reader / max(txs, 1) * 1e6:.1f} us/tx), "
              f"process CPU {cap_cpu:.3f} s; ring records lost {lost.group(1) if lost else '?'}")
    b, w = min(base), min(probed)
    print(f"best of {RUNS}: {b * 1e6:.2f} us per TLS call without, {w * 1e6:.2f} us with: "
          f"+{(w - b) * 1e6:.2f} us per call ({(w / b - 1) * 100:.0f}% of this loop's CPU per call)")


if __name__ == "__main__":
    main()
