//! Cassandra's CQL native protocol, versions 3 to 5 (apache/cassandra's
//! `doc/native_protocol_v3.spec`, `_v4.spec`, `_v5.spec`; section numbers
//! below are v4's): one transaction per request frame and the response
//! frame with the same stream id.
//!
//! A frame (2) is a 9-byte header (version with the direction in its top
//! bit, flags, a 16-bit stream id, the opcode, a 32-bit body length) and
//! its body ([`crate::frames`] cuts them). Requests are multiplexed: the
//! server answers a stream id with the same id, in any order (2.3), so a
//! response is paired with the request waiting on its stream. A negative
//! stream is the server's own: an EVENT (4.2.6), a transaction without a
//! request.
//!
//! What is read (4.1, 4.2): a QUERY's and PREPARE's statement (recorded as
//! SQL text is: redacted when asked, fingerprinted), an EXECUTE's prepared
//! id (named by the statement it was prepared from, when that PREPARE's
//! RESULT was seen on the connection), a BATCH's type, statement count and
//! first statement, the consistency level; a RESULT's kind, a rows
//! result's column and row counts and its keyspace and table, a schema
//! change, an ERROR's code and message (4.2.1), warnings (2.2). A response
//! with the tracing flag starts with a tracing id, then the warnings, then
//! a custom payload (2.2), each skipped.
//!
//! Compression (2.2, 5): the flag says a body is compressed with what the
//! client's STARTUP named (`lz4`: an [int] uncompressed length, then an
//! LZ4 block; `snappy`); both are decoded here ([`decompress`], no
//! dependency), only up to the bytes the parser reads. A compressed frame
//! whose algorithm was not seen (the STARTUP was before the capture) is
//! flagged and its body not read.
//!
//! Version 5 (v5 spec, 2): once the server has answered the STARTUP
//! (READY or AUTHENTICATE), frames travel inside segments: a 6-byte header
//! (17 bits of payload length, a self-contained flag, a CRC24 of the
//! first three bytes) or 8 bytes with lz4 (compressed and uncompressed
//! lengths), the payload, a CRC32. Segments are cut and their payloads
//! (decompressed when lz4) read as the frames they carry; the header's
//! CRC24 and the payload's CRC32 are checked ([`crate::checksum`]), a
//! mismatch counted as malformed.
//!
//! Packetbeat's parser (packetbeat/protos/cassandra, `internal/gocql`) and
//! tshark's CQL dissector (epan/dissectors/packet-cql.c) are the references
//! the tests compare with (tests/packetbeat2_cassandra.py).

pub(crate) mod decompress;

use crate::fingerprint::{self, Dialect};
use crate::frames::{Frame, Framer, Msg, Rd};
use crate::{Detail, Dir, ParseConfig, ParseStats, Span, StreamParser, Transaction, TxSink, TxStatus};

pub use wirelog_record::cassandra::CassandraTx;

/// Requests waiting for their responses before the oldest goes out
/// unanswered (a client may have up to 32768 streams open; drivers use a
/// few hundred).
const MAX_PENDING: usize = 1024;

/// Prepared statements a connection remembers (id -> text), for naming
/// EXECUTEs; past this it starts over.
const MAX_PREPARED: usize = 64;

/// Largest frame body believed (2.5: a frame is limited to 256 MB).
const MAX_BODY: u64 = 256 << 20;

/// The largest decompression buffer kept between bodies.
const MAX_KEPT_SCRATCH: usize = 4096;

/// The frame header's length (v3 and later).
const HEADER: usize = 9;

/// This protocol's content probe (see [`crate::detect`]): a client's first
/// frame, an OPTIONS (empty body) or a STARTUP whose string map names
/// `CQL_VERSION` (4.1.1: mandatory), of version 3 to 5.
pub fn probe(dir: Dir, data: &[u8]) -> crate::detect::Probe {
    crate::detect::Probe::certain_if(dir == Dir::ToServer && is_first_request(data))
}

fn is_first_request(b: &[u8]) -> bool {
    let [v @ 3..=5, _flags, _, _, op, l0, l1, l2, l3, body @ ..] = b else { return false };
    let _ = v;
    let len = u32::from_be_bytes([*l0, *l1, *l2, *l3]) as usize;
    match op {
        5 => len == 0,
        1 => (2..4096).contains(&len) && body.windows(11).take(len).any(|w| w == b"CQL_VERSION"),
        _ => false,
    }
}

