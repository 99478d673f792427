//! `capture --listen` and `--metrics-listen` on a real interface: a veth pair
//! between two network namespaces (made per test, deleted on drop), the demo
//! capture replayed into one end with tcpreplay, `wirelog capture` with two
//! workers on the other. `/metrics` is parsed as Prometheus text and its
//! counters must equal the capture's own stats line; the UI (headless
//! Chromium inside the namespace) shows the live health.
//!
//! Needs root, `ip netns`, tcpreplay and curl (skipped otherwise, unless
//! WIRELOG_REQUIRE_ALL_TESTS=1).

mod common;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::live::{last_stats, LiveCapture};
use common::veth::{requirements, VethPair};

/// The veth pair of this file's tests, or a skip.
fn netns() -> Option<VethPair> {
    requirements("serve_live", &[("ip", "-V"), ("tcpreplay", "--version"), ("curl", "--version")]).then(|| VethPair::new("s"))
}

/// Prometheus text format: `name{labels} value` lines, comments skipped;
/// returns (name, labels) -> value.
fn parse_metrics(text: &str) -> BTreeMap<(String, String), f64> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("bad metrics line {line:?}"));
        let (name, labels) = match series.find('{') {
            Some(i) => (&series[..i], series[i + 1..].trim_end_matches('}')),
            None => (series, ""),
        };
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "bad metric name {name:?}");
        let v: f64 = value.parse().unwrap_or_else(|_| panic!("bad value in {line:?}"));
        m.insert((name.to_string(), labels.to_string()), v);
    }
    m
}

fn total(m: &BTreeMap<(String, String), f64>, name: &str) -> u64 {
    let v: Vec<f64> = m.iter().filter(|((n, _), _)| n == name).map(|(_, v)| *v).collect();
    assert!(!v.is_empty(), "no metric {name}");
    v.iter().sum::<f64>() as u64
}

/// The numbers of a stats line, in order: packets, bytes, kernel packets,
/// kernel drops, ring-full events, evicted, flows early, checksums valid,
/// offloaded, bad, not IP, not decoded, then per worker packets and bytes.
fn stats_numbers(line: &str) -> Vec<u64> {
    common::live::numbers(line)
}

