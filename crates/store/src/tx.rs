//! Application transactions (HTTP, MySQL, PostgreSQL, Redis, DNS): the plain
//! row the protocol parsers hand to the store, and its write buffer.
//!
//! Every transaction kind has the same leading columns (the named fields of
//! [`TxRow`]) followed by its own, given as [`Cell`]s in `extra` in the order
//! of [`tx_columns`](crate::schema::tx_columns).

use wirelog_record::{IpAddr16, Proc};

use crate::batch::Kind;
use crate::dict::{DictNum, DictText};
use crate::encode::{gather, RowSource, Run};
use crate::encode::{null_owner, owner_values, PqCol, PqValues, Pooled};
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

/// The kind of builder an extra column is buffered in: a dictionary
/// column is dictionary-encoded as it is buffered ([`crate::dict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builder {
    U64,
    DictU64,
    Dur,
    Str,
    DictStr,
    Bool,
}

impl Builder {
    /// The builder of a column of type `ty`, a dictionary or not (a const
    /// fn: `crate::tx_record::fill` picks it at compile time).
    pub(crate) const fn of(ty: ColType, dict: bool) -> Builder {
        match (ty, dict) {
            (ColType::DurUs, _) => Builder::Dur,
            (ColType::Str, true) => Builder::DictStr,
            (ColType::Str, false) => Builder::Str,
            (ColType::Bool, _) => Builder::Bool,
            (_, true) => Builder::DictU64,
            (_, false) => Builder::U64,
        }
    }
}

/// Where an extra column is buffered: its builder kind and its index among
/// the buffer's builders of that kind (in column order).
pub(crate) type Slot = (Builder, usize);

/// The slots of a kind's own columns, in [`schema::tx_columns`] order.
pub(crate) fn slots(kind: Kind) -> Vec<Slot> {
    let mut n = [0usize; 6];
    schema::tx_columns(kind)
        .iter()
        .map(|c| {
            let b = Builder::of(c.ty, c.is_dictionary());
            n[b as usize] += 1;
            (b, n[b as usize] - 1)
        })
        .collect()
}

/// A connection's ends, the leading columns that are the same for every row
/// of one uid.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Ends {
    client: [u8; 16],
    server: [u8; 16],
    client_port: u16,
    server_port: u16,
    transport: u8,
}

/// A uid's ends and their indices in the ends' dictionaries (client,
/// client_port, server, server_port, transport), kept by the uid's entry:
/// a row of a uid already seen takes the five indices instead of comparing
/// or hashing five values (the uid is looked up anyway).
#[derive(Clone, Copy)]
struct Conn {
    ends: Ends,
    idx: [u32; 5],
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
    /// By the uid's entry: its connection's ends and their indices.
    conns: Vec<Conn>,
    /// The extra columns' builders, one list per builder kind; `slots`
    /// says which holds each column ([`slots`]). A record's columns are
    /// pushed to theirs through slots known at compile time
    /// (`crate::tx_record::fill`): no match on the column's type per value.
    u64s: Vec<Vec<Option<u64>>>,
    dict_u64s: Vec<DictNum<u64>>,
    durs: Vec<Vec<Option<i64>>>,
    /// Free text (not a declared dictionary) is buffered as a dictionary
    /// too, and written as one when that pays
    /// ([`DictText::free_text_values`]).
    strs: Vec<DictText>,
    dict_strs: Vec<DictText>,
    bools: Vec<Vec<bool>>,
    slots: Vec<Slot>,
    /// The owners of each row's ends: empty while no row buffered has one
    /// (without `capture --processes`, every row), so that such rows cost
    /// neither a push nor, at the flush, a check per row and owner column.
    orig_proc: Vec<Proc>,
    resp_proc: Vec<Proc>,
    /// Rows every per-row vector (`ts`, the builders' rows) has room for,
    /// reserved at once by [`TxBuf::grow`]: each row takes one, so its ~25
    /// values are written without a capacity test each
    /// ([`crate::dict::push_reserved`]).
    room: usize,
    /// About how many bytes the buffer holds (for `flush_bytes`).
    pub(crate) bytes: usize,
    /// Scratch for a list value being joined (`crate::tx_record::fill`).
    pub(crate) list: String,
    /// Whether a late row is moved back among the rows before it, so that
    /// the buffer stays in time order ([`TxBuf::place_last`]); off for a
    /// live view's buffer, whose rows are read in arrival order.
    placing: bool,
    /// Whether the rows are in time order (stably: equal times in arrival
    /// order), so that a file's rows are the buffer's as they lie.
    in_order: bool,
    /// The latest time of a row.
    max_ts: i64,
    /// Rows before this one keep their places: a failed flush published
    /// some of them, by their place ([`TxBuf::pin_rows`]).
    pinned: usize,
}

