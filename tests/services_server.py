#!/usr/bin/env python3
"""Test-only servers and clients for tests/services_live.rs: each exchange
a protocol's opening as its specification lays it out, on loopback, so a
capture of them shows what Zeek would name (run inside a namespace).

  ssh PORT    version lines (RFC 4253 4.2), then KEXINIT, the ECDH init and
              reply and NEWKEYS as binary packets (RFC 4253 6, 7; bodies
              are filler: no key is agreed, the framing is real)
  smtp PORT   a 220 greeting, smtplib's EHLO and QUIT (RFC 5321)
  pop3 PORT   a +OK greeting, poplib's CAPA and QUIT (RFC 1939, RFC 2449)
  imap PORT   an untagged OK greeting, imaplib's CAPABILITY and LOGOUT (RFC 3501)
  sip PORT    an OPTIONS request over UDP and its 200 (RFC 3261)
  ntp PORT    a client's mode-3 request over UDP and the server's mode-4 reply (RFC 5905)
"""
import imaplib
import poplib
import smtplib
import socket
import struct
import sys
import threading

HOST = "127.0.0.1"


def listener(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((HOST, port))
    s.listen(1)
    return s


def serve_once(port, handler):
    s = listener(port)

    def run():
        c, _ = s.accept()
        with c:
            handler(c, c.makefile("rb"))
        s.close()

    t = threading.Thread(target=run)
    t.start()
    return t


def ssh_packet(msg, body):
    # RFC 4253 6: padding of at least 4 bytes making the whole a multiple of 8.
    pad = 8 - (5 + 1 + len(body)) % 8
    if pad < 4:
        pad += 8
    length = 1 + 1 + len(body) + pad
    return struct.pack(">IBB", length, pad, msg) + body + b"\0" * pad


def ssh_name_list(names):
    b = ",".join(names).encode()
    return struct.pack(">I", len(b)) + b


def kexinit():
    lists = [["curve25519-sha256"], ["ssh-ed25519"], ["aes128-ctr"], ["aes128-ctr"], ["hmac-sha2-256"],
             ["hmac-sha2-256"], ["none"], ["none"], [], []]
    return bytes(16) + b"".join(ssh_name_list(l) for l in lists) + b"\0" + bytes(4)


def ssh(port):
    def server(c, f):
        c.sendall(b"SSH-2.0-wirelogtest_1.0\r\n")
        f.readline()
        c.sendall(ssh_packet(20, kexinit()))
        ssh_read_packet(f)  # client KEXINIT
        ssh_read_packet(f)  # KEX_ECDH_INIT
        c.sendall(ssh_packet(31, bytes(200)) + ssh_packet(21, b""))
        ssh_read_packet(f)  # NEWKEYS

    t = serve_once(port, server)
    c = socket.create_connection((HOST, port))
    f = c.makefile("rb")
    c.sendall(b"SSH-2.0-wirelogtest_client\r\n")
    f.readline()
    c.sendall(ssh_packet(20, kexinit()))
    ssh_read_packet(f)
    c.sendall(ssh_packet(30, bytes(36)))
    ssh_read_packet(f)  # KEX_ECDH_REPLY
    ssh_read_packet(f)  # NEWKEYS
    c.sendall(ssh_packet(21, b""))
    c.close()
    t.join()


def ssh_read_packet(f):
    head = f.read(4)
    (length,) = struct.unpack(">I", head)
    return f.read(length)


def smtp(port):
    def server(c, f):
        c.sendall(b"220 wirelog.test ESMTP\r\n")
        while True:
            line = f.readline()
            if not line:
                return
            cmd = line.split()[0].upper() if line.split() else b""
            if cmd == b"EHLO":
                c.sendall(b"250-wirelog.test\r\n250 8BITMIME\r\n")
            elif cmd == b"QUIT":
                c.sendall(b"221 bye\r\n")
                return
            else:
                c.sendall(b"502 no\r\n")

    t = serve_once(port, server)
    s = smtplib.SMTP(HOST, port, timeout=10)
    s.ehlo("client.test")
    s.quit()
    t.join()


def pop3(port):
    def server(c, f):
        c.sendall(b"+OK wirelog POP3 ready\r\n")
        while True:
            line = f.readline()
            if not line:
                return
            cmd = line.split()[0].upper() if line.split() else b""
            if cmd == b"CAPA":
                c.sendall(b"+OK capabilities\r\nUSER\r\n.\r\n")
            elif cmd == b"QUIT":
                c.sendall(b"+OK bye\r\n")
                return
            else:
                c.sendall(b"-ERR no\r\n")

    t = serve_once(port, server)
    p = poplib.POP3(HOST, port, timeout=10)
    p.capa()
    p.quit()
    t.join()


def imap(port):
    def server(c, f):
        c.sendall(b"* OK [CAPABILITY IMAP4rev1] wirelog ready\r\n")
        while True:
            line = f.readline()
            if not line:
                return
            parts = line.split()
            tag, cmd = parts[0], parts[1].upper()
            if cmd == b"CAPABILITY":
                c.sendall(b"* CAPABILITY IMAP4rev1\r\n" + tag + b" OK done\r\n")
            elif cmd == b"LOGOUT":
                c.sendall(b"* BYE bye\r\n" + tag + b" OK done\r\n")
                return
            else:
                c.sendall(tag + b" BAD no\r\n")

    t = serve_once(port, server)
    m = imaplib.IMAP4(HOST, port, timeout=10)
    m.capability()
    m.logout()
    t.join()


def udp_exchange(port, request, reply):
    srv = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    srv.bind((HOST, port))
    cli = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    cli.settimeout(10)
    cli.sendto(request, (HOST, port))
    data, peer = srv.recvfrom(2048)
    srv.sendto(reply(data), peer)
    cli.recvfrom(2048)
    cli.close()
    srv.close()


def sip(port):
    req = (
        "OPTIONS sip:wirelog@127.0.0.1 SIP/2.0\r\n"
        "Via: SIP/2.0/UDP 127.0.0.1:5061;branch=z9hG4bK776asdhds\r\n"
        "Max-Forwards: 70\r\nTo: <sip:wirelog@127.0.0.1>\r\nFrom: <sip:test@127.0.0.1>;tag=1928301774\r\n"
        "Call-ID: a84b4c76e66710@127.0.0.1\r\nCSeq: 63104 OPTIONS\r\nContent-Length: 0\r\n\r\n"
    ).encode()

    def reply(data):
        head = data.split(b"\r\n\r\n")[0].split(b"\r\n")[1:]
        keep = [h for h in head if h.split(b":")[0] in (b"Via", b"To", b"From", b"Call-ID", b"CSeq")]
        return b"SIP/2.0 200 OK\r\n" + b"\r\n".join(keep) + b"\r\nContent-Length: 0\r\n\r\n"

    udp_exchange(port, req, reply)


def ntp(port):
    # RFC 5905 figure 8: LI 0, VN 4, mode 3; the transmit timestamp last.
    req = bytes([(4 << 3) | 3]) + bytes(39) + struct.pack(">II", 3_900_000_000, 1)

    def reply(data):
        return bytes([(4 << 3) | 4, 2, 6, 0xEC]) + bytes(20) + data[40:48] + struct.pack(">IIII", 3_900_000_000, 2, 3_900_000_000, 3)

    udp_exchange(port, req, reply)


if __name__ == "__main__":
    {"ssh": ssh, "smtp": smtp, "pop3": pop3, "imap": imap, "sip": sip, "ntp": ntp}[sys.argv[1]](int(sys.argv[2]))
