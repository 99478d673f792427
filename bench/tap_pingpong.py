#!/usr/bin/env python3
"""bench/tap_pingpong.py - the kernel's CPU per packet on the sending side of loopback.

A client and a server (forked) exchange N request/response pairs (REQ and RESP bytes, TCP_NODELAY)
over CONNS connections on 127.0.0.1:PORT, one at a time per connection. Prints the system CPU time
of both processes (they are the senders, and on loopback the receiving side's softirq runs in the
sender's context too, so a packet tap's filter and copy are charged here), the packets lo carried
(from /sys/class/net/lo/statistics) and ns of system CPU per packet. Run it inside a network
namespace, with and without a capture, alternated; the capturer's own CPU is not counted.

usage: bench/tap_pingpong.py [N=50000] [PORT=5555] [REQ=100] [RESP=300] [CONNS=2]
"""
import os
import socket
import sys
import time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 50000
PORT = int(sys.argv[2]) if len(sys.argv) > 2 else 5555
REQ = int(sys.argv[3]) if len(sys.argv) > 3 else 100
RESP = int(sys.argv[4]) if len(sys.argv) > 4 else 300
CONNS = int(sys.argv[5]) if len(sys.argv) > 5 else 2


def lo_packets():
    with open("/sys/class/net/lo/statistics/tx_packets") as f:
        return int(f.read())


def recv_exact(s, n):
    got = 0
    while got < n:
        b = s.recv(n - got)
        if not b:
            raise SystemExit("peer closed")
        got += len(b)


def server(ls):
    conns = [ls.accept()[0] for _ in range(CONNS)]
    resp = b"r" * RESP
    for c in conns:
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(N // CONNS):
        for c in conns:
            recv_exact(c, REQ)
            c.sendall(resp)
    for c in conns:
        c.close()


def main():
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", PORT))
    ls.listen(CONNS)
    pid = os.fork()
    if pid == 0:
        server(ls)
        os._exit(0)
    ls.close()
    cs = []
    for _ in range(CONNS):
        c = socket.create_connection(("127.0.0.1", PORT))
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        cs.append(c)
    req = b"q" * REQ
    p0, t0, w0 = lo_packets(), os.times(), time.monotonic()
    for _ in range(N // CONNS):
        for c in cs:
            c.sendall(req)
        for c in cs:
            recv_exact(c, RESP)
    for c in cs:
        c.close()
    os.waitpid(pid, 0)
    t1, w1, p1 = os.times(), time.monotonic(), lo_packets()
    sys_s = (t1.system - t0.system) + (t1.children_system - t0.children_system)
    usr_s = (t1.user - t0.user) + (t1.children_user - t0.children_user)
    pk = p1 - p0
    print(f"packets={pk} sys_s={sys_s:.3f} user_s={usr_s:.3f} wall_s={w1 - w0:.3f} sys_ns_per_packet={1e9 * sys_s / pk:.0f}")


if __name__ == "__main__":
    main()
