//! MQTT 3.1, 3.1.1 and 5 (OASIS "MQTT Version 3.1.1", 2014, and "MQTT
//! Version 5.0", 2019; section numbers below are 5.0's): one transaction
//! per exchange.
//!
//! Every control packet is a fixed header (packet type and flags in one
//! byte, then the remaining length as a variable byte integer of one to four
//! bytes, 2.1.4 / 1.5.5) and that many bytes ([`crate::frames`] cuts them).
//! Exchanges pair as the standard says:
//! - CONNECT with CONNACK (3.1, 3.2) and PINGREQ with PINGRESP (3.12, 3.13),
//!   in order;
//! - PUBLISH with QoS 1 with its PUBACK, with QoS 2 with PUBREC, PUBREL,
//!   PUBCOMP (4.3), SUBSCRIBE with SUBACK and UNSUBSCRIBE with UNSUBACK, by
//!   packet identifier (2.2.1); the client's identifiers and the server's
//!   are separate spaces, so each side's packets wait in their own table;
//! - PUBLISH with QoS 0, DISCONNECT and AUTH expect no answer: a
//!   transaction of their own at once, `ok` without a response.
//!
//! A PUBLISH the server sends (a message delivered to a subscriber) is a
//! transaction `from_server`, with the server's packets as its response
//! and no request (the client acknowledges it; that acknowledgement's code
//! is its `reason_code`). MQTT 5's properties (a variable byte integer
//! length, then the properties, 2.2.2) are skipped by their length; the
//! protocol level of the connection's CONNECT says whether they are there
//! (4, 3.1.1, when the CONNECT was not seen).
//!
//! Status: an error when the answer's code says failure (CONNACK's return
//! code other than 0, a reason code of 0x80 or more: 2.4; a SUBACK's 0x80 in
//! 3.1.1).

use crate::frames::{self, Frame, Framer, Msg, Rd};
use crate::{Detail, Dir, ParseConfig, ParseStats, Span, StreamParser, Transaction, TxSink, TxStatus};

pub use wirelog_record::mqtt::MqttTx;

/// Exchanges waiting for their answers, per table, before the oldest goes
/// out unanswered.
const MAX_PENDING: usize = 256;

/// This protocol's content probe (see [`crate::detect`]): a client's
/// CONNECT, whose variable header starts with the protocol name, `MQTT`
/// (3.1.1, 5) or `MQIsdp` (3.1), and the protocol level.
pub fn probe(dir: Dir, data: &[u8]) -> crate::detect::Probe {
    crate::detect::Probe::certain_if(dir == Dir::ToServer && is_connect(data))
}

fn is_connect(data: &[u8]) -> bool {
    if data.first() != Some(&0x10) {
        return false;
    }
    let Some((_, n)) = varint(&data[1..]) else { return false };
    let vh = &data[1 + n..];
    matches!(vh, [0, 4, b'M', b'Q', b'T', b'T', 4 | 5, ..] | [0, 6, b'M', b'Q', b'I', b's', b'd', b'p', 3, ..])
}

