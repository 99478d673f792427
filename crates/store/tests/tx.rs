//! Transactions (http, mysql, pgsql, redis, dns): written, read back,
//! compacted, and bad rows rejected.

mod common;

use common::{fast_opts, tempdir, HOUR, T0};
use wirelog_store::compact::{compact_partition, CompactOptions};
use wirelog_store::{
    list_partitions, schema, synth, tx_columns, Batch, Cell, Column, Kind, Scan, Store, StoreError,
    StoreOptions, TxRow,
};

fn read_all(dir: &std::path::Path, kind: Kind) -> Vec<Batch> {
    let mut out = Vec::new();
    Store::scan(dir, &Scan::all_columns(kind), |b| {
        out.push(b);
        Ok(())
    })
    .unwrap();
    out
}

fn col<'a>(bs: &'a [Batch], name: &str) -> Vec<&'a Column> {
    bs.iter().map(|b| b.column(name).unwrap()).collect()
}

/// The common columns of a row, compared as a whole.
type Common = (i64, String, [u8; 16], u16, [u8; 16], u16, u8, String);

fn ip(a: &wirelog_store::IpAddr16) -> [u8; 16] {
    a.0
}

#[test]
fn every_kind_round_trips() {
    let dir = tempdir("tx-roundtrip");
    let mut store = Store::open(&dir, fast_opts()).unwrap();
    let mut written = Vec::new();
    for (s, kind) in Kind::TX.into_iter().enumerate() {
        // Two hours, written out of order: files come back sorted by ts.
        let mut rows = synth::tx_rows(kind, 700, T0, 10_000_000_000, s as u64 + 1);
        rows.reverse();
        store.append_tx(kind, &rows[..300]).unwrap();
        store.flush().unwrap();
        store.append_tx(kind, &rows[300..]).unwrap();
        rows.reverse();
        written.push((kind, rows));
    }
    store.close().unwrap();

    for (kind, rows) in written {
        assert!(dir.join(kind.as_str()).is_dir());
        let parts = list_partitions(&dir, kind).unwrap();
        assert_eq!(parts.len(), 2, "{kind:?}");
        let bs = read_all(&dir, kind);
        let n: usize = bs.iter().map(Batch::rows).sum();
        assert_eq!(n, rows.len());
        // Every column in schema order, with the batch types of the table.
        let names: Vec<&str> = bs[0].columns.iter().map(|(n, _)| *n).collect();
        let want: Vec<&str> = schema::columns(kind).iter().map(|c| c.name).collect();
        assert_eq!(names, want);

        // Rows of one file are sorted by ts; compare as multisets keyed by uid.
        let mut got: Vec<Common> = Vec::new();
        let mut extras: Vec<Vec<String>> = Vec::new();
        for b in &bs {
            let Column::I64(ts) = b.column("ts").unwrap() else {
                panic!()
            };
            assert!(ts.windows(2).all(|w| w[0] <= w[1]) || bs.len() > 1);
            let Column::Str(uid) = b.column("uid").unwrap() else {
                panic!()
            };
            let Column::Ip(c) = b.column("client").unwrap() else {
                panic!()
            };
            let Column::U16(cp) = b.column("client_port").unwrap() else {
                panic!()
            };
            let Column::Ip(s) = b.column("server").unwrap() else {
                panic!()
            };
            let Column::U16(sp) = b.column("server_port").unwrap() else {
                panic!()
            };
            let Column::U8(tr) = b.column("transport").unwrap() else {
                panic!()
            };
            let Column::Str(st) = b.column("status").unwrap() else {
                panic!()
            };
            for i in 0..b.rows() {
                got.push((
                    ts[i],
                    uid[i].clone(),
                    c[i],
                    cp[i],
                    s[i],
                    sp[i],
                    tr[i],
                    st[i].clone(),
                ));
                extras.push(
                    b.columns[schema::TX_COMMON..schema::TX_COMMON + tx_columns(kind).len()]
                        .iter()
                        .map(|(_, c)| cell_text(c, i))
                        .collect(),
                );
            }
        }
        let mut want: Vec<_> = rows
            .iter()
            .map(|r| {
                (
                    r.ts_ns,
                    r.uid.clone(),
                    ip(&r.client),
                    r.client_port,
                    ip(&r.server),
                    r.server_port,
                    r.transport,
                    r.status.to_string(),
                )
            })
            .collect();
        let mut got_sorted = got.clone();
        got_sorted.sort();
        want.sort();
        assert_eq!(got_sorted, want, "{kind:?}");
        // Extra cells and the optional common columns, row by row (by uid).
        let by_uid: std::collections::HashMap<&str, &TxRow> =
            rows.iter().map(|r| (r.uid.as_str(), r)).collect();
        let mut i = 0;
        for b in &bs {
            let Column::OptU64(rq) = b.column("request_bytes").unwrap() else {
                panic!()
            };
            let Column::OptU64(rs) = b.column("response_bytes").unwrap() else {
                panic!()
            };
            let Column::OptI64(lat) = b.column("latency").unwrap() else {
                panic!()
            };
            let Column::OptI64(fb) = b.column("first_byte_latency").unwrap() else {
                panic!()
            };
            for j in 0..b.rows() {
                let r = by_uid[got[i].1.as_str()];
                assert_eq!(rq[j], r.request_bytes);
                assert_eq!(rs[j], r.response_bytes);
                // Stored in µs.
                assert_eq!(lat[j], r.latency_ns.map(|l| l / 1000 * 1000));
                assert_eq!(fb[j], r.first_byte_latency_ns.map(|l| l / 1000 * 1000));
                let want: Vec<String> = r.extra.iter().map(expected_text).collect();
                assert_eq!(extras[i], want, "{kind:?} row {i}");
                i += 1;
            }
        }
    }
}

