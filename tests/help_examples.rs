//! The examples in `wirelog query --help` and `wirelog pcap --help` run as
//! written (through `sh -c`, in a directory holding the default store
//! `wirelog-data`), and each succeeds: the store is the demo capture
//! (samples/sample.pcap.gz) moved to the last hour, so `--last 1h` finds
//! it, read with `--pcap-dir` (recorded in the store, which is how the
//! `pcap` examples find the packets) and `--seed 1` (so the uid example
//! names a connection of it).

mod common;

use common::{sample_pcap, scratch};
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_wirelog");

/// The example command lines of a subcommand's `--help`: the lines after
/// `Examples:` that start with `wirelog `, without a trailing remark in
/// parentheses set off by spaces.
fn examples(sub: &str) -> Vec<String> {
    let out = Command::new(BIN).args([sub, "--help"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut inside = false;
    let mut v = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t == "Examples:" {
            inside = true;
            continue;
        }
        if inside {
            if !t.starts_with("wirelog ") {
                inside = false;
                continue;
            }
            let cmd = match t.find("   (") {
                Some(i) => t[..i].trim_end(),
                None => t,
            };
            v.push(cmd.to_string());
        }
    }
    v
}

/// The demo capture with every timestamp moved so that its last packet was
/// ten minutes ago (classic little-endian microsecond pcap: a 24-byte file
/// header, then 16-byte record headers whose first field is the seconds).
fn recent_copy(pcap: &Path, out: &Path) {
    let mut b = std::fs::read(pcap).unwrap();
    assert_eq!(&b[..4], &[0xd4, 0xc3, 0xb2, 0xa1], "the demo capture is a classic LE pcap");
    let mut offsets = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        offsets.push(at);
        let incl = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + incl;
    }
    let last = offsets.iter().map(|&o| u32::from_le_bytes(b[o..o + 4].try_into().unwrap())).max().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as u32;
    let delta = now - 600 - last;
    for o in offsets {
        let ts = u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) + delta;
        b[o..o + 4].copy_from_slice(&ts.to_le_bytes());
    }
    std::fs::write(out, b).unwrap();
}

#[test]
fn query_and_pcap_help_examples_run_as_written() {
    let dir = scratch("help_examples", "run");
    let recent = dir.join("recent.pcap");
    recent_copy(&sample_pcap(&dir.join("in")), &recent);
    let read = Command::new(BIN)
        .current_dir(&dir)
        .args(["read", "--quiet", "--seed", "1", "--pcap-dir", "wirelog-pcap", "--logs", "logs", "recent.pcap"])
        .output()
        .unwrap();
    assert!(read.status.success(), "{}", String::from_utf8_lossy(&read.stderr));

    let mut ran = 0;
    for sub in ["query", "pcap"] {
        let list = examples(sub);
        assert!(list.len() >= 3, "{sub} --help has its examples: {list:?}");
        for cmd in list {
            // `wirelog` on PATH is the binary under test.
            let bin_dir = Path::new(BIN).parent().unwrap();
            let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
            let o = Command::new("sh").current_dir(&dir).env("PATH", path).args(["-c", &cmd]).output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "{cmd}: exit {:?}\n{err}", o.status.code());
            if sub == "pcap" {
                // Each writes packets: its file has more than the header.
                let file = cmd.rsplit(' ').next().unwrap();
                let len = std::fs::metadata(dir.join(file)).unwrap().len();
                assert!(len > 24, "{cmd}: {len} bytes\n{err}");
                assert!(err.contains(" of them have packets in ") && !err.contains(" 0 of them"), "{cmd}: {err}");
            } else {
                assert!(!o.stdout.is_empty(), "{cmd}: no output");
            }
            eprintln!("ran: {cmd}");
            ran += 1;
        }
    }
    assert!(ran >= 15);
}

/// The `capture --help` example of `--cpu-budget` runs as written (as root:
/// it opens a packet socket on lo; skipped otherwise unless every test is
/// required), says its budget and what it shed.
#[test]
fn capture_cpu_budget_example_runs_as_written() {
    let is_root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    if !is_root {
        assert!(std::env::var("WIRELOG_REQUIRE_ALL_TESTS").map_or(true, |v| v != "1"), "capturing on lo needs root");
        eprintln!("SKIPPED: capturing on lo needs root");
        return;
    }
    let list: Vec<String> = examples("capture").into_iter().filter(|c| c.contains("--cpu-budget")).collect();
    assert_eq!(list.len(), 1, "capture --help shows --cpu-budget once: {list:?}");
    let dir = scratch("help_examples", "capture");
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let o = Command::new("sh").current_dir(&dir).env("PATH", path).args(["-c", &list[0]]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{}: exit {:?}\n{err}", list[0], o.status.code());
    assert!(err.contains("wirelog: cpu budget: 5% of a core for the whole process"), "{err}");
    assert!(err.contains("wirelog: cpu budget 5% of a core: the process used "), "{err}");
}
