//! HTTP/2 (RFC 9113) on reassembled TCP streams, and gRPC on top of it:
//! every stream one transaction (an `http` record with `version` 2 and its
//! `stream_id`, or a `grpc` call when the request's content type is
//! `application/grpc*`).
//!
//! Framing: the client preface, then 9-byte frame headers. DATA payloads are
//! counted as they pass (padding excluded) and never buffered; other frames'
//! payloads are gathered (a header block across HEADERS + CONTINUATION up to
//! `max_header_bytes`), SETTINGS give each direction's HPACK table limit,
//! RST_STREAM and GOAWAY end streams with their error code, PUSH_PROMISE
//! opens a pushed stream, PRIORITY, PING and WINDOW_UPDATE are counted.
//!
//! A direction that lost its framing (a gap that is not inside a DATA
//! payload, a connection seen from its middle) looks for the next position
//! where a strictly plausible frame header starts, and its HPACK decoder
//! forgets its table ([`hpack::Decoder::lost`]): fields that would need the
//! unseen entries are reported unknown, never taken for another request's.

mod frame;
pub mod grpc;
pub mod hpack;
mod huffman;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use wirelog_record::grpc::GrpcTx;
use wirelog_record::http::HttpTx;

use crate::http::texts::shared;
use crate::{Detail, Dir, ParseConfig, ParseStats, Span, StreamParser, Transaction, TxSink, TxStatus};

use frame::Header;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Streams open at once on one connection that wirelog follows; more are
/// counted as malformed and not recorded (servers default to 100-250).
const MAX_STREAMS: usize = 1024;

/// Whether `data`, a client's first bytes, are (the start of) the preface.
pub fn starts_with_preface(data: &[u8]) -> bool {
    data.len() >= 4 && PREFACE.starts_with(&data[..data.len().min(PREFACE.len())])
}

/// Whether `data`, a server's first bytes, open with the SETTINGS frame of
/// its connection preface.
pub fn starts_with_settings(data: &[u8]) -> bool {
    let Some(h) = data.first_chunk::<{ frame::HEADER_LEN }>() else { return false };
    let h = Header::parse(h);
    h.ty == frame::SETTINGS && h.flags == 0 && h.plausible(frame::DEFAULT_MAX_FRAME)
}

/// This protocol's content probe: the client preface (the server's first
/// SETTINGS alone is too short a signature to claim a port).
pub fn probe(dir: Dir, data: &[u8]) -> crate::detect::Probe {
    crate::detect::Probe::certain_if(dir == Dir::ToServer && data.len() >= 16 && starts_with_preface(data))
}

/// Where one direction's reading is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reading {
    /// Nothing seen yet in this direction.
    Start,
    /// This many bytes of the client preface matched.
    Preface(usize),
    /// Gathering a frame header (`hdr`, `hdr_len` bytes so far).
    Header,
    /// In a DATA payload: `left` bytes of the frame remain; `data_left`
    /// of them are data (the rest padding), `None` until the pad length
    /// byte of a padded frame is read.
    Data { h: Header, left: u32, data_left: Option<u32> },
    /// Gathering a payload other than DATA into `buf` (`h.len` bytes of
    /// it are kept), then passing over `skip` more.
    Payload { h: Header, left: u32, skip: u32 },
    /// Passing over the rest of a payload that is not kept.
    Skip { left: u32 },
    /// The frame boundary is lost: looking for a plausible frame header.
    Lost,
}

/// A header block being gathered across HEADERS and CONTINUATION frames.
#[derive(Clone, Copy, Debug)]
struct Block {
    stream: u32,
    end_stream: bool,
    /// A PUSH_PROMISE's promised stream.
    promised: Option<u32>,
    /// Bytes of the frames' payloads (for the header byte counts).
    wire: u32,
    /// The block outgrew `max_header_bytes`: its bytes are not kept.
    oversize: bool,
    /// When its HEADERS (or PUSH_PROMISE) frame was whole: the time of the
    /// request or response start, as tshark reports it.
    ts: i64,
}

/// One direction's state.
struct Side {
    reading: Reading,
    hdr: [u8; frame::HEADER_LEN],
    hdr_len: usize,
    /// A payload being gathered.
    buf: Vec<u8>,
    /// A header block being gathered (fragments concatenated).
    block: Vec<u8>,
    cont: Option<Block>,
    /// Decodes the header blocks this direction sends.
    hpack: hpack::Decoder,
    /// SETTINGS_MAX_FRAME_SIZE of the receiving side (what this side may send).
    max_frame: u32,
    /// Frames read, for counting.
    frames: u64,
}

impl Side {
    fn new() -> Side {
        Side {
            reading: Reading::Start,
            hdr: [0; frame::HEADER_LEN],
            hdr_len: 0,
            buf: Vec::new(),
            block: Vec::new(),
            cont: None,
            hpack: hpack::Decoder::new(),
            max_frame: frame::DEFAULT_MAX_FRAME,
            frames: 0,
        }
    }

