//! Memcached's text protocol (protocol.txt in memcached's source): one
//! transaction per command and its response.
//!
//! A request is a line (`get <key>*`, `set <key> <flags> <exptime> <bytes>
//! [noreply]`, `delete <key> [noreply]`, `incr <key> <n>`, ...); a storage
//! command's line is followed by `<bytes>` of data and `\r\n`. A response is
//! one line (`STORED`, `NOT_FOUND`, `DELETED`, `TOUCHED`, a number, `ERROR`,
//! `CLIENT_ERROR <text>`, ...), or for a retrieval any number of
//! `VALUE <key> <flags> <bytes> [<cas>]` lines each followed by its data,
//! then `END` (`stats` answers `STAT` lines then `END`). Commands are
//! pipelined: requests wait in a queue and each complete response answers
//! the oldest. `noreply` commands (and `quit`) get no response: they are
//! reported at once, without one.
//!
//! Lines are read from the caller's slices; only a line cut by a segment
//! boundary is buffered (bounded by `max_header_bytes`); data blocks are
//! skipped by length. After a gap a direction drops the message it was in
//! and reads again from the next line end; the server's gap answers no
//! command (those waiting go out unanswered).
//!
//! A connection whose first byte is a binary magic (0x80, 0x81) speaks the
//! binary protocol, read by [`binary`] into the same records (`protocol`
//! says which).
//!
//! Not read: the meta commands' flags (a meta command is `unknown`; its
//! one-line answer, or `VA <bytes>` and its data, pairs with it).

mod binary;
pub mod udp;

use std::collections::VecDeque;

use crate::{char_floor, Detail, Dir, ParseConfig, ParseStats, Span, StreamParser, Transaction, TxSink, TxStatus};

/// This protocol's content probe (see [`crate::detect`]): none, its
/// connections are recognised by port. A text command is a lower-case word
/// and a key (`get k\r\n`, `delete k\r\n`), which the first bytes of other
/// line protocols on an unknown port can also be; claiming them would start
/// this parser on connections that are not Memcached's.
pub fn probe(_dir: Dir, _data: &[u8]) -> crate::detect::Probe {
    crate::detect::Probe::NotForUs
}

pub use wirelog_record::memcached::MemcachedTx;

/// Commands waiting for their responses before the oldest goes out
/// unanswered (a server that stopped answering, or a capture that missed it).
const MAX_PENDING: usize = 1024;

/// What a command's response looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// One line.
    Line,
    /// `VALUE` blocks, then `END`.
    Values,
    /// `STAT` lines, then `END`.
    Stats,
}

struct Pending {
    req: Span,
    resp: Option<Span>,
    expect: Expect,
    tx: MemcachedTx,
}

/// One direction's reading state.
#[derive(Default)]
struct Side {
    /// A line cut by a segment boundary.
    line: Vec<u8>,
    /// Data bytes (with their `\r\n`) still to skip.
    skip: u64,
    /// After a gap or an overlong line: bytes are dropped up to the next
    /// line end.
    lost: bool,
}

/// Parses one Memcached connection.
pub struct MemcachedParser {
    max_line: usize,
    max_text: usize,
    /// `--redact`: keys are recorded as `?` (they often hold user or
    /// session ids); their count is kept.
    redact: bool,
    timeout_ns: i64,
    sides: [Side; 2],
    pending: VecDeque<Pending>,
    /// The request whose data block is being read.
    storing: Option<Pending>,
    /// Bytes were read (the first decides whether this is the text protocol).
    started: bool,
    /// The connection speaks the binary protocol (its first byte is a
    /// binary magic, 0x80 or 0x81): read by this instead.
    binary: Option<Box<binary::Binary>>,
    stats: ParseStats,
}

fn di(dir: Dir) -> usize {
    match dir {
        Dir::ToServer => 0,
        Dir::ToClient => 1,
    }
}

/// A key as recorded: cut to `max` bytes, or `?` when redacted.
fn key_text(k: &[u8], max: usize, redact: bool) -> String {
    if redact {
        return "?".into();
    }
    let s = String::from_utf8_lossy(k);
    s[..char_floor(&s, max)].to_string()
}

