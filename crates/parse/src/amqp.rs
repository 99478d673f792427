//! AMQP 0-9-1 (the AMQP Working Group's "AMQP 0-9-1" specification, 2008,
//! and its machine-readable `amqp0-9-1.xml`; RabbitMQ's extensions
//! `confirm.*`, `exchange.bind/unbind`, `basic.nack`,
//! `connection.blocked/unblocked`): one transaction per exchange.
//!
//! A connection starts with the client's protocol header `AMQP\0\0\x09\x01`
//! (spec 4.2.2), then frames (4.2.3): type (1 method, 2 content header, 3
//! body, 8 heartbeat), channel (16 bits), payload size (32 bits), the
//! payload and a frame-end octet 0xCE ([`crate::frames`] cuts them).
//!
//! Pairing:
//! - a synchronous method (`queue.declare`, `basic.get`, `channel.close`,
//!   `connection.start`, ...) waits for its answer (`-ok`; `basic.get-ok`
//!   or `-empty`) from the other side on the same channel (the spec's
//!   `<response>` elements); either side may start one (the server starts
//!   `connection.start`, `connection.tune`, and a close on an error);
//! - a method with its `no-wait` bit set, and the asynchronous ones
//!   (`basic.ack`/`nack`/`reject` from the client, `basic.recover-async`,
//!   `connection.blocked`), is a transaction of its own without answer;
//! - content (4.2.6): `basic.publish`, `basic.deliver`, `basic.return` and
//!   `basic.get-ok` are followed by a content header (whose body size is the
//!   record's `body_bytes`) and body frames; the method's transaction takes
//!   them in. A publish on a channel in confirm mode (after `confirm.select`)
//!   gets the channel's next sequence number as its delivery tag and waits
//!   for the server's `basic.ack` or `basic.nack` (with `multiple`, every
//!   publish up to the tag); otherwise it is complete with its last body
//!   byte. A `basic.deliver` or `basic.return` is the server's transaction.
//!
//! Status: an error for a `connection.close` or `channel.close` with a reply
//! code of 300 or more, a `basic.return`, `basic.reject` and `basic.nack`
//! (Packetbeat's rule, packetbeat/protos/amqp/amqp.go: `isError`,
//! `isCloseError`; a publish nacked by the broker is refused).
//!
//! Packetbeat by default hides the connection's set-up (`connection.start`
//! to `connection.open`, `channel.open`, `channel.flow`, `basic.qos`:
//! `hide_connection_information`, same file); they are recorded here like
//! every other exchange.

use crate::frames::{self, Frame, Framer, Msg, Rd};
use crate::{Detail, Dir, ParseConfig, ParseStats, Span, StreamParser, Transaction, TxSink, TxStatus};

pub use wirelog_record::amqp::AmqpTx;

/// The client's protocol header (spec 4.2.2).
const PROTOCOL_HEADER: &[u8; 8] = b"AMQP\x00\x00\x09\x01";

/// Exchanges waiting for their answers (synchronous methods, unconfirmed
/// publishes, content being read) before the oldest goes out unanswered.
const MAX_PENDING: usize = 1024;

/// This protocol's content probe (see [`crate::detect`]): the client's
/// protocol header, `AMQP` and the version 0-9-1.
pub fn probe(dir: Dir, data: &[u8]) -> crate::detect::Probe {
    crate::detect::Probe::certain_if(dir == Dir::ToServer && data.starts_with(PROTOCOL_HEADER))
}

/// A frame's (or the protocol header's) length from its first bytes.
fn frame(b: &[u8]) -> Frame {
    if b.starts_with(b"AMQP") {
        return Frame::Len(8);
    }
    if b.len() < 7 {
        // A protocol header cut after fewer than four bytes.
        return if b"AMQP".starts_with(b) || matches!(b[0], 1 | 2 | 3 | 8) { Frame::Need } else { Frame::Bad };
    }
    let size = u64::from(u32::from_be_bytes([b[3], b[4], b[5], b[6]]));
    match b[0] {
        // A body is counted, never read.
        3 => Frame::Short(7 + size + 1),
        1 | 2 | 8 => Frame::Len(7 + size + 1),
        _ => Frame::Bad,
    }
}