    /// Framing lost: seek the next frame, forget the HPACK table and any
    /// header block in progress.
    fn lose(&mut self) {
        self.reading = Reading::Lost;
        self.hdr_len = 0;
        self.buf.clear();
        self.block.clear();
        self.cont = None;
        self.hpack.lost();
    }
}

/// gRPC's part of a stream.
#[derive(Default)]
struct GrpcCall {
    status: Option<u32>,
    message: Option<String>,
    timeout_ns: Option<i64>,
    trailers_only: bool,
}

/// One stream being followed.
struct Stream {
    id: u32,
    req: Option<Span>,
    resp: Option<Span>,
    req_end: bool,
    resp_end: bool,
    /// The final (non-1xx) response headers were seen.
    final_resp: bool,
    tx: HttpTx,
    grpc: Option<Box<GrpcCall>>,
    /// gRPC's length-prefixed messages per direction, counted on every
    /// stream: a call may be known as gRPC only from its response (its
    /// request's content type an HPACK entry this parser never saw).
    req_msgs: grpc::Messages,
    resp_msgs: grpc::Messages,
    /// Header fields that could not be known (HPACK entries never seen).
    unknown: u32,
    /// Packet time of the last frame (for expiry).
    last_ns: i64,
}

impl Stream {
    fn new(id: u32, last_ns: i64) -> Stream {
        Stream {
            id,
            req: None,
            resp: None,
            req_end: false,
            resp_end: false,
            final_resp: false,
            tx: HttpTx { version: shared("2"), stream_id: Some(id), ..HttpTx::default() },
            grpc: None,
            req_msgs: grpc::Messages::default(),
            resp_msgs: grpc::Messages::default(),
            unknown: 0,
            last_ns,
        }
    }

    fn span(&mut self, dir: Dir) -> &mut Option<Span> {
        match dir {
            Dir::ToServer => &mut self.req,
            Dir::ToClient => &mut self.resp,
        }
    }

    /// A frame of `bytes` bytes of `dir` seen at `ts`.
    fn touch(&mut self, dir: Dir, ts: i64, bytes: u64) {
        let s = self.span(dir).get_or_insert(Span { first_ns: ts, last_ns: ts, bytes: 0 });
        s.last_ns = ts;
        s.bytes += bytes;
        self.last_ns = ts;
    }
}

/// One HTTP/2 connection.
pub struct Http2Parser {
    max_text: usize,
    max_header: usize,
    redact: bool,
    timeout_ns: i64,
    stats: ParseStats,
    req: Side,
    resp: Side,
    streams: Vec<Stream>,
    /// Highest stream id each side opened (client odd, server even).
    max_client_stream: u32,
    /// A gRPC call was seen (conn.log's service is then `grpc`).
    grpc_seen: bool,
    /// Frames of types only counted: PRIORITY, PING, WINDOW_UPDATE.
    pub pings: u64,
    pub window_updates: u64,
    pub priorities: u64,
    pub goaways: u64,
    /// Streams not followed because `MAX_STREAMS` were open.
    pub streams_dropped: u64,
}

impl Http2Parser {
    pub fn new(cfg: &ParseConfig) -> Http2Parser {
        Http2Parser {
            max_text: cfg.max_text_bytes,
            max_header: cfg.max_header_bytes.max(1024),
            redact: cfg.redact,
            timeout_ns: cfg.transaction_timeout_ns,
            stats: ParseStats::default(),
            req: Side::new(),
            resp: Side::new(),
            streams: Vec::new(),
            max_client_stream: 0,
            grpc_seen: false,
            pings: 0,
            window_updates: 0,
            priorities: 0,
            goaways: 0,
            streams_dropped: 0,
        }
    }

    /// The parser of a connection that switched from HTTP/1.1 with
    /// `Upgrade: h2c` (RFC 7540 §3.2): the request that asked is stream 1,
    /// half-closed by the client; the server's HTTP/2 bytes start after its
    /// 101, the client's with the preface.
    pub(crate) fn upgraded(cfg: &ParseConfig, req: Span, tx: HttpTx) -> Http2Parser {
        let mut p = Http2Parser::new(cfg);
        let mut st = Stream::new(1, req.last_ns);
        st.req = Some(req);
        st.req_end = true;
        let grpc = tx.request_content_type.starts_with("application/grpc");
        st.tx = HttpTx { version: shared("2"), stream_id: Some(1), ..tx };
        if grpc {
            st.grpc = Some(Box::default());
            p.grpc_seen = true;
        }
        p.streams.push(st);
        p.max_client_stream = 1;
        p.resp.reading = Reading::Header;
        p
    }

