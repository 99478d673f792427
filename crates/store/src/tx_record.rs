//! Transaction records (from the parsers) to store rows: each protocol's
//! declared columns ([`wirelog_record::columns`]) read from the record, in
//! [`tx_columns`](crate::schema::tx_columns) order.

use std::sync::OnceLock;

use wirelog_record::columns::{self, Column, LogText, Val};
use wirelog_record::{Proto, Protocol, TxRecord};

use crate::batch::Kind;
use crate::schema::{self, ColType};
use crate::tx::{Cell, CellRef, Common, TxBuf, TxRow};

/// The store kind of a protocol's transactions.
pub fn tx_kind(p: Protocol) -> Kind {
    Kind::tx(p)
}

/// Each protocol's stored columns, in the store's order (from its
/// declaration, once).
fn stored(p: Protocol) -> &'static [&'static Column] {
    static STORED: OnceLock<Vec<Vec<&'static Column>>> = OnceLock::new();
    &STORED.get_or_init(|| Protocol::ALL.iter().map(|&p| columns::of(p).stored()).collect())[p.index()]
}

/// The kind's own columns of a record, in schema order, handed to `f` one at
/// a time (borrowed, so the store copies text once, into its buffer): each
/// declared column's value as the store keeps it (a list joined by `,`, a
/// time in whole seconds as their number, an unset flag as false).
fn extra_cells(r: &TxRecord, f: &mut impl FnMut(CellRef<'_>)) {
    let text = columns::of(r.protocol).log_text;
    let mut list = String::new();
    for (c, spec) in stored(r.protocol).iter().zip(schema::tx_columns(tx_kind(r.protocol))) {
        match (c.get)(r) {
            Val::Unset => f(match spec.col_type() {
                ColType::Str => CellRef::Str(None),
                ColType::Bool => CellRef::Bool(false),
                ColType::DurUs => CellRef::Dur(None),
                _ => CellRef::U64(None),
            }),
            Val::Text(s) => f(CellRef::Str(s.filter(|s| !(c.unset_when_empty && s.is_empty())))),
            Val::Count(n) => f(CellRef::U64(n)),
            Val::Bool(b) => f(CellRef::Bool(b.unwrap_or(false))),
            Val::Interval(d) => f(CellRef::Dur(d)),
            Val::TimeSecs(t) => f(CellRef::U64(t.and_then(|t| u64::try_from(t).ok()))),
            Val::List(None) => f(CellRef::Str(None)),
            Val::List(Some(l)) => {
                list.clear();
                for i in 0..l.len {
                    if i > 0 {
                        list.push(',');
                    }
                    (l.item)(l.record, i, &mut list);
                }
                // An empty list is unset, except where the log tells it
                // apart (Zeek's `(empty)`).
                let empty_unset = l.len == 0 && text == LogText::Utf8;
                f(CellRef::Str((!empty_unset).then_some(list.as_str())))
            }
        }
    }
}

/// The leading columns of a record.
fn common(r: &TxRecord) -> Common<'_> {
    let tx = &r.tx;
    Common {
        ts_ns: tx.ts_ns(),
        uid: r.uid.as_bytes(),
        client: r.orig_h,
        client_port: r.orig_p,
        server: r.resp_h,
        server_port: r.resp_p,
        transport: if r.transport == Proto::Udp { 17 } else { 6 },
        status: tx.status.as_str(),
        request_bytes: tx.request.map(|x| x.bytes),
        response_bytes: tx.response.map(|x| x.bytes),
        latency_ns: tx.latency_ns(),
        first_byte_latency_ns: tx.first_byte_latency_ns(),
        sample_weight: r.sample_weight,
        orig_proc: &r.orig_proc,
        resp_proc: &r.resp_proc,
    }
}

impl TxRow {
    /// The row of a transaction record.
    pub fn from_record(r: &TxRecord) -> TxRow {
        let c = common(r);
        let mut extra = Vec::new();
        extra_cells(r, &mut |cell| extra.push(Cell::from(cell)));
        TxRow {
            ts_ns: c.ts_ns,
            uid: r.uid.as_str().to_string(),
            client: c.client,
            client_port: c.client_port,
            server: c.server,
            server_port: c.server_port,
            transport: c.transport,
            status: c.status,
            request_bytes: c.request_bytes,
            response_bytes: c.response_bytes,
            latency_ns: c.latency_ns,
            first_byte_latency_ns: c.first_byte_latency_ns,
            sample_weight: c.sample_weight,
            extra,
            orig_proc: r.orig_proc.clone(),
            resp_proc: r.resp_proc.clone(),
        }
    }
}

