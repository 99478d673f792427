//! Redis serialization protocol, RESP2 and RESP3.
//!
//! Requests are arrays of bulk strings (or inline commands: one text line);
//! replies are any RESP value: `+` simple string, `-` error, `:` integer,
//! `$` bulk, `*` array, and RESP3's `_` null, `,` double, `#` boolean, `!`
//! blob error, `=` verbatim string, `(` big number, `%` map, `~` set, `>`
//! push, `|` attribute (metadata before the real reply, not a reply itself).
//!
//! Pairing: commands are pipelined freely, so requests wait in a queue and
//! each complete reply answers the oldest. (P|S)SUBSCRIBE with n channels
//! gets n confirmations. Pub/sub messages (RESP3 `>` pushes, and RESP2
//! `message`/`pmessage`/`smessage` arrays once subscribed) answer nothing:
//! they are counted ([`RedisParser::pushes`]), not reported as transactions.
//!
//! The stream is read with a small state machine (open aggregates on a
//! stack, bulk bodies skipped by length) straight from the caller's slices:
//! only a line cut by a segment boundary is buffered (bounded by
//! `max_header_bytes`), and of bulk bodies only what is recorded is kept
//! (the command's arguments up to `max_text_bytes`, a short reply prefix).
//!
//! Not handled: RESP3 streamed strings/aggregates (`$?`, `*?`) make the
//! parser resynchronise; MONITOR's stream and CLIENT REPLY OFF/SKIP upset
//! the pairing until the connection's end.

use std::collections::VecDeque;

use crate::fingerprint::Fingerprints;

use crate::truncate;
use wirelog_record::SmallText;
use crate::{Detail, Dir, ParseConfig, ParseStats, Span, StreamParser, Transaction, TxSink, TxStatus};

pub use wirelog_record::redis::RedisTx;

/// Upper bound on open aggregates (nesting).
const MAX_DEPTH: usize = 64;
/// Reply bytes kept for display.
const REPLY_KEEP: usize = 256;
/// Command name bytes kept.
const NAME_KEEP: usize = 64;

fn di(dir: Dir) -> usize {
    match dir {
        Dir::ToServer => 0,
        Dir::ToClient => 1,
    }
}

fn type_name(t: u8) -> &'static str {
    match t {
        b'+' => "simple",
        b'-' => "error",
        b':' => "integer",
        b'$' => "bulk",
        b'*' => "array",
        b'_' => "null",
        b',' => "double",
        b'#' => "boolean",
        b'!' => "blob_error",
        b'=' => "verbatim",
        b'(' => "bignum",
        b'%' => "map",
        b'~' => "set",
        b'>' => "push",
        b'|' => "attribute",
        _ => "unknown",
    }
}

const TYPES: &[u8] = b"+-:$*_,#!=(%~>|";

