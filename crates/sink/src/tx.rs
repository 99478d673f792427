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

use std::fmt::Write as _;
use std::io::{self, Write};

use wirelog_record::{Detail, IpAddr16, Protocol, TxRecord, TxStatus};

use crate::zeek::{push_u64, write_addr, write_secs, zeek_close, zeek_header};
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

const HTTP: &[(&str, &str)] = &[
    ("method", "string"),
    ("host", "string"),
    ("uri", "string"),
    ("referrer", "string"),
    ("version", "string"),
    ("user_agent", "string"),
    ("request_body_len", "count"),
    ("response_body_len", "count"),
    ("status_code", "count"),
    ("status_msg", "string"),
    ("info_code", "count"),
    ("forwarded_for", "string"),
    ("request_content_type", "string"),
    ("response_content_type", "string"),
    ("request_missed_bytes", "count"),
    ("response_missed_bytes", "count"),
    ("headers", "vector[string]"),
    ("response_headers", "vector[string]"),
];

const DNS: &[(&str, &str)] = &[
    ("proto", "enum"),
    ("trans_id", "count"),
    ("rtt", "interval"),
    ("query", "string"),
    ("qclass", "count"),
    ("qclass_name", "string"),
    ("qtype", "count"),
    ("qtype_name", "string"),
    ("rcode", "count"),
    ("rcode_name", "string"),
    ("AA", "bool"),
    ("TC", "bool"),
    ("RD", "bool"),
    ("RA", "bool"),
    ("Z", "count"),
    ("answers", "vector[string]"),
    ("TTLs", "vector[interval]"),
    ("answer_names", "vector[string]"),
    ("answer_types", "vector[string]"),
    ("authority_count", "count"),
    ("edns_udp_size", "count"),
    ("edns_version", "count"),
    ("edns_do", "bool"),
    ("opcode_name", "string"),
];

const MYSQL: &[(&str, &str)] = &[
    ("cmd", "string"),
    ("arg", "string"),
    ("fingerprint", "string"),
    ("database", "string"),
    ("user", "string"),
    ("success", "bool"),
    ("rows", "count"),
    ("affected_rows", "count"),
    ("insert_id", "count"),
    ("num_fields", "count"),
    ("error_code", "count"),
    ("sql_state", "string"),
    ("response", "string"),
    ("params", "vector[string]"),
];

const PGSQL: &[(&str, &str)] = &[
    ("kind", "string"),
    ("query", "string"),
    ("fingerprint", "string"),
    ("statement", "string"),
    ("database", "string"),
    ("user", "string"),
    ("application_name", "string"),
    ("command_tag", "string"),
    ("rows", "count"),
    ("num_fields", "count"),
    ("error_severity", "string"),
    ("error_code", "string"),
    ("error_message", "string"),
];

/// Zeek's ssl.log columns in Zeek's order, then ours (an extension, as
/// Zeek's own policies add theirs after the base columns): the leaf's
/// subject, issuer and expiry, the client fingerprints, and the client's
/// offered versions and ALPN under Zeek's ssl-log-ext names.
const SSL: &[(&str, &str)] = &[
    ("version", "string"),
    ("cipher", "string"),
    ("curve", "string"),
    ("server_name", "string"),
    ("resumed", "bool"),
    ("last_alert", "string"),
    ("next_protocol", "string"),
    ("established", "bool"),
    ("ssl_history", "string"),
    ("cert_chain_fps", "vector[string]"),
    ("client_cert_chain_fps", "vector[string]"),
    ("sni_matches_cert", "bool"),
    ("subject", "string"),
    ("issuer", "string"),
    ("not_valid_after", "time"),
    ("ja4", "string"),
    ("ja3", "string"),
    ("ja3s", "string"),
    ("client_supported_versions", "vector[count]"),
    ("orig_alpn", "vector[string]"),
];

const REDIS: &[(&str, &str)] = &[
    ("cmd", "string"),
    ("key", "string"),
    ("args", "string"),
    ("num_args", "count"),
    ("reply_type", "string"),
    ("reply", "string"),
    ("reply_len", "count"),
];

/// The log's own fields (between the common head and tail).
fn own_fields(p: Protocol) -> &'static [(&'static str, &'static str)] {
    match p {
        Protocol::Http => HTTP,
        Protocol::Dns => DNS,
        Protocol::Mysql => MYSQL,
        Protocol::Pgsql => PGSQL,
        Protocol::Redis => REDIS,
        Protocol::Tls => SSL,
    }
}

