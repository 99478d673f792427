//! Shared by the end-to-end tests: captures of real traffic made on demand.

// Each test binary includes this module and uses a part of it.
#![allow(dead_code)]

pub mod datastores;
pub mod kept;
pub mod live;
pub mod lo;
pub mod nginx;
pub mod serve;
pub mod socket_pair;
pub mod tls;
pub mod tls_cases;
pub mod tls_ns;
pub mod veth;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

static GENERATE: Mutex<()> = Mutex::new(());

/// A fresh, empty directory for one test: `<target tmp>/<suite>/<name>`.
pub fn scratch(suite: &str, name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(suite).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `gz` decompressed into `dir` under its name without `.gz` (tcpdump and
/// tcpreplay read plain captures only).
pub fn gunzip(gz: &Path, dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let out = dir.join(gz.file_stem().unwrap());
    let data = Command::new("gzip").arg("-dc").arg(gz).output().expect("gzip");
    assert!(data.status.success(), "gzip -dc {}", gz.display());
    std::fs::write(&out, data.stdout).unwrap();
    out
}

/// The demo capture, samples/sample.pcap.gz, decompressed into `dir`.
pub fn sample_pcap(dir: &Path) -> PathBuf {
    gunzip(&Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/sample.pcap.gz"), dir)
}

pub fn peers_dir() -> PathBuf {
    std::env::var_os("WIRELOG_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/wirelog-peers"))
}

/// Path of a generated capture, running the generator if it is missing.
/// Returns None (and the test is skipped) only when not root and not required.
pub fn capture(script: &str, pcap: &str) -> Option<PathBuf> {
    let _guard = GENERATE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = peers_dir();
    let path = dir.join("pcaps").join(pcap);
    if path.exists() {
        return Some(path);
    }
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0"))
        .unwrap_or(false);
    if !is_root {
        let required = std::env::var("WIRELOG_REQUIRE_ALL_TESTS")
            .map(|v| v == "1")
            .unwrap_or(false);
        assert!(
            !required,
            "generating {pcap} needs root (network namespaces)"
        );
        eprintln!("SKIPPED: generating {pcap} needs root; run the suite as root (scripts/test.sh)");
        return None;
    }
    let script_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/bench")
        .join(script);
    let status = Command::new("bash")
        .arg(&script_path)
        .env("PEERS_DIR", &dir)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script_path.display()));
    assert!(status.success(), "{script} failed");
    assert!(path.exists(), "{script} did not produce {}", path.display());
    Some(path)
}

/// `wirelog read --logs LOGS FLAGS...` of `pcap`, into the store `store`
/// (None: `--no-store`); it must succeed. Its output.
pub fn read_pcap(pcap: &Path, logs: &Path, store: Option<&Path>, flags: &[&str]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_wirelog"));
    c.arg("read").args(flags).arg("--logs").arg(logs);
    match store {
        Some(s) => c.arg("--store").arg(s),
        None => c.arg("--no-store"),
    };
    let out = c.arg(pcap).output().expect("run wirelog read");
    assert!(out.status.success(), "wirelog read {}: {}", pcap.display(), live::text(&out));
    out
}

