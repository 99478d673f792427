//! MongoDB's wire protocol: one transaction per request message and the
//! reply that answers it.
//!
//! Every message has a 16-byte header (`messageLength`, `requestID`,
//! `responseTo`, `opCode`, little endian); a reply's `responseTo` is its
//! request's `requestID`, which is how replies pair (by id, not by order).
//! Read: OP_MSG (2013: flag bits, sections of kind 0, the body, and kind 1,
//! document sequences; `checksumPresent` puts a CRC-32C after the sections:
//! verified as the server does, over the whole message before it
//! (src/mongo/rpc/op_msg.cpp, `calculateChecksum`), a mismatch counted as
//! malformed and the message still read; `moreToCome` on a request means no
//! reply comes) and the
//! legacy opcodes older drivers and captures use: OP_QUERY (2004, a command
//! when sent to `<db>.$cmd`), OP_REPLY (1), OP_INSERT (2002), OP_UPDATE
//! (2001), OP_DELETE (2006), OP_GET_MORE (2005), OP_KILL_CURSORS (2007).
//!
//! OP_COMPRESSED (2012; mongodb/specifications source/compression/
//! OP_COMPRESSED.md: the original opcode, the uncompressed size without the
//! header, a compressor id, the compressed message) is decompressed and read
//! as the message it wraps when it was kept whole and its uncompressed size
//! fits what the parser keeps: snappy (id 1) with the decoder written for
//! Cassandra, zlib (2) with miniz_oxide, zstd (3) with zstd, noop (0) as it
//! is; the record names the compressor. Otherwise (cut, too large, an id
//! the specification reserves, a body that does not decompress to its
//! size: the last two counted as malformed) its record says `compressed`.
//!
//! Exhaust (the OP_MSG specification, source/message/OP_MSG.md, flag bits):
//! a request with `exhaustAllowed` may get several replies, each with
//! `moreToCome` but the last, each later one answering the one before it
//! (its `responseTo` is the previous reply's `requestID`). Each reply is a
//! transaction: the first paired with the request, each later one with the
//! request's command, collection and filter, no request bytes, timed from
//! the reply before it (the wait for that batch), and all marked `exhaust`.
//! Which requests wait for a reply follows Packetbeat's `awaitsReply`
//! (packetbeat/protos/mongodb/mongodb_structs.go: OP_QUERY, OP_GET_MORE
//! and an OP_MSG without `moreToCome`); the others are reported at once.
//! As in its `opQueryParse` (mongodb_parser.go), a legacy OP_QUERY on a
//! collection is a `find`, and on `<db>.$cmd` the command is its query's
//! first key; a reply with `$err` or `writeErrors` is an error (its
//! `opReplyParse`), as is one with `ok: 0`.
//!
//! Documents are read in place ([`bson`]). A message is kept whole up to
//! `max_header_bytes` (at least 256 KiB); past that only its first part is
//! read, and a count that would need the rest (a large `firstBatch`) is
//! left unset. A message with a length outside 16..=48 MB (the server's
//! `maxMessageSizeBytes`) loses the direction's framing: its bytes are
//! skipped (counted) until a later segment starts with a plausible header.
//! A message with an opcode not in the set is skipped by its length and
//! counted as malformed.

pub mod bson;

use std::collections::VecDeque;

use bson::Doc;

use crate::{char_floor, Detail, Dir, ParseConfig, ParseStats, Span, StreamParser, Transaction, TxSink, TxStatus};

pub use wirelog_record::mongodb::MongodbTx;

const OP_REPLY: u32 = 1;
const OP_UPDATE: u32 = 2001;
const OP_INSERT: u32 = 2002;
const OP_QUERY: u32 = 2004;
const OP_GET_MORE: u32 = 2005;
const OP_DELETE: u32 = 2006;
const OP_KILL_CURSORS: u32 = 2007;
const OP_COMPRESSED: u32 = 2012;
const OP_MSG: u32 = 2013;

