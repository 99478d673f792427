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

use std::collections::VecDeque;

use crate::{Detail, Dir, ParseConfig, ParseStats, Span, StreamParser, Transaction, TxStatus};

/// The facts kept per HTTP transaction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HttpTx {
    pub method: String,
    /// Request target as sent (query values replaced by `?` when redacting), cut to `max_text_bytes`.
    pub uri: String,
    /// `uri` before the `?`, and after it (empty when there is none).
    pub path: String,
    pub query: String,
    /// True when the URI was longer than `max_text_bytes` and was cut.
    pub uri_truncated: bool,
    /// "1.0", "1.1" (from the request line, else from the status line).
    pub version: String,
    pub host: String,
    pub user_agent: String,
    pub referrer: String,
    /// First address of X-Forwarded-For (or X-Forward-For, X-Real-IP), empty if none.
    pub forwarded_for: String,
    /// 0 when there was no response.
    pub status_code: u16,
    pub reason: String,
    /// Last interim (1xx) status seen before the final response, 0 if none.
    pub info_code: u16,
    /// Header block sizes (start line to blank line inclusive).
    pub request_header_bytes: u64,
    pub response_header_bytes: u64,
    /// Entity bytes (after removing chunk framing) that were seen.
    pub request_body_len: u64,
    pub response_body_len: u64,
    /// Content-Length as declared, if declared.
    pub request_content_length: Option<u64>,
    pub response_content_length: Option<u64>,
    pub request_content_type: String,
    pub response_content_type: String,
    /// Body bytes lost in capture gaps (the body lengths above exclude them).
    pub request_missing_bytes: u64,
    pub response_missing_bytes: u64,
    /// Request headers kept by name (`ParseConfig::http_headers`), names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Response headers kept by the same names.
    pub response_headers: Vec<(String, String)>,
}

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

enum Probe {
    Yes,
    No,
    /// Too few bytes to tell.
    Maybe,
}

fn probe(dir: Dir, data: &[u8]) -> Probe {
    match dir {
        Dir::ToServer => {
            let mut maybe = false;
            for m in METHODS {
                if data.len() > m.len() {
                    if data.starts_with(m) && data[m.len()] == b' ' {
                        return Probe::Yes;
                    }
                } else if m.starts_with(data) {
                    maybe = true;
                }
            }
            if maybe {
                Probe::Maybe
            } else {
                Probe::No
            }
        }
        Dir::ToClient => {
            const P: &[u8] = b"HTTP/1.";
            if data.len() >= P.len() {
                if data.starts_with(P) {
                    Probe::Yes
                } else {
                    Probe::No
                }
            } else if P.starts_with(data) {
                Probe::Maybe
            } else {
                Probe::No
            }
        }
    }
}

/// True when `data`, the first bytes seen in `dir`, look like this protocol:
/// a request line of a known method, or a `HTTP/1.` status line.
pub fn looks_like(dir: Dir, data: &[u8]) -> bool {
    matches!(probe(dir, data), Probe::Yes)
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
    /// Bytes skipped so far (counted in stats when dropped).
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
            messages: 0,
        }
    }
}

/// A request waiting for its response (or still being read).
struct Pending {
    req: Span,
    tx: HttpTx,
    head_method: bool,
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
    /// The response being read: its paired request, if any, and its facts.
    cur: Option<(Option<Pending>, HttpTx)>,
    /// True once a message start was recognised in either direction.
    ever_parsed: bool,
}

