//! PostgreSQL frontend/backend protocol v3.
//!
//! Transactions:
//! - `startup`: the StartupMessage (user, database, application_name) with
//!   the authentication exchange, answered by the first ReadyForQuery (or an
//!   ErrorResponse: failed login). It is a transaction because its latency
//!   (connect + auth) and its failures are worth a record; Zeek logs it too.
//! - `ssl_request` answered `N` (the server refuses TLS; the session goes on
//!   in clear). `S` means TLS: the parser gives up. Same for GSSENCRequest.
//! - `query`: one per statement of a simple Query: a Query holding several
//!   statements (`select 1; select 2`) gives one transaction per statement,
//!   paired in order with the server's CommandComplete/ErrorResponse/
//!   EmptyQueryResponse, as Packetbeat does (it splits the query on `;`).
//!   After an error the server skips the remaining statements: none is
//!   reported for them.
//! - `execute`: one per Execute of the extended protocol, carrying the text of
//!   the statement its portal was bound to (named or unnamed). Its request
//!   bytes are the Parse/Bind/Describe messages sent since the previous
//!   Execute, the Execute, and the Sync that follows.
//! - `parse`, `bind`, `describe`, `close`: a Sync'ed batch without Execute
//!   (e.g. a driver preparing a statement), answered by ReadyForQuery.
//! - `function_call`, `cancel`, `terminate` (the last two get no response).
//!
//! Response bytes count the messages that carry the result (RowDescription,
//! DataRow, CommandComplete, ErrorResponse, ...), not the protocol
//! acknowledgements (ParseComplete, BindComplete, ReadyForQuery, notices),
//! which is what Packetbeat counts.
//!
//! Framing: `type:u8 len:u32be body` (the length includes itself); only the
//! client's first messages (startup, SSL and cancel requests) lack the type
//! byte. A message is parsed from the caller's slice when whole; one that
//! spans calls keeps only its first bytes (the query text, up to
//! `max_header_bytes`; a few bytes of rows), so large results are counted,
//! never stored. After a gap the parser drops bytes until a segment that
//! starts with a plausible message of the direction's type set.

use std::collections::{HashMap, VecDeque};

use std::sync::Arc;

use crate::fingerprint::{self, Dialect, Fingerprints};
use crate::{Detail, Dir, ParseConfig, ParseStats, Span, StreamParser, Transaction, TxSink, TxStatus};

pub use wirelog_record::pgsql::PgsqlTx;

/// Why the parser stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GiveUp {
    /// SSLRequest answered `S` (or GSSENCRequest answered `G`).
    Tls,
}

const SSL_REQUEST: u32 = 80_877_103;
const GSSENC_REQUEST: u32 = 80_877_104;
const CANCEL_REQUEST: u32 = 80_877_102;
const PROTO_3: u32 = 196_608;
/// Largest message accepted as plausible (PostgreSQL's own limit is 1 GB).
const MAX_MSG: usize = 1 << 30;
/// Prepared statements and portals remembered per connection.
const MAX_NAMES: usize = 4096;

const CLIENT_TYPES: &[u8] = b"QPBDEXSHCdcfpF";
const SERVER_TYPES: &[u8] = b"RSKZTDCEINAV123ntsGHWdcv";

fn di(dir: Dir) -> usize {
    match dir {
        Dir::ToServer => 0,
        Dir::ToClient => 1,
    }
}

fn be32(b: &[u8]) -> u32 {
    b.iter().take(4).fold(0u32, |a, &x| (a << 8) | x as u32)
}

fn cstr<'a>(p: &'a [u8], pos: &mut usize) -> &'a [u8] {
    let rest = p.get(*pos..).unwrap_or(&[]);
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    *pos += (end + 1).min(rest.len());
    &rest[..end]
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn add_span(span: &mut Option<Span>, first_ns: i64, last_ns: i64, bytes: u64) {
    match span {
        Some(s) => {
            s.last_ns = s.last_ns.max(last_ns);
            s.bytes += bytes;
        }
        None => *span = Some(Span { first_ns, last_ns, bytes }),
    }
}

fn merge(into: &mut Option<Span>, s: Option<Span>) {
    if let Some(s) = s {
        match into {
            Some(i) => {
                i.first_ns = i.first_ns.min(s.first_ns);
                i.last_ns = i.last_ns.max(s.last_ns);
                i.bytes += s.bytes;
            }
            None => *into = Some(s),
        }
    }
}

