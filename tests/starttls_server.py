#!/usr/bin/env python3
"""Test-only STARTTLS servers for tests/starttls_live.rs.

Usage: starttls_server.py CERT KEY PROTO=PORT...   (PROTO: smtp imap pop3
xmpp ldap ftp irc). Each protocol listens on its port; a connection gets
the protocol's cleartext greeting, its answers to the commands a client
sends before STARTTLS, the positive reply to the upgrade, then a TLS
handshake (Python's ssl module), one line read and one written in TLS, and
the end. Written for the test from the RFCs (SMTP RFC 3207, IMAP RFC 3501,
POP3 RFC 2595, XMPP RFC 6120, LDAP RFC 4511, FTP RFC 4217, IRCv3 tls);
"listening" is printed once every port listens.
"""
import ssl
import sys
import threading

from serverlib import accept_forever, dialogue, listen, ready

CERT, KEY = sys.argv[1], sys.argv[2]
CTX = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
CTX.load_cert_chain(CERT, KEY)


def read_until(conn, buf, end):
    """Bytes up to and including `end` (buffered remainder kept in buf)."""
    while end not in buf[0]:
        d = conn.recv(4096)
        if not d:
            raise EOFError
        buf[0] += d
    i = buf[0].index(end) + len(end)
    out, buf[0] = buf[0][:i], buf[0][i:]
    return out


def lines(proto, conn):
    """The cleartext dialogue; returns once the upgrade was agreed."""
    buf = [b""]
    line = lambda: read_until(conn, buf, b"\n").decode(errors="replace").strip()
    if proto == "smtp":
        conn.sendall(b"220 starttls.test ESMTP test\r\n")
        ehlo = b"250-starttls.test\r\n250-PIPELINING\r\n250 STARTTLS\r\n"
        replies = {"EHLO": ehlo, "HELO": ehlo, "STARTTLS": b"220 2.0.0 Ready to start TLS\r\n"}
        dialogue(line, conn.sendall, replies, b"502 5.5.2 not here\r\n", {"STARTTLS"})
        return
    if proto == "imap":
        conn.sendall(b"* OK [CAPABILITY IMAP4rev1 STARTTLS LOGINDISABLED] ready\r\n")
        while True:
            tag, _, cmd = line().partition(" ")
            cmd = cmd.split(" ")[0].upper()
            if cmd == "CAPABILITY":
                conn.sendall(b"* CAPABILITY IMAP4rev1 STARTTLS LOGINDISABLED\r\n" + tag.encode() + b" OK done\r\n")
            elif cmd == "STARTTLS":
                conn.sendall(tag.encode() + b" OK Begin TLS negotiation now\r\n")
                return
            else:
                conn.sendall(tag.encode() + b" BAD not here\r\n")
    if proto == "pop3":
        conn.sendall(b"+OK POP3 ready\r\n")
        replies = {"CAPA": b"+OK capabilities\r\nSTLS\r\nUSER\r\n.\r\n", "STLS": b"+OK Begin TLS negotiation\r\n"}
        dialogue(line, conn.sendall, replies, b"-ERR not here\r\n", {"STLS"})
        return
    if proto == "ftp":
        conn.sendall(b"220 FTP ready\r\n")
        replies = {
            "FEAT": b"211-Features:\r\n AUTH TLS\r\n PBSZ\r\n PROT\r\n211 End\r\n",
            "AUTH TLS": b"234 AUTH TLS successful\r\n",
        }
        dialogue(line, conn.sendall, replies, b"500 not here\r\n", {"AUTH TLS"})
        return
    if proto == "irc":
        while True:
            l = line()
            if l.upper() == "STARTTLS":
                conn.sendall(b":irc.starttls.test 670 * :STARTTLS successful, proceed with TLS handshake\r\n")
                return
            conn.sendall(b":irc.starttls.test 421 * :Unknown command\r\n")
    if proto == "xmpp":
        read_until(conn, buf, b"<stream:stream")
        read_until(conn, buf, b">")
        conn.sendall(
            b"<?xml version='1.0'?><stream:stream xmlns='jabber:client' "
            b"xmlns:stream='http://etherx.jabber.org/streams' id='t1' from='starttls.test' version='1.0'>"
            b"<stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'><required/></starttls>"
            b"</stream:features>"
        )
        read_until(conn, buf, b"<starttls")
        read_until(conn, buf, b">")
        conn.sendall(b"<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>")
        return
    if proto == "ldap":
        # One LDAPMessage (short or long BER length); its messageID echoed.
        while len(buf[0]) < 2:
            buf[0] += conn.recv(4096)
        n = buf[0][1]
        hl = 2
        if n & 0x80:
            k = n & 0x7F
            while len(buf[0]) < 2 + k:
                buf[0] += conn.recv(4096)
            n = int.from_bytes(buf[0][2 : 2 + k], "big")
            hl = 2 + k
        while len(buf[0]) < hl + n:
            buf[0] += conn.recv(4096)
        msg = buf[0][hl : hl + n]
        assert msg[0] == 0x02, "messageID"
        mid = msg[2 : 2 + msg[1]]
        assert b"1.3.6.1.4.1.1466.20037" in msg, "StartTLS extended request"
        body = bytes([0x02, len(mid)]) + mid + bytes([0x78, 0x07, 0x0A, 0x01, 0x00, 0x04, 0x00, 0x04, 0x00])
        conn.sendall(bytes([0x30, len(body)]) + body)
        return
    raise ValueError(proto)


def serve(proto, conn):
    try:
        lines(proto, conn)
        t = CTX.wrap_socket(conn, server_side=True)
        t.sendall(b"hello in TLS\r\n")
        try:
            t.recv(4096)
        except (ssl.SSLError, OSError):
            pass
        try:
            t.unwrap()
        except (ssl.SSLError, OSError):
            pass
    except Exception as e:  # a test server: say it, keep serving
        print(f"{proto}: {e!r}", flush=True)
    finally:
        conn.close()


specs = [a.split("=") for a in sys.argv[3:]]
for proto, port in specs:
    threading.Thread(target=accept_forever, args=(listen(int(port)), serve, proto), daemon=True).start()
ready()
threading.Event().wait()