/// How many rows back a late row is looked for its place among: one later
/// stays where it is, the buffer no longer in time order (the flush then
/// sorts it). mysql_text's 3,899 late rows of 49,202 arrive after 1 row
/// (2,001), 2-15 (1,664), 16-63 (226), 64-255 (8) of a later time (its
/// mysql.log's order); each moved costs its displacement in every column.
const PLACE_ROWS: usize = 256;

/// Fixed bytes of a buffered row, without the extra columns' text (an
/// owner is shared, one pointer per end).
const TX_ROW_BYTES: usize = 8 + 16 + 2 + 16 + 2 + 1 + 16 + 4 * 16 + 4 + 2 * 8;

impl TxBuf {
    pub(crate) fn new(kind: Kind) -> TxBuf {
        let cols = schema::tx_columns(kind);
        let slots = slots(kind);
        let count = |b: Builder| slots.iter().filter(|s| s.0 == b).count();
        let (mut strs, mut dict_strs) = (Vec::new(), Vec::new());
        for (c, s) in cols.iter().zip(&slots) {
            match s.0 {
                Builder::Str => strs.push(DictText::new(c.optional)),
                Builder::DictStr => dict_strs.push(DictText::new(c.optional)),
                _ => {}
            }
        }
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
            conns: Vec::new(),
            u64s: (0..count(Builder::U64)).map(|_| Vec::new()).collect(),
            dict_u64s: (0..count(Builder::DictU64)).map(|_| DictNum::new()).collect(),
            durs: (0..count(Builder::Dur)).map(|_| Vec::new()).collect(),
            strs,
            dict_strs,
            bools: (0..count(Builder::Bool)).map(|_| Vec::new()).collect(),
            slots,
            orig_proc: Vec::new(),
            resp_proc: Vec::new(),
            room: 0,
            bytes: 0,
            list: String::new(),
            placing: true,
            in_order: true,
            max_ts: i64::MIN,
            pinned: 0,
        }
    }

    /// A buffer that keeps its rows in arrival order (no late row moved):
    /// a live view's, read as the rows came.
    pub(crate) fn in_arrival_order(mut self) -> TxBuf {
        self.placing = false;
        self
    }

    /// Keeps the rows buffered so far where they are: a flush that failed
    /// part way published some of them, marked by their place.
    pub(crate) fn pin_rows(&mut self) {
        self.pinned = self.ts.len();
    }

    /// Ends a row: a row later than every other stays last; an earlier one
    /// (a transaction that began before one buffered before it) moves back
    /// to where a stable sort by time puts it, past the rows of a later
    /// time only, so the buffer stays in time order and a file takes its
    /// rows as they lie: each column one block, not gathered row by row
    /// through the sort's order (~370 instructions a mysql_text row, whose
    /// late rows cut the file's order into runs of ~5 buffer rows).
    #[inline(always)]
    pub(crate) fn place_last(&mut self) {
        let last = self.ts.len() - 1;
        let t = self.ts[last];
        if t >= self.max_ts {
            self.max_ts = t;
            return;
        }
        self.place_late(last, t);
    }

    /// [`TxBuf::place_last`] of a row earlier than the latest: moved, in
    /// every per-row vector, after the last row of its time or earlier
    /// among the [`PLACE_ROWS`] before it and after the pinned ones; left
    /// last (and the buffer out of time order) when that place is further.
    /// A row moves past later rows only, so equal times keep their arrival
    /// order: the flush's stable sort gives the same order either way.
    #[inline(never)]
    fn place_late(&mut self, last: usize, t: i64) {
        let lo = if self.placing { self.pinned.max(last.saturating_sub(PLACE_ROWS)) } else { last };
        let mut at = last;
        while at > lo && self.ts[at - 1] > t {
            at -= 1;
        }
        if at > 0 && self.ts[at - 1] > t {
            self.in_order = false;
            return;
        }
        if at == last {
            return;
        }
        use crate::dict::move_last;
        move_last(&mut self.ts, at);
        macro_rules! dicts { ($($f:ident),*) => { $(self.$f.move_last(at);)* } }
        dicts!(uid, client, client_port, server, server_port, transport, status, request_bytes, response_bytes, sample_weight);
        move_last(&mut self.latency, at);
        move_last(&mut self.first_byte_latency, at);
        self.u64s.iter_mut().for_each(|v| move_last(v, at));
        self.dict_u64s.iter_mut().for_each(|d| d.move_last(at));
        self.durs.iter_mut().for_each(|v| move_last(v, at));
        self.strs.iter_mut().for_each(|d| d.move_last(at));
        self.dict_strs.iter_mut().for_each(|d| d.move_last(at));
        self.bools.iter_mut().for_each(|v| move_last(v, at));
        if !self.orig_proc.is_empty() {
            // An owner is an `Arc`: rotated, not copied.
            self.orig_proc[at..].rotate_right(1);
            self.resp_proc[at..].rotate_right(1);
        }
    }

    /// Buffers a row already [`check`]ed against the kind.
    pub(crate) fn push(&mut self, r: &TxRow) {
        let mut row = self.push_common(r.common());
        for (i, cell) in r.extra.iter().enumerate() {
            // Past the kind's last column the index panics, before any write.
            let slot = row.0.slots[i];
            // SAFETY: column `i`'s builder is its own (`slots` numbers each
            // kind's builders apart) and takes this one value of the row.
            unsafe { row.put(slot, cell.as_ref()) };
        }
        self.place_last();
    }

    /// Buffers the leading columns of a row; its extra columns follow, each
    /// with [`Row::put`], so a row can be buffered straight from borrowed
    /// values.
    pub(crate) fn push_common(&mut self, r: Common<'_>) -> Row<'_> {
        if self.room == 0 {
            self.grow();
        }
        self.room -= 1;
        // The row's room was just taken from `room`, which counts the rows
        // every per-row vector has room for: each vector takes one value of
        // the row, unchecked, in the unsafe blocks here.
        let u;
        // SAFETY: see above.
        unsafe {
            crate::dict::push_reserved(&mut self.ts, r.ts_ns);
            u = self.uid.push_row_reserved(Some(r.uid)) as usize;
        }
        let ends = Ends {
            client: r.client.0,
            server: r.server.0,
            client_port: r.client_port,
            server_port: r.server_port,
            transport: r.transport,
        };
        // SAFETY: as above.
        unsafe {
            match self.conns.get(u) {
                Some(c) if c.ends == ends => {
                    let idx = c.idx;
                    self.client.push_index(idx[0]);
                    self.client_port.push_index(idx[1]);
                    self.server.push_index(idx[2]);
                    self.server_port.push_index(idx[3]);
                    self.transport.push_index(idx[4]);
                }
                _ => self.push_ends(u, ends),
            }
        }
        // SAFETY: as above.
        unsafe {
            self.status.push_reserved(Some(r.status.as_bytes()));
            self.request_bytes.push_reserved(r.request_bytes);
            self.response_bytes.push_reserved(r.response_bytes);
            crate::dict::push_reserved(&mut self.latency, r.latency_ns);
            crate::dict::push_reserved(&mut self.first_byte_latency, r.first_byte_latency_ns);
            self.sample_weight.push_reserved(Some(u64::from(r.sample_weight)));
        }
        if r.orig_proc.is_some() || r.resp_proc.is_some() || !self.orig_proc.is_empty() {
            // The first row with an owner: the rows before it have none.
            let before = self.ts.len() - 1;
            self.orig_proc.resize(before, None);
            self.resp_proc.resize(before, None);
            self.orig_proc.push(r.orig_proc.clone());
            self.resp_proc.push(r.resp_proc.clone());
        }
        self.bytes += TX_ROW_BYTES + r.uid.len() + self.slots.len() * 8;
        Row(self)
    }

    /// The ends of a row whose uid (entry `u`) has none kept yet, value by
    /// value; kept for the uid's next rows. A uid seen with other ends (not
    /// expected: a uid is one connection) keeps its first ends and has these
    /// rows pushed value by value.
    ///
    /// # Safety
    /// The row's room is reserved (taken from `room` by [`TxBuf::push_common`]).
    #[inline(never)]
    unsafe fn push_ends(&mut self, u: usize, ends: Ends) {
        // SAFETY: the caller's promise; one value each.
        unsafe {
            self.client.push_reserved(Some(ends.client));
            self.client_port.push_reserved(Some(ends.client_port));
            self.server.push_reserved(Some(ends.server));
            self.server_port.push_reserved(Some(ends.server_port));
            self.transport.push_reserved(Some(ends.transport));
        }
        if u == self.conns.len() {
            let idx = [
                self.client.last_row(),
                self.client_port.last_row(),
                self.server.last_row(),
                self.server_port.last_row(),
                self.transport.last_row(),
            ];
            crate::dict::room(&mut self.conns, 1);
            self.conns.push(Conn { ends, idx });
        }
    }

    /// Room for the rows to come in every per-row vector at once, grown by
    /// `dict::GROWTH` (the buffer is full: `room` is spent; every builder holds
    /// one value a row), so that no push of a row reallocates; `room` set to
    /// the rows they all have room for.
    #[inline(never)]
    fn grow(&mut self) {
        let n = self.ts.len().max(16) * (crate::dict::GROWTH - 1);
        crate::dict::room(&mut self.ts, n);
        macro_rules! dicts { ($($f:ident),*) => { $(self.$f.reserve(n);)* } }
        dicts!(uid, client, client_port, server, server_port, transport, status, request_bytes, response_bytes, sample_weight);
        crate::dict::room(&mut self.latency, n);
        crate::dict::room(&mut self.first_byte_latency, n);
        self.u64s.iter_mut().for_each(|v| crate::dict::room(v, n));
        self.dict_u64s.iter_mut().for_each(|d| d.reserve(n));
        self.durs.iter_mut().for_each(|v| crate::dict::room(v, n));
        self.strs.iter_mut().for_each(|d| d.reserve(n));
        self.dict_strs.iter_mut().for_each(|d| d.reserve(n));
        self.bools.iter_mut().for_each(|v| crate::dict::room(v, n));
        let room = self.spare_rows();
        // The pushes rely on it (`push_common` takes one row of it unchecked).
        assert!(room > 0, "a write buffer grown without room");
        self.room = room;
    }

    /// The rows every per-row vector has room for without growing.
    fn spare_rows(&self) -> usize {
        let spare = |v: usize, c: usize| c - v;
        let mut room = spare(self.ts.len(), self.ts.capacity());
        room = room.min(spare(self.latency.len(), self.latency.capacity()));
        room = room.min(spare(self.first_byte_latency.len(), self.first_byte_latency.capacity()));
        macro_rules! spares { ($($f:ident),*) => { $(room = room.min(self.$f.spare());)* } }
        spares!(uid, client, client_port, server, server_port, transport, status, request_bytes, response_bytes, sample_weight);
        room = self.u64s.iter().fold(room, |r, v| r.min(spare(v.len(), v.capacity())));
        room = self.dict_u64s.iter().fold(room, |r, d| r.min(d.spare()));
        room = self.durs.iter().fold(room, |r, v| r.min(spare(v.len(), v.capacity())));
        room = self.strs.iter().fold(room, |r, d| r.min(d.spare()));
        room = self.dict_strs.iter().fold(room, |r, d| r.min(d.spare()));
        self.bools.iter().fold(room, |r, v| r.min(spare(v.len(), v.capacity())))
    }

    /// Whether the rows `room` counts fit every per-row vector (for tests).
    #[cfg(test)]
    pub(crate) fn room_is_reserved(&self) -> bool {
        self.room <= self.spare_rows()
    }

    /// Buffers a value in the builder `slot`; the cell must fit it. With
    /// `slot` and the cell's variant known at compile time (a record's
    /// columns, `crate::tx_record::fill`) the match below is folded away:
    /// one indexed push, without a capacity test.
    ///
    /// # Safety
    /// A row was begun ([`TxBuf::push_common`]: its room taken) and `slot`
    /// has no value of it yet.
    #[inline(always)]
    unsafe fn put(&mut self, slot: Slot, cell: CellRef<'_>) {
        use crate::dict::push_reserved;
        // SAFETY: the caller's promise: the row's room is reserved in every
        // builder, and this is the row's one value in this one.
        unsafe {
            match (slot.0, cell) {
                (Builder::U64, CellRef::U64(x)) => push_reserved(&mut self.u64s[slot.1], x),
                (Builder::DictU64, CellRef::U64(x)) => self.dict_u64s[slot.1].push_reserved(x),
                (Builder::Dur, CellRef::Dur(x)) => push_reserved(&mut self.durs[slot.1], x),
                (Builder::Str, CellRef::Str(x)) => {
                    self.bytes += x.map_or(0, str::len);
                    self.strs[slot.1].push_free_reserved(x.map(str::as_bytes));
                }
                (Builder::DictStr, CellRef::Str(x)) => {
                    // Counted as held text though a repeated value is kept once:
                    // the flush size stays what it was.
                    self.bytes += x.map_or(0, str::len);
                    self.dict_strs[slot.1].push_reserved(x.map(str::as_bytes));
                }
                (Builder::Bool, CellRef::Bool(x)) => push_reserved(&mut self.bools[slot.1], x),
                _ => unreachable!("row checked against the kind's columns"),
            }
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
            conns,
            orig_proc,
            resp_proc
        );
        self.u64s.iter_mut().for_each(Vec::clear);
        self.dict_u64s.iter_mut().for_each(DictNum::clear);
        self.durs.iter_mut().for_each(Vec::clear);
        self.strs.iter_mut().for_each(DictText::clear);
        self.dict_strs.iter_mut().for_each(DictText::clear);
        self.bools.iter_mut().for_each(Vec::clear);
        // Counted again at the next row (the room is kept, not released).
        self.room = 0;
        self.bytes = 0;
        self.in_order = true;
        self.max_ts = i64::MIN;
        self.pinned = 0;
    }
}