/// A frame's length from its header (segments come apart elsewhere).
fn frame(b: &[u8]) -> Frame {
    if b.len() < HEADER {
        return match b.first() {
            None => Frame::Need,
            Some(v) if (3..=5).contains(&(v & 0x7f)) => Frame::Need,
            Some(_) => Frame::Bad,
        };
    }
    if !(3..=5).contains(&(b[0] & 0x7f)) || b[4] > 0x10 {
        return Frame::Bad;
    }
    let n = u64::from(u32::from_be_bytes([b[5], b[6], b[7], b[8]]));
    if n > MAX_BODY {
        return Frame::Bad;
    }
    Frame::Len(HEADER as u64 + n)
}

/// A v5 segment's length from its header (v5 spec, 2.2): 6 bytes, or 8
/// with compression; a payload of at most 128 KiB and a 4-byte CRC32.
fn segment(b: &[u8], compressed: bool) -> Frame {
    let h = if compressed { 8 } else { 6 };
    if b.len() < h {
        return Frame::Need;
    }
    let n = u64::from(u32::from_le_bytes([b[0], b[1], b[2], 0]) & 0x1ffff);
    Frame::Len(h as u64 + n + 4)
}

/// The opcodes (2.4).
fn op_name(op: u8) -> &'static str {
    match op {
        0x00 => "ERROR",
        0x01 => "STARTUP",
        0x02 => "READY",
        0x03 => "AUTHENTICATE",
        0x05 => "OPTIONS",
        0x06 => "SUPPORTED",
        0x07 => "QUERY",
        0x08 => "RESULT",
        0x09 => "PREPARE",
        0x0A => "EXECUTE",
        0x0B => "REGISTER",
        0x0C => "EVENT",
        0x0D => "BATCH",
        0x0E => "AUTH_CHALLENGE",
        0x0F => "AUTH_RESPONSE",
        0x10 => "AUTH_SUCCESS",
        _ => "UNKNOWN",
    }
}

/// Consistency levels (3, [consistency]).
fn consistency(c: u16) -> &'static str {
    match c {
        0 => "ANY",
        1 => "ONE",
        2 => "TWO",
        3 => "THREE",
        4 => "QUORUM",
        5 => "ALL",
        6 => "LOCAL_QUORUM",
        7 => "EACH_QUORUM",
        8 => "SERIAL",
        9 => "LOCAL_SERIAL",
        10 => "LOCAL_ONE",
        _ => "UNKNOWN",
    }
}

/// Error codes (9; v5 adds CDC_write_failure and CAS_write_unknown).
fn error_name(code: u32) -> &'static str {
    match code {
        0x0000 => "Server_error",
        0x000A => "Protocol_error",
        0x0100 => "Bad_credentials",
        0x1000 => "Unavailable",
        0x1001 => "Overloaded",
        0x1002 => "Is_bootstrapping",
        0x1003 => "Truncate_error",
        0x1100 => "Write_timeout",
        0x1200 => "Read_timeout",
        0x1300 => "Read_failure",
        0x1400 => "Function_failure",
        0x1500 => "Write_failure",
        0x1600 => "CDC_write_failure",
        0x1700 => "CAS_write_unknown",
        0x2000 => "Syntax_error",
        0x2100 => "Unauthorized",
        0x2200 => "Invalid",
        0x2300 => "Config_error",
        0x2400 => "Already_exists",
        0x2500 => "Unprepared",
        _ => "unknown",
    }
}

/// The frame compression a connection's STARTUP chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Algo {
    Lz4,
    Snappy,
}

/// Reading a body's notations (3).
struct B<'a>(Rd<'a>);

