#!/usr/bin/env python3
"""Test driver and test-only server for tests/zeek_rules.rs (FTP service).

`server`: a minimal FTP control server on port 21 (RFC 959 replies: 220
greeting, 331 to USER, 230 to PASS, 221 to QUIT, 502 to anything else),
one connection at a time, until killed.
`clients`: Python's ftplib logs in and quits from port 40020; then a client
on port 40021 reads the greeting and sends bytes that are no FTP command.
"""
import ftplib
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from serverlib import dialogue, listen, ready  # noqa: E402 (tests/serverlib.py)

REPLIES = {"USER": b"331 Password required\r\n", "PASS": b"230 Logged in\r\n", "QUIT": b"221 Bye\r\n"}


def server():
    ls = listen(21, 4)
    ready()
    while True:
        c, _ = ls.accept()
        f = c.makefile("rb")
        c.sendall(b"220 test server ready\r\n")

        def next_line():
            line = f.readline()
            return line.decode(errors="replace").strip() if line else None

        dialogue(next_line, c.sendall, REPLIES, b"502 Not implemented\r\n", {"QUIT"})
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
