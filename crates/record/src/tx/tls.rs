//! What a TLS session records (filled in by `wirelog_parse::tls`): the
//! handshake's facts in the terms of Zeek's ssl.log, the client's
//! fingerprints and offers, and the certificates as sent (DER), which the
//! output side decodes for x509.log, the leaf's subject/issuer and
//! `sni_matches_cert`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use crate::sha256::sha256_hex;
use crate::x509::{self, Certificate};

/// One TLS session's handshake (one "transaction" per session).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TlsTx {
    /// Version the server chose, as Zeek names it (`TLSv12`, `TLSv13`).
    pub version: Option<String>,
    pub cipher: Option<String>,
    pub curve: Option<String>,
    /// SNI of the first ClientHello.
    pub server_name: Option<String>,
    pub resumed: bool,
    /// Name of the last plaintext alert (`handshake_failure`).
    pub last_alert: Option<String>,
    /// ALPN protocol the server chose.
    pub next_protocol: Option<String>,
    pub established: bool,
    /// Zeek's ssl_history letters (client upper case).
    pub ssl_history: String,
    /// JA4 of the first ClientHello (FoxIO's `ja4`).
    pub ja4: Option<String>,
    /// JA3 and JA3S, as MD5 hex.
    pub ja3: Option<String>,
    pub ja3s: Option<String>,
    /// The client's `supported_versions` (raw numbers, as Zeek's
    /// ssl-log-ext `client_supported_versions`).
    pub client_versions: Vec<u16>,
    /// The client's ALPN offers (Zeek's ssl-log-ext `orig_alpn`).
    pub client_alpn: Vec<String>,
    /// The server's Certificate message (DER, in order); `None` when none
    /// was seen in plaintext (TLS 1.3 encrypts it).
    pub server_certs: Option<Vec<Vec<u8>>>,
    /// The client's Certificate message, possibly empty.
    pub client_certs: Option<Vec<Vec<u8>>>,
    /// The distinguished names (DER) of the CAs the server's
    /// CertificateRequest listed; `None` when none was seen in plaintext.
    pub requested_cas: Option<Vec<Vec<u8>>>,
    /// The raw hello values Zeek's ssl-log-ext policy logs; `None` when
    /// no hello was seen.
    pub hello: Option<Box<HelloFields>>,
    /// The certificates decoded, once, by whichever output reads them first
    /// (log writer or store); start it empty (`Default`).
    pub decoded: CertCache,
    /// Zeek's validate-certs result for the server's chain, set by the log
    /// writer when that policy is on (`wirelog_sink::logs::validate`);
    /// start it empty (`Default`).
    pub validation: Validation,
    /// The stapled OCSP response (the last CertificateStatus message's),
    /// for Zeek's validate-ocsp policy.
    pub ocsp_response: Option<Vec<u8>>,
    /// Zeek's validate-ocsp result, set by the log writer when that policy
    /// is on (`wirelog_sink::logs::ocsp`); start it empty (`Default`).
    pub ocsp_status: Validation,
    /// The data of the server's `signed_certificate_timestamp` hello
    /// extensions (SCT lists as sent, RFC 6962 3.3), for Zeek's
    /// validate-sct policy.
    pub sct_lists: Vec<Vec<u8>>,
    /// Zeek's validate-sct result, set by the log writer when that policy
    /// is on (`wirelog_sink::logs::sct`); start it empty (`Default`).
    pub ct: CtValidation,
}

/// `valid_ct_logs` and `valid_ct_operators` of Zeek's validate-sct policy:
/// how many distinct CT logs, and log operators, gave a valid SCT for the
/// server's leaf; `None` inside when the policy's hook would not run (no
/// certificate, or a leaf that does not decode). Filled once, on the
/// output side.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CtValidation(pub OnceLock<Option<CtCounts>>);

/// What validate-sct counts for one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CtCounts {
    /// `valid_scts`, `invalid_scts` (not logged by Zeek).
    pub valid: u64,
    pub invalid: u64,
    /// `valid_ct_logs`, `valid_ct_operators` (logged).
    pub logs: u64,
    pub operators: u64,
}