/// A row begun by [`TxBuf::push_common`]: its leading columns buffered and
/// its room taken in every builder; its own columns are put through it.
pub(crate) struct Row<'b>(&'b mut TxBuf);

impl Row<'_> {
    /// Buffers the row's value of the column whose builder is `slot`.
    ///
    /// # Safety
    /// `slot` has no value of this row yet (a row puts each of its columns
    /// once, and each column has a builder of its own).
    #[inline(always)]
    pub(crate) unsafe fn put(&mut self, slot: Slot, cell: CellRef<'_>) {
        // SAFETY: the row was begun (its room taken) by `push_common`, the
        // one maker of a `Row`; `slot` once, the caller's promise.
        unsafe { self.0.put(slot, cell) }
    }
}

/// Sorts `rows` (`0..n` in arrival order) by their time `ts`, stably, as
/// `rows.sort_by_key(|&r| ts[r])` does, for a buffer that is nearly in time
/// order: transactions are buffered as they end, not as they start, so a
/// few rows (~3,900 of mysql_text's 49,202, counted in callgrind's line
/// annotation) come after a later one. One pass keeps the rows that are not
/// before any row already seen (the run), the others
/// (late) are sorted alone, then the two are merged, a run's row first on
/// equal times (it arrived first: a late row came after a run row later
/// than itself, so after every run row of its own time). The stable sort of
/// every row by an indirect key cost ~200 instructions a mysql_text row.
/// The merge moves the run's rows in blocks, not one at a time: each late
/// row (from the last) finds by binary search where it goes among the run's
/// rows still in place, and the run's rows after that place move right in
/// one `copy_within` (mysql_text: ~12 rows a block; the merge row by row
/// compared every row: 2.87 M instructions for the sort, 2.48 M now).
fn sort_nearly_sorted(rows: &mut [u32], ts: &[i64]) {
    let mut late = crate::encode::buf::<u32>(0);
    let mut run = 0;
    let mut max = i64::MIN;
    for i in 0..rows.len() {
        let r = rows[i];
        let t = ts[r as usize];
        if t >= max {
            max = t;
            rows[run] = r;
            run += 1;
        } else {
            late.push(r);
        }
    }
    if late.is_empty() {
        crate::encode::give(late);
        return;
    }
    late.sort_by_key(|&r| ts[r as usize]);
    // Merge from the back: the run's rows move right into the room the
    // late ones leave, none overwritten before it is read. `rows[..i]` are
    // the run's rows not yet moved (in time order), `rows[k..]` the merged.
    let (mut i, mut k) = (run, rows.len());
    for &l in late.iter().rev() {
        let t = ts[l as usize];
        // The late row goes after every run row of its time or earlier.
        let at = rows[..i].partition_point(|&r| ts[r as usize] <= t);
        let moved = i - at;
        rows.copy_within(at..i, k - moved);
        k -= moved + 1;
        rows[k] = l;
        i = at;
    }
    crate::encode::give(late);
}

