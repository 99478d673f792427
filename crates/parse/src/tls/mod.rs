//! TLS handshake metadata without decryption: what Zeek's ssl.log says
//! (version, cipher, curve, SNI, resumption, ALPN, alerts, whether the
//! handshake completed, the message history) plus the client's JA4 and the
//! DER certificates for x509.log.
//!
//! Each direction walks the record layer across arbitrary chunking. A
//! direction that does not start with TLS (SOCKS, STARTTLS, the MySQL and
//! PostgreSQL SSL requests) is scanned for the record that opens its
//! handshake, up to [`TlsLimits::max_preamble`] bytes. Plaintext handshake
//! records are reassembled into messages (a message may span records, a
//! record may hold several messages), up to the protocol's own limit (a
//! 24-bit length: a Certificate message of almost 16 MiB) and to the memory
//! the caller grants ([`TlsParser::set_allowance`]: what `--stream-memory`
//! has left). A message that does not fit is passed over by its length and
//! counted ([`crate::ParseStats::cut_bytes`]); the messages after it are
//! read as usual, so only what that message held is missing. Zeek buffers
//! a handshake message in binpac's flow buffer (the `TLSHandshake` analyzer
//! that `SSL_Analyzer::SendHandshake` feeds each plaintext handshake
//! record: zeek/zeek `src/analyzer/protocol/ssl/SSL.cc`, `tls-handshake.pac`,
//! the `HandshakeRecord` unit `&length=(msg_length + 4)` in
//! `tls-handshake-protocol.pac`), whose capacity is capped by
//! `BinPAC::flowbuffer_capacity_max` (10 MiB, `scripts/base/init-bare.zeek`):
//! a larger message is an analyzer violation there, here it is read.
//! Once a direction encrypts, records are only skipped by their length;
//! once the handshake is established, bytes are only counted, never looked
//! at. The result is a [`TlsHandshake`] per TLS session, taken with
//! [`TlsParser::take_handshakes`].
//!
//! `established` follows Zeek: TLS <= 1.2 when both sides sent
//! ChangeCipherSpec and an encrypted record follows; TLS 1.3 when both
//! sides sent application-data records after the ServerHello.

mod conn;
mod ja3;
mod ja4;
mod parser;
/// X.509 decoding lives in `record` (the output side decodes certificates
/// for x509.log, off the packet path); its tests against Zeek run here,
/// next to the handshake parser that finds the certificates.
pub mod x509 {
    pub use wirelog_record::x509::*;
    #[cfg(test)]
    mod tests;
}
#[cfg(test)]
mod tests;

pub use conn::{looks_like, probe, transaction, TlsConn};
pub use ja3::{ja3, ja3s, Ja3};
pub use ja4::{ja4, Ja4};
pub use wirelog_record::md5::md5_hex;
pub use parser::{
    alert_name, cipher_name, group_name, is_grease, version_name, ClientHello, RecordError,
    ServerHello,
};
pub use wirelog_record::sha256::{sha256, sha256_hex};

use parser::*;

use crate::{Dir, ParseConfig, ParseStats, StreamParser, TxSink};

/// Bounds on what one connection may make the parser buffer or keep.
#[derive(Clone, Copy, Debug)]
pub struct TlsLimits {
    /// Largest handshake message reassembled; a larger one is counted as
    /// malformed and the direction is given up. By default the protocol's
    /// own limit (the 24-bit length), so only memory cuts a message.
    pub max_message: usize,
    /// Plaintext bytes scanned for the start of TLS before giving up.
    pub max_preamble: usize,
    /// Certificates kept per Certificate message (the rest only counted).
    pub max_certs: usize,
    /// DER bytes kept per Certificate message.
    pub max_cert_bytes: usize,
}

impl Default for TlsLimits {
    fn default() -> Self {
        TlsLimits {
            max_message: MAX_HANDSHAKE_MESSAGE,
            max_preamble: 64 * 1024,
            max_certs: 64,
            max_cert_bytes: MAX_HANDSHAKE_MESSAGE,
        }
    }
}

/// The largest handshake message body the protocol can carry: its length
/// is 24 bits (RFC 8446 4, RFC 5246 7.4).
pub const MAX_HANDSHAKE_MESSAGE: usize = (1 << 24) - 1;

/// A plaintext alert.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Alert {
    pub level: u8,
    pub description: u8,
    /// Sent by the client.
    pub from_client: bool,
}

/// A certificate chain as sent in one Certificate message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CertChain {
    /// DER certificates, in order, up to the limits.
    pub certs: Vec<Vec<u8>>,
    /// Certificates in the message (including those not kept).
    pub count: usize,
}

