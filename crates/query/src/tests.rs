//! Whole-engine tests: the vectorized filter and the group-by against a
//! row-by-row reference on random batches (deterministic seeds), and golden
//! output for every format.

use std::cmp::Ordering;
use std::collections::HashMap;

use wirelog_store::{Batch, Column, Kind};

use crate::engine::{Engine, ResultTable, Row};
use crate::expr::{Expr, Operand, Test};
use crate::field::{Field, Ty};
use crate::filter::Filter;
use crate::hist::PERCENTILES;
use crate::key::KeyValue;
use crate::render::{render, Format};
use crate::spec::{parse_query, Agg, Order, QuerySpec, SortKey};
use crate::table::Acc;
use crate::value::{ip16, v4};
use crate::{parse_where, SchemaError, SchemaProblem};

/// splitmix64: small, deterministic, good enough for test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize].clone()
    }

    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

const T0: i64 = 1_714_564_800_000_000_000; // 2024-05-01T12:00:00Z
const MIN: i64 = 60_000_000_000;

fn addr_pool() -> Vec<[u8; 16]> {
    let mut v = Vec::new();
    for i in 0..6 {
        v.push(v4(10, 0, i, 1 + i));
        v.push(v4(10, 1, 0, 10 + i));
        v.push(v4(192, 168, 1, i));
        v.push(v4(8, 8, 8, i));
    }
    for s in [
        "2001:db8::1",
        "2001:db8::2",
        "2001:db8:1::5",
        "fe80::1",
        "::1",
        "::ffff:0:0",
        "::",
    ] {
        v.push(ip16(s.parse().unwrap()));
    }
    v
}

const PORTS: [u16; 9] = [22, 53, 80, 443, 8080, 0, 1023, 1024, 65535];
const IFACES: [&str; 4] = ["eth0", "eth1", "wlan0", "file:0"];

fn flows_batch(rng: &mut Rng, n: usize) -> Batch {
    let pool = addr_pool();
    let bucket: Vec<i64> = (0..n).map(|_| T0 + rng.below(6) as i64 * 5 * MIN).collect();
    let first: Vec<i64> = bucket
        .iter()
        .map(|b| b + rng.below(300_000_000_000) as i64)
        .collect();
    let last: Vec<i64> = first
        .iter()
        .map(|f| f + rng.below(10_000_000_000) as i64)
        .collect();
    let big = |rng: &mut Rng| {
        if rng.chance(20) {
            rng.below(10_000_000)
        } else {
            rng.below(3000)
        }
    };
    Batch {
        kind: Kind::Flows,
        columns: vec![
            ("bucket", Column::I64(bucket)),
            (
                "iface",
                Column::Str((0..n).map(|_| rng.pick(&IFACES).to_string()).collect()),
            ),
            (
                "client",
                Column::Ip((0..n).map(|_| rng.pick(&pool)).collect()),
            ),
            (
                "server",
                Column::Ip((0..n).map(|_| rng.pick(&pool)).collect()),
            ),
            (
                "server_port",
                Column::U16((0..n).map(|_| rng.pick(&PORTS)).collect()),
            ),
            (
                "proto",
                Column::U8((0..n).map(|_| rng.pick(&[6u8, 17, 1, 58])).collect()),
            ),
            ("bytes_out", Column::U64((0..n).map(|_| big(rng)).collect())),
            (
                "pkts_out",
                Column::U64((0..n).map(|_| rng.below(100)).collect()),
            ),
            ("bytes_in", Column::U64((0..n).map(|_| big(rng)).collect())),
            (
                "pkts_in",
                Column::U64((0..n).map(|_| rng.below(100)).collect()),
            ),
            ("first", Column::I64(first)),
            ("last", Column::I64(last)),
            (
                "conns",
                Column::U32((0..n).map(|_| rng.below(5) as u32 + 1).collect()),
            ),
        ],
    }
}

fn conns_batch(rng: &mut Rng, n: usize) -> Batch {
    let pool = addr_pool();
    let protos: Vec<(&str, u8)> = vec![("tcp", 6), ("udp", 17), ("icmp", 1), ("icmp", 58)];
    let pr: Vec<(&str, u8)> = (0..n).map(|_| rng.pick(&protos)).collect();
    let opt = |rng: &mut Rng, pct_none: u64, max: u64| {
        if rng.chance(pct_none) {
            None
        } else {
            Some(rng.below(max))
        }
    };
    let histories = ["ShADadFf", "S", "Dd", "^hADad", "ShAdDaFr", "", "D"];
    let states = ["SF", "S0", "REJ", "RSTO", "OTH", "SH"];
    let services = ["", "", "http", "dns", "ssl", "http,ssl"];
    Batch {
        kind: Kind::Conns,
        columns: vec![
            (
                "ts",
                Column::I64(
                    (0..n)
                        .map(|i| T0 + i as i64 * 7_000_000_000 + rng.below(90 * MIN as u64) as i64)
                        .collect(),
                ),
            ),
            (
                "uid",
                Column::Str(
                    (0..n)
                        .map(|_| format!("C{:x}", rng.below(1 << 20)))
                        .collect(),
                ),
            ),
            (
                "orig_h",
                Column::Ip((0..n).map(|_| rng.pick(&pool)).collect()),
            ),
            (
                "orig_p",
                Column::U16(
                    (0..n)
                        .map(|_| {
                            if rng.chance(50) {
                                rng.pick(&PORTS)
                            } else {
                                40000 + rng.below(100) as u16
                            }
                        })
                        .collect(),
                ),
            ),
            (
                "resp_h",
                Column::Ip((0..n).map(|_| rng.pick(&pool)).collect()),
            ),
            (
                "resp_p",
                Column::U16((0..n).map(|_| rng.pick(&PORTS)).collect()),
            ),
            (
                "proto",
                Column::Str(pr.iter().map(|p| p.0.to_string()).collect()),
            ),
            (
                "service",
                Column::Str((0..n).map(|_| rng.pick(&services).to_string()).collect()),
            ),
            (
                "duration",
                Column::OptI64(
                    (0..n)
                        .map(|_| {
                            (!rng.chance(15)).then(|| {
                                // Log-uniform over 1 µs .. 100 s.
                                let e = rng.below(8) as u32;
                                (10i64.pow(e) * (1 + rng.below(9) as i64)) * 1000
                                    + rng.below(1000) as i64
                            })
                        })
                        .collect(),
                ),
            ),
            (
                "orig_bytes",
                Column::OptU64((0..n).map(|_| opt(rng, 10, 20_000)).collect()),
            ),
            (
                "resp_bytes",
                Column::OptU64((0..n).map(|_| opt(rng, 10, 2_000_000)).collect()),
            ),
            (
                "conn_state",
                Column::Str((0..n).map(|_| rng.pick(&states).to_string()).collect()),
            ),
            (
                "local_orig",
                Column::Bool((0..n).map(|_| rng.chance(50)).collect()),
            ),
            (
                "local_resp",
                Column::Bool((0..n).map(|_| rng.chance(30)).collect()),
            ),
            (
                "missed_bytes",
                Column::U64(
                    (0..n)
                        .map(|_| if rng.chance(90) { 0 } else { rng.below(5000) })
                        .collect(),
                ),
            ),
            (
                "history",
                Column::Str((0..n).map(|_| rng.pick(&histories).to_string()).collect()),
            ),
            (
                "orig_pkts",
                Column::U64((0..n).map(|_| rng.below(50)).collect()),
            ),
            (
                "orig_ip_bytes",
                Column::U64((0..n).map(|_| rng.below(30_000)).collect()),
            ),
            (
                "resp_pkts",
                Column::U64((0..n).map(|_| rng.below(50)).collect()),
            ),
            (
                "resp_ip_bytes",
                Column::U64((0..n).map(|_| rng.below(3_000_000)).collect()),
            ),
            ("ip_proto", Column::U8(pr.iter().map(|p| p.1).collect())),
            (
                "community_id",
                Column::Str(
                    (0..n)
                        .map(|_| format!("1:{:x}=", rng.below(1 << 30)))
                        .collect(),
                ),
            ),
            // Optional columns arrive widened, as the store reads them.
            (
                "vlan",
                Column::OptU64(
                    (0..n)
                        .map(|_| {
                            if rng.chance(60) {
                                None
                            } else {
                                Some(rng.pick(&[10u64, 20, 4095]))
                            }
                        })
                        .collect(),
                ),
            ),
            (
                "inner_vlan",
                Column::OptU64(
                    (0..n)
                        .map(|_| if rng.chance(90) { None } else { Some(7) })
                        .collect(),
                ),
            ),
            (
                "empty_tcp_skipped",
                Column::Bool((0..n).map(|_| rng.chance(20)).collect()),
            ),
            // Owners: most ends unknown (remote), a few programs.
            ("orig_pid", Column::OptU64((0..n).map(|_| (!rng.chance(50)).then(|| rng.pick(&[101u64, 202, 303]))).collect())),
            ("orig_proc", Column::Str((0..n).map(|_| rng.pick(&["", "", "curl", "python3"]).to_string()).collect())),
            ("orig_exe", Column::Str((0..n).map(|_| rng.pick(&["", "/usr/bin/curl"]).to_string()).collect())),
            ("orig_user", Column::Str((0..n).map(|_| rng.pick(&["", "root", "www-data"]).to_string()).collect())),
            ("orig_container", Column::Str((0..n).map(|_| rng.pick(&["", "nginx.service"]).to_string()).collect())),
            ("orig_pod", Column::Str((0..n).map(|_| rng.pick(&["", "burstable/0f1e"]).to_string()).collect())),
            ("resp_pid", Column::OptU64((0..n).map(|_| (!rng.chance(30)).then(|| rng.pick(&[404u64, 505]))).collect())),
            ("resp_proc", Column::Str((0..n).map(|_| rng.pick(&["", "nginx", "mariadbd"]).to_string()).collect())),
            ("resp_exe", Column::Str((0..n).map(|_| rng.pick(&["", "/usr/sbin/nginx"]).to_string()).collect())),
            ("resp_user", Column::Str((0..n).map(|_| rng.pick(&["", "www-data", "mysql"]).to_string()).collect())),
            ("resp_container", Column::Str((0..n).map(|_| rng.pick(&["", "docker:ab"]).to_string()).collect())),
            ("resp_pod", Column::Str((0..n).map(|_| rng.pick(&["", "besteffort/9a"]).to_string()).collect())),
        ],
    }
}

// ---- the reference: one row at a time, over dynamic values ----

#[derive(Debug, Clone)]
enum V {
    U(Option<u64>),
    I(Option<i64>),
    Ip([u8; 16]),
    S(String),
    B(bool),
}

fn cell(b: &Batch, name: &str, r: usize) -> V {
    match b.column(name).unwrap() {
        Column::U8(v) => V::U(Some(v[r] as u64)),
        Column::U16(v) => V::U(Some(v[r] as u64)),
        Column::U32(v) => V::U(Some(v[r] as u64)),
        Column::U64(v) => V::U(Some(v[r])),
        Column::OptU64(v) => V::U(v[r]),
        Column::I64(v) => V::I(Some(v[r])),
        Column::OptI64(v) => V::I(v[r]),
        Column::Ip(v) => V::Ip(v[r]),
        Column::Str(v) => V::S(v[r].clone()),
        Column::Bool(v) => V::B(v[r]),
    }
}

