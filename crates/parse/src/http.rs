//! HTTP/1.0 and 1.1: requests paired with responses in order (keep-alive,
//! pipelining), bodies delimited by Content-Length, chunked encoding (with
//! trailers) or the connection's end; interim 1xx responses (100-continue)
//! do not consume the request; HEAD, 1xx, 204 and 304 responses have no body.
//!
//! Bodies are counted, never buffered. A header block is parsed straight from
//! the packet when it is whole there; only a block split across packets is
//! copied into a per-direction buffer bounded by `max_header_bytes`.
//!
//! Gaps: inside a body with a known length the gap only shortens what is read
//! (the transaction is kept and says how many bytes were missing, as
//! Packetbeat's gap_in_stream case expects); anywhere else the message is
//! dropped and the direction resynchronises at the next line that starts a
//! request (client side) or a status line (server side).
//!
//! Cuts (bytes sent but past the capture's snap length, [`crate::stream::Chunk::Cut`]):
//! their place is known, their content is not. In a body whose framing is
//! known (Content-Length, the data of a chunk, until close) they are body
//! bytes like any other. Where the framing itself is past the cut (the end
//! of a header block, a chunk-size line) the message goes on, unframed,
//! until a segment that opens the next one (or the connection's end): the
//! header lines captured give its method, status, content type, and a
//! declared Content-Length its body's length; without one, the bytes after
//! the last known framing count as missed, not as body. A message whose
//! start line is past the cut is lost (counted as malformed); a response
//! lost so still takes its request, so the next response pairs right.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;

pub(crate) mod texts;

use crate::{Detail, Dir, ParseConfig, ParseStats, Span, StreamParser, Transaction, TxSink, TxStatus};

pub use wirelog_record::http::HttpTx;

/// Methods recognised at the start of a request (and when resynchronising).
const METHODS: &[&[u8]] = &[
    b"GET",
    b"POST",
    b"HEAD",
    b"PUT",
    b"DELETE",
    b"OPTIONS",
    b"PATCH",
    b"TRACE",
    b"CONNECT",
    b"PROPFIND",
    b"PROPPATCH",
    b"MKCOL",
    b"COPY",
    b"MOVE",
    b"LOCK",
    b"UNLOCK",
    b"REPORT",
    b"SEARCH",
    b"PURGE",
];

/// Longest prefix needed to decide whether a line starts a message.
const PROBE_LEN: usize = 10;

/// Whether bytes open a message (a request or status line).
enum Opens {
    Yes,
    No,
    /// Too few bytes to tell.
    Maybe,
}

fn opens(dir: Dir, data: &[u8]) -> Opens {
    match dir {
        Dir::ToServer => {
            let mut maybe = false;
            for m in METHODS {
                if data.len() > m.len() {
                    if data.starts_with(m) && data[m.len()] == b' ' {
                        return Opens::Yes;
                    }
                } else if m.starts_with(data) {
                    maybe = true;
                }
            }
            if maybe {
                Opens::Maybe
            } else {
                Opens::No
            }
        }
        Dir::ToClient => {
            const P: &[u8] = b"HTTP/1.";
            if data.len() >= P.len() {
                if data.starts_with(P) {
                    Opens::Yes
                } else {
                    Opens::No
                }
            } else if P.starts_with(data) {
                Opens::Maybe
            } else {
                Opens::No
            }
        }
    }
}

/// This protocol's content probe (see [`crate::detect`]).
pub fn probe(dir: Dir, data: &[u8]) -> crate::detect::Probe {
    use crate::detect::Probe;
    // HTTP/2 with prior knowledge: the parser hands over at the preface.
    if crate::http2::probe(dir, data) == Probe::Certain {
        return Probe::Certain;
    }
    Probe::certain_if(looks_like(dir, data))
}

