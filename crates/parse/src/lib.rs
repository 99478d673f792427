//! Parse: in-order bytes of each direction of a connection in, transactions
//! (one request and its response, with latency; for TLS one handshake) out.
//!
//! The data flow is `track` (which connection, which direction) ->
//! [`stream::Reassembler`] (TCP segments to in-order bytes, gaps reported) ->
//! a [`StreamParser`] per connection (bytes to [`Transaction`]s). DNS over UDP
//! skips the reassembler: [`dns::UdpDns`] takes whole datagrams.
//!
//! Parsers never panic and never allocate per packet on the common path; what
//! they cannot parse is counted in [`ParseStats`], never silently dropped.
//! After a gap a parser drops the message it was in and resynchronises at the
//! next message boundary it can recognise.

#![forbid(unsafe_code)]

pub mod checksum;
pub mod detect;
pub mod dns;
pub mod fingerprint;
mod frames;
pub mod http;
pub mod http2;
pub mod memcached;
pub mod mongodb;
pub mod mqtt;
pub mod amqp;
pub mod kafka;
pub mod cassandra;
pub mod mysql;
pub mod pgsql;
pub mod redis;
pub mod services;
pub mod ssh;
pub mod starttls;
pub mod stream;
pub mod tls;

#[cfg(test)]
pub(crate) mod testutil;
#[cfg(test)]
mod fuzz_stable;

// What parsers produce is defined below them, in `record`, so the sinks, the
// store and queries read transactions without depending on the parsers.
pub use wirelog_record::{Detail, Protocol, Span, Transaction, TxStatus};

/// Direction of bytes within a connection, relative to its client (the
/// connection's originator as the tracker decided it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Client to server: requests.
    ToServer,
    /// Server to client: responses.
    ToClient,
}

/// A new parser for one TCP connection of a protocol (the protocol table is
/// `wirelog_record::Protocol`; which parser reads it is decided here).
pub trait ProtocolParser {
    fn stream_parser(self, cfg: &ParseConfig) -> ConnParser;
}

impl ProtocolParser for Protocol {
    fn stream_parser(self, cfg: &ParseConfig) -> ConnParser {
        match self {
            Protocol::Http => ConnParser::Http(http::HttpParser::new(cfg)),
            Protocol::Mysql => ConnParser::Mysql(mysql::MysqlParser::new(cfg)),
            Protocol::Pgsql => ConnParser::Pgsql(pgsql::PgsqlParser::new(cfg)),
            Protocol::Redis => ConnParser::Redis(redis::RedisParser::new(cfg)),
            Protocol::Dns => ConnParser::Dns(dns::TcpDns::new(cfg)),
            Protocol::Tls => ConnParser::Tls(tls::TlsConn::new(cfg)),
            Protocol::Memcached => ConnParser::Memcached(memcached::MemcachedParser::new(cfg)),
            Protocol::Mongodb => ConnParser::Mongodb(mongodb::MongodbParser::new(cfg)),
            Protocol::Mqtt => ConnParser::Mqtt(mqtt::MqttParser::new(cfg)),
            Protocol::Amqp => ConnParser::Amqp(amqp::AmqpParser::new(cfg)),
            Protocol::Kafka => ConnParser::Kafka(kafka::KafkaParser::new(cfg)),
            Protocol::Grpc => ConnParser::Http2(Box::new(http2::Http2Parser::new(cfg))),
            Protocol::Cassandra => ConnParser::Cassandra(cassandra::CassandraParser::new(cfg)),
        }
    }
}

/// The parser of one connection, a closed set dispatched by `match` (the
/// per-packet path stays monomorphic; no vtable call per segment). It lives
/// inside the connection's boxed application state, so the largest variant
/// costs no extra allocation.
pub enum ConnParser {
    Http(http::HttpParser),
    Mysql(mysql::MysqlParser),
    Pgsql(pgsql::PgsqlParser),
    Redis(redis::RedisParser),
    Dns(dns::TcpDns),
    Tls(tls::TlsConn),
    Memcached(memcached::MemcachedParser),
    Mongodb(mongodb::MongodbParser),
    Mqtt(mqtt::MqttParser),
    Amqp(amqp::AmqpParser),
    Kafka(kafka::KafkaParser),
    Cassandra(cassandra::CassandraParser),
    /// HTTP/2 (and gRPC inside it); boxed: its state is larger than the others'.
    Http2(Box<http2::Http2Parser>),
    /// A cleartext protocol watched for its STARTTLS (SMTP, IMAP, ...);
    /// becomes `Tls` when the server agrees.
    Starttls(starttls::StarttlsConn),
    /// A connection watched for SSH's confirmation (no transactions).
    Ssh(ssh::SshConn),
}