/// What a method is to pairing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    /// Waits for an answer (the method ids it accepts).
    Sync(u16, u16),
    /// Answers a [`Role::Sync`].
    Answer,
    /// Stands alone.
    Async,
}

/// The methods (class id, method id) by name, and their role. Answers
/// are the request's id plus one (but `exchange.unbind-ok`, 51, and
/// `basic.get`'s two answers).
fn method(class: u16, id: u16) -> Option<(&'static str, Role)> {
    use Role::*;
    let sync = Sync(id + 1, id + 1);
    Some(match (class, id) {
        (10, 10) => ("connection.start", sync),
        (10, 11) => ("connection.start-ok", Answer),
        (10, 20) => ("connection.secure", sync),
        (10, 21) => ("connection.secure-ok", Answer),
        (10, 30) => ("connection.tune", sync),
        (10, 31) => ("connection.tune-ok", Answer),
        (10, 40) => ("connection.open", sync),
        (10, 41) => ("connection.open-ok", Answer),
        (10, 50) => ("connection.close", sync),
        (10, 51) => ("connection.close-ok", Answer),
        (10, 60) => ("connection.blocked", Async),
        (10, 61) => ("connection.unblocked", Async),
        (20, 10) => ("channel.open", sync),
        (20, 11) => ("channel.open-ok", Answer),
        (20, 20) => ("channel.flow", sync),
        (20, 21) => ("channel.flow-ok", Answer),
        (20, 40) => ("channel.close", sync),
        (20, 41) => ("channel.close-ok", Answer),
        (40, 10) => ("exchange.declare", sync),
        (40, 11) => ("exchange.declare-ok", Answer),
        (40, 20) => ("exchange.delete", sync),
        (40, 21) => ("exchange.delete-ok", Answer),
        (40, 30) => ("exchange.bind", sync),
        (40, 31) => ("exchange.bind-ok", Answer),
        (40, 40) => ("exchange.unbind", Sync(51, 51)),
        (40, 51) => ("exchange.unbind-ok", Answer),
        (50, 10) => ("queue.declare", sync),
        (50, 11) => ("queue.declare-ok", Answer),
        (50, 20) => ("queue.bind", sync),
        (50, 21) => ("queue.bind-ok", Answer),
        (50, 30) => ("queue.purge", sync),
        (50, 31) => ("queue.purge-ok", Answer),
        (50, 40) => ("queue.delete", sync),
        (50, 41) => ("queue.delete-ok", Answer),
        (50, 50) => ("queue.unbind", sync),
        (50, 51) => ("queue.unbind-ok", Answer),
        (60, 10) => ("basic.qos", sync),
        (60, 11) => ("basic.qos-ok", Answer),
        (60, 20) => ("basic.consume", sync),
        (60, 21) => ("basic.consume-ok", Answer),
        (60, 30) => ("basic.cancel", sync),
        (60, 31) => ("basic.cancel-ok", Answer),
        (60, 40) => ("basic.publish", Async),
        (60, 50) => ("basic.return", Async),
        (60, 60) => ("basic.deliver", Async),
        (60, 70) => ("basic.get", Sync(71, 72)),
        (60, 71) => ("basic.get-ok", Answer),
        (60, 72) => ("basic.get-empty", Answer),
        (60, 80) => ("basic.ack", Async),
        (60, 90) => ("basic.reject", Async),
        (60, 100) => ("basic.recover-async", Async),
        (60, 110) => ("basic.recover", sync),
        (60, 111) => ("basic.recover-ok", Answer),
        (60, 120) => ("basic.nack", Async),
        (85, 10) => ("confirm.select", sync),
        (85, 11) => ("confirm.select-ok", Answer),
        (90, 10) => ("tx.select", sync),
        (90, 11) => ("tx.select-ok", Answer),
        (90, 20) => ("tx.commit", sync),
        (90, 21) => ("tx.commit-ok", Answer),
        (90, 30) => ("tx.rollback", sync),
        (90, 31) => ("tx.rollback-ok", Answer),
        _ => return None,
    })
}

