//! X.509 certificates decoded into the columns of Zeek's x509.log, with the
//! text Zeek writes (it prints through OpenSSL, so OpenSSL's formatting is
//! the reference): subject and issuer in OpenSSL's RFC 2253 style, serial
//! as upper-case hex, algorithms by OpenSSL's names, validity as epoch
//! seconds by Zeek's own time parser, the key's type, size, exponent and
//! curve, SANs and basic constraints. Also Zeek's `sni_matches_cert` rule.
//!
//! A certificate is read once, when its Certificate message is complete, so
//! this is off the per-packet path; it allocates the strings it returns.
//! The DER reader is bounded and never panics: malformed input is an
//! [`X509Error`] naming the field, where Zeek (OpenSSL) would log no row.

mod der;
mod name;
mod oid;

/// The name attributes printed by name (OpenSSL's short names), by OID.
pub use oid::ATTRIBUTES as NAME_ATTRIBUTES;

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use der::{
    Der, BIT_STRING, BOOLEAN, GENERALIZED_TIME, INTEGER, OCTET_STRING, OID, SEQUENCE, UTC_TIME,
};

/// What was wrong with a certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum X509ErrorKind {
    /// The input ends inside the field.
    Truncated,
    /// A length that cannot be right (more than four length octets).
    BadLength,
    /// Indefinite length, which DER does not allow.
    IndefiniteLength,
    /// A tag number above 30 (none occurs in a certificate).
    HighTagNumber,
    /// Another element than the one the structure needs here.
    UnexpectedTag { expected: u8, found: u8 },
    /// Contents that OpenSSL refuses (empty INTEGER, padded OID, ...).
    BadValue,
}

/// A certificate that could not be decoded: which field, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct X509Error {
    pub field: &'static str,
    pub kind: X509ErrorKind,
}

impl fmt::Display for X509Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "x509 certificate, {}: ", self.field)?;
        match self.kind {
            X509ErrorKind::Truncated => write!(f, "truncated"),
            X509ErrorKind::BadLength => write!(f, "invalid length"),
            X509ErrorKind::IndefiniteLength => write!(f, "indefinite length (not DER)"),
            X509ErrorKind::HighTagNumber => write!(f, "tag number above 30"),
            X509ErrorKind::UnexpectedTag { expected, found } => {
                write!(f, "expected tag 0x{expected:02x}, found 0x{found:02x}")
            }
            X509ErrorKind::BadValue => write!(f, "invalid value"),
        }
    }
}

impl std::error::Error for X509Error {}

/// The subjectAltName extension's entries by kind (Zeek's
/// `X509::SubjectAlternativeName`); a kind without entries is `None`, which
/// Zeek logs as unset (`-`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct San {
    pub dns: Option<Vec<String>>,
    pub uri: Option<Vec<String>>,
    pub email: Option<Vec<String>>,
    pub ip: Option<Vec<IpAddr>>,
    /// Entries of other kinds (otherName, directoryName, ...) were present.
    pub other_fields: bool,
}

/// The basicConstraints extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BasicConstraints {
    pub ca: bool,
    pub path_len: Option<u64>,
}

