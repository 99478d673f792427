//! One store file of every kind (flows, connections, the transactions of
//! every protocol, certificates, the loss table) read with every Parquet
//! reader the project promises (pyarrow, pandas, DuckDB, ClickHouse through
//! chdb) and with wirelog's own: every value of every column the same
//! (tests/store_readers.py compares them).
//!
//! Needs `python3` with `pyarrow`, `pandas`, `duckdb` and `chdb` (PyPI, see
//! scripts/test.sh). A missing one is skipped (loudly), and fails the test
//! when WIRELOG_REQUIRE_ALL_TESTS=1.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Map, Value};
use wirelog_record::loss::{LossCount, LossCounts, LossRecord};
use wirelog_record::{Protocol, UidGenerator};
use wirelog_store::schema::{self, ColType};
use wirelog_store::{synth, Column, Kind, Scan, Store, StoreOptions};

mod common;

/// 2026-11-20T09:00:00Z: every row below falls in this hour.
const T0: i64 = 1_795_165_200_000_000_000;
const ROWS: u64 = 300;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/store_readers.py")
}

/// Writes one file of every kind.
fn write_store(dir: &Path) {
    let mut st = Store::open(&dir.join("store"), StoreOptions { sync: false, ..Default::default() }).unwrap();
    let mut flows = synth::FlowGen::new(7, 200, T0);
    st.append_flows(&flows.bucket(ROWS as usize)).unwrap();
    let mut uids = UidGenerator::new(3);
    let conns: Vec<_> = (0..ROWS).map(|i| synth::conn(i, T0, 1_000_000_007, &mut uids)).collect();
    st.append_conns(&conns).unwrap();
    for (i, kind) in Kind::TX.into_iter().enumerate() {
        st.append_tx(kind, &synth::tx_rows(kind, ROWS, T0, 1_000_000_007, i as u64 + 1)).unwrap();
    }
    let (server, client) = (common::tls::self_signed_der(dir, "server.readers.example"), common::tls::self_signed_der(dir, "client.readers.example"));
    let handshakes: Vec<_> = (0..4)
        .map(|i| {
            let client = (i % 2 == 0).then(|| vec![client.clone()]);
            wirelog_record::tls::fixtures::handshake(T0 + i * 1_000_000_000, vec![server.clone()], client)
        })
        .collect();
    st.append_tx_records(&handshakes).unwrap();
    let losses: Vec<LossRecord> = (0..ROWS as i64)
        .map(|i| {
            let mut counts = LossCounts::default();
            for (j, c) in counts.0.iter_mut().enumerate() {
                *c = (i as u64 * 7 + j as u64) % 5;
            }
            LossRecord {
                ts_ns: T0 + (i % 60) * 60_000_000_000,
                source: format!("eth{}", i % 3),
                protocol: (i % 2 == 0).then(|| Protocol::ALL[i as usize % Protocol::ALL.len()]),
                counts,
            }
        })
        .collect();
    assert!(!LossCount::ALL.is_empty());
    st.append_losses(&losses).unwrap();
    st.close().unwrap();
}

/// A column as wirelog's reader gives it, as the file holds it: times in
/// microseconds, addresses as hex, integers as they are.
fn values(spec_ty: ColType, c: &Column) -> Vec<Value> {
    let us = |ns: i64| json!(ns.div_euclid(1000));
    match c {
        Column::U8(v) => v.iter().map(|&x| json!(x)).collect(),
        Column::U16(v) => v.iter().map(|&x| json!(x)).collect(),
        Column::U32(v) => v.iter().map(|&x| json!(x)).collect(),
        Column::U64(v) => v.iter().map(|&x| json!(x)).collect(),
        Column::OptU64(v) => v.iter().map(|x| json!(x)).collect(),
        Column::I64(v) if spec_ty == ColType::TimeUs => v.iter().map(|&x| us(x)).collect(),
        Column::I64(v) => v.iter().map(|&x| json!(x)).collect(),
        Column::OptI64(v) => v.iter().map(|x| x.map_or(Value::Null, us)).collect(),
        Column::Ip(v) => v.iter().map(|ip| json!(ip.iter().map(|b| format!("{b:02x}")).collect::<String>())).collect(),
        Column::Str(v) => v.iter().map(|s| json!(s)).collect(),
        Column::Bool(v) => v.iter().map(|&b| json!(b)).collect(),
    }
}

