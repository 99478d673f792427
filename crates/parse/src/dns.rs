//! DNS over UDP ([`UdpDns`], one message per datagram) and TCP ([`TcpDns`],
//! 2-byte length-prefixed messages): queries paired with responses, with the
//! question, the flags, the rcode and the answers rendered as text the way
//! Zeek's dns.log does (A/AAAA as addresses, names for CNAME/NS/PTR/MX/SOA/SRV,
//! `TXT <len> <text>` for TXT strings).
//!
//! [`Message`] is a zero-copy view over one message: `new_checked` verifies
//! the 12-byte header, and every later read is bounds-checked, so no input
//! panics. Compressed names follow pointers only backwards and at most
//! [`MAX_JUMPS`] times, so pointer loops end.

use std::collections::VecDeque;
use std::fmt::Write as _;

use crate::{Detail, Dir, ParseConfig, ParseStats, Span, StreamParser, Transaction, TxSink, TxStatus};
use wirelog_record::SmallText;

pub use wirelog_record::dns::{class_name, opcode_name, rcode_name, type_name, DnsAnswer, DnsTx, Edns};

/// Longest name (RFC 1035: 255 octets) and most pointer jumps followed.
const MAX_NAME: usize = 255;
pub const MAX_JUMPS: usize = 64;
/// Records rendered per section: a hostile message cannot make us allocate without bound.
const MAX_RECORDS: usize = 256;

mod field {
    use std::ops::Range;
    pub const ID: Range<usize> = 0..2;
    pub const FLAGS: Range<usize> = 2..4;
    pub const QDCOUNT: Range<usize> = 4..6;
    pub const ANCOUNT: Range<usize> = 6..8;
    pub const NSCOUNT: Range<usize> = 8..10;
    pub const ARCOUNT: Range<usize> = 10..12;
    pub const HEADER_LEN: usize = ARCOUNT.end;
}

/// A zero-copy view of one DNS message.
#[derive(Clone, Copy)]
pub struct Message<'a> {
    buf: &'a [u8],
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}
fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes([
        *b.get(at)?,
        *b.get(at + 1)?,
        *b.get(at + 2)?,
        *b.get(at + 3)?,
    ]))
}

impl<'a> Message<'a> {
    /// Wraps `buf` after checking that the fixed header is there.
    pub fn new_checked(buf: &'a [u8]) -> Option<Self> {
        (buf.len() >= field::HEADER_LEN).then_some(Message { buf })
    }
    fn u16_at(&self, r: std::ops::Range<usize>) -> u16 {
        u16::from_be_bytes([self.buf[r.start], self.buf[r.start + 1]])
    }
    pub fn id(&self) -> u16 {
        self.u16_at(field::ID)
    }
    pub fn flags(&self) -> u16 {
        self.u16_at(field::FLAGS)
    }
    pub fn is_response(&self) -> bool {
        self.flags() & 0x8000 != 0
    }
    pub fn opcode(&self) -> u8 {
        ((self.flags() >> 11) & 0xf) as u8
    }
    pub fn rcode(&self) -> u8 {
        (self.flags() & 0xf) as u8
    }
    pub fn qdcount(&self) -> u16 {
        self.u16_at(field::QDCOUNT)
    }
    pub fn ancount(&self) -> u16 {
        self.u16_at(field::ANCOUNT)
    }
    pub fn nscount(&self) -> u16 {
        self.u16_at(field::NSCOUNT)
    }
    pub fn arcount(&self) -> u16 {
        self.u16_at(field::ARCOUNT)
    }

    /// Appends the name at `at` (dotted, no final dot; "" for the root) to
    /// `out`; returns the offset just after the name's in-place encoding
    /// (`out` is left as it was when the name is not valid).
    pub fn read_name(&self, at: usize, out: &mut String) -> Option<usize> {
        // Written as bytes (the text's own, taken and given back: no copy)
        // and checked as UTF-8 once for the whole name, not a char at a
        // time: a char's push costs a capacity test and its UTF-8 length,
        // and `str::from_utf8` per label a call (~80 instructions each).
        // Every byte written is ASCII (a plain byte, or `\ddd`), so the
        // check cannot fail; [`PLAIN`] answers with one load.
        let mut bytes = std::mem::take(out).into_bytes();
        let start = bytes.len();
        let end = self.labels(at, |label| {
            if bytes.len() > start {
                bytes.push(b'.');
            }
            if label.iter().all(|&c| PLAIN[usize::from(c)]) {
                bytes.extend_from_slice(label);
                return;
            }
            for &c in label {
                if PLAIN[usize::from(c)] {
                    bytes.push(c);
                } else {
                    bytes.extend_from_slice(&[b'\\', b'0' + c / 100, b'0' + c / 10 % 10, b'0' + c % 10]);
                }
            }
        });
        if end.is_none() {
            bytes.truncate(start);
        }
        match String::from_utf8(bytes) {
            Ok(text) => {
                *out = text;
                end
            }
            Err(e) => {
                // Not reached (see above); the text before the name is given back.
                let mut bytes = e.into_bytes();
                bytes.truncate(start);
                *out = String::from_utf8(bytes).unwrap_or_default();
                None
            }
        }
    }

    /// The offset just after the name at `at`, checked as [`Self::read_name`]
    /// checks it, without making its text (a record whose name is not kept).
    fn skip_name(&self, at: usize) -> Option<usize> {
        self.labels(at, |_| {})
    }

    /// Whether the valid name at `at`, whose encoding ends at `end`, is
    /// written whole in place (labels and the root, no pointer): a
    /// pointer to `at` then reads as the same name, with one jump.
    fn in_place(&self, mut at: usize, end: usize) -> bool {
        while let Some(&l) = self.buf.get(at) {
            if l & 0xc0 != 0 {
                return false;
            }
            if l == 0 {
                return at + 1 == end;
            }
            at += 1 + usize::from(l);
        }
        false
    }

    /// Calls `each` with every label of the name at `at`, in order, after
    /// checking it (length, pointers); returns the offset just after the
    /// name's in-place encoding.
    fn labels(&self, mut at: usize, mut each: impl FnMut(&[u8])) -> Option<usize> {
        let b = self.buf;
        let mut end = None;
        let mut jumps = 0;
        let mut len = 0;
        loop {
            let l = *b.get(at)? as usize;
            match l & 0xc0 {
                0x00 => {
                    if l == 0 {
                        return Some(end.unwrap_or(at + 1));
                    }
                    let label = b.get(at + 1..at + 1 + l)?;
                    len += l + 1;
                    if len > MAX_NAME {
                        return None;
                    }
                    each(label);
                    at += 1 + l;
                }
                0xc0 => {
                    let ptr = (be16(b, at)? & 0x3fff) as usize;
                    jumps += 1;
                    // Pointers go backwards and are few: a loop cannot run forever.
                    if jumps > MAX_JUMPS || ptr >= at {
                        return None;
                    }
                    end.get_or_insert(at + 2);
                    at = ptr;
                }
                _ => return None, // 0x40/0x80 label types are obsolete
            }
        }
    }