/// The server's largest message (`maxMessageSizeBytes`, 48 000 000).
const MAX_MESSAGE: u32 = 48_000_000;

/// Requests waiting for replies before the oldest goes out unanswered.
const MAX_PENDING: usize = 1024;

/// The longest command, database or collection name kept.
const MAX_NAME: usize = 256;

/// A plausible message header at the start of `b`: a length within
/// bounds and an opcode of the protocol (a request's `responseTo` is 0).
fn plausible_header(dir: Dir, b: &[u8]) -> bool {
    let Some(h) = b.get(..16) else { return false };
    let len = u32::from_le_bytes(h[0..4].try_into().unwrap_or_default());
    let response_to = u32::from_le_bytes(h[8..12].try_into().unwrap_or_default());
    let op = u32::from_le_bytes(h[12..16].try_into().unwrap_or_default());
    if !(16..=MAX_MESSAGE).contains(&len) {
        return false;
    }
    match dir {
        Dir::ToServer => {
            response_to == 0 && matches!(op, OP_UPDATE | OP_INSERT | OP_QUERY | OP_GET_MORE | OP_DELETE | OP_KILL_CURSORS | OP_COMPRESSED | OP_MSG)
        }
        Dir::ToClient => response_to != 0 && matches!(op, OP_REPLY | OP_MSG | OP_COMPRESSED),
    }
}

/// This protocol's content probe (see [`crate::detect`]): a client's first
/// message with a plausible header, and for OP_MSG a first section of kind
/// 0 whose document fits the message; for OP_QUERY a collection name.
pub fn probe(dir: Dir, data: &[u8]) -> crate::detect::Probe {
    if dir != Dir::ToServer || !plausible_header(dir, data) {
        return crate::detect::Probe::NotForUs;
    }
    let len = u32::from_le_bytes(data[0..4].try_into().unwrap_or_default()) as usize;
    let op = u32::from_le_bytes(data[12..16].try_into().unwrap_or_default());
    let ok = match op {
        OP_MSG => {
            let flags = data.get(16..20).map(|f| u32::from_le_bytes(f.try_into().unwrap_or_default()));
            // Only bits 0, 1 and 16 are defined; a kind-0 section first.
            flags.is_some_and(|f| f & !0x1_0003 == 0)
                && data.get(20) == Some(&0)
                && data.get(21..25).is_some_and(|l| {
                    let l = i32::from_le_bytes(l.try_into().unwrap_or_default());
                    l >= 5 && 21 + l as usize <= len
                })
        }
        OP_QUERY => data.get(20..len.min(data.len())).is_some_and(|rest| {
            rest.iter().position(|&c| c == 0).is_some_and(|n| n > 0 && rest[..n].contains(&b'.') && rest[..n].iter().all(|c| c.is_ascii_graphic()))
        }),
        _ => true,
    };
    crate::detect::Probe::certain_if(ok)
}

/// A request waiting for its reply.
struct Pending {
    id: u32,
    req: Span,
    tx: MongodbTx,
    /// A legacy command (OP_QUERY on `$cmd`): its reply's first document
    /// is the command's answer, not a found document.
    command_reply: bool,
}

/// Compressor ids (OP_COMPRESSED.md, "Compressor IDs").
fn compressor_name(id: u8) -> &'static str {
    match id {
        0 => "noop",
        1 => "snappy",
        2 => "zlib",
        3 => "zstd",
        _ => "reserved",
    }
}

/// One direction's framing state.
#[derive(Default)]
struct Side {
    /// The current message's header and as much of the rest as is kept.
    buf: Vec<u8>,
    /// Its declared length (0: the header is not complete yet).
    len: u32,
    /// Its bytes seen so far.
    seen: u32,
    first_ns: i64,
    /// Framing lost (a gap, an impossible length): bytes are skipped until
    /// a segment starts with a plausible header.
    lost: bool,
}

