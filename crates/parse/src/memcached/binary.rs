//! Memcached's binary protocol (the protocol_binary.xml / BinaryProtocol
//! wiki definition): every message is a 24-byte header (magic 0x80 for a
//! request, 0x81 for a response; opcode; key length; extras length; status
//! in a response; total body length; opaque; CAS) and a body of extras, key
//! and value.
//!
//! Responses answer in order and carry their request's opaque. A quiet
//! opcode (GetQ, GetKQ, SetQ, DeleteQ, IncrementQ, ...) gets a response
//! only when it has something to say (a get: only a hit; the others: only
//! a failure), so a response to a later request (usually a NoOp) passes
//! the quiet requests before it: each was answered by silence, and is
//! recorded with its implied result (`miss`, `stored`, `deleted`, ...),
//! status `ok` and no response part (Packetbeat's memcache binary parser,
//! packetbeat/protos/memcache/binary.go and memcache.go, makes the same
//! request-only transactions). A Stat request's answer is one response per
//! statistic, ended by one with an empty key.
//!
//! Header, extras and key are kept (the key for the record, the extras and
//! the first 8 value bytes for incr/decr's new value); values are skipped
//! by length. A header whose magic is neither loses the direction's framing
//! until a segment starts with a request's (or response's) magic.

use std::collections::VecDeque;

use crate::{Detail, Dir, ParseStats, Span, Transaction, TxSink, TxStatus};

use super::MemcachedTx;

const REQUEST: u8 = 0x80;
const RESPONSE: u8 = 0x81;

/// Requests waiting for responses before the oldest goes out unanswered.
const MAX_PENDING: usize = 1024;

/// What an opcode is: its name, the command it belongs to (the text
/// protocol's word) and whether it is quiet.
pub(super) fn opcode(op: u8) -> (&'static str, &'static str, bool) {
    match op {
        0x00 => ("Get", "get", false),
        0x01 => ("Set", "set", false),
        0x02 => ("Add", "add", false),
        0x03 => ("Replace", "replace", false),
        0x04 => ("Delete", "delete", false),
        0x05 => ("Increment", "incr", false),
        0x06 => ("Decrement", "decr", false),
        0x07 => ("Quit", "quit", false),
        0x08 => ("Flush", "flush_all", false),
        0x09 => ("GetQ", "get", true),
        0x0a => ("NoOp", "noop", false),
        0x0b => ("Version", "version", false),
        0x0c => ("GetK", "get", false),
        0x0d => ("GetKQ", "get", true),
        0x0e => ("Append", "append", false),
        0x0f => ("Prepend", "prepend", false),
        0x10 => ("Stat", "stats", false),
        0x11 => ("SetQ", "set", true),
        0x12 => ("AddQ", "add", true),
        0x13 => ("ReplaceQ", "replace", true),
        0x14 => ("DeleteQ", "delete", true),
        0x15 => ("IncrementQ", "incr", true),
        0x16 => ("DecrementQ", "decr", true),
        0x17 => ("QuitQ", "quit", true),
        0x18 => ("FlushQ", "flush_all", true),
        0x19 => ("AppendQ", "append", true),
        0x1a => ("PrependQ", "prepend", true),
        0x1b => ("Verbosity", "verbosity", false),
        0x1c => ("Touch", "touch", false),
        0x1d => ("GAT", "gat", false),
        0x1e => ("GATQ", "gat", true),
        0x20 => ("SASLListMechs", "sasl_list_mechs", false),
        0x21 => ("SASLAuth", "sasl_auth", false),
        0x22 => ("SASLStep", "sasl_step", false),
        _ => ("Unknown", "unknown", false),
    }
}

/// A status's name (the protocol's), and whether it is an error.
fn status_name(status: u16) -> &'static str {
    match status {
        0x00 => "Success",
        0x01 => "Key not found",
        0x02 => "Key exists",
        0x03 => "Value too large",
        0x04 => "Invalid arguments",
        0x05 => "Item not stored",
        0x06 => "Incr/Decr on non-numeric value",
        0x07 => "Wrong vbucket",
        0x08 => "Authentication error",
        0x09 => "Authentication continue",
        0x20 => "Authentication required",
        0x21 => "Further authentication steps required",
        0x81 => "Unknown command",
        0x82 => "Out of memory",
        0x83 => "Not supported",
        0x84 => "Internal error",
        0x85 => "Busy",
        0x86 => "Temporary failure",
        _ => "Unknown status",
    }
}