fn ref_eval(e: &Expr, b: &Batch, r: usize) -> bool {
    match e {
        Expr::Not(x) => !ref_eval(x, b, r),
        Expr::And(xs) => xs.iter().all(|x| ref_eval(x, b, r)),
        Expr::Or(xs) => xs.iter().any(|x| ref_eval(x, b, r)),
        Expr::Pred(p) => {
            let v = match p.operand {
                Operand::Field(f) => cell(b, f.name(), r),
                Operand::Sum(x, y) => match (cell(b, x.name(), r), cell(b, y.name(), r)) {
                    (V::U(a), V::U(c)) => V::U(Some(a.unwrap_or(0) + c.unwrap_or(0))),
                    _ => panic!("sum of non-numbers"),
                },
            };
            match (&p.test, v) {
                (Test::UInt(op, c), V::U(Some(x))) => op.eval(x, *c),
                (Test::UIntIn(cs), V::U(Some(x))) => cs.contains(&x),
                (Test::Int(op, c), V::I(Some(x))) => op.eval(x, *c),
                (Test::IntIn(cs), V::I(Some(x))) => cs.contains(&x),
                (Test::UInt(..) | Test::UIntIn(_), V::U(None)) => false,
                (Test::Int(..) | Test::IntIn(_), V::I(None)) => false,
                (Test::Net(nets), V::Ip(a)) => nets.iter().any(|n| n.contains(&a)),
                (Test::StrIn(ss), V::S(s)) => ss.contains(&s),
                (Test::StrMatch { pat, start, end }, V::S(s)) => match (start, end) {
                    (true, true) => s == *pat,
                    (true, false) => s.starts_with(pat.as_str()),
                    (false, true) => s.ends_with(pat.as_str()),
                    (false, false) => s.contains(pat.as_str()),
                },
                (Test::Bool(c), V::B(x)) => x == *c,
                (t, v) => panic!("test {t:?} on {v:?}"),
            }
        }
    }
}

fn atom(rng: &mut Rng, kind: Kind) -> String {
    let ops = ["=", "!=", "<", "<=", ">", ">=", "=="];
    let port = |rng: &mut Rng| rng.pick(&PORTS).to_string();
    let list = |rng: &mut Rng, f: &dyn Fn(&mut Rng) -> String| {
        let n = 1 + rng.below(12) as usize;
        (0..n).map(|_| f(rng)).collect::<Vec<_>>().join(", ")
    };
    let ip = |rng: &mut Rng| crate::value::format_ip(&rng.pick(&addr_pool()));
    let net = |rng: &mut Rng| {
        rng.pick(&[
            "10.0.0.0/8",
            "10.0.0.0/16",
            "10.1.0.0/24",
            "192.168.1.0/30",
            "0.0.0.0/0",
            "2001:db8::/32",
            "::/0",
            "::ffff:0:0/96",
            "8.8.8.0/24",
        ])
        .to_string()
    };
    let time = |rng: &mut Rng| {
        crate::time::format_rfc3339(T0 + rng.below(6) as i64 * 5 * MIN + rng.below(3) as i64 * MIN)
    };
    let common = match kind {
        Kind::Flows => rng.below(18),
        Kind::Conns => 100 + rng.below(22),
        _ => return tx_atom(rng, kind),
    };
    match common {
        0 => format!("dport {} {}", rng.pick(&ops), port(rng)),
        1 => format!(
            "dport {} ({})",
            rng.pick(&["in", "not in"]),
            list(rng, &port)
        ),
        2 => format!("sip in {}", net(rng)),
        3 => format!("dip {} {}", rng.pick(&["=", "!="]), ip(rng)),
        4 => format!("host = {}", ip(rng)),
        5 => format!("net != {}", net(rng)),
        6 => format!(
            "sip in ({})",
            list(rng, &|r: &mut Rng| if r.chance(70) {
                ip(r)
            } else {
                net(r)
            })
        ),
        7 => format!(
            "proto {} {}",
            rng.pick(&["=", "!="]),
            rng.pick(&["tcp", "udp", "17", "icmp6", "1"])
        ),
        8 => format!(
            "iface ~ {}",
            rng.pick(&["eth", "^eth", "0$", "^eth0$", "an", "\"\""])
        ),
        9 => format!("iface {} {}", rng.pick(&["=", "!="]), rng.pick(&IFACES)),
        10 => format!(
            "iface in ({})",
            list(rng, &|r: &mut Rng| r.pick(&IFACES).to_string())
        ),
        11 => format!(
            "bytes {} {}",
            rng.pick(&ops),
            rng.pick(&["1k", "5000", "2MB", "0"])
        ),
        12 => format!(
            "bytes_out {} {}",
            rng.pick(&ops),
            rng.pick(&["100", "2k", "1MiB"])
        ),
        13 => format!(
            "pkts {} {}",
            rng.pick(&ops),
            rng.pick(&["10", "100", "150"])
        ),
        14 => format!("conns {} {}", rng.pick(&ops), rng.below(6)),
        15 => format!("time {} {}", rng.pick(&ops), time(rng)),
        16 => format!("first {} {}", rng.pick(&["<", ">="]), time(rng)),
        17 => format!(
            "proto in ({})",
            list(rng, &|r: &mut Rng| r
                .pick(&["tcp", "udp", "6", "58"])
                .to_string())
        ),
        100 => format!("dport {} {}", rng.pick(&ops), port(rng)),
        101 => format!("port in ({})", list(rng, &port)),
        102 => format!(
            "sport {} {}",
            rng.pick(&ops),
            rng.pick(&["1024", "40050", "22"])
        ),
        103 => format!(
            "proto {} {}",
            rng.pick(&["=", "!="]),
            rng.pick(&["tcp", "udp", "icmp", "6", "17", "58"])
        ),
        104 => {
            format!(
                "proto in ({})",
                list(rng, &|r: &mut Rng| r
                    .pick(&["tcp", "udp", "6", "1", "icmp"])
                    .to_string())
            )
        }
        105 => format!(
            "history {} {}",
            rng.pick(&["~", "!~"]),
            rng.pick(&["^Sh", "d$", "A", "^h", "\"\"", "^$"])
        ),
        106 => format!(
            "service {} {}",
            rng.pick(&["=", "!="]),
            rng.pick(&["\"\"", "dns", "http", "'http,ssl'"])
        ),
        107 => format!(
            "conn_state in ({})",
            list(rng, &|r: &mut Rng| r
                .pick(&["SF", "S0", "REJ", "OTH"])
                .to_string())
        ),
        108 => format!(
            "duration {} {}",
            rng.pick(&ops),
            rng.pick(&["500ms", "2", "1us", "10s", "0.05"])
        ),
        109 => format!(
            "orig_bytes {} {}",
            rng.pick(&ops),
            rng.pick(&["1k", "0", "10000"])
        ),
        110 => format!("bytes {} {}", rng.pick(&ops), rng.pick(&["5k", "1MB"])),
        111 => format!(
            "local_orig {} {}",
            rng.pick(&["=", "!="]),
            rng.pick(&["T", "false"])
        ),
        112 => format!(
            "vlan {} {}",
            rng.pick(&["=", "!=", ">", "<"]),
            rng.pick(&["10", "20", "4095"])
        ),
        113 => format!(
            "vlan in ({})",
            list(rng, &|r: &mut Rng| r.pick(&["10", "20", "30"]).to_string())
        ),
        114 => format!("uid ~ {}", rng.pick(&["C1", "^C", "a$"])),
        115 => format!("host in ({})", list(rng, &ip)),
        116 => format!("orig_h in {}", net(rng)),
        117 => format!("ts {} {}", rng.pick(&ops), time(rng)),
        118 => format!(
            "duration in ({})",
            list(rng, &|r: &mut Rng| r.pick(&["1s", "5ms"]).to_string())
        ),
        119 => format!("missed_bytes > {}", rng.below(3000)),
        120 => format!("inner_vlan = {}", rng.pick(&["7", "0"])),
        _ => format!("pkts {} {}", rng.pick(&ops), rng.below(100)),
    }
}

fn random_expr(rng: &mut Rng, kind: Kind, depth: u32) -> String {
    if depth == 0 || rng.chance(35) {
        return atom(rng, kind);
    }
    match rng.below(4) {
        0 => format!("not ({})", random_expr(rng, kind, depth - 1)),
        1 => format!(
            "({}) or ({})",
            random_expr(rng, kind, depth - 1),
            random_expr(rng, kind, depth - 1)
        ),
        2 => format!(
            "{} and {} or {}",
            atom(rng, kind),
            random_expr(rng, kind, depth - 1),
            atom(rng, kind)
        ),
        _ => format!(
            "({}) and ({})",
            random_expr(rng, kind, depth - 1),
            random_expr(rng, kind, depth - 1)
        ),
    }
}

fn check_filter(kind: Kind, rng: &mut Rng, batches: &[Batch], cases: usize) {
    let mut matched = 0usize;
    let mut total = 0usize;
    for _ in 0..cases {
        let text = random_expr(rng, kind, 3);
        let e = parse_where(kind, &text).unwrap_or_else(|e| panic!("{e}"));
        let mut f = Filter::new(&e);
        let mut bits = Vec::new();
        for b in batches {
            f.eval(b, &mut bits).unwrap();
            assert_eq!(bits.len(), b.rows().div_ceil(64));
            for r in 0..b.rows() {
                let got = bits[r / 64] >> (r % 64) & 1 == 1;
                let want = ref_eval(&e, b, r);
                assert_eq!(
                    got,
                    want,
                    "row {r} of {} for {text}\n  parsed: {e}",
                    b.rows()
                );
                matched += want as usize;
                total += 1;
            }
            // Bits past the last row stay 0.
            if b.rows() % 64 != 0 {
                assert_eq!(bits.last().unwrap() >> (b.rows() % 64), 0, "{text}");
            }
        }
    }
    // The random expressions are neither all-true nor all-false.
    assert!(
        matched > total / 20 && matched < total * 19 / 20,
        "{matched} of {total}"
    );
}

const SIZES: [usize; 7] = [0, 1, 63, 64, 65, 200, 1000];

#[test]
fn filter_matches_reference_on_flows() {
    let mut rng = Rng(1);
    let batches: Vec<Batch> = SIZES.iter().map(|&n| flows_batch(&mut rng, n)).collect();
    check_filter(Kind::Flows, &mut rng, &batches, 600);
}

#[test]
fn filter_matches_reference_on_conns() {
    let mut rng = Rng(2);
    let batches: Vec<Batch> = SIZES.iter().map(|&n| conns_batch(&mut rng, n)).collect();
    check_filter(Kind::Conns, &mut rng, &batches, 600);
}

// ---- group-by against the reference ----

fn key_value(v: V) -> KeyValue {
    match v {
        V::U(None) | V::I(None) => KeyValue::Null,
        V::U(Some(x)) => KeyValue::UInt(x),
        V::I(Some(x)) => KeyValue::Int(x),
        V::Ip(a) => KeyValue::Ip(a),
        V::S(s) => KeyValue::Str(s),
        V::B(b) => KeyValue::Bool(b),
    }
}

#[derive(Default, Clone)]
struct RefGroup {
    acc: Acc,
    durations: Vec<i64>,
}

/// Exact percentiles, and for transactions the mean latency.
type Stats = (Option<[i64; 3]>, Option<i64>);

impl RefGroup {
    fn stats(&mut self, tx: bool) -> Stats {
        let avg = (tx && !self.durations.is_empty())
            .then(|| (self.acc.latency_sum_ns() / self.durations.len() as u64) as i64);
        (exact_pct(&mut self.durations), avg)
    }
}

fn exact_pct(d: &mut [i64]) -> Option<[i64; 3]> {
    if d.is_empty() {
        return None;
    }
    d.sort_unstable();
    let n = d.len() as u64;
    Some(PERCENTILES.map(|p| d[((p * n).div_ceil(100).max(1) - 1) as usize]))
}

fn agg_of(acc: &Acc, a: Agg) -> u64 {
    match a {
        Agg::Bytes => acc.bytes(),
        Agg::BytesOut => acc.bytes_out,
        Agg::BytesIn => acc.bytes_in,
        Agg::Pkts => acc.pkts(),
        Agg::PktsOut => acc.pkts_out,
        Agg::PktsIn => acc.pkts_in,
        Agg::Conns => acc.conns,
        Agg::Errors => acc.errors(),
        _ => unreachable!(),
    }
}

