//! Kafka's wire protocol (the protocol guide, kafka.apache.org/protocol,
//! and the message definitions in apache/kafka's
//! `clients/src/main/resources/common/message/*.json`, which name every
//! field with the versions it is in and the versions that are flexible):
//! one transaction per request and its response.
//!
//! Every message is a 32-bit size and that many bytes ([`crate::frames`]
//! cuts them). A request header (`RequestHeader.json`) is the API key, its
//! version, a correlation id and the client id (a nullable string, also in
//! the flexible header v2, which adds tagged fields); a response header
//! (`ResponseHeader.json`) is the correlation id (v1, for flexible versions
//! but ApiVersions' responses, adds tagged fields). Responses are paired
//! with the requests remembered on the connection by correlation id (the
//! broker may answer out of order across its request handlers only for
//! different connections; the id is what the client matches by). A Produce
//! with acks 0 gets no response: it is complete when sent.
//!
//! Bodies are read for Produce, Fetch, ListOffsets, Metadata, OffsetCommit,
//! OffsetFetch, FindCoordinator, JoinGroup, Heartbeat, SyncGroup and
//! ApiVersions (the fields each record names: topics, partitions, group,
//! acks, max wait, throttle time, error codes, record counts); other APIs
//! are named with their version and sizes. Flexible versions (`flexibleVersions`
//! in the definitions) use compact strings and arrays (unsigned varint
//! length + 1) and tagged fields after every structure. Record counts come
//! from the record batch headers (`DefaultRecordBatch`: `recordsCount` at
//! byte 57 of a magic-2 batch; a magic 0/1 message set counts its
//! messages), read within the first `max_header_bytes` of a message.

use crate::frames::{Frame, Framer, Msg, Rd};
use crate::{Detail, Dir, ParseConfig, ParseStats, Span, StreamParser, Transaction, TxSink, TxStatus};

pub use wirelog_record::kafka::KafkaTx;

/// Requests waiting for their responses before the oldest goes out
/// unanswered.
const MAX_PENDING: usize = 1024;

/// Largest message believed (Kafka's default `socket.request.max.bytes` is
/// 100 MiB): a larger size is not Kafka's framing.
const MAX_MESSAGE: u64 = 1 << 30;

/// This protocol's content probe (see [`crate::detect`]): none, its
/// connections are recognised by port; a 32-bit size and two small numbers
/// are what many binary protocols start with.
pub fn probe(_dir: Dir, _data: &[u8]) -> crate::detect::Probe {
    crate::detect::Probe::NotForUs
}

fn frame(b: &[u8]) -> Frame {
    if b.len() < 4 {
        return Frame::Need;
    }
    let n = u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    if n == 0 || n > MAX_MESSAGE {
        return Frame::Bad;
    }
    Frame::Len(4 + n)
}

/// API keys: name, and the first flexible version (`flexibleVersions`,
/// `u16::MAX`: none) of the APIs whose bodies are read.
fn api(key: u16) -> (&'static str, u16) {
    const NONE: u16 = u16::MAX;
    match key {
        0 => ("produce", 9),
        1 => ("fetch", 12),
        2 => ("list_offsets", 6),
        3 => ("metadata", 9),
        8 => ("offset_commit", 8),
        9 => ("offset_fetch", 6),
        10 => ("find_coordinator", 3),
        11 => ("join_group", 6),
        12 => ("heartbeat", 4),
        13 => ("leave_group", 4),
        14 => ("sync_group", 4),
        15 => ("describe_groups", 5),
        16 => ("list_groups", 3),
        17 => ("sasl_handshake", NONE),
        18 => ("api_versions", 3),
        19 => ("create_topics", 5),
        20 => ("delete_topics", 4),
        21 => ("delete_records", 2),
        22 => ("init_producer_id", 2),
        23 => ("offset_for_leader_epoch", 4),
        24 => ("add_partitions_to_txn", 3),
        25 => ("add_offsets_to_txn", 3),
        26 => ("end_txn", 3),
        28 => ("txn_offset_commit", 3),
        29 => ("describe_acls", 2),
        30 => ("create_acls", 2),
        31 => ("delete_acls", 2),
        32 => ("describe_configs", 4),
        33 => ("alter_configs", 2),
        36 => ("sasl_authenticate", 2),
        37 => ("create_partitions", 2),
        42 => ("delete_groups", 2),
        44 => ("incremental_alter_configs", 1),
        47 => ("offset_delete", NONE),
        60 => ("describe_cluster", 0),
        68 => ("consumer_group_heartbeat", 0),
        69 => ("consumer_group_describe", 0),
        _ => ("", NONE),
    }
}

