//! Transaction logs: `http.log`, `dns.log`, `mysql.log`, `pgsql.log`,
//! `redis.log`, in the same TSV/JSON conventions as conn.log. Field names
//! follow Zeek's logs where Zeek has the field (http.log, dns.log,
//! mysql.log), so `zeek-cut` and existing parsers keep working; the latency
//! and size fields every transaction has come last.
//!
//! Transactions are fewer than packets by orders of magnitude, so records
//! are turned into a small list of values first and formatted from it: one
//! formatter for both formats and all five logs.

use std::io::{self, Write};

use wirelog_parse::{Detail, Protocol, TxStatus};
use wirelog_record::{IpAddr16, TxRecord};

use crate::zeek::{now_secs, push_u64, write_addr, write_secs, zeek_datetime};
use crate::LogFormat;

/// One field's value.
enum V<'a> {
    Time(i64),
    Interval(Option<i64>),
    Count(Option<u64>),
    Str(Option<&'a str>),
    Addr(&'a IpAddr16),
    Port(u16),
    Bool(Option<bool>),
    /// A Zeek vector/set: comma-separated in TSV, an array in JSON.
    List(Vec<String>),
}

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
    }
}

/// The file name of a protocol's log (`http.log`, ...).
pub fn tx_log_name(p: Protocol) -> String {
    format!("{}.log", p.name())
}

fn opt_str(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

fn nonzero(v: u64) -> Option<u64> {
    (v != 0).then_some(v)
}

fn own_values<'a>(r: &'a TxRecord, v: &mut Vec<V<'a>>) {
    let tx = &r.tx;
    match &tx.detail {
        Detail::Http(h) => {
            v.push(V::Str(opt_str(&h.method)));
            v.push(V::Str(opt_str(&h.host)));
            v.push(V::Str(opt_str(&h.uri)));
            v.push(V::Str(opt_str(&h.referrer)));
            v.push(V::Str(opt_str(&h.version)));
            v.push(V::Str(opt_str(&h.user_agent)));
            v.push(V::Count(tx.request.map(|_| h.request_body_len)));
            v.push(V::Count(tx.response.map(|_| h.response_body_len)));
            v.push(V::Count(nonzero(h.status_code as u64)));
            v.push(V::Str(opt_str(&h.reason)));
            v.push(V::Count(nonzero(h.info_code as u64)));
            v.push(V::Str(opt_str(&h.forwarded_for)));
            v.push(V::Str(opt_str(&h.request_content_type)));
            v.push(V::Str(opt_str(&h.response_content_type)));
            v.push(V::Count(Some(h.request_missing_bytes)));
            v.push(V::Count(Some(h.response_missing_bytes)));
            let kv = |hs: &[(String, String)]| -> Vec<String> {
                hs.iter().map(|(k, x)| format!("{k}: {x}")).collect()
            };
            // Request and response headers apart: a name can be in both.
            v.push(V::List(kv(&h.headers)));
            v.push(V::List(kv(&h.response_headers)));
        }
        Detail::Dns(d) => {
            v.push(V::Str(Some(r.transport.as_str())));
            v.push(V::Count(Some(d.id as u64)));
            v.push(V::Interval(tx.latency_ns()));
            v.push(V::Str(opt_str(&d.qname)));
            v.push(V::Count(Some(d.qclass as u64)));
            v.push(V::Str(Some(d.qclass_name())));
            v.push(V::Count(Some(d.qtype as u64)));
            v.push(V::Str(Some(d.qtype_name())));
            let answered = tx.response.is_some();
            v.push(V::Count(answered.then_some(d.rcode as u64)));
            v.push(V::Str(answered.then(|| d.rcode_name())));
            v.push(V::Bool(Some(d.aa)));
            v.push(V::Bool(Some(d.tc)));
            v.push(V::Bool(Some(d.rd)));
            v.push(V::Bool(Some(d.ra)));
            v.push(V::Count(Some(d.z as u64)));
            v.push(V::List(d.answers.iter().map(|a| a.data.clone()).collect()));
            v.push(V::List(
                d.answers
                    .iter()
                    .map(|a| format!("{}.000000", a.ttl))
                    .collect(),
            ));
            v.push(V::List(d.answers.iter().map(|a| a.name.clone()).collect()));
            v.push(V::List(
                d.answers
                    .iter()
                    .map(|a| wirelog_parse::dns::type_name(a.rtype).to_string())
                    .collect(),
            ));
            v.push(V::Count(answered.then_some(d.authority_count as u64)));
            v.push(V::Count(d.edns.map(|e| e.udp_size as u64)));
            v.push(V::Count(d.edns.map(|e| e.version as u64)));
            v.push(V::Bool(d.edns.map(|e| e.dnssec_ok)));
            v.push(V::Str(Some(d.opcode_name())));
        }
        Detail::Mysql(m) => {
            v.push(V::Str(Some(m.command)));
            v.push(V::Str(m.query.as_deref()));
            v.push(V::Str(m.fingerprint.as_deref()));
            v.push(V::Str(m.database.as_deref()));
            v.push(V::Str(m.user.as_deref()));
            v.push(V::Bool(match tx.status {
                TxStatus::Ok => Some(true),
                TxStatus::Error => Some(false),
                _ => None,
            }));
            v.push(V::Count(m.num_rows));
            v.push(V::Count(m.affected_rows));
            v.push(V::Count(m.insert_id));
            v.push(V::Count(m.num_fields));
            v.push(V::Count(m.error_code.map(u64::from)));
            v.push(V::Str(m.sql_state.as_deref()));
            v.push(V::Str(m.error_message.as_deref()));
            v.push(V::List(m.params.clone()));
        }
        Detail::Pgsql(p) => pgsql_values(p, v),
        Detail::Redis(x) => redis_values(x, v),
    }
}