impl HttpParser {
    pub fn new(cfg: &ParseConfig) -> Self {
        HttpParser {
            cfg: cfg.clone(),
            stats: ParseStats::default(),
            req: Side::new(),
            resp: Side::new(),
            pending: VecDeque::new(),
            req_in_queue: false,
            cur: None,
            ever_parsed: false,
        }
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

    fn feed(&mut self, dir: Dir, ts: i64, data: &[u8], out: &mut Vec<Transaction>) {
        let mut i = 0;
        // Each step consumes at least one byte or changes state towards one that does.
        let mut guard = 0usize;
        while i < data.len() {
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
                        let s = self.side(dir);
                        s.state = State::Head;
                        s.span = Span {
                            first_ns: ts,
                            last_ns: ts,
                            bytes: 0,
                        };
                        s.body_len = 0;
                        s.missing = 0;
                    }
                }
                State::Head => i += self.head(dir, ts, &data[i..], out),
                State::Body(b) => i += self.body(dir, ts, b, &data[i..], out),
                State::Resync => i += self.resync(dir, ts, &data[i..]),
            }
        }
    }

    /// Reads header bytes; returns how many of `data` were consumed.
    fn head(&mut self, dir: Dir, ts: i64, data: &[u8], out: &mut Vec<Transaction>) -> usize {
        let max = self.cfg.max_header_bytes.max(64);
        let s = self.side(dir);
        if s.buf.is_empty() {
            // Fast path: the whole header block is in this packet.
            if let Some(end) = find_head_end(data, 0) {
                if end <= max {
                    self.side(dir).span.bytes += end as u64;
                    self.message_head(dir, ts, &data[..end], out);
                    return end;
                }
            } else if data.len() <= max {
                s.buf.extend_from_slice(data);
                s.span.bytes += data.len() as u64;
                return data.len();
            }
            // Too big: fall through to the oversize handling.
            return self.oversize(dir, data.len().min(max + 1));
        }
        let old = s.buf.len();
        let room = (max + 1).saturating_sub(old);
        let take = data.len().min(room);
        s.buf.extend_from_slice(&data[..take]);
        match find_head_end(&s.buf, old.saturating_sub(3)) {
            Some(end) if end <= max => {
                let used = end.saturating_sub(old);
                s.span.bytes += used as u64;
                let buf = std::mem::take(&mut s.buf);
                self.message_head(dir, ts, &buf[..end], out);
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

    /// A complete header block (`head` includes the blank line).
    fn message_head(&mut self, dir: Dir, ts: i64, head: &[u8], out: &mut Vec<Transaction>) {
        let mut lines = Lines { data: head };
        let first = lines.next().unwrap_or(b"");
        let mut tx = HttpTx::default();
        let ok = match dir {
            Dir::ToServer => self.request_line(first, &mut tx),
            Dir::ToClient => status_line(first, &mut tx),
        };
        if !ok {
            self.stats.unparsed_bytes += head.len() as u64;
            self.stats.malformed += 1;
            let s = self.side(dir);
            s.state = State::Resync;
            s.line_start = true;
            return;
        }
        self.ever_parsed = true;
        let mut content_length: Option<u64> = None;
        let mut chunked = false;
        let mut close = false;
        let mut kept = Vec::new();
        for line in lines {
            if line.is_empty() {
                break;
            }
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            let name = trim(&line[..colon]);
            let value = trim(&line[colon + 1..]);
            if name.eq_ignore_ascii_case(b"content-length") {
                content_length = parse_u64(value);
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                chunked = contains_ci(value, b"chunked");
            } else if name.eq_ignore_ascii_case(b"connection") {
                close = contains_ci(value, b"close");
            } else if name.eq_ignore_ascii_case(b"host") && dir == Dir::ToServer {
                tx.host = self.text(value).0;
            } else if name.eq_ignore_ascii_case(b"user-agent") && dir == Dir::ToServer {
                tx.user_agent = self.text(value).0;
            } else if name.eq_ignore_ascii_case(b"referer") && dir == Dir::ToServer {
                tx.referrer = self.text(value).0;
            } else if name.eq_ignore_ascii_case(b"content-type") {
                let v = self.text(value).0;
                match dir {
                    Dir::ToServer => tx.request_content_type = v,
                    Dir::ToClient => tx.response_content_type = v,
                }
            } else if dir == Dir::ToServer
                && tx.forwarded_for.is_empty()
                && (name.eq_ignore_ascii_case(b"x-forwarded-for")
                    || name.eq_ignore_ascii_case(b"x-forward-for")
                    || name.eq_ignore_ascii_case(b"x-real-ip"))
            {
                let first = value.split(|&b| b == b',').next().unwrap_or(b"");
                tx.forwarded_for = self.text(trim(first)).0;
            }
            if self
                .cfg
                .http_headers
                .iter()
                .any(|h| h.as_bytes().eq_ignore_ascii_case(name))
            {
                let n = String::from_utf8_lossy(name).to_ascii_lowercase();
                kept.push((n, self.text(value).0));
            }
        }
        let hlen = head.len() as u64;
        match dir {
            Dir::ToServer => {
                tx.request_header_bytes = hlen;
                tx.request_content_length = content_length;
                tx.headers = kept;
                let body = if chunked {
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
                let no_body = head_req || code == 204 || code == 304 || code == 101;
                let body = if no_body {
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
                let _ = close;
                self.cur = Some((req, tx));
                match body {
                    Some(b) => self.resp.state = State::Body(b),
                    None => self.end_response(ts, out),
                }
            }
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
        tx.method = String::from_utf8_lossy(m).into_owned();
        if let Some(v) = ver {
            let v = trim(v);
            tx.version =
                String::from_utf8_lossy(v.strip_prefix(b"HTTP/").unwrap_or(v)).into_owned();
        }
        let (path, query) = match uri.iter().position(|&b| b == b'?') {
            Some(q) => (&uri[..q], &uri[q + 1..]),
            None => (uri, &b""[..]),
        };
        let query_text = if self.cfg.redact {
            redact_query(query)
        } else {
            query.to_vec()
        };
        let (p, pcut) = self.text(path);
        let (q, qcut) = self.text(&query_text);
        tx.path = p;
        tx.query = q;
        let mut full = Vec::with_capacity(uri.len());
        full.extend_from_slice(path);
        if uri.len() > path.len() {
            full.push(b'?');
            full.extend_from_slice(&query_text);
        }
        let (u, ucut) = self.text(&full);
        tx.uri = u;
        tx.uri_truncated = pcut || qcut || ucut;
        true
    }

    /// Text kept in a record: lossy UTF-8, cut to `max_text_bytes` at a char boundary.
    fn text(&self, v: &[u8]) -> (String, bool) {
        let max = self.cfg.max_text_bytes;
        let cut = v.len() > max;
        let v = if cut { &v[..max] } else { v };
        let mut s = String::from_utf8_lossy(v).into_owned();
        if s.len() > max {
            let mut n = max;
            while !s.is_char_boundary(n) {
                n -= 1;
            }
            s.truncate(n);
        }
        (s, cut)
    }

    /// Body bytes; returns how many of `data` were consumed.
    fn body(
        &mut self,
        dir: Dir,
        ts: i64,
        b: Body,
        data: &[u8],
        out: &mut Vec<Transaction>,
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
                let nl = data.iter().position(|&b| b == b'\n');
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
        out: &mut Vec<Transaction>,
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

    fn end_message(&mut self, dir: Dir, ts: i64, out: &mut Vec<Transaction>) {
        match dir {
            Dir::ToServer => self.end_request(ts),
            Dir::ToClient => self.end_response(ts, out),
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

    fn end_response(&mut self, ts: i64, out: &mut Vec<Transaction>) {
        let s = &mut self.resp;
        s.state = State::Idle;
        s.messages += 1;
        s.span.last_ns = ts;
        let Some((req, mut tx)) = self.cur.take() else {
            return;
        };
        tx.response_body_len = s.body_len;
        tx.response_missing_bytes = s.missing;
        let resp = s.span;
        let status = if tx.status_code >= 400 {
            TxStatus::Error
        } else {
            TxStatus::Ok
        };
        let (request, status) = match req {
            Some(p) => {
                let mut t = p.tx;
                // Merge the response facts into the request's record.
                t.status_code = tx.status_code;
                t.reason = tx.reason;
                t.response_header_bytes = tx.response_header_bytes;
                t.response_body_len = tx.response_body_len;
                t.response_content_length = tx.response_content_length;
                t.response_content_type = tx.response_content_type;
                t.response_missing_bytes = tx.response_missing_bytes;
                t.response_headers = tx.response_headers;
                if t.version.is_empty() {
                    t.version = tx.version;
                }
                tx = t;
                (Some(p.req), status)
            }
            None => (None, TxStatus::NoRequest),
        };
        out.push(Transaction {
            request,
            response: Some(resp),
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
                match probe(dir, &probe_buf[..hl + from_data]) {
                    Probe::Yes => {
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
                        s.buf = held_bytes;
                        s.span.bytes = s.buf.len() as u64;
                        self.stats.resyncs += 1;
                        return i;
                    }
                    Probe::Maybe if i + from_data == data.len() => {
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
            match data[i..].iter().position(|&b| b == b'\n') {
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

    fn gap_in(&mut self, dir: Dir, ts: i64, len: u64, out: &mut Vec<Transaction>) {
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
    tx.version = String::from_utf8_lossy(ver).into_owned();
    tx.status_code = code as u16;
    tx.reason = String::from_utf8_lossy(&reason[..reason.len().min(256)]).into_owned();
    true
}

/// Index just after the blank line ending a header block, searching for
/// line ends from `from`. Accepts CRLF and bare LF line ends.
fn find_head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < buf.len() {
        let p = i + buf[i..].iter().position(|&b| b == b'\n')?;
        match (buf.get(p + 1), buf.get(p + 2)) {
            (Some(b'\n'), _) => return Some(p + 2),
            (Some(b'\r'), Some(b'\n')) => return Some(p + 3),
            _ => {}
        }
        i = p + 1;
    }
    None
}

/// Lines of a header block, without their CR/LF.
struct Lines<'a> {
    data: &'a [u8],
}

impl<'a> Iterator for Lines<'a> {
    type Item = &'a [u8];
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.data.is_empty() {
            return None;
        }
        let (line, rest) = match self.data.iter().position(|&b| b == b'\n') {
            Some(p) => (&self.data[..p], &self.data[p + 1..]),
            None => (self.data, &b""[..]),
        };
        self.data = rest;
        Some(line.strip_suffix(b"\r").unwrap_or(line))
    }
}

fn trim(v: &[u8]) -> &[u8] {
    let s = v
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(v.len());
    let e = v
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(s, |e| e + 1);
    &v[s..e.max(s)]
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
fn redact_query(q: &[u8]) -> Vec<u8> {
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

impl StreamParser for HttpParser {
    fn data(&mut self, dir: Dir, ts_ns: i64, data: &[u8], out: &mut Vec<Transaction>) {
        self.feed(dir, ts_ns, data, out);
    }

    fn gap(&mut self, dir: Dir, ts_ns: i64, len: u64, out: &mut Vec<Transaction>) {
        self.stats.gaps += 1;
        self.gap_in(dir, ts_ns, len, out);
    }

    fn expire(&mut self, now_ns: i64, out: &mut Vec<Transaction>) {
        let timeout = self.cfg.transaction_timeout_ns;
        // Only complete requests wait for a response; the one being read is not expired.
        let waiting = self.pending.len() - usize::from(self.req_in_queue);
        let mut n = 0;
        for p in self.pending.iter().take(waiting) {
            if now_ns - p.req.last_ns > timeout {
                n += 1;
            } else {
                break;
            }
        }
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

    fn finish(&mut self, ts_ns: i64, out: &mut Vec<Transaction>) {
        // A response read until the connection's end is complete now; any
        // other partial response ends with what was read.
        match self.resp.state {
            State::Body(_) => self.end_response(ts_ns, out),
            State::Head => self.stats.unparsed_bytes += self.resp.span.bytes,
            _ => {}
        }
        match self.req.state {
            State::Body(_) => {
                self.req.span.last_ns = ts_ns;
                self.end_request(ts_ns)
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
        !self.ever_parsed && self.stats.unparsed_bytes > 16 * 1024
    }

    fn stats(&self) -> ParseStats {
        self.stats
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::testutil::{run_parser, tcp_events, Ev};

    fn cfg() -> ParseConfig {
        ParseConfig::default()
    }

    fn http(t: &Transaction) -> &HttpTx {
        match &t.detail {
            Detail::Http(h) => h,
            _ => panic!("not http"),
        }
    }

    fn pcap(rel: &str, ports: &[u16], cfg: &ParseConfig) -> Vec<Transaction> {
        let ev = tcp_events(rel, ports);
        let cfg = cfg.clone();
        run_parser(&ev, move || Box::new(HttpParser::new(&cfg)))
            .into_iter()
            .flatten()
            .collect()
    }

    #[test]
    fn dump_all() {
        for (f, ports) in [
            ("gap_in_stream.pcap", &[8000u16][..]),
            ("hide_secret_GET.pcap", &[80]),
            ("hide_secret_POST.pcap", &[80]),
            ("http_10_connection_close.pcap", &[8000]),
            ("http_basicauth.pcap", &[80]),
            ("http_get_2k_file.pcap", &[8000]),
            ("http_over_vlan.pcap", &[8080]),
            ("http_post.pcap", &[80]),
            ("http_post_json.pcap", &[80, 8080, 8000, 5000, 8002, 9200]),
            ("http_realip.pcap", &[8002]),
            ("http_unmatched.pcap", &[8080]),
            ("http_unmatched_timeout.pcap", &[8080]),
            ("http_url_params.pcap", &[80]),
            ("wsgi_drum.pcap", &[8888]),
            ("wsgi_loopback.pcap", &[8888]),
            ("../../zeek/http_no_crlf/no_crlf.pcap", &[80]),
            (
                "../../zeek/http_padding/tcp-http-with-padding.pcap",
                &[27272],
            ),
            ("../../zeek/http_m57_long_gap/m57-long-49583-80.pcap", &[80]),
            (
                "../../zeek/gtp_outer_ip_frag/gtp1_gn_normal_incl_fragmentation.pcap",
                &[80],
            ),
        ] {
            let txs = pcap(&format!("packetbeat/pcaps/{f}"), ports, &cfg());
            eprintln!("== {f}: {}", txs.len());
            for t in &txs {
                let h = http(t);
                eprintln!(
                    "  {:?} {} {} ?{} v{} {} {:?} req={:?} resp={:?} rb={} sb={} miss={}",
                    t.status,
                    h.method,
                    h.path,
                    h.query,
                    h.version,
                    h.status_code,
                    h.reason,
                    t.request.map(|s| s.bytes),
                    t.response.map(|s| s.bytes),
                    h.request_body_len,
                    h.response_body_len,
                    h.response_missing_bytes
                );
            }
        }
        let _ = Ev::Gap {
            conn: 0,
            dir: Dir::ToServer,
            ts_ns: 0,
            len: 0,
        };
    }
}