/// Error codes by name (the protocol guide's table), the common ones.
fn error_name(code: i16) -> Option<&'static str> {
    Some(match code {
        -1 => "UNKNOWN_SERVER_ERROR",
        1 => "OFFSET_OUT_OF_RANGE",
        2 => "CORRUPT_MESSAGE",
        3 => "UNKNOWN_TOPIC_OR_PARTITION",
        4 => "INVALID_FETCH_SIZE",
        5 => "LEADER_NOT_AVAILABLE",
        6 => "NOT_LEADER_OR_FOLLOWER",
        7 => "REQUEST_TIMED_OUT",
        10 => "MESSAGE_TOO_LARGE",
        14 => "COORDINATOR_LOAD_IN_PROGRESS",
        15 => "COORDINATOR_NOT_AVAILABLE",
        16 => "NOT_COORDINATOR",
        17 => "INVALID_TOPIC_EXCEPTION",
        22 => "ILLEGAL_GENERATION",
        25 => "UNKNOWN_MEMBER_ID",
        27 => "REBALANCE_IN_PROGRESS",
        29 => "TOPIC_AUTHORIZATION_FAILED",
        30 => "GROUP_AUTHORIZATION_FAILED",
        35 => "UNSUPPORTED_VERSION",
        36 => "TOPIC_ALREADY_EXISTS",
        37 => "INVALID_PARTITIONS",
        41 => "NOT_CONTROLLER",
        42 => "INVALID_REQUEST",
        58 => "SASL_AUTHENTICATION_FAILED",
        79 => "MEMBER_ID_REQUIRED",
        _ => return None,
    })
}

/// A reader of one message's fields at its version.
struct K<'a> {
    r: Rd<'a>,
    flex: bool,
}

/// An unsigned varint (the protocol guide's `UNSIGNED_VARINT`).
fn uvarint(r: &mut Rd<'_>) -> Option<u32> {
    let mut v = 0u32;
    for i in 0..5 {
        let b = r.u8()?;
        v |= u32::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

impl<'a> K<'a> {
    fn i16(&mut self) -> Option<i16> {
        self.r.u16().map(|v| v as i16)
    }

    fn i32(&mut self) -> Option<i32> {
        self.r.u32().map(|v| v as i32)
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        self.r.skip(n).then_some(())
    }

    /// A (nullable) string's bytes; `Some(None)` for null.
    fn string(&mut self) -> Option<Option<&'a [u8]>> {
        let n = if self.flex {
            i64::from(uvarint(&mut self.r)?) - 1
        } else {
            i64::from(self.i16()?)
        };
        if n < 0 {
            return Some(None);
        }
        Some(Some(self.r.bytes(n as usize)?))
    }

    /// An array's length (0 for null).
    fn array(&mut self) -> Option<u32> {
        let n = if self.flex { i64::from(uvarint(&mut self.r)?) - 1 } else { i64::from(self.i32()?) };
        Some(n.max(0) as u32)
    }

    /// Records (nullable bytes): their length, 0 for null.
    fn records_len(&mut self) -> Option<usize> {
        let n = if self.flex { i64::from(uvarint(&mut self.r)?) - 1 } else { i64::from(self.i32()?) };
        Some(n.max(0) as usize)
    }

    /// Tagged fields, after a structure of a flexible version.
    fn tags(&mut self) -> Option<()> {
        if self.flex {
            for _ in 0..uvarint(&mut self.r)? {
                uvarint(&mut self.r)?;
                let n = uvarint(&mut self.r)? as usize;
                self.skip(n)?;
            }
        }
        Some(())
    }
}

/// Record count of the record batches in `b` (their bytes may be cut).
fn count_records(b: &[u8]) -> u64 {
    let mut r = Rd::new(b);
    let mut n = 0u64;
    while r.rest().len() >= 17 {
        let mut h = r;
        let (Some(_offset), Some(len)) = (h.u64(), h.u32()) else { break };
        let magic = h.rest().get(4).copied();
        if magic == Some(2) {
            // recordsCount at byte 57 of the batch.
            match b.get(r.pos() + 57..r.pos() + 61) {
                Some(c) => n += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]])),
                None => break,
            }
        } else {
            // A message set: one message per entry.
            n += 1;
        }
        if !r.skip(12 + len as usize) {
            break;
        }
    }
    n
}

