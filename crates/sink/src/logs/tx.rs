//! Transaction logs: `http.log`, `dns.log`, `mysql.log`, `pgsql.log`,
//! `redis.log`, in the same TSV/JSON conventions as conn.log. Field names
//! follow Zeek's logs where Zeek has the field (http.log, dns.log,
//! mysql.log), so `zeek-cut` and existing parsers keep working; the latency
//! and size fields every transaction has come last.
//!
//! Each record's fields are written in order through one [`Line`], which
//! formats every value straight into the output line in either format: one
//! formatter for both formats and all five logs, and no per-record
//! allocation (a busy database makes tens of thousands of records a second).

use std::io;

use wirelog_record::columns::{self, Column, Columns, Item, LogText, Type, Val};
use wirelog_record::{IpAddr16, Protocol, TxRecord, TxStatus, Uid};

use crate::logs::line::{append, Esc, Kept, Room, VALUE_MOST};
use crate::logs::out::TakeLines;

use crate::logs::zeek::{push_prefix, push_u64, write_secs, zeek_close, zeek_header};
use crate::LogFormat;

const COMMON_HEAD: &[(&str, &str)] = &[
    ("ts", "time"),
    ("uid", "string"),
    ("id.orig_h", "addr"),
    ("id.orig_p", "port"),
    ("id.resp_h", "addr"),
    ("id.resp_p", "port"),
];

const COMMON_TAIL: &[(&str, &str)] = &[
    ("status", "string"),
    ("request_bytes", "count"),
    ("response_bytes", "count"),
    ("latency", "interval"),
    ("first_byte_latency", "interval"),
];

/// The log's own fields (between the common head and tail): the logged
/// columns of the protocol's declaration, as (name, Zeek type).
fn own_fields(p: Protocol, policies: &[&str]) -> Vec<(&'static str, &'static str)> {
    columns::of(p).logged_with(policies).map(|c| (c.log.unwrap_or(c.name), c.log_type())).collect()
}

/// The file name of a protocol's log (`http.log`, ...).
pub fn tx_log_name(p: Protocol) -> String {
    format!("{}.log", p.log())
}

/// Formats one record's fields, in order, straight into a line: TSV writes
/// unset fields as `-`, JSON leaves them out (as Zeek's JSON writer does).
/// `JSON` is a constant: each format has its own copy of the code, with no
/// per-field test of which one it is.
pub(crate) struct Line<'a, const JSON: bool> {
    pub(crate) b: &'a mut Vec<u8>,
    pub(crate) names: &'a [&'static str],
    /// Index of the next field.
    pub(crate) i: usize,
    /// A JSON field was written (the next one needs a comma).
    pub(crate) any: bool,
    /// Holds one list item while it is escaped.
    pub(crate) scratch: &'a mut String,
}

impl<'a, const JSON: bool> Line<'a, JSON> {
    /// A new line at the end of `b` (a JSON object opened) with the fields
    /// `names`.
    pub(crate) fn start(b: &'a mut Vec<u8>, names: &'a [&'static str], scratch: &'a mut String) -> Self {
        if JSON {
            b.push(b'{');
        }
        Line { b, names, i: 0, any: false, scratch }
    }

    /// Writes what comes before the next field's value; false if the value
    /// is not to be written (unset: TSV's `-` is written here).
    #[inline(always)]
    pub(crate) fn field(&mut self, set: bool) -> bool {
        let i = self.i;
        self.i += 1;
        if JSON {
            if !set {
                return false;
            }
            if std::mem::replace(&mut self.any, true) {
                self.b.push(b',');
            }
            json_str(self.b, self.names[i]);
            self.b.push(b':');
            return true;
        }
        if i > 0 {
            self.b.push(b'\t');
        }
        if !set {
            self.b.push(b'-');
        }
        set
    }

    #[inline(always)]
    pub(crate) fn time(&mut self, t: i64) {
        if self.field(true) {
            write_secs(self.b, t);
        }
    }

    #[inline(always)]
    pub(crate) fn count(&mut self, n: Option<u64>) {
        if self.field(n.is_some()) {
            push_u64(self.b, n.unwrap_or(0));
        }
    }

    #[inline(always)]
    pub(crate) fn bool(&mut self, x: Option<bool>) {
        if self.field(x.is_some()) {
            self.b
                .extend_from_slice(match (JSON, x == Some(true)) {
                    (true, true) => b"true",
                    (true, false) => b"false",
                    (false, true) => b"T",
                    (false, false) => b"F",
                });
        }
    }

    /// A string with Zeek's ASCII escaping (TSV) or as JSON.
    pub(crate) fn ztext(&mut self, s: Option<&str>) {
        if self.field(s.is_some()) {
            let s = s.unwrap_or("");
            if JSON {
                json_str(self.b, s);
            } else {
                zeek_text(self.b, s, false);
            }
        }
    }

}

/// A field's JSON key as its line writes it (`,"name":`, `{"ts":` for the
/// first), made once per log: padded to a fixed size, copied as one block.
struct Key {
    pad: [u8; KEY_PAD],
    len: usize,
    /// The key when longer than the padded block.
    long: Option<Box<[u8]>>,
}

const KEY_PAD: usize = 48;

impl Key {
    fn new(name: &str, first: bool) -> Key {
        let mut k = vec![if first { b'{' } else { b',' }];
        json_str(&mut k, name);
        k.push(b':');
        let mut pad = [0u8; KEY_PAD];
        let len = k.len();
        if len <= KEY_PAD {
            pad[..len].copy_from_slice(&k);
        }
        Key { pad, len, long: (len > KEY_PAD).then(|| k.into_boxed_slice()) }
    }

    #[inline(always)]
    fn write(&self, room: &mut Room<'_>) {
        match &self.long {
            None => room.put(self.pad, self.len),
            Some(long) => room.slice(long),
        }
    }
}

/// The declaration of protocol `P` ([`Protocol::ALL`]'s index).
const fn decl(p: usize) -> &'static Columns {
    columns::of(Protocol::ALL[p])
}