impl<'a> B<'a> {
    fn string(&mut self) -> Option<&'a [u8]> {
        let n = self.0.u16()?;
        self.0.bytes(usize::from(n))
    }

    fn long_string(&mut self) -> Option<&'a [u8]> {
        let n = self.0.u32()?;
        self.0.bytes(n as usize)
    }

    fn short_bytes(&mut self) -> Option<&'a [u8]> {
        self.string()
    }

    /// [bytes] / [value]: skipped; false when cut.
    fn skip_bytes(&mut self) -> Option<()> {
        let n = self.0.u32()? as i32;
        if n > 0 {
            self.0.skip(n as usize).then_some(())?;
        }
        Some(())
    }

    fn string_list_len(&mut self) -> Option<u16> {
        let n = self.0.u16()?;
        for _ in 0..n {
            self.string()?;
        }
        Some(n)
    }

    /// A column type ([option], 4.2.5.2), skipped with what it nests.
    fn skip_type(&mut self, depth: u8) -> Option<()> {
        if depth > 16 {
            return None;
        }
        match self.0.u16()? {
            0x0000 => {
                self.string()?;
            }
            0x0020 | 0x0022 => self.skip_type(depth + 1)?,
            0x0021 => {
                self.skip_type(depth + 1)?;
                self.skip_type(depth + 1)?;
            }
            0x0030 => {
                self.string()?;
                self.string()?;
                for _ in 0..self.0.u16()? {
                    self.string()?;
                    self.skip_type(depth + 1)?;
                }
            }
            0x0031 => {
                for _ in 0..self.0.u16()? {
                    self.skip_type(depth + 1)?;
                }
            }
            _ => {}
        }
        Some(())
    }
}

struct Pending {
    stream: u16,
    req: Span,
    tx: CassandraTx,
    /// A PREPARE's statement, kept to name the id its RESULT gives.
    prepared: Option<(String, String)>,
}

/// One direction's framing.
#[derive(Default)]
struct Side {
    frames: Framer,
    /// v5 segments around the frames (after the STARTUP's answer).
    segments: Option<Framer>,
}

/// Parses one Cassandra connection.
pub struct CassandraParser {
    cfg: ParseConfig,
    max_head: usize,
    sides: [Side; 2],
    pending: Vec<Pending>,
    /// Prepared id -> (statement as recorded, fingerprint).
    prepared: Vec<(Vec<u8>, String, String)>,
    /// The compression the STARTUP named, and the version it used.
    algo: Option<Algo>,
    startup_version: u8,
    /// Decompressed bodies, reused.
    scratch: Vec<u8>,
    /// v5 segment payloads, reused.
    seg_scratch: Vec<u8>,
    stats: ParseStats,
}

fn di(dir: Dir) -> usize {
    match dir {
        Dir::ToServer => 0,
        Dir::ToClient => 1,
    }
}

fn text(b: &[u8], max: usize) -> String {
    crate::frames::text(b, max)
}

impl CassandraParser {
    pub fn new(cfg: &ParseConfig) -> Self {
        CassandraParser {
            cfg: cfg.clone(),
            max_head: cfg.max_header_bytes.max(64),
            sides: Default::default(),
            pending: Vec::new(),
            prepared: Vec::new(),
            algo: None,
            startup_version: 0,
            scratch: Vec::new(),
            seg_scratch: Vec::new(),
            stats: ParseStats::default(),
        }
    }

    /// The body of a frame whose head is `head` (header included), through
    /// `scratch` when it is compressed; `None` when it cannot be read.
    fn body<'s>(head: &'s [u8], algo: Option<Algo>, max: usize, scratch: &'s mut Vec<u8>, malformed: &mut u64) -> Option<&'s [u8]> {
        let body = &head[HEADER.min(head.len())..];
        if head.get(1).is_none_or(|f| f & 0x01 == 0) {
            return Some(body);
        }
        scratch.clear();
        let ok = match algo? {
            Algo::Lz4 => body.get(4..).and_then(|b| decompress::lz4(b, scratch, max)),
            Algo::Snappy => decompress::snappy(body, scratch, max),
        };
        if ok.is_none() {
            *malformed += 1;
            return None;
        }
        Some(scratch)
    }

    /// Keeps the decompression buffer for the next body unless one large
    /// body grew it: an idle connection holds no large buffer.
    fn keep_scratch(&mut self, scratch: Vec<u8>) {
        if scratch.capacity() <= MAX_KEPT_SCRATCH {
            self.scratch = scratch;
        }
    }