    /// conn.log's `service`.
    pub fn service(&self) -> &'static str {
        if self.grpc_seen {
            "grpc"
        } else {
            "http2"
        }
    }

    /// Bytes this connection's HTTP/2 state holds beyond the parser itself.
    pub fn memory(&self) -> usize {
        let side = |s: &Side| s.buf.capacity() + s.block.capacity() + s.hpack.memory();
        side(&self.req) + side(&self.resp) + self.streams.capacity() * std::mem::size_of::<Stream>()
    }

    fn side(&mut self, dir: Dir) -> &mut Side {
        match dir {
            Dir::ToServer => &mut self.req,
            Dir::ToClient => &mut self.resp,
        }
    }

    fn feed(&mut self, dir: Dir, ts: i64, mut data: &[u8], out: &mut dyn TxSink) {
        while !data.is_empty() {
            let reading = self.side(dir).reading;
            let used = match reading {
                Reading::Start => {
                    self.start(dir, data);
                    0
                }
                Reading::Preface(n) => {
                    let want = &PREFACE[n..];
                    let k = want.len().min(data.len());
                    if data[..k] != want[..k] {
                        // Not HTTP/2 after all, or not from the start.
                        self.stats.malformed += 1;
                        self.side(dir).lose();
                        0
                    } else {
                        self.side(dir).reading = if n + k == PREFACE.len() { Reading::Header } else { Reading::Preface(n + k) };
                        k
                    }
                }
                Reading::Header => {
                    let s = self.side(dir);
                    let k = (frame::HEADER_LEN - s.hdr_len).min(data.len());
                    s.hdr[s.hdr_len..s.hdr_len + k].copy_from_slice(&data[..k]);
                    s.hdr_len += k;
                    if s.hdr_len == frame::HEADER_LEN {
                        s.hdr_len = 0;
                        let h = Header::parse(&s.hdr);
                        self.frame_start(dir, ts, h, out);
                    }
                    k
                }
                Reading::Data { h, left, data_left } => self.data_payload(dir, ts, h, left, data_left, data, out),
                Reading::Payload { h, left, skip } => {
                    let k = (left as usize).min(data.len());
                    let s = self.side(dir);
                    s.buf.extend_from_slice(&data[..k]);
                    let left = left - k as u32;
                    if left == 0 {
                        s.reading = if skip > 0 { Reading::Skip { left: skip } } else { Reading::Header };
                        let buf = std::mem::take(&mut s.buf);
                        self.frame_payload(dir, ts, h, &buf, out);
                        let mut buf = buf;
                        buf.clear();
                        self.side(dir).buf = buf;
                    } else {
                        s.reading = Reading::Payload { h, left, skip };
                    }
                    k
                }
                Reading::Skip { left } => {
                    let k = (left as usize).min(data.len());
                    let left = left - k as u32;
                    self.side(dir).reading = if left == 0 { Reading::Header } else { Reading::Skip { left } };
                    k
                }
                Reading::Lost => self.seek(dir, data),
            };
            data = &data[used..];
        }
    }

    /// The first bytes of a direction: the preface (client), SETTINGS
    /// (server), or the middle of a connection.
    fn start(&mut self, dir: Dir, data: &[u8]) {
        let fresh = match dir {
            Dir::ToServer => starts_with_preface(data) || PREFACE.starts_with(data),
            // The server's side is known from its start when the client's
            // was, or when it opens with SETTINGS.
            Dir::ToClient => starts_with_settings(data) || matches!(self.req.reading, Reading::Preface(_) | Reading::Header),
        };
        let s = self.side(dir);
        if !fresh {
            s.lose();
        } else if dir == Dir::ToServer {
            s.reading = Reading::Preface(0);
        } else {
            s.reading = Reading::Header;
        }
    }

    /// Lost: finds the next plausible frame header in `data`; returns the
    /// bytes passed over.
    fn seek(&mut self, dir: Dir, data: &[u8]) -> usize {
        let max = self.side(dir).max_frame;
        for i in 0..data.len().saturating_sub(frame::HEADER_LEN - 1) {
            let h = Header::parse(data[i..].first_chunk().expect("9 bytes"));
            if !h.plausible(max) {
                continue;
            }
            // A second header right after this frame, when in view, must
            // be plausible too.
            let next = i + frame::HEADER_LEN + h.len as usize;
            if let Some(n) = data.get(next..).and_then(|d| d.first_chunk::<{ frame::HEADER_LEN }>()) {
                if !Header::parse(n).plausible(max) {
                    continue;
                }
            }
            self.stats.unparsed_bytes += i as u64;
            self.stats.resyncs += 1;
            self.side(dir).reading = Reading::Header;
            return i;
        }
        self.stats.unparsed_bytes += data.len() as u64;
        data.len()
    }

    /// A frame header was read.
    fn frame_start(&mut self, dir: Dir, ts: i64, h: Header, out: &mut dyn TxSink) {
        let max_header = self.max_header;
        let s = self.side(dir);
        s.frames += 1;
        if h.len > frame::LARGEST_FRAME.min(s.max_frame.max(frame::DEFAULT_MAX_FRAME) * 64) {
            // Far past any frame size a peer may allow: not a frame.
            self.stats.malformed += 1;
            self.side(dir).lose();
            return;
        }
        // A header block must continue with CONTINUATION frames only.
        if s.cont.is_some() && h.ty != frame::CONTINUATION {
            s.block.clear();
            s.cont = None;
            s.hpack.lost();
            self.stats.malformed += 1;
        }
        let reading = match h.ty {
            frame::DATA => Reading::Data { h, left: h.len, data_left: (!h.has(frame::PADDED)).then_some(h.len) },
            frame::HEADERS | frame::PUSH_PROMISE | frame::CONTINUATION if h.len as usize <= max_header => Reading::Payload { h, left: h.len, skip: 0 },
            frame::HEADERS | frame::PUSH_PROMISE | frame::CONTINUATION => {
                // A header block this large is not kept: its fields are
                // lost, and so is the table it updates.
                self.stats.malformed += 1;
                self.stats.unparsed_bytes += h.len as u64;
                let s = self.side(dir);
                s.block.clear();
                s.cont = None;
                s.hpack.lost();
                Reading::Skip { left: h.len }
            }
            frame::PRIORITY | frame::RST_STREAM | frame::SETTINGS | frame::PING | frame::GOAWAY | frame::WINDOW_UPDATE => {
                // Only the first bytes matter (SETTINGS are 6 bytes each,
                // a GOAWAY's debug data is not read).
                let keep = if h.ty == frame::GOAWAY { 8.min(h.len) } else { h.len.min(6 * 64) };
                Reading::Payload { h: Header { len: keep, ..h }, left: keep, skip: h.len - keep }
            }
            // Unknown frame types are ignored (§4.1).
            _ => Reading::Skip { left: h.len },
        };
        self.side(dir).reading = reading;
        // A frame with nothing (more) to read ends here.
        match self.side(dir).reading {
            Reading::Payload { h, left: 0, skip } => {
                self.side(dir).reading = if skip > 0 { Reading::Skip { left: skip } } else { Reading::Header };
                self.frame_payload(dir, ts, h, &[], out);
            }
            Reading::Data { h, left: 0, .. } => {
                self.side(dir).reading = Reading::Header;
                self.data_frame_end(dir, ts, h, out);
            }
            Reading::Skip { left: 0 } => self.side(dir).reading = Reading::Header,
            _ => {}
        }
    }

    /// Reads DATA payload bytes; returns how many of `data` were used.
    #[allow(clippy::too_many_arguments)]
    fn data_payload(&mut self, dir: Dir, ts: i64, h: Header, left: u32, data_left: Option<u32>, data: &[u8], out: &mut dyn TxSink) -> usize {
        let Some(dl) = data_left else {
            // The pad length byte of a padded frame.
            let pad = data[0] as u32;
            let dl = match (left - 1).checked_sub(pad) {
                Some(dl) => dl,
                None => {
                    self.stats.malformed += 1;
                    0
                }
            };
            self.side(dir).reading = Reading::Data { h, left: left - 1, data_left: Some(dl) };
            if left == 1 {
                self.side(dir).reading = Reading::Header;
                self.data_frame_end(dir, ts, h, out);
            }
            return 1;
        };
        let k = (left as usize).min(data.len());
        let d = (dl as usize).min(k);
        if d > 0 {
            if let Some(st) = self.stream_mut(h.stream) {
                st.touch(dir, ts, d as u64);
                match dir {
                    Dir::ToServer => st.tx.request_body_len += d as u64,
                    Dir::ToClient => st.tx.response_body_len += d as u64,
                }
                match dir {
                    Dir::ToServer => st.req_msgs.feed(&data[..d]),
                    Dir::ToClient => st.resp_msgs.feed(&data[..d]),
                }
            }
        }
        let left = left - k as u32;
        if left == 0 {
            self.side(dir).reading = Reading::Header;
            self.data_frame_end(dir, ts, h, out);
        } else {
            self.side(dir).reading = Reading::Data { h, left, data_left: Some(dl - d as u32) };
        }
        k
    }

    /// A DATA frame ended.
    fn data_frame_end(&mut self, dir: Dir, ts: i64, h: Header, out: &mut dyn TxSink) {
        if let Some(st) = self.stream_mut(h.stream) {
            st.touch(dir, ts, 0);
        }
        if h.has(frame::END_STREAM) {
            self.end_stream(dir, h.stream, out);
        }
    }

    fn stream_mut(&mut self, id: u32) -> Option<&mut Stream> {
        self.streams.iter_mut().find(|s| s.id == id)
    }

    fn stream_index(&self, id: u32) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    /// A frame other than DATA, its payload (the kept part) in `p`.
    fn frame_payload(&mut self, dir: Dir, ts: i64, h: Header, p: &[u8], out: &mut dyn TxSink) {
        match h.ty {
            frame::HEADERS | frame::PUSH_PROMISE => self.headers_frame(dir, ts, h, p, out),
            frame::CONTINUATION => self.continuation(dir, ts, h, p, out),
            frame::SETTINGS => {
                if h.has(frame::ACK) {
                    return;
                }
                for s in p.chunks_exact(6) {
                    let id = u16::from_be_bytes([s[0], s[1]]);
                    let v = u32::from_be_bytes([s[2], s[3], s[4], s[5]]);
                    // The sender's settings bind what its peer sends.
                    let peer = match dir {
                        Dir::ToServer => &mut self.resp,
                        Dir::ToClient => &mut self.req,
                    };
                    match id {
                        frame::SETTINGS_HEADER_TABLE_SIZE => peer.hpack.set_limit(v),
                        frame::SETTINGS_MAX_FRAME_SIZE if (frame::DEFAULT_MAX_FRAME..=frame::LARGEST_FRAME).contains(&v) => peer.max_frame = v,
                        _ => {}
                    }
                }
            }
            frame::RST_STREAM | frame::GOAWAY if p.len() < if h.ty == frame::GOAWAY { 8 } else { 4 } => {
                // Shorter than the frame's fixed part (§6.4, §6.8).
                self.stats.malformed += 1;
            }
            frame::RST_STREAM => {
                let code = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
                if let Some(i) = self.stream_index(h.stream) {
                    self.streams[i].touch(dir, ts, 0);
                    self.reset(i, dir, code, out);
                }
            }
            frame::GOAWAY => {
                self.goaways += 1;
                let last = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & 0x7fff_ffff;
                let code = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
                // Streams the sender's peer opened above `last` were not
                // and will not be processed (§6.8).
                let peer_opens_odd = dir == Dir::ToClient;
                let mut i = 0;
                while i < self.streams.len() {
                    let st = &self.streams[i];
                    if st.id > last && (st.id % 2 == 1) == peer_opens_odd {
                        let st = self.streams.swap_remove(i);
                        self.emit(st, "goaway", frame::error_name(code), out);
                    } else {
                        i += 1;
                    }
                }
            }
            frame::PING => self.pings += 1,
            frame::WINDOW_UPDATE => self.window_updates += 1,
            frame::PRIORITY => self.priorities += 1,
            _ => {}
        }
    }

    /// A HEADERS or PUSH_PROMISE frame: its fragment starts a header block.
    fn headers_frame(&mut self, dir: Dir, ts: i64, h: Header, p: &[u8], out: &mut dyn TxSink) {
        let mut body = p;
        let mut pad = 0usize;
        if h.has(frame::PADDED) {
            let Some((&n, rest)) = body.split_first() else { return self.bad_block(dir) };
            pad = n as usize;
            body = rest;
        }
        let mut promised = None;
        if h.ty == frame::HEADERS && h.has(frame::PRIORITY_FLAG) {
            if body.len() < 5 {
                return self.bad_block(dir);
            }
            body = &body[5..];
        } else if h.ty == frame::PUSH_PROMISE {
            if body.len() < 4 {
                return self.bad_block(dir);
            }
            promised = Some(u32::from_be_bytes([body[0], body[1], body[2], body[3]]) & 0x7fff_ffff);
            body = &body[4..];
        }
        if pad > body.len() {
            return self.bad_block(dir);
        }
        let frag = &body[..body.len() - pad];
        let block = Block { stream: h.stream, end_stream: h.ty == frame::HEADERS && h.has(frame::END_STREAM), promised, wire: h.len, oversize: false, ts };
        let s = self.side(dir);
        s.block.clear();
        s.block.extend_from_slice(frag);
        if h.has(frame::END_HEADERS) {
            self.block_done(dir, ts, block, out);
        } else {
            self.side(dir).cont = Some(block);
        }
    }

    fn continuation(&mut self, dir: Dir, ts: i64, h: Header, p: &[u8], out: &mut dyn TxSink) {
        let max = self.max_header;
        let s = self.side(dir);
        let Some(mut block) = s.cont.take() else {
            // A CONTINUATION without its HEADERS (after a loss: expected).
            self.stats.malformed += 1;
            return;
        };
        if block.stream != h.stream {
            s.block.clear();
            s.hpack.lost();
            self.stats.malformed += 1;
            return;
        }
        block.wire += h.len;
        if s.block.len() + p.len() > max {
            block.oversize = true;
            s.block.clear();
        }
        if !block.oversize {
            s.block.extend_from_slice(p);
        }
        if h.has(frame::END_HEADERS) {
            if block.oversize {
                self.stats.malformed += 1;
                self.side(dir).hpack.lost();
                return;
            }
            self.block_done(dir, ts, block, out);
        } else {
            self.side(dir).cont = Some(block);
        }
    }

    /// A header block that could not be read: its fields are lost, and so
    /// is the table it may have changed.
    fn bad_block(&mut self, dir: Dir) {
        self.stats.malformed += 1;
        let s = self.side(dir);
        s.block.clear();
        s.cont = None;
        s.hpack.lost();
    }

    /// A complete header block of `dir` for `b.stream`.
    fn block_done(&mut self, dir: Dir, ts: i64, b: Block, out: &mut dyn TxSink) {
        // Which stream the fields go to, opening it when it is new.
        let target = b.promised.unwrap_or(b.stream);
        let mut idx = self.stream_index(target);
        if idx.is_none() {
            let opens = match (dir, b.promised) {
                (Dir::ToServer, None) => {
                    if target % 2 == 1 && target > self.max_client_stream {
                        self.max_client_stream = target;
                        true
                    } else {
                        // A client stream id used again, or an even one.
                        self.stats.malformed += 1;
                        false
                    }
                }
                // A pushed stream, announced by the server.
                (Dir::ToClient, Some(_)) => target.is_multiple_of(2),
                // A response on a stream whose request was not seen (the
                // capture began late): recorded without a request, only
                // when the stream is newer than any request seen.
                (Dir::ToClient, None) => target > self.max_client_stream || target.is_multiple_of(2),
                (Dir::ToServer, Some(_)) => false,
            };
            if opens {
                if self.streams.len() >= MAX_STREAMS {
                    self.streams_dropped += 1;
                    self.stats.malformed += 1;
                } else {
                    self.streams.push(Stream::new(target, ts));
                    idx = Some(self.streams.len() - 1);
                }
            }
        }
        // Decode even for a stream not followed: the table must stay in step.
        let s = match dir {
            Dir::ToServer => &mut self.req,
            Dir::ToClient => &mut self.resp,
        };
        let block = std::mem::take(&mut s.block);
        let max_text = self.max_text;
        let redact = self.redact;
        let mut fields = Fields::default();
        let res = s.hpack.decode(&block, &mut |f| fields.take(f, max_text));
        let mut block = block;
        block.clear();
        s.block = block;
        if res.is_err() {
            self.stats.malformed += 1;
        }
        let Some(i) = idx else { return };
        let st = &mut self.streams[i];
        st.unknown += fields.unknown;
        st.touch(dir, b.ts, 0);
        st.touch(dir, ts, b.wire as u64);
        let request_block = dir == Dir::ToServer || b.promised.is_some();
        if request_block {
            if b.promised.is_some() {
                st.tx.promised_by = Some(b.stream);
                st.req_end = true;
            }
            if st.req_end && b.promised.is_none() {
                // HEADERS on a stream the client already ended (§5.1:
                // STREAM_CLOSED): not this stream's.
                self.stats.malformed += 1;
                return;
            }
            if st.tx.method.is_empty() && st.tx.request_header_bytes == 0 {
                fields.apply_request(st, redact, max_text);
                if st.grpc.is_some() {
                    self.grpc_seen = true;
                }
            }
            st.tx.request_header_bytes += b.wire as u64;
        } else {
            st.tx.response_header_bytes += b.wire as u64;
            fields.apply_response(st, b.end_stream);
            if st.grpc.is_some() {
                self.grpc_seen = true;
            }
        }
        if b.end_stream {
            self.end_stream(dir, target, out);
        }
    }

    /// `dir` sent END_STREAM on `id`.
    fn end_stream(&mut self, dir: Dir, id: u32, out: &mut dyn TxSink) {
        let Some(i) = self.stream_index(id) else { return };
        let st = &mut self.streams[i];
        match dir {
            Dir::ToServer => st.req_end = true,
            Dir::ToClient => st.resp_end = true,
        }
        if st.req_end && st.resp_end && st.final_resp {
            let st = self.streams.swap_remove(i);
            self.emit(st, "complete", "", out);
        } else if dir == Dir::ToClient && st.resp_end {
            // The response ended without a final status (only 1xx or a
            // block that could not be read); the client may still send.
            if st.req_end {
                let st = self.streams.swap_remove(i);
                self.emit(st, "complete", "", out);
            }
        }
    }

    /// RST_STREAM from `dir` on the stream at `i`.
    fn reset(&mut self, i: usize, dir: Dir, code: u32, out: &mut dyn TxSink) {
        let st = &self.streams[i];
        // A server's RST_STREAM(NO_ERROR) after its complete response only
        // tells the client to stop sending (RFC 9113 §8.1): complete.
        let state = if dir == Dir::ToClient && code == 0 && st.resp_end {
            "complete"
        } else if code == 7 {
            "refused"
        } else if dir == Dir::ToServer {
            "reset_by_client"
        } else {
            "reset_by_server"
        };
        let st = self.streams.swap_remove(i);
        self.emit(st, state, if state == "complete" { "" } else { frame::error_name(code) }, out);
    }

    /// Reports a stream as one transaction.
    fn emit(&mut self, st: Stream, end_state: &'static str, error: &'static str, out: &mut dyn TxSink) {
        let Stream { id, req, resp, final_resp, mut tx, grpc, req_msgs, resp_msgs, .. } = st;
        let resp = resp.filter(|_| true);
        let status = match (req.is_some(), resp.is_some()) {
            (false, _) => TxStatus::NoRequest,
            (true, false) => TxStatus::NoResponse,
            (true, true) if end_state != "complete" || !final_resp => TxStatus::Partial,
            (true, true) => match grpc.as_ref().and_then(|g| g.status) {
                Some(0) => TxStatus::Ok,
                Some(_) => TxStatus::Error,
                None if tx.status_code >= 400 => TxStatus::Error,
                None => TxStatus::Ok,
            },
        };
        // A gRPC call ended by RST_STREAM (either side), a refusal or a
        // GOAWAY before any grpc-status ended non-OK for its client
        // (CANCELLED, DEADLINE_EXCEEDED, UNAVAILABLE, ...: gRPC's
        // doc/PROTOCOL-HTTP2.md, "Errors", maps those codes to statuses): an
        // error, so the map's grpc edges count it with the failed calls. A
        // call cut only by the end of the capture stays as it was seen.
        let ended_by_h2 = matches!(end_state, "reset_by_client" | "reset_by_server" | "refused" | "goaway");
        let status = match &grpc {
            Some(g) if g.status.is_none() && ended_by_h2 && req.is_some() => TxStatus::Error,
            _ => status,
        };
        let end_state = if end_state == "incomplete" && resp.is_none() { "no_response" } else { end_state };
        tx.end_state = end_state;
        tx.h2_error = error;
        let detail = match grpc {
            Some(g) => {
                let path = tx.path.clone();
                let (service, method) = grpc::service_method(&path).unwrap_or(("", ""));
                let req_n = req_msgs.count;
                let resp_n = resp_msgs.count;
                let call_type = match (req_n > 1, resp_n > 1) {
                    (false, false) => "unary",
                    (true, false) => "client_streaming",
                    (false, true) => "server_streaming",
                    (true, true) => "bidi_streaming",
                };
                Detail::Grpc(GrpcTx {
                    service: shared(service),
                    method: shared(method),
                    authority: tx.host.clone(),
                    stream_id: id,
                    http_status: tx.status_code,
                    grpc_status: g.status,
                    grpc_message: g.message,
                    trailers_only: g.trailers_only,
                    request_messages: req_n,
                    response_messages: resp_n,
                    request_message_bytes: req_msgs.bytes,
                    response_message_bytes: resp_msgs.bytes,
                    compressed: req_msgs.compressed || resp_msgs.compressed,
                    timeout_ns: g.timeout_ns,
                    call_type,
                    content_type: tx.request_content_type.clone(),
                    user_agent: tx.user_agent.clone(),
                    end_state,
                    h2_error: error,
                })
            }
            None => Detail::Http(tx),
        };
        out.push(Transaction { request: req, response: resp, status, detail });
    }
}