/// Splits a simple query into statements on `;` outside quotes, comments
/// and dollar-quoted bodies; empty statements are dropped.
#[cfg(test)]
fn split_statements(q: &str) -> Vec<&str> {
    let mut out = Vec::new();
    each_statement(q, |s| out.push(s));
    out
}

/// [`split_statements`] handing each statement to `out` as it is found (a
/// query of one statement then allocates nothing).
fn each_statement<'a>(q: &'a str, mut out: impl FnMut(&'a str)) {
    let b = q.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            q @ (b'\'' | b'"') => {
                i += 1;
                while i < b.len() {
                    if b[i] == q {
                        if b.get(i + 1) == Some(&q) {
                            i += 2;
                            continue;
                        }
                        break;
                    }
                    i += 1;
                }
            }
            b'-' if b.get(i + 1) == Some(&b'-') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = b[i + 2..].windows(2).position(|w| w == b"*/").map_or(b.len(), |p| i + 2 + p + 1);
            }
            b'$' => {
                let mut j = i + 1;
                while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                    j += 1;
                }
                if j < b.len() && b[j] == b'$' && !b.get(i + 1).is_some_and(u8::is_ascii_digit) {
                    let tag = &b[i..=j];
                    let body = j + 1;
                    i = b[body..]
                        .windows(tag.len())
                        .position(|w| w == tag)
                        .map_or(b.len(), |p| body + p + tag.len() - 1);
                }
            }
            b';' => {
                let s = q[start..i].trim();
                if !s.is_empty() {
                    out(s);
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    let s = q.get(start..).unwrap_or("").trim();
    if !s.is_empty() {
        out(s);
    }
}

/// Last number of a CommandComplete tag (`INSERT 0 1` -> 1, `SELECT 15` -> 15).
fn tag_rows(tag: &str) -> Option<u64> {
    tag.rsplit(' ').next()?.parse().ok()
}

fn auth_name(code: u32) -> &'static str {
    match code {
        0 => "ok",
        2 => "kerberos",
        3 => "cleartext",
        5 => "md5",
        7 => "gss",
        8 => "gss_continue",
        9 => "sspi",
        10 => "sasl",
        11 => "sasl_continue",
        12 => "sasl_final",
        _ => "unknown",
    }
}

/// This protocol's content probe (see [`crate::detect`]).
pub fn probe(dir: Dir, data: &[u8]) -> crate::detect::Probe {
    crate::detect::Probe::certain_if(looks_like(dir, data))
}

/// True when `data`, the first bytes seen in `dir`, look like PostgreSQL:
/// a startup, SSL, GSSENC or cancel request from the client; from the
/// server, an authentication request.
pub fn looks_like(dir: Dir, data: &[u8]) -> bool {
    match dir {
        Dir::ToServer => {
            if data.len() < 8 {
                return false;
            }
            let len = be32(data) as usize;
            let code = be32(&data[4..]);
            match code {
                SSL_REQUEST | GSSENC_REQUEST => len == 8,
                CANCEL_REQUEST => len == 16,
                PROTO_3 => {
                    // key\0value\0 ... \0, starting with a known key.
                    (9..=10_000).contains(&len) && {
                        let body = &data[8..data.len().min(len)];
                        let mut pos = 0;
                        let key = cstr(body, &mut pos);
                        matches!(
                            key,
                            b"user"
                                | b"database"
                                | b"application_name"
                                | b"client_encoding"
                                | b"options"
                                | b"replication"
                                | b"DateStyle"
                        )
                    }
                }
                _ => false,
            }
        }
        Dir::ToClient => {
            // AuthenticationRequest: 'R', length 8..=~100, known code.
            data.len() >= 9
                && data[0] == b'R'
                && (8..=512).contains(&(be32(&data[1..]) as usize))
                && matches!(be32(&data[5..]), 0 | 3 | 5 | 7 | 9 | 10)
        }
    }
}

/// Per-direction framing state.
#[derive(Default)]
struct Framer {
    hdr: [u8; 5],
    hdr_len: usize,
    in_msg: bool,
    need: usize,
    ty: u8,
    len: usize,
    keep: usize,
    buf: Vec<u8>,
    first_ns: i64,
    hunting: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Startup,
    Query,
    Execute,
    /// A Sync'ed batch without Execute; completes at ReadyForQuery.
    Batch,
    /// Terminate, CancelRequest: no answer expected.
    NoReply,
    FunctionCall,
    Unknown,
}

struct Pending {
    kind: Kind,
    tx: PgsqlTx,
    req: Option<Span>,
    resp: Option<Span>,
    error: bool,
    batch: u64,
    done: bool,
    /// Statements of a simple query still to be answered.
    stmts: VecDeque<String>,
}