/// True when `data`, the first bytes seen in `dir`, look like this protocol:
/// a request line of a known method, or a `HTTP/1.` status line.
pub fn looks_like(dir: Dir, data: &[u8]) -> bool {
    matches!(opens(dir, data), Opens::Yes)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunked {
    /// Reading the chunk-size line.
    Size,
    /// In chunk data, this many bytes left.
    Data(u64),
    /// The CRLF after chunk data.
    DataEnd,
    /// Trailer lines after the last chunk, until an empty line.
    Trailer,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Body {
    Length(u64),
    Chunked(Chunked),
    UntilClose,
    /// The framing is past a cut (see the module's doc): the message runs
    /// until a segment opens the next one; the Content-Length declared in
    /// the captured headers, if any, is the body's length.
    Unframed(Option<u64>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Between messages (blank lines allowed).
    Idle,
    /// Header block started, not complete (bytes in `buf`).
    Head,
    Body(Body),
    /// Lost: skipping to a line that starts a message.
    Resync,
}

/// One direction's progress.
struct Side {
    state: State,
    /// Partial header block, partial chunk-size/trailer line, or a few bytes
    /// held while deciding whether a line starts a message.
    buf: Vec<u8>,
    /// In Resync: the next byte starts a line.
    line_start: bool,
    /// The message being read.
    span: Span,
    body_len: u64,
    missing: u64,
    /// In `Body::Unframed`: the message's bytes after its last known framing
    /// (captured or cut; a gap's bytes are in `missing` instead).
    unframed: u64,
    /// Of `unframed`, those up to the end of the segment that cut the header
    /// block: the header's rest and maybe the body's start, which is which
    /// unknown. The bytes after them are surely body.
    unframed_head: u64,
    /// Messages read completely.
    messages: u64,
}

impl Side {
    fn new() -> Self {
        Side {
            state: State::Idle,
            buf: Vec::new(),
            line_start: true,
            span: Span::default(),
            body_len: 0,
            missing: 0,
            unframed: 0,
            unframed_head: 0,
            messages: 0,
        }
    }
}

/// A request waiting for its response (or still being read).
struct Pending {
    req: Span,
    tx: HttpTx,
    head_method: bool,
    /// The request asked to switch to HTTP/2 (`Upgrade: h2c`).
    h2c: bool,
}

/// A 101 that switched the connection to HTTP/2 (RFC 7540 §3.2): the
/// request that asked becomes stream 1 of the HTTP/2 parser, which reads
/// the server's bytes from `offset` of the chunk that held the 101.
pub(crate) struct H2cSwitch {
    pub req: Span,
    pub tx: HttpTx,
    pub offset: usize,
}

pub struct HttpParser {
    cfg: ParseConfig,
    stats: ParseStats,
    req: Side,
    resp: Side,
    /// Requests whose headers were seen and that have no final response yet, oldest first.
    pending: VecDeque<Pending>,
    /// The request currently being read (its body) is the back of `pending`;
    /// false when it was already paired with an early response.
    req_in_queue: bool,
    /// The response being read: its paired request's span, if any, and the
    /// record (the request's, with the response's facts merged in at its
    /// head: the record is moved once more, when it is given out).
    cur: Option<(Option<Span>, HttpTx)>,
    /// True once a message start was recognised in either direction.
    ever_parsed: bool,
    /// 101 Switching Protocols or a successful CONNECT: what follows is not HTTP.
    upgraded: bool,
    /// A 101 to `h2c` was read: the HTTP/2 parser takes over.
    h2c: Option<H2cSwitch>,
    /// A 2xx to CONNECT was read (RFC 9110 §9.3.6: the connection is a
    /// tunnel from the end of its header block): where the tunnel starts
    /// in the chunk that held it, for the TLS parser that takes over.
    tunnel: Option<usize>,
    /// The texts of the headers a connection's messages repeat, as last kept
    /// (see [`HttpParser::recent_text`]), one per [`Recent`].
    recent: [Arc<str>; Recent::COUNT],
}

/// The headers whose last text [`HttpParser::recent_text`] keeps: those a
/// client repeats on every request (content types change with the resource,
/// and each slot is 16 bytes of every HTTP parser, of every `ConnParser`
/// when HTTP's is its largest variant).
#[derive(Clone, Copy)]
enum Recent {
    Host,
    UserAgent,
}

impl Recent {
    const COUNT: usize = 2;
}

impl HttpParser {
    pub fn new(cfg: &ParseConfig) -> Self {
        HttpParser {
            cfg: cfg.clone(),
            stats: ParseStats::default(),
            req: Side::new(),
            resp: Side::new(),
            // One pending request is the common case; the default first
            // growth (4 entries of ~500 B) would cost every connection 2 KiB.
            pending: VecDeque::with_capacity(1),
            req_in_queue: false,
            cur: None,
            ever_parsed: false,
            upgraded: false,
            h2c: None,
            tunnel: None,
            recent: Default::default(),
        }
    }

    /// The tunnel a successful CONNECT opened, once: its start in the
    /// last chunk given (see the `tunnel` field).
    pub(crate) fn take_tunnel(&mut self) -> Option<usize> {
        self.tunnel.take()
    }

    /// The switch to HTTP/2 a 101 made, once (see [`H2cSwitch`]).
    pub(crate) fn take_h2c(&mut self) -> Option<H2cSwitch> {
        self.h2c.take()
    }

    /// Whether `data`, the next bytes of `dir`, start HTTP/2 on a
    /// connection that has carried nothing yet: the client's preface, or a
    /// server's SETTINGS sent before it.
    pub(crate) fn turns_to_http2(&self, dir: Dir, data: &[u8]) -> bool {
        let untouched = |s: &Side| s.state == State::Idle && s.buf.is_empty() && s.messages == 0;
        if self.ever_parsed || self.stats != ParseStats::default() || !untouched(&self.req) || !untouched(&self.resp) {
            return false;
        }
        match dir {
            Dir::ToServer => crate::http2::starts_with_preface(data),
            Dir::ToClient => crate::http2::starts_with_settings(data),
        }
    }

    /// The settings it was made with (for the parser that takes over).
    pub(crate) fn config(&self) -> &ParseConfig {
        &self.cfg
    }

    fn side(&mut self, dir: Dir) -> &mut Side {
        match dir {
            Dir::ToServer => &mut self.req,
            Dir::ToClient => &mut self.resp,
        }
    }

    fn split(&mut self, dir: Dir) -> (&mut Side, &mut ParseStats) {
        match dir {
            Dir::ToServer => (&mut self.req, &mut self.stats),
            Dir::ToClient => (&mut self.resp, &mut self.stats),
        }
    }

    fn feed(&mut self, dir: Dir, ts: i64, data: &[u8], out: &mut dyn TxSink) {
        if let State::Body(Body::Unframed(declared)) = self.side(dir).state {
            // A message without framing ends where a segment opens the next.
            if let Opens::Yes = opens(dir, &data[..data.len().min(PROBE_LEN)]) {
                let last = self.side(dir).span.last_ns;
                self.end_unframed(dir, last, declared, out);
            }
        }
        let mut i = 0;
        // Each step consumes at least one byte or changes state towards one that does.
        let mut guard = 0usize;
        while i < data.len() {
            if self.h2c.is_some() || self.tunnel.is_some() {
                break;
            }
            guard += 1;
            if guard > 4 * data.len() + 64 {
                // Defensive: a state machine bug must not hang the probe.
                self.stats.unparsed_bytes += (data.len() - i) as u64;
                return;
            }
            let state = self.side(dir).state;
            match state {
                State::Idle => {
                    // Tolerate CR/LF between messages (some clients send an extra CRLF after a body).
                    let rest = &data[i..];
                    let n = rest
                        .iter()
                        .take_while(|&&b| b == b'\r' || b == b'\n')
                        .count();
                    i += n;
                    if i < data.len() {
                        if let Opens::No = opens(dir, &data[i..data.len().min(i + PROBE_LEN)]) {
                            // Not a message start (TLS, another protocol, a lost
                            // boundary): skip to a line that is one.
                            let s = self.side(dir);
                            s.state = State::Resync;
                            s.line_start = false;
                            continue;
                        }
                        let s = self.side(dir);
                        s.state = State::Head;
                        s.span = Span {
                            first_ns: ts,
                            last_ns: ts,
                            bytes: 0,
                        };
                        s.body_len = 0;
                        s.missing = 0;
                        s.unframed = 0;
                        s.unframed_head = 0;
                    }
                }
                State::Head => i += self.head(dir, ts, &data[i..], out),
                State::Body(b) => i += self.body(dir, ts, b, &data[i..], out),
                State::Resync => i += self.resync(dir, ts, &data[i..]),
            }
        }
        if let Some(sw) = self.h2c.as_mut() {
            // What follows the 101 is HTTP/2's, from here.
            sw.offset = i;
        }
        if let Some(t) = self.tunnel.as_mut() {
            // What follows the CONNECT's 2xx is the tunnel's, from here.
            *t = i;
        }
    }

    /// Reads header bytes; returns how many of `data` were consumed.
    fn head(&mut self, dir: Dir, ts: i64, data: &[u8], out: &mut dyn TxSink) -> usize {
        let max = self.cfg.max_header_bytes.max(64);
        let s = self.side(dir);
        if s.buf.is_empty() {
            // Fast path: the whole header block is in this packet, read in the
            // pass that finds its end (only its first `max` bytes can hold a block kept).
            let scan = HeadScan::of(&data[..data.len().min(max)]);
            if let Some(end) = scan.end {
                self.side(dir).span.bytes += end as u64;
                self.message_head(dir, ts, &scan, end, false, out);
                return end;
            }
            if data.len() <= max {
                let s = self.side(dir);
                s.buf.extend_from_slice(data);
                s.span.bytes += data.len() as u64;
                return data.len();
            }
            // Too big: no block end in its first `max` bytes.
            return self.oversize(dir, max + 1);
        }
        let old = s.buf.len();
        let room = (max + 1).saturating_sub(old);
        let take = data.len().min(room);
        s.buf.extend_from_slice(&data[..take]);
        // Only the new bytes are searched for the end (a block split in many
        // segments is not read again at each); once whole, it is read once more.
        match find_head_end(&s.buf, old.saturating_sub(3)) {
            Some(end) if end <= max => {
                let used = end.saturating_sub(old);
                s.span.bytes += used as u64;
                let buf = std::mem::take(&mut s.buf);
                self.message_head(dir, ts, &HeadScan::of(&buf[..end]), end, false, out);
                // Keep the allocation for the next split header.
                let mut buf = buf;
                buf.clear();
                self.side(dir).buf = buf;
                used
            }
            _ if s.buf.len() > max => {
                s.buf.clear();
                self.stats.unparsed_bytes += old as u64;
                self.oversize(dir, take)
            }
            _ => {
                s.span.bytes += take as u64;
                take
            }
        }
    }

    /// A header block beyond `max_header_bytes`: drop the message, resync.
    fn oversize(&mut self, dir: Dir, consumed: usize) -> usize {
        self.stats.unparsed_bytes += consumed as u64;
        self.stats.malformed += 1;
        let s = self.side(dir);
        s.buf.clear();
        s.state = State::Resync;
        s.line_start = false;
        consumed
    }

    /// A complete header block of `hlen` bytes (the blank line included), or
    /// with `cut` the whole lines captured of one whose end is past a cut, as
    /// `scan` read it.
    fn message_head(&mut self, dir: Dir, ts: i64, scan: &HeadScan, hlen: usize, cut: bool, out: &mut dyn TxSink) {
        let mut tx = HttpTx::default();
        let ok = match dir {
            Dir::ToServer => self.request_line(scan.first, &mut tx),
            Dir::ToClient => status_line(scan.first, &mut tx),
        };
        if !ok {
            self.stats.unparsed_bytes += hlen as u64;
            self.stats.malformed += 1;
            let s = self.side(dir);
            s.state = State::Resync;
            s.line_start = true;
            return;
        }
        self.ever_parsed = true;
        // Of a field given more than once, the last is read (the first
        // address of X-Forwarded-For's kin: see `forwarded_for`).
        let content_length = scan.content_length.and_then(parse_u64);
        let chunked = scan.transfer_encoding.is_some_and(|v| contains_ci(v, b"chunked"));
        let mut upgrade_h2c = false;
        if dir == Dir::ToServer {
            if let Some(v) = scan.upgrade {
                upgrade_h2c = v.split(|&b| b == b',').any(|p| trim(p).eq_ignore_ascii_case(b"h2c"));
            }
            if let Some(v) = scan.host {
                tx.host = self.recent_text(Recent::Host, trim(v));
            }
            if let Some(v) = scan.user_agent {
                tx.user_agent = self.recent_text(Recent::UserAgent, trim(v));
            }
            if let Some(v) = scan.referer {
                tx.referrer = self.text(trim(v)).0;
            }
            if let Some(v) = scan.forwarded {
                tx.forwarded_for = self.text(v).0;
                if tx.forwarded_for.is_empty() {
                    // Bytes that make no text (a `max_text_bytes` too small
                    // for their first character): the next such field's
                    // address, as the fields are read again.
                    tx.forwarded_for = self.forwarded_for(scan.fields);
                }
            }
        }
        if let Some(v) = scan.content_type {
            let v = self.text(trim(v)).0;
            match dir {
                Dir::ToServer => tx.request_content_type = v,
                Dir::ToClient => tx.response_content_type = v,
            }
        }
        let kept = if self.cfg.http_headers.is_empty() { Vec::new() } else { self.kept_headers(scan.fields) };
        let hlen = hlen as u64;
        match dir {
            Dir::ToServer => {
                tx.request_header_bytes = hlen;
                tx.request_content_length = content_length;
                tx.headers = kept;
                let body = if cut {
                    Some(Body::Unframed(content_length))
                } else if chunked {
                    Some(Body::Chunked(Chunked::Size))
                } else {
                    match content_length {
                        Some(n) if n > 0 => Some(Body::Length(n)),
                        // Requests never run until close: no length means no body.
                        _ => None,
                    }
                };
                let head_method = tx.method.eq_ignore_ascii_case("HEAD");
                let span = self.req.span;
                self.pending.push_back(Pending {
                    req: span,
                    tx,
                    head_method,
                    h2c: upgrade_h2c,
                });
                self.req_in_queue = true;
                match body {
                    Some(b) => self.req.state = State::Body(b),
                    None => self.end_request(ts),
                }
            }
            Dir::ToClient => {
                tx.response_header_bytes = hlen;
                tx.response_content_length = content_length;
                tx.response_headers = kept;
                let code = tx.status_code;
                if (100..200).contains(&code) && code != 101 {
                    // Interim: the request still waits for its final response.
                    if let Some(p) = self.pending.front_mut() {
                        p.tx.info_code = code;
                    }
                    self.resp.state = State::Idle;
                    return;
                }
                let req = self.pending.pop_front();
                if req.is_some() && self.pending.is_empty() && self.req_in_queue {
                    // Early final response while the request body is still coming.
                    self.req_in_queue = false;
                }
                let head_req = req.as_ref().is_some_and(|p| p.head_method);
                let connect = req
                    .as_ref()
                    .is_some_and(|p| p.tx.method.eq_ignore_ascii_case("CONNECT"));
                if code == 101 && req.as_ref().is_some_and(|p| p.h2c) {
                    // The request continues as HTTP/2 stream 1; its record
                    // is that stream's, with the 101 as its interim status.
                    self.upgraded = true;
                    self.resp.state = State::Idle;
                    let Pending { req, mut tx, .. } = req.expect("checked");
                    tx.info_code = 101;
                    self.h2c = Some(H2cSwitch { req, tx, offset: 0 });
                    return;
                }
                if code == 101 || (connect && (200..300).contains(&code)) {
                    self.upgraded = true;
                }
                if connect && (200..300).contains(&code) && dir == Dir::ToClient {
                    self.tunnel = Some(0);
                }
                let no_body = head_req || code == 204 || code == 304 || self.upgraded;
                let body = if cut && !self.upgraded {
                    Some(Body::Unframed(if no_body { Some(0) } else { content_length }))
                } else if no_body {
                    None
                } else if chunked {
                    Some(Body::Chunked(Chunked::Size))
                } else {
                    match content_length {
                        Some(0) => None,
                        Some(n) => Some(Body::Length(n)),
                        None => Some(Body::UntilClose),
                    }
                };
                let (req, tx) = match req {
                    Some(p) => {
                        let mut t = p.tx;
                        // Merge the response facts into the request's record.
                        t.status_code = tx.status_code;
                        t.reason = tx.reason;
                        t.response_header_bytes = tx.response_header_bytes;
                        t.response_content_length = tx.response_content_length;
                        t.response_content_type = tx.response_content_type;
                        t.response_headers = tx.response_headers;
                        if t.version.is_empty() {
                            t.version = tx.version;
                        }
                        (Some(p.req), t)
                    }
                    None => (None, tx),
                };
                self.cur = Some((req, tx));
                match body {
                    Some(b) => self.resp.state = State::Body(b),
                    None => self.end_response(ts, true, out),
                }
            }
        }
    }

    /// The first address of the first X-Forwarded-For (X-Forward-For,
    /// X-Real-IP) whose address makes a text, in the field lines `fields`
    /// (read again only when the one `HeadScan` noted makes none).
    fn forwarded_for(&self, fields: &[u8]) -> Arc<str> {
        for (name, value) in (Fields { data: fields, after_blank: None }) {
            if let FieldName::ForwardedFor = FieldName::of(name) {
                let first = trim(value).split(|&b| b == b',').next().unwrap_or(b"");
                let text = self.text(trim(first)).0;
                if !text.is_empty() {
                    return text;
                }
            }
        }
        Arc::default()
    }

    /// The fields named in `ParseConfig::http_headers`, in order, read again
    /// from the field lines `fields` (only when some are asked for).
    fn kept_headers(&self, fields: &[u8]) -> Vec<(String, String)> {
        let mut kept = Vec::new();
        for (name, value) in (Fields { data: fields, after_blank: None }) {
            if self
                .cfg
                .http_headers
                .iter()
                .any(|h| h.as_bytes().eq_ignore_ascii_case(name))
            {
                let n = String::from_utf8_lossy(name).to_ascii_lowercase();
                // Credentials never reach the store when redacting.
                let secret = n == "authorization"
                    || n == "proxy-authorization"
                    || n == "cookie"
                    || n == "set-cookie";
                let v = if self.cfg.redact && secret {
                    "*".to_string()
                } else {
                    self.cut_text(trim(value)).0.into_owned()
                };
                kept.push((n, v));
            }
        }
        kept
    }

    /// The requests of the `waiting` first in `pending` that waited past the
    /// timeout (the queue's front at least), in order, reported unanswered.
    #[cold]
    #[inline(never)]
    fn expire_waiting(&mut self, now_ns: i64, waiting: usize, out: &mut dyn TxSink) {
        let timeout = self.cfg.transaction_timeout_ns;
        let n = self.pending.iter().take(waiting).take_while(|p| now_ns - p.req.last_ns > timeout).count();
        // A response being read is paired already; expiring the queue front
        // while it is read would be wrong only if it were in the queue, which it is not.
        for p in self.pending.drain(..n) {
            out.push(Transaction {
                request: Some(p.req),
                response: None,
                status: TxStatus::NoResponse,
                detail: Detail::Http(p.tx),
            });
        }
    }

    fn request_line(&self, line: &[u8], tx: &mut HttpTx) -> bool {
        let mut parts = line.splitn(3, |&b| b == b' ');
        let (Some(m), Some(uri), ver) = (parts.next(), parts.next(), parts.next()) else {
            return false;
        };
        if m.is_empty()
            || !m
                .iter()
                .all(|b| b.is_ascii_uppercase() || *b == b'-' || *b == b'_')
            || uri.is_empty()
        {
            return false;
        }
        tx.method = shared_lossy(m);
        if let Some(v) = ver {
            let v = trim(v);
            tx.version = shared_lossy(v.strip_prefix(b"HTTP/").unwrap_or(v));
        }
        let (path, query) = match uri.iter().position(|&b| b == b'?') {
            Some(q) => (&uri[..q], &uri[q + 1..]),
            None => (uri, &b""[..]),
        };
        let query_text = if self.cfg.redact {
            Cow::Owned(redact_query(query))
        } else {
            Cow::Borrowed(query)
        };
        let (p, pcut) = self.text(path);
        let (q, qcut) = self.text(&query_text);
        if uri.len() == path.len() {
            // No query: the URI is the path (the common case, one lookup).
            tx.uri = p.clone();
            tx.uri_truncated = pcut;
        } else if !self.cfg.redact && !pcut && !qcut {
            let (u, ucut) = self.text(uri);
            tx.uri = u;
            tx.uri_truncated = ucut;
        } else {
            let mut full = Vec::with_capacity(uri.len());
            full.extend_from_slice(path);
            full.push(b'?');
            full.extend_from_slice(&query_text);
            let (u, ucut) = self.text(&full);
            tx.uri = u;
            tx.uri_truncated = pcut || qcut || ucut;
        }
        tx.path = p;
        tx.query = q;
        true
    }

    /// Text kept in a record: lossy UTF-8, cut to `max_text_bytes` at a char
    /// boundary, shared with the other transactions that carry the same text.
    fn text(&self, v: &[u8]) -> (Arc<str>, bool) {
        let (s, cut) = self.cut_text(v);
        (texts::shared(&s), cut)
    }

    /// [`HttpParser::text`] of a header the connection's messages repeat:
    /// the text kept for `which` when `v` is its bytes, without validating
    /// and hashing them again (a keep-alive connection sends the same host
    /// and user agent with every request).
    fn recent_text(&mut self, which: Recent, v: &[u8]) -> Arc<str> {
        let kept = &self.recent[which as usize];
        // Only valid UTF-8 within `max_text_bytes` is kept, so equal bytes
        // make the text `text` would make.
        if kept.as_bytes() == v {
            return kept.clone();
        }
        let (text, cut) = self.cut_text(v);
        let keep = !cut && matches!(text, Cow::Borrowed(_));
        let shared = texts::shared(&text);
        if keep {
            self.recent[which as usize] = shared.clone();
        }
        shared
    }

    /// [`HttpParser::text`] without sharing: borrowed when `v` is valid
    /// UTF-8 within `max_text_bytes` (for values that rarely repeat, which
    /// would only push shared ones out of the cache).
    fn cut_text<'a>(&self, v: &'a [u8]) -> (Cow<'a, str>, bool) {
        let max = self.cfg.max_text_bytes;
        let cut = v.len() > max;
        let v = if cut { &v[..max] } else { v };
        if let Ok(s) = std::str::from_utf8(v) {
            return (Cow::Borrowed(s), cut);
        }
        // Invalid UTF-8 (or a character cut at `max`): the replacement
        // characters may make the text longer than `max`.
        let mut s = String::from_utf8_lossy(v).into_owned();
        if s.len() > max {
            let mut n = max;
            while !s.is_char_boundary(n) {
                n -= 1;
            }
            s.truncate(n);
        }
        (Cow::Owned(s), cut)
    }

    /// Body bytes; returns how many of `data` were consumed.
    fn body(
        &mut self,
        dir: Dir,
        ts: i64,
        b: Body,
        data: &[u8],
        out: &mut dyn TxSink,
    ) -> usize {
        match b {
            Body::Length(left) => {
                let n = (left.min(data.len() as u64)) as usize;
                let s = self.side(dir);
                s.span.bytes += n as u64;
                s.span.last_ns = ts;
                s.body_len += n as u64;
                let left = left - n as u64;
                if left == 0 {
                    self.end_message(dir, ts, out);
                } else {
                    s.state = State::Body(Body::Length(left));
                }
                n
            }
            Body::UntilClose => {
                let s = self.side(dir);
                s.span.bytes += data.len() as u64;
                s.span.last_ns = ts;
                s.body_len += data.len() as u64;
                data.len()
            }
            Body::Unframed(_) => {
                // Up to the next segment that opens a message (see `feed`).
                let s = self.side(dir);
                s.span.bytes += data.len() as u64;
                s.span.last_ns = ts;
                s.unframed += data.len() as u64;
                data.len()
            }
            Body::Chunked(Chunked::Data(left)) => {
                let n = (left.min(data.len() as u64)) as usize;
                let s = self.side(dir);
                s.span.bytes += n as u64;
                s.span.last_ns = ts;
                s.body_len += n as u64;
                let left = left - n as u64;
                s.state = State::Body(Body::Chunked(if left == 0 {
                    Chunked::DataEnd
                } else {
                    Chunked::Data(left)
                }));
                n
            }
            Body::Chunked(c) => {
                // A line: chunk size, the CRLF after data, or a trailer line.
                let nl = find_nl(data);
                let s = self.side(dir);
                let Some(nl) = nl else {
                    if s.buf.len() + data.len() > 1024 {
                        // No sane chunk line is this long: lost.
                        return self.lost_in_body(dir, ts, data.len(), out);
                    }
                    s.buf.extend_from_slice(data);
                    s.span.bytes += data.len() as u64;
                    return data.len();
                };
                s.span.bytes += (nl + 1) as u64;
                s.span.last_ns = ts;
                let line_owned;
                let line: &[u8] = if s.buf.is_empty() {
                    &data[..nl]
                } else {
                    s.buf.extend_from_slice(&data[..nl]);
                    line_owned = std::mem::take(&mut s.buf);
                    &line_owned
                };
                let line = trim(line);
                match c {
                    Chunked::Size => {
                        let hex = line.split(|&b| b == b';').next().unwrap_or(b"");
                        match parse_hex(trim(hex)) {
                            Some(0) => s.state = State::Body(Body::Chunked(Chunked::Trailer)),
                            Some(n) => s.state = State::Body(Body::Chunked(Chunked::Data(n))),
                            None => return nl + 1 + self.lost_in_body(dir, ts, 0, out),
                        }
                    }
                    Chunked::DataEnd => {
                        if line.is_empty() {
                            s.state = State::Body(Body::Chunked(Chunked::Size));
                        } else {
                            return nl + 1 + self.lost_in_body(dir, ts, 0, out);
                        }
                    }
                    Chunked::Trailer => {
                        if line.is_empty() {
                            self.end_message(dir, ts, out);
                        }
                    }
                    Chunked::Data(_) => {}
                }
                self.side(dir).buf.clear();
                nl + 1
            }
        }
    }

    /// The body framing makes no sense (or was cut by a gap): the message
    /// ends here with what was read; the direction resynchronises.
    fn lost_in_body(
        &mut self,
        dir: Dir,
        ts: i64,
        skip: usize,
        out: &mut dyn TxSink,
    ) -> usize {
        self.stats.unparsed_bytes += skip as u64;
        self.stats.malformed += 1;
        self.side(dir).buf.clear();
        self.end_message(dir, ts, out);
        let s = self.side(dir);
        s.state = State::Resync;
        s.line_start = false;
        skip
    }

    fn end_message(&mut self, dir: Dir, ts: i64, out: &mut dyn TxSink) {
        match dir {
            Dir::ToServer => self.end_request(ts),
            Dir::ToClient => self.end_response(ts, true, out),
        }
    }

    fn end_request(&mut self, ts: i64) {
        let s = &mut self.req;
        s.state = State::Idle;
        s.messages += 1;
        s.span.last_ns = ts;
        if self.req_in_queue {
            if let Some(p) = self.pending.back_mut() {
                p.req = s.span;
                p.tx.request_body_len = s.body_len;
                p.tx.request_missing_bytes = s.missing;
            }
        }
        self.req_in_queue = false;
    }

    /// `complete` is false when the stream ended inside a body whose end the
    /// headers declared (Content-Length or chunked): the response was cut short.
    fn end_response(&mut self, ts: i64, complete: bool, out: &mut dyn TxSink) {
        let s = &mut self.resp;
        s.state = State::Idle;
        s.messages += 1;
        s.span.last_ns = ts;
        let Some((request, mut tx)) = self.cur.take() else {
            return;
        };
        tx.response_body_len = s.body_len;
        tx.response_missing_bytes = s.missing;
        let status = if request.is_none() {
            TxStatus::NoRequest
        } else if !complete {
            TxStatus::Partial
        } else if tx.status_code >= 400 {
            TxStatus::Error
        } else {
            TxStatus::Ok
        };
        out.push(Transaction {
            request,
            response: Some(s.span),
            status,
            detail: Detail::Http(tx),
        });
    }

    /// Skips to a line that starts a message; returns bytes consumed.
    fn resync(&mut self, dir: Dir, ts: i64, data: &[u8]) -> usize {
        let s = match dir {
            Dir::ToServer => &mut self.req,
            Dir::ToClient => &mut self.resp,
        };
        let mut i = 0;
        loop {
            if s.line_start {
                // Bytes held from the previous packet complete the probe.
                let held = s.buf.len();
                let mut probe_buf = [0u8; PROBE_LEN];
                let from_data = (PROBE_LEN - held.min(PROBE_LEN)).min(data.len() - i);
                let hl = held.min(PROBE_LEN);
                probe_buf[..hl].copy_from_slice(&s.buf[..hl]);
                probe_buf[hl..hl + from_data].copy_from_slice(&data[i..i + from_data]);
                match opens(dir, &probe_buf[..hl + from_data]) {
                    Opens::Yes => {
                        // Restart the message with the held bytes.
                        let held_bytes = std::mem::take(&mut s.buf);
                        s.state = State::Head;
                        s.span = Span {
                            first_ns: ts,
                            last_ns: ts,
                            bytes: 0,
                        };
                        s.body_len = 0;
                        s.missing = 0;
                        s.unframed = 0;
                        s.unframed_head = 0;
                        s.buf = held_bytes;
                        s.span.bytes = s.buf.len() as u64;
                        self.stats.resyncs += 1;
                        return i;
                    }
                    Opens::Maybe if i + from_data == data.len() => {
                        s.buf.extend_from_slice(&data[i..]);
                        return data.len();
                    }
                    _ => {
                        self.stats.unparsed_bytes += held as u64;
                        s.buf.clear();
                        s.line_start = false;
                    }
                }
            }
            match find_nl(&data[i..]) {
                Some(p) => {
                    self.stats.unparsed_bytes += (p + 1) as u64;
                    i += p + 1;
                    s.line_start = true;
                    if i == data.len() {
                        return i;
                    }
                }
                None => {
                    self.stats.unparsed_bytes += (data.len() - i) as u64;
                    return data.len();
                }
            }
        }
    }

    fn gap_in(&mut self, dir: Dir, ts: i64, len: u64, out: &mut dyn TxSink) {
        let state = self.side(dir).state;
        match state {
            State::Body(Body::Length(left)) => {
                let s = self.side(dir);
                let lost = len.min(left);
                s.missing += lost;
                s.span.bytes += lost;
                s.span.last_ns = ts;
                if len < left {
                    s.state = State::Body(Body::Length(left - len));
                } else {
                    self.end_message(dir, ts, out);
                    if len > left {
                        // The gap also ate the start of what followed.
                        let s = self.side(dir);
                        s.state = State::Resync;
                        s.line_start = false;
                    }
                }
            }
            State::Body(Body::UntilClose) => {
                let s = self.side(dir);
                s.missing += len;
                s.span.bytes += len;
                s.span.last_ns = ts;
            }
            State::Body(Body::Unframed(_)) => {
                // Bytes sent and not captured: missed, whatever they were.
                let s = self.side(dir);
                s.missing += len;
                s.span.bytes += len;
                s.span.last_ns = ts;
            }
            State::Body(Body::Chunked(_)) => {
                // Chunk framing is lost: end the message with what was read.
                let s = self.side(dir);
                s.missing += len;
                s.span.bytes += len;
                self.lost_in_body(dir, ts, 0, out);
            }
            State::Head => {
                let (s, stats) = self.split(dir);
                stats.unparsed_bytes += s.span.bytes;
                s.buf.clear();
                s.state = State::Resync;
                s.line_start = false;
            }
            State::Idle => {
                // The gap may be a whole message, or the start of one: probe
                // the next bytes as a possible message start.
                let s = self.side(dir);
                s.state = State::Resync;
                s.line_start = true;
            }
            State::Resync => {
                let (s, stats) = self.split(dir);
                stats.unparsed_bytes += s.buf.len() as u64;
                s.buf.clear();
                s.line_start = true;
            }
        }
        // After a gap, the next byte may well start a message (the gap ended
        // one exactly): let Resync probe there.
        let s = self.side(dir);
        if s.state == State::Resync {
            s.line_start = true;
        }
    }
}

impl HttpParser {
    /// `len` bytes of `dir` past the snap length (see the module's doc).
    fn cut_in(&mut self, dir: Dir, ts: i64, len: u64, out: &mut dyn TxSink) {
        let state = self.side(dir).state;
        match state {
            State::Body(Body::Length(left)) => {
                let s = self.side(dir);
                let n = len.min(left);
                s.body_len += n;
                s.span.bytes += n;
                s.span.last_ns = ts;
                if len < left {
                    s.state = State::Body(Body::Length(left - len));
                } else {
                    self.end_message(dir, ts, out);
                    if len > left {
                        // The next message starts in the cut.
                        self.lost_in_cut(dir, ts, len - left, out);
                    }
                }
            }
            State::Body(Body::UntilClose) => {
                let s = self.side(dir);
                s.body_len += len;
                s.span.bytes += len;
                s.span.last_ns = ts;
            }
            State::Body(Body::Chunked(Chunked::Data(left))) if len <= left => {
                let s = self.side(dir);
                s.body_len += len;
                s.span.bytes += len;
                s.span.last_ns = ts;
                s.state = State::Body(Body::Chunked(if len == left {
                    Chunked::DataEnd
                } else {
                    Chunked::Data(left - len)
                }));
            }
            State::Body(Body::Chunked(c)) => {
                // A chunk-size line (or the trailer) is past the cut: the
                // chunk data before it is body, the rest unframed.
                let data = if let Chunked::Data(left) = c { left } else { 0 };
                let s = self.side(dir);
                s.body_len += data;
                s.unframed += len - data;
                s.unframed_head = 0;
                s.span.bytes += len;
                s.span.last_ns = ts;
                s.buf.clear();
                s.state = State::Body(Body::Unframed(None));
            }
            State::Body(Body::Unframed(_)) => {
                let s = self.side(dir);
                s.unframed += len;
                s.span.bytes += len;
                s.span.last_ns = ts;
            }
            State::Head => self.cut_head(dir, ts, len, out),
            State::Idle => self.lost_in_cut(dir, ts, len, out),
            State::Resync => {
                let (s, stats) = self.split(dir);
                stats.unparsed_bytes += len + s.buf.len() as u64;
                s.buf.clear();
                // The next segment may open a message.
                s.line_start = true;
            }
        }
        if dir == Dir::ToServer && self.req_in_queue && matches!(self.req.state, State::Body(Body::Unframed(_))) {
            // The request as far as it is known, should its response come
            // before the segment that ends it.
            if let Some(p) = self.pending.back_mut() {
                p.req = self.req.span;
            }
        }
    }

    /// A header block whose end is past the cut: its whole lines make the
    /// message, which then runs unframed; without a whole start line it is lost.
    fn cut_head(&mut self, dir: Dir, ts: i64, len: u64, out: &mut dyn TxSink) {
        let s = self.side(dir);
        let mut buf = std::mem::take(&mut s.buf);
        let Some(nl) = buf.iter().rposition(|&b| b == b'\n') else {
            self.stats.unparsed_bytes += buf.len() as u64;
            buf.clear();
            self.side(dir).buf = buf;
            return self.lost_in_cut(dir, ts, len, out);
        };
        s.span.bytes += len;
        s.span.last_ns = ts;
        let head = &buf[..=nl];
        self.message_head(dir, ts, &HeadScan::of(head), head.len(), true, out);
        let s = self.side(dir);
        if let State::Body(Body::Unframed(_)) = s.state {
            // What follows the whole lines: the header's rest and the body.
            s.unframed = (buf.len() - nl - 1) as u64 + len;
            s.unframed_head = s.unframed;
        }
        // Keep the allocation for the next split header.
        buf.clear();
        self.side(dir).buf = buf;
    }

    /// A message whose start is past the cut: lost, counted; a response so
    /// lost still answers the oldest request, which is emitted as partial.
    fn lost_in_cut(&mut self, dir: Dir, ts: i64, len: u64, out: &mut dyn TxSink) {
        self.stats.malformed += 1;
        self.stats.unparsed_bytes += len;
        if dir == Dir::ToClient {
            if let Some(p) = self.pending.pop_front() {
                if self.pending.is_empty() {
                    self.req_in_queue = false;
                }
                out.push(Transaction {
                    request: Some(p.req),
                    response: Some(Span {
                        first_ns: ts,
                        last_ns: ts,
                        bytes: len,
                    }),
                    status: TxStatus::Partial,
                    detail: Detail::Http(p.tx),
                });
            }
        }
        let s = self.side(dir);
        s.buf.clear();
        s.state = State::Resync;
        s.line_start = true;
    }

    /// The end of a message that ran unframed. With a declared Content-Length:
    /// when the bytes after its last framing (gaps included) reach it, the
    /// body is whole and of that length, less what gaps missed; when the
    /// message ended short of it (the connection's or the capture's end, or
    /// the next message), only the bytes after the segment that cut the
    /// header are surely body, the rest of the declared length is counted
    /// missing and a response is partial, as the same message read whole
    /// would be. Without a declared length, the bytes after its last framing
    /// are missed, not body.
    fn end_unframed(&mut self, dir: Dir, ts: i64, declared: Option<u64>, out: &mut dyn TxSink) {
        let s = self.side(dir);
        let complete = match declared {
            Some(n) if s.unframed + s.missing >= n => {
                s.body_len = n.saturating_sub(s.missing);
                true
            }
            Some(n) => {
                s.body_len = s.unframed - s.unframed_head;
                s.missing = n - s.body_len;
                false
            }
            None => {
                s.missing += s.unframed;
                true
            }
        };
        s.unframed = 0;
        s.unframed_head = 0;
        match dir {
            Dir::ToServer => self.end_request(ts),
            Dir::ToClient => self.end_response(ts, complete, out),
        }
    }
}

fn status_line(line: &[u8], tx: &mut HttpTx) -> bool {
    let Some(rest) = line.strip_prefix(b"HTTP/") else {
        return false;
    };
    let mut parts = rest.splitn(3, |&b| b == b' ');
    let ver = parts.next().unwrap_or(b"");
    let code = parts.next().unwrap_or(b"");
    let reason = trim(parts.next().unwrap_or(b""));
    let Some(code) = parse_u64(code).filter(|c| (100..1000).contains(c)) else {
        return false;
    };
    tx.version = shared_lossy(ver);
    tx.status_code = code as u16;
    tx.reason = shared_lossy(&reason[..reason.len().min(256)]);
    true
}

/// Position of the first `\n` (header blocks are scanned on every message,
/// so this loop is the parser's hot spot).
#[inline]
fn find_nl(hay: &[u8]) -> Option<usize> {
    find_either::<b'\n', b'\n'>(hay)
}

/// Position of the first `:` or `\n` (the name of every header field is
/// scanned for its colon).
#[inline]
fn find_colon_or_nl(hay: &[u8]) -> Option<usize> {
    find_either::<b':', b'\n'>(hay)
}

/// Position of the first byte `A` or `B`, eight bytes at a time (with
/// `A == B`, one test: the branch on constants is gone once compiled).
#[inline]
fn find_either<const A: u8, const B: u8>(hay: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let (wa, wb) = (LO * A as u64, LO * B as u64);
    let mut i = 0;
    while i + 8 <= hay.len() {
        let mut w = [0u8; 8];
        w.copy_from_slice(&hay[i..i + 8]);
        let w = u64::from_le_bytes(w);
        // A zero byte in a (or b) is an `A` (a `B`) in the input; the
        // lowest flagged byte of either test is exact, so the lowest of both is.
        let a = w ^ wa;
        let mut z = a.wrapping_sub(LO) & !a;
        if A != B {
            let b = w ^ wb;
            z |= b.wrapping_sub(LO) & !b;
        }
        let z = z & HI;
        if z != 0 {
            return Some(i + (z.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    hay[i..].iter().position(|&c| c == A || c == B).map(|p| i + p)
}

/// Index just after the blank line ending a header block, searching for
/// line ends from `from`. Accepts CRLF and bare LF line ends.
fn find_head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < buf.len() {
        let p = i + find_nl(&buf[i..])?;
        match (buf.get(p + 1), buf.get(p + 2)) {
            (Some(b'\n'), _) => return Some(p + 2),
            (Some(b'\r'), Some(b'\n')) => return Some(p + 3),
            _ => {}
        }
        i = p + 1;
    }
    None
}

/// Lines of a header block, without their CR/LF (the tests' plain reading).
#[cfg(test)]
struct Lines<'a> {
    data: &'a [u8],
}

#[cfg(test)]
impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.data.is_empty() {
            return None;
        }
        let (line, rest) = match find_nl(self.data) {
            Some(p) => (&self.data[..p], &self.data[p + 1..]),
            None => (self.data, &b""[..]),
        };
        self.data = rest;
        Some(line.strip_suffix(b"\r").unwrap_or(line))
    }
}

/// The fields of a header block after its first line: (name trimmed, value
/// as sent, to be trimmed by who reads it: most values are not read), in one
/// pass per line (the name's bytes up to the colon, then the value up to its
/// line end); lines without a colon are skipped and the first empty line ends
/// the block, as [`Lines`] would give them.
struct Fields<'a> {
    data: &'a [u8],
    /// Once the empty line ending the block was read: the bytes after it.
    after_blank: Option<&'a [u8]>,
}

impl<'a> Iterator for Fields<'a> {
    type Item = (&'a [u8], &'a [u8]);
    fn next(&mut self) -> Option<(&'a [u8], &'a [u8])> {
        loop {
            let d = self.data;
            // The name ends at the colon; a line end first means no field.
            let Some(stop) = find_colon_or_nl(d) else {
                // The last line, without a line end and without a colon.
                self.data = &[];
                return None;
            };
            if d[stop] == b'\n' {
                if stop == 0 || (stop == 1 && d[0] == b'\r') {
                    // The empty line ending the block.
                    self.data = &[];
                    self.after_blank = Some(&d[stop + 1..]);
                    return None;
                }
                self.data = &d[stop + 1..];
                continue;
            }
            let rest = &d[stop + 1..];
            let (value, next) = match find_nl(rest) {
                Some(p) => (&rest[..p], &rest[p + 1..]),
                None => (rest, &b""[..]),
            };
            self.data = next;
            return Some((trim(&d[..stop]), value));
        }
    }
}

/// A header block read in one pass: its start line, the values of the fields
/// the parser reads (the last given of each, untrimmed) and where the block
/// ends, found by the same pass (the line ends are searched once).
struct HeadScan<'a> {
    /// The start line, without its line end.
    first: &'a [u8],
    /// The field lines after it, to the block's end (read again only for
    /// `http_headers`).
    fields: &'a [u8],
    /// The block's length up to and with its empty line; `None` when the
    /// bytes read hold no empty line (a block not yet whole, or cut).
    end: Option<usize>,
    content_length: Option<&'a [u8]>,
    transfer_encoding: Option<&'a [u8]>,
    upgrade: Option<&'a [u8]>,
    host: Option<&'a [u8]>,
    user_agent: Option<&'a [u8]>,
    referer: Option<&'a [u8]>,
    content_type: Option<&'a [u8]>,
    /// The first address of the first X-Forwarded-For (or X-Forward-For,
    /// X-Real-IP) that has one, trimmed: noted in the pass, so the field
    /// lines are not read again for it.
    forwarded: Option<&'a [u8]>,
}