    /// The name at `at` as text, written into `scratch` (a buffer the
    /// flow keeps) and kept in place when short ([`SmallText`]: no
    /// allocation for most names), and the offset after it.
    fn name_text(&self, at: usize, scratch: &mut String) -> Option<(SmallText, usize)> {
        scratch.clear();
        let end = self.read_name(at, scratch)?;
        Some((SmallText::new(scratch), end))
    }
}

/// A name's byte written as itself (else as `\ddd`).
const fn plain(c: u8) -> bool {
    c.is_ascii_graphic() && c != b'\\' && c != b'.'
}

/// [`plain`] of every byte, made at compile time.
const PLAIN: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 256 {
        t[c] = plain(c as u8);
        c += 1;
    }
    t
};

/// A compression pointer to the first question's name (RFC 1035 4.1.4:
/// the two top bits set, offset 12, just after the header).
const QUESTION_POINTER: [u8; 2] = [0xc0, field::HEADER_LEN as u8];

/// A message parsed into what a transaction keeps.
#[derive(Debug, Default)]
struct Parsed {
    tx: DnsTx,
    is_response: bool,
}

#[cfg(test)]
fn parse(buf: &[u8]) -> Option<Parsed> {
    parse_with(buf, &mut String::new())
}

/// Parses `buf`, writing names and record data through `scratch` (the
/// flow's buffer, reused: text is allocated only when it is too long to be
/// kept in place, and an answer that repeats the question's name shares it).
fn parse_with(buf: &[u8], scratch: &mut String) -> Option<Parsed> {
    let m = Message::new_checked(buf)?;
    let f = m.flags();
    let mut tx = DnsTx {
        id: m.id(),
        opcode: m.opcode(),
        qr: f & 0x8000 != 0,
        aa: f & 0x0400 != 0,
        tc: f & 0x0200 != 0,
        rd: f & 0x0100 != 0,
        ra: f & 0x0080 != 0,
        z: f & 0x0040 != 0,
        ad: f & 0x0020 != 0,
        cd: f & 0x0010 != 0,
        rcode: m.rcode() as u16,
        answer_count: m.ancount() as u32,
        authority_count: m.nscount() as u32,
        additional_count: m.arcount() as u32,
        ..DnsTx::default()
    };
    let mut at = field::HEADER_LEN;
    // The first question's name, when written whole in place: an answer's
    // name that points to it (0xc00c, nearly every answer) is that name,
    // shared without being read again.
    let mut question_in_place = false;
    for q in 0..m.qdcount() {
        let (name, end) = m.name_text(at, scratch)?;
        let qtype = be16(buf, end)?;
        let qclass = be16(buf, end + 2)?;
        if q == 0 {
            question_in_place = m.in_place(at, end);
            tx.qname = name;
            tx.qtype = qtype;
            tx.qclass = qclass;
        }
        at = end + 4;
    }
    // Records: a truncated section keeps what was read (counts stay as declared).
    let sections = [(m.ancount(), 0u8), (m.nscount(), 1), (m.arcount(), 2)];
    'outer: for (count, sect) in sections {
        for k in 0..count as usize {
            // Read into `scratch`; made a text only for the records kept
            // (the additional section's names, the OPT record's among them,
            // and those beyond MAX_RECORDS are only stepped over).
            let kept = sect != 2 && k < MAX_RECORDS;
            let question_named = kept && question_in_place && buf.get(at..at + 2) == Some(&QUESTION_POINTER[..]);
            scratch.clear();
            let end = if question_named {
                Some(at + 2)
            } else if kept {
                m.read_name(at, scratch)
            } else {
                m.skip_name(at)
            };
            let Some(end) = end else {
                break 'outer;
            };
            let (Some(rtype), Some(class), Some(ttl), Some(rdlen)) = (
                be16(buf, end),
                be16(buf, end + 2),
                be32(buf, end + 4),
                be16(buf, end + 8),
            ) else {
                break 'outer;
            };
            let rd = end + 10;
            let rd_end = rd + rdlen as usize;
            if rd_end > buf.len() {
                break 'outer;
            }
            at = rd_end;
            if rtype == 41 {
                // OPT: class = UDP size, ttl = ext rcode | version | DO flag.
                tx.edns = Some(Edns {
                    udp_size: class,
                    ext_rcode: (ttl >> 24) as u8,
                    version: (ttl >> 16) as u8,
                    dnssec_ok: ttl & 0x8000 != 0,
                });
                continue;
            }
            if !kept {
                continue;
            }
            // Most answers repeat the question's name (a pointer to it):
            // that text is cloned (in place, or the same `Arc`), not made again.
            let name = if question_named || *scratch == *tx.qname { tx.qname.clone() } else { SmallText::new(scratch) };
            let data = render(&m, rtype, rd, rd_end, scratch);
            let rr = DnsAnswer {
                name,
                rtype,
                class,
                ttl,
                data,
            };
            match sect {
                0 => tx.answers.push(rr),
                _ => tx.authorities.push(rr),
            }
        }
    }
    if let Some(e) = tx.edns {
        tx.rcode |= (e.ext_rcode as u16) << 4;
    }
    Some(Parsed {
        is_response: tx.qr,
        tx,
    })
}

/// Record data as text, like Zeek's dns.log `answers`, written through
/// `scratch` and kept in place when short (an address, most names).
fn render(m: &Message<'_>, rtype: u16, rd: usize, end: usize, scratch: &mut String) -> SmallText {
    let b = &m.buf[rd..end];
    let mut name_at = |at: usize| m.name_text(at, scratch).map(|(n, _)| n).unwrap_or_default();
    match rtype {
        1 if b.len() == 4 => ipv4_text([b[0], b[1], b[2], b[3]]),
        2 | 5 | 12 | 39 | 6 => name_at(rd),
        15 if b.len() > 2 => name_at(rd + 2),
        33 if b.len() > 6 => name_at(rd + 6),
        46 if b.len() >= 18 => {
            let name = name_at(rd + 18);
            scratch.clear();
            let _ = write!(scratch, "RRSIG {} {}", type_name(u16::from_be_bytes([b[0], b[1]])), name);
            SmallText::new(scratch)
        }
        _ => {
            scratch.clear();
            let s = scratch;
            match rtype {
                28 if b.len() == 16 => {
                    let mut a = [0u8; 16];
                    a.copy_from_slice(b);
                    // As Zeek writes an address (dns.log's answers too) and as
                    // conn.log does here, without `fmt`.
                    wirelog_record::IpAddr16::push_v6(a, s);
                }
                16 | 99 => {
                    let mut i = 0;
                    while i < b.len() {
                        let l = b[i] as usize;
                        let t = &b[i + 1..(i + 1 + l).min(b.len())];
                        if !s.is_empty() {
                            s.push(' ');
                        }
                        let _ = write!(s, "TXT {} {}", t.len(), String::from_utf8_lossy(t));
                        i += 1 + l;
                    }
                }
                43 if b.len() >= 4 => {
                    let _ = write!(s, "{} {} {} ", u16::from_be_bytes([b[0], b[1]]), b[2], b[3]);
                    for x in &b[4..] {
                        let _ = write!(s, "{x:02X}");
                    }
                }
                _ => {
                    let _ = write!(s, "<unknown type={rtype}>");
                }
            }
            SmallText::new(s)
        }
    }
}