struct Pending {
    req: Span,
    tx: KafkaTx,
    flex: bool,
}

/// Parses one Kafka connection.
pub struct KafkaParser {
    max_text: usize,
    max_head: usize,
    timeout_ns: i64,
    framers: [Framer; 2],
    pending: Vec<Pending>,
    stats: ParseStats,
}

fn text(b: &[u8], max: usize) -> String {
    crate::frames::text(b, max)
}

impl KafkaParser {
    pub fn new(cfg: &ParseConfig) -> Self {
        KafkaParser {
            max_text: cfg.max_text_bytes,
            max_head: cfg.max_header_bytes.max(64),
            timeout_ns: cfg.transaction_timeout_ns,
            framers: Default::default(),
            pending: Vec::new(),
            stats: ParseStats::default(),
        }
    }

    fn request(&mut self, m: Msg<'_>, out: &mut dyn TxSink) {
        let mut r = Rd::new(&m.head[4..]);
        let (Some(key), Some(version), Some(corr)) = (r.u16(), r.u16(), r.u32()) else {
            self.stats.malformed += 1;
            return;
        };
        let (name, flex_from) = api(key);
        let flex = version >= flex_from;
        let mut k = K { r, flex: false };
        let client_id = k.string().flatten().map(|b| text(b, self.max_text));
        k.flex = flex;
        let mut tx = KafkaTx { api: if name.is_empty() { "unknown" } else { name }, api_key: key, api_version: version, correlation_id: corr, client_id, ..Default::default() };
        if k.tags().is_some() {
            let _ = self.request_body(&mut k, &mut tx);
        }
        let req = Span { first_ns: m.first_ns, last_ns: m.last_ns, bytes: m.len };
        if key == 0 && tx.acks == Some("0") {
            // No response comes to a Produce with acks 0.
            out.push(Transaction { request: Some(req), response: None, status: TxStatus::Ok, detail: Detail::Kafka(tx) });
            return;
        }
        if self.pending.len() >= MAX_PENDING {
            let old = self.pending.remove(0);
            out.push(unanswered(old));
        }
        self.pending.push(Pending { req, tx, flex });
    }

