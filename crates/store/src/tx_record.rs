//! Transaction records (from the parsers) to store rows: the one place that
//! maps each protocol's fields onto its columns, in
//! [`tx_columns`](crate::schema::tx_columns) order.

use std::fmt::Write;

use wirelog_record::{Detail, Proto, Protocol, TxRecord};

use crate::batch::Kind;
use crate::schema;
use crate::tx::{Cell, CellRef, Common, TxBuf, TxRow};

/// The store kind of a protocol's transactions.
pub fn tx_kind(p: Protocol) -> Kind {
    Kind::tx(p)
}

fn s(v: &str) -> CellRef<'_> {
    CellRef::Str((!v.is_empty()).then_some(v))
}

fn so(v: Option<&str>) -> CellRef<'_> {
    CellRef::Str(v)
}

fn n(v: Option<u64>) -> CellRef<'static> {
    CellRef::U64(v)
}

/// The kind's own columns of a record, in schema order, handed to `f` one at
/// a time (borrowed, so the store copies text once, into its buffer).
fn extra_cells(r: &TxRecord, f: &mut impl FnMut(CellRef<'_>)) {
    let tx = &r.tx;
    match &tx.detail {
        Detail::Http(h) => {
            f(s(&h.method));
            f(s(&h.host));
            f(s(&h.uri));
            f(s(&h.version));
            f(s(&h.user_agent));
            f(n((h.status_code != 0).then_some(h.status_code as u64)));
            f(s(&h.reason));
            f(n(tx.request.map(|_| h.request_body_len)));
            f(n(tx.response.map(|_| h.response_body_len)));
        }
        Detail::Mysql(m) => {
            f(CellRef::Str(Some(m.command)));
            f(so(m.query.as_deref()));
            f(so(m.fingerprint.as_deref()));
            f(so(m.database.as_deref()));
            f(so(m.user.as_deref()));
            f(n(m.affected_rows));
            f(n(m.insert_id));
            f(n(m.num_rows));
            f(n(m.num_fields));
            f(n(m.error_code.map(u64::from)));
            f(so(m.sql_state.as_deref()));
            f(so(m.error_message.as_deref()));
        }
        Detail::Pgsql(p) => {
            f(CellRef::Str(Some(p.kind)));
            f(so(p.query.as_deref()));
            f(so(p.fingerprint.as_deref()));
            f(so(p.database.as_deref()));
            f(so(p.user.as_deref()));
            f(so(p.command_tag.as_deref()));
            f(n(p.rows));
            f(n(p.num_fields.map(u64::from)));
            f(so(p.error_severity.as_deref()));
            f(so(p.error_code.as_deref()));
            f(so(p.error_message.as_deref()));
        }
        Detail::Redis(x) => {
            f(s(&x.command));
            f(s(&x.args));
            f(so(x.reply_type));
            f(so(x.reply.as_deref()));
        }
        Detail::Dns(d) => {
            let answered = tx.response.is_some();
            let mut list = String::new();
            f(s(&d.qname));
            f(n(Some(d.qtype as u64)));
            f(CellRef::Str(Some(d.qtype_name())));
            f(n(Some(d.qclass as u64)));
            f(n(answered.then_some(d.rcode as u64)));
            f(CellRef::Str(answered.then(|| d.rcode_name())));
            f(n(Some(d.id as u64)));
            for (i, a) in d.answers.iter().enumerate() {
                if i > 0 {
                    list.push(',');
                }
                list.push_str(&a.data);
            }
            f(s(&list));
            list.clear();
            for (i, a) in d.answers.iter().enumerate() {
                if i > 0 {
                    list.push(',');
                }
                let _ = write!(list, "{}", a.ttl);
            }
            f(s(&list));
            f(CellRef::Bool(d.aa));
            f(CellRef::Bool(d.tc));
            f(CellRef::Bool(d.rd));
            f(CellRef::Bool(d.ra));
        }
        Detail::Tls(t) => {
            f(so(t.version.as_deref()));
            f(so(t.cipher.as_deref()));
            f(so(t.curve.as_deref()));
            f(so(t.server_name.as_deref()));
            f(CellRef::Bool(t.resumed));
            f(so(t.last_alert.as_deref()));
            f(so(t.next_protocol.as_deref()));
            f(CellRef::Bool(t.established));
            f(s(&t.ssl_history));
            let fps = |v: Option<Vec<&str>>| v.map(|v| v.join(","));
            f(so(fps(t.cert_chain_fps()).as_deref()));
            f(so(fps(t.client_cert_chain_fps()).as_deref()));
            let leaf = t.leaf();
            f(so(leaf.map(|c| c.subject.as_str())));
            f(so(leaf.map(|c| c.issuer.as_str())));
            f(n(leaf.and_then(|c| u64::try_from(c.not_valid_after).ok())));
            f(so(t.ja4.as_deref()));
            f(so(t.ja3.as_deref()));
            f(so(t.ja3s.as_deref()));
            let mut list = String::new();
            for (i, v) in t.client_versions.iter().enumerate() {
                if i > 0 {
                    list.push(',');
                }
                let _ = write!(list, "{v}");
            }
            f(s(&list));
            f(s(&t.client_alpn.join(",")));
        }
    }
}

/// The leading columns of a record.
fn common(r: &TxRecord) -> Common<'_> {
    let tx = &r.tx;
    Common {
        ts_ns: tx.ts_ns(),
        uid: r.uid.as_str(),
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
            uid: c.uid.to_string(),
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
            &schema::parquet_schema_of(Kind::Http, old),
            &schema::writer_properties(Kind::Http, 3, 1000).unwrap(),
            1000,
            Vec::new(),
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
