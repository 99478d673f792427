//! Certificates against Zeek's x509.log baselines (every column of every
//! row, in Zeek's order, with its de-duplication), `sni_matches_cert` and
//! the subject/issuer columns against the ssl.log baselines, names against
//! OpenSSL itself, and damaged certificates.

use std::collections::{HashMap, HashSet};

use super::*;
use crate::testutil::{self, Ev, Rng};
use crate::tls::{TlsHandshake, TlsLimits, TlsParser};
use crate::{Dir, StreamParser};

const PORTS: &[u16] = &[
    443, 5228, 8443, 8888, 25, 143, 110, 3306, 5432, 465, 993, 995,
];

type Tuple = (String, u16, String, u16);

/// Every TLS handshake of a capture with its connection's 4-tuple, the
/// streams put in order by the real reassembler.
fn handshakes(rel: &str) -> Vec<(Tuple, TlsHandshake)> {
    use crate::stream::{Budget, Chunk, Reassembler};
    let rel = format!("tls/{rel}");
    let (_, tuples) = testutil::tcp_events_with_tuples(&rel, PORTS);
    let segs = testutil::tcp_segments(&rel, PORTS);
    let mut budget = Budget::new(1 << 24);
    let mut streams: Vec<[Reassembler; 2]> = Vec::new();
    let mut events = Vec::new();
    let mut last = 0;
    let push = |conn: usize, dir: Dir, c: Chunk<'_>, out: &mut Vec<Ev>| match c {
        Chunk::Data { ts_ns, data } => out.push(Ev::Data {
            conn,
            dir,
            ts_ns,
            data: data.to_vec(),
        }),
        Chunk::Gap { ts_ns, len } | Chunk::Cut { ts_ns, len } => out.push(Ev::Gap {
            conn,
            dir,
            ts_ns,
            len,
        }),
    };
    for s in &segs {
        while streams.len() <= s.conn {
            streams.push([Reassembler::new(1 << 20), Reassembler::new(1 << 20)]);
        }
        let d = usize::from(s.dir != Dir::ToServer);
        streams[s.conn][d].segment(s.seq, s.ts_ns, &s.payload, s.flags, &mut budget, &mut |c| {
            push(s.conn, s.dir, c, &mut events)
        });
        last = s.ts_ns;
    }
    for (conn, st) in streams.iter_mut().enumerate() {
        for (d, dir) in [Dir::ToServer, Dir::ToClient].into_iter().enumerate() {
            st[d].flush(last, &mut budget, &mut |c| push(conn, dir, c, &mut events));
        }
    }
    let mut parsers: Vec<TlsParser> = (0..streams.len())
        .map(|_| TlsParser::with_limits(TlsLimits::default()))
        .collect();
    let mut out = Vec::new();
    for e in &events {
        match e {
            Ev::Data {
                conn,
                dir,
                ts_ns,
                data,
            } => parsers[*conn].data(*dir, *ts_ns, data, &mut out),
            Ev::Gap {
                conn,
                dir,
                ts_ns,
                len,
            } => parsers[*conn].gap(*dir, *ts_ns, *len, &mut out),
        }
    }
    let mut all = Vec::new();
    for (i, p) in parsers.iter_mut().enumerate() {
        p.finish(last, &mut out);
        for h in p.take_handshakes() {
            all.push((tuples[i].clone(), h));
        }
    }
    all
}

/// Rows of a Zeek log as column -> value.
fn zeek_rows(rel: &str) -> Vec<HashMap<String, String>> {
    let text = std::fs::read_to_string(testutil::path(&format!("tls/{rel}"))).unwrap();
    let mut fields: Vec<String> = Vec::new();
    let mut rows = Vec::new();
    for line in text.lines() {
        if let Some(f) = line.strip_prefix("#fields\t") {
            fields = f.split('\t').map(str::to_string).collect();
        } else if !line.starts_with('#') && !fields.is_empty() && !line.is_empty() {
            rows.push(
                fields
                    .iter()
                    .cloned()
                    .zip(line.split('\t').map(str::to_string))
                    .collect(),
            );
        }
    }
    rows
}