/// `validation_status` of Zeek's validate-certs policy: OpenSSL's verdict
/// on the server's chain (`ok` or its error text), `None` inside when the
/// policy's hook would not run (no certificate, or a leaf that does not
/// decode). Filled once, on the output side.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Validation(pub OnceLock<Option<String>>);

/// What Zeek's `policy/protocols/ssl/ssl-log-ext.zeek` adds to ssl.log
/// (zeek/zeek a13de64f): raw numbers in wire order, GREASE kept, each set
/// only when the event that sets it in the script fires (its hello or
/// extension was seen), so unset (`-`) and empty (`(empty)`) stay apart.
/// Every value is a count; lists are kept as `u16` (point formats,
/// compression methods and PSK modes are bytes on the wire).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HelloFields {
    /// `ssl_server_hello`: the ServerHello's version field.
    pub server_version: Option<u16>,
    /// `ssl_client_hello`: the ClientHello's version, ciphers, compression methods.
    pub client_version: Option<u16>,
    pub client_ciphers: Option<Vec<u16>>,
    pub client_comp_methods: Option<Vec<u16>>,
    /// `ssl_extension`: every extension type of each side's hellos, appended.
    pub ssl_client_exts: Option<Vec<u16>>,
    pub ssl_server_exts: Option<Vec<u16>>,
    /// `ssl_session_ticket_handshake`: the NewSessionTicket's lifetime hint.
    pub ticket_lifetime_hint: Option<u32>,
    /// `ssl_dh_server_params`: `|Ys| * 8`.
    pub dh_param_size: Option<u32>,
    /// The client's extensions (`ssl_extension_*` with `is_client`).
    pub point_formats: Option<Vec<u16>>,
    pub client_curves: Option<Vec<u16>>,
    pub psk_key_exchange_modes: Option<Vec<u16>>,
    pub client_key_share_groups: Option<Vec<u16>>,
    /// `signature_algorithms` split: the low byte (signature), the high byte (hash).
    pub sigalgs: Option<Vec<u16>>,
    pub hashalgs: Option<Vec<u16>>,
    pub ech_kdf_id: Option<u16>,
    pub ech_aead_id: Option<u16>,
    /// The server's `supported_versions` and `key_share` (the first entry).
    pub server_supported_version: Option<u16>,
    pub server_key_share_group: Option<u16>,
}

/// The decoded chains of a [`TlsTx`], filled on first use.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CertCache(OnceLock<Decoded>);

/// One certificate of a chain, decoded on the output side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertInfo {
    /// SHA-256 of the DER (Zeek's fingerprint).
    pub fingerprint: String,
    /// `None` when the DER does not decode (Zeek logs no x509 row then).
    /// Shared: every handshake of a server carries the same certificates.
    pub cert: Option<Arc<Certificate>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Decoded {
    server: Vec<CertInfo>,
    client: Vec<CertInfo>,
}

/// Certificates decoded so far on this thread (the output thread decodes
/// them all), by their DER: a server shows the same chain on every
/// handshake, and decoding one (DN strings, OIDs, SHA-256) costs about
/// 100 k instructions where looking it up costs a hash of its bytes.
/// Emptied when full, so a stream of distinct certificates stays bounded.
const DECODED_KEPT: usize = 4096;

thread_local! {
    static DECODED: RefCell<HashMap<Box<[u8]>, CertInfo>> = RefCell::new(HashMap::new());
}

fn decode_one(der: &[u8]) -> CertInfo {
    match Certificate::parse(der) {
        Ok(c) => CertInfo {
            fingerprint: c.fingerprint.clone(),
            cert: Some(Arc::new(c)),
        },
        Err(_) => CertInfo {
            fingerprint: sha256_hex(der),
            cert: None,
        },
    }
}

fn decode(chain: Option<&Vec<Vec<u8>>>) -> Vec<CertInfo> {
    DECODED.with_borrow_mut(|known| {
        chain
            .into_iter()
            .flatten()
            .map(|der| {
                if let Some(info) = known.get(der.as_slice()) {
                    return info.clone();
                }
                let info = decode_one(der);
                if known.len() >= DECODED_KEPT {
                    known.clear();
                }
                known.insert(der.as_slice().into(), info.clone());
                info
            })
            .collect()
    })
}

