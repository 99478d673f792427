//! `wirelog read` into a store, then `wirelog query`, checked three ways on
//! real captures: against the conn and flow logs of the same run, against a
//! brute-force group-by computed here, and against DuckDB SQL over the same
//! Parquet files.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

fn wirelog(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(args)
        .output()
        .expect("run wirelog");
    assert!(
        out.status.success(),
        "wirelog {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn csv(text: &str) -> Vec<HashMap<String, String>> {
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap_or("")
        .split(',')
        .map(String::from)
        .collect();
    lines
        .map(|l| {
            header
                .iter()
                .cloned()
                .zip(l.split(',').map(String::from))
                .collect()
        })
        .collect()
}

fn num(r: &HashMap<String, String>, k: &str) -> u64 {
    r.get(k)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number {k} in {r:?}"))
}

/// Reads `pcap` into a fresh store and logs directory; returns (store, logs).
fn ingest(pcap: &Path, tag: &str) -> (PathBuf, PathBuf) {
    ingest_with(pcap, tag, &[])
}

fn ingest_with(pcap: &Path, tag: &str, extra: &[&str]) -> (PathBuf, PathBuf) {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("query-{tag}"));
    let _ = std::fs::remove_dir_all(&base);
    let (store, logs) = (base.join("store"), base.join("logs"));
    let mut args = vec![
        "read",
        "-C",
        "--quiet",
        "--store",
        store.to_str().unwrap(),
        "--logs",
        logs.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.push(pcap.to_str().unwrap());
    wirelog(&args);
    (store, logs)
}

/// Seconds since the epoch of a `YYYY-MM-DDTHH:MM:SSZ` time as `query` prints it.
fn epoch_secs(t: &str) -> i64 {
    let n = |a: usize, b: usize| -> i64 {
        t[a..b].parse().unwrap_or_else(|_| panic!("bad time {t:?}"))
    };
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    // Days from civil (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    days * 86400 + n(11, 13) * 3600 + n(14, 16) * 60 + n(17, 19)
}

/// `--every`: the time series of flows and of conns equals sums over the
/// logs' records by the start of their interval.
fn check_every(pcap: &Path, tag: &str) {
    // 1 s flow buckets so a short capture spans many; 5 s series so each
    // point sums several buckets.
    let (store, logs) = ingest_with(pcap, tag, &["--flow-interval", "1s"]);
    let s = store.to_str().unwrap();
    let step = 5i64;

    let mut want: BTreeMap<i64, (u64, u64)> = BTreeMap::new();
    for r in common::read_log(&logs.join("flows.log")) {
        let bucket: f64 = r["bucket"].parse().unwrap();
        let e = want
            .entry((bucket as i64).div_euclid(step) * step)
            .or_default();
        e.0 += num(&r, "bytes_out") + num(&r, "bytes_in");
        e.1 += num(&r, "pkts_out") + num(&r, "pkts_in");
    }
    let got: BTreeMap<i64, (u64, u64)> = csv(&wirelog(&[
        "query", "flows", "--store", s, "--every", "5s", "--format", "csv",
    ]))
    .into_iter()
    .map(|r| (epoch_secs(&r["time"]), (num(&r, "bytes"), num(&r, "pkts"))))
    .collect();
    println!("{tag}: flows --every 5s: {} points", got.len());
    assert!(
        want.len() > 1,
        "{tag}: the capture should span several 5 s intervals"
    );
    assert_eq!(got, want, "{tag}: flows --every 5s vs flows.log");

    let mut want: BTreeMap<i64, u64> = BTreeMap::new();
    for r in common::read_log(&logs.join("conn.log")) {
        let ts: f64 = r["ts"].parse().unwrap();
        *want
            .entry((ts.floor() as i64).div_euclid(step) * step)
            .or_default() += 1;
    }
    let got: BTreeMap<i64, u64> = csv(&wirelog(&[
        "query", "conns", "--store", s, "--every", "5s", "--format", "csv",
    ]))
    .into_iter()
    .map(|r| (epoch_secs(&r["time"]), num(&r, "conns")))
    .collect();
    assert_eq!(got, want, "{tag}: conns --every 5s vs conn.log");
}

fn check(pcap: &Path, tag: &str) {
    let (store, logs) = ingest(pcap, tag);
    let s = store.to_str().unwrap();
    let conns = common::read_log(&logs.join("conn.log"));
    let flows = common::read_log(&logs.join("flows.log"));

    // 1. Totals: flows as stored and queried equal the conn records.
    let by_proto = csv(&wirelog(&[
        "query", "flows", "--store", s, "--by", "proto", "--top", "0", "--format", "csv",
    ]));
    let q_bytes: u64 = by_proto.iter().map(|r| num(r, "bytes")).sum();
    let q_pkts: u64 = by_proto.iter().map(|r| num(r, "pkts")).sum();
    let c_bytes: u64 = conns
        .iter()
        .map(|r| num(r, "orig_ip_bytes") + num(r, "resp_ip_bytes"))
        .sum();
    let c_pkts: u64 = conns
        .iter()
        .map(|r| num(r, "orig_pkts") + num(r, "resp_pkts"))
        .sum();
    println!("{tag}: query flows {q_pkts} packets {q_bytes} bytes; conn records {c_pkts} packets {c_bytes} bytes");
    assert_eq!(
        (q_pkts, q_bytes),
        (c_pkts, c_bytes),
        "{tag}: query totals vs conn records"
    );
    let q_conns = csv(&wirelog(&[
        "query", "conns", "--store", s, "--by", "proto", "--top", "0", "--format", "csv",
    ]));
    assert_eq!(
        q_conns.iter().map(|r| num(r, "conns")).sum::<u64>(),
        conns.len() as u64,
        "{tag}: conns in the store"
    );

    // 2. A group-by with a filter against brute force over flows.log.
    let mut want: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for r in flows.iter().filter(|r| r["proto"] == "6") {
        let e = want
            .entry((r["client"].clone(), r["server"].clone()))
            .or_default();
        e.0 += num(r, "bytes_out") + num(r, "bytes_in");
        e.1 += num(r, "pkts_out") + num(r, "pkts_in");
    }
    let got: BTreeMap<(String, String), (u64, u64)> = csv(&wirelog(&[
        "query",
        "flows",
        "--store",
        s,
        "--where",
        "proto = tcp",
        "--by",
        "sip,dip",
        "--top",
        "0",
        "--format",
        "csv",
    ]))
    .into_iter()
    .map(|r| {
        (
            (r["client"].clone(), r["server"].clone()),
            (num(&r, "bytes"), num(&r, "pkts")),
        )
    })
    .collect();
    assert_eq!(got, want, "{tag}: tcp flows by sip,dip vs brute force");

    // 3. DuckDB over the same files.
    if duckdb_ok() {
        let sql = format!(
            "SELECT count(*), sum(bytes_out + bytes_in), sum(pkts_out + pkts_in) FROM read_parquet('{s}/flows/*/*/*.parquet', hive_partitioning=true)"
        );
        let out = Command::new("python3")
            .args([
                "-c",
                &format!("import duckdb; print(*duckdb.sql(\"{sql}\").fetchall()[0])"),
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let v: Vec<u64> = text
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        println!("{tag}: duckdb {v:?}");
        assert_eq!(
            v,
            vec![flows.len() as u64, q_bytes, q_pkts],
            "{tag}: DuckDB vs wirelog query"
        );
    }
}

fn duckdb_ok() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import duckdb"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        assert!(
            std::env::var("WIRELOG_REQUIRE_ALL_TESTS").as_deref() != Ok("1"),
            "python3 duckdb is missing (pip install duckdb)"
        );
        eprintln!("SKIPPED the DuckDB comparison: python3 duckdb is missing (pip install duckdb)");
    }
    ok
}