/// One certificate as Zeek's x509.log describes it. Strings hold the value
/// Zeek has before its log writer escapes it (the writer turns `\` into
/// `\\`, non-printable bytes into `\xNN` and a `,` inside a set element into
/// `\x2c`, as for every other string column).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Certificate {
    /// SHA-256 of the whole DER input, lower-case hex.
    pub fingerprint: String,
    /// X.509 version (the encoded value plus one).
    pub version: u64,
    /// Serial number in upper-case hex (`i2a_ASN1_INTEGER`), `-` first if
    /// negative.
    pub serial: String,
    /// Subject DN, OpenSSL RFC 2253 style, at most 2047 bytes; pure ASCII.
    pub subject: String,
    /// Issuer DN, same format.
    pub issuer: String,
    /// The last commonName of the subject (Zeek's `certificate$cn`, not
    /// logged by default), non-printable bytes as `.`.
    pub cn: Option<String>,
    /// Epoch seconds; 0 where Zeek's time parser gives up.
    pub not_valid_before: i64,
    pub not_valid_after: i64,
    /// Public-key algorithm (`rsaEncryption`, `id-ecPublicKey`, or dotted).
    pub key_alg: String,
    /// Signature algorithm of the certificate (`sha256WithRSAEncryption`, ...).
    pub sig_alg: String,
    /// Signature algorithm named inside tbsCertificate (Zeek's optional
    /// `tbs_sig_alg`).
    pub tbs_sig_alg: String,
    /// `rsa`, `dsa` or `ecdsa` when the key could be read.
    pub key_type: Option<&'static str>,
    /// RSA modulus bits, DSA p bits, EC group order bits.
    pub key_length: Option<u32>,
    /// RSA public exponent in decimal.
    pub exponent: Option<String>,
    /// OpenSSL short name of a named EC curve (`prime256v1`, `secp384r1`).
    pub curve: Option<&'static str>,
    /// The last subjectAltName extension that could be read.
    pub san: Option<San>,
    /// The last basicConstraints extension that could be read.
    pub basic_constraints: Option<BasicConstraints>,
    /// The SCT lists of the certificate's `ct_precert_scts` extensions
    /// (RFC 6962 3.3), each as the extension's inner OCTET STRING holds it
    /// (Zeek's `ParseSignedCertificateTimestamps`, X509Common.cc lines
    /// 169-209), for the validate-sct policy. Empty without one.
    pub sct_lists: Vec<Vec<u8>>,
    /// What `x509_check_cert_hostname` looks at.
    host_names: HostNames,
}

/// The names a hostname is checked against: the DNS names of the first
/// subjectAltName extension if there is one (even one that cannot be read,
/// which then matches nothing), else the last commonName.
#[derive(Clone, Debug, PartialEq, Eq)]
enum HostNames {
    San(Vec<Vec<u8>>),
    Cn(Option<String>),
}

impl Certificate {
    /// Decodes one DER certificate. Bytes after the certificate are ignored
    /// (as `d2i_X509` does) but are part of the fingerprint (Zeek hashes
    /// what the Certificate message carried).
    pub fn parse(der: &[u8]) -> Result<Certificate, X509Error> {
        let mut top = Der::new(der);
        let mut cert = top.enter(SEQUENCE, "Certificate")?;
        let mut tbs = cert.enter(SEQUENCE, "tbsCertificate")?;
        let outer_sig = algorithm(&mut cert, "signatureAlgorithm")?.0;
        let sig = cert.expect(BIT_STRING, "signatureValue")?;
        der::bit_string(sig.content, "signatureValue")?;

        let version = match tbs.optional(0xa0, "version")? {
            Some(v) => {
                let mut inner = Der::new(v.content);
                der::small_integer(inner.expect(INTEGER, "version")?.content, "version")?
            }
            None => 0,
        };
        let serial = tbs.expect(INTEGER, "serialNumber")?;
        let serial = serial_text(serial.content)?;
        let inner_sig = algorithm(&mut tbs, "signature")?.0;
        let issuer = tbs.expect(SEQUENCE, "issuer")?;
        let mut validity = tbs.enter(SEQUENCE, "validity")?;
        let not_before = time(&mut validity, "notBefore")?;
        let not_after = time(&mut validity, "notAfter")?;
        let subject = tbs.expect(SEQUENCE, "subject")?;
        let mut spki = tbs.enter(SEQUENCE, "subjectPublicKeyInfo")?;
        let (key_oid, key_params) = algorithm(&mut spki, "subjectPublicKeyInfo.algorithm")?;
        let key_bits = spki.expect(BIT_STRING, "subjectPublicKey")?;
        let key_bits = der::bit_string(key_bits.content, "subjectPublicKey")?;
        tbs.optional(0x81, "issuerUniqueID")?;
        tbs.optional(0x82, "subjectUniqueID")?;
        let extensions = tbs.optional(0xa3, "extensions")?;

        let mut c = Certificate {
            fingerprint: crate::sha256::sha256_hex(der),
            version: (version as u64).wrapping_add(1),
            serial,
            subject: name::format(subject.content, "subject")?,
            issuer: name::format(issuer.content, "issuer")?,
            cn: name::last_common_name(subject.content, "subject")?,
            not_valid_before: not_before,
            not_valid_after: not_after,
            key_alg: oid::algorithm_name(&key_oid),
            sig_alg: oid::algorithm_name(&outer_sig),
            tbs_sig_alg: oid::algorithm_name(&inner_sig),
            key_type: None,
            key_length: None,
            exponent: None,
            curve: None,
            san: None,
            basic_constraints: None,
            sct_lists: Vec::new(),
            host_names: HostNames::Cn(None),
        };
        c.host_names = HostNames::Cn(c.cn.clone());
        // A key OpenSSL cannot decode leaves all key columns unset, as in Zeek.
        if let Some(k) = public_key(&key_oid, key_params, key_bits) {
            c.key_type = Some(k.kind);
            c.key_length = k.bits;
            c.exponent = k.exponent;
            c.curve = k.curve;
        }
        if let Some(ext) = extensions {
            c.extensions(ext.content)?;
        }
        Ok(c)
    }