/// An IPv4 address as dotted text, kept in place (`Ipv4Addr::to_string`
/// allocated twice: a first guess, then its growth).
fn ipv4_text(a: [u8; 4]) -> SmallText {
    let (t, n) = wirelog_record::IpAddr16::v4_text(a);
    // Digits and dots only: always UTF-8.
    SmallText::new(std::str::from_utf8(&t[..n]).unwrap_or_default())
}

/// A query waiting for its response.
struct Pending {
    req: Span,
    tx: DnsTx,
    /// Zone transfer: responses are merged until the closing SOA.
    xfr: bool,
    /// Response part accumulated so far (zone transfers), else None.
    resp: Option<(Span, DnsTx, u32)>,
}

/// Pairs queries with responses; shared by the UDP and TCP front ends.
struct Pairer {
    timeout_ns: i64,
    pending: VecDeque<Pending>,
    stats: ParseStats,
    /// Messages that parsed.
    parsed: u64,
    /// Names and record data are written here before they become a
    /// record's text: one buffer for the flow's messages.
    scratch: String,
}

/// Queries kept waiting per flow; beyond it the oldest is reported unanswered.
const MAX_PENDING: usize = 1024;

fn status_of(tx: &DnsTx) -> TxStatus {
    if tx.rcode != 0 {
        TxStatus::Error
    } else {
        TxStatus::Ok
    }
}

fn merge_response(mut q: DnsTx, r: DnsTx, messages: u32) -> DnsTx {
    q.opcode = r.opcode;
    q.qr = r.qr;
    q.aa = r.aa;
    q.tc = r.tc;
    q.rd = r.rd;
    q.ra = r.ra;
    q.z = r.z;
    q.ad = r.ad;
    q.cd = r.cd;
    q.rcode = r.rcode;
    q.answers = r.answers;
    q.authorities = r.authorities;
    q.answer_count = r.answer_count;
    q.authority_count = r.authority_count;
    q.additional_count = r.additional_count;
    if r.edns.is_some() {
        q.edns = r.edns;
    }
    if q.qname.is_empty() {
        q.qname = r.qname;
        q.qtype = r.qtype;
        q.qclass = r.qclass;
    }
    q.response_messages = messages;
    q
}

impl Pairer {
    fn new(cfg: &ParseConfig) -> Self {
        Pairer {
            timeout_ns: cfg.transaction_timeout_ns,
            pending: VecDeque::new(),
            stats: ParseStats::default(),
            parsed: 0,
            scratch: String::new(),
        }
    }

    fn message(&mut self, ts: i64, bytes: u64, data: &[u8], out: &mut dyn TxSink) {
        let Some(p) = parse_with(data, &mut self.scratch) else {
            self.stats.malformed += 1;
            self.stats.unparsed_bytes += bytes;
            return;
        };
        self.parsed += 1;
        let span = Span {
            first_ns: ts,
            last_ns: ts,
            bytes,
        };
        if !p.is_response {
            if self.pending.capacity() == 0 {
                // Room for one: most flows have one query pending at a time,
                // and a first push would take room for four (1.8 KB a flow
                // under a flood of queries from as many sources).
                self.pending.reserve_exact(1);
            }
            if self.pending.len() >= MAX_PENDING {
                if let Some(old) = self.pending.pop_front() {
                    emit_pending(old, out);
                }
            }
            let xfr = p.tx.qtype == 252 || p.tx.qtype == 251;
            self.pending.push_back(Pending {
                req: span,
                tx: p.tx,
                xfr,
                resp: None,
            });
            return;
        }
        let r = p.tx;
        // The oldest query with the same id and question (a retransmitted
        // query stays pending and ends unanswered, as in Zeek).
        let idx = self.pending.iter().position(|q| {
            q.tx.id == r.id
                && (r.qname.is_empty()
                    || (q.tx.qname.eq_ignore_ascii_case(&r.qname) && q.tx.qtype == r.qtype))
        });
        let Some(idx) = idx else {
            let status = TxStatus::NoRequest;
            out.push(Transaction {
                request: None,
                response: Some(span),
                status,
                detail: Detail::Dns(r),
            });
            return;
        };
        let q = &mut self.pending[idx];
        if q.xfr {
            let (rs, acc, n) = q.resp.get_or_insert_with(|| {
                (
                    Span {
                        first_ns: ts,
                        ..span
                    },
                    DnsTx::default(),
                    0,
                )
            });
            rs.last_ns = ts;
            if *n == 0 {
                rs.bytes = bytes;
                *acc = r;
            } else {
                rs.bytes += bytes;
                acc.answer_count += r.answer_count;
                acc.authority_count += r.authority_count;
                acc.additional_count += r.additional_count;
                let room = MAX_RECORDS.saturating_sub(acc.answers.len());
                acc.answers.extend(r.answers.into_iter().take(room));
                if r.rcode != 0 {
                    acc.rcode = r.rcode;
                }
            }
            *n += 1;
            let soas = acc.answers.iter().filter(|a| a.rtype == 6).count();
            // A transfer ends with the zone's SOA repeated (RFC 5936), or at an error.
            if soas < 2 && acc.rcode == 0 && acc.answer_count > 0 {
                return;
            }
        } else {
            q.resp = Some((span, r, 1));
        }
        if let Some(q) = self.pending.remove(idx) {
            emit_pending(q, out);
        }
    }

    fn expire(&mut self, now: i64, out: &mut dyn TxSink) {
        let timeout = self.timeout_ns;
        let mut i = 0;
        while i < self.pending.len() {
            let p = &self.pending[i];
            let last = p.resp.as_ref().map_or(p.req.last_ns, |r| r.0.last_ns);
            if now - last > timeout {
                if let Some(p) = self.pending.remove(i) {
                    emit_pending(p, out);
                }
            } else {
                i += 1;
            }
        }
    }

    fn finish(&mut self, out: &mut dyn TxSink) {
        for p in self.pending.drain(..) {
            emit_pending(p, out);
        }
    }
}

fn emit_pending(p: Pending, out: &mut dyn TxSink) {
    match p.resp {
        Some((span, r, n)) => {
            let tx = merge_response(p.tx, r, n);
            out.push(Transaction {
                request: Some(p.req),
                response: Some(span),
                status: status_of(&tx),
                detail: Detail::Dns(tx),
            });
        }
        None => out.push(Transaction {
            request: Some(p.req),
            response: None,
            status: TxStatus::NoResponse,
            detail: Detail::Dns(p.tx),
        }),
    }
}

