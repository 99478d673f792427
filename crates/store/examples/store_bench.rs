//! Size and scan-speed measurement of the store on synthetic flows
//! (Zipf-like hosts and ports, heavy-tailed counters, 5-minute buckets).
//!
//! cargo run --release -p wirelog-store --example store_bench -- [rows] [rows_per_bucket] [dir]
//!
//! Writes one file per bucket (as a probe flushing each bucket would), reports
//! bytes per row (total and per column), compacts to hourly files, reports
//! again, then times scans. WIRELOG_BENCH_COLS=1 adds one-column scan costs;
//! WIRELOG_SCAN_ONLY=<column> only scans an existing store (for perf).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::SerializedFileReader;
use wirelog_store::synth::FlowGen;
use wirelog_store::{list_partitions, Column, CompactOptions, Kind, Scan, Store, StoreOptions};

fn column_bytes(dir: &std::path::Path) -> (BTreeMap<String, u64>, u64, u64, u64) {
    let mut per = BTreeMap::new();
    let (mut files, mut total, mut rows) = (0, 0, 0);
    for p in list_partitions(dir, Kind::Flows).unwrap() {
        for e in std::fs::read_dir(&p.path).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            if name.starts_with('.') || !name.ends_with(".parquet") {
                continue;
            }
            files += 1;
            total += e.metadata().unwrap().len();
            let r = SerializedFileReader::new(std::fs::File::open(e.path()).unwrap()).unwrap();
            rows += r.metadata().file_metadata().num_rows() as u64;
            for rg in r.metadata().row_groups() {
                for c in rg.columns() {
                    *per.entry(c.column_path().string()).or_insert(0) += c.compressed_size() as u64;
                }
            }
        }
    }
    (per, files, total, rows)
}

fn report(label: &str, dir: &std::path::Path) {
    let (per, files, total, rows) = column_bytes(dir);
    println!("{label}: {rows} rows in {files} files, {total} bytes: {:.2} bytes/row", total as f64 / rows as f64);
    let line: Vec<String> = per.iter().map(|(k, v)| format!("{k}={:.2}", *v as f64 / rows as f64)).collect();
    println!("  per column (B/row): {}", line.join(" "));
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rows: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let per_bucket: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let dir = PathBuf::from(args.get(3).cloned().unwrap_or_else(|| "/tmp/wirelog-store-bench".into()));
    if let Ok(col) = std::env::var("WIRELOG_SCAN_ONLY") {
        // Profile one column scan of an existing store.
        let name: &'static str = Box::leak(col.into_boxed_str());
        let scan = Scan::new(Kind::Flows).columns(&[name]);
        for _ in 0..20 {
            Store::scan_ref(&dir, &scan, |_| Ok(())).unwrap();
        }
        return;
    }
    let _ = std::fs::remove_dir_all(&dir);
    let start_ns = 1_795_338_000_000_000_000; // 2026-11-22T09:00:00Z
    let mut g = FlowGen::new(42, 5000, start_ns);
    let opts = StoreOptions { sync: false, ..Default::default() };
    let mut store = Store::open(&dir, opts).unwrap();
    let t = Instant::now();
    let mut gen_time = std::time::Duration::ZERO;
    let mut written = 0;
    while written < rows {
        let tg = Instant::now();
        let b = g.bucket(per_bucket.min(rows - written));
        gen_time += tg.elapsed();
        written += b.len();
        store.append_flows(&b).unwrap();
        store.flush().unwrap(); // one file per bucket, as a probe flushing every bucket would
    }
    store.close().unwrap();
    let wt = t.elapsed() - gen_time;
    println!(
        "wrote {written} flow rows in {:.2} s ({:.1} M rows/s, generation excluded)",
        wt.as_secs_f64(),
        written as f64 / wt.as_secs_f64() / 1e6
    );
    report("per-bucket files", &dir);
    let t = Instant::now();
    for p in list_partitions(&dir, Kind::Flows).unwrap() {
        wirelog_store::compact::compact_partition(&p.path, &CompactOptions { sync: false, ..Default::default() })
            .unwrap();
    }
    println!("compacted in {:.2} s", t.elapsed().as_secs_f64());
    report("hourly files after compaction", &dir);

    let runs: &[(&str, &[&'static str])] = &[
        ("bytes_out+pkts_in (u64,u64)", &["bytes_out", "pkts_in"]),
        ("server_port+bytes_out (u16,u64)", &["server_port", "bytes_out"]),
        ("server+bytes_out (ip,u64)", &["server", "bytes_out"]),
        ("bucket+bytes_in (time,u64)", &["bucket", "bytes_in"]),
    ];
    for (label, cols) in runs {
        let scan = Scan::new(Kind::Flows).columns(cols);
        let mut best = f64::MAX;
        let mut n = 0;
        let mut sum = 0u64;
        for _ in 0..3 {
            let t = Instant::now();
            n = 0;
            sum = 0;
            Store::scan_ref(&dir, &scan, |b| {
                n += b.rows();
                if let Some(Column::U64(v)) = b.column(cols[1]) {
                    sum = sum.wrapping_add(v.iter().sum::<u64>());
                }
                Ok(())
            })
            .unwrap();
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!("scan {label}: {n} rows in {:.3} s: {:.1} M rows/s (sum {sum})", best, n as f64 / best / 1e6);
    }
    if std::env::var("WIRELOG_BENCH_COLS").is_ok() {
        for c in wirelog_store::schema::FLOWS {
            let scan = Scan::new(Kind::Flows).columns(&[c.name]);
            let mut best = f64::MAX;
            for _ in 0..3 {
                let t = Instant::now();
                Store::scan_ref(&dir, &scan, |_| Ok(())).unwrap();
                best = best.min(t.elapsed().as_secs_f64());
            }
            println!("  column {}: {:.1} ns/row", c.name, best * 1e9 / rows as f64);
        }
    }
    // The owning API (a new batch each time) for comparison.
    {
        let scan = Scan::new(Kind::Flows).columns(&["bytes_out", "pkts_in"]);
        let t = Instant::now();
        let mut n = 0;
        Store::scan(&dir, &scan, |b| {
            n += b.rows();
            Ok(())
        })
        .unwrap();
        let s = t.elapsed().as_secs_f64();
        println!("scan (owned batches) bytes_out+pkts_in: {n} rows in {s:.3} s: {:.1} M rows/s", n as f64 / s / 1e6);
    }
    // A filtered group-by: sum(bytes_out) by server_port where proto = 6.
    let scan = Scan::new(Kind::Flows).columns(&["proto", "server_port", "bytes_out"]);
    let t = Instant::now();
    let mut sums = vec![0u64; 65536];
    let mut n = 0;
    Store::scan_ref(&dir, &scan, |b| {
        let (Some(Column::U8(p)), Some(Column::U16(port)), Some(Column::U64(by))) =
            (b.column("proto"), b.column("server_port"), b.column("bytes_out"))
        else {
            panic!()
        };
        n += p.len();
        for i in 0..p.len() {
            if p[i] == 6 {
                sums[port[i] as usize] += by[i];
            }
        }
        Ok(())
    })
    .unwrap();
    let s = t.elapsed().as_secs_f64();
    println!("filtered group-by (3 columns): {n} rows in {s:.3} s: {:.1} M rows/s", n as f64 / s / 1e6);
}
// (single-column timings are printed when WIRELOG_BENCH_COLS is set)