    /// Heap bytes this connection's parser holds beyond its own size
    /// (buffers, waiting requests, remembered statements): what an open
    /// connection costs (`memory_per_connection` below measures it).
    pub fn held_bytes(&self) -> usize {
        let pending: usize = self.pending.iter().map(|p| p.tx.query.as_ref().map_or(0, String::capacity) + p.tx.fingerprint.as_ref().map_or(0, String::capacity)).sum();
        let prepared: usize = self.prepared.iter().map(|(id, t, fp)| id.capacity() + t.capacity() + fp.capacity()).sum();
        self.pending.capacity() * std::mem::size_of::<Pending>()
            + pending
            + self.prepared.capacity() * std::mem::size_of::<(Vec<u8>, String, String)>()
            + prepared
            + self.scratch.capacity()
            + self.seg_scratch.capacity()
            + self.sides.iter().map(|s| s.frames.held_bytes() + s.segments.as_ref().map_or(0, Framer::held_bytes)).sum::<usize>()
    }

    /// What the statement `raw` records: (text, fingerprint).
    fn statement(&self, raw: &[u8]) -> (String, String) {
        let raw = String::from_utf8_lossy(raw);
        let (text, _, fp) = fingerprint::recorded_sql(&raw, Dialect::Postgres, &self.cfg);
        (text, fp)
    }

