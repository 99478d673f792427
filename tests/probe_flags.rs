//! `read` and `capture` share one set of probe flags (checksums, fragments,
//! `--skip-empty-tcp`, tracking, parsing) with one meaning: both commands
//! accept the same ones with the same defaults, and `read --skip-empty-tcp`
//! keeps exactly the packets tcpdump keeps for the filter `capture
//! --skip-empty-tcp` attaches in the kernel, with the same bytes and states.

mod common;

use common::sample_pcap;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn wirelog(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run wirelog")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    common::scratch("probe_flags", name)
}

/// Each long option of a subcommand's help with its default (`None` when it
/// shows none).
fn options(sub: &str) -> BTreeMap<String, Option<String>> {
    let help = text(&wirelog(&[sub, "--help"]).stdout);
    let mut out = BTreeMap::new();
    let mut last: Option<String> = None;
    for line in help.lines() {
        let t = line.trim_start();
        if t.starts_with('-') {
            if let Some(long) = t.split([' ', ',', '=']).find(|w| w.starts_with("--")) {
                out.insert(long.to_string(), None);
                last = Some(long.to_string());
            }
        } else if let (Some(l), Some(d)) = (&last, t.strip_prefix("[default: ")) {
            out.insert(l.clone(), Some(d.trim_end_matches(']').to_string()));
        }
    }
    out
}

/// Every option that decides what the probe makes of packets is in both
/// commands, with the same default.
#[test]
fn read_and_capture_share_the_probe_flags() {
    let (read, capture) = (options("read"), options("capture"));
    let probe = [
        "--checksums",
        "--ignore-checksums",
        "--frag-timeout",
        "--skip-empty-tcp",
        "--memory",
        "--max-connections",
        "--tcp-timeout",
        "--udp-timeout",
        "--icmp-timeout",
        "--report-gaps-for-partial",
        "--server-ports",
        "--dns-timeout",
        "--flow-interval",
        "--no-parse",
        "--ports",
        "--no-detect",
        "--redact",
        "--http-header",
        "--stream-memory",
    ];
    for o in probe {
        assert!(read.contains_key(o), "read lacks {o}");
        assert_eq!(read.get(o), capture.get(o), "{o}: read and capture differ");
    }
    assert_eq!(read["--checksums"].as_deref(), Some("auto"));
    assert_eq!(read["--frag-timeout"].as_deref(), Some("60s"));
    // Checked before any interface is looked up: no privileges needed.
    let o = wirelog(&["capture", "-i", "lo", "--frag-timeout", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--frag-timeout"), "{}", text(&o.stderr));
}

fn have_tcpdump() -> bool {
    Command::new("tcpdump").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// conn.log rows by uid: (fields by name).
fn conns(dir: &Path) -> (Vec<String>, BTreeMap<String, BTreeMap<String, String>>) {
    let log = std::fs::read_to_string(dir.join("conn.log")).unwrap();
    let fields: Vec<String> = log
        .lines()
        .find_map(|l| l.strip_prefix("#fields\t"))
        .expect("#fields")
        .split('\t')
        .map(String::from)
        .collect();
    let mut rows = BTreeMap::new();
    for l in log.lines().filter(|l| !l.starts_with('#')) {
        let row: BTreeMap<String, String> =
            fields.iter().cloned().zip(l.split('\t').map(String::from)).collect();
        rows.insert(row["uid"].clone(), row);
    }
    (fields, rows)
}

#[test]
fn read_skip_empty_tcp_is_captures_kernel_filter() {
    let dir = scratch("skip_empty_tcp");
    let pcap = sample_pcap(&dir);
    let p = pcap.to_str().unwrap();
    let run = |name: &str, extra: &[&str]| {
        let logs = dir.join(name);
        let mut args = vec!["read", "--no-store", "--seed", "1", "--logs", logs.to_str().unwrap()];
        args.extend_from_slice(extra);
        args.push(p);
        let o = wirelog(&args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        (logs, text(&o.stderr))
    };
    let (all, _) = run("all", &[]);
    let (skipped, summary) = run("skipped", &["--skip-empty-tcp"]);

    if have_tcpdump() {
        let o = Command::new("tcpdump")
            .args(["-r", p, "--count", wirelog_capture::bpf::SKIP_EMPTY_TCP])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        let want: u64 = text(&o.stdout).split_whitespace().next().unwrap().parse().unwrap();
        assert!(
            summary.contains(&format!("({want} matched the filter ")),
            "tcpdump keeps {want}: {summary}"
        );
    } else {
        eprintln!("tcpdump missing: the packet count is not compared");
    }

    let (f_all, all) = conns(&all);
    let (f_skipped, skipped) = conns(&skipped);
    assert!(!f_all.contains(&"empty_tcp_skipped".to_string()));
    assert_eq!(f_skipped.last().map(String::as_str), Some("empty_tcp_skipped"));
    assert_eq!(all.len(), skipped.len());
    let mut fewer = 0;
    for (uid, a) in &all {
        let s = &skipped[uid];
        for f in ["id.orig_h", "id.orig_p", "id.resp_h", "id.resp_p", "proto", "service", "orig_bytes", "resp_bytes", "conn_state"] {
            assert_eq!(a[f], s[f], "{uid} {f}");
        }
        let pkts = |r: &BTreeMap<String, String>| r["orig_pkts"].parse::<u64>().unwrap() + r["resp_pkts"].parse::<u64>().unwrap();
        assert!(pkts(s) <= pkts(a), "{uid}");
        fewer += (pkts(s) < pkts(a)) as u32;
        assert_eq!(s["empty_tcp_skipped"], if a["proto"] == "tcp" { "T" } else { "-" }, "{uid}");
    }
    assert!(fewer > 0, "the sample's pure ACKs were not skipped");
}