/// The command names this parser knows, as recorded.
fn command_name(word: &[u8]) -> &'static str {
    const NAMES: &[&str] = &[
        "get", "gets", "gat", "gats", "set", "add", "replace", "append", "prepend", "cas", "delete", "incr",
        "decr", "touch", "version", "stats", "flush_all", "verbosity", "quit",
    ];
    NAMES
        .iter()
        .find(|n| n.as_bytes().eq_ignore_ascii_case(word))
        .copied()
        .unwrap_or("unknown")
}

impl MemcachedParser {
    pub fn new(cfg: &ParseConfig) -> Self {
        MemcachedParser {
            max_line: cfg.max_header_bytes.max(64),
            max_text: cfg.max_text_bytes,
            redact: cfg.redact,
            timeout_ns: cfg.transaction_timeout_ns,
            sides: Default::default(),
            pending: VecDeque::new(),
            storing: None,
            started: false,
            binary: None,
            stats: ParseStats::default(),
        }
    }

    /// How long a request waits for its response (`ParseConfig::
    /// transaction_timeout_ns`): UDP's messages wait as long, and keep no
    /// copy of it (a flow's state is charged to the stream memory).
    pub(super) fn timeout_ns(&self) -> i64 {
        self.timeout_ns
    }

    fn key(&self, k: &[u8]) -> String {
        key_text(k, self.max_text, self.redact)
    }

    /// A request line (without its line end), `len` bytes on the wire with it.
    fn request(&mut self, line: &[u8], len: u64, ts_ns: i64, out: &mut dyn TxSink) {
        let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
        let Some(first) = words.next() else {
            self.stats.malformed += 1;
            return;
        };
        let args: Vec<&[u8]> = words.collect();
        let command = command_name(first);
        let noreply = args.last().is_some_and(|w| *w == b"noreply");
        let mut tx = MemcachedTx { command, noreply, protocol: "text", ..Default::default() };
        let mut expect = Expect::Line;
        let mut data = None;
        match command {
            "get" | "gets" => {
                expect = Expect::Values;
                tx.keys = args.len() as u32;
                tx.key = args.first().map(|k| self.key(k));
            }
            "gat" | "gats" => {
                expect = Expect::Values;
                tx.keys = args.len().saturating_sub(1) as u32;
                tx.key = args.get(1).map(|k| self.key(k));
            }
            "set" | "add" | "replace" | "append" | "prepend" | "cas" => {
                tx.keys = 1;
                tx.key = args.first().map(|k| self.key(k));
                match args.get(3).and_then(|b| std::str::from_utf8(b).ok()?.parse::<u64>().ok()) {
                    Some(n) => data = Some(n),
                    None => {
                        // The server answers CLIENT_ERROR and reads no data.
                        self.stats.malformed += 1;
                    }
                }
                tx.value_bytes = data;
            }
            "delete" | "incr" | "decr" | "touch" => {
                tx.keys = 1;
                tx.key = args.first().map(|k| self.key(k));
            }
            "stats" => expect = Expect::Stats,
            _ => {}
        }
        let req = Span { first_ns: ts_ns, last_ns: ts_ns, bytes: len };
        let p = Pending { req, resp: None, expect, tx };
        match data {
            Some(n) => {
                self.sides[0].skip = n.saturating_add(2);
                self.storing = Some(p);
            }
            None => self.queue(p, out),
        }
    }

    /// A complete request: answered later, or now when no answer comes.
    fn queue(&mut self, p: Pending, out: &mut dyn TxSink) {
        if p.tx.noreply || p.tx.command == "quit" {
            out.push(Transaction { request: Some(p.req), response: None, status: TxStatus::NoResponse, detail: Detail::Memcached(p.tx) });
            return;
        }
        if self.pending.len() >= MAX_PENDING {
            if let Some(old) = self.pending.pop_front() {
                self.unanswered(old, out);
            }
        }
        self.pending.push_back(p);
    }

    fn unanswered(&mut self, p: Pending, out: &mut dyn TxSink) {
        let status = if p.resp.is_some() { TxStatus::Partial } else { TxStatus::NoResponse };
        out.push(Transaction { request: Some(p.req), response: p.resp, status, detail: Detail::Memcached(p.tx) });
    }

