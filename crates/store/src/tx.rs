//! Application transactions (HTTP, MySQL, PostgreSQL, Redis, DNS): the plain
//! row the protocol parsers hand to the store, and its write buffer.
//!
//! Every transaction kind has the same leading columns (the named fields of
//! [`TxRow`]) followed by its own, given as [`Cell`]s in `extra` in the order
//! of [`tx_columns`](crate::schema::tx_columns).

use wirelog_record::{IpAddr16, Proc};

use crate::batch::Kind;
use crate::dict::{DictNum, DictText};
use crate::encode::RowSource;
use crate::encode::{opt_i32, opt_i64, owner_values, req_bool, req_i64, strings, PqCol, PqValues};
use crate::error::StoreError;
use crate::schema::{self, ColType, OWNER_COLS, TX_COMMON};
use crate::time::NS_PER_US;

/// One value of a transaction kind's own column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    /// An unsigned integer column (`U16` ones must fit 16 bits).
    U64(Option<u64>),
    /// A duration, ns (stored as µs).
    Dur(Option<i64>),
    /// A text column; `None` is stored as null (read back as "").
    Str(Option<String>),
    Bool(bool),
}

/// A [`Cell`] whose text is borrowed: what the store buffers a value from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellRef<'a> {
    U64(Option<u64>),
    Dur(Option<i64>),
    Str(Option<&'a str>),
    Bool(bool),
}

impl Cell {
    pub fn as_ref(&self) -> CellRef<'_> {
        match self {
            Cell::U64(v) => CellRef::U64(*v),
            Cell::Dur(v) => CellRef::Dur(*v),
            Cell::Str(v) => CellRef::Str(v.as_deref()),
            Cell::Bool(v) => CellRef::Bool(*v),
        }
    }
}

impl From<CellRef<'_>> for Cell {
    fn from(c: CellRef<'_>) -> Cell {
        match c {
            CellRef::U64(v) => Cell::U64(v),
            CellRef::Dur(v) => Cell::Dur(v),
            CellRef::Str(v) => Cell::Str(v.map(str::to_string)),
            CellRef::Bool(v) => Cell::Bool(v),
        }
    }
}

/// The leading columns of a row, borrowed (see [`TxRow`]'s fields).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Common<'a> {
    pub ts_ns: i64,
    /// The uid's bytes (ASCII: not checked again as UTF-8 for every row).
    pub uid: &'a [u8],
    pub client: IpAddr16,
    pub client_port: u16,
    pub server: IpAddr16,
    pub server_port: u16,
    pub transport: u8,
    pub status: &'static str,
    pub request_bytes: Option<u64>,
    pub response_bytes: Option<u64>,
    pub latency_ns: Option<i64>,
    pub first_byte_latency_ns: Option<i64>,
    pub sample_weight: u32,
    pub orig_proc: &'a Proc,
    pub resp_proc: &'a Proc,
}

/// One application transaction: a request and its response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxRow {
    /// First request byte (or the response's when there was no request), ns.
    pub ts_ns: i64,
    /// The connection's uid (Zeek style).
    pub uid: String,
    pub client: IpAddr16,
    pub client_port: u16,
    pub server: IpAddr16,
    pub server_port: u16,
    /// IP protocol: 6 or 17.
    pub transport: u8,
    /// "ok" | "error" | "no_response" | "no_request" | "partial".
    pub status: &'static str,
    pub request_bytes: Option<u64>,
    pub response_bytes: Option<u64>,
    /// First request byte to last response byte, ns.
    pub latency_ns: Option<i64>,
    /// First request byte to first response byte, ns.
    pub first_byte_latency_ns: Option<i64>,
    /// How many transactions the row stands for (`capture --cpu-budget`'s
    /// 1-in-N parsing; 1 when every connection was parsed).
    pub sample_weight: u32,
    /// The kind's own columns, in schema order ([`crate::schema::tx_columns`]).
    pub extra: Vec<Cell>,
    /// The process behind each end, when `capture --processes` found it
    /// (the last columns of every transaction kind).
    pub orig_proc: Proc,
    pub resp_proc: Proc,
}

impl TxRow {
    pub(crate) fn common(&self) -> Common<'_> {
        Common {
            ts_ns: self.ts_ns,
            uid: self.uid.as_bytes(),
            client: self.client,
            client_port: self.client_port,
            server: self.server,
            server_port: self.server_port,
            transport: self.transport,
            status: self.status,
            request_bytes: self.request_bytes,
            response_bytes: self.response_bytes,
            latency_ns: self.latency_ns,
            first_byte_latency_ns: self.first_byte_latency_ns,
            sample_weight: self.sample_weight,
            orig_proc: &self.orig_proc,
            resp_proc: &self.resp_proc,
        }
    }
}