impl<'a> HeadScan<'a> {
    /// Reads `data`, which starts with a block's start line, up to the first
    /// empty line (or its end); a block not whole in `data` has `end: None`.
    fn of(data: &'a [u8]) -> HeadScan<'a> {
        let (first, rest) = match find_nl(data) {
            Some(p) => (&data[..p], &data[p + 1..]),
            None => (data, &b""[..]),
        };
        let mut scan = HeadScan {
            first: first.strip_suffix(b"\r").unwrap_or(first),
            fields: rest,
            end: None,
            content_length: None,
            transfer_encoding: None,
            upgrade: None,
            host: None,
            user_agent: None,
            referer: None,
            content_type: None,
            forwarded: None,
        };
        let mut fields = Fields { data: rest, after_blank: None };
        for (name, value) in fields.by_ref() {
            let slot = match FieldName::of(name) {
                FieldName::ContentLength => &mut scan.content_length,
                FieldName::TransferEncoding => &mut scan.transfer_encoding,
                FieldName::Upgrade => &mut scan.upgrade,
                FieldName::Host => &mut scan.host,
                FieldName::UserAgent => &mut scan.user_agent,
                FieldName::Referer => &mut scan.referer,
                FieldName::ContentType => &mut scan.content_type,
                FieldName::ForwardedFor => {
                    if scan.forwarded.is_none() {
                        let first = trim(trim(value).split(|&b| b == b',').next().unwrap_or(b""));
                        if !first.is_empty() {
                            scan.forwarded = Some(first);
                        }
                    }
                    continue;
                }
                FieldName::Other => continue,
            };
            *slot = Some(value);
        }
        if let Some(after) = fields.after_blank {
            scan.end = Some(data.len() - after.len());
            scan.fields = &rest[..rest.len() - after.len()];
        }
        scan
    }
}

/// The header names the parser reads, told apart by length first (most
/// names a message carries are none of them and differ in length).
#[derive(Clone, Copy)]
enum FieldName {
    ContentLength,
    TransferEncoding,
    Upgrade,
    Host,
    UserAgent,
    Referer,
    ContentType,
    ForwardedFor,
    Other,
}

impl FieldName {
    #[inline]
    fn of(name: &[u8]) -> FieldName {
        let is = |known: &[u8]| name.eq_ignore_ascii_case(known);
        match name.len() {
            4 if is(b"host") => FieldName::Host,
            7 if is(b"upgrade") => FieldName::Upgrade,
            7 if is(b"referer") => FieldName::Referer,
            9 if is(b"x-real-ip") => FieldName::ForwardedFor,
            10 if is(b"user-agent") => FieldName::UserAgent,
            12 if is(b"content-type") => FieldName::ContentType,
            13 if is(b"x-forward-for") => FieldName::ForwardedFor,
            14 if is(b"content-length") => FieldName::ContentLength,
            15 if is(b"x-forwarded-for") => FieldName::ForwardedFor,
            17 if is(b"transfer-encoding") => FieldName::TransferEncoding,
            _ => FieldName::Other,
        }
    }
}

/// `v` as lossy UTF-8, shared (see `texts`): a common text (method,
/// version, reason) without conversion or lookup.
fn shared_lossy(v: &[u8]) -> Arc<str> {
    texts::common(v).unwrap_or_else(|| texts::shared(&String::from_utf8_lossy(v)))
}

fn trim(v: &[u8]) -> &[u8] {
    // Plain index loops: most names and values have nothing to trim, and the
    // first test of each end then settles it.
    let (mut s, mut e) = (0, v.len());
    while s < e && v[s].is_ascii_whitespace() {
        s += 1;
    }
    while e > s && v[e - 1].is_ascii_whitespace() {
        e -= 1;
    }
    &v[s..e]
}

fn parse_u64(v: &[u8]) -> Option<u64> {
    let v = trim(v);
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0u64, |a, &b| a * 10 + (b - b'0') as u64))
}

