//! MySQL / MariaDB client/server protocol: one transaction per command
//! (and one `login` transaction for the handshake).
//!
//! Framing: every message is a packet `len:u24le seq:u8 payload`; a payload of
//! exactly 0xffffff bytes continues in the next packet (messages >= 16 MiB).
//! Packets are parsed straight from the caller's slice; only a packet that
//! spans calls is buffered, and then only its first `keep` bytes (the query
//! text up to `max_header_bytes`, 1 KiB of a server packet: enough for OK,
//! ERR and EOF, while a result row is counted, never stored).
//!
//! The protocol is strictly request/response (no pipelining), so one command
//! is in flight at a time. A client packet with sequence id 0 always starts
//! a new command, which is also how the parser resynchronises after a gap:
//! it drops bytes until a segment that starts with such a packet.
//!
//! A segment cut by the snap length (`--snaplen`) hands the parser its
//! first bytes and then a cut ([`StreamParser::cut`]): the packet it falls
//! in is finished with the bytes kept (its length is known), and when the
//! cut goes past that packet the direction is read blind
//! ([`Framer::blind`]) until the client's next command: a response's bytes
//! and time still count, its status comes from its first packet, and what
//! was not seen (rows of a long result set) is left unset.
//!
//! What is not parsed: TLS (after the client's SSL request) and compressed
//! connections (CLIENT_COMPRESS on both sides) make the parser give up; see
//! [`MysqlParser::gave_up_reason`]. MySQL 8 query attributes in
//! COM_STMT_EXECUTE are not decoded (the parameters are then left empty).

use std::collections::HashMap;
use std::sync::Arc;

use wirelog_record::columns::{push_decimal, TextList};

use crate::fingerprint::{Dialect, Fingerprints};
use crate::{Detail, Dir, ParseConfig, ParseStats, Span, StreamParser, Transaction, TxSink, TxStatus};

pub use wirelog_record::mysql::{MysqlSession, MysqlTx};

/// A connection's session made ready to change: created when none is
/// known, copied first when records still hold it (they keep what was
/// current when their command was sent). A function of the field, not of
/// the parser, so that it is called while a pending record is borrowed.
fn changed_session(session: &mut Option<Arc<MysqlSession>>) -> &mut MysqlSession {
    Arc::make_mut(session.get_or_insert_with(Default::default))
}

/// Why the parser stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GiveUp {
    /// The client asked for TLS (SSL request packet).
    Tls,
    /// Both sides negotiated CLIENT_COMPRESS.
    Compressed,
}

const CLIENT_CONNECT_WITH_DB: u32 = 0x8;
const CLIENT_COMPRESS: u32 = 0x20;
const CLIENT_PROTOCOL_41: u32 = 0x200;
const CLIENT_SSL: u32 = 0x800;
const CLIENT_SECURE_CONNECTION: u32 = 0x8000;
const CLIENT_PLUGIN_AUTH_LENENC: u32 = 0x20_0000;
const CLIENT_DEPRECATE_EOF: u32 = 0x100_0000;
const SERVER_MORE_RESULTS_EXISTS: u16 = 0x0008;
const MAX_PAYLOAD: usize = 0xff_ffff;
/// Server packets kept when they span calls: OK, ERR (message <= 512 bytes),
/// EOF and the greeting fit.
const SERVER_KEEP: usize = 1024;
/// Prepared statements remembered per connection.
const MAX_STMTS: usize = 4096;

const COM_QUIT: u8 = 0x01;
const COM_INIT_DB: u8 = 0x02;
const COM_QUERY: u8 = 0x03;
const COM_FIELD_LIST: u8 = 0x04;
const COM_STATISTICS: u8 = 0x09;
const COM_CHANGE_USER: u8 = 0x11;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;
const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
const COM_STMT_CLOSE: u8 = 0x19;
const COM_STMT_RESET: u8 = 0x1a;
const COM_STMT_FETCH: u8 = 0x1c;
/// Internal marker for the handshake's transaction.
const LOGIN: u8 = 0xff;
/// Internal marker for a response whose command was not seen.
const UNKNOWN: u8 = 0xfe;

fn command_name(cmd: u8) -> &'static str {
    const NAMES: [&str; 32] = [
        "sleep",
        "quit",
        "init_db",
        "query",
        "field_list",
        "create_db",
        "drop_db",
        "refresh",
        "shutdown",
        "statistics",
        "process_info",
        "connect",
        "process_kill",
        "debug",
        "ping",
        "time",
        "delayed_insert",
        "change_user",
        "binlog_dump",
        "table_dump",
        "connect_out",
        "register_slave",
        "stmt_prepare",
        "stmt_execute",
        "stmt_send_long_data",
        "stmt_close",
        "stmt_reset",
        "set_option",
        "stmt_fetch",
        "daemon",
        "binlog_dump_gtid",
        "reset_connection",
    ];
    match cmd {
        LOGIN => "login",
        UNKNOWN => "unknown",
        c => NAMES.get(c as usize).copied().unwrap_or("unknown"),
    }
}

/// Commands the server never answers.
fn no_response(cmd: u8) -> bool {
    matches!(cmd, COM_QUIT | COM_STMT_CLOSE | COM_STMT_SEND_LONG_DATA)
}

/// Reads a length-encoded integer at `*pos`; None (and `*pos` unchanged) if
/// it does not fit or is the NULL marker.
fn lenenc(p: &[u8], pos: &mut usize) -> Option<u64> {
    let first = *p.get(*pos)?;
    let (n, width) = match first {
        0..=0xfa => (first as u64, 1),
        0xfc => (le(p.get(*pos + 1..*pos + 3)?), 3),
        0xfd => (le(p.get(*pos + 1..*pos + 4)?), 4),
        0xfe => (le(p.get(*pos + 1..*pos + 9)?), 9),
        _ => return None,
    };
    *pos += width;
    Some(n)
}

fn le(b: &[u8]) -> u64 {
    b.iter().rev().fold(0u64, |acc, &x| (acc << 8) | x as u64)
}

fn u16_at(p: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(p.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(p: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(p.get(at..at + 4)?.try_into().ok()?))
}

/// NUL-terminated string at `*pos` (to the end if no NUL).
fn cstr<'a>(p: &'a [u8], pos: &mut usize) -> &'a [u8] {
    let rest = p.get(*pos..).unwrap_or(&[]);
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    *pos += (end + 1).min(rest.len());
    &rest[..end]
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Per-direction packet framing state.
#[derive(Default)]
struct Framer {
    hdr: [u8; 4],
    hdr_len: usize,
    /// Inside a packet's payload, `need` bytes still to come.
    in_packet: bool,
    need: usize,
    len: usize,
    seq: u8,
    keep: usize,
    buf: Vec<u8>,
    first_ns: i64,
    /// After a gap: bytes are dropped until a segment starts a packet.
    hunting: bool,
    /// The previous packet had a 0xffffff payload: this one continues it.
    continued: bool,
    /// A cut (snap length) went past a packet's end: where the next
    /// packets start is not known. The server's bytes count for the
    /// response in flight until the client's next command; the client's
    /// are skipped until a segment starts with a command.
    blind: bool,
}

