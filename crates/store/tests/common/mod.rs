#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wirelog_record::{FlowRecord, IpAddr16, UidGenerator};
use wirelog_store::synth;
use wirelog_store::{Batch, Column, Kind, Scan, ScanStats, Store, StoreOptions};

/// 2026-11-20T09:00:00Z (in the past, so its hours are closed).
pub const T0: i64 = 1_795_165_200_000_000_000;
pub const HOUR: i64 = 3_600_000_000_000;

pub fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wirelog-store-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn fast_opts() -> StoreOptions {
    StoreOptions { sync: false, ..Default::default() }
}

/// A flow whose `bytes_out` is its number (for prefix checks) and whose
/// other fields derive from it.
pub fn flow(i: u64, t_ns: i64) -> FlowRecord {
    let v6 = i.is_multiple_of(11);
    let client = if v6 {
        let mut b = [0u8; 16];
        b[0] = 0x20;
        b[1] = 0x01;
        b[15] = (i % 7) as u8;
        IpAddr16(b)
    } else {
        IpAddr16::from_v4([10, 0, (i % 3) as u8, (i % 200) as u8])
    };
    FlowRecord {
        bucket_ns: t_ns,
        iface: Arc::from(if i.is_multiple_of(5) { "eth1" } else { "eth0" }),
        client,
        server: IpAddr16::from_v4([192, 168, 0, (i % 17) as u8]),
        server_port: [443u16, 80, 53, 3306, 65535][(i % 5) as usize],
        proto: if i % 5 == 2 { 17 } else { 6 },
        bytes_out: i,
        pkts_out: i % 1000 + 1,
        bytes_in: i * 3 + 7,
        pkts_in: i % 100,
        first_ns: t_ns + (i % 1000) as i64 * 1000,
        last_ns: t_ns + (i % 1000) as i64 * 2000 + 5000,
        conns: (i % 9) as u32 + 1,
    }
}

pub fn conns(n: u64, start_ns: i64, step_ns: i64) -> Vec<wirelog_record::ConnRecord> {
    let mut uids = UidGenerator::new(7);
    (0..n).map(|i| synth::conn(i, start_ns, step_ns, &mut uids)).collect()
}

/// All batches of a scan, concatenated per column.
pub fn collect(dir: &Path, scan: &Scan) -> (Vec<(&'static str, Column)>, ScanStats) {
    let mut out: Vec<(&'static str, Column)> = Vec::new();
    let stats = Store::scan(dir, scan, |b: Batch| {
        if out.is_empty() {
            out = b.columns;
        } else {
            for ((_, a), (_, c)) in out.iter_mut().zip(b.columns) {
                append(a, c);
            }
        }
        Ok(())
    })
    .unwrap();
    (out, stats)
}

pub fn append(a: &mut Column, b: Column) {
    assert!(a.append(b), "column types differ");
}

pub fn u64s(cols: &[(&'static str, Column)], name: &str) -> Vec<u64> {
    match &cols.iter().find(|(n, _)| *n == name).unwrap().1 {
        Column::U64(v) => v.clone(),
        c => panic!("{name} is {c:?}"),
    }
}

/// Sum of a u64 column over a whole store.
pub fn sum_u64(dir: &Path, kind: Kind, col: &'static str) -> (u64, u64) {
    let mut rows = 0u64;
    let mut sum = 0u64;
    let stats = Store::scan_ref(dir, &Scan::new(kind).columns(&[col]), |b| {
        match b.column(col).unwrap() {
            Column::U64(v) => {
                rows += v.len() as u64;
                sum += v.iter().sum::<u64>();
            }
            _ => unreachable!(),
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(stats.corrupt_files, 0, "{:?}", stats.warnings);
    (rows, sum)
}

/// Every file (any name) under a directory, recursively.
pub fn all_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

pub fn data_files(dir: &Path) -> Vec<PathBuf> {
    all_files(dir)
        .into_iter()
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            !n.starts_with('.') && n.ends_with(".parquet")
        })
        .collect()
}
