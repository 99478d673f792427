"""Shared by the test-only servers (tests/starttls_server.py,
tests/connect_proxy.py, tests/zeek_rules/ftp.py, tests/services_server.py): a listening socket on
the loopback, a thread per connection, and a line protocol's command
dialogue. Written for the tests; nothing here is a real server.
"""
import socket
import threading

HOST = "127.0.0.1"


def listen(port, backlog=8):
    """A TCP socket listening on HOST:port (the address reusable at once)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((HOST, port))
    s.listen(backlog)
    return s


def accept_forever(s, serve, *args):
    """Each connection accepted on `s` to serve(*args, conn) in a thread of
    its own (a daemon: the process ends when the test stops it)."""
    while True:
        conn, _ = s.accept()
        threading.Thread(target=serve, args=(*args, conn), daemon=True).start()


def ready():
    """The line the tests wait for once every port listens."""
    print("listening", flush=True)


def dialogue(next_line, send, replies, otherwise, last):
    """Answers a client's command lines until one in `last` (answered too):
    a line's reply is replies[the whole line] or replies[its first word]
    (both upper case), else `otherwise`. next_line() gives a line as text
    without its end, or None at the end of the stream. True once a command
    in `last` was answered, False if the client went first."""
    while True:
        line = next_line()
        if line is None:
            return False
        words = line.split(" ")
        key = line.upper() if line.upper() in replies else words[0].upper()
        send(replies.get(key, otherwise))
        if key in last:
            return True