#[test]
fn demo_capture() {
    check(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/sample.pcap.gz"),
        "sample",
    );
}

#[test]
fn mixed_capture() {
    let Some(p) = common::capture("gen_mixed.sh", "mixed.pcap") else {
        return;
    };
    check(&p, "mixed");
}

#[test]
fn http_capture() {
    let Some(p) = common::capture("gen_http.sh", "http.pcap") else {
        return;
    };
    check(&p, "http");
}

#[test]
fn every_time_series() {
    let Some(p) = common::capture("gen_http.sh", "http.pcap") else {
        return;
    };
    check_every(&p, "http-every");
}

/// The Zeek reference traces: odd link layers, IPv6, half-duplex and
/// flipped connections go through the store and the query unchanged.
#[test]
fn zeek_traces() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/zeek");
    for (case, pcap) in [
        ("ssh_half_duplex", "ssh.client-side-half-duplex.pcap"),
        ("ftp_ipv6", "ipv6.pcap"),
        ("llc_fddi_large", "llc.pcap"),
        ("conn_size_flip", "ctu-64702-888.pcap"),
        ("vlan_qinq", "q-in-q.pcap"),
        ("pcapng_multi_interface", "pcapng-multi-interface.pcapng"),
    ] {
        check(&dir.join(case).join(pcap), &format!("zeek-{case}"));
    }
}