    fn extensions(&mut self, data: &[u8]) -> Result<(), X509Error> {
        let mut outer = Der::new(data);
        let mut list = outer.enter(SEQUENCE, "extensions")?;
        let mut first_san = true;
        while !list.is_empty() {
            let mut ext = list.enter(SEQUENCE, "extension")?;
            let id = oid::dotted(
                ext.expect(OID, "extension.extnID")?.content,
                "extension.extnID",
            )?;
            ext.optional(BOOLEAN, "extension.critical")?;
            let value = ext.expect(OCTET_STRING, "extension.extnValue")?.content;
            // An extension that cannot be read is skipped, as Zeek does
            // (it reports a weird and logs the certificate without it).
            if id == oid::SUBJECT_ALT_NAME {
                let san = subject_alt_names(value);
                if first_san {
                    first_san = false;
                    self.host_names =
                        HostNames::San(san.as_ref().map_or(Vec::new(), |s| s.1.clone()));
                }
                if let Some((s, _)) = san {
                    self.san = Some(s);
                }
            } else if id == oid::BASIC_CONSTRAINTS {
                if let Some(bc) = basic_constraints(value) {
                    self.basic_constraints = Some(bc);
                }
            } else if id == oid::CT_PRECERT_SCTS {
                // The extension's value is an OCTET STRING holding the
                // list; one that is not is skipped (Zeek: an error, no SCT).
                if let Ok(inner) = Der::new(value).expect(OCTET_STRING, "ct_precert_scts") {
                    self.sct_lists.push(inner.content.to_vec());
                }
            }
        }
        Ok(())
    }

    /// Whether `hostname` matches this certificate, by Zeek's
    /// `x509_check_cert_hostname` (src/file_analysis/analyzer/x509/
    /// functions.bif): the DNS names of the subjectAltName if the extension
    /// is present (RFC 2818: the subject is then ignored), else the last
    /// commonName; each compared by [`hostname_matches`].
    pub fn matches_hostname(&self, hostname: &str) -> bool {
        match &self.host_names {
            HostNames::San(names) => names
                .iter()
                .any(|n| hostname_matches(hostname.as_bytes(), n)),
            HostNames::Cn(cn) => cn
                .as_ref()
                .is_some_and(|cn| hostname_matches(hostname.as_bytes(), cn.as_bytes())),
        }
    }
}

/// Zeek's `parse_distinguished_name` (zeek/zeek a13de64f
/// `src/analyzer/protocol/ssl/functions.bif` lines 91-112), which its
/// certificate-request-info policy applies to each name of a
/// CertificateRequest: `d2i_X509_NAME` of the DER (a whole `Name`
/// SEQUENCE; bytes after it are ignored), printed with
/// `X509_NAME_print_ex(.., XN_FLAG_RFC2253)` as certificates' subjects
/// are, read back with `BIO_gets` into a 256-byte buffer, so at most 255
/// bytes; the empty string when the DER is not a name.
pub fn distinguished_name(der: &[u8]) -> String {
    /// `char buf[256]` in the BIF: `BIO_gets` keeps at most 255 bytes.
    const MAX_DN: usize = 255;
    let text = Der::new(der)
        .expect(SEQUENCE, "distinguished name")
        .and_then(|n| name::format(n.content, "distinguished name"));
    match text {
        // The text is ASCII (every other byte is escaped): any cut is on
        // a character boundary.
        Ok(mut t) => {
            t.truncate(MAX_DN);
            t
        }
        Err(_) => String::new(),
    }
}