/// `wirelog query KIND --store STORE ARGS... --format csv`; it must
/// succeed. Its CSV.
pub fn query_csv(store: &Path, kind: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["query", kind, "--store"])
        .arg(store)
        .args(args)
        .args(["--format", "csv"])
        .output()
        .expect("run wirelog query");
    assert!(out.status.success(), "wirelog query {kind}: {}", live::text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Rows of a Zeek-style log written by wirelog (`#fields` header, tab-separated).
pub fn read_log(p: &Path) -> Vec<HashMap<String, String>> {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut fields: Vec<String> = Vec::new();
    let mut rows = Vec::new();
    for line in text.lines() {
        if let Some(f) = line.strip_prefix("#fields\t") {
            fields = f.split('\t').map(String::from).collect();
        } else if !line.starts_with('#') {
            rows.push(
                fields
                    .iter()
                    .cloned()
                    .zip(line.split('\t').map(String::from))
                    .collect(),
            );
        }
    }
    rows
}

/// Rows of a Zeek log's text (after its `#fields` header) or of zeek-cut's
/// output (whose first line is the header), by field name; comment and
/// empty lines skipped.
pub fn parse_log(text: &str) -> Vec<HashMap<String, String>> {
    let mut fields: Option<Vec<String>> = None;
    let mut rows = Vec::new();
    for line in text.lines() {
        if line.is_empty() {
            continue;
        }
        if let Some(f) = line.strip_prefix("#fields\t") {
            fields = Some(f.split('\t').map(String::from).collect());
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        match &fields {
            None => fields = Some(line.split('\t').map(String::from).collect()),
            Some(f) => rows.push(f.iter().cloned().zip(line.split('\t').map(String::from)).collect()),
        }
    }
    rows
}

/// A pcap of `n` UDP connections (distinct client addresses), 10 ms apart,
/// each one packet with a 32-byte payload.
pub fn synthetic_pcap(n: u32) -> Vec<u8> {
    synthetic_pcap_at(n, 1_700_000_000)
}

/// [`synthetic_pcap`] starting at `start_s` (Unix seconds).
pub fn synthetic_pcap_at(n: u32, start_s: u64) -> Vec<u8> {
    udp_flows_pcap(n, start_s, 10_000, 9999, &[0x5a; 32])
}

/// A pcap of `n` UDP flows from distinct client addresses (port 40000) to
/// 10.200.0.1 port `dport`, `gap_us` apart from `start_s` (Unix seconds),
/// each one datagram carrying `payload`.
pub fn udp_flows_pcap(n: u32, start_s: u64, gap_us: u64, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + n as usize * (58 + payload.len()));
    out.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes()); // Ethernet
    for i in 0..n {
        let t_us = start_s * 1_000_000 + i as u64 * gap_us;
        let mut f = Vec::with_capacity(74);
        f.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00]);
        let src = [10, (i >> 16) as u8, (i >> 8) as u8, i as u8];
        let dst = [10, 200, 0, 1];
        let udp_len = (8 + payload.len()) as u16;
        let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0];
        ip[2..4].copy_from_slice(&(20 + udp_len).to_be_bytes());
        ip.extend_from_slice(&src);
        ip.extend_from_slice(&dst);
        let sum = checksum(&ip, 0);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        f.extend_from_slice(&ip);
        let mut udp = Vec::with_capacity(udp_len as usize);
        udp.extend_from_slice(&40000u16.to_be_bytes());
        udp.extend_from_slice(&dport.to_be_bytes());
        udp.extend_from_slice(&udp_len.to_be_bytes());
        udp.extend_from_slice(&[0, 0]);
        udp.extend_from_slice(payload);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&src);
        pseudo.extend_from_slice(&dst);
        pseudo.extend_from_slice(&[0, 17]);
        pseudo.extend_from_slice(&udp_len.to_be_bytes());
        let sum = checksum(&udp, sum_words(&pseudo));
        udp[6..8].copy_from_slice(&sum.to_be_bytes());
        f.extend_from_slice(&udp);
        out.extend_from_slice(&((t_us / 1_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&((t_us % 1_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&f);
    }
    out
}

fn sum_words(b: &[u8]) -> u32 {
    b.chunks(2).map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0))).sum()
}

fn checksum(b: &[u8], init: u32) -> u16 {
    let mut s = init + sum_words(b);
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}


/// One IPv4 TCP segment of a synthetic capture ([`tcp_pcap`]).
pub struct TcpSeg {
    pub t_us: u64,
    pub src: ([u8; 4], u16),
    pub dst: ([u8; 4], u16),
    pub flags: u8,
    pub seq: u32,
    pub ack: u32,
    pub window: u16,
    pub payload: Vec<u8>,
}

/// A pcap (Ethernet, microseconds) of `segs` with correct IP and TCP checksums.
pub fn tcp_pcap(segs: &[TcpSeg]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for s in segs {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
        let tcp_len = 20 + s.payload.len();
        let total = (20 + tcp_len) as u16;
        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&total.to_be_bytes());
        ip.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]);
        ip.extend_from_slice(&s.src.0);
        ip.extend_from_slice(&s.dst.0);
        let sum = checksum(&ip, 0);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        f.extend_from_slice(&ip);
        let mut tcp = Vec::with_capacity(tcp_len);
        tcp.extend_from_slice(&s.src.1.to_be_bytes());
        tcp.extend_from_slice(&s.dst.1.to_be_bytes());
        tcp.extend_from_slice(&s.seq.to_be_bytes());
        tcp.extend_from_slice(&s.ack.to_be_bytes());
        tcp.extend_from_slice(&[5 << 4, s.flags]);
        tcp.extend_from_slice(&s.window.to_be_bytes());
        tcp.extend_from_slice(&[0, 0, 0, 0]);
        tcp.extend_from_slice(&s.payload);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&s.src.0);
        pseudo.extend_from_slice(&s.dst.0);
        pseudo.extend_from_slice(&[0, 6]);
        pseudo.extend_from_slice(&(tcp_len as u16).to_be_bytes());
        let sum = checksum(&tcp, sum_words(&pseudo));
        tcp[16..18].copy_from_slice(&sum.to_be_bytes());
        f.extend_from_slice(&tcp);
        out.extend_from_slice(&((s.t_us / 1_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&((s.t_us % 1_000_000) as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(&f);
    }
    out
}

/// Every `.parquet` file below `dir` (a store, or one kind's directory of it).
pub fn parquet_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            parquet_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "parquet") {
            out.push(p);
        }
    }
}