/// Logged column `i` of a declaration, in the log's order, every policy's
/// column included (`None` past the last). Evaluated at compile time.
const fn logged_at(c: &'static Columns, i: usize) -> Option<&'static Column> {
    let mut n = 0;
    let mut j = 0;
    while j < c.columns.len() {
        if c.columns[j].log.is_some() {
            if n == i {
                return Some(&c.columns[j]);
            }
            n += 1;
        }
        j += 1;
    }
    None
}

/// How many logged columns a declaration has (every policy's).
const fn logged_count(c: &'static Columns) -> usize {
    let mut n = 0;
    let mut j = 0;
    while j < c.columns.len() {
        if c.columns[j].log.is_some() {
            n += 1;
        }
        j += 1;
    }
    n
}

/// The most bytes of fixed-size blocks a line of protocol `P` stores
/// ([`append`]'s budget): every value of the common head, the protocol's
/// logged columns and the common tail at most [`VALUE_MOST`] each, and the
/// line's end.
const fn line_budget(p: usize) -> usize {
    (COMMON_HEAD.len() + logged_count(decl(p)) + COMMON_TAIL.len() + 1) * VALUE_MOST
}

/// The most logged columns a protocol may declare (checked at compile
/// time for each; also the width of [`TxLogWriter`]'s policy mask).
const MAX_LOGGED: usize = 64;

/// The key of a TSV line's value (which has none: a tab).
static NO_KEY: Key = Key { pad: [0; KEY_PAD], len: 0, long: None };

/// Logged column `I` of a record of protocol `P`: its value read by the
/// column's `get`, a constant here (so the call is inlined and the value's
/// kind known where it is written, with no `Val` matched at run time), and
/// written as the log's format and text convention want; a column of a
/// policy not turned on (bit `I` of `on` clear) is skipped; nothing past
/// the last column.
#[inline(always)]
fn own<const P: usize, const I: usize, const JSON: bool>(room: &mut Room<'_>, keys: &[Key], on: u64, r: &TxRecord, scratch: &mut String) {
    let Some((get, item, policy)) = (const {
        match logged_at(decl(P), I) {
            Some(c) => Some((
                c.get,
                match c.ty {
                    Type::List(item) => item,
                    _ => Item::Text,
                },
                c.policy.is_some(),
            )),
            None => None,
        }
    }) else {
        return;
    };
    let esc = const {
        match decl(P).log_text {
            LogText::Utf8 => Esc::Tsv,
            LogText::ZeekAscii => Esc::Zeek,
        }
    };
    if policy && on & (1 << I) == 0 {
        return;
    }
    let k = if JSON {
        match keys.get(I) {
            Some(k) => k,
            None => return,
        }
    } else {
        &NO_KEY
    };
    value::<JSON>(room, k, item, esc, get(r), scratch);
}

/// Every logged column of a record of protocol `P`, each its own inlined
/// code ([`own`]).
#[inline(always)]
fn own_columns<const P: usize, const JSON: bool>(room: &mut Room<'_>, keys: &[Key], on: u64, r: &TxRecord, scratch: &mut String) {
    const {
        assert!(Protocol::ALL[P] as usize == P, "Protocol::ALL is in declaration order");
        assert!(logged_at(decl(P), MAX_LOGGED).is_none(), "a protocol logs more than MAX_LOGGED columns");
    };
    macro_rules! cols {
        ($($i:literal)*) => { $(own::<P, $i, JSON>(room, keys, on, r, scratch);)* };
    }
    cols!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
          32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63);
}

/// What comes before a set value: a tab, or the field's JSON key.
#[inline(always)]
fn key<const JSON: bool>(room: &mut Room<'_>, k: &Key) {
    if JSON {
        k.write(room);
    } else {
        room.byte(b'\t');
    }
}

/// An unset value: `-` after its tab; nothing in JSON (Zeek's JSON writer
/// leaves unset fields out).
#[inline(always)]
fn unset<const JSON: bool>(room: &mut Room<'_>) {
    if !JSON {
        room.put(*b"\t-", 2);
    }
}

/// Text no format escapes (a uid, a status name), quoted in JSON.
#[inline(always)]
fn plain<const JSON: bool, const N: usize>(room: &mut Room<'_>, k: &Key, (b, len): ([u8; N], usize)) {
    key::<JSON>(room, k);
    if JSON {
        room.byte(b'"');
    }
    room.put(b, len);
    if JSON {
        room.byte(b'"');
    }
}

#[inline(always)]
fn addr<const JSON: bool>(room: &mut Room<'_>, k: &Key, a: &IpAddr16, kept: &mut Kept, end: usize) {
    key::<JSON>(room, k);
    if JSON {
        room.byte(b'"');
    }
    room.addr_kept(a, kept, end);
    if JSON {
        room.byte(b'"');
    }
}

#[inline(always)]
fn count<const JSON: bool>(room: &mut Room<'_>, k: &Key, n: Option<u64>) {
    match n {
        // In TSV the tab is stored with the digits.
        Some(n) if !JSON => room.tab_u64(n),
        Some(n) => {
            key::<JSON>(room, k);
            room.u64(n);
        }
        None => unset::<JSON>(room),
    }
}

#[inline(always)]
fn interval<const JSON: bool>(room: &mut Room<'_>, k: &Key, d: Option<i64>) {
    match d {
        Some(d) if !JSON => room.tab_secs(d),
        Some(d) => {
            key::<JSON>(room, k);
            room.secs(d);
        }
        None => unset::<JSON>(room),
    }
}

/// Text as the log's format and text convention want it.
#[inline(always)]
fn text<const JSON: bool>(room: &mut Room<'_>, t: &str, esc: Esc, in_set: bool) {
    if JSON {
        room.json_text(t.as_bytes());
    } else {
        room.tsv_text(t.as_bytes(), esc, in_set);
    }
}

/// A declared column's value, as its protocol's log writes it: text
/// escaped as the log's convention wants (`tsv_text`, `zeek_text`,
/// `json_str`), an unset value `-` in TSV and left out of JSON.
#[inline(always)]
fn value<const JSON: bool>(room: &mut Room<'_>, k: &Key, item: Item, esc: Esc, v: Val<'_>, scratch: &mut String) {
    match v {
        // In TSV the tab is stored with the text.
        Val::Text(Some(s)) if !JSON => room.tab_tsv_text(s.as_bytes(), esc, false),
        Val::Text(Some(s)) => {
            key::<JSON>(room, k);
            text::<JSON>(room, s, esc, false);
        }
        Val::Count(n) => count::<JSON>(room, k, n),
        Val::Bool(Some(b)) => {
            key::<JSON>(room, k);
            match (JSON, b) {
                (true, true) => room.put(*b"true", 4),
                (true, false) => room.put(*b"false", 5),
                (false, true) => room.byte(b'T'),
                (false, false) => room.byte(b'F'),
            }
        }
        Val::Interval(d) => interval::<JSON>(room, k, d),
        Val::TimeSecs(t) => interval::<JSON>(room, k, t.map(|t| t.saturating_mul(1_000_000_000))),
        // An empty list of UTF-8 text is unset in TSV.
        Val::List(Some(l)) if !JSON && l.len == 0 && esc == Esc::Tsv => unset::<JSON>(room),
        // An empty list in JSON (`"params":[]` on most MySQL lines): written
        // here, not by a call (which lends the room: its cursor stored
        // before and loaded after).
        Val::List(Some(l)) if JSON && l.len == 0 => {
            key::<JSON>(room, k);
            room.put(*b"[]", 2);
        }
        Val::List(Some(l)) => vector::<JSON>(room, k, item, esc, l, scratch),
        Val::Unset | Val::Text(None) | Val::Bool(None) | Val::List(None) => unset::<JSON>(room),
    }
}

/// A Zeek vector: when empty `-` in TSV with UTF-8 text, `(empty)` with
/// Zeek's ASCII text, `[]` in JSON; items separated by `,` (escaped inside
/// text items), numbers unquoted in JSON, text escaped and quoted; whole
/// seconds as Zeek writes an interval. Out of line: lists are rare in
/// most logs, and their loop would crowd the line's registers. The room is
/// lent: the line's room is behind a reference already (see `append`), so
/// lending it costs nothing more (a room given by value and back was
/// measured dearer, copied both ways).
#[inline(never)]
fn vector<const JSON: bool>(room: &mut Room<'_>, k: &Key, item: Item, esc: Esc, l: columns::List<'_>, scratch: &mut String) {
    if !JSON && l.len == 0 {
        match esc {
            Esc::Tsv => unset::<JSON>(room),
            Esc::Zeek => {
                key::<JSON>(room, k);
                room.put(*b"(empty)\0", 7);
            }
        }
        return;
    }
    key::<JSON>(room, k);
    if JSON {
        room.byte(b'[');
    }
    for j in 0..l.len {
        // A number is written as digits straight into the line (no
        // escaping needed); text is escaped from where the record holds
        // it, copied into the scratch only when composed.
        if let (columns::Items::Num(f), Item::Count | Item::Secs) = (l.items, item) {
            // A list's items are not in the line's budget: each is tested
            // for its blocks (the separator, quotes, digits).
            if !room.ensure(VALUE_MOST) {
                continue;
            }
            if j > 0 {
                room.byte(b',');
            }
            let v = f(l.record, j);
            if item == Item::Count {
                room.u64(v);
            } else {
                if JSON {
                    room.byte(b'"');
                }
                room.u64(v);
                room.lit(if JSON { b".000000\"" } else { b".000000" });
            }
            continue;
        }
        let t = l.item(j, scratch);
        // The item's blocks and the most its text takes (escaped text is
        // tested again as it is written).
        if !room.ensure(t.len().saturating_mul(6).saturating_add(16 + VALUE_MOST)) {
            continue;
        }
        if j > 0 {
            room.byte(b',');
        }
        match item {
            Item::Count => room.slice(t.as_bytes()),
            Item::Secs => {
                // No declared column has seconds as text (TTLs are
                // numbers, above): kept exact, not fast.
                let secs = format!("{t}.000000");
                text::<JSON>(room, &secs, esc, true);
            }
            Item::Text => text::<JSON>(room, t, esc, true),
        }
    }
    if JSON {
        room.byte(b']');
    }
}

