//! Real traffic from real servers: the captures made by the shared scripts
//! `gen_mixed.sh` (closed ports, DNS, iperf, HTTP, ICMP, fragments) and
//! `gen_http.sh` (nginx with wrk, ab and curl), checked against tshark's view
//! of the same files and against what nginx logged.
//!
//! The captures are generated on first use (root is needed: the scripts run
//! their servers in a network namespace) under `$WIRELOG_PEERS_DIR`, by
//! default `target/wirelog-peers`, and reused afterwards.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::Command;

use common::{capture, peers_dir};

struct Conn {
    ts: f64,
    proto: String,
    resp_p: u16,
    orig_bytes: u64,
    state: String,
}

fn wirelog_conns(pcap: &Path) -> Vec<Conn> {
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["read", "-C", "--quiet", "--no-store"])
        .arg(pcap)
        .output()
        .expect("run wirelog");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            Conn {
                ts: f[0].parse().unwrap(),
                proto: f[6].to_string(),
                resp_p: f[5].parse().unwrap(),
                orig_bytes: f[9].parse().unwrap_or(0),
                state: f[11].to_string(),
            }
        })
        .collect()
}

fn tshark_conversations(pcap: &Path, kind: &str) -> usize {
    let out = Command::new("tshark")
        .args(["-n", "-q", "-z", &format!("conv,{kind}"), "-r"])
        .arg(pcap)
        .output()
        .expect("tshark must be installed (scripts/test.sh installs it)");
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains("<->")).count()
}

/// Each TCP conversation's state, classified from tshark's per-packet flags
/// independently of wirelog: who sent the first SYN, whether a SYN-ACK, FINs
/// or RSTs followed from either side.
fn tshark_tcp_states(pcap: &Path) -> BTreeMap<String, usize> {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(pcap)
        .args(["-Y", "tcp", "-T", "fields", "-e", "tcp.stream", "-e", "ip.src", "-e", "ipv6.src", "-e", "tcp.srcport", "-e", "tcp.flags"])
        .output()
        .expect("tshark");
    #[derive(Default)]
    struct S {
        orig: Option<String>,
        syn: bool,
        synack: bool,
        fin_o: bool,
        fin_r: bool,
        rst_o: bool,
        rst_r: bool,
    }
    let mut streams: HashMap<u64, S> = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 5 {
            continue;
        }
        let Ok(id) = f[0].parse::<u64>() else { continue };
        let src = format!("{}{}:{}", f[1], f[2], f[3]);
        let flags = u16::from_str_radix(f[4].trim_start_matches("0x"), 16).unwrap_or(0);
        let (fin, syn, rst, ack) = (flags & 1 != 0, flags & 2 != 0, flags & 4 != 0, flags & 16 != 0);
        let s = streams.entry(id).or_default();
        if s.orig.is_none() {
            s.orig = Some(src.clone());
        }
        let from_orig = s.orig.as_deref() == Some(src.as_str());
        if syn && !ack && from_orig {
            s.syn = true;
        }
        if syn && ack && !from_orig {
            s.synack = true;
        }
        match (from_orig, fin, rst) {
            (true, true, _) => s.fin_o = true,
            (false, true, _) => s.fin_r = true,
            _ => {}
        }
        match (from_orig, rst) {
            (true, true) => s.rst_o = true,
            (false, true) => s.rst_r = true,
            _ => {}
        }
    }
    let mut states = BTreeMap::new();
    for s in streams.values() {
        let st = if s.syn && !s.synack {
            if s.rst_r {
                "REJ"
            } else if s.rst_o {
                "RSTOS0"
            } else if s.fin_o {
                "SH"
            } else {
                "S0"
            }
        } else if s.syn && s.synack {
            if s.fin_o && s.fin_r {
                "SF"
            } else if s.rst_o {
                "RSTO"
            } else if s.rst_r {
                "RSTR"
            } else if s.fin_o {
                "S2"
            } else if s.fin_r {
                "S3"
            } else {
                "S1"
            }
        } else {
            "OTH"
        };
        *states.entry(st.to_string()).or_insert(0) += 1;
    }
    states
}

