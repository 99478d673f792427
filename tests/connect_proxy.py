#!/usr/bin/env python3
"""Test-only HTTP CONNECT proxy for tests/starttls_live.rs.

Usage: connect_proxy.py PORT. Reads a request head; a CONNECT host:port is
answered `200 Connection established` (RFC 9110 9.3.6) after connecting to
127.0.0.1:port (the test's names all live on the loopback), then bytes are
relayed both ways until either side closes; any other method gets 405.
Prints "listening" once it listens.
"""
import socket
import sys
import threading

from serverlib import accept_forever, listen, ready


def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    finally:
        try:
            b.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def serve(conn):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = conn.recv(4096)
        if not d:
            conn.close()
            return
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    method, target, _ = head.split(b"\r\n")[0].split(b" ", 2)
    if method != b"CONNECT":
        conn.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        conn.close()
        return
    port = int(target.rsplit(b":", 1)[1])
    up = socket.create_connection(("127.0.0.1", port), 10)
    conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    if rest:
        up.sendall(rest)
    t = threading.Thread(target=pipe, args=(up, conn), daemon=True)
    t.start()
    pipe(conn, up)
    t.join(10)
    conn.close()
    up.close()


s = listen(int(sys.argv[1]), 16)
ready()
accept_forever(s, serve)