/// The head of a line after its time (uid, addresses and ports, with their
/// tabs or JSON keys) as the line writes it, kept for the connections of the
/// last lines: a busy server's transactions come from a few connections,
/// each line repeating its connection's head, which is then copied as two
/// blocks instead of composed again (five values, two addresses' and two
/// ports' digits).
#[derive(Clone, Copy)]
struct Head {
    uid: Uid,
    orig_h: IpAddr16,
    resp_h: IpAddr16,
    ports: [u16; 2],
    text: [[u8; 64]; 2],
    len: usize,
}

/// How many connections' heads a writer keeps (a slot per uid, chosen by
/// two of its characters, which are random).
const HEAD_SLOTS: usize = 32;

impl Head {
    #[inline(always)]
    fn slot(r: &TxRecord) -> usize {
        let (b, _) = r.uid.padded();
        (usize::from(b[1]) * 31 + usize::from(b[2])) % HEAD_SLOTS
    }

    /// Whether this is the head of `r`'s lines: the same uid and the same
    /// ends (the whole key of the text, so that a uid seen again with
    /// other ends never takes another connection's text).
    #[inline(always)]
    fn is_of(&self, r: &TxRecord) -> bool {
        self.uid == r.uid && self.orig_h == r.orig_h && self.resp_h == r.resp_h && self.ports == [r.orig_p, r.resp_p]
    }

    #[inline(always)]
    fn write(&self, room: &mut Room<'_>) {
        room.put(self.text[0], self.len.min(64));
        if self.len > 64 {
            room.put(self.text[1], self.len - 64);
        }
    }
}

/// The head of `r`'s line composed (not kept, or another connection's in
/// its slot), then kept in `slot` when it fits. Out of line: composed a
/// few times per connection; the room is lent, as to [`vector`].
#[inline(never)]
fn new_head<const JSON: bool>(room: &mut Room<'_>, keys: &[Key], r: &TxRecord, kept: &mut Kept, slot: &mut Option<Head>) {
    let start = room.len();
    plain::<JSON, 18>(room, &keys[1], r.uid.padded());
    addr::<JSON>(room, &keys[2], &r.orig_h, kept, 0);
    count::<JSON>(room, &keys[3], Some(u64::from(r.orig_p)));
    addr::<JSON>(room, &keys[4], &r.resp_h, kept, 1);
    count::<JSON>(room, &keys[5], Some(u64::from(r.resp_p)));
    *slot = match room.written_since(start) {
        Some(t) if t.len() <= 128 => {
            let mut text = [[0u8; 64]; 2];
            let (a, b) = t.split_at(t.len().min(64));
            text[0][..a.len()].copy_from_slice(a);
            text[1][..b.len()].copy_from_slice(b);
            Some(Head { uid: r.uid, orig_h: r.orig_h, resp_h: r.resp_h, ports: [r.orig_p, r.resp_p], text, len: t.len() })
        }
        // Longer (IPv6 addresses in JSON), or not written whole: composed
        // each time.
        _ => None,
    };
}

/// The padded bytes of each status name.
const fn status_pad(s: TxStatus) -> ([u8; 16], usize) {
    let name = s.as_str().as_bytes();
    let mut pad = [0u8; 16];
    let mut i = 0;
    while i < name.len() {
        pad[i] = name[i];
        i += 1;
    }
    (pad, name.len())
}

const STATUS_PADS: [([u8; 16], usize); 5] = [
    status_pad(TxStatus::Ok),
    status_pad(TxStatus::Error),
    status_pad(TxStatus::NoResponse),
    status_pad(TxStatus::NoRequest),
    status_pad(TxStatus::Partial),
];

#[inline(always)]
fn status_padded(s: TxStatus) -> ([u8; 16], usize) {
    match s {
        TxStatus::Ok => STATUS_PADS[0],
        TxStatus::Error => STATUS_PADS[1],
        TxStatus::NoResponse => STATUS_PADS[2],
        TxStatus::NoRequest => STATUS_PADS[3],
        TxStatus::Partial => STATUS_PADS[4],
    }
}

/// The line of record `r` of protocol `P` ([`TxLogWriter::fill`]'s, in
/// `append`'s room): a function of its own, not the closure's body, so that
/// the record and the room are arguments (`noalias`) rather than references
/// the closure captured and loads from its environment (measured: 33
/// instructions fewer a mysql_text line, 37 an http line).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn line_of<const P: usize, const JSON: bool>(
    room: &mut Room<'_>,
    r: &TxRecord,
    head: &[Key],
    tail: &[Key],
    keys: &[Key],
    on: u64,
    scratch: &mut String,
    kept: &mut Kept,
    heads: &mut [Option<Head>; HEAD_SLOTS],
    extras: bool,
) {
    let tx = &r.tx;
    if JSON {
        head[0].write(room);
    }
    room.time(tx.ts_ns(), kept);
    let slot = &mut heads[Head::slot(r)];
    match slot {
        Some(h) if h.is_of(r) => h.write(room),
        _ => new_head::<JSON>(room, head, r, kept, slot),
    }
    own_columns::<P, JSON>(room, keys, on, r, scratch);
    plain::<JSON, 16>(room, &tail[0], status_padded(tx.status));
    count::<JSON>(room, &tail[1], tx.request.map(|s| s.bytes));
    count::<JSON>(room, &tail[2], tx.response.map(|s| s.bytes));
    match (tx.latency_ns(), tx.first_byte_latency_ns()) {
        // A response in one message (most): one interval's text composed,
        // written twice.
        (Some(last), Some(first)) if !JSON && last == first => room.tab_secs_twice(last),
        (last, first) => {
            interval::<JSON>(room, &tail[3], last);
            interval::<JSON>(room, &tail[4], first);
        }
    }
    if !extras {
        room.end_line::<JSON>();
    }
}

/// Writes the transactions of one protocol as they come.
pub struct TxLogWriter<W: TakeLines> {
    out: W,
    format: LogFormat,
    protocol: Protocol,
    header_written: bool,
    line: Vec<u8>,
    /// One list item's text (see [`Line::list`]), kept between records.
    scratch: String,
    rows: u64,
    /// The JSON keys of the common head's fields and of the tail's.
    head: Vec<Key>,
    tail: Vec<Key>,
    /// The process columns (capture --processes) follow Zeek's.
    processes: bool,
    /// The `source` column (capture --tls-plaintext) comes last.
    sources: bool,
    /// The `sample_weight` column (capture --cpu-budget) after it.
    weights: bool,
    /// The JSON keys of the protocol's logged columns (every policy's), in
    /// the log's order; bit `i` of `on`: logged column `i` is written (its
    /// policy is on, or it has none).
    keys: Vec<Key>,
    on: u64,
    /// The logged columns' names and Zeek types, for the header.
    own: Vec<(&'static str, &'static str)>,
    /// The last line's second and addresses as text.
    kept: Kept,
    /// The heads of the last connections' lines.
    heads: Box<[Option<Head>; HEAD_SLOTS]>,
    /// The line writer of this log's protocol and format ([`Self::fill`]).
    fill: fn(&mut Self, &TxRecord) -> bool,
}