/// The record's result for `command` answered with `status`, and whether
/// that is an error (a miss or a failed condition is an answer, not an
/// error, as in the text protocol).
fn result_of(command: &str, status: u16) -> (&'static str, bool) {
    match (status, command) {
        (0, "get" | "gat") => ("hit", false),
        (0, "set" | "add" | "replace" | "append" | "prepend") => ("stored", false),
        (0, "delete") => ("deleted", false),
        (0, "incr" | "decr") => ("value", false),
        (0, "touch") => ("touched", false),
        (0, "stats") => ("stats", false),
        (0, "version") => ("version", false),
        (0, _) => ("ok", false),
        (1, "get" | "gat") => ("miss", false),
        (1, _) => ("not_found", false),
        (2, _) => ("exists", false),
        (5, _) => ("not_stored", false),
        _ => ("error", true),
    }
}

/// The result a quiet request's silence means.
fn silent_result(command: &str) -> &'static str {
    match command {
        "get" | "gat" => "miss",
        c => result_of(c, 0).0,
    }
}

struct Pending {
    opaque: u32,
    req: Span,
    resp: Option<Span>,
    quiet: bool,
    tx: MemcachedTx,
}

/// One direction's reading state.
#[derive(Default)]
struct Side {
    /// Header, extras, key and up to 8 value bytes of the current message.
    buf: Vec<u8>,
    /// Bytes of the buffer's part still to come.
    want: usize,
    /// Value bytes still to skip.
    skip: u64,
    first_ns: i64,
    lost: bool,
}

/// A binary-protocol connection (or datagram exchange).
pub(super) struct Binary {
    max_text: usize,
    redact: bool,
    timeout_ns: i64,
    sides: [Side; 2],
    pending: VecDeque<Pending>,
    pub(super) stats: ParseStats,
}

fn di(dir: Dir) -> usize {
    match dir {
        Dir::ToServer => 0,
        Dir::ToClient => 1,
    }
}

/// A message header's lengths: (extras, key, value).
fn lengths(h: &[u8]) -> Option<(usize, usize, u64)> {
    let key = u16::from_be_bytes([h[2], h[3]]) as usize;
    let extras = h[4] as usize;
    let body = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as u64;
    let value = body.checked_sub((key + extras) as u64)?;
    Some((extras, key, value))
}

impl Binary {
    pub(super) fn new(max_text: usize, timeout_ns: i64, redact: bool) -> Binary {
        Binary { max_text, redact, timeout_ns, sides: Default::default(), pending: VecDeque::new(), stats: ParseStats::default() }
    }

    pub(super) fn data(&mut self, dir: Dir, ts_ns: i64, mut data: &[u8], out: &mut dyn TxSink) {
        let d = di(dir);
        let magic = if dir == Dir::ToServer { REQUEST } else { RESPONSE };
        if self.sides[d].lost {
            if data.first() == Some(&magic) {
                self.sides[d].lost = false;
                self.stats.resyncs += 1;
            } else {
                self.stats.unparsed_bytes += data.len() as u64;
                return;
            }
        }
        while !data.is_empty() {
            let side = &mut self.sides[d];
            if side.buf.is_empty() {
                side.first_ns = ts_ns;
                side.want = 24;
            }
            if side.want > 0 {
                let n = side.want.min(data.len());
                side.buf.extend_from_slice(&data[..n]);
                side.want -= n;
                data = &data[n..];
                if side.want > 0 {
                    return;
                }
                if side.buf.len() == 24 {
                    // The header is whole: what else to keep, what to skip.
                    let lens = if side.buf[0] == magic { lengths(&side.buf) } else { None };
                    let Some((extras, key, value)) = lens else {
                        self.stats.unparsed_bytes += (side.buf.len() + data.len()) as u64;
                        side.buf.clear();
                        side.lost = true;
                        return;
                    };
                    let kept = value.min(8);
                    side.want = extras + key + kept as usize;
                    side.skip = value - kept;
                    if side.want > 0 {
                        continue;
                    }
                }
            }
            if side.skip > 0 {
                let n = side.skip.min(data.len() as u64) as usize;
                side.skip -= n as u64;
                data = &data[n..];
                if side.skip > 0 {
                    return;
                }
            }
            self.message(dir, ts_ns, out);
        }
    }

