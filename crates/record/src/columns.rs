//! A protocol's columns, declared once beside its transaction type
//! (`tx/<proto>.rs`'s `COLUMNS`): each column's name for users (the store's,
//! the query language's, the API's, the UI's and ClickHouse's), its name in
//! the protocol's log (Zeek's where Zeek has the log), what it holds, how the
//! store encodes it, a line of documentation, and how its value is read from
//! a record. The log writer, the store's schema and row encoder, ClickHouse's
//! tables, the query fields and the API derive from these declarations; the
//! columns every transaction has (time, uid, ends, status, sizes, latency) are
//! not declared here but by each of those places once for all protocols,
//! except the sample weight ([`SAMPLE_WEIGHT`]).

use crate::{Protocol, TxRecord};

/// What a column holds. Decides its type in the log (Zeek's type names), in
/// the store (Parquet), in ClickHouse and in the query language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// Text (`string`).
    Text,
    /// Text from a small fixed set (`enum` in the log; text elsewhere).
    Enum,
    /// An unsigned integer of at most `bits` bits (16 or 64): `count`.
    Count { bits: u8, unit: Unit },
    Bool,
    /// A duration in ns: `interval` in the log, microseconds in the store.
    Interval,
    /// A time in whole seconds since the epoch: `time` in the log, the
    /// number of seconds in the store (certificates reach year 9999, past
    /// what a nanosecond time holds).
    TimeSecs,
    /// A list: a vector in the log, its items joined by `,` in the store.
    List(Item),
}

/// How a count is read and shown by queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A plain number (codes, ids, ports).
    Plain,
    /// Bytes (`10k`, `5MB`).
    Bytes,
    /// Rows, fields, keys (`12k`).
    Count,
}

/// What the items of a [`Type::List`] are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// Text (`vector[string]`).
    Text,
    /// Numbers (`vector[count]`, unquoted in JSON).
    Count,
    /// Whole seconds (`vector[interval]`: the log writes `300.000000`, the
    /// store `300`).
    Secs,
}

/// How many distinct values a column takes, which decides the store's
/// encoding and ClickHouse's column type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Card {
    /// Names, codes, states: dictionary-encoded in the store,
    /// `LowCardinality` in ClickHouse.
    Low,
    /// Repeats a lot but has too many values for ClickHouse's
    /// `LowCardinality` (statement fingerprints, DNS names): a dictionary in
    /// the store, a plain `String` in ClickHouse.
    Mid,
    /// Free text, ids and random values: plain.
    High,
}

/// How the protocol's log writes text and empty lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogText {
    /// UTF-8 passes through; control bytes, DEL and `\` as `\xNN`; an empty
    /// list is unset (`-`).
    Utf8,
    /// Zeek's ASCII writer exactly: `\` doubled, every byte outside printable
    /// ASCII as `\xNN`; an empty list is `(empty)` and the store's value `""`.
    ZeekAscii,
}

/// A value read from a record, borrowed from it.
#[derive(Clone, Copy)]
pub enum Val<'a> {
    /// Not set (also what a column reads from another protocol's record).
    Unset,
    Text(Option<&'a str>),
    Count(Option<u64>),
    Bool(Option<bool>),
    /// Nanoseconds.
    Interval(Option<i64>),
    /// Whole seconds since the epoch.
    TimeSecs(Option<i64>),
    /// `None`: unset (the log's `-`); `Some`: the items, maybe none.
    List(Option<List<'a>>),
}

/// The items of a list value, `len` of them, read from `record` by `items`.
#[derive(Clone, Copy)]
pub struct List<'a> {
    pub record: &'a TxRecord,
    pub len: usize,
    pub items: Items<'a>,
}