impl Framer {
    fn reset(&mut self) {
        self.hdr_len = 0;
        self.in_packet = false;
        self.need = 0;
        self.buf.clear();
        self.continued = false;
        self.blind = false;
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Nothing seen yet.
    Init,
    /// Server greeting seen, client handshake response expected.
    Greeted,
    /// Handshake response sent, waiting for the server's OK/ERR.
    Auth,
    Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resp {
    First,
    ColumnDefs(u64),
    ColumnEof,
    Rows,
    PrepareParams { left: u64, cols: u64 },
    PrepareParamsEof { cols: u64 },
    PrepareCols(u64),
    PrepareColsEof,
    LocalInfile,
    FieldList,
}

/// The command in flight and its record, built where it waits for its
/// response. One per parser, reused from command to command: `open` says
/// whether it holds a command; when not, its record is the default that
/// `emit` left (nothing to drop, no fields to write again but the
/// command's own).
struct Pending {
    open: bool,
    cmd: u8,
    tx: MysqlTx,
    req: Option<Span>,
    resp: Option<Span>,
    state: Resp,
    error: bool,
    next_seq: u8,
    /// Text of a COM_STMT_PREPARE, remembered under the id of its PREPARE_OK.
    prepare_text: Option<Arc<str>>,
    /// Database named by COM_INIT_DB or `USE`, current once it succeeds.
    new_db: Option<String>,
    /// The response was read blind past a cut (see [`Framer::blind`]):
    /// its end was not seen, so neither were all its rows.
    cut: bool,
}

impl Pending {
    fn idle() -> Self {
        Pending {
            open: false,
            cmd: UNKNOWN,
            tx: MysqlTx::default(),
            req: None,
            resp: None,
            state: Resp::First,
            error: false,
            next_seq: 0,
            prepare_text: None,
            new_db: None,
            cut: false,
        }
    }

    /// The command in flight, if any.
    fn in_flight(&self) -> Option<&Pending> {
        if self.open { Some(self) } else { None }
    }

    fn in_flight_mut(&mut self) -> Option<&mut Pending> {
        if self.open { Some(self) } else { None }
    }

    /// Starts command `cmd` in the idle record: only what differs from
    /// what `emit` left is written (its record's other fields are the
    /// default, its `prepare_text` and `new_db` none).
    /// The connection's session (database, user, server version) goes
    /// into its record as it is now: one reference to it.
    fn start(&mut self, cmd: u8, req: Option<Span>, next_seq: u8, session: &Option<Arc<MysqlSession>>) -> &mut Pending {
        debug_assert!(!self.open && self.tx == MysqlTx::default() && self.prepare_text.is_none() && self.new_db.is_none());
        self.open = true;
        self.cmd = cmd;
        self.req = req;
        self.resp = None;
        self.state = Resp::First;
        self.error = false;
        self.next_seq = next_seq;
        self.cut = false;
        self.tx.command = command_name(cmd);
        self.tx.session = session.clone();
        self
    }
}

/// A prepared statement: its text and fingerprint are shared with every
/// execution (no copy per execute).
struct Stmt {
    query: Option<Arc<str>>,
    fingerprint: Option<Arc<str>>,
    num_params: u16,
    /// Parameter types of the last execute that sent them.
    types: Vec<u8>,
}

pub struct MysqlParser {
    cfg: ParseConfig,
    stats: ParseStats,
    fr: [Framer; 2],
    phase: Phase,
    server_caps: Option<u32>,
    client_caps: Option<u32>,
    /// None until known: from the handshake, or learnt from a result set.
    deprecate_eof: Option<bool>,
    /// The connection's database, user and server version, shared with
    /// its records (none until one of them is known).
    session: Option<Arc<MysqlSession>>,
    pending: Pending,
    stmts: HashMap<u32, Stmt>,
    fingerprints: Fingerprints,
    gave_up: Option<GiveUp>,
    /// The sequence id of the client's handshake response: 1, or 2 in a
    /// stream that starts inside TLS (the SSL request, sent in the clear,
    /// was 1).
    login_seq: u8,
}

fn di(dir: Dir) -> usize {
    match dir {
        Dir::ToServer => 0,
        Dir::ToClient => 1,
    }
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

/// This protocol's content probe (see [`crate::detect`]). MySQL/MariaDB
/// is the one protocol parsed here whose server speaks first (handshake
/// v10); HTTP, PostgreSQL, Redis and DNS clients speak first. A greeting
/// as the *originator's* first bytes means the capture missed the
/// handshake and the tracker has the roles backwards:
/// [`Probe::Reversed`](crate::detect::Probe::Reversed).
pub fn probe(dir: Dir, data: &[u8]) -> crate::detect::Probe {
    use crate::detect::Probe;
    if looks_like(dir, data) {
        Probe::Certain
    } else if dir == Dir::ToServer && looks_like(Dir::ToClient, data) {
        Probe::Reversed
    } else {
        Probe::NotForUs
    }
}

/// True when `data`, the first bytes seen in `dir`, look like this protocol:
/// a server greeting (protocol 10, a version string starting with a digit),
/// a client handshake response, or one whole client command packet.
pub fn looks_like(dir: Dir, data: &[u8]) -> bool {
    if data.len() < 5 {
        return false;
    }
    let len = le(&data[..3]) as usize;
    let seq = data[3];
    let p = &data[4..];
    match dir {
        Dir::ToClient => {
            if seq != 0 || p[0] != 0x0a || !(20..=1024).contains(&len) {
                return false;
            }
            let mut pos = 1;
            let v = cstr(p, &mut pos);
            pos < p.len() && !v.is_empty() && v[0].is_ascii_digit() && v.iter().all(|b| b.is_ascii_graphic())
        }
        Dir::ToServer => {
            if seq == 1 {
                // Handshake response: protocol 4.1 caps, 23 zero filler bytes.
                return (32..=4096).contains(&len)
                    && p.len() >= 32
                    && u32_at(p, 0).is_some_and(|c| c & CLIENT_PROTOCOL_41 != 0)
                    && p[9..32].iter().all(|&b| b == 0);
            }
            if seq != 0 || len == 0 || 4 + len != data.len() {
                return false;
            }
            match p[0] {
                COM_QUERY | COM_STMT_PREPARE => {
                    len >= 4
                        && std::str::from_utf8(&p[1..])
                            .is_ok_and(|s| s.chars().all(|c| !c.is_control() || c.is_whitespace()))
                }
                COM_INIT_DB => len >= 2 && p[1..].iter().all(|b| b.is_ascii_graphic()),
                COM_QUIT | COM_PING_CODE | COM_STATISTICS => len == 1,
                _ => false,
            }
        }
    }
}

const COM_PING_CODE: u8 = 0x0e;

/// True when `data`, the first plaintext a client hands its TLS library,
/// is a MySQL handshake response sent after an SSL request: sequence id 2,
/// protocol 4.1 and SSL among the capabilities, zero filler bytes. The
/// filler's last 4 bytes are not looked at: MariaDB's clients put their
/// extended capabilities there (MariaDB's client/server protocol,
/// https://mariadb.com/docs/server/reference/clientserver-protocol/1-connecting/connection,
/// Handshake response packet: "int<4> extended client capabilities"; seen
/// here as `1d 00 00 00` from Debian 12's mariadb client).
pub fn looks_like_login_in_tls(data: &[u8]) -> bool {
    if data.len() < 4 + 32 {
        return false;
    }
    let len = le(&data[..3]) as usize;
    let p = &data[4..];
    data[3] == 2
        && (32..=4096).contains(&len)
        && u32_at(p, 0).is_some_and(|c| c & CLIENT_PROTOCOL_41 != 0 && c & CLIENT_SSL != 0)
        && p[9..28].iter().all(|&b| b == 0)
}

impl MysqlParser {
    /// Heap bytes held for the connection's life beyond the fixed parser
    /// (its statements' shapes and recent texts), for the memory budget.
    pub fn held_bytes(&self) -> usize {
        self.fingerprints.held_bytes()
    }

    pub fn new(cfg: &ParseConfig) -> Self {
        MysqlParser {
            cfg: cfg.clone(),
            stats: ParseStats::default(),
            fr: [Framer::default(), Framer::default()],
            phase: Phase::Init,
            server_caps: None,
            client_caps: None,
            deprecate_eof: None,
            session: None,
            pending: Pending::idle(),
            stmts: HashMap::new(),
            fingerprints: Fingerprints::default(),
            gave_up: None,
            login_seq: 1,
        }
    }

    /// A parser for the plaintext inside a connection's TLS (the TLS
    /// library's view, `capture --tls-plaintext`): the greeting and the
    /// SSL request went in the clear before it, so the stream opens with
    /// the client's handshake response, sequence id 2 (see
    /// [`looks_like_login_in_tls`]). The server's capabilities are not
    /// known; the EOF style is then the client's, or learnt from a result.
    pub fn in_tls(cfg: &ParseConfig) -> Self {
        MysqlParser { login_seq: 2, ..MysqlParser::new(cfg) }
    }

    /// Why the parser gave up, if it did.
    pub fn gave_up_reason(&self) -> Option<GiveUp> {
        self.gave_up
    }

    /// The TLS limits of the connection's configuration: the TLS parser
    /// that takes over after STARTTLS is made with them.
    pub(crate) fn tls_limits(&self) -> crate::tls::TlsLimits {
        self.cfg.tls
    }

    fn keep_for(&self, dir: Dir, len: usize) -> usize {
        let cap = match dir {
            Dir::ToServer => self.cfg.max_header_bytes.max(64),
            Dir::ToClient => SERVER_KEEP,
        };
        len.min(cap)
    }

    /// Text as recorded: redacted if asked, cut to `max_text_bytes`; and its
    /// fingerprint. (Not a method: the record it fills borrows the parser.)
    fn record_text(fingerprints: &mut Fingerprints, cfg: &ParseConfig, raw: &[u8]) -> (Arc<str>, bool, Arc<str>) {
        // `from_utf8` checks a word of ASCII at a time; `from_utf8_lossy`
        // walks its chunks byte by byte (~7 instructions a byte on
        // mysql_text's statements), so it is only called on invalid text.
        let raw = match std::str::from_utf8(raw) {
            Ok(s) => std::borrow::Cow::Borrowed(s),
            Err(_) => String::from_utf8_lossy(raw),
        };
        fingerprints.recorded(&raw, Dialect::Mysql, cfg)
    }

    /// Emits the command in flight (none: nothing), which is then gone.
    /// The record is taken from where it was built, not moved with its
    /// [`Pending`] (a move of each costs a copy of a few hundred bytes),
    /// and the [`Pending`] left idle in place (not dropped, not rebuilt).
    fn emit(&mut self, status: Option<TxStatus>, out: &mut dyn TxSink) {
        let Some(p) = self.pending.in_flight_mut() else {
            return;
        };
        let status = status.unwrap_or(if p.req.is_none() {
            TxStatus::NoRequest
        } else if p.error {
            TxStatus::Error
        } else {
            TxStatus::Ok
        });
        if status == TxStatus::Ok {
            if let Some(db) = p.new_db.take() {
                changed_session(&mut self.session).database = Some(db.into());
            }
        }
        let tx = &mut p.tx;
        // Commands that may carry SQL keep an empty fingerprint when the
        // text is unknown (an execution whose prepare was not seen).
        if tx.fingerprint.is_none() && !matches!(tx.command, "query" | "stmt_prepare" | "stmt_execute") {
            tx.fingerprint = Some(self.fingerprints.group(tx.command));
        }
        out.push(Transaction {
            request: p.req,
            response: p.resp,
            status,
            detail: Detail::Mysql(std::mem::take(&mut p.tx)),
        });
        // Left idle in place for the next command (see [`Pending::start`]).
        p.prepare_text = None;
        p.new_db = None;
        p.open = false;
    }

    /// Emits the command in flight, if any: a finished response is never
    /// left pending, so one that began is partial; none at all is unanswered.
    fn flush_pending(&mut self, out: &mut dyn TxSink) {
        if let Some(p) = self.pending.in_flight_mut() {
            let status = match (p.req, p.resp) {
                (Some(_), None) => Some(TxStatus::NoResponse),
                // Read blind past a cut: its first packet told OK, ERR or a
                // result set (`emit` takes Ok or Error from it).
                (Some(_), Some(_)) if p.cut => (!p.error && !Self::answered(p)).then_some(TxStatus::Partial),
                (Some(_), Some(_)) if !p.error => Some(TxStatus::Partial),
                _ => None,
            };
            if p.cut {
                Self::end_cut(p);
            }
            self.emit(status, out);
        }
    }

    /// Whether the response's first packet was read (OK, ERR, a result
    /// set's header or more): what a response read blind takes its status from.
    fn answered(p: &Pending) -> bool {
        p.state != Resp::First || p.error || p.tx.num_fields.is_some() || p.tx.affected_rows.is_some()
    }

    /// A response read blind past a cut ends (the client's next command, or
    /// the connection's end): the counts its unseen packets would have
    /// added to are unknown, so they are left unset rather than wrong (a
    /// response whose end was seen is never left pending: one with counts
    /// here had more to come, more results after an OK or more rows).
    fn end_cut(p: &mut Pending) {
        p.tx.num_rows = None;
        p.tx.affected_rows = None;
    }

    /// The packet gathered in `dir`'s buffer (whole, or as much as a cut
    /// left) to [`Self::packet`]; the buffer keeps its capacity.
    fn gathered_packet(&mut self, dir: Dir, last_ns: i64, out: &mut dyn TxSink) {
        let f = &mut self.fr[di(dir)];
        let buf = std::mem::take(&mut f.buf);
        let (seq, len, first_ns) = (f.seq, f.len, f.first_ns);
        self.packet(dir, seq, len, &buf, (first_ns, last_ns), out);
        let f = &mut self.fr[di(dir)];
        f.buf = buf;
        f.buf.clear();
    }

    fn packet(
        &mut self,
        dir: Dir,
        seq: u8,
        len: usize,
        payload: &[u8],
        (first_ns, last_ns): (i64, i64),
        out: &mut dyn TxSink,
    ) {
        let d = di(dir);
        let bytes = 4 + len as u64;
        let continued = self.fr[d].continued;
        self.fr[d].continued = len == MAX_PAYLOAD;
        if continued {
            // The rest of a >= 16 MiB message: only its bytes count.
            if let Some(p) = self.pending.in_flight_mut() {
                let span = if dir == Dir::ToServer { &mut p.req } else { &mut p.resp };
                add_span(span, first_ns, last_ns, bytes);
                p.next_seq = seq.wrapping_add(1);
            }
            return;
        }
        match dir {
            Dir::ToServer => self.client_packet(seq, len, payload, first_ns, last_ns, out),
            Dir::ToClient => self.server_packet(seq, len, payload, first_ns, last_ns, out),
        }
    }

    fn client_packet(
        &mut self,
        seq: u8,
        len: usize,
        p: &[u8],
        first_ns: i64,
        last_ns: i64,
        out: &mut dyn TxSink,
    ) {
        let bytes = 4 + len as u64;
        match self.phase {
            Phase::Init | Phase::Greeted if seq == self.login_seq => return self.handshake_response(len, p, first_ns, last_ns, out),
            Phase::Init if seq == 0 => self.phase = Phase::Command,
            Phase::Auth if seq != 0 => {
                // More authentication data (auth switch response, ...).
                if let Some(pd) = self.pending.in_flight_mut() {
                    add_span(&mut pd.req, first_ns, last_ns, bytes);
                    pd.next_seq = seq.wrapping_add(1);
                }
                return;
            }
            Phase::Auth => {
                // A command before the server's OK: the OK was not seen.
                self.flush_pending(out);
                self.phase = Phase::Command;
            }
            _ => {}
        }
        if seq != 0 {
            // Continuation of the command in flight (LOCAL INFILE data,
            // COM_CHANGE_USER auth exchange).
            match self.pending.in_flight_mut() {
                Some(pd) if pd.req.is_some() => {
                    add_span(&mut pd.req, first_ns, last_ns, bytes);
                    // The server numbers its next packet after the client's.
                    pd.next_seq = seq.wrapping_add(1);
                }
                _ => {
                    self.stats.malformed += 1;
                    self.stats.unparsed_bytes += bytes;
                }
            }
            return;
        }
        // The client's next command: the response before it is over, and
        // the server's next packet starts the next response.
        if self.fr[1].blind {
            self.fr[1].reset();
        }
        self.flush_pending(out);
        let Some(&cmd) = p.first() else {
            self.stats.malformed += 1;
            return;
        };
        let arg = p.get(1..).unwrap_or(&[]);
        // The record is made where it waits for its response and filled
        // there (no `Pending` or `MysqlTx` moved into place). Nothing is
        // pending after `flush_pending`: the idle record is started in place.
        let req = Some(Span { first_ns, last_ns, bytes });
        let pd = self.pending.start(cmd, req, 1, &self.session);
        match cmd {
            COM_QUERY | COM_STMT_PREPARE => {
                let (t, cut, fp) = Self::record_text(&mut self.fingerprints, &self.cfg, arg);
                if cmd == COM_QUERY {
                    pd.new_db = use_target(arg);
                } else {
                    pd.prepare_text = Some(Arc::clone(&t));
                }
                pd.tx.query = Some(t);
                pd.tx.query_truncated = cut || len > p.len();
                pd.tx.fingerprint = Some(fp);
            }
            COM_INIT_DB | COM_FIELD_LIST => {
                let mut pos = 0;
                let name = text(cstr(arg, &mut pos));
                if cmd == COM_INIT_DB {
                    pd.new_db = Some(name.clone());
                }
                pd.tx.query = Some(name.into());
            }
            COM_CHANGE_USER => {
                let mut pos = 0;
                let user: Arc<str> = text(cstr(arg, &mut pos)).into();
                changed_session(&mut self.session).user = Some(user);
                // The record, started with the user before, takes the new one.
                pd.tx.session = self.session.clone();
            }
            COM_STMT_EXECUTE | COM_STMT_CLOSE | COM_STMT_SEND_LONG_DATA | COM_STMT_RESET | COM_STMT_FETCH => {
                if let Some(id) = u32_at(arg, 0) {
                    pd.tx.statement_id = Some(id);
                    if let Some(st) = self.stmts.get_mut(&id) {
                        pd.tx.query = st.query.clone();
                        pd.tx.fingerprint = st.fingerprint.clone();
                        if cmd == COM_STMT_EXECUTE {
                            pd.tx.params = exec_params(arg, st, self.cfg.redact, self.cfg.max_text_bytes);
                        }
                    }
                    if cmd == COM_STMT_CLOSE {
                        self.stmts.remove(&id);
                    }
                }
            }
            _ => {}
        }
        if no_response(cmd) {
            self.emit(Some(TxStatus::Ok), out);
        }
    }

    fn handshake_response(&mut self, len: usize, p: &[u8], first_ns: i64, last_ns: i64, out: &mut dyn TxSink) {
        if self.fr[1].blind {
            self.fr[1].reset();
        }
        self.flush_pending(out);
        // A packet cut by the snap length (`p` shorter than `len`): a name
        // is taken only when its terminating NUL was captured.
        let whole = p.len() >= len;
        let ended = |p: &[u8], pos: usize| whole || p.get(pos..).is_some_and(|r| r.contains(&0));
        let Some(caps16) = u16_at(p, 0) else {
            self.stats.malformed += 1;
            return;
        };
        let mut caps = caps16 as u32;
        let mut pos;
        if caps & CLIENT_PROTOCOL_41 != 0 {
            caps = u32_at(p, 0).unwrap_or(caps);
            if caps & CLIENT_SSL != 0 && len <= 32 {
                // SSL request: the rest of the connection is TLS.
                self.gave_up = Some(GiveUp::Tls);
                return;
            }
            pos = 32;
        } else {
            if caps & CLIENT_SSL != 0 && len <= 5 {
                self.gave_up = Some(GiveUp::Tls);
                return;
            }
            pos = 5;
        }
        let user_ended = ended(p, pos);
        let user = text(cstr(p, &mut pos));
        if caps & CLIENT_PROTOCOL_41 != 0 {
            if caps & CLIENT_PLUGIN_AUTH_LENENC != 0 {
                let n = lenenc(p, &mut pos).unwrap_or(0);
                pos = pos.saturating_add(n as usize);
            } else if caps & CLIENT_SECURE_CONNECTION != 0 {
                let n = p.get(pos).copied().unwrap_or(0) as usize;
                pos += 1 + n;
            } else {
                cstr(p, &mut pos);
            }
        } else {
            cstr(p, &mut pos);
        }
        let db = if caps & CLIENT_CONNECT_WITH_DB != 0 && pos < p.len() && ended(p, pos) {
            let d = cstr(p, &mut pos);
            (!d.is_empty()).then(|| text(d))
        } else {
            None
        };
        self.client_caps = Some(caps);
        let both = caps & self.server_caps.unwrap_or(caps);
        self.deprecate_eof = Some(both & CLIENT_DEPRECATE_EOF != 0);
        if user_ended {
            changed_session(&mut self.session).user = Some(user.into());
        }
        if let Some(db) = db {
            changed_session(&mut self.session).database = Some(db.into());
        }
        let req = Some(Span { first_ns, last_ns, bytes: 4 + len as u64 });
        self.pending.start(LOGIN, req, self.login_seq + 1, &self.session);
        self.phase = Phase::Auth;
    }

    fn greeting(&mut self, p: &[u8]) {
        let mut pos = 1;
        let version = text(cstr(p, &mut pos)).into();
        changed_session(&mut self.session).server_version = Some(version);
        // conn id (4), auth data part 1 (8), filler (1), caps low (2),
        // charset (1), status (2), caps high (2).
        pos += 13;
        let lo = u16_at(p, pos).unwrap_or(0) as u32;
        let hi = u16_at(p, pos + 5).unwrap_or(0) as u32;
        self.server_caps = Some(lo | (hi << 16));
        self.phase = Phase::Greeted;
    }

    fn server_packet(
        &mut self,
        seq: u8,
        len: usize,
        p: &[u8],
        first_ns: i64,
        last_ns: i64,
        out: &mut dyn TxSink,
    ) {
        let bytes = 4 + len as u64;
        let first = p.first().copied();
        if self.phase == Phase::Init && seq == 0 && first == Some(0x0a) && !self.pending.open {
            self.greeting(p);
            return;
        }
        if !self.pending.open {
            if seq == 1 || (self.phase == Phase::Init && seq == 0 && first == Some(0xff)) {
                // A response whose command was not seen (capture started
                // mid-stream, or a gap), or the server refusing the connection.
                self.pending.start(UNKNOWN, None, seq, &self.session);
                if self.phase == Phase::Init {
                    self.phase = Phase::Command;
                }
            } else {
                self.stats.malformed += 1;
                self.stats.unparsed_bytes += bytes;
                return;
            }
        }
        let deprecate = self.deprecate_eof;
        let Some(pd) = self.pending.in_flight_mut() else {
            return;
        };
        if seq != pd.next_seq {
            self.stats.malformed += 1;
        }
        pd.next_seq = seq.wrapping_add(1);
        add_span(&mut pd.resp, first_ns, last_ns, bytes);
        let first = first.unwrap_or(0);
        let is_eof = first == 0xfe && len < 9;
        let mut done = false;
        let mut learnt_deprecate = None;
        match pd.state {
            Resp::First => {
                if pd.cmd == LOGIN {
                    match first {
                        0x00 => done = true,
                        0xff => {
                            parse_err(p, &mut pd.tx);
                            pd.error = true;
                            done = true;
                        }
                        // Auth switch request / more auth data: keep waiting.
                        _ => {}
                    }
                } else if let Some(n) = column_count(pd.cmd, first) {
                    // A result set's column count in one byte, nearly every
                    // response with rows: what the chain below ends in for
                    // it (the length-encoded count), told first.
                    pd.tx.num_fields = Some(n);
                    pd.tx.num_rows.get_or_insert(0);
                    pd.state = Resp::ColumnDefs(n);
                } else if first == 0xff {
                    parse_err(p, &mut pd.tx);
                    pd.error = true;
                    done = true;
                } else if first == 0x00 && pd.cmd == COM_STMT_PREPARE && len >= 12 {
                    let id = u32_at(p, 1).unwrap_or(0);
                    let cols = u16_at(p, 5).unwrap_or(0) as u64;
                    let params = u16_at(p, 7).unwrap_or(0);
                    pd.tx.statement_id = Some(id);
                    pd.tx.num_fields = Some(cols);
                    if self.stmts.len() >= MAX_STMTS {
                        // A client that never closes statements: start over
                        // rather than grow without bound.
                        self.stmts.clear();
                    }
                    self.stmts.insert(
                        id,
                        Stmt {
                            query: pd.prepare_text.take(),
                            fingerprint: pd.tx.fingerprint.clone(),
                            num_params: params,
                            types: Vec::new(),
                        },
                    );
                    pd.state = if params > 0 {
                        Resp::PrepareParams { left: params as u64, cols }
                    } else if cols > 0 {
                        Resp::PrepareCols(cols)
                    } else {
                        done = true;
                        Resp::First
                    };
                } else if first == 0x00 || (is_eof && pd.cmd != COM_FIELD_LIST) {
                    let more = if first == 0x00 { parse_ok(p, &mut pd.tx) } else { eof_more(p) };
                    done = !more;
                } else if first == 0xfb && pd.cmd == COM_QUERY {
                    pd.state = Resp::LocalInfile;
                } else if pd.cmd == COM_FIELD_LIST {
                    if is_eof {
                        done = true;
                    } else {
                        pd.tx.num_fields = Some(1);
                        pd.state = Resp::FieldList;
                    }
                } else if pd.cmd == COM_STATISTICS {
                    done = true;
                } else {
                    let mut pos = 0;
                    match lenenc(p, &mut pos) {
                        Some(n) if n > 0 => {
                            pd.tx.num_fields = Some(n);
                            pd.tx.num_rows.get_or_insert(0);
                            pd.state = Resp::ColumnDefs(n);
                        }
                        _ => {
                            self.stats.malformed += 1;
                            done = true;
                        }
                    }
                }
            }
            Resp::ColumnDefs(left) => {
                pd.state = if left > 1 {
                    Resp::ColumnDefs(left - 1)
                } else if deprecate == Some(true) {
                    Resp::Rows
                } else {
                    Resp::ColumnEof
                };
            }
            Resp::ColumnEof => {
                if is_eof {
                    pd.state = Resp::Rows;
                    learnt_deprecate = Some(false);
                } else if first == 0xff {
                    parse_err(p, &mut pd.tx);
                    pd.error = true;
                    done = true;
                } else {
                    // No EOF after the column definitions: the server
                    // deprecated EOF (handshake not seen). This is a row.
                    learnt_deprecate = Some(true);
                    pd.state = Resp::Rows;
                    *pd.tx.num_rows.get_or_insert(0) += 1;
                }
            }
            Resp::Rows => {
                if ends_rows(first, len, deprecate) {
                    if more_results(p, len, deprecate, &mut pd.tx) {
                        pd.state = Resp::First;
                    } else {
                        done = true;
                    }
                } else if first == 0xff {
                    parse_err(p, &mut pd.tx);
                    pd.error = true;
                    done = true;
                } else {
                    *pd.tx.num_rows.get_or_insert(0) += 1;
                }
            }
            Resp::PrepareParams { left, cols } => {
                pd.state = if left > 1 {
                    Resp::PrepareParams { left: left - 1, cols }
                } else if deprecate == Some(true) {
                    if cols > 0 {
                        Resp::PrepareCols(cols)
                    } else {
                        done = true;
                        Resp::First
                    }
                } else {
                    Resp::PrepareParamsEof { cols }
                };
            }
            Resp::PrepareParamsEof { cols } => {
                if cols > 0 {
                    pd.state = Resp::PrepareCols(cols);
                } else {
                    done = true;
                }
            }
            Resp::PrepareCols(left) => {
                if left > 1 {
                    pd.state = Resp::PrepareCols(left - 1);
                } else if deprecate == Some(true) {
                    done = true;
                } else {
                    pd.state = Resp::PrepareColsEof;
                }
            }
            Resp::PrepareColsEof => done = true,
            Resp::LocalInfile => match first {
                0x00 => {
                    done = !parse_ok(p, &mut pd.tx);
                }
                0xff => {
                    parse_err(p, &mut pd.tx);
                    pd.error = true;
                    done = true;
                }
                _ => self.stats.malformed += 1,
            },
            Resp::FieldList => {
                if is_eof {
                    done = true;
                } else if first == 0xff {
                    parse_err(p, &mut pd.tx);
                    pd.error = true;
                    done = true;
                } else {
                    *pd.tx.num_fields.get_or_insert(0) += 1;
                }
            }
        }
        if learnt_deprecate.is_some() && self.deprecate_eof.is_none() {
            self.deprecate_eof = learnt_deprecate;
        }
        if done {
            let Some(pd) = self.pending.in_flight() else {
                return;
            };
            let login = pd.cmd == LOGIN;
            let ok = !pd.error;
            self.emit(None, out);
            if login {
                self.phase = Phase::Command;
                let both = self.client_caps.unwrap_or(0) & self.server_caps.unwrap_or(0);
                if ok && both & CLIENT_COMPRESS != 0 {
                    self.gave_up = Some(GiveUp::Compressed);
                }
            }
        }
    }

    /// Packets of a result set that nothing is read from, skipped by their
    /// headers: the column count in one byte (a response's first packet, as
    /// `server_packet` tells it first), the column definitions (counted
    /// down), the classic EOF after them (its first byte and length tell
    /// it), the rows (counted) and the EOF/OK that ends the last result, as
    /// many as are whole at the start of `data` (server side, command in
    /// flight), one span update for all of them, their contents never read
    /// beyond the first byte but the final EOF/OK's. The response's packets
    /// are framed in this one loop, not one call of [`Self::packet`] each
    /// (its entry alone, ~32 instructions a call, costs more than a row
    /// here; a statement's 2.9 calls on mysql_text became 1.1). Stops
    /// at what the general path must see: a packet cut by the segment's
    /// end, an empty or >= 16 MiB one, a first packet that is not a column
    /// count, an ERR, a column EOF that is not one (a row when the server
    /// deprecated EOF unannounced), an EOF/OK announcing more results, or a
    /// sequence id out of order (counted as malformed there). Returns the
    /// bytes consumed; a response ended here is emitted.
    fn skip_run(&mut self, data: &[u8], ts_ns: i64, out: &mut dyn TxSink) -> usize {
        let deprecate = self.deprecate_eof;
        let Some(pd) = self.pending.in_flight_mut() else {
            return 0;
        };
        let (mut at, mut seq) = (0usize, pd.next_seq);
        // The header is read as one little-endian word: the low three
        // bytes are the length, the high one the sequence id. A packet
        // skipped here is neither empty nor >= 16 MiB (`len - 1 <
        // MAX_PAYLOAD - 1`), has the expected sequence id and is whole in
        // `data`.
        let header = |at: usize, seq: u8| -> Option<(usize, u8)> {
            let (h, &first) = (data.get(at..at + 4)?, data.get(at + 4)?);
            let w = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
            let len = (w & 0x00ff_ffff) as usize;
            let whole = len.wrapping_sub(1) < MAX_PAYLOAD - 1 && (w >> 24) as u8 == seq && data.len() - at - 4 >= len;
            whole.then_some((len, first))
        };
        // Counted down in a local, written back once (not a store a packet).
        let mut state = pd.state;
        // The column count, as `server_packet` tells it first (a login's
        // answer, a field list's and a statistics' are not result sets).
        if state == Resp::First {
            if let Some((len, Some(n))) = header(at, seq).map(|(len, first)| (len, column_count(pd.cmd, first))) {
                pd.tx.num_fields = Some(n);
                pd.tx.num_rows.get_or_insert(0);
                state = Resp::ColumnDefs(n);
                at += 4 + len;
                seq = seq.wrapping_add(1);
            }
        }
        // The column definitions and the EOF after them, as `server_packet`
        // counts them down and tells the EOF (`is_eof`), the EOF style
        // learnt from it.
        while matches!(state, Resp::ColumnDefs(_) | Resp::ColumnEof) {
            let Some((len, first)) = header(at, seq) else {
                break;
            };
            state = match state {
                Resp::ColumnDefs(left) if left > 1 => Resp::ColumnDefs(left - 1),
                Resp::ColumnDefs(_) if deprecate == Some(true) => Resp::Rows,
                Resp::ColumnDefs(_) => Resp::ColumnEof,
                _ if first == 0xfe && len < 9 => {
                    if self.deprecate_eof.is_none() {
                        self.deprecate_eof = Some(false);
                    }
                    Resp::Rows
                }
                _ => break,
            };
            at += 4 + len;
            seq = seq.wrapping_add(1);
        }
        pd.state = state;
        let mut rows = 0u64;
        if state == Resp::Rows {
            // The rows: a row's first byte is not 0xfe/0xff (`>= 0xfe`).
            // Walked as the slice of what is left, whose length is the one
            // bound to check: one test for the header and first byte, one
            // for the row's end (no offset arithmetic to guard).
            // The header is one word with the expected sequence id xored
            // out of its high byte: what is left is the length when the id
            // matches and at least 2^24 when not, so one range test tells
            // both (a load and an xor a row, not four byte loads).
            let mut rest = &data[at..];
            let mut expect = u32::from(seq) << 24;
            while let [h0, h1, h2, h3, first, ..] = *rest {
                let len = u32::from_le_bytes([h0, h1, h2, h3]) ^ expect;
                if len.wrapping_sub(1) >= MAX_PAYLOAD as u32 - 1 || first >= 0xfe {
                    break;
                }
                let Some(next) = rest.get(4 + len as usize..) else {
                    break;
                };
                rest = next;
                rows += 1;
                expect = expect.wrapping_add(1 << 24);
            }
            seq = (expect >> 24) as u8;
            at = data.len() - rest.len();
        }
        if rows > 0 {
            *pd.tx.num_rows.get_or_insert(0) += rows;
        }
        // The EOF (classic) or OK (EOF deprecated) that ends the rows, as
        // `server_packet` reads it in `Resp::Rows`: the response is done
        // unless it announces more results (left to the general path).
        let mut done = false;
        if state == Resp::Rows {
            if let Some((len, _)) = header(at, seq).filter(|&(len, first)| ends_rows(first, len, deprecate)) {
                if !more_results(&data[at + 4..at + 4 + len], len, deprecate, &mut pd.tx) {
                    done = true;
                    at += 4 + len;
                    seq = seq.wrapping_add(1);
                }
            }
        }
        if at > 0 {
            pd.next_seq = seq;
            add_span(&mut pd.resp, ts_ns, ts_ns, at as u64);
        }
        if done {
            self.emit(None, out);
        }
        at
    }

    /// Is a server packet of sequence id `seq` and `len` bytes, starting
    /// with `first`, the next row or column definition of the result set
    /// being read (as [`MysqlParser::skip_run`] tells them), whose contents
    /// past the first byte nothing reads?
    fn row_next(&self, seq: u8, len: usize, first: Option<u8>) -> bool {
        let Some(pd) = self.pending.in_flight() else {
            return false;
        };
        let skipped = match pd.state {
            Resp::Rows => first.is_some_and(|b| !matches!(b, 0xfe | 0xff)),
            Resp::ColumnDefs(_) => true,
            _ => false,
        };
        skipped && seq == pd.next_seq && len < MAX_PAYLOAD && !self.fr[1].continued
    }

    /// Does a client segment read blind start with a command packet
    /// (sequence id 0, a command byte, no more bytes than the packet)?
    fn starts_command(&self, data: &[u8]) -> bool {
        data.len() >= 5 && data[3] == 0 && data[4] <= 0x1f && 4 + le(&data[..3]) as usize >= data.len()
    }

    /// `n` bytes of `dir` past a cut, whose packets are not known: the
    /// server's count for the response in flight (its size and last
    /// time), the client's for the command in flight; else not parsed.
    fn blind_bytes(&mut self, dir: Dir, ts_ns: i64, n: u64) {
        match (dir, self.pending.in_flight_mut()) {
            (Dir::ToClient, Some(p)) => {
                p.cut = true;
                add_span(&mut p.resp, ts_ns, ts_ns, n);
            }
            (Dir::ToServer, Some(p)) if p.req.is_some() => add_span(&mut p.req, ts_ns, ts_ns, n),
            _ => self.stats.unparsed_bytes += n,
        }
    }

    /// After a gap, may `data` (the next bytes of `dir`) start a packet?
    fn resync_ok(&self, dir: Dir, data: &[u8]) -> bool {
        if data.len() < 5 {
            return false;
        }
        let len = le(&data[..3]) as usize;
        let seq = data[3];
        match dir {
            Dir::ToServer => {
                seq == 0
                    && len >= 1
                    && data[4] <= 0x1f
                    && (4 + len == data.len() || (data[4] == COM_QUERY && 4 + len > data.len()))
            }
            Dir::ToClient => seq == 1 && len >= 1 && self.pending.in_flight().is_some_and(|p| p.resp.is_none()),
        }
    }
}

/// `USE db` (optionally back-quoted): the database it selects.
/// The first byte alone settles most statements: one that starts with a
/// printable ASCII byte other than `u` is not `USE`. That test is made
/// where the command is read (inlined: the call it was cost more than the
/// test), the rest in [`use_target_of`].
#[inline(always)]
fn use_target(q: &[u8]) -> Option<String> {
    if q.first().is_some_and(|&b| b > b' ' && b < 0x80 && b | 0x20 != b'u') {
        return None;
    }
    use_target_of(q)
}

/// [`use_target`] past its first byte's test.
fn use_target_of(q: &[u8]) -> Option<String> {
    // Most statements are not `USE`: told from their first word before
    // the whole text is checked as UTF-8 and trimmed. `str::trim` also
    // takes vertical tab and non-ASCII white space: a text that starts
    // with a non-ASCII byte takes the whole path.
    let start = q.iter().position(|&b| !matches!(b, b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | b' '))?;
    if q[start] < 0x80 && !q.get(start..start + 4).is_some_and(|w| w.eq_ignore_ascii_case(b"use ")) {
        return None;
    }
    let s = std::str::from_utf8(q).ok()?.trim();
    let rest = s.get(..4).filter(|p| p.eq_ignore_ascii_case("use ")).map(|_| &s[4..])?;
    let db = rest.trim().trim_end_matches(';').trim().trim_matches('`');
    (!db.is_empty() && !db.contains(char::is_whitespace)).then(|| db.to_string())
}

/// OK packet: affected rows, last insert id; true if more results follow.
fn parse_ok(p: &[u8], tx: &mut MysqlTx) -> bool {
    let mut pos = 1;
    let Some(affected) = lenenc(p, &mut pos) else {
        return false;
    };
    let Some(id) = lenenc(p, &mut pos) else {
        return false;
    };
    if p.first() == Some(&0x00) {
        tx.affected_rows = Some(tx.affected_rows.unwrap_or(0) + affected);
        tx.insert_id = Some(id);
    }
    u16_at(p, pos).is_some_and(|s| s & SERVER_MORE_RESULTS_EXISTS != 0)
}

/// A response's first packet that starts a result set: its first byte a
/// column count in one byte (0x01..=0xfa), for a command whose answer can be
/// one (not a login's, a field list's or a statistics'). The column count;
/// `server_packet` and `skip_run` both frame by it.
#[inline(always)]
fn column_count(cmd: u8, first: u8) -> Option<u64> {
    (matches!(first, 0x01..=0xfa) && !matches!(cmd, LOGIN | COM_FIELD_LIST | COM_STATISTICS)).then_some(u64::from(first))
}

/// Whether a packet in a result set's rows (first byte `first`, `len`
/// bytes) is the EOF (classic: under 9 bytes) or OK (EOF deprecated) that
/// ends them; `server_packet` and `skip_run` both frame by it.
#[inline(always)]
fn ends_rows(first: u8, len: usize, deprecate: Option<bool>) -> bool {
    first == 0xfe && if deprecate == Some(true) { len < MAX_PAYLOAD } else { len < 9 }
}

/// Whether the packet `p` (of `len` bytes by its header) that [`ends_rows`]
/// announces more results (`SERVER_MORE_RESULTS_EXISTS`); an OK's fields
/// are read into `tx`.
#[inline(always)]
fn more_results(p: &[u8], len: usize, deprecate: Option<bool>, tx: &mut MysqlTx) -> bool {
    if len < 9 && deprecate != Some(true) {
        eof_more(p)
    } else {
        parse_ok(p, tx)
    }
}

/// Classic EOF packet: true if more results follow.
fn eof_more(p: &[u8]) -> bool {
    u16_at(p, 3).is_some_and(|s| s & SERVER_MORE_RESULTS_EXISTS != 0)
}

/// ERR packet: code, SQL state (protocol 4.1 `#XXXXX`), message.
fn parse_err(p: &[u8], tx: &mut MysqlTx) {
    tx.error_code = u16_at(p, 1);
    let mut msg = p.get(3..).unwrap_or(&[]);
    if msg.first() == Some(&b'#') && msg.len() >= 6 {
        tx.sql_state = Some(text(&msg[1..6]));
        msg = &msg[6..];
    }
    tx.error_message = Some(text(msg));
}

/// Parameters of a COM_STMT_EXECUTE (`arg` is the payload after the command
/// byte): decoded as text for the common types, `?` each when redacting;
/// written once, into one joined text (no string per parameter), each cut
/// to what is left of `budget`.
fn exec_params(arg: &[u8], st: &mut Stmt, redact: bool, budget: usize) -> TextList {
    let mut out = TextList::default();
    let n = st.num_params as usize;
    if n == 0 {
        return out;
    }
    // stmt id (4), flags (1), iteration count (4), NULL bitmap, bound flag.
    let bitmap_at = 9;
    let bitmap_len = n.div_ceil(8);
    let Some(bitmap) = arg.get(bitmap_at..bitmap_at + bitmap_len) else {
        return out;
    };
    let mut pos = bitmap_at + bitmap_len;
    let Some(&bound) = arg.get(pos) else {
        return out;
    };
    pos += 1;
    if bound == 1 {
        let Some(types) = arg.get(pos..pos + 2 * n) else {
            return out;
        };
        st.types = types.to_vec();
        pos += 2 * n;
    }
    if st.types.len() != 2 * n {
        return out;
    }
    // The text in one allocation: a value's text is at most 4 times its
    // bytes (an 8-byte float's shortest text is at most 24 characters; a
    // string's is its bytes), NULLs and commas at most 5 each; and never
    // more than the budget lets the items take.
    let values = arg.len().saturating_sub(pos);
    out.reserve_text(values.saturating_mul(4).min(budget).saturating_add(5 * n));
    let mut used = 0usize;
    for i in 0..n {
        if bitmap[i / 8] & (1 << (i % 8)) != 0 {
            // Kept whole and not counted against the budget, redacted or not.
            out.push("NULL");
            continue;
        }
        let t = st.types[2 * i];
        let unsigned = st.types[2 * i + 1] & 0x80 != 0;
        let fixed = |w: usize, pos: &mut usize| -> Option<u64> {
            let v = le(arg.get(*pos..*pos + w)?);
            *pos += w;
            Some(v)
        };
        // The value, or where its text is in `arg` (`None`: cut short).
        enum P<'b> {
            Int(u64, bool),
            Float(f64, bool),
            Date([u8; 7], bool),
            Str(&'static str),
            Bytes(&'b [u8]),
        }
        let int = |v: u64, bits: u32| -> P<'_> {
            if unsigned {
                P::Int(v, false)
            } else {
                // Sign-extended from `bits`.
                let shift = 64 - bits;
                let x = ((v << shift) as i64) >> shift;
                P::Int(x.unsigned_abs(), x < 0)
            }
        };
        let v = match t {
            1 => fixed(1, &mut pos).map(|v| int(v, 8)),
            2 | 13 => fixed(2, &mut pos).map(|v| int(v, 16)),
            3 | 9 => fixed(4, &mut pos).map(|v| int(v, 32)),
            8 => fixed(8, &mut pos).map(|v| int(v, 64)),
            4 => fixed(4, &mut pos).map(|v| P::Float(f64::from(f32::from_bits(v as u32)), true)),
            5 => fixed(8, &mut pos).map(|v| P::Float(f64::from_bits(v), false)),
            6 => Some(P::Str("NULL")),
            7 | 10 | 12 => {
                let l = *arg.get(pos).unwrap_or(&0) as usize;
                let b = arg.get(pos + 1..pos + 1 + l);
                pos += 1 + l;
                b.map(|b| {
                    let mut d = [0u8; 7];
                    for (k, x) in d.iter_mut().enumerate() {
                        *x = b.get(k).copied().unwrap_or(0);
                    }
                    if b.len() < 2 {
                        // No whole year: 0000.
                        d[..2].fill(0);
                    }
                    P::Date(d, l > 4)
                })
            }
            11 => {
                let l = *arg.get(pos).unwrap_or(&0) as usize;
                pos += 1 + l;
                Some(P::Str("time"))
            }
            _ => {
                // Decimal, strings, blobs, JSON, enum, set, bit, geometry.
                let l = lenenc(arg, &mut pos).map(|l| l as usize);
                l.and_then(|l| {
                    let b = arg.get(pos..pos + l);
                    pos += l;
                    b.map(P::Bytes)
                })
            }
        };
        let Some(v) = v else { break };
        let room = budget.saturating_sub(used);
        used += out.push_with(room, |s| {
            if redact {
                s.push('?');
                return;
            }
            match v {
                P::Int(v, neg) => {
                    if neg {
                        s.push('-');
                    }
                    push_decimal(s, v);
                }
                // `f32`'s own shortest text, as before (not the f64's).
                P::Float(f, true) => {
                    use std::fmt::Write as _;
                    let _ = write!(s, "{}", f as f32);
                }
                P::Float(f, false) => {
                    use std::fmt::Write as _;
                    let _ = write!(s, "{f}");
                }
                P::Date(d, time) => {
                    let y = u16::from_le_bytes([d[0], d[1]]);
                    push_padded(s, u64::from(y), 4);
                    for (k, sep) in [(2, '-'), (3, '-')] {
                        s.push(sep);
                        push_padded(s, u64::from(d[k]), 2);
                    }
                    if time {
                        for (k, sep) in [(4, ' '), (5, ':'), (6, ':')] {
                            s.push(sep);
                            push_padded(s, u64::from(d[k]), 2);
                        }
                    }
                }
                P::Str(t) => s.push_str(t),
                P::Bytes(b) => s.push_str(&String::from_utf8_lossy(b)),
            }
        });
    }
    out
}

/// `v` in decimal, zero-padded to `width` digits (as `{:0width$}`).
fn push_padded(s: &mut String, v: u64, width: usize) {
    let mut n = 1;
    let mut x = v / 10;
    while x > 0 {
        n += 1;
        x /= 10;
    }
    for _ in n..width {
        s.push('0');
    }
    push_decimal(s, v);
}

impl StreamParser for MysqlParser {
    fn data(&mut self, dir: Dir, ts_ns: i64, data: &[u8], out: &mut dyn TxSink) {
        let d = di(dir);
        if self.gave_up.is_some() {
            self.stats.unparsed_bytes += data.len() as u64;
            return;
        }
        if self.fr[d].hunting {
            if !self.resync_ok(dir, data) {
                self.stats.unparsed_bytes += data.len() as u64;
                return;
            }
            self.fr[d].hunting = false;
            self.stats.resyncs += 1;
        }
        if self.fr[d].blind {
            // Past a cut: the server's bytes are the response's until the
            // client's next command; the client's next command starts a
            // segment (its end may be cut: not checked against the length).
            if dir == Dir::ToClient || !self.starts_command(data) {
                self.blind_bytes(dir, ts_ns, data.len() as u64);
                return;
            }
            self.fr[d].blind = false;
        }
        let mut data = data;
        // `skip_run` just stopped where `data` is now: at what the general
        // path must see, where a second call would stop at once again.
        let mut after_run = false;
        while !data.is_empty() {
            if self.gave_up.is_some() {
                self.stats.unparsed_bytes += data.len() as u64;
                return;
            }
            let f = &mut self.fr[d];
            if f.in_packet {
                let n = f.need.min(data.len());
                let room = f.keep.saturating_sub(f.buf.len());
                f.buf.extend_from_slice(&data[..n.min(room)]);
                f.need -= n;
                data = &data[n..];
                if f.need == 0 {
                    f.in_packet = false;
                    self.gathered_packet(dir, ts_ns, out);
                }
                continue;
            }
            if f.hdr_len > 0 || data.len() < 4 {
                if f.hdr_len == 0 {
                    f.first_ns = ts_ns;
                }
                let n = (4 - f.hdr_len).min(data.len());
                f.hdr[f.hdr_len..f.hdr_len + n].copy_from_slice(&data[..n]);
                f.hdr_len += n;
                data = &data[n..];
                if f.hdr_len < 4 {
                    return;
                }
                f.hdr_len = 0;
                let len = le(&f.hdr[..3]) as usize;
                let seq = f.hdr[3];
                if len == 0 {
                    let first = f.first_ns;
                    self.packet(dir, seq, 0, &[], (first, ts_ns), out);
                    continue;
                }
                let keep = self.keep_for(dir, len);
                let f = &mut self.fr[d];
                f.in_packet = true;
                f.need = len;
                f.len = len;
                f.seq = seq;
                f.keep = keep;
                f.buf.clear();
                continue;
            }
            if dir == Dir::ToClient && !f.continued && !std::mem::take(&mut after_run) {
                let n = self.skip_run(data, ts_ns, out);
                if n > 0 {
                    data = &data[n..];
                    after_run = true;
                    continue;
                }
            }
            let len = le(&data[..3]) as usize;
            let seq = data[3];
            if data.len() >= 4 + len {
                let payload = &data[4..4 + len];
                data = &data[4 + len..];
                self.packet(dir, seq, len, payload, (ts_ns, ts_ns), out);
            } else {
                let have = &data[4..];
                // A row or column definition cut by the segment's end: only
                // its first byte is kept (what tells a row from
                // EOF/OK/ERR), the rest skipped by its length as it
                // arrives, never copied.
                let keep = if dir == Dir::ToClient && self.row_next(seq, len, have.first().copied()) {
                    1
                } else {
                    self.keep_for(dir, len)
                };
                let f = &mut self.fr[d];
                f.in_packet = true;
                f.need = len - have.len();
                f.len = len;
                f.seq = seq;
                f.keep = keep;
                f.first_ns = ts_ns;
                f.buf.clear();
                f.buf.extend_from_slice(&have[..have.len().min(keep)]);
                return;
            }
        }
    }

    fn gap(&mut self, dir: Dir, _ts_ns: i64, _len: u64, out: &mut dyn TxSink) {
        self.stats.gaps += 1;
        let d = di(dir);
        self.fr[d].reset();
        self.fr[d].hunting = true;
        if dir == Dir::ToClient {
            // The response (or part of it) is lost: what we know of the
            // command goes out as unanswered.
            if let Some(p) = self.pending.in_flight_mut() {
                p.resp = None;
                self.emit(Some(TxStatus::NoResponse), out);
            }
        }
    }

    /// Bytes cut by the snap length: the packet they fall in is finished
    /// with what was kept of it (its first bytes); a cut that goes past its
    /// end makes the direction blind (see [`Framer::blind`]). Not a gap:
    /// nothing is emitted early, nothing counted lost.
    fn cut(&mut self, dir: Dir, ts_ns: i64, len: u64, out: &mut dyn TxSink) {
        let d = di(dir);
        if self.gave_up.is_some() || self.fr[d].hunting {
            self.stats.unparsed_bytes += len;
            return;
        }
        if self.fr[d].blind {
            self.blind_bytes(dir, ts_ns, len);
            return;
        }
        let mut rest = len;
        let f = &mut self.fr[d];
        if f.in_packet {
            // Nothing more of this packet is kept: later bytes would land
            // at the wrong place in it.
            f.keep = f.buf.len();
            if rest < f.need as u64 {
                f.need -= rest as usize;
                return;
            }
            rest -= f.need as u64;
            f.need = 0;
            f.in_packet = false;
            if f.buf.is_empty() {
                // Not even its first byte (what tells a row from the
                // result's end) was captured: read blind from its header on.
                rest += 4 + f.len as u64;
            } else {
                self.gathered_packet(dir, ts_ns, out);
            }
        }
        if rest == 0 {
            return;
        }
        // The cut covers the start of a packet: where the next ones start
        // is unknown.
        let f = &mut self.fr[d];
        let held = f.hdr_len as u64;
        f.reset();
        f.blind = true;
        self.blind_bytes(dir, ts_ns, rest + held);
    }

    fn expire(&mut self, now_ns: i64, out: &mut dyn TxSink) {
        let stale = self.pending.in_flight().is_some_and(|p| {
            p.resp.is_none() && p.req.is_some_and(|r| now_ns - r.last_ns > self.cfg.transaction_timeout_ns)
        });
        if stale {
            self.flush_pending(out);
        }
    }

    fn finish(&mut self, _ts_ns: i64, out: &mut dyn TxSink) {
        self.flush_pending(out);
    }

    fn gave_up(&self) -> bool {
        self.gave_up.is_some()
    }

    fn stats(&self) -> ParseStats {
        self.stats
    }
}

#[cfg(test)]
mod tests;