    fn compression(&self, flags: u8) -> Option<&'static str> {
        // v5: the segments are compressed, the frame flag is ignored (v5
        // spec, 2.4.1.2).
        if self.algo == Some(Algo::Lz4) && self.sides.iter().any(|s| s.segments.is_some()) {
            return Some("lz4");
        }
        (flags & 0x01 != 0).then_some(match self.algo {
            Some(Algo::Lz4) => "lz4",
            Some(Algo::Snappy) => "snappy",
            None => "yes",
        })
    }

    fn request(&mut self, m: Msg<'_>, out: &mut dyn TxSink) {
        let h = m.head;
        if h.len() < HEADER {
            self.stats.malformed += 1;
            return;
        }
        let (version, flags, stream, op) = (h[0] & 0x7f, h[1], u16::from_be_bytes([h[2], h[3]]), h[4]);
        let mut tx = CassandraTx { op: op_name(op), version, stream: Some(stream), compression: self.compression(flags), ..Default::default() };
        let mut prepared = None;
        let mut scratch = std::mem::take(&mut self.scratch);
        if let Some(body) = Self::body(h, self.algo, self.max_head, &mut scratch, &mut self.stats.malformed) {
            let mut b = B(Rd::new(body));
            if flags & 0x04 != 0 {
                // A custom payload ([bytes map]) comes first in a request.
                let _ = (|| -> Option<()> {
                    for _ in 0..b.0.u16()? {
                        b.string()?;
                        b.skip_bytes()?;
                    }
                    Some(())
                })();
            }
            let _ = self.request_body(op, version, &mut b, &mut tx, &mut prepared);
        }
        self.keep_scratch(scratch);
        if tx.fingerprint.is_none() && !matches!(op, 0x07 | 0x09 | 0x0A | 0x0D) {
            tx.fingerprint = Some(fingerprint::command_group(&tx.op.to_ascii_lowercase()));
        }
        let req = Span { first_ns: m.first_ns, last_ns: m.last_ns, bytes: m.len };
        if self.pending.len() >= MAX_PENDING {
            let old = self.pending.remove(0);
            out.push(unanswered(old));
        }
        self.pending.push(Pending { stream, req, tx, prepared });
    }

    fn request_body(&mut self, op: u8, version: u8, b: &mut B<'_>, tx: &mut CassandraTx, prepared: &mut Option<(String, String)>) -> Option<()> {
        match op {
            0x01 => {
                // STARTUP: a [string map]; COMPRESSION names the algorithm.
                self.startup_version = version;
                for _ in 0..b.0.u16()? {
                    let (k, v) = (b.string()?, b.string()?);
                    if k == b"COMPRESSION" {
                        self.algo = match v {
                            b"lz4" => Some(Algo::Lz4),
                            b"snappy" => Some(Algo::Snappy),
                            _ => None,
                        };
                    }
                }
            }
            0x07 | 0x09 => {
                let q = b.long_string()?;
                let (t, fp) = self.statement(q);
                if op == 0x09 {
                    *prepared = Some((t.clone(), fp.clone()));
                }
                tx.query = Some(t);
                tx.fingerprint = Some(fp);
                if op == 0x07 {
                    tx.consistency = Some(consistency(b.0.u16()?));
                }
            }
            0x0A => {
                let id = b.short_bytes()?;
                if let Some((_, t, fp)) = self.prepared.iter().find(|p| p.0 == id) {
                    tx.query = Some(t.clone());
                    tx.fingerprint = Some(fp.clone());
                }
                if version >= 5 {
                    b.short_bytes()?;
                }
                tx.consistency = Some(consistency(b.0.u16()?));
            }
            0x0D => {
                tx.batch_type = Some(match b.0.u8()? {
                    0 => "logged",
                    1 => "unlogged",
                    2 => "counter",
                    _ => "unknown",
                });
                let n = b.0.u16()?;
                tx.batch_statements = Some(u32::from(n));
                for i in 0..n {
                    match b.0.u8()? {
                        0 => {
                            let q = b.long_string()?;
                            if i == 0 {
                                let (t, fp) = self.statement(q);
                                tx.query = Some(t);
                                tx.fingerprint = Some(fp);
                            }
                        }
                        _ => {
                            let id = b.short_bytes()?;
                            if i == 0 {
                                if let Some((_, t, fp)) = self.prepared.iter().find(|p| p.0 == id) {
                                    tx.query = Some(t.clone());
                                    tx.fingerprint = Some(fp.clone());
                                }
                            }
                        }
                    }
                    // Values (names only with flag 0x40, which the spec
                    // says does not work: not read).
                    for _ in 0..b.0.u16()? {
                        b.skip_bytes()?;
                    }
                }
                tx.consistency = Some(consistency(b.0.u16()?));
            }
            _ => {}
        }
        Some(())
    }

    fn response(&mut self, m: Msg<'_>, out: &mut dyn TxSink) {
        let h = m.head;
        if h.len() < HEADER {
            self.stats.malformed += 1;
            return;
        }
        let (version, flags, stream, op) = (h[0] & 0x7f, h[1], i16::from_be_bytes([h[2], h[3]]), h[4]);
        let resp = Span { first_ns: m.first_ns, last_ns: m.last_ns, bytes: m.len };
        let (mut p, paired) = if stream < 0 {
            let tx = CassandraTx { op: op_name(op), version, ..Default::default() };
            (Pending { stream: 0, req: resp, tx, prepared: None }, None)
        } else {
            match self.pending.iter().position(|p| p.stream == stream as u16) {
                Some(at) => (self.pending.remove(at), Some(true)),
                None => {
                    self.stats.malformed += 1;
                    let tx = CassandraTx { op: op_name(op), version, stream: Some(stream as u16), ..Default::default() };
                    (Pending { stream: stream as u16, req: resp, tx, prepared: None }, Some(false))
                }
            }
        };
        p.tx.response_op = Some(op_name(op));
        if p.tx.compression.is_none() {
            p.tx.compression = self.compression(flags);
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut error = false;
        if let Some(body) = Self::body(h, self.algo, self.max_head, &mut scratch, &mut self.stats.malformed) {
            let mut b = B(Rd::new(body));
            let _ = self.response_body(version, flags, op, &mut b, &mut p);
            error = op == 0x00;
        } else if op == 0x00 {
            error = true;
        }
        self.keep_scratch(scratch);
        // v5: after the STARTUP's answer, frames travel in segments.
        if self.startup_version >= 5 && matches!(op, 0x02 | 0x03) && p.tx.op == "STARTUP" {
            for s in &mut self.sides {
                s.segments = Some(Framer::default());
            }
        }
        let status = if error { TxStatus::Error } else { TxStatus::Ok };
        out.push(match paired {
            Some(true) => Transaction { request: Some(p.req), response: Some(resp), status, detail: Detail::Cassandra(p.tx) },
            Some(false) => Transaction { request: None, response: Some(resp), status: TxStatus::NoRequest, detail: Detail::Cassandra(p.tx) },
            // A server push: its own transaction.
            None => Transaction { request: None, response: Some(resp), status, detail: Detail::Cassandra(p.tx) },
        });
    }

    fn response_body(&mut self, version: u8, flags: u8, op: u8, b: &mut B<'_>, p: &mut Pending) -> Option<()> {
        let max = self.cfg.max_text_bytes;
        let tx = &mut p.tx;
        if flags & 0x02 != 0 {
            b.0.skip(16).then_some(())?;
        }
        if flags & 0x08 != 0 {
            tx.warnings = Some(u32::from(b.string_list_len()?));
        }
        if flags & 0x04 != 0 {
            for _ in 0..b.0.u16()? {
                b.string()?;
                b.skip_bytes()?;
            }
        }
        match op {
            0x00 => {
                let code = b.0.u32()?;
                tx.error_code = Some(code);
                tx.error = Some(error_name(code));
                tx.error_message = Some(text(b.string()?, max));
            }
            0x08 => match b.0.u32()? {
                1 => tx.result = Some("void"),
                2 => {
                    tx.result = Some("rows");
                    let mflags = b.0.u32()?;
                    let ncols = b.0.u32()?;
                    tx.columns = Some(ncols);
                    if mflags & 0x02 != 0 {
                        b.skip_bytes()?;
                    }
                    if version >= 5 && mflags & 0x08 != 0 {
                        b.short_bytes()?;
                    }
                    if mflags & 0x04 == 0 {
                        let global = mflags & 0x01 != 0;
                        if global {
                            tx.keyspace = Some(text(b.string()?, max));
                            tx.table = Some(text(b.string()?, max));
                        }
                        for i in 0..ncols {
                            if !global {
                                let (ks, t) = (b.string()?, b.string()?);
                                if i == 0 {
                                    tx.keyspace = Some(text(ks, max));
                                    tx.table = Some(text(t, max));
                                }
                            }
                            b.string()?;
                            b.skip_type(0)?;
                        }
                    }
                    tx.rows = Some(u64::from(b.0.u32()?));
                }
                3 => {
                    tx.result = Some("set_keyspace");
                    tx.keyspace = Some(text(b.string()?, max));
                }
                4 => {
                    tx.result = Some("prepared");
                    let id = b.short_bytes()?;
                    if let Some((t, fp)) = p.prepared.take() {
                        if self.prepared.len() >= MAX_PREPARED {
                            self.prepared.clear();
                        }
                        self.prepared.retain(|e| e.0 != id);
                        self.prepared.push((id.to_vec(), t, fp));
                    }
                }
                5 => {
                    tx.result = Some("schema_change");
                    schema_change(b, tx, max)?;
                }
                _ => tx.result = Some("unknown"),
            },
            0x0C => {
                let kind = b.string()?;
                let change = b.string()?;
                let mut c = text(kind, max);
                c.push(' ');
                c.push_str(&String::from_utf8_lossy(change));
                if kind == b"SCHEMA_CHANGE" {
                    let target = b.string()?;
                    c.push(' ');
                    c.push_str(&String::from_utf8_lossy(target));
                    tx.keyspace = Some(text(b.string()?, max));
                    if target != b"KEYSPACE" {
                        tx.table = Some(text(b.string()?, max));
                    }
                }
                tx.change = Some(c);
            }
            _ => {}
        }
        Some(())
    }

    /// Frames of one direction out of `data` (segment payloads, or the
    /// stream itself before v5's switch).
    fn frames(&mut self, dir: Dir, ts_ns: i64, data: &[u8], out: &mut dyn TxSink) -> u64 {
        let mut framer = std::mem::take(&mut self.sides[di(dir)].frames);
        let lost = framer.feed(data, ts_ns, self.max_head, frame, |m| match dir {
            Dir::ToServer => self.request(m, out),
            Dir::ToClient => self.response(m, out),
        });
        framer.shrink(MAX_KEPT_SCRATCH);
        self.sides[di(dir)].frames = framer;
        lost
    }
}