/// A variable byte integer (1.5.5): its value and length, `None` when cut
/// or longer than four bytes.
fn varint(b: &[u8]) -> Option<(u32, usize)> {
    let mut v = 0u32;
    for (i, &x) in b.iter().take(4).enumerate() {
        v |= u32::from(x & 0x7f) << (7 * i);
        if x & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// A packet's length from its first bytes.
fn frame(b: &[u8]) -> Frame {
    let Some(&first) = b.first() else { return Frame::Need };
    if first >> 4 == 0 {
        // Packet type 0 is reserved.
        return Frame::Bad;
    }
    match varint(&b[1..]) {
        Some((len, n)) => Frame::Len(1 + n as u64 + u64::from(len)),
        None if b.len() >= 5 => Frame::Bad,
        None => Frame::Need,
    }
}

/// Packet types (2.1.2).
mod kind {
    pub const CONNECT: u8 = 1;
    pub const CONNACK: u8 = 2;
    pub const PUBLISH: u8 = 3;
    pub const PUBACK: u8 = 4;
    pub const PUBREC: u8 = 5;
    pub const PUBREL: u8 = 6;
    pub const PUBCOMP: u8 = 7;
    pub const SUBSCRIBE: u8 = 8;
    pub const SUBACK: u8 = 9;
    pub const UNSUBSCRIBE: u8 = 10;
    pub const UNSUBACK: u8 = 11;
    pub const PINGREQ: u8 = 12;
    pub const PINGRESP: u8 = 13;
    pub const DISCONNECT: u8 = 14;
    pub const AUTH: u8 = 15;
}

fn type_name(t: u8) -> &'static str {
    const NAMES: [&str; 16] = [
        "reserved", "connect", "connack", "publish", "puback", "pubrec", "pubrel", "pubcomp", "subscribe", "suback", "unsubscribe",
        "unsuback", "pingreq", "pingresp", "disconnect", "auth",
    ];
    NAMES[(t & 15) as usize]
}

/// An exchange waiting for (the rest of) its answer.
struct Pending {
    /// The initiator's packets (the client's; none for a server's PUBLISH).
    req: Option<Span>,
    /// The other side's (for a server's PUBLISH: the server's packets).
    resp: Option<Span>,
    tx: MqttTx,
    /// A QoS 2 PUBLISH got its PUBREC and waits for PUBCOMP.
    released: bool,
    error: bool,
    /// When it last moved (for the timeout).
    last_ns: i64,
}

/// Parses one MQTT connection.
pub struct MqttParser {
    max_text: usize,
    max_head: usize,
    timeout_ns: i64,
    framers: [Framer; 2],
    /// The protocol level (5: properties present).
    level: u8,
    connects: Vec<Pending>,
    pings: Vec<Pending>,
    /// Client-initiated exchanges by packet id.
    client_ids: Vec<Pending>,
    /// Server-initiated (PUBLISH QoS 1/2) by packet id.
    server_ids: Vec<Pending>,
    stats: ParseStats,
}

fn span(m: &Msg<'_>) -> Span {
    Span { first_ns: m.first_ns, last_ns: m.last_ns, bytes: m.len }
}

fn add(s: &mut Option<Span>, m: &Msg<'_>) {
    match s {
        Some(s) => {
            s.last_ns = m.last_ns;
            s.bytes += m.len;
        }
        None => *s = Some(span(m)),
    }
}

impl MqttParser {
    pub fn new(cfg: &ParseConfig) -> Self {
        MqttParser {
            max_text: cfg.max_text_bytes,
            max_head: cfg.max_header_bytes.max(64),
            timeout_ns: cfg.transaction_timeout_ns,
            framers: Default::default(),
            level: 4,
            connects: Vec::new(),
            pings: Vec::new(),
            client_ids: Vec::new(),
            server_ids: Vec::new(),
            stats: ParseStats::default(),
        }
    }

    /// Skips MQTT 5's properties (when the level has them): false when cut.
    fn props(&self, r: &mut Rd<'_>) -> bool {
        if self.level < 5 {
            return true;
        }
        match varint(r.rest()) {
            Some((len, n)) => r.skip(n + len as usize),
            None => false,
        }
    }

    fn str16<'a>(&self, r: &mut Rd<'a>) -> Option<String> {
        let n = r.u16()? as usize;
        // A string cut by the read cap keeps what was read.
        let s = r.rest();
        let s = &s[..n.min(s.len())];
        r.skip(n);
        Some(frames::text(s, self.max_text))
    }

    fn packet(&mut self, dir: Dir, m: Msg<'_>, out: &mut dyn TxSink) {
        let t = m.head[0] >> 4;
        let flags = m.head[0] & 15;
        // The variable header and payload: after the remaining length.
        let n = varint(&m.head[1..]).map_or(1, |(_, n)| n);
        let mut r = Rd::new(m.head.get(1 + n..).unwrap_or_default());
        let body_len = m.len - 1 - n as u64;
        match (dir, t) {
            (Dir::ToServer, kind::CONNECT) => {
                let mut tx = MqttTx { packet_type: "connect", ..Default::default() };
                let _name = r.u16().and_then(|l| r.bytes(l as usize));
                if let Some(level) = r.u8() {
                    self.level = level;
                    tx.version = Some(level);
                }
                r.skip(3); // connect flags, keep alive
                if self.props(&mut r) {
                    tx.client_id = self.str16(&mut r);
                }
                self.open(&m, tx, Table::Connects, out);
            }
            (Dir::ToServer, kind::PINGREQ) => {
                self.open(&m, MqttTx { packet_type: "pingreq", ..Default::default() }, Table::Pings, out);
            }
            (_, kind::PUBLISH) => {
                let qos = (flags >> 1) & 3;
                let mut tx = MqttTx { packet_type: "publish", from_server: dir == Dir::ToClient, qos: Some(qos), retain: flags & 1 != 0, dup: flags & 8 != 0, ..Default::default() };
                tx.topic = self.str16(&mut r);
                if qos > 0 {
                    tx.packet_id = r.u16();
                }
                if self.props(&mut r) {
                    tx.payload_bytes = Some(body_len.saturating_sub(r.pos() as u64));
                }
                match (dir, qos, tx.packet_id) {
                    (Dir::ToServer, 0, _) => self.one(&m, dir, tx, TxStatus::Ok, out),
                    (Dir::ToServer, _, Some(_)) => self.open(&m, tx, Table::ClientIds, out),
                    (Dir::ToClient, 0, _) => self.one(&m, dir, tx, TxStatus::Ok, out),
                    (Dir::ToClient, _, Some(_)) => self.open(&m, tx, Table::ServerIds, out),
                    _ => {
                        self.stats.malformed += 1;
                        self.one(&m, dir, tx, TxStatus::Ok, out);
                    }
                }
            }
            (Dir::ToServer, kind::SUBSCRIBE | kind::UNSUBSCRIBE) => {
                let sub = t == kind::SUBSCRIBE;
                let mut tx = MqttTx { packet_type: type_name(t), packet_id: r.u16(), ..Default::default() };
                if self.props(&mut r) {
                    let mut count = 0;
                    while !r.rest().is_empty() {
                        let Some(topic) = self.str16(&mut r) else { break };
                        let opts = if sub { r.u8() } else { None };
                        if count == 0 {
                            tx.topic = Some(topic);
                            tx.qos = opts.map(|o| o & 3);
                        }
                        count += 1;
                    }
                    tx.topics = Some(count);
                }
                if tx.packet_id.is_some() {
                    self.open(&m, tx, Table::ClientIds, out);
                } else {
                    self.stats.malformed += 1;
                }
            }
            (_, kind::DISCONNECT | kind::AUTH) => {
                let mut tx = MqttTx { packet_type: type_name(t), from_server: dir == Dir::ToClient, ..Default::default() };
                if self.level >= 5 {
                    // No reason code: 0x00 (3.14.2.1, 3.15.2.1).
                    tx.reason_code = Some(r.u8().unwrap_or(0));
                }
                let status = if tx.reason_code.is_some_and(|c| c >= 0x80) { TxStatus::Error } else { TxStatus::Ok };
                self.one(&m, dir, tx, status, out);
            }
            (Dir::ToClient, kind::CONNACK) => {
                r.skip(1); // acknowledge flags
                let code = r.u8();
                self.answer(&m, dir, Table::Connects, None, code, out);
            }
            (Dir::ToClient, kind::PINGRESP) => self.answer(&m, dir, Table::Pings, None, None, out),
            (Dir::ToClient, kind::SUBACK | kind::UNSUBACK) => {
                let id = r.u16();
                let mut code = None;
                if (t == kind::SUBACK || self.level >= 5) && self.props(&mut r) {
                    // The first failing code, else the first.
                    let codes = r.rest();
                    code = codes.iter().copied().find(|&c| c >= 0x80).or(codes.first().copied());
                }
                self.answer(&m, dir, Table::ClientIds, id, code, out);
            }
            (_, kind::PUBACK | kind::PUBREC | kind::PUBREL | kind::PUBCOMP) => {
                let id = r.u16();
                // 5: the reason code may be left out when it is 0 (3.4.2.1).
                let code = if self.level >= 5 { Some(r.u8().unwrap_or(0)) } else { None };
                // A client's PUBREL and a server's PUBACK/PUBREC/PUBCOMP
                // belong to the client's PUBLISH, and the other way round.
                let table = match (dir, t) {
                    (Dir::ToServer, kind::PUBREL) | (Dir::ToClient, kind::PUBACK | kind::PUBREC | kind::PUBCOMP) => Table::ClientIds,
                    _ => Table::ServerIds,
                };
                self.answer(&m, dir, table, id, code, out);
            }
            _ => {
                // A packet in the wrong direction (or reserved): not paired.
                self.stats.malformed += 1;
                let tx = MqttTx { packet_type: type_name(t), from_server: dir == Dir::ToClient, ..Default::default() };
                self.one(&m, dir, tx, TxStatus::Ok, out);
            }
        }
    }

    /// A packet that is a transaction on its own.
    fn one(&mut self, m: &Msg<'_>, dir: Dir, tx: MqttTx, status: TxStatus, out: &mut dyn TxSink) {
        let (request, response) = match dir {
            Dir::ToServer => (Some(span(m)), None),
            Dir::ToClient => (None, Some(span(m))),
        };
        out.push(Transaction { request, response, status, detail: Detail::Mqtt(tx) });
    }

    fn table(&mut self, t: Table) -> &mut Vec<Pending> {
        match t {
            Table::Connects => &mut self.connects,
            Table::Pings => &mut self.pings,
            Table::ClientIds => &mut self.client_ids,
            Table::ServerIds => &mut self.server_ids,
        }
    }

    /// An exchange begins: it waits in `t`.
    fn open(&mut self, m: &Msg<'_>, tx: MqttTx, t: Table, out: &mut dyn TxSink) {
        let from_server = tx.from_server;
        let p = Pending {
            req: (!from_server).then(|| span(m)),
            resp: from_server.then(|| span(m)),
            tx,
            released: false,
            error: false,
            last_ns: m.last_ns,
        };
        let table = self.table(t);
        // A packet id used again while its exchange is open: the old one
        // was never finished (or the capture missed its end).
        let reused = p.tx.packet_id.and_then(|id| table.iter().position(|q| q.tx.packet_id == Some(id)));
        let old = match reused {
            Some(i) => Some(table.remove(i)),
            None if table.len() >= MAX_PENDING => Some(table.remove(0)),
            None => None,
        };
        table.push(p);
        if let Some(old) = old {
            out.push(unanswered(old));
        }
    }

    /// A packet that answers (part of) an exchange in `t`: by packet id, or
    /// the oldest when `id` is `None`.
    fn answer(&mut self, m: &Msg<'_>, dir: Dir, t: Table, id: Option<u16>, code: Option<u8>, out: &mut dyn TxSink) {
        let ty = m.head[0] >> 4;
        let table = self.table(t);
        let at = match (t, id) {
            (Table::Connects | Table::Pings, _) => (!table.is_empty()).then_some(0),
            (_, Some(id)) => table.iter().position(|p| p.tx.packet_id == Some(id)),
            (_, None) => None,
        };
        let Some(at) = at else {
            // Its exchange was not seen (or ended): a record of its own.
            self.stats.malformed += 1;
            let tx = MqttTx { packet_type: type_name(ty), from_server: dir == Dir::ToClient, packet_id: id, reason_code: code, ..Default::default() };
            let (request, response) = match dir {
                Dir::ToServer => (Some(span(m)), None),
                Dir::ToClient => (None, Some(span(m))),
            };
            out.push(Transaction { request, response, status: TxStatus::NoRequest, detail: Detail::Mqtt(tx) });
            return;
        };
        let p = &mut table[at];
        p.last_ns = m.last_ns;
        // The server's packets are a server PUBLISH's response, and a
        // client exchange's: the client's belong to its request.
        let to_resp = dir == Dir::ToClient;
        if to_resp {
            add(&mut p.resp, m);
        } else if !p.tx.from_server {
            add(&mut p.req, m);
        }
        if let Some(c) = code {
            let failed = match ty {
                kind::CONNACK => c != 0,
                _ => c >= 0x80,
            };
            if failed || p.tx.reason_code.is_none_or(|old| old < 0x80) {
                p.tx.reason_code = Some(c);
            }
            p.error |= failed;
        }
        let done = match ty {
            // QoS 2's first answer: PUBREL and PUBCOMP follow, unless it failed.
            kind::PUBREC => {
                p.released = true;
                p.error
            }
            // The initiator's release: the completion follows.
            kind::PUBREL => false,
            _ => true,
        };
        if done {
            let p = table.remove(at);
            let status = if p.error { TxStatus::Error } else { TxStatus::Ok };
            out.push(Transaction { request: p.req, response: p.resp, status, detail: Detail::Mqtt(p.tx) });
        }
    }

    fn drain_all(&mut self, out: &mut dyn TxSink) {
        for t in [Table::Connects, Table::Pings, Table::ClientIds, Table::ServerIds] {
            out.extend(std::mem::take(self.table(t)).into_iter().map(unanswered));
        }
    }
}