/// Computes the spec's answer row by row; percentiles exact.
fn reference(spec: &QuerySpec, batches: &[Batch]) -> (Vec<Row>, Acc, usize) {
    let v = crate::field::value_cols(spec.kind);
    let tx = spec.kind.is_tx();
    let mut groups: HashMap<(Option<i64>, Vec<KeyValue>), RefGroup> = HashMap::new();
    let mut total = Acc::default();
    for b in batches {
        for r in 0..b.rows() {
            if let Some(f) = &spec.filter {
                if !ref_eval(f, b, r) {
                    continue;
                }
            }
            let time = spec.every_ns.map(|e| {
                let V::I(Some(t)) = cell(b, Field::time(spec.kind).name(), r) else {
                    panic!()
                };
                t.div_euclid(e) * e
            });
            let key: Vec<KeyValue> = spec
                .by
                .iter()
                .map(|&f| key_value(cell(b, f.name(), r)))
                .collect();
            let num = |n: &str| match cell(b, n, r) {
                V::U(x) => x.unwrap_or(0),
                // Transactions: latency summed, errors counted.
                V::I(x) => x.unwrap_or(0).max(0) as u64,
                V::S(s) => (s == "error") as u64,
                _ => panic!(),
            };
            let acc = Acc {
                bytes_out: num(v.bytes_out),
                pkts_out: num(v.pkts_out),
                bytes_in: num(v.bytes_in),
                pkts_in: num(v.pkts_in),
                conns: v.conns.map_or(1, num),
            };
            total.add(&acc);
            let g = groups.entry((time, key)).or_default();
            g.acc.add(&acc);
            if spec.percentiles {
                let col = crate::field::hist_col(spec.kind).unwrap();
                if let V::I(Some(d)) = cell(b, col, r) {
                    g.durations.push(d);
                }
            }
        }
    }
    let sort_cmp = |a: &(Acc, Stats, &Vec<KeyValue>), b: &(Acc, Stats, &Vec<KeyValue>)| {
        let p = match spec.sort.0 {
            SortKey::Agg(Agg::Avg) => a.1 .1.cmp(&b.1 .1),
            SortKey::Agg(agg) if agg.is_percentile() => {
                let i = [Agg::P50, Agg::P95, Agg::P99]
                    .iter()
                    .position(|x| *x == agg)
                    .unwrap();
                a.1 .0.map(|p| p[i]).cmp(&b.1 .0.map(|p| p[i]))
            }
            SortKey::Agg(agg) => agg_of(&a.0, agg).cmp(&agg_of(&b.0, agg)),
            SortKey::Field(f) => {
                let i = spec.by.iter().position(|x| *x == f).unwrap();
                a.2[i].cmp(&b.2[i])
            }
            SortKey::Time => Ordering::Equal,
        };
        let p = if spec.sort.1 == Order::Desc && spec.sort.0 != SortKey::Time {
            p.reverse()
        } else {
            p
        };
        p.then_with(|| a.2.cmp(b.2))
    };
    let top = spec.top.unwrap_or(usize::MAX);
    match spec.every_ns {
        None => {
            let mut rows: Vec<(Acc, Stats, Vec<KeyValue>)> = groups
                .into_iter()
                .map(|((_, k), mut g)| (g.acc, g.stats(tx), k))
                .collect();
            let n = rows.len();
            rows.sort_by(|a, b| sort_cmp(&(a.0, a.1, &a.2), &(b.0, b.1, &b.2)));
            rows.truncate(top);
            let rows = rows
                .into_iter()
                .map(|(acc, d, key)| Row {
                    time: None,
                    key,
                    acc,
                    duration: d.0,
                    avg: d.1,
                })
                .collect();
            (rows, total, n)
        }
        Some(_) => {
            let mut series: HashMap<Vec<KeyValue>, RefGroup> = HashMap::new();
            for ((_, k), g) in &groups {
                let s = series.entry(k.clone()).or_default();
                s.acc.add(&g.acc);
                s.durations.extend(&g.durations);
            }
            let n = series.len();
            let mut ranked: Vec<(Acc, Stats, Vec<KeyValue>)> = series
                .into_iter()
                .map(|(k, mut g)| (g.acc, g.stats(tx), k))
                .collect();
            ranked.sort_by(|a, b| sort_cmp(&(a.0, a.1, &a.2), &(b.0, b.1, &b.2)));
            ranked.truncate(top);
            let rank: HashMap<Vec<KeyValue>, usize> = ranked
                .into_iter()
                .enumerate()
                .map(|(i, r)| (r.2, i))
                .collect();
            let mut rows: Vec<(i64, usize, Row)> = groups
                .into_iter()
                .filter_map(|((t, k), mut g)| {
                    let r = *rank.get(&k)?;
                    let (duration, avg) = g.stats(tx);
                    Some((
                        t.unwrap(),
                        r,
                        Row {
                            time: t,
                            key: k,
                            acc: g.acc,
                            duration,
                            avg,
                        },
                    ))
                })
                .collect();
            let desc = spec.sort == (SortKey::Time, Order::Desc);
            rows.sort_by(|a, b| {
                if desc { b.0.cmp(&a.0) } else { a.0.cmp(&b.0) }.then(a.1.cmp(&b.1))
            });
            (rows.into_iter().map(|r| r.2).collect(), total, n)
        }
    }
}

fn within(got: i64, exact: i64) -> bool {
    (got - exact).abs() as f64 <= (exact as f64 / 32.0).max(500.0)
}

fn run(spec: &QuerySpec, batches: &[Batch]) -> ResultTable {
    let mut e = Engine::new(spec.clone()).unwrap();
    for b in batches {
        e.consume(b).unwrap();
    }
    e.finish()
}

fn check_group_by(spec: &QuerySpec, batches: &[Batch], label: &str) {
    let got = run(spec, batches);
    let (want, total, groups) = reference(spec, batches);
    assert_eq!(got.total, total, "{label}");
    assert_eq!(got.groups, groups, "{label}");
    let by_pct = matches!(spec.sort.0, SortKey::Agg(a) if a.is_percentile());
    if by_pct {
        // The approximate values may reorder near-ties (and so pick other
        // series): check each row against its own group, and the order by
        // the reported values.
        if spec.every_ns.is_none() {
            assert_eq!(got.rows.len(), want.len(), "{label}");
            let SortKey::Agg(a) = spec.sort.0 else {
                unreachable!()
            };
            let i = [Agg::P50, Agg::P95, Agg::P99]
                .iter()
                .position(|x| *x == a)
                .unwrap();
            let vals: Vec<Option<i64>> =
                got.rows.iter().map(|r| r.duration.map(|d| d[i])).collect();
            for w in vals.windows(2) {
                assert!(
                    if spec.sort.1 == Order::Desc {
                        w[0] >= w[1]
                    } else {
                        w[0] <= w[1]
                    },
                    "{label}: {vals:?}"
                );
            }
        } else {
            let series: std::collections::HashSet<&Vec<KeyValue>> =
                got.rows.iter().map(|r| &r.key).collect();
            assert!(series.len() <= spec.top.unwrap_or(usize::MAX), "{label}");
        }
        let mut all = spec.clone();
        all.top = None;
        let (every_row, _, _) = reference(&all, batches);
        for r in &got.rows {
            let w = every_row
                .iter()
                .find(|w| w.key == r.key && w.time == r.time)
                .unwrap();
            assert_eq!((r.acc, r.avg), (w.acc, w.avg), "{label}");
            match (r.duration, w.duration) {
                (Some(g), Some(x)) => assert!(
                    g.iter().zip(x).all(|(g, x)| within(*g, x)),
                    "{label}: {g:?} vs {x:?}"
                ),
                (None, None) => {}
                other => panic!("{label}: {other:?}"),
            }
        }
        return;
    }
    assert_eq!(got.rows.len(), want.len(), "{label}");
    for (i, (g, w)) in got.rows.iter().zip(&want).enumerate() {
        assert_eq!(
            (g.time, &g.key, g.acc, g.avg),
            (w.time, &w.key, w.acc, w.avg),
            "{label}: row {i}"
        );
        match (g.duration, w.duration) {
            (Some(gd), Some(wd)) => {
                assert!(
                    gd.iter().zip(wd).all(|(g, x)| within(*g, x)),
                    "{label}: row {i}: {gd:?} vs {wd:?}"
                )
            }
            (None, None) => {}
            other => panic!("{label}: row {i}: {other:?}"),
        }
    }
}

#[test]
fn group_by_matches_reference() {
    let mut rng = Rng(3);
    let flows: Vec<Batch> = [500, 64, 1, 0, 3000]
        .iter()
        .map(|&n| flows_batch(&mut rng, n))
        .collect();
    let conns: Vec<Batch> = [700, 65, 0, 2500]
        .iter()
        .map(|&n| conns_batch(&mut rng, n))
        .collect();
    let flow_bys = [
        "",
        "sip",
        "sip,dip",
        "dport,proto",
        "iface",
        "time",
        "sip,dip,dport,proto,iface",
        "first",
        "conns,bytes_out",
    ];
    let conn_bys = [
        "",
        "service",
        "conn_state,proto",
        "orig_h,resp_p",
        "vlan",
        "duration",
        "local_orig,history",
        "inner_vlan,vlan,orig_bytes",
        "ip_proto",
    ];
    let flow_sorts = ["", "pkts", "bytes_in:asc", "conns desc", "packets_out"];
    let conn_sorts = ["", "conns", "resp_bytes", "p95", "p50:asc", "orig_pkts asc"];
    for case in 0..400 {
        let kind = if case % 2 == 0 {
            Kind::Flows
        } else {
            Kind::Conns
        };
        let (bys, sorts, batches) = match kind {
            Kind::Flows => (&flow_bys[..], &flow_sorts[..], &flows),
            Kind::Conns => (&conn_bys[..], &conn_sorts[..], &conns),
            _ => unreachable!(),
        };
        let by = rng.pick(bys);
        let mut sort = rng.pick(sorts).to_string();
        // Sometimes sort by a group-by field.
        if !by.is_empty() && rng.chance(20) {
            sort = format!(
                "{} {}",
                by.split(',').next().unwrap(),
                rng.pick(&["asc", "desc"])
            );
        }
        let every = rng.pick(&[None, None, Some("5m"), Some("1m"), Some("1h"), Some("7m")]);
        if every.is_some() && rng.chance(20) {
            sort = format!("time {}", rng.pick(&["asc", "desc"]));
        }
        let top = rng.pick(&[None, Some(0), Some(1), Some(3), Some(25)]);
        let w = if rng.chance(30) {
            String::new()
        } else {
            random_expr(&mut rng, kind, 2)
        };
        let spec = parse_query(kind, Some(&w), Some(by), Some(&sort), top, every)
            .unwrap_or_else(|e| panic!("{e}"));
        let label = format!(
            "case {case}: {kind:?} where {w:?} by {by:?} sort {sort:?} top {top:?} every {every:?}"
        );
        check_group_by(&spec, batches, &label);
    }
}

#[test]
fn time_range_is_exact_per_row() {
    let mut rng = Rng(4);
    let batches: Vec<Batch> = (0..3).map(|_| flows_batch(&mut rng, 400)).collect();
    let mut spec = parse_query(
        Kind::Flows,
        Some("proto = tcp"),
        Some("time"),
        None,
        Some(0),
        None,
    )
    .unwrap();
    spec.time_range = Some((T0 + 5 * MIN, T0 + 20 * MIN));
    let got = run(&spec, &batches);
    let times: Vec<i64> = got
        .rows
        .iter()
        .map(|r| match r.key[0] {
            KeyValue::Int(t) => t,
            _ => panic!(),
        })
        .collect();
    assert_eq!(times.len(), 3, "{times:?}");
    assert!(times
        .iter()
        .all(|&t| (T0 + 5 * MIN..T0 + 20 * MIN).contains(&t)));
    // Same as writing the range into the filter.
    let w = format!(
        "proto = tcp and time >= {} and time < {}",
        crate::time::format_rfc3339(T0 + 5 * MIN),
        crate::time::format_rfc3339(T0 + 20 * MIN)
    );
    let spec2 = parse_query(Kind::Flows, Some(&w), Some("time"), None, Some(0), None).unwrap();
    assert_eq!(run(&spec2, &batches).rows, got.rows);
    assert!(got.rows_matched < got.rows_scanned);
}

