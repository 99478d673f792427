//! Flows against connections and against tshark, on real captures.
//!
//! - Totals of flows.log (packets and IP bytes, both directions) equal the
//!   totals of conn.log, and each connection is counted once in its flow
//!   (with buckets longer than the capture), whatever the bucket length.
//! - Conn records summed per 5-tuple direction equal what tshark counts for
//!   the same file (TCP packets and IP bytes per direction).

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

type Row = HashMap<String, String>;

fn n(r: &Row, k: &str) -> u64 {
    r[k].parse().unwrap_or(0)
}

fn run(pcap: &Path, interval: &str, tag: &str) -> (Vec<Row>, Vec<Row>) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("flows-{tag}-{interval}"));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["read", "-C", "--quiet", "--no-store", "--flow-interval", interval, "--logs"])
        .arg(&dir)
        .arg(pcap)
        .output()
        .expect("run wirelog");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (common::read_log(&dir.join("conn.log")), common::read_log(&dir.join("flows.log")))
}

fn check_flows_equal_conns(pcap: &Path, tag: &str) {
    for interval in ["24h", "10s"] {
        let (conns, flows) = run(pcap, interval, tag);
        let c_pkts: u64 = conns.iter().map(|r| n(r, "orig_pkts") + n(r, "resp_pkts")).sum();
        let c_bytes: u64 = conns.iter().map(|r| n(r, "orig_ip_bytes") + n(r, "resp_ip_bytes")).sum();
        let f_pkts: u64 = flows.iter().map(|r| n(r, "pkts_out") + n(r, "pkts_in")).sum();
        let f_bytes: u64 = flows.iter().map(|r| n(r, "bytes_out") + n(r, "bytes_in")).sum();
        println!("{tag} ({interval} buckets): {} conns, {c_pkts} packets, {c_bytes} bytes; {} flows, {f_pkts} packets, {f_bytes} bytes", conns.len(), flows.len());
        assert_eq!((f_pkts, f_bytes), (c_pkts, c_bytes), "{tag}: flow totals vs conn totals ({interval} buckets)");
        // Per direction too: client -> server bytes are the originators' bytes.
        let c_out: u64 = conns.iter().map(|r| n(r, "orig_ip_bytes")).sum();
        let f_out: u64 = flows.iter().map(|r| n(r, "bytes_out")).sum();
        assert_eq!(f_out, c_out, "{tag}: client->server bytes ({interval} buckets)");
        if interval == "24h" {
            let counted: u64 = flows.iter().map(|r| n(r, "conns")).sum();
            assert_eq!(counted, conns.len() as u64, "{tag}: every connection counted once in its flow");
        }
    }
}

/// TCP packets and IP bytes per (src, sport, dst, dport) direction, from tshark.
fn tshark_tcp_directions(pcap: &Path) -> HashMap<String, (u64, u64)> {
    let out = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(pcap)
        .args([
            "-Y", "tcp", "-T", "fields", "-e", "ip.src", "-e", "ipv6.src", "-e", "tcp.srcport", "-e", "ip.dst", "-e", "ipv6.dst",
            "-e", "tcp.dstport", "-e", "ip.len", "-e", "ipv6.plen",
        ])
        .output()
        .expect("tshark");
    let mut m: HashMap<String, (u64, u64)> = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 8 {
            continue;
        }
        let len: u64 = if !f[6].is_empty() { f[6].parse().unwrap_or(0) } else { f[7].parse::<u64>().unwrap_or(0) + 40 };
        let key = format!("{}{} {} {}{} {}", f[0], f[1], f[2], f[3], f[4], f[5]);
        let e = m.entry(key).or_default();
        e.0 += 1;
        e.1 += len;
    }
    m
}

fn check_conns_equal_tshark(pcap: &Path, tag: &str) {
    let (conns, _) = run(pcap, "24h", tag);
    let mut ours: HashMap<String, (u64, u64)> = HashMap::new();
    for r in conns.iter().filter(|r| r["proto"] == "tcp") {
        let fwd = format!("{} {} {} {}", r["id.orig_h"], r["id.orig_p"], r["id.resp_h"], r["id.resp_p"]);
        let rev = format!("{} {} {} {}", r["id.resp_h"], r["id.resp_p"], r["id.orig_h"], r["id.orig_p"]);
        for (k, p, b) in [(fwd, "orig_pkts", "orig_ip_bytes"), (rev, "resp_pkts", "resp_ip_bytes")] {
            if n(r, p) > 0 {
                let e = ours.entry(k).or_default();
                e.0 += n(r, p);
                e.1 += n(r, b);
            }
        }
    }
    let theirs = tshark_tcp_directions(pcap);
    println!("{tag}: {} TCP directions (wirelog), {} (tshark)", ours.len(), theirs.len());
    let mut diffs: Vec<String> = theirs
        .iter()
        .filter(|(k, v)| ours.get(*k) != Some(v))
        .map(|(k, v)| format!("{k}: tshark {v:?} wirelog {:?}", ours.get(k)))
        .collect();
    diffs.extend(ours.keys().filter(|k| !theirs.contains_key(*k)).map(|k| format!("{k}: only in wirelog")));
    diffs.sort();
    assert!(diffs.is_empty(), "{tag}: {} directions differ:\n{}", diffs.len(), diffs.iter().take(20).cloned().collect::<Vec<_>>().join("\n"));
}

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/sample.pcap.gz")
}

#[test]
fn demo_capture() {
    check_flows_equal_conns(&sample(), "sample");
    check_conns_equal_tshark(&sample(), "sample");
}

#[test]
fn mixed_capture() {
    let Some(p) = common::capture("gen_mixed.sh", "mixed.pcap") else { return };
    check_flows_equal_conns(&p, "mixed");
    check_conns_equal_tshark(&p, "mixed");
}

#[test]
fn http_capture() {
    let Some(p) = common::capture("gen_http.sh", "http.pcap") else { return };
    check_flows_equal_conns(&p, "http");
    check_conns_equal_tshark(&p, "http");
}

#[test]
fn zeek_traces() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/zeek");
    for (case, pcap) in [("ssh_half_duplex", "ssh.client-side-half-duplex.pcap"), ("ftp_ipv6", "ipv6.pcap"), ("llc_fddi_large", "llc.pcap")] {
        check_flows_equal_conns(&dir.join(case).join(pcap), case);
    }
}
