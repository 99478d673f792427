//! STARTTLS made here: test-only servers (tests/starttls_server.py) for
//! SMTP, IMAP, POP3, XMPP, LDAP, FTP and IRC on their standard ports in a
//! network namespace, OpenSSL's `s_client -starttls <proto>` as the client
//! (TLS 1.3, and TLS 1.2 for SMTP so the certificate is in plaintext),
//! Python's smtplib (`starttls()`) and a plain SMTP session that never
//! upgrades. tcpdump captures the loopback; `wirelog read` with no flags
//! must give each upgraded connection an ssl.log row agreeing with what
//! s_client printed (version, cipher, SNI) and conn.log's service as Zeek
//! writes it (`smtp,ssl`, ...; `smtp` for the session without TLS).

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::live::{after, text};
use common::lo::{needs, settle, wait_for, LoNs};
use common::tls::{iana, self_signed, sha256_fingerprint, zeek_version};

type Row = HashMap<String, String>;

/// The logs `wirelog read` (no flags) makes of `pcap` in `logs`, by name.
fn read(pcap: &Path, logs: &Path) -> impl Fn(&str) -> Vec<Row> {
    common::read_pcap(pcap, logs, None, &["--quiet"]);
    let logs = logs.to_path_buf();
    move |n: &str| common::parse_log(&std::fs::read_to_string(logs.join(n)).unwrap_or_default())
}

const PROTOS: &[(&str, u16)] =
    &[("smtp", 25), ("imap", 143), ("pop3", 110), ("xmpp", 5222), ("ldap", 389), ("ftp", 21), ("irc", 6667)];

#[test]
fn starttls_of_seven_protocols_is_read_without_flags() {
    if !needs("STARTTLS tests (network namespaces)", &["openssl", "python3", "tcpdump"]) {
        return;
    }
    let t0 = Instant::now();
    let dir = common::scratch("starttls_live", "seven");
    let cert = self_signed(&dir, "/O=wirelog tests/CN=starttls.test", 30, &["-addext", "subjectAltName=DNS:starttls.test"]);
    let fp = sha256_fingerprint(&cert.cert);

    let ns = LoNs::new("stls");
    let pcap = dir.join("starttls.pcap");
    let tcpdump = ns.tcpdump(&pcap, &["tcp"]);
    let slog = dir.join("server.log");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/starttls_server.py");
    let specs: Vec<String> = PROTOS.iter().map(|(n, port)| format!("{n}={port}")).chain(["smtp=587".to_string()]).collect();
    let mut args = vec!["python3", script, cert.cert_str(), cert.key_str()].into_iter().map(String::from).collect::<Vec<_>>();
    args.extend(specs);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _server = ns.spawn("starttls_server.py", &args, &slog);
    wait_for("starttls servers", Duration::from_secs(20), || std::fs::read_to_string(&slog).unwrap_or_default().contains("listening"));

    // s_client per protocol: (protocol, port, TLS version flag) -> what it printed.
    let s_client = |proto: &str, port: u16, version: &str| {
        let connect = format!("127.0.0.1:{port}");
        let mut a = vec!["openssl", "s_client", "-brief", "-connect", &connect, "-starttls", proto, "-servername", "starttls.test", version];
        if proto == "xmpp" {
            a.extend(["-xmpphost", "starttls.test"]);
        }
        let mut child = ns.cmd(&a).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(b"QUIT\r\n").unwrap();
        let o = child.wait_with_output().unwrap();
        let t = text(&o);
        assert!(o.status.success() && t.contains("Protocol version"), "s_client -starttls {proto}: {t}");
        t
    };
    let mut printed = HashMap::new();
    for &(proto, port) in PROTOS {
        printed.insert(port, s_client(proto, port, "-tls1_3"));
    }
    // TLS 1.2 on SMTP's submission port: the certificate goes in plaintext.
    printed.insert(587, s_client("smtp", 587, "-tls1_2"));
    // Python's smtplib: EHLO, STARTTLS, EHLO again in TLS, QUIT.
    let py = "import smtplib,ssl\nc=ssl.create_default_context();c.check_hostname=False;c.verify_mode=ssl.CERT_NONE\n\
              s=smtplib.SMTP('127.0.0.1',25,timeout=10);s.ehlo('client.test');s.starttls(context=c);s.close()\n";
    let o = ns.cmd(&["python3", "-c", py]).output().unwrap();
    assert!(o.status.success(), "smtplib: {}", text(&o));
    // A session that never upgrades: conn.log says smtp alone.
    let py = "import socket\ns=socket.create_connection(('127.0.0.1',25),10);f=s.makefile('rb')\n\
              f.readline();s.sendall(b'EHLO client.test\\r\\n');[f.readline() for _ in range(3)]\n\
              s.sendall(b'QUIT\\r\\n');f.readline();s.close()\n";
    let o = ns.cmd(&["python3", "-c", py]).output().unwrap();
    assert!(o.status.success(), "plain SMTP: {}", text(&o));
    settle(&pcap);
    tcpdump.interrupt();

    let read = read(&pcap, &dir.join("logs"));
    let (conn, ssl, x509): (Vec<Row>, Vec<Row>, Vec<Row>) = (read("conn.log"), read("ssl.log"), read("x509.log"));
    let services: Vec<(u16, String)> = conn
        .iter()
        .map(|r| (r["id.resp_p"].parse().unwrap(), r["service"].clone()))
        .collect();
    eprintln!("conn.log (port, service): {services:?}");
    for &(proto, port) in PROTOS {
        let want = format!("{proto},ssl");
        assert!(services.iter().any(|(p, s)| *p == port && *s == want), "{proto}: no connection named {want}: {services:?}");
    }
    assert_eq!(services.iter().filter(|(p, s)| *p == 25 && s == "smtp,ssl").count(), 2, "s_client and smtplib: {services:?}");
    assert_eq!(services.iter().filter(|(p, s)| *p == 25 && s == "smtp").count(), 1, "the session without TLS: {services:?}");
    assert!(services.iter().any(|(p, s)| *p == 587 && s == "smtp,ssl"), "{services:?}");

    // Each s_client's account against its ssl.log row (the smtplib row is
    // the other one on port 25).
    for (&port, said) in &printed {
        let version = zeek_version(after(said, "Protocol version:").unwrap());
        let cipher = iana(after(said, "Ciphersuite:").unwrap());
        let row = ssl
            .iter()
            .find(|r| r["id.resp_p"] == port.to_string() && r["version"] == version && r["cipher"] == cipher)
            .unwrap_or_else(|| panic!("port {port}: no ssl.log row with {version} {cipher}: {ssl:?}"));
        assert_eq!(row["server_name"], "starttls.test", "port {port}");
        assert_eq!(row["established"], "T", "port {port}");
        if port == 587 {
            // TLS 1.2: the certificate was in plaintext.
            assert_eq!(row["cert_chain_fps"], fp, "port 587");
        }
    }
    assert_eq!(ssl.len(), PROTOS.len() + 2, "one handshake per upgraded connection: {ssl:?}");
    assert!(x509.iter().any(|r| r["fingerprint"] == fp), "x509.log has the SMTP TLS 1.2 certificate: {x509:?}");
    eprintln!("starttls live test: {:.1} s", t0.elapsed().as_secs_f64());
}