fn cell_text(c: &Column, i: usize) -> String {
    match c {
        Column::OptU64(v) => format!("{:?}", v[i]),
        Column::OptI64(v) => format!("{:?}", v[i]),
        Column::Str(v) => v[i].clone(),
        Column::Bool(v) => v[i].to_string(),
        other => panic!("unexpected extra column type {other:?}"),
    }
}

fn expected_text(c: &Cell) -> String {
    match c {
        Cell::U64(v) => format!("{v:?}"),
        Cell::Dur(v) => format!("{:?}", v.map(|d| d / 1000 * 1000)),
        // Unset text reads back as "".
        Cell::Str(v) => v.clone().unwrap_or_default(),
        Cell::Bool(b) => b.to_string(),
    }
}

#[test]
fn time_range_and_numeric_pruning_work_on_tx() {
    let dir = tempdir("tx-prune");
    let mut store = Store::open(
        &dir,
        StoreOptions {
            row_group_rows: 100,
            ..fast_opts()
        },
    )
    .unwrap();
    let rows = synth::tx_rows(Kind::Http, 1000, T0, 5_000_000_000, 3);
    store.append_tx(Kind::Http, &rows).unwrap();
    store.close().unwrap();
    let from = T0 + HOUR / 2;
    let to = T0 + HOUR;
    let scan = Scan::new(Kind::Http)
        .columns(&["ts", "status_code"])
        .time(Some(from), Some(to));
    let mut n = 0;
    Store::scan(&dir, &scan, |b| {
        let Column::I64(ts) = b.column("ts").unwrap() else {
            panic!()
        };
        assert!(ts.iter().all(|&t| t >= from && t < to));
        n += b.rows();
        Ok(())
    })
    .unwrap();
    assert_eq!(
        n,
        rows.iter()
            .filter(|r| r.ts_ns >= from && r.ts_ns < to)
            .count()
    );
    // A range on the optional status_code (statistics over the set values).
    let scan = Scan::new(Kind::Http)
        .columns(&["status_code"])
        .range("status_code", 500, 599);
    let mut hits = 0;
    Store::scan(&dir, &scan, |b| {
        let Column::OptU64(c) = b.column("status_code").unwrap() else {
            panic!()
        };
        hits += c.iter().filter(|c| c.is_some_and(|c| c >= 500)).count();
        Ok(())
    })
    .unwrap();
    let want = rows
        .iter()
        .filter(|r| matches!(r.extra[5], Cell::U64(Some(c)) if c >= 500))
        .count();
    assert_eq!(hits, want);
}

