//! Transaction records (from the parsers) to store rows: each protocol's
//! declared columns ([`wirelog_record::columns`]) read from the record, in
//! [`tx_columns`](crate::schema::tx_columns) order.
//!
//! The declarations are read at compile time: [`fill`] is instantiated once
//! per protocol and column, each column's `get` a constant function the
//! compiler inlines, so a record's values go straight into the typed
//! builders (no call through a function pointer, no `Val` matched at run
//! time, one match on the protocol per record).

use wirelog_record::columns::{self, Column, Columns, LogText, Val, EVERY_TX};
use wirelog_record::{Proto, Protocol, TxRecord};

use crate::batch::Kind;
use crate::schema::{self, ColType};
use crate::tx::{Builder, Cell, CellRef, Common, Row, Slot, TxBuf, TxRow};

/// The store kind of a protocol's transactions.
pub fn tx_kind(p: Protocol) -> Kind {
    Kind::tx(p)
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Stored column `i` of a declaration, in [`Columns::stored`]'s order (the
/// protocol's own in the store's order, then [`EVERY_TX`]); `None` past the
/// last. Evaluated at compile time.
const fn stored_at(c: &'static Columns, i: usize) -> Option<&'static Column> {
    let mut own = 0;
    if c.store_order.is_empty() {
        let mut j = 0;
        while j < c.columns.len() {
            if c.columns[j].store.is_some() {
                if own == i {
                    return Some(&c.columns[j]);
                }
                own += 1;
            }
            j += 1;
        }
    } else {
        if i < c.store_order.len() {
            let mut j = 0;
            while j < c.columns.len() {
                if c.columns[j].store.is_some() && str_eq(c.columns[j].name, c.store_order[i]) {
                    return Some(&c.columns[j]);
                }
                j += 1;
            }
            panic!("store_order names a column that is not stored");
        }
        own = c.store_order.len();
    }
    if i - own < EVERY_TX.len() {
        Some(&EVERY_TX[i - own])
    } else {
        None
    }
}

/// The declaration of protocol `P` ([`Protocol::ALL`]'s index).
const fn decl(p: usize) -> &'static Columns {
    columns::of(Protocol::ALL[p])
}

/// The builder stored column `i` of a declaration is buffered in
/// ([`TxBuf`]'s [`Slot`]: its kind, and how many columns before it have
/// one of that kind). Evaluated at compile time.
const fn slot_at(c: &'static Columns, i: usize) -> Option<Slot> {
    let Some(col) = stored_at(c, i) else { return None };
    let b = Builder::of(schema::held_type(col.ty), schema::declared_dict(col));
    let mut n = 0;
    let mut j = 0;
    while j < i {
        if let Some(o) = stored_at(c, j) {
            if Builder::of(schema::held_type(o.ty), schema::declared_dict(o)) as u8 == b as u8 {
                n += 1;
            }
        }
        j += 1;
    }
    Some((b, n))
}

/// Where a record's own columns go, one value at a time, `col` in
/// [`tx_columns`](crate::schema::tx_columns) order and `slot` its builder
/// (both constants): the write buffer's builders, or a [`TxRow`]'s cells.
pub(crate) trait Cells {
    /// # Safety
    /// Called at most once per column `col` of a record (a buffer's row
    /// takes each builder's room for one value).
    unsafe fn cell(&mut self, col: usize, slot: Slot, c: CellRef<'_>);
}

/// Own column `I` of a record of protocol `P` ([`Protocol::ALL`]'s index),
/// as the store keeps it (a list joined by `,`, a time in whole seconds as
/// their number, an unset flag as false); nothing past the last column.
#[inline(always)]
fn own<const P: usize, const I: usize, S: Cells>(r: &TxRecord, s: &mut S, list: &mut String) {
    let Some((get, ty, unset_when_empty, slot)) = (const {
        match (stored_at(decl(P), I), slot_at(decl(P), I)) {
            (Some(c), Some(slot)) => Some((c.get, schema::held_type(c.ty), c.unset_when_empty, slot)),
            _ => None,
        }
    }) else {
        return;
    };
    let empty_list_unset = const { matches!(decl(P).log_text, LogText::Utf8) };
    let cell = match get(r) {
        Val::Unset => match ty {
            ColType::Str => CellRef::Str(None),
            ColType::Bool => CellRef::Bool(false),
            ColType::DurUs => CellRef::Dur(None),
            _ => CellRef::U64(None),
        },
        Val::Text(t) => CellRef::Str(t.filter(|t| !(unset_when_empty && t.is_empty()))),
        Val::Count(n) => CellRef::U64(n),
        Val::Bool(b) => CellRef::Bool(b.unwrap_or(false)),
        Val::Interval(d) => CellRef::Dur(d),
        Val::TimeSecs(t) => CellRef::U64(t.and_then(|t| u64::try_from(t).ok())),
        Val::List(None) => CellRef::Str(None),
        Val::List(Some(l)) => {
            // An empty list is unset, except where the log tells it apart
            // (Zeek's `(empty)`). A list the record holds joined is taken
            // as it is.
            CellRef::Str((!(l.len == 0 && empty_list_unset)).then(|| l.joined(list)))
        }
    };
    // SAFETY: `fill_protocol` calls `own::<P, I>` once for each column `I`.
    unsafe { s.cell(I, slot, cell) };
}

/// The most stored columns (own and every kind's) a protocol may declare
/// (checked at compile time for each).
const MAX_COLS: usize = 48;

/// Every own column of a record of protocol `P`, each read by its inlined
/// `get`.
fn fill_protocol<const P: usize, S: Cells>(r: &TxRecord, s: &mut S, list: &mut String) {
    const {
        assert!(Protocol::ALL[P] as usize == P, "Protocol::ALL is in declaration order");
        assert!(stored_at(decl(P), MAX_COLS).is_none(), "a protocol stores more than MAX_COLS columns");
    };
    macro_rules! cols {
        ($($i:literal)*) => { $(own::<P, $i, S>(r, s, list);)* };
    }
    cols!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23
          24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47);
}

/// The kind's own columns of a record, in schema order, handed to `s` one at
/// a time (borrowed, so the store copies text once, into its buffer); `list`
/// is scratch for list values. One match on the protocol, then its own
/// instantiation.
pub(crate) fn fill<S: Cells>(r: &TxRecord, s: &mut S, list: &mut String) {
    const { assert!(Protocol::ALL.len() == 13, "one arm per protocol below") };
    match r.protocol as usize {
        0 => fill_protocol::<0, S>(r, s, list),
        1 => fill_protocol::<1, S>(r, s, list),
        2 => fill_protocol::<2, S>(r, s, list),
        3 => fill_protocol::<3, S>(r, s, list),
        4 => fill_protocol::<4, S>(r, s, list),
        5 => fill_protocol::<5, S>(r, s, list),
        6 => fill_protocol::<6, S>(r, s, list),
        7 => fill_protocol::<7, S>(r, s, list),
        8 => fill_protocol::<8, S>(r, s, list),
        9 => fill_protocol::<9, S>(r, s, list),
        10 => fill_protocol::<10, S>(r, s, list),
        11 => fill_protocol::<11, S>(r, s, list),
        12 => fill_protocol::<12, S>(r, s, list),
        _ => unreachable!("Protocol::ALL has 13 entries"),
    }
}

/// A row's own cells.
struct RowCells(Vec<Cell>);

impl Cells for RowCells {
    unsafe fn cell(&mut self, col: usize, _: Slot, c: CellRef<'_>) {
        debug_assert_eq!(col, self.0.len());
        self.0.push(Cell::from(c));
    }
}

impl Cells for Row<'_> {
    #[inline(always)]
    unsafe fn cell(&mut self, _: usize, slot: Slot, c: CellRef<'_>) {
        // SAFETY: the column once (the caller's promise), and each column
        // has a builder of its own (`slot_at` numbers them apart).
        unsafe { self.put(slot, c) };
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
        let mut cells = RowCells(Vec::new());
        fill(r, &mut cells, &mut String::new());
        let extra = cells.0;
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
        let mut list = std::mem::take(&mut self.list);
        let mut row = self.push_common(common(r));
        fill(r, &mut row, &mut list);
        self.list = list;
        self.place_last();
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

    /// The reference the compiled fill must agree with: each stored
    /// column's `get` called through its pointer at run time, its `Val`
    /// turned into a cell (the store's mapping before the fill was
    /// instantiated per protocol).
    fn cells_by_get(r: &TxRecord) -> Vec<Cell> {
        let decl = columns::of(r.protocol);
        decl.stored()
            .iter()
            .zip(schema::tx_columns(tx_kind(r.protocol)))
            .map(|(c, spec)| match (c.get)(r) {
                Val::Unset => match spec.col_type() {
                    ColType::Str => Cell::Str(None),
                    ColType::Bool => Cell::Bool(false),
                    ColType::DurUs => Cell::Dur(None),
                    _ => Cell::U64(None),
                },
                Val::Text(s) => Cell::Str(s.filter(|s| !(c.unset_when_empty && s.is_empty())).map(str::to_string)),
                Val::Count(n) => Cell::U64(n),
                Val::Bool(b) => Cell::Bool(b.unwrap_or(false)),
                Val::Interval(d) => Cell::Dur(d),
                Val::TimeSecs(t) => Cell::U64(t.and_then(|t| u64::try_from(t).ok())),
                Val::List(None) => Cell::Str(None),
                Val::List(Some(l)) => {
                    // The items one by one, as the log takes them.
                    let (mut s, mut buf) = (String::new(), String::new());
                    for i in 0..l.len {
                        if i > 0 {
                            s.push(',');
                        }
                        s.push_str(l.item(i, &mut buf));
                    }
                    Cell::Str((!(l.len == 0 && decl.log_text == LogText::Utf8)).then_some(s))
                }
            })
            .collect()
    }

    /// The compile-time reading of the declarations lists each protocol's
    /// stored columns as `Columns::stored` does, in the same order.
    #[test]
    fn compiled_columns_are_the_declared_ones() {
        fn names<const P: usize>() -> Vec<&'static str> {
            (0..=MAX_COLS).map_while(|i| stored_at(decl(P), i).map(|c| c.name)).collect()
        }
        let compiled = [
            names::<0>(), names::<1>(), names::<2>(), names::<3>(), names::<4>(), names::<5>(), names::<6>(),
            names::<7>(), names::<8>(), names::<9>(), names::<10>(), names::<11>(), names::<12>(),
        ];
        for (p, got) in Protocol::ALL.into_iter().zip(compiled) {
            let want: Vec<&str> = columns::of(p).stored().iter().map(|c| c.name).collect();
            assert_eq!(got, want, "{p:?}");
            let spec: Vec<&str> = schema::tx_columns(tx_kind(p)).iter().map(|c| c.name).collect();
            assert_eq!(got, spec, "{p:?}");
        }
    }

    /// A record of every protocol, empty and (for five of them) filled in:
    /// the compiled fill gives the cells the declared `get`s give, and the
    /// buffer takes them.
    /// The builder each record column is pushed to, chosen at compile time,
    /// is the one the write buffer made for that column from the schema.
    #[test]
    fn compiled_slots_are_the_buffers() {
        for (p, proto) in Protocol::ALL.iter().enumerate() {
            let want = crate::tx::slots(tx_kind(*proto));
            let got: Vec<Slot> = (0..=MAX_COLS).map_while(|i| slot_at(decl(p), i)).collect();
            assert_eq!(got, want, "{proto:?}");
        }
    }

    #[test]
    fn compiled_fill_agrees_with_the_declared_getters() {
        let mut records: Vec<TxRecord> = Protocol::ALL
            .into_iter()
            .map(|p| {
                let d = match p {
                    Protocol::Http => Detail::Http(Default::default()),
                    Protocol::Mysql => Detail::Mysql(Default::default()),
                    Protocol::Pgsql => Detail::Pgsql(Default::default()),
                    Protocol::Redis => Detail::Redis(Default::default()),
                    Protocol::Dns => Detail::Dns(Default::default()),
                    Protocol::Tls => Detail::Tls(Default::default()),
                    Protocol::Memcached => Detail::Memcached(Default::default()),
                    Protocol::Mongodb => Detail::Mongodb(Default::default()),
                    Protocol::Mqtt => Detail::Mqtt(Default::default()),
                    Protocol::Amqp => Detail::Amqp(Default::default()),
                    Protocol::Kafka => Detail::Kafka(Default::default()),
                    Protocol::Cassandra => Detail::Cassandra(Default::default()),
                    Protocol::Grpc => Detail::Grpc(Default::default()),
                };
                rec(p, d)
            })
            .collect();
        records.extend(filled());
        for r in &records {
            let row = TxRow::from_record(r);
            assert_eq!(row.extra, cells_by_get(r), "{:?}", r.protocol);
            crate::tx::check(tx_kind(r.protocol), &row).unwrap();
        }
        // The rows' values are written without a capacity test in room
        // reserved for every per-row vector at once: the room counted never
        // exceeds what each has, through growths and a clear.
        for r in &records {
            let mut buf = TxBuf::new(tx_kind(r.protocol));
            let row = TxRow::from_record(r);
            for n in [1_000usize, 300] {
                buf.clear();
                for i in 0..n {
                    if i % 2 == 0 { buf.push_record(r) } else { buf.push(&row) }
                    assert!(buf.room_is_reserved(), "{:?} row {i}", r.protocol);
                }
                assert_eq!(crate::encode::RowSource::len(&buf), n);
            }
        }
    }

    fn filled() -> Vec<TxRecord> {
        let dns = DnsTx {
            qname: "a.example".into(),
            answers: vec![
                DnsAnswer { name: "a.example".into(), rtype: 1, class: 1, ttl: 60, data: "1.2.3.4".into() },
                DnsAnswer { name: "a.example".into(), rtype: 1, class: 1, ttl: 30, data: "5.6.7.8".into() },
            ]
            .into(),
            ..Default::default()
        };
        let mysql = MysqlTx {
            command: "query",
            query: Some("select 1".into()),
            fingerprint: Some("select ?".into()),
            session: Some(wirelog_record::mysql::MysqlSession { database: Some("".into()), ..Default::default() }.into()),
            num_rows: Some(1),
            error_code: Some(1064),
            ..Default::default()
        };
        vec![
            rec(Protocol::Http, Detail::Http(HttpTx { method: "GET".into(), status_code: 200, ..Default::default() })),
            rec(Protocol::Mysql, Detail::Mysql(mysql)),
            rec(Protocol::Pgsql, Detail::Pgsql(PgsqlTx { kind: "query", ..Default::default() })),
            rec(Protocol::Redis, Detail::Redis(RedisTx { command: "GET".into(), ..Default::default() })),
            rec(Protocol::Dns, Detail::Dns(dns)),
        ]
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
            ]
            .into(),
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

    /// Per row: orig_pid, orig_proc, orig_container, resp_user, resp_pid,
    /// resp_exe.
    type Owners = (Option<u64>, String, String, String, Option<u64>, String);

    fn owner_columns(dir: &std::path::Path) -> Vec<Owners> {
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
