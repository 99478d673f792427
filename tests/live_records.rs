//! `capture --listen` answers over the records of the running capture that
//! are not in the store yet: a veth pair between two network namespaces
//! (made per test, deleted on drop), the demo capture replayed into one end,
//! `wirelog capture` on the other with its store flushed every 2 s (so the
//! reads cross flushes). The Overview in headless Chromium shows connections
//! within 10 s of the first packet without a reload, and once every
//! connection has ended the API's counts (records in memory and in the
//! store, each once) equal the capture's final lines; after the capture the
//! store alone gives the same counts.
//!
//! Needs root, `ip netns`, tcpreplay, curl and chromium (skipped otherwise,
//! unless WIRELOG_REQUIRE_ALL_TESTS=1).

mod common;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::live::{numbers, LiveCapture, BIN};
use common::veth::{requirements, VethPair};

/// The veth pair of this file's tests, or a skip.
fn netns() -> Option<VethPair> {
    requirements("live_records", &[("ip", "-V"), ("tcpreplay", "--version"), ("curl", "--version"), ("chromium", "--version")]).then(|| VethPair::new("r"))
}

/// The line of `stderr` starting with `prefix`, without it.
fn line_after<'a>(stderr: &'a str, prefix: &str) -> Option<&'a str> {
    stderr.lines().rev().find_map(|l| l.strip_prefix(prefix))
}

/// "SF 12, S0 3" -> {SF: 12, S0: 3}.
fn named_counts(list: &str) -> BTreeMap<String, u64> {
    list.split(", ")
        .filter_map(|p| p.rsplit_once(' '))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap_or_else(|_| panic!("bad count {v:?} in {list:?}"))))
        .collect()
}

#[test]
fn the_overview_shows_a_running_capture_and_counts_each_record_once() {
    let Some(ns) = netns() else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR")).join("live-records");
    let _ = std::fs::remove_dir_all(&dir);
    let pcap = common::sample_pcap(&dir);
    let store = dir.join("store");
    let args: Vec<&OsStr> = [
        "--store", store.to_str().unwrap(), "--workers", "2", "--stats-interval", "0",
        "--tcp-timeout", "1s", "--udp-timeout", "1s", "--icmp-timeout", "1s",
        "--store-flush", "2s", "--listen", "127.0.0.1:9182",
    ]
    .into_iter()
    .map(OsStr::new)
    .collect();
    let cap = LiveCapture::start(&ns.a, &ns.va, &args);
    ns.wait_answer("http://127.0.0.1:9182/api/health", "the server");

    let out_dir = root.join("target/test-artifacts/ui-live-records");
    let mut ui = Command::new("ip")
        .args(["netns", "exec", &ns.a, "timeout", "300", "python3"])
        .arg(root.join("tests/live_overview.py"))
        .arg("http://127.0.0.1:9182")
        .arg(&out_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to_ui = ui.stdin.take().unwrap();
    let mut from_ui = BufReader::new(ui.stdout.take().unwrap());
    let mut line = String::new();
    let mut next = |line: &mut String| {
        line.clear();
        from_ui.read_line(line).unwrap();
        println!("ui: {}", line.trim_end());
        line.trim_end().to_string()
    };
    assert_eq!(next(&mut line), "ready");
    writeln!(to_ui, "go").unwrap();
    ns.replay(&pcap);
    let shown = next(&mut line);
    let secs: f64 = shown.strip_prefix("shown_after_s ").and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{shown}"));
    assert!(secs < 10.0, "the Overview showed connections {secs} s after the first packet");

    // Every connection ended (1 s timeouts) and in the records: the count
    // stops moving (and the store flushes every 2 s meanwhile).
    let count = || -> u64 {
        let t = ns.get("http://127.0.0.1:9182/api/query?kind=conns&by=proto&top=0").expect("query");
        let v: serde_json::Value = serde_json::from_str(&t).unwrap();
        v["total"]["conns"].as_u64().unwrap()
    };
    let (mut last, mut same) = (u64::MAX, 0);
    let t0 = Instant::now();
    while same < 4 {
        std::thread::sleep(Duration::from_millis(1000));
        let n = count();
        same = if n == last && n > 0 { same + 1 } else { 0 };
        last = n;
        assert!(t0.elapsed() < Duration::from_secs(60), "the connection count did not settle ({n})");
    }
    writeln!(to_ui, "settled").unwrap();
    let counts = next(&mut line);
    let counts: serde_json::Value = serde_json::from_str(counts.strip_prefix("counts ").unwrap_or_else(|| panic!("{counts}"))).unwrap();
    assert!(ui.wait().unwrap().success(), "the UI checks failed (see above)");
    let health: serde_json::Value = serde_json::from_str(&ns.get("http://127.0.0.1:9182/api/health").unwrap()).unwrap();
    assert_eq!(health["records_in_memory"]["evicted"], 0, "{health}");
    // The counts above held across the store's flushes (every 2 s).
    assert!(health["live"]["store"]["files"].as_u64().is_some_and(|f| f > 0), "no flush during the reads: {health}");

    let err = cap.stop();
    // "stopped by SIGINT after 9.1 s: 120 connections, 40 flow records, 30 transactions"
    let stopped = line_after(&err, "wirelog: stopped by ").expect("a stopped line");
    let n = numbers(stopped.split_once(": ").expect("stopped line").1);
    assert!(n[0] > 0 && n[2] > 0, "{stopped}");
    assert_eq!(counts["conns"].as_u64(), Some(n[0]), "connections in the Overview's range vs {stopped}");
    let states = named_counts(line_after(&err, "wirelog: conn_state: ").expect("a conn_state line"));
    let api_states: BTreeMap<String, u64> =
        counts["states"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap())).collect();
    assert_eq!(api_states, states.into_iter().filter(|(_, v)| *v > 0).collect());
    let per_proto = named_counts(line_after(&err, "wirelog: transactions: ").expect("a transactions line"));
    let api_tx: BTreeMap<String, u64> =
        counts["transactions"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap())).collect();
    assert_eq!(api_tx, per_proto.into_iter().filter(|(_, v)| *v > 0).collect());

    // The store alone, after the capture: the same records.
    let q = Command::new(BIN)
        .args(["query", "conns", "--store", store.to_str().unwrap(), "--by", "proto", "--format", "json"])
        .output()
        .unwrap();
    assert!(q.status.success(), "{}", String::from_utf8_lossy(&q.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&q.stdout).expect("query's JSON");
    let stored: u64 = rows.as_array().expect("an array of rows").iter().filter_map(|v| v["conns"].as_u64()).sum();
    assert_eq!(stored, n[0], "the store after the capture");
}