/// An exchange under way.
struct Pending {
    channel: u16,
    /// The client's frames (none for the server's exchanges).
    req: Option<Span>,
    /// The server's frames.
    resp: Option<Span>,
    tx: AmqpTx,
    /// The method ids that answer it (synchronous methods).
    answers: (u16, u16),
    class: u16,
    /// Content still to come: a header (`None`) or this many body bytes.
    content: Option<Option<u64>>,
    error: bool,
    last_ns: i64,
}

impl Pending {
    fn side(&mut self, dir: Dir) -> &mut Option<Span> {
        match dir {
            Dir::ToServer => &mut self.req,
            Dir::ToClient => &mut self.resp,
        }
    }

    fn add(&mut self, dir: Dir, m: &Msg<'_>) {
        self.last_ns = m.last_ns;
        if self.tx.from_server && dir == Dir::ToServer {
            // The server's exchange: its frames are the response; the
            // client's answer is named (`answer`), not a request before it.
            return;
        }
        match self.side(dir) {
            Some(s) => {
                s.last_ns = m.last_ns;
                s.bytes += m.len;
            }
            s => *s = Some(Span { first_ns: m.first_ns, last_ns: m.last_ns, bytes: m.len }),
        }
    }

    fn done(self) -> Transaction {
        let status = if self.error { TxStatus::Error } else { TxStatus::Ok };
        Transaction { request: self.req, response: self.resp, status, detail: Detail::Amqp(self.tx) }
    }

    /// It ends without (all of) its answer.
    fn unanswered(self) -> Transaction {
        let status = if self.error {
            TxStatus::Error
        } else if self.content.is_some() || (self.req.is_some() && self.resp.is_some()) {
            TxStatus::Partial
        } else {
            TxStatus::NoResponse
        };
        Transaction { request: self.req, response: self.resp, status, detail: Detail::Amqp(self.tx) }
    }
}

/// A channel in confirm mode: the sequence number of its last publish.
struct Confirms {
    channel: u16,
    seq: u64,
}

/// Parses one AMQP connection.
pub struct AmqpParser {
    max_text: usize,
    max_head: usize,
    timeout_ns: i64,
    framers: [Framer; 2],
    /// Synchronous methods waiting for their answers.
    waiting: Vec<Pending>,
    /// Messages whose content header or body is still coming, per side.
    content: [Vec<Pending>; 2],
    /// Publishes waiting for their confirms.
    unconfirmed: Vec<Pending>,
    confirm_channels: Vec<Confirms>,
    stats: ParseStats,
}

fn di(dir: Dir) -> usize {
    match dir {
        Dir::ToServer => 0,
        Dir::ToClient => 1,
    }
}

/// The flags of a method's bit arguments, by their names in the spec, in
/// the order they are packed (bit 0 first).
fn flag_names(class: u16, id: u16) -> &'static [&'static str] {
    match (class, id) {
        (40, 10) => &["passive", "durable", "auto-delete", "internal", "no-wait"],
        (40, 20) => &["if-unused", "no-wait"],
        (40, 30) | (40, 40) | (50, 20) | (50, 30) => &["no-wait"],
        (50, 10) => &["passive", "durable", "exclusive", "auto-delete", "no-wait"],
        (50, 40) => &["if-unused", "if-empty", "no-wait"],
        (60, 10) => &["global"],
        (60, 20) => &["no-local", "no-ack", "exclusive", "no-wait"],
        (60, 30) => &["no-wait"],
        (60, 40) => &["mandatory", "immediate"],
        (60, 60) | (60, 71) => &["redelivered"],
        (60, 70) => &["no-ack"],
        (60, 80) => &["multiple"],
        (60, 90) | (60, 100) | (60, 110) => &["requeue"],
        (60, 120) => &["multiple", "requeue"],
        (85, 10) => &["no-wait"],
        (20, 20) => &["active"],
        _ => &[],
    }
}

impl AmqpParser {
    pub fn new(cfg: &ParseConfig) -> Self {
        AmqpParser {
            max_text: cfg.max_text_bytes,
            max_head: cfg.max_header_bytes.max(64),
            timeout_ns: cfg.transaction_timeout_ns,
            framers: Default::default(),
            waiting: Vec::new(),
            content: Default::default(),
            unconfirmed: Vec::new(),
            confirm_channels: Vec::new(),
            stats: ParseStats::default(),
        }
    }

