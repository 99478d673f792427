//! A memory budget in bytes: 1 M distinct connections read with
//! `--memory 128M` keep the peak RSS within the budget plus a documented
//! constant (BENCHMARKS.md, "Memory budget"), and the connections the budget
//! has no room for are evicted and counted.

mod common;

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_wirelog");
/// RSS beyond --memory allowed: the binary, the output thread's batches and
/// the allocator (measured: BENCHMARKS.md).
const CONSTANT_MIB: u64 = 64;

#[test]
fn one_million_connections_stay_within_the_memory_budget() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("memory-budget-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("1m.pcap");
    std::fs::write(&pcap, common::synthetic_pcap(1_000_000)).unwrap();
    let report = dir.join("time");
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&report)
        .arg(BIN)
        .args(["read", "--no-store", "--memory", "128M", "--udp-timeout", "30d"])
        .arg(&pcap)
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let rss_kib: u64 = std::fs::read_to_string(&report).unwrap().trim().lines().last().unwrap().parse().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let limit: u64 = err
        .lines()
        .find_map(|l| l.strip_prefix("wirelog: memory budget 128 MiB: up to "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the connection limit is printed");
    assert!(limit < 1_000_000, "{err}");
    let evicted: u64 = err
        .lines()
        .find_map(|l| l.split(" connections (").nth(1))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("evictions are counted");
    assert!(evicted >= 1_000_000 - limit, "{evicted} evicted with room for {limit}: {err}");
    eprintln!("peak RSS {} MiB for 1M connections at --memory 128M", rss_kib / 1024);
    assert!(rss_kib / 1024 <= 128 + CONSTANT_MIB, "peak RSS {} MiB > 128 MiB + {CONSTANT_MIB} MiB", rss_kib / 1024);
}