/// What one TLS handshake showed, in the terms of Zeek's ssl.log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsHandshake {
    /// Time of the first TLS record of the session.
    pub ts_ns: i64,
    /// The first ClientHello (JA4 and the client's offers come from it).
    pub client_hello: Option<ClientHello>,
    pub client_hellos: u32,
    /// The last ServerHello that was not a HelloRetryRequest.
    pub server_hello: Option<ServerHello>,
    pub hello_retry: bool,
    /// Version the server chose (`supported_versions` overrides the field).
    pub version: Option<u16>,
    pub cipher: Option<u16>,
    /// Group from the ECDHE ServerKeyExchange or the TLS 1.3 key_share.
    pub curve: Option<u16>,
    pub server_name: Option<String>,
    pub resumed: bool,
    pub established: bool,
    /// ALPN protocol the server chose (raw bytes, lossily made text).
    pub next_protocol: Option<String>,
    pub last_alert: Option<Alert>,
    /// Zeek's ssl_history letters (client upper case), at most 100.
    pub ssl_history: String,
    pub ja4: Option<Ja4>,
    /// The server's Certificate message, if one was seen in plaintext.
    pub server_certs: Option<CertChain>,
    /// The client's Certificate message (possibly empty), if seen.
    pub client_certs: Option<CertChain>,
    /// The server sent a CertificateRequest.
    pub client_cert_requested: bool,
    /// The distinguished names (DER) of the CAs the server's last
    /// CertificateRequest listed (Zeek's certificate-request-info policy);
    /// `None` when no CertificateRequest was read, empty when it listed
    /// none. Names that would pass the memory granted are not kept (cut
    /// and counted, as certificates are).
    pub requested_cas: Option<Vec<Vec<u8>>>,
    /// The first ClientHello came in SSLv2 format.
    pub sslv2_hello: bool,
    /// The ClientHello carried encrypted_client_hello.
    pub ech: bool,
    /// The last ClientHello when there were several (a second one after a
    /// HelloRetryRequest): Zeek's ssl-log-ext fields are its (each hello's
    /// events overwrite them).
    pub last_client_hello: Option<ClientHello>,
    /// Extension types of every ClientHello and every ServerHello
    /// (HelloRetryRequest included), in order: Zeek's ssl-log-ext appends
    /// on each `ssl_extension` event.
    pub client_exts: Vec<u16>,
    pub server_exts: Vec<u16>,
    /// The data of every ServerHello's `signed_certificate_timestamp`
    /// extension, in order (Zeek's validate-sct adds the SCTs of each
    /// `ssl_extension_signed_certificate_timestamp` event).
    pub server_sct_lists: Vec<Vec<u8>>,
    /// The lifetime hint of the server's NewSessionTicket (seconds).
    pub ticket_lifetime_hint: Option<u32>,
    /// The OCSP response of the last CertificateStatus message (RFC 6066
    /// 8: status_type 1, non-empty), for Zeek's validate-ocsp policy;
    /// `None` when none was read in plaintext (or it would pass the memory
    /// granted: cut and counted, as certificates are).
    pub ocsp_response: Option<Vec<u8>>,
    /// Bits of the server's finite-field DH public value.
    pub dh_param_size: Option<u32>,
}