    fn shortstr(&self, r: &mut Rd<'_>) -> Option<String> {
        let n = r.u8()? as usize;
        Some(frames::text(r.bytes(n)?, self.max_text))
    }

    fn frame(&mut self, dir: Dir, m: Msg<'_>, out: &mut dyn TxSink) {
        if m.head.starts_with(b"AMQP") {
            // The protocol header (or the server's, refusing the version).
            return;
        }
        let mut r = Rd::new(m.head);
        let (Some(ty), Some(channel), Some(size)) = (r.u8(), r.u16(), r.u32()) else { return };
        let whole = m.head.len() as u64 == m.len;
        if whole && !m.holed && m.head.last() != Some(&0xce) {
            // Not a frame end: counted, read on by the length.
            self.stats.malformed += 1;
        }
        let payload = m.head.get(7..7 + size as usize).unwrap_or(&m.head[7.min(m.head.len())..]);
        match ty {
            1 => self.method(dir, channel, payload, &m, out),
            2 | 3 => self.content_frame(dir, channel, ty, payload, &m, out),
            _ => {} // heartbeat
        }
    }

    fn method(&mut self, dir: Dir, channel: u16, payload: &[u8], m: &Msg<'_>, out: &mut dyn TxSink) {
        let mut r = Rd::new(payload);
        let (Some(class), Some(id)) = (r.u16(), r.u16()) else {
            self.stats.malformed += 1;
            return;
        };
        let Some((name, role)) = method(class, id) else {
            // A method this parser does not know: a record of its own.
            self.stats.malformed += 1;
            let tx = AmqpTx { method: "unknown", from_server: dir == Dir::ToClient, channel, ..Default::default() };
            self.push_alone(dir, tx, false, m, out);
            return;
        };
        let mut tx = AmqpTx { method: name, from_server: dir == Dir::ToClient, channel, ..Default::default() };
        let mut bits = None;
        match (class, id) {
            (10, 50) | (20, 40) => {
                tx.reply_code = r.u16();
                tx.reply_text = self.shortstr(&mut r);
            }
            (40, 10) => {
                r.skip(2);
                tx.exchange = self.shortstr(&mut r);
                tx.exchange_type = self.shortstr(&mut r);
                bits = r.u8();
            }
            (40, 20) => {
                r.skip(2);
                tx.exchange = self.shortstr(&mut r);
                bits = r.u8();
            }
            (40, 30) | (40, 40) => {
                // destination, source, routing key: the exchange recorded
                // is the one being bound (the destination).
                r.skip(2);
                tx.exchange = self.shortstr(&mut r);
                let _source = self.shortstr(&mut r);
                tx.routing_key = self.shortstr(&mut r);
                bits = r.u8();
            }
            (50, 10) | (50, 30) | (50, 40) => {
                r.skip(2);
                tx.queue = self.shortstr(&mut r);
                bits = r.u8();
            }
            (50, 20) | (50, 50) => {
                r.skip(2);
                tx.queue = self.shortstr(&mut r);
                tx.exchange = self.shortstr(&mut r);
                tx.routing_key = self.shortstr(&mut r);
                if id == 20 {
                    bits = r.u8();
                }
            }
            (60, 10) => {
                r.skip(6);
                bits = r.u8();
            }
            (60, 20) => {
                r.skip(2);
                tx.queue = self.shortstr(&mut r);
                let _consumer_tag = self.shortstr(&mut r);
                bits = r.u8();
            }
            (60, 30) => {
                let _consumer_tag = self.shortstr(&mut r);
                bits = r.u8();
            }
            (60, 40) => {
                r.skip(2);
                tx.exchange = self.shortstr(&mut r);
                tx.routing_key = self.shortstr(&mut r);
                bits = r.u8();
            }
            (60, 50) => {
                tx.reply_code = r.u16();
                tx.reply_text = self.shortstr(&mut r);
                tx.exchange = self.shortstr(&mut r);
                tx.routing_key = self.shortstr(&mut r);
            }
            (60, 60) => {
                let _consumer_tag = self.shortstr(&mut r);
                tx.delivery_tag = r.u64();
                bits = r.u8();
                tx.exchange = self.shortstr(&mut r);
                tx.routing_key = self.shortstr(&mut r);
            }
            (60, 70) => {
                r.skip(2);
                tx.queue = self.shortstr(&mut r);
                bits = r.u8();
            }
            (60, 80) | (60, 90) | (60, 120) => {
                tx.delivery_tag = r.u64();
                bits = r.u8();
            }
            (60, 100) | (60, 110) | (85, 10) | (20, 20) => bits = r.u8(),
            _ => {}
        }
        if let Some(b) = bits {
            for (i, f) in flag_names(class, id).iter().enumerate() {
                if b & (1 << i) != 0 {
                    if !tx.flags.is_empty() {
                        tx.flags.push(',');
                    }
                    tx.flags.push_str(f);
                }
            }
        }
        if matches!((class, id), (10, 50) | (20, 40)) {
            self.closed(dir, channel, class == 10, &tx, m, out);
        }
        let no_wait = bits.is_some() && flag_names(class, id).iter().position(|f| *f == "no-wait").is_some_and(|i| bits.unwrap_or(0) & (1 << i) != 0);
        match role {
            Role::Answer => self.answer(dir, channel, class, id, name, &mut r, m, out),
            Role::Sync(a, b) if !no_wait => {
                let mut p = Pending { channel, req: None, resp: None, tx, answers: (a, b), class, content: None, error: false, last_ns: m.last_ns };
                p.add(dir, m);
                if self.waiting.len() >= MAX_PENDING {
                    let old = self.waiting.remove(0);
                    out.push(old.unanswered());
                }
                self.waiting.push(p);
            }
            Role::Sync(..) => {
                if (class, id) == (85, 10) {
                    self.confirm_mode(channel);
                }
                let error = close_error(&tx);
                self.push_alone(dir, tx, error, m, out);
            }
            Role::Async => match (class, id) {
                // Content follows.
                (60, 40) | (60, 50) | (60, 60) => {
                    let error = id == 50;
                    let mut p = Pending { channel, req: None, resp: None, tx, answers: (0, 0), class, content: Some(None), error, last_ns: m.last_ns };
                    p.add(dir, m);
                    self.start_content(dir, p, out);
                }
                // The broker's confirms of publishes.
                (60, 80) | (60, 120) if dir == Dir::ToClient && self.confirms(channel) => self.confirm(channel, tx, m, out),
                _ => {
                    let error = matches!((class, id), (60, 90) | (60, 120));
                    self.push_alone(dir, tx, error, m, out);
                }
            },
        }
    }