/// The fields of one header block that wirelog keeps.
#[derive(Default)]
struct Fields {
    method: Option<String>,
    path: Option<String>,
    authority: Option<String>,
    host: Option<String>,
    user_agent: Option<String>,
    content_type: Option<String>,
    content_length: Option<u64>,
    status: Option<u16>,
    grpc_status: Option<u32>,
    grpc_message: Option<String>,
    grpc_timeout: Option<i64>,
    unknown: u32,
}

impl Fields {
    fn take(&mut self, f: hpack::Field<'_>, max_text: usize) {
        let hpack::Field::Known { name, value } = f else {
            self.unknown += 1;
            return;
        };
        let text = |v: &[u8]| {
            let mut s = String::from_utf8_lossy(v).into_owned();
            crate::truncate(&mut s, max_text);
            s
        };
        match name {
            b":method" => self.method = Some(text(value)),
            b":path" => self.path = Some(String::from_utf8_lossy(value).into_owned()),
            b":authority" => self.authority = Some(text(value)),
            b"host" => self.host = Some(text(value)),
            b"user-agent" => self.user_agent = Some(text(value)),
            b"content-type" => self.content_type = Some(text(value)),
            b"content-length" => self.content_length = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()),
            b":status" => self.status = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()),
            b"grpc-status" => self.grpc_status = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()),
            b"grpc-message" => {
                let mut m = grpc::percent_decode(value);
                crate::truncate(&mut m, max_text);
                self.grpc_message = Some(m);
            }
            b"grpc-timeout" => self.grpc_timeout = grpc::timeout_ns(value),
            _ => {}
        }
    }

    /// The request's block (or a pushed request's).
    fn apply_request(self, st: &mut Stream, redact: bool, max_text: usize) {
        let tx = &mut st.tx;
        if let Some(m) = &self.method {
            tx.method = shared(m);
        }
        if let Some(p) = &self.path {
            let (path, query) = p.split_once('?').unwrap_or((p.as_str(), ""));
            let query: std::borrow::Cow<'_, str> = if redact && !query.is_empty() {
                String::from_utf8_lossy(&crate::http::redact_query(query.as_bytes())).into_owned().into()
            } else {
                query.into()
            };
            let mut uri = if query.is_empty() { path.to_string() } else { format!("{path}?{query}") };
            tx.uri_truncated = crate::truncate(&mut uri, max_text);
            let mut path = path.to_string();
            crate::truncate(&mut path, max_text);
            let mut query = query.into_owned();
            crate::truncate(&mut query, max_text);
            tx.uri = Arc::from(uri);
            tx.path = shared(&path);
            tx.query = Arc::from(query);
        }
        if let Some(a) = self.authority.as_ref().or(self.host.as_ref()) {
            tx.host = shared(a);
        }
        if let Some(u) = &self.user_agent {
            tx.user_agent = shared(u);
        }
        if let Some(c) = &self.content_type {
            tx.request_content_type = shared(c);
            if c.starts_with("application/grpc") {
                st.grpc = Some(Box::new(GrpcCall { timeout_ns: self.grpc_timeout, ..GrpcCall::default() }));
            }
        }
        tx.request_content_length = self.content_length;
    }

    /// A response block: 1xx, the final headers, or trailers.
    fn apply_response(self, st: &mut Stream, end_stream: bool) {
        match self.status {
            Some(s) if (100..200).contains(&s) => st.tx.info_code = s,
            Some(s) if !st.final_resp => {
                st.final_resp = true;
                st.tx.status_code = s;
                if let Some(c) = &self.content_type {
                    st.tx.response_content_type = shared(c);
                    if st.grpc.is_none() && c.starts_with("application/grpc") {
                        // The request's content type was not known (a
                        // connection joined late): the response's says gRPC.
                        st.grpc = Some(Box::default());
                    }
                }
                st.tx.response_content_length = self.content_length;
                if let Some(g) = st.grpc.as_mut() {
                    if end_stream && self.grpc_status.is_some() {
                        g.trailers_only = true;
                    }
                }
            }
            // A final block whose :status could not be read (an unknown
            // HPACK entry): the response was seen, its status is unknown.
            None if !st.final_resp && self.unknown > 0 => st.final_resp = true,
            _ => {}
        }
        if let Some(g) = st.grpc.as_mut() {
            if self.grpc_status.is_some() {
                g.status = self.grpc_status;
                g.message = self.grpc_message;
            }
        }
    }
}