#[test]
fn compaction_merges_tx_files() {
    let dir = tempdir("tx-compact");
    let mut store = Store::open(&dir, fast_opts()).unwrap();
    let rows = synth::tx_rows(Kind::Mysql, 600, T0, 1_000_000_000, 9);
    for chunk in rows.chunks(100) {
        store.append_tx(Kind::Mysql, chunk).unwrap();
        store.flush().unwrap();
    }
    store.close().unwrap();
    let parts = list_partitions(&dir, Kind::Mysql).unwrap();
    assert_eq!(parts.len(), 1);
    let files = |p: &std::path::Path| {
        std::fs::read_dir(p)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".parquet")
            })
            .count()
    };
    assert_eq!(files(&parts[0].path), 6);
    let before = read_all(&dir, Kind::Mysql);
    let r = compact_partition(&parts[0].path, &CompactOptions::default()).unwrap();
    assert_eq!(r.files_merged, 6);
    assert_eq!(r.rows, 600);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(files(&parts[0].path), 1);
    let after = read_all(&dir, Kind::Mysql);
    let sum = |bs: &[Batch], name: &str| -> u64 {
        col(bs, name)
            .iter()
            .map(|c| match c {
                Column::OptU64(v) => v.iter().flatten().sum::<u64>(),
                _ => panic!(),
            })
            .sum()
    };
    for name in [
        "request_bytes",
        "response_bytes",
        "affected_rows",
        "error_code",
    ] {
        assert_eq!(sum(&before, name), sum(&after, name), "{name}");
    }
    let texts = |bs: &[Batch], name: &str| -> Vec<String> {
        let mut v: Vec<String> = col(bs, name)
            .iter()
            .flat_map(|c| match c {
                Column::Str(v) => v.clone(),
                _ => panic!(),
            })
            .collect();
        v.sort();
        v
    };
    for name in ["uid", "fingerprint", "error_message", "status"] {
        assert_eq!(texts(&before, name), texts(&after, name), "{name}");
    }
    // The merged file is sorted by ts.
    let Column::I64(ts) = after[0].column("ts").unwrap() else {
        panic!()
    };
    assert!(ts.windows(2).all(|w| w[0] <= w[1]));
    let (kind, n) = wirelog_store::verify_file(
        &std::fs::read_dir(&parts[0].path)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "parquet"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!((kind, n), (Kind::Mysql, 600));
}