    /// A close from `dir`: what the other side still waits for on the
    /// channel (every channel, for the connection's) is answered by it.
    fn closed(&mut self, dir: Dir, channel: u16, connection: bool, close: &AmqpTx, m: &Msg<'_>, out: &mut dyn TxSink) {
        let from_server = dir == Dir::ToServer;
        let mut i = 0;
        while i < self.waiting.len() {
            let p = &self.waiting[i];
            if p.tx.from_server != from_server || !(connection || p.channel == channel) {
                i += 1;
                continue;
            }
            let mut p = self.waiting.remove(i);
            p.add(dir, &Msg { head: &[], len: 0, first_ns: m.first_ns, last_ns: m.last_ns, holed: false });
            p.tx.answer = Some(close.method);
            p.tx.reply_code = close.reply_code;
            p.tx.reply_text.clone_from(&close.reply_text);
            p.error |= close.reply_code.is_some_and(|c| c >= 300);
            out.push(p.done());
        }
    }

    fn push_alone(&mut self, dir: Dir, tx: AmqpTx, error: bool, m: &Msg<'_>, out: &mut dyn TxSink) {
        let mut p = Pending { channel: tx.channel, req: None, resp: None, tx, answers: (0, 0), class: 0, content: None, error, last_ns: m.last_ns };
        p.add(dir, m);
        out.push(p.done());
    }

    fn start_content(&mut self, dir: Dir, p: Pending, out: &mut dyn TxSink) {
        let list = &mut self.content[di(dir)];
        // One message at a time per channel (4.2.6): one still open there
        // lost its content.
        if let Some(i) = list.iter().position(|q| q.channel == p.channel) {
            let old = list.remove(i);
            self.stats.malformed += 1;
            out.push(old.unanswered());
        }
        let list = &mut self.content[di(dir)];
        if list.len() >= MAX_PENDING {
            let old = list.remove(0);
            out.push(old.unanswered());
        }
        list.push(p);
    }