/// Calls the same method on whichever parser a [`ConnParser`] holds.
macro_rules! each_parser {
    ($self:expr, $p:ident => $e:expr) => {
        match $self {
            ConnParser::Http($p) => $e,
            ConnParser::Mysql($p) => $e,
            ConnParser::Pgsql($p) => $e,
            ConnParser::Redis($p) => $e,
            ConnParser::Dns($p) => $e,
            ConnParser::Tls($p) => $e,
            ConnParser::Memcached($p) => $e,
            ConnParser::Mongodb($p) => $e,
            ConnParser::Mqtt($p) => $e,
            ConnParser::Amqp($p) => $e,
            ConnParser::Kafka($p) => $e,
            ConnParser::Cassandra($p) => $e,
            ConnParser::Http2($p) => $e,
            ConnParser::Starttls($p) => $e,
            ConnParser::Ssh($p) => $e,
        }
    };
}

impl ConnParser {
    /// conn.log's `service` for a connection of `protocol` parsed by this
    /// (`mysql,ssl` once TLS was found inside MySQL).
    pub fn service(&self, protocol: Protocol) -> &'static str {
        match self {
            ConnParser::Tls(t) => t.service(),
            ConnParser::Http2(p) => p.service(),
            ConnParser::Starttls(p) => p.protocol().service(),
            ConnParser::Ssh(_) => "ssh",
            _ => protocol.service(),
        }
    }

    /// A parser for the cleartext part of a connection that may turn to
    /// TLS by STARTTLS.
    pub fn starttls(proto: starttls::Cleartext, cfg: &ParseConfig) -> ConnParser {
        ConnParser::Starttls(starttls::StarttlsConn::new(proto, cfg.tls))
    }

    /// The same, started as a signature left it ([`starttls::Start`]).
    pub fn starttls_from(proto: starttls::Cleartext, start: starttls::Start, cfg: &ParseConfig) -> ConnParser {
        ConnParser::Starttls(starttls::StarttlsConn::starting(proto, start, cfg.tls))
    }

    /// conn.log's `service` when the parser decides it whatever was parsed
    /// (a STARTTLS protocol: named once confirmed, as Zeek names it); None
    /// when the caller's rule applies (named once a transaction parsed).
    pub fn confirmed_service(&self) -> Option<Option<&'static str>> {
        match self {
            ConnParser::Starttls(p) => Some(p.confirmed().then(|| p.protocol().service())),
            ConnParser::Tls(t) => t.confirmed_service().map(Some),
            ConnParser::Ssh(p) => Some(p.confirmed().then_some("ssh")),
            _ => None,
        }
    }

    /// Bytes of connection state this parser holds on the heap beyond the
    /// fixed-size parsers (HTTP/2's box, HPACK tables, stream table and
    /// buffered header blocks; TLS messages under reassembly; the SQL and
    /// Redis parsers' shapes and recent texts, kept for the connection's
    /// life), for the memory budget. The other parsers' state is small
    /// and fixed (their buffers are capped per message).
    pub fn state_bytes(&self) -> usize {
        match self {
            ConnParser::Http2(p) => std::mem::size_of::<http2::Http2Parser>() + p.memory(),
            ConnParser::Tls(t) => t.held(),
            ConnParser::Mysql(p) => p.held_bytes(),
            ConnParser::Pgsql(p) => p.held_bytes(),
            ConnParser::Redis(p) => p.held_bytes(),
            _ => 0,
        }
    }

    /// Grants the parser `bytes` of state from the shared budget (what it
    /// holds plus what the budget has left): a parser that buffers whole
    /// messages of up to megabytes (a TLS Certificate message) keeps them
    /// only within it, and counts what it cut. The others ignore it.
    #[inline]
    pub fn set_allowance(&mut self, bytes: usize) {
        if let ConnParser::Tls(t) = self {
            t.set_allowance(bytes);
        }
    }

    /// The parser has read all it wanted (a TLS handshake is over): it
    /// reports `gave_up` so reassembly stops, but nothing was left unparsed.
    pub fn done(&self) -> bool {
        match self {
            ConnParser::Tls(t) => t.handshake_done(),
            ConnParser::Starttls(p) => p.done(),
            ConnParser::Ssh(p) => p.done(),
            _ => false,
        }
    }

    /// STARTTLS: when the MySQL or PostgreSQL parser stopped because the
    /// client asked for TLS and got it, the TLS parser takes the connection
    /// over and reads `data` (the chunk in which TLS was agreed; what is
    /// left of the request is skipped as preamble).
    #[cold]
    fn hand_over(&mut self, dir: Dir, ts_ns: i64, data: &[u8], out: &mut dyn TxSink) {
        // The TLS limits are the connection's (its `ParseConfig`'s), which
        // the outer parser kept for this moment.
        let (outer, limits) = match self {
            ConnParser::Mysql(p) if p.gave_up_reason() == Some(mysql::GiveUp::Tls) => (Protocol::Mysql, p.tls_limits()),
            ConnParser::Pgsql(p) if p.gave_up_reason() == Some(pgsql::GiveUp::Tls) => (Protocol::Pgsql, p.tls_limits()),
            _ => return,
        };
        let before = self.stats();
        let mut tls = tls::TlsConn::starttls(limits, outer, before);
        tls.data(dir, ts_ns, data, out);
        *self = ConnParser::Tls(tls);
    }
}