impl Pending {
    /// A transaction opened by a client message of client batch `batch`.
    fn new(kind: Kind, tx: PgsqlTx, req: Option<Span>, batch: u64) -> Pending {
        Pending { kind, tx, req, resp: None, error: false, batch, done: false, stmts: VecDeque::new() }
    }

    fn status(&self) -> TxStatus {
        if self.req.is_none() {
            TxStatus::NoRequest
        } else if self.error {
            TxStatus::Error
        } else if self.resp.is_none() && self.kind != Kind::NoReply {
            TxStatus::NoResponse
        } else {
            TxStatus::Ok
        }
    }
}

pub struct PgsqlParser {
    cfg: ParseConfig,
    stats: ParseStats,
    fr: [Framer; 2],
    /// The client's next message has no type byte (startup phase).
    client_untyped: bool,
    /// SSL/GSSENC request sent: the server answers one bare byte.
    ssl_wait: Option<Span>,
    user: Option<Arc<str>>,
    database: Option<Arc<str>>,
    application_name: Option<Arc<str>>,
    /// Statement name -> SQL text (as recorded, and fingerprint).
    statements: HashMap<String, (Arc<str>, bool, Arc<str>)>,
    /// Portal name -> statement name.
    portals: HashMap<String, Arc<str>>,
    /// The connection's fingerprints, one shared `Arc<str>` per shape.
    fingerprints: Fingerprints,
    /// The connection's CommandComplete tags, shared the same way.
    tags: Fingerprints,
    /// Client messages of the current extended batch since the last Execute.
    acc: Option<Span>,
    acc_first: Option<&'static str>,
    acc_query: Option<String>,
    /// Batches (a Query, a Sync, the startup) sent and answered (ReadyForQuery).
    client_batch: u64,
    server_batch: u64,
    pending: VecDeque<Pending>,
    gave_up: Option<GiveUp>,
}

impl PgsqlParser {
    /// Heap bytes held for the connection's life beyond the fixed parser
    /// (its statements' shapes, recent texts and command tags), for the
    /// memory budget.
    pub fn held_bytes(&self) -> usize {
        self.fingerprints.held_bytes() + self.tags.held_bytes()
    }

    pub fn new(cfg: &ParseConfig) -> Self {
        PgsqlParser {
            cfg: cfg.clone(),
            stats: ParseStats::default(),
            fr: [Framer::default(), Framer::default()],
            client_untyped: true,
            ssl_wait: None,
            user: None,
            database: None,
            application_name: None,
            statements: HashMap::new(),
            portals: HashMap::new(),
            fingerprints: Fingerprints::default(),
            tags: Fingerprints::default(),
            acc: None,
            acc_first: None,
            acc_query: None,
            client_batch: 0,
            server_batch: 0,
            pending: VecDeque::new(),
            gave_up: None,
        }
    }

    pub fn gave_up_reason(&self) -> Option<GiveUp> {
        self.gave_up
    }

    /// The TLS limits of the connection's configuration: the TLS parser
    /// that takes over after STARTTLS is made with them.
    pub(crate) fn tls_limits(&self) -> crate::tls::TlsLimits {
        self.cfg.tls
    }

    fn new_tx(&self, kind: &'static str) -> PgsqlTx {
        PgsqlTx {
            kind,
            user: self.user.clone(),
            database: self.database.clone(),
            application_name: self.application_name.clone(),
            ..PgsqlTx::default()
        }
    }

    /// (recorded text, cut, fingerprint) of SQL text: the text allocated
    /// once (or shared with the last statement of its shape when the same),
    /// the fingerprint shared with the connection's statements of the same
    /// shape (as MySQL's, `mysql::MysqlParser::record_text`).
    fn record_text(&mut self, raw: &str) -> (Arc<str>, bool, Arc<str>) {
        self.fingerprints.recorded(raw, Dialect::Postgres, &self.cfg)
    }

    fn set_query(&mut self, tx: &mut PgsqlTx, raw: &str, cut_before: bool) {
        let (t, cut, fp) = self.record_text(raw);
        tx.query = Some(t);
        tx.query_truncated = cut || cut_before;
        tx.fingerprint = Some(fp);
    }