    fn confirms(&self, channel: u16) -> bool {
        self.confirm_channels.iter().any(|c| c.channel == channel)
    }

    fn confirm_mode(&mut self, channel: u16) {
        if !self.confirms(channel) {
            self.confirm_channels.push(Confirms { channel, seq: 0 });
        }
    }

    /// A content header or body frame of `dir` on `channel`.
    fn content_frame(&mut self, dir: Dir, channel: u16, ty: u8, payload: &[u8], m: &Msg<'_>, out: &mut dyn TxSink) {
        let list = &mut self.content[di(dir)];
        let Some(at) = list.iter().position(|p| p.channel == channel) else {
            // Content whose method was not seen.
            self.stats.malformed += 1;
            return;
        };
        let p = &mut list[at];
        p.add(dir, m);
        match (ty, p.content) {
            (2, Some(None)) => {
                // class, weight, body size, property flags, properties.
                let mut r = Rd::new(payload);
                r.skip(4);
                let size = r.u64();
                let flags = r.u16().unwrap_or(0);
                p.tx.body_bytes = size;
                if flags & 0x8000 != 0 {
                    p.tx.content_type = r.u8().and_then(|n| r.bytes(n as usize)).map(|b| frames::text(b, self.max_text));
                }
                p.content = Some(Some(size.unwrap_or(0)));
            }
            (3, Some(Some(left))) => {
                let n = m.len.saturating_sub(8);
                p.content = Some(Some(left.saturating_sub(n)));
            }
            _ => self.stats.malformed += 1,
        }
        if p.content == Some(Some(0)) {
            let mut p = self.content[di(dir)].remove(at);
            p.content = None;
            self.content_done(dir, p, out);
        }
    }

    /// A message's content is whole.
    fn content_done(&mut self, dir: Dir, mut p: Pending, out: &mut dyn TxSink) {
        if p.tx.method == "basic.get" {
            // get-ok's content: the get's answer is whole.
            out.push(p.done());
            return;
        }
        if dir == Dir::ToServer && p.tx.method == "basic.publish" {
            if let Some(c) = self.confirm_channels.iter_mut().find(|c| c.channel == p.channel) {
                c.seq += 1;
                p.tx.delivery_tag = Some(c.seq);
                if self.unconfirmed.len() >= MAX_PENDING {
                    let old = self.unconfirmed.remove(0);
                    out.push(old.unanswered());
                }
                self.unconfirmed.push(p);
                return;
            }
        }
        out.push(p.done());
    }

    /// The broker's `basic.ack` or `basic.nack` of publishes on `channel`.
    fn confirm(&mut self, channel: u16, tx: AmqpTx, m: &Msg<'_>, out: &mut dyn TxSink) {
        let tag = tx.delivery_tag.unwrap_or(0);
        let multiple = tx.flags.split(',').any(|f| f == "multiple");
        let nack = tx.method == "basic.nack";
        let mut first = true;
        let mut i = 0;
        while i < self.unconfirmed.len() {
            let p = &self.unconfirmed[i];
            let hit = p.channel == channel && p.tx.delivery_tag.is_some_and(|t| t == tag || (multiple && (tag == 0 || t <= tag)));
            if !hit {
                i += 1;
                continue;
            }
            let mut p = self.unconfirmed.remove(i);
            p.tx.answer = Some(tx.method);
            p.error |= nack;
            // The confirm's bytes count once, for the first publish it
            // confirms; its time for each.
            p.resp = Some(Span { first_ns: m.first_ns, last_ns: m.last_ns, bytes: if first { m.len } else { 0 } });
            first = false;
            out.push(p.done());
        }
        if first {
            // Nothing it confirms was seen.
            self.push_alone(Dir::ToClient, tx, nack, m, out);
        }
    }