impl<W: TakeLines> TxLogWriter<W> {
    pub fn new(out: W, format: LogFormat, protocol: Protocol) -> Self {
        Self::with_policies(out, format, protocol, &[])
    }

    /// With the columns of the Zeek policies `policies` (`--zeek-policy`).
    pub fn with_policies(out: W, format: LogFormat, protocol: Protocol, policies: &[&str]) -> Self {
        let decl = columns::of(protocol);
        let keys = decl.logged().map(|c| Key::new(c.log.unwrap_or(c.name), false)).collect();
        let on = decl
            .logged()
            .enumerate()
            .filter(|(_, c)| c.policy.is_none_or(|p| policies.contains(&p)))
            .fold(0u64, |m, (i, _)| m | 1u64.checked_shl(i as u32).unwrap_or(0));
        let head = COMMON_HEAD.iter().enumerate().map(|(i, f)| Key::new(f.0, i == 0)).collect();
        let tail = COMMON_TAIL.iter().map(|f| Key::new(f.0, false)).collect();
        TxLogWriter {
            out,
            format,
            protocol,
            header_written: false,
            line: Vec::with_capacity(LINES_HANDED_AT + LINE_ROOM),
            scratch: String::new(),
            rows: 0,
            head,
            tail,
            processes: false,
            sources: false,
            weights: false,
            keys,
            on,
            own: own_fields(protocol, policies),
            kept: Kept::default(),
            heads: Box::new([None; HEAD_SLOTS]),
            fill: if format == LogFormat::Json { Self::fill_any::<true>(protocol) } else { Self::fill_any::<false>(protocol) },
        }
    }

    /// Adds the process columns (capture --processes) after the log's own.
    pub fn with_processes(mut self, on: bool) -> Self {
        self.processes = on;
        self
    }

    /// Adds the `source` column (capture --tls-plaintext: `packets` or
    /// `tls-library`) after every other.
    pub fn with_sources(mut self, on: bool) -> Self {
        self.sources = on;
        self
    }

    /// Adds the `sample_weight` column (capture --cpu-budget: how many
    /// transactions each line stands for, 1 unless parsing was sampled)
    /// after every other.
    pub fn with_weights(mut self, on: bool) -> Self {
        self.weights = on;
        self
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    fn header(&mut self) -> io::Result<()> {
        // Once per file: the field list is not built again for every line.
        if self.header_written {
            return Ok(());
        }
        let extra = if self.processes { crate::logs::procs::FIELDS } else { &[] };
        let source: &[(&str, &str)] = if self.sources { &[("source", "string")] } else { &[] };
        let w = &wirelog_record::columns::SAMPLE_WEIGHT;
        let weight_field = [(w.name, w.log_type())];
        let weight: &[(&str, &str)] = if self.weights { &weight_field } else { &[] };
        let fields = COMMON_HEAD.iter().chain(&self.own).chain(COMMON_TAIL).chain(extra).chain(source).chain(weight);
        let name = self.protocol.log();
        zeek_header(&mut self.out, self.format, &mut self.header_written, name, fields)
    }

    pub fn write(&mut self, r: &TxRecord) -> io::Result<()> {
        debug_assert_eq!(r.protocol, self.protocol);
        if !self.header_written {
            self.header()?;
        }
        // One copy of the line's code per protocol and format, each with
        // its columns and the format constants: no per-field test of which
        // one it is, no getter called through a pointer.
        let fitted = (self.fill)(self, r);
        if !fitted {
            // Not reached: the second pass has the room the first asked for.
            return Err(io::Error::other(format!("{}.log: a line did not fit in its buffer", self.protocol.log())));
        }
        self.rows += 1;
        // Lines are collected and handed to the output together (whole
        // lines always: a full disk drops whole records), not one call each.
        if self.line.len() >= LINES_HANDED_AT {
            self.hand_over()?;
        }
        Ok(())
    }

    fn hand_over(&mut self) -> io::Result<()> {
        self.out.hand_over(&mut self.line)
    }

    /// The line writer of this log's protocol in format `JSON`.
    fn fill_any<const JSON: bool>(protocol: Protocol) -> fn(&mut Self, &TxRecord) -> bool {
        const { assert!(Protocol::ALL.len() == 13, "one arm per protocol below") };
        match protocol as usize {
            0 => Self::fill::<0, JSON>,
            1 => Self::fill::<1, JSON>,
            2 => Self::fill::<2, JSON>,
            3 => Self::fill::<3, JSON>,
            4 => Self::fill::<4, JSON>,
            5 => Self::fill::<5, JSON>,
            6 => Self::fill::<6, JSON>,
            7 => Self::fill::<7, JSON>,
            8 => Self::fill::<8, JSON>,
            9 => Self::fill::<9, JSON>,
            10 => Self::fill::<10, JSON>,
            11 => Self::fill::<11, JSON>,
            _ => Self::fill::<12, JSON>,
        }
    }

    /// Appends a record of protocol `P` ([`Protocol::ALL`]'s index) to the
    /// collected lines: every value composed in place ([`Room`]); false if
    /// it did not fit (not reached).
    fn fill<const P: usize, const JSON: bool>(&mut self, r: &TxRecord) -> bool {
        let extras = self.processes || self.sources || self.weights;
        let TxLogWriter { line, head, tail, keys, on, scratch, kept, heads, .. } = self;
        let on = *on;
        let (head, tail) = (&head[..COMMON_HEAD.len()], &tail[..COMMON_TAIL.len()]);
        let fitted = append(line, const { line_budget(P) }, |room| {
            line_of::<P, JSON>(room, r, head, tail, keys, on, scratch, kept, heads, extras)
        });
        if extras && fitted {
            self.extras::<JSON>(r);
        }
        fitted
    }

    /// The columns after the log's own and the common tail, when asked for:
    /// processes, source, sample weight; then the line's end.
    #[cold]
    fn extras<const JSON: bool>(&mut self, r: &TxRecord) {
        let json = JSON;
        if self.processes {
            if json {
                crate::logs::procs::json(&mut self.line, &r.orig_proc, &r.resp_proc);
            } else {
                crate::logs::procs::tsv(&mut self.line, &r.orig_proc, &r.resp_proc);
            }
        }
        if self.sources {
            if json {
                self.line.extend_from_slice(b",\"source\":\"");
                self.line.extend_from_slice(r.source.as_str().as_bytes());
                self.line.push(b'"');
            } else {
                self.line.push(b'\t');
                self.line.extend_from_slice(r.source.as_str().as_bytes());
            }
        }
        if self.weights {
            self.line.extend_from_slice(if json { b",\"sample_weight\":" } else { b"\t" });
            push_u64(&mut self.line, u64::from(r.sample_weight));
        }
        self.line
            .extend_from_slice(if json { b"}\n" } else { b"\n" });
    }

    /// The output the lines go to (the lines written so far handed to it).
    pub fn get_mut(&mut self) -> &mut W {
        let _ = self.hand_over();
        &mut self.out
    }

    /// Hands the collected lines to the output and flushes it.
    pub fn flush(&mut self) -> io::Result<()> {
        self.hand_over()?;
        self.out.flush()
    }

    /// Writes the `#close` line (TSV) and flushes.
    pub fn finish(&mut self) -> io::Result<()> {
        self.header()?;
        self.hand_over()?;
        zeek_close(&mut self.out, self.format)
    }
}

/// Bytes of lines a transaction log collects before handing them to its
/// output: a [`crate::LogFile`]'s chunk (64 KiB), which it takes as it is
/// and writes at once; one call per few hundred lines instead of one per
/// line; a tick flushes them.
pub(crate) const LINES_HANDED_AT: usize = 64 << 10;

/// Room kept past [`LINES_HANDED_AT`] for the line that crosses it (a
/// longer line grows the buffer: see [`append`]).
pub(crate) const LINE_ROOM: usize = 16 << 10;

/// The transaction logs as one sink: each protocol's log is created in the
/// log directory at its first transaction (like Zeek, a log with nothing to
/// say is not written).
pub struct TxLogs {
    dir: crate::LogDir,
    processes: bool,
    sources: bool,
    weights: bool,
    /// The Zeek policies turned on (`--zeek-policy`).
    policies: Vec<&'static str>,
    /// validate-certs: fills ssl.log's `validation_status`.
    validator: Option<super::validate::Validator>,
    /// validate-ocsp: fills ssl.log's `ocsp_status`.
    ocsp: Option<super::ocsp::OcspVerifier>,
    writers: Vec<(Protocol, TxLogWriter<crate::LogOut>)>,
}

impl TxLogs {
    /// Removes the transaction logs an earlier run left in `dir`; with
    /// `processes`, lines get the process columns.
    pub fn new(dir: crate::LogDir, processes: bool) -> io::Result<TxLogs> {
        for p in Protocol::ALL {
            dir.remove_stale(&tx_log_name(p))?;
        }
        Ok(TxLogs { dir, processes, sources: false, weights: false, policies: Vec::new(), validator: None, ocsp: None, writers: Vec::new() })
    }