impl TxBuf {
    /// Buffers a record of the buffer's kind as [`TxBuf::push`] buffers
    /// [`TxRow::from_record`] of it, without building the row.
    pub(crate) fn push_record(&mut self, r: &TxRecord) {
        self.push_common(common(r));
        let mut col = 0;
        extra_cells(r, &mut |cell| {
            self.push_extra(col, cell);
            col += 1;
        });
        debug_assert_eq!(col, schema::tx_columns(tx_kind(r.protocol)).len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_record::Detail;
    use wirelog_record::dns::{DnsAnswer, DnsTx};
    use wirelog_record::http::HttpTx;
    use wirelog_record::mysql::MysqlTx;
    use wirelog_record::pgsql::PgsqlTx;
    use wirelog_record::redis::RedisTx;
    use wirelog_record::{Span, Transaction, TxStatus};
    use wirelog_record::{IpAddr16, UidGenerator};

    fn rec(protocol: Protocol, detail: Detail) -> TxRecord {
        let span = |t: i64| Span {
            first_ns: t,
            last_ns: t + 10,
            bytes: 20,
        };
        TxRecord {
            uid: UidGenerator::new(1).next_uid(),
            orig_h: IpAddr16::from_v4([10, 0, 0, 1]),
            orig_p: 40000,
            resp_h: IpAddr16::from_v4([10, 0, 0, 2]),
            resp_p: 3306,
            transport: Proto::Tcp,
            protocol,
            orig_proc: None,
            resp_proc: None,
            source: Default::default(),
            sample_weight: 1,
            tx: Transaction {
                request: Some(span(1_000)),
                response: Some(span(2_000)),
                status: TxStatus::Ok,
                detail,
            },
        }
    }

    #[test]
    fn every_kind_maps_onto_its_columns() {
        let dns = DnsTx {
            qname: "a.example".into(),
            answers: vec![
                DnsAnswer {
                    name: "a.example".into(),
                    rtype: 1,
                    class: 1,
                    ttl: 60,
                    data: "1.2.3.4".into(),
                },
                DnsAnswer {
                    name: "a.example".into(),
                    rtype: 1,
                    class: 1,
                    ttl: 30,
                    data: "5.6.7.8".into(),
                },
            ],
            ..Default::default()
        };
        let mysql = MysqlTx {
            command: "query",
            query: Some("select 1".into()),
            ..Default::default()
        };
        let records = [
            rec(
                Protocol::Http,
                Detail::Http(HttpTx {
                    method: "GET".into(),
                    status_code: 200,
                    ..Default::default()
                }),
            ),
            rec(Protocol::Mysql, Detail::Mysql(mysql)),
            rec(
                Protocol::Pgsql,
                Detail::Pgsql(PgsqlTx {
                    kind: "query",
                    ..Default::default()
                }),
            ),
            rec(
                Protocol::Redis,
                Detail::Redis(RedisTx {
                    command: "GET".into(),
                    ..Default::default()
                }),
            ),
            rec(Protocol::Dns, Detail::Dns(dns)),
        ];
        for r in &records {
            let row = TxRow::from_record(r);
            crate::tx::check(tx_kind(r.protocol), &row).unwrap();
            let mut buf = TxBuf::new(tx_kind(r.protocol));
            buf.push_record(r);
            let mut from_row = TxBuf::new(tx_kind(r.protocol));
            from_row.push(&row);
            assert_eq!(buf.bytes, from_row.bytes, "{:?}", r.protocol);
        }
        let dns_row = TxRow::from_record(&records[4]);
        let text = |i: usize| match &dns_row.extra[i] {
            Cell::Str(s) => s.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(text(7).as_deref(), Some("1.2.3.4,5.6.7.8"));
        assert_eq!(text(8).as_deref(), Some("60,30"));
    }

    fn owner(pid: u32, name: &str) -> wirelog_record::Proc {
        Some(std::sync::Arc::new(wirelog_record::ProcOwner {
            pid,
            name: name.into(),
            exe: format!("/usr/sbin/{name}"),
            user: "www-data".into(),
            container: "docker:0123abcd".into(),
            ..Default::default()
        }))
    }

    fn tmpdir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("wirelog-txrec-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn http(owners: (wirelog_record::Proc, wirelog_record::Proc)) -> TxRecord {
        let mut r = rec(
            Protocol::Http,
            Detail::Http(HttpTx {
                method: "GET".into(),
                ..Default::default()
            }),
        );
        (r.orig_proc, r.resp_proc) = owners;
        r
    }

    fn owner_columns(dir: &std::path::Path) -> Vec<(Option<u64>, String, String, String, Option<u64>, String)> {
        let scan = crate::Scan::new(Kind::Http).columns(&[
            "orig_pid",
            "orig_proc",
            "orig_container",
            "resp_user",
            "resp_pid",
            "resp_exe",
        ]);
        let mut out = Vec::new();
        crate::Store::scan(dir, &scan, |b| {
            use crate::Column::{OptU64, Str};
            let [(_, OptU64(op)), (_, Str(on)), (_, Str(oc)), (_, Str(ru)), (_, OptU64(rp)), (_, Str(re))] =
                &b.columns[..]
            else {
                panic!("{:?}", b.columns)
            };
            for i in 0..b.rows() {
                out.push((op[i], on[i].clone(), oc[i].clone(), ru[i].clone(), rp[i], re[i].clone()));
            }
            Ok(())
        })
        .unwrap();
        out
    }

    /// `capture --processes` owners reach every transaction kind's last
    /// columns and read back; unknown owners read as unset.
    #[test]
    fn owners_are_stored_with_transactions() {
        let dir = tmpdir("owners");
        let mut st = crate::Store::open(&dir, crate::StoreOptions { sync: false, ..Default::default() }).unwrap();
        st.append_tx_records(&[http((owner(7, "curl"), owner(42, "nginx"))), http((None, None))]).unwrap();
        let row = TxRow::from_record(&http((None, owner(42, "nginx"))));
        st.append_tx(Kind::Http, &[row]).unwrap();
        st.close().unwrap();
        let mut got = owner_columns(&dir);
        got.sort();
        let s = |v: &str| v.to_string();
        assert_eq!(
            got,
            [
                (None, s(""), s(""), s(""), None, s("")),
                (None, s(""), s(""), s("www-data"), Some(42), s("/usr/sbin/nginx")),
                (Some(7), s("curl"), s("docker:0123abcd"), s("www-data"), Some(42), s("/usr/sbin/nginx")),
            ]
        );
        for k in Kind::TX {
            let cols = schema::columns(k);
            let owners: Vec<&str> = cols[cols.len() - schema::OWNER_COLS..].iter().map(|c| c.name).collect();
            let conns: Vec<&str> =
                schema::CONNS[schema::CONNS.len() - schema::OWNER_COLS..].iter().map(|c| c.name).collect();
            assert_eq!(owners, conns, "{k:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A transaction file written before the owner columns existed still
    /// reads (and compacts): its rows have no owner.
    #[test]
    fn files_without_owner_columns_read_as_unset() {
        use crate::encode::RowSource;
        let dir = tmpdir("old");
        let cols = schema::columns(Kind::Http);
        let old = &cols[..cols.len() - schema::OWNER_COLS];
        let mut buf = TxBuf::new(Kind::Http);
        buf.push_record(&http((owner(7, "curl"), owner(42, "nginx"))));
        buf.push_record(&http((None, None)));
        let pdir = crate::layout::partition_path(&dir, Kind::Http, crate::time::hour_of(buf.time_ns(0)));
        std::fs::create_dir_all(&pdir).unwrap();
        crate::encode::write_file(
            &pdir,
            "part",
            &buf,
            &[0, 1],
            &crate::pqfile::Format { cols: old, ..schema::file_format(Kind::Http, 3, 1000).unwrap() },
            &[],
            false,
        )
        .unwrap();
        let empty = (None, String::new(), String::new(), String::new(), None, String::new());
        assert_eq!(owner_columns(&dir), [empty.clone(), empty.clone()]);
        // Mixed with a file that has them, in one compacted file.
        let mut st = crate::Store::open(&dir, crate::StoreOptions { sync: false, ..Default::default() }).unwrap();
        st.append_tx_records(&[http((owner(7, "curl"), None))]).unwrap();
        st.close().unwrap();
        let report = crate::Store::compact_partition(&pdir).unwrap();
        assert!(report.files_merged >= 2, "{report:?}");
        let mut got = owner_columns(&dir);
        got.sort();
        assert_eq!(got.len(), 3);
        assert_eq!(got[2].1, "curl");
        assert_eq!(&got[..2], [empty.clone(), empty]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