/// Zeek's ASCII writer on one string: `\` doubled, bytes outside printable
/// ASCII as `\xNN`, and inside a set or vector the separator `,` as `\x2c`.
fn esc(s: &str, in_set: bool) -> String {
    let mut o = String::new();
    for &b in s.as_bytes() {
        match b {
            b'\\' => o.push_str("\\\\"),
            b',' if in_set => o.push_str("\\x2c"),
            0x20..=0x7e => o.push(b as char),
            _ => o.push_str(&format!("\\x{b:02x}")),
        }
    }
    if o.is_empty() {
        "(empty)".into()
    } else {
        o
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

fn list(v: Option<&Vec<String>>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v.is_empty() => "(empty)".into(),
        Some(v) => v.iter().map(|s| esc(s, true)).collect::<Vec<_>>().join(","),
    }
}

fn tf(b: bool) -> String {
    if b { "T" } else { "F" }.into()
}

fn time(t: i64) -> String {
    format!("{t}.000000")
}

/// The x509.log columns of a certificate as Zeek writes them.
fn columns(c: &Certificate, host: bool, client: bool) -> Vec<(&'static str, String)> {
    let san = c.san.as_ref();
    vec![
        ("fingerprint", c.fingerprint.clone()),
        ("certificate.version", c.version.to_string()),
        ("certificate.serial", esc(&c.serial, false)),
        ("certificate.subject", esc(&c.subject, false)),
        ("certificate.issuer", esc(&c.issuer, false)),
        ("certificate.not_valid_before", time(c.not_valid_before)),
        ("certificate.not_valid_after", time(c.not_valid_after)),
        ("certificate.key_alg", esc(&c.key_alg, false)),
        ("certificate.sig_alg", esc(&c.sig_alg, false)),
        ("certificate.key_type", opt(c.key_type)),
        ("certificate.key_length", opt(c.key_length)),
        ("certificate.exponent", opt(c.exponent.as_ref())),
        ("certificate.curve", opt(c.curve)),
        ("san.dns", list(san.and_then(|s| s.dns.as_ref()))),
        ("san.uri", list(san.and_then(|s| s.uri.as_ref()))),
        ("san.email", list(san.and_then(|s| s.email.as_ref()))),
        (
            "san.ip",
            list(
                san.and_then(|s| s.ip.as_ref())
                    .map(|v| v.iter().map(addr_text).collect())
                    .as_ref(),
            ),
        ),
        (
            "basic_constraints.ca",
            opt(c.basic_constraints.map(|b| tf(b.ca))),
        ),
        (
            "basic_constraints.path_len",
            opt(c.basic_constraints.and_then(|b| b.path_len)),
        ),
        ("host_cert", tf(host)),
        ("client_cert", tf(client)),
    ]
}

/// Standard base64 (the `cert` column of policy `log-certs-base64`).
fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut o = String::new();
    for c in data.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                o.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                o.push('=');
            }
        }
    }
    o
}

/// The x509.log baselines: (case, pcap, log).
const X509_LOGS: &[(&str, &str, &str)] = &[
    (
        "tls10_sni_basic",
        "tls-conn-with-extensions.pcap",
        "x509.log",
    ),
    ("tls11_no_sni", "tls1_1.pcap", "x509.log"),
    ("tls12_rsa_chain", "tls1.2.pcap", "x509.log"),
    ("tls12_ecdhe", "ecdhe.pcap", "x509.log"),
    ("tls12_ecdhe", "ecdhe.pcap", "x509.base64.log"),
    ("tls12_ecdsa", "ecdsa-cert.pcap", "x509.log"),
    (
        "tls12_failures",
        "tls1.2-late-protocol-error.pcap",
        "x509.late-protocol-error.log",
    ),
    ("starttls_smtp", "smtp-starttls.pcap", "x509.log"),
    ("starttls_imap", "imap-starttls.pcap", "x509.log"),
    ("starttls_pop3", "pop3-starttls.pcap", "x509.log"),
    ("x509_cert_repeat", "google-cert-repeat.pcap", "x509.log"),
    (
        "starttls_databases",
        "encrypted.pcap",
        "x509.mysql-encrypted.log",
    ),
    (
        "starttls_databases",
        "tls-12-amazon-rds.pcap",
        "x509.mysql-rds-tls12.log",
    ),
];

