//! The store's files are read as they are by DuckDB (from PyPI): counts,
//! sums and types match what wirelog wrote. Optional: pyarrow/pandas.
//!
//! Needs `python3` with `duckdb` (`pip install duckdb`). Without it the test
//! fails when WIRELOG_REQUIRE_ALL_TESTS=1 and is skipped (loudly) otherwise.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use wirelog_record::{
    community_id_v1, ConnRecord, ConnState, FlowRecord, History, IpAddr16, Proto, UidGenerator,
};
use wirelog_store::{Store, StoreOptions};

/// 2026-11-20T09:00:00Z
const T0: i64 = 1_795_165_200_000_000_000;

fn script() -> PathBuf {
    let mut d = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    loop {
        let s = d.join("tests/duckdb_check.py");
        if s.exists() {
            return s;
        }
        assert!(d.pop(), "tests/duckdb_check.py not found");
    }
}

fn duckdb_available() -> Result<(), String> {
    match Command::new("python3")
        .args(["-c", "import duckdb"])
        .output()
    {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(String::from_utf8_lossy(&o.stderr).trim().to_string()),
        Err(e) => Err(format!("cannot run python3: {e}")),
    }
}

fn flows() -> Vec<FlowRecord> {
    (0..4000u64)
        .map(|i| {
            let bucket = T0 + (i as i64 % 24) * 300_000_000_000; // 24 buckets of 5 min: two hours
            let client = if i % 9 == 0 {
                let mut b = [0u8; 16];
                b[..2].copy_from_slice(&[0x20, 0x01]);
                b[15] = i as u8;
                IpAddr16(b)
            } else {
                IpAddr16::from_v4([10, 0, (i % 7) as u8, (i % 251) as u8])
            };
            FlowRecord {
                bucket_ns: bucket,
                iface: Arc::from(if i % 3 == 0 { "eth1" } else { "eth0" }),
                client,
                server: IpAddr16::from_v4([192, 168, 1, (i % 13) as u8]),
                server_port: [443u16, 53, 80, 3306][(i % 4) as usize],
                proto: if i % 4 == 1 { 17 } else { 6 },
                bytes_out: i * 100 + 40,
                pkts_out: i % 50 + 1,
                bytes_in: i * 1000,
                pkts_in: i % 70,
                first_ns: bucket + (i as i64 % 1000) * 1_000_000,
                last_ns: bucket + 299_000_000_000 - (i as i64 % 77) * 1_000,
                conns: (i % 5) as u32 + 1,
            }
        })
        .collect()
}

fn conns() -> Vec<ConnRecord> {
    let mut uids = UidGenerator::new(1);
    (0..3000u64)
        .map(|i| {
            let orig_h = IpAddr16::from_v4([10, 1, 0, (i % 200) as u8]);
            let resp_h = IpAddr16::from_v4([10, 2, 0, (i % 30) as u8]);
            let (proto, ip_proto, resp_p) = if i % 3 == 0 {
                (Proto::Udp, 17u8, 53u16)
            } else {
                (Proto::Tcp, 6, 443)
            };
            let orig_p = 40000 + (i % 20000) as u16;
            let mut history = History::new();
            for &c in b"ShADadFf".iter().take(1 + (i % 8) as usize) {
                history.push(c);
            }
            let zero = i % 10 == 0;
            ConnRecord {
                ts_ns: T0 + i as i64 * 2_400_000_123, // 2 hours
                uid: uids.next_uid(),
                orig_h,
                orig_p,
                resp_h,
                resp_p,
                proto,
                service: if resp_p == 53 {
                    Some("dns")
                } else if i % 2 == 0 {
                    Some("ssl")
                } else {
                    None
                },
                duration_ns: (!zero).then_some(i as i64 * 1_000_000 + 999),
                orig_bytes: (!zero).then_some(i * 10),
                resp_bytes: (!zero).then_some(i * 20),
                conn_state: if i % 4 == 0 {
                    ConnState::S0
                } else {
                    ConnState::SF
                },
                local_orig: i % 2 == 0,
                local_resp: true,
                missed_bytes: 0,
                history,
                orig_pkts: i % 40,
                orig_ip_bytes: i * 52 + 60,
                resp_pkts: i % 30,
                resp_ip_bytes: i * 70,
                ip_proto,
                community_id: community_id_v1(&orig_h, &resp_h, ip_proto, orig_p, resp_p),
                vlan: (i % 5 == 0).then_some(10),
                inner_vlan: None,
                empty_tcp_skipped: false,
                orig_proc: None,
                resp_proc: None,
            }
        })
        .collect()
}

