//! Zeek's validate-certs and certificate-request-info policies on
//! handshakes made here: OpenSSL makes a root CA, an intermediate and
//! leaves (good, expired, self-signed, signed by a key that is not its
//! named issuer's), `openssl s_server`s in a network namespace serve them
//! (TLS 1.2, asking for a client certificate with a list of two CAs; one
//! TLS 1.3 server), `openssl s_client` connects to each, tcpdump captures
//! `lo`, and `wirelog read --zeek-policy validate-certs,certificate-request-info
//! --ca-file root.pem` must give, per connection:
//! - `validation_status`: what `openssl verify` says of the same chain
//!   with the same trust store (its first error's text, or `ok`), which
//!   is what Zeek writes (X509_verify_cert_error_string; Zeek's
//!   functions.bif rewrites the depth-zero self-signed error to OpenSSL 1's
//!   "self signed certificate"), and, as in Zeek, a leaf sent without its
//!   intermediate validates once another connection showed that
//!   intermediate in a valid chain (`ssl_cache_intermediate_ca`);
//! - `requested_client_certificate_authorities`: the two CAs' subjects as
//!   `openssl x509 -subject -nameopt RFC2253` prints them (the printer
//!   Zeek's `parse_distinguished_name` calls), in the server's order;
//! - TLS 1.3 (request and certificates encrypted): both unset.

mod common;

use std::collections::HashMap;
use std::path::Path;

use common::live::text;
use common::lo::{have, LoNs, Reap};
use common::tls_ns::{self, openssl, openssl_run, request, Server};

type Row = HashMap<String, String>;

/// A self-signed certificate `stem.pem` (key `stem.key`) for `/CN=cn`, a
/// CA or not.
fn self_signed(dir: &Path, stem: &str, cn: &str, ca: bool) {
    tls_ns::self_signed(dir, stem, &format!("/CN={cn}"), ca);
}

/// `stem.pem` for a new key, signed by `ca` (its .pem and .key) with the
/// extensions of `ext`; `dates` (start, end) makes it with `openssl ca`.
fn issue(dir: &Path, stem: &str, cn: &str, ca: &str, ext: &str, dates: Option<(&str, &str)>) {
    let subj = format!("/CN={cn}");
    let Some((start, end)) = dates else {
        tls_ns::issue(dir, stem, &subj, ca, "9", ext);
        return;
    };
    request(dir, stem, &subj);
    let (csr, pem, cacert, cakey) = (format!("{stem}.csr"), format!("{stem}.pem"), format!("{ca}.pem"), format!("{ca}.key"));
    std::fs::write(dir.join("index.txt"), "").unwrap();
    std::fs::write(dir.join("serial"), "0A\n").unwrap();
    std::fs::write(
        dir.join("ca.cnf"),
        "[ca]\ndefault_ca=d\n[d]\ndatabase=index.txt\nnew_certs_dir=.\nserial=serial\ndefault_md=sha256\npolicy=p\nunique_subject=no\n[p]\ncommonName=supplied\n",
    )
    .unwrap();
    openssl(dir, &[
        "ca", "-batch", "-notext", "-config", "ca.cnf", "-cert", &cacert, "-keyfile", &cakey, "-in", &csr, "-out", &pem,
        "-startdate", start, "-enddate", end, "-extfile", ext,
    ]);
}

/// `openssl verify`'s verdict on `leaf` with `untrusted` as the chain and
/// `root.pem` alone as the trust store: `ok`, or the text of the first
/// error it reports (the one X509_verify_cert stops at), with Zeek's
/// rewrite of error 18.
fn openssl_verdict(dir: &Path, leaf: &str, untrusted: Option<&str>) -> String {
    let mut a = vec!["verify", "-no-CApath", "-no-CAstore", "-CAfile", "root.pem"];
    if let Some(u) = untrusted {
        a.extend(["-untrusted", u]);
    }
    a.push(leaf);
    let (ok, all) = openssl_run(dir, &a);
    if ok {
        assert!(all.contains(": OK"), "{all}");
        return "ok".into();
    }
    let line = all.lines().find(|l| l.starts_with("error ") && l.contains(" depth lookup: ")).unwrap_or_else(|| panic!("{all}"));
    let code: u32 = line["error ".len()..].split(' ').next().unwrap().parse().unwrap();
    let msg = line.split(" depth lookup: ").nth(1).unwrap().to_string();
    // Zeek's x509_verify (functions.bif): X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT
    // as OpenSSL 1 wrote it.
    if code == 18 {
        assert_eq!(msg, "self-signed certificate");
        return "self signed certificate".into();
    }
    msg
}