impl TlsHandshake {
    pub fn version_name(&self) -> Option<String> {
        self.version.map(version_name)
    }
    pub fn cipher_name(&self) -> Option<String> {
        self.cipher.map(cipher_name)
    }
    pub fn curve_name(&self) -> Option<String> {
        self.curve.map(group_name)
    }
    pub fn last_alert_name(&self) -> Option<String> {
        self.last_alert.map(|a| alert_name(a.description))
    }
    /// SHA-256 fingerprints of the kept server certificates (`cert_chain_fps`).
    pub fn server_cert_fps(&self) -> Option<Vec<String>> {
        self.server_certs
            .as_ref()
            .map(|c| c.certs.iter().map(|d| sha256_hex(d)).collect())
    }
    /// JA3 of the first ClientHello.
    pub fn ja3(&self) -> Option<Ja3> {
        self.client_hello.as_ref().filter(|c| !c.sslv2).map(ja3)
    }
    /// JA3S of the ServerHello.
    pub fn ja3s(&self) -> Option<Ja3> {
        self.server_hello.as_ref().map(ja3s)
    }
    /// The client sent at least one certificate.
    pub fn client_cert_sent(&self) -> bool {
        self.client_certs.as_ref().is_some_and(|c| c.count > 0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Looking for the record that opens this direction's handshake.
    Seek,
    /// Collecting an SSLv2-format ClientHello of this many bytes (header included).
    Sslv2(usize),
    /// Walking TLS records.
    Record,
    /// Only counting: handshake over, or this direction could not be followed.
    Count,
}

/// One direction's record-layer state.
#[derive(Debug)]
struct Side {
    phase: Phase,
    /// Up to 5 bytes carried over while seeking (a record start split over calls).
    carry: Vec<u8>,
    preamble: usize,
    hdr: [u8; 5],
    hdr_len: usize,
    rec_type: u8,
    rec_len: usize,
    rec_left: usize,
    alert: [u8; 2],
    alert_len: usize,
    /// Records from here on are ciphertext (after CCS; TLS 1.3 after the ServerHello).
    encrypted: bool,
    ccs: bool,
    /// An encrypted record (TLS <= 1.2) or application data (TLS 1.3) completed.
    cipher_record: bool,
    /// A handshake message split over records: bytes so far.
    msg: Vec<u8>,
    /// Bytes still to pass of a message cut for want of memory (not kept).
    skip: usize,
    bytes: u64,
    bytes_after: u64,
}

impl Side {
    fn new() -> Self {
        Side {
            phase: Phase::Seek,
            carry: Vec::new(),
            preamble: 0,
            hdr: [0; 5],
            hdr_len: 0,
            rec_type: 0,
            rec_len: 0,
            rec_left: 0,
            alert: [0; 2],
            alert_len: 0,
            encrypted: false,
            ccs: false,
            cipher_record: false,
            msg: Vec::new(),
            skip: 0,
            bytes: 0,
            bytes_after: 0,
        }
    }
}

/// TLS handshake parser for one TCP connection (see the module doc).
pub struct TlsParser {
    limits: TlsLimits,
    sides: [Side; 2],
    hs: TlsHandshake,
    started: bool,
    emitted: bool,
    tls13: bool,
    client_kex: bool,
    not_tls: bool,
    done: Vec<TlsHandshake>,
    stats: ParseStats,
    /// Bytes of state this parser may hold (messages under reassembly and
    /// certificates kept), as granted by [`TlsParser::set_allowance`].
    allowance: usize,
    /// DER bytes of the certificates kept in `hs` and `done`.
    certs_held: usize,
}

/// DER bytes of the certificates (and requested CA names) a handshake keeps.
fn chain_bytes(hs: &TlsHandshake) -> usize {
    hs.server_certs
        .iter()
        .chain(&hs.client_certs)
        .flat_map(|c| &c.certs)
        .chain(hs.requested_cas.iter().flatten())
        .chain(&hs.ocsp_response)
        .map(Vec::len)
        .sum()
}

fn idx(dir: Dir) -> usize {
    match dir {
        Dir::ToServer => 0,
        Dir::ToClient => 1,
    }
}

fn is_tls13(v: u16) -> bool {
    v == 0x0304 || v >> 8 == 0x7f || v >> 8 == 0x7e
}

impl TlsParser {
    pub fn new(cfg: &ParseConfig) -> Self {
        Self::with_limits(cfg.tls)
    }

    pub fn with_limits(limits: TlsLimits) -> Self {
        TlsParser {
            limits,
            sides: [Side::new(), Side::new()],
            hs: TlsHandshake::default(),
            started: false,
            emitted: false,
            tls13: false,
            client_kex: false,
            not_tls: false,
            done: Vec::new(),
            stats: ParseStats::default(),
            allowance: usize::MAX,
            certs_held: 0,
        }
    }

    /// How many bytes of state (messages under reassembly, certificates
    /// kept) the parser may hold from now on: the tracker grants what it
    /// holds already plus what the shared `--stream-memory` budget has
    /// left. A message that would pass it is cut (passed over by its
    /// length, counted); a certificate that would is not kept. Unlimited
    /// until called.
    pub fn set_allowance(&mut self, bytes: usize) {
        self.allowance = bytes;
    }

    /// Bytes of state held now (what [`TlsParser::set_allowance`] bounds).
    pub fn held(&self) -> usize {
        self.sides.iter().map(|s| s.msg.capacity() + s.carry.capacity()).sum::<usize>() + self.certs_held
    }

    /// Handshakes finished (established) or ended with the connection.
    pub fn take_handshakes(&mut self) -> Vec<TlsHandshake> {
        self.certs_held = chain_bytes(&self.hs);
        std::mem::take(&mut self.done)
    }

    /// The handshake so far (not yet emitted).
    pub fn current(&self) -> &TlsHandshake {
        &self.hs
    }

    /// Bytes seen in `dir`, and of those the ones after the handshake
    /// (counted only).
    pub fn bytes(&self, dir: Dir) -> (u64, u64) {
        let s = &self.sides[idx(dir)];
        (s.bytes, s.bytes_after)
    }

    /// Whether the handshake is over (parsing has stopped, bytes are only counted).
    pub fn handshake_done(&self) -> bool {
        self.emitted
    }

    /// Capacity of the buffers the parser holds (for the "never buffered
    /// after the handshake" check).
    pub fn buffered_capacity(&self) -> usize {
        self.sides
            .iter()
            .map(|s| s.msg.capacity() + s.carry.capacity())
            .sum()
    }

    fn history(&mut self, i: usize, letter: u8) {
        if self.hs.ssl_history.len() < 100 {
            let c = if i == 0 {
                letter.to_ascii_uppercase()
            } else {
                letter.to_ascii_lowercase()
            };
            self.hs.ssl_history.push(c as char);
        }
    }

    fn start(&mut self, ts_ns: i64) {
        if !self.started {
            self.started = true;
            self.hs.ts_ns = ts_ns;
        }
    }

    /// Stops following direction `i` (malformed input, gap in the handshake).
    fn fail(&mut self, i: usize) {
        let s = &mut self.sides[i];
        s.phase = Phase::Count;
        s.msg = Vec::new();
        s.carry = Vec::new();
        if i == 0 && !self.started {
            self.not_tls = true;
        }
    }

    fn emit(&mut self) {
        if !self.emitted && self.started {
            self.emitted = true;
            self.done.push(std::mem::take(&mut self.hs));
        }
        self.emitted = true;
        for s in &mut self.sides {
            s.phase = Phase::Count;
            s.msg = Vec::new();
            s.carry = Vec::new();
        }
    }

    fn seek<'a>(&mut self, i: usize, ts: i64, data: &'a [u8]) -> &'a [u8] {
        let client = i == 0;
        let s = &mut self.sides[i];
        // Bytes carried from the last call are scanned again with the new
        // ones; only then is the (short) copy needed.
        let owned;
        let buf: &[u8] = if s.carry.is_empty() {
            data
        } else {
            let mut v = std::mem::take(&mut s.carry);
            v.extend_from_slice(data);
            owned = v;
            &owned
        };
        let carried = buf.len() - data.len();
        if client && s.preamble == 0 && starts_sslv2_hello(buf) {
            let need = ((((buf[0] & 0x7f) as usize) << 8) | buf[1] as usize) + 2;
            s.phase = Phase::Sslv2(need);
            self.start(ts);
            let left = self.sslv2(i, need, &buf[..carried]);
            debug_assert!(left.is_empty());
            return data;
        }
        if let Some(p) = (0..buf.len()).find(|&p| starts_tls(&buf[p..], client)) {
            self.stats.unparsed_bytes += p as u64;
            s.phase = Phase::Record;
            self.start(ts);
            if p < carried {
                let left = self.record(i, &buf[p..carried]);
                debug_assert!(left.is_empty());
                return data;
            }
            return &data[p - carried..];
        }
        let keep = buf.len().min(5);
        let dropped = buf.len() - keep;
        s.carry.extend_from_slice(&buf[dropped..]);
        s.preamble += dropped;
        self.stats.unparsed_bytes += dropped as u64;
        if s.preamble > self.limits.max_preamble {
            self.fail(i);
        }
        &[]
    }

