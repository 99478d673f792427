//! The store's certificates (`wirelog query x509`) against Zeek's x509.log
//! on every shared TLS case that has one (the case list of
//! tests/tls_zeek.rs, in tests/common): the same certificates, by
//! (fingerprint, host_cert, client_cert), with the same values in every
//! column both have. Zeek's log escapes text (`\xNN`, `\\`) and writes
//! times as seconds with decimals; the store keeps the text and Unix
//! seconds, so Zeek's values are read back before comparing. Also: one row
//! per certificate, role and hour however often it is shown (the
//! `x509_cert_repeat` capture), and `--expiring`.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use common::parse_log;
use common::tls_cases::{testdata, Log, CASES};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_wirelog");

/// Zeek's column, the store's, and how Zeek's value reads.
#[derive(Clone, Copy)]
enum Form {
    Text,
    Count,
    /// Seconds with decimals -> whole Unix seconds.
    Time,
    /// T/F; unset is false in the store (it has no unset booleans).
    Bool,
}

const COLUMNS: &[(&str, &str, Form)] = &[
    ("certificate.version", "version", Form::Count),
    ("certificate.serial", "serial", Form::Text),
    ("certificate.subject", "subject", Form::Text),
    ("certificate.issuer", "issuer", Form::Text),
    ("certificate.not_valid_before", "not_valid_before", Form::Time),
    ("certificate.not_valid_after", "not_valid_after", Form::Time),
    ("certificate.key_alg", "key_alg", Form::Text),
    ("certificate.sig_alg", "sig_alg", Form::Text),
    ("certificate.key_type", "key_type", Form::Text),
    ("certificate.key_length", "key_length", Form::Count),
    ("certificate.exponent", "exponent", Form::Text),
    ("certificate.curve", "curve", Form::Text),
    ("san.dns", "san_dns", Form::Text),
    ("san.uri", "san_uri", Form::Text),
    ("san.email", "san_email", Form::Text),
    ("san.ip", "san_ip", Form::Text),
    ("basic_constraints.ca", "basic_constraints_ca", Form::Bool),
    ("basic_constraints.path_len", "basic_constraints_path_len", Form::Count),
];

/// Zeek's ASCII escaping undone: `\xNN` is the byte, `\\` a backslash;
/// `-` (unset) and `(empty)` read as "".
fn unescape(s: &str) -> String {
    if s == "-" || s == "(empty)" {
        return String::new();
    }
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'x') && i + 3 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 2..i + 4], 16) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Zeek's value as the store gives it, as text.
fn zeek_value(form: Form, v: &str) -> String {
    match form {
        Form::Text => unescape(v),
        Form::Count if v == "-" => "null".into(),
        Form::Count => v.into(),
        Form::Time if v == "-" => "null".into(),
        Form::Time => format!("{}", v.parse::<f64>().unwrap().floor() as i64),
        Form::Bool => (v == "T").to_string(),
    }
}

fn store_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `wirelog query x509` over a store, every column, one JSON object a row.
fn query(store: &Path, extra: &[&str]) -> Vec<serde_json::Map<String, Value>> {
    let by: Vec<&str> = ["fingerprint", "role", "host_cert", "handshakes"]
        .into_iter()
        .chain(COLUMNS.iter().map(|c| c.1))
        .collect();
    let out = Command::new(BIN)
        .args(["query", "x509", "--store", store.to_str().unwrap(), "--format", "json", "--top", "0"])
        .args(["--by", &by.join(",")])
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array().unwrap().iter().map(|r| r.as_object().unwrap().clone()).collect()
}

fn read_into_store(pcap: &Path, flags: &[&str], dir: &Path) {
    let out = Command::new(BIN)
        .args(["read", "--quiet", "--seed", "1", "--store"])
        .arg(dir.join("store"))
        .arg("--logs")
        .arg(dir.join("logs"))
        .args(flags)
        .arg(pcap)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}: {}", pcap.display(), String::from_utf8_lossy(&out.stderr));
}