    /// A response line (without its line end), `len` bytes with it.
    fn response(&mut self, line: &[u8], len: u64, ts_ns: i64, out: &mut dyn TxSink) {
        let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
        let first = words.next().unwrap_or_default();
        let Some(p) = self.pending.front_mut() else {
            // A response whose command was not seen.
            self.stats.malformed += 1;
            let tx = MemcachedTx { command: "unknown", result: Some(line_result(first)), protocol: "text", ..Default::default() };
            let span = Span { first_ns: ts_ns, last_ns: ts_ns, bytes: len };
            out.push(Transaction { request: None, response: Some(span), status: TxStatus::NoRequest, detail: Detail::Memcached(tx) });
            return;
        };
        let resp = p.resp.get_or_insert(Span { first_ns: ts_ns, last_ns: ts_ns, bytes: 0 });
        resp.last_ns = ts_ns;
        resp.bytes += len;
        let error = matches!(first, b"ERROR" | b"CLIENT_ERROR" | b"SERVER_ERROR");
        if error {
            let text = line.get(first.len() + 1..).unwrap_or_default();
            if !text.is_empty() {
                let s = String::from_utf8_lossy(text);
                p.tx.error_message = Some(s[..char_floor(&s, self.max_text)].to_string());
            }
        }
        let done = match (p.expect, first) {
            (_, b"VALUE") | (Expect::Line, b"VA") => {
                // Its data follows: `VALUE <key> <flags> <bytes>`, `VA <bytes>`.
                let at = if first == b"VALUE" { 2 } else { 0 };
                match words.nth(at).and_then(|b| std::str::from_utf8(b).ok()?.parse::<u64>().ok()) {
                    Some(n) => {
                        *p.tx.hits.get_or_insert(0) += 1;
                        *p.tx.value_bytes.get_or_insert(0) += n;
                        self.sides[1].skip = n.saturating_add(2);
                        false
                    }
                    None => {
                        self.stats.malformed += 1;
                        first == b"VA"
                    }
                }
            }
            (Expect::Stats, b"STAT") => false,
            (Expect::Values | Expect::Stats, b"END") => true,
            (Expect::Values | Expect::Stats, _) if !error => {
                self.stats.malformed += 1;
                true
            }
            _ => true,
        };
        if !done {
            return;
        }
        let Some(mut p) = self.pending.pop_front() else { return };
        p.tx.result = Some(match p.expect {
            _ if error => line_result(first),
            Expect::Values => {
                let hits = *p.tx.hits.get_or_insert(0);
                if hits == 0 {
                    "miss"
                } else if hits >= p.tx.keys {
                    "hit"
                } else {
                    "partial_hit"
                }
            }
            Expect::Stats => "stats",
            Expect::Line => line_result(first),
        });
        let status = if error { TxStatus::Error } else { TxStatus::Ok };
        out.push(Transaction { request: Some(p.req), response: p.resp, status, detail: Detail::Memcached(p.tx) });
    }

    /// Reads `data` of `dir`: lines, and the data blocks their lengths announce.
    fn read(&mut self, dir: Dir, ts_ns: i64, mut data: &[u8], out: &mut dyn TxSink) {
        let d = di(dir);
        while !data.is_empty() {
            let side = &mut self.sides[d];
            if side.skip > 0 {
                let n = (side.skip.min(data.len() as u64)) as usize;
                side.skip -= n as u64;
                data = &data[n..];
                self.data_bytes(dir, n as u64, ts_ns, out);
                continue;
            }
            let Some(end) = data.iter().position(|&b| b == b'\n') else {
                if side.lost {
                    self.stats.unparsed_bytes += data.len() as u64;
                } else if side.line.len() + data.len() > self.max_line {
                    self.stats.unparsed_bytes += (side.line.len() + data.len()) as u64;
                    side.line.clear();
                    side.lost = true;
                } else {
                    side.line.extend_from_slice(data);
                }
                return;
            };
            let (head, rest) = data.split_at(end + 1);
            data = rest;
            if std::mem::take(&mut side.lost) {
                self.stats.unparsed_bytes += head.len() as u64;
                self.stats.resyncs += 1;
                continue;
            }
            let mut line = std::mem::take(&mut side.line);
            let len = (line.len() + head.len()) as u64;
            line.extend_from_slice(head);
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            match dir {
                Dir::ToServer => self.request(text, len, ts_ns, out),
                Dir::ToClient => self.response(text, len, ts_ns, out),
            }
            line.clear();
            self.sides[d].line = line;
        }
    }