#[test]
fn bad_query_points_at_the_column() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("query-bad");
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args([
            "query",
            "flows",
            "--store",
            dir.to_str().unwrap(),
            "--where",
            "dport = 443 and sip in 10.0.0/8",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("column 24"), "{err}"); // the "1" of the malformed CIDR
    assert!(err.contains("^"), "{err}");
}

/// Runs one DuckDB statement, returning its rows as text columns split on `|`.
fn duckdb_rows(sql: &str) -> Vec<Vec<String>> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sys, duckdb\nfor r in duckdb.sql(sys.argv[1]).fetchall(): print('|'.join('' if x is None else str(x) for x in r))",
            sql,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('|').map(String::from).collect())
        .collect()
}

/// Seconds with 6 decimals (the CSV unit of durations) to ns.
fn secs_ns(s: &str) -> i64 {
    let (a, b) = s.split_once('.').unwrap_or((s, "0"));
    a.parse::<i64>().unwrap() * 1_000_000_000
        + format!("{b:0<6}")[..6].parse::<i64>().unwrap() * 1000
}

/// Transactions written through the store's API, then `wirelog query
/// mysql|http|dns`: counts, errors and bytes per group as DuckDB computes
/// them over the same files, latency percentiles within the histogram's
/// bound of the exact nearest-rank value.
#[test]
fn transactions_query_like_duckdb() {
    use wirelog_store::{synth, Kind, Store, StoreOptions};
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("query-tx");
    let _ = std::fs::remove_dir_all(&base);
    // 2026-11-20T09:00:00Z, two hours and a bit.
    let t0 = 1_795_165_200_000_000_000i64;
    let mut store = Store::open(
        &base,
        StoreOptions {
            sync: false,
            ..Default::default()
        },
    )
    .unwrap();
    let mysql = synth::tx_rows(Kind::Mysql, 5000, t0, 1_600_000_003, 21);
    store.append_tx(Kind::Mysql, &mysql).unwrap();
    let http = synth::tx_rows(Kind::Http, 4000, t0, 2_000_000_000, 22);
    store.append_tx(Kind::Http, &http).unwrap();
    let dns = synth::tx_rows(Kind::Dns, 3000, t0, 2_500_000_000, 23);
    store.append_tx(Kind::Dns, &dns).unwrap();
    store.close().unwrap();
    let s = base.to_str().unwrap();

    // mysql --by fingerprint --sort p99_latency
    let out = wirelog(&[
        "query",
        "mysql",
        "--store",
        s,
        "--by",
        "fingerprint",
        "--sort",
        "p99_latency",
        "--top",
        "0",
        "--format",
        "csv",
    ]);
    let rows = csv(&out);
    assert_eq!(rows.len(), 6, "{out}");
    let p99: Vec<i64> = rows.iter().map(|r| secs_ns(&r["latency_p99_s"])).collect();
    assert!(p99.windows(2).all(|w| w[0] >= w[1]), "{out}");
    for r in &rows {
        let fp = &r["fingerprint"];
        let mut lat: Vec<i64> = mysql
            .iter()
            .filter(|m| matches!(&m.extra[2], wirelog_store::Cell::Str(Some(f)) if f == fp))
            .filter_map(|m| m.latency_ns.map(|l| l / 1000 * 1000))
            .collect();
        lat.sort_unstable();
        let n = lat.len() as u64;
        for (col, p) in [
            ("latency_p50_s", 50),
            ("latency_p95_s", 95),
            ("latency_p99_s", 99),
        ] {
            let exact = lat[((p * n).div_ceil(100).max(1) - 1) as usize];
            let got = secs_ns(&r[col]);
            assert!(
                (got - exact).abs() as f64 <= (exact as f64 / 32.0).max(500.0) + 1000.0,
                "{fp} {col}: {got} vs {exact}"
            );
        }
        let avg = lat.iter().sum::<i64>() / n as i64;
        assert!((secs_ns(&r["latency_avg_s"]) - avg).abs() < 1000, "{fp}");
    }
    let top = wirelog(&[
        "query",
        "mysql",
        "--store",
        s,
        "--by",
        "fingerprint",
        "--sort",
        "latency_p99",
        "--top",
        "2",
        "--format",
        "csv",
    ]);
    assert_eq!(csv(&top).len(), 2);
    assert_eq!(csv(&top)[0]["fingerprint"], rows[0]["fingerprint"]);

    // http --where 'status_code >= 500' --by host,uri
    let out = wirelog(&[
        "query",
        "http",
        "--store",
        s,
        "--where",
        "status_code >= 500",
        "--by",
        "host,uri",
        "--top",
        "0",
        "--format",
        "csv",
    ]);
    let got: BTreeMap<(String, String), (u64, u64, u64, u64)> = csv(&out)
        .iter()
        .map(|r| {
            (
                (r["host"].clone(), r["uri"].clone()),
                (
                    num(r, "count"),
                    num(r, "errors"),
                    num(r, "request_bytes"),
                    num(r, "response_bytes"),
                ),
            )
        })
        .collect();
    assert!(!got.is_empty());
    // Default: http by host, sorted by count.
    let by_host = csv(&wirelog(&[
        "query", "http", "--store", s, "--format", "csv",
    ]));
    assert!(by_host.len() == 6 && by_host[0].contains_key("host"));
    let counts: Vec<u64> = by_host.iter().map(|r| num(r, "count")).collect();
    assert!(counts.windows(2).all(|w| w[0] >= w[1]));
    assert_eq!(counts.iter().sum::<u64>(), http.len() as u64);

    // dns --every 10m
    let series = csv(&wirelog(&[
        "query",
        "dns",
        "--store",
        s,
        "--every",
        "10m",
        "--where",
        "rcode_name = NXDOMAIN",
        "--format",
        "csv",
    ]));
    let nx = dns
        .iter()
        .filter(|r| r.extra[5] == wirelog_store::Cell::Str(Some("NXDOMAIN".into())))
        .count() as u64;
    assert_eq!(series.iter().map(|r| num(r, "count")).sum::<u64>(), nx);

    if duckdb_ok() {
        let src =
            |k: &str| format!("read_parquet('{s}/{k}/*/*/*.parquet', hive_partitioning=true)");
        let want: BTreeMap<(String, String), (u64, u64, u64, u64)> = duckdb_rows(&format!(
            "SELECT host, uri, count(*), count(*) FILTER (WHERE status = 'error'), coalesce(sum(request_bytes), 0), coalesce(sum(response_bytes), 0) FROM {} WHERE status_code >= 500 GROUP BY ALL",
            src("http")
        ))
        .into_iter()
        .map(|r| {
            let n = |i: usize| r[i].parse::<u64>().unwrap();
            ((r[0].clone(), r[1].clone()), (n(2), n(3), n(4), n(5)))
        })
        .collect();
        assert_eq!(got, want, "http by host,uri: wirelog vs DuckDB");
        let want: BTreeMap<String, (u64, u64, u64)> = duckdb_rows(&format!(
            "SELECT fingerprint, count(*), count(*) FILTER (WHERE status = 'error'), coalesce(sum(request_bytes), 0) FROM {} GROUP BY ALL",
            src("mysql")
        ))
        .into_iter()
        .map(|r| (r[0].clone(), (r[1].parse().unwrap(), r[2].parse().unwrap(), r[3].parse().unwrap())))
        .collect();
        let got: BTreeMap<String, (u64, u64, u64)> = rows
            .iter()
            .map(|r| {
                (
                    r["fingerprint"].clone(),
                    (num(r, "count"), num(r, "errors"), num(r, "request_bytes")),
                )
            })
            .collect();
        assert_eq!(got, want, "mysql by fingerprint: wirelog vs DuckDB");
        let want: BTreeMap<i64, u64> = duckdb_rows(&format!(
            "SELECT epoch(time_bucket(INTERVAL 10 MINUTE, ts))::BIGINT, count(*) FROM {} WHERE rcode_name = 'NXDOMAIN' GROUP BY ALL",
            src("dns")
        ))
        .into_iter()
        .map(|r| (r[0].parse().unwrap(), r[1].parse().unwrap()))
        .collect();
        let got: BTreeMap<i64, u64> = series
            .iter()
            .map(|r| (epoch_secs(&r["time"]), num(r, "count")))
            .collect();
        assert_eq!(got, want, "dns every 10m: wirelog vs DuckDB");
    }

    // A bad transaction query points at the column.
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args([
            "query",
            "http",
            "--store",
            s,
            "--where",
            "status_code >= 5xx",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("column 16"), "{err}");
}

/// `wirelog query tls`: counts by server_name (the default key), by
/// version and established, equal what ssl.log of the same run says; the
/// leaf's expiry is queryable ("which certificates expire before T").
#[test]
fn tls_counts_equal_ssl_log() {
    let tls = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/tls");
    for (tag, pcap) in [
        ("tls-browser", "ja4_browser_many_hellos/tls-handshake.pcapng"),
        ("tls-repeat", "x509_cert_repeat/google-cert-repeat.pcap"),
    ] {
        let (store, logs) = ingest(&tls.join(pcap), tag);
        let s = store.to_str().unwrap();
        let text = std::fs::read_to_string(logs.join("ssl.log")).unwrap();
        let mut fields: Vec<&str> = Vec::new();
        let mut ssl: Vec<HashMap<&str, &str>> = Vec::new();
        for l in text.lines() {
            if let Some(f) = l.strip_prefix("#fields\t") {
                fields = f.split('\t').collect();
            } else if !l.starts_with('#') {
                ssl.push(fields.iter().copied().zip(l.split('\t')).collect());
            }
        }
        assert!(ssl.len() >= 8, "{pcap}: {} ssl.log rows", ssl.len());
        // The store reads an unset text back as "", ssl.log writes "-".
        let unset = |v: &str| if v == "-" { String::new() } else { v.to_string() };
        let mut want: BTreeMap<String, u64> = BTreeMap::new();
        for r in &ssl {
            *want.entry(unset(r["server_name"])).or_default() += 1;
        }
        let out = wirelog(&["query", "tls", "--store", s, "--top", "0", "--format", "csv"]);
        let got: BTreeMap<String, u64> = csv(&out)
            .iter()
            .map(|r| (r["server_name"].clone(), num(r, "count")))
            .collect();
        assert_eq!(got, want, "{pcap}: {out}");

        let mut want: BTreeMap<(String, String), u64> = BTreeMap::new();
        for r in &ssl {
            let est = if r["established"] == "T" { "true" } else { "false" };
            *want.entry((unset(r["version"]), est.to_string())).or_default() += 1;
        }
        let out = wirelog(&[
            "query", "tls", "--store", s, "--by", "version,established", "--top", "0", "--format", "csv",
        ]);
        let got: BTreeMap<(String, String), u64> = csv(&out)
            .iter()
            .map(|r| ((r["version"].clone(), r["established"].clone()), num(r, "count")))
            .collect();
        assert_eq!(got, want, "{pcap}: {out}");

        // Leaf certificates expiring before a time: ssl.log's not_valid_after.
        let mut expiries: Vec<i64> = ssl
            .iter()
            .filter_map(|r| r["not_valid_after"].split('.').next()?.parse().ok())
            .collect();
        expiries.sort_unstable();
        if let Some(&mid) = expiries.get(expiries.len() / 2) {
            let want = expiries.iter().filter(|&&t| t < mid).count() as u64;
            let out = wirelog(&[
                "query",
                "tls",
                "--store",
                s,
                "--where",
                &format!("not_valid_after < {mid}"),
                // (subjects hold commas; this file's CSV reader splits naively)
                "--by",
                "server_name",
                "--top",
                "0",
                "--format",
                "csv",
            ]);
            let got: u64 = csv(&out).iter().map(|r| num(r, "count")).sum();
            assert_eq!(got, want, "{pcap}: expiring before {mid}: {out}");
        }
    }
}