#[test]
fn mixed_capture_agrees_with_tshark() {
    let Some(pcap) = capture("gen_mixed.sh", "mixed.pcap") else { return };
    let conns = wirelog_conns(&pcap);
    let mut ours: BTreeMap<String, usize> = BTreeMap::new();
    for c in conns.iter().filter(|c| c.proto == "tcp") {
        *ours.entry(c.state.clone()).or_insert(0) += 1;
    }
    let tcp = conns.iter().filter(|c| c.proto == "tcp").count();
    let udp = conns.iter().filter(|c| c.proto == "udp").count();
    let theirs = tshark_tcp_states(&pcap);
    println!("mixed.pcap TCP states: wirelog {ours:?}, tshark {theirs:?}; UDP flows {udp}");
    assert_eq!(tcp, tshark_conversations(&pcap, "tcp"), "TCP connections vs tshark conv,tcp");
    assert_eq!(udp, tshark_conversations(&pcap, "udp"), "UDP flows vs tshark conv,udp");
    assert_eq!(ours, theirs, "TCP connections per state, wirelog vs tshark's flags");
    // The script connects to closed ports 3300 times: each must be a rejected attempt.
    let summary = std::fs::read_to_string(peers_dir().join("results/mixed.summary.txt")).unwrap_or_default();
    if let Some(n) = summary.split("closed-port connects attempted=").nth(1).and_then(|s| s.split_whitespace().next()) {
        assert_eq!(ours.get("REJ").copied().unwrap_or(0), n.parse::<usize>().unwrap(), "REJ vs connects to closed ports");
    }
}

#[test]
fn http_capture_has_every_connection_nginx_logged() {
    let Some(pcap) = capture("gen_http.sh", "http.pcap") else { return };
    let conns = wirelog_conns(&pcap);
    let tcp: Vec<&Conn> = conns.iter().filter(|c| c.proto == "tcp").collect();
    assert_eq!(tcp.len(), tshark_conversations(&pcap, "tcp"), "TCP connections vs tshark conv,tcp");

    // nginx's access log: one line per request with `conn=<serial>`; the time is
    // when the request was logged. Connections whose first request was logged
    // after the capture's last packet cannot be in the capture.
    let log = std::fs::read_to_string(peers_dir().join("results/http.access.log")).expect("nginx access log");
    let mut first_req: HashMap<String, f64> = HashMap::new();
    for line in log.lines() {
        let t: f64 = line.split_whitespace().next().unwrap().parse().unwrap();
        if let Some(serial) = line.split_whitespace().find(|w| w.starts_with("conn=")) {
            let e = first_req.entry(serial.to_string()).or_insert(t);
            *e = e.min(t);
        }
    }
    let last_packet = tcp.iter().map(|c| c.ts).fold(0.0, f64::max);
    let capinfos = Command::new("capinfos").args(["-M", "-e", "-S"]).arg(&pcap).output().expect("capinfos");
    let end: f64 = String::from_utf8_lossy(&capinfos.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("Last packet time:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(last_packet);
    // nginx logs with millisecond resolution: a request within 2 ms of the end may fall either way.
    let inside = first_req.values().filter(|&&t| t < end - 0.002).count();
    let edge = first_req.values().filter(|&&t| (end - 0.002..=end + 0.002).contains(&t)).count();
    let with_requests = tcp.iter().filter(|c| c.orig_bytes > 0 && c.resp_p == 8080).count();
    println!(
        "http.pcap: {} TCP connections, {} with request bytes; nginx logged {} connections, {} before the capture ended (+{} at the edge)",
        tcp.len(),
        with_requests,
        first_req.len(),
        inside,
        edge
    );
    assert!(
        with_requests >= inside && with_requests <= inside + edge,
        "connections with requests: wirelog {with_requests}, nginx {inside} (+{edge} within 2 ms of the end)"
    );
}