    /// The logs get the fields of these Zeek policies (`--zeek-policy`).
    pub fn with_policies(mut self, policies: &[&'static str]) -> Self {
        self.policies = policies.to_vec();
        self
    }

    /// TLS records get `validation_status` from this validator (Zeek's
    /// validate-certs policy).
    pub fn with_validator(mut self, v: Option<super::validate::Validator>) -> Self {
        self.validator = v;
        self
    }

    /// TLS records get `ocsp_status` from this verifier (Zeek's
    /// validate-ocsp policy).
    pub fn with_ocsp(mut self, v: Option<super::ocsp::OcspVerifier>) -> Self {
        self.ocsp = v;
        self
    }

    /// Lines get the `sample_weight` column (capture --cpu-budget).
    pub fn with_weights(mut self, on: bool) -> Self {
        self.weights = on;
        self
    }

    /// Lines get the `source` column (capture --tls-plaintext).
    pub fn with_sources(mut self, on: bool) -> Self {
        self.sources = on;
        self
    }

    fn writer(&mut self, p: Protocol) -> io::Result<&mut TxLogWriter<crate::LogOut>> {
        let i = match self.writers.iter().position(|(q, _)| *q == p) {
            Some(i) => i,
            None => {
                let out = self.dir.create(&tx_log_name(p))?;
                let w = TxLogWriter::with_policies(out, self.dir.format, p, &self.policies)
                    .with_processes(self.processes)
                    .with_sources(self.sources)
                    .with_weights(self.weights);
                self.writers.push((p, w));
                self.writers.len() - 1
            }
        };
        Ok(&mut self.writers[i].1)
    }

    fn outputs(&self) -> impl Iterator<Item = &crate::LogOut> {
        self.writers.iter().map(|(_, w)| &w.out)
    }
}

impl crate::Sink for TxLogs {
    fn name(&self) -> &str {
        "transaction logs"
    }

    fn write(&mut self, batch: &wirelog_record::Batch) -> io::Result<()> {
        if let Some(v) = &mut self.validator {
            super::validate::fill_batch(v, batch);
        }
        if let Some(v) = &mut self.ocsp {
            super::ocsp::fill_batch(v, batch);
        }
        batch.txs.iter().try_for_each(|t| self.writer(t.protocol)?.write(t))
    }

    fn tick(&mut self, _now: std::time::Instant) -> io::Result<()> {
        self.writers.iter_mut().try_for_each(|(_, w)| w.flush())
    }

    fn space(&self) -> crate::Space {
        crate::logs::out::space(self.outputs())
    }

    fn close(&mut self) -> io::Result<crate::SinkEnd> {
        self.writers.iter_mut().try_for_each(|(_, w)| w.finish())?;
        Ok(crate::logs::out::abandon(self.writers.iter_mut().map(|(_, w)| &mut w.out)))
    }
}

/// Zeek's text escaping for the TLS logs (its ASCII writer): a backslash
/// doubled, bytes outside printable ASCII as `\xNN`, a comma inside a set as
/// `\x2c`; `(empty)` for an empty string, `\x2d` for a lone `-`.
pub(crate) fn zeek_text(b: &mut Vec<u8>, s: &str, in_set: bool) {
    if s.is_empty() {
        b.extend_from_slice(b"(empty)");
        return;
    }
    if s == "-" {
        b.extend_from_slice(b"\\x2d");
        return;
    }
    for &c in s.as_bytes() {
        match c {
            b'\\' => b.extend_from_slice(b"\\\\"),
            b',' if in_set => b.extend_from_slice(b"\\x2c"),
            0x20..=0x7e => b.push(c),
            _ => push_hex_escape(b, c),
        }
    }
}

/// `\xNN`, lower-case hex, as Zeek writes an escaped byte.
fn push_hex_escape(b: &mut Vec<u8>, c: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    b.extend_from_slice(&[b'\\', b'x', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]);
}

/// Bytes [`tsv_text`] escapes anywhere: control bytes (the tab separator
/// among them), DEL and the backslash; one lookup per byte of text.
static TSV_ESCAPED: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 0x20 {
        t[c] = true;
        c += 1;
    }
    t[0x7f] = true;
    t[b'\\' as usize] = true;
    t
};

/// Zeek's ASCII escaping: separators, backslashes and non-printable bytes
/// become `\xNN`, so one record stays one line whatever the traffic held.
pub(crate) fn tsv_text(b: &mut Vec<u8>, s: &str, in_set: bool) {
    let s = s.as_bytes();
    match s {
        [] => return b.extend_from_slice(b"(empty)"),
        [b'-'] => return b.extend_from_slice(b"\\x2d"),
        _ => {}
    }
    // Eight bytes at a time, each word tested and copied as one fixed-size
    // move (text rarely needs escaping); a word that needs some is
    // escaped byte by byte.
    b.reserve(s.len() + 8);
    let mut words = s.chunks_exact(8);
    for w in &mut words {
        let w: &[u8; 8] = w.try_into().unwrap_or(&[0; 8]);
        if tsv_escapes_any(u64::from_le_bytes(*w), in_set) {
            tsv_escape_bytes(b, w, in_set);
        } else {
            b.extend_from_slice(w);
        }
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        // The tail as one word, padded with spaces (which need nothing).
        let w = tail_word(tail);
        if tsv_escapes_any(w, in_set) {
            tsv_escape_bytes(b, tail, in_set);
        } else {
            push_prefix(b, &w.to_le_bytes(), tail.len());
        }
    }
}

/// `t` (1 to 7 bytes) as a little-endian word, the bytes past it spaces:
/// two overlapping loads of 4, 2 or 1 bytes, no loop.
#[inline(always)]
pub(crate) fn tail_word(t: &[u8]) -> u64 {
    const SPACES: u64 = 0x2020_2020_2020_2020;
    let n = t.len();
    let load = |at: usize, w: usize| -> u64 {
        let mut x = [0u8; 8];
        x[..w].copy_from_slice(&t[at..at + w]);
        u64::from_le_bytes(x)
    };
    let v = if n >= 4 {
        load(0, 4) | load(n - 4, 4) << (8 * (n - 4))
    } else if n >= 2 {
        load(0, 2) | load(n - 2, 2) << (8 * (n - 2))
    } else {
        t[0] as u64
    };
    v | SPACES << (8 * n)
}

/// [`tsv_text`]'s escaping of each byte of `w`.
#[cold]
fn tsv_escape_bytes(b: &mut Vec<u8>, w: &[u8], in_set: bool) {
    for &c in w {
        if TSV_ESCAPED[c as usize] || (in_set && c == b',') {
            push_hex_escape(b, c);
        } else {
            b.push(c);
        }
    }
}

/// Whether any of the eight bytes in `w` is one [`tsv_text`] escapes (exact:
/// the classic "has a byte less than n" / "has a zero byte" word tests).
#[inline(always)]
pub(crate) fn tsv_escapes_any(w: u64, in_set: bool) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * n as u64) & !x & HIGH;
    let equal = |v: u8| below(w ^ (ONES * v as u64), 1);
    let set_sep = if in_set { equal(b',') } else { 0 };
    below(w, 0x20) | equal(b'\\') | equal(0x7f) | set_sep != 0
}