#[cfg(any(test, feature = "fuzzing"))]
/// Fuzzing entry: `data` as a UDP datagram (query and response) and as a
/// TCP stream split at the position its first byte names. Must never panic.
pub fn fuzz(data: &[u8]) {
    let cfg = ParseConfig::default();
    let mut out = Vec::new();
    let mut u = UdpDns::new(&cfg);
    u.datagram(Dir::ToServer, 0, data, &mut out);
    u.datagram(Dir::ToClient, 1, data, &mut out);
    u.finish(2, &mut out);
    let mut t = TcpDns::new(&cfg);
    let cut = data.first().map_or(0, |&b| b as usize).min(data.len());
    for dir in [Dir::ToServer, Dir::ToClient] {
        t.data(dir, 0, &data[..cut], &mut out);
        t.data(dir, 1, &data[cut..], &mut out);
    }
    t.finish(2, &mut out);
}

/// DNS over TCP (2-byte length-prefixed messages).
pub struct TcpDns {
    pairer: Pairer,
    sides: [TcpSide; 2],
}

#[derive(Default)]
struct TcpSide {
    /// Partial length prefix or message.
    buf: Vec<u8>,
    first_ns: i64,
    /// Lost: a gap cut a message; no way to find the next length prefix.
    lost: bool,
}

/// Largest message held while waiting for its end (the 2-byte prefix allows 65535).
const MAX_TCP_MSG: usize = 65535;

impl TcpDns {
    pub fn new(cfg: &ParseConfig) -> Self {
        TcpDns {
            pairer: Pairer::new(cfg),
            sides: [TcpSide::default(), TcpSide::default()],
        }
    }
}

impl StreamParser for TcpDns {
    fn data(&mut self, dir: Dir, ts_ns: i64, mut data: &[u8], out: &mut dyn TxSink) {
        let side = &mut self.sides[dir as usize];
        if side.lost {
            self.pairer.stats.unparsed_bytes += data.len() as u64;
            return;
        }
        while !data.is_empty() {
            if side.buf.is_empty() {
                // Fast path: whole messages straight from the packet.
                if let Some(len) = be16(data, 0) {
                    let total = 2 + len as usize;
                    if data.len() >= total {
                        self.pairer
                            .message(ts_ns, total as u64, &data[2..total], out);
                        data = &data[total..];
                        continue;
                    }
                }
                side.first_ns = ts_ns;
            }
            let need = match be16(&side.buf, 0) {
                Some(len) => 2 + len as usize,
                None => 2,
            };
            let take = (need - side.buf.len()).min(data.len());
            side.buf.extend_from_slice(&data[..take]);
            data = &data[take..];
            if side.buf.len() == need && need > 2 {
                let msg = std::mem::take(&mut side.buf);
                let first = side.first_ns;
                self.pairer.message(first, msg.len() as u64, &msg[2..], out);
                let mut msg = msg;
                msg.clear();
                side.buf = msg;
            } else if side.buf.len() == 2 && need == 2 && be16(&side.buf, 0) == Some(0) {
                // A zero-length message: nothing to parse.
                side.buf.clear();
            }
            debug_assert!(side.buf.len() <= MAX_TCP_MSG + 2);
        }
    }

    fn gap(&mut self, dir: Dir, _ts_ns: i64, _len: u64, _out: &mut dyn TxSink) {
        self.pairer.stats.gaps += 1;
        let side = &mut self.sides[dir as usize];
        // Length prefixes cannot be found again after a gap: stop this direction.
        self.pairer.stats.unparsed_bytes += side.buf.len() as u64;
        side.buf.clear();
        side.lost = true;
    }

    fn expire(&mut self, now_ns: i64, out: &mut dyn TxSink) {
        self.pairer.expire(now_ns, out);
    }

    fn finish(&mut self, _ts_ns: i64, out: &mut dyn TxSink) {
        for s in &mut self.sides {
            self.pairer.stats.unparsed_bytes += s.buf.len() as u64;
            s.buf = Vec::new();
        }
        self.pairer.finish(out);
    }

    fn gave_up(&self) -> bool {
        // Both directions lost to gaps, or the first messages were all garbage
        // (not DNS on this port).
        self.sides.iter().all(|s| s.lost)
            || (self.pairer.parsed == 0 && self.pairer.stats.malformed >= 4)
    }

    fn stats(&self) -> ParseStats {
        self.pairer.stats
    }
}

/// DNS over UDP: one message per datagram, queries paired with answers by id.
pub struct UdpDns {
    pairer: Pairer,
}

impl UdpDns {
    pub fn new(cfg: &ParseConfig) -> Self {
        UdpDns {
            pairer: Pairer::new(cfg),
        }
    }

    /// One datagram of the flow, in `dir` (ToServer = to the DNS server port).
    pub fn datagram(&mut self, _dir: Dir, ts_ns: i64, data: &[u8], out: &mut dyn TxSink) {
        // The QR bit, not the direction, says query or response: a capture
        // can see either side first, and mDNS answers go to the server port.
        self.pairer.message(ts_ns, data.len() as u64, data, out);
    }

    pub fn expire(&mut self, now_ns: i64, out: &mut dyn TxSink) {
        self.pairer.expire(now_ns, out);
    }
    /// Heap bytes held beyond the fixed state: the queries waiting for
    /// their answers (the room kept for them), for the memory budget.
    pub fn held_bytes(&self) -> usize {
        self.pairer.pending.capacity() * std::mem::size_of::<Pending>()
    }
    pub fn finish(&mut self, _ts_ns: i64, out: &mut dyn TxSink) {
        self.pairer.finish(out);
    }
    pub fn stats(&self) -> ParseStats {
        self.pairer.stats
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::testutil::{run_parser, tcp_events, udp_datagrams, Ev, Facts};

    fn dns(t: &Transaction) -> &DnsTx {
        match &t.detail {
            Detail::Dns(d) => d,
            _ => panic!("not dns"),
        }
    }

    /// A message: header fields, then raw question/answer bytes.
    fn msg(id: u16, flags: u16, counts: [u16; 4], body: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&id.to_be_bytes());
        v.extend_from_slice(&flags.to_be_bytes());
        for c in counts {
            v.extend_from_slice(&c.to_be_bytes());
        }
        v.extend_from_slice(body);
        v
    }

    const Q_EXAMPLE_A: &[u8] = b"\x07example\x03com\x00\x00\x01\x00\x01";

    fn answer_a(ttl: u32, ip: [u8; 4]) -> Vec<u8> {
        let mut v = vec![0xc0, 12, 0, 1, 0, 1];
        v.extend_from_slice(&ttl.to_be_bytes());
        v.extend_from_slice(&[0, 4]);
        v.extend_from_slice(&ip);
        v
    }