/// ssl.log's `sni_matches_cert`, as Zeek's `scripts/base/protocols/ssl/
/// files.zeek` sets it in `ssl_finishing`: set only when the client sent a
/// server name and the server's first certificate was decoded; then whether
/// the name matches that certificate.
pub fn sni_matches_cert(server_name: Option<&str>, leaf: Option<&Certificate>) -> Option<bool> {
    Some(leaf?.matches_hostname(server_name?))
}

/// Zeek's `check_hostname` (functions.bif): equal names match; otherwise
/// the certificate name needs a `*` directly before its first `.`, at least
/// two dots, and the hostname must equal it from its own first `.` on and
/// share the characters before the `*` (so `ww*.zeek.org` matches
/// `www.zeek.org`, `*.zeek.org` does not match `zeek.org` or `a.b.zeek.org`).
pub fn hostname_matches(hostname: &[u8], certname: &[u8]) -> bool {
    if hostname == certname {
        return true;
    }
    let Some(wild) = certname.iter().position(|&b| b == b'*') else {
        return false;
    };
    let Some(dot) = certname.iter().position(|&b| b == b'.') else {
        return false;
    };
    if !certname[dot + 1..].contains(&b'.') || wild + 1 != dot {
        return false;
    }
    let Some(host_dot) = hostname.iter().position(|&b| b == b'.') else {
        return false;
    };
    if hostname[host_dot..] != certname[dot..] {
        return false;
    }
    wild == 0 || hostname.get(..wild) == Some(&certname[..wild])
}

/// An AlgorithmIdentifier: dotted OID and the parameters, if any.
fn algorithm<'a>(
    d: &mut Der<'a>,
    field: &'static str,
) -> Result<(String, Option<der::Tlv<'a>>), X509Error> {
    let mut seq = d.enter(SEQUENCE, field)?;
    let id = oid::dotted(seq.expect(OID, field)?.content, field)?;
    let params = if seq.is_empty() {
        None
    } else {
        Some(seq.any(field)?)
    };
    Ok((id, params))
}

/// `i2a_ASN1_INTEGER`: two upper-case hex digits per octet of the
/// magnitude, `-` first if negative, and (as OpenSSL does for long numbers)
/// a backslash and a newline after every 35 octets.
fn serial_text(content: &[u8]) -> Result<String, X509Error> {
    let (mag, neg) = der::integer(content, "serialNumber")?;
    let mut s = String::with_capacity(mag.len() * 2 + 1);
    if neg {
        s.push('-');
    }
    for (i, b) in mag.iter().enumerate() {
        if i != 0 && i % 35 == 0 {
            s.push_str("\\\n");
        }
        s.push_str(&format!("{b:02X}"));
    }
    Ok(s)
}