    fn keep_for(&self, dir: Dir, ty: u8, untyped: bool) -> usize {
        match dir {
            Dir::ToServer if untyped => 4096.min(self.cfg.max_header_bytes.max(64)),
            Dir::ToServer => match ty {
                b'Q' | b'P' => self.cfg.max_header_bytes.max(64),
                b'B' | b'E' | b'D' | b'C' => 1024,
                _ => 64,
            },
            Dir::ToClient => match ty {
                b'E' | b'N' => 4096,
                b'C' | b'R' | b'T' | b'Z' | b'S' => 256,
                // A DataRow is counted, its body never read: a row cut by
                // a segment's end is skipped by its length as it arrives.
                b'D' => 0,
                _ => 8,
            },
        }
    }

    fn emit_done(&mut self, out: &mut dyn TxSink) {
        while self.pending.front().is_some_and(|p| p.done) {
            if let Some(p) = self.pending.pop_front() {
                let status = p.status();
                out.push(Transaction { request: p.req, response: p.resp, status, detail: Detail::Pgsql(named(p.tx)) });
            }
        }
    }

    fn push(&mut self, p: Pending) {
        self.pending.push_back(p);
    }

    fn emit_now(&mut self, tx: PgsqlTx, req: Span, out: &mut dyn TxSink) {
        // Ordered after what is still pending, as it happened after it.
        self.push(Pending { done: true, ..Pending::new(Kind::NoReply, tx, Some(req), u64::MAX) });
        self.emit_done(out);
    }

    fn message(&mut self, dir: Dir, ty: u8, len: usize, body: &[u8], span: Span, out: &mut dyn TxSink) {
        // Read before the message is handled: the startup message is what
        // turns the client's framing to typed.
        match dir {
            Dir::ToServer if self.client_untyped => self.untyped_client(len, body, span, out),
            Dir::ToServer => self.client_msg(ty, len, body, span, out),
            Dir::ToClient => self.server_msg(ty, body, span, out),
        }
    }

    fn untyped_client(&mut self, len: usize, body: &[u8], span: Span, out: &mut dyn TxSink) {
        let code = be32(body);
        match code {
            SSL_REQUEST | GSSENC_REQUEST => {
                self.ssl_wait = Some(span);
            }
            CANCEL_REQUEST => {
                let tx = self.new_tx("cancel");
                self.emit_now(tx, span, out);
            }
            _ if code >> 16 == 3 => {
                let mut pos = 4;
                while pos < body.len() {
                    let k = cstr(body, &mut pos);
                    if k.is_empty() {
                        break;
                    }
                    let v: Arc<str> = text(cstr(body, &mut pos)).into();
                    match k {
                        b"user" => self.user = Some(v),
                        b"database" => self.database = Some(v),
                        b"application_name" => self.application_name = Some(v),
                        _ => {}
                    }
                }
                if self.database.is_none() {
                    // The server's default: the database named like the user.
                    self.database = self.user.clone();
                }
                self.client_untyped = false;
                let tx = self.new_tx("startup");
                let batch = self.client_batch;
                self.client_batch += 1;
                self.push(Pending::new(Kind::Startup, tx, Some(span), batch));
            }
            _ => {
                // Not a startup-phase message: the capture began mid-session.
                self.client_untyped = false;
                self.stats.malformed += 1;
                self.stats.unparsed_bytes += len as u64;
            }
        }
    }