    fn sslv2<'a>(&mut self, i: usize, need: usize, data: &'a [u8]) -> &'a [u8] {
        let s = &mut self.sides[i];
        let n = (need - s.msg.len()).min(data.len());
        s.msg.extend_from_slice(&data[..n]);
        if s.msg.len() == need {
            let msg = std::mem::take(&mut s.msg);
            s.phase = Phase::Record;
            match sslv2_client_hello(&msg[2..]) {
                Some(ch) => {
                    self.hs.sslv2_hello = true;
                    self.history(0, b'C');
                    self.on_client_hello(ch);
                }
                None => {
                    self.stats.malformed += 1;
                    self.fail(i);
                }
            }
        }
        &data[n..]
    }

    fn record<'a>(&mut self, i: usize, mut data: &'a [u8]) -> &'a [u8] {
        let s = &mut self.sides[i];
        if s.hdr_len < 5 {
            let n = (5 - s.hdr_len).min(data.len());
            s.hdr[s.hdr_len..s.hdr_len + n].copy_from_slice(&data[..n]);
            s.hdr_len += n;
            data = &data[n..];
            if s.hdr_len < 5 {
                return data;
            }
            match record_header(&s.hdr) {
                Ok(h) => {
                    s.rec_type = h.content_type;
                    s.rec_len = h.len;
                    s.rec_left = h.len;
                    s.alert_len = 0;
                    self.record_start(i);
                }
                Err(_) => {
                    self.stats.unparsed_bytes += data.len() as u64;
                    self.violation(i);
                    return &[];
                }
            }
        }
        let s = &mut self.sides[i];
        let n = s.rec_left.min(data.len());
        let body = &data[..n];
        s.rec_left -= n;
        match s.rec_type {
            CT_HANDSHAKE if !s.encrypted => self.handshake_bytes(i, body),
            CT_ALERT if s.rec_len == 2 => {
                let k = body.len().min(2 - s.alert_len);
                s.alert[s.alert_len..s.alert_len + k].copy_from_slice(&body[..k]);
                s.alert_len += k;
            }
            _ => {}
        }
        if self.sides[i].phase == Phase::Record && self.sides[i].rec_left == 0 {
            self.sides[i].hdr_len = 0;
            self.record_end(i);
        }
        &data[n..]
    }

    fn record_start(&mut self, i: usize) {
        let (t, encrypted) = (self.sides[i].rec_type, self.sides[i].encrypted);
        match t {
            CT_CCS => {
                self.history(i, b'I');
                self.sides[i].ccs = true;
                if !self.tls13 {
                    self.sides[i].encrypted = true;
                }
                // An abbreviated handshake resumed by session ticket: the
                // client changes ciphers without a key exchange.
                if i == 0 && !self.client_kex {
                    if let Some(ch) = &self.hs.client_hello {
                        if ch.session_id.is_empty() && ch.session_ticket_len.is_some_and(|n| n > 0)
                        {
                            self.hs.resumed = true;
                        }
                    }
                }
            }
            CT_HEARTBEAT if !encrypted => self.history(i, b'B'),
            _ => {}
        }
    }

    fn record_end(&mut self, i: usize) {
        let s = &mut self.sides[i];
        match s.rec_type {
            CT_ALERT if s.rec_len == 2 && s.alert_len == 2 => {
                let (level, description) = (s.alert[0], s.alert[1]);
                self.hs.last_alert = Some(Alert {
                    level,
                    description,
                    from_client: i == 0,
                });
                self.history(i, b'L');
            }
            CT_CCS => {}
            CT_APPDATA if self.tls13 => s.cipher_record = true,
            _ if !self.tls13 && s.ccs => s.cipher_record = true,
            _ => {}
        }
        let both = |f: fn(&Side) -> bool| self.sides.iter().all(f);
        if !self.tls13 && both(|s| s.ccs) && self.sides[i].cipher_record
            || self.tls13 && both(|s| s.cipher_record)
        {
            self.hs.established = true;
            self.emit();
        }
    }

    fn handshake_bytes(&mut self, i: usize, body: &[u8]) {
        let mut rest = body;
        while !rest.is_empty() {
            // A message cut for want of memory: passed over by its length.
            let skip = self.sides[i].skip;
            if skip > 0 {
                let k = skip.min(rest.len());
                self.sides[i].skip -= k;
                rest = &rest[k..];
                continue;
            }
            if self.sides[i].msg.is_empty() {
                // Common case: whole messages inside this record, parsed in place.
                if rest.len() < 4 {
                    self.sides[i].msg.extend_from_slice(rest);
                    return;
                }
                let len = ((rest[1] as usize) << 16) | ((rest[2] as usize) << 8) | rest[3] as usize;
                if len > self.limits.max_message {
                    self.too_big(i, rest.len());
                    return;
                }
                if rest.len() >= 4 + len {
                    self.on_message(i, rest[0], &rest[4..4 + len]);
                    rest = &rest[4 + len..];
                    if self.sides[i].phase != Phase::Record || self.sides[i].encrypted {
                        return;
                    }
                    continue;
                }
                // The message goes on in later records: keep it whole if
                // the memory granted allows, else pass over it.
                if !self.admit(i, rest[0], 4 + len, 0) {
                    continue;
                }
                let msg = &mut self.sides[i].msg;
                msg.reserve_exact(4 + len);
                msg.extend_from_slice(rest);
                return;
            }
            // A message begun in an earlier record.
            let have = self.sides[i].msg.len();
            if have < 4 {
                let k = (4 - have).min(rest.len());
                self.sides[i].msg.extend_from_slice(&rest[..k]);
                rest = &rest[k..];
                if self.sides[i].msg.len() < 4 {
                    return;
                }
                let m = &self.sides[i].msg;
                let (typ, len) = (m[0], ((m[1] as usize) << 16) | ((m[2] as usize) << 8) | m[3] as usize);
                if len > self.limits.max_message {
                    self.too_big(i, 4 + rest.len());
                    return;
                }
                if !self.admit(i, typ, 4 + len, 4) {
                    continue;
                }
                self.sides[i].msg.reserve_exact(len);
            }
            let m = &self.sides[i].msg;
            let len = ((m[1] as usize) << 16) | ((m[2] as usize) << 8) | m[3] as usize;
            let k = (4 + len - m.len()).min(rest.len());
            self.sides[i].msg.extend_from_slice(&rest[..k]);
            rest = &rest[k..];
            if self.sides[i].msg.len() < 4 + len {
                return;
            }
            // Whole: parsed, then the memory given back (a big Certificate
            // message must not stay resident).
            let msg = std::mem::take(&mut self.sides[i].msg);
            self.on_message(i, msg[0], &msg[4..]);
            drop(msg);
            if self.sides[i].phase != Phase::Record || self.sides[i].encrypted {
                return;
            }
        }
    }

    /// A message of `total` bytes (header included) of type `typ` starts on
    /// side `i`, `have` of its bytes already buffered: whether it may be
    /// kept whole. If not it is cut: its letter still goes into the
    /// history (its type is known), its bytes are passed over and counted.
    fn admit(&mut self, i: usize, typ: u8, total: usize, have: usize) -> bool {
        if self.held() - self.sides[i].msg.capacity() + total <= self.allowance {
            return true;
        }
        self.history(i, history_letter(typ));
        self.stats.cut_bytes += total as u64;
        self.stats.unparsed_bytes += total as u64;
        self.sides[i].skip = total - have;
        self.sides[i].msg = Vec::new();
        false
    }

    fn too_big(&mut self, i: usize, n: usize) {
        self.stats.unparsed_bytes += n as u64;
        self.violation(i);
    }

    /// Input from direction `i` is not TLS as it must be: like Zeek's
    /// analyzer violation, parsing stops for the whole connection (what was
    /// learnt so far is still reported at `finish`).
    fn violation(&mut self, i: usize) {
        self.stats.malformed += 1;
        self.fail(i);
        self.fail(1 - i);
    }

    fn on_message(&mut self, i: usize, typ: u8, body: &[u8]) {
        let retry = typ == HS_SERVER_HELLO && body.get(2..34).is_some_and(|r| r == HRR_RANDOM);
        self.history(i, if retry { b'J' } else { history_letter(typ) });
        match (i, typ) {
            (0, HS_CLIENT_HELLO) => match client_hello(body) {
                Some(ch) => self.on_client_hello(ch),
                None => self.stats.malformed += 1,
            },
            (1, HS_SERVER_HELLO) => match server_hello(body) {
                Some(sh) => self.on_server_hello(sh),
                None => self.stats.malformed += 1,
            },
            (_, HS_CERTIFICATE) => match certificates(body) {
                Some(list) => {
                    let mut chain = CertChain {
                        certs: Vec::new(),
                        count: list.len(),
                    };
                    let mut kept = 0;
                    for der in list.into_iter().take(self.limits.max_certs) {
                        kept += der.len();
                        if kept > self.limits.max_cert_bytes {
                            break;
                        }
                        // The message itself is being given back; what is
                        // kept of it must fit what was granted.
                        if self.held() + der.len() > self.allowance {
                            self.stats.cut_bytes += der.len() as u64;
                            self.stats.unparsed_bytes += der.len() as u64;
                            break;
                        }
                        self.certs_held += der.len();
                        chain.certs.push(der.to_vec());
                    }
                    if i == 0 {
                        self.hs.client_certs = Some(chain);
                    } else {
                        self.hs.server_certs = Some(chain);
                    }
                }
                None => self.stats.malformed += 1,
            },
            // Only an ECDHE key exchange starts with ECParameters.
            (1, HS_SERVER_KEY_EXCHANGE) if self.hs.cipher.is_some_and(cipher_is_ecdhe) => {
                if let Some(g) = ske_named_curve(body) {
                    self.hs.curve = Some(g);
                }
            }
            (1, HS_SERVER_KEY_EXCHANGE) if self.hs.cipher.is_some_and(cipher_is_dhe) => {
                self.hs.dh_param_size = ske_dh_param_bits(body);
            }
            // NewSessionTicket: its first field (RFC 5077 3.3; Zeek's
            // `SessionTicketHandshake`).
            (1, 4) => {
                if let Some(b) = body.get(..4) {
                    self.hs.ticket_lifetime_hint = Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                }
            }
            (1, 13) => {
                self.hs.client_cert_requested = true;
                let version = self.hs.version.unwrap_or(0);
                match certificate_request_cas(body, version) {
                    Some(list) => {
                        // A later CertificateRequest (renegotiation) replaces
                        // the list, as Zeek's handler assigns it.
                        let old: usize = self.hs.requested_cas.iter().flatten().map(Vec::len).sum();
                        self.certs_held = self.certs_held.saturating_sub(old);
                        let mut kept = Vec::new();
                        for dn in list {
                            if self.held() + dn.len() > self.allowance {
                                self.stats.cut_bytes += dn.len() as u64;
                                self.stats.unparsed_bytes += dn.len() as u64;
                                break;
                            }
                            self.certs_held += dn.len();
                            kept.push(dn.to_vec());
                        }
                        self.hs.requested_cas = Some(kept);
                    }
                    None => self.stats.malformed += 1,
                }
            }
            (_, HS_CERTIFICATE_STATUS) => self.on_certificate_status(body),
            (1, 6) => self.hs.hello_retry = true,
            (0, HS_CLIENT_KEY_EXCHANGE) => self.client_kex = true,
            _ => {}
        }
    }

    /// CertificateStatus (RFC 6066 8), from either side as Zeek takes it:
    /// its `CertificateStatus` unit (zeek/zeek a13de64f
    /// `src/analyzer/protocol/ssl/tls-handshake-protocol.pac:180-184`)
    /// reads status_type, a 24-bit length it does not check, and the rest
    /// of the message as the response; `proc_certificate_status`
    /// (`tls-handshake-analyzer.pac:419-442`) raises `ssl_stapled_ocsp`
    /// only for status_type 1 (ocsp) with a non-empty response, which
    /// validate-ocsp.zeek:34-37 keeps (a later one replaces it).
    fn on_certificate_status(&mut self, body: &[u8]) {
        let Some(response) = body.get(4..).filter(|r| body[0] == 1 && !r.is_empty()) else {
            return;
        };
        let old = self.hs.ocsp_response.as_ref().map_or(0, Vec::len);
        self.certs_held = self.certs_held.saturating_sub(old);
        self.hs.ocsp_response = None;
        if self.held() + response.len() > self.allowance {
            self.stats.cut_bytes += response.len() as u64;
            self.stats.unparsed_bytes += response.len() as u64;
            return;
        }
        self.certs_held += response.len();
        self.hs.ocsp_response = Some(response.to_vec());
    }

    fn on_client_hello(&mut self, ch: ClientHello) {
        self.hs.client_hellos += 1;
        self.hs.client_exts.extend_from_slice(&ch.extensions);
        if self.hs.client_hello.is_some() {
            self.hs.last_client_hello = Some(ch);
            return;
        }
        self.hs.server_name = ch.server_name.clone();
        self.hs.ech = ch.ech;
        self.hs.ja4 = Some(ja4(&ch));
        self.hs.client_hello = Some(ch);
    }

    fn on_server_hello(&mut self, mut sh: ServerHello) {
        self.hs.server_exts.extend_from_slice(&sh.extensions);
        if let Some(l) = sh.sct_list.take() {
            self.hs.server_sct_lists.push(l);
        }
        let version = sh.selected_version.unwrap_or(sh.version);
        self.hs.version = Some(version);
        self.hs.cipher = Some(sh.cipher);
        if let Some(g) = sh.key_share_group {
            self.hs.curve = Some(g);
        }
        if sh.retry {
            // Only TLS 1.3 retries; the CCS a compatibility-mode server sends
            // right after it must not switch the server side to ciphertext,
            // the real ServerHello follows in plaintext.
            self.hs.hello_retry = true;
            self.tls13 = true;
            return;
        }
        if let Some(p) = &sh.alpn {
            self.hs.next_protocol = Some(String::from_utf8_lossy(p).into_owned());
        }
        let ch = self.hs.client_hello.as_ref();
        if sh.pre_shared_key && ch.is_some_and(|c| c.pre_shared_key) {
            self.hs.resumed = true;
        }
        // An echoed session id means resumption only before TLS 1.3 (a
        // TLS 1.3 server echoes it for middlebox compatibility). As Zeek,
        // only 0x0304 and the 0x7fNN drafts count as TLS 1.3 here, an
        // all-zero id counts as none.
        let sid_ok =
            |c: &ClientHello| !c.session_id.is_empty() && c.session_id.iter().any(|&b| b != 0);
        if version != 0x0304
            && version >> 8 != 0x7f
            && ch.is_some_and(|c| sid_ok(c) && c.session_id == sh.session_id)
        {
            self.hs.resumed = true;
        }
        if is_tls13(version) {
            self.tls13 = true;
            for s in &mut self.sides {
                s.encrypted = true;
            }
        }
        self.hs.server_hello = Some(sh);
    }
}