/// How a list's items are read, so that each consumer (the log line, the
/// store row) takes them without building a string the record already holds
/// or formatting a number through `fmt`.
#[derive(Clone, Copy)]
pub enum Items<'a> {
    /// Item `i` is text the record holds, borrowed.
    Text(for<'r> fn(&'r TxRecord, usize) -> &'r str),
    /// The items are held joined by `,` ([`TextList`]): the store's value
    /// is that text as it is, the log takes each item from it.
    Joined(&'a TextList),
    /// Item `i` is a number (written in decimal).
    Num(fn(&TxRecord, usize) -> u64),
    /// Item `i` is text composed from the record (HTTP's `name: value`, a
    /// distinguished name), written into the buffer given.
    Built(fn(&TxRecord, usize, &mut String)),
}

impl<'a> List<'a> {
    /// Item `i` as text: borrowed from the record, or written into `buf`
    /// (cleared first) when it must be composed.
    pub fn item<'s>(self, i: usize, buf: &'s mut String) -> &'s str
    where
        'a: 's,
    {
        match self.items {
            Items::Text(f) => f(self.record, i),
            Items::Joined(t) => t.get(i),
            Items::Num(f) => {
                buf.clear();
                push_decimal(buf, f(self.record, i));
                buf
            }
            Items::Built(f) => {
                buf.clear();
                f(self.record, i, buf);
                buf
            }
        }
    }

    /// The items joined by `,`, as the store keeps a list: a joined list's
    /// text as it is, the others written into `buf` (cleared first).
    pub fn joined<'s>(self, buf: &'s mut String) -> &'s str
    where
        'a: 's,
    {
        if let Items::Joined(t) = self.items {
            return t.joined();
        }
        buf.clear();
        for i in 0..self.len {
            if i > 0 {
                buf.push(',');
            }
            match self.items {
                Items::Text(f) => buf.push_str(f(self.record, i)),
                Items::Num(f) => push_decimal(buf, f(self.record, i)),
                Items::Built(f) => f(self.record, i, buf),
                Items::Joined(_) => unreachable!("returned above"),
            }
        }
        buf
    }
}

/// `v` in decimal appended to `s`, without `fmt`.
pub fn push_decimal(s: &mut String, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for &d in &digits[at..] {
        s.push(char::from(d));
    }
}

/// `v` in decimal (a `-` before a negative one) appended to `s`.
pub fn push_signed(s: &mut String, v: i64) {
    if v < 0 {
        s.push('-');
    }
    push_decimal(s, v.unsigned_abs());
}

/// A list of texts held in one string, joined by `,` (the store's form of
/// a list, so the store takes it without a copy of each item): one
/// allocation for the text, however many items. Each item's end is kept
/// (a second allocation) only once an item holds a `,`; until then the
/// commas are the ends (a prepared statement's numbers allocate once).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TextList {
    text: String,
    len: usize,
    /// Every item's end, or empty while no item holds a `,`. (Pushes of the
    /// same items give the same ends, so the derived equality holds.)
    ends: Vec<usize>,
}

impl TextList {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Item `i` (`i < len()`).
    pub fn get(&self, i: usize) -> &str {
        assert!(i < self.len, "TextList::get({i}) of {} items", self.len);
        if self.ends.is_empty() {
            return self.text.split(',').nth(i).unwrap_or_default();
        }
        let start = if i == 0 { 0 } else { self.ends[i - 1] + 1 };
        &self.text[start..self.ends[i]]
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        let split = self.ends.is_empty().then(|| self.text.split(',').take(self.len));
        let kept = (!self.ends.is_empty()).then(|| (0..self.len).map(|i| self.get(i)));
        split.into_iter().flatten().chain(kept.into_iter().flatten())
    }

    /// The items joined by `,`.
    pub fn joined(&self) -> &str {
        &self.text
    }

    /// Room for `bytes` more of text, so that a writer that knows about
    /// how long its items are allocates once.
    pub fn reserve_text(&mut self, bytes: usize) {
        self.text.reserve(bytes);
    }