#[test]
fn store_certificates_equal_zeek_x509_log() {
    let (mut rows, mut fields) = (0, 0);
    let mut failures = Vec::new();
    for (n, c) in CASES.iter().enumerate() {
        let logs: Vec<&str> = c.expected.iter().filter(|e| e.0 == Log::X509).map(|e| e.1).collect();
        if logs.is_empty() {
            continue;
        }
        let dir = common::scratch("x509_store", &n.to_string());
        let case = testdata().join(c.case);
        read_into_store(&case.join(c.pcap), c.flags, &dir);
        let ours = query(&dir.join("store"), &[]);
        let key = |fp: &str, host: &str, client: bool| format!("{fp} {host} {client}");
        let mine: HashMap<String, &serde_json::Map<String, Value>> = ours
            .iter()
            .map(|r| {
                let host = if r["host_cert"] == Value::Bool(true) { "T" } else { "F" };
                (key(r["fingerprint"].as_str().unwrap(), host, r["role"] == "client"), r)
            })
            .collect();
        for log in logs {
            let text = std::fs::read_to_string(case.join(log)).unwrap();
            let zeek = parse_log(&text);
            // Zeek logs a certificate once a day, the store once an hour: on
            // these short captures, the same certificates either way.
            let keys: std::collections::BTreeSet<String> =
                zeek.iter().map(|z| key(&z["fingerprint"], &z["host_cert"], z["client_cert"] == "T")).collect();
            if keys.len() != mine.len() {
                failures.push(format!("{} {log}: Zeek has {} certificates, the store {}", c.case, keys.len(), mine.len()));
            }
            for z in &zeek {
                rows += 1;
                let k = key(&z["fingerprint"], &z["host_cert"], z["client_cert"] == "T");
                let Some(m) = mine.get(&k) else {
                    failures.push(format!("{} {log}: certificate {k} not in the store", c.case));
                    continue;
                };
                for &(zname, sname, form) in COLUMNS {
                    fields += 1;
                    let (want, got) = (zeek_value(form, &z[zname]), store_value(&m[sname]));
                    if want != got {
                        failures.push(format!("{} {log} {k}: {sname}: Zeek {want:?}, store {got:?}", c.case));
                    }
                }
            }
        }
    }
    println!("x509 store: {rows} Zeek rows, {fields} fields compared, {} disagreements", failures.len());
    assert!(rows >= 30, "only {rows} x509.log rows compared");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A certificate shown by many handshakes in one hour is one row, whose
/// `handshakes` counts them (`x509_cert_repeat`: the same chain on every
/// connection); `--expiring` keeps the ones not valid after the limit.
#[test]
fn repeated_certificates_are_one_row_with_a_count() {
    let c = CASES.iter().find(|c| c.case == "x509_cert_repeat").unwrap();
    let dir = common::scratch("x509_store", "repeat");
    let case = testdata().join(c.case);
    read_into_store(&case.join(c.pcap), c.flags, &dir);
    let ssl = parse_log(&std::fs::read_to_string(dir.join("logs/ssl.log")).unwrap());
    // How many handshakes showed each server certificate, from ssl.log.
    let mut shown: HashMap<String, u64> = HashMap::new();
    for r in &ssl {
        for fp in r["cert_chain_fps"].split(',').filter(|f| *f != "-" && *f != "(empty)") {
            *shown.entry(fp.to_string()).or_default() += 1;
        }
    }
    assert!(shown.values().any(|&n| n > 1), "the capture repeats no certificate: {shown:?}");
    let rows = query(&dir.join("store"), &[]);
    let mut hours: HashMap<String, u64> = HashMap::new();
    for r in &rows {
        let fp = r["fingerprint"].as_str().unwrap();
        assert_eq!(r["role"], "server", "{fp}");
        *hours.entry(fp.to_string()).or_default() += 1;
        let n = r["handshakes"].as_u64().unwrap();
        assert_eq!(Some(&n), shown.get(fp), "{fp}: handshakes in the store vs ssl.log's chains");
    }
    assert!(hours.values().all(|&n| n == 1), "a certificate with more than one row: {hours:?}");
    assert_eq!(hours.len(), shown.len());

    // --expiring: a year past the latest not_valid_after keeps all, 0 days
    // keeps those already expired (all of them, for a capture this old).
    let latest = rows.iter().filter_map(|r| r["not_valid_after"].as_i64()).max().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let days = (latest - now).max(0) / 86400 + 366;
    assert_eq!(query(&dir.join("store"), &["--expiring", &format!("{days}d")]).len(), rows.len());
    let expired = rows.iter().filter(|r| r["not_valid_after"].as_i64().is_some_and(|t| t < now)).count();
    assert_eq!(query(&dir.join("store"), &["--expiring", "0s"]).len(), expired);
    let out = Command::new(BIN)
        .args(["query", "http", "--store", dir.join("store").to_str().unwrap(), "--expiring", "30d"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--expiring applies to"));
}

/// DuckDB reads the x509 table as the store's query sees it: the same
/// rows, handshakes, fingerprints and subjects, with usable types.
#[test]
fn duckdb_reads_the_certificates() {
    if Command::new("python3").args(["-c", "import duckdb"]).output().map_or(true, |o| !o.status.success()) {
        let msg = "duckdb for python3 is not installed; install it with: pip install duckdb";
        if std::env::var("WIRELOG_REQUIRE_ALL_TESTS").as_deref() == Ok("1") {
            panic!("{msg}");
        }
        eprintln!("SKIPPED x509_store (duckdb): {msg}");
        return;
    }
    let c = CASES.iter().find(|c| c.case == "x509_cert_repeat").unwrap();
    let dir = common::scratch("x509_store", "duckdb");
    read_into_store(&testdata().join(c.case).join(c.pcap), c.flags, &dir);
    let rows = query(&dir.join("store"), &[]);
    let sql = format!(
        "import duckdb, json\n\
         con = duckdb.connect()\n\
         s = \"read_parquet('{}/x509/*/*/*.parquet', hive_partitioning=true)\"\n\
         r = con.execute(f'SELECT count(*), sum(handshakes), count(DISTINCT fingerprint), min(subject), max(not_valid_after), count(*) FILTER (WHERE basic_constraints_ca) FROM {{s}}').fetchone()\n\
         t = {{d[0]: d[1] for d in con.execute(f'DESCRIBE SELECT * FROM {{s}}').fetchall()}}\n\
         print(json.dumps([[int(r[0]), int(r[1]), int(r[2]), r[3], int(r[4]), int(r[5])], t]))\n",
        dir.join("store").display()
    );
    let out = Command::new("python3").args(["-c", &sql]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let num = |r: &serde_json::Map<String, Value>, k: &str| r[k].as_u64().unwrap();
    let want = serde_json::json!([
        rows.len(),
        rows.iter().map(|r| num(r, "handshakes")).sum::<u64>(),
        rows.iter().map(|r| r["fingerprint"].as_str().unwrap()).collect::<std::collections::HashSet<_>>().len(),
        rows.iter().map(|r| r["subject"].as_str().unwrap()).min().unwrap(),
        rows.iter().map(|r| num(r, "not_valid_after")).max().unwrap(),
        rows.iter().filter(|r| r["basic_constraints_ca"] == Value::Bool(true)).count(),
    ]);
    assert_eq!(v[0], want);
    let ty = |c: &str| v[1][c].as_str().unwrap().to_string();
    assert_eq!(ty("ts"), "TIMESTAMP WITH TIME ZONE");
    assert_eq!(ty("not_valid_after"), "UBIGINT");
    assert_eq!(ty("host_cert"), "BOOLEAN");
    assert_eq!(ty("subject"), "VARCHAR");
}

/// Handshakes after the hour's row was flushed are counted: a second row
/// for the same hour holds them, the store has two rows, and `query x509`
/// (by its default fields, or by fingerprint and role) shows one row per
/// certificate with the whole count.
#[test]
fn handshakes_after_a_flush_are_counted() {
    use wirelog_store::{Store, StoreOptions};
    let dir = common::scratch("x509_store", "flush");
    let (server, client) = (common::tls::self_signed_der(&dir, "server.flush.example"), common::tls::self_signed_der(&dir, "client.flush.example"));
    // 2026-01-01 10:00 UTC, one handshake a second: all in one hour.
    let t0 = 1_767_261_600_000_000_000i64;
    let rec = |i: i64| {
        let client = (i % 3 == 0).then(|| vec![client.clone()]);
        wirelog_record::tls::fixtures::handshake(t0 + i * 1_000_000_000, vec![server.clone()], client)
    };
    let store_dir = dir.join("store");
    let mut st = Store::open(&store_dir, StoreOptions::default()).unwrap();
    let first: Vec<_> = (0..5).map(rec).collect();
    st.append_tx_records(&first).unwrap();
    st.flush().unwrap();
    let second: Vec<_> = (5..12).map(rec).collect();
    st.append_tx_records(&second).unwrap();
    st.close().unwrap();
    // Server: 12 handshakes; client: i = 0, 3, 6, 9.
    let want = [("server.flush.example", "server", 12u64), ("client.flush.example", "client", 4)];

    let stored_rows = || {
        let listing = Command::new(BIN).args(["store", "--store", store_dir.to_str().unwrap()]).output().unwrap();
        let listing = String::from_utf8_lossy(&listing.stdout).into_owned();
        let x509 = listing.lines().find(|l| l.starts_with("x509 ")).unwrap_or_else(|| panic!("{listing}"));
        x509.split_whitespace().nth(3).unwrap().parse::<u64>().unwrap()
    };
    assert_eq!(stored_rows(), 4, "a row per certificate and flush");

    let run = |by: &[&str]| -> Vec<serde_json::Map<String, Value>> {
        let mut cmd = Command::new(BIN);
        cmd.args(["query", "x509", "--store", store_dir.to_str().unwrap(), "--format", "json", "--top", "0"]);
        if !by.is_empty() {
            cmd.args(["--by", &by.join(",")]);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v.as_array().unwrap().iter().map(|r| r.as_object().unwrap().clone()).collect()
    };
    let answers = |when: &str| {
        for by in [&[][..], &["fingerprint", "role", "subject"][..]] {
            let rows = run(by);
            assert_eq!(rows.len(), 2, "{by:?}: {rows:?}");
            for (cn, role, n) in want {
                let r = rows
                    .iter()
                    .find(|r| r["subject"] == format!("CN={cn}"))
                    .unwrap_or_else(|| panic!("{by:?}: no {cn}: {rows:?}"));
                assert_eq!(r["handshakes"].as_u64(), Some(n), "{when} {by:?} {cn}: {r:?}");
                if by.contains(&"role") {
                    assert_eq!(r["role"], role, "{when}");
                }
            }
        }
    };
    answers("before compaction");
    // Compacting the (closed) hour folds each certificate's rows into one,
    // the same answers.
    let parts = wirelog_store::list_partitions(&store_dir, wirelog_store::Kind::X509).unwrap();
    assert_eq!(parts.len(), 1);
    let report = Store::compact_partition(&parts[0].path).unwrap();
    assert_eq!((report.files_merged, report.rows), (2, 2), "{report:?}");
    assert_eq!(stored_rows(), 2, "one row per certificate after compaction");
    answers("after compaction");
}