    /// The kept part of a whole message of `dir`.
    fn message(&mut self, dir: Dir, ts_ns: i64, out: &mut dyn TxSink) {
        let side = &mut self.sides[di(dir)];
        let buf = std::mem::take(&mut side.buf);
        let first_ns = side.first_ns;
        let (extras, key, value) = lengths(&buf).unwrap_or((0, 0, 0));
        let bytes = 24 + (extras + key) as u64 + value;
        let span = Span { first_ns, last_ns: ts_ns, bytes };
        let op = buf[1];
        let opaque = u32::from_be_bytes([buf[12], buf[13], buf[14], buf[15]]);
        let key_bytes = buf.get(24 + extras..24 + extras + key).unwrap_or_default();
        let value_head = buf.get(24 + extras + key..).unwrap_or_default();
        match dir {
            Dir::ToServer => {
                let (name, command, quiet) = opcode(op);
                let mut tx = MemcachedTx { command, protocol: "binary", opcode: Some(name), noreply: quiet, ..Default::default() };
                if key > 0 {
                    tx.key = Some(super::key_text(key_bytes, self.max_text, self.redact));
                    tx.keys = 1;
                }
                if matches!(command, "set" | "add" | "replace" | "append" | "prepend") {
                    tx.value_bytes = Some(value);
                }
                if command == "unknown" {
                    self.stats.malformed += 1;
                }
                if self.pending.len() >= MAX_PENDING {
                    if let Some(p) = self.pending.pop_front() {
                        out.push(unanswered(p));
                    }
                }
                self.pending.push_back(Pending { opaque, req: span, resp: None, quiet, tx });
                if matches!(op, 0x17) {
                    // QuitQ: the server closes without a word.
                    if let Some(p) = self.pending.pop_back() {
                        out.push(unanswered(p));
                    }
                }
            }
            Dir::ToClient => {
                let status = u16::from_be_bytes([buf[6], buf[7]]);
                // Quiet requests before the one answered were answered by silence.
                let Some(at) = self.pending.iter().position(|p| p.opaque == opaque) else {
                    self.stats.malformed += 1;
                    let (name, command, _) = opcode(op);
                    let (result, _) = result_of(command, status);
                    let tx = MemcachedTx { command, protocol: "binary", opcode: Some(name), result: Some(result), ..Default::default() };
                    out.push(Transaction { request: None, response: Some(span), status: TxStatus::NoRequest, detail: Detail::Memcached(tx) });
                    self.keep(dir, buf);
                    return;
                };
                for _ in 0..at {
                    let Some(mut p) = self.pending.pop_front() else { break };
                    if p.quiet {
                        p.tx.result = Some(silent_result(p.tx.command));
                        out.push(Transaction { request: Some(p.req), response: None, status: TxStatus::Ok, detail: Detail::Memcached(p.tx) });
                    } else {
                        // A response the server never sent (or the capture missed).
                        out.push(unanswered(p));
                    }
                }
                let Some(p) = self.pending.front_mut() else { return };
                let resp = p.resp.get_or_insert(Span { first_ns, last_ns: ts_ns, bytes: 0 });
                resp.last_ns = ts_ns;
                resp.bytes += bytes;
                // A Stat answer goes on until the response with no key.
                if p.tx.command == "stats" && status == 0 && key > 0 {
                    self.keep(dir, buf);
                    return;
                }
                let Some(mut p) = self.pending.pop_front() else { return };
                let (result, error) = result_of(p.tx.command, status);
                p.tx.result = Some(result);
                if error {
                    p.tx.error_message = Some(status_name(status).to_string());
                }
                if result == "hit" {
                    p.tx.hits = Some(1);
                    p.tx.value_bytes = Some(value);
                }
                if result == "value" && value_head.len() == 8 {
                    // incr/decr's new value is the 8-byte value.
                    p.tx.value_bytes = None;
                }
                let status = if error { TxStatus::Error } else { TxStatus::Ok };
                out.push(Transaction { request: Some(p.req), response: p.resp, status, detail: Detail::Memcached(p.tx) });
            }
        }
        self.keep(dir, buf);
    }

    /// Gives the message buffer back to its side, emptied.
    fn keep(&mut self, dir: Dir, mut buf: Vec<u8>) {
        buf.clear();
        self.sides[di(dir)].buf = buf;
    }

    pub(super) fn gap(&mut self, dir: Dir) {
        self.stats.gaps += 1;
        let side = &mut self.sides[di(dir)];
        side.buf.clear();
        side.skip = 0;
        side.lost = true;
    }

    pub(super) fn expire(&mut self, now_ns: i64, out: &mut dyn TxSink) {
        while self.pending.front().is_some_and(|p| now_ns - p.req.last_ns > self.timeout_ns) {
            if let Some(p) = self.pending.pop_front() {
                out.push(unanswered(p));
            }
        }
    }

    pub(super) fn finish(&mut self, out: &mut dyn TxSink) {
        while let Some(p) = self.pending.pop_front() {
            out.push(unanswered(p));
        }
    }
}

fn unanswered(p: Pending) -> Transaction {
    let status = if p.resp.is_some() { TxStatus::Partial } else { TxStatus::NoResponse };
    Transaction { request: Some(p.req), response: p.resp, status, detail: Detail::Memcached(p.tx) }
}