fn schema_change(b: &mut B<'_>, tx: &mut CassandraTx, max: usize) -> Option<()> {
    let change = b.string()?;
    let target = b.string()?;
    let mut c = text(change, max);
    c.push(' ');
    c.push_str(&String::from_utf8_lossy(target));
    tx.change = Some(c);
    tx.keyspace = Some(text(b.string()?, max));
    if target != b"KEYSPACE" {
        tx.table = Some(text(b.string()?, max));
    }
    Some(())
}

fn unanswered(p: Pending) -> Transaction {
    Transaction { request: Some(p.req), response: None, status: TxStatus::NoResponse, detail: Detail::Cassandra(p.tx) }
}

impl StreamParser for CassandraParser {
    fn data(&mut self, dir: Dir, ts_ns: i64, data: &[u8], out: &mut dyn TxSink) {
        let Some(mut segs) = self.sides[di(dir)].segments.take() else {
            let lost = self.frames(dir, ts_ns, data, out);
            self.stats.unparsed_bytes += lost;
            return;
        };
        let compressed = self.algo == Some(Algo::Lz4);
        let h = if compressed { 8 } else { 6 };
        let mut payloads = std::mem::take(&mut self.seg_scratch);
        payloads.clear();
        let mut bad = 0u64;
        // A segment is at most 128 KiB and its header and CRC: whole.
        let lost = segs.feed(data, ts_ns, (1 << 17) + 12, |b| segment(b, compressed), |m| {
            let Some(payload) = m.head.get(h..m.head.len().saturating_sub(4)) else { return };
            // The header's CRC24 and the payload's CRC32 (v5 spec, 2.1 and
            // 2.2; Cassandra's FrameDecoderCrc/FrameDecoderLZ4 and Crc.java):
            // a mismatch is counted and the payload still read (a passive
            // probe reports what went by; the server drops such a segment).
            let crc24 = u32::from_le_bytes([m.head[h - 3], m.head[h - 2], m.head[h - 1], 0]);
            let n = m.head.len();
            let crc32 = u32::from_le_bytes([m.head[n - 4], m.head[n - 3], m.head[n - 2], m.head[n - 1]]);
            if crate::checksum::cassandra_crc24(&m.head[..h - 3]) != crc24 || crate::checksum::cassandra_crc32(payload) != crc32 {
                bad += 1;
            }
            if compressed {
                let raw = u64::from_le_bytes([m.head[0], m.head[1], m.head[2], m.head[3], m.head[4], 0, 0, 0]);
                let ulen = ((raw >> 17) & 0x1ffff) as usize;
                if ulen == 0 {
                    // Not compressed (v5 spec, 2.2: uncompressed length 0).
                    payloads.extend_from_slice(payload);
                } else if decompress::lz4(payload, &mut payloads, ulen).is_none() {
                    bad += 1;
                }
            } else {
                payloads.extend_from_slice(payload);
            }
        });
        self.stats.malformed += bad;
        self.stats.unparsed_bytes += lost;
        segs.shrink(MAX_KEPT_SCRATCH);
        self.sides[di(dir)].segments = Some(segs);
        if !payloads.is_empty() {
            let lost = self.frames(dir, ts_ns, &payloads, out);
            self.stats.unparsed_bytes += lost;
        }
        if payloads.capacity() <= 1 << 18 {
            self.seg_scratch = payloads;
        }
    }