/// Whether any of the eight bytes in `w` is one [`json_str`] escapes: a
/// control byte, `"` or `\`.
#[inline(always)]
pub(crate) fn json_escapes_any(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * n as u64) & !x & HIGH;
    let equal = |v: u8| below(w ^ (ONES * v as u64), 1);
    below(w, 0x20) | equal(b'"') | equal(b'\\') != 0
}

pub(crate) fn json_str(b: &mut Vec<u8>, s: &str) {
    // Only ASCII bytes are escaped, so bytes of multi-byte characters (all
    // >= 0x80) are copied as they are; eight bytes are tested and copied at
    // a time, as in [`tsv_text`].
    let s = s.as_bytes();
    b.reserve(s.len() + 10);
    b.push(b'"');
    let mut words = s.chunks_exact(8);
    for w in &mut words {
        let w: &[u8; 8] = w.try_into().unwrap_or(&[0; 8]);
        if json_escapes_any(u64::from_le_bytes(*w)) {
            json_escape_bytes(b, w);
        } else {
            b.extend_from_slice(w);
        }
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        let w = tail_word(tail);
        if json_escapes_any(w) {
            json_escape_bytes(b, tail);
        } else {
            push_prefix(b, &w.to_le_bytes(), tail.len());
        }
    }
    b.push(b'"');
}