/// Microseconds of a time or duration in nanoseconds, rounded down. A value
/// not below zero (all but a time before 1970) is divided as unsigned: a
/// multiply and a shift, without `div_euclid`'s sign fix-up (~8 instructions
/// a value, three columns a row).
fn us(ns: i64) -> i64 {
    if ns >= 0 {
        (ns as u64 / NS_PER_US as u64) as i64
    } else {
        ns.div_euclid(NS_PER_US)
    }
}

/// An OPTIONAL column of `rows` from a builder of `Option`s
/// (`encode::optional_in_runs`): the present values as `conv` makes them
/// and a definition level per row.
fn optional_column<T: Copy, U: Pooled>(rows: &[u32], runs: &[Run], src: &[Option<T>], conv: impl Fn(T) -> U, wrap: fn(Vec<U>) -> PqCol) -> PqValues {
    let mut vals = crate::encode::buf(rows.len());
    let mut def = crate::encode::buf(rows.len());
    crate::encode::optional_in_runs(rows, runs, src, |x| x.map(&conv), &mut vals, Some(&mut def));
    PqValues { col: wrap(vals), def: Some(def) }
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
        // Rows in buffer order (as the writer lists them) of a buffer in
        // time order are in file order already.
        if self.in_order && rows.is_sorted() {
            return;
        }
        // Stable: equal times keep their arrival order.
        sort_nearly_sorted(rows, &self.ts);
    }
    fn sorted_by_time(&self) -> bool {
        // `sort_rows` sorts by `ts`, the rows' `time_ns`.
        true
    }
    fn values(&self, col: usize, rows: &[u32]) -> PqValues {
        self.values_in_runs(col, rows, &crate::encode::runs(rows))
    }
    /// Each column copied from its builder a run of rows at a time.
    fn values_in_runs(&self, col: usize, rows: &[u32], runs: &[Run]) -> PqValues {
        let all = schema::columns(self.kind);
        if col >= all.len() - OWNER_COLS {
            if self.orig_proc.is_empty() {
                return null_owner(all[col].name, rows.len());
            }
            return owner_values(all[col].name, &self.orig_proc, &self.resp_proc, rows);
        }
        if col >= TX_COMMON {
            let spec = &all[col];
            let (b, i) = self.slots[col - TX_COMMON];
            return match b {
                Builder::U64 if spec.ty == ColType::U16 => optional_column(rows, runs, &self.u64s[i], |x| x as i32, PqCol::I32),
                Builder::U64 => optional_column(rows, runs, &self.u64s[i], |x| x as i64, PqCol::I64),
                Builder::DictU64 if spec.ty == ColType::U16 => self.dict_u64s[i].values(rows, runs, true, |x| x as i32, PqCol::I32),
                Builder::DictU64 => self.dict_u64s[i].values(rows, runs, true, |x| x as i64, PqCol::I64),
                Builder::Dur => optional_column(rows, runs, &self.durs[i], us, PqCol::I64),
                Builder::Str => self.strs[i].free_text_values(rows, runs),
                Builder::DictStr => self.dict_strs[i].values(rows, runs),
                Builder::Bool => {
                    let mut v = Vec::with_capacity(rows.len());
                    gather(&mut v, runs, &self.bools[i], |x| x);
                    PqValues { col: PqCol::Bool(v), def: None }
                }
            };
        }
        match schema::columns(self.kind)[col].name {
            "ts" => {
                let mut v = crate::encode::buf(rows.len());
                gather(&mut v, runs, &self.ts, us);
                PqValues { col: PqCol::I64(v), def: None }
            }
            "uid" => self.uid.values(rows, runs),
            "client" => self.client.values(rows, runs, false, |ip| ip, PqCol::Flba),
            "client_port" => self.client_port.values(rows, runs, false, i32::from, PqCol::I32),
            "server" => self.server.values(rows, runs, false, |ip| ip, PqCol::Flba),
            "server_port" => self.server_port.values(rows, runs, false, i32::from, PqCol::I32),
            "transport" => self.transport.values(rows, runs, false, i32::from, PqCol::I32),
            "status" => self.status.values(rows, runs),
            "request_bytes" => self.request_bytes.values(rows, runs, true, |v| v as i64, PqCol::I64),
            "response_bytes" => self.response_bytes.values(rows, runs, true, |v| v as i64, PqCol::I64),
            "latency" => optional_column(rows, runs, &self.latency, us, PqCol::I64),
            "first_byte_latency" => optional_column(rows, runs, &self.first_byte_latency, us, PqCol::I64),
            "sample_weight" => self.sample_weight.values(rows, runs, true, |v| v as i64, PqCol::I64),
            other => unreachable!("transaction column {other}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows sorted by time as the stable sort sorts them, for buffers in
    /// order, nearly in order (a few late rows, equal times among them),
    /// reversed, and in no order.
    #[test]
    fn nearly_sorted_sorts_as_the_stable_sort() {
        let mut rnd = crate::test_rng(0x2545_f491_4f6c_dd1du64);
        let mut cases: Vec<Vec<i64>> = vec![vec![], vec![5], vec![3, 3, 3], vec![1, 2, 3, 4], vec![4, 3, 2, 1], vec![2, 1, 2, 1, 2]];
        for n in [10usize, 100, 1000] {
            cases.push((0..n as i64).map(|i| i / 3 - if rnd(20) == 0 { rnd(10) as i64 } else { 0 }).collect());
            cases.push((0..n).map(|_| rnd(8) as i64).collect());
            cases.push((0..n as i64).map(|i| if i == 0 { 1 << 40 } else { i }).collect());
        }
        for ts in cases {
            let mut want: Vec<u32> = (0..ts.len() as u32).collect();
            want.sort_by_key(|&r| ts[r as usize]);
            let mut got: Vec<u32> = (0..ts.len() as u32).collect();
            sort_nearly_sorted(&mut got, &ts);
            assert_eq!(got, want, "{ts:?}");
        }
    }

    /// One column's values as text, to compare two buffers' files.
    fn show(v: &PqValues) -> String {
        fn col(c: &PqCol) -> String {
            match c {
                PqCol::I32(x) => format!("I32{x:?}"),
                PqCol::I64(x) => format!("I64{x:?}"),
                PqCol::Bool(x) => format!("Bool{x:?}"),
                PqCol::Flba(x) => format!("Flba{x:?}"),
                PqCol::Bytes(t) => format!("Bytes{:?}", t.iter().collect::<Vec<_>>()),
                PqCol::Plain(t) => format!("Plain{:?}", t.iter().collect::<Vec<_>>()),
                PqCol::Dict { values, idx } => format!("Dict({}){idx:?}", col(values)),
            }
        }
        format!("{} {:?}", col(&v.col), v.def)
    }

    /// One column's values, a dictionary's looked up: what a reader reads.
    fn read(v: &PqValues) -> String {
        fn each(c: &PqCol) -> Vec<String> {
            match c {
                PqCol::I32(x) => x.iter().map(|v| v.to_string()).collect(),
                PqCol::I64(x) => x.iter().map(|v| v.to_string()).collect(),
                PqCol::Bool(x) => x.iter().map(|v| v.to_string()).collect(),
                PqCol::Flba(x) => x.iter().map(|v| format!("{v:?}")).collect(),
                PqCol::Bytes(t) | PqCol::Plain(t) => t.iter().map(|v| format!("{v:?}")).collect(),
                PqCol::Dict { values, idx } => {
                    let values = each(values);
                    idx.iter().map(|&i| values[i as usize].clone()).collect()
                }
            }
        }
        format!("{:?} {:?}", each(&v.col), v.def)
    }

    /// A buffer that moves its late rows into place writes every column of
    /// a file (all its rows, or the first rows a failed flush published) as
    /// a buffer that keeps its rows in arrival order and sorts them at the
    /// flush: rows in order; late by a few rows, times repeated among them;
    /// some late by more than `PLACE_ROWS` (left last: the flush sorts);
    /// pinned rows (a late row does not move among them); owners rotated.
    #[test]
    fn placed_rows_write_as_the_sorted_arrival_order() {
        let mut rnd = crate::test_rng(0x5851_f42d_4c95_7f2d);
        let owner = |pid: u32| Some(std::sync::Arc::new(wirelog_record::ProcOwner { pid, ..Default::default() }));
        for kind in Kind::TX {
            for case in 0..5 {
                let (mut placed, mut arrival) = (TxBuf::new(kind), TxBuf::new(kind).in_arrival_order());
                let n = 1500u32;
                let first: Vec<u32> = (0..600).collect();
                let mut pinned = Vec::new();
                for i in 0..n {
                    if case == 3 && i == 600 {
                        // As a failed flush.
                        placed.pin_rows();
                        arrival.pin_rows();
                        pinned = (0..TX_COMMON).map(|c| read(&placed.values(c, &first))).collect();
                    }
                    let base = i64::from(i) * 4;
                    let ts = match case {
                        0 => base,
                        2 if i % 97 == 50 => base - 4 * (PLACE_ROWS as i64 + 10),
                        _ if rnd(5) == 0 => base - 4 * rnd(20) as i64 - rnd(2) as i64,
                        _ => base,
                    };
                    let extra = schema::tx_columns(kind)
                        .iter()
                        .map(|c| match c.ty {
                            ColType::Str => Cell::Str((rnd(4) != 0).then(|| format!("v{}", rnd(1 + u64::from(i) % 50)))),
                            ColType::Bool => Cell::Bool(rnd(2) == 0),
                            ColType::DurUs => Cell::Dur((rnd(3) != 0).then(|| rnd(1 << 30) as i64)),
                            ColType::U16 => Cell::U64((rnd(3) != 0).then(|| rnd(65536))),
                            _ => Cell::U64((rnd(3) != 0).then(|| rnd(40))),
                        })
                        .collect();
                    let u = rnd(6) as u8;
                    let row = TxRow {
                        ts_ns: ts,
                        uid: format!("C{u}"),
                        client: IpAddr16::from_v4([10, 0, 0, u]),
                        client_port: 40000 + u16::from(u),
                        server: IpAddr16::from_v4([10, 0, 0, 200]),
                        server_port: 3306,
                        transport: 6,
                        status: if rnd(2) == 0 { "ok" } else { "error" },
                        request_bytes: (rnd(3) != 0).then(|| rnd(100)),
                        response_bytes: Some(rnd(1000)),
                        latency_ns: (rnd(3) != 0).then(|| rnd(1 << 40) as i64),
                        first_byte_latency_ns: Some(rnd(1000) as i64),
                        sample_weight: 1,
                        extra,
                        orig_proc: if case == 4 && i > 100 { owner(i) } else { None },
                        resp_proc: None,
                    };
                    placed.push(&row);
                    arrival.push(&row);
                }
                if case != 3 {
                    // (Pinned, a late row's place may lie among the pinned rows.)
                    assert_eq!(placed.in_order, case != 2, "{kind:?} case {case}");
                }
                let all: Vec<u32> = (0..n).collect();
                let cols = schema::columns(kind).len();
                if case == 3 {
                    // The pinned rows are where they were (the leading
                    // columns: a free-text column's form follows the buffer).
                    for (c, was) in pinned.iter().enumerate() {
                        assert_eq!(&read(&placed.values(c, &first)), was, "{kind:?} column {c}");
                    }
                }
                let (mut rp, mut ra) = (all.clone(), all.clone());
                placed.sort_rows(&mut rp);
                arrival.sort_rows(&mut ra);
                if placed.in_order {
                    assert_eq!(rp, all, "{kind:?} case {case}: in time order as they lie");
                }
                let times = |b: &TxBuf, rows: &[u32]| rows.iter().map(|&r| b.ts[r as usize]).collect::<Vec<_>>();
                assert!(times(&placed, &rp).is_sorted(), "{kind:?} case {case}");
                for c in 0..cols {
                    assert_eq!(show(&placed.values(c, &rp)), show(&arrival.values(c, &ra)), "{kind:?} case {case} column {c}");
                }
            }
        }
    }

    /// Microseconds round down on both sides of zero, as `div_euclid` does.
    #[test]
    fn microseconds_round_down() {
        for ns in [0i64, 1, 999, 1000, 1001, 1_700_000_000_123_456_789, i64::MAX, -1, -999, -1000, -1001, i64::MIN] {
            assert_eq!(us(ns), ns.div_euclid(NS_PER_US), "{ns}");
        }
    }

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
            assert_eq!(b.slots.len(), cols.len(), "{k:?}");
            let mut seen = Vec::new();
            for (&(e, i), c) in b.slots.iter().zip(cols) {
                let int = matches!(c.ty, ColType::U16 | ColType::U64);
                let (ok, builders) = match e {
                    Builder::U64 => (int && !c.is_dictionary(), b.u64s.len()),
                    Builder::DictU64 => (int && c.is_dictionary(), b.dict_u64s.len()),
                    Builder::Dur => (c.ty == ColType::DurUs, b.durs.len()),
                    Builder::Str => (c.ty == ColType::Str && !c.is_dictionary(), b.strs.len()),
                    Builder::DictStr => (c.ty == ColType::Str && c.is_dictionary(), b.dict_strs.len()),
                    Builder::Bool => (c.ty == ColType::Bool, b.bools.len()),
                };
                assert!(ok, "{k:?}: {} ({:?}, dictionary {})", c.name, c.ty, c.is_dictionary());
                // Each column has a builder of its own.
                assert!(i < builders && !seen.contains(&(e, i)), "{k:?}: {} in {e:?} {i}", c.name);
                seen.push((e, i));
            }
            let total = b.u64s.len() + b.dict_u64s.len() + b.durs.len() + b.strs.len() + b.dict_strs.len() + b.bools.len();
            assert_eq!(total, cols.len(), "{k:?}");
        }
    }
}