impl TlsTx {
    fn decoded(&self) -> &Decoded {
        self.decoded.0.get_or_init(|| Decoded {
            server: decode(self.server_certs.as_ref()),
            client: decode(self.client_certs.as_ref()),
        })
    }

    /// The server's chain, decoded.
    pub fn server_chain(&self) -> &[CertInfo] {
        &self.decoded().server
    }

    /// The client's chain, decoded.
    pub fn client_chain(&self) -> &[CertInfo] {
        &self.decoded().client
    }

    /// The server's leaf certificate, if sent in plaintext and decodable.
    pub fn leaf(&self) -> Option<&Certificate> {
        self.server_chain().first()?.cert.as_deref()
    }

    /// The client's leaf certificate, if sent in plaintext and decodable.
    pub fn client_leaf(&self) -> Option<&Certificate> {
        self.client_chain().first()?.cert.as_deref()
    }

    /// `cert_chain_fps`: set once the server sent a Certificate message.
    pub fn cert_chain_fps(&self) -> Option<Vec<&str>> {
        self.server_certs.as_ref()?;
        Some(
            self.server_chain()
                .iter()
                .map(|c| c.fingerprint.as_str())
                .collect(),
        )
    }

    /// `client_cert_chain_fps`: as Zeek, unset when no certificate was seen on
    /// the connection, empty when only the server sent some.
    pub fn client_cert_chain_fps(&self) -> Option<Vec<&str>> {
        if self.server_chain().is_empty() && self.client_chain().is_empty() {
            return None;
        }
        Some(
            self.client_chain()
                .iter()
                .map(|c| c.fingerprint.as_str())
                .collect(),
        )
    }

    /// Zeek's `sni_matches_cert`: unset without SNI or leaf.
    pub fn sni_matches_cert(&self) -> Option<bool> {
        x509::sni_matches_cert(self.server_name.as_deref(), self.leaf())
    }
}

/// A certificate chain a TLS handshake showed, with who sent it and when.
pub struct ShownChain<'a> {
    pub certs: &'a [CertInfo],
    /// The certificates as sent (DER), in the same order as `certs`.
    pub der: &'a [Vec<u8>],
    /// The client's chain (else the server's).
    pub client: bool,
    /// When it was seen, as Zeek's x509.log times it: the server's
    /// response started, the client's request (its handshake flight) ended.
    pub ts_ns: i64,
}

/// The server's and the client's chains of a TLS record, decoded once
/// (through [`TlsTx`]'s cache); `None` for other records.
pub fn shown_chains(r: &crate::TxRecord) -> Option<[ShownChain<'_>; 2]> {
    let crate::Detail::Tls(t) = &r.tx.detail else {
        return None;
    };
    let tx = &r.tx;
    Some([
        ShownChain {
            certs: t.server_chain(),
            der: t.server_certs.as_deref().unwrap_or(&[]),
            client: false,
            ts_ns: tx.response.map_or(tx.ts_ns(), |s| s.first_ns),
        },
        ShownChain {
            certs: t.client_chain(),
            der: t.client_certs.as_deref().unwrap_or(&[]),
            client: true,
            ts_ns: tx.request.map_or(tx.ts_ns(), |s| s.last_ns),
        },
    ])
}

/// Records for tests (feature `fixtures`).
#[cfg(feature = "fixtures")]
pub mod fixtures {
    use super::TlsTx;
    use crate::{Detail, IpAddr16, Proto, Protocol, Span, Transaction, TxRecord, TxStatus, UidGenerator};