    /// Appends an item written by `write` into the list's text (after the
    /// separator; `write` must only append), cut to at most `max` bytes on
    /// a character boundary; returns its length.
    pub fn push_with(&mut self, max: usize, write: impl FnOnce(&mut String)) -> usize {
        if self.len > 0 {
            self.text.push(',');
        }
        let start = self.text.len();
        write(&mut self.text);
        let mut end = self.text.len().min(start.saturating_add(max));
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        self.text.truncate(end);
        let first_comma = self.ends.is_empty() && self.text.as_bytes()[start..].contains(&b',');
        if first_comma {
            // The first item with a comma: the ends so far are the commas
            // before it.
            self.ends.reserve(self.len + 1);
            let before = &self.text.as_bytes()[..start.saturating_sub(1)];
            self.ends.extend(before.iter().enumerate().filter(|&(_, &b)| b == b',').map(|(at, _)| at));
            if self.len > 0 {
                self.ends.push(start - 1);
            }
        }
        if first_comma || !self.ends.is_empty() {
            self.ends.push(end);
        }
        self.len += 1;
        end - start
    }

    /// Appends `item`.
    pub fn push(&mut self, item: &str) {
        self.push_with(usize::MAX, |s| s.push_str(item));
    }
}

impl<S: AsRef<str>> FromIterator<S> for TextList {
    fn from_iter<I: IntoIterator<Item = S>>(items: I) -> TextList {
        let mut l = TextList::default();
        for s in items {
            l.push(s.as_ref());
        }
        l
    }
}

impl<'a> Val<'a> {
    /// Text, unset when empty.
    pub fn text(s: &'a str) -> Val<'a> {
        Val::Text((!s.is_empty()).then_some(s))
    }

    /// A list of `len` items of `r`, each composed by `item`.
    pub fn list(r: &'a TxRecord, len: usize, item: fn(&TxRecord, usize, &mut String)) -> Val<'a> {
        Val::List(Some(List { record: r, len, items: Items::Built(item) }))
    }

    /// A list of `len` items of `r`, each text `r` holds.
    pub fn texts(r: &'a TxRecord, len: usize, item: for<'r> fn(&'r TxRecord, usize) -> &'r str) -> Val<'a> {
        Val::List(Some(List { record: r, len, items: Items::Text(item) }))
    }

    /// A list of `len` numbers of `r`.
    pub fn nums(r: &'a TxRecord, len: usize, item: fn(&TxRecord, usize) -> u64) -> Val<'a> {
        Val::List(Some(List { record: r, len, items: Items::Num(item) }))
    }

    /// The items of `l`, a list `r` holds joined.
    pub fn joined(r: &'a TxRecord, l: &'a TextList) -> Val<'a> {
        Val::List(Some(List { record: r, len: l.len(), items: Items::Joined(l) }))
    }
}

/// How a column's value is read from a record.
pub type Get = for<'a> fn(&'a TxRecord) -> Val<'a>;

/// One column of a protocol's transactions.
#[derive(Clone, Copy)]
pub struct Column {
    /// The name users see: store, query, API, UI, ClickHouse.
    pub name: &'static str,
    /// Its name in the log (Zeek's where Zeek has the field); `None`: not
    /// in the log.
    pub log: Option<&'static str>,
    pub ty: Type,
    /// `None`: not in the store (nor in queries, the API or ClickHouse).
    pub store: Option<Card>,
    /// Other names the query language accepts (and names earlier store
    /// files used: see [`Columns::renamed`]).
    pub aliases: &'static [&'static str],
    /// Shown in the API's record lists (the UI's tables).
    pub brief: bool,
    /// The store keeps an empty text as unset (the log writes it).
    pub unset_when_empty: bool,
    /// A count whose values fit this many bits though it is stored wider
    /// (kept wide so existing files and tables keep their types): a query
    /// naming a larger number is an error, not a silent miss.
    pub fits_bits: Option<u8>,
    pub doc: &'static str,
    pub get: Get,
    /// Logged only when this Zeek policy is turned on (`--zeek-policy`),
    /// as the Zeek script or option of that name adds the field to the
    /// log; `None`: always logged.
    pub policy: Option<&'static str>,
}