    /// `n` bytes of a data block were read.
    fn data_bytes(&mut self, dir: Dir, n: u64, ts_ns: i64, out: &mut dyn TxSink) {
        match dir {
            Dir::ToServer => {
                if let Some(p) = &mut self.storing {
                    p.req.bytes += n;
                    p.req.last_ns = ts_ns;
                }
                if self.sides[0].skip == 0 {
                    if let Some(p) = self.storing.take() {
                        self.queue(p, out);
                    }
                }
            }
            Dir::ToClient => {
                if let Some(span) = self.pending.front_mut().and_then(|p| p.resp.as_mut()) {
                    span.bytes += n;
                    span.last_ns = ts_ns;
                }
                // `VA`'s data ends its response.
                if self.sides[1].skip == 0 && self.pending.front().is_some_and(|p| p.expect == Expect::Line && p.tx.hits.is_some()) {
                    if let Some(mut p) = self.pending.pop_front() {
                        p.tx.result = Some("hit");
                        out.push(Transaction { request: Some(p.req), response: p.resp, status: TxStatus::Ok, detail: Detail::Memcached(p.tx) });
                    }
                }
            }
        }
    }

    pub fn stats(&self) -> ParseStats {
        match &self.binary {
            Some(b) => b.stats,
            None => self.stats,
        }
    }
}

/// The result a one-line response names.
fn line_result(first: &[u8]) -> &'static str {
    match first {
        b"STORED" => "stored",
        b"NOT_STORED" => "not_stored",
        b"EXISTS" => "exists",
        b"NOT_FOUND" => "not_found",
        b"DELETED" => "deleted",
        b"TOUCHED" => "touched",
        b"OK" => "ok",
        b"VERSION" => "version",
        b"END" => "miss",
        b"ERROR" => "error",
        b"CLIENT_ERROR" => "client_error",
        b"SERVER_ERROR" => "server_error",
        // Meta commands' answers: HD (done), EN (miss), NF, NS, EX, MN.
        b"HD" | b"MN" => "ok",
        b"EN" => "miss",
        b"NF" => "not_found",
        b"NS" => "not_stored",
        b"EX" => "exists",
        w if !w.is_empty() && w.iter().all(u8::is_ascii_digit) => "value",
        _ => "other",
    }
}

impl StreamParser for MemcachedParser {
    fn data(&mut self, dir: Dir, ts_ns: i64, data: &[u8], out: &mut dyn TxSink) {
        if !std::mem::replace(&mut self.started, true) && matches!(data.first(), Some(0x80 | 0x81)) {
            // A text line never starts with a binary magic byte.
            self.binary = Some(Box::new(binary::Binary::new(self.max_text, self.timeout_ns, self.redact)));
        }
        match &mut self.binary {
            Some(b) => b.data(dir, ts_ns, data, out),
            None => self.read(dir, ts_ns, data, out),
        }
    }

    fn gap(&mut self, dir: Dir, _ts_ns: i64, _len: u64, out: &mut dyn TxSink) {
        if let Some(b) = &mut self.binary {
            b.gap(dir);
            return;
        }
        self.stats.gaps += 1;
        let side = &mut self.sides[di(dir)];
        side.line.clear();
        side.skip = 0;
        side.lost = true;
        match dir {
            Dir::ToServer => {
                // The command being stored lost its data: it goes out as far as seen.
                if let Some(p) = self.storing.take() {
                    self.queue(p, out);
                }
            }
            Dir::ToClient => {
                // Responses lost: the commands waiting go out unanswered.
                while let Some(p) = self.pending.pop_front() {
                    self.unanswered(p, out);
                }
            }
        }
    }