    /// A finished TLS handshake at `ts_ns` (10.0.0.1:40000 to
    /// 10.0.0.2:443, SNI www.example.org) whose server sent the DER
    /// certificates `server` and whose client sent `client`.
    pub fn handshake(ts_ns: i64, server: Vec<Vec<u8>>, client: Option<Vec<Vec<u8>>>) -> TxRecord {
        let span = Span {
            first_ns: ts_ns,
            last_ns: ts_ns + 1000,
            bytes: 100,
        };
        TxRecord {
            uid: UidGenerator::new(ts_ns as u64).next_uid(),
            orig_h: IpAddr16::from_v4([10, 0, 0, 1]),
            orig_p: 40000,
            resp_h: IpAddr16::from_v4([10, 0, 0, 2]),
            resp_p: 443,
            transport: Proto::Tcp,
            protocol: Protocol::Tls,
            tx: Transaction {
                request: Some(span),
                response: Some(span),
                status: TxStatus::Ok,
                detail: Detail::Tls(Box::new(TlsTx {
                    server_name: Some("www.example.org".into()),
                    server_certs: Some(server),
                    client_certs: client,
                    ..TlsTx::default()
                })),
            },
            orig_proc: None,
            resp_proc: None,
            source: Default::default(),
            sample_weight: 1,
        }
    }
}

use crate::columns::{Card::*, Column as C, Columns, Item, LogText, Type::*, Unit, Val};
use crate::{get, item, num_item, text_item};

/// A count of [`HelloFields`] as a column of the ssl-log-ext policy.
macro_rules! hello_count {
    ($name:literal, $field:ident, $doc:literal) => {
        C::log_only($name, Count { bits: 64, unit: Unit::Plain }, $doc, get!(Tls, |r, t| Val::Count(t.hello.as_ref().and_then(|h| h.$field).map(u64::from))))
            .policy("ssl-log-ext")
    };
}

/// A list of counts of [`HelloFields`] as a column of the ssl-log-ext policy.
macro_rules! hello_list {
    ($name:literal, $field:ident, $doc:literal) => {
        C::log_only($name, List(Item::Count), $doc, get!(Tls, |r, t| Val::List(
            t.hello.as_ref().and_then(|h| h.$field.as_ref()).map(|v| crate::columns::List { record: r, len: v.len(), items: crate::columns::Items::Num(num_item!(Tls, |t, i| {
                t.hello.as_ref().and_then(|h| h.$field.as_ref()).map_or(0, |v| u64::from(v[i]))
            })) })
        )))
        .policy("ssl-log-ext")
    };
}