impl Column {
    /// A column in both the log (under the same name) and the store.
    pub const fn new(name: &'static str, ty: Type, card: Card, doc: &'static str, get: Get) -> Column {
        Column { name, log: Some(name), ty, store: Some(card), aliases: &[], brief: false, unset_when_empty: false, fits_bits: None, doc, get, policy: None }
    }

    /// A column only the log has, under the log's name.
    pub const fn log_only(log: &'static str, ty: Type, doc: &'static str, get: Get) -> Column {
        Column { name: log, log: Some(log), ty, store: None, aliases: &[], brief: false, unset_when_empty: false, fits_bits: None, doc, get, policy: None }
    }

    /// Logged only with the Zeek policy `name` turned on (`--zeek-policy`).
    pub const fn policy(mut self, name: &'static str) -> Column {
        self.policy = Some(name);
        self
    }

    /// Its name in the log differs (Zeek's name for the field).
    pub const fn log_as(mut self, log: &'static str) -> Column {
        self.log = Some(log);
        self
    }

    /// Not in the log.
    pub const fn not_logged(mut self) -> Column {
        self.log = None;
        self
    }

    pub const fn aliases(mut self, aliases: &'static [&'static str]) -> Column {
        self.aliases = aliases;
        self
    }

    /// Its values fit `bits` bits although it is stored wider.
    pub const fn fits(mut self, bits: u8) -> Column {
        self.fits_bits = Some(bits);
        self
    }

    /// Shown in the API's record lists.
    pub const fn brief(mut self) -> Column {
        self.brief = true;
        self
    }

    /// The store keeps an empty text as unset.
    pub const fn unset_when_empty(mut self) -> Column {
        self.unset_when_empty = true;
        self
    }

    /// Whether the store may leave it unset: every column but a flag.
    pub fn optional(&self) -> bool {
        self.ty != Type::Bool
    }

    /// Its type as Zeek's logs name it.
    pub fn log_type(&self) -> &'static str {
        match self.ty {
            Type::Text => "string",
            Type::Enum => "enum",
            Type::Count { .. } => "count",
            Type::Bool => "bool",
            Type::Interval => "interval",
            Type::TimeSecs => "time",
            Type::List(Item::Text) => "vector[string]",
            Type::List(Item::Count) => "vector[count]",
            Type::List(Item::Secs) => "vector[interval]",
        }
    }
}

/// A protocol's columns.
pub struct Columns {
    /// In the log's order (Zeek's where Zeek has the log).
    pub columns: &'static [Column],
    /// The store's order, where it differs from the log's: the names of the
    /// stored columns as the store's files and ClickHouse's tables already
    /// have them (ClickHouse inserts by position). Empty: `columns`' order.
    pub store_order: &'static [&'static str],
    /// What queries group by without `--by`.
    pub by: &'static [&'static str],
    /// What tells one kind of request from another (an HTTP path on its
    /// host, a SQL fingerprint): the UI's slowest list groups by it.
    pub shape: &'static [&'static str],
    /// Names stored columns had in earlier files: (old, new). Files with
    /// the old name read it as the new column.
    pub renamed: &'static [(&'static str, &'static str)],
    pub log_text: LogText,
}

impl Columns {
    /// The columns in the log, in its order (every policy's included).
    pub fn logged(&'static self) -> impl Iterator<Item = &'static Column> {
        self.columns.iter().filter(|c| c.log.is_some())
    }

    /// The columns in the log with the Zeek policies `on` turned on.
    pub fn logged_with<'a>(&'static self, on: &'a [&'a str]) -> impl Iterator<Item = &'static Column> + 'a {
        self.logged().filter(move |c| c.policy.is_none_or(|p| on.contains(&p)))
    }

    /// The columns in the store, in its order: the protocol's own, then
    /// those of every transaction kind ([`EVERY_TX`]).
    pub fn stored(&'static self) -> Vec<&'static Column> {
        let own: Vec<&'static Column> = if self.store_order.is_empty() {
            self.columns.iter().filter(|c| c.store.is_some()).collect()
        } else {
            self.store_order
                .iter()
                .filter_map(|n| self.columns.iter().find(|c| c.name == *n && c.store.is_some()))
                .collect()
        };
        own.into_iter().chain(EVERY_TX).collect()
    }

    /// A stored column by name: the protocol's own or one of [`EVERY_TX`].
    pub fn stored_column(&'static self, name: &str) -> Option<&'static Column> {
        self.columns.iter().chain(EVERY_TX).find(|c| c.name == name && c.store.is_some())
    }
}