    fn client_msg(&mut self, ty: u8, len: usize, body: &[u8], span: Span, out: &mut dyn TxSink) {
        let cut = len - 4 > body.len();
        match ty {
            b'Q' => {
                let q = String::from_utf8_lossy(cstr_all(body));
                let (mut first, mut rest) = (None, VecDeque::new());
                each_statement(&q, |s| match first {
                    None => first = Some(s),
                    Some(_) => rest.push_back(s.to_string()),
                });
                let mut tx = self.new_tx("query");
                self.set_query(&mut tx, first.unwrap_or(""), cut && rest.is_empty());
                let mut req = Some(span);
                merge(&mut req, self.acc.take());
                self.acc_first = None;
                let batch = self.client_batch;
                self.client_batch += 1;
                self.push(Pending { stmts: rest, ..Pending::new(Kind::Query, tx, req, batch) });
            }
            b'P' => {
                let mut pos = 0;
                let name = text(cstr(body, &mut pos));
                let q = String::from_utf8_lossy(cstr(body, &mut pos)).into_owned();
                let (t, c, fp) = self.record_text(&q);
                if self.statements.len() >= MAX_NAMES {
                    self.statements.clear();
                }
                self.statements.insert(name, (t, c || cut, fp));
                self.acc_query = Some(q);
                self.accumulate("parse", span);
            }
            b'B' => {
                let mut pos = 0;
                let portal = text(cstr(body, &mut pos));
                let stmt: Arc<str> = text(cstr(body, &mut pos)).into();
                if self.portals.len() >= MAX_NAMES {
                    self.portals.clear();
                }
                self.portals.insert(portal, stmt);
                self.accumulate("bind", span);
            }
            b'D' => self.accumulate("describe", span),
            b'C' => {
                if body.first() == Some(&b'S') {
                    let mut pos = 1;
                    let name = text(cstr(body, &mut pos));
                    self.statements.remove(&name);
                }
                self.accumulate("close", span);
            }
            b'H' => self.accumulate("flush", span),
            b'E' => {
                let mut pos = 0;
                // Looked up as borrowed text: an Execute allocates nothing.
                let portal = String::from_utf8_lossy(cstr(body, &mut pos));
                let mut tx = self.new_tx("execute");
                let stmt = self.portals.get(&*portal).cloned();
                if let Some((t, c, fp)) = stmt.as_deref().and_then(|s| self.statements.get(s)) {
                    tx.query = Some(t.clone());
                    tx.query_truncated = *c;
                    tx.fingerprint = Some(fp.clone());
                }
                tx.statement = stmt;
                let mut req = self.acc.take();
                merge(&mut req, Some(span));
                self.acc_first = None;
                self.acc_query = None;
                let batch = self.client_batch;
                self.push(Pending::new(Kind::Execute, tx, req, batch));
            }
            b'S' => {
                let batch = self.client_batch;
                self.client_batch += 1;
                if let Some(first) = self.acc_first.take() {
                    let mut tx = self.new_tx(first);
                    if let Some(q) = self.acc_query.take() {
                        self.set_query(&mut tx, &q, false);
                    }
                    let mut req = self.acc.take();
                    merge(&mut req, Some(span));
                    self.push(Pending::new(Kind::Batch, tx, req, batch));
                } else if let Some(p) = self.pending.back_mut().filter(|p| p.batch == batch && !p.done) {
                    merge(&mut p.req, Some(span));
                }
            }
            b'F' => {
                let tx = self.new_tx("function_call");
                let batch = self.client_batch;
                self.client_batch += 1;
                self.push(Pending::new(Kind::FunctionCall, tx, Some(span), batch));
            }
            b'X' => {
                let tx = self.new_tx("terminate");
                self.emit_now(tx, span, out);
            }
            b'p' | b'd' | b'c' | b'f' => {
                // Password / SASL response, COPY data from the client.
                if let Some(p) = self.pending.iter_mut().find(|p| !p.done) {
                    merge(&mut p.req, Some(span));
                }
            }
            _ => {
                self.stats.malformed += 1;
                self.stats.unparsed_bytes += len as u64 + 1;
            }
        }
    }

    fn accumulate(&mut self, name: &'static str, span: Span) {
        self.acc_first.get_or_insert(name);
        merge(&mut self.acc, Some(span));
    }

    /// The transaction server messages belong to: the oldest not finished,
    /// or a new one for a response whose request was not seen.
    fn target(&mut self) -> &mut Pending {
        let i = self.target_idx();
        &mut self.pending[i]
    }

    fn target_idx(&mut self) -> usize {
        if !self.pending.iter().any(|p| !p.done) {
            let tx = self.new_tx("unknown");
            let batch = self.server_batch;
            self.pending.push_back(Pending::new(Kind::Unknown, tx, None, batch));
        }
        self.pending.iter().position(|p| !p.done).unwrap_or(0)
    }

    /// DataRow messages counted by their lengths: the whole `D` messages at
    /// the start of `data` (server side) are skipped, their contents never
    /// read, and added to the transaction being answered with one span
    /// update. Anything else (another type, a bad length, a message cut by
    /// the segment's end) is left to the general path. Returns the bytes
    /// consumed.
    fn count_data_rows(&mut self, data: &[u8], ts_ns: i64) -> usize {
        let (mut at, mut rows) = (0usize, 0u64);
        while let Some(h) = data.get(at..at + 5) {
            let len = be32(&h[1..]) as usize;
            if h[0] != b'D' || !(4..MAX_MSG).contains(&len) || data.len() - at < 1 + len {
                break;
            }
            at += 1 + len;
            rows += 1;
        }
        if rows > 0 {
            let t = self.target();
            t.tx.num_rows += rows;
            add_span(&mut t.resp, ts_ns, ts_ns, at as u64);
        }
        at
    }