#[test]
fn bad_extra_cells_are_errors_naming_kind_and_column() {
    let dir = tempdir("tx-bad");
    let mut store = Store::open(&dir, fast_opts()).unwrap();
    let good = synth::tx_rows(Kind::Http, 3, T0, 1_000_000, 1);
    let bad_row = |f: &dyn Fn(&mut TxRow)| {
        let mut r = good[1].clone();
        f(&mut r);
        vec![good[0].clone(), r]
    };
    let check = |e: StoreError, column: &str| {
        let StoreError::BadRow {
            kind, column: c, ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert_eq!((*kind, c.as_str()), ("http", column), "{e}");
        assert!(e.to_string().contains("http"), "{e}");
    };
    // Too few cells: names the first missing column.
    let e = store
        .append_tx(Kind::Http, &bad_row(&|r| r.extra.truncate(4)))
        .unwrap_err();
    check(e, "user_agent");
    // Too many.
    let e = store
        .append_tx(Kind::Http, &bad_row(&|r| r.extra.push(Cell::Bool(true))))
        .unwrap_err();
    check(e, "");
    // Wrong type.
    let e = store
        .append_tx(Kind::Http, &bad_row(&|r| r.extra[0] = Cell::U64(Some(1))))
        .unwrap_err();
    check(e, "method");
    // A U16 column given a value that does not fit.
    let e = store
        .append_tx(
            Kind::Http,
            &bad_row(&|r| r.extra[5] = Cell::U64(Some(70_000))),
        )
        .unwrap_err();
    check(e, "status_code");
    // Rows of a kind's layout given for another kind.
    let e = store.append_tx(Kind::Dns, &good).unwrap_err();
    assert!(matches!(e, StoreError::BadRow { kind: "dns", .. }), "{e}");
    // Not a transaction kind.
    assert!(store.append_tx(Kind::Conns, &good).is_err());
    // Nothing of the failed calls was buffered.
    assert_eq!(store.buffered_tx(Kind::Http), 0);
    store.append_tx(Kind::Http, &good).unwrap();
    assert_eq!(store.buffered_tx(Kind::Http), 3);
    store.close().unwrap();
    let n: usize = read_all(&dir, Kind::Http).iter().map(Batch::rows).sum();
    assert_eq!(n, 3);
}

#[test]
fn tx_columns_name_the_extra_cells() {
    let names = |k| tx_columns(k).iter().map(|c| c.name).collect::<Vec<_>>();
    assert_eq!(
        names(Kind::Http),
        [
            "method",
            "host",
            "uri",
            "version",
            "user_agent",
            "status_code",
            "reason",
            "request_body_len",
            "response_body_len",
            // HTTP/2's, appended (old files read them as unset).
            "stream_id",
            "end_state",
            "h2_error",
            "promised_by",
            // The columns of every kind (`columns::EVERY_TX`), appended.
            "source"
        ]
    );
    assert_eq!(
        names(Kind::Redis),
        ["command", "args", "reply_type", "reply", "source"]
    );
    assert_eq!(tx_columns(Kind::Dns).len(), 14);
    assert_eq!(tx_columns(Kind::Mysql).len(), 13);
    assert_eq!(tx_columns(Kind::Pgsql).len(), 12);
    assert!(tx_columns(Kind::Flows).is_empty());
    assert_eq!(tx_columns(Kind::Dns)[9].cell_type(), "bool");
    assert_eq!(tx_columns(Kind::Http)[5].cell_type(), "u64");
    for k in Kind::TX {
        assert_eq!(Kind::from_name(k.as_str()), Some(k));
        let common: Vec<&str> = schema::columns(k)[..schema::TX_COMMON]
            .iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(
            common,
            [
                "ts",
                "uid",
                "client",
                "client_port",
                "server",
                "server_port",
                "transport",
                "status",
                "request_bytes",
                "response_bytes",
                "latency",
                "first_byte_latency",
                "sample_weight"
            ]
        );
    }
}

/// Rows of a few connections interleaved, each uid's ends taken from its
/// first row's (`TxBuf`'s cache by the uid's entry), among them a uid whose
/// rows come with other ends (not expected of a connection; each row must
/// still read back its own), over more distinct ports and sizes than a
/// dictionary compares in place, and buffers grown many times over: every
/// row reads back its own leading columns.
#[test]
fn interleaved_connections_read_back_their_own_ends() {
    let dir = tempdir("tx-conn-ends");
    let mut store = Store::open(&dir, fast_opts()).unwrap();
    let mut rows = synth::tx_rows(Kind::Mysql, 5_000, T0, 1_000_000, 21);
    let uids: Vec<String> = rows[..12].iter().map(|r| r.uid.clone()).collect();
    for (i, r) in rows.iter_mut().enumerate() {
        let c = (i * 7 + i / 13) % uids.len();
        r.uid = uids[c].clone();
        r.client_port = 40_000 + c as u16;
        r.client.0[15] = c as u8;
        r.request_bytes = Some((i % 29) as u64);
        if c == 5 && i % 3 == 0 {
            // The odd uid: its rows' ends differ now and then.
            r.client_port = 50_000 + (i % 11) as u16;
            r.server.0[15] = 99;
            r.server_port = 1 + (i % 5) as u16;
        }
    }
    store.append_tx(Kind::Mysql, &rows[..2_500]).unwrap();
    store.flush().unwrap();
    store.append_tx(Kind::Mysql, &rows[2_500..]).unwrap();
    store.close().unwrap();
    let mut got = Vec::new();
    for b in read_all(&dir, Kind::Mysql) {
        let (
            Some(Column::I64(ts)),
            Some(Column::Str(uid)),
            Some(Column::Ip(c)),
            Some(Column::U16(cp)),
            Some(Column::Ip(s)),
            Some(Column::U16(sp)),
            Some(Column::OptU64(rq)),
        ) = (
            b.column("ts"),
            b.column("uid"),
            b.column("client"),
            b.column("client_port"),
            b.column("server"),
            b.column("server_port"),
            b.column("request_bytes"),
        )
        else {
            panic!("{:?}", b.columns)
        };
        for i in 0..b.rows() {
            got.push((ts[i], uid[i].clone(), c[i], cp[i], s[i], sp[i], rq[i]));
        }
    }
    got.sort();
    let mut want: Vec<_> = rows
        .iter()
        .map(|r| (r.ts_ns / 1000 * 1000, r.uid.clone(), ip(&r.client), r.client_port, ip(&r.server), r.server_port, r.request_bytes))
        .collect();
    want.sort();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "first difference: {:?}", got.iter().zip(&want).find(|(g, w)| g != w));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Each row's sample weight (`capture --cpu-budget`'s 1-in-N parsing)