/// Parses one MongoDB connection.
pub struct MongodbParser {
    keep: usize,
    max_text: usize,
    timeout_ns: i64,
    sides: [Side; 2],
    pending: VecDeque<Pending>,
    stats: ParseStats,
    /// The message an OP_COMPRESSED wraps, decompressed (reused).
    inflated: Vec<u8>,
    /// The compressor of the message being read (set around request/response).
    compressor: Option<&'static str>,
}

fn di(dir: Dir) -> usize {
    match dir {
        Dir::ToServer => 0,
        Dir::ToClient => 1,
    }
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// A C string at `at`: its bytes and the offset after its 0.
fn cstr_at(b: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let rest = b.get(at..)?;
    let n = rest.iter().position(|&c| c == 0)?;
    Some((&rest[..n], at + n + 1))
}

fn name(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    s[..char_floor(&s, MAX_NAME)].to_string()
}

/// `db.collection` split at its first dot.
fn split_namespace(tx: &mut MongodbTx, ns: &[u8]) {
    match ns.iter().position(|&c| c == b'.') {
        Some(i) => {
            tx.database = Some(name(&ns[..i]));
            tx.collection = Some(name(&ns[i + 1..]));
        }
        None => tx.database = Some(name(ns)),
    }
}

impl MongodbParser {
    pub fn new(cfg: &ParseConfig) -> Self {
        MongodbParser {
            keep: cfg.max_header_bytes.max(256 * 1024),
            max_text: cfg.max_text_bytes,
            timeout_ns: cfg.transaction_timeout_ns,
            sides: Default::default(),
            pending: VecDeque::new(),
            stats: ParseStats::default(),
            inflated: Vec::new(),
            compressor: None,
        }
    }

    fn fingerprint(&self, doc: Doc<'_>, array: bool) -> Option<String> {
        let mut s = String::new();
        bson::shape(doc, array, &mut s, self.max_text, 0);
        if s.len() > self.max_text {
            s.truncate(char_floor(&s, self.max_text));
        }
        Some(s)
    }

    /// A command document (an OP_MSG body, an OP_QUERY to `$cmd`): its
    /// name, collection, database and the filter's shape. `seqs` are the
    /// message's document sequences (identifier, first document).
    fn command(&self, tx: &mut MongodbTx, body: Doc<'_>, seqs: &[(&[u8], Option<Doc<'_>>)]) {
        let Some(first) = body.first() else { return };
        let cmd = first.name;
        tx.command = Some(name(cmd));
        if let Some(coll) = first.as_str() {
            tx.collection = Some(name(coll.as_bytes()));
        }
        if let Some(db) = body.get("$db").and_then(|e| e.as_str()) {
            tx.database = Some(name(db.as_bytes()));
        }
        let lower = |s: &str| cmd.eq_ignore_ascii_case(s.as_bytes());
        if lower("getMore") {
            tx.cursor_id = first.as_i64().map(|c| c as u64);
            if let Some(c) = body.get("collection").and_then(|e| e.as_str()) {
                tx.collection = Some(name(c.as_bytes()));
            }
        }
        if lower("killCursors") {
            tx.cursor_id = body.get("cursors").and_then(|e| e.as_doc()).and_then(|d| d.first()).and_then(|e| e.as_i64()).map(|c| c as u64);
        }
        // Where the filter is, per command.
        let field = if lower("find") {
            Some("filter")
        } else if lower("count") || lower("distinct") || lower("findAndModify") {
            Some("query")
        } else if lower("aggregate") {
            Some("pipeline")
        } else {
            None
        };
        if let Some(f) = field.and_then(|f| body.get(f)) {
            if let Some(d) = f.as_doc() {
                tx.fingerprint = self.fingerprint(d, f.is_array());
            }
            return;
        }
        // update/delete: the first statement's `q`, in the body's array or
        // in a document sequence of the same name.
        let stmts = if lower("update") {
            Some("updates")
        } else if lower("delete") {
            Some("deletes")
        } else {
            None
        };
        if let Some(list) = stmts {
            let first_stmt = body
                .get(list)
                .and_then(|e| e.as_doc())
                .and_then(|d| d.first())
                .and_then(|e| e.as_doc())
                .or_else(|| seqs.iter().find(|(id, _)| *id == list.as_bytes()).and_then(|(_, d)| *d));
            if let Some(q) = first_stmt.and_then(|s| s.get("q")).and_then(|e| e.as_doc()) {
                tx.fingerprint = self.fingerprint(q, false);
            }
        }
    }

    /// A whole request message (or its kept part), `len` bytes on the wire.
    fn request(&mut self, msg: &[u8], len: u32, req: Span, out: &mut dyn TxSink) {
        let id = u32_at(msg, 4).unwrap_or(0);
        let op = u32_at(msg, 12).unwrap_or(0);
        let mut tx = MongodbTx { compressor: self.compressor, ..Default::default() };
        let mut awaits = false;
        let mut command_reply = false;
        match op {
            OP_MSG => {
                tx.op = "msg";
                let flags = u32_at(msg, 16).unwrap_or(0);
                tx.more_to_come = flags & 2 != 0;
                awaits = !tx.more_to_come;
                let end = if flags & 1 != 0 { (len as usize).saturating_sub(4) } else { len as usize };
                let mut at = 20;
                let mut body = None;
                let mut seqs: [(&[u8], Option<Doc<'_>>); 4] = [(&[], None); 4];
                let mut nseq = 0;
                while at < end.min(msg.len()) {
                    match msg[at] {
                        0 => {
                            let Some((d, n)) = Doc::at(&msg[at + 1..]) else { break };
                            body = body.or(Some(d));
                            at += 1 + n;
                        }
                        1 => {
                            let Some(size) = u32_at(msg, at + 1) else { break };
                            if let Some((ident, after)) = cstr_at(msg, at + 5) {
                                if nseq < seqs.len() {
                                    seqs[nseq] = (ident, msg.get(after..).and_then(Doc::at).map(|(d, _)| d));
                                    nseq += 1;
                                }
                            }
                            at += 1 + size as usize;
                        }
                        _ => {
                            self.stats.malformed += 1;
                            break;
                        }
                    }
                }
                match body {
                    Some(b) => self.command(&mut tx, b, &seqs[..nseq]),
                    None => self.stats.malformed += 1,
                }
            }
            OP_QUERY => {
                tx.op = "query";
                awaits = true;
                let parsed = cstr_at(msg, 20).and_then(|(ns, at)| Some((ns, msg.get(at + 8..).and_then(Doc::at)?.0)));
                match parsed {
                    Some((ns, query)) => {
                        split_namespace(&mut tx, ns);
                        // A query may be wrapped: {$query: {...}, $readPreference: ...}.
                        let inner = query.get("$query").or_else(|| query.get("query")).and_then(|e| e.as_doc());
                        if ns.ends_with(b".$cmd") {
                            command_reply = true;
                            tx.collection = None;
                            let db = tx.database.take();
                            self.command(&mut tx, inner.unwrap_or(query), &[]);
                            tx.database = tx.database.take().or(db);
                        } else {
                            tx.command = Some("find".into());
                            tx.fingerprint = self.fingerprint(inner.unwrap_or(query), false);
                        }
                    }
                    None => self.stats.malformed += 1,
                }
            }
            OP_INSERT => {
                tx.op = "insert";
                tx.command = Some("insert".into());
                tx.more_to_come = true;
                if let Some((ns, _)) = cstr_at(msg, 20) {
                    split_namespace(&mut tx, ns);
                }
            }
            OP_UPDATE | OP_DELETE => {
                tx.op = if op == OP_UPDATE { "update" } else { "delete" };
                tx.command = Some(tx.op.into());
                tx.more_to_come = true;
                if let Some((ns, at)) = cstr_at(msg, 20) {
                    split_namespace(&mut tx, ns);
                    if let Some((sel, _)) = msg.get(at + 4..).and_then(Doc::at) {
                        tx.fingerprint = self.fingerprint(sel, false);
                    }
                }
            }
            OP_GET_MORE => {
                tx.op = "get_more";
                tx.command = Some("getMore".into());
                awaits = true;
                if let Some((ns, at)) = cstr_at(msg, 20) {
                    split_namespace(&mut tx, ns);
                    tx.cursor_id = u64_at(msg, at + 4);
                }
            }
            OP_KILL_CURSORS => {
                tx.op = "kill_cursors";
                tx.command = Some("killCursors".into());
                tx.more_to_come = true;
                tx.cursor_id = (u32_at(msg, 20).unwrap_or(0) > 0).then(|| u64_at(msg, 24)).flatten();
            }
            OP_COMPRESSED => {
                tx.op = "compressed";
                tx.compressor = msg.get(24).map(|&id| compressor_name(id));
                // The original opcode says whether a reply comes; an
                // OP_MSG's flags are compressed with it: assume one does.
                awaits = matches!(u32_at(msg, 16), Some(OP_QUERY | OP_GET_MORE | OP_MSG));
            }
            _ => {
                // A reply sent by the client, or an opcode not in the set.
                self.stats.malformed += 1;
                return;
            }
        }
        if !awaits {
            out.push(Transaction { request: Some(req), response: None, status: TxStatus::NoResponse, detail: Detail::Mongodb(tx) });
            return;
        }
        if self.pending.len() >= MAX_PENDING {
            if let Some(old) = self.pending.pop_front() {
                out.push(unanswered(old));
            }
        }
        self.pending.push_back(Pending { id, req, tx, command_reply });
    }

    /// A whole reply message (or its kept part).
    fn response(&mut self, msg: &[u8], resp: Span, out: &mut dyn TxSink) {
        let response_to = u32_at(msg, 8).unwrap_or(0);
        let op = u32_at(msg, 12).unwrap_or(0);
        let at = self.pending.iter().position(|p| p.id == response_to);
        let mut p = match at.and_then(|i| self.pending.remove(i)) {
            Some(p) => p,
            None => {
                // The request was not seen (or was not a request we wait on).
                self.stats.malformed += 1;
                let tx = MongodbTx { op: "reply", ..Default::default() };
                Pending { id: response_to, req: resp, tx, command_reply: true }
            }
        };
        p.tx.compressor = p.tx.compressor.or(self.compressor);
        let seen_request = at.is_some();
        let mut error = false;
        // A reply with moreToCome (exhaust): the next reply answers this
        // one; it waits in this one's place with the request's identity.
        let more = op == OP_MSG && u32_at(msg, 16).is_some_and(|f| f & 2 != 0);
        if more {
            p.tx.exhaust = true;
            let next = MongodbTx {
                op: p.tx.op,
                command: p.tx.command.clone(),
                database: p.tx.database.clone(),
                collection: p.tx.collection.clone(),
                fingerprint: p.tx.fingerprint.clone(),
                cursor_id: p.tx.cursor_id,
                compressor: p.tx.compressor,
                exhaust: true,
                ..Default::default()
            };
            let id = u32_at(msg, 4).unwrap_or(0);
            let req = Span { first_ns: resp.last_ns, last_ns: resp.last_ns, bytes: 0 };
            if self.pending.len() >= MAX_PENDING {
                if let Some(old) = self.pending.pop_front() {
                    out.push(unanswered(old));
                }
            }
            self.pending.push_back(Pending { id, req, tx: next, command_reply: p.command_reply });
        }
        match op {
            OP_REPLY => {
                let flags = u32_at(msg, 16).unwrap_or(0);
                let cursor = u64_at(msg, 20);
                let returned = u32_at(msg, 32);
                let first = msg.get(36..).and_then(Doc::at).map(|(d, _)| d);
                // QueryFailure (bit 1): the document is `$err`.
                error |= flags & 2 != 0;
                if p.command_reply {
                    if let Some(d) = first {
                        error |= self.reply(&mut p.tx, d);
                    }
                } else {
                    p.tx.docs_returned = returned.map(u64::from);
                    p.tx.cursor_id = cursor;
                    if let Some(d) = first {
                        if let Some(e) = d.get("$err") {
                            error = true;
                            p.tx.error_message = e.as_str().map(|s| self.text(s));
                            p.tx.error_code = d.get("code").and_then(|e| e.as_i64()).map(|c| c as u64);
                        }
                    }
                }
            }
            OP_MSG => {
                let body = (msg.get(20) == Some(&0)).then(|| msg.get(21..).and_then(Doc::at)).flatten();
                match body {
                    Some((d, _)) => error |= self.reply(&mut p.tx, d),
                    None => self.stats.malformed += 1,
                }
            }
            OP_COMPRESSED => {
                p.tx.compressor = p.tx.compressor.or(msg.get(24).map(|&id| compressor_name(id)));
            }
            _ => {
                self.stats.malformed += 1;
            }
        }
        let status = if !seen_request {
            TxStatus::NoRequest
        } else if error {
            TxStatus::Error
        } else {
            TxStatus::Ok
        };
        let request = seen_request.then_some(p.req);
        out.push(Transaction { request, response: Some(resp), status, detail: Detail::Mongodb(p.tx) });
    }

    fn text(&self, s: &str) -> String {
        s[..char_floor(s, self.max_text)].to_string()
    }

    /// A command's reply document: true when it says the command failed.
    fn reply(&self, tx: &mut MongodbTx, d: Doc<'_>) -> bool {
        let mut failed = false;
        for e in d.iter() {
            match e.name {
                b"ok" => failed |= e.as_i64() == Some(0),
                b"code" => tx.error_code = tx.error_code.or(e.as_i64().map(|c| c as u64)),
                b"errmsg" | b"$err" => {
                    failed |= e.name == b"$err";
                    tx.error_message = tx.error_message.take().or(e.as_str().map(|s| self.text(s)));
                }
                b"n" => tx.n = e.as_i64().map(|n| n as u64),
                b"writeErrors" | b"writeConcernError" => {
                    failed = true;
                    let first = if e.is_array() { e.as_doc().and_then(|a| a.first()).and_then(|x| x.as_doc()) } else { e.as_doc() };
                    if let Some(w) = first {
                        tx.error_code = tx.error_code.or(w.get("code").and_then(|x| x.as_i64()).map(|c| c as u64));
                        tx.error_message = tx.error_message.take().or(w.get("errmsg").and_then(|x| x.as_str()).map(|s| self.text(s)));
                    }
                }
                b"cursor" => {
                    if let Some(c) = e.as_doc() {
                        for f in c.iter() {
                            match f.name {
                                // A getMore keeps the cursor it continues (its
                                // last reply says 0: exhausted).
                                b"id" => tx.cursor_id = tx.cursor_id.or(f.as_i64().map(|c| c as u64)),
                                b"firstBatch" | b"nextBatch" => tx.docs_returned = f.as_doc().and_then(|b| b.len()),
                                _ => {}
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        if !failed {
            // A success carries no error text worth keeping.
            tx.error_code = None;
            tx.error_message = None;
        }
        failed
    }

    /// The message the OP_COMPRESSED `msg` (`len` bytes on the wire) wraps,
    /// into `out` with its header rebuilt (the original opcode, the
    /// uncompressed length); its length. `None`: left compressed (cut by
    /// the parser's cap, larger than it keeps, or broken: counted).
    fn inflate(&mut self, msg: &[u8], len: u32, out: &mut Vec<u8>) -> Option<u32> {
        let whole = len as usize;
        if whole < 25 || msg.len() < whole {
            return None;
        }
        let original = u32_at(msg, 16)?;
        let size = i32::from_le_bytes(msg[20..24].try_into().ok()?);
        let id = msg[24];
        let src = &msg[25..whole];
        let Ok(size) = usize::try_from(size) else {
            self.stats.malformed += 1;
            return None;
        };
        if id > 3 {
            self.stats.malformed += 1;
            return None;
        }
        if size + 16 > self.keep {
            return None;
        }
        out.clear();
        out.extend_from_slice(&((size + 16) as u32).to_le_bytes());
        out.extend_from_slice(&msg[4..12]);
        out.extend_from_slice(&original.to_le_bytes());
        let ok = match id {
            0 => {
                out.extend_from_slice(src);
                src.len() == size
            }
            1 => crate::cassandra::decompress::snappy(src, out, size).is_some() && out.len() == 16 + size,
            2 => {
                out.resize(16 + size, 0);
                miniz_oxide::inflate::decompress_slice_iter_to_slice(&mut out[16..], std::iter::once(src), true, false).ok() == Some(size)
            }
            _ => {
                // One decoding context per message (no window buffer: the
                // output is the slice); compressed messages are few.
                out.resize(16 + size, 0);
                zstd::bulk::decompress_to_buffer(src, &mut out[16..]).is_ok_and(|n| n == size)
            }
        };
        if !ok {
            self.stats.malformed += 1;
            return None;
        }
        Some((size + 16) as u32)
    }

    /// An OP_MSG's CRC-32C (flag bit 0) against its bytes before it, when
    /// the message was kept whole; a mismatch is counted as malformed.
    fn verify_checksum(&mut self, msg: &[u8], len: u32) {
        let len = len as usize;
        if u32_at(msg, 12) != Some(OP_MSG) || u32_at(msg, 16).is_none_or(|f| f & 1 == 0) || len < 24 || msg.len() < len {
            return;
        }
        if crate::checksum::crc32c(&msg[..len - 4]) != u32_at(msg, len - 4).unwrap_or(0) {
            self.stats.malformed += 1;
        }
    }

    /// The kept bytes of a complete message of `dir`.
    fn message(&mut self, dir: Dir, ts_ns: i64, out: &mut dyn TxSink) {
        let side = &mut self.sides[di(dir)];
        let msg = std::mem::take(&mut side.buf);
        let span = Span { first_ns: side.first_ns, last_ns: ts_ns, bytes: side.len as u64 };
        let len = side.len;
        side.len = 0;
        side.seen = 0;
        let op = u32_at(&msg, 12).unwrap_or(0);
        let known = matches!(op, OP_REPLY | OP_UPDATE | OP_INSERT | OP_QUERY | OP_GET_MORE | OP_DELETE | OP_KILL_CURSORS | OP_COMPRESSED | OP_MSG);
        if !known {
            // Skipped by its length (Packetbeat drops the stream here).
            self.stats.malformed += 1;
        } else {
            let mut inflated = std::mem::take(&mut self.inflated);
            let unwrapped = if op == OP_COMPRESSED { self.inflate(&msg, len, &mut inflated) } else { None };
            let (body, body_len) = match unwrapped {
                Some(n) => {
                    self.compressor = msg.get(24).map(|&id| compressor_name(id));
                    (&inflated[..], n)
                }
                None => (&msg[..], len),
            };
            self.verify_checksum(body, body_len);
            match dir {
                Dir::ToServer => self.request(body, body_len, span, out),
                Dir::ToClient => self.response(body, span, out),
            }
            self.compressor = None;
            inflated.clear();
            if inflated.capacity() > 64 * 1024 {
                inflated = Vec::new();
            }
            self.inflated = inflated;
        }
        let mut msg = msg;
        msg.clear();
        // A large message's buffer is not kept for the connection's life:
        // an idle connection holds at most 64 KiB per direction.
        if msg.capacity() > 64 * 1024 {
            msg = Vec::new();
        }
        self.sides[di(dir)].buf = msg;
    }

    fn read(&mut self, dir: Dir, ts_ns: i64, mut data: &[u8], out: &mut dyn TxSink) {
        let d = di(dir);
        if self.sides[d].lost {
            if self.sides[d].len == 0 && plausible_header(dir, data) {
                self.sides[d].lost = false;
                self.stats.resyncs += 1;
            } else {
                self.stats.unparsed_bytes += data.len() as u64;
                return;
            }
        }
        while !data.is_empty() {
            let keep = self.keep;
            let side = &mut self.sides[d];
            if side.len == 0 {
                if side.buf.is_empty() {
                    side.first_ns = ts_ns;
                }
                let n = (16 - side.buf.len()).min(data.len());
                side.buf.extend_from_slice(&data[..n]);
                data = &data[n..];
                side.seen += n as u32;
                if side.buf.len() < 16 {
                    return;
                }
                let len = u32_at(&side.buf, 0).unwrap_or(0);
                if !(16..=MAX_MESSAGE).contains(&len) {
                    self.stats.unparsed_bytes += (side.buf.len() + data.len()) as u64;
                    side.buf.clear();
                    side.seen = 0;
                    side.lost = true;
                    return;
                }
                side.len = len;
            }
            let want = (side.len - side.seen) as usize;
            let n = want.min(data.len());
            let room = keep.saturating_sub(side.buf.len()).min(n);
            side.buf.extend_from_slice(&data[..room]);
            side.seen += n as u32;
            data = &data[n..];
            if side.seen == side.len {
                self.message(dir, ts_ns, out);
            }
        }
    }

    pub fn stats(&self) -> ParseStats {
        self.stats
    }
}

fn unanswered(p: Pending) -> Transaction {
    Transaction { request: Some(p.req), response: None, status: TxStatus::NoResponse, detail: Detail::Mongodb(p.tx) }
}

impl StreamParser for MongodbParser {
    fn data(&mut self, dir: Dir, ts_ns: i64, data: &[u8], out: &mut dyn TxSink) {
        self.read(dir, ts_ns, data, out);
    }

    fn gap(&mut self, dir: Dir, _ts_ns: i64, _len: u64, _out: &mut dyn TxSink) {
        // The message the gap falls in is lost; requests keep waiting,
        // since replies pair by id, not by order.
        self.stats.gaps += 1;
        let side = &mut self.sides[di(dir)];
        if side.seen > 0 {
            self.stats.unparsed_bytes += side.seen as u64;
        }
        side.buf.clear();
        side.len = 0;
        side.seen = 0;
        side.lost = true;
    }

    fn expire(&mut self, now_ns: i64, out: &mut dyn TxSink) {
        while self.pending.front().is_some_and(|p| now_ns - p.req.last_ns > self.timeout_ns) {
            if let Some(p) = self.pending.pop_front() {
                out.push(unanswered(p));
            }
        }
    }

    fn finish(&mut self, _ts_ns: i64, out: &mut dyn TxSink) {
        for side in &mut self.sides {
            if side.seen > 0 {
                // A message cut by the end of the capture.
                self.stats.unparsed_bytes += side.seen as u64;
            }
            side.buf.clear();
            side.len = 0;
            side.seen = 0;
        }
        while let Some(p) = self.pending.pop_front() {
            out.push(unanswered(p));
        }
    }

    fn gave_up(&self) -> bool {
        false
    }

    fn stats(&self) -> ParseStats {
        self.stats
    }
}

/// Feeds `data` as a fuzzing script (see [`crate::fuzz_steps`]).
#[cfg(any(test, feature = "fuzzing"))]
pub fn fuzz(data: &[u8]) -> usize {
    let mut p = MongodbParser::new(&ParseConfig { max_header_bytes: 64, max_text_bytes: 16, transaction_timeout_ns: 3, ..ParseConfig::default() });
    let mut out = Vec::new();
    crate::fuzz_feed(&mut p, data, &mut out);
    out.len()
}

#[cfg(test)]
mod tests;