    /// The fields of a request's body; `None` where it is cut.
    fn request_body(&self, k: &mut K<'_>, tx: &mut KafkaTx) -> Option<()> {
        let v = tx.api_version;
        let max = self.max_text;
        match tx.api_key {
            0 => {
                if v >= 3 {
                    k.string()?;
                }
                tx.acks = Some(match k.i16()? {
                    -1 => "-1",
                    0 => "0",
                    1 => "1",
                    _ => "other",
                });
                k.skip(4)?;
                let topics = k.array()?;
                tx.topics = Some(topics);
                let (mut parts, mut recs, mut bytes) = (0, 0, 0);
                for t in 0..topics {
                    if v >= 13 {
                        k.skip(16)?;
                    } else if let Some(name) = k.string()?.filter(|_| t == 0) {
                        tx.topic = Some(text(name, max));
                    }
                    let n = k.array()?;
                    for _ in 0..n {
                        parts += 1;
                        tx.partitions = Some(parts);
                        k.skip(4)?;
                        let len = k.records_len()?;
                        bytes += len as u64;
                        tx.record_bytes = Some(bytes);
                        let avail = k.r.rest();
                        recs += count_records(&avail[..len.min(avail.len())]);
                        tx.records = Some(recs);
                        k.skip(len)?;
                        k.tags()?;
                    }
                    k.tags()?;
                }
            }
            1 => {
                if v < 15 {
                    k.skip(4)?;
                }
                tx.max_wait_ms = Some(k.i32()? as u32);
                k.skip(4)?;
                if v >= 3 {
                    k.skip(4)?;
                }
                if v >= 4 {
                    k.skip(1)?;
                }
                if v >= 7 {
                    k.skip(8)?;
                }
                let topics = k.array()?;
                tx.topics = Some(topics);
                let mut parts = 0;
                let entry = 4 + if v >= 9 { 4 } else { 0 } + 8 + if v >= 12 { 4 } else { 0 } + if v >= 5 { 8 } else { 0 } + 4;
                for t in 0..topics {
                    if v >= 13 {
                        k.skip(16)?;
                    } else if let Some(name) = k.string()?.filter(|_| t == 0) {
                        tx.topic = Some(text(name, max));
                    }
                    let n = k.array()?;
                    for _ in 0..n {
                        parts += 1;
                        tx.partitions = Some(parts);
                        k.skip(entry)?;
                        k.tags()?;
                    }
                    k.tags()?;
                }
            }
            2 => {
                k.skip(4)?;
                if v >= 2 {
                    k.skip(1)?;
                }
                let topics = k.array()?;
                tx.topics = Some(topics);
                let entry = 4 + if v >= 4 { 4 } else { 0 } + 8 + if v == 0 { 4 } else { 0 };
                let mut parts = 0;
                for t in 0..topics {
                    if let Some(name) = k.string()?.filter(|_| t == 0) {
                        tx.topic = Some(text(name, max));
                    }
                    let n = k.array()?;
                    for _ in 0..n {
                        parts += 1;
                        tx.partitions = Some(parts);
                        k.skip(entry)?;
                        k.tags()?;
                    }
                    k.tags()?;
                }
            }
            3 => {
                // A null array: every topic.
                let topics = k.array()?;
                tx.topics = Some(topics);
                if topics > 0 {
                    if v >= 10 {
                        k.skip(16)?;
                    }
                    tx.topic = k.string()?.map(|b| text(b, max));
                }
            }
            8 | 11 | 12 | 14 => tx.group = k.string()?.map(|b| text(b, max)),
            9 if v < 8 => tx.group = k.string()?.map(|b| text(b, max)),
            9 if k.array()? > 0 => tx.group = k.string()?.map(|b| text(b, max)),
            10 if v < 4 => tx.group = k.string()?.map(|b| text(b, max)),
            10 => {
                k.skip(1)?;
                if k.array()? > 0 {
                    tx.group = k.string()?.map(|b| text(b, max));
                }
            }
            _ => {}
        }
        Some(())
    }

    fn response(&mut self, m: Msg<'_>, out: &mut dyn TxSink) {
        let mut r = Rd::new(&m.head[4..]);
        let Some(corr) = r.u32() else {
            self.stats.malformed += 1;
            return;
        };
        let resp = Span { first_ns: m.first_ns, last_ns: m.last_ns, bytes: m.len };
        let Some(at) = self.pending.iter().position(|p| p.tx.correlation_id == corr) else {
            self.stats.malformed += 1;
            let tx = KafkaTx { api: "unknown", correlation_id: corr, ..Default::default() };
            out.push(Transaction { request: None, response: Some(resp), status: TxStatus::NoRequest, detail: Detail::Kafka(tx) });
            return;
        };
        let mut p = self.pending.remove(at);
        // ApiVersions' response header stays v0 (ResponseHeader.json).
        let mut k = K { r, flex: p.flex && p.tx.api_key != 18 };
        let mut e = Errors::default();
        if k.tags().is_some() {
            k.flex = p.flex;
            let _ = self.response_body(&mut k, &mut p.tx, &mut e);
        }
        if e.count > 0 {
            p.tx.errors = Some(e.count);
            p.tx.error = e.first.map(|c| error_name(c).map_or_else(|| c.to_string(), String::from));
        } else {
            p.tx.errors = Some(0);
        }
        let status = if e.count > 0 { TxStatus::Error } else { TxStatus::Ok };
        out.push(Transaction { request: Some(p.req), response: Some(resp), status, detail: Detail::Kafka(p.tx) });
    }

