//! Resources checked before they are taken: sizes and counts out of range
//! are errors naming the option, a ring far above the machine's available
//! memory is refused before anything is allocated (the process's peak RSS,
//! measured by GNU time, stays small), and `--where` type errors name the
//! field and its type.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_wirelog");

/// Exit code, stderr and peak RSS in KiB of `wirelog args` (run under GNU time).
fn run_measured(args: &[&str]) -> (Option<i32>, String, u64) {
    let report = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("resources-time-{}-{}", std::process::id(), args.join("_").len()));
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&report)
        .arg(BIN)
        .args(args)
        .output()
        .expect("GNU time (Debian package `time`) runs wirelog");
    let rss: u64 = std::fs::read_to_string(&report)
        .unwrap_or_default()
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .expect("GNU time reports the peak RSS");
    let _ = std::fs::remove_file(&report);
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned(), rss)
}

fn mem_available() -> u64 {
    let m = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = m.lines().find(|l| l.starts_with("MemAvailable:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

fn sample() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/sample.pcap.gz").display().to_string()
}

#[test]
fn oversized_ring_is_refused_before_any_allocation() {
    for size in ["1T".to_string(), format!("{}", mem_available() * 2)] {
        let started = Instant::now();
        let (code, err, rss_kib) = run_measured(&["capture", "-i", "lo", "--no-store", "--ring-size", &size]);
        assert_eq!(code, Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(err.contains("--ring-size") && err.contains("memory available"), "{err}");
        assert!(err.contains("--force-ring-size"), "the message says how to override: {err}");
        // Nothing was taken: the process exits at once with the RSS of a
        // program that allocated nothing (a ring would show as its size).
        assert!(rss_kib < 32 * 1024, "peak RSS {rss_kib} KiB for --ring-size {size}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}

#[test]
fn zero_and_absurd_numbers_name_their_option() {
    let s = sample();
    let cases: &[(&[&str], &str)] = &[
        (&["capture", "-i", "lo", "--no-store", "--ring-size", "0"], "--ring-size 0: must be at least 1 MiB"),
        (&["capture", "-i", "lo", "--no-store", "--workers", "2", "--ring-size", "1M"], "--ring-size 1 MiB: must be between 2 MiB"),
        (&["capture", "-i", "lo", "--no-store", "--workers", "0"], "--workers 0: must be at least 1"),
        (&["capture", "-i", "lo", "--no-store", "--workers", "100000"], "--workers 100000: must be between 1 and 256"),
        (&["capture", "-i", "lo", "--no-store", "--snaplen", "0"], "--snaplen 0"),
        (&["capture", "-i", "lo", "--no-store", "--snaplen", "99999999"], "--snaplen 99999999: must be between 64 and 262144"),
        (&["capture", "-i", "lo", "--no-store", "--duration", "0"], "--duration 0"),
        (&["read", "--no-store", "--max-connections", "0", &s], "--max-connections 0: must be at least 1"),
        (&["read", "--no-store", "--max-connections", "99999999999", &s], "--max-connections 99999999999: must be between"),
        (&["read", "--no-store", "--tcp-timeout", "0", &s], "--tcp-timeout 0: must be at least 1s"),
        (&["read", "--no-store", "--udp-timeout", "0", &s], "--udp-timeout 0"),
        (&["read", "--no-store", "--flow-interval", "0", &s], "--flow-interval 0"),
        (&["read", "--no-store", "--flow-interval", "30d", &s], "--flow-interval 30d: must be between 1s and 1d"),
        (&["read", "--no-store", "--frag-timeout", "0", &s], "--frag-timeout 0"),
        (&["read", "--no-store", "--stream-memory", "0", &s], "--stream-memory 0"),
        (&["read", "--retain-size", "0", &s], "--retain-size 0"),
        (&["read", "--retain", "0", &s], "--retain 0"),
    ];
    for (args, want) in cases {
        let out = Command::new(BIN).args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: want {want:?}, got {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn where_type_errors_name_the_field_and_its_type() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("resources-where-{}", std::process::id()));
    let cases = [
        ("http", "status_code >= abc", "status_code is a number (0-65535), found 'abc'"),
        ("conns", "resp_p = https", "resp_p is a port number (0-65535), found 'https'"),
        ("conns", "duration > soon", "duration is a duration"),
        ("flows", "sip = somewhere", "sip is an IP address or CIDR"),
    ];
    for (kind, expr, want) in cases {
        let out = Command::new(BIN)
            .args(["query", kind, "--store", dir.to_str().unwrap(), "--where", expr])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{expr}");
        assert!(err.contains(want), "{expr}: want {want:?}, got {err}");
    }
}