/// The Zeek policies `--zeek-policy` turns on, each as Zeek names it (a
/// script under `scripts/policy/`, or a base script's option), with what
/// it adds to the logs. A column's [`Column::policy`] names one of them.
pub const ZEEK_POLICIES: &[(&str, &str)] = &[
    ("ssl-log-ext", "policy/protocols/ssl/ssl-log-ext.zeek: ssl.log's raw hello fields (server_version ... ech_aead_id)"),
    (
        "ssl-client-subject-issuer",
        "SSL::log_include_client_certificate_subject_issuer=T (base/protocols/ssl/files.zeek): ssl.log's client_subject, client_issuer",
    ),
    ("log-certs-base64", "policy/protocols/ssl/log-certs-base64.zeek: x509.log's cert, the DER certificate in base64"),
    ("log-hostcerts-only", "policy/protocols/ssl/log-hostcerts-only.zeek: x509.log has the host (leaf) certificates only"),
    (
        "certificate-request-info",
        "policy/protocols/ssl/certificate-request-info.zeek: ssl.log's requested_client_certificate_authorities",
    ),
    (
        "validate-certs",
        "policy/protocols/ssl/validate-certs.zeek: ssl.log's validation_status, the server chain checked against a trust store (--ca-file)",
    ),
    (
        "validate-ocsp",
        "policy/protocols/ssl/validate-ocsp.zeek: ssl.log's ocsp_status, the stapled OCSP response checked against a trust store (--ca-file)",
    ),
    (
        "validate-sct",
        "policy/protocols/ssl/validate-sct.zeek (loads validate-certs): ssl.log's valid_ct_logs, valid_ct_operators, the leaf's SCTs checked against the CT log list (--ct-logs)",
    ),
];

/// Zeek policies that add log fields wirelog does not write, and why
/// (`--zeek-policy` names them in its error).
pub const ZEEK_POLICIES_NOT_DONE: &[(&str, &str)] = &[
    ("known-certs", "known_certs.log is not written"),
];

/// Columns every transaction kind has after its own, declared once here for
/// all protocols: the store, ClickHouse, the query fields and the API take
/// them with each protocol's ([`Columns::stored`]). Not in the protocols'
/// logs by declaration: the log writer adds them after every other column
/// only when the capture can make them differ (`source` with
/// `capture --tls-plaintext`), so a packet capture's logs keep Zeek's fields.
pub const EVERY_TX: &[Column] = &[
    // A store or ClickHouse table written before the column existed reads it unset.
    Column::new(
        "source",
        Type::Enum,
        Card::Low,
        "Where the parsed bytes came from: `packets`, or `tls-library` (the plaintext a process handed its TLS library, capture --tls-plaintext).",
        |r| Val::Text(Some(r.source.as_str())),
    )
    .not_logged()
    .brief(),
];

/// The one column every transaction kind has that is declared here (the
/// others of the common head are listed by each place): how many
/// transactions a record stands for. 1, or N when its connection was one of
/// 1 in N parsed (`capture --cpu-budget` sheds parsing that way); sums
/// weighted by it estimate what all were. The store and ClickHouse put it
/// after the common head; files and tables from before it read it as unset,
/// which counts 1. The log writes it last, and only under a CPU budget.
pub const SAMPLE_WEIGHT: Column = Column::new(
    "sample_weight",
    Type::Count { bits: 64, unit: Unit::Count },
    Card::Low,
    "how many transactions this record stands for: 1, or N when its connection was one of 1 in N parsed (capture --cpu-budget)",
    sample_weight,
);