/// A validity time as Zeek's `GetTimeFromAsn1` (src/file_analysis/analyzer/
/// x509/Asn1Time.h) computes it, quirks included: 0 for what it refuses,
/// fractional seconds dropped, and an offset `+hhmm` added to the result as
/// `hh * 60 + mm` seconds (Zeek's arithmetic, not the right one).
fn time(d: &mut Der<'_>, field: &'static str) -> Result<i64, X509Error> {
    let t = d.any(field)?;
    let s = t.content;
    let mut buf = [b'0'; 14];
    let mut rest: &[u8];
    match t.tag {
        UTC_TIME => {
            if s.len() < 11 || s.len() > 17 || s[s.len() - 1] != b'Z' {
                return Ok(0);
            }
            buf[..2].copy_from_slice(if s[0] < b'5' { b"20" } else { b"19" });
            buf[2..12].copy_from_slice(&s[..10]);
            rest = &s[10..];
        }
        GENERALIZED_TIME => {
            if s.len() < 12 || s.len() > 23 {
                return Ok(0);
            }
            buf[..12].copy_from_slice(&s[..12]);
            rest = &s[12..];
        }
        found => {
            return Err(X509Error {
                field,
                kind: X509ErrorKind::UnexpectedTag {
                    expected: UTC_TIME,
                    found,
                },
            })
        }
    }
    match rest.first() {
        None | Some(b'Z' | b'+' | b'-') => {}
        Some(_) if rest.len() >= 2 => {
            buf[12..14].copy_from_slice(&rest[..2]);
            rest = &rest[2..];
            if rest.first() == Some(&b'.') {
                rest = &rest[1..];
                while rest.first().is_some_and(u8::is_ascii_digit) {
                    rest = &rest[1..];
                }
            }
        }
        Some(_) => return Ok(0),
    }
    let offset = match rest.first() {
        None | Some(b'Z') => 0,
        Some(&sign @ (b'+' | b'-')) if rest.len() >= 5 => {
            let d = |i: usize| rest[i] as i64 - b'0' as i64;
            let v = (d(1) * 10 + d(2)) * 60 + d(3) * 10 + d(4);
            if sign == b'-' {
                -v
            } else {
                v
            }
        }
        _ => return Ok(0),
    };
    // Digits are taken as `c - '0'` whatever `c` is, as in Zeek, and the
    // fields normalised the way mktime(3) does in UTC.
    let d = |i: usize| buf[i] as i64 - b'0' as i64;
    let mut year = d(0) * 1000 + d(1) * 100 + d(2) * 10 + d(3);
    if year > 1900 {
        year -= 1900;
    }
    let year = year + 1900;
    let mon = d(4) * 10 + d(5) - 1;
    let (year, mon) = (year + mon.div_euclid(12), mon.rem_euclid(12));
    let days = days_from_civil(year, mon + 1) + d(6) * 10 + d(7) - 1;
    let secs =
        days * 86400 + (d(8) * 10 + d(9)) * 3600 + (d(10) * 10 + d(11)) * 60 + d(12) * 10 + d(13);
    // mktime's result 0 doubles as its error value, and Zeek keeps 0 then.
    Ok(if secs == 0 { 0 } else { secs + offset })
}