fn pgsql_values<'a>(p: &'a wirelog_parse::pgsql::PgsqlTx, v: &mut Vec<V<'a>>) {
    v.push(V::Str(Some(p.kind)));
    v.push(V::Str(p.query.as_deref()));
    v.push(V::Str(p.fingerprint.as_deref()));
    v.push(V::Str(p.statement.as_deref()));
    v.push(V::Str(p.database.as_deref()));
    v.push(V::Str(p.user.as_deref()));
    v.push(V::Str(p.application_name.as_deref()));
    v.push(V::Str(p.command_tag.as_deref()));
    v.push(V::Count(p.rows));
    v.push(V::Count(p.num_fields.map(u64::from)));
    v.push(V::Str(p.error_severity.as_deref()));
    v.push(V::Str(p.error_code.as_deref()));
    v.push(V::Str(p.error_message.as_deref()));
}

fn redis_values<'a>(x: &'a wirelog_parse::redis::RedisTx, v: &mut Vec<V<'a>>) {
    v.push(V::Str(opt_str(&x.command)));
    v.push(V::Str(x.key.as_deref()));
    v.push(V::Str(opt_str(&x.args)));
    v.push(V::Count(Some(x.num_args)));
    v.push(V::Str(x.reply_type));
    v.push(V::Str(x.reply.as_deref()));
    v.push(V::Count(x.reply_len.and_then(|l| u64::try_from(l).ok())));
}

/// Writes the transactions of one protocol as they come.
pub struct TxLogWriter<W: Write> {
    out: W,
    format: LogFormat,
    protocol: Protocol,
    header_written: bool,
    line: Vec<u8>,
    rows: u64,
    /// Field names in order, for the header and the JSON keys.
    names: Vec<&'static str>,
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
            rows: 0,
            names,
        }
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    fn fields(&self) -> impl Iterator<Item = &'static (&'static str, &'static str)> {
        COMMON_HEAD
            .iter()
            .chain(own_fields(self.protocol))
            .chain(COMMON_TAIL)
    }

    fn header(&mut self) -> io::Result<()> {
        if std::mem::replace(&mut self.header_written, true) || self.format == LogFormat::Json {
            return Ok(());
        }
        let types: Vec<&str> = self.fields().map(|f| f.1).collect();
        write!(
            self.out,
            "#separator \\x09\n#set_separator\t,\n#empty_field\t(empty)\n#unset_field\t-\n#path\t{}\n#open\t{}\n#fields\t{}\n#types\t{}\n",
            self.protocol.name(),
            zeek_datetime(now_secs()),
            self.names.join("\t"),
            types.join("\t")
        )
    }

    pub fn write(&mut self, r: &TxRecord) -> io::Result<()> {
        debug_assert_eq!(r.protocol, self.protocol);
        self.header()?;
        let tx = &r.tx;
        let mut vals: Vec<V<'_>> = Vec::with_capacity(40);
        vals.push(V::Time(tx.ts_ns()));
        vals.push(V::Str(Some(r.uid.as_str())));
        vals.push(V::Addr(&r.orig_h));
        vals.push(V::Port(r.orig_p));
        vals.push(V::Addr(&r.resp_h));
        vals.push(V::Port(r.resp_p));
        own_values(r, &mut vals);
        vals.push(V::Str(Some(tx.status.as_str())));
        vals.push(V::Count(tx.request.map(|s| s.bytes)));
        vals.push(V::Count(tx.response.map(|s| s.bytes)));
        vals.push(V::Interval(tx.latency_ns()));
        vals.push(V::Interval(tx.first_byte_latency_ns()));
        debug_assert_eq!(self.names.len(), vals.len(), "{} fields", self.protocol.name());
        self.line.clear();
        match self.format {
            LogFormat::Tsv => tsv_line(&mut self.line, &vals),
            LogFormat::Json => json_line(&mut self.line, &self.names, &vals),
        }
        self.rows += 1;
        self.out.write_all(&self.line)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Writes the `#close` line (TSV) and flushes.
    pub fn finish(&mut self) -> io::Result<()> {
        self.header()?;
        if self.format == LogFormat::Tsv {
            writeln!(self.out, "#close\t{}", zeek_datetime(now_secs()))?;
        }
        self.out.flush()
    }
}