    fn server_msg(&mut self, ty: u8, body: &[u8], span: Span, out: &mut dyn TxSink) {
        let s = span;
        match ty {
            b'R' => {
                let code = be32(body);
                let t = self.target();
                if t.kind == Kind::Startup {
                    if code != 0 || t.tx.auth_method.is_none() {
                        t.tx.auth_method = Some(auth_name(code));
                    }
                    add_span(&mut t.resp, s.first_ns, s.last_ns, s.bytes);
                }
            }
            b'S' | b'K' | b'N' | b'A' | b'v' | b'1' | b'2' | b'3' | b'n' | b't' => {
                // Parameter status, key data, notices, notifications,
                // acknowledgements: count them only for startup and
                // batches without Execute, whose whole answer they are.
                if let Some(t) = self.pending.iter_mut().find(|p| !p.done) {
                    if matches!(t.kind, Kind::Startup | Kind::Batch) {
                        add_span(&mut t.resp, s.first_ns, s.last_ns, s.bytes);
                    }
                }
            }
            b'T' => {
                let n = body.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]]));
                let t = self.target();
                t.tx.num_fields = n;
                add_span(&mut t.resp, s.first_ns, s.last_ns, s.bytes);
            }
            b'D' => {
                let t = self.target();
                t.tx.num_rows += 1;
                add_span(&mut t.resp, s.first_ns, s.last_ns, s.bytes);
            }
            b'G' | b'H' | b'W' | b'd' | b'c' => {
                let t = self.target();
                add_span(&mut t.resp, s.first_ns, s.last_ns, s.bytes);
            }
            b'C' | b'I' | b's' | b'V' | b'E' => {
                let tag = (ty == b'C').then(|| self.tags.text(cstr(body, &mut 0)));
                let i = self.target_idx();
                let t = &mut self.pending[i];
                add_span(&mut t.resp, s.first_ns, s.last_ns, s.bytes);
                if let Some(tag) = tag {
                    t.tx.rows = tag_rows(&tag);
                    t.tx.command_tag = Some(tag);
                }
                if ty == b'E' {
                    t.error = true;
                    parse_error(body, &mut t.tx);
                    // The server skips the rest of a multi-statement query.
                    t.stmts.clear();
                }
                if t.kind == Kind::Batch || (t.kind == Kind::Startup && ty != b'E') {
                    // Answered by ReadyForQuery.
                } else if let Some(next) = t.stmts.pop_front().filter(|_| t.kind == Kind::Query) {
                    // One statement of several done: report it, go on with
                    // the next (request bytes stay with the first).
                    let mut tx = self.new_tx("query");
                    self.set_query(&mut tx, &next, false);
                    let cur = &mut self.pending[i];
                    let finished = Pending {
                        kind: Kind::Query,
                        tx: std::mem::replace(&mut cur.tx, tx),
                        req: cur.req,
                        resp: cur.resp.take(),
                        error: cur.error,
                        batch: cur.batch,
                        done: true,
                        stmts: VecDeque::new(),
                    };
                    cur.req = cur.req.map(|r| Span { bytes: 0, ..r });
                    cur.error = false;
                    self.pending.insert(i, finished);
                } else {
                    t.done = true;
                }
                self.emit_done(out);
            }
            b'Z' => {
                let b = self.server_batch;
                self.server_batch += 1;
                for p in self.pending.iter_mut() {
                    if p.done || (p.batch > b && p.kind != Kind::Unknown) {
                        continue;
                    }
                    if matches!(p.kind, Kind::Startup | Kind::Batch) {
                        // ReadyForQuery is part of their answer.
                        add_span(&mut p.resp, s.first_ns, s.last_ns, s.bytes);
                    }
                    // An Execute still unanswered here was skipped by the
                    // server after an earlier error in its batch: it goes
                    // out as NoResponse.
                    p.done = true;
                }
                self.emit_done(out);
            }
            _ => {
                self.stats.malformed += 1;
                self.stats.unparsed_bytes += s.bytes;
            }
        }
    }

    /// After a gap, may `data` start a message of `dir`?
    fn resync_ok(dir: Dir, data: &[u8]) -> bool {
        let types = if dir == Dir::ToServer { CLIENT_TYPES } else { SERVER_TYPES };
        let mut pos = 0;
        let mut whole = 0;
        while pos + 5 <= data.len() {
            let ty = data[pos];
            let len = be32(&data[pos + 1..]) as usize;
            if !types.contains(&ty) || !(4..MAX_MSG).contains(&len) {
                return false;
            }
            pos += 1 + len;
            whole += 1;
        }
        whole > 0 && (pos == data.len() || pos > data.len() || data.len() - pos < 5)
    }
}

