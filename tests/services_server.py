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

Real servers (Debian's), started here by PID and stopped by it:
  ftp PORT    vsftpd, ftplib's anonymous login (USER, 331, PASS, 230) and QUIT
  irc PORT    ngircd, a client's NICK and USER lines, the welcome numerics, QUIT
  irc-split PORT  the same with NICK and USER written in four small segments
              (TCP_NODELAY, a pause between writes), a line cut in two
  irc-peers PORT  two ngircd servers peering: the one on PORT is given the
              other as a passive [Server], the other connects to it (its own
              listener on PORT+1 sees no connection); PASS and SERVER each way
              (ngircd's: `SERVER name :info` from the connecting server, the
              answer with a prefix), then their burst, zlib-compressed
  xmpp PORT   prosody, a client's stream header (single-quoted jabber:client),
              the server's header and features, the stream's end
  ldap PORT   slapd, ldapsearch's anonymous simple bind and a base search
The same first bytes without the reply Zeek's signature or analyzer waits
for (test-only servers written here):
  ftp-refused PORT   a 220 greeting, then 530 to ftplib's USER (no 230/331)
  irc-refused PORT   NICK and USER answered by ERROR (no numeric reply)
  xmpp-server-only PORT  the server's stream header; the client's first bytes
                     are XML but no stream header
  ldap-refused PORT  ldapsearch's bind answered by bytes that are no BER SEQUENCE
  irc-servers PORT   two servers registering with each other (RFC 1459 4.1.4
                     and 4.1.1: PASS, then `SERVER name hopcount :info`, each way)
  irc-server-refused PORT  a server's PASS and SERVER answered by ERROR
"""
import os
import shutil
import subprocess
import tempfile
import time
import imaplib
import poplib
import smtplib
import socket
import struct
import sys
import threading

from serverlib import dialogue, listen

HOST = "127.0.0.1"


def serve_once(port, handler):
    s = listen(port, 1)

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


def next_line(f):
    """A client's line for serverlib.dialogue: text without its end, None at the end."""
    return lambda: (lambda l: l.decode(errors="replace").strip() if l else None)(f.readline())


def smtp(port):
    def server(c, f):
        c.sendall(b"220 wirelog.test ESMTP\r\n")
        replies = {"EHLO": b"250-wirelog.test\r\n250 8BITMIME\r\n", "QUIT": b"221 bye\r\n"}
        dialogue(next_line(f), c.sendall, replies, b"502 no\r\n", {"QUIT"})

    t = serve_once(port, server)
    s = smtplib.SMTP(HOST, port, timeout=10)
    s.ehlo("client.test")
    s.quit()
    t.join()


def pop3(port):
    def server(c, f):
        c.sendall(b"+OK wirelog POP3 ready\r\n")
        replies = {"CAPA": b"+OK capabilities\r\nUSER\r\n.\r\n", "QUIT": b"+OK bye\r\n"}
        dialogue(next_line(f), c.sendall, replies, b"-ERR no\r\n", {"QUIT"})

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


def daemon(argv, port, workdir):
    """Starts a server and waits (bounded) until it accepts on `port`."""
    log = open(os.path.join(workdir, "daemon.log"), "wb")
    p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    # Listening is read from /proc/net/tcp (state 0A), not tried with a
    # connection, which the capture would hold as one more.
    want = "%08X:%04X" % (0x0100007F, port)
    for _ in range(100):
        with open("/proc/net/tcp") as t:
            if any(l.split()[1] == want and l.split()[3] == "0A" for l in t.readlines()[1:]):
                return p
        if p.poll() is not None:
            break
        time.sleep(0.1)
    p.kill()
    p.wait()
    log.close()
    sys.exit(f"{argv[0]} did not start: " + open(os.path.join(workdir, "daemon.log"), errors="replace").read())


def stop(p):
    p.terminate()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def with_daemon(port, argv_of, client):
    w = tempfile.mkdtemp(prefix="wirelog-svc-")
    try:
        p = daemon(argv_of(w), port, w)
        try:
            client()
        finally:
            stop(p)
    finally:
        shutil.rmtree(w, ignore_errors=True)


def ftp(port):
    import ftplib

    def argv(w):
        os.mkdir(os.path.join(w, "empty"))
        conf = os.path.join(w, "vsftpd.conf")
        with open(conf, "w") as f:
            f.write(f"""listen=YES
listen_ipv6=NO
listen_address={HOST}
listen_port={port}
anonymous_enable=YES
local_enable=NO
write_enable=NO
background=NO
secure_chroot_dir={w}/empty
anon_root={w}/empty
seccomp_sandbox=NO
run_as_launching_user=YES
pasv_enable=NO
""")
        return ["vsftpd", conf]

    def client():
        f = ftplib.FTP()
        f.connect(HOST, port, timeout=10)
        f.login()
        f.quit()

    with_daemon(port, argv, client)


def irc_register(port):
    c = socket.create_connection((HOST, port), timeout=10)
    # RFC 2812 3.1: registration; one write, as clients send it.
    c.sendall(b"NICK wirelog\r\nUSER wirelog 0 * :wirelog test\r\n")
    return c


def irc_conf(w, name, port):
    return f"""[Global]
Name = {name}
Info = wirelog test
Listen = {HOST}
Ports = {port}
PidFile = {w}/ngircd.pid
MotdPhrase = wirelog
[Options]
DNS = no
Ident = no
PAM = no
"""


def irc_argv(w, port):
    conf = os.path.join(w, "ngircd.conf")
    with open(conf, "w") as f:
        f.write(irc_conf(w, "irc.wirelog.test", port))
    return ["ngircd", "-n", "-f", conf]


def irc_until_motd(c):
    f = c.makefile("rb")
    while True:  # up to the end of the MOTD (376) or no MOTD (422)
        line = f.readline()
        if not line or line.split(b" ")[1:2] in ([b"376"], [b"422"]):
            break
    c.sendall(b"QUIT :bye\r\n")
    while f.readline():
        pass
    c.close()


def irc(port):
    def argv(w):
        return irc_argv(w, port)

    def client():
        irc_until_motd(irc_register(port))

    with_daemon(port, argv, client)


def irc_split(port):
    def argv(w):
        return irc_argv(w, port)

    def client():
        c = socket.create_connection((HOST, port), timeout=10)
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # RFC 2812 3.1's registration, cut across segments (and a line in two).
        for piece in (b"NI", b"CK wirelog\r", b"\nUSER wirelog 0 * :wire", b"log test\r\n"):
            c.sendall(piece)
            time.sleep(0.05)
        irc_until_motd(c)

    with_daemon(port, argv, client)


def irc_peers(port):
    """Two ngircd, B connecting to A on `port` (bounded waits; each
    stopped by its PID)."""
    wa, wb = tempfile.mkdtemp(prefix="wirelog-irc-a-"), tempfile.mkdtemp(prefix="wirelog-irc-b-")
    try:
        with open(os.path.join(wa, "a.conf"), "w") as f:
            f.write(irc_conf(wa, "a.wirelog.test", port) + "[Server]\nName = b.wirelog.test\nMyPassword = pwa\nPeerPassword = pwb\n")
        with open(os.path.join(wb, "b.conf"), "w") as f:
            f.write(irc_conf(wb, "b.wirelog.test", port + 1)
                    + f"[Server]\nName = a.wirelog.test\nHost = {HOST}\nPort = {port}\nMyPassword = pwb\nPeerPassword = pwa\n")
        a = daemon(["ngircd", "-n", "-f", os.path.join(wa, "a.conf")], port, wa)
        try:
            b = daemon(["ngircd", "-n", "-f", os.path.join(wb, "b.conf")], port + 1, wb)
            try:
                # A logs the end of the peer's burst ("Synchronization with
                # ... done"); a second more for the last segments.
                for _ in range(150):
                    if b"Synchronization with" in open(os.path.join(wa, "daemon.log"), "rb").read():
                        break
                    time.sleep(0.1)
                else:
                    sys.exit("the servers did not peer: " + open(os.path.join(wa, "daemon.log"), errors="replace").read())
                time.sleep(1)
            finally:
                stop(b)
        finally:
            stop(a)
    finally:
        shutil.rmtree(wa, ignore_errors=True)
        shutil.rmtree(wb, ignore_errors=True)


def irc_servers(port):
    def server(c, f):
        while not f.readline().upper().startswith(b"SERVER"):
            pass
        c.sendall(b"PASS secret 0210 IRC|\r\nSERVER a.wirelog.test 1 :wirelog test A\r\n")
        f.readline()  # SQUIT

    t = serve_once(port, server)
    c = socket.create_connection((HOST, port), timeout=10)
    c.sendall(b"PASS secret 0210 IRC|\r\nSERVER b.wirelog.test 1 :wirelog test B\r\n")
    f = c.makefile("rb")
    while not f.readline().upper().startswith(b"SERVER"):
        pass
    c.sendall(b"SQUIT b.wirelog.test :bye\r\n")
    c.close()
    t.join()


def irc_server_refused(port):
    def server(c, f):
        f.readline()
        f.readline()
        c.sendall(b"ERROR :Closing link: b.wirelog.test (no such server)\r\n")

    t = serve_once(port, server)
    c = socket.create_connection((HOST, port), timeout=10)
    c.sendall(b"PASS secret 0210 IRC|\r\nSERVER b.wirelog.test 1 :wirelog test B\r\n")
    while c.recv(4096):
        pass
    c.close()
    t.join()


XMPP_HEADER = (b"<?xml version='1.0'?><stream:stream to='wirelog.test' xmlns='jabber:client' "
               b"xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>")


def xmpp(port):
    def argv(w):
        os.mkdir(os.path.join(w, "data"))
        conf = os.path.join(w, "prosody.cfg.lua")
        with open(conf, "w") as f:
            f.write(f"""run_as_root = true
daemonize = false
pidfile = "{w}/prosody.pid"
data_path = "{w}/data"
certificates = "{w}"
interfaces = {{ "{HOST}" }}
c2s_ports = {{ {port} }}
modules_enabled = {{ "saslauth" }}
modules_disabled = {{ "s2s", "posix" }}
log = {{ {{ levels = {{ min = "error" }}, to = "console" }} }}
c2s_require_encryption = false
VirtualHost "wirelog.test"
""")
        return ["prosody", "--config", conf, "-F"]

    def client():
        c = socket.create_connection((HOST, port), timeout=10)
        c.sendall(XMPP_HEADER)
        d = b""
        while b"</stream:features>" not in d:
            x = c.recv(4096)
            if not x:
                break
            d += x
        c.sendall(b"</stream:stream>")
        while c.recv(4096):
            pass
        c.close()

    with_daemon(port, argv, client)


def ldap(port):
    def argv(w):
        os.mkdir(os.path.join(w, "db"))
        conf = os.path.join(w, "slapd.conf")
        with open(conf, "w") as f:
            f.write(f"""include /etc/ldap/schema/core.schema
pidfile {w}/slapd.pid
modulepath /usr/lib/ldap
moduleload back_mdb
database mdb
suffix "dc=wirelog,dc=test"
rootdn "cn=admin,dc=wirelog,dc=test"
directory {w}/db
""")
        return ["slapd", "-d", "0", "-f", conf, "-h", f"ldap://{HOST}:{port}/"]

    def client():
        subprocess.run(["ldapsearch", "-x", "-H", f"ldap://{HOST}:{port}", "-b", "", "-s", "base", "namingContexts"],
                       check=True, stdout=subprocess.DEVNULL, timeout=10)

    with_daemon(port, argv, client)


def ftp_refused(port):
    import ftplib

    def server(c, f):
        c.sendall(b"220 wirelog FTP\r\n")
        f.readline()  # USER
        c.sendall(b"530 Not today.\r\n")
        if f.readline():  # QUIT
            c.sendall(b"221 Goodbye.\r\n")

    t = serve_once(port, server)
    cl = ftplib.FTP()
    cl.connect(HOST, port, timeout=10)
    try:
        cl.login()
    except ftplib.error_perm:
        pass
    cl.quit()
    t.join()


def irc_refused(port):
    def server(c, f):
        f.readline()
        f.readline()
        c.sendall(b"ERROR :Closing link: wirelog[127.0.0.1] (not welcome)\r\n")

    t = serve_once(port, server)
    c = irc_register(port)
    while c.recv(4096):
        pass
    c.close()
    t.join()


def xmpp_server_only(port):
    def server(c, f):
        c.sendall(XMPP_HEADER.replace(b"to=", b"from="))
        c.recv(4096)

    t = serve_once(port, server)
    c = socket.create_connection((HOST, port), timeout=10)
    c.recv(4096)
    c.sendall(b"<?xml version='1.0'?><hello/>")
    c.close()
    t.join()


def ldap_refused(port):
    def server(c, f):
        c.recv(4096)  # the BindRequest
        c.sendall(b"\x05\x00\x00\x00")

    t = serve_once(port, server)
    subprocess.run(["ldapsearch", "-x", "-H", f"ldap://{HOST}:{port}", "-b", "", "-s", "base"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
    t.join()


if __name__ == "__main__":
    {"ssh": ssh, "smtp": smtp, "pop3": pop3, "imap": imap, "sip": sip, "ntp": ntp, "ftp": ftp, "irc": irc,
     "xmpp": xmpp, "ldap": ldap, "ftp-refused": ftp_refused, "irc-refused": irc_refused,
     "xmpp-server-only": xmpp_server_only, "ldap-refused": ldap_refused, "irc-split": irc_split,
     "irc-peers": irc_peers, "irc-servers": irc_servers, "irc-server-refused": irc_server_refused}[sys.argv[1]](int(sys.argv[2]))