    fn expire(&mut self, now_ns: i64, out: &mut dyn TxSink) {
        if let Some(b) = &mut self.binary {
            b.expire(now_ns, out);
        }
        while self.pending.front().is_some_and(|p| p.resp.is_none() && now_ns - p.req.last_ns > self.timeout_ns) {
            if let Some(p) = self.pending.pop_front() {
                self.unanswered(p, out);
            }
        }
    }

    fn finish(&mut self, _ts_ns: i64, out: &mut dyn TxSink) {
        if let Some(b) = &mut self.binary {
            b.finish(out);
        }
        if let Some(p) = self.storing.take() {
            self.unanswered(p, out);
        }
        while let Some(p) = self.pending.pop_front() {
            self.unanswered(p, out);
        }
    }

    fn gave_up(&self) -> bool {
        false
    }

    fn stats(&self) -> ParseStats {
        MemcachedParser::stats(self)
    }
}

/// Feeds `data` as a fuzzing script: its first byte picks TCP (the text or
/// the binary protocol, told apart by the first byte as on the wire) or UDP
/// (each data step one datagram with its 8-byte frame header), and
/// redaction; the rest is steps as in [`crate::fuzz_steps`].
#[cfg(any(test, feature = "fuzzing"))]
pub fn fuzz(data: &[u8]) -> usize {
    let Some((&conf, rest)) = data.split_first() else { return 0 };
    let cfg = ParseConfig { redact: conf & 2 != 0, max_header_bytes: 64, max_text_bytes: 8, transaction_timeout_ns: 3, ..ParseConfig::default() };
    let mut out = Vec::new();
    if conf & 1 == 0 {
        crate::fuzz_feed(&mut MemcachedParser::new(&cfg), rest, &mut out);
    } else {
        let mut u = udp::UdpMemcached::new(&cfg);
        let mut ts = 0;
        for (c, step) in crate::fuzz_steps(rest) {
            ts += 1;
            // A gap has no meaning between datagrams: a lost one is simply
            // not there.
            if let crate::FuzzStep::Data(dir, b) = step {
                u.datagram(dir, ts, b, &mut out);
            }
            if c == 0xff {
                u.expire(ts, &mut out);
            }
        }
        u.finish(ts, &mut out);
    }
    out.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_hides_keys_and_keeps_their_count() {
        let cfg = ParseConfig { redact: true, ..ParseConfig::default() };
        let mut p = MemcachedParser::new(&cfg);
        let mut out = Vec::new();
        p.data(Dir::ToServer, 1, b"get session:alice b\r\n", &mut out);
        p.data(Dir::ToClient, 2, b"VALUE session:alice 0 1\r\nx\r\nEND\r\n", &mut out);
        assert_eq!((mc(&out[0]).key.as_deref(), mc(&out[0]).keys, mc(&out[0]).hits), (Some("?"), 2, Some(1)));
        // The binary protocol: a GetK of "secret".
        let mut p = MemcachedParser::new(&cfg);
        let mut out = Vec::new();
        let mut get = vec![0x80, 0x0c, 0, 6, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0];
        get.extend_from_slice(b"secret");
        p.data(Dir::ToServer, 1, &get, &mut out);
        p.finish(2, &mut out);
        assert_eq!(mc(&out[0]).key.as_deref(), Some("?"));
        assert!(!format!("{out:?}").contains("secret"));
    }

    #[test]
    fn fuzz_entry_reads_text_binary_and_udp() {
        // Text over TCP, binary over TCP, and one UDP request/response pair.
        let text = [&[0u8, 8 << 3][..], b"get abc\r\n"].concat();
        assert_eq!(fuzz(&text), 1);
        let udp_req = [&[0u8, 1, 0, 0, 0, 1, 0, 0][..], b"get k\r\n"].concat();
        let udp_resp = [&[0u8, 1, 0, 0, 0, 1, 0, 0][..], b"END\r\n"].concat();
        let script = [&[1u8, ((udp_req.len() - 1) << 3) as u8][..], &udp_req, &[(((udp_resp.len() - 1) << 3) | 1) as u8], &udp_resp].concat();
        assert_eq!(fuzz(&script), 1);
    }

    fn run(steps: &[(Dir, &[u8])]) -> Vec<Transaction> {
        let mut p = MemcachedParser::new(&ParseConfig::default());
        let mut out = Vec::new();
        for (i, (dir, b)) in steps.iter().enumerate() {
            p.data(*dir, i as i64 * 1000, b, &mut out);
        }
        p.finish(1_000_000, &mut out);
        out
    }

    fn mc(t: &Transaction) -> &MemcachedTx {
        match &t.detail {
            Detail::Memcached(m) => m,
            _ => panic!("not memcached"),
        }
    }

    #[test]
    fn get_hit_miss_and_multi_key() {
        let out = run(&[
            (Dir::ToServer, b"get a\r\nget nope\r\nget a b c\r\n"),
            (Dir::ToClient, b"VALUE a 0 5\r\nhello\r\nEND\r\nEND\r\nVALUE a 0 5\r\nhello\r\nVALUE c 1 2\r\nhi\r\nEND\r\n"),
        ]);
        assert_eq!(out.len(), 3);
        let (a, b, c) = (mc(&out[0]), mc(&out[1]), mc(&out[2]));
        assert_eq!((a.command, a.key.as_deref(), a.result, a.hits, a.value_bytes), ("get", Some("a"), Some("hit"), Some(1), Some(5)));
        assert_eq!((b.result, b.hits, b.value_bytes), (Some("miss"), Some(0), None));
        assert_eq!((c.keys, c.result, c.hits, c.value_bytes), (3, Some("partial_hit"), Some(2), Some(7)));
        assert!(out.iter().all(|t| t.status == TxStatus::Ok));
        assert_eq!(out[0].response.unwrap().bytes, (13 + 7 + 5) as u64);
        assert_eq!(out[0].latency_ns(), Some(1000));
    }

    #[test]
    fn storage_with_data_split_across_segments() {
        let out = run(&[
            (Dir::ToServer, b"set k 0 0 10\r\n01234"),
            (Dir::ToServer, b"56789\r"),
            (Dir::ToServer, b"\nadd k 0 0 1 noreply\r\nx\r\ncas k 0 0 2 99\r\nab\r\n"),
            (Dir::ToClient, b"STORED\r\nEXI"),
            (Dir::ToClient, b"STS\r\n"),
        ]);
        assert_eq!(out.len(), 3);
        let set = out.iter().find(|t| mc(t).command == "set").unwrap();
        assert_eq!((mc(set).result, mc(set).value_bytes), (Some("stored"), Some(10)));
        assert_eq!(set.request.unwrap().bytes, 14 + 12);
        assert_eq!(set.request.unwrap().last_ns, 2000);
        let add = out.iter().find(|t| mc(t).command == "add").unwrap();
        assert!(mc(add).noreply);
        assert_eq!(add.status, TxStatus::NoResponse);
        let cas = out.iter().find(|t| mc(t).command == "cas").unwrap();
        assert_eq!(mc(cas).result, Some("exists"));
    }

    #[test]
    fn errors_numbers_and_unanswered() {
        let out = run(&[
            (Dir::ToServer, b"incr n 5\r\nbogus\r\ndelete k\r\nset k 0 0 x\r\ntouch k 10\r\n"),
            (Dir::ToClient, b"15\r\nERROR\r\nNOT_FOUND\r\nCLIENT_ERROR bad data chunk\r\n"),
        ]);
        let r: Vec<_> = out.iter().map(|t| (mc(t).command, mc(t).result, t.status)).collect();
        assert_eq!(
            r,
            [
                ("incr", Some("value"), TxStatus::Ok),
                ("unknown", Some("error"), TxStatus::Error),
                ("delete", Some("not_found"), TxStatus::Ok),
                ("set", Some("client_error"), TxStatus::Error),
                ("touch", None, TxStatus::NoResponse),
            ]
        );
        assert_eq!(mc(&out[3]).error_message.as_deref(), Some("bad data chunk"));
    }

    #[test]
    fn a_gap_drops_the_message_and_reads_on() {
        let mut p = MemcachedParser::new(&ParseConfig::default());
        let mut out = Vec::new();
        p.data(Dir::ToServer, 0, b"get a\r\n", &mut out);
        p.data(Dir::ToClient, 1, b"VALUE a 0 100\r\nabc", &mut out);
        p.gap(Dir::ToClient, 2, 50, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].status, TxStatus::Partial);
        p.data(Dir::ToClient, 3, b"tail of it\r\n", &mut out);
        p.data(Dir::ToServer, 4, b"version\r\n", &mut out);
        p.data(Dir::ToClient, 5, b"VERSION 1.6.21\r\n", &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(mc(&out[1]).result, Some("version"));
        assert_eq!(p.stats().resyncs, 1);
    }

    /// A binary request or response: header, extras, key, value.
    fn bin(magic: u8, op: u8, status: u16, opaque: u32, extras: &[u8], key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut m = vec![magic, op];
        m.extend_from_slice(&(key.len() as u16).to_be_bytes());
        m.push(extras.len() as u8);
        m.push(0);
        m.extend_from_slice(&status.to_be_bytes());
        m.extend_from_slice(&((extras.len() + key.len() + value.len()) as u32).to_be_bytes());
        m.extend_from_slice(&opaque.to_be_bytes());
        m.extend_from_slice(&[0; 8]);
        m.extend_from_slice(extras);
        m.extend_from_slice(key);
        m.extend_from_slice(value);
        m
    }

    #[test]
    fn the_binary_protocol_pairs_by_opaque_and_quiet_requests_by_silence() {
        let mut p = MemcachedParser::new(&ParseConfig::default());
        let mut out = Vec::new();
        let set = bin(0x80, 0x01, 0, 1, &[0; 8], b"k1", b"hello");
        let setq = bin(0x80, 0x11, 0, 2, &[0; 8], b"k2", b"abc");
        let getkq = bin(0x80, 0x0d, 0, 3, &[], b"gone", b"");
        let getk = bin(0x80, 0x0c, 0, 4, &[], b"k1", b"");
        let incr = bin(0x80, 0x05, 0, 5, &[0; 20], b"n", b"");
        let noop = bin(0x80, 0x0a, 0, 6, &[], b"", b"");
        let del = bin(0x80, 0x04, 0, 7, &[], b"k9", b"");
        // Request bytes in awkward pieces.
        let reqs = [set, setq, getkq, getk, incr, noop, del].concat();
        for ch in reqs.chunks(7) {
            p.data(Dir::ToServer, 1, ch, &mut out);
        }
        let resps = [
            bin(0x81, 0x01, 0, 1, &[], b"", b""),
            bin(0x81, 0x0c, 0, 4, &[0; 4], b"k1", b"hello"),
            bin(0x81, 0x05, 0, 5, &[], b"", &7u64.to_be_bytes()),
            bin(0x81, 0x0a, 0, 6, &[], b"", b""),
            bin(0x81, 0x04, 1, 7, &[], b"", b"Not found"),
        ]
        .concat();
        for ch in resps.chunks(5) {
            p.data(Dir::ToClient, 2, ch, &mut out);
        }
        p.finish(3, &mut out);
        let got: Vec<_> = out.iter().map(|t| (mc(t).opcode.unwrap(), mc(t).command, mc(t).result, t.status)).collect();
        assert_eq!(
            got,
            [
                ("Set", "set", Some("stored"), TxStatus::Ok),
                ("SetQ", "set", Some("stored"), TxStatus::Ok),
                ("GetKQ", "get", Some("miss"), TxStatus::Ok),
                ("GetK", "get", Some("hit"), TxStatus::Ok),
                ("Increment", "incr", Some("value"), TxStatus::Ok),
                ("NoOp", "noop", Some("ok"), TxStatus::Ok),
                ("Delete", "delete", Some("not_found"), TxStatus::Ok),
            ]
        );
        assert!(out[1].response.is_none() && out[1].request.is_some(), "answered by silence");
        assert_eq!(mc(&out[0]).value_bytes, Some(5));
        assert_eq!((mc(&out[3]).key.as_deref(), mc(&out[3]).value_bytes, mc(&out[3]).hits), (Some("k1"), Some(5), Some(1)));
        assert_eq!(out[0].request.unwrap().bytes, 24 + 8 + 2 + 5);
        assert!(out.iter().all(|t| mc(t).protocol == "binary"));
        assert_eq!(p.stats(), ParseStats::default());
        assert!(!p.gave_up());
    }

    #[test]
    fn binary_errors_stats_and_lost_framing() {
        let mut p = MemcachedParser::new(&ParseConfig::default());
        let mut out = Vec::new();
        p.data(Dir::ToServer, 1, &bin(0x80, 0x10, 0, 9, &[], b"", b""), &mut out);
        let stats = [
            bin(0x81, 0x10, 0, 9, &[], b"pid", b"42"),
            bin(0x81, 0x10, 0, 9, &[], b"uptime", b"7"),
            bin(0x81, 0x10, 0, 9, &[], b"", b""),
        ]
        .concat();
        p.data(Dir::ToClient, 2, &stats, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((mc(&out[0]).result, out[0].response.unwrap().bytes), (Some("stats"), stats.len() as u64));
        p.data(Dir::ToServer, 3, &bin(0x80, 0x01, 0, 10, &[0; 8], b"big", &[1; 10]), &mut out);
        p.data(Dir::ToClient, 4, &bin(0x81, 0x01, 3, 10, &[], b"", b"Too large."), &mut out);
        assert_eq!(out[1].status, TxStatus::Error);
        assert_eq!(mc(&out[1]).error_message.as_deref(), Some("Value too large"));
        // A bad magic loses the framing until a segment starts with one.
        p.data(Dir::ToServer, 5, &[0x42; 30], &mut out);
        p.data(Dir::ToServer, 6, &bin(0x80, 0x0b, 0, 11, &[], b"", b""), &mut out);
        p.data(Dir::ToClient, 7, &bin(0x81, 0x0b, 0, 11, &[], b"", b"1.6.21"), &mut out);
        assert_eq!(mc(&out[2]).result, Some("version"));
        assert_eq!((p.stats().unparsed_bytes, p.stats().resyncs), (30, 1));
    }

    #[test]
    fn binary_captures_of_packetbeat() {
        use crate::testutil::parse_pcap;
        let cfg = ParseConfig::default();
        let tx = |f: &str| -> Vec<Transaction> {
            parse_pcap(&format!("packetbeat2/pcaps/memcache/{f}"), &[11211], crate::Protocol::Memcached, &cfg).concat()
        };
        let ls = tx("memcache_bin_tcp_single_load_store.pcap");
        let got: Vec<_> = ls.iter().map(|t| (mc(t).opcode.unwrap(), mc(t).result, mc(t).key.clone(), mc(t).value_bytes)).collect();
        assert_eq!(
            got,
            [
                ("Set", Some("stored"), Some("test_key".into()), Some(2046)),
                ("GetK", Some("hit"), Some("test_key".into()), Some(2046)),
                ("Quit", Some("ok"), None, None)
            ]
        );
        let cnt = tx("memcache_bin_tcp_counter_ops.pcap");
        let ops: Vec<_> = cnt.iter().map(|t| mc(t).opcode.unwrap()).collect();
        assert_eq!(ops, ["Set", "Increment", "Decrement", "GetK", "Quit"]);
        assert!(cnt.iter().all(|t| t.status == TxStatus::Ok));
        let st = tx("memcache_bin_tcp_stats.pcap");
        assert_eq!(st.iter().map(|t| mc(t).command).collect::<Vec<_>>(), ["set", "get", "stats", "quit"]);
    }

    #[test]
    fn fuzzed_bytes_never_panic() {
        let mut seed = 7u64;
        for _ in 0..2000 {
            let mut p = MemcachedParser::new(&ParseConfig::default());
            let mut out = Vec::new();
            let mut buf = Vec::new();
            for _ in 0..8 {
                buf.clear();
                for _ in 0..(seed % 40) {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let alphabet = b"get set VALUE END 0 1 5 \r\n abc noreply STORED\r\n";
                    let pick = alphabet[(seed >> 33) as usize % alphabet.len()];
                    buf.push(pick);
                }
                let dir = if seed & 1 == 0 { Dir::ToServer } else { Dir::ToClient };
                p.data(dir, 0, &buf, &mut out);
            }
            p.finish(0, &mut out);
        }
    }
}