fn sample_weight(r: &TxRecord) -> Val<'_> {
    Val::Count(Some(u64::from(r.sample_weight)))
}

/// The declaration of each protocol's columns (a const fn: the store reads
/// the declarations at compile time to fill its column builders).
pub const fn of(p: Protocol) -> &'static Columns {
    match p {
        Protocol::Http => &crate::http::COLUMNS,
        Protocol::Mysql => &crate::mysql::COLUMNS,
        Protocol::Pgsql => &crate::pgsql::COLUMNS,
        Protocol::Redis => &crate::redis::COLUMNS,
        Protocol::Dns => &crate::dns::COLUMNS,
        Protocol::Tls => &crate::tls::COLUMNS,
        Protocol::Memcached => &crate::memcached::COLUMNS,
        Protocol::Mongodb => &crate::mongodb::COLUMNS,
        Protocol::Mqtt => &crate::mqtt::COLUMNS,
        Protocol::Amqp => &crate::amqp::COLUMNS,
        Protocol::Kafka => &crate::kafka::COLUMNS,
        Protocol::Cassandra => &crate::cassandra::COLUMNS,
        Protocol::Grpc => &crate::grpc::COLUMNS,
    }
}

/// A [`Get`] that reads the record's detail of one protocol (`Val::Unset`
/// for another's): `get!(Http, |r, h| Val::text(&h.method))`.
#[macro_export]
macro_rules! get {
    ($variant:ident, |$r:ident, $d:ident| $e:expr) => {
        |$r: &$crate::TxRecord| {
            let _ = $r;
            match &$r.tx.detail {
                $crate::Detail::$variant($d) => $e,
                #[allow(unreachable_patterns)]
                _ => $crate::columns::Val::Unset,
            }
        }
    };
}

/// A list's item writer over one protocol's detail:
/// `item!(Http, |h, i, s| s.push_str(&h.headers[i].0))`.
#[macro_export]
macro_rules! item {
    ($variant:ident, |$d:ident, $i:ident, $s:ident| $e:expr) => {
        |r: &$crate::TxRecord, $i: usize, $s: &mut String| {
            #[allow(irrefutable_let_patterns)]
            if let $crate::Detail::$variant($d) = &r.tx.detail {
                $e
            }
        }
    };
}

/// A list's item reader over one protocol's detail, for items the record
/// holds as text: `text_item!(Dns, |d, i| &d.answers[i].data)` (`""` for
/// another protocol's record); its type comes from where it is passed
/// ([`Val::texts`]).
#[macro_export]
macro_rules! text_item {
    ($variant:ident, |$d:ident, $i:ident| $e:expr) => {
        |r, $i| {
            #[allow(irrefutable_let_patterns)]
            if let $crate::Detail::$variant($d) = &r.tx.detail {
                $e
            } else {
                ""
            }
        }
    };
}