/// Days from 1970-01-01 to the first of `month` (1-12) of `year`.
fn days_from_civil(year: i64, month: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

struct Key {
    kind: &'static str,
    bits: Option<u32>,
    exponent: Option<String>,
    curve: Option<&'static str>,
}

/// The key columns, for the key types Zeek names (RSA, DSA, EC); `None`
/// when OpenSSL would not decode the key (or names it otherwise, as
/// Ed25519 or RSA-PSS), which leaves every key column unset.
fn public_key(alg: &str, params: Option<der::Tlv<'_>>, bits: &[u8]) -> Option<Key> {
    match alg {
        // Zeek reads an RSA key announced as md5WithRSAEncryption (RDP
        // servers do that) as rsaEncryption.
        oid::RSA | oid::MD5_WITH_RSA | oid::RSA_X500 => {
            let mut d = Der::new(bits);
            let mut seq = d.enter(SEQUENCE, "").ok()?;
            let n = der::integer(seq.expect(INTEGER, "").ok()?.content, "")
                .ok()?
                .0;
            let e = der::integer(seq.expect(INTEGER, "").ok()?.content, "")
                .ok()?
                .0;
            Some(Key {
                kind: "rsa",
                bits: nonzero(der::num_bits(&n)),
                exponent: Some(der::decimal(&e)),
                curve: None,
            })
        }
        oid::DSA | oid::DSA_OLD => {
            let mut d = Der::new(bits);
            d.expect(INTEGER, "").ok()?;
            let p = match params {
                Some(t) if t.tag == SEQUENCE => {
                    let mut seq = Der::new(t.content);
                    Some(
                        der::integer(seq.expect(INTEGER, "").ok()?.content, "")
                            .ok()?
                            .0,
                    )
                }
                _ => None,
            };
            Some(Key {
                kind: "dsa",
                bits: p.and_then(|p| nonzero(der::num_bits(&p))),
                exponent: None,
                curve: None,
            })
        }
        oid::EC => {
            let params = params?;
            if params.tag != OID || bits.is_empty() {
                return None;
            }
            let (name, order_bits) = oid::curve(&oid::dotted(params.content, "").ok()?)?;
            Some(Key {
                kind: "ecdsa",
                bits: Some(order_bits),
                exponent: None,
                curve: Some(name),
            })
        }
        _ => None,
    }
}

fn nonzero(v: u32) -> Option<u32> {
    (v > 0).then_some(v)
}

/// The subjectAltName extension (GeneralNames), and the raw DNS names for
/// hostname checks; `None` if it cannot be read. dNSName, URI and rfc822Name
/// are IA5Strings, taken as text (bytes that are not UTF-8 become U+FFFD).
fn subject_alt_names(value: &[u8]) -> Option<(San, Vec<Vec<u8>>)> {
    let mut outer = Der::new(value);
    let mut names = outer.enter(SEQUENCE, "").ok()?;
    let mut san = San::default();
    let mut raw_dns = Vec::new();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    while !names.is_empty() {
        let g = names.any("").ok()?;
        match g.tag {
            0x82 => {
                raw_dns.push(g.content.to_vec());
                san.dns.get_or_insert_with(Vec::new).push(text(g.content));
            }
            0x86 => san.uri.get_or_insert_with(Vec::new).push(text(g.content)),
            0x81 => san.email.get_or_insert_with(Vec::new).push(text(g.content)),
            0x87 => {
                // Zeek logs only 4- and 16-octet addresses, skipping others
                // (after it has created the list).
                let ips = san.ip.get_or_insert_with(Vec::new);
                if let Ok(a) = <[u8; 4]>::try_from(g.content) {
                    ips.push(IpAddr::V4(Ipv4Addr::from(a)));
                } else if let Ok(a) = <[u8; 16]>::try_from(g.content) {
                    let v6 = Ipv6Addr::from(a);
                    // Zeek holds IPv4 addresses as IPv4-mapped IPv6 ones and
                    // prints those as IPv4.
                    ips.push(v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4));
                }
            }
            0xa0 | 0xa3 | 0xa4 | 0xa5 | 0x88 => san.other_fields = true,
            _ => return None,
        }
    }
    Some((san, raw_dns))
}

fn basic_constraints(value: &[u8]) -> Option<BasicConstraints> {
    let mut outer = Der::new(value);
    let mut seq = outer.enter(SEQUENCE, "").ok()?;
    let ca = match seq.optional(BOOLEAN, "").ok()? {
        Some(b) if b.content.len() == 1 => b.content[0] != 0,
        Some(_) => return None,
        None => false,
    };
    let path_len = match seq.optional(INTEGER, "").ok()? {
        // Zeek stores the value as a 32-bit int in a count.
        Some(i) => Some(der::small_integer(i.content, "").ok()? as i32 as u32 as u64),
        None => None,
    };
    Some(BasicConstraints { ca, path_len })
}

/// Text of an address as Zeek prints it: IPv6 by Zeek's `zeek_inet_ntop6`
/// ([`crate::IpAddr16::v6_text`], the rule conn.log's addresses follow),
/// which dots `::a.b.c.d` and `::ffff:0:a.b.c.d`.
pub fn addr_text(a: &IpAddr) -> String {
    match a {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => crate::IpAddr16::v6_string(v6.octets()),
    }
}

#[cfg(any(test, feature = "fuzzing"))]
/// Fuzzing entry: any bytes as a certificate. Must never panic, and every
/// derived value must be computable.
pub fn fuzz(data: &[u8]) {
    match Certificate::parse(data) {
        Ok(c) => {
            let _ = c.matches_hostname("www.example.com");
            let _ = sni_matches_cert(Some("a.b.c"), Some(&c));
            for a in c.san.iter().flat_map(|s| s.ip.iter().flatten()) {
                let _ = addr_text(a);
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}