/// The certificates of a capture in the order Zeek logs them: handshakes
/// in time order, the server's chain then the client's, each
/// (fingerprint, host_cert, client_cert) once (Zeek's de-duplication).
fn logged_certs(pcap: &str) -> Vec<(Vec<u8>, bool, bool)> {
    let mut hs = handshakes(pcap);
    hs.sort_by_key(|(_, h)| h.ts_ns);
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (_, h) in &hs {
        for (chain, client) in [(&h.server_certs, false), (&h.client_certs, true)] {
            for (i, der) in chain.iter().flat_map(|c| c.certs.iter()).enumerate() {
                if seen.insert((crate::tls::sha256_hex(der), i == 0, client)) {
                    out.push((der.clone(), i == 0, client));
                }
            }
        }
    }
    out
}

#[test]
fn x509_logs_match_zeek() {
    let (mut rows, mut rows_ok, mut fields, mut fields_ok) = (0, 0, 0, 0);
    let mut failed = Vec::new();
    for &(case, pcap, log) in X509_LOGS {
        let ours = logged_certs(&format!("{case}/{pcap}"));
        let want = zeek_rows(&format!("{case}/{log}"));
        if ours.len() != want.len() {
            failed.push(format!(
                "{case}/{log}: {} certificates, Zeek logs {}",
                ours.len(),
                want.len()
            ));
        }
        for (i, row) in want.iter().enumerate() {
            rows += 1;
            let Some((der, host, client)) = ours.get(i) else {
                continue;
            };
            let c = match Certificate::parse(der) {
                Ok(c) => c,
                Err(e) => {
                    failed.push(format!("{case}/{log} row {i}: {e}"));
                    continue;
                }
            };
            let mut cols = columns(&c, *host, *client);
            if row.contains_key("cert") {
                cols.push(("cert", base64(der)));
            }
            let mut all = true;
            for (name, got) in cols {
                fields += 1;
                if row[name] == got {
                    fields_ok += 1;
                } else {
                    all = false;
                    failed.push(format!(
                        "{case}/{log} row {i} {name}: got {got:?}, Zeek {:?}",
                        row[name]
                    ));
                }
            }
            rows_ok += usize::from(all);
        }
    }
    eprintln!("x509.log: {rows_ok}/{rows} rows, {fields_ok}/{fields} fields equal");
    assert!(rows >= 30, "expected the 13 baselines' rows, found {rows}");
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Zeek's `certificate$cn` (the last CN) for every certificate event of the
/// common_name test, or `No CN`.
#[test]
fn common_names_match_zeek() {
    let want: Vec<String> =
        std::fs::read_to_string(testutil::path("tls/tls10_sni_basic/common_name.stdout"))
            .unwrap()
            .lines()
            .skip(1)
            .map(str::to_string)
            .collect();
    let mut got = Vec::new();
    for pcap in ["tls-conn-with-extensions.pcap", "cert-no-cn.pcap"] {
        for (_, h) in handshakes(&format!("tls10_sni_basic/{pcap}")) {
            for der in h.server_certs.iter().flat_map(|c| c.certs.iter()) {
                got.push(
                    Certificate::parse(der)
                        .unwrap()
                        .cn
                        .unwrap_or_else(|| "No CN".into()),
                );
            }
        }
    }
    assert_eq!(got, want);
}

/// ssl.log's `sni_matches_cert` (and, where logged, `subject`/`issuer`)
/// for every row of every ssl.log baseline, matched by 4-tuple.
#[test]
fn ssl_log_certificate_columns_match_zeek() {
    let logs: &[(&str, &[&str], &str)] = &[
        (
            "tls10_sni_basic",
            &["tls-conn-with-extensions.pcap"],
            "ssl.log",
        ),
        ("tls11_no_sni", &["tls1_1.pcap"], "ssl.log"),
        ("tls12_rsa_chain", &["tls1.2.pcap"], "ssl.log"),
        ("tls12_ecdhe", &["ecdhe.pcap"], "ssl.log"),
        ("tls12_ecdsa", &["ecdsa-cert.pcap"], "ssl.log"),
        (
            "tls12_failures",
            &["tls-1.2-handshake-failure.pcap"],
            "ssl.handshake-failure.log",
        ),
        (
            "tls12_failures",
            &["tls1.2-late-protocol-error.pcap"],
            "ssl.late-protocol-error.log",
        ),
        (
            "tls12_alpn_ocsp_sct",
            &[
                "signed_certificate_timestamp.pcap",
                "signed_certificate_timestamp-2.pcap",
            ],
            "ssl-all.log",
        ),
        (
            "tls13_psk_resumption",
            &["tls13_psk_succesfull.pcap"],
            "ssl.log",
        ),
        (
            "tls13_drafts",
            &["tls13draft16-chrome55.0.2879.0-canary.pcap"],
            "ssl.draft16-chrome55.log",
        ),
        (
            "tls13_drafts",
            &["tls13draft16-ff52.a01.pcap"],
            "ssl.draft16-ff52.log",
        ),
        (
            "tls13_drafts",
            &["tls13draft23-chrome67.0.3368.0-canary.pcap"],
            "ssl.draft23.log",
        ),
        ("starttls_smtp", &["smtp-starttls.pcap"], "ssl.log"),
        ("starttls_imap", &["imap-starttls.pcap"], "ssl.log"),
        ("starttls_pop3", &["pop3-starttls.pcap"], "ssl.log"),
        ("x509_cert_repeat", &["google-cert-repeat.pcap"], "ssl.log"),
        (
            "cert_request_ipv6",
            &["certificate-request-failed.pcap"],
            "ssl.log",
        ),
        (
            "starttls_databases",
            &["encrypted.pcap"],
            "ssl.mysql-encrypted.log",
        ),
        (
            "starttls_databases",
            &["tls-12-amazon-rds.pcap"],
            "ssl.mysql-rds-tls12.log",
        ),
        (
            "starttls_databases",
            &["tls-13-amazon-rds.pcap"],
            "ssl.mysql-rds-tls13.log",
        ),
    ];
    let mut f = testutil::Facts::new("ssl.log certificate columns");
    let (mut set, mut subjects) = (0, 0);
    for &(case, pcaps, log) in logs {
        let mut by_tuple: HashMap<Tuple, TlsHandshake> = HashMap::new();
        for p in pcaps {
            for (t, h) in handshakes(&format!("{case}/{p}")) {
                by_tuple.entry(t).or_insert(h);
            }
        }
        for row in zeek_rows(&format!("{case}/{log}")) {
            let t: Tuple = (
                row["id.orig_h"].clone(),
                row["id.orig_p"].parse().unwrap(),
                row["id.resp_h"].clone(),
                row["id.resp_p"].parse().unwrap(),
            );
            let Some(h) = by_tuple.get(&t) else {
                f.eq(&format!("{case}/{log} {t:?} found"), false, true);
                continue;
            };
            let leaf = h
                .server_certs
                .as_ref()
                .and_then(|c| c.certs.first())
                .and_then(|d| Certificate::parse(d).ok());
            let sni = sni_matches_cert(h.server_name.as_deref(), leaf.as_ref());
            set += usize::from(sni.is_some());
            f.eq(
                &format!("{case}/{log} {t:?} sni_matches_cert"),
                opt(sni.map(tf)),
                row["sni_matches_cert"].clone(),
            );
            if row.contains_key("subject") {
                subjects += 1;
                let (s, i) = leaf.as_ref().map_or(("-".into(), "-".into()), |c| {
                    (esc(&c.subject, false), esc(&c.issuer, false))
                });
                f.eq(
                    &format!("{case}/{log} {t:?} subject"),
                    s,
                    row["subject"].clone(),
                );
                f.eq(
                    &format!("{case}/{log} {t:?} issuer"),
                    i,
                    row["issuer"].clone(),
                );
            }
        }
    }
    assert!(
        set >= 7 && subjects >= 1,
        "sni_matches_cert set {set} times, subject columns {subjects}"
    );
    f.done();
}

/// Zeek's own cases for `x509_check_hostname` (testing/btest/bifs/
/// x509_check_hostname.zeek), with the answers its rules give.
#[test]
fn hostname_rules() {
    let cases: &[(&str, &str, bool)] = &[
        ("hi", "www.zeek.org", false),
        ("ww.zeek.org", "www.zeek.org", false),
        ("www.zeek.org", "www.zeek.org", true),
        ("www.zeek.org", "*", false),
        ("www.zeek.org", "zeek.org", false),
        ("www.zeek.org", "*.zeek.org", true),
        ("www.zeek.org", "a*.zeek.org", false),
        ("www.zeek.org", "ww*.zeek.org", true),
        ("www.zeek.org", "wa*.zeek.org", false),
        ("www.zeek.org", "ww*.leek.com", false),
        ("www.zeek.org", "*.*.com", false),
        ("", "", true),
        ("zeek.org", "*.zeek.org", false),
        ("a.b.zeek.org", "*.zeek.org", false),
        ("www.zeek.org", "*.org", false),
        ("www.zeek.org", "w*w.zeek.org", false),
    ];
    for &(h, c, want) in cases {
        assert_eq!(
            hostname_matches(h.as_bytes(), c.as_bytes()),
            want,
            "{h} vs {c}"
        );
    }
}

/// Every certificate of the reference captures.
fn all_certs() -> Vec<Vec<u8>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for &(case, pcap, _) in X509_LOGS {
        for (der, ..) in logged_certs(&format!("{case}/{pcap}")) {
            if seen.insert(der.clone()) {
                out.push(der);
            }
        }
    }
    out
}