fn parse_hex(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 15 {
        return None;
    }
    let mut n = 0u64;
    for &b in v {
        let d = (b as char).to_digit(16)?;
        n = n * 16 + d as u64;
    }
    Some(n)
}

fn contains_ci(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

/// `a=1&b=2` -> `a=?&b=?` (names kept, values replaced).
pub(crate) fn redact_query(q: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(q.len());
    for (k, part) in q.split(|&b| b == b'&').enumerate() {
        if k > 0 {
            out.push(b'&');
        }
        match part.iter().position(|&b| b == b'=') {
            Some(e) => {
                out.extend_from_slice(&part[..=e]);
                out.push(b'?');
            }
            None => out.extend_from_slice(part),
        }
    }
    out
}

#[cfg(any(test, feature = "fuzzing"))]
/// Fuzzing entry: `data` is a script of steps for one connection. Each step
/// is a control byte `c` (bit 0: direction; bits 1-2: 3 = a gap of `c >> 3`
/// bytes, else data; bits 3-7: length - 1) followed by that many bytes. The
/// first byte picks the configuration. Must never panic.
pub fn fuzz(data: &[u8]) {
    let Some((&conf, rest)) = data.split_first() else {
        return;
    };
    let cfg = ParseConfig {
        redact: conf & 1 != 0,
        max_header_bytes: if conf & 2 != 0 { 64 } else { 64 * 1024 },
        max_text_bytes: if conf & 4 != 0 { 3 } else { 4096 },
        http_headers: vec!["host".into(), "cookie".into()],
        transaction_timeout_ns: 5,
        ..ParseConfig::default()
    };
    let mut p = HttpParser::new(&cfg);
    crate::fuzz_feed(&mut p, rest, &mut Vec::new());
}

impl StreamParser for HttpParser {
    fn data(&mut self, dir: Dir, ts_ns: i64, data: &[u8], out: &mut dyn TxSink) {
        if self.upgraded {
            // WebSocket, a CONNECT tunnel...: counted, not parsed.
            self.stats.unparsed_bytes += data.len() as u64;
            return;
        }
        self.feed(dir, ts_ns, data, out);
    }

    fn gap(&mut self, dir: Dir, ts_ns: i64, len: u64, out: &mut dyn TxSink) {
        self.stats.gaps += 1;
        self.gap_in(dir, ts_ns, len, out);
    }

    fn cut(&mut self, dir: Dir, ts_ns: i64, len: u64, out: &mut dyn TxSink) {
        if self.upgraded || self.h2c.is_some() || self.tunnel.is_some() {
            self.stats.unparsed_bytes += len;
            return;
        }
        self.cut_in(dir, ts_ns, len, out);
    }

    fn expire(&mut self, now_ns: i64, out: &mut dyn TxSink) {
        // Called at every segment: most find no request waiting past its
        // timeout, so that test comes first and costs a few instructions
        // (the loop and the queue's drain cost ~100 a segment when inline here).
        // Only complete requests wait for a response; the one being read is not expired.
        let waiting = self.pending.len().saturating_sub(usize::from(self.req_in_queue));
        let front_stale = waiting > 0
            && self.pending.front().is_some_and(|p| now_ns - p.req.last_ns > self.cfg.transaction_timeout_ns);
        if front_stale {
            self.expire_waiting(now_ns, waiting, out);
        }
    }

    fn finish(&mut self, ts_ns: i64, out: &mut dyn TxSink) {
        // A response read until the connection's end is complete now; one
        // cut short before its declared end says so, with the declared bytes
        // not seen counted as missing. A message cut short ends at its last
        // byte seen, not at the connection's last packet (often the peer's
        // ACK of it): its latency is the same whether its segments were
        // captured whole or cut to a snap length (`end_unframed`).
        match self.resp.state {
            State::Body(Body::UntilClose) => self.end_response(ts_ns, true, out),
            State::Body(Body::Unframed(declared)) => {
                let last = self.resp.span.last_ns;
                self.end_unframed(Dir::ToClient, last, declared, out)
            }
            State::Body(body) => {
                if let Body::Length(left) = body {
                    self.resp.missing += left;
                }
                let last = self.resp.span.last_ns;
                self.end_response(last, false, out)
            }
            State::Head => self.stats.unparsed_bytes += self.resp.span.bytes,
            _ => {}
        }
        match self.req.state {
            State::Body(Body::Unframed(declared)) => {
                let last = self.req.span.last_ns;
                self.end_unframed(Dir::ToServer, last, declared, out)
            }
            State::Body(_) => {
                let last = self.req.span.last_ns;
                self.end_request(last)
            }
            State::Head => self.stats.unparsed_bytes += self.req.span.bytes,
            _ => {}
        }
        self.req_in_queue = false;
        for p in self.pending.drain(..) {
            out.push(Transaction {
                request: Some(p.req),
                response: None,
                status: TxStatus::NoResponse,
                detail: Detail::Http(p.tx),
            });
        }
        for s in [&mut self.req, &mut self.resp] {
            s.state = State::Idle;
            s.buf = Vec::new();
        }
    }

    fn gave_up(&self) -> bool {
        // Not HTTP at all (TLS on port 80, another protocol): nothing ever parsed
        // and a fair amount of bytes seen.
        self.upgraded || (!self.ever_parsed && self.stats.unparsed_bytes > 16 * 1024)
    }

    fn stats(&self) -> ParseStats {
        self.stats
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::testutil::{run_parser, tcp_events, Ev, Facts};

    fn http(t: &Transaction) -> &HttpTx {
        match &t.detail {
            Detail::Http(h) => h,
            _ => panic!("not http"),
        }
    }

    /// Feeds a transcript: (dir, bytes) pairs, each at ts = its index.
    fn run(cfg: &ParseConfig, msgs: &[(Dir, &[u8])]) -> (Vec<Transaction>, ParseStats) {
        let mut p = HttpParser::new(cfg);
        let mut out = Vec::new();
        for (i, (d, m)) in msgs.iter().enumerate() {
            p.data(*d, i as i64, m, &mut out);
        }
        p.finish(msgs.len() as i64, &mut out);
        (out, p.stats())
    }

    /// Same transcript, every message split at every byte position in turn:
    /// the result must not depend on segmentation.
    fn run_split_everywhere(cfg: &ParseConfig, msgs: &[(Dir, &[u8])]) -> Vec<Transaction> {
        let (whole, _) = run(cfg, msgs);
        for (k, (_, m)) in msgs.iter().enumerate() {
            for cut in 1..m.len() {
                let mut p = HttpParser::new(cfg);
                let mut out = Vec::new();
                for (i, (d, mm)) in msgs.iter().enumerate() {
                    if i == k {
                        p.data(*d, i as i64, &mm[..cut], &mut out);
                        p.data(*d, i as i64, &mm[cut..], &mut out);
                    } else {
                        p.data(*d, i as i64, mm, &mut out);
                    }
                }
                p.finish(msgs.len() as i64, &mut out);
                let a: Vec<_> = out
                    .iter()
                    .map(|t| {
                        (
                            t.status,
                            http(t).clone(),
                            t.request.map(|s| s.bytes),
                            t.response.map(|s| s.bytes),
                        )
                    })
                    .collect();
                let b: Vec<_> = whole
                    .iter()
                    .map(|t| {
                        (
                            t.status,
                            http(t).clone(),
                            t.request.map(|s| s.bytes),
                            t.response.map(|s| s.bytes),
                        )
                    })
                    .collect();
                assert_eq!(a, b, "message {k} cut at {cut}");
            }
        }
        whole
    }

    const S: Dir = Dir::ToServer;
    const C: Dir = Dir::ToClient;

    #[test]
    fn keep_alive_pipelined_and_chunked_with_trailers() {
        let cfg = ParseConfig::default();
        let req = b"GET /a?x=1 HTTP/1.1\r\nHost: h\r\nUser-Agent: ua\r\n\r\nHEAD /b HTTP/1.1\r\nHost: h\r\n\r\nGET /c HTTP/1.1\r\n\r\n";
        let resp: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 200 OK\r\nContent-Length: 999\r\n\r\nHTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n";
        let txs = run_split_everywhere(&cfg, &[(S, req), (C, resp)]);
        assert_eq!(txs.len(), 3);
        let h: Vec<_> = txs.iter().map(http).collect();
        assert_eq!(
            (
                &*h[0].method,
                &*h[0].path,
                &*h[0].query
            ),
            ("GET", "/a", "x=1")
        );
        assert_eq!(
            (
                &*h[0].host,
                &*h[0].user_agent,
                &*h[0].version
            ),
            ("h", "ua", "1.1")
        );
        assert_eq!((h[0].status_code, h[0].response_body_len), (200, 5));
        assert_eq!(txs[0].response.unwrap().bytes, 38 + 5);
        // HEAD: Content-Length announces the size of a GET, no body follows.
        assert_eq!(
            (
                &*h[1].method,
                h[1].response_body_len,
                h[1].response_content_length
            ),
            ("HEAD", 0, Some(999))
        );
        assert_eq!(
            (
                h[2].status_code,
                &*h[2].reason,
                h[2].response_body_len
            ),
            (404, "Not Found", 5)
        );
        assert_eq!(txs[2].status, TxStatus::Error);
        assert_eq!(txs[0].status, TxStatus::Ok);
    }

    #[test]
    fn continue_100_and_no_body_statuses() {
        let cfg = ParseConfig::default();
        let txs = run_split_everywhere(
            &cfg,
            &[
                (S, b"POST /up HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n"),
                (C, b"HTTP/1.1 100 Continue\r\n\r\n"),
                (S, b"dataGET /n HTTP/1.1\r\n\r\nGET /m HTTP/1.1\r\n\r\n"),
                (C, b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"),
            ],
        );
        assert_eq!(txs.len(), 3);
        let h: Vec<_> = txs.iter().map(http).collect();
        assert_eq!(
            (
                h[0].status_code,
                h[0].info_code,
                h[0].request_body_len,
                h[0].response_body_len
            ),
            (201, 100, 4, 2)
        );
        assert_eq!(txs[0].request.unwrap().bytes, 62 + 4);
        assert_eq!((h[1].status_code, h[1].response_body_len), (304, 0));
        assert_eq!((h[2].status_code, &*h[2].path), (204, "/m"));
    }

    #[test]
    fn until_close_and_unmatched() {
        let cfg = ParseConfig::default();
        let (txs, _) = run(
            &cfg,
            &[
                (C, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
                (S, b"GET / HTTP/1.0\r\n\r\nGET /never HTTP/1.0\r\n\r\n"),
                (C, b"HTTP/1.0 200 OK\r\n\r\nall of this"),
                (C, b" until the end"),
            ],
        );
        assert_eq!(txs.len(), 3);
        assert_eq!(txs[0].status, TxStatus::NoRequest);
        assert_eq!(http(&txs[1]).response_body_len, 25);
        assert_eq!(txs[1].response.unwrap().last_ns, 4);
        assert_eq!(
            (txs[2].status, &*http(&txs[2]).path),
            (TxStatus::NoResponse, "/never")
        );
    }

    #[test]
    fn response_cut_short_is_partial() {
        let cfg = ParseConfig::default();
        // The stream ends 6 bytes before the declared Content-Length, and
        // inside a chunked body: both responses are partial, never "ok".
        let (txs, _) = run(
            &cfg,
            &[
                (S, b"GET /big HTTP/1.1\r\n\r\n"),
                (C, b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabcd"),
            ],
        );
        assert_eq!(txs.len(), 1);
        let h = http(&txs[0]);
        assert_eq!(txs[0].status, TxStatus::Partial);
        assert_eq!((h.response_body_len, h.response_missing_bytes), (4, 6));
        // It ends at its last byte seen (message 1), not at the stream's
        // end (2, the connection's last packet: often the client's ACK).
        assert_eq!(txs[0].response.map(|r| r.last_ns), Some(1));
        let (txs, _) = run(
            &cfg,
            &[
                (S, b"GET /c HTTP/1.1\r\n\r\n"),
                (C, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n"),
            ],
        );
        assert_eq!((txs.len(), txs[0].status), (1, TxStatus::Partial));
        assert_eq!(txs[0].response.map(|r| r.last_ns), Some(1));
        // A request body cut short by the stream's end: the same.
        let (txs, _) = run(&cfg, &[(S, b"POST /up HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc")]);
        assert_eq!((txs.len(), txs[0].request.map(|r| r.last_ns)), (1, Some(0)));
        // Read until close: complete when the stream ends.
        let (txs, _) = run(&cfg, &[(S, b"GET / HTTP/1.0\r\n\r\n"), (C, b"HTTP/1.0 200 OK\r\n\r\nbody")]);
        assert_eq!((txs.len(), txs[0].status), (1, TxStatus::Ok));
    }

    #[test]
    fn expire_reports_no_response() {
        let cfg = ParseConfig {
            transaction_timeout_ns: 10,
            ..ParseConfig::default()
        };
        let mut p = HttpParser::new(&cfg);
        let mut out = Vec::new();
        p.data(
            S,
            0,
            b"GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 10\r\n\r\n",
            &mut out,
        );
        p.expire(5, &mut out);
        assert!(out.is_empty());
        p.expire(11, &mut out);
        // /a expired; /b is still being read (its body is incomplete) and is kept.
        assert_eq!(out.len(), 1);
        assert_eq!(
            (out[0].status, &*http(&out[0]).path),
            (TxStatus::NoResponse, "/a")
        );
    }

    #[test]
    fn redact_and_truncate() {
        let cfg = ParseConfig {
            redact: true,
            max_text_bytes: 12,
            http_headers: vec!["Authorization".into(), "X-Custom".into()],
            ..ParseConfig::default()
        };
        let (txs, _) = run(
            &cfg,
            &[(S, b"GET /p?user=bob&pass=secret&flag HTTP/1.1\r\nauthorization: Basic Zm9v\r\nX-Custom: 0123456789abcdef\r\n\r\n")],
        );
        let h = http(&txs[0]);
        assert_eq!(&*h.query, "user=?&pass=");
        assert!(h.uri_truncated);
        assert_eq!(&*h.uri, "/p?user=?&pa");
        assert_eq!(
            h.headers,
            vec![
                ("authorization".into(), "*".into()),
                ("x-custom".into(), "0123456789ab".into())
            ]
        );
        let cfg = ParseConfig {
            redact: true,
            ..ParseConfig::default()
        };
        let (txs, _) = run(
            &cfg,
            &[(S, b"GET /p?user=bob&pass=secret&flag HTTP/1.1\r\n\r\n")],
        );
        assert_eq!(&*http(&txs[0]).query, "user=?&pass=?&flag");
        assert!(!http(&txs[0]).uri_truncated);
    }

    #[test]
    fn header_limit_then_resync() {
        let cfg = ParseConfig {
            max_header_bytes: 100,
            ..ParseConfig::default()
        };
        let mut big = b"GET /big HTTP/1.1\r\nX: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', 300));
        big.extend_from_slice(b"\r\n\r\nGET /ok HTTP/1.1\r\n\r\n");
        let (txs, st) = run(
            &cfg,
            &[
                (S, &big),
                (C, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
            ],
        );
        assert_eq!(txs.len(), 1);
        assert_eq!(&*http(&txs[0]).path, "/ok");
        assert!(st.unparsed_bytes >= 300);
        assert_eq!(st.resyncs, 1);
        // Split in small pieces, the buffered path hits the same limit.
        let mut p = HttpParser::new(&cfg);
        let mut out = Vec::new();
        for c in big.chunks(7) {
            p.data(S, 0, c, &mut out);
        }
        p.data(
            C,
            1,
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            &mut out,
        );
        assert_eq!(out.len(), 1);
        assert_eq!(&*http(&out[0]).path, "/ok");
    }

    #[test]
    fn gaps_in_body_and_headers() {
        let cfg = ParseConfig::default();
        let mut p = HttpParser::new(&cfg);
        let mut out = Vec::new();
        p.data(S, 0, b"GET /a HTTP/1.1\r\n\r\n", &mut out);
        p.data(
            C,
            1,
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab",
            &mut out,
        );
        p.gap(C, 2, 5, &mut out);
        p.data(C, 3, b"xyz", &mut out);
        assert_eq!(out.len(), 1);
        let h = http(&out[0]);
        assert_eq!((h.response_body_len, h.response_missing_bytes), (5, 5));
        assert_eq!(out[0].status, TxStatus::Ok);
        // A gap inside a header block drops that message; the next request line resyncs.
        p.data(S, 4, b"GET /lost HTTP/1.1\r\nHo", &mut out);
        p.gap(S, 5, 3, &mut out);
        p.data(S, 6, b"st: x\r\n\r\nGET /b HTTP/1.1\r\n\r\n", &mut out);
        p.data(
            C,
            7,
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            &mut out,
        );
        assert_eq!(out.len(), 2);
        assert_eq!(&*http(&out[1]).path, "/b");
        // A gap that swallows a body's end and the next message start.
        p.data(S, 8, b"GET /c HTTP/1.1\r\n\r\n", &mut out);
        p.data(
            C,
            9,
            b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n",
            &mut out,
        );
        p.gap(C, 10, 20, &mut out);
        assert_eq!(out.len(), 3);
        assert_eq!(http(&out[2]).response_missing_bytes, 4);
        p.data(
            C,
            11,
            b"garbage\r\nHTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n",
            &mut out,
        );
        assert_eq!(out.len(), 4);
        assert_eq!(out[3].status, TxStatus::NoRequest);
        assert!(p.stats().gaps == 3 && p.stats().resyncs >= 2);
    }

    #[test]
    fn upgrade_stops_parsing() {
        let (txs, st) = run(
            &ParseConfig::default(),
            &[
                (S, b"GET /ws HTTP/1.1\r\nUpgrade: websocket\r\n\r\n"),
                (
                    C,
                    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
                ),
                (C, b"\x81\x05hello"),
            ],
        );
        assert_eq!(txs.len(), 1);
        assert_eq!(
            (http(&txs[0]).status_code, txs[0].status),
            (101, TxStatus::Ok)
        );
        assert_eq!(st.unparsed_bytes, 7);
    }

    /// A 2xx to CONNECT opens a tunnel right after its header block: the
    /// CONNECT is a transaction, what follows goes to the TLS parser
    /// (`ConnParser` hands over), named `http,ssl` once a handshake is in.
    #[test]
    fn connect_2xx_hands_the_tunnel_to_tls() {
        let mut p = HttpParser::new(&ParseConfig::default());
        let mut out = Vec::new();
        p.data(S, 1, b"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n", &mut out);
        assert_eq!(p.take_tunnel(), None);
        let head = b"HTTP/1.1 200 Connection established\r\n\r\n";
        let mut resp = head.to_vec();
        resp.extend_from_slice(b"\x16\x03\x03");
        p.data(C, 2, &resp, &mut out);
        assert_eq!(p.take_tunnel(), Some(head.len()));
        assert_eq!(out.len(), 1);
        assert_eq!((&*http(&out[0]).method, http(&out[0]).status_code), ("CONNECT", 200));
        // Through ConnParser: the parser becomes TLS's, named http until a handshake.
        let mut c = crate::ConnParser::Http(HttpParser::new(&ParseConfig::default()));
        let mut out = Vec::new();
        c.data(S, 1, b"CONNECT a.test:443 HTTP/1.1\r\n\r\n", &mut out);
        c.data(C, 2, &resp, &mut out);
        assert!(matches!(c, crate::ConnParser::Tls(_)));
        assert_eq!(c.confirmed_service(), Some(Some("http")));
        // A refused CONNECT is no tunnel.
        let mut p = HttpParser::new(&ParseConfig::default());
        p.data(S, 1, b"CONNECT a.test:443 HTTP/1.1\r\n\r\n", &mut out);
        p.data(C, 2, b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", &mut out);
        assert_eq!(p.take_tunnel(), None);
    }

    #[test]
    fn find_nl_matches_naive() {
        let mut v = vec![b'a'; 40];
        for i in 0..40 {
            v[i] = b'\n';
            for start in 0..=i {
                assert_eq!(find_nl(&v[start..]), Some(i - start));
            }
            v[i] = 0x8a; // high-bit bytes around must not match
        }
        assert_eq!(find_nl(&v), None);
        assert_eq!(find_nl(b""), None);
    }

    #[test]
    fn looks_like_and_give_up() {
        assert!(looks_like(S, b"GET / HTTP/1.1\r\n"));
        assert!(looks_like(S, b"PROPFIND /x HTTP/1.1"));
        assert!(!looks_like(S, b"GETX / HTTP/1.1"));
        assert!(!looks_like(S, b"\x16\x03\x01\x02\x00"));
        assert!(looks_like(C, b"HTTP/1.0 200 OK"));
        assert!(!looks_like(C, b"HTTP/2"));
        let mut p = HttpParser::new(&ParseConfig::default());
        let mut out = Vec::new();
        let tls = vec![0x16u8; 20000];
        p.data(S, 0, &tls, &mut out);
        assert!(p.gave_up());
    }

    // ---- Packetbeat system-test facts over the shared pcaps ----

    fn pcap(rel: &str, ports: &[u16], cfg: &ParseConfig) -> Vec<Transaction> {
        let ev = tcp_events(rel, ports);
        let cfg = cfg.clone();
        run_parser(&ev, move || Box::new(HttpParser::new(&cfg)))
            .into_iter()
            .flatten()
            .collect()
    }

    fn pb(f: &str, ports: &[u16], cfg: &ParseConfig) -> Vec<Transaction> {
        pcap(&format!("packetbeat/pcaps/{f}"), ports, cfg)
    }

    fn header<'a>(h: &'a [(String, String)], name: &str) -> Option<&'a str> {
        h.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn with_headers(names: &[&str]) -> ParseConfig {
        ParseConfig {
            http_headers: names.iter().map(|s| s.to_string()).collect(),
            ..ParseConfig::default()
        }
    }

    // Not mapped anywhere below: client/server ip and port (the tracker's
    // record, not the parser's), `request`/`response` raw-text options and
    // body content (wirelog keeps no bodies), Packetbeat's mime sniffing.

    #[test]
    fn pb_wsgi_loopback() {
        let mut f = Facts::new("wsgi_loopback.pcap");
        let cfg = with_headers(&[
            "cache-control",
            "set-cookie",
            "user-agent",
            "cookie",
            "content-type",
        ]);
        let t = pb("wsgi_loopback.pcap", &[8888], &cfg);
        f.eq("count", t.len(), 1);
        let h = http(&t[0]);
        f.eq("status", t[0].status, TxStatus::Ok);
        f.eq("method", &*h.method, "GET");
        f.eq("url.path", &*h.path, "/");
        f.eq("status_code", h.status_code, 200);
        // Packetbeat lower-cases the phrase.
        f.eq(
            "status_phrase",
            h.reason.to_ascii_lowercase().as_str(),
            "ok",
        );
        // test_include_body_for: the response (there: its text) is > 20000 bytes.
        f.eq(
            "response > 20000 bytes",
            t[0].response.unwrap().bytes > 20000,
            true,
        );
        // test_send_headers_options
        f.eq(
            "cache-control",
            header(&h.headers, "cache-control"),
            Some("max-age=0"),
        );
        f.eq(
            "set-cookie kept",
            header(&h.response_headers, "set-cookie").is_some(),
            true,
        );
        f.eq(
            "user-agent kept",
            header(&h.headers, "user-agent").is_some(),
            true,
        );
        f.eq("request headers > 0", !h.headers.is_empty(), true);
        f.eq("response headers > 0", !h.response_headers.is_empty(), true);
        // test_split_cookie: 6 cookies in Cookie, 4 Set-Cookie headers.
        let cookies = header(&h.headers, "cookie").map_or(0, |c| c.split(';').count());
        f.eq("cookie count", cookies, 6);
        // Packetbeat's split_cookie splits Set-Cookie on ';' (cookie and attributes).
        let set_cookie =
            header(&h.response_headers, "set-cookie").map_or(0, |c| c.split(';').count());
        f.eq("set-cookie parts", set_cookie, 4);
        f.done();
    }

    #[test]
    fn pb_wsgi_drum() {
        let mut f = Facts::new("wsgi_drum.pcap");
        let t = pb("wsgi_drum.pcap", &[8888], &ParseConfig::default());
        f.eq("count", t.len(), 16);
        for (i, tx) in t.iter().enumerate() {
            if i != 13 {
                f.eq(&format!("status[{i}]"), tx.status, TxStatus::Ok);
            }
        }
        f.eq("status[13]", t[13].status, TxStatus::Error);
        f.eq("url.path[13]", &*http(&t[13]).path, "/comment/");
        f.eq("status_code[13]", http(&t[13]).status_code, 500);
        f.done();
    }

    #[test]
    fn pb_realip() {
        let mut f = Facts::new("http_realip.pcap");
        let t = pb("http_realip.pcap", &[8002], &ParseConfig::default());
        f.eq("count", t.len(), 1);
        f.eq(
            "forwarded_ip",
            &*http(&t[0]).forwarded_for,
            "89.247.39.104",
        );
        f.done();
    }

    #[test]
    fn pb_http_10_connection_close() {
        let mut f = Facts::new("http_10_connection_close.pcap");
        let t = pb(
            "http_10_connection_close.pcap",
            &[8000],
            &ParseConfig::default(),
        );
        f.eq("count", t.len(), 1);
        f.eq("status", t[0].status, TxStatus::Ok);
        // The response has no Content-Length (HTTP/1.0, read until close):
        // Packetbeat reports the body size read under that name.
        f.eq(
            "content-length (until close)",
            http(&t[0]).response_body_len,
            11422,
        );
        f.eq(
            "no declared length",
            http(&t[0]).response_content_length,
            None,
        );
        f.eq("status_code", http(&t[0]).status_code, 200);
        f.done();
    }

    #[test]
    fn pb_basicauth_and_golden() {
        let mut f = Facts::new("http_basicauth.pcap");
        let cfg = ParseConfig {
            redact: true,
            ..with_headers(&["authorization", "host", "user-agent", "accept"])
        };
        let t = pb("http_basicauth.pcap", &[80], &cfg);
        f.eq("count >= 1", !t.is_empty(), true);
        for tx in &t {
            f.eq(
                "authorization redacted",
                header(&http(tx).headers, "authorization"),
                Some("*"),
            );
        }
        // golden/http_basic_auth-expected.json (the HTTP event; the DNS event is in dns.rs).
        let (tx, h) = (&t[0], http(&t[0]));
        f.eq("status", tx.status, TxStatus::Ok);
        f.eq("method", &*h.method, "GET");
        f.eq("url.path", &*h.path, "/");
        f.eq("http.version", &*h.version, "1.1");
        f.eq("url.domain", &*h.host, "www.example.com");
        f.eq("user-agent", &*h.user_agent, "curl/7.37.1");
        f.eq("accept", header(&h.headers, "accept"), Some("*/*"));
        f.eq("status_code", h.status_code, 200);
        f.eq(
            "status_phrase",
            h.reason.to_ascii_lowercase().as_str(),
            "ok",
        );
        f.eq("request.bytes", tx.request.unwrap().bytes, 130);
        f.eq("response.bytes", tx.response.unwrap().bytes, 1591);
        f.eq("response.body.bytes", h.response_body_len, 1270);
        f.eq(
            "response content-length",
            h.response_content_length,
            Some(1270),
        );
        f.eq(
            "response content-type",
            &*h.response_content_type,
            "text/html",
        );
        // Packetbeat's event.duration runs from the request's first packet to
        // the response's first packet: our first-byte latency.
        f.eq(
            "event.duration",
            tx.first_byte_latency_ns(),
            Some(18_341_000),
        );
        f.done();
    }

    #[test]
    fn pb_hide_secret() {
        // Packetbeat's hide_keywords masks named parameters (pass=xxxxx) and
        // sorts them; it also turns a form-encoded POST body into url.query.
        // wirelog redacts every query value instead and keeps no bodies, so
        // the mapped facts are: path, and "secret" nowhere in the record.
        for (file, method) in [
            ("hide_secret_GET.pcap", "GET"),
            ("hide_secret_POST.pcap", "POST"),
        ] {
            let mut f = Facts::new(file);
            let cfg = ParseConfig {
                redact: true,
                ..with_headers(&["host", "content-type"])
            };
            let t = pb(file, &[80], &cfg);
            f.eq("count", t.len(), 1);
            let h = http(&t[0]);
            f.eq("method", &*h.method, method);
            f.eq("url.path", &*h.path, "/login");
            f.eq("no secret", format!("{h:?}").contains("secret"), false);
            if method == "GET" {
                f.eq("url.query redacted", &*h.query, "user=?&pass=?");
                let plain = pb(file, &[80], &ParseConfig::default());
                // Unredacted, in wire order (Packetbeat sorts: pass=...&user=...).
                f.eq(
                    "url.query",
                    &*http(&plain[0]).query,
                    "user=monica&pass=secret",
                );
            }
            f.done();
        }
    }

    #[test]
    fn pb_http_post() {
        let mut f = Facts::new("http_post.pcap");
        let cfg = with_headers(&[
            "host",
            "content-length",
            "content-type",
            "user-agent",
            "date",
            "connection",
            "server",
        ]);
        let t = pb("http_post.pcap", &[80], &cfg);
        f.eq("count", t.len(), 1);
        let h = http(&t[0]);
        // "query": "POST /register"
        f.eq("method", &*h.method, "POST");
        f.eq("url.path", &*h.path, "/register");
        // url.query there is the form body (address=...&user=monica): not mapped.
        for n in ["content-length", "content-type", "host", "user-agent"] {
            f.eq(
                &format!("request header {n}"),
                header(&h.headers, n).is_some(),
                true,
            );
        }
        for n in [
            "content-length",
            "content-type",
            "date",
            "connection",
            "server",
        ] {
            f.eq(
                &format!("response header {n}"),
                header(&h.response_headers, n).is_some(),
                true,
            );
        }
        f.eq(
            "request content-type",
            &*h.request_content_type,
            "application/x-www-form-urlencoded",
        );
        f.eq(
            "response content-type",
            &*h.response_content_type,
            "text/html; charset=utf-8",
        );
        // test_include_body: len(response) == 172 is the raw response without
        // its (not included) body, i.e. the header block.
        f.eq("response header bytes", h.response_header_bytes, 172);
        f.done();
    }

    #[test]
    fn pb_http_post_json() {
        let mut f = Facts::new("http_post_json.pcap");
        let t = pb(
            "http_post_json.pcap",
            &[80, 8080, 8000, 5000, 8002, 9200],
            &ParseConfig::default(),
        );
        f.eq("count", t.len(), 1);
        let h = http(&t[0]);
        f.eq(
            "request content-type",
            &*h.request_content_type,
            "application/x-www-form-urlencoded; charset=UTF-8",
        );
        f.eq(
            "response content-type",
            &*h.response_content_type,
            "application/json; charset=UTF-8",
        );
        // url.query there is derived from the form body: not mapped.
        f.done();
    }

    #[test]
    fn pb_url_params_vlan_gap() {
        let mut f = Facts::new("http_url_params.pcap");
        let t = pb("http_url_params.pcap", &[80], &ParseConfig::default());
        f.eq("count", t.len(), 1);
        let h = http(&t[0]);
        f.eq("method", &*h.method, "GET");
        f.eq("url.path", &*h.path, "/dashboard/transactions");
        f.eq(
            "url.query",
            &*h.query,
            "input=packetbeat&src_ip=192.35.243.1",
        );
        f.done();

        let mut f = Facts::new("http_over_vlan.pcap");
        let t = pb("http_over_vlan.pcap", &[8080], &ParseConfig::default());
        f.eq("count", t.len(), 1);
        f.eq(
            "query",
            format!("{} {}", http(&t[0]).method, http(&t[0]).path),
            "GET /jpetstore/".into(),
        );
        f.done();

        let mut f = Facts::new("gap_in_stream.pcap");
        let t = pb("gap_in_stream.pcap", &[8000], &ParseConfig::default());
        f.eq("count", t.len(), 1);
        f.eq("status", t[0].status, TxStatus::Ok);
        // "Packet loss while capturing the response"
        f.eq(
            "response bytes missing",
            http(&t[0]).response_missing_bytes > 0,
            true,
        );
        f.done();

        let mut f = Facts::new("http_get_2k_file.pcap");
        let t = pb("http_get_2k_file.pcap", &[8000], &ParseConfig::default());
        // test_large_body checks body content truncation (not kept here); the count maps.
        f.eq("count", t.len(), 1);
        f.eq("response body", http(&t[0]).response_body_len, 2048);
        f.done();
    }

    #[test]
    fn pb_unmatched() {
        let mut f = Facts::new("http_unmatched.pcap");
        let t = pb("http_unmatched.pcap", &[8080], &ParseConfig::default());
        // Packetbeat reports 2: it drops the request of the first connection
        // (reset, never answered) at shutdown since its 10 s timeout had not
        // fired. wirelog reports it as NoResponse (never drop), so 3 here.
        let t: Vec<_> = t
            .into_iter()
            .filter(|t| t.status != TxStatus::NoResponse)
            .collect();
        f.eq("count (answered or unmatched responses)", t.len(), 2);
        f.eq("[0] unmatched response", t[0].status, TxStatus::NoRequest);
        f.eq("[0] status_code", http(&t[0]).status_code, 404);
        f.eq("[1] status_code", http(&t[1]).status_code, 200);
        f.eq("[1] status", t[1].status, TxStatus::Ok);
        f.eq(
            "[1] request content-length",
            http(&t[1]).request_content_length,
            None,
        );
        f.done();

        let mut f = Facts::new("http_unmatched_timeout.pcap");
        let t = pb(
            "http_unmatched_timeout.pcap",
            &[8080],
            &ParseConfig::default(),
        );
        f.eq("count", t.len(), 1);
        f.eq("unmatched request", t[0].status, TxStatus::NoResponse);
        f.eq(
            "query",
            format!("{} {}", http(&t[0]).method, http(&t[0]).path),
            "GET /something".into(),
        );
        f.done();
    }

    // ---- Zeek http.log baselines ----

    #[test]
    fn zeek_http_no_crlf() {
        let mut f = Facts::new("zeek http_no_crlf");
        let t = pcap(
            "zeek/http_no_crlf/no_crlf.pcap",
            &[80],
            &ParseConfig::default(),
        );
        // uri, request_body_len, response_body_len from http.log
        let want: [(&str, u64, u64); 5] = [
            ("/7u0e9j2avwlvnuynyo/szcm27k/fzb067wy/", 6086, 306596),
            ("/ko5ezxmguvv/p8d4003oiu/utkdae7r/74uzr8n74r/", 7558, 411556),
            (
                "/vwst360x8syxks325x/26dtqu31wzhmwqq/8p9iu8zbragj/",
                8214,
                473908,
            ),
            ("/mro86v6nvs42/", 6278, 287012),
            (
                "/raet/u6tpsbdmo5g7crj4f/8l720ln/lwrl5fe38/1yje7g5qc/",
                6230,
                1172,
            ),
        ];
        f.eq("count", t.len(), 5);
        for (tx, (uri, req_body, resp_body)) in t.iter().zip(want) {
            let h = http(tx);
            f.eq("method", &*h.method, "POST");
            f.eq("host", &*h.host, "5.2.136.90");
            f.eq("uri", &*h.uri, uri);
            f.eq("version", &*h.version, "1.1");
            f.eq("user_agent", &*h.user_agent, "Mozilla/4.0 (compatible; MSIE 7.0; Windows NT 10.0; WOW64; Trident/7.0; .NET4.0C; .NET4.0E)");
            f.eq("status", (h.status_code, &*h.reason), (200, "OK"));
            f.eq("response_body_len", h.response_body_len, resp_body);
            // Zeek counts 2 more request body bytes than Content-Length: its
            // multipart MIME parser counts the CRLF before the first boundary.
            // wirelog counts the body as framed on the wire (= Content-Length).
            f.eq(
                "request_body_len (+2 MIME CRLF in Zeek)",
                h.request_body_len + 2,
                req_body,
            );
            f.eq(
                "request_body_len = Content-Length",
                Some(h.request_body_len),
                h.request_content_length,
            );
        }
        f.done();
    }

    #[test]
    fn zeek_http_padding() {
        let mut f = Facts::new("zeek http_padding");
        let t = pcap(
            "zeek/http_padding/tcp-http-with-padding.pcap",
            &[27272],
            &ParseConfig::default(),
        );
        f.eq("count", t.len(), 1);
        let h = http(&t[0]);
        f.eq("method", &*h.method, "GET");
        f.eq("host (-)", &*h.host, "");
        f.eq("uri", &*h.uri, "/");
        f.eq("version", &*h.version, "1.0");
        f.eq("request_body_len", h.request_body_len, 0);
        f.eq("response_body_len", h.response_body_len, 6);
        f.eq("status", (h.status_code, &*h.reason), (200, "OK"));
        f.done();
    }

    /// Feeds a transcript with each message one segment cut to its first
    /// `snap` bytes (the rest as a cut), as a capture with that snap length.
    fn run_cut(cfg: &ParseConfig, msgs: &[(Dir, &[u8])], snap: usize) -> (Vec<Transaction>, ParseStats) {
        let mut p = HttpParser::new(cfg);
        let mut out = Vec::new();
        for (i, (d, m)) in msgs.iter().enumerate() {
            let n = m.len().min(snap);
            p.data(*d, i as i64, &m[..n], &mut out);
            if m.len() > n {
                p.cut(*d, i as i64, (m.len() - n) as u64, &mut out);
            }
        }
        p.finish(msgs.len() as i64, &mut out);
        (out, p.stats())
    }

    /// What a cut must keep of each transaction (`body` false: the response
    /// body's length is not compared).
    fn kept(t: &Transaction, body: bool) -> (TxStatus, String, u16, String, u64, u64, Option<Span>, Option<Span>) {
        let h = http(t);
        (
            t.status,
            h.uri.to_string(),
            h.status_code,
            h.response_content_type.to_string(),
            h.request_body_len,
            if body { h.response_body_len } else { 0 },
            t.request,
            t.response,
        )
    }

    #[test]
    fn cut_packets_keep_status_type_lengths_and_pairing() {
        let cfg = ParseConfig::default();
        let body = vec![b'x'; 1023];
        let mut long = b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sun, 29 Nov 2026 01:44:25 GMT\r\nContent-Type: text/html\r\nContent-Length: 1023\r\nLast-Modified: Sun, 29 Nov 2026 01:44:14 GMT\r\nConnection: keep-alive\r\nETag: \"6b0b836e-3ff\"\r\nAccept-Ranges: bytes\r\n\r\n".to_vec();
        long.extend_from_slice(&body);
        let mut chunked = b"HTTP/1.1 200 OK\r\nContent-Type: text/css\r\nTransfer-Encoding: chunked\r\n\r\n3d3\r\n".to_vec();
        chunked.extend_from_slice(&[b'z'; 0x3d3]);
        chunked.extend_from_slice(b"\r\n0\r\n\r\n");
        let mut post = b"POST /api/items HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 305\r\n\r\n".to_vec();
        post.extend_from_slice(&[b'{'; 305]);
        let msgs: Vec<(Dir, &[u8])> = vec![
            (S, b"GET /1k.html HTTP/1.1\r\nHost: h\r\n\r\n"),
            (C, &long),
            (S, b"GET /4k.css HTTP/1.1\r\nHost: h\r\n\r\n"),
            (C, &chunked),
            (S, &post),
            (C, b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n{\"id\": 123456789012}"),
            (S, b"GET /missing HTTP/1.1\r\nHost: h\r\n\r\n"),
            (C, b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: 9\r\n\r\nnot found"),
        ];
        let (whole, _) = run(&cfg, &msgs);
        assert_eq!(whole.len(), 4);
        for snap in [150, 190, 256] {
            let (cut, stats) = run_cut(&cfg, &msgs, snap);
            assert_eq!(cut.len(), 4, "snap {snap}");
            for (w, c) in whole.iter().zip(&cut) {
                assert_eq!(kept(w, true), kept(c, true), "snap {snap}");
            }
            assert_eq!((stats.malformed, stats.gaps), (0, 0), "snap {snap}");
        }
        // Shorter, the header lines past the cut are missing: at 100 the
        // first response's Content-Type and Content-Length; at 40 the chunked
        // one's Transfer-Encoding too: the bytes after the whole lines are
        // then missed, not body. Status, sizes and pairing stay.
        for snap in [40, 100] {
            let (cut, _) = run_cut(&cfg, &msgs, snap);
            assert_eq!(cut.len(), 4);
            let h = http(&cut[0]);
            assert_eq!((h.status_code, h.response_body_len, h.response_content_length), (200, 0, None));
            let seen = (long[..snap].iter().rposition(|&b| b == b'\n').unwrap() + 1) as u64;
            assert_eq!(h.response_missing_bytes, long.len() as u64 - seen);
            let h = http(&cut[1]);
            if snap == 40 {
                assert_eq!((h.status_code, h.response_body_len), (200, 0));
                assert_eq!(h.response_missing_bytes, chunked.len() as u64 - "HTTP/1.1 200 OK\r\n".len() as u64);
            } else {
                // The chunk's data, then its CRLF and the last chunk past
                // the cut: framing not seen, so missed.
                assert_eq!((h.response_body_len, h.response_missing_bytes), (0x3d3, 7));
            }
            for (w, c) in whole.iter().zip(&cut) {
                assert_eq!((w.status, w.request, w.response), (c.status, c.request, c.response), "snap {snap}");
                assert_eq!((http(w).status_code, &http(w).uri), (http(c).status_code, &http(c).uri));
            }
        }
    }

    #[test]
    fn cut_start_line_loses_that_message_only() {
        let cfg = ParseConfig::default();
        let mut p = HttpParser::new(&cfg);
        let mut out = Vec::new();
        p.data(S, 0, b"GET /a HTTP/1.1\r\n\r\n", &mut out);
        // The response's status line is past the cut: its request is
        // answered (partial), so the next response pairs with the next request.
        p.data(C, 1, b"HTTP/1.1 2", &mut out);
        p.cut(C, 1, 200, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].status, TxStatus::Partial);
        assert_eq!(&*http(&out[0]).path, "/a");
        p.data(S, 2, b"GET /b HTTP/1.1\r\n\r\n", &mut out);
        p.data(C, 3, b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!((&*http(&out[1]).path, http(&out[1]).status_code), ("/b", 404));
        // A response that starts in the cut after a complete one (Idle).
        p.data(S, 4, b"GET /c HTTP/1.1\r\n\r\n", &mut out);
        p.data(C, 5, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", &mut out);
        p.cut(C, 5, 100, &mut out);
        assert_eq!(out.len(), 3);
        assert_eq!((&*http(&out[2]).path, out[2].status), ("/c", TxStatus::Ok));
        assert_eq!(p.stats().malformed, 2);
        // Nothing pending: the lost response had no request to take.
        p.data(S, 6, b"GET /d HTTP/1.1\r\n\r\n", &mut out);
        p.data(C, 7, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", &mut out);
        assert_eq!((out.len(), &*http(&out[3]).path), (4, "/d"));
        assert_eq!(out[3].status, TxStatus::Ok);
    }

    #[test]
    fn cut_in_body_segments_of_one_response() {
        // A large response over many segments, each cut: the framing holds.
        let cfg = ParseConfig::default();
        let mut p = HttpParser::new(&cfg);
        let mut out = Vec::new();
        p.data(S, 0, b"GET /big HTTP/1.1\r\n\r\n", &mut out);
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 65536\r\n\r\n";
        let seg = 16384usize;
        let total = head.len() + 65536;
        let mut sent = 0;
        let mut first = true;
        while sent < total {
            let n = seg.min(total - sent);
            let mut bytes = vec![b'b'; 100.min(n)];
            if first {
                bytes[..head.len()].copy_from_slice(head);
                first = false;
            }
            p.data(C, 1, &bytes, &mut out);
            p.cut(C, 1, (n - bytes.len()) as u64, &mut out);
            sent += n;
        }
        p.data(S, 2, b"GET /next HTTP/1.1\r\n\r\n", &mut out);
        p.data(C, 3, b"HTTP/1.1 204 No Content\r\n\r\n", &mut out);
        assert_eq!(out.len(), 2);
        let h = http(&out[0]);
        assert_eq!((h.response_body_len, h.response_missing_bytes, out[0].status), (65536, 0, TxStatus::Ok));
        assert_eq!(out[0].response.map(|s| s.bytes), Some(total as u64));
        assert_eq!(http(&out[1]).status_code, 204);
    }

    #[test]
    fn cut_header_then_the_end_before_the_declared_length_is_partial() {
        // The header block's end is past the cut (nginx's 237-byte header,
        // 190 bytes kept of the first segment), and the capture ends after
        // half of the declared body: partial, as the whole read says, with
        // only the bytes after the first segment as body and the rest of the
        // declared length missing. The same with all segments is whole.
        let cfg = ParseConfig::default();
        let head = b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sun, 29 Nov 2026 01:44:25 GMT\r\nContent-Type: image/png\r\nContent-Length: 65536\r\nLast-Modified: Sun, 29 Nov 2026 01:44:14 GMT\r\nConnection: keep-alive\r\nETag: \"6b0b836e-10000\"\r\nAccept-Ranges: bytes\r\n\r\n";
        let total = head.len() as u64 + 65536;
        let seg = 16384u64;
        for segments_sent in [2u64, 5] {
            let mut p = HttpParser::new(&cfg);
            let mut out = Vec::new();
            p.data(S, 0, b"GET /static/64k.png HTTP/1.1\r\nHost: h\r\n\r\n", &mut out);
            p.data(C, 1, &head[..190], &mut out);
            p.cut(C, 1, seg - 190, &mut out);
            let mut sent = seg;
            for _ in 1..segments_sent {
                let n = seg.min(total - sent);
                p.data(C, 2, &[b'b'; 100], &mut out);
                p.cut(C, 2, n - 100, &mut out);
                sent += n;
            }
            p.finish(3, &mut out);
            assert_eq!(out.len(), 1, "{segments_sent} segments");
            let h = http(&out[0]);
            assert_eq!(h.status_code, 200);
            if sent == total {
                assert_eq!((out[0].status, h.response_body_len, h.response_missing_bytes), (TxStatus::Ok, 65536, 0));
            } else {
                let body = sent - seg;
                assert_eq!(
                    (out[0].status, h.response_body_len, h.response_missing_bytes),
                    (TxStatus::Partial, body, 65536 - body)
                );
            }
            assert_eq!(out[0].response.map(|s| s.bytes), Some(sent));
        }
        // A gap after the cut header: missed, and the response still whole.
        let mut p = HttpParser::new(&cfg);
        let mut out = Vec::new();
        p.data(S, 0, b"GET /g HTTP/1.1\r\n\r\n", &mut out);
        p.data(C, 1, &head[..190], &mut out);
        p.cut(C, 1, seg - 190, &mut out);
        p.gap(C, 2, 1000, &mut out);
        p.data(C, 3, &[b'b'; 100], &mut out);
        p.cut(C, 3, total - seg - 1000 - 100, &mut out);
        p.finish(4, &mut out);
        let h = http(&out[0]);
        assert_eq!((out[0].status, h.response_body_len, h.response_missing_bytes), (TxStatus::Ok, 64536, 1000));
    }

    #[test]
    fn zeek_m57_long_gap() {
        // Only conn.log is baselined (no http.log): check the three ranged
        // downloads parse with their 206s and nothing is left unparsed.
        let mut p_stats = ParseStats::default();
        let ev = tcp_events("zeek/http_m57_long_gap/m57-long-49583-80.pcap", &[80]);
        let cfg = ParseConfig::default();
        let mut p = HttpParser::new(&cfg);
        let mut out = Vec::new();
        for e in &ev {
            match e {
                Ev::Data {
                    dir, ts_ns, data, ..
                } => p.data(*dir, *ts_ns, data, &mut out),
                Ev::Gap {
                    dir, ts_ns, len, ..
                } => p.gap(*dir, *ts_ns, *len, &mut out),
            }
        }
        p.finish(0, &mut out);
        p_stats = ParseStats {
            unparsed_bytes: p.stats().unparsed_bytes,
            ..p_stats
        };
        assert_eq!(out.len(), 3);
        assert!(out
            .iter()
            .all(|t| http(t).status_code == 206 && t.status == TxStatus::Ok));
        assert_eq!(p_stats.unparsed_bytes, 0);
    }

    /// Rough throughput (run with --release --ignored): the largest capture's
    /// events parsed many times over.
    #[test]
    #[ignore]
    fn throughput() {
        let ev = tcp_events("zeek/http_no_crlf/no_crlf.pcap", &[80]);
        let bytes: usize = ev
            .iter()
            .map(|e| {
                if let Ev::Data { data, .. } = e {
                    data.len()
                } else {
                    0
                }
            })
            .sum();
        let cfg = ParseConfig::default();
        let rounds = 200;
        let t0 = std::time::Instant::now();
        let mut n = 0;
        for _ in 0..rounds {
            let mut p = HttpParser::new(&cfg);
            let mut out = Vec::new();
            for e in &ev {
                if let Ev::Data {
                    dir, ts_ns, data, ..
                } = e
                {
                    p.data(*dir, *ts_ns, data, &mut out);
                }
            }
            p.finish(0, &mut out);
            n += out.len();
        }
        let s = t0.elapsed().as_secs_f64();
        // Header-heavy: small pipelined messages in 1460-byte segments.
        let mut req = Vec::new();
        let mut resp = Vec::new();
        for i in 0..2000 {
            req.extend_from_slice(format!("GET /api/v1/items/{i}?page=2&sort=name HTTP/1.1\r\nHost: example.com\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/120.0\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate\r\nCookie: session=abcdef0123456789; theme=dark\r\nConnection: keep-alive\r\n\r\n").as_bytes());
            resp.extend_from_slice(b"HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Sun, 01 Feb 2015 20:53:22 GMT\r\nContent-Type: application/json\r\nContent-Length: 20\r\nCache-Control: no-cache\r\nConnection: keep-alive\r\n\r\n{\"id\":1,\"ok\":true}\n\n");
        }
        let t0 = std::time::Instant::now();
        let rounds2 = 200;
        for _ in 0..rounds2 {
            let mut p = HttpParser::new(&cfg);
            let mut out = Vec::new();
            // Requests first (all pipelined), then responses: a response must
            // not overtake its request in this single-threaded replay.
            for x in req.chunks(1460) {
                p.data(Dir::ToServer, 0, x, &mut out);
            }
            for y in resp.chunks(1460) {
                p.data(Dir::ToClient, 0, y, &mut out);
            }
            p.finish(0, &mut out);
            assert_eq!(out.len(), 2000);
            assert!(out.iter().all(|t| t.status == TxStatus::Ok));
        }
        let s2 = t0.elapsed().as_secs_f64();
        let b2 = (req.len() + resp.len()) * rounds2;
        eprintln!(
            "http small messages: {:.0} MB/s, {:.0} k tx/s",
            b2 as f64 / s2 / 1e6,
            (2000 * rounds2) as f64 / s2 / 1e3
        );
        eprintln!(
            "http: {} MB in {:.3} s = {:.0} MB/s, {} events/round, {} tx",
            bytes * rounds / 1_000_000,
            s,
            (bytes * rounds) as f64 / s / 1e6,
            ev.len(),
            n
        );
    }

    /// Real captures cut into random pieces, with random gaps and byte flips,
    /// through the reassembler-free parser: no panic, counters stay sane.
    #[test]
    fn fuzz_no_panic() {
        let mut rand = crate::xorshift(0x9e37_79b9_7f4a_7c15u64);
        let files = [
            ("packetbeat/pcaps/wsgi_drum.pcap", 8888u16),
            ("packetbeat/pcaps/http_unmatched.pcap", 8080),
            ("packetbeat/pcaps/gap_in_stream.pcap", 8000),
            ("packetbeat/pcaps/http_post.pcap", 80),
            ("zeek/http_padding/tcp-http-with-padding.pcap", 27272),
        ];
        for (file, port) in files {
            let ev = tcp_events(file, &[port]);
            for round in 0..30 {
                let cfg = ParseConfig {
                    max_header_bytes: 64 + (rand() % 2000) as usize,
                    redact: round % 2 == 0,
                    max_text_bytes: 1 + (rand() % 50) as usize,
                    http_headers: vec!["host".into()],
                    ..ParseConfig::default()
                };
                let mut ps: Vec<HttpParser> = Vec::new();
                let mut out = Vec::new();
                for e in &ev {
                    let (conn, dir, ts) = match e {
                        Ev::Data {
                            conn, dir, ts_ns, ..
                        }
                        | Ev::Gap {
                            conn, dir, ts_ns, ..
                        } => (*conn, *dir, *ts_ns),
                    };
                    while ps.len() <= conn {
                        ps.push(HttpParser::new(&cfg));
                    }
                    let p = &mut ps[conn];
                    match e {
                        Ev::Data { data, .. } => {
                            let mut d = data.clone();
                            if rand().is_multiple_of(8) && !d.is_empty() {
                                let i = (rand() as usize) % d.len();
                                d[i] = rand() as u8;
                            }
                            let mut rest = &d[..];
                            while !rest.is_empty() {
                                let n = 1 + (rand() as usize) % rest.len();
                                if rand().is_multiple_of(50) {
                                    p.gap(dir, ts, n as u64, &mut out);
                                } else {
                                    p.data(dir, ts, &rest[..n], &mut out);
                                }
                                rest = &rest[n..];
                            }
                        }
                        Ev::Gap { len, .. } => p.gap(dir, ts, *len, &mut out),
                    }
                    if rand().is_multiple_of(20) {
                        p.expire(ts, &mut out);
                    }
                }
                for p in &mut ps {
                    p.finish(0, &mut out);
                }
            }
        }
        // Pure garbage and every prefix of a tricky transcript.
        let t: &[u8] = b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\nzz\r\n0\r\n\r\n";
        for n in 0..=t.len() {
            for dir in [S, C] {
                let mut p = HttpParser::new(&ParseConfig::default());
                let mut out = Vec::new();
                p.data(dir, 0, &t[..n], &mut out);
                p.gap(dir, 0, 3, &mut out);
                p.data(dir, 0, &t[n..], &mut out);
                p.finish(0, &mut out);
            }
        }
        // The fuzzing entry over random scripts and over the capture's bytes.
        for _ in 0..500 {
            let g: Vec<u8> = (0..rand() % 2000).map(|_| rand() as u8).collect();
            fuzz(&g);
        }
        for e in tcp_events("packetbeat/pcaps/wsgi_drum.pcap", &[8888]) {
            if let Ev::Data { data, .. } = e {
                fuzz(&data);
            }
        }
        for _ in 0..200 {
            let g: Vec<u8> = (0..(rand() % 3000))
                .map(|_| {
                    [b'\r', b'\n', b' ', b'G', b'H', b':', b'0', rand() as u8]
                        [(rand() % 8) as usize]
                })
                .collect();
            let mut p = HttpParser::new(&ParseConfig {
                max_header_bytes: 100,
                ..ParseConfig::default()
            });
            let mut out = Vec::new();
            p.data(S, 0, &g, &mut out);
            p.data(C, 0, &g, &mut out);
            p.finish(0, &mut out);
        }
    }

    /// The fields as the per-line reading gives them: each line up to its
    /// `\n` without one `\r`, the first empty line ending the block, lines
    /// without a colon skipped.
    fn fields_line_by_line(block: &[u8]) -> Vec<(&[u8], &[u8])> {
        let mut fields = Vec::new();
        for line in (Lines { data: block }) {
            if line.is_empty() {
                break;
            }
            if let Some(colon) = line.iter().position(|&b| b == b':') {
                fields.push((trim(&line[..colon]), trim(&line[colon + 1..])));
            }
        }
        fields
    }

    #[test]
    fn fields_read_in_one_pass_are_the_lines_fields() {
        let blocks: [&[u8]; 12] = [
            b"Host: a\r\nUser-Agent: b c\r\n\r\nBody: no\r\n",
            b"Host: a\nX:1\n\nafter: no\n",
            b"no colon line\r\nA:\r\n :v \r\n\r\n",
            b"\r\r\nA: b\r\n\r\n",
            b"\r\nA: b\r\n",
            b"A: b",
            b"A b",
            b"\r",
            b"",
            b"Long-Header-Name-Past-Eight: value: with: colons\r\nShort:x\r\n",
            b"Content-Length:   42  \r\nTransfer-Encoding: chunked\r\n\r\n",
            b"A\rB: c\r\r\n\t: tab\r\n",
        ];
        for block in blocks {
            let one_pass: Vec<_> = (Fields { data: block, after_blank: None }).map(|(n, v)| (n, trim(v))).collect();
            assert_eq!(one_pass, fields_line_by_line(block), "block {:?}", String::from_utf8_lossy(block));
        }
    }

    /// The X-Forwarded-For address the head's one pass notes is the first
    /// that makes a text: after empty ones, and, when the first address's
    /// bytes make none (`max_text_bytes` too small for its first, invalid,
    /// character), the next field's, as when the fields were read again for it.
    #[test]
    fn the_forwarded_address_is_the_first_that_makes_a_text() {
        let resp: &[u8] = b"HTTP/1.1 204 No Content\r\n\r\n";
        let cases: [(usize, &[u8], &str); 4] = [
            (4096, b"X-Forwarded-For: \r\nX-Real-IP: ,10.0.0.9\r\nX-Forward-For: 10.0.0.7, 10.0.0.8\r\n", "10.0.0.7"),
            (4096, b"X-Forwarded-For: 10.0.0.1 , 10.0.0.2\r\nX-Real-IP: 10.0.0.3\r\n", "10.0.0.1"),
            (1, b"X-Forwarded-For: \xff\xfe\r\nX-Real-IP: 10.0.0.3\r\n", "1"),
            (4096, b"X-Forwarded-For: ,\r\nX-Real-IP:  \r\n", ""),
        ];
        for (max, fields, want) in cases {
            let cfg = ParseConfig { max_text_bytes: max, ..ParseConfig::default() };
            let req = [&b"GET / HTTP/1.1\r\n"[..], fields, b"\r\n"].concat();
            let t = run_split_everywhere(&cfg, &[(S, &req), (C, resp)]);
            assert_eq!(t.len(), 1);
            assert_eq!(&*http(&t[0]).forwarded_for, want, "fields {:?}", String::from_utf8_lossy(fields));
        }
    }

    /// A request and a response head read in the pass that finds their end
    /// give, split at every byte, the record they give whole: the fields the
    /// parser reads (the last of each given twice, the first X-Forwarded-For
    /// with an address), the kept headers, lines without a colon, bare LFs.
    #[test]
    fn heads_split_at_every_offset_give_the_whole_heads_record() {
        let cfg = with_headers(&["cookie", "x-trace", "set-cookie"]);
        let req: &[u8] = b"POST /p?q=1 HTTP/1.1\r\nHost: old\r\nHost:  new.example \r\nUser-Agent: ua/1\r\n\
            X-Forwarded-For: , \r\nX-Real-IP: 10.0.0.1, 10.0.0.2\r\nX-Forwarded-For: 10.9.9.9\r\nno colon here\r\n\
            Referer: http://r/\nCookie: a=b\r\nContent-Type: text/plain\r\nX-Trace: t1\r\nX-Trace: t2\r\n\
            Content-Length: 9\r\nContent-Length: 3\r\n\r\nabc";
        let resp: &[u8] = b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nSet-Cookie: s=1\r\n\
            Transfer-Encoding: gzip, chunked\n\r\n2\r\nxy\r\n0\r\n\r\n";
        let t = run_split_everywhere(&cfg, &[(S, req), (C, resp)]);
        assert_eq!(t.len(), 1);
        let h = http(&t[0]);
        assert_eq!((t[0].status, &*h.method, &*h.uri, &*h.query), (TxStatus::Error, "POST", "/p?q=1", "q=1"));
        assert_eq!((&*h.host, &*h.user_agent, &*h.referrer), ("new.example", "ua/1", "http://r/"));
        assert_eq!(&*h.forwarded_for, "10.0.0.1");
        assert_eq!((&*h.request_content_type, h.request_content_length, h.request_body_len), ("text/plain", Some(3), 3));
        let kept = |v: &[(&str, &str)]| v.iter().map(|&(n, v)| (n.to_string(), v.to_string())).collect::<Vec<_>>();
        assert_eq!(h.headers, kept(&[("cookie", "a=b"), ("x-trace", "t1"), ("x-trace", "t2")]));
        assert_eq!((h.status_code, &*h.reason, &*h.response_content_type), (404, "Not Found", "text/html"));
        assert_eq!((h.response_content_length, h.response_body_len), (None, 2));
        assert_eq!(h.response_headers, kept(&[("set-cookie", "s=1")]));
        let head_len = |m: &[u8], end: &[u8]| (m.windows(end.len()).position(|w| w == end).unwrap() + end.len()) as u64;
        assert_eq!(
            (h.request_header_bytes, h.response_header_bytes),
            (head_len(req, b"\r\n\r\n"), head_len(resp, b"\n\r\n"))
        );
    }

    #[test]
    fn colon_or_line_end_found_at_every_offset() {
        for len in 0..20 {
            for at in 0..=len {
                for (mark, other) in [(b':', b'\n'), (b'\n', b':')] {
                    // The mark at `at` (none when at == len); the other byte after it.
                    let mut hay = vec![b'a'; len];
                    if at < len {
                        hay[at] = mark;
                    }
                    if at + 3 < len {
                        hay[at + 3] = other;
                    }
                    let naive = hay.iter().position(|&b| b == b':' || b == b'\n');
                    assert_eq!(find_colon_or_nl(&hay), naive, "len {len} at {at}");
                }
            }
        }
    }

    #[test]
    fn field_names_ignore_case_and_other_names_of_the_same_length() {
        assert!(matches!(FieldName::of(b"HOST"), FieldName::Host));
        assert!(matches!(FieldName::of(b"Referer"), FieldName::Referer));
        assert!(matches!(FieldName::of(b"Upgrade"), FieldName::Upgrade));
        assert!(matches!(FieldName::of(b"X-Real-IP"), FieldName::ForwardedFor));
        assert!(matches!(FieldName::of(b"x-forward-for"), FieldName::ForwardedFor));
        assert!(matches!(FieldName::of(b"X-Forwarded-For"), FieldName::ForwardedFor));
        assert!(matches!(FieldName::of(b"content-TYPE"), FieldName::ContentType));
        assert!(matches!(FieldName::of(b"Content-Length"), FieldName::ContentLength));
        assert!(matches!(FieldName::of(b"Transfer-Encoding"), FieldName::TransferEncoding));
        assert!(matches!(FieldName::of(b"User-Agent"), FieldName::UserAgent));
        // Same lengths as names read, but other names.
        for other in [&b"Date"[..], b"Referrer", b"Connection", b"Last-Modified", b"Accept-Encoding", b"Cookie", b""] {
            assert!(matches!(FieldName::of(other), FieldName::Other), "{:?}", String::from_utf8_lossy(other));
        }
    }

    #[test]
    fn repeated_header_texts_on_a_connection_are_each_message_s_own() {
        // Hosts and agents that repeat, change, come back, are cut at
        // `max_text_bytes` or are not UTF-8: each record has its own.
        let cfg = ParseConfig { max_text_bytes: 8, ..ParseConfig::default() };
        let msgs: Vec<(Dir, &[u8])> = vec![
            (Dir::ToServer, b"GET /1 HTTP/1.1\r\nHost: a\r\nUser-Agent: u1\r\n\r\n"),
            (Dir::ToClient, b"HTTP/1.1 200 OK\r\nContent-Type: text/a\r\nContent-Length: 0\r\n\r\n"),
            (Dir::ToServer, b"GET /2 HTTP/1.1\r\nHost: a\r\nUser-Agent: u1\r\n\r\n"),
            (Dir::ToClient, b"HTTP/1.1 200 OK\r\nContent-Type: text/b\r\nContent-Length: 0\r\n\r\n"),
            (Dir::ToServer, b"GET /3 HTTP/1.1\r\nHost: b\r\nUser-Agent: long-agent-1\r\n\r\n"),
            (Dir::ToClient, b"HTTP/1.1 200 OK\r\nContent-Type: text/b\r\nContent-Length: 0\r\n\r\n"),
            (Dir::ToServer, b"GET /4 HTTP/1.1\r\nHost: \xff\r\nUser-Agent: long-agent-2\r\n\r\n"),
            (Dir::ToClient, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
            (Dir::ToServer, b"GET /5 HTTP/1.1\r\nHost: \xff\r\nUser-Agent: u1\r\n\r\n"),
            (Dir::ToClient, b"HTTP/1.1 200 OK\r\nContent-Type: text/a\r\nContent-Length: 0\r\n\r\n"),
            (Dir::ToServer, b"GET /6 HTTP/1.1\r\nHost: a\r\n\r\n"),
            (Dir::ToClient, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        ];
        let (txs, _) = run(&cfg, &msgs);
        let got: Vec<_> = txs
            .iter()
            .map(|t| {
                let h = http(t);
                (h.host.to_string(), h.user_agent.to_string(), h.response_content_type.to_string())
            })
            .collect();
        let want = [
            ("a", "u1", "text/a"),
            ("a", "u1", "text/b"),
            ("b", "long-age", "text/b"),
            ("\u{fffd}", "long-age", ""),
            ("\u{fffd}", "u1", "text/a"),
            ("a", "", ""),
        ];
        let want: Vec<_> = want.iter().map(|(h, u, c)| (h.to_string(), u.to_string(), c.to_string())).collect();
        assert_eq!(got, want);
    }
}