    fn response_body(&self, k: &mut K<'_>, tx: &mut KafkaTx, e: &mut Errors) -> Option<()> {
        let v = tx.api_version;
        match tx.api_key {
            0 => {
                for _ in 0..k.array()? {
                    if v >= 13 {
                        k.skip(16)?;
                    } else {
                        k.string()?;
                    }
                    for _ in 0..k.array()? {
                        k.skip(4)?;
                        e.add(k.i16()?);
                        k.skip(8 + if v >= 2 { 8 } else { 0 } + if v >= 5 { 8 } else { 0 })?;
                        if v >= 8 {
                            for _ in 0..k.array()? {
                                k.skip(4)?;
                                k.string()?;
                                k.tags()?;
                            }
                            k.string()?;
                        }
                        k.tags()?;
                    }
                    k.tags()?;
                }
                if v >= 1 {
                    tx.throttle_ms = Some(k.i32()? as u32);
                }
            }
            1 => {
                if v >= 1 {
                    tx.throttle_ms = Some(k.i32()? as u32);
                }
                if v >= 7 {
                    e.add(k.i16()?);
                    k.skip(4)?;
                }
                let (mut recs, mut bytes) = (0, 0);
                for _ in 0..k.array()? {
                    if v >= 13 {
                        k.skip(16)?;
                    } else {
                        k.string()?;
                    }
                    for _ in 0..k.array()? {
                        k.skip(4)?;
                        e.add(k.i16()?);
                        k.skip(8 + if v >= 4 { 8 } else { 0 } + if v >= 5 { 8 } else { 0 })?;
                        if v >= 4 {
                            // Aborted transactions: producer id, first offset.
                            for _ in 0..k.array()? {
                                k.skip(16)?;
                                k.tags()?;
                            }
                        }
                        if v >= 11 {
                            k.skip(4)?;
                        }
                        let len = k.records_len()?;
                        bytes += len as u64;
                        tx.record_bytes = Some(bytes);
                        let avail = k.r.rest();
                        recs += count_records(&avail[..len.min(avail.len())]);
                        tx.records = Some(recs);
                        k.skip(len)?;
                        k.tags()?;
                    }
                    k.tags()?;
                }
            }
            2 => {
                if v >= 2 {
                    tx.throttle_ms = Some(k.i32()? as u32);
                }
                for _ in 0..k.array()? {
                    k.string()?;
                    for _ in 0..k.array()? {
                        k.skip(4)?;
                        e.add(k.i16()?);
                        if v == 0 {
                            let n = k.array()?;
                            k.skip(n as usize * 8)?;
                        } else {
                            k.skip(16 + if v >= 4 { 4 } else { 0 })?;
                        }
                        k.tags()?;
                    }
                    k.tags()?;
                }
            }
            3 => {
                if v >= 3 {
                    tx.throttle_ms = Some(k.i32()? as u32);
                }
                for _ in 0..k.array()? {
                    k.skip(4)?;
                    k.string()?;
                    k.skip(4)?;
                    if v >= 1 {
                        k.string()?;
                    }
                    k.tags()?;
                }
                if v >= 2 {
                    k.string()?;
                }
                if v >= 1 {
                    k.skip(4)?;
                }
                for _ in 0..k.array()? {
                    e.add(k.i16()?);
                    k.string()?;
                    if v >= 10 {
                        k.skip(16)?;
                    }
                    if v >= 1 {
                        k.skip(1)?;
                    }
                    for _ in 0..k.array()? {
                        e.add(k.i16()?);
                        k.skip(8 + if v >= 7 { 4 } else { 0 })?;
                        for _ in 0..if v >= 5 { 3 } else { 2 } {
                            let n = k.array()?;
                            k.skip(n as usize * 4)?;
                        }
                        k.tags()?;
                    }
                    if v >= 8 {
                        k.skip(4)?;
                    }
                    k.tags()?;
                }
            }
            8 => {
                if v >= 3 {
                    tx.throttle_ms = Some(k.i32()? as u32);
                }
                for _ in 0..k.array()? {
                    k.string()?;
                    for _ in 0..k.array()? {
                        k.skip(4)?;
                        e.add(k.i16()?);
                        k.tags()?;
                    }
                    k.tags()?;
                }
            }
            9 | 11 | 12 | 14 => {
                if v >= match tx.api_key {
                    9 => 3,
                    11 => 2,
                    _ => 1,
                } {
                    tx.throttle_ms = Some(k.i32()? as u32);
                }
                if tx.api_key != 9 {
                    e.add(k.i16()?);
                }
            }
            10 => {
                if v >= 1 {
                    tx.throttle_ms = Some(k.i32()? as u32);
                }
                if v < 4 {
                    e.add(k.i16()?);
                } else {
                    for _ in 0..k.array()? {
                        k.string()?;
                        k.skip(4)?;
                        k.string()?;
                        k.skip(4)?;
                        e.add(k.i16()?);
                        k.string()?;
                        k.tags()?;
                    }
                }
            }
            18 => {
                e.add(k.i16()?);
                let n = k.array()?;
                for _ in 0..n {
                    k.skip(6)?;
                    k.tags()?;
                }
                if v >= 1 {
                    tx.throttle_ms = Some(k.i32()? as u32);
                }
            }
            _ => {}
        }
        Some(())
    }
}