#[test]
fn validation_status_and_requested_cas_agree_with_openssl() {
    let tools = ["openssl", "tcpdump"];
    if !(tools.iter().all(|t| have(t)) && common::live::is_root()) {
        common::live::skip("needs root, openssl and tcpdump");
        return;
    }
    let t0 = std::time::Instant::now();
    let dir = tls_ns::fresh_dir("tls-validate");
    let d = dir.as_path();
    std::fs::write(dir.join("ca.ext"), "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n").unwrap();
    std::fs::write(dir.join("leaf.ext"), "basicConstraints=CA:FALSE\nsubjectAltName=DNS:www.example.org\n").unwrap();
    // Without key identifiers, OpenSSL finds a leaf's issuer by name alone.
    std::fs::write(dir.join("forged.ext"), "basicConstraints=CA:FALSE\nsubjectAltName=DNS:www.example.org\nauthorityKeyIdentifier=none\nsubjectKeyIdentifier=none\n").unwrap();
    self_signed(d, "root", "Wirelog Test Root", true);
    issue(d, "int", "Wirelog Test Intermediate", "root", "ca.ext", None);
    issue(d, "good", "www.example.org", "int", "leaf.ext", None);
    issue(d, "expired", "www.example.org", "int", "leaf.ext", Some(("20200101000000Z", "20200201000000Z")));
    self_signed(d, "selfsigned", "www.example.org", false);
    // An intermediate of the same name with another key: the leaf it signs
    // names the real intermediate as issuer, whose key does not verify it.
    self_signed(d, "forger", "Wirelog Test Intermediate", true);
    issue(d, "forged", "www.example.org", "forger", "forged.ext", None);
    // The CAs the servers ask client certificates of: this list's order.
    self_signed(d, "clientca", "Client CA, Example\\+Co", true);
    let cas = format!("{}{}", std::fs::read_to_string(dir.join("root.pem")).unwrap(), std::fs::read_to_string(dir.join("clientca.pem")).unwrap());
    std::fs::write(dir.join("cas.pem"), cas).unwrap();

    // (port, leaf, chain sent after it, TLS 1.3, expected verdict)
    let cases: Vec<(u16, &str, Option<&str>, bool, String)> = vec![
        (4431, "good.pem", None, false, openssl_verdict(d, "good.pem", None)),
        (4432, "good.pem", Some("int.pem"), false, openssl_verdict(d, "good.pem", Some("int.pem"))),
        // The intermediate seen in 4432's valid chain is used (Zeek's cache).
        (4433, "good.pem", None, false, openssl_verdict(d, "good.pem", Some("int.pem"))),
        (4434, "expired.pem", Some("int.pem"), false, openssl_verdict(d, "expired.pem", Some("int.pem"))),
        (4435, "selfsigned.pem", None, false, openssl_verdict(d, "selfsigned.pem", None)),
        (4436, "forged.pem", Some("int.pem"), false, openssl_verdict(d, "forged.pem", Some("int.pem"))),
        (4437, "good.pem", Some("int.pem"), true, "-".into()),
    ];
    let verdicts: Vec<&str> = cases.iter().map(|c| c.4.as_str()).collect();
    assert_eq!(
        verdicts,
        [
            "unable to get local issuer certificate",
            "ok",
            "ok",
            "certificate has expired",
            "self signed certificate",
            "certificate signature failure",
            "-"
        ],
        "openssl verify's verdicts"
    );

    let ns = LoNs::new("tlsval");
    let _reap = Reap(&ns);
    let pcap = dir.join("tls.pcap");
    let tcpdump = tls_ns::tcpdump(&ns, &pcap, 4431, 4437);
    let cas_path = dir.join("cas.pem").to_str().unwrap().to_string();
    let servers: Vec<Server> = cases
        .iter()
        .map(|&(port, leaf, chain, tls13, _)| {
            let mut extra = ["-verify", "1", "-CAfile", &cas_path].map(String::from).to_vec();
            if let Some(c) = chain {
                extra.extend(["-cert_chain".to_string(), dir.join(c).to_str().unwrap().to_string()]);
            }
            Server { port, leaf: leaf.trim_end_matches(".pem").to_string(), tls13, extra }
        })
        .collect();
    let servers = tls_ns::s_servers(&ns, d, &servers);
    // One at a time, in order: the intermediate cache depends on it.
    for (port, ..) in &cases {
        let out = tls_ns::s_client(&ns, *port, &[]);
        assert!(out.contains("CONNECTED"), "s_client {port}: {out}");
    }
    tls_ns::finish(&pcap, tcpdump, servers);

    let logs = dir.join("logs");
    let root = dir.join("root.pem");
    let out = tls_ns::wirelog_read(&logs, &["--zeek-policy", "validate-certs,certificate-request-info", "--ca-file", root.to_str().unwrap()], &pcap);
    assert!(out.status.success(), "{}", text(&out));
    let ssl: Vec<Row> = common::parse_log(&std::fs::read_to_string(logs.join("ssl.log")).unwrap());
    let header = std::fs::read_to_string(logs.join("ssl.log")).unwrap();
    assert!(header.contains("\trequested_client_certificate_authorities\tvalidation_status"), "{header}");
    let subject = |pem: &str| openssl(d, &["x509", "-in", pem, "-noout", "-subject", "-nameopt", "RFC2253"]).trim().trim_start_matches("subject=").to_string();
    // As the log writes text (Zeek's ASCII writer): a backslash doubled,
    // and a comma inside a set element as \x2c (the set separator is `,`).
    let wanted_cas = [subject("root.pem"), subject("clientca.pem")].map(|s| s.replace('\\', "\\\\").replace(',', "\\x2c")).join(",");
    assert_eq!(subject("clientca.pem"), "CN=Client CA\\, Example\\+Co");
    for (port, _, _, tls13, verdict) in &cases {
        let r = ssl.iter().find(|r| r["id.resp_p"] == port.to_string()).unwrap_or_else(|| panic!("no ssl.log row for port {port}: {ssl:?}"));
        assert_eq!(&r["validation_status"], verdict, "port {port}");
        if *tls13 {
            assert_eq!(r["version"], "TLSv13");
            assert_eq!(r["requested_client_certificate_authorities"], "-", "port {port}");
        } else {
            assert_eq!(r["version"], "TLSv12");
            assert_eq!(r["requested_client_certificate_authorities"], wanted_cas, "port {port}");
        }
    }
    // Without the policies: neither column.
    let plain = dir.join("plain");
    let out = tls_ns::wirelog_read(&plain, &[], &pcap);
    assert!(out.status.success(), "{}", text(&out));
    let header = std::fs::read_to_string(plain.join("ssl.log")).unwrap();
    assert!(!header.contains("validation_status") && !header.contains("requested_client"), "{header}");
    // A trust store that is not one is refused, naming the file.
    let not_a_store = dir.join("leaf.ext");
    let out = tls_ns::wirelog_read(&dir.join("bad"), &["--zeek-policy", "validate-certs", "--ca-file", not_a_store.to_str().unwrap()], &pcap);
    assert!(!out.status.success());
    assert!(text(&out).contains("leaf.ext: "), "{}", text(&out));
    eprintln!("{} connections, {:.1} s", cases.len(), t0.elapsed().as_secs_f64());
    let _ = std::fs::remove_dir_all(&dir);
}
