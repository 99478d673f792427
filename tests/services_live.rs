//! Services named without a parser, on captures made here: test-only
//! servers and clients (tests/services_server.py) exchange the opening of
//! SSH, SMTP, POP3, IMAP, SIP and NTP on loopback in a network namespace,
//! on their registered ports and on others; tcpdump captures them and
//! `wirelog read` with no flags must name each connection as Zeek would:
//! by the analyzer a port registers or a signature on both sides attaches,
//! once the analyzer's confirmation was seen (see README, "Services").

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use common::lo::{have, settle, LoNs, Reap};

/// (exchange, port, transport, conn.log's service as Zeek writes it)
const CASES: &[(&str, u16, &str, &str)] = &[
    ("ssh", 22, "tcp", "ssh"),
    ("ssh", 2222, "tcp", "ssh"),
    ("smtp", 25, "tcp", "smtp"),
    ("smtp", 2525, "tcp", "smtp"),
    ("pop3", 1110, "tcp", "pop3"),
    ("imap", 143, "tcp", "imap"),
    // Zeek has no IMAP signature: on another port nothing names it.
    ("imap", 1143, "tcp", "-"),
    ("sip", 5060, "udp", "sip"),
    ("sip", 5080, "udp", "sip"),
    ("ntp", 123, "udp", "ntp"),
    // Zeek has no NTP signature either.
    ("ntp", 1123, "udp", "-"),
    // Real servers: on the port Zeek registers the analyzer for, on another
    // (its DPD signatures), and the same first bytes without the reply the
    // signature or the analyzer waits for.
    ("ftp", 21, "tcp", "ftp"),
    ("ftp", 2121, "tcp", "ftp"),
    ("ftp-refused", 2122, "tcp", "-"),
    ("irc", 6667, "tcp", "irc"),
    ("irc", 7000, "tcp", "irc"),
    ("irc-refused", 7001, "tcp", "-"),
    // NICK and USER cut across four segments: Zeek matches its signatures
    // on the stream (PIA.cc:286-311), so does wirelog.
    ("irc-split", 7002, "tcp", "irc"),
    // Server to server (Zeek's irc_server_to_server1/2, dpd.sig:23-32):
    // RFC 1459's `SERVER name hopcount :info` both ways is named; two real
    // ngircd peering are not, by Zeek nor here: the connecting one sends
    // `SERVER name :info` (no hopcount), the other prefixes its line, and
    // Zeek's pattern takes neither; their burst is zlib-compressed.
    ("irc-servers", 7020, "tcp", "irc"),
    ("irc-server-refused", 7021, "tcp", "-"),
    ("irc-peers", 7010, "tcp", "-"),
    ("xmpp", 5222, "tcp", "xmpp"),
    ("xmpp", 5333, "tcp", "xmpp"),
    ("xmpp-server-only", 5334, "tcp", "-"),
    ("ldap", 389, "tcp", "ldap"),
    ("ldap", 1389, "tcp", "ldap"),
    ("ldap-refused", 1390, "tcp", "-"),
];

/// The Debian servers the exchanges above run (scripts/test.sh installs them).
const SERVERS: &[&str] = &["vsftpd", "ngircd", "prosody", "slapd", "ldapsearch"];