    #[test]
    fn pairs_by_id_and_question() {
        let cfg = ParseConfig {
            transaction_timeout_ns: 100,
            ..ParseConfig::default()
        };
        let mut u = UdpDns::new(&cfg);
        let mut out = Vec::new();
        let q1 = msg(1, 0x0100, [1, 0, 0, 0], Q_EXAMPLE_A);
        let q2 = msg(2, 0x0100, [1, 0, 0, 0], Q_EXAMPLE_A);
        let mut body = Q_EXAMPLE_A.to_vec();
        body.extend(answer_a(300, [1, 2, 3, 4]));
        let r2 = msg(2, 0x8180, [1, 1, 0, 0], &body);
        let r9 = msg(9, 0x8183, [1, 0, 0, 0], Q_EXAMPLE_A);
        u.datagram(Dir::ToServer, 0, &q1, &mut out);
        u.datagram(Dir::ToServer, 1, &q2, &mut out);
        u.datagram(Dir::ToClient, 5, &r2, &mut out);
        assert_eq!(out.len(), 1);
        let d = dns(&out[0]);
        assert_eq!(
            (d.id, d.qname.as_str(), d.qtype_name(), d.rcode_name()),
            (2, "example.com", "A", "NOERROR")
        );
        assert!(d.qr && d.rd && d.ra && !d.aa);
        assert_eq!(
            *d.answers,
            vec![DnsAnswer {
                name: "example.com".into(),
                rtype: 1,
                class: 1,
                ttl: 300,
                data: "1.2.3.4".into()
            }]
        );
        assert_eq!(out[0].latency_ns(), Some(4));
        u.datagram(Dir::ToClient, 6, &r9, &mut out);
        assert_eq!(out[1].status, TxStatus::NoRequest);
        assert_eq!(dns(&out[1]).rcode_name(), "NXDOMAIN");
        u.expire(50, &mut out);
        assert_eq!(out.len(), 2);
        u.expire(101, &mut out);
        assert_eq!(out.len(), 3);
        assert_eq!((out[2].status, dns(&out[2]).id), (TxStatus::NoResponse, 1));
    }

    #[test]
    fn names_compression_loops_and_truncation() {
        // A pointer to itself, a forward pointer, a name over 255 bytes: all refused, no panic.
        let looped = msg(1, 0x8180, [1, 0, 0, 0], b"\xc0\x0c\x00\x01\x00\x01");
        assert!(parse(&looped).is_none());
        let forward = msg(1, 0x8180, [1, 0, 0, 0], b"\xc0\x20\x00\x01\x00\x01");
        assert!(parse(&forward).is_none());
        let mut long = Vec::new();
        for _ in 0..5 {
            long.push(63u8);
            long.extend(std::iter::repeat_n(b'a', 63));
        }
        long.extend_from_slice(b"\x00\x00\x01\x00\x01");
        assert!(parse(&msg(1, 0, [1, 0, 0, 0], &long)).is_none());
        // Odd bytes in labels are escaped.
        let odd = msg(1, 0, [1, 0, 0, 0], b"\x03a.b\x00\x00\x01\x00\x01");
        assert_eq!(parse(&odd).unwrap().tx.qname, "a\\046b");
        // Answers cut short keep what was read; the header counts stay as sent.
        let mut body = Q_EXAMPLE_A.to_vec();
        body.extend(answer_a(1, [9, 9, 9, 9]));
        body.extend(&answer_a(1, [8, 8, 8, 8])[..7]);
        let p = parse(&msg(3, 0x8180, [1, 2, 0, 0], &body)).unwrap();
        assert_eq!((p.tx.answers.len(), p.tx.answer_count), (1, 2));
        assert!(parse(&[0u8; 11]).is_none());
    }

    #[test]
    fn longest_name_all_escaped_and_additional_names_stepped_over() {
        // 255 octets of wire form (three labels of 63 bytes, one of 61,
        // the root), every byte escaped: the largest text a name can make.
        let mut wire = Vec::new();
        for l in [63u8, 63, 63, 61] {
            wire.push(l);
            wire.extend(std::iter::repeat_n(0xffu8, l as usize));
        }
        wire.push(0);
        assert_eq!(wire.len(), MAX_NAME);
        let mut body = wire.clone();
        body.extend_from_slice(b"\x00\x01\x00\x01");
        let q = parse(&msg(1, 0, [1, 0, 0, 0], &body)).unwrap().tx.qname;
        let label = |l: usize| "\\255".repeat(l);
        assert_eq!(q.as_str(), [label(63), label(63), label(63), label(61)].join("."));
        assert_eq!(q.len(), 4 * 250 + 3);
        // A name that fails leaves the text as it was.
        let mut out = String::from("kept");
        let bad = msg(1, 0, [1, 0, 0, 0], b"\x03abc\xc0\x30");
        assert_eq!(Message::new_checked(&bad).unwrap().read_name(12, &mut out), None);
        assert_eq!(out, "kept");
        // Additional records (an A glue record, the OPT record) are stepped
        // over, the OPT read; a bad name there ends the records as before.
        let mut body = Q_EXAMPLE_A.to_vec();
        body.extend(answer_a(1, [9, 9, 9, 9]));
        body.extend(b"\x02ns\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x01\x00\x04\x01\x02\x03\x04");
        body.extend(b"\x00\x00\x29\x10\x00\x00\x00\x80\x00\x00\x00");
        let p = parse(&msg(3, 0x8180, [1, 1, 0, 2], &body)).unwrap();
        assert_eq!((p.tx.answers.len(), p.tx.authorities.len()), (1, 0));
        assert_eq!(p.tx.edns.map(|e| (e.udp_size, e.dnssec_ok)), Some((4096, true)));
        let mut cut = Q_EXAMPLE_A.to_vec();
        cut.extend(b"\x02ns\xc0\x40\x00\x29\x10\x00\x00\x00\x80\x00\x00\x00");
        let p = parse(&msg(3, 0x8180, [1, 0, 0, 1], &cut)).unwrap();
        assert_eq!(p.tx.edns, None);
    }