#[test]
fn metrics_equal_the_stats_line_and_the_ui_shows_live_health() {
    let Some(ns) = netns() else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir: PathBuf = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-live");
    let _ = std::fs::remove_dir_all(&dir);
    let pcap = common::sample_pcap(&dir);
    let store = dir.join("store");
    let args: Vec<&OsStr> = [
        "--store", store.to_str().unwrap(), "--workers", "2", "--stats-interval", "0",
        "--tcp-timeout", "1s", "--udp-timeout", "1s", "--icmp-timeout", "1s",
        "--listen", "127.0.0.1:9180", "--metrics-listen", "127.0.0.1:9181",
    ]
    .into_iter()
    .map(OsStr::new)
    .collect();
    let cap = LiveCapture::start(&ns.a, &ns.va, &args);

    // Both servers answer; the metrics-only one has no API.
    ns.wait_answer("http://127.0.0.1:9181/metrics", "metrics server");
    assert!(ns.get("http://127.0.0.1:9181/api/health").is_none(), "--metrics-listen serves only /metrics");
    assert!(ns.get("http://127.0.0.1:9180/api/health").is_some());

    ns.replay(&pcap);

    // Until the counters settle (the workers publish them once per tick).
    let mut last = BTreeMap::new();
    let t0 = Instant::now();
    let metrics = loop {
        std::thread::sleep(Duration::from_millis(1500));
        let m = ns.get("http://127.0.0.1:9181/metrics").expect("scrape");
        let p = parse_metrics(&m);
        // Every connection timed out (1 s) and was written: the ended
        // counters then equal the capture's final figures.
        let settled = total(&p, "wirelog_packets_total") > 300
            && total(&p, "wirelog_kernel_packets_total") >= total(&p, "wirelog_packets_total")
            && total(&p, "wirelog_connections_open") == 0;
        let ours: BTreeMap<_, _> = p.iter().filter(|((n, _), _)| n.starts_with("wirelog_")).map(|(k, v)| (k.clone(), *v)).collect();
        if settled && ours == last {
            break p;
        }
        last = ours;
        assert!(t0.elapsed() < Duration::from_secs(60), "metrics did not settle:\n{m}");
    };

    // The UI in a browser inside the namespace: views and live health.
    let ui_out = root.join("target/test-artifacts/ui-live");
    let status = Command::new("ip")
        .args(["netns", "exec", &ns.a, "timeout", "600", "python3"])
        .arg(root.join("tests/serve_ui.py"))
        .arg("http://127.0.0.1:9180")
        .arg(&ui_out)
        .arg("--live")
        .status()
        .unwrap();
    assert!(status.success(), "UI checks on the live capture failed");
    if std::env::var_os("WIRELOG_UPDATE_DOCS").is_some() {
        std::fs::copy(ui_out.join("ui-health.png"), root.join("docs/ui-live-health.png")).unwrap();
    }
    let health: serde_json::Value = serde_json::from_str(&ns.get("http://127.0.0.1:9180/api/health").unwrap()).unwrap();
    assert_eq!(health["live"]["workers"].as_array().unwrap().len(), 2);
    assert!(health["live"]["conns_ended"].as_array().is_some_and(|a| !a.is_empty()), "{health}");
    assert!(health["live"]["store"]["flush_buckets"].is_array(), "{health}");

    let err = cap.stop();
    let stats = last_stats(&err);
    let n = stats_numbers(stats);
    assert!(n.len() >= 12 + 6, "{stats}");
    let want = [
        ("wirelog_packets_total", n[0]),
        ("wirelog_captured_bytes_total", n[1]),
        ("wirelog_kernel_packets_total", n[2]),
        ("wirelog_kernel_drops_total", n[3]),
        ("wirelog_kernel_ring_full_total", n[4]),
        ("wirelog_connections_evicted_total", n[5]),
        ("wirelog_flows_written_early_total", n[6]),
        ("wirelog_checksum_offloaded_total", n[8]),
        ("wirelog_checksum_bad_total", n[9]),
        ("wirelog_packets_not_ip_total", n[10]),
        ("wirelog_packets_not_decoded_total", n[11]),
    ];
    for (name, v) in want {
        assert_eq!(total(&metrics, name), v, "{name} vs the stats line: {stats}");
    }
    // Per worker: "#0 N packets N bytes, #1 N packets N bytes".
    for w in 0..2u64 {
        let i = 12 + 3 * w as usize;
        assert_eq!(n[i], w, "{stats}");
        let l = format!("worker=\"{w}\"");
        assert_eq!(metrics[&("wirelog_packets_total".to_string(), l.clone())] as u64, n[i + 1], "worker {w} packets");
        assert_eq!(metrics[&("wirelog_captured_bytes_total".to_string(), l)] as u64, n[i + 2], "worker {w} bytes");
    }
    output_metrics_equal_the_final_lines(&metrics, &err);
    assert_eq!(total(&metrics, "wirelog_records_dropped_total"), 0);
    assert!(metrics.keys().any(|(n, _)| n == "wirelog_build_info"));
    assert!(total(&metrics, "process_resident_memory_bytes") > 1 << 20);
    // The capture's store, as far as it is written (the first flush is at exit or after 5 minutes).
    assert!(metrics.contains_key(&("wirelog_store_rows".to_string(), "kind=\"conns\"".to_string())));
    // No address in any label.
    for (n, l) in metrics.keys() {
        assert!(!l.contains("127.0.0.1") && !l.contains("::"), "{n}{{{l}}} has an address label");
    }
}

/// The line of `stderr` starting with `prefix`, without it.
fn line_after<'a>(stderr: &'a str, prefix: &str) -> Option<&'a str> {
    stderr.lines().rev().find_map(|l| l.strip_prefix(prefix))
}

/// "SF 12, S0 3" -> {SF: 12, S0: 3}.
fn named_counts(list: &str) -> BTreeMap<String, u64> {
    list.split(", ")
        .map(|p| {
            let (k, v) = p.rsplit_once(' ').unwrap_or_else(|| panic!("bad count {p:?} in {list:?}"));
            (k.to_string(), v.parse().unwrap_or_else(|_| panic!("bad count {p:?}")))
        })
        .collect()
}