/// The whole body up to its terminating NUL.
fn cstr_all(b: &[u8]) -> &[u8] {
    let end = b.iter().position(|&x| x == 0).unwrap_or(b.len());
    &b[..end]
}

/// ErrorResponse fields: S/V severity, C SQLSTATE, M message.
fn parse_error(body: &[u8], tx: &mut PgsqlTx) {
    let mut pos = 0;
    while pos < body.len() {
        let code = body[pos];
        if code == 0 {
            break;
        }
        pos += 1;
        let v = cstr(body, &mut pos);
        match code {
            b'V' => tx.error_severity = Some(text(v)),
            b'S' if tx.error_severity.is_none() => tx.error_severity = Some(text(v)),
            b'C' => tx.error_code = Some(text(v)),
            b'M' => tx.error_message = Some(text(v)),
            _ => {}
        }
    }
}

impl StreamParser for PgsqlParser {
    fn data(&mut self, dir: Dir, ts_ns: i64, data: &[u8], out: &mut dyn TxSink) {
        let d = di(dir);
        if self.gave_up.is_some() {
            self.stats.unparsed_bytes += data.len() as u64;
            return;
        }
        let mut data = data;
        if dir == Dir::ToClient && !self.fr[d].in_msg && self.fr[d].hdr_len == 0 && !self.fr[d].hunting {
            if let Some(req) = self.ssl_wait.take() {
                // The one-byte answer to an SSL/GSSENC request.
                match data.first() {
                    Some(b'S') | Some(b'G') => {
                        self.gave_up = Some(GiveUp::Tls);
                        self.stats.unparsed_bytes += data.len() as u64 - 1;
                        return;
                    }
                    Some(b'N') => {
                        let mut tx = self.new_tx("ssl_request");
                        tx.command_tag = Some("N".into());
                        let resp = Span { first_ns: ts_ns, last_ns: ts_ns, bytes: 1 };
                        self.push(Pending {
                            resp: Some(resp),
                            done: true,
                            ..Pending::new(Kind::Batch, tx, Some(req), u64::MAX)
                        });
                        self.emit_done(out);
                        data = &data[1..];
                    }
                    // An old server answering with an ErrorResponse: typed.
                    _ => {}
                }
            }
        }
        if self.fr[d].hunting {
            if !Self::resync_ok(dir, data) {
                self.stats.unparsed_bytes += data.len() as u64;
                return;
            }
            self.fr[d].hunting = false;
            self.stats.resyncs += 1;
        }
        while !data.is_empty() {
            if dir == Dir::ToServer
                && self.client_untyped
                && self.fr[d].hdr_len == 0
                && !self.fr[d].in_msg
                && data[0] != 0
            {
                // A startup-phase message starts with its length's high byte,
                // 0; a type byte means the capture began mid-session.
                self.client_untyped = false;
            }
            let untyped = dir == Dir::ToServer && self.client_untyped;
            let hlen = if untyped { 4 } else { 5 };
            let f = &mut self.fr[d];
            if f.in_msg {
                let n = f.need.min(data.len());
                let room = f.keep.saturating_sub(f.buf.len());
                f.buf.extend_from_slice(&data[..n.min(room)]);
                f.need -= n;
                data = &data[n..];
                if f.need == 0 {
                    f.in_msg = false;
                    let buf = std::mem::take(&mut f.buf);
                    let (ty, len) = (f.ty, f.len);
                    let span = Span { first_ns: f.first_ns, last_ns: ts_ns, bytes: (len + hlen - 4) as u64 };
                    self.message(dir, ty, len, &buf, span, out);
                    let f = &mut self.fr[d];
                    f.buf = buf;
                    f.buf.clear();
                }
                continue;
            }
            if dir == Dir::ToClient && f.hdr_len == 0 {
                let n = self.count_data_rows(data, ts_ns);
                if n > 0 {
                    data = &data[n..];
                    continue;
                }
            }
            let f = &mut self.fr[d];
            let (ty, len, body_now): (u8, usize, &[u8]);
            if f.hdr_len > 0 || data.len() < hlen {
                if f.hdr_len == 0 {
                    f.first_ns = ts_ns;
                }
                let n = (hlen - f.hdr_len).min(data.len());
                f.hdr[f.hdr_len..f.hdr_len + n].copy_from_slice(&data[..n]);
                f.hdr_len += n;
                data = &data[n..];
                if f.hdr_len < hlen {
                    return;
                }
                f.hdr_len = 0;
                if untyped {
                    ty = 0;
                    len = be32(&f.hdr[..4]) as usize;
                } else {
                    ty = f.hdr[0];
                    len = be32(&f.hdr[1..5]) as usize;
                }
                body_now = &[];
            } else {
                f.first_ns = ts_ns;
                if untyped {
                    ty = 0;
                    len = be32(data) as usize;
                } else {
                    ty = data[0];
                    len = be32(&data[1..]) as usize;
                }
                body_now = &data[hlen..];
                data = &[];
            }
            let types = if dir == Dir::ToServer { CLIENT_TYPES } else { SERVER_TYPES };
            let min_len = if untyped { 8 } else { 4 };
            if len < min_len || len >= MAX_MSG || (!untyped && !types.contains(&ty)) || (untyped && len > 10_000) {
                // Framing lost: resynchronise as after a gap.
                self.stats.malformed += 1;
                self.stats.unparsed_bytes += (hlen + body_now.len() + data.len()) as u64;
                let f = &mut self.fr[d];
                f.hunting = true;
                if dir == Dir::ToServer {
                    self.client_untyped = false;
                }
                return;
            }
            let body_len = len - 4;
            let first_ns = self.fr[d].first_ns;
            if body_now.len() >= body_len {
                let (body, rest) = body_now.split_at(body_len);
                let span = Span { first_ns, last_ns: ts_ns, bytes: (len + hlen - 4) as u64 };
                self.message(dir, ty, len, body, span, out);
                if !rest.is_empty() {
                    data = rest;
                }
            } else {
                let keep = self.keep_for(dir, ty, untyped).min(body_len);
                let f = &mut self.fr[d];
                f.in_msg = true;
                f.ty = ty;
                f.len = len;
                f.keep = keep;
                f.need = body_len - body_now.len();
                f.buf.clear();
                f.buf.extend_from_slice(&body_now[..body_now.len().min(keep)]);
            }
            if self.gave_up.is_some() {
                return;
            }
        }
    }

