//! Query engine micro-benchmark: rows per second on one core, and peak RSS.
//!
//! `cargo bench -p wirelog-query` (or `--manifest-path crates/query/Cargo.toml`)
//! runs every case in its own child process, so each peak RSS is that query's
//! alone. `-- --case NAME` runs one case in this process; `-- --rows N`
//! changes the row count (default 10 M).
//!
//! Batches are generated on the fly, 64 Ki rows each (the store's batch size),
//! holding only the columns the query needs (what the store's scan delivers);
//! only `Engine::consume` and `Engine::finish` are timed.

use std::process::Command;
use std::time::{Duration, Instant};

use wirelog_query::{parse_query, Engine, QuerySpec};
use wirelog_store::{Batch, Column, Kind};

const BATCH: usize = 64 * 1024;

struct Rng(u64);

impl Rng {
    #[inline]
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

fn v4(a: u32) -> [u8; 16] {
    let mut x = [0u8; 16];
    x[10] = 0xff;
    x[11] = 0xff;
    x[12..].copy_from_slice(&a.to_be_bytes());
    x
}

/// How a case picks each row's addresses and port.
#[derive(Clone, Copy)]
enum Traffic {
    /// 2000 clients (half in 10.0.0.0/8), each talking to 8 of 3000
    /// servers; ports: 443 40 %, 80 20 %, 53 (UDP) and 22 10 % each, the
    /// rest spread over 10 others.
    FewHosts,
    /// The same, each batch sorted by (client, server, port) as the store
    /// sorts the rows of a file.
    FewHostsSorted,
    /// Exactly 2 M distinct (client, server) pairs (20 000 x 100), each
    /// appearing rows / 2 M times, in scrambled order.
    TwoMillionPairs,
}

fn flow_batch(rng: &mut Rng, traffic: Traffic, first_row: usize, n: usize, columns: &[&'static str]) -> Batch {
    let mut client = Vec::with_capacity(n);
    let mut server = Vec::with_capacity(n);
    let mut port = Vec::with_capacity(n);
    for i in first_row..first_row + n {
        match traffic {
            Traffic::FewHosts | Traffic::FewHostsSorted => {
                let c = rng.below(2000) as u32;
                client.push(v4(if c & 1 == 0 { 0x0a00_0000 + c } else { 0xac10_0000 + c }));
                server.push(v4(0xc0a8_0000 + (c * 7919 + rng.below(8) as u32 * 131) % 3000));
                port.push(match rng.below(10) {
                    0..=3 => 443,
                    4 | 5 => 80,
                    6 => 53,
                    7 => 22,
                    _ => 8000 + rng.below(10) as u16,
                });
            }
            Traffic::TwoMillionPairs => {
                // 1_000_003 is prime, so i -> i * p mod 2 M is a bijection.
                let p = (i as u64 * 1_000_003 % 2_000_000) as u32;
                client.push(v4(0x0a00_0000 + p / 100));
                server.push(v4(0xc0a8_0000 + p % 100));
                port.push(443);
            }
        }
    }
    if matches!(traffic, Traffic::FewHostsSorted) {
        let mut idx: Vec<usize> = (0..n).collect();
        idx.sort_by_key(|&i| (client[i], server[i], port[i]));
        client = idx.iter().map(|&i| client[i]).collect();
        server = idx.iter().map(|&i| server[i]).collect();
        port = idx.iter().map(|&i| port[i]).collect();
    }
    let mut cols = Vec::new();
    for &c in columns {
        let col = match c {
            "client" => Column::Ip(client.clone()),
            "server" => Column::Ip(server.clone()),
            "server_port" => Column::U16(port.clone()),
            "proto" => Column::U8(port.iter().map(|&p| if p == 53 { 17 } else { 6 }).collect()),
            "bytes_out" | "bytes_in" => Column::U64((0..n).map(|_| rng.below(100_000)).collect()),
            "pkts_out" | "pkts_in" => Column::U64((0..n).map(|_| rng.below(100)).collect()),
            "conns" => Column::U32((0..n).map(|_| 1 + rng.below(4) as u32).collect()),
            "bucket" => {
                Column::I64(vec![1_714_564_800_000_000_000 + (first_row / 1_000_000) as i64 * 300_000_000_000; n])
            }
            "iface" => Column::Str(vec!["eth0".to_string(); n]),
            other => panic!("no generator for {other}"),
        };
        cols.push((c, col));
    }
    Batch { kind: Kind::Flows, columns: cols }
}

fn conn_batch(rng: &mut Rng, first_row: usize, n: usize, columns: &[&'static str]) -> Batch {
    let services = ["", "dns", "http", "ssl", "ssh", "mysql"];
    let states = ["SF", "S0", "REJ", "RSTO", "SH", "OTH"];
    let mut cols = Vec::new();
    for &c in columns {
        let col = match c {
            "orig_h" => Column::Ip((0..n).map(|_| v4(0x0a00_0000 + rng.below(2000) as u32)).collect()),
            "resp_h" => Column::Ip((0..n).map(|_| v4(0xc0a8_0000 + rng.below(3000) as u32)).collect()),
            "resp_p" => Column::U16((0..n).map(|_| [443, 80, 53, 22, 3306][rng.below(5) as usize]).collect()),
            "proto" => Column::Str((0..n).map(|_| if rng.below(10) < 8 { "tcp" } else { "udp" }.to_string()).collect()),
            "service" => Column::Str((0..n).map(|_| services[rng.below(6) as usize].to_string()).collect()),
            "conn_state" => Column::Str((0..n).map(|_| states[rng.below(6) as usize].to_string()).collect()),
            "duration" => Column::OptI64(
                (0..n)
                    .map(|_| {
                        (rng.below(10) > 0).then(|| 10i64.pow(rng.below(7) as u32 + 3) * (1 + rng.below(9) as i64))
                    })
                    .collect(),
            ),
            "orig_bytes" | "resp_bytes" => {
                Column::OptU64((0..n).map(|_| (rng.below(10) > 0).then(|| rng.below(100_000))).collect())
            }
            "orig_pkts" | "resp_pkts" => Column::U64((0..n).map(|_| rng.below(100)).collect()),
            "ts" => {
                Column::I64((0..n).map(|i| 1_714_564_800_000_000_000 + (first_row + i) as i64 * 1_000_000).collect())
            }
            other => panic!("no generator for {other}"),
        };
        cols.push((c, col));
    }
    Batch { kind: Kind::Conns, columns: cols }
}

struct Case {
    name: &'static str,
    what: &'static str,
    spec: fn() -> QuerySpec,
    traffic: Option<Traffic>,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "filtered",
            what: "flows --where 'dport = 443 and sip in 10.0.0.0/8' --by sip,dip",
            spec: || {
                parse_query(Kind::Flows, Some("dport = 443 and sip in 10.0.0.0/8"), Some("sip,dip"), None, None, None)
                    .unwrap()
            },
            traffic: Some(Traffic::FewHosts),
        },
        Case {
            name: "default",
            what: "flows (no filter; by sip,dip,dport,proto; top 10)",
            spec: || parse_query(Kind::Flows, None, None, None, None, None).unwrap(),
            traffic: Some(Traffic::FewHosts),
        },
        Case {
            name: "sorted",
            what: "the same over rows sorted as in a store file",
            spec: || parse_query(Kind::Flows, None, None, None, None, None).unwrap(),
            traffic: Some(Traffic::FewHostsSorted),
        },
        Case {
            name: "series",
            what: "flows --where 'proto = tcp' --by dport --every 5m",
            spec: || parse_query(Kind::Flows, Some("proto = tcp"), Some("dport"), None, None, Some("5m")).unwrap(),
            traffic: Some(Traffic::FewHosts),
        },
        Case {
            name: "2m-groups",
            what: "flows --by sip,dip over 2 M distinct pairs",
            spec: || parse_query(Kind::Flows, None, Some("sip,dip"), None, None, None).unwrap(),
            traffic: Some(Traffic::TwoMillionPairs),
        },
        Case {
            name: "conns",
            what: "conns --where 'proto = tcp' --by service,conn_state --sort p95 (duration percentiles)",
            spec: || {
                parse_query(Kind::Conns, Some("proto = tcp"), Some("service,conn_state"), Some("p95"), None, None)
                    .unwrap()
            },
            traffic: None,
        },
    ]
}

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn run_case(c: &Case, rows: usize) {
    let spec = (c.spec)();
    let columns = spec.needed_columns();
    let mut engine = Engine::new(spec).unwrap();
    let mut rng = Rng(42);
    let mut busy = Duration::ZERO;
    let mut done = 0;
    while done < rows {
        let n = BATCH.min(rows - done);
        let batch = match c.traffic {
            Some(t) => flow_batch(&mut rng, t, done, n, &columns),
            None => conn_batch(&mut rng, done, n, &columns),
        };
        let t0 = Instant::now();
        engine.consume(&batch).unwrap();
        busy += t0.elapsed();
        done += n;
    }
    let groups = engine.groups();
    let table_mb = engine.heap_bytes() as f64 / 1e6;
    let t0 = Instant::now();
    let result = engine.finish();
    let fin = t0.elapsed();
    let total = busy + fin;
    println!(
        "{:<10} {:>6.1} M rows/s/core  consume {:>7.3} s + finish {:>6.3} s = {:>6.3} s for {} rows ({:.1} M matched); {} groups, {} shown; table {:.0} MB; peak RSS {:.0} MB",
        c.name,
        rows as f64 / total.as_secs_f64() / 1e6,
        busy.as_secs_f64(),
        fin.as_secs_f64(),
        total.as_secs_f64(),
        rows,
        result.rows_matched as f64 / 1e6,
        groups,
        result.rows.len(),
        table_mb,
        peak_rss_kib() as f64 / 1024.0,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let get = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).cloned();
    let rows: usize = get("--rows").map_or(10_000_000, |r| r.parse().expect("--rows N"));
    if let Some(name) = get("--case") {
        let c = cases().into_iter().find(|c| c.name == name).expect("known case");
        run_case(&c, rows);
        return;
    }
    println!("wirelog-query benchmark: {rows} rows per case, one thread, batches of {BATCH} rows");
    for c in cases() {
        println!("  {:<10} {}", c.name, c.what);
    }
    let exe = std::env::current_exe().unwrap();
    for c in cases() {
        let status = Command::new(&exe).args(["--case", c.name, "--rows", &rows.to_string()]).status().unwrap();
        assert!(status.success(), "case {} failed", c.name);
    }
}
