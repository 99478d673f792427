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
    /// The certificates decoded, once, by whichever output reads them first
    /// (log writer or store); start it empty (`Default`).
    pub decoded: CertCache,
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
            client: false,
            ts_ns: tx.response.map_or(tx.ts_ns(), |s| s.first_ns),
        },
        ShownChain {
            certs: t.client_chain(),
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
                detail: Detail::Tls(TlsTx {
                    server_name: Some("www.example.org".into()),
                    server_certs: Some(server),
                    client_certs: client,
                    ..TlsTx::default()
                }),
            },
            orig_proc: None,
            resp_proc: None,
            source: Default::default(),
            sample_weight: 1,
        }
    }
}

use crate::columns::{Card::*, Column as C, Columns, Item, LogText, Type::*, Val};
use crate::{get, item};

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
            t.server_certs.is_some().then(|| crate::columns::List { record: r, len: t.server_chain().len(), item: item!(Tls, |t, i, s| s.push_str(&t.server_chain()[i].fingerprint)) })
        ))),
        C::new("client_cert_chain_fps", List(Item::Text), High, "SHA-256 fingerprints of the client's chain (unset when no certificate was seen).", get!(Tls, |r, t| Val::List(
            (!(t.server_chain().is_empty() && t.client_chain().is_empty())).then(|| crate::columns::List { record: r, len: t.client_chain().len(), item: item!(Tls, |t, i, s| s.push_str(&t.client_chain()[i].fingerprint)) })
        ))),
        C::log_only("sni_matches_cert", Bool, "The SNI matches the leaf certificate's names.", get!(Tls, |r, t| Val::Bool(t.sni_matches_cert()))),
        C::new("subject", Text, Low, "The leaf certificate's subject.", get!(Tls, |r, t| Val::Text(t.leaf().map(|c| c.subject.as_str())))),
        C::new("issuer", Text, Low, "The leaf certificate's issuer.", get!(Tls, |r, t| Val::Text(t.leaf().map(|c| c.issuer.as_str())))),
        C::new("not_valid_after", TimeSecs, Low, "The leaf certificate's expiry (Unix seconds in the store).", get!(Tls, |r, t| Val::TimeSecs(t.leaf().map(|c| c.not_valid_after))))
            .aliases(&["expires"]),
        C::new("ja4", Text, Low, "JA4 of the first ClientHello.", get!(Tls, |r, t| Val::Text(t.ja4.as_deref()))).brief(),
        C::new("ja3", Text, Low, "JA3 (MD5 hex).", get!(Tls, |r, t| Val::Text(t.ja3.as_deref()))),
        C::new("ja3s", Text, Low, "JA3S (MD5 hex).", get!(Tls, |r, t| Val::Text(t.ja3s.as_deref()))),
        C::new("client_versions", List(Item::Count), Low, "The client's supported_versions, as numbers.", get!(Tls, |r, t| Val::List(
            (!t.client_versions.is_empty()).then(|| crate::columns::List { record: r, len: t.client_versions.len(), item: item!(Tls, |t, i, s| {
                use std::fmt::Write as _;
                let _ = write!(s, "{}", t.client_versions[i]);
            }) })
        )))
        .log_as("client_supported_versions"),
        C::new("client_alpn", List(Item::Text), Low, "The client's ALPN offers.", get!(Tls, |r, t| Val::List(
            (!t.client_alpn.is_empty()).then(|| crate::columns::List { record: r, len: t.client_alpn.len(), item: item!(Tls, |t, i, s| s.push_str(&t.client_alpn[i])) })
        )))
        .log_as("orig_alpn"),
    ],
    store_order: &[],
    by: &["server_name"],
    shape: &["server_name", "version"],
    renamed: &[],
    log_text: LogText::ZeekAscii,
};