    #[test]
    fn names_and_addresses_kept_in_place_or_shared() {
        // Plain, escaped and compressed names; short ones kept in place.
        let odd = msg(1, 0, [1, 0, 0, 0], b"\x03a.b\x04c\\d\x01\x00\x00\x00\x01\x00\x01");
        let q = parse(&odd).unwrap().tx.qname;
        assert_eq!((q.as_str(), q.is_inline()), ("a\\046b.c\\092d\\001", true));
        let mut body = Q_EXAMPLE_A.to_vec();
        body.extend(answer_a(1, [9, 9, 9, 9]));
        let p = parse(&msg(3, 0x8180, [1, 1, 0, 0], &body)).unwrap();
        let a = &p.tx.answers[0];
        assert_eq!((a.name.as_str(), a.data.as_str()), (p.tx.qname.as_str(), "9.9.9.9"));
        assert!(a.name.is_inline() && a.data.is_inline() && p.tx.qname.is_inline());
        // A long question name is allocated once: the answers that repeat
        // it share it, one that names another owner has its own text.
        let long = "a".repeat(40);
        let mut body = vec![40u8];
        body.extend_from_slice(long.as_bytes());
        body.extend_from_slice(b"\x00\x00\x01\x00\x01");
        body.extend(answer_a(1, [9, 9, 9, 9]));
        body.extend(answer_a(1, [8, 8, 8, 8]));
        body.extend_from_slice(b"\x01b\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x01\x00\x04\x07\x07\x07\x07");
        let p = parse(&msg(3, 0x8180, [1, 3, 0, 0], &body)).unwrap();
        let q = p.tx.qname.shared().expect("a long name is shared");
        for a in &p.tx.answers[..2] {
            assert!(std::sync::Arc::ptr_eq(q, a.name.shared().unwrap()), "{:?}", a.name);
        }
        assert_eq!(p.tx.answers[2].name, format!("b.{long}").as_str());
        assert_eq!(p.tx.answers[2].data, "7.7.7.7");
        // Every octet value, in every position, as `Ipv4Addr` writes it.
        for x in 0..=255u8 {
            for a in [[x, 0, 0, 0], [1, x, 10, 255], [100, 99, 9, x], [x, x, x, x]] {
                let t = ipv4_text(a);
                assert_eq!(t, std::net::Ipv4Addr::from(a).to_string().as_str());
                assert!(t.is_inline());
            }
        }
    }