fn parse_int(b: &[u8]) -> Option<i64> {
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// This protocol's content probe (see [`crate::detect`]).
pub fn probe(dir: Dir, data: &[u8]) -> crate::detect::Probe {
    crate::detect::Probe::certain_if(looks_like(dir, data))
}

/// True when `data`, the first bytes seen in `dir`, look like RESP: a command
/// array (`*N\r\n$M\r\n` then a letter), inline `PING`, or a typical first
/// reply (`+OK`, `+PONG`, an error with a Redis error code, a HELLO map).
pub fn looks_like(dir: Dir, data: &[u8]) -> bool {
    match dir {
        Dir::ToServer => {
            if data == b"PING\r\n" || data == b"PING\n" {
                return true;
            }
            let Some(rest) = data.strip_prefix(b"*") else { return false };
            let Some(nl) = rest.iter().position(|&b| b == b'\n') else { return false };
            let n = parse_int(rest[..nl].strip_suffix(b"\r").unwrap_or(&[]));
            if !n.is_some_and(|n| (1..=1 << 20).contains(&n)) {
                return false;
            }
            let rest = &rest[nl + 1..];
            let Some(rest) = rest.strip_prefix(b"$") else { return false };
            let Some(nl) = rest.iter().position(|&b| b == b'\n') else { return false };
            let m = parse_int(rest[..nl].strip_suffix(b"\r").unwrap_or(&[]));
            m.is_some_and(|m| (1..=64).contains(&m)) && rest.get(nl + 1).is_some_and(u8::is_ascii_alphabetic)
        }
        Dir::ToClient => {
            data == b"+OK\r\n"
                || data == b"+PONG\r\n"
                || [&b"-ERR "[..], b"-NOAUTH ", b"-WRONGPASS ", b"-NOPERM ", b"-LOADING ", b"-WRONGTYPE "]
                    .iter()
                    .any(|p| data.starts_with(p) && data.ends_with(b"\r\n"))
                || (data.starts_with(b"%") && data.len() > 3 && data[1].is_ascii_digit() && data.ends_with(b"\r\n"))
        }
    }
}

/// What is being collected of the message in progress.
#[derive(Default)]
struct Msg {
    first_ns: i64,
    bytes: u64,
    started: bool,
    /// Top-level type (after any attribute).
    top: Option<u8>,
    top_len: Option<i64>,
    /// Request: the top array's elements (name first), each cut, one after
    /// the other in `arg_bytes`; `arg_ends` holds where each ends. The
    /// buffers are kept from one message to the next (see [`Msg::reset`]).
    arg_bytes: Vec<u8>,
    arg_ends: Vec<usize>,
    /// Bytes of arguments kept so far, and whether some were cut.
    kept: usize,
    cut: bool,
    /// Reply: scalar text or start of a bulk; first element of an array.
    text: Vec<u8>,
    first_elem: Vec<u8>,
    /// Values completed at depth 1 (children of the top aggregate).
    children: u64,
}

impl Msg {
    /// Starts over for the next message, keeping the buffers' room (a
    /// buffer grown past `REPLY_KEEP`/the argument budget by one message
    /// is not kept: its room is the bound).
    fn reset(&mut self, keep: usize) {
        let mut arg_bytes = std::mem::take(&mut self.arg_bytes);
        let mut arg_ends = std::mem::take(&mut self.arg_ends);
        let mut text = std::mem::take(&mut self.text);
        let mut first_elem = std::mem::take(&mut self.first_elem);
        arg_bytes.clear();
        arg_ends.clear();
        text.clear();
        first_elem.clear();
        arg_bytes.shrink_to(keep);
        arg_ends.shrink_to(MAX_KEPT_ARGS);
        *self = Msg { arg_bytes, arg_ends, text, first_elem, ..Msg::default() };
    }

    fn push_arg(&mut self, a: &[u8]) {
        self.arg_bytes.extend_from_slice(a);
        self.arg_ends.push(self.arg_bytes.len());
    }

    /// Appends to the last argument.
    fn extend_arg(&mut self, a: &[u8]) {
        if let Some(end) = self.arg_ends.last_mut() {
            self.arg_bytes.extend_from_slice(a);
            *end = self.arg_bytes.len();
        }
    }

    /// The arguments, name first.
    fn args(&self) -> impl Iterator<Item = &[u8]> + Clone + '_ {
        let mut start = 0;
        self.arg_ends.iter().map(move |&end| {
            let a = &self.arg_bytes[start..end];
            start = end;
            a
        })
    }
}

/// Argument ends a connection's message keeps room for between messages.
const MAX_KEPT_ARGS: usize = 1024;

#[derive(Clone, Copy)]
struct Frame {
    left: u64,
    attr: bool,
}

/// Per-direction stream state.
#[derive(Default)]
struct Side {
    line: Vec<u8>,
    /// Bytes of the bulk body still to come, CRLF included.
    bulk_left: u64,
    in_bulk: bool,
    /// Depth (stack length) of the bulk being read.
    bulk_depth: usize,
    stack: Vec<Frame>,
    /// Inside an attribute: values there are metadata, not recorded.
    attr_depth: Option<usize>,
    msg: Msg,
    hunting: bool,
}

struct Cmd {
    tx: RedisTx,
    req: Span,
    /// Replies still expected (subscribe commands get one per channel).
    replies_left: u64,
    resp: Option<Span>,
    error: bool,
    /// Subscription confirmation kind this command expects, if any.
    sub_kind: Option<&'static [u8]>,
}

