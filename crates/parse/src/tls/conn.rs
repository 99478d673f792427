//! The TLS parser as one connection's [`StreamParser`]: each handshake
//! becomes a transaction ([`Detail::Tls`]) as soon as it is over, and the
//! connection then reports itself done so the reassembler stops delivering
//! (application data is counted by the connection record, never buffered).

use wirelog_record::tls::{HelloFields, TlsTx};

use super::{TlsHandshake, TlsLimits, TlsParser};
use crate::{
    Detail, Dir, ParseConfig, ParseStats, Protocol, Span, StreamParser, Transaction, TxSink, TxStatus,
};

/// First and last time handshake bytes were seen in one direction.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    first_ns: i64,
    last_ns: i64,
    any: bool,
}

/// A [`TlsParser`] that emits its handshakes as transactions.
pub struct TlsConn {
    inner: TlsParser,
    seen: [Seen; 2],
    /// The protocol that asked for TLS (STARTTLS), if any: its conn.log
    /// service alone and with TLS (`smtp`, `smtp,ssl`), and what its parser
    /// had counted before handing over.
    inside: Option<(&'static str, &'static str, ParseStats)>,
    /// The outer protocol was confirmed before TLS (a cleartext STARTTLS
    /// watcher's): conn.log names it even if no handshake follows.
    outer_confirmed: bool,
    handshakes: u32,
    /// A handshake agreed on HTTP/2 (ALPN `h2`): conn.log says `ssl,http2`
    /// (the contents stay unread until plaintext exists).
    alpn_h2: bool,
}

impl TlsConn {
    pub fn new(cfg: &ParseConfig) -> Self {
        TlsConn {
            inner: TlsParser::new(cfg),
            seen: [Seen::default(); 2],
            inside: None,
            outer_confirmed: false,
            handshakes: 0,
            alpn_h2: false,
        }
    }

    /// TLS that `outer`'s parser saw requested (its SSL request): the TLS
    /// parser seeks the handshake from here, skipping what is left of the
    /// request as preamble.
    pub fn starttls(limits: TlsLimits, outer: Protocol, before: ParseStats) -> Self {
        TlsConn {
            inner: TlsParser::with_limits(limits),
            seen: [Seen::default(); 2],
            inside: Some((outer.service(), outer.service_over_tls(), before)),
            outer_confirmed: false,
            handshakes: 0,
            alpn_h2: false,
        }
    }

    /// TLS agreed by a cleartext protocol's STARTTLS
    /// ([`crate::starttls::StarttlsConn`]): named `service` until a
    /// handshake is found, `over_tls` after.
    pub fn after_cleartext(limits: TlsLimits, service: &'static str, over_tls: &'static str, before: ParseStats) -> Self {
        TlsConn {
            inner: TlsParser::with_limits(limits),
            seen: [Seen::default(); 2],
            inside: Some((service, over_tls, before)),
            outer_confirmed: true,
            handshakes: 0,
            alpn_h2: false,
        }
    }

    /// conn.log's `service` when this parser decides it whatever was
    /// parsed: after a cleartext protocol's STARTTLS (confirmed before).
    pub fn confirmed_service(&self) -> Option<&'static str> {
        self.outer_confirmed.then(|| self.service())
    }

    /// conn.log's `service`: `mysql,ssl` once a handshake was found inside
    /// MySQL; the outer protocol's own before that.
    pub fn service(&self) -> &'static str {
        match self.inside {
            Some((outer, _, _)) if self.handshakes == 0 => outer,
            Some((_, over_tls, _)) => over_tls,
            None if self.alpn_h2 => "ssl,http2",
            None => Protocol::Tls.service(),
        }
    }

    /// Memory this connection's parser may hold (see [`TlsParser::set_allowance`]).
    pub fn set_allowance(&mut self, bytes: usize) {
        self.inner.set_allowance(bytes);
    }

    /// Memory it holds now (messages under reassembly, certificates kept).
    pub fn held(&self) -> usize {
        self.inner.held()
    }

    /// Whether the handshake is over (nothing more to parse).
    pub fn handshake_done(&self) -> bool {
        self.inner.handshake_done()
    }

    fn drain(&mut self, out: &mut dyn TxSink) {
        for hs in self.inner.take_handshakes() {
            let span = |i: usize, dir: Dir| {
                let s = self.seen[i];
                let (bytes, after) = self.inner.bytes(dir);
                s.any.then_some(Span {
                    first_ns: s.first_ns,
                    last_ns: s.last_ns,
                    bytes: bytes - after,
                })
            };
            let request = span(0, Dir::ToServer);
            let response = span(1, Dir::ToClient);
            self.handshakes += 1;
            self.alpn_h2 |= hs.next_protocol.as_deref() == Some("h2");
            out.push(transaction(hs, request, response));
        }
    }
}

