//! Bad input through the binary: the read goes on where it can, each problem
//! is reported once per file naming the file and the offset, the exit code is
//! non-zero only when nothing could be read, and nothing panics.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

mod common;

fn wirelog(args: &[&str], stdin: Option<&[u8]>) -> Output {
    // The store is not what these tests are about (tests/store.rs is); keep
    // parallel runs from sharing a data directory.
    let mut all: Vec<&str> = args.to_vec();
    if all.first() == Some(&"read") {
        all.insert(1, "--no-store");
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(&all)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run wirelog");
    if let Some(data) = stdin {
        child.stdin.take().unwrap().write_all(data).unwrap();
    }
    child.wait_with_output().unwrap()
}

fn records(o: &Output) -> usize {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .count()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/sample.pcap.gz")
}

fn sample_bytes() -> Vec<u8> {
    let out = Command::new("gzip")
        .arg("-dc")
        .arg(sample())
        .output()
        .expect("gzip");
    assert!(out.status.success());
    out.stdout
}

fn temp(name: &str, data: &[u8]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bad_input");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, data).unwrap();
    p
}

#[test]
fn usage_errors_and_a_clean_read() {
    let o = wirelog(&["read", "--quiet"], None);
    assert_eq!(
        o.status.code(),
        Some(2),
        "no capture given is a usage error"
    );
    assert!(stderr(&o).contains("<CAPTURE>"), "{}", stderr(&o));
    let o = wirelog(&["read", "--tcp-timeout", "5 parsecs", "x.pcap"], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown unit"), "{}", stderr(&o));
    // The baseline: the whole demo capture reads without a problem.
    let o = wirelog(&["read", sample().to_str().unwrap()], None);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(records(&o), 29, "{}", stderr(&o));
    assert!(!stderr(&o).contains("skipped"), "{}", stderr(&o));
}

#[test]
fn truncated_file_keeps_what_was_read() {
    let full = sample_bytes();
    // Cut 7 bytes into the 200th record: the 199 packets before it must all be used.
    let mut off = 24;
    for _ in 0..199 {
        off += 16 + u32::from_le_bytes(full[off + 8..off + 12].try_into().unwrap()) as usize;
    }
    let cut = temp("truncated.pcap", &full[..off + 7]);
    let o = wirelog(&["read", cut.to_str().unwrap()], None);
    let err = stderr(&o);
    assert!(o.status.success(), "exit {:?}: {err}", o.status);
    assert!(
        err.contains(&format!("truncated.pcap: truncated file at byte {off}")),
        "{err}"
    );
    assert_eq!(
        err.matches("truncated file").count(),
        1,
        "one line per problem kind: {err}"
    );
    assert!(err.contains("wirelog: 199 packets, "), "{err}");
    assert!(records(&o) > 0, "connections before the cut are logged");
}

#[test]
fn garbage_alone_fails_garbage_among_good_files_does_not() {
    let garbage = temp(
        "garbage.pcap",
        b"this is not a capture file at all, just text\n",
    );
    let o = wirelog(&["read", garbage.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("garbage.pcap: not a pcap or pcapng file"),
        "{}",
        stderr(&o)
    );

    let o = wirelog(
        &[
            "read",
            garbage.to_str().unwrap(),
            sample().to_str().unwrap(),
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("garbage.pcap"), "{}", stderr(&o));
    assert_eq!(records(&o), 29);

    let o = wirelog(&["read", "/nonexistent/trace.pcap"], None);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("/nonexistent/trace.pcap: No such file or directory"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn corrupt_records_and_unknown_link_type_are_reported_once() {
    // A pcap of the sample's packets with an unknown link type (147, USER0).
    let mut data = sample_bytes();
    data[20..24].copy_from_slice(&147u32.to_le_bytes());
    let odd = temp("user0.pcap", &data);
    let o = wirelog(&["read", odd.to_str().unwrap()], None);
    let err = stderr(&o);
    assert!(
        o.status.success(),
        "packets were read, only not decodable: {err}"
    );
    assert!(
        err.contains("user0.pcap: 341 packet(s) skipped: unknown link type, first is packet 1"),
        "{err}"
    );
    assert_eq!(records(&o), 0);

    // A record header with an absurd length in the middle of the file.
    let mut data = sample_bytes();
    let mut off = 24;
    for _ in 0..100 {
        let caplen = u32::from_le_bytes(data[off + 8..off + 12].try_into().unwrap()) as usize;
        off += 16 + caplen;
    }
    data[off + 8..off + 12].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
    let bad = temp("lying.pcap", &data);
    let o = wirelog(&["read", bad.to_str().unwrap()], None);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "lying.pcap: oversized packet record at byte {off}"
        )),
        "{err}"
    );
    assert!(records(&o) > 0);
}

#[test]
fn stdin_and_gzip() {
    let gz = std::fs::read(sample()).unwrap();
    let o = wirelog(&["read", "-"], Some(&gz));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(records(&o), 29);
    let o = wirelog(
        &["read", "--log-format", "json", "-"],
        Some(&sample_bytes()),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(out.lines().count(), 29);
    assert!(out
        .lines()
        .all(|l| l.starts_with("{\"ts\":") && l.ends_with('}')));
}

#[test]
fn logs_directory_gets_conn_log() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("bad_input/logs");
    let _ = std::fs::remove_dir_all(&dir);
    let o = wirelog(
        &[
            "read",
            "--quiet",
            "--logs",
            dir.to_str().unwrap(),
            sample().to_str().unwrap(),
        ],
        None,
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    let log = std::fs::read_to_string(dir.join("conn.log")).unwrap();
    assert!(log.starts_with("#separator \\x09\n"));
    assert!(log.lines().last().unwrap().starts_with("#close\t"));
    assert_eq!(log.lines().filter(|l| !l.starts_with('#')).count(), 29);

    let o = wirelog(
        &[
            "read",
            "--logs",
            "/proc/wirelog-cannot-write-here",
            sample().to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("cannot create log directory /proc/wirelog-cannot-write-here"),
        "{}",
        stderr(&o)
    );
}

/// With a tiny memory budget, connections are evicted (counted in the summary),
/// and every packet is still in exactly one written record.
#[test]
fn connection_budget_evicts_and_loses_nothing() {
    let packets_in = |o: &Output| -> u64 {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                f[16].parse::<u64>().unwrap() + f[18].parse::<u64>().unwrap()
            })
            .sum()
    };
    let full = wirelog(&["read", sample().to_str().unwrap()], None);
    let small = wirelog(
        &["read", "--max-connections", "4", sample().to_str().unwrap()],
        None,
    );
    assert!(small.status.success(), "{}", stderr(&small));
    let evicted: u64 = stderr(&small)
        .split(" evicted")
        .next()
        .and_then(|s| s.rsplit('(').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no eviction count: {}", stderr(&small)));
    assert!(evicted > 0, "{}", stderr(&small));
    assert!(records(&small) >= records(&full));
    assert_eq!(
        packets_in(&small),
        packets_in(&full),
        "no packet lost to eviction"
    );
}

/// gzip: a problem's offset is in the decompressed stream, and says so.
#[test]
fn a_gzip_files_offsets_say_they_are_in_the_decompressed_stream() {
    let full = sample_bytes();
    let mut off = 24;
    for _ in 0..199 {
        off += 16 + u32::from_le_bytes(full[off + 8..off + 12].try_into().unwrap()) as usize;
    }
    let cut = temp("truncated-gz.pcap", &full[..off + 7]);
    let gz = Command::new("gzip").arg("-kf").arg(&cut).status().expect("gzip");
    assert!(gz.success());
    let o = wirelog(&["read", cut.with_extension("pcap.gz").to_str().unwrap()], None);
    let err = stderr(&o);
    assert!(o.status.success(), "exit {:?}: {err}", o.status);
    assert!(
        err.contains(&format!("truncated-gz.pcap.gz: truncated file at byte {off} of the decompressed stream")),
        "{err}"
    );
}

/// A bad-checksum warning names the file whose packets have them, and
/// only that one.
#[test]
fn bad_checksum_warnings_name_the_file() {
    let good = common::synthetic_pcap(50);
    let mut bad = good.clone();
    // Each record: 16-byte header, then Ethernet (14), IPv4 (20), UDP whose
    // checksum is at bytes 6..8: flip it (never to the "none" value 0).
    let mut at = 24;
    while at < bad.len() {
        let len = u32::from_le_bytes(bad[at + 8..at + 12].try_into().unwrap()) as usize;
        bad[at + 16 + 14 + 20 + 6] ^= 0x01;
        at += 16 + len;
    }
    let (g, b) = (temp("checksums-good.pcap", &good), temp("checksums-bad.pcap", &bad));
    let o = wirelog(&["read", g.to_str().unwrap(), b.to_str().unwrap()], None);
    let err = stderr(&o);
    assert!(o.status.success(), "exit {:?}: {err}", o.status);
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("bad checksums")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains("checksums-bad.pcap: 50 of 50 IP packets have bad checksums"), "{err}");
}