impl StreamParser for ConnParser {
    #[inline]
    fn data(&mut self, dir: Dir, ts_ns: i64, data: &[u8], out: &mut dyn TxSink) {
        if let ConnParser::Http(p) = self {
            if p.turns_to_http2(dir, data) {
                *self = ConnParser::Http2(Box::new(http2::Http2Parser::new(p.config())));
            }
        }
        each_parser!(self, p => p.data(dir, ts_ns, data, out));
        if let ConnParser::Http(p) = self {
            if let Some(at) = p.take_tunnel() {
                // A successful CONNECT: the tunnel's bytes go to the TLS
                // parser (a proxied HTTPS request is the common case; what
                // is not TLS is skipped as its preamble and counted).
                // conn.log names both, `http,ssl`, as Zeek's HTTP analyzer
                // hands a CONNECT tunnel to protocol detection
                // (`HTTP_Analyzer::HTTP_Reply`, src/analyzer/protocol/http/HTTP.cc).
                let mut tls = tls::TlsConn::after_cleartext(p.config().tls, "http", "http,ssl", p.stats());
                tls.data(dir, ts_ns, &data[at.min(data.len())..], out);
                *self = ConnParser::Tls(tls);
                return;
            }
            if let Some(sw) = p.take_h2c() {
                // `Upgrade: h2c` answered by 101: HTTP/2 from here on.
                let mut h2 = http2::Http2Parser::upgraded(p.config(), sw.req, sw.tx);
                h2.data(dir, ts_ns, &data[sw.offset.min(data.len())..], out);
                *self = ConnParser::Http2(Box::new(h2));
                return;
            }
        }
        // Asked of the two parsers directly (not through `gave_up`'s match
        // over every parser, a call per segment).
        let hand_over = match self {
            ConnParser::Mysql(p) => p.gave_up(),
            ConnParser::Pgsql(p) => p.gave_up(),
            _ => false,
        };
        if hand_over {
            self.hand_over(dir, ts_ns, data, out);
        }
        if let ConnParser::Starttls(p) = self {
            if let Some((at, mut tls)) = p.take_upgrade() {
                // The server agreed in this chunk: what follows its reply
                // is TLS, and so is everything after in both directions.
                tls.data(dir, ts_ns, &data[at.min(data.len())..], out);
                *self = ConnParser::Tls(tls);
            }
        }
    }

    #[inline]
    fn gap(&mut self, dir: Dir, ts_ns: i64, len: u64, out: &mut dyn TxSink) {
        each_parser!(self, p => p.gap(dir, ts_ns, len, out))
    }

    #[inline]
    fn cut(&mut self, dir: Dir, ts_ns: i64, len: u64, out: &mut dyn TxSink) {
        each_parser!(self, p => p.cut(dir, ts_ns, len, out))
    }

    #[inline]
    fn expire(&mut self, now_ns: i64, out: &mut dyn TxSink) {
        each_parser!(self, p => p.expire(now_ns, out))
    }

    #[inline]
    fn finish(&mut self, ts_ns: i64, out: &mut dyn TxSink) {
        each_parser!(self, p => p.finish(ts_ns, out))
    }