/// [`json_str`]'s escaping of each byte of `w`.
#[cold]
fn json_escape_bytes(b: &mut Vec<u8>, w: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &c in w {
        match c {
            b'"' => b.extend_from_slice(b"\\\""),
            b'\\' => b.extend_from_slice(b"\\\\"),
            b'\n' => b.extend_from_slice(b"\\n"),
            b'\r' => b.extend_from_slice(b"\\r"),
            b'\t' => b.extend_from_slice(b"\\t"),
            c if c < 0x20 => b.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]),
            c => b.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_record::dns::{DnsAnswer, DnsTx, Edns};
    use wirelog_record::http::HttpTx;
    use wirelog_record::{Detail, Span, Transaction, TxStatus};
    use wirelog_record::{Proto, UidGenerator};

    fn rec(protocol: Protocol, detail: Detail) -> TxRecord {
        let span = |t: i64, bytes: u64| Span {
            first_ns: t,
            last_ns: t + 10,
            bytes,
        };
        TxRecord {
            uid: UidGenerator::new(1).next_uid(),
            orig_h: IpAddr16::from_v4([10, 0, 0, 1]),
            orig_p: 40000,
            resp_h: IpAddr16::from_v4([10, 0, 0, 2]),
            resp_p: 53,
            transport: Proto::Udp,
            protocol,
            orig_proc: None,
            resp_proc: None,
            source: Default::default(),
            sample_weight: 1,
            tx: Transaction {
                request: Some(span(1_000_000_000, 28)),
                response: Some(span(1_061_782_000, 284)),
                status: TxStatus::Ok,
                detail,
            },
        }
    }

    /// What the writer wrote, its collected lines handed over.
    fn handed<W: TakeLines>(mut w: TxLogWriter<W>) -> W {
        w.flush().unwrap();
        w.out
    }

    /// Lines are collected and handed to the output in whole lines: at a
    /// flush, at the close, and once enough are collected.
    #[test]
    fn lines_reach_the_output_whole_at_flush_and_when_collected() {
        let r = rec(Protocol::Dns, Detail::Dns(Default::default()));
        let mut w = TxLogWriter::new(Vec::new(), LogFormat::Tsv, r.protocol);
        w.write(&r).unwrap();
        let header = w.out.len();
        assert!(header > 0 && w.out.ends_with(b"\n"), "the header goes out at once");
        w.write(&r).unwrap();
        assert_eq!(w.out.len(), header, "one line is collected");
        w.flush().unwrap();
        let one = (w.out.len() - header) / 2;
        assert_eq!(w.out.len(), header + 2 * one);
        // After the flush, nothing collected: lines go out once they fill
        // the collection, all at once.
        let mut m = 0;
        while w.out.len() == header + 2 * one {
            w.write(&r).unwrap();
            m += 1;
        }
        assert!(m * one >= LINES_HANDED_AT && (m - 1) * one < LINES_HANDED_AT, "{m} lines of {one}");
        assert_eq!(w.out.len(), header + (2 + m) * one, "whole lines only");
        w.finish().unwrap();
        assert_eq!(w.out.iter().filter(|&&c| c == b'\n').count(), 8 + 2 + m + 1, "every line, then #close");
    }

    fn json(r: &TxRecord) -> String {
        let mut w = TxLogWriter::new(Vec::new(), LogFormat::Json, r.protocol);
        w.write(r).unwrap();
        String::from_utf8(handed(w)).unwrap()
    }

    #[test]
    fn http_request_and_response_headers_apart() {
        let h = HttpTx {
            method: "GET".into(),
            headers: vec![("content-type".into(), "a/b".into())],
            response_headers: vec![("content-type".into(), "c/d".into())],
            ..Default::default()
        };
        let s = json(&rec(Protocol::Http, Detail::Http(h)));
        assert!(
            s.contains(
                r#""headers":["content-type: a/b"],"response_headers":["content-type: c/d"]"#
            ),
            "{s}"
        );
    }

    #[test]
    fn pgsql_and_redis_columns() {
        let p = wirelog_record::pgsql::PgsqlTx {
            kind: "query",
            query: Some("select * from test".into()),
            command_tag: Some("SELECT 4".into()),
            rows: Some(4),
            num_rows: 4,
            num_fields: Some(3),
            ..Default::default()
        };
        let s = json(&rec(Protocol::Pgsql, Detail::Pgsql(p)));
        for part in [
            r#""kind":"query","query":"select * from test""#,
            r#""command_tag":"SELECT 4","rows":4,"num_fields":3"#,
        ] {
            assert!(s.contains(part), "{part} not in {s}");
        }
        let x = wirelog_record::redis::RedisTx {
            command: "SET".into(),
            key: Some("k".into()),
            args: "k v".into(),
            num_args: 2,
            reply_type: Some("simple"),
            reply: Some("OK".into()),
            ..Default::default()
        };
        let s = json(&rec(Protocol::Redis, Detail::Redis(x)));
        assert!(
            s.contains(
                r#""cmd":"SET","key":"k","args":"k v","num_args":2,"reply_type":"simple","reply":"OK""#
            ),
            "{s}"
        );
    }

    #[test]
    fn dns_answer_names_types_and_edns() {
        let d = DnsTx {
            qname: "ietf.org".into(),
            qtype: 43,
            qclass: 1,
            answers: vec![DnsAnswer {
                name: "ietf.org".into(),
                rtype: 43,
                class: 1,
                ttl: 1800,
                data: "45586 5 2 abc".into(),
            }]
            .into(),
            authority_count: 1,
            edns: Some(Edns {
                udp_size: 4000,
                ext_rcode: 0,
                version: 0,
                dnssec_ok: true,
            }),
            ..Default::default()
        };
        let s = json(&rec(Protocol::Dns, Detail::Dns(d)));
        for part in [
            r#""answer_names":["ietf.org"]"#,
            r#""answer_types":["DS"]"#,
            r#""authority_count":1"#,
            r#""edns_udp_size":4000"#,
            r#""edns_version":0"#,
            r#""edns_do":true"#,
            r#""opcode_name":"query""#,
        ] {
            assert!(s.contains(part), "{part} not in {s}");
        }
    }

    #[test]
    fn escaping_keeps_zeek_conventions() {
        let tsv = |s: &str, in_set: bool| {
            let mut b = Vec::new();
            tsv_text(&mut b, s, in_set);
            String::from_utf8(b).unwrap()
        };
        assert_eq!(tsv("", false), "(empty)");
        assert_eq!(tsv("-", false), "\\x2d");
        assert_eq!(
            tsv("a\tb\\c\nd\u{7f}e,f", false),
            "a\\x09b\\x5cc\\x0ad\\x7fe,f"
        );
        assert_eq!(tsv("a,b\u{e9}", true), "a\\x2cb\u{e9}");
        let json = |s: &str| {
            let mut b = Vec::new();
            json_str(&mut b, s);
            String::from_utf8(b).unwrap()
        };
        assert_eq!(
            json("a\"b\\c\n\r\t\u{1}\u{7f}\u{e9}"),
            "\"a\\\"b\\\\c\\n\\r\\t\\u0001\u{7f}\u{e9}\""
        );
    }

    #[test]
    fn tsv_and_json_lines_of_one_record() {
        let m = wirelog_record::mysql::MysqlTx {
            command: "stmt_execute",
            query: Some("select ?".into()),
            params: ["1", "a,b"].into_iter().collect(),
            num_rows: Some(1),
            ..Default::default()
        };
        let r = rec(Protocol::Mysql, Detail::Mysql(m));
        let mut w = TxLogWriter::new(Vec::new(), LogFormat::Tsv, r.protocol);
        w.write(&r).unwrap();
        let out = String::from_utf8(handed(w)).unwrap();
        let line = out.lines().last().unwrap();
        assert!(line.ends_with("\tstmt_execute\tselect ?\t-\t-\t-\tT\t1\t-\t-\t-\t-\t-\t-\t1,a\\x2cb\tok\t28\t284\t0.061782\t0.061782"), "{line}");
        let s = json(&r);
        assert!(s.starts_with("{\"ts\":1.000000,\"uid\":\""), "{s}");
        assert!(s.ends_with(",\"params\":[\"1\",\"a,b\"],\"status\":\"ok\",\"request_bytes\":28,\"response_bytes\":284,\"latency\":0.061782,\"first_byte_latency\":0.061782}\n"), "{s}");
    }

    /// An empty list (a MySQL query's params) is `[]` in JSON, written in
    /// the line's code, between the values before and after it; `-` in TSV.
    #[test]
    fn an_empty_list_is_brackets_in_json_and_unset_in_tsv() {
        let m = wirelog_record::mysql::MysqlTx { command: "query", query: Some("select 1".into()), ..Default::default() };
        let r = rec(Protocol::Mysql, Detail::Mysql(m));
        let s = json(&r);
        assert!(s.contains(r#""success":true,"params":[],"status":"ok","#), "{s}");
        let mut w = TxLogWriter::new(Vec::new(), LogFormat::Tsv, r.protocol);
        w.write(&r).unwrap();
        let out = String::from_utf8(handed(w)).unwrap();
        assert!(out.lines().last().unwrap().contains("\tT\t-\t-\t-\t-\t-\t-\t-\t-\tok\t"), "{out}");
    }

    /// A line that finds too little room (its budget of blocks, then each
    /// text and list item, tested at a different place for each room size)
    /// is written again and comes out as with ample room, in both formats;
    /// the test build also holds every line to its budget of blocks
    /// (`Room::put`).
    #[test]
    fn a_line_short_of_room_is_written_again_the_same() {
        let long = "select \"a\\b\"\t, 'caf\u{e9}'\n".repeat(60);
        let mysql = wirelog_record::mysql::MysqlTx {
            command: "stmt_execute",
            query: Some(long.as_str().into()),
            params: ["1", "a,b", long.as_str(), "-", ""].into_iter().collect(),
            num_rows: Some(u64::MAX),
            ..Default::default()
        };
        let http = HttpTx {
            method: "GET".into(),
            uri: long.as_str().into(),
            headers: vec![("content-type".into(), long.as_str().into()), ("x".into(), "y".into())],
            response_headers: vec![("content-type".into(), "c/d".into())],
            ..Default::default()
        };
        let dns = DnsTx {
            qname: long.as_str().into(),
            qtype: 1,
            qclass: 1,
            answers: vec![DnsAnswer { name: long.as_str().into(), rtype: 1, class: 1, ttl: 300, data: "10.0.0.9".into() }; 3].into(),
            ..Default::default()
        };
        let mut v6 = rec(Protocol::Dns, Detail::Dns(dns.clone()));
        v6.orig_h = IpAddr16([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xfe]);
        v6.tx.request = Some(Span { first_ns: -1_500_000_000, last_ns: 0, bytes: u64::MAX });
        let records = [
            rec(Protocol::Mysql, Detail::Mysql(mysql)),
            rec(Protocol::Http, Detail::Http(http)),
            rec(Protocol::Dns, Detail::Dns(dns)),
            v6,
        ];
        for format in [LogFormat::Tsv, LogFormat::Json] {
            for r in &records {
                let write = |cap: Option<usize>| {
                    let mut w = TxLogWriter::new(Vec::new(), format, r.protocol);
                    if let Some(cap) = cap {
                        w.line = Vec::with_capacity(cap);
                    }
                    w.write(r).unwrap();
                    w.write(r).unwrap();
                    // The lines (the header's #open time is the clock's).
                    let out = handed(w);
                    out.split_inclusive(|&c| c == b'\n').filter(|l| !l.starts_with(b"#")).flatten().copied().collect::<Vec<u8>>()
                };
                let want = write(None);
                assert_eq!(want.iter().filter(|&&c| c == b'\n').count(), 2);
                let budget = line_budget(r.protocol as usize);
                for cap in (0..4).chain((budget - 3..budget + 12_000).step_by(97)) {
                    assert!(write(Some(cap)) == want, "{:?} {cap}", r.protocol);
                }
            }
        }
    }

    /// The kept heads: lines of many connections (more than the writer
    /// keeps, in an order that evicts them), a uid seen again with other
    /// ends, and IPv6 ends, come out as each record's line written by a new
    /// writer (which composes every head), in both formats.
    #[test]
    fn kept_heads_write_what_composing_writes() {
        let mut uids = UidGenerator::new(7);
        let mut conns: Vec<TxRecord> = (0..3 * HEAD_SLOTS as u8)
            .map(|i| {
                let mut r = rec(Protocol::Dns, Detail::Dns(Default::default()));
                r.uid = uids.next_uid();
                r.orig_h = IpAddr16::from_v4([10, 0, i / 7, i]);
                r.orig_p = 40000 + u16::from(i);
                r
            })
            .collect();
        // The same uid with other ends, each of its ends changed in turn.
        let base = conns[0].clone();
        for change in 0..4 {
            let mut r = base.clone();
            match change {
                0 => r.orig_p += 1,
                1 => r.resp_p += 1,
                2 => r.orig_h = IpAddr16::from_v4([10, 9, 9, 9]),
                _ => r.resp_h = IpAddr16([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]),
            }
            conns.push(r);
        }
        let mut v6 = base.clone();
        v6.uid = uids.next_uid();
        v6.orig_h = IpAddr16([0x20, 1, 0xd, 0xb8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe]);
        v6.resp_h = IpAddr16([0x20, 1, 0xd, 0xb8, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee, 0xfe]);
        conns.push(v6);
        let lines = |w: TxLogWriter<Vec<u8>>| -> Vec<String> {
            String::from_utf8(handed(w)).unwrap().lines().filter(|l| !l.starts_with('#')).map(String::from).collect()
        };
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let order: Vec<usize> = (0..2_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % conns.len() as u64) as usize
            })
            .collect();
        for format in [LogFormat::Tsv, LogFormat::Json] {
            let mut w = TxLogWriter::new(Vec::new(), format, Protocol::Dns);
            for &i in &order {
                w.write(&conns[i]).unwrap();
            }
            let kept = lines(w);
            assert_eq!(kept.len(), order.len());
            for (line, &i) in kept.iter().zip(&order) {
                let mut fresh = TxLogWriter::new(Vec::new(), format, Protocol::Dns);
                fresh.write(&conns[i]).unwrap();
                assert_eq!(line, &lines(fresh)[0], "connection {i}");
            }
        }
    }

    /// capture --tls-plaintext: the `source` column comes last, after the
    /// process columns, in both formats.
    #[test]
    fn the_source_column_comes_last() {
        let mut r = rec(Protocol::Http, Detail::Http(Default::default()));
        r.source = wirelog_record::TxSource::TlsLibrary;
        let mut w = TxLogWriter::new(Vec::new(), LogFormat::Tsv, r.protocol).with_processes(true).with_sources(true);
        w.write(&r).unwrap();
        let out = String::from_utf8(handed(w)).unwrap();
        let fields = out.lines().find(|l| l.starts_with("#fields")).unwrap();
        assert!(fields.ends_with("\tresp_pod\tsource"), "{fields}");
        assert!(out.lines().last().unwrap().ends_with("\t-\ttls-library"), "{out}");
        let mut w = TxLogWriter::new(Vec::new(), LogFormat::Json, r.protocol).with_sources(true);
        w.write(&r).unwrap();
        let out = String::from_utf8(handed(w)).unwrap();
        assert!(out.ends_with(",\"source\":\"tls-library\"}\n"), "{out}");
        // Off: no column.
        let mut w = TxLogWriter::new(Vec::new(), LogFormat::Tsv, r.protocol);
        w.write(&r).unwrap();
        assert!(!String::from_utf8(handed(w)).unwrap().contains("source"));
    }

    /// capture --cpu-budget: the weight of a sampled connection's
    /// transactions, last, in both formats; off, no column.
    #[test]
    fn sample_weight_column_comes_last_when_asked() {
        let mut r = rec(Protocol::Http, Detail::Http(Default::default()));
        r.sample_weight = 8;
        let mut w = TxLogWriter::new(Vec::new(), LogFormat::Tsv, r.protocol).with_sources(true).with_weights(true);
        w.write(&r).unwrap();
        let out = String::from_utf8(handed(w)).unwrap();
        assert!(out.lines().find(|l| l.starts_with("#fields")).unwrap().ends_with("\tsource\tsample_weight"), "{out}");
        assert!(out.lines().find(|l| l.starts_with("#types")).unwrap().ends_with("\tstring\tcount"), "{out}");
        assert!(out.lines().last().unwrap().ends_with("\tpackets\t8"), "{out}");
        let mut w = TxLogWriter::new(Vec::new(), LogFormat::Json, r.protocol).with_weights(true);
        w.write(&r).unwrap();
        assert!(String::from_utf8(handed(w)).unwrap().ends_with(",\"sample_weight\":8}\n"));
        let mut w = TxLogWriter::new(Vec::new(), LogFormat::Tsv, r.protocol);
        w.write(&r).unwrap();
        assert!(!String::from_utf8(handed(w)).unwrap().contains("sample_weight"));
    }

    /// The escaping as it was written before it went a word at a time:
    /// byte by byte, the reference the fast versions are compared with.
    fn tsv_reference(s: &str, in_set: bool) -> Vec<u8> {
        let mut b = Vec::new();
        if s.is_empty() {
            return b"(empty)".to_vec();
        }
        if s == "-" {
            return b"\\x2d".to_vec();
        }
        for &c in s.as_bytes() {
            if TSV_ESCAPED[c as usize] || (in_set && c == b',') {
                push_hex_escape(&mut b, c);
            } else {
                b.push(c);
            }
        }
        b
    }

    fn json_reference(s: &str) -> Vec<u8> {
        let mut b = vec![b'"'];
        for c in s.bytes() {
            match c {
                b'"' => b.extend_from_slice(b"\\\""),
                b'\\' => b.extend_from_slice(b"\\\\"),
                b'\n' => b.extend_from_slice(b"\\n"),
                b'\r' => b.extend_from_slice(b"\\r"),
                b'\t' => b.extend_from_slice(b"\\t"),
                c if c < 0x20 => b.extend_from_slice(format!("\\u{:04x}", c).as_bytes()),
                c => b.push(c),
            }
        }
        b.push(b'"');
        b
    }

    /// Every length from 0 to 40, each position of every byte that needs
    /// escaping (and of multi-byte characters), and random text: the word
    /// at a time escaping writes what the byte-wise reference writes, after
    /// whatever the line held before.
    #[test]
    fn word_escaping_matches_the_bytewise_reference() {
        let check = |s: &str| {
            for in_set in [false, true] {
                let mut b = b"x\t".to_vec();
                tsv_text(&mut b, s, in_set);
                assert_eq!(&b[2..], &tsv_reference(s, in_set)[..], "{s:?} {in_set}");
            }
            let mut b = b"{".to_vec();
            json_str(&mut b, s);
            assert_eq!(&b[1..], &json_reference(s)[..], "{s:?}");
        };
        let specials = ['\t', '\n', '\r', '\\', '"', ',', '-', '\u{1}', '\u{1f}', '\u{7f}', ' ', '~', '\u{e9}', '\u{20ac}'];
        crate::logs::line::escaping_cases(&specials, check);
    }

    #[test]
    fn word_test_agrees_with_the_byte_table() {
        for c in 0..=255u8 {
            for at in 0..8 {
                let mut w = *b"abcdefgh";
                w[at] = c;
                for in_set in [false, true] {
                    let want = TSV_ESCAPED[c as usize] || (in_set && c == b',');
                    assert_eq!(
                        tsv_escapes_any(u64::from_le_bytes(w), in_set),
                        want,
                        "{c:#x} at {at}"
                    );
                }
            }
        }
        let mut b = Vec::new();
        tsv_text(
            &mut b,
            "select * from t where a = 'x\ty' and b in (1,2)",
            true,
        );
        assert_eq!(b, b"select * from t where a = 'x\\x09y' and b in (1\\x2c2)");
    }
}