pub struct RedisParser {
    cfg: ParseConfig,
    stats: ParseStats,
    sides: [Side; 2],
    pending: VecDeque<Cmd>,
    subscribed: bool,
    pushes: u64,
    /// The command's name upper-cased, reused from one command to the next.
    upper: String,
    /// A request's arguments are joined here before they become its text.
    joined: String,
    /// Command names and scalar replies, one shared `Arc<str>` per distinct
    /// text of the connection (at most 64 each; see [`Fingerprints`]).
    names: Fingerprints,
    replies: Fingerprints,
}

/// Outcome of one line.
enum Step {
    /// A value ended (scalar, null, empty aggregate, inline command).
    Value,
    /// An aggregate opened.
    Open,
    /// A bulk body follows.
    Bulk,
    /// Not RESP: framing is lost.
    Bad,
}

impl RedisParser {
    /// Heap bytes held for the connection's life beyond the fixed parser
    /// (its shared command names and replies, the reused buffers), for the
    /// memory budget.
    pub fn held_bytes(&self) -> usize {
        self.names.held_bytes() + self.replies.held_bytes() + self.upper.capacity() + self.joined.capacity()
    }

    pub fn new(cfg: &ParseConfig) -> Self {
        RedisParser {
            cfg: cfg.clone(),
            stats: ParseStats::default(),
            sides: [Side::default(), Side::default()],
            pending: VecDeque::new(),
            subscribed: false,
            pushes: 0,
            upper: String::new(),
            joined: String::new(),
            names: Fingerprints::default(),
            replies: Fingerprints::default(),
        }
    }

    /// Pub/sub messages received (not paired with commands).
    pub fn pushes(&self) -> u64 {
        self.pushes
    }

    fn arg_budget(&self) -> usize {
        self.cfg.max_text_bytes + NAME_KEEP
    }

    /// Handles one complete line (without its line ending) of `dir`.
    fn line(&mut self, dir: Dir, line: &[u8]) -> Step {
        let budget = self.arg_budget();
        let s = &mut self.sides[di(dir)];
        let depth = s.stack.len();
        let Some(&t) = line.first() else {
            // Empty line: an inline command of nothing (telnet habit).
            return if depth == 0 && dir == Dir::ToServer { Step::Value } else { Step::Bad };
        };
        if depth == 0 && dir == Dir::ToServer && t != b'*' {
            // Inline command: words separated by spaces.
            for w in line.split(|&b| b == b' ' || b == b'\t').filter(|w| !w.is_empty()) {
                let room = budget.saturating_sub(s.msg.kept);
                let keep = &w[..w.len().min(room)];
                s.msg.cut |= keep.len() < w.len();
                s.msg.kept += keep.len();
                s.msg.push_arg(keep);
            }
            s.msg.top = Some(b'*');
            return Step::Value;
        }
        if !TYPES.contains(&t) {
            return Step::Bad;
        }
        let rest = &line[1..];
        let in_attr = s.attr_depth.is_some();
        if depth == 0 && t != b'|' {
            s.msg.top = Some(t);
        }
        let record_scalar = !in_attr && dir == Dir::ToClient && (depth == 0 || (depth == 1 && s.msg.children == 0));
        match t {
            b'+' | b'-' | b':' | b',' | b'#' | b'(' | b'_' => {
                if dir == Dir::ToServer {
                    // Commands are arrays of bulk strings; be lenient with
                    // other scalars as arguments.
                    if depth == 1 && !in_attr {
                        let room = budget.saturating_sub(s.msg.kept);
                        let keep = &rest[..rest.len().min(room)];
                        s.msg.kept += keep.len();
                        s.msg.push_arg(keep);
                    }
                } else if record_scalar {
                    let keep = &rest[..rest.len().min(REPLY_KEEP)];
                    let into = if depth == 0 { &mut s.msg.text } else { &mut s.msg.first_elem };
                    into.clear();
                    into.extend_from_slice(keep);
                }
                if t == b':' && parse_int(rest).is_none() {
                    return Step::Bad;
                }
                Step::Value
            }
            b'$' | b'=' | b'!' => {
                let Some(n) = parse_int(rest) else { return Step::Bad };
                if depth == 0 {
                    s.msg.top_len = Some(n);
                }
                if n < 0 {
                    return Step::Value;
                }
                if dir == Dir::ToServer && depth == 1 && !in_attr {
                    s.msg.push_arg(&[]);
                }
                s.bulk_left = n as u64 + 2;
                s.in_bulk = true;
                s.bulk_depth = depth;
                Step::Bulk
            }
            b'*' | b'~' | b'>' | b'%' | b'|' => {
                let Some(n) = parse_int(rest) else { return Step::Bad };
                if depth == 0 && t != b'|' {
                    s.msg.top_len = Some(n);
                }
                if n <= 0 {
                    return if t == b'|' { Step::Open } else { Step::Value };
                }
                if depth >= MAX_DEPTH {
                    return Step::Bad;
                }
                let n = n as u64;
                let left = if t == b'%' || t == b'|' { n.saturating_mul(2) } else { n };
                if t == b'|' && s.attr_depth.is_none() {
                    s.attr_depth = Some(depth);
                }
                s.stack.push(Frame { left, attr: t == b'|' });
                Step::Open
            }
            _ => Step::Bad,
        }
    }