/// TLS's columns: Zeek's ssl.log columns in Zeek's order, then ours (an
/// extension, as Zeek's own policies add theirs after the base columns):
/// the leaf's subject, issuer and expiry, the client fingerprints, and the
/// client's offered versions and ALPN under Zeek's ssl-log-ext names.
pub static COLUMNS: Columns = Columns {
    columns: &[
        C::new("version", Text, Low, "Version the server chose (TLSv12, TLSv13).", get!(Tls, |r, t| Val::Text(t.version.as_deref()))).brief(),
        C::new("cipher", Text, Low, "Cipher suite the server chose.", get!(Tls, |r, t| Val::Text(t.cipher.as_deref()))).brief(),
        C::new("curve", Text, Low, "Key exchange group.", get!(Tls, |r, t| Val::Text(t.curve.as_deref()))),
        C::new("server_name", Text, Low, "SNI of the first ClientHello.", get!(Tls, |r, t| Val::Text(t.server_name.as_deref())))
            .aliases(&["sni"])
            .brief(),
        C::new("resumed", Bool, Low, "The session was resumed.", get!(Tls, |r, t| Val::Bool(Some(t.resumed)))),
        C::new("last_alert", Text, Low, "Last plaintext alert.", get!(Tls, |r, t| Val::Text(t.last_alert.as_deref()))).aliases(&["alert"]).brief(),
        C::new("next_protocol", Text, Low, "ALPN protocol the server chose.", get!(Tls, |r, t| Val::Text(t.next_protocol.as_deref()))).aliases(&["alpn"]),
        C::new("established", Bool, Low, "The handshake completed.", get!(Tls, |r, t| Val::Bool(Some(t.established)))).brief(),
        C::new("ssl_history", Text, Low, "Zeek's ssl_history letters (client upper case).", get!(Tls, |r, t| Val::Text(Some(&t.ssl_history))))
            .aliases(&["history"])
            .unset_when_empty(),
        C::new("cert_chain_fps", List(Item::Text), High, "SHA-256 fingerprints of the server's chain, leaf first.", get!(Tls, |r, t| Val::List(
            t.server_certs.is_some().then(|| crate::columns::List { record: r, len: t.server_chain().len(), items: crate::columns::Items::Text(text_item!(Tls, |t, i| &t.server_chain()[i].fingerprint)) })
        ))),
        C::new("client_cert_chain_fps", List(Item::Text), High, "SHA-256 fingerprints of the client's chain (unset when no certificate was seen).", get!(Tls, |r, t| Val::List(
            (!(t.server_chain().is_empty() && t.client_chain().is_empty())).then(|| crate::columns::List { record: r, len: t.client_chain().len(), items: crate::columns::Items::Text(text_item!(Tls, |t, i| &t.client_chain()[i].fingerprint)) })
        ))),
        C::log_only("sni_matches_cert", Bool, "The SNI matches the leaf certificate's names.", get!(Tls, |r, t| Val::Bool(t.sni_matches_cert()))),
        // Zeek's policy/protocols/ssl/ssl-log-ext.zeek, its fields in its
        // order (orig_alpn and client_supported_versions are logged always,
        // below); each set where the script's event handler sets it.
        hello_count!("server_version", server_version, "ssl_server_hello: the ServerHello's version field."),
        hello_count!("client_version", client_version, "ssl_client_hello: the ClientHello's version field."),
        hello_list!("client_ciphers", client_ciphers, "ssl_client_hello: the cipher suites offered, wire order."),
        hello_list!("ssl_client_exts", ssl_client_exts, "ssl_extension: the client's extension types, every ClientHello's."),
        hello_list!("ssl_server_exts", ssl_server_exts, "ssl_extension: the server's extension types, every ServerHello's."),
        hello_count!("ticket_lifetime_hint", ticket_lifetime_hint, "ssl_session_ticket_handshake: the NewSessionTicket's lifetime hint."),
        hello_count!("dh_param_size", dh_param_size, "ssl_dh_server_params: bits of the server's DH public value."),
        hello_list!("point_formats", point_formats, "ssl_extension_ec_point_formats: the client's point formats."),
        hello_list!("client_curves", client_curves, "ssl_extension_elliptic_curves: the client's supported groups."),
        hello_count!("server_supported_version", server_supported_version, "ssl_extension_supported_versions: the server's."),
        hello_list!("psk_key_exchange_modes", psk_key_exchange_modes, "ssl_extension_psk_key_exchange_modes: the client's."),
        hello_list!("client_key_share_groups", client_key_share_groups, "ssl_extension_key_share: the client's groups."),
        hello_count!("server_key_share_group", server_key_share_group, "ssl_extension_key_share: the server's group."),
        hello_list!("client_comp_methods", client_comp_methods, "ssl_client_hello: the compression methods offered."),
        hello_list!("sigalgs", sigalgs, "ssl_extension_signature_algorithm: each code point's low byte."),
        hello_list!("hashalgs", hashalgs, "ssl_extension_signature_algorithm: each code point's high byte."),
        hello_count!("ech_kdf_id", ech_kdf_id, "ssl_extension_encrypted_client_hello: the HPKE KDF id."),
        hello_count!("ech_aead_id", ech_aead_id, "ssl_extension_encrypted_client_hello: the HPKE AEAD id."),
        // Zeek's policy/protocols/ssl/certificate-request-info.zeek (lines
        // 8-23: set at the server's ssl_certificate_request, each name
        // through parse_distinguished_name).
        C::log_only("requested_client_certificate_authorities", List(Item::Text), "The distinguished names of the CAs the server's CertificateRequest accepts.", get!(Tls, |r, t| Val::List(
            t.requested_cas.as_ref().map(|v| crate::columns::List { record: r, len: v.len(), items: crate::columns::Items::Built(item!(Tls, |t, i, s| {
                if let Some(v) = &t.requested_cas {
                    s.push_str(&x509::distinguished_name(&v[i]));
                }
            })) })
        )))
        .policy("certificate-request-info"),
        // Zeek's policy/protocols/ssl/validate-certs.zeek (the
        // `ssl_finishing` hook, lines 136-199): X509_verify_cert's verdict
        // on the server's chain, filled by the log writer.
        C::log_only("validation_status", Text, "Certificate validation of the server's chain: ok, or OpenSSL's error text.", get!(Tls, |r, t| Val::Text(t.validation.0.get().and_then(|s| s.as_deref()))))
            .policy("validate-certs"),
        // Zeek's policy/protocols/ssl/validate-ocsp.zeek (the
        // `ssl_established` handler, lines 39-75): x509_ocsp_verify's
        // verdict on the stapled response, filled by the log writer.
        C::log_only("ocsp_status", Text, "Validation of the stapled OCSP response: good, revoked, unknown, or why it is not valid.", get!(Tls, |r, t| Val::Text(t.ocsp_status.0.get().and_then(|s| s.as_deref()))))
            .policy("validate-ocsp"),
        // Zeek's policy/protocols/ssl/validate-sct.zeek (lines 57-60: the
        // two fields it logs, set by its `ssl_finishing` hook, lines
        // 113-212).
        C::log_only("valid_ct_logs", Count { bits: 64, unit: Unit::Plain }, "Distinct CT logs with a valid SCT for the server's leaf.", get!(Tls, |r, t| Val::Count(t.ct.0.get().copied().flatten().map(|c| c.logs))))
            .policy("validate-sct"),
        C::log_only("valid_ct_operators", Count { bits: 64, unit: Unit::Plain }, "Distinct CT log operators with a valid SCT for the server's leaf.", get!(Tls, |r, t| Val::Count(t.ct.0.get().copied().flatten().map(|c| c.operators))))
            .policy("validate-sct"),
        C::new("subject", Text, Low, "The leaf certificate's subject.", get!(Tls, |r, t| Val::Text(t.leaf().map(|c| c.subject.as_str())))),
        C::new("issuer", Text, Low, "The leaf certificate's issuer.", get!(Tls, |r, t| Val::Text(t.leaf().map(|c| c.issuer.as_str())))),
        // Zeek's SSL::log_include_client_certificate_subject_issuer
        // (base/protocols/ssl/files.zeek: the client chain's first
        // certificate's subject and issuer, logged only when the option is T).
        C::log_only("client_subject", Text, "The client certificate's subject.", get!(Tls, |r, t| Val::Text(t.client_leaf().map(|c| c.subject.as_str()))))
            .policy("ssl-client-subject-issuer"),
        C::log_only("client_issuer", Text, "The client certificate's issuer.", get!(Tls, |r, t| Val::Text(t.client_leaf().map(|c| c.issuer.as_str()))))
            .policy("ssl-client-subject-issuer"),
        C::new("not_valid_after", TimeSecs, Low, "The leaf certificate's expiry (Unix seconds in the store).", get!(Tls, |r, t| Val::TimeSecs(t.leaf().map(|c| c.not_valid_after))))
            .aliases(&["expires"]),
        C::new("ja4", Text, Low, "JA4 of the first ClientHello.", get!(Tls, |r, t| Val::Text(t.ja4.as_deref()))).brief(),
        C::new("ja3", Text, Low, "JA3 (MD5 hex).", get!(Tls, |r, t| Val::Text(t.ja3.as_deref()))),
        C::new("ja3s", Text, Low, "JA3S (MD5 hex).", get!(Tls, |r, t| Val::Text(t.ja3s.as_deref()))),
        C::new("client_versions", List(Item::Count), Low, "The client's supported_versions, as numbers.", get!(Tls, |r, t| Val::List(
            (!t.client_versions.is_empty()).then_some(crate::columns::List { record: r, len: t.client_versions.len(), items: crate::columns::Items::Num(num_item!(Tls, |t, i| u64::from(t.client_versions[i]))) })
        )))
        .log_as("client_supported_versions"),
        C::new("client_alpn", List(Item::Text), Low, "The client's ALPN offers.", get!(Tls, |r, t| Val::List(
            (!t.client_alpn.is_empty()).then_some(crate::columns::List { record: r, len: t.client_alpn.len(), items: crate::columns::Items::Text(text_item!(Tls, |t, i| &t.client_alpn[i])) })
        )))
        .log_as("orig_alpn"),
    ],
    store_order: &[],
    by: &["server_name"],
    shape: &["server_name", "version"],
    renamed: &[],
    log_text: LogText::ZeekAscii,
};