/// The file name of a protocol's log (`http.log`, ...).
pub fn tx_log_name(p: Protocol) -> String {
    format!("{}.log", p.log())
}

fn opt_str(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

fn nonzero(v: u64) -> Option<u64> {
    (v != 0).then_some(v)
}

/// Formats one record's fields, in order, straight into a line: TSV writes
/// unset fields as `-`, JSON leaves them out (as Zeek's JSON writer does).
pub(crate) struct Line<'a> {
    pub(crate) b: &'a mut Vec<u8>,
    pub(crate) names: &'a [&'static str],
    pub(crate) json: bool,
    /// Index of the next field.
    pub(crate) i: usize,
    /// A JSON field was written (the next one needs a comma).
    pub(crate) any: bool,
    /// Holds one list item while it is escaped.
    pub(crate) scratch: &'a mut String,
}

impl<'a> Line<'a> {
    /// A new line in `b` (cleared; a JSON object opened) with the fields
    /// `names`.
    pub(crate) fn start(b: &'a mut Vec<u8>, names: &'a [&'static str], json: bool, scratch: &'a mut String) -> Self {
        b.clear();
        if json {
            b.push(b'{');
        }
        Line { b, names, json, i: 0, any: false, scratch }
    }

    /// Writes what comes before the next field's value; false if the value
    /// is not to be written (unset: TSV's `-` is written here).
    #[inline(always)]
    pub(crate) fn field(&mut self, set: bool) -> bool {
        let i = self.i;
        self.i += 1;
        if self.json {
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
    pub(crate) fn interval(&mut self, d: Option<i64>) {
        if self.field(d.is_some()) {
            write_secs(self.b, d.unwrap_or(0));
        }
    }

    #[inline(always)]
    pub(crate) fn count(&mut self, n: Option<u64>) {
        if self.field(n.is_some()) {
            push_u64(self.b, n.unwrap_or(0));
        }
    }

    #[inline(always)]
    pub(crate) fn str(&mut self, s: Option<&str>) {
        if self.field(s.is_some()) {
            let s = s.unwrap_or("");
            if self.json {
                json_str(self.b, s);
            } else {
                tsv_text(self.b, s, false);
            }
        }
    }

    #[inline(always)]
    pub(crate) fn addr(&mut self, a: &IpAddr16) {
        if self.field(true) {
            if self.json {
                self.b.push(b'"');
                write_addr(self.b, a);
                self.b.push(b'"');
            } else {
                write_addr(self.b, a);
            }
        }
    }

    #[inline(always)]
    pub(crate) fn port(&mut self, p: u16) {
        if self.field(true) {
            push_u64(self.b, p as u64);
        }
    }

    #[inline(always)]
    pub(crate) fn bool(&mut self, x: Option<bool>) {
        if self.field(x.is_some()) {
            self.b
                .extend_from_slice(match (self.json, x == Some(true)) {
                    (true, true) => b"true",
                    (true, false) => b"false",
                    (false, true) => b"T",
                    (false, false) => b"F",
                });
        }
    }

    /// A Zeek vector/set, each item's text made by `item`: comma-separated
    /// in TSV (`-` when empty), an array in JSON.
    pub(crate) fn list<T>(&mut self, items: &[T], item: impl Fn(&T, &mut String)) {
        let json = self.json;
        if !self.field(json || !items.is_empty()) {
            return;
        }
        if json {
            self.b.push(b'[');
        }
        for (j, it) in items.iter().enumerate() {
            if j > 0 {
                self.b.push(b',');
            }
            self.scratch.clear();
            item(it, self.scratch);
            if json {
                json_str(self.b, self.scratch);
            } else {
                tsv_text(self.b, self.scratch, true);
            }
        }
        if json {
            self.b.push(b']');
        }
    }
}

#[inline(always)]
fn own_values(r: &TxRecord, v: &mut Line<'_>) {
    let tx = &r.tx;
    match &tx.detail {
        Detail::Http(h) => {
            v.str(opt_str(&h.method));
            v.str(opt_str(&h.host));
            v.str(opt_str(&h.uri));
            v.str(opt_str(&h.referrer));
            v.str(opt_str(&h.version));
            v.str(opt_str(&h.user_agent));
            v.count(tx.request.map(|_| h.request_body_len));
            v.count(tx.response.map(|_| h.response_body_len));
            v.count(nonzero(h.status_code as u64));
            v.str(opt_str(&h.reason));
            v.count(nonzero(h.info_code as u64));
            v.str(opt_str(&h.forwarded_for));
            v.str(opt_str(&h.request_content_type));
            v.str(opt_str(&h.response_content_type));
            v.count(Some(h.request_missing_bytes));
            v.count(Some(h.response_missing_bytes));
            let kv = |(k, x): &(String, String), s: &mut String| {
                s.push_str(k);
                s.push_str(": ");
                s.push_str(x);
            };
            // Request and response headers apart: a name can be in both.
            v.list(&h.headers, kv);
            v.list(&h.response_headers, kv);
        }
        Detail::Dns(d) => {
            v.str(Some(r.transport.as_str()));
            v.count(Some(d.id as u64));
            v.interval(tx.latency_ns());
            v.str(opt_str(&d.qname));
            v.count(Some(d.qclass as u64));
            v.str(Some(d.qclass_name()));
            v.count(Some(d.qtype as u64));
            v.str(Some(d.qtype_name()));
            let answered = tx.response.is_some();
            v.count(answered.then_some(d.rcode as u64));
            v.str(answered.then(|| d.rcode_name()));
            v.bool(Some(d.aa));
            v.bool(Some(d.tc));
            v.bool(Some(d.rd));
            v.bool(Some(d.ra));
            v.count(Some(d.z as u64));
            v.list(&d.answers, |a, s| s.push_str(&a.data));
            v.list(&d.answers, |a, s| {
                let _ = write!(s, "{}.000000", a.ttl);
            });
            v.list(&d.answers, |a, s| s.push_str(&a.name));
            v.list(&d.answers, |a, s| {
                s.push_str(wirelog_record::dns::type_name(a.rtype))
            });
            v.count(answered.then_some(d.authority_count as u64));
            v.count(d.edns.map(|e| e.udp_size as u64));
            v.count(d.edns.map(|e| e.version as u64));
            v.bool(d.edns.map(|e| e.dnssec_ok));
            v.str(Some(d.opcode_name()));
        }
        Detail::Mysql(m) => {
            v.str(Some(m.command));
            v.str(m.query.as_deref());
            v.str(m.fingerprint.as_deref());
            v.str(m.database.as_deref());
            v.str(m.user.as_deref());
            v.bool(match tx.status {
                TxStatus::Ok => Some(true),
                TxStatus::Error => Some(false),
                _ => None,
            });
            v.count(m.num_rows);
            v.count(m.affected_rows);
            v.count(m.insert_id);
            v.count(m.num_fields);
            v.count(m.error_code.map(u64::from));
            v.str(m.sql_state.as_deref());
            v.str(m.error_message.as_deref());
            v.list(&m.params, |p, s| s.push_str(p));
        }
        Detail::Pgsql(p) => pgsql_values(p, v),
        Detail::Redis(x) => redis_values(x, v),
        Detail::Tls(t) => crate::tls::ssl_values(t, v),
    }
}

fn pgsql_values(p: &wirelog_record::pgsql::PgsqlTx, v: &mut Line<'_>) {
    v.str(Some(p.kind));
    v.str(p.query.as_deref());
    v.str(p.fingerprint.as_deref());
    v.str(p.statement.as_deref());
    v.str(p.database.as_deref());
    v.str(p.user.as_deref());
    v.str(p.application_name.as_deref());
    v.str(p.command_tag.as_deref());
    v.count(p.rows);
    v.count(p.num_fields.map(u64::from));
    v.str(p.error_severity.as_deref());
    v.str(p.error_code.as_deref());
    v.str(p.error_message.as_deref());
}

fn redis_values(x: &wirelog_record::redis::RedisTx, v: &mut Line<'_>) {
    v.str(opt_str(&x.command));
    v.str(x.key.as_deref());
    v.str(opt_str(&x.args));
    v.count(Some(x.num_args));
    v.str(x.reply_type);
    v.str(x.reply.as_deref());
    v.count(x.reply_len.and_then(|l| u64::try_from(l).ok()));
}

/// Writes the transactions of one protocol as they come.
pub struct TxLogWriter<W: Write> {
    out: W,
    format: LogFormat,
    protocol: Protocol,
    header_written: bool,
    line: Vec<u8>,
    /// One list item's text (see [`Line::list`]), kept between records.
    scratch: String,
    rows: u64,
    /// Field names in order, for the header and the JSON keys.
    names: Vec<&'static str>,
    /// The process columns (capture --processes) follow Zeek's.
    processes: bool,
}

impl<W: Write> TxLogWriter<W> {
    pub fn new(out: W, format: LogFormat, protocol: Protocol) -> Self {
        let names = COMMON_HEAD
            .iter()
            .chain(own_fields(protocol))
            .chain(COMMON_TAIL)
            .map(|f| f.0)
            .collect();
        TxLogWriter {
            out,
            format,
            protocol,
            header_written: false,
            line: Vec::with_capacity(512),
            scratch: String::new(),
            rows: 0,
            names,
            processes: false,
        }
    }

    /// Adds the process columns (capture --processes) after the log's own.
    pub fn with_processes(mut self, on: bool) -> Self {
        self.processes = on;
        self
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    fn header(&mut self) -> io::Result<()> {
        let extra = if self.processes { crate::procs::FIELDS } else { &[] };
        let fields = COMMON_HEAD.iter().chain(own_fields(self.protocol)).chain(COMMON_TAIL).chain(extra);
        let name = self.protocol.log();
        zeek_header(&mut self.out, self.format, &mut self.header_written, name, fields)
    }

    pub fn write(&mut self, r: &TxRecord) -> io::Result<()> {
        debug_assert_eq!(r.protocol, self.protocol);
        self.header()?;
        // One copy of the line's code per format, each with the format a
        // constant: no per-field test of which one it is.
        if self.format == LogFormat::Json {
            self.fill(r, true);
        } else {
            self.fill(r, false);
        }
        self.rows += 1;
        self.out.write_all(&self.line)
    }

    #[inline(always)]
    fn fill(&mut self, r: &TxRecord, json: bool) {
        let tx = &r.tx;
        let mut v = Line::start(&mut self.line, &self.names, json, &mut self.scratch);
        v.time(tx.ts_ns());
        v.str(Some(r.uid.as_str()));
        v.addr(&r.orig_h);
        v.port(r.orig_p);
        v.addr(&r.resp_h);
        v.port(r.resp_p);
        own_values(r, &mut v);
        v.str(Some(tx.status.as_str()));
        v.count(tx.request.map(|s| s.bytes));
        v.count(tx.response.map(|s| s.bytes));
        v.interval(tx.latency_ns());
        v.interval(tx.first_byte_latency_ns());
        debug_assert_eq!(self.names.len(), v.i, "{} fields", self.protocol.name());
        if self.processes {
            if json {
                crate::procs::json(&mut self.line, &r.orig_proc, &r.resp_proc);
            } else {
                crate::procs::tsv(&mut self.line, &r.orig_proc, &r.resp_proc);
            }
        }
        self.line
            .extend_from_slice(if json { b"}\n" } else { b"\n" });
    }

    /// The output the lines go to.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Writes the `#close` line (TSV) and flushes.
    pub fn finish(&mut self) -> io::Result<()> {
        self.header()?;
        zeek_close(&mut self.out, self.format)
    }
}

/// The transaction logs as one sink: each protocol's log is created in the
/// log directory at its first transaction (like Zeek, a log with nothing to
/// say is not written).
pub struct TxLogs {
    dir: crate::LogDir,
    processes: bool,
    writers: Vec<(Protocol, TxLogWriter<crate::LogOut>)>,
}

impl TxLogs {
    /// Removes the transaction logs an earlier run left in `dir`; with
    /// `processes`, lines get the process columns.
    pub fn new(dir: crate::LogDir, processes: bool) -> io::Result<TxLogs> {
        for p in Protocol::ALL {
            dir.remove_stale(&tx_log_name(p))?;
        }
        Ok(TxLogs { dir, processes, writers: Vec::new() })
    }

    fn writer(&mut self, p: Protocol) -> io::Result<&mut TxLogWriter<crate::LogOut>> {
        let i = match self.writers.iter().position(|(q, _)| *q == p) {
            Some(i) => i,
            None => {
                let out = self.dir.create(&tx_log_name(p))?;
                let w = TxLogWriter::new(out, self.dir.format, p).with_processes(self.processes);
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
        batch.txs.iter().try_for_each(|t| self.writer(t.protocol)?.write(t))
    }

    fn tick(&mut self, _now: std::time::Instant) -> io::Result<()> {
        self.writers.iter_mut().try_for_each(|(_, w)| w.flush())
    }

    fn space(&self) -> crate::Space {
        crate::out::space(self.outputs())
    }

    fn close(&mut self) -> io::Result<crate::SinkEnd> {
        self.writers.iter_mut().try_for_each(|(_, w)| w.finish())?;
        Ok(crate::out::abandon(self.writers.iter_mut().map(|(_, w)| &mut w.out)))
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
    if s.is_empty() {
        b.extend_from_slice(b"(empty)");
        return;
    }
    if s == "-" {
        b.extend_from_slice(b"\\x2d");
        return;
    }
    // Runs between escaped bytes are copied whole: text rarely needs any,
    // so eight bytes at a time are checked while none does.
    let s = s.as_bytes();
    let mut run = 0;
    let mut i = 0;
    while i < s.len() {
        if let Some(w) = s.get(i..i + 8) {
            if !tsv_escapes_any(u64::from_le_bytes(w.try_into().unwrap_or_default()), in_set) {
                i += 8;
                continue;
            }
        }
        let c = s[i];
        if TSV_ESCAPED[c as usize] || (in_set && c == b',') {
            b.extend_from_slice(&s[run..i]);
            push_hex_escape(b, c);
            run = i + 1;
        }
        i += 1;
    }
    b.extend_from_slice(&s[run..]);
}

/// Whether any of the eight bytes in `w` is one [`tsv_text`] escapes (exact:
/// the classic "has a byte less than n" / "has a zero byte" word tests).
fn tsv_escapes_any(w: u64, in_set: bool) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * n as u64) & !x & HIGH;
    let equal = |v: u8| below(w ^ (ONES * v as u64), 1);
    let set_sep = if in_set { equal(b',') } else { 0 };
    below(w, 0x20) | equal(b'\\') | equal(0x7f) | set_sep != 0
}

pub(crate) fn json_str(b: &mut Vec<u8>, s: &str) {
    b.push(b'"');
    // Only ASCII bytes are escaped, so bytes of multi-byte characters (all
    // >= 0x80) are copied as they are, with the runs between escapes.
    let s = s.as_bytes();
    let mut run = 0;
    for (i, &c) in s.iter().enumerate() {
        let esc: &[u8] = match c {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            c if c < 0x20 => b"",
            _ => continue,
        };
        b.extend_from_slice(&s[run..i]);
        if esc.is_empty() {
            b.extend_from_slice(b"\\u00");
            const HEX: &[u8; 16] = b"0123456789abcdef";
            b.extend_from_slice(&[HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]);
        } else {
            b.extend_from_slice(esc);
        }
        run = i + 1;
    }
    b.extend_from_slice(&s[run..]);
    b.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_record::dns::{DnsAnswer, DnsTx, Edns};
    use wirelog_record::http::HttpTx;
    use wirelog_record::{Span, Transaction};
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
            tx: Transaction {
                request: Some(span(1_000_000_000, 28)),
                response: Some(span(1_061_782_000, 284)),
                status: TxStatus::Ok,
                detail,
            },
        }
    }

    fn json(r: &TxRecord) -> String {
        let mut w = TxLogWriter::new(Vec::new(), LogFormat::Json, r.protocol);
        w.write(r).unwrap();
        String::from_utf8(w.out).unwrap()
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
            }],
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
            params: vec!["1".into(), "a,b".into()],
            num_rows: Some(1),
            ..Default::default()
        };
        let r = rec(Protocol::Mysql, Detail::Mysql(m));
        let mut w = TxLogWriter::new(Vec::new(), LogFormat::Tsv, r.protocol);
        w.write(&r).unwrap();
        let out = String::from_utf8(w.out).unwrap();
        let line = out.lines().last().unwrap();
        assert!(line.ends_with("\tstmt_execute\tselect ?\t-\t-\t-\tT\t1\t-\t-\t-\t-\t-\t-\t1,a\\x2cb\tok\t28\t284\t0.061782\t0.061782"), "{line}");
        let s = json(&r);
        assert!(s.starts_with("{\"ts\":1.000000,\"uid\":\""), "{s}");
        assert!(s.ends_with(",\"params\":[\"1\",\"a,b\"],\"status\":\"ok\",\"request_bytes\":28,\"response_bytes\":284,\"latency\":0.061782,\"first_byte_latency\":0.061782}\n"), "{s}");
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
