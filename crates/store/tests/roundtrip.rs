//! Writing and reading back: values, layout, types, pruning, errors.

mod common;

use common::*;
use parquet::basic::{LogicalType, Repetition, TimeUnit, Type as PhysicalType};
use parquet::file::reader::FileReader;
use parquet::file::serialized_reader::SerializedFileReader;
use wirelog_store::{schema, Column, Kind, Scan, Store, StoreError, StoreOptions};

#[test]
fn flows_round_trip_exactly() {
    let dir = tempdir("flows-rt");
    // Three hours, written out of order and in several appends and flushes.
    let recs: Vec<_> = (0..3000u64)
        .map(|i| flow(i, T0 + (i as i64 % 3) * HOUR + (i as i64 / 10) * 1_000_000))
        .collect();
    let mut s = Store::open(&dir, fast_opts()).unwrap();
    s.append_flows(&recs[..1000]).unwrap();
    s.flush().unwrap();
    s.append_flows(&recs[1000..]).unwrap();
    s.close().unwrap();

    let (cols, stats) = collect(&dir, &Scan::all_columns(Kind::Flows));
    assert_eq!(stats.rows, 3000);
    assert_eq!(stats.partitions, 3);
    assert_eq!(stats.files, 6, "one file per partition per flush");
    assert_eq!(stats.corrupt_files, 0);
    // Rows come back sorted by (bucket, server, port, proto, client) within a file;
    // match them to the input through bytes_out (= record number).
    let ids = u64s(&cols, "bytes_out");
    let mut seen = vec![false; 3000];
    for (row, &id) in ids.iter().enumerate() {
        let r = &recs[id as usize];
        assert!(!seen[id as usize]);
        seen[id as usize] = true;
        let get = |name: &str| &cols.iter().find(|(n, _)| *n == name).unwrap().1;
        match get("bucket") {
            Column::I64(v) => assert_eq!(v[row], r.bucket_ns),
            c => panic!("{c:?}"),
        }
        match get("iface") {
            Column::Str(v) => assert_eq!(v[row], &*r.iface),
            c => panic!("{c:?}"),
        }
        match (get("client"), get("server")) {
            (Column::Ip(c), Column::Ip(s)) => {
                assert_eq!(c[row], r.client.0);
                assert_eq!(s[row], r.server.0);
            }
            c => panic!("{c:?}"),
        }
        match get("server_port") {
            Column::U16(v) => assert_eq!(v[row], r.server_port),
            c => panic!("{c:?}"),
        }
        match get("proto") {
            Column::U8(v) => assert_eq!(v[row], r.proto),
            c => panic!("{c:?}"),
        }
        match (get("pkts_out"), get("bytes_in"), get("pkts_in")) {
            (Column::U64(a), Column::U64(b), Column::U64(c)) => {
                assert_eq!(
                    (a[row], b[row], c[row]),
                    (r.pkts_out, r.bytes_in, r.pkts_in)
                )
            }
            c => panic!("{c:?}"),
        }
        // Files keep a flow's first/last to the second, both floored.
        let sec = |ns: i64| ns.div_euclid(1_000_000_000) * 1_000_000_000;
        match (get("first"), get("last")) {
            (Column::I64(a), Column::I64(b)) => {
                assert_eq!((a[row], b[row]), (sec(r.first_ns), sec(r.last_ns)))
            }
            c => panic!("{c:?}"),
        }
        match get("conns") {
            Column::U32(v) => assert_eq!(v[row], r.conns),
            c => panic!("{c:?}"),
        }
    }
    // Sorted within each file by (bucket, server, server_port, proto, client):
    // check one file's order through a fresh scan of its hour.
    let (cols, _) = collect(
        &dir,
        &Scan::new(Kind::Flows)
            .columns(&["bucket", "server", "server_port", "proto", "client"])
            .time(Some(T0), Some(T0 + HOUR)),
    );
    let (Column::I64(b), Column::Ip(s), Column::U16(p), Column::U8(pr), Column::Ip(c)) =
        (&cols[0].1, &cols[1].1, &cols[2].1, &cols[3].1, &cols[4].1)
    else {
        panic!("{:?}", cols.iter().map(|c| &c.0).collect::<Vec<_>>())
    };
    // The first file of the hour holds the first 1000 appended records' share.
    let first_file_rows = recs[..1000]
        .iter()
        .filter(|r| r.bucket_ns < T0 + HOUR)
        .count();
    for i in 1..first_file_rows {
        assert!(
            (b[i - 1], s[i - 1], p[i - 1], pr[i - 1], c[i - 1]) <= (b[i], s[i], p[i], pr[i], c[i]),
            "row {i} out of order"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn conns_round_trip_exactly() {
    let dir = tempdir("conns-rt");
    let recs = conns(2500, T0 + 1234, 2_000_000_000); // ~83 minutes: two hours
    let mut s = Store::open(&dir, fast_opts()).unwrap();
    s.append_conns(&recs).unwrap();
    s.close().unwrap();
    let (cols, stats) = collect(&dir, &Scan::all_columns(Kind::Conns));
    assert_eq!(stats.rows, 2500);
    assert_eq!(stats.partitions, 2);
    let get = |name: &str| &cols.iter().find(|(n, _)| *n == name).unwrap().1;
    let Column::U64(ids) = get("orig_pkts") else {
        panic!()
    };
    for (row, &id) in ids.iter().enumerate() {
        let r = &recs[id as usize];
        // ts and duration are kept in microseconds.
        let Column::I64(ts) = get("ts") else { panic!() };
        assert_eq!(ts[row], r.ts_ns - r.ts_ns.rem_euclid(1000));
        let Column::Str(v) = get("uid") else { panic!() };
        assert_eq!(v[row], r.uid.as_str());
        let (Column::Ip(oh), Column::Ip(rh)) = (get("orig_h"), get("resp_h")) else {
            panic!()
        };
        assert_eq!((oh[row], rh[row]), (r.orig_h.0, r.resp_h.0));
        let (Column::U16(op), Column::U16(rp)) = (get("orig_p"), get("resp_p")) else {
            panic!()
        };
        assert_eq!((op[row], rp[row]), (r.orig_p, r.resp_p));
        let Column::Str(v) = get("proto") else {
            panic!()
        };
        assert_eq!(v[row], r.proto.as_str());
        let Column::Str(v) = get("service") else {
            panic!()
        };
        assert_eq!(v[row], r.service.unwrap_or(""));
        let Column::OptI64(v) = get("duration") else {
            panic!()
        };
        assert_eq!(v[row], r.duration_ns);
        let (Column::OptU64(ob), Column::OptU64(rb)) = (get("orig_bytes"), get("resp_bytes"))
        else {
            panic!()
        };
        assert_eq!((ob[row], rb[row]), (r.orig_bytes, r.resp_bytes));
        let Column::Str(v) = get("conn_state") else {
            panic!()
        };
        assert_eq!(v[row], r.conn_state.as_str());
        let (Column::Bool(lo), Column::Bool(lr)) = (get("local_orig"), get("local_resp")) else {
            panic!()
        };
        assert_eq!((lo[row], lr[row]), (r.local_orig, r.local_resp));
        let Column::Str(v) = get("history") else {
            panic!()
        };
        assert_eq!(v[row], r.history.as_str());
        for (name, want) in [
            ("missed_bytes", r.missed_bytes),
            ("orig_ip_bytes", r.orig_ip_bytes),
            ("resp_pkts", r.resp_pkts),
            ("resp_ip_bytes", r.resp_ip_bytes),
        ] {
            let Column::U64(v) = get(name) else { panic!() };
            assert_eq!(v[row], want, "{name}");
        }
        let Column::U8(v) = get("ip_proto") else {
            panic!()
        };
        assert_eq!(v[row], r.ip_proto);
        let Column::Str(v) = get("community_id") else {
            panic!()
        };
        assert_eq!(v[row], r.community_id.as_str());
        let (Column::OptU64(v1), Column::OptU64(v2)) = (get("vlan"), get("inner_vlan")) else {
            panic!()
        };
        assert_eq!(
            (v1[row], v2[row]),
            (r.vlan.map(u64::from), r.inner_vlan.map(u64::from))
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn layout_names_and_parquet_types() {
    let dir = tempdir("layout");
    let mut s = Store::open(&dir, fast_opts()).unwrap();
    s.append_flows(
        &(0..10)
            .map(|i| flow(i, T0 + 13 * HOUR / 10 * 10 + 5))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    s.append_conns(&conns(10, T0 + 4 * HOUR, 1000)).unwrap();
    s.close().unwrap();
    let files = all_files(&dir);
    let rel: Vec<String> = files
        .iter()
        .map(|p| p.strip_prefix(&dir).unwrap().to_string_lossy().into_owned())
        .collect();
    let data: Vec<&String> = rel.iter().filter(|r| r.ends_with(".parquet")).collect();
    assert_eq!(data.len(), 2, "{rel:?}");
    // T0 is 09:00 UTC: +13 h is 22:00, +4 h is 13:00.
    assert!(
        data.iter()
            .any(|r| r.starts_with("flows/date=2026-11-20/hour=22/part-")),
        "{rel:?}"
    );
    assert!(
        data.iter()
            .any(|r| r.starts_with("conns/date=2026-11-20/hour=13/part-")),
        "{rel:?}"
    );
    assert!(rel.iter().all(|r| !r.ends_with(".tmp")), "{rel:?}");

    for f in data {
        let r = SerializedFileReader::new(std::fs::File::open(dir.join(f)).unwrap()).unwrap();
        let kind = if f.starts_with("flows") {
            Kind::Flows
        } else {
            Kind::Conns
        };
        let descr = r.metadata().file_metadata().schema_descr();
        let specs = schema::file_columns(kind);
        assert_eq!(descr.num_columns(), specs.len());
        for (i, spec) in specs.iter().enumerate() {
            let c = descr.column(i);
            assert_eq!(c.name(), spec.name);
            let t = c.self_type();
            let (phys, logical) = (c.physical_type(), c.logical_type_ref().cloned());
            match spec.name {
                "bucket" | "first" | "last" | "ts" => {
                    assert_eq!(phys, PhysicalType::INT64);
                    assert_eq!(
                        logical,
                        Some(LogicalType::timestamp(true, TimeUnit::MICROS))
                    );
                }
                "server_port" | "orig_p" | "resp_p" | "vlan" | "inner_vlan" => {
                    assert_eq!(phys, PhysicalType::INT32);
                    assert_eq!(logical, Some(LogicalType::integer(16, false)));
                }
                "first_offset_s" | "duration_s" => {
                    assert_eq!(phys, PhysicalType::INT32);
                    assert_eq!(logical, Some(LogicalType::integer(32, false)));
                }
                "proto" if kind == Kind::Flows => {
                    assert_eq!(logical, Some(LogicalType::integer(8, false)))
                }
                "ip_proto" => assert_eq!(logical, Some(LogicalType::integer(8, false))),
                "client" | "server" | "orig_h" | "resp_h" => {
                    assert_eq!(phys, PhysicalType::FIXED_LEN_BYTE_ARRAY);
                    assert_eq!(c.type_length(), 16);
                }
                "bytes_out" | "pkts_out" | "bytes_in" | "pkts_in" | "orig_pkts"
                | "missed_bytes" | "orig_bytes" => {
                    assert_eq!(phys, PhysicalType::INT64);
                    assert_eq!(logical, Some(LogicalType::integer(64, false)));
                }
                "iface" | "uid" | "conn_state" | "service" | "history" | "community_id" => {
                    assert_eq!(phys, PhysicalType::BYTE_ARRAY);
                    assert_eq!(logical, Some(LogicalType::String));
                }
                _ => {}
            }
            // The process columns (capture --processes) are unset when the
            // end is not local or its owner unknown.
            let optional = matches!(
                spec.name,
                "duration" | "orig_bytes" | "resp_bytes" | "service" | "vlan" | "inner_vlan"
            ) || (kind == Kind::Conns
                && matches!(spec.name.split_once('_'), Some(("orig" | "resp", "pid" | "proc" | "exe" | "user" | "container" | "pod"))));
            assert_eq!(
                t.get_basic_info().repetition(),
                if optional {
                    Repetition::OPTIONAL
                } else {
                    Repetition::REQUIRED
                },
                "{}",
                spec.name
            );
        }
        // Each chunk zstd or, where zstd saves less than a tenth (the
        // writer's sample, `pqfile::tests` checks both cases), none;
        // statistics on the time column.
        let rg = r.metadata().row_group(0);
        for c in rg.columns() {
            assert!(
                matches!(c.compression(), parquet::basic::Compression::ZSTD(_) | parquet::basic::Compression::UNCOMPRESSED),
                "{}: {:?}",
                c.column_path().string(),
                c.compression()
            );
        }
        assert!(rg.column(0).statistics().is_some());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn time_range_prunes_partitions_and_row_groups_and_filters_exactly() {
    let dir = tempdir("prune");
    let opts = StoreOptions {
        row_group_rows: 1000,
        ..fast_opts()
    };
    let mut s = Store::open(&dir, opts).unwrap();
    // 6 hours, 6000 rows per hour, one row per 600 ms.
    let recs: Vec<_> = (0..36_000u64)
        .map(|i| flow(i, T0 + i as i64 * 600_000_000))
        .collect();
    s.append_flows(&recs).unwrap();
    s.close().unwrap();

    let from = T0 + 2 * HOUR + 1_000_000_123; // not on a µs boundary
    let to = T0 + 3 * HOUR + 1_800_000_000_500;
    let want: Vec<u64> = recs
        .iter()
        .filter(|r| r.bucket_ns >= from && r.bucket_ns < to)
        .map(|r| r.bytes_out)
        .collect();
    let (cols, stats) = collect(
        &dir,
        &Scan::new(Kind::Flows)
            .columns(&["bytes_out"])
            .time(Some(from), Some(to)),
    );
    let mut got = u64s(&cols, "bytes_out");
    got.sort();
    assert_eq!(got, want);
    assert_eq!(stats.partitions, 2);
    assert_eq!(stats.partitions_skipped, 4);
    // Hour 2: 6 row groups, the first one straddles `from`; hour 3: the
    // 4th row group straddles `to`, the last two are after it.
    assert_eq!(stats.row_groups_read, 6 + 4, "{stats:?}");
    assert_eq!(stats.row_groups_skipped, 2, "{stats:?}");

    // Exact at the edges, also with the time column requested.
    let (cols, _) = collect(
        &dir,
        &Scan::new(Kind::Flows)
            .columns(&["bucket", "bytes_out"])
            .time(Some(from), Some(to)),
    );
    let Column::I64(b) = &cols[0].1 else { panic!() };
    assert!(b.iter().all(|&t| t >= from && t < to));
    assert_eq!(b.len(), want.len());

    // Range constraint on a numeric column: every row group holds ports
    // 53..=65535, so only a range outside that skips them (all of them).
    let (_, stats) = collect(
        &dir,
        &Scan::new(Kind::Flows)
            .columns(&["bytes_out"])
            .range("server_port", 0, 52),
    );
    assert_eq!(stats.rows, 0);
    assert_eq!(stats.row_groups_read, 0);
    assert_eq!(stats.row_groups_skipped, 36);
    // bytes_out (= record number) increases with time: a range on it prunes.
    let (cols, stats) = collect(
        &dir,
        &Scan::new(Kind::Flows)
            .columns(&["bytes_out"])
            .range("bytes_out", 5500, 6499),
    );
    assert_eq!(stats.row_groups_read, 2, "{stats:?}");
    let got = u64s(&cols, "bytes_out");
    assert!((5500..6500).all(|v| got.contains(&v)));

    // Fewer columns, fewer bytes.
    let (_, one) = collect(&dir, &Scan::new(Kind::Flows).columns(&["proto"]));
    let (_, all) = collect(&dir, &Scan::all_columns(Kind::Flows));
    assert!(
        one.bytes_read * 10 < all.bytes_read,
        "{} vs {}",
        one.bytes_read,
        all.bytes_read
    );

    // Unknown columns are an error naming them.
    let e = Store::scan(&dir, &Scan::new(Kind::Flows).columns(&["nope"]), |_| Ok(())).unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn scan_ref_reuses_buffers_and_agrees_with_scan() {
    let dir = tempdir("scanref");
    let mut s = Store::open(&dir, fast_opts()).unwrap();
    let recs: Vec<_> = (0..200_000u64)
        .map(|i| flow(i, T0 + (i as i64 / 1000) * 300_000_000_000))
        .collect();
    s.append_flows(&recs).unwrap();
    s.close().unwrap();
    let cols = ["server", "server_port", "bytes_out", "first"];
    let (a, _) = collect(&dir, &Scan::new(Kind::Flows).columns(&cols));
    let mut b: Vec<(&'static str, Column)> = Vec::new();
    Store::scan_ref(&dir, &Scan::new(Kind::Flows).columns(&cols), |batch| {
        if b.is_empty() {
            b = batch.columns.clone();
        } else {
            for ((_, x), (_, y)) in b.iter_mut().zip(batch.columns.iter()) {
                append(x, y.clone());
            }
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(a, b);
    assert_eq!(a[0].1.len(), 200_000);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn callback_errors_stop_the_scan() {
    let dir = tempdir("cberr");
    let mut s = Store::open(&dir, fast_opts()).unwrap();
    s.append_flows(&(0..100).map(|i| flow(i, T0)).collect::<Vec<_>>())
        .unwrap();
    s.close().unwrap();
    let e = Store::scan(
        &dir,
        &Scan::new(Kind::Flows).columns(&["bytes_out"]),
        |_| Err(StoreError::Callback("stop here".into())),
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "stop here");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn one_writer_per_directory() {
    let dir = tempdir("lock");
    let s = Store::open(&dir, fast_opts()).unwrap();
    let e = Store::open(&dir, fast_opts()).unwrap_err();
    assert!(e.to_string().contains("another wirelog process"), "{e}");
    assert!(e.to_string().contains(&*dir.to_string_lossy()), "{e}");
    drop(s);
    Store::open(&dir, fast_opts()).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unwritable_directory_is_a_clear_error() {
    let dir = tempdir("unwritable");
    let file = dir.join("a-file");
    std::fs::write(&file, b"x").unwrap();
    // A data directory below a regular file cannot exist, even for root.
    let e = Store::open(&file.join("data"), fast_opts()).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("a-file"), "{msg}");
    assert!(msg.contains("create directory"), "{msg}");
    // A data directory that is a file.
    let e = Store::open(&file, fast_opts()).unwrap_err();
    assert!(e.to_string().contains("not a directory"), "{e}");
    // Scanning a store that does not exist yields nothing.
    let stats = Store::scan(
        &dir.join("none"),
        &Scan::new(Kind::Flows).columns(&["bucket"]),
        |_| Ok(()),
    )
    .unwrap();
    assert_eq!(stats.rows, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn corrupt_files_are_skipped_with_warnings_never_a_panic() {
    let dir = tempdir("corrupt");
    let mut s = Store::open(&dir, fast_opts()).unwrap();
    let recs: Vec<_> = (0..20_000u64)
        .map(|i| flow(i, T0 + (i as i64 % 4) * HOUR))
        .collect();
    s.append_flows(&recs).unwrap();
    s.close().unwrap();
    let files = data_files(&dir);
    assert_eq!(files.len(), 4);
    let good = std::fs::read(&files[0]).unwrap();
    // Garbage, a truncated file, and a file whose footer is fine but whose
    // pages are damaged, each in its own partition.
    std::fs::write(
        files[1].with_file_name("part-garbage.parquet"),
        b"this is not parquet",
    )
    .unwrap();
    std::fs::write(&files[1], &std::fs::read(&files[1]).unwrap()[..1000]).unwrap();
    let mut damaged = std::fs::read(&files[2]).unwrap();
    for i in (200..damaged.len() / 2).step_by(97) {
        damaged[i] ^= 0x5a;
    }
    std::fs::write(&files[2], &damaged).unwrap();
    let stats = Store::scan(&dir, &Scan::all_columns(Kind::Flows), |_| Ok(())).unwrap();
    assert_eq!(stats.corrupt_files, 3, "{stats:?}");
    assert!(
        stats
            .warnings
            .iter()
            .any(|w| w.contains("part-garbage.parquet")),
        "{:?}",
        stats.warnings
    );
    assert!(
        stats.warnings.iter().all(|w| w.contains("corrupt file")),
        "{:?}",
        stats.warnings
    );
    // The intact partitions are read in full.
    assert!(stats.rows >= 10_000, "{stats:?}");
    assert!(wirelog_store::verify_file(&files[1]).is_err());
    assert!(wirelog_store::verify_file(&files[2]).is_err());

    // Random damage anywhere never panics.
    let target = files[0].clone();
    let mut rng = wirelog_store::synth::Rng::new(99);
    for round in 0..200 {
        let mut b = good.clone();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(b.len() as u64) as usize;
            b[at] ^= 1 << rng.below(8);
        }
        std::fs::write(&target, &b).unwrap();
        let r = std::panic::catch_unwind(|| {
            Store::scan(
                &dir,
                &Scan::all_columns(Kind::Flows).time(Some(T0), Some(T0 + HOUR)),
                |_| Ok(()),
            )
            .unwrap()
        });
        assert!(r.is_ok(), "round {round} panicked");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_failed_flush_keeps_complete_files_and_a_retry_writes_the_rest_once() {
    let dir = tempdir("flushfail");
    let mut s = Store::open(&dir, fast_opts()).unwrap();
    // Rows for hours 0 and 1; hour 1's partition cannot be created (a file
    // is in the way), so the flush fails after writing hour 0's file.
    let recs: Vec<_> = (0..1000u64)
        .map(|i| flow(i, T0 + (i as i64 % 2) * HOUR))
        .collect();
    let blocker = dir.join("flows/date=2026-11-20/hour=10");
    std::fs::create_dir_all(blocker.parent().unwrap()).unwrap();
    std::fs::write(&blocker, b"in the way").unwrap();
    s.append_flows(&recs).unwrap();
    let e = s.flush().unwrap_err();
    assert!(e.to_string().contains("hour=10"), "{e}");
    // Hour 0's file was complete: it stays (a failed flush never deletes a
    // complete file), and holds its 500 rows.
    assert_eq!(data_files(&dir).len(), 1, "{:?}", data_files(&dir));
    assert_eq!(sum_u64(&dir, Kind::Flows, "bytes_out").0, 500);
    assert_eq!(s.buffered().0, 1000);
    std::fs::remove_file(&blocker).unwrap();
    s.flush().unwrap();
    let (rows, sum) = sum_u64(&dir, Kind::Flows, "bytes_out");
    assert_eq!((rows, sum), (1000, (0..1000).sum()));
    s.close().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn row_groups_larger_than_a_batch_are_read_whole_by_every_api() {
    let dir = tempdir("bigrg");
    let n = 3 * wirelog_store::BATCH_ROWS as u64 + 123;
    let mut s = Store::open(&dir, fast_opts()).unwrap();
    s.append_flows(&(0..n).map(|i| flow(i, T0 + i as i64)).collect::<Vec<_>>())
        .unwrap();
    s.close().unwrap();
    let want: u64 = (0..n).sum();
    // Owned batches.
    let (cols, stats) = collect(
        &dir,
        &Scan::new(Kind::Flows).columns(&["bytes_out", "server"]),
    );
    assert_eq!(stats.row_groups_read, 1);
    assert_eq!(u64s(&cols, "bytes_out").iter().sum::<u64>(), want);
    assert_eq!(cols[1].1.len() as u64, n);
    // Lent batches.
    assert_eq!(sum_u64(&dir, Kind::Flows, "bytes_out"), (n, want));
    // Boundary filtering inside a big row group (times are kept in µs:
    // rows 1000..2000 share T0 + 1 µs).
    let (cols, _) = collect(
        &dir,
        &Scan::new(Kind::Flows)
            .columns(&["bytes_out"])
            .time(Some(T0 + 1000), Some(T0 + 100_000)),
    );
    let mut got = u64s(&cols, "bytes_out");
    got.sort_unstable();
    assert!(
        got == (1000..100_000).collect::<Vec<_>>(),
        "{} rows from {:?} to {:?}",
        got.len(),
        got.first(),
        got.last()
    );
    // Compaction of big files keeps every row.
    let mut s = Store::open(&dir, fast_opts()).unwrap();
    s.append_flows(
        &(n..2 * n)
            .map(|i| flow(i, T0 + i as i64))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    s.close().unwrap();
    let p = &wirelog_store::list_partitions(&dir, Kind::Flows).unwrap()[0];
    let r = wirelog_store::compact::compact_partition(
        &p.path,
        &wirelog_store::CompactOptions {
            sync: false,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!((r.files_merged, r.rows), (2, 2 * n));
    assert_eq!(
        sum_u64(&dir, Kind::Flows, "bytes_out"),
        (2 * n, (0..2 * n).sum())
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