/// Every column of the kind as wirelog's reader reads the store (flows'
/// `first`/`last` as the file's second offsets).
fn ours(store: &Path, kind: Kind) -> Map<String, Value> {
    let specs = schema::columns(kind);
    let names: Vec<&'static str> = specs.iter().map(|c| c.name).collect();
    let mut cols: Vec<Vec<Value>> = vec![Vec::new(); names.len()];
    Store::scan(store, &Scan::new(kind).columns(&names), |b| {
        for (i, spec) in specs.iter().enumerate() {
            let c = b.column(spec.name).unwrap_or_else(|| panic!("{kind:?}: no {}", spec.name));
            cols[i].extend(values(spec.col_type(), c));
        }
        Ok(())
    })
    .unwrap();
    let mut out: Map<String, Value> = names.iter().map(|n| n.to_string()).zip(cols.into_iter().map(Value::Array)).collect();
    if kind == Kind::Flows {
        let get = |m: &Map<String, Value>, n: &str| -> Vec<i64> {
            m[n].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect()
        };
        let (bucket, first, last) = (get(&out, "bucket"), get(&out, "first"), get(&out, "last"));
        let s = |us: i64| us.div_euclid(1_000_000);
        let offset: Vec<Value> = bucket.iter().zip(&first).map(|(&b, &f)| json!(s(f) - s(b))).collect();
        let duration: Vec<Value> = first.iter().zip(&last).map(|(&f, &l)| json!(s(l) - s(f))).collect();
        out.remove("first");
        out.remove("last");
        out.insert("first_offset_s".into(), Value::Array(offset));
        out.insert("duration_s".into(), Value::Array(duration));
    }
    out
}

#[test]
fn every_reader_reads_every_kind_as_written() {
    let require = std::env::var("WIRELOG_REQUIRE_ALL_TESTS").as_deref() == Ok("1");
    match Command::new("python3").args(["-c", "import pyarrow.parquet"]).output() {
        Ok(o) if o.status.success() => {}
        other => {
            let msg = format!("python3 with pyarrow is needed ({other:?}): pip install pyarrow pandas duckdb chdb-core");
            assert!(!require, "{msg}");
            eprintln!("SKIPPED store_readers: {msg}");
            return;
        }
    }
    let dir = common::scratch("store_readers", "all");
    write_store(&dir);
    let store = dir.join("store");
    let mut kinds = Map::new();
    for kind in Kind::ALL {
        let mut files = Vec::new();
        common::parquet_files(&store.join(kind.as_str()), &mut files);
        assert_eq!(files.len(), 1, "{kind:?}: {files:?}");
        let text: Vec<&str> = schema::file_columns(kind).iter().filter(|c| c.col_type() == ColType::Str).map(|c| c.name).collect();
        kinds.insert(
            kind.as_str().into(),
            json!({"file": files[0].to_str().unwrap(), "text": text, "columns": ours(&store, kind)}),
        );
    }
    let ours_json = dir.join("ours.json");
    std::fs::write(&ours_json, Value::Object(kinds).to_string()).unwrap();
    let out = Command::new("python3").arg(script()).arg(&ours_json).output().expect("run python3");
    assert!(out.status.success(), "store_readers.py failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("the script's JSON");
    for kind in Kind::ALL {
        let r = &report[kind.as_str()];
        let mismatches = r["mismatches"].as_array().unwrap();
        assert!(mismatches.is_empty(), "{kind:?}: {mismatches:#?}");
        let missing = r["missing"].as_array().unwrap();
        if !missing.is_empty() {
            assert!(!require, "{kind:?}: readers not installed: {missing:?}");
            eprintln!("store_readers: {kind:?} not read by {missing:?} (not installed)");
        }
        let rows = r["rows"].as_u64().unwrap();
        // x509: the server's and the client's certificate, one row each.
        let least = if kind == Kind::X509 { 2 } else { 4 };
        assert!(rows >= least, "{kind:?}: {rows} rows");
        // Every file column compared with wirelog's reader.
        let mut compared: Vec<&str> = r["compared"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        let mut file: Vec<&str> = r["file_columns"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        compared.sort();
        file.sort();
        assert_eq!(compared, file, "{kind:?}");
        eprintln!("store_readers: {kind:?}: {rows} rows, {} columns, read alike by {}", file.len(), r["readers"]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