/// Zeek's ASCII escaping: separators, backslashes and non-printable bytes
/// become `\xNN`, so one record stays one line whatever the traffic held.
fn tsv_text(b: &mut Vec<u8>, s: &str, in_set: bool) {
    if s.is_empty() {
        b.extend_from_slice(b"(empty)");
        return;
    }
    if s == "-" {
        b.extend_from_slice(b"\\x2d");
        return;
    }
    for &c in s.as_bytes() {
        if c == b'\t' || c == b'\\' || c < 0x20 || c == 0x7f || (in_set && c == b',') {
            b.extend_from_slice(format!("\\x{c:02x}").as_bytes());
        } else {
            b.push(c);
        }
    }
}

fn tsv_line(b: &mut Vec<u8>, vals: &[V<'_>]) {
    for (i, v) in vals.iter().enumerate() {
        if i > 0 {
            b.push(b'\t');
        }
        match v {
            V::Time(t) => write_secs(b, *t),
            V::Interval(Some(d)) => write_secs(b, *d),
            V::Count(Some(n)) => push_u64(b, *n),
            V::Str(Some(s)) => tsv_text(b, s, false),
            V::Addr(a) => write_addr(b, a),
            V::Port(p) => push_u64(b, *p as u64),
            V::Bool(Some(x)) => b.push(if *x { b'T' } else { b'F' }),
            V::List(items) if items.is_empty() => b.push(b'-'),
            V::List(items) => {
                for (j, it) in items.iter().enumerate() {
                    if j > 0 {
                        b.push(b',');
                    }
                    tsv_text(b, it, true);
                }
            }
            V::Interval(None) | V::Count(None) | V::Str(None) | V::Bool(None) => b.push(b'-'),
        }
    }
    b.push(b'\n');
}

fn json_str(b: &mut Vec<u8>, s: &str) {
    b.push(b'"');
    for c in s.chars() {
        match c {
            '"' => b.extend_from_slice(b"\\\""),
            '\\' => b.extend_from_slice(b"\\\\"),
            '\n' => b.extend_from_slice(b"\\n"),
            '\r' => b.extend_from_slice(b"\\r"),
            '\t' => b.extend_from_slice(b"\\t"),
            c if (c as u32) < 0x20 => {
                b.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
            }
            c => {
                let mut tmp = [0u8; 4];
                b.extend_from_slice(c.encode_utf8(&mut tmp).as_bytes());
            }
        }
    }
    b.push(b'"');
}

/// One JSON object per line, unset fields omitted (as Zeek's JSON writer does).
fn json_line(b: &mut Vec<u8>, names: &[&str], vals: &[V<'_>]) {
    b.push(b'{');
    let mut first = true;
    for (name, v) in names.iter().zip(vals) {
        let set = !matches!(
            v,
            V::Interval(None) | V::Count(None) | V::Str(None) | V::Bool(None)
        );
        if !set {
            continue;
        }
        if !first {
            b.push(b',');
        }
        first = false;
        json_str(b, name);
        b.push(b':');
        match v {
            V::Time(t) | V::Interval(Some(t)) => write_secs(b, *t),
            V::Count(Some(n)) => push_u64(b, *n),
            V::Str(Some(s)) => json_str(b, s),
            V::Addr(a) => {
                b.push(b'"');
                write_addr(b, a);
                b.push(b'"');
            }
            V::Port(p) => push_u64(b, *p as u64),
            V::Bool(Some(x)) => b.extend_from_slice(if *x { b"true" } else { b"false" }),
            V::List(items) => {
                b.push(b'[');
                for (j, it) in items.iter().enumerate() {
                    if j > 0 {
                        b.push(b',');
                    }
                    json_str(b, it);
                }
                b.push(b']');
            }
            V::Interval(None) | V::Count(None) | V::Str(None) | V::Bool(None) => {}
        }
    }
    b.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_parse::dns::{DnsAnswer, DnsTx, Edns};
    use wirelog_parse::http::HttpTx;
    use wirelog_parse::{Span, Transaction};
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
        let p = wirelog_parse::pgsql::PgsqlTx {
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
        let x = wirelog_parse::redis::RedisTx {
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
}