/// The output thread's and the parsers' counters against the lines the
/// capture prints when it stops (its own totals, computed apart).
fn output_metrics_equal_the_final_lines(metrics: &BTreeMap<(String, String), f64>, err: &str) {
    // "stopped by SIGINT after 9.1 s: 120 connections, 40 flow records, 30 transactions"
    let stopped = line_after(err, "wirelog: stopped by ").expect("a stopped line");
    let n = stats_numbers(stopped.split_once(": ").expect("stopped line").1);
    let (conns, txs) = (n[0], n[2]);
    assert!(conns > 0 && txs > 0, "the demo capture has connections and transactions: {stopped}");
    assert_eq!(total(metrics, "wirelog_connections_ended_total"), conns, "{stopped}");
    assert_eq!(total(metrics, "wirelog_transactions_total"), txs, "{stopped}");

    let states = named_counts(line_after(err, "wirelog: conn_state: ").expect("a conn_state line"));
    for ((name, labels), v) in metrics.iter().filter(|((n, _), _)| n == "wirelog_connections_ended_total") {
        let state = labels.strip_prefix("state=\"").and_then(|l| l.strip_suffix('"')).expect(labels);
        assert_eq!(*v as u64, states.get(state).copied().unwrap_or(0), "{name}{{{labels}}}");
    }
    let per_proto = named_counts(line_after(err, "wirelog: transactions: ").expect("a transactions line"));
    let mut by_proto: BTreeMap<String, u64> = BTreeMap::new();
    for ((_, labels), v) in metrics.iter().filter(|((n, _), _)| n == "wirelog_transactions_total") {
        let proto = labels.split(',').find_map(|l| l.strip_prefix("protocol=\"")).expect(labels).trim_end_matches('"');
        assert!(labels.contains("status=\""), "{labels}");
        *by_proto.entry(proto.to_string()).or_default() += *v as u64;
    }
    by_proto.retain(|_, v| *v > 0);
    assert_eq!(by_proto, per_proto, "transactions per protocol");

    // "parsing: 12 streams, 0 gaps, 0 bytes not parsed, 0 parsers gave up"
    let parsing = line_after(err, "wirelog: parsing: ").expect("a parsing line");
    let p = stats_numbers(parsing);
    assert!(p[0] > 0, "{parsing}");
    for (name, v) in [
        ("wirelog_parse_streams_total", p[0]),
        ("wirelog_parse_gaps_total", p[1]),
        ("wirelog_parse_unparsed_bytes_total", p[2]),
        ("wirelog_parse_gave_up_total", p[3]),
    ] {
        assert_eq!(total(metrics, name), v, "{name} vs {parsing}");
    }

    // The store is flushed at exit (or every 5 minutes): what this run wrote
    // so far is what the files' footers hold, and the flush histogram is whole.
    assert_eq!(total(metrics, "wirelog_store_written_rows_total"), total(metrics, "wirelog_store_rows"));
    let count = total(metrics, "wirelog_store_flush_seconds_count");
    assert_eq!(metrics[&("wirelog_store_flush_seconds_bucket".to_string(), "le=\"+Inf\"".to_string())] as u64, count);
    assert!(metrics.contains_key(&("wirelog_store_flush_seconds_sum".to_string(), String::new())));
    // A store that keeps up with this traffic is never waited for, and the
    // end of the run says nothing about it.
    assert!(metrics.contains_key(&("wirelog_store_waits_total".to_string(), String::new())), "store waits exported");
    assert_eq!(total(metrics, "wirelog_store_waits_total"), 0);
    assert!(!err.contains("for the store's writer"), "{err}");
}

#[test]
fn capture_listen_off_loopback_needs_a_token() {
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["capture", "-i", "lo", "--no-store", "--metrics-listen", "0.0.0.0:9181", "--duration", "1s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--metrics-listen 0.0.0.0:9181") && err.contains("--token"), "{err}");
}