    #[inline]
    fn gave_up(&self) -> bool {
        each_parser!(self, p => p.gave_up())
    }

    #[inline]
    fn stats(&self) -> ParseStats {
        each_parser!(self, p => p.stats())
    }
}

/// One step of a fuzzing script (see [`fuzz_steps`]).
#[cfg(any(test, feature = "fuzzing"))]
pub enum FuzzStep<'a> {
    Data(Dir, &'a [u8]),
    Gap(Dir, u64),
}

/// The steps of a stream parser's fuzzing script, shared by the parsers'
/// `fuzz` entries: each step is a control byte `c` (bit 0: direction; bits
/// 1-2: 3 = a gap of `c >> 3` bytes, else data; bits 3-7: length - 1)
/// followed by that many bytes. Yields the control byte with each step.
#[cfg(any(test, feature = "fuzzing"))]
pub fn fuzz_steps(mut rest: &[u8]) -> impl Iterator<Item = (u8, FuzzStep<'_>)> {
    std::iter::from_fn(move || {
        let (&c, r) = rest.split_first()?;
        let dir = if c & 1 == 0 { Dir::ToServer } else { Dir::ToClient };
        if (c >> 1) & 3 == 3 {
            rest = r;
            Some((c, FuzzStep::Gap(dir, (c >> 3) as u64)))
        } else {
            let n = ((c >> 3) as usize + 1).min(r.len());
            rest = &r[n..];
            Some((c, FuzzStep::Data(dir, &r[..n])))
        }
    })
}

/// Feeds a fuzzing script (see [`fuzz_steps`]) to a stream parser as the
/// tracker would: steps one nanosecond apart, `expire` after a control byte
/// of 0xff, nothing more once the parser gave up, then `finish`.
#[cfg(any(test, feature = "fuzzing"))]
pub fn fuzz_feed<P: StreamParser>(p: &mut P, script: &[u8], out: &mut dyn TxSink) {
    let mut ts = 0;
    for (c, step) in fuzz_steps(script) {
        ts += 1;
        match step {
            FuzzStep::Data(dir, b) => p.data(dir, ts, b, out),
            FuzzStep::Gap(dir, n) => p.gap(dir, ts, n, out),
        }
        if c == 0xff {
            p.expire(ts, out);
        }
        if p.gave_up() {
            break;
        }
    }
    p.finish(ts, out);
}

/// Runs a parser over a fuzzing script (see [`fuzz_steps`]): each step's
/// index is its time, a control byte of 0xff also expires what waits, and
/// the parser is finished at the end. The length-prefixed parsers (MQTT,
/// AMQP, Kafka) take their scripts this way; others build their own.
#[cfg(feature = "fuzzing")]
pub(crate) fn fuzz_stream(p: &mut impl StreamParser, data: &[u8]) {
    let mut out = Vec::new();
    for (i, (c, step)) in fuzz_steps(data).enumerate() {
        match step {
            FuzzStep::Data(dir, d) => p.data(dir, i as i64, d, &mut out),
            FuzzStep::Gap(dir, n) => p.gap(dir, i as i64, n, &mut out),
        }
        if c == 0xff {
            p.expire(i as i64, &mut out);
        }
    }
    p.finish(0, &mut out);
}

/// Settings shared by all parsers.
#[derive(Clone, Debug)]
pub struct ParseConfig {
    /// Replace literals in SQL and values in HTTP query strings by `?` in the
    /// recorded text (the fingerprint field is computed either way).
    pub redact: bool,
    /// Largest message header a parser buffers (HTTP header block, one SQL
    /// statement, one RESP array header...) before giving up on the message
    /// and counting it as unparsed.
    pub max_header_bytes: usize,
    /// Longest text kept in a record field (queries, URIs); longer text is cut
    /// and the record says so.
    pub max_text_bytes: usize,
    /// HTTP headers kept by name (case-insensitive), besides the fixed fields.
    pub http_headers: Vec<String>,
    /// Transactions waiting for a response longer than this are reported unmatched.
    pub transaction_timeout_ns: i64,
    /// What one TLS connection may make its parser buffer or keep (also a
    /// MySQL or PostgreSQL connection once it switched to TLS).
    pub tls: tls::TlsLimits,
}

impl Default for ParseConfig {
    fn default() -> Self {
        ParseConfig {
            redact: false,
            max_header_bytes: 64 * 1024,
            max_text_bytes: 4096,
            http_headers: Vec::new(),
            transaction_timeout_ns: 10_000_000_000,
            tls: tls::TlsLimits::default(),
        }
    }
}