#[test]
fn schema_problems_are_errors() {
    let mut rng = Rng(5);
    let b = flows_batch(&mut rng, 10);
    let spec = parse_query(Kind::Flows, Some("dport = 443"), None, None, None, None).unwrap();
    let mut e = Engine::new(spec.clone()).unwrap();
    let c = conns_batch(&mut rng, 3);
    assert_eq!(e.consume(&c).unwrap_err().problem, SchemaProblem::WrongKind);
    let mut missing = b.clone();
    missing.columns.retain(|(n, _)| *n != "server_port");
    assert_eq!(
        e.consume(&missing).unwrap_err(),
        SchemaError {
            column: "server_port",
            problem: SchemaProblem::Missing
        }
    );
    let mut wrong = b.clone();
    wrong
        .columns
        .iter_mut()
        .find(|(n, _)| *n == "server_port")
        .unwrap()
        .1 = Column::Str(vec![String::new(); 10]);
    assert_eq!(
        e.consume(&wrong).unwrap_err().problem,
        SchemaProblem::WrongType
    );
    let mut short = b.clone();
    short
        .columns
        .iter_mut()
        .find(|(n, _)| *n == "client")
        .unwrap()
        .1 = Column::Ip(vec![[0; 16]; 3]);
    let mut e2 =
        Engine::new(parse_query(Kind::Flows, None, None, None, None, None).unwrap()).unwrap();
    assert_eq!(
        e2.consume(&short).unwrap_err().problem,
        SchemaProblem::Length
    );
    // A batch holding only the needed columns is enough.
    let mut narrow = b.clone();
    narrow
        .columns
        .retain(|(n, _)| spec.needed_columns().contains(n));
    assert!(e.consume(&narrow).is_ok());
    // Wider integer types are accepted for a field.
    let mut wide = narrow.clone();
    wide.columns
        .iter_mut()
        .find(|(n, _)| *n == "server_port")
        .unwrap()
        .1 = match &narrow.column("server_port").unwrap() {
        Column::U16(v) => Column::U64(v.iter().map(|&x| x as u64).collect()),
        _ => unreachable!(),
    };
    let mut e3 = Engine::new(spec.clone()).unwrap();
    e3.consume(&wide).unwrap();
    let mut e4 = Engine::new(spec).unwrap();
    e4.consume(&narrow).unwrap();
    assert_eq!(e3.finish().rows, e4.finish().rows);
}

#[test]
fn too_wide_key_is_refused() {
    let all: Vec<&str> = Field::all(Kind::Conns).map(Field::name).collect();
    let spec = parse_query(Kind::Conns, None, Some(&all.join(",")), None, None, None);
    let err = spec.unwrap_err();
    assert_eq!(err.flag, "--by");
    assert!(err.column > 100, "{err}");
    assert!(err.message.contains("group by fewer fields"), "{err}");
    // A hand-built spec gets the same refusal from the engine.
    let mut spec = parse_query(Kind::Conns, None, None, None, None, None).unwrap();
    spec.by = Field::all(Kind::Conns).collect();
    assert_eq!(Engine::new(spec).unwrap_err().flag, "--by");
}

// ---- golden output ----

fn golden_flows() -> Batch {
    let ip = |s: &str| ip16(s.parse().unwrap());
    Batch {
        kind: Kind::Flows,
        columns: vec![
            (
                "bucket",
                Column::I64(vec![T0, T0, T0 + 5 * MIN, T0 + 5 * MIN]),
            ),
            ("iface", Column::Str(vec!["eth0".into(); 4])),
            (
                "client",
                Column::Ip(vec![
                    ip("10.0.0.1"),
                    ip("10.0.0.2"),
                    ip("10.0.0.1"),
                    ip("2001:db8::1"),
                ]),
            ),
            (
                "server",
                Column::Ip(vec![
                    ip("10.0.0.9"),
                    ip("10.0.0.9"),
                    ip("10.0.0.9"),
                    ip("2001:db8::53"),
                ]),
            ),
            ("server_port", Column::U16(vec![443, 443, 443, 53])),
            ("proto", Column::U8(vec![6, 6, 6, 17])),
            ("bytes_out", Column::U64(vec![1_500, 200, 2_000_000, 80])),
            ("pkts_out", Column::U64(vec![10, 2, 1500, 1])),
            ("bytes_in", Column::U64(vec![30_000, 100, 40_000_000, 120])),
            ("pkts_in", Column::U64(vec![25, 1, 30_000, 1])),
            ("first", Column::I64(vec![T0; 4])),
            ("last", Column::I64(vec![T0; 4])),
            ("conns", Column::U32(vec![1, 1, 3, 1])),
        ],
    }
}

fn out(t: &ResultTable, f: Format) -> String {
    let mut v = Vec::new();
    render(t, f, &mut v).unwrap();
    String::from_utf8(v).unwrap()
}