/// reads back as written, row by row.
#[test]
fn sample_weights_read_back() {
    let dir = tempdir("tx-weights");
    let mut store = Store::open(&dir, fast_opts()).unwrap();
    let mut rows = synth::tx_rows(Kind::Http, 500, T0, 1_000_000_000, 9);
    for (i, r) in rows.iter_mut().enumerate() {
        r.sample_weight = 1 + (i % 5) as u32 * 3;
    }
    store.append_tx(Kind::Http, &rows).unwrap();
    store.close().unwrap();
    let mut got = Vec::new();
    Store::scan(&dir, &Scan::all_columns(Kind::Http), |b| {
        let Some(Column::OptU64(w)) = b.column("sample_weight") else { panic!("sample_weight: {:?}", b.column("sample_weight")) };
        got.extend(w.iter().map(|w| w.unwrap()));
        Ok(())
    })
    .unwrap();
    got.sort_unstable();
    let mut want: Vec<u64> = rows.iter().map(|r| u64::from(r.sample_weight)).collect();
    want.sort_unstable();
    assert_eq!(got, want);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn retention_deletes_old_tx_partitions() {
    let dir = tempdir("tx-retention");
    let mut store = Store::open(&dir, fast_opts()).unwrap();
    // Three hours of DNS and Redis.
    for kind in [Kind::Dns, Kind::Redis] {
        let rows = synth::tx_rows(kind, 300, T0, 36_000_000_000, 4);
        store.append_tx(kind, &rows).unwrap();
    }
    store.close().unwrap();
    assert_eq!(list_partitions(&dir, Kind::Dns).unwrap().len(), 3);
    // At the end of the third hour, only the hour that ended less than an
    // hour ago stays.
    let r = wirelog_store::retention::enforce_retention(
        &dir,
        T0 + 3 * HOUR,
        Some(std::time::Duration::from_secs(3600)),
        None,
    )
    .unwrap();
    assert_eq!(r.partitions_deleted, 4, "{r:?}");
    for kind in [Kind::Dns, Kind::Redis] {
        let left = list_partitions(&dir, kind).unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].start_ns(), T0 + 2 * HOUR);
    }
}

/// The transaction buffer keeps no owners until a row has one (branch
/// col36), then gives the rows before it none: rows without an owner
/// buffered before the first with one read back unset, and each owner stays
/// on its own row, across two batches of records.
#[test]
fn owners_after_rows_without_them_stay_on_their_rows() {
    use std::sync::Arc;
    use wirelog_record::http::HttpTx;
    use wirelog_record::{Detail, IpAddr16, ProcOwner, Protocol, Span, Transaction, TxRecord, TxStatus, UidGenerator};
    let owner = |pid: u32, name: &str| -> wirelog_record::Proc {
        Some(Arc::new(ProcOwner { pid, name: name.into(), exe: format!("/usr/bin/{name}"), ..Default::default() }))
    };
    let mut uids = UidGenerator::new(1);
    let mut row = |port: u16, orig_proc: wirelog_record::Proc, resp_proc: wirelog_record::Proc| {
        let span = |t: i64| Span { first_ns: T0 + t, last_ns: T0 + t + 10, bytes: 20 };
        TxRecord {
            uid: uids.next_uid(),
            orig_h: IpAddr16::from_v4([10, 0, 0, 1]),
            orig_p: port,
            resp_h: IpAddr16::from_v4([10, 0, 0, 2]),
            resp_p: 80,
            transport: wirelog_record::Proto::Tcp,
            protocol: Protocol::Http,
            orig_proc,
            resp_proc,
            source: Default::default(),
            sample_weight: 1,
            tx: Transaction {
                request: Some(span(i64::from(port) * 1_000)),
                response: Some(span(i64::from(port) * 1_000 + 500)),
                status: TxStatus::Ok,
                detail: Detail::Http(HttpTx { method: "GET".into(), ..Default::default() }),
            },
        }
    };
    let first = [row(1, None, None), row(2, None, None), row(3, owner(7, "curl"), None), row(4, None, None)];
    let second = [row(5, None, None), row(6, None, owner(42, "nginx"))];
    let dir = tempdir("tx-owners-late");
    let mut store = Store::open(&dir, fast_opts()).unwrap();
    store.append_tx_records(&first).unwrap();
    store.append_tx_records(&second).unwrap();
    store.close().unwrap();
    let mut got = Vec::new();
    Store::scan(&dir, &Scan::all_columns(Kind::Http), |b| {
        let (Some(Column::U16(port)), Some(Column::OptU64(op)), Some(Column::OptU64(rp)), Some(Column::Str(on))) =
            (b.column("client_port"), b.column("orig_pid"), b.column("resp_pid"), b.column("orig_proc"))
        else {
            panic!("{:?}", b.columns)
        };
        for i in 0..b.rows() {
            got.push((port[i], op[i], on[i].clone(), rp[i]));
        }
        Ok(())
    })
    .unwrap();
    got.sort();
    let none = (None, String::new(), None);
    let want: Vec<(u16, Option<u64>, String, Option<u64>)> = [
        (1, none.clone()),
        (2, none.clone()),
        (3, (Some(7), "curl".to_string(), None)),
        (4, none.clone()),
        (5, none.clone()),
        (6, (None, String::new(), Some(42))),
    ]
    .into_iter()
    .map(|(p, (op, on, rp))| (p, op, on, rp))
    .collect();
    assert_eq!(got, want);
    std::fs::remove_dir_all(&dir).unwrap();
}