impl StreamParser for Http2Parser {
    fn data(&mut self, dir: Dir, ts_ns: i64, data: &[u8], out: &mut dyn TxSink) {
        self.feed(dir, ts_ns, data, out);
    }

    fn gap(&mut self, dir: Dir, _ts_ns: i64, len: u64, _out: &mut dyn TxSink) {
        self.stats.gaps += 1;
        let s = self.side(dir);
        match s.reading {
            // Inside a DATA payload the gap only shortens what is counted.
            Reading::Data { h, left, data_left: Some(dl) } if len < left as u64 => {
                let dl = dl.saturating_sub(len as u32);
                s.reading = Reading::Data { h, left: left - len as u32, data_left: Some(dl) };
                if let Some(st) = self.stream_mut(h.stream) {
                    match dir {
                        Dir::ToServer => st.tx.request_missing_bytes += len,
                        Dir::ToClient => st.tx.response_missing_bytes += len,
                    }
                    // gRPC's message boundaries after the lost bytes are
                    // unknown: the counts stop where they are.
                    match dir {
                        Dir::ToServer => st.req_msgs.lost(),
                        Dir::ToClient => st.resp_msgs.lost(),
                    }
                }
            }
            Reading::Skip { left } if len < left as u64 => s.reading = Reading::Skip { left: left - len as u32 },
            _ => s.lose(),
        }
    }