/// What a parser could not use, counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParseStats {
    /// Bytes skipped because they could not be parsed (garbage, oversized
    /// headers, bytes after a gap until the next recognisable boundary).
    pub unparsed_bytes: u64,
    /// Gaps reported to the parser (bytes missing from the stream).
    pub gaps: u64,
    /// Times the parser found a message boundary again after losing it.
    pub resyncs: u64,
    /// Messages that parsed but could not be paired or made no sense in
    /// context (e.g. a second response with no request pending).
    pub malformed: u64,
    /// Bytes of messages passed over whole because the memory the parser
    /// was granted (`--stream-memory`) had no room for them (a TLS
    /// handshake message, a certificate not kept); also in `unparsed_bytes`.
    pub cut_bytes: u64,
}

/// Where a parser puts the transactions it completes: a list (tests, the
/// TLS-library reader), or the tracker's batch, where each is written once
/// into its record's place instead of into a list the tracker then moves
/// each from (a copy of the whole record a transaction, issue 36).
pub trait TxSink {
    fn push(&mut self, tx: Transaction);
    /// How many transactions the sink holds: a parser compares two of
    /// these counts, never reads what is there (the batch holds other
    /// connections' too).
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Many at once (the requests a parser gives up on at its end, or expires).
impl Extend<Transaction> for dyn TxSink + '_ {
    fn extend<I: IntoIterator<Item = Transaction>>(&mut self, txs: I) {
        for tx in txs {
            self.push(tx);
        }
    }
}

impl TxSink for Vec<Transaction> {
    #[inline]
    fn push(&mut self, tx: Transaction) {
        Vec::push(self, tx)
    }

    #[inline]
    fn len(&self) -> usize {
        Vec::len(self)
    }
}

/// A parser for one TCP connection: it gets the in-order bytes of each
/// direction as they arrive and emits transactions as they complete.
pub trait StreamParser {
    /// `data` is the next in-order bytes of `dir`, all seen at `ts_ns` (the
    /// packet's time). A message may span many calls; one call may hold many
    /// messages (pipelining).
    fn data(&mut self, dir: Dir, ts_ns: i64, data: &[u8], out: &mut dyn TxSink);

    /// `len` bytes of `dir` are missing from the stream (not captured). The
    /// parser abandons the message the gap falls in and resynchronises.
    fn gap(&mut self, dir: Dir, ts_ns: i64, len: u64, out: &mut dyn TxSink);

    /// The next `len` bytes of `dir` were sent in a segment seen at `ts_ns`
    /// but cut by the capture's snap length ([`stream::Chunk::Cut`]): their
    /// place in the stream is known (they follow the bytes given last),
    /// their content is not. A parser that can go on across such bytes
    /// (MySQL: a response's size and timing, the next message where the
    /// next segment starts) says so here; by default they are a gap.
    fn cut(&mut self, dir: Dir, ts_ns: i64, len: u64, out: &mut dyn TxSink) {
        self.gap(dir, ts_ns, len, out)
    }

    /// Time passes (called at least once a second of packet time): requests
    /// older than the transaction timeout are emitted as `NoResponse`.
    fn expire(&mut self, now_ns: i64, out: &mut dyn TxSink);

    /// The connection ended: emit every pending request/response as unmatched.
    fn finish(&mut self, ts_ns: i64, out: &mut dyn TxSink);

    /// The protocol turned out not to be parseable (TLS, compressed MySQL,
    /// not this protocol at all): the caller stops feeding bytes.
    fn gave_up(&self) -> bool;

    fn stats(&self) -> ParseStats;
}

/// Cuts `s` to at most `max` bytes on a char boundary; true if it did.
pub(crate) fn truncate(s: &mut String, max: usize) -> bool {
    let end = char_floor(s, max);
    let cut = end < s.len();
    s.truncate(end);
    cut
}

/// The longest prefix of `s` of at most `max` bytes that ends on a
/// character boundary: its length.
pub(crate) fn char_floor(s: &str, max: usize) -> usize {
    if s.len() <= max {
        return s.len();
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// The tests' pseudo-random numbers (xorshift64, Marsaglia 2003): the same
/// sequence from the same seed on every run, so a failing case repeats.
#[cfg(test)]
pub(crate) fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}