#[derive(Clone, Copy)]
enum Table {
    Connects,
    Pings,
    ClientIds,
    ServerIds,
}

/// An exchange that ends without (all of) its answer: no response, or
/// partial (a QoS 2 PUBLISH without its PUBCOMP, a server's PUBLISH the
/// client never acknowledged).
fn unanswered(p: Pending) -> Transaction {
    let answered = if p.tx.from_server { p.req.is_some() } else { p.resp.is_some() };
    let status = if p.error {
        TxStatus::Error
    } else if answered || p.tx.from_server {
        TxStatus::Partial
    } else {
        TxStatus::NoResponse
    };
    Transaction { request: p.req, response: p.resp, status, detail: Detail::Mqtt(p.tx) }
}

fn di(dir: Dir) -> usize {
    match dir {
        Dir::ToServer => 0,
        Dir::ToClient => 1,
    }
}

impl StreamParser for MqttParser {
    fn data(&mut self, dir: Dir, ts_ns: i64, data: &[u8], out: &mut dyn TxSink) {
        let mut framer = std::mem::take(&mut self.framers[di(dir)]);
        // A packet cut by a segment boundary is kept up to `max_head`
        // bytes (a PUBLISH's payload beyond is counted, not kept).
        let lost = framer.feed(data, ts_ns, self.max_head, frame, |m| self.packet(dir, m, out));
        self.stats.unparsed_bytes += lost;
        self.framers[di(dir)] = framer;
    }