    /// Bulk body bytes of `dir` (CRLF excluded).
    fn bulk_bytes(&mut self, dir: Dir, chunk: &[u8]) {
        let budget = self.arg_budget();
        let s = &mut self.sides[di(dir)];
        if s.attr_depth.is_some() {
            return;
        }
        match dir {
            Dir::ToServer if s.bulk_depth == 1 => {
                let room = budget.saturating_sub(s.msg.kept);
                let keep = &chunk[..chunk.len().min(room)];
                s.msg.cut |= keep.len() < chunk.len();
                s.msg.kept += keep.len();
                s.msg.extend_arg(keep);
            }
            Dir::ToClient if s.bulk_depth == 0 => {
                let room = REPLY_KEEP.saturating_sub(s.msg.text.len());
                s.msg.text.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            Dir::ToClient if s.bulk_depth == 1 && s.msg.children == 0 => {
                let room = 32usize.saturating_sub(s.msg.first_elem.len());
                s.msg.first_elem.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            _ => {}
        }
    }

    /// Elements of a reply aggregate that nothing is kept of, skipped by
    /// their lengths: the whole `$<n>\r\n<n bytes>\r\n` bulk strings at the
    /// start of `data`, while the open aggregate has more than one element
    /// left (the last one, which ends it, takes the general path) and its
    /// first element is already recorded. Only the counts change: elements
    /// left, children of the top aggregate, message bytes. Anything else
    /// (another type, a null, a cut element, an attribute) is left to the
    /// general path. Returns the bytes consumed.
    fn skip_bulk_elements(&mut self, data: &[u8]) -> usize {
        let s = &mut self.sides[1];
        if !s.line.is_empty() || s.attr_depth.is_some() {
            return 0;
        }
        let depth = s.stack.len();
        let Some(top) = s.stack.last_mut() else { return 0 };
        if top.attr || (depth == 1 && s.msg.children == 0) {
            return 0;
        }
        let (mut at, mut n) = (0usize, 0u64);
        while top.left - n > 1 && data.get(at) == Some(&b'$') {
            // Up to 18 digits: no overflow, and more is no bulk length anyway.
            let digits = data[at + 1..].iter().take(19).take_while(|b| b.is_ascii_digit()).count();
            if digits == 0 || digits > 18 || data.get(at + 1 + digits..at + 3 + digits) != Some(b"\r\n") {
                break;
            }
            let len = data[at + 1..at + 1 + digits].iter().fold(0usize, |v, &b| v * 10 + (b - b'0') as usize);
            let end = at + 3 + digits + len + 2;
            if end > data.len() {
                break;
            }
            at = end;
            n += 1;
        }
        top.left -= n;
        if depth == 1 {
            s.msg.children += n;
        }
        s.msg.bytes += at as u64;
        at
    }

    /// A value ended: pops finished aggregates; true if the message is complete.
    fn value_done(&mut self, dir: Dir) -> bool {
        let s = &mut self.sides[di(dir)];
        loop {
            let depth = s.stack.len();
            if depth == 1 && s.attr_depth.is_none() {
                s.msg.children += 1;
            }
            let Some(top) = s.stack.last_mut() else { return true };
            top.left = top.left.saturating_sub(1);
            if top.left > 0 {
                return false;
            }
            let attr = top.attr;
            s.stack.pop();
            if attr {
                if s.attr_depth == Some(s.stack.len()) {
                    s.attr_depth = None;
                }
                // An attribute precedes the value it annotates: nothing ended.
                return false;
            }
        }
    }

    fn message_done(&mut self, dir: Dir, ts_ns: i64, out: &mut dyn TxSink) {
        let mut msg = std::mem::take(&mut self.sides[di(dir)].msg);
        let span = Span { first_ns: msg.first_ns, last_ns: ts_ns, bytes: msg.bytes };
        match dir {
            Dir::ToServer => self.request(&msg, span),
            Dir::ToClient => self.reply(&msg, span, out),
        }
        // The message's buffers serve the next one.
        msg.reset(self.arg_budget());
        self.sides[di(dir)].msg = msg;
    }

    fn request(&mut self, msg: &Msg, span: Span) {
        let mut args = msg.args();
        let Some(name) = args.next() else {
            // Empty inline line or `*0`: nothing to pair.
            return;
        };
        self.upper.clear();
        self.upper.push_str(&String::from_utf8_lossy(name));
        self.upper.make_ascii_uppercase();
        truncate(&mut self.upper, NAME_KEEP);
        let name = self.names.text(self.upper.as_bytes());
        let secret = matches!(&*name, "AUTH" | "HELLO");
        let mut tx = RedisTx { num_args: msg.top_len.map_or(0, |n| (n.max(1) - 1) as u64), ..RedisTx::default() };
        // The arguments are joined in the connection's buffer and kept in
        // place when short (`SmallText`): a key or a short command line
        // costs no allocation, a longer one a single one at its length.
        let mut joined = std::mem::take(&mut self.joined);
        joined.clear();
        for (i, a) in args.enumerate() {
            let v = String::from_utf8_lossy(a);
            if i == 0 && !secret {
                tx.key = Some(SmallText::new(&v));
            }
            if i > 0 || !joined.is_empty() {
                joined.push(' ');
            }
            if secret || (self.cfg.redact && i > 0) {
                joined.push('?');
            } else {
                joined.push_str(&v);
            }
        }
        if tx.num_args == 0 && !joined.is_empty() {
            // Inline command: count the words.
            tx.num_args = joined.split(' ').count() as u64;
        }
        tx.args_truncated = truncate(&mut joined, self.cfg.max_text_bytes) || msg.cut;
        tx.args = SmallText::new(&joined);
        self.joined = joined;
        let (replies_left, sub_kind): (u64, Option<&'static [u8]>) = match &*name {
            "SUBSCRIBE" => (tx.num_args.max(1), Some(b"subscribe")),
            "PSUBSCRIBE" => (tx.num_args.max(1), Some(b"psubscribe")),
            "SSUBSCRIBE" => (tx.num_args.max(1), Some(b"ssubscribe")),
            "UNSUBSCRIBE" => (tx.num_args.max(1), Some(b"unsubscribe")),
            "PUNSUBSCRIBE" => (tx.num_args.max(1), Some(b"punsubscribe")),
            "SUNSUBSCRIBE" => (tx.num_args.max(1), Some(b"sunsubscribe")),
            _ => (1, None),
        };
        if matches!(&*name, "SUBSCRIBE" | "PSUBSCRIBE" | "SSUBSCRIBE") {
            self.subscribed = true;
        }
        tx.command = name;
        self.pending.push_back(Cmd { tx, req: span, replies_left, resp: None, error: false, sub_kind });
    }

    fn reply(&mut self, msg: &Msg, span: Span, out: &mut dyn TxSink) {
        let top = msg.top.unwrap_or(b'_');
        let first = msg.first_elem.as_slice();
        const SUB: [&[u8]; 6] =
            [b"subscribe", b"psubscribe", b"ssubscribe", b"unsubscribe", b"punsubscribe", b"sunsubscribe"];
        let is_sub_confirm = matches!(top, b'*' | b'>') && SUB.iter().any(|k| first.eq_ignore_ascii_case(k));
        let front_sub = self.pending.front().and_then(|c| c.sub_kind);
        // A confirmation answers a pending (un)subscribe of any kind: an
        // UNSUBSCRIBE without arguments gets one per subscribed channel.
        let pairs = if is_sub_confirm {
            front_sub.is_some()
        } else if top == b'>' {
            false
        } else {
            !(top == b'*'
                && self.subscribed
                && [&b"message"[..], b"pmessage", b"smessage"].iter().any(|k| first.eq_ignore_ascii_case(k)))
        };
        if !pairs {
            self.pushes += 1;
            return;
        }
        let error = matches!(top, b'-' | b'!');
        let redact = self.cfg.redact;
        let replies = &mut self.replies;
        let mut fill = |tx: &mut RedisTx| {
            tx.reply_type = Some(type_name(top));
            tx.reply_len = msg.top_len;
            tx.reply = match top {
                b'$' | b'=' if !redact && msg.top_len.is_some_and(|n| n >= 0) => {
                    Some(SmallText::new(&String::from_utf8_lossy(&msg.text)))
                }
                // Scalars repeat (`OK`, `QUEUED`, small counts): kept in
                // place when short, else shared with the connection's others.
                b'+' | b'-' | b':' | b',' | b'#' | b'(' | b'!' if msg.text.len() <= SmallText::INLINE => {
                    Some(SmallText::new(&String::from_utf8_lossy(&msg.text)))
                }
                b'+' | b'-' | b':' | b',' | b'#' | b'(' | b'!' => Some(SmallText::from(replies.text(&msg.text))),
                _ => None,
            };
        };
        let Some(cmd) = self.pending.front_mut() else {
            let mut tx = RedisTx::default();
            fill(&mut tx);
            let status = TxStatus::NoRequest;
            out.push(Transaction { request: None, response: Some(span), status, detail: Detail::Redis(tx) });
            return;
        };
        if cmd.resp.is_none() {
            fill(&mut cmd.tx);
        }
        cmd.error |= error;
        match &mut cmd.resp {
            Some(r) => {
                r.last_ns = span.last_ns;
                r.bytes += span.bytes;
            }
            None => cmd.resp = Some(span),
        }
        cmd.replies_left = cmd.replies_left.saturating_sub(1);
        if cmd.replies_left == 0 {
            if let Some(c) = self.pending.pop_front() {
                if matches!(&*c.tx.command, "UNSUBSCRIBE" | "PUNSUBSCRIBE" | "RESET") {
                    self.subscribed = false;
                }
                let status = if c.error { TxStatus::Error } else { TxStatus::Ok };
                out.push(Transaction { request: Some(c.req), response: c.resp, status, detail: Detail::Redis(c.tx) });
            }
        }
    }

    /// After a gap, may `data` start a message of `dir`?
    fn resync_ok(dir: Dir, data: &[u8]) -> bool {
        let Some(nl) = data.iter().position(|&b| b == b'\n') else { return false };
        let line = data[..nl].strip_suffix(b"\r").unwrap_or(&data[..nl]);
        let Some((&t, rest)) = line.split_first() else { return false };
        match dir {
            Dir::ToServer => t == b'*' && parse_int(rest).is_some_and(|n| n > 0) && data.get(nl + 1) == Some(&b'$'),
            Dir::ToClient => {
                TYPES.contains(&t)
                    && match t {
                        b'$' | b'*' | b'%' | b'~' | b'>' | b':' | b'=' | b'!' | b'|' => parse_int(rest).is_some(),
                        _ => rest.iter().all(|&b| b >= 0x20),
                    }
            }
        }
    }

    fn lost_framing(&mut self, dir: Dir) {
        let s = &mut self.sides[di(dir)];
        s.line.clear();
        s.in_bulk = false;
        s.stack.clear();
        s.attr_depth = None;
        s.msg = Msg::default();
        s.hunting = true;
    }
}

impl StreamParser for RedisParser {
    fn data(&mut self, dir: Dir, ts_ns: i64, data: &[u8], out: &mut dyn TxSink) {
        let d = di(dir);
        if self.sides[d].hunting {
            if !Self::resync_ok(dir, data) {
                self.stats.unparsed_bytes += data.len() as u64;
                return;
            }
            self.sides[d].hunting = false;
            self.stats.resyncs += 1;
        }
        let mut data = data;
        while !data.is_empty() {
            let s = &mut self.sides[d];
            if !s.msg.started {
                s.msg.started = true;
                s.msg.first_ns = ts_ns;
            }
            if s.in_bulk {
                let n = (s.bulk_left.min(data.len() as u64)) as usize;
                // The body is bulk_left - 2 bytes, then CRLF.
                let body_left = s.bulk_left.saturating_sub(2) as usize;
                let body = &data[..n.min(body_left)];
                s.bulk_left -= n as u64;
                s.msg.bytes += n as u64;
                data = &data[n..];
                let ended = s.bulk_left == 0;
                if ended {
                    s.in_bulk = false;
                }
                self.bulk_bytes(dir, body);
                if ended && self.value_done(dir) {
                    self.message_done(dir, ts_ns, out);
                }
                continue;
            }
            if dir == Dir::ToClient {
                let n = self.skip_bulk_elements(data);
                if n > 0 {
                    data = &data[n..];
                    continue;
                }
            }
            let nl = data.iter().position(|&b| b == b'\n');
            let s = &mut self.sides[d];
            let Some(nl) = nl else {
                if s.line.len() + data.len() > self.cfg.max_header_bytes.max(64) {
                    self.stats.unparsed_bytes += (s.line.len() + data.len()) as u64;
                    self.stats.malformed += 1;
                    self.lost_framing(dir);
                    return;
                }
                s.line.extend_from_slice(data);
                s.msg.bytes += data.len() as u64;
                return;
            };
            s.msg.bytes += nl as u64 + 1;
            let step;
            if s.line.is_empty() {
                let line = &data[..nl];
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                step = self.line(dir, line);
            } else {
                let mut buf = std::mem::take(&mut s.line);
                buf.extend_from_slice(&data[..nl]);
                let line = buf.strip_suffix(b"\r").unwrap_or(&buf);
                step = self.line(dir, line);
                buf.clear();
                self.sides[d].line = buf;
            }
            data = &data[nl + 1..];
            match step {
                Step::Value => {
                    if self.value_done(dir) {
                        self.message_done(dir, ts_ns, out);
                    }
                }
                Step::Open | Step::Bulk => {}
                Step::Bad => {
                    self.stats.malformed += 1;
                    self.stats.unparsed_bytes += self.sides[d].msg.bytes + data.len() as u64;
                    self.lost_framing(dir);
                    return;
                }
            }
        }
    }

    fn gap(&mut self, dir: Dir, _ts_ns: i64, _len: u64, out: &mut dyn TxSink) {
        self.stats.gaps += 1;
        self.lost_framing(dir);
        if dir == Dir::ToClient {
            // Replies lost: the commands waiting go out unanswered.
            while let Some(c) = self.pending.pop_front() {
                let status = if c.resp.is_some() { TxStatus::Ok } else { TxStatus::NoResponse };
                out.push(Transaction { request: Some(c.req), response: c.resp, status, detail: Detail::Redis(c.tx) });
            }
        }
    }

    fn expire(&mut self, now_ns: i64, out: &mut dyn TxSink) {
        let timeout = self.cfg.transaction_timeout_ns;
        while self.pending.front().is_some_and(|c| c.resp.is_none() && now_ns - c.req.last_ns > timeout) {
            if let Some(c) = self.pending.pop_front() {
                out.push(Transaction {
                    request: Some(c.req),
                    response: None,
                    status: TxStatus::NoResponse,
                    detail: Detail::Redis(c.tx),
                });
            }
        }
    }

    fn finish(&mut self, _ts_ns: i64, out: &mut dyn TxSink) {
        while let Some(c) = self.pending.pop_front() {
            let status = match (&c.resp, c.error) {
                (None, _) => TxStatus::NoResponse,
                (Some(_), true) => TxStatus::Error,
                (Some(_), false) => TxStatus::Ok,
            };
            out.push(Transaction { request: Some(c.req), response: c.resp, status, detail: Detail::Redis(c.tx) });
        }
    }

    fn gave_up(&self) -> bool {
        false
    }

    fn stats(&self) -> ParseStats {
        self.stats
    }
}

#[cfg(test)]
mod tests;