/// A list's item reader for numbers: `num_item!(Dns, |d, i| d.answers[i].ttl as u64)`.
#[macro_export]
macro_rules! num_item {
    ($variant:ident, |$d:ident, $i:ident| $e:expr) => {
        |r: &$crate::TxRecord, $i: usize| -> u64 {
            #[allow(irrefutable_let_patterns)]
            if let $crate::Detail::$variant($d) = &r.tx.detail {
                $e
            } else {
                0
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_lists_and_decimals() {
        let mut l = TextList::default();
        assert!(l.is_empty() && l.joined().is_empty());
        l.push("a,b");
        l.push("");
        assert_eq!(l.push_with(3, |s| s.push_str("éé")), 2, "cut on a character boundary");
        l.push_with(usize::MAX, |s| push_signed(s, -42));
        assert_eq!(l.iter().collect::<Vec<_>>(), ["a,b", "", "é", "-42"]);
        assert_eq!(l.joined(), "a,b,,é,-42");
        assert_eq!(l, ["a,b", "", "é", "-42"].into_iter().collect::<TextList>());
        assert_eq!((l.get(0), l.get(1), l.get(3)), ("a,b", "", "-42"));
        // Ends kept from the first item with a comma on, wherever it comes.
        for at in 0..5 {
            let items: Vec<String> =
                (0..5).map(|i| if i == at { format!("x,{i}") } else { format!("v{i}") }).collect();
            let l: TextList = items.iter().collect();
            assert_eq!(l.len(), 5);
            assert_eq!(l.iter().collect::<Vec<_>>(), items, "comma in item {at}");
            assert_eq!((0..5).map(|i| l.get(i)).collect::<Vec<_>>(), items, "comma in item {at}");
            assert_eq!(l.joined(), items.join(","));
        }
        // Without a comma the commas are the ends: empty items too.
        for items in [vec![""], vec!["", ""], vec!["1", "", "22"], vec![]] {
            let l: TextList = items.iter().collect();
            assert_eq!((l.len(), l.iter().collect::<Vec<_>>()), (items.len(), items.clone()));
            assert_eq!((0..l.len()).map(|i| l.get(i)).collect::<Vec<_>>(), items);
        }
        let mut reserved = TextList::default();
        reserved.reserve_text(64);
        reserved.push("a,b");
        assert_eq!(reserved, ["a,b"].into_iter().collect::<TextList>());
        for v in [0, 7, 10, 99, 1234567890, u64::MAX] {
            let mut s = String::new();
            push_decimal(&mut s, v);
            assert_eq!(s, v.to_string());
        }
        let mut s = String::new();
        push_signed(&mut s, i64::MIN);
        assert_eq!(s, i64::MIN.to_string());
    }

    #[test]
    fn declarations_are_consistent() {
        for p in Protocol::ALL {
            let c = of(p);
            let mut names: Vec<&str> = c.columns.iter().chain(EVERY_TX).map(|c| c.name).collect();
            names.extend(c.columns.iter().chain(EVERY_TX).flat_map(|c| c.aliases.iter().copied()));
            let n = names.len();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), n, "{p:?}: a name or alias twice");
            let mut logs: Vec<&str> = c.logged().map(|c| c.log.unwrap()).collect();
            let n = logs.len();
            logs.sort();
            logs.dedup();
            assert_eq!(logs.len(), n, "{p:?}: a log name twice");
            // The store's order names every stored column once (then the
            // columns of every kind).
            let stored = c.columns.iter().filter(|c| c.store.is_some()).count();
            assert_eq!(c.stored().len(), stored + EVERY_TX.len(), "{p:?}: store_order");
            if !c.store_order.is_empty() {
                assert_eq!(c.store_order.len(), stored, "{p:?}: store_order");
            }
            assert!(!c.by.is_empty(), "{p:?}: by");
            for b in c.by {
                assert!(c.stored().iter().any(|c| c.name == *b), "{p:?}: by {b}");
            }
            assert!(!c.shape.is_empty(), "{p:?}: shape");
            for f in c.shape {
                assert!(c.stored().iter().any(|c| c.name == *f), "{p:?}: shape {f}");
            }
            for (old, new) in c.renamed {
                assert!(c.stored().iter().any(|c| c.name == *new), "{p:?}: rename to {new}");
                assert!(!c.columns.iter().any(|c| c.name == *old), "{p:?}: rename from {old}");
            }
            for col in c.columns {
                assert!(!col.doc.is_empty(), "{p:?}.{}: doc", col.name);
                if let Some(pol) = col.policy {
                    assert!(ZEEK_POLICIES.iter().any(|(n, _)| *n == pol), "{p:?}.{}: policy {pol}", col.name);
                    assert!(col.store.is_none() && col.log.is_some(), "{p:?}.{}: a policy's column is the log's", col.name);
                }
                if let Type::Count { bits, .. } = col.ty {
                    assert!(bits == 16 || bits == 64, "{p:?}.{}", col.name);
                }
            }
        }
    }
}