    fn gap(&mut self, dir: Dir, ts_ns: i64, len: u64, out: &mut dyn TxSink) {
        self.stats.gaps += 1;
        let mut framer = std::mem::take(&mut self.framers[di(dir)]);
        let held = framer.gap(len, ts_ns, |m| {
            // A packet with a hole: only its header's facts are sure; a
            // PUBLISH's payload was counted by its length.
            self.packet(dir, m, out)
        });
        if !held {
            self.stats.unparsed_bytes += len;
        }
        self.framers[di(dir)] = framer;
    }

    fn expire(&mut self, now_ns: i64, out: &mut dyn TxSink) {
        let timeout = self.timeout_ns;
        for t in [Table::Connects, Table::Pings, Table::ClientIds, Table::ServerIds] {
            out.extend(self.table(t).extract_if(.., |p| now_ns - p.last_ns > timeout).map(unanswered));
        }
    }

    fn finish(&mut self, _ts_ns: i64, out: &mut dyn TxSink) {
        self.drain_all(out);
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
    let mut p = MqttParser::new(&ParseConfig { max_header_bytes: 64, max_text_bytes: 8, transaction_timeout_ns: 3, ..ParseConfig::default() });
    crate::fuzz_stream(&mut p, data);
}

#[cfg(test)]
mod tests;