/// Checks that `row.extra` fits the kind's own columns.
pub(crate) fn check(kind: Kind, row: &TxRow) -> Result<(), StoreError> {
    let cols = schema::tx_columns(kind);
    let bad = |column: &str, what: String| StoreError::BadRow {
        kind: kind.as_str(),
        column: column.to_string(),
        what,
    };
    if !kind.is_tx() {
        return Err(bad("", "not a transaction kind".into()));
    }
    if row.extra.len() != cols.len() {
        let column = cols.get(row.extra.len()).map_or("", |c| c.name);
        return Err(bad(
            column,
            format!(
                "{} extra cells given, the kind has {} ({})",
                row.extra.len(),
                cols.len(),
                cols.iter().map(|c| c.name).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    for (c, cell) in cols.iter().zip(&row.extra) {
        let ok = match (c.ty, cell) {
            (ColType::U16, Cell::U64(v)) => v.is_none_or(|v| v <= u16::MAX as u64),
            (ColType::U64, Cell::U64(_)) => true,
            (ColType::DurUs, Cell::Dur(_)) | (ColType::Str, Cell::Str(_)) => true,
            (ColType::Bool, Cell::Bool(_)) => true,
            _ => false,
        };
        // Every extra column but the booleans is optional: a `None` fits.
        if !ok {
            let got = match cell {
                Cell::U64(Some(v)) if c.ty == ColType::U16 => format!("U64({v}), out of range"),
                Cell::U64(_) => "a U64 cell".into(),
                Cell::Dur(_) => "a Dur cell".into(),
                Cell::Str(_) => "a Str cell".into(),
                Cell::Bool(_) => "a Bool cell".into(),
            };
            return Err(bad(
                c.name,
                format!("expected a {} cell, got {got}", c.cell_type()),
            ));
        }
    }
    Ok(())
}

/// Strings of one column in one buffer.
#[derive(Default)]
struct Text {
    bytes: Vec<u8>,
    /// End offset of each value in `bytes`.
    ends: Vec<usize>,
    set: Vec<bool>,
}

impl Text {
    fn push(&mut self, s: Option<&[u8]>) {
        if let Some(s) = s {
            self.bytes.extend_from_slice(s);
        }
        self.ends.push(self.bytes.len());
        self.set.push(s.is_some());
    }
    fn get(&self, r: usize) -> Option<&[u8]> {
        let start = if r == 0 { 0 } else { self.ends[r - 1] };
        self.set[r].then(|| &self.bytes[start..self.ends[r]])
    }
    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
        self.set.clear();
    }
}

/// One buffered extra column: a dictionary column is dictionary-encoded
/// as it is buffered ([`crate::dict`]).
enum Extra {
    U64(Vec<Option<u64>>),
    DictU64(DictNum<u64>),
    Dur(Vec<Option<i64>>),
    Str(Text),
    DictStr(DictText),
    Bool(Vec<bool>),
}

impl Extra {
    /// The builder of a kind's own column, from its store declaration.
    fn of(c: &crate::schema::ColSpec) -> Extra {
        match (c.ty, c.is_dictionary()) {
            (ColType::DurUs, _) => Extra::Dur(Vec::new()),
            (ColType::Str, true) => Extra::DictStr(DictText::new(c.optional)),
            (ColType::Str, false) => Extra::Str(Text::default()),
            (ColType::Bool, _) => Extra::Bool(Vec::new()),
            (_, true) => Extra::DictU64(DictNum::new()),
            (_, false) => Extra::U64(Vec::new()),
        }
    }
}

/// The write buffer of one transaction kind.
pub(crate) struct TxBuf {
    kind: Kind,
    ts: Vec<i64>,
    // The dictionary columns of `schema::TX_HEAD` (checked by a test).
    uid: DictText,
    client: DictNum<[u8; 16]>,
    client_port: DictNum<u16>,
    server: DictNum<[u8; 16]>,
    server_port: DictNum<u16>,
    transport: DictNum<u8>,
    status: DictText,
    request_bytes: DictNum<u64>,
    response_bytes: DictNum<u64>,
    latency: Vec<Option<i64>>,
    first_byte_latency: Vec<Option<i64>>,
    sample_weight: DictNum<u64>,
    extra: Vec<Extra>,
    orig_proc: Vec<Proc>,
    resp_proc: Vec<Proc>,
    /// About how many bytes the buffer holds (for `flush_bytes`).
    pub(crate) bytes: usize,
    /// Scratch for a list value being joined (`crate::tx_record::fill`).
    pub(crate) list: String,
}

/// Fixed bytes of a buffered row, without the extra columns' text (an
/// owner is shared, one pointer per end).
const TX_ROW_BYTES: usize = 8 + 16 + 2 + 16 + 2 + 1 + 16 + 4 * 16 + 4 + 2 * 8;

impl TxBuf {
    pub(crate) fn new(kind: Kind) -> TxBuf {
        let extra = schema::tx_columns(kind).iter().map(Extra::of).collect();
        TxBuf {
            kind,
            ts: Vec::new(),
            uid: DictText::new(false),
            client: DictNum::new(),
            client_port: DictNum::new(),
            server: DictNum::new(),
            server_port: DictNum::new(),
            transport: DictNum::new(),
            status: DictText::new(false),
            request_bytes: DictNum::new(),
            response_bytes: DictNum::new(),
            latency: Vec::new(),
            first_byte_latency: Vec::new(),
            sample_weight: DictNum::new(),
            extra,
            orig_proc: Vec::new(),
            resp_proc: Vec::new(),
            bytes: 0,
            list: String::new(),
        }
    }

    /// Buffers a row already [`check`]ed against the kind.
    pub(crate) fn push(&mut self, r: &TxRow) {
        self.push_common(r.common());
        for (i, cell) in r.extra.iter().enumerate() {
            self.push_extra(i, cell.as_ref());
        }
    }

    /// Buffers the leading columns of a row; its extra columns follow, each
    /// with [`TxBuf::push_extra`], so a row can be buffered straight from
    /// borrowed values.
    pub(crate) fn push_common(&mut self, r: Common<'_>) {
        self.ts.push(r.ts_ns);
        self.uid.push(Some(r.uid));
        self.client.push(Some(r.client.0));
        self.client_port.push(Some(r.client_port));
        self.server.push(Some(r.server.0));
        self.server_port.push(Some(r.server_port));
        self.transport.push(Some(r.transport));
        self.status.push(Some(r.status.as_bytes()));
        self.request_bytes.push(r.request_bytes);
        self.response_bytes.push(r.response_bytes);
        self.latency.push(r.latency_ns);
        self.first_byte_latency.push(r.first_byte_latency_ns);
        self.sample_weight.push(Some(u64::from(r.sample_weight)));
        self.orig_proc.push(r.orig_proc.clone());
        self.resp_proc.push(r.resp_proc.clone());
        self.bytes += TX_ROW_BYTES + r.uid.len() + self.extra.len() * 8;
    }

    /// Buffers the value of extra column `col` of the row being pushed; the
    /// cell must fit the column (rows are checked, records map by the schema).
    #[inline(always)]
    pub(crate) fn push_extra(&mut self, col: usize, cell: CellRef<'_>) {
        match (&mut self.extra[col], cell) {
            (Extra::U64(v), CellRef::U64(x)) => v.push(x),
            (Extra::DictU64(v), CellRef::U64(x)) => v.push(x),
            (Extra::Dur(v), CellRef::Dur(x)) => v.push(x),
            (Extra::Str(t), CellRef::Str(x)) => {
                self.bytes += x.map_or(0, str::len);
                t.push(x.map(str::as_bytes));
            }
            (Extra::DictStr(t), CellRef::Str(x)) => {
                // Counted as held text though a repeated value is kept once:
                // the flush size stays what it was.
                self.bytes += x.map_or(0, str::len);
                t.push(x.map(str::as_bytes));
            }
            (Extra::Bool(v), CellRef::Bool(x)) => v.push(x),
            _ => unreachable!("row checked against the kind's columns"),
        }
    }

    pub(crate) fn clear(&mut self) {
        macro_rules! clear { ($($f:ident),*) => { $(self.$f.clear();)* } }
        clear!(
            ts,
            uid,
            client,
            client_port,
            server,
            server_port,
            transport,
            status,
            request_bytes,
            response_bytes,
            latency,
            first_byte_latency,
            sample_weight,
            orig_proc,
            resp_proc
        );
        for c in &mut self.extra {
            match c {
                Extra::U64(v) => v.clear(),
                Extra::DictU64(v) => v.clear(),
                Extra::Dur(v) => v.clear(),
                Extra::Str(t) => t.clear(),
                Extra::DictStr(t) => t.clear(),
                Extra::Bool(v) => v.clear(),
            }
        }
        self.bytes = 0;
    }
}

fn us(ns: i64) -> i64 {
    ns.div_euclid(NS_PER_US)
}

impl RowSource for TxBuf {
    fn kind(&self) -> Kind {
        self.kind
    }
    fn len(&self) -> usize {
        self.ts.len()
    }
    fn time_ns(&self, row: usize) -> i64 {
        self.ts[row]
    }
    fn sort_rows(&self, rows: &mut [u32]) {
        // Stable: equal times keep their arrival order.
        rows.sort_by_key(|&r| self.ts[r as usize]);
    }
    fn values(&self, col: usize, rows: &[u32]) -> PqValues {
        let all = schema::columns(self.kind);
        if col >= all.len() - OWNER_COLS {
            return owner_values(all[col].name, &self.orig_proc, &self.resp_proc, rows);
        }
        if col >= TX_COMMON {
            let spec = &all[col];
            return match &self.extra[col - TX_COMMON] {
                Extra::U64(v) if spec.ty == ColType::U16 => {
                    opt_i32(rows, |r| v[r].map(|x| x as i32))
                }
                Extra::U64(v) => opt_i64(rows, |r| v[r].map(|x| x as i64)),
                Extra::DictU64(v) if spec.ty == ColType::U16 => v.values(rows, true, |x| x as i32, PqCol::I32),
                Extra::DictU64(v) => v.values(rows, true, |x| x as i64, PqCol::I64),
                Extra::Dur(v) => opt_i64(rows, |r| v[r].map(us)),
                Extra::Str(t) => strings(rows, spec.optional, |r| t.get(r)),
                Extra::DictStr(t) => t.values(rows),
                Extra::Bool(v) => req_bool(rows, |r| v[r]),
            };
        }
        match schema::columns(self.kind)[col].name {
            "ts" => req_i64(rows, |r| us(self.ts[r])),
            "uid" => self.uid.values(rows),
            "client" => self.client.values(rows, false, |ip| ip, PqCol::Flba),
            "client_port" => self.client_port.values(rows, false, i32::from, PqCol::I32),
            "server" => self.server.values(rows, false, |ip| ip, PqCol::Flba),
            "server_port" => self.server_port.values(rows, false, i32::from, PqCol::I32),
            "transport" => self.transport.values(rows, false, i32::from, PqCol::I32),
            "status" => self.status.values(rows),
            "request_bytes" => self.request_bytes.values(rows, true, |v| v as i64, PqCol::I64),
            "response_bytes" => self.response_bytes.values(rows, true, |v| v as i64, PqCol::I64),
            "latency" => opt_i64(rows, |r| self.latency[r].map(us)),
            "first_byte_latency" => opt_i64(rows, |r| self.first_byte_latency[r].map(us)),
            "sample_weight" => self.sample_weight.values(rows, true, |v| v as i64, PqCol::I64),
            other => unreachable!("transaction column {other}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The builders follow the schema, itself made from each protocol's
    /// declared columns (`wirelog_record::columns`): one builder per column,
    /// of the column's type, dictionary-encoded exactly where the schema's
    /// column is, so a declared column cannot be left out or written
    /// without its dictionary.
    #[test]
    fn builders_follow_the_schema() {
        let head: Vec<(&str, bool)> =
            schema::columns(Kind::Http)[..TX_COMMON].iter().map(|c| (c.name, c.is_dictionary())).collect();
        // The leading columns' builders are `TxBuf`'s named fields.
        let dict_fields = [
            "uid",
            "client",
            "client_port",
            "server",
            "server_port",
            "transport",
            "status",
            "request_bytes",
            "response_bytes",
            "sample_weight",
        ];
        let plain_fields = ["ts", "latency", "first_byte_latency"];
        assert_eq!(head.len(), dict_fields.len() + plain_fields.len());
        for (name, dict) in head {
            assert_eq!((dict_fields.contains(&name), plain_fields.contains(&name)), (dict, !dict), "{name}");
        }
        for k in Kind::TX {
            let b = TxBuf::new(k);
            let cols = schema::tx_columns(k);
            assert_eq!(b.extra.len(), cols.len(), "{k:?}");
            for (e, c) in b.extra.iter().zip(cols) {
                let int = matches!(c.ty, ColType::U16 | ColType::U64);
                let ok = match e {
                    Extra::U64(_) => int && !c.is_dictionary(),
                    Extra::DictU64(_) => int && c.is_dictionary(),
                    Extra::Dur(_) => c.ty == ColType::DurUs,
                    Extra::Str(_) => c.ty == ColType::Str && !c.is_dictionary(),
                    Extra::DictStr(_) => c.ty == ColType::Str && c.is_dictionary(),
                    Extra::Bool(_) => c.ty == ColType::Bool,
                };
                assert!(ok, "{k:?}: {} ({:?}, dictionary {})", c.name, c.ty, c.is_dictionary());
            }
        }
    }
}