#[test]
fn golden_flow_outputs() {
    let spec = parse_query(Kind::Flows, None, None, None, None, None).unwrap();
    let t = run(&spec, &[golden_flows()]);
    assert_eq!(
        out(&t, Format::Table),
        "\
client       server        server_port  proto  conns  pkts_out  pkts_in   pkts  bytes_out  bytes_in     bytes       %
10.0.0.1     10.0.0.9              443  tcp        4      1510    30025  31535    2001500  40030000  42031500  100.00
10.0.0.2     10.0.0.9              443  tcp        1         2        1      3        200       100       300    0.00
2001:db8::1  2001:db8::53           53  udp        1         1        1      2         80       120       200    0.00
3 of 3 groups; 4 of 4 records matched; total 6 conns, 31540 pkts, 42032000 bytes
"
    );
    assert_eq!(
        out(&t, Format::Csv),
        "\
client,server,server_port,proto,conns,pkts_out,pkts_in,pkts,bytes_out,bytes_in,bytes
10.0.0.1,10.0.0.9,443,tcp,4,1510,30025,31535,2001500,40030000,42031500
10.0.0.2,10.0.0.9,443,tcp,1,2,1,3,200,100,300
2001:db8::1,2001:db8::53,53,udp,1,1,1,2,80,120,200
"
    );
    assert_eq!(
        out(&t, Format::Json),
        "\
[
{\"client\":\"10.0.0.1\",\"server\":\"10.0.0.9\",\"server_port\":443,\"proto\":\"tcp\",\"conns\":4,\"pkts_out\":1510,\"pkts_in\":30025,\"pkts\":31535,\"bytes_out\":2001500,\"bytes_in\":40030000,\"bytes\":42031500},
{\"client\":\"10.0.0.2\",\"server\":\"10.0.0.9\",\"server_port\":443,\"proto\":\"tcp\",\"conns\":1,\"pkts_out\":2,\"pkts_in\":1,\"pkts\":3,\"bytes_out\":200,\"bytes_in\":100,\"bytes\":300},
{\"client\":\"2001:db8::1\",\"server\":\"2001:db8::53\",\"server_port\":53,\"proto\":\"udp\",\"conns\":1,\"pkts_out\":1,\"pkts_in\":1,\"pkts\":2,\"bytes_out\":80,\"bytes_in\":120,\"bytes\":200}
]
"
    );

    // A time series, top 1 series.
    let spec = parse_query(
        Kind::Flows,
        Some("proto = tcp"),
        Some("sip"),
        None,
        Some(1),
        Some("5m"),
    )
    .unwrap();
    let t = run(&spec, &[golden_flows()]);
    assert_eq!(
        out(&t, Format::Csv),
        "\
time,client,conns,pkts_out,pkts_in,pkts,bytes_out,bytes_in,bytes
2024-05-01T12:00:00Z,10.0.0.1,1,10,25,35,1500,30000,31500
2024-05-01T12:05:00Z,10.0.0.1,3,1500,30000,31500,2000000,40000000,42000000
"
    );
    assert_eq!(
        out(&t, Format::Table),
        "\
time                  client    conns  pkts_out  pkts_in   pkts  bytes_out  bytes_in     bytes      %
2024-05-01T12:00:00Z  10.0.0.1      1        10       25     35       1500     30000     31500   0.07
2024-05-01T12:05:00Z  10.0.0.1      3      1500    30000  31500    2000000  40000000  42000000  99.92
1 of 2 series; 3 of 4 records matched; total 5 conns, 31538 pkts, 42031800 bytes
"
    );
    // No rows.
    let spec = parse_query(Kind::Flows, Some("dport = 1"), None, None, None, None).unwrap();
    let t = run(&spec, &[golden_flows()]);
    assert_eq!(out(&t, Format::Json), "[]\n");
    assert_eq!(
        out(&t, Format::Csv),
        "client,server,server_port,proto,conns,pkts_out,pkts_in,pkts,bytes_out,bytes_in,bytes\n"
    );
    assert_eq!(
        out(&t, Format::Table),
        "client  server  server_port  proto  conns  pkts_out  pkts_in  pkts  bytes_out  bytes_in  bytes  %\n0 of 0 groups; 0 of 4 records matched; total 0 conns, 0 pkts, 0 bytes\n"
    );
}

#[test]
fn golden_conn_outputs() {
    let ms = 1_000_000i64;
    let b = Batch {
        kind: Kind::Conns,
        columns: vec![
            (
                "service",
                Column::Str(vec![
                    "dns".into(),
                    "dns".into(),
                    "".into(),
                    "say \"hi\", ok".into(),
                ]),
            ),
            (
                "orig_bytes",
                Column::OptU64(vec![Some(40), Some(42), None, Some(1)]),
            ),
            ("orig_pkts", Column::U64(vec![1, 1, 3, 1])),
            (
                "resp_bytes",
                Column::OptU64(vec![Some(100), Some(120), None, Some(2)]),
            ),
            ("resp_pkts", Column::U64(vec![1, 1, 0, 1])),
            (
                "duration",
                Column::OptI64(vec![Some(2 * ms), Some(40 * ms), None, Some(1_500 * ms)]),
            ),
        ],
    };
    let spec = parse_query(
        Kind::Conns,
        None,
        Some("service"),
        Some("conns"),
        None,
        None,
    )
    .unwrap();
    assert_eq!(
        spec.needed_columns(),
        [
            "service",
            "orig_bytes",
            "orig_pkts",
            "resp_bytes",
            "resp_pkts",
            "duration"
        ]
    );
    let t = run(&spec, &[b]);
    assert_eq!(
        out(&t, Format::Table),
        "\
service       conns  orig_pkts  resp_pkts  pkts  orig_bytes  resp_bytes  bytes      %  duration_p50_s  duration_p95_s  duration_p99_s
dns               2          2          2     4          82         220    302  99.02        0.002016        0.039936        0.039936
-                 1          3          0     3           0           0      0   0.00               -               -               -
say \"hi\", ok      1          1          1     2           1           2      3   0.98        1.500000        1.500000        1.500000
3 of 3 groups; 4 of 4 records matched; total 4 conns, 9 pkts, 305 bytes
"
    );
    assert_eq!(
        out(&t, Format::Csv),
        "\
service,conns,orig_pkts,resp_pkts,pkts,orig_bytes,resp_bytes,bytes,duration_p50_s,duration_p95_s,duration_p99_s
dns,2,2,2,4,82,220,302,0.002016,0.039936,0.039936
,1,3,0,3,0,0,0,,,
\"say \"\"hi\"\", ok\",1,1,1,2,1,2,3,1.500000,1.500000,1.500000
"
    );
    assert_eq!(
        out(&t, Format::Json),
        "\
[
{\"service\":\"dns\",\"conns\":2,\"orig_pkts\":2,\"resp_pkts\":2,\"pkts\":4,\"orig_bytes\":82,\"resp_bytes\":220,\"bytes\":302,\"duration_p50_s\":0.002016,\"duration_p95_s\":0.039936,\"duration_p99_s\":0.039936},
{\"service\":\"\",\"conns\":1,\"orig_pkts\":3,\"resp_pkts\":0,\"pkts\":3,\"orig_bytes\":0,\"resp_bytes\":0,\"bytes\":0,\"duration_p50_s\":null,\"duration_p95_s\":null,\"duration_p99_s\":null},
{\"service\":\"say \\\"hi\\\", ok\",\"conns\":1,\"orig_pkts\":1,\"resp_pkts\":1,\"pkts\":2,\"orig_bytes\":1,\"resp_bytes\":2,\"bytes\":3,\"duration_p50_s\":1.500000,\"duration_p95_s\":1.500000,\"duration_p99_s\":1.500000}
]
"
    );
}

#[test]
fn percentiles_within_stated_bound_on_many_samples() {
    let mut rng = Rng(6);
    let n = 50_000;
    let durations: Vec<Option<i64>> = (0..n)
        .map(|_| {
            let e = rng.below(10) as u32;
            Some(10i64.pow(e) + rng.below(10u64.pow(e)) as i64)
        })
        .collect();
    let groups: Vec<String> = (0..n).map(|i| format!("g{}", i % 7)).collect();
    let b = Batch {
        kind: Kind::Conns,
        columns: vec![
            ("service", Column::Str(groups.clone())),
            ("orig_bytes", Column::OptU64(vec![Some(1); n])),
            ("orig_pkts", Column::U64(vec![1; n])),
            ("resp_bytes", Column::OptU64(vec![None; n])),
            ("resp_pkts", Column::U64(vec![0; n])),
            ("duration", Column::OptI64(durations.clone())),
        ],
    };
    let spec = parse_query(
        Kind::Conns,
        None,
        Some("service"),
        Some("service"),
        Some(0),
        None,
    )
    .unwrap();
    let t = run(&spec, &[b]);
    assert_eq!(t.rows.len(), 7);
    for row in &t.rows {
        let KeyValue::Str(g) = &row.key[0] else {
            panic!()
        };
        let mut d: Vec<i64> = (0..n)
            .filter(|&i| &groups[i] == g)
            .map(|i| durations[i].unwrap())
            .collect();
        let exact = exact_pct(&mut d).unwrap();
        let got = row.duration.unwrap();
        for i in 0..3 {
            assert!(within(got[i], exact[i]), "{g}: {got:?} vs {exact:?}");
        }
    }
}

#[test]
fn expr_fields_and_types() {
    // Every field of both kinds can be filtered on and grouped by.
    for kind in [Kind::Flows, Kind::Conns] {
        for f in Field::all(kind) {
            let cond = match f.ty() {
                Ty::UInt { .. } => format!("{} >= 0", f.name()),
                Ty::Time => format!("{} > 0", f.name()),
                Ty::Duration => format!("{} >= 0s", f.name()),
                Ty::Ip => format!("{} in ::/0", f.name()),
                Ty::Str => format!("{} ~ \"\"", f.name()),
                Ty::Bool => format!("{} = true", f.name()),
            };
            let spec = parse_query(kind, Some(&cond), Some(f.name()), None, None, None)
                .unwrap_or_else(|e| panic!("{e}"));
            let mut rng = Rng(7);
            let b = if kind == Kind::Flows {
                flows_batch(&mut rng, 100)
            } else {
                conns_batch(&mut rng, 100)
            };
            check_group_by(&spec, &[b], &cond);
        }
    }
}

#[test]
fn json_and_csv_value_types() {
    let mut rng = Rng(8);
    let b = conns_batch(&mut rng, 50);
    let spec = parse_query(
        Kind::Conns,
        Some("vlan != 10"),
        Some("local_orig,vlan,duration,ts"),
        Some("local_orig"),
        Some(2),
        None,
    )
    .unwrap();
    let t = run(&spec, &[b]);
    let json = out(&t, Format::Json);
    let first = json.lines().nth(1).unwrap();
    assert!(
        first.starts_with("{\"local_orig\":false,\"vlan\":"),
        "{first}"
    );
    assert!(first.contains("\"ts\":\"2024-05-01T"), "{first}");
    // Unset vlan sorts first and is null in JSON, empty in CSV, '-' in the table.
    assert!(first.contains("\"vlan\":null"), "{first}");
    let csv = out(&t, Format::Csv);
    assert!(csv.lines().nth(1).unwrap().starts_with("false,,"), "{csv}");
    let table = out(&t, Format::Table);
    let cells: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(cells[..3], ["false", "-", "-"], "{table}");
}

#[test]
fn cli_time_helpers() {
    let now = T0;
    assert_eq!(crate::parse_last("15m").unwrap(), 15 * MIN);
    assert_eq!(crate::parse_last("0s").unwrap_err().flag, "--last");
    assert_eq!(crate::parse_time_arg("--from", "now", now).unwrap(), now);
    assert_eq!(
        crate::parse_time_arg("--from", "now-1h", now).unwrap(),
        now - 60 * MIN
    );
    assert_eq!(
        crate::parse_time_arg("--from", "-30m", now).unwrap(),
        now - 30 * MIN
    );
    assert_eq!(
        crate::parse_time_arg("--to", "2024-05-01T12:00:00Z", 0).unwrap(),
        T0
    );
    let e = crate::parse_time_arg("--to", "tomorrow", now).unwrap_err();
    assert_eq!((e.flag, e.column), ("--to", 1));
}

#[test]
fn engine_is_send() {
    fn send<T: Send>() {}
    send::<Engine>();
    send::<ResultTable>();
    send::<QuerySpec>();
}

#[test]
fn large_in_lists_use_the_sorted_paths() {
    let mut rng = Rng(9);
    let b = conns_batch(&mut rng, 300);
    let Some(Column::Str(uids)) = b.column("uid") else {
        panic!()
    };
    let Some(Column::Ip(hosts)) = b.column("orig_h") else {
        panic!()
    };
    let Some(Column::OptU64(bytes)) = b.column("orig_bytes") else {
        panic!()
    };
    let Some(Column::I64(ts)) = b.column("ts") else {
        panic!()
    };
    let quoted: Vec<String> = uids.iter().step_by(7).map(|u| format!("\"{u}\"")).collect();
    let ips: Vec<String> = hosts
        .iter()
        .step_by(11)
        .map(crate::value::format_ip)
        .collect();
    let nums: Vec<String> = bytes
        .iter()
        .step_by(5)
        .flatten()
        .map(|n| n.to_string())
        .collect();
    for w in [
        format!("uid in ({})", quoted.join(", ")),
        format!("uid not in ({})", quoted.join(", ")),
        format!("orig_h in ({})", ips.join(", ")),
        format!("orig_h in ({}, 10.0.0.0/8)", ips.join(", ")),
        format!("orig_bytes in ({})", nums.join(", ")),
        format!(
            "ts in ({})",
            ts.iter()
                .step_by(13)
                .map(|&t| crate::time::format_rfc3339(t))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ] {
        let e = parse_where(Kind::Conns, &w).unwrap();
        let mut f = Filter::new(&e);
        let mut bits = Vec::new();
        f.eval(&b, &mut bits).unwrap();
        let mut n = 0;
        for r in 0..b.rows() {
            let got = bits[r / 64] >> (r % 64) & 1 == 1;
            assert_eq!(got, ref_eval(&e, &b, r), "row {r}: {w}");
            n += got as usize;
        }
        assert!(n > 0, "{w}");
    }
}

// ---- transactions ----

/// Synthetic transactions of `kind` written to a store and read back (the
/// batches a query sees): two hours and a bit.
fn tx_batches(kind: Kind, n: u64, seed: u64) -> Vec<Batch> {
    let dir = std::env::temp_dir().join(format!(
        "wirelog-query-tx-{}-{seed}-{}",
        kind.as_str(),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let mut store = wirelog_store::Store::open(
        &dir,
        wirelog_store::StoreOptions {
            sync: false,
            ..Default::default()
        },
    )
    .unwrap();
    let rows = wirelog_store::synth::tx_rows(kind, n, T0, 8_000_000_000 / 3, seed);
    store.append_tx(kind, &rows).unwrap();
    store.close().unwrap();
    let mut out = Vec::new();
    wirelog_store::Store::scan(&dir, &wirelog_store::Scan::all_columns(kind), |b| {
        out.push(b);
        Ok(())
    })
    .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    out
}

fn tx_atom(rng: &mut Rng, kind: Kind) -> String {
    let ips = [
        "10.0.1.5",
        "192.168.1.1",
        "192.168.1.2",
        "2001::1",
        "10.0.0.1",
    ];
    let nets = ["10.0.0.0/16", "192.168.1.0/30", "2001::/16", "0.0.0.0/0"];
    let durs = ["100us", "1ms", "3ms", "20ms", "0.5s"];
    let cmp = ["=", "!=", "<", "<=", ">", ">="];
    if rng.chance(50) {
        return match rng.below(14) {
            0 => format!(
                "status {} {}",
                rng.pick(&["=", "!="]),
                rng.pick(&["ok", "error", "no_response"])
            ),
            1 => format!("latency {} {}", rng.pick(&cmp[2..]), rng.pick(&durs)),
            2 => format!(
                "first_byte_latency {} {}",
                rng.pick(&cmp[2..]),
                rng.pick(&durs)
            ),
            3 => format!("request_bytes {} {}", rng.pick(&cmp), 40 + rng.below(400)),
            4 => format!("bytes > {}", rng.below(20_000)),
            5 => format!("response_bytes {} {}", rng.pick(&cmp), rng.below(20_000)),
            6 => format!("ip = {}", rng.pick(&ips)),
            7 => format!("ip in {}", rng.pick(&nets)),
            8 => format!("sip in {}", rng.pick(&nets)),
            9 => format!("dip != {}", rng.pick(&ips)),
            10 => format!("sport {} {}", rng.pick(&cmp), 30_000 + rng.below(2000)),
            11 => format!("transport = {}", rng.pick(&["tcp", "udp", "6", "17"])),
            12 => format!("uid ~ {}", rng.pick(&["C", "a", "^C", "1$"])),
            _ => format!("port in (53, 80, 3306, {})", 30_000 + rng.below(100)),
        };
    }
    let pick = |rng: &mut Rng, xs: &[&str]| rng.pick(xs).to_string();
    match kind {
        Kind::Http => match rng.below(7) {
            0 => format!(
                "status_code {} {}",
                rng.pick(&cmp),
                pick(rng, &["200", "404", "500"])
            ),
            1 => "status_code in (200, 503)".into(),
            2 => format!(
                "host {} {}",
                rng.pick(&["=", "!=", "~"]),
                pick(rng, &["api.example.com", "example", "^www"])
            ),
            3 => format!("uri ~ {}", pick(rng, &["^/v1/items/1", "items", "0$"])),
            4 => format!(
                "method in ({})",
                pick(rng, &["GET", "GET, POST", "PUT, DELETE"])
            ),
            5 => format!("user_agent = {}", pick(rng, &["\"\"", "curl/8.5.0"])),
            _ => format!("response_body_len > {}", rng.below(10_000)),
        },
        Kind::Mysql => match rng.below(6) {
            0 => format!("fingerprint ~ {}", pick(rng, &["SELECT", "^INSERT", "?$"])),
            1 => "error_code = 1062".into(),
            2 => format!("affected_rows {} {}", rng.pick(&cmp), rng.below(3)),
            3 => format!("user = {}", pick(rng, &["app", "report"])),
            4 => "num_rows > 10".into(),
            _ => "sql_state != \"\"".into(),
        },
        Kind::Pgsql => match rng.below(5) {
            0 => format!("command_tag ~ {}", pick(rng, &["^SELECT", "1$"])),
            1 => format!("rows >= {}", rng.below(9)),
            2 => "error_code = 23505".into(),
            3 => format!("fingerprint ~ {}", pick(rng, &["$1", "now", "COMMIT"])),
            _ => "error_severity = ERROR".into(),
        },
        Kind::Redis => match rng.below(4) {
            0 => format!(
                "command in ({})",
                pick(rng, &["GET, SET", "INCR", "DEL, EXPIRE, HGETALL"])
            ),
            1 => format!(
                "reply_type {} {}",
                rng.pick(&["=", "!="]),
                pick(rng, &["error", "bulk"])
            ),
            2 => format!("args ~ {}", pick(rng, &["key:1", "^key:2"])),
            _ => "reply = \"\"".into(),
        },
        Kind::Tls => match rng.below(7) {
            0 => format!(
                "server_name {} {}",
                rng.pick(&["=", "!=", "~"]),
                pick(rng, &["api.example.com", "example", "^www", "\"\""])
            ),
            1 => format!("version = {}", pick(rng, &["TLSv12", "TLSv13"])),
            2 => format!("established = {}", pick(rng, &["true", "false"])),
            3 => format!("not_valid_after < {}", 1_700_000_000 + rng.below(200) * 86_400),
            4 => format!("ja4 ~ {}", pick(rng, &["^t13", "h2_", "h1"])),
            5 => "last_alert != \"\"".into(),
            _ => format!("resumed = {}", pick(rng, &["true", "false"])),
        },
        Kind::Memcached => match rng.below(6) {
            0 => format!("command in ({})", pick(rng, &["get, set", "delete", "incr, decr, touch"])),
            1 => format!("result {} {}", rng.pick(&["=", "!="]), pick(rng, &["hit", "miss", "stored"])),
            2 => format!("value_bytes {} {}", rng.pick(&[">", "<="]), rng.below(5000)),
            3 => format!("keys > {}", rng.below(3)),
            4 => format!("noreply = {}", pick(rng, &["true", "false"])),
            _ => "error_message != \"\"".into(),
        },
        Kind::Mongodb => match rng.below(6) {
            0 => format!("command in ({})", pick(rng, &["find, getMore", "insert", "aggregate, delete, update"])),
            1 => format!("op {} {}", rng.pick(&["=", "!="]), pick(rng, &["msg", "query", "get_more"])),
            2 => format!("docs_returned {} {}", rng.pick(&[">", "<="]), rng.below(5)),
            3 => format!("n > {}", rng.below(3)),
            4 => format!("more_to_come = {}", pick(rng, &["true", "false"])),
            _ => "error_code > 0".into(),
        },
        // MQTT, AMQP, Kafka: the store's synthetic values for them are one
        // a column from its declared type (`<column>-<n>`, numbers, flags).
        Kind::Mqtt => match rng.below(4) {
            0 => format!("topic ~ \"{}\"", pick(rng, &["-1", "-2", "topic"])),
            1 => format!("payload_bytes {} {}", rng.pick(&[">", "<="]), rng.below(8)),
            2 => format!("retain = {}", pick(rng, &["true", "false"])),
            _ => format!("packet_type != \"packet_type-{}\"", rng.below(4)),
        },
        Kind::Amqp => match rng.below(4) {
            0 => format!("method ~ \"{}\"", pick(rng, &["-1", "-3", "method"])),
            1 => format!("body_bytes {} {}", rng.pick(&[">", "<="]), rng.below(8)),
            2 => format!("from_server = {}", pick(rng, &["true", "false"])),
            _ => "exchange != \"\"".into(),
        },
        Kind::Kafka => match rng.below(4) {
            0 => format!("api ~ \"{}\"", pick(rng, &["-1", "-2", "api"])),
            1 => format!("records {} {}", rng.pick(&[">", "<="]), rng.below(8)),
            2 => format!("throttle_ms < {}", rng.below(8)),
            _ => "group != \"\"".into(),
        },
        Kind::Cassandra => match rng.below(4) {
            0 => format!("op ~ \"{}\"", pick(rng, &["-1", "-2", "op"])),
            1 => format!("rows {} {}", rng.pick(&[">", "<="]), rng.below(8)),
            2 => format!("error_code < {}", rng.below(8)),
            _ => "keyspace != \"\"".into(),
        },
        Kind::Grpc => match rng.below(6) {
            0 => format!("grpc_status {} {}", rng.pick(&["=", "!="]), rng.below(3)),
            1 => format!("request_messages > {}", rng.below(3)),
            2 => format!("response_message_bytes {} {}", rng.pick(&[">", "<="]), rng.below(5000)),
            3 => format!("compressed = {}", pick(rng, &["true", "false"])),
            4 => format!("stream_id < {}", rng.below(100)),
            _ => "grpc_message != \"\"".into(),
        },
        _ => match rng.below(8) {
            0 => format!(
                "qtype_name {} {}",
                rng.pick(&["=", "!="]),
                pick(rng, &["A", "AAAA", "MX"])
            ),
            1 => format!("rcode = {}", rng.below(4)),
            2 => "rcode_name != NOERROR".into(),
            3 => format!("aa = {}", pick(rng, &["true", "false"])),
            4 => format!("query ~ {}", pick(rng, &["example.com$", "^api", "net"])),
            5 => format!("trans_id < {}", rng.below(2000)),
            6 => format!("host = {}", rng.pick(&ips)),
            _ => format!("qtype in (1, {})", rng.pick(&[5u64, 28, 16])),
        },
    }
}

#[test]
fn filter_matches_reference_on_tx() {
    for (i, kind) in Kind::TX.into_iter().enumerate() {
        let mut rng = Rng(40 + i as u64);
        let batches = tx_batches(kind, 1500, i as u64 + 1);
        check_filter(kind, &mut rng, &batches, 200);
    }
}

#[test]
fn group_by_matches_reference_on_tx() {
    let mut rng = Rng(7);
    for (i, kind) in Kind::TX.into_iter().enumerate() {
        let batches = tx_batches(kind, 3000, i as u64 + 11);
        let own: &[&str] = match kind {
            Kind::Http => &["host", "host,uri", "status_code", "method,version"],
            Kind::Mysql => &["fingerprint", "user,database", "error_code"],
            Kind::Pgsql => &["fingerprint", "command_tag", "error_severity"],
            Kind::Redis => &["command", "reply_type,command"],
            Kind::Tls => &["server_name", "version,cipher", "ja4", "established,resumed"],
            Kind::Memcached => &["command", "result,command", "noreply"],
            Kind::Mongodb => &["command,collection,fingerprint", "op,database", "more_to_come"],
            Kind::Mqtt => &["packet_type", "packet_type,topic", "retain"],
            Kind::Amqp => &["method", "method,exchange,queue", "from_server"],
            Kind::Kafka => &["api", "api,topic", "acks"],
            Kind::Grpc => &["service,method", "grpc_status_name", "call_type"],
            Kind::Cassandra => &["op,fingerprint", "result", "consistency,keyspace"],
            _ => &["query,qtype_name", "rcode_name", "aa,rd"],
        };
        let common = [
            "",
            "status",
            "server,server_port",
            "client",
            "latency",
            "transport",
        ];
        let sorts = [
            "",
            "count",
            "errors",
            "p99_latency",
            "latency_p50:asc",
            "p95",
            "latency_avg",
            "avg_latency asc",
            "request_bytes asc",
            "bytes",
            "response_bytes",
        ];
        for case in 0..60 {
            let by = if rng.chance(50) {
                rng.pick(own)
            } else {
                rng.pick(&common)
            };
            let sort = rng.pick(&sorts);
            let every = rng.pick(&[None, None, Some("5m"), Some("1h")]);
            let top = rng.pick(&[None, Some(0), Some(1), Some(3)]);
            let w = if rng.chance(40) {
                String::new()
            } else {
                random_expr(&mut rng, kind, 2)
            };
            let spec = parse_query(kind, Some(&w), Some(by), Some(sort), top, every)
                .unwrap_or_else(|e| panic!("{e}"));
            let label = format!(
                "case {case}: {kind:?} where {w:?} by {by:?} sort {sort:?} top {top:?} every {every:?}"
            );
            check_group_by(&spec, &batches, &label);
        }
    }
}

#[test]
fn tx_queries_from_the_brief() {
    let mysql = tx_batches(Kind::Mysql, 4000, 5);
    let spec = parse_query(
        Kind::Mysql,
        None,
        Some("fingerprint"),
        Some("p99_latency"),
        Some(10),
        None,
    )
    .unwrap();
    assert_eq!(spec.sort, (SortKey::Agg(Agg::P99), Order::Desc));
    let t = run(&spec, &mysql);
    assert!(!t.rows.is_empty() && t.rows.len() <= 10);
    let p99: Vec<i64> = t.rows.iter().map(|r| r.duration.unwrap()[2]).collect();
    assert!(p99.windows(2).all(|w| w[0] >= w[1]), "{p99:?}");
    // Against the exact nearest-rank value of each group.
    for r in &t.rows {
        let KeyValue::Str(fp) = &r.key[0] else {
            panic!()
        };
        let mut lat: Vec<i64> = Vec::new();
        let mut errors = 0;
        for b in &mysql {
            let Column::Str(f) = b.column("fingerprint").unwrap() else {
                panic!()
            };
            let Column::OptI64(l) = b.column("latency").unwrap() else {
                panic!()
            };
            let Column::Str(st) = b.column("status").unwrap() else {
                panic!()
            };
            for i in 0..b.rows() {
                if &f[i] == fp {
                    lat.extend(l[i]);
                    errors += (st[i] == "error") as u64;
                }
            }
        }
        let exact = exact_pct(&mut lat).unwrap();
        for (g, x) in r.duration.unwrap().iter().zip(exact) {
            assert!(within(*g, x), "{fp}: {g} vs {x}");
        }
        assert_eq!(r.acc.errors(), errors);
        let sum: i64 = lat.iter().sum();
        assert_eq!(r.avg, Some(sum / lat.len() as i64));
    }
    let csv = out(&t, Format::Csv);
    assert!(
        csv.starts_with("fingerprint,count,errors,request_bytes,response_bytes,bytes,latency_p50_s,latency_p95_s,latency_p99_s,latency_avg_s\n"),
        "{csv}"
    );

    let http = tx_batches(Kind::Http, 3000, 6);
    let spec = parse_query(
        Kind::Http,
        Some("status_code >= 500"),
        Some("host,uri"),
        None,
        Some(0),
        None,
    )
    .unwrap();
    assert_eq!(spec.numeric_ranges(), [("status_code", 500, u64::MAX)]);
    let t = run(&spec, &http);
    let mut want = 0;
    for b in &http {
        let Column::OptU64(c) = b.column("status_code").unwrap() else {
            panic!()
        };
        want += c.iter().filter(|c| c.is_some_and(|c| c >= 500)).count() as u64;
    }
    assert!(want > 0);
    assert_eq!(t.total.conns, want);
    // Every 5xx is an error in the synthetic data.
    assert_eq!(t.total.errors(), want);
    assert_eq!(t.rows.iter().map(|r| r.acc.conns).sum::<u64>(), want);
    let table = out(&t, Format::Table);
    assert!(table.lines().next().unwrap().starts_with("host"), "{table}");
    assert!(table.contains("transactions"), "{table}");
    let json = out(&t, Format::Json);
    assert!(json.contains("\"latency_avg_s\":"), "{json}");
}

#[test]
fn tx_defaults_fields_and_errors() {
    let names = |s: &QuerySpec| s.by.iter().map(|f| f.name()).collect::<Vec<_>>();
    for (kind, by) in [
        (Kind::Http, vec!["host"]),
        (Kind::Mysql, vec!["fingerprint"]),
        (Kind::Pgsql, vec!["fingerprint"]),
        (Kind::Redis, vec!["command"]),
        (Kind::Dns, vec!["query", "qtype_name"]),
    ] {
        let s = parse_query(kind, None, None, None, None, None).unwrap();
        assert_eq!(names(&s), by);
        assert_eq!(s.sort, (SortKey::Agg(Agg::Conns), Order::Desc));
        assert!(s.percentiles);
        // Aliases shared by every transaction kind.
        for (alias, col) in [
            ("sip", "client"),
            ("dip", "server"),
            ("sport", "client_port"),
            ("dport", "server_port"),
            ("time", "ts"),
            ("proto", "transport"),
        ] {
            assert_eq!(Field::lookup(kind, alias).unwrap().name(), col);
        }
        let s = parse_query(
            kind,
            Some("dport = 5 and latency > 1ms"),
            Some("sip"),
            None,
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            s.needed_columns(),
            [
                "server_port",
                "latency",
                "client",
                "request_bytes",
                "status",
                "response_bytes",
                "sample_weight"
            ]
        );
        // Either side: `ip`.
        let e = parse_where(kind, "ip = 10.0.0.1").unwrap();
        assert_eq!(e.to_string(), "client = 10.0.0.1 or server = 10.0.0.1");
        for sort in [
            "latency_p99",
            "p99_latency",
            "p50",
            "errors",
            "avg",
            "count",
            "transactions",
        ] {
            parse_query(kind, None, None, Some(sort), None, None).unwrap();
        }
        // Packets are not a transaction aggregate.
        let e = parse_query(kind, None, None, Some("pkts"), None, None).unwrap_err();
        assert_eq!(e.flag, "--sort");
        assert!(
            e.expected.contains("latency_p99") && e.expected.contains("errors"),
            "{e}"
        );
    }
    // `host`: http's Host header; the address on other kinds.
    assert_eq!(
        parse_where(Kind::Http, "host = example.com")
            .unwrap()
            .to_string(),
        "host = \"example.com\""
    );
    assert_eq!(
        parse_where(Kind::Dns, "host = 10.0.0.1")
            .unwrap()
            .to_string(),
        "client = 10.0.0.1 or server = 10.0.0.1"
    );
    assert_eq!(
        parse_where(Kind::Conns, "host = 10.0.0.1")
            .unwrap()
            .to_string(),
        "orig_h = 10.0.0.1 or resp_h = 10.0.0.1"
    );
    // Errors point at the column.
    let e = parse_where(Kind::Http, "status_code >= 5xx").unwrap_err();
    assert_eq!(e.column, 16, "{e}");
    let e = parse_where(Kind::Mysql, "latency > 1ms and fingerprnt ~ SELECT").unwrap_err();
    assert_eq!(e.column, 19, "{e}");
    assert!(e.message.contains("did you mean 'fingerprint'"), "{e}");
    assert!(e.expected.contains("mysql field"), "{e}");
    let e = parse_query(Kind::Redis, None, Some("command,ip"), None, None, None).unwrap_err();
    assert_eq!((e.flag, e.column), ("--by", 9));
    let e = parse_query(Kind::Dns, Some("aa = maybe"), None, None, None, None).unwrap_err();
    assert_eq!(e.column, 6);
}

#[test]
fn tx_time_series() {
    let dns = tx_batches(Kind::Dns, 3000, 8);
    let spec = parse_query(
        Kind::Dns,
        Some("status != no_response"),
        Some("qtype_name"),
        None,
        Some(2),
        Some("10m"),
    )
    .unwrap();
    // Sums and means exact, percentiles within the bound.
    check_group_by(&spec, &dns, "dns every 10m");
    let t = run(&spec, &dns);
    // Two series, every 10 minutes over the ~2.2 hours.
    let times: std::collections::BTreeSet<i64> = t.rows.iter().map(|r| r.time.unwrap()).collect();
    assert!(times.len() >= 13, "{times:?}");
    assert!(times.iter().all(|t| t % 600_000_000_000 == 0));
    let series: std::collections::BTreeSet<&Vec<KeyValue>> =
        t.rows.iter().map(|r| &r.key).collect();
    assert_eq!(series.len(), 2);
    let csv = out(&t, Format::Csv);
    assert!(csv.starts_with("time,qtype_name,count,errors,"), "{csv}");
}

/// A transaction of weight N (`capture --cpu-budget` parsed its connection
/// 1 in N) counts as N copies of itself: counts, sums, errors, the mean and
/// the percentiles of a weighted batch equal those of the batch with each
/// row repeated its weight times, and only the weighted answer says it is
/// an estimate. Rows without a weight (files from before it) count 1.
#[test]
fn weighted_rows_count_as_that_many_rows() {
    let batches = tx_batches(Kind::Http, 3000, 12);
    let weight = wirelog_record::columns::SAMPLE_WEIGHT.name;
    let mut weighted = Vec::new();
    let mut repeated = Vec::new();
    for b in &batches {
        let n = b.rows();
        // Weights 1..=4, and every seventh row unset (counting 1).
        let w: Vec<Option<u64>> = (0..n).map(|r| (r % 7 != 0).then_some(r as u64 % 4 + 1)).collect();
        let rows: Vec<usize> = (0..n).flat_map(|r| std::iter::repeat_n(r, w[r].unwrap_or(1) as usize)).collect();
        let with = |col: Column| -> Vec<(&'static str, Column)> {
            b.columns.iter().map(|(name, c)| (*name, if *name == weight { col.clone() } else { c.clone() })).collect()
        };
        weighted.push(Batch { kind: b.kind, columns: with(Column::OptU64(w.clone())) });
        let ones = Column::OptU64(vec![Some(1); rows.len()]);
        let columns = b
            .columns
            .iter()
            .map(|(name, c)| (*name, if *name == weight { ones.clone() } else { gather(c, &rows) }))
            .collect();
        repeated.push(Batch { kind: b.kind, columns });
    }
    assert!(weighted[0].column(weight).is_some());
    for (by, every) in [(Some("method"), None), (Some("status_code"), Some("10m")), (None, None)] {
        let spec = parse_query(Kind::Http, Some("status != no_request"), by, None, None, every).unwrap();
        let (a, b) = (run(&spec, &weighted), run(&spec, &repeated));
        assert_eq!(a.rows, b.rows, "{by:?} {every:?}");
        assert_eq!(a.total, b.total, "{by:?} {every:?}");
        assert!(a.estimated && !b.estimated);
        assert!(a.total.conns > a.rows_matched, "weights extrapolate the count");
    }
    let spec = parse_query(Kind::Http, None, None, None, None, None).unwrap();
    let plain = run(&spec, &batches);
    assert!(!plain.estimated);
    assert_eq!(plain.total.conns, plain.rows_matched, "weight 1 everywhere: exact");
    let table = out(&run(&spec, &weighted), Format::Table);
    assert!(table.trim_end().ends_with("(estimated: see below)"), "{table}");
    assert!(crate::render::estimated_note(&run(&spec, &weighted)).is_some());
}

// ---- groups formed elsewhere (a database's GROUP BY) ----

fn gather(col: &Column, rows: &[usize]) -> Column {
    fn g<T: Clone>(v: &[T], rows: &[usize]) -> Vec<T> {
        rows.iter().map(|&r| v[r].clone()).collect()
    }
    match col {
        Column::U8(v) => Column::U8(g(v, rows)),
        Column::U16(v) => Column::U16(g(v, rows)),
        Column::U32(v) => Column::U32(g(v, rows)),
        Column::U64(v) => Column::U64(g(v, rows)),
        Column::OptU64(v) => Column::OptU64(g(v, rows)),
        Column::I64(v) => Column::I64(g(v, rows)),
        Column::OptI64(v) => Column::OptI64(g(v, rows)),
        Column::Ip(v) => Column::Ip(g(v, rows)),
        Column::Str(v) => Column::Str(g(v, rows)),
        Column::Bool(v) => Column::Bool(g(v, rows)),
    }
}

/// What a backend grouping one batch by (interval, `--by` values, duration
/// bucket) hands over: one row per group (its first record's key columns),
/// its sums and record count, and (count, min, max) per duration bucket.
type Partial = (Batch, Vec<(Acc, u64)>, Vec<(u32, u64, i64, i64)>);

fn partial_of(spec: &QuerySpec, b: &Batch) -> Partial {
    let v = crate::field::value_cols(spec.kind);
    let time = Field::time(spec.kind).name();
    let num = |n: &str, r: usize| match cell(b, n, r) {
        V::U(x) => x.unwrap_or(0),
        V::I(x) => x.unwrap_or(0).max(0) as u64,
        V::S(s) => (s == "error") as u64,
        _ => unreachable!(),
    };
    let mut index: HashMap<(Option<i64>, Vec<KeyValue>), usize> = HashMap::new();
    let mut first: Vec<usize> = Vec::new();
    let mut sums: Vec<(Acc, u64)> = Vec::new();
    let mut runs: HashMap<(usize, u16), (u64, i64, i64)> = HashMap::new();
    for r in 0..b.rows() {
        let t = spec.every_ns.map(|e| match cell(b, time, r) {
            V::I(Some(t)) => t.div_euclid(e),
            _ => panic!(),
        });
        let key = spec.by.iter().map(|&f| key_value(cell(b, f.name(), r))).collect();
        let g = *index.entry((t, key)).or_insert_with(|| {
            first.push(r);
            sums.push((Acc::default(), 0));
            first.len() - 1
        });
        let (acc, n) = &mut sums[g];
        *n += 1;
        acc.bytes_out += num(v.bytes_out, r);
        acc.pkts_out += num(v.pkts_out, r);
        acc.bytes_in += num(v.bytes_in, r);
        acc.pkts_in += num(v.pkts_in, r);
        acc.conns += v.conns.map_or(1, |c| num(c, r));
        if let Some(h) = crate::field::hist_col(spec.kind) {
            if let V::I(Some(d)) = cell(b, h, r) {
                let e = runs.entry((g, crate::hist::bucket(d))).or_insert((0, d, d));
                *e = (e.0 + 1, e.1.min(d), e.2.max(d));
            }
        }
    }
    let mut names: Vec<&'static str> = spec.by.iter().map(|f| f.name()).collect();
    if spec.every_ns.is_some() {
        names.push(time);
    }
    let keys = Batch {
        kind: spec.kind,
        columns: names
            .iter()
            .map(|&n| (n, gather(b.column(n).unwrap(), &first)))
            .collect(),
    };
    let hist = runs.into_iter().map(|((g, _), (c, lo, hi))| (g as u32, c, lo, hi)).collect();
    (keys, sums, hist)
}

/// Merging groups formed per batch elsewhere gives the answer consuming
/// the records gives, percentiles and all (what `query --clickhouse`
/// relies on for its server-side GROUP BY).
#[test]
fn partial_groups_merge_to_the_same_answer() {
    let mut rng = Rng(21);
    let conns: Vec<Batch> = (0..3).map(|_| conns_batch(&mut rng, 2000)).collect();
    let flows: Vec<Batch> = (0..3).map(|_| flows_batch(&mut rng, 2000)).collect();
    let dns = tx_batches(Kind::Dns, 3000, 5);
    let http = tx_batches(Kind::Http, 3000, 6);
    type Case<'a> = (Kind, &'a [Batch], &'a str, &'a str, Option<usize>, Option<&'a str>);
    let cases: &[Case<'_>] = &[
        (Kind::Conns, &conns, "proto", "p99", Some(0), None),
        (Kind::Conns, &conns, "orig_h,resp_p", "", Some(5), None),
        (Kind::Conns, &conns, "service,vlan", "duration_p50:asc", Some(3), Some("5m")),
        (Kind::Conns, &conns, "duration", "conns", None, None),
        (Kind::Flows, &flows, "sip,dport", "", Some(4), None),
        (Kind::Flows, &flows, "iface", "pkts", None, Some("5m")),
        (Kind::Dns, &dns, "query,qtype_name", "p95", Some(0), None),
        (Kind::Dns, &dns, "rcode_name", "latency_avg", Some(2), Some("1h")),
        (Kind::Http, &http, "host,status_code", "errors", Some(3), None),
        (Kind::Http, &http, "", "", None, Some("5m")),
    ];
    for &(kind, batches, by, sort, top, every) in cases {
        let spec = parse_query(kind, None, Some(by), Some(sort), top, every).unwrap();
        let want = run(&spec, batches);
        let mut e = Engine::new(spec.clone()).unwrap();
        for b in batches {
            let (keys, sums, hist) = partial_of(&spec, b);
            e.consume_partial(&crate::Partial { keys: &keys, sums: &sums, hist: &hist, estimated: false })
                .unwrap();
        }
        let got = e.finish();
        let label = format!("{kind:?} by {by:?} sort {sort:?} top {top:?} every {every:?}");
        assert_eq!(got.rows, want.rows, "{label}");
        assert_eq!((got.total, got.groups, got.rows_matched), (want.total, want.groups, want.rows_matched), "{label}");
        assert!(!got.rows.is_empty(), "{label}");
    }
    // A group's sums beyond 32 bits arrive whole.
    let spec = parse_query(Kind::Flows, None, Some("dport"), None, None, None).unwrap();
    let mut e = Engine::new(spec).unwrap();
    let keys = Batch { kind: Kind::Flows, columns: vec![("server_port", Column::U16(vec![443]))] };
    let acc = Acc { conns: u32::MAX as u64 * 3, ..Acc::default() };
    e.consume_partial(&crate::Partial { keys: &keys, sums: &[(acc, 7)], hist: &[], estimated: false }).unwrap();
    let t = e.finish();
    assert_eq!((t.rows[0].acc.conns, t.rows_matched), (u32::MAX as u64 * 3, 7));
    // A histogram run naming a row that is not there is refused.
    let mut e = Engine::new(parse_query(Kind::Conns, None, Some("proto"), None, None, None).unwrap()).unwrap();
    let keys = Batch { kind: Kind::Conns, columns: vec![("proto", Column::Str(vec!["tcp".into()]))] };
    let err = e.consume_partial(&crate::Partial { keys: &keys, sums: &[(Acc::default(), 1)], hist: &[(1, 1, 5, 5)], estimated: false });
    assert!(err.is_err());
}

/// `capture --processes` owners on transactions: filtered and grouped by
/// like any column, unknown owners grouping as "".
#[test]
fn transactions_filter_and_group_by_process_owner() {
    use std::sync::Arc;
    use wirelog_record::ProcOwner;
    let dir = std::env::temp_dir().join(format!("wirelog-query-owners-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut store = wirelog_store::Store::open(&dir, wirelog_store::StoreOptions { sync: false, ..Default::default() })
        .unwrap();
    let owner = |name: &str, pid: u32| Some(Arc::new(ProcOwner { pid, name: name.into(), ..Default::default() }));
    let mut rows = wirelog_store::synth::tx_rows(Kind::Http, 60, T0, 1_000_000, 7);
    for (i, r) in rows.iter_mut().enumerate() {
        r.resp_proc = if i % 3 == 0 { owner("nginx", 10) } else { owner("python3", 20) };
        r.orig_proc = match i % 4 {
            0 => owner("curl", 30 + i as u32),
            1 => None,
            _ => owner("python3", 40),
        };
    }
    store.append_tx(Kind::Http, &rows).unwrap();
    store.close().unwrap();
    let mut batches = Vec::new();
    wirelog_store::Store::scan(&dir, &wirelog_store::Scan::all_columns(Kind::Http), |b| {
        batches.push(b);
        Ok(())
    })
    .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let spec = parse_query(Kind::Http, Some("resp_proc = \"nginx\""), Some("orig_proc"), None, Some(0), None).unwrap();
    let got = run(&spec, &batches);
    let mut counts: Vec<(String, u64)> = got
        .rows
        .iter()
        .map(|r| match &r.key[0] {
            KeyValue::Str(s) => (s.clone(), r.acc.conns),
            other => panic!("{other:?}"),
        })
        .collect();
    counts.sort();
    let want = |f: &dyn Fn(usize) -> bool| (0..60).filter(|&i| i % 3 == 0 && f(i)).count() as u64;
    assert_eq!(
        counts,
        [
            (String::new(), want(&|i| i % 4 == 1)),
            ("curl".to_string(), want(&|i| i % 4 == 0)),
            ("python3".to_string(), want(&|i| i % 4 >= 2)),
        ]
    );
    let spec = parse_query(Kind::Http, Some("orig_pid >= 30 and orig_pid < 40"), Some("resp_pid"), None, Some(0), None)
        .unwrap();
    let got = run(&spec, &batches);
    assert_eq!(got.total.conns, (0..60).filter(|i| i % 4 == 0 && 30 + i < 40).count() as u64);
}

/// [`Engine::records`] over `batches`: `None` when it says its one pass
/// cannot answer (rows alike in every `--by` field whose sum it does not
/// know), else its answer, checked equal to the plain engine's.
fn check_records(spec: &QuerySpec, batches: &[Batch], label: &str) -> Option<ResultTable> {
    let mut e = Engine::records(spec.clone()).unwrap().expect("a records query");
    for b in batches {
        e.consume(b).unwrap();
    }
    if e.records_unsure() {
        return None;
    }
    let got = e.finish();
    let want = run(spec, batches);
    assert_eq!(got.groups, want.groups, "{label}: groups");
    assert_eq!(got.total, want.total, "{label}: total");
    assert_eq!(got.rows.len(), want.rows.len(), "{label}: rows");
    for (i, (g, w)) in got.rows.iter().zip(&want.rows).enumerate() {
        assert_eq!(g, w, "{label}: row {i}");
    }
    assert_eq!(got, want, "{label}");
    Some(got)
}

/// The API's record pages sorted by a sum take the best `offset + limit`
/// rows as they stream (`Engine::records`) instead of a group per record:
/// the same rows in the same order, the same total and count of records
/// ("N of M", the cut flag) as grouping every record, with ties in the sum
/// (every row counts 1 connection; unset byte counts) broken by the fields,
/// pages smaller and larger than the rows, a filter, and weighted
/// transactions. Rows alike in every field are one group: summed in the
/// same pass when they are among the rows kept (the page's rows
/// repeated, or few groups), else said (the API then asks the plain
/// engine); an answer given is always the plain engine's.
#[test]
fn record_top_k_equals_grouping_every_record() {
    let mut rng = Rng(0x70b);
    let batches: Vec<Batch> = (0..4).map(|_| conns_batch(&mut rng, 2500)).collect();
    let by = "ts,uid,orig_h,orig_p,resp_h,resp_p,proto,service,duration,conn_state,history,orig_proc,orig_user,orig_container,resp_proc,resp_container";
    let mut checked = 0;
    for sort in ["bytes", "bytes:asc", "orig_bytes", "resp_bytes:asc", "conns", "conns:asc", "orig_pkts:asc", "pkts"] {
        for top in [1, 7, 100, 600, 1500, 9999, 10_000, 20_000] {
            for where_ in [None, Some("resp_p = 443 or conn_state = REJ")] {
                let spec = parse_query(Kind::Conns, where_, Some(by), Some(sort), Some(top), None).unwrap();
                let mut spec = spec;
                spec.percentiles = false;
                let label = format!("conns sort {sort} top {top} where {where_:?}");
                let got = check_records(&spec, &batches, &label).unwrap_or_else(|| panic!("{label}: repeated"));
                assert!(got.groups > 1000 && got.rows.len() == top.min(got.groups), "{label}");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 128);
    // Transactions: weighted rows (sampled) count as many.
    for kind in [Kind::Mysql, Kind::Http] {
        let batches = tx_batches(kind, 6000, 3);
        let by = "ts,uid,client,client_port,server,server_port,status,latency";
        for sort in ["count", "errors", "bytes", "request_bytes:asc"] {
            for top in [3, 250, 5000] {
                let mut spec = parse_query(kind, None, Some(by), Some(sort), Some(top), None).unwrap();
                spec.percentiles = false;
                let label = format!("{kind:?} sort {sort} top {top}");
                check_records(&spec, &batches, &label).unwrap_or_else(|| panic!("{label}: repeated"));
            }
        }
    }
    // Rows alike in every field. The three largest rows (by bytes) again
    // after the others, once and twice (each then a group of two or three
    // rows at the top of the page): answered in one pass, the plain
    // engine's answer. Every sort and page: the plain engine's answer
    // whenever one is given.
    let bytes = |b: &Batch, name: &str| match b.column(name) {
        Some(Column::OptU64(v)) => v.iter().map(|x| x.unwrap_or(0)).collect::<Vec<u64>>(),
        other => panic!("{name}: {other:?}"),
    };
    let mut largest: Vec<(u64, usize, usize)> = Vec::new();
    for (j, b) in batches.iter().enumerate() {
        let (ob, rb) = (bytes(b, "orig_bytes"), bytes(b, "resp_bytes"));
        largest.extend((0..ob.len()).map(|r| (ob[r] + rb[r], j, r)));
    }
    largest.sort_by(|a, b| b.cmp(a));
    let again = |&(_, j, r): &(u64, usize, usize)| Batch {
        kind: Kind::Conns,
        columns: batches[j].columns.iter().map(|(n, c)| (*n, gather(c, &[r]))).collect(),
    };
    let mut twice = batches.clone();
    twice.extend(largest[..3].iter().map(again));
    let mut thrice = twice.clone();
    thrice.extend([largest[1], largest[0]].iter().map(again));
    for (rows, label) in [(&twice, "the largest rows twice"), (&thrice, "and again")] {
        let mut answered = 0;
        for sort in ["bytes", "resp_bytes", "bytes:asc", "conns", "conns:asc"] {
            for top in [1, 3, 10, 600, 20_000] {
                let mut spec = parse_query(Kind::Conns, None, Some(by), Some(sort), Some(top), None).unwrap();
                spec.percentiles = false;
                let got = check_records(&spec, rows, &format!("{label}: sort {sort} top {top}"));
                if let Some(got) = &got {
                    assert_eq!(got.groups, 10_000, "{label}");
                    answered += 1;
                }
                if (sort == "bytes" && top >= 3) || top == 20_000 {
                    // The repeated rows are the page's (or every row is kept).
                    assert!(got.is_some(), "{label}: sort {sort} top {top}: not answered in one pass");
                }
            }
        }
        assert!(answered >= 8, "{label}: {answered}");
    }
    // Few groups (every row repeats its key): one pass while every group
    // is kept; a page of fewer groups than the rows' keys may have to say so.
    for top in [1, 10, 100_000] {
        let mut spec = parse_query(Kind::Conns, None, Some("proto,service"), Some("bytes"), Some(top), None).unwrap();
        spec.percentiles = false;
        let got = check_records(&spec, &batches, &format!("few groups, top {top}"));
        if top == 100_000 {
            assert!(got.is_some(), "few groups, every group kept");
        }
    }
    // Other shapes are not records queries.
    for (by, sort, top, every) in [(by, "ts", Some(10), None), (by, "p95", Some(10), None), (by, "bytes", Some(0), None), ("", "bytes", Some(10), Some("1m"))] {
        let mut spec = parse_query(Kind::Conns, None, Some(by), Some(sort), top, every).unwrap();
        spec.percentiles = false;
        assert!(Engine::records(spec).unwrap().is_none(), "{by} {sort} {top:?} {every:?}");
    }
}