/// The response's error codes so far.
#[derive(Default)]
struct Errors {
    first: Option<i16>,
    count: u32,
}

impl Errors {
    fn add(&mut self, code: i16) {
        if code != 0 {
            self.first.get_or_insert(code);
            self.count += 1;
        }
    }
}

fn unanswered(p: Pending) -> Transaction {
    Transaction { request: Some(p.req), response: None, status: TxStatus::NoResponse, detail: Detail::Kafka(p.tx) }
}

fn di(dir: Dir) -> usize {
    match dir {
        Dir::ToServer => 0,
        Dir::ToClient => 1,
    }
}

impl StreamParser for KafkaParser {
    fn data(&mut self, dir: Dir, ts_ns: i64, data: &[u8], out: &mut dyn TxSink) {
        let mut framer = std::mem::take(&mut self.framers[di(dir)]);
        let lost = framer.feed(data, ts_ns, self.max_head, frame, |m| match dir {
            Dir::ToServer => self.request(m, out),
            Dir::ToClient => self.response(m, out),
        });
        self.stats.unparsed_bytes += lost;
        self.framers[di(dir)] = framer;
    }

    fn gap(&mut self, dir: Dir, ts_ns: i64, len: u64, out: &mut dyn TxSink) {
        self.stats.gaps += 1;
        let mut framer = std::mem::take(&mut self.framers[di(dir)]);
        let held = framer.gap(len, ts_ns, |m| match dir {
            Dir::ToServer => self.request(m, out),
            Dir::ToClient => self.response(m, out),
        });
        if !held {
            self.stats.unparsed_bytes += len;
            if dir == Dir::ToClient {
                // Responses lost for good: what waits goes out unanswered.
                out.extend(self.pending.drain(..).map(unanswered));
            }
        }
        self.framers[di(dir)] = framer;
    }

    fn expire(&mut self, now_ns: i64, out: &mut dyn TxSink) {
        // A fetch may wait its max wait at the broker before the timeout
        // counts.
        let timeout = self.timeout_ns;
        let old = |p: &Pending| now_ns - p.req.last_ns > timeout + i64::from(p.tx.max_wait_ms.unwrap_or(0)) * 1_000_000;
        out.extend(self.pending.extract_if(.., |p| old(p)).map(unanswered));
    }

    fn finish(&mut self, _ts_ns: i64, out: &mut dyn TxSink) {
        out.extend(self.pending.drain(..).map(unanswered));
    }

    fn gave_up(&self) -> bool {
        self.framers.iter().all(Framer::lost)
    }

    fn stats(&self) -> ParseStats {
        self.stats
    }
}

#[cfg(feature = "fuzzing")]
pub fn fuzz(data: &[u8]) {
    let mut p = KafkaParser::new(&ParseConfig { max_header_bytes: 64, max_text_bytes: 8, transaction_timeout_ns: 3, ..ParseConfig::default() });
    crate::fuzz_stream(&mut p, data);
}

#[cfg(test)]
mod tests;