    /// An answer (`-ok`, `get-empty`) from `dir` on `channel`.
    #[allow(clippy::too_many_arguments)]
    fn answer(&mut self, dir: Dir, channel: u16, class: u16, id: u16, name: &'static str, r: &mut Rd<'_>, m: &Msg<'_>, out: &mut dyn TxSink) {
        let from_server = dir == Dir::ToServer;
        let Some(at) = self
            .waiting
            .iter()
            .position(|p| p.channel == channel && p.class == class && p.tx.from_server == from_server && (p.answers.0 == id || p.answers.1 == id))
        else {
            self.stats.malformed += 1;
            let tx = AmqpTx { method: name, from_server: dir == Dir::ToClient, channel, ..Default::default() };
            let mut p = Pending { channel, req: None, resp: None, tx, answers: (0, 0), class, content: None, error: false, last_ns: m.last_ns };
            p.add(dir, m);
            out.push(Transaction { status: TxStatus::NoRequest, ..p.done() });
            return;
        };
        let mut p = self.waiting.remove(at);
        p.add(dir, m);
        p.tx.answer = Some(name);
        match (class, id) {
            (50, 11) => {
                let q = self.shortstr(r);
                if p.tx.queue.as_deref().is_none_or(str::is_empty) {
                    p.tx.queue = q;
                }
                p.tx.messages = r.u32().map(u64::from);
            }
            (50, 31) | (50, 41) => p.tx.messages = r.u32().map(u64::from),
            (60, 71) => {
                p.tx.delivery_tag = r.u64();
                let redelivered = r.u8().unwrap_or(0) & 1 != 0;
                if redelivered {
                    p.tx.flags.push_str(if p.tx.flags.is_empty() { "redelivered" } else { ",redelivered" });
                }
                p.tx.exchange = self.shortstr(r);
                p.tx.routing_key = self.shortstr(r);
                p.tx.messages = r.u32().map(u64::from);
                // Content follows: the get is whole with its last body byte.
                p.content = Some(None);
                self.start_content(dir, p, out);
                return;
            }
            (85, 11) => self.confirm_mode(channel),
            _ => {}
        }
        p.error |= close_error(&p.tx);
        out.push(p.done());
    }
}

/// A close that reports an error: reply code 300 or more (Packetbeat's
/// `isCloseError`; 200 is reply-success, spec 1.2's constants).
fn close_error(tx: &AmqpTx) -> bool {
    matches!(tx.method, "connection.close" | "channel.close") && tx.reply_code.is_some_and(|c| c >= 300)
}

impl StreamParser for AmqpParser {
    fn data(&mut self, dir: Dir, ts_ns: i64, data: &[u8], out: &mut dyn TxSink) {
        let mut framer = std::mem::take(&mut self.framers[di(dir)]);
        let lost = framer.feed(data, ts_ns, self.max_head, frame, |m| self.frame(dir, m, out));
        self.stats.unparsed_bytes += lost;
        self.framers[di(dir)] = framer;
    }

    fn gap(&mut self, dir: Dir, ts_ns: i64, len: u64, out: &mut dyn TxSink) {
        self.stats.gaps += 1;
        let mut framer = std::mem::take(&mut self.framers[di(dir)]);
        let held = framer.gap(len, ts_ns, |m| self.frame(dir, m, out));
        if !held {
            self.stats.unparsed_bytes += len;
        }
        self.framers[di(dir)] = framer;
    }

    fn expire(&mut self, now_ns: i64, out: &mut dyn TxSink) {
        let timeout = self.timeout_ns;
        let old = |p: &Pending| now_ns - p.last_ns > timeout;
        let [c0, c1] = &mut self.content;
        for list in [&mut self.waiting, &mut self.unconfirmed, c0, c1] {
            out.extend(list.extract_if(.., |p| old(p)).map(Pending::unanswered));
        }
    }

    fn finish(&mut self, _ts_ns: i64, out: &mut dyn TxSink) {
        let [c0, c1] = &mut self.content;
        for list in [c0, c1, &mut self.waiting, &mut self.unconfirmed] {
            out.extend(std::mem::take(list).into_iter().map(Pending::unanswered));
        }
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
    let mut p = AmqpParser::new(&ParseConfig { max_header_bytes: 64, max_text_bytes: 8, transaction_timeout_ns: 3, ..ParseConfig::default() });
    crate::fuzz_stream(&mut p, data);
}

#[cfg(test)]
mod tests;
