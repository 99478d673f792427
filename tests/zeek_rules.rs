//! Zeek's connection rules on captures made here (tests/zeek_rules/traffic.py
//! in a network namespace, recorded by tcpdump), each expectation the
//! outcome of the Zeek source the tracker cites beside its code:
//!  - reuse (`TCPSessionAdapter::IsReuse`): once a side closed (here: the
//!    RST of a refused connect), every SYN on the tuple starts a new
//!    connection, with a new initial sequence number or the same one;
//!  - UDP orientation (`UDPAnalyzer::WantConnection`): flipped only when the
//!    source port is a likely server port and the destination port is not,
//!    with `likely_server_ports` as Zeek's default scripts register it (the
//!    generated `ZEEK_SERVER_PORTS`), and never towards 255.255.255.255
//!    (`IPBasedAnalyzer::NewConn`); ICMP keeps its first sender
//!    (`ICMPAnalyzer::InitConnKey` and the default `WantConnection`);
//!  - DHCP named in `service` once a message of it is seen (Zeek's DHCP
//!    analyzer, `process_dhcp_message`), against a real dnsmasq.

mod common;

use common::live::{is_root, skip};
use common::lo::{have, settle, LoNs};
use common::{parse_log, scratch};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_wirelog");

fn script() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/zeek_rules/traffic.py").display().to_string()
}

fn conns(pcaps: &[&Path]) -> Vec<HashMap<String, String>> {
    let out = Command::new(BIN)
        .args(["read", "--quiet", "--no-store", "--seed", "1"])
        .args(pcaps)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    parse_log(&String::from_utf8(out.stdout).unwrap())
}

fn tuple(r: &HashMap<String, String>) -> String {
    format!("{}:{} > {}:{} {}", r["id.orig_h"], r["id.orig_p"], r["id.resp_h"], r["id.resp_p"], r["proto"])
}