#[test]
fn services_are_named_as_zeek_names_them() {
    if !(have("tcpdump") && have("python3") && common::live::is_root() && SERVERS.iter().all(|s| have(s))) {
        common::live::skip("needs root, python3, tcpdump, vsftpd, ngircd, prosody, slapd and ldap-utils");
        return;
    }
    let t0 = Instant::now();
    let dir = common::scratch("services_live", "all");
    let ns = LoNs::new("svc");
    let _reap = Reap(&ns);
    let pcap = dir.join("services.pcap");
    let dump = ns.tcpdump(&pcap, &[]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/services_server.py");
    for (what, port, _, _) in CASES {
        let o = ns.run(&["timeout", "20", "python3", script.to_str().unwrap(), what, &port.to_string()]);
        assert!(o.status.success());
    }
    settle(&pcap);
    dump.interrupt();

    let logs = dir.join("logs");
    let o = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["read", "--no-store", "--logs"])
        .arg(&logs)
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let conns = common::read_log(&logs.join("conn.log"));
    let mut by_port: HashMap<(String, String), Vec<&str>> = HashMap::new();
    for r in &conns {
        by_port.entry((r["id.resp_p"].clone(), r["proto"].clone())).or_default().push(r["service"].as_str());
    }
    let mut wrong = Vec::new();
    for (what, port, proto, want) in CASES {
        let got = by_port.get(&(port.to_string(), proto.to_string()));
        if got.map(|v| v.as_slice()) != Some(&[*want][..]) {
            wrong.push(format!("{what} on {port}/{proto}: want [{want}], got {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}\nconn.log: {conns:?}", wrong.join("\n"));
    eprintln!("services_live: {} exchanges named as Zeek names them in {:.1?}", CASES.len(), t0.elapsed());
}

/// Zeek's rule for partial connections (`TcpConn::is_partial`): its HTTP
/// analyzer (and SSL, SSH, SMTP, POP3, IMAP, XMPP, MySQL) reads nothing of
/// a connection whose originator's first packet was not a bare SYN, or
/// whose responder's first packet after a bare SYN carried no SYN
/// (src/analyzer/protocol/http/HTTP.cc:939; `SetPartialStatus`,
/// src/packet_analysis/protocol/tcp/TCPSessionAdapter.cc:709). A SYN-ACK
/// seen first is not partial once the client's ACK comes: Zeek takes the
/// SYN as missed and establishes the connection (TCPSessionAdapter.cc:
/// 822-834; without a flip at creation the ACK flips the roles, which
/// clears it too, 1045). Without the SYN-ACK the connection turns partial
/// at the server's first packet, but the request came before it, and the
/// analyzer confirms on a request (`HTTP_Request`, HTTP.cc:1472). A real
/// capture of curl and nginx on 80 and 18080 (a likely server port and not
/// one) is read whole, without its bare SYNs, without its SYN-ACKs, and
/// without any SYN (from the middle: partial from the request on).
#[test]
fn partial_connections_get_no_http_service() {
    if !(have("tcpdump") && have("nginx") && have("curl") && common::live::is_root()) {
        common::live::skip("needs root, tcpdump, nginx and curl");
        return;
    }
    let t0 = Instant::now();
    let dir = common::scratch("services_live", "partial");
    let http = "    access_log off;\n    server {\n        listen 127.0.0.1:80;\n        listen 127.0.0.1:18080;\n        location / { return 200 \"hello\\n\"; }\n    }";
    std::fs::write(dir.join("nginx.conf"), common::nginx::conf(&dir, http)).unwrap();
    let ns = LoNs::new("svp");
    let _reap = Reap(&ns);
    let conf = dir.join("nginx.conf");
    let _nginx = ns.spawn("nginx", &["nginx", "-c", conf.to_str().unwrap()], &dir.join("nginx.out"));
    common::lo::wait_for("nginx", std::time::Duration::from_secs(20), || {
        ["80", "18080"].iter().all(|p| ns.cmd(&["curl", "-sf", "-o", "/dev/null", &format!("http://127.0.0.1:{p}/")]).output().is_ok_and(|o| o.status.success()))
    });
    let full = dir.join("full.pcap");
    let dump = ns.tcpdump(&full, &["tcp"]);
    for p in ["80", "18080"] {
        assert!(ns.run(&["curl", "-sf", "-o", "/dev/null", &format!("http://127.0.0.1:{p}/a")]).status.success());
    }
    settle(&full);
    dump.interrupt();
    // The cuts, by tcpdump's own filter on the real capture: bare SYNs
    // (flags SYN without ACK), SYN-ACKs, every SYN.
    let cut = |name: &str, filter: &str| {
        let out = dir.join(name);
        let o = Command::new("tcpdump").args(["-r", full.to_str().unwrap(), "-w", out.to_str().unwrap(), filter]).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out
    };
    let no_syn = cut("no_syn.pcap", "tcp[13] & 0x12 != 0x02");
    let no_synack = cut("no_synack.pcap", "tcp[13] & 0x12 != 0x12");
    let middle = cut("middle.pcap", "tcp[13] & 0x02 == 0");
    let mut wrong = Vec::new();
    for (pcap, want80, want18080) in [(&full, "http", "http"), (&no_syn, "http", "http"), (&no_synack, "http", "http"), (&middle, "-", "-")] {
        let logs = dir.join(format!("logs-{}", pcap.file_stem().unwrap().to_string_lossy()));
        let o = Command::new(env!("CARGO_BIN_EXE_wirelog")).args(["read", "--no-store", "--logs"]).arg(&logs).arg(pcap).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let conns = common::read_log(&logs.join("conn.log"));
        for (port, want) in [("80", want80), ("18080", want18080)] {
            let got: Vec<&str> = conns.iter().filter(|r| r["id.resp_p"] == port).map(|r| r["service"].as_str()).collect();
            if got != [want] {
                wrong.push(format!("{}: port {port}: want [{want}], got {got:?}\n{conns:?}", pcap.display()));
            }
        }
        // The request is still parsed (http.log), only `service` follows Zeek.
        let http = common::read_log(&logs.join("http.log"));
        assert_eq!(http.len(), 2, "{}: {http:?}", pcap.display());
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    eprintln!("services_live: partial connections named as Zeek names them in {:.1?}", t0.elapsed());
}