/// TLS after an HTTP CONNECT: a test-only proxy (tests/connect_proxy.py)
/// on 3128 (an HTTP port of Zeek's, found here by the request's first
/// bytes) in front of `openssl s_server`; curl through it (`-p -x`) with
/// TLS 1.2 and 1.3 and a name of its own each. http.log has the CONNECT
/// and its 200, ssl.log a row with the SNI curl sent, the version and
/// cipher curl printed, and conn.log names the connection `http,ssl`.
#[test]
fn tls_inside_a_connect_tunnel() {
    if !needs("STARTTLS tests (network namespaces)", &["openssl", "curl", "python3", "tcpdump"]) {
        return;
    }
    let dir = common::scratch("starttls_live", "connect");
    let san = "subjectAltName=DNS:tls12.proxied.test,DNS:tls13.proxied.test";
    let cert = self_signed(&dir, "/CN=proxied.test", 30, &["-addext", san]);
    let ns = LoNs::new("conn");
    let pcap = dir.join("connect.pcap");
    let tcpdump = ns.tcpdump(&pcap, &["tcp", "port", "3128"]);
    let slog = dir.join("s_server.log");
    let _server = ns.spawn("openssl s_server", &["openssl", "s_server", "-accept", "443", "-cert", cert.cert_str(), "-key", cert.key_str(), "-www"], &slog);
    let plog = dir.join("proxy.log");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connect_proxy.py");
    let _proxy = ns.spawn("connect_proxy.py", &["python3", script, "3128"], &plog);
    wait_for("s_server and proxy", Duration::from_secs(20), || {
        std::fs::read_to_string(&slog).unwrap_or_default().contains("ACCEPT")
            && std::fs::read_to_string(&plog).unwrap_or_default().contains("listening")
    });
    let mut said = Vec::new();
    for (name, tls) in [("tls12.proxied.test", "--tls-max"), ("tls13.proxied.test", "--tlsv1.3")] {
        let url = format!("https://{name}/");
        let mut a = vec!["curl", "-sS", "-v", "-k", "--http1.1", "-p", "-x", "http://127.0.0.1:3128", &url, tls];
        if tls == "--tls-max" {
            a.push("1.2");
        }
        let o = ns.cmd(&a).output().unwrap();
        let t = text(&o);
        assert!(o.status.success(), "curl {name}: {t}");
        // curl: "SSL connection using TLSv1.3 / TLS_AES_256_GCM_SHA384"
        let line = after(&t, "SSL connection using").unwrap().to_string();
        let (v, c) = line.split_once(" / ").unwrap();
        said.push((name, zeek_version(v), iana(c.split_whitespace().next().unwrap())));
    }
    settle(&pcap);
    tcpdump.interrupt();
    let read = read(&pcap, &dir.join("logs"));
    let (conn, ssl, http) = (read("conn.log"), read("ssl.log"), read("http.log"));
    assert_eq!(conn.len(), 2, "{conn:?}");
    assert!(conn.iter().all(|r| r["service"] == "http,ssl"), "{conn:?}");
    for (name, version, cipher) in &said {
        let h = http.iter().find(|r| r["host"].starts_with(*name) || r["uri"].starts_with(*name)).unwrap_or_else(|| panic!("no CONNECT for {name}: {http:?}"));
        assert_eq!(h["method"], "CONNECT", "{h:?}");
        assert_eq!(h["status_code"], "200", "{h:?}");
        let s = ssl.iter().find(|r| r["server_name"] == *name).unwrap_or_else(|| panic!("no ssl.log row for {name}: {ssl:?}"));
        assert_eq!((&s["version"], &s["cipher"], &s["established"]), (version, cipher, &"T".to_string()), "{name}");
        assert_eq!(s["uid"], h["uid"], "the CONNECT and the handshake are one connection");
    }
    assert_eq!(ssl.len(), 2, "{ssl:?}");
}