/// The transaction of one handshake: `ok` when established, `error` when
/// it ended with an alert, else unanswered or cut short.
pub fn transaction(hs: TlsHandshake, request: Option<Span>, response: Option<Span>) -> Transaction {
    let status = if hs.established {
        TxStatus::Ok
    } else if hs.client_hello.is_some() && hs.server_hello.is_none() && hs.last_alert.is_none() {
        TxStatus::NoResponse
    } else if hs.client_hello.is_none() {
        TxStatus::NoRequest
    } else if hs.last_alert.is_some() {
        TxStatus::Error
    } else {
        TxStatus::Partial
    };
    let ch = hs.client_hello.as_ref();
    let tx = TlsTx {
        version: hs.version_name(),
        cipher: hs.cipher_name(),
        curve: hs.curve_name(),
        server_name: hs.server_name.clone(),
        resumed: hs.resumed,
        last_alert: hs.last_alert_name(),
        next_protocol: hs.next_protocol.clone(),
        established: hs.established,
        ja4: hs.ja4.as_ref().map(|j| j.ja4.clone()),
        ja3: hs.ja3().map(|j| j.md5),
        ja3s: hs.ja3s().map(|j| j.md5),
        client_versions: ch.map(|c| c.supported_versions.clone()).unwrap_or_default(),
        client_alpn: ch
            .map(|c| {
                c.alpn
                    .iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            })
            .unwrap_or_default(),
        hello: hello_fields(&hs),
        ssl_history: hs.ssl_history,
        server_certs: hs.server_certs.map(|c| c.certs),
        client_certs: hs.client_certs.map(|c| c.certs),
        requested_cas: hs.requested_cas,
        ocsp_response: hs.ocsp_response,
        sct_lists: hs.server_sct_lists,
        ..TlsTx::default()
    };
    Transaction {
        request,
        response,
        status,
        detail: Detail::Tls(Box::new(tx)),
    }
}

