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
];

#[test]
fn services_are_named_as_zeek_names_them() {
    if !(have("tcpdump") && have("python3") && common::live::is_root()) {
        common::live::skip("needs root, python3 and tcpdump");
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