    fn gap(&mut self, dir: Dir, _ts_ns: i64, _len: u64, out: &mut dyn TxSink) {
        self.stats.gaps += 1;
        let d = di(dir);
        let f = &mut self.fr[d];
        f.hdr_len = 0;
        f.in_msg = false;
        f.buf.clear();
        f.hunting = true;
        match dir {
            Dir::ToServer => {
                self.client_untyped = false;
                self.acc = None;
                self.acc_first = None;
                self.acc_query = None;
            }
            Dir::ToClient => {
                // Responses lost: everything waiting goes out unanswered.
                self.ssl_wait = None;
                for p in self.pending.iter_mut() {
                    if !p.done {
                        p.done = true;
                        if p.req.is_some() {
                            p.resp = None;
                            p.error = false;
                        }
                    }
                }
                self.server_batch = self.client_batch;
                self.emit_done(out);
            }
        }
    }

    fn expire(&mut self, now_ns: i64, out: &mut dyn TxSink) {
        let timeout = self.cfg.transaction_timeout_ns;
        let stale = self
            .pending
            .front()
            .is_some_and(|p| !p.done && p.resp.is_none() && p.req.is_some_and(|r| now_ns - r.last_ns > timeout));
        if stale {
            if let Some(p) = self.pending.front_mut() {
                p.done = true;
            }
            self.emit_done(out);
        }
    }

    fn finish(&mut self, _ts_ns: i64, out: &mut dyn TxSink) {
        // The stream ended: a command whose response began but did not finish
        // (no ReadyForQuery / CommandComplete yet) was answered only in part.
        for p in self.pending.drain(..) {
            let status = match p.status() {
                TxStatus::Ok if !p.done && p.resp.is_some() => TxStatus::Partial,
                s => s,
            };
            out.push(Transaction { request: p.req, response: p.resp, status, detail: Detail::Pgsql(named(p.tx)) });
        }
    }

    fn gave_up(&self) -> bool {
        self.gave_up.is_some()
    }

    fn stats(&self) -> ParseStats {
        self.stats
    }
}

/// Transactions that carry no SQL get their kind as fingerprint (see
/// [`fingerprint::command_group`]); ones that may carry SQL keep an empty
/// fingerprint when the text is unknown.
fn named(mut tx: PgsqlTx) -> PgsqlTx {
    if tx.fingerprint.is_none() && !matches!(tx.kind, "query" | "parse" | "execute" | "bind" | "unknown") {
        tx.fingerprint = Some(fingerprint::command_group(tx.kind).into());
    }
    tx
}

#[cfg(test)]
mod tests;