/// Truncations and byte flips of every certificate never panic; a
/// truncated one is an error naming a field.
#[test]
fn damaged_certificates_never_panic() {
    let certs = all_certs();
    assert!(certs.len() >= 20);
    let mut rng = Rng(0x5eed_0f09_1234_u64);
    let mut parsed = 0;
    for der in &certs {
        for n in 0..der.len() {
            fuzz(&der[..n]);
            let e = Certificate::parse(&der[..n]).expect_err("a truncated certificate is an error");
            assert!(!e.field.is_empty() && !e.to_string().is_empty());
        }
        for _ in 0..2000 {
            let mut d = der.clone();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(d.len());
                d[i] = rng.next() as u8;
            }
            fuzz(&d);
            parsed += usize::from(Certificate::parse(&d).is_ok());
        }
    }
    // Most single flips land in a value, not in the structure.
    assert!(parsed > 0);
    fuzz(&[]);
    fuzz(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]);
    fuzz(&[0x30, 0x80, 0, 0]);
}

/// One DER element at the start of `b`: (its whole encoding, its
/// contents, what follows it).
fn tlv(b: &[u8]) -> (&[u8], &[u8], &[u8]) {
    let l0 = b[1] as usize;
    let (len, hdr) = if l0 < 0x80 {
        (l0, 2)
    } else {
        let n = l0 & 0x7f;
        (b[2..2 + n].iter().fold(0, |a, &x| a << 8 | x as usize), 2 + n)
    };
    (&b[..hdr + len], &b[hdr..hdr + len], &b[hdr + len..])
}