    fn expire(&mut self, now_ns: i64, out: &mut dyn TxSink) {
        let mut i = 0;
        while i < self.streams.len() {
            let st = &self.streams[i];
            if st.resp.is_none() && now_ns - st.last_ns > self.timeout_ns {
                let st = self.streams.swap_remove(i);
                self.emit(st, "no_response", "", out);
            } else {
                i += 1;
            }
        }
    }

    fn finish(&mut self, _ts_ns: i64, out: &mut dyn TxSink) {
        // In the order the streams were opened.
        let mut streams = std::mem::take(&mut self.streams);
        streams.sort_by_key(|s| s.id);
        for st in streams {
            self.emit(st, "incomplete", "", out);
        }
    }

    fn gave_up(&self) -> bool {
        false
    }

    fn stats(&self) -> ParseStats {
        self.stats
    }
}

#[cfg(any(test, feature = "fuzzing"))]
/// Fuzzing entry: `data` is a script of steps (see [`crate::fuzz_steps`]).
/// The first byte picks whether the connection starts with the preface.
/// Must never panic.
pub fn fuzz(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else { return };
    let cfg = ParseConfig { max_header_bytes: 256 + first as usize * 16, ..ParseConfig::default() };
    let mut p = Http2Parser::new(&cfg);
    let mut out = Vec::new();
    if first & 1 == 0 {
        p.data(Dir::ToServer, 0, PREFACE, &mut out);
    }
    let mut ts = 0;
    for (c, step) in crate::fuzz_steps(rest) {
        ts += c as i64;
        match step {
            crate::FuzzStep::Data(dir, d) => p.data(dir, ts, d, &mut out),
            crate::FuzzStep::Gap(dir, n) => p.gap(dir, ts, n, &mut out),
        }
        if c % 17 == 0 {
            p.expire(ts, &mut out);
        }
        out.clear();
    }
    p.finish(ts, &mut out);
}