    #[test]
    fn an_answer_pointing_to_the_question_reads_as_written_in_full() {
        // The same answers with their owner names compressed (0xc00c, taken
        // from the question without reading) and written whole (read).
        let answers = |compressed: bool, names: &[&[u8]]| {
            let mut body = Vec::new();
            for (i, n) in names.iter().enumerate() {
                body.extend_from_slice(if compressed && n.starts_with(b"\x07example") { b"\xc0\x0c" } else { n });
                body.extend_from_slice(b"\x00\x01\x00\x01\x00\x00\x00\x01\x00\x04");
                body.extend_from_slice(&[10, 0, 0, i as u8]);
            }
            body
        };
        let example: &[u8] = b"\x07example\x03com\x00";
        let names = [example, b"\x03www\x07example\x03com\x00", example];
        let read = |compressed: bool| {
            let mut body = Q_EXAMPLE_A.to_vec();
            body.extend(answers(compressed, &names));
            parse(&msg(3, 0x8180, [1, 3, 0, 0], &body)).unwrap().tx
        };
        let (short, whole) = (read(true), read(false));
        assert_eq!(format!("{:?}", short.answers), format!("{:?}", whole.answers));
        let texts: Vec<&str> = short.answers.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(texts, ["example.com", "www.example.com", "example.com"]);
        // A question whose own name ends in a pointer (into the header: the
        // additional count's high byte, 0, the root) is not in place: the
        // answer's pointer to it is read, through both jumps.
        let mut body = b"\x03www\xc0\x0a\x00\x01\x00\x01".to_vec();
        body.extend_from_slice(b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x00\x01\x00\x04\x0a\x00\x00\x01");
        let m = msg(4, 0x8180, [1, 1, 0, 0], &body);
        let tx = parse(&m).unwrap().tx;
        assert_eq!((tx.qname.as_str(), tx.answers[0].name.as_str()), ("www", "www"));
        assert!(!Message::new_checked(&m).unwrap().in_place(12, 18));
        assert!(Message::new_checked(&msg(1, 0, [1, 0, 0, 0], Q_EXAMPLE_A)).unwrap().in_place(12, 25));
    }

    #[test]
    fn rdata_rendering() {
        let mut body = Q_EXAMPLE_A.to_vec();
        // CNAME -> www.example.com (compressed), MX 10 mail.example.com, TXT two strings, AAAA
        body.extend_from_slice(b"\xc0\x0c\x00\x05\x00\x01\x00\x00\x00\x01\x00\x06\x03www\xc0\x0c");
        body.extend_from_slice(
            b"\xc0\x0c\x00\x0f\x00\x01\x00\x00\x00\x01\x00\x09\x00\x0a\x04mail\xc0\x0c",
        );
        body.extend_from_slice(b"\xc0\x0c\x00\x10\x00\x01\x00\x00\x00\x01\x00\x06\x02hi\x02yo");
        body.extend_from_slice(b"\xc0\x0c\x00\x1c\x00\x01\x00\x00\x00\x01\x00\x10\x20\x01\x0d\xb8\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01");
        let p = parse(&msg(3, 0x8180, [1, 4, 0, 0], &body)).unwrap();
        let data: Vec<_> = p.tx.answers.iter().map(|a| a.data.as_str()).collect();
        assert_eq!(
            data,
            [
                "www.example.com",
                "mail.example.com",
                "TXT 2 hi TXT 2 yo",
                "2001:db8::1"
            ]
        );
    }

    #[test]
    fn tcp_split_messages_and_zone_transfer() {
        let cfg = ParseConfig::default();
        let q = msg(
            7,
            0,
            [1, 0, 0, 0],
            b"\x07example\x03com\x00\x00\xfc\x00\x01",
        );
        let soa = b"\xc0\x0c\x00\x06\x00\x01\x00\x00\x00\x01\x00\x1e\x02ns\xc0\x0c\x02hm\xc0\x0c\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x01";
        let qsec = b"\x07example\x03com\x00\x00\xfc\x00\x01";
        let mut b1 = qsec.to_vec();
        b1.extend_from_slice(&soa[..]);
        b1.extend(answer_a(1, [1, 1, 1, 1]));
        let r1 = msg(7, 0x8400, [1, 2, 0, 0], &b1);
        let mut b2 = qsec.to_vec();
        b2.extend(answer_a(1, [2, 2, 2, 2]));
        b2.extend_from_slice(&soa[..]);
        let r2 = msg(7, 0x8400, [1, 2, 0, 0], &b2);
        let framed = |m: &[u8]| {
            let mut v = (m.len() as u16).to_be_bytes().to_vec();
            v.extend_from_slice(m);
            v
        };
        let mut resp = framed(&r1);
        resp.extend(framed(&r2));
        let qf = framed(&q);
        for cut in 0..resp.len() {
            let mut p = TcpDns::new(&cfg);
            let mut out = Vec::new();
            for c in qf.chunks(3) {
                p.data(Dir::ToServer, 0, c, &mut out);
            }
            p.data(Dir::ToClient, 1, &resp[..cut], &mut out);
            p.data(Dir::ToClient, 2, &resp[cut..], &mut out);
            assert_eq!(out.len(), 1, "cut {cut}");
            let d = dns(&out[0]);
            assert_eq!(
                (
                    d.qtype_name(),
                    d.answers.len(),
                    d.response_messages,
                    d.answer_count
                ),
                ("AXFR", 4, 2, 4)
            );
            assert_eq!(out[0].response.unwrap().bytes, resp.len() as u64);
            p.finish(3, &mut out);
            assert_eq!(out.len(), 1);
        }
    }

    // ---- Packetbeat system-test facts ----

    fn udp(rel: &str) -> Vec<Transaction> {
        let cfg = ParseConfig::default();
        let mut flows: Vec<UdpDns> = Vec::new();
        let mut out = Vec::new();
        let mut last = 0;
        for d in udp_datagrams(rel, &[53]) {
            while flows.len() <= d.flow {
                flows.push(UdpDns::new(&cfg));
            }
            flows[d.flow].expire(d.ts_ns, &mut out);
            flows[d.flow].datagram(d.dir, d.ts_ns, &d.data, &mut out);
            last = d.ts_ns;
        }
        for f in &mut flows {
            f.finish(last, &mut out);
        }
        out
    }

    /// Packetbeat's `query` field: "class IN, type A, google.com".
    fn pb_query(d: &DnsTx) -> String {
        let class = if d.qclass == 1 { "IN" } else { d.qclass_name() };
        format!("class {class}, type {}, {}", d.qtype_name(), d.qname)
    }

    // Not mapped: ip/port/community_id/network.* (the tracker's record),
    // event.start/end wall-clock strings (the Span timestamps are checked
    // through the duration), `request`/`response` raw text options.

    #[test]
    fn pb_dns_google_com() {
        let mut f = Facts::new("dns_google_com.pcap");
        let t = udp("packetbeat/pcaps/dns_google_com.pcap");
        f.eq("count", t.len(), 1);
        let d = dns(&t[0]);
        f.eq("source.bytes", t[0].request.unwrap().bytes, 28);
        f.eq("destination.bytes", t[0].response.unwrap().bytes, 284);
        f.eq(
            "network.bytes",
            t[0].request.unwrap().bytes + t[0].response.unwrap().bytes,
            312,
        );
        f.eq("event.duration", t[0].latency_ns(), Some(61_782_000));
        f.eq("method", d.opcode_name(), "query");
        f.eq("query", pb_query(d), "class IN, type A, google.com".into());
        f.eq("question.type", d.qtype_name(), "A");
        f.eq("status", t[0].status, TxStatus::Ok);
        f.eq("answers", d.answers.len(), 16);
        f.eq("all A", d.answers.iter().all(|a| a.rtype == 1), true);
        f.done();
    }

    #[test]
    fn pb_dns_not_found() {
        let mut f = Facts::new("dns_not_found.pcap");
        let t = udp("packetbeat/pcaps/dns_not_found.pcap");
        f.eq("count", t.len(), 1);
        let d = dns(&t[0]);
        f.eq("method", d.opcode_name(), "query");
        f.eq(
            "query",
            pb_query(d),
            "class IN, type A, nothing.elastic.co".into(),
        );
        f.eq("question.type", d.qtype_name(), "A");
        f.eq("status", t[0].status, TxStatus::Error);
        f.eq("response_code", d.rcode_name(), "NXDOMAIN");
        f.eq("answers_count", d.answer_count, 0);
        f.eq("authorities_count", d.authority_count, 1);
        // test_include_authorities
        f.eq("authorities", d.authorities.len(), 1);
        f.done();
    }

    #[test]
    fn pb_dns_ns_txt_ds() {
        let mut f = Facts::new("dns_ns.pcap");
        let t = udp("packetbeat/pcaps/dns_ns.pcap");
        f.eq("count", t.len(), 1);
        f.eq(
            "query",
            pb_query(dns(&t[0])),
            "class IN, type NS, elastic.co".into(),
        );
        f.eq("question.type", dns(&t[0]).qtype_name(), "NS");
        f.eq("status", t[0].status, TxStatus::Ok);
        f.done();

        let mut f = Facts::new("dns_txt.pcap");
        let t = udp("packetbeat/pcaps/dns_txt.pcap");
        f.eq("count", t.len(), 1);
        let d = dns(&t[0]);
        f.eq(
            "query",
            pb_query(d),
            "class IN, type TXT, elastic.co".into(),
        );
        f.eq("question.type", d.qtype_name(), "TXT");
        f.eq("status", t[0].status, TxStatus::Ok);
        f.eq("answers", d.answers.len(), 2);
        f.eq("all TXT", d.answers.iter().all(|a| a.rtype == 16), true);
        // test_send_request_response: the response text holds the SPF include.
        f.eq(
            "spf answer",
            d.answers
                .iter()
                .any(|a| a.data.contains("include:_spf.google.com")),
            true,
        );
        f.done();

        let mut f = Facts::new("dns_udp_edns_ds.pcap");
        let t = udp("packetbeat/pcaps/dns_udp_edns_ds.pcap");
        f.eq("count", t.len(), 1);
        let d = dns(&t[0]);
        f.eq("method", d.opcode_name(), "query");
        f.eq("query", pb_query(d), "class IN, type DS, ietf.org".into());
        f.eq("question.type", d.qtype_name(), "DS");
        f.eq("status", t[0].status, TxStatus::Ok);
        let e = d.edns.unwrap_or_default();
        f.eq("opt.do", e.dnssec_ok, true);
        f.eq("opt.version", e.version, 0);
        f.eq("opt.udp_size", e.udp_size, 4000);
        f.eq(
            "opt.ext_rcode",
            rcode_name((e.ext_rcode as u16) << 4),
            "NOERROR",
        );
        f.eq("answers", d.answers.len(), 3);
        f.eq(
            "answers in ietf.org",
            d.answers.iter().all(|a| a.name.contains("ietf.org")),
            true,
        );
        f.done();
    }

    #[test]
    fn pb_dns_tcp_axfr() {
        let mut f = Facts::new("dns_tcp_axfr.pcap");
        let ev = tcp_events("packetbeat/pcaps/dns_tcp_axfr.pcap", &[53]);
        let cfg = ParseConfig::default();
        let t: Vec<_> = run_parser(&ev, || Box::new(TcpDns::new(&cfg)))
            .into_iter()
            .flatten()
            .collect();
        f.eq("count", t.len(), 1);
        let d = dns(&t[0]);
        f.eq("method", d.opcode_name(), "query");
        f.eq("query", pb_query(d), "class IN, type AXFR, etas.com".into());
        f.eq("question.type", d.qtype_name(), "AXFR");
        f.eq("status", t[0].status, TxStatus::Ok);
        f.eq("answers", d.answers.len(), 4);
        f.eq(
            "answers in etas.com",
            d.answers.iter().all(|a| a.name.contains("etas.com")),
            true,
        );
        f.done();
    }

    #[test]
    fn pb_golden_basic_auth_dns_event() {
        let mut f = Facts::new("http_basicauth.pcap (golden DNS event)");
        let t = udp("packetbeat/pcaps/http_basicauth.pcap");
        f.eq("count", t.len(), 1);
        let d = dns(&t[0]);
        f.eq("id", d.id, 42715);
        f.eq("op_code", d.opcode_name(), "query");
        f.eq(
            "question",
            (d.qname.as_str(), d.qtype_name(), d.qclass),
            ("www.example.com", "AAAA", 1),
        );
        f.eq("flags rd ra", (d.rd, d.ra), (true, true));
        f.eq(
            "flags aa tc ad cd",
            (d.aa, d.tc, d.ad, d.cd),
            (false, false, false, false),
        );
        f.eq("response_code", d.rcode_name(), "NOERROR");
        f.eq(
            "counts",
            (d.answer_count, d.authority_count, d.additional_count),
            (1, 0, 0),
        );
        let a = &d.answers[0];
        f.eq(
            "answer",
            (a.name.as_str(), type_name(a.rtype), a.ttl, a.data.as_str()),
            (
                "www.example.com",
                "AAAA",
                21353,
                "2606:2800:220:1:248:1893:25c8:1946",
            ),
        );
        f.eq("source.bytes", t[0].request.unwrap().bytes, 33);
        f.eq("destination.bytes", t[0].response.unwrap().bytes, 61);
        f.eq("event.duration", t[0].latency_ns(), Some(20_690_000));
        f.eq("status", t[0].status, TxStatus::Ok);
        f.done();
    }

    #[test]
    fn zeek_ipv6_frag_dns() {
        let mut f = Facts::new("zeek ipv6_frag_dns (dns.log)");
        let t = udp("zeek/ipv6_frag_dns/ipv6-fragmented-dns.pcap");
        f.eq("count", t.len(), 3);
        // trans_id, rtt, query, qtype, rcode, AA TC RD RA, number of answers, TTL
        type Row<'a> = (
            u16,
            Option<i64>,
            &'a str,
            u16,
            Option<&'a str>,
            [bool; 4],
            usize,
        );
        let rows: [Row; 3] = [
            (
                3903,
                Some(79_300_000),
                "txtpadding_323.n1.netalyzr.icsi.berkeley.edu",
                16,
                Some("NOERROR"),
                [true, false, true, false],
                1,
            ),
            (
                40849,
                Some(5_084_025_000),
                "txtpadding_3230.n1.netalyzr.icsi.berkeley.edu",
                16,
                Some("NOERROR"),
                [true, false, true, false],
                1,
            ),
            (
                40849,
                None,
                "txtpadding_3230.n1.netalyzr.icsi.berkeley.edu",
                16,
                None,
                [false, false, true, false],
                0,
            ),
        ];
        for (tx, (id, rtt, q, qt, rc, flags, n)) in t.iter().zip(rows) {
            let d = dns(tx);
            f.eq("trans_id", d.id, id);
            f.eq("rtt", tx.latency_ns(), rtt);
            f.eq("query", d.qname.as_str(), q);
            f.eq(
                "qtype",
                (d.qtype, d.qtype_name(), d.qclass_name()),
                (qt, "TXT", "C_INTERNET"),
            );
            f.eq("rcode", tx.response.map(|_| d.rcode_name()), rc);
            f.eq("AA TC RD RA", [d.aa, d.tc, d.rd, d.ra], flags);
            f.eq("answers", d.answers.len(), n);
            if n > 0 {
                f.eq("TTL", d.answers[0].ttl, 1);
                f.eq("answer starts", d.answers[0].data.starts_with("TXT 33 This TXT record should be ignored TXT 21 As it is just padding TXT "), true);
            }
        }
        // The answers column of dns.log, in full.
        let log =
            std::fs::read_to_string(crate::testutil::path("zeek/ipv6_frag_dns/dns.log")).unwrap();
        let rows: Vec<Vec<&str>> = log
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split('\t').collect())
            .collect();
        f.eq("dns.log rows", rows.len(), 3);
        for (tx, row) in t.iter().zip(&rows) {
            let answers = dns(tx)
                .answers
                .iter()
                .map(|a| a.data.as_str())
                .collect::<Vec<_>>()
                .join(",");
            let answers = if answers.is_empty() {
                "-".to_string()
            } else {
                answers
            };
            f.eq("answers column", answers.as_str(), row[21]);
        }
        f.done();
    }

    /// Real messages, cut, flipped and split at random, and pure garbage: no panic.
    #[test]
    fn fuzz_no_panic() {
        let mut rand = crate::xorshift(0x2545_f491_4f6c_dd1du64);
        let mut msgs = Vec::new();
        for f in [
            "dns_google_com",
            "dns_not_found",
            "dns_ns",
            "dns_txt",
            "dns_udp_edns_ds",
        ] {
            msgs.extend(
                udp_datagrams(&format!("packetbeat/pcaps/{f}.pcap"), &[53])
                    .into_iter()
                    .map(|d| d.data),
            );
        }
        msgs.extend(
            udp_datagrams("zeek/ipv6_frag_dns/ipv6-fragmented-dns.pcap", &[53])
                .into_iter()
                .map(|d| d.data),
        );
        let cfg = ParseConfig::default();
        let mut u = UdpDns::new(&cfg);
        let mut out = Vec::new();
        for m in &msgs {
            for n in 0..=m.len() {
                u.datagram(Dir::ToClient, 0, &m[..n], &mut out);
            }
            for _ in 0..200 {
                let mut v = m.clone();
                for _ in 0..1 + rand() % 4 {
                    let i = (rand() as usize) % v.len();
                    v[i] = rand() as u8;
                }
                u.datagram(Dir::ToClient, 0, &v, &mut out);
            }
        }
        for m in &msgs {
            fuzz(m);
        }
        for _ in 0..2000 {
            let g: Vec<u8> = (0..rand() % 600)
                .map(|_| if rand().is_multiple_of(3) { 0xc0 } else { rand() as u8 })
                .collect();
            u.datagram(Dir::ToServer, 0, &g, &mut out);
            fuzz(&g);
        }
        u.finish(0, &mut out);
        // TCP: the AXFR stream split at random with random gaps.
        let ev = tcp_events("packetbeat/pcaps/dns_tcp_axfr.pcap", &[53]);
        for _ in 0..300 {
            let mut p = TcpDns::new(&cfg);
            let mut out = Vec::new();
            for e in &ev {
                if let Ev::Data { dir, data, .. } = e {
                    let mut rest = &data[..];
                    while !rest.is_empty() {
                        let n = 1 + (rand() as usize) % rest.len();
                        if rand().is_multiple_of(30) {
                            p.gap(*dir, 0, n as u64, &mut out);
                        } else {
                            p.data(*dir, 0, &rest[..n], &mut out);
                        }
                        rest = &rest[n..];
                    }
                }
            }
            p.finish(0, &mut out);
        }
    }
}