fn get(v: &serde_like::Json, path: &[&str]) -> i128 {
    v.path(path)
        .as_int()
        .unwrap_or_else(|| panic!("{path:?} missing in {v:?}"))
}

#[test]
fn duckdb_reads_the_store_as_written() {
    if let Err(why) = duckdb_available() {
        let msg = format!(
            "duckdb for python3 is not installed ({why}); install it with: pip install duckdb"
        );
        if std::env::var("WIRELOG_REQUIRE_ALL_TESTS").as_deref() == Ok("1") {
            panic!("{msg}");
        }
        eprintln!("SKIPPED store_duckdb: {msg}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("wirelog-store-duckdb-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (f, c) = (flows(), conns());
    let mut s = Store::open(&dir, StoreOptions::default()).unwrap();
    // Several flushes: several files per partition.
    for chunk in f.chunks(1000) {
        s.append_flows(chunk).unwrap();
        s.flush().unwrap();
    }
    for chunk in c.chunks(700) {
        s.append_conns(chunk).unwrap();
        s.flush().unwrap();
    }
    s.close().unwrap();

    let out = Command::new("python3")
        .arg(script())
        .arg(&dir)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "duckdb_check.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let j = serde_like::parse(text.trim()).unwrap_or_else(|e| panic!("bad JSON ({e}): {text}"));

    let sum = |it: &mut dyn Iterator<Item = u64>| it.map(|x| x as i128).sum::<i128>();
    assert_eq!(get(&j, &["flows", "count"]), f.len() as i128);
    assert_eq!(
        get(&j, &["flows", "sum_bytes_out"]),
        sum(&mut f.iter().map(|r| r.bytes_out))
    );
    assert_eq!(
        get(&j, &["flows", "sum_pkts_in"]),
        sum(&mut f.iter().map(|r| r.pkts_in))
    );
    assert_eq!(
        get(&j, &["flows", "sum_bytes_in"]),
        sum(&mut f.iter().map(|r| r.bytes_in))
    );
    assert_eq!(
        get(&j, &["flows", "sum_pkts_out"]),
        sum(&mut f.iter().map(|r| r.pkts_out))
    );
    assert_eq!(
        get(&j, &["flows", "sum_conns"]),
        sum(&mut f.iter().map(|r| r.conns as u64))
    );
    assert_eq!(
        get(&j, &["flows", "min_bucket_us"]),
        (f.iter().map(|r| r.bucket_ns).min().unwrap() / 1000) as i128
    );
    assert_eq!(
        get(&j, &["flows", "max_last_us"]),
        // Files keep a flow's last packet to the second (bucket + first_offset_s + duration_s).
        (f.iter().map(|r| r.last_ns.div_euclid(1_000_000_000) * 1_000_000).max().unwrap()) as i128
    );
    assert_eq!(get(&j, &["flows", "partitions"]), 2);
    assert_eq!(
        get(&j, &["flows", "udp_rows"]),
        f.iter().filter(|r| r.proto == 17).count() as i128
    );
    assert_eq!(
        get(&j, &["flows", "port_443_bytes"]),
        sum(&mut f
            .iter()
            .filter(|r| r.server_port == 443)
            .map(|r| r.bytes_out))
    );
    // IPv4 is stored v4-mapped (::ffff:a.b.c.d), 16 bytes.
    let min_v4 = f
        .iter()
        .filter(|r| r.client.is_v4())
        .map(|r| r.client.0)
        .min()
        .unwrap();
    let hex: String = min_v4.iter().map(|b| format!("{b:02X}")).collect();
    assert!(hex.starts_with("00000000000000000000FFFF0A00"), "{hex}");
    assert_eq!(
        j.path(&["flows", "first_v4_client_hex"]).as_str(),
        Some(hex.as_str())
    );

    assert_eq!(get(&j, &["conns", "count"]), c.len() as i128);
    assert_eq!(
        get(&j, &["conns", "sum_orig_ip_bytes"]),
        sum(&mut c.iter().map(|r| r.orig_ip_bytes))
    );
    assert_eq!(
        get(&j, &["conns", "sum_resp_ip_bytes"]),
        sum(&mut c.iter().map(|r| r.resp_ip_bytes))
    );
    assert_eq!(
        get(&j, &["conns", "sum_orig_pkts"]),
        sum(&mut c.iter().map(|r| r.orig_pkts))
    );
    assert_eq!(
        get(&j, &["conns", "sum_orig_bytes"]),
        sum(&mut c.iter().filter_map(|r| r.orig_bytes))
    );
    assert_eq!(
        get(&j, &["conns", "duration_count"]),
        c.iter().filter(|r| r.duration_ns.is_some()).count() as i128
    );
    assert_eq!(
        get(&j, &["conns", "duration_sum_us"]),
        c.iter()
            .filter_map(|r| r.duration_ns)
            .map(|d| (d / 1000) as i128)
            .sum::<i128>()
    );
    assert_eq!(
        get(&j, &["conns", "min_ts_us"]),
        (c[0].ts_ns / 1000) as i128
    );
    assert_eq!(
        get(&j, &["conns", "dns"]),
        c.iter().filter(|r| r.service == Some("dns")).count() as i128
    );
    assert_eq!(
        get(&j, &["conns", "vlan_count"]),
        c.iter().filter(|r| r.vlan.is_some()).count() as i128
    );
    assert_eq!(get(&j, &["conns", "partitions"]), 2);
    assert_eq!(
        get(&j, &["conns", "sf_count"]),
        c.iter().filter(|r| r.conn_state == ConnState::SF).count() as i128
    );
    assert_eq!(
        get(&j, &["conns", "local_orig_count"]),
        c.iter().filter(|r| r.local_orig).count() as i128
    );

    // Types as DuckDB sees them.
    for (kind, col, want) in [
        ("flows", "bucket", "TIMESTAMP WITH TIME ZONE"),
        ("flows", "first_offset_s", "UINTEGER"),
        ("flows", "duration_s", "UINTEGER"),
        ("flows", "client", "BLOB"),
        ("flows", "server_port", "USMALLINT"),
        ("flows", "proto", "UTINYINT"),
        ("flows", "bytes_out", "UBIGINT"),
        ("flows", "conns", "UINTEGER"),
        ("flows", "iface", "VARCHAR"),
        ("flows", "date", "DATE"),
        ("conns", "ts", "TIMESTAMP WITH TIME ZONE"),
        ("conns", "uid", "VARCHAR"),
        ("conns", "resp_p", "USMALLINT"),
        ("conns", "duration", "BIGINT"),
        ("conns", "orig_bytes", "UBIGINT"),
        ("conns", "local_orig", "BOOLEAN"),
        ("conns", "ip_proto", "UTINYINT"),
        ("conns", "vlan", "USMALLINT"),
    ] {
        assert_eq!(
            j.path(&["types", kind, col]).as_str(),
            Some(want),
            "{kind}.{col}"
        );
    }

    match j.path(&["pyarrow"]) {
        serde_like::Json::Null => {
            eprintln!("store_duckdb: pyarrow not installed, its check skipped")
        }
        p => {
            assert_eq!(
                p.path(&["rows"]).as_int(),
                p.path(&["duckdb_rows"]).as_int()
            );
            assert_eq!(
                p.path(&["bucket_type"]).as_str(),
                Some("timestamp[us, tz=UTC]")
            );
            assert_eq!(p.path(&["bytes_out_type"]).as_str(), Some("uint64"));
            if let Some(n) = j.path(&["pandas_rows"]).as_int() {
                assert_eq!(Some(n), p.path(&["rows"]).as_int());
            }
        }
    }
    match j.path(&["clickhouse"]) {
        serde_like::Json::Null => {
            eprintln!("store_duckdb: chdb (embedded ClickHouse) not installed, its check skipped")
        }
        ch => {
            assert_eq!(get(ch, &["flows_count"]), f.len() as i128);
            assert_eq!(
                get(ch, &["flows_sum_bytes_out"]),
                sum(&mut f.iter().map(|r| r.bytes_out))
            );
            assert_eq!(
                get(ch, &["flows_sum_pkts_in"]),
                sum(&mut f.iter().map(|r| r.pkts_in))
            );
            assert_eq!(
                ch.path(&["bucket_type"]).as_str(),
                Some("DateTime64(6, 'UTC')")
            );
            assert_eq!(ch.path(&["server_port_type"]).as_str(), Some("UInt16"));
            assert_eq!(ch.path(&["client_type"]).as_str(), Some("FixedString(16)"));
            assert_eq!(get(ch, &["conns_count"]), c.len() as i128);
            assert_eq!(
                get(ch, &["conns_sum_orig_ip_bytes"]),
                sum(&mut c.iter().map(|r| r.orig_ip_bytes))
            );
            assert_eq!(
                get(ch, &["conns_sum_orig_bytes"]),
                sum(&mut c.iter().filter_map(|r| r.orig_bytes))
            );
            assert_eq!(
                ch.path(&["orig_bytes_type"]).as_str(),
                Some("Nullable(UInt64)")
            );
            assert_eq!(ch.path(&["ts_type"]).as_str(), Some("DateTime64(6, 'UTC')"));
            assert_eq!(
                get(ch, &["dns"]),
                c.iter().filter(|r| r.service == Some("dns")).count() as i128
            );
        }
    }
    eprintln!(
        "store_duckdb: checked with DuckDB{}{}",
        if *j.path(&["pyarrow"]) != serde_like::Json::Null {
            ", pyarrow"
        } else {
            ""
        },
        if *j.path(&["clickhouse"]) != serde_like::Json::Null {
            ", ClickHouse (chdb)"
        } else {
            ""
        }
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A tiny JSON reader (the root package has no JSON dependency for tests).
mod serde_like {
    #[derive(Debug, Clone, PartialEq)]
    pub enum Json {
        Null,
        Bool(bool),
        Int(i128),
        Float(f64),
        Str(String),
        Arr(Vec<Json>),
        Obj(Vec<(String, Json)>),
    }

    static NULL: Json = Json::Null;

    impl Json {
        pub fn path(&self, keys: &[&str]) -> &Json {
            let mut v = self;
            for k in keys {
                v = match v {
                    Json::Obj(m) => m
                        .iter()
                        .find(|(n, _)| n == k)
                        .map(|(_, x)| x)
                        .unwrap_or(&NULL),
                    _ => &NULL,
                };
            }
            v
        }
        pub fn as_int(&self) -> Option<i128> {
            match self {
                Json::Int(i) => Some(*i),
                _ => None,
            }
        }
        pub fn as_str(&self) -> Option<&str> {
            match self {
                Json::Str(s) => Some(s),
                _ => None,
            }
        }
    }

    pub fn parse(s: &str) -> Result<Json, String> {
        let b = s.as_bytes();
        let mut i = 0;
        let v = value(b, &mut i)?;
        ws(b, &mut i);
        if i != b.len() {
            return Err(format!("trailing data at {i}"));
        }
        Ok(v)
    }

    fn ws(b: &[u8], i: &mut usize) {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    }

    fn value(b: &[u8], i: &mut usize) -> Result<Json, String> {
        ws(b, i);
        match b.get(*i) {
            Some(b'{') => {
                *i += 1;
                let mut m = Vec::new();
                ws(b, i);
                if b.get(*i) == Some(&b'}') {
                    *i += 1;
                    return Ok(Json::Obj(m));
                }
                loop {
                    ws(b, i);
                    let Json::Str(k) = string(b, i)? else {
                        unreachable!()
                    };
                    ws(b, i);
                    if b.get(*i) != Some(&b':') {
                        return Err(format!("expected : at {i}"));
                    }
                    *i += 1;
                    m.push((k, value(b, i)?));
                    ws(b, i);
                    match b.get(*i) {
                        Some(b',') => *i += 1,
                        Some(b'}') => {
                            *i += 1;
                            return Ok(Json::Obj(m));
                        }
                        _ => return Err(format!("expected , or }} at {i}")),
                    }
                }
            }
            Some(b'[') => {
                *i += 1;
                let mut a = Vec::new();
                ws(b, i);
                if b.get(*i) == Some(&b']') {
                    *i += 1;
                    return Ok(Json::Arr(a));
                }
                loop {
                    a.push(value(b, i)?);
                    ws(b, i);
                    match b.get(*i) {
                        Some(b',') => *i += 1,
                        Some(b']') => {
                            *i += 1;
                            return Ok(Json::Arr(a));
                        }
                        _ => return Err(format!("expected , or ] at {i}")),
                    }
                }
            }
            Some(b'"') => string(b, i),
            Some(b't') if b[*i..].starts_with(b"true") => {
                *i += 4;
                Ok(Json::Bool(true))
            }
            Some(b'f') if b[*i..].starts_with(b"false") => {
                *i += 5;
                Ok(Json::Bool(false))
            }
            Some(b'n') if b[*i..].starts_with(b"null") => {
                *i += 4;
                Ok(Json::Null)
            }
            Some(_) => {
                let start = *i;
                while *i < b.len()
                    && matches!(b[*i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    *i += 1;
                }
                let t = std::str::from_utf8(&b[start..*i]).unwrap();
                t.parse::<i128>()
                    .map(Json::Int)
                    .or_else(|_| t.parse::<f64>().map(Json::Float))
                    .map_err(|_| format!("bad number {t:?} at {start}"))
            }
            None => Err("unexpected end".into()),
        }
    }

    fn string(b: &[u8], i: &mut usize) -> Result<Json, String> {
        if b.get(*i) != Some(&b'"') {
            return Err(format!("expected string at {i}"));
        }
        *i += 1;
        let mut s = String::new();
        while let Some(&c) = b.get(*i) {
            *i += 1;
            match c {
                b'"' => return Ok(Json::Str(s)),
                b'\\' => {
                    let e = *b.get(*i).ok_or("bad escape")?;
                    *i += 1;
                    match e {
                        b'n' => s.push('\n'),
                        b't' => s.push('\t'),
                        b'u' => {
                            let h =
                                std::str::from_utf8(&b[*i..*i + 4]).map_err(|e| e.to_string())?;
                            *i += 4;
                            s.push(
                                char::from_u32(
                                    u32::from_str_radix(h, 16).map_err(|e| e.to_string())?,
                                )
                                .unwrap_or('?'),
                            );
                        }
                        other => s.push(other as char),
                    }
                }
                _ => {
                    // Multi-byte UTF-8 passes through byte by byte.
                    let start = *i - 1;
                    let mut end = *i;
                    while end < b.len() && (b[end] & 0xC0) == 0x80 {
                        end += 1;
                    }
                    s.push_str(std::str::from_utf8(&b[start..end]).map_err(|e| e.to_string())?);
                    *i = end;
                }
            }
        }
        Err("unterminated string".into())
    }
}

/// Transactions of every kind, written by the store's own API (several
/// flushes, two hours), read by DuckDB: the same counts, sums and types.
#[test]
fn duckdb_reads_transactions_as_written() {
    use wirelog_store::{synth, Cell, Kind, TxRow};
    if let Err(why) = duckdb_available() {
        let msg = format!(
            "duckdb for python3 is not installed ({why}); install it with: pip install duckdb"
        );
        if std::env::var("WIRELOG_REQUIRE_ALL_TESTS").as_deref() == Ok("1") {
            panic!("{msg}");
        }
        eprintln!("SKIPPED store_duckdb (transactions): {msg}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("wirelog-store-duckdb-tx-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut s = Store::open(&dir, StoreOptions::default()).unwrap();
    let mut all: Vec<(Kind, Vec<TxRow>)> = Vec::new();
    for (i, kind) in Kind::TX.into_iter().enumerate() {
        let rows = synth::tx_rows(kind, 2500, T0, 3_000_000_007, i as u64 + 1);
        for chunk in rows.chunks(900) {
            s.append_tx(kind, chunk).unwrap();
            s.flush().unwrap();
        }
        all.push((kind, rows));
    }
    s.close().unwrap();

    let mut py = script();
    py.set_file_name("duckdb_tx_check.py");
    let out = Command::new("python3")
        .arg(py)
        .arg(&dir)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "duckdb_tx_check.py failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let j = serde_like::parse(text.trim()).unwrap_or_else(|e| panic!("bad JSON ({e}): {text}"));

    let sum_opt = |rows: &[TxRow], f: &dyn Fn(&TxRow) -> Option<u64>| -> i128 {
        rows.iter().filter_map(f).map(|x| x as i128).sum()
    };
    let cell_u64 = |r: &TxRow, i: usize| match &r.extra[i] {
        Cell::U64(v) => *v,
        other => panic!("{other:?}"),
    };
    let cell_str = |r: &TxRow, i: usize| match &r.extra[i] {
        Cell::Str(v) => v.clone(),
        other => panic!("{other:?}"),
    };
    let count =
        |rows: &[TxRow], f: &dyn Fn(&TxRow) -> bool| rows.iter().filter(|r| f(r)).count() as i128;
    let distinct = |rows: &[TxRow], i: usize| {
        rows.iter()
            .filter_map(|r| cell_str(r, i))
            .collect::<std::collections::HashSet<_>>()
            .len() as i128
    };
    for (kind, rows) in &all {
        let k = kind.as_str();
        let g = |key: &str| get(&j, &[k, key]);
        assert_eq!(g("count"), rows.len() as i128, "{k}");
        assert_eq!(g("uids"), rows.len() as i128, "{k}");
        assert_eq!(
            g("sum_request_bytes"),
            sum_opt(rows, &|r| r.request_bytes),
            "{k}"
        );
        assert_eq!(
            g("sum_response_bytes"),
            sum_opt(rows, &|r| r.response_bytes),
            "{k}"
        );
        assert_eq!(
            g("latency_count"),
            count(rows, &|r| r.latency_ns.is_some()),
            "{k}"
        );
        assert_eq!(
            g("latency_sum_us"),
            sum_opt(rows, &|r| r.latency_ns.map(|l| (l / 1000) as u64)),
            "{k}"
        );
        assert_eq!(
            g("first_byte_latency_sum_us"),
            sum_opt(rows, &|r| r
                .first_byte_latency_ns
                .map(|l| (l / 1000) as u64)),
            "{k}"
        );
        assert_eq!(g("errors"), count(rows, &|r| r.status == "error"), "{k}");
        assert_eq!(g("min_ts_us"), (rows[0].ts_ns / 1000) as i128, "{k}");
        assert_eq!(
            g("max_ts_us"),
            (rows.last().unwrap().ts_ns / 1000) as i128,
            "{k}"
        );
        assert_eq!(g("partitions"), 3, "{k}");
        let own = match kind {
            Kind::Http => [
                sum_opt(rows, &|r| cell_u64(r, 5)),
                count(rows, &|r| cell_u64(r, 5).is_some_and(|c| c >= 500)),
                count(rows, &|r| cell_str(r, 4).is_some()),
            ],
            Kind::Mysql => [
                sum_opt(rows, &|r| cell_u64(r, 9)),
                distinct(rows, 2),
                sum_opt(rows, &|r| cell_u64(r, 5)),
            ],
            Kind::Pgsql => [
                sum_opt(rows, &|r| cell_u64(r, 6)),
                distinct(rows, 2),
                count(rows, &|r| cell_str(r, 9).is_some()),
            ],
            Kind::Redis => [
                count(rows, &|r| cell_str(r, 0).as_deref() == Some("GET")),
                count(rows, &|r| cell_str(r, 3).is_some()),
                distinct(rows, 1),
            ],
            Kind::Tls => [
                count(rows, &|r| r.extra[7] == Cell::Bool(true)),
                sum_opt(rows, &|r| cell_u64(r, 13)),
                distinct(rows, 14),
            ],
            Kind::Memcached => [
                count(rows, &|r| cell_str(r, 0).as_deref() == Some("get")),
                sum_opt(rows, &|r| cell_u64(r, 5)),
                distinct(rows, 1),
            ],
            // Column indexes in each kind's declared order (record::<kind>::COLUMNS).
            Kind::Mongodb => [
                sum_opt(rows, &|r| cell_u64(r, 7)),
                distinct(rows, 4),
                count(rows, &|r| r.extra[10] == Cell::Bool(true)),
            ],
            Kind::Mqtt => [
                sum_opt(rows, &|r| cell_u64(r, 10)),
                distinct(rows, 4),
                count(rows, &|r| r.extra[7] == Cell::Bool(true)),
            ],
            Kind::Amqp => [
                sum_opt(rows, &|r| cell_u64(r, 9)),
                distinct(rows, 4),
                count(rows, &|r| r.extra[2] == Cell::Bool(true)),
            ],
            Kind::Kafka => [
                sum_opt(rows, &|r| cell_u64(r, 14)),
                distinct(rows, 5),
                sum_opt(rows, &|r| cell_u64(r, 11)),
            ],
            Kind::Cassandra => [
                sum_opt(rows, &|r| cell_u64(r, 10)),
                distinct(rows, 5),
                sum_opt(rows, &|r| cell_u64(r, 15)),
            ],
            Kind::Grpc => [
                sum_opt(rows, &|r| cell_u64(r, 5)),
                distinct(rows, 1),
                count(rows, &|r| r.extra[8] == Cell::Bool(true)),
            ],
            _ => [
                count(rows, &|r| r.extra[9] == Cell::Bool(true)),
                sum_opt(rows, &|r| cell_u64(r, 1)),
                count(rows, &|r| cell_str(r, 5).as_deref() == Some("NXDOMAIN")),
            ],
        };
        assert_eq!([g("own1"), g("own2"), g("own3")], own, "{k}");
        let ty = |col: &str| {
            j.path(&[k, "types", col])
                .as_str()
                .unwrap_or_else(|| panic!("{k}.{col} type"))
                .to_string()
        };
        assert_eq!(ty("ts"), "TIMESTAMP WITH TIME ZONE", "{k}");
        assert_eq!(ty("latency"), "BIGINT", "{k}");
        assert_eq!(ty("request_bytes"), "UBIGINT", "{k}");
        assert_eq!(ty("server_port"), "USMALLINT", "{k}");
        assert_eq!(ty("transport"), "UTINYINT", "{k}");
        assert_eq!(ty("client"), "BLOB", "{k}");
        assert_eq!(ty("status"), "VARCHAR", "{k}");
        match kind {
            Kind::Http => assert_eq!(ty("status_code"), "USMALLINT"),
            Kind::Dns => assert_eq!(ty("aa"), "BOOLEAN"),
            _ => {}
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Parquet files DuckDB writes with its default compression (snappy) read
/// as the store's own: every file of a kind rewritten by DuckDB's `COPY`
/// gives the same rows, sums and no corrupt file.
#[test]
fn files_duckdb_rewrote_with_snappy_read_as_before() {
    if let Err(why) = duckdb_available() {
        let msg = format!("duckdb for python3 is not installed ({why}); install it with: pip install duckdb");
        if std::env::var("WIRELOG_REQUIRE_ALL_TESTS").as_deref() == Ok("1") {
            panic!("{msg}");
        }
        eprintln!("SKIPPED store_duckdb (snappy): {msg}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("wirelog-store-duckdb-snappy-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let c = conns();
    let mut s = Store::open(&dir, StoreOptions::default()).unwrap();
    s.append_conns(&c).unwrap();
    s.close().unwrap();
    let sums = || {
        let (mut rows, mut bytes) = (0usize, 0u64);
        let scan = wirelog_store::Scan::new(wirelog_store::Kind::Conns).columns(&["orig_pkts"]);
        let stats = Store::scan(&dir, &scan, |b| {
            rows += b.rows();
            if let Some(wirelog_store::Column::U64(v)) = b.column("orig_pkts") {
                bytes += v.iter().sum::<u64>();
            }
            Ok(())
        })
        .unwrap();
        (rows, bytes, stats.corrupt_files, stats.warnings)
    };
    let before = sums();
    assert_eq!(before.0, c.len());
    assert!(before.1 > 0);
    let rewrite = r#"
import duckdb, glob, os, sys
n = 0
for f in glob.glob(os.path.join(sys.argv[1], "conns", "**", "*.parquet"), recursive=True):
    tmp = f + ".snappy"
    duckdb.sql(f"COPY (SELECT * FROM read_parquet('{f}')) TO '{tmp}' (FORMAT PARQUET)")
    codecs = {r[0] for r in duckdb.sql(f"SELECT DISTINCT compression FROM parquet_metadata('{tmp}')").fetchall()}
    assert codecs == {"SNAPPY"}, codecs
    os.replace(tmp, f)
    n += 1
print(n)
"#;
    let out = Command::new("python3").args(["-c", rewrite]).arg(&dir).output().expect("run python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).trim().parse::<u32>().unwrap() > 0);
    assert_eq!(sums(), before, "the snappy files read as the zstd ones did");
    let _ = std::fs::remove_dir_all(&dir);
}