impl StreamParser for TlsParser {
    fn data(&mut self, dir: Dir, ts_ns: i64, data: &[u8], _out: &mut dyn TxSink) {
        let i = idx(dir);
        self.sides[i].bytes += data.len() as u64;
        if self.sides[i].phase == Phase::Count {
            if self.emitted {
                self.sides[i].bytes_after += data.len() as u64;
            }
            return;
        }
        let mut rest = data;
        while !rest.is_empty() {
            rest = match self.sides[i].phase {
                Phase::Seek => self.seek(i, ts_ns, rest),
                Phase::Sslv2(need) => self.sslv2(i, need, rest),
                Phase::Record => self.record(i, rest),
                Phase::Count => {
                    if self.emitted {
                        self.sides[i].bytes_after += rest.len() as u64;
                    }
                    break;
                }
            };
        }
    }

    fn gap(&mut self, dir: Dir, _ts_ns: i64, len: u64, _out: &mut dyn TxSink) {
        self.stats.gaps += 1;
        let i = idx(dir);
        let s = &mut self.sides[i];
        match s.phase {
            Phase::Count => {}
            // Inside a record whose body is skipped anyway (or inside a
            // handshake message cut for want of memory): skip the hole too.
            Phase::Record
                if s.hdr_len == 5
                    && (s.rec_left as u64) >= len
                    && (s.encrypted || s.rec_type != CT_HANDSHAKE || s.skip as u64 >= len)
                    && s.rec_type != CT_ALERT =>
            {
                if s.rec_type == CT_HANDSHAKE && !s.encrypted {
                    s.skip -= len as usize;
                }
                s.rec_left -= len as usize;
                if s.rec_left == 0 {
                    s.hdr_len = 0;
                    self.record_end(i);
                }
            }
            _ => {
                self.stats.unparsed_bytes += len;
                self.fail(i);
            }
        }
    }