/// The issuer and subject Names (whole DER) of a certificate.
fn names_of(der: &[u8]) -> (&[u8], &[u8]) {
    let tbs = tlv(tlv(der).1).1;
    let mut rest = tbs;
    if rest[0] == 0xa0 {
        rest = tlv(rest).2;
    }
    rest = tlv(tlv(rest).2).2; // serial, signature algorithm
    let (issuer, _, rest) = tlv(rest);
    let (subject, _, _) = tlv(tlv(rest).2); // validity, then the subject
    (issuer, subject)
}

/// One attribute of a name: its OID's contents, its string tag, its value.
type Attr<'a> = (&'a [u8], u8, &'a [u8]);

/// A Name from RDNs of attributes.
fn dn(rdns: &[&[Attr<'_>]]) -> Vec<u8> {
    fn wrap(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        let n = body.len();
        if n < 0x80 {
            v.push(n as u8);
        } else {
            v.extend_from_slice(&[0x82, (n >> 8) as u8, n as u8]);
        }
        v.extend_from_slice(body);
        v
    }
    let mut seq = Vec::new();
    for rdn in rdns {
        let mut set = Vec::new();
        for (oid, tag, value) in *rdn {
            let mut atv = wrap(0x06, oid);
            atv.extend(wrap(*tag, value));
            set.extend(wrap(0x30, &atv));
        }
        seq.extend(wrap(0x31, &set));
    }
    wrap(0x30, &seq)
}

/// Zeek's `parse_distinguished_name` on names built here: RFC 2253 order
/// (attributes last to first, inside a multi-valued RDN too)
/// and escapes, `+` in a multi-valued RDN, UTF-8 bytes as `\XX`, the text
/// cut at 255 bytes, bytes after the name ignored, the empty string for
/// what is not a name.
#[test]
fn distinguished_names_as_zeek_parses_them() {
    const CN: &[u8] = &[0x55, 4, 3];
    const C: &[u8] = &[0x55, 4, 6];
    const O: &[u8] = &[0x55, 4, 10];
    const OU: &[u8] = &[0x55, 4, 11];
    const PRINTABLE: u8 = 0x13;
    const UTF8: u8 = 0x0c;
    assert_eq!(distinguished_name(&dn(&[&[(CN, PRINTABLE, b"ca.example")]])), "CN=ca.example");
    let three = dn(&[
        &[(C, PRINTABLE, b"US")],
        &[(O, UTF8, b"Example, Inc.")],
        &[(OU, UTF8, b"Unit A"), (CN, UTF8, b"Root")],
    ]);
    assert_eq!(distinguished_name(&three), "CN=Root+OU=Unit A,O=Example\\, Inc.,C=US");
    let mut trailing = three.clone();
    trailing.extend_from_slice(&[0x30, 0x00, 0xff]);
    assert_eq!(distinguished_name(&trailing), distinguished_name(&three));
    assert_eq!(distinguished_name(&dn(&[&[(O, UTF8, "\u{65e5}\u{672c}".as_bytes())]])), "O=\\E6\\97\\A5\\E6\\9C\\AC");
    let long = "x".repeat(300);
    let t = distinguished_name(&dn(&[&[(CN, UTF8, long.as_bytes())]]));
    assert_eq!(t.len(), 255);
    assert_eq!(t, format!("CN={}", &long[..252]));
    assert_eq!(distinguished_name(&[]), "");
    assert_eq!(distinguished_name(&[0x31, 0x00]), "");
    assert_eq!(distinguished_name(&three[..three.len() - 1]), "");
}

/// Runs the openssl command line tool; panics with its stderr on failure.
fn openssl(dir: &std::path::Path, args: &[&str]) -> String {
    let out = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command (Debian package openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A value after `label` on a line of `openssl x509 -text` output.
fn after<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(label))
        .map(str::trim)
}

/// Certificates made here by OpenSSL with awkward names (every escaped
/// character, control bytes, non-ASCII text as UTF8String, T61String and
/// BMPString, multi-valued RDNs, every attribute of the table, an unknown
/// attribute), long serials and RSA/DSA/EC/Ed25519 keys: subject, issuer
/// and serial equal what `openssl x509 -nameopt RFC2253` prints (the
/// printer Zeek calls), algorithms and key sizes what `-text` says, SANs
/// and basic constraints what was asked for.
#[test]
fn generated_certificates_match_openssl() {
    let dir = std::env::temp_dir().join(format!("wirelog-x509-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.as_path();
    openssl(
        d,
        &[
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:1024",
            "-pkeyopt",
            "rsa_keygen_pubexp:3",
            "-out",
            "rsa.pem",
        ],
    );
    openssl(
        d,
        &["genpkey", "-algorithm", "ED25519", "-out", "ed25519.pem"],
    );
    openssl(d, &["dsaparam", "-genkey", "-out", "dsa.pem", "1024"]);
    // string_mask default: PrintableString where it fits, else T61String
    // (Latin-1) or BMPString.
    std::fs::write(
        dir.join("mask.cnf"),
        "[req]\ndistinguished_name = dn\nstring_mask = default\n[dn]\n",
    )
    .unwrap();
    let mut keys = vec![
        ("rsa.pem", "-sha1"),
        ("ed25519.pem", ""),
        ("dsa.pem", "-sha256"),
    ];
    for curve in [
        "prime256v1",
        "secp384r1",
        "secp521r1",
        "secp256k1",
        "brainpoolP256r1",
    ] {
        let f = format!("ec-{curve}.pem");
        openssl(
            d,
            &[
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                &format!("ec_paramgen_curve:{curve}"),
                "-out",
                &f,
            ],
        );
        keys.push((Box::leak(f.into_boxed_str()), "-sha384"));
    }
    let attrs: String = NAME_ATTRIBUTES
        .iter()
        .filter(|(o, _)| *o != "2.5.4.6" && *o != "1.3.6.1.4.1.311.60.2.1.3")
        .map(|(o, _)| format!("/{o}=v"))
        .collect();
    let subjects: Vec<(String, &[&str])> = vec![
        (
            "/CN=a,b+c\"d;e<f>g\\\\h=i/O= lead/OU=#hash/L=trail /ST=x#y/C=DE".into(),
            &["-utf8"],
        ),
        (
            "/CN=\u{e9}t\u{e9} \u{fc}ber/O=\u{416}\u{436}/OU=tab\there\u{7f}del".into(),
            &["-utf8"],
        ),
        (
            "/CN=\u{e9}t\u{e9}/O=\u{416}\u{436}/OU=#/L= ".into(),
            &["-utf8", "-config", "mask.cnf"],
        ),
        (
            "/CN=one+OU=two+O=three/C=US+ST=Somewhere/L=x".into(),
            &["-multivalue-rdn"],
        ),
        (format!("/CN=all{attrs}/1.2.3.4.5=unknown"), &[]),
    ];
    let mut checked = 0;
    let mut long_names = 0;
    for (i, (key, digest)) in keys.iter().enumerate() {
        for (j, (subj, extra)) in subjects.iter().enumerate() {
            // Every subject with the RSA key, every key with the first subject.
            if i != 0 && j != 0 {
                continue;
            }
            let serial = ["0x00ff", "0x0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "1", "0x7f"][j % 4];
            let mut args = vec![
                "req",
                "-x509",
                "-new",
                "-key",
                key,
                "-subj",
                subj,
                "-set_serial",
                serial,
                "-days",
                "30",
                "-outform",
                "DER",
                "-out",
                "c.der",
            ];
            args.extend_from_slice(extra);
            if !digest.is_empty() {
                args.push(digest);
            }
            args.extend_from_slice(&["-addext", "subjectAltName=DNS:a.example,DNS:*.b.example,IP:10.0.0.1,IP:2001:db8::1,IP:::ffff:1.2.3.4,IP:::1.2.3.4,email:x@y.z,URI:http://u/p,otherName:1.2.3.4;UTF8:x"]);
            args.extend_from_slice(&["-addext", "basicConstraints=critical,CA:TRUE,pathlen:3"]);
            openssl(d, &args);
            let der = std::fs::read(dir.join("c.der")).unwrap();
            let c = Certificate::parse(&der).unwrap_or_else(|e| panic!("{subj}: {e}"));
            let want = openssl(
                d,
                &[
                    "x509", "-inform", "DER", "-in", "c.der", "-noout", "-nameopt", "RFC2253",
                    "-subject", "-issuer", "-serial",
                ],
            );
            assert_eq!(
                format!(
                    "subject={}\nissuer={}\nserial={}\n",
                    c.subject, c.issuer, c.serial
                ),
                want,
                "{subj}"
            );
            // A CertificateRequest's names (Zeek's parse_distinguished_name):
            // the same printer, cut at 255 bytes.
            let (issuer_dn, subject_dn) = names_of(&der);
            let cut = |s: &str| s[..s.len().min(255)].to_string();
            assert_eq!(distinguished_name(subject_dn), cut(&c.subject), "{subj}");
            assert_eq!(distinguished_name(issuer_dn), cut(&c.issuer), "{subj}");
            long_names += usize::from(c.subject.len() > 255);
            let text = openssl(
                d,
                &["x509", "-inform", "DER", "-in", "c.der", "-noout", "-text"],
            );
            assert_eq!(
                Some(c.key_alg.as_str()),
                after(&text, "Public Key Algorithm:"),
                "{key}"
            );
            assert_eq!(
                Some(c.sig_alg.as_str()),
                after(&text, "Signature Algorithm:"),
                "{key}"
            );
            let bits = after(&text, "Public-Key: (")
                .map(|s| s.trim_end_matches(" bit)").parse::<u32>().unwrap());
            let (kind, exp, curve) = match *key {
                "rsa.pem" => (Some("rsa"), Some("3".to_string()), None),
                "dsa.pem" => (Some("dsa"), None, None),
                "ed25519.pem" => (None, None, None),
                k => (
                    Some("ecdsa"),
                    None,
                    after(&text, "ASN1 OID:")
                        .map(|s| s.to_string())
                        .filter(|_| k.starts_with("ec-")),
                ),
            };
            assert_eq!(c.key_type, kind, "{key}");
            assert_eq!(c.exponent, exp, "{key}");
            assert_eq!(c.curve.map(str::to_string), curve, "{key}");
            assert_eq!(
                c.key_length,
                if kind.is_some() { bits } else { None },
                "{key}"
            );
            let san = c.san.clone().unwrap();
            assert_eq!(
                san.dns,
                Some(vec!["a.example".into(), "*.b.example".into()])
            );
            let ips: Vec<String> = san.ip.unwrap().iter().map(addr_text).collect();
            assert_eq!(ips, ["10.0.0.1", "2001:db8::1", "1.2.3.4", "::1.2.3.4"]);
            assert_eq!(san.email, Some(vec!["x@y.z".into()]));
            assert_eq!(san.uri, Some(vec!["http://u/p".into()]));
            assert!(san.other_fields);
            assert_eq!(
                c.basic_constraints,
                Some(BasicConstraints {
                    ca: true,
                    path_len: Some(3)
                })
            );
            assert_eq!(c.version, 3);
            assert!(c.matches_hostname("x.b.example") && !c.matches_hostname("b.example"));
            assert!(c.not_valid_after - c.not_valid_before == 30 * 86400);
            checked += 1;
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(checked, keys.len() + subjects.len() - 1);
    assert!(long_names >= 1, "no name over 255 bytes was printed");
}