    fn gap(&mut self, dir: Dir, ts_ns: i64, len: u64, out: &mut dyn TxSink) {
        self.stats.gaps += 1;
        let side = &mut self.sides[di(dir)];
        let held = match &mut side.segments {
            // Inside a v5 segment the frames it carried are lost with it.
            Some(s) => s.gap(len, ts_ns, |_| {}),
            None => {
                let mut framer = std::mem::take(&mut side.frames);
                let held = framer.gap(len, ts_ns, |m| match dir {
                    Dir::ToServer => self.request(m, out),
                    Dir::ToClient => self.response(m, out),
                });
                self.sides[di(dir)].frames = framer;
                held
            }
        };
        if !held {
            self.stats.unparsed_bytes += len;
            if dir == Dir::ToClient {
                out.extend(self.pending.drain(..).map(unanswered));
            }
        }
    }

    fn expire(&mut self, now_ns: i64, out: &mut dyn TxSink) {
        let timeout = self.cfg.transaction_timeout_ns;
        let old = |p: &Pending| now_ns - p.req.last_ns > timeout;
        out.extend(self.pending.extract_if(.., |p| old(p)).map(unanswered));
    }

    fn finish(&mut self, _ts_ns: i64, out: &mut dyn TxSink) {
        out.extend(self.pending.drain(..).map(unanswered));
    }

    fn gave_up(&self) -> bool {
        self.sides.iter().all(|s| s.frames.lost() || s.segments.as_ref().is_some_and(Framer::lost))
    }

    fn stats(&self) -> ParseStats {
        self.stats
    }
}

#[cfg(feature = "fuzzing")]
pub fn fuzz(data: &[u8]) {
    let mut p = CassandraParser::new(&ParseConfig { max_header_bytes: 64, max_text_bytes: 8, transaction_timeout_ns: 3, ..ParseConfig::default() });
    crate::fuzz_stream(&mut p, data);
}

#[cfg(test)]
mod tests;