    fn expire(&mut self, _now_ns: i64, _out: &mut dyn TxSink) {}

    fn finish(&mut self, _ts_ns: i64, _out: &mut dyn TxSink) {
        if !self.emitted && self.started {
            self.emitted = true;
            self.done.push(std::mem::take(&mut self.hs));
        }
    }

    /// True when nothing more can be learnt (not TLS, or a violation stopped
    /// both directions before the handshake completed). The caller should
    /// still call `finish` and [`TlsParser::take_handshakes`]: what was seen
    /// before is reported. After an established handshake this stays false
    /// and bytes are only counted.
    fn gave_up(&self) -> bool {
        self.not_tls || (!self.emitted && self.sides.iter().all(|s| s.phase == Phase::Count))
    }

    fn stats(&self) -> ParseStats {
        self.stats
    }
}

#[cfg(any(test, feature = "fuzzing"))]
/// Fuzzing entry: `data` is a script of steps for one connection. Each step
/// is a control byte `c` (bit 0: direction; bits 1-2: 3 = a gap of `c >> 3`
/// bytes, else data; bits 3-7: length - 1) followed by that many bytes. The
/// first byte picks the limits. Must never panic, and the buffers must stay
/// within the limits.
pub fn fuzz(data: &[u8]) {
    let Some((&conf, rest)) = data.split_first() else {
        return;
    };
    let limits = TlsLimits {
        max_message: if conf & 1 != 0 { 64 } else { 4096 },
        max_preamble: if conf & 2 != 0 { 8 } else { 1024 },
        max_certs: (conf >> 2 & 3) as usize,
        max_cert_bytes: if conf & 16 != 0 { 100 } else { 4096 },
    };
    let mut p = TlsParser::with_limits(limits);
    let mut out = Vec::new();
    let mut ts = 0;
    for (_, step) in crate::fuzz_steps(rest) {
        ts += 1;
        match step {
            crate::FuzzStep::Data(dir, d) => p.data(dir, ts, d, &mut out),
            crate::FuzzStep::Gap(dir, n) => p.gap(dir, ts, n, &mut out),
        }
        // A message under reassembly never exceeds the cap plus one record.
        assert!(p
            .sides
            .iter()
            .all(|s| s.msg.len() <= limits.max_message + 4 + MAX_RECORD && s.carry.len() <= 5));
        let _ = p.stats();
        let _ = p.gave_up();
    }
    p.finish(ts, &mut out);
    let hs = p.take_handshakes();
    assert!(hs.len() <= 1 && out.is_empty());
    for h in &hs {
        for c in h.server_certs.iter().chain(&h.client_certs) {
            assert!(c.certs.len() <= limits.max_certs && c.certs.len() <= c.count);
            assert!(c.certs.iter().map(Vec::len).sum::<usize>() <= limits.max_cert_bytes);
        }
        let _ = (
            h.ja3(),
            h.ja3s(),
            h.version_name(),
            h.cipher_name(),
            h.curve_name(),
            h.last_alert_name(),
        );
    }
}