/// The values Zeek's `policy/protocols/ssl/ssl-log-ext.zeek` logs, each
/// set where the script's handler of the event sets it: the hellos'
/// fields by `ssl_client_hello`/`ssl_server_hello` (the last hello's, as
/// each event overwrites), an extension's by its `ssl_extension_*` event
/// (only when the extension is present: unset, not empty, otherwise), the
/// extension lists by `ssl_extension` (appended for every hello).
fn hello_fields(hs: &TlsHandshake) -> Option<Box<HelloFields>> {
    let ch = hs.last_client_hello.as_ref().or(hs.client_hello.as_ref());
    let sh = hs.server_hello.as_ref();
    if ch.is_none() && sh.is_none() {
        return None;
    }
    let u16s = |v: &[u16]| Some(v.to_vec());
    let bytes = |v: &[u8]| Some(v.iter().map(|&b| b as u16).collect::<Vec<u16>>());
    let has = |t: u16| ch.is_some_and(|c| c.extensions.contains(&t));
    let sh_has = |t: u16| sh.is_some_and(|s| s.extensions.contains(&t));
    use super::parser::*;
    let mut f = HelloFields {
        server_version: sh.map(|s| s.version),
        ticket_lifetime_hint: hs.ticket_lifetime_hint,
        dh_param_size: hs.dh_param_size,
        ssl_client_exts: (!hs.client_exts.is_empty()).then(|| hs.client_exts.clone()),
        ssl_server_exts: (!hs.server_exts.is_empty()).then(|| hs.server_exts.clone()),
        server_supported_version: sh.filter(|_| sh_has(EXT_SUPPORTED_VERSIONS)).and_then(|s| s.selected_version),
        server_key_share_group: sh
            .filter(|_| sh_has(EXT_KEY_SHARE) || sh_has(EXT_KEY_SHARE_OLD))
            .and_then(|s| s.key_share_group),
        ..HelloFields::default()
    };
    if let Some(c) = ch.filter(|c| !c.sslv2) {
        f.client_version = Some(c.version);
        f.client_ciphers = u16s(&c.ciphers);
        f.client_comp_methods = bytes(&c.compression);
        if has(EXT_EC_POINT_FORMATS) {
            f.point_formats = bytes(&c.point_formats);
        }
        if has(EXT_SUPPORTED_GROUPS) {
            f.client_curves = u16s(&c.groups);
        }
        if has(EXT_KEY_SHARE) {
            f.client_key_share_groups = u16s(&c.key_share_groups);
        }
        if has(EXT_SIGNATURE_ALGORITHMS) {
            f.sigalgs = Some(c.signature_algorithms.iter().map(|s| s & 0xff).collect());
            f.hashalgs = Some(c.signature_algorithms.iter().map(|s| s >> 8).collect());
        }
        f.psk_key_exchange_modes = c.psk_modes.as_deref().and_then(bytes);
        f.ech_kdf_id = c.ech_ids.map(|(k, _)| k);
        f.ech_aead_id = c.ech_ids.map(|(_, a)| a);
    }
    Some(Box::new(f))
}

impl StreamParser for TlsConn {
    fn data(&mut self, dir: Dir, ts_ns: i64, data: &[u8], out: &mut dyn TxSink) {
        if !self.inner.handshake_done() {
            let s = &mut self.seen[(dir == Dir::ToClient) as usize];
            if !s.any {
                s.any = true;
                s.first_ns = ts_ns;
            }
            s.last_ns = ts_ns;
        }
        self.inner.data(dir, ts_ns, data, out);
        if self.inner.gave_up() {
            // What was learnt before a violation is still reported.
            self.inner.finish(ts_ns, out);
        }
        self.drain(out);
    }

    fn gap(&mut self, dir: Dir, ts_ns: i64, len: u64, out: &mut dyn TxSink) {
        self.inner.gap(dir, ts_ns, len, out);
        if self.inner.gave_up() {
            self.inner.finish(ts_ns, out);
        }
        self.drain(out);
    }

    fn expire(&mut self, _now_ns: i64, _out: &mut dyn TxSink) {}

    fn finish(&mut self, ts_ns: i64, out: &mut dyn TxSink) {
        self.inner.finish(ts_ns, out);
        self.drain(out);
    }

    /// Not TLS, or the handshake is over: either way nothing more is parsed
    /// and the caller stops reassembling this connection.
    fn gave_up(&self) -> bool {
        self.inner.gave_up() || self.inner.handshake_done()
    }

    fn stats(&self) -> ParseStats {
        let mut s = self.inner.stats();
        if let Some((_, _, b)) = self.inside {
            s.unparsed_bytes += b.unparsed_bytes;
            s.gaps += b.gaps;
            s.resyncs += b.resyncs;
            s.malformed += b.malformed;
            s.cut_bytes += b.cut_bytes;
        }
        s
    }
}

/// This protocol's content probe (see [`crate::detect`]).
pub fn probe(dir: Dir, data: &[u8]) -> crate::detect::Probe {
    crate::detect::Probe::certain_if(looks_like(dir, data))
}

/// A client's first bytes that open a TLS handshake (a ClientHello record).
pub fn looks_like(dir: Dir, data: &[u8]) -> bool {
    dir == Dir::ToServer && super::parser::starts_tls(data, true)
}
