#!/usr/bin/env python3
"""Test driver and test-only server for tests/zeek_rules.rs (FTP service).

`server`: a minimal FTP control server on port 21 (RFC 959 replies: 220
greeting, 331 to USER, 230 to PASS, 221 to QUIT, 502 to anything else),
one connection at a time, until killed.
`clients`: Python's ftplib logs in and quits from port 40020; then a client
on port 40021 reads the greeting and sends bytes that are no FTP command.
"""
import ftplib
import socket
import sys


def server():
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 21))
    ls.listen(4)
    print("listening", flush=True)
    while True:
        c, _ = ls.accept()
        f = c.makefile("rb")
        c.sendall(b"220 test server ready\r\n")
        for line in f:
            cmd = line.split(b" ", 1)[0].strip().upper()
            if cmd == b"USER":
                c.sendall(b"331 Password required\r\n")
            elif cmd == b"PASS":
                c.sendall(b"230 Logged in\r\n")
            elif cmd == b"QUIT":
                c.sendall(b"221 Bye\r\n")
                break
            else:
                c.sendall(b"502 Not implemented\r\n")
        f.close()
        c.close()


def clients():
    ftp = ftplib.FTP(timeout=10, source_address=("127.0.0.1", 40020))
    ftp.connect("127.0.0.1", 21)
    ftp.login("anonymous", "test@")
    ftp.quit()
    s = socket.create_connection(("127.0.0.1", 21), timeout=10, source_address=("127.0.0.1", 40021))
    s.recv(100)
    s.sendall(b"\x16\x03\x01\x00\x05hello")
    s.close()


{"server": server, "clients": clients}[sys.argv[1]]()