#[test]
fn reuse_orientation_and_dhcp_follow_zeek() {
    if !is_root() || !have("tcpdump") {
        return skip("needs root (network namespaces) and tcpdump");
    }
    let dir = scratch("zeek_rules", "traffic");
    let ns = LoNs::new("zr");
    // The client side of the veth pair in a namespace of its own: a DHCP
    // server and its client in one namespace do not hear each other.
    let client_ns = LoNs::new("zc");
    let ip_in = |n: &LoNs, args: &[&str]| {
        let mut a = vec!["ip", "-n", n.name.as_str()];
        a.extend_from_slice(args);
        common::live::sh(&a);
    };
    ip_in(&ns, &["link", "add", "v0", "type", "veth", "peer", "name", "v1", "netns", &client_ns.name]);
    ip_in(&ns, &["addr", "add", "10.77.0.1/24", "dev", "v0"]);
    ip_in(&ns, &["addr", "add", "10.77.0.2/24", "dev", "v0"]);
    ip_in(&ns, &["link", "set", "v0", "up"]);
    ip_in(&ns, &["route", "add", "default", "dev", "v0"]);
    ip_in(&client_ns, &["link", "set", "v1", "up"]);
    ip_in(&client_ns, &["route", "add", "default", "dev", "v1"]);
    let lo_pcap = dir.join("lo.pcap");
    let td = ns.tcpdump(&lo_pcap, &["tcp", "or", "udp", "or", "icmp"]);
    ns.run(&["python3", &script(), "lo"]);
    settle(&lo_pcap);
    td.interrupt();
    let bc_pcap = dir.join("bcast.pcap");
    let log = dir.join("bcast.tcpdump.log");
    let mut td = client_ns.spawn("tcpdump", &["tcpdump", "-i", "v1", "-n", "-s", "0", "-U", "-w", bc_pcap.to_str().unwrap(), "udp"], &log);
    common::lo::wait_for("tcpdump on v1", std::time::Duration::from_secs(20), || {
        assert!(td.alive(), "tcpdump exited: {}", std::fs::read_to_string(&log).unwrap_or_default());
        std::fs::read_to_string(&log).unwrap_or_default().contains("listening on")
    });
    ns.run(&["python3", &script(), "bcast"]);
    // A real DHCP server (dnsmasq, DHCP only) on v0 answers a DISCOVER.
    let dnsmasq_log = dir.join("dnsmasq.log");
    let leases = dir.join("leases");
    let dnsmasq = ns.spawn(
        "dnsmasq",
        &[
            "/usr/sbin/dnsmasq", "--no-daemon", "--port=0", "--interface=v0", "--bind-interfaces", "--user=root",
            "--dhcp-range=10.77.0.50,10.77.0.60,255.255.255.0,1h", &format!("--dhcp-leasefile={}", leases.display()),
            "--no-resolv", "--no-hosts", "--log-dhcp",
        ],
        &dnsmasq_log,
    );
    let client = client_ns.cmd(&["python3", &script(), "dhcp"]).output().unwrap();
    assert!(
        client.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&client.stderr),
        std::fs::read_to_string(&dnsmasq_log).unwrap_or_default()
    );
    drop(dnsmasq);
    settle(&bc_pcap);
    td.interrupt();

    let rows = conns(&[&lo_pcap, &bc_pcap]);
    let by = |t: &str| rows.iter().filter(|r| tuple(r) == t).collect::<Vec<_>>();
    for r in &rows {
        eprintln!("{} {} {}", tuple(r), r["history"], r["conn_state"]);
    }

    // Three refused connects from one source port: three connections, each
    // a SYN answered by a RST (REJ), whether the ISN changed or not.
    for sport in ["40001", "40002"] {
        let t = format!("127.0.0.1:{sport} > 127.0.0.1:9 tcp");
        let got = by(&t);
        assert_eq!(got.len(), 3, "{t}: {rows:?}");
        for r in got {
            assert_eq!((r["conn_state"].as_str(), r["history"].as_str(), r["orig_pkts"].as_str()), ("REJ", "Sr", "1"), "{t}");
        }
    }
    // Two likely server ports: the first sender stays the originator, in
    // either order.
    assert_eq!(by("127.0.0.1:53 > 127.0.0.2:123 udp").len(), 1, "{rows:?}");
    assert_eq!(by("127.0.0.4:123 > 127.0.0.3:53 udp").len(), 1, "{rows:?}");
    // From a likely server port to an ephemeral one: flipped.
    assert_eq!(by("127.0.0.6:40010 > 127.0.0.5:123 udp").len(), 1, "{rows:?}");
    // 500 (IKE) and 69 (TFTP) are registered by no default Zeek script: kept.
    assert_eq!(by("127.0.0.7:500 > 127.0.0.8:40011 udp").len(), 1, "{rows:?}");
    assert_eq!(by("127.0.0.9:69 > 127.0.0.10:40012 udp").len(), 1, "{rows:?}");
    // 67 is a server port, 68 is not, but the responder is the broadcast
    // address: not flipped.
    assert_eq!(by("10.77.0.2:67 > 255.255.255.255:68 udp").len(), 1, "{rows:?}");
    // ICMP keeps its first sender as originator (no WantConnection of its
    // own), with the message type as orig_p and, as resp_p, the type's
    // counterpart (0 -> 8) or, for a one-way message, its code
    // (ICMP4_counterpart, src/packet_analysis/protocol/icmp/ICMP.cc).
    assert_eq!(by("127.0.0.11:0 > 127.0.0.12:8 icmp").len(), 1, "{rows:?}");
    assert_eq!(by("127.0.0.13:3 > 127.0.0.14:1 icmp").len(), 1, "{rows:?}");

    // DHCP, confirmed by one message as Zeek's analyzer does: the client's
    // DISCOVER and the server's offer each name the service (Wireshark
    // agrees they are DHCP); the datagram from 67 that is not DHCP does not.
    let discover = by("0.0.0.0:68 > 255.255.255.255:67 udp");
    assert_eq!(discover.len(), 1, "{rows:?}");
    assert_eq!(discover[0]["service"], "dhcp");
    let offers: Vec<_> = rows.iter().filter(|r| tuple(r).contains("10.77.0.1:67") && r["proto"] == "udp").collect();
    assert!(!offers.is_empty() && offers.iter().all(|r| r["service"] == "dhcp"), "{rows:?}");
    assert_eq!(by("10.77.0.2:67 > 255.255.255.255:68 udp")[0]["service"], "-");
    if have("tshark") {
        let t = Command::new("tshark").args(["-r", bc_pcap.to_str().unwrap(), "-Y", "dhcp", "-T", "fields", "-e", "frame.number"]).output().unwrap();
        let n = String::from_utf8_lossy(&t.stdout).lines().count();
        assert!(n >= 2, "tshark finds {n} DHCP messages");
    }
    // Only the one flipped connection carries Zeek's flip mark.
    for r in rows.iter().filter(|r| r["proto"] == "udp") {
        let flipped = tuple(r) == "127.0.0.6:40010 > 127.0.0.5:123 udp";
        assert_eq!(r["history"].starts_with('^'), flipped, "{}: {}", tuple(r), r["history"]);
    }
}

/// FTP named in `service` as Zeek's FTP analyzer confirms it: the client's
/// first line on port 21 holds a command word (`FTP_Analyzer::DeliverStream`,
/// `is_ftp_cmd`), here Python's ftplib against a test-only server
/// (tests/zeek_rules/ftp.py); a client sending a TLS record there is not FTP.
#[test]
fn ftp_named_as_zeek_confirms_it() {
    if !is_root() || !have("tcpdump") {
        return skip("needs root (network namespaces) and tcpdump");
    }
    let dir = scratch("zeek_rules", "ftp");
    let ns = LoNs::new("zf");
    let ftp = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/zeek_rules/ftp.py").display().to_string();
    let pcap = dir.join("ftp.pcap");
    let td = ns.tcpdump(&pcap, &["tcp"]);
    let log = dir.join("server.log");
    let mut server = ns.spawn("ftp server", &["python3", &ftp, "server"], &log);
    common::lo::wait_for("ftp server", std::time::Duration::from_secs(20), || {
        assert!(server.alive(), "{}", std::fs::read_to_string(&log).unwrap_or_default());
        std::fs::read_to_string(&log).unwrap_or_default().contains("listening")
    });
    ns.run(&["python3", &ftp, "clients"]);
    drop(server);
    settle(&pcap);
    td.interrupt();
    let rows = conns(&[&pcap]);
    let one = |sport: &str| {
        let v: Vec<_> = rows.iter().filter(|r| r["id.orig_p"] == sport && r["id.resp_p"] == "21").collect();
        assert_eq!(v.len(), 1, "{sport}: {rows:?}");
        v[0]["service"].clone()
    };
    assert_eq!(one("40020"), "ftp");
    assert_eq!(one("40021"), "-");
}
