//! Zeek's validate-ocsp policy on handshakes made here: OpenSSL makes a
//! root CA, an intermediate, two leaves (one revoked in the responder's
//! index), a delegated OCSP responder and a forger named as the
//! intermediate; `openssl ocsp` makes the responses (good, revoked, signed
//! by the forger's key); `openssl s_server -status_file` staples them in a
//! network namespace (TLS 1.2, and one TLS 1.3 server), `openssl s_client
//! -status` asks for them, tcpdump captures `lo`, and `wirelog read
//! --zeek-policy validate-ocsp --ca-file root.pem` must give, per
//! connection, the `ocsp_status` Zeek's `x509_ocsp_verify` would
//! (zeek/zeek a13de64f `src/file_analysis/analyzer/x509/functions.bif`):
//! - good, revoked: what `openssl ocsp -respin ... -verify_other int.pem
//!   -CAfile root.pem` says of the same response (the status's name, BIF
//!   lines 494-499);
//! - the response signed by a key that is not the intermediate's it names:
//!   the first error `openssl ocsp` prints for it, as `ERR_error_string`
//!   writes it (BIF lines 394-399);
//! - the revoked leaf's response stapled for the good leaf: `openssl ocsp`
//!   finds no status for that certificate; the BIF's text is "OCSP reply is
//!   not for host certificate" (line 444);
//! - no staple, or TLS 1.3 (the Certificate message and the response in its
//!   status_request entry are encrypted, so neither Zeek nor wirelog sees
//!   it): unset (validate-ocsp.zeek:41).

mod common;

use std::collections::HashMap;
use std::path::Path;

use common::live::text;
use common::lo::{have, LoNs, Reap};
use common::tls_ns::{self, issue, openssl, openssl_run, self_signed, Server};

type Row = HashMap<String, String>;

/// What `openssl ocsp` makes of response `resp` for certificate `cert`
/// (issuer and untrusted chain `int.pem`, trust store `root.pem` alone),
/// as Zeek's BIF words the same outcome.
fn openssl_verdict(dir: &Path, resp: &str, cert: &str) -> String {
    let (_, out) = openssl_run(dir, &["ocsp", "-respin", resp, "-CAfile", "root.pem", "-verify_other", "int.pem", "-issuer", "int.pem", "-cert", cert]);
    if out.contains("Response Verify Failure") {
        // Its first queued error: "<thread>:error:<code>:<library>:<function>:<reason>:..."
        let first = out.lines().find(|l| l.contains(":error:")).unwrap_or_else(|| panic!("{out}"));
        let f: Vec<&str> = first.split(':').collect();
        return format!("error:{}:{}::{}", f[2], f[3], f[5]);
    }
    assert!(out.contains("Response verify OK"), "{out}");
    if out.contains(&format!("{cert}: ERROR: No Status found")) {
        return "OCSP reply is not for host certificate".into();
    }
    let line = out.lines().find(|l| l.starts_with(&format!("{cert}: "))).unwrap_or_else(|| panic!("{out}"));
    line[cert.len() + 2..].to_string()
}

#[test]
fn ocsp_status_agrees_with_openssl_ocsp() {
    let tools = ["openssl", "tcpdump"];
    if !(tools.iter().all(|t| have(t)) && common::live::is_root()) {
        common::live::skip("needs root, openssl and tcpdump");
        return;
    }
    let t0 = std::time::Instant::now();
    let dir = tls_ns::fresh_dir("tls-ocsp");
    let d = dir.as_path();
    std::fs::write(dir.join("ca.ext"), "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n").unwrap();
    std::fs::write(dir.join("leaf.ext"), "basicConstraints=CA:FALSE\nsubjectAltName=DNS:www.example.org\n").unwrap();
    std::fs::write(dir.join("resp.ext"), "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=OCSPSigning\n").unwrap();
    self_signed(d, "root", "/CN=Wirelog OCSP Root", true);
    issue(d, "int", "/CN=Wirelog OCSP Intermediate", "root", "02", "ca.ext");
    issue(d, "good", "/CN=www.example.org", "int", "0x10", "leaf.ext");
    issue(d, "revoked", "/CN=www.example.org", "int", "0x11", "leaf.ext");
    issue(d, "responder", "/CN=Wirelog OCSP Responder", "int", "0x20", "resp.ext");
    self_signed(d, "forger", "/CN=Wirelog OCSP Intermediate", true);
    std::fs::write(
        dir.join("index.txt"),
        "V\t351231235959Z\t\t10\tunknown\t/CN=www.example.org\nR\t351231235959Z\t250101000000Z\t11\tunknown\t/CN=www.example.org\n",
    )
    .unwrap();
    for leaf in ["good", "revoked"] {
        openssl(d, &["ocsp", "-issuer", "int.pem", "-cert", &format!("{leaf}.pem"), "-no_nonce", "-reqout", &format!("req-{leaf}.der")]);
    }
    let respond = |req: &str, signer: &str, out: &str, extra: &[&str]| {
        let (pem, key) = (format!("{signer}.pem"), format!("{signer}.key"));
        let mut a = vec!["ocsp", "-index", "index.txt", "-CA", "int.pem", "-rsigner", &pem, "-rkey", &key, "-reqin", req, "-respout", out, "-ndays", "7"];
        a.extend(extra);
        openssl(d, &a);
    };
    respond("req-good.der", "responder", "good.der", &[]);
    respond("req-revoked.der", "responder", "revoked.der", &[]);
    respond("req-good.der", "forger", "forged.der", &["-resp_no_certs"]);

    // (port, leaf, stapled response, TLS 1.3, expected ocsp_status)
    let cases: Vec<(u16, &str, Option<&str>, bool, String)> = vec![
        (4441, "good.pem", Some("good.der"), false, openssl_verdict(d, "good.der", "good.pem")),
        (4442, "revoked.pem", Some("revoked.der"), false, openssl_verdict(d, "revoked.der", "revoked.pem")),
        (4443, "good.pem", Some("forged.der"), false, openssl_verdict(d, "forged.der", "good.pem")),
        (4444, "good.pem", Some("revoked.der"), false, openssl_verdict(d, "revoked.der", "good.pem")),
        (4445, "good.pem", None, false, "-".into()),
        (4446, "good.pem", Some("good.der"), true, "-".into()),
    ];
    let verdicts: Vec<&str> = cases.iter().map(|c| c.4.as_str()).collect();
    assert_eq!(verdicts[..2], ["good", "revoked"], "openssl ocsp's verdicts");
    assert!(verdicts[2].starts_with("error:"), "{}", verdicts[2]);
    assert_eq!(verdicts[3], "OCSP reply is not for host certificate");

    let ns = LoNs::new("tlsocsp");
    let _reap = Reap(&ns);
    let pcap = dir.join("tls.pcap");
    let tcpdump = tls_ns::tcpdump(&ns, &pcap, 4441, 4446);
    let chain = dir.join("int.pem").to_str().unwrap().to_string();
    let servers: Vec<Server> = cases
        .iter()
        .map(|&(port, leaf, staple, tls13, _)| {
            let mut extra = vec!["-cert_chain".to_string(), chain.clone()];
            if let Some(s) = staple {
                extra.extend(["-status_file".to_string(), dir.join(s).to_str().unwrap().to_string()]);
            }
            Server { port, leaf: leaf.trim_end_matches(".pem").to_string(), tls13, extra }
        })
        .collect();
    let servers = tls_ns::s_servers(&ns, d, &servers);
    for (port, _, staple, ..) in &cases {
        let out = tls_ns::s_client(&ns, *port, &["-status"]);
        assert!(out.contains("CONNECTED"), "s_client {port}: {out}");
        // The client saw the staple (or none) the server was given.
        let stapled = out.contains("OCSP Response Status: successful");
        assert_eq!(stapled, staple.is_some(), "s_client {port}: {out}");
    }
    tls_ns::finish(&pcap, tcpdump, servers);

    let logs = dir.join("logs");
    let root = dir.join("root.pem");
    let out = tls_ns::wirelog_read(&logs, &["--zeek-policy", "validate-certs,validate-ocsp", "--ca-file", root.to_str().unwrap()], &pcap);
    assert!(out.status.success(), "{}", text(&out));
    let log = std::fs::read_to_string(logs.join("ssl.log")).unwrap();
    // Zeek's order with both policies loaded (validate-certs before
    // validate-ocsp, as scripts/test-all-policy.zeek loads them).
    assert!(log.contains("\tvalidation_status\tocsp_status"), "{log}");
    let ssl: Vec<Row> = common::parse_log(&log);
    assert_eq!(ssl.len(), cases.len(), "{log}");
    for (port, _, _, tls13, wanted) in &cases {
        let r = ssl.iter().find(|r| r["id.resp_p"] == port.to_string()).unwrap_or_else(|| panic!("no ssl.log row for port {port}: {log}"));
        assert_eq!(r["established"], "T", "port {port}");
        assert_eq!(r["version"], if *tls13 { "TLSv13" } else { "TLSv12" }, "port {port}");
        assert_eq!(&r["ocsp_status"], wanted, "port {port}");
        // The chains themselves are valid (the leaves' intermediate is sent).
        assert_eq!(r["validation_status"], if *tls13 { "-" } else { "ok" }, "port {port}");
    }
    // Without the policy: no column.
    let plain = dir.join("plain");
    let out = tls_ns::wirelog_read(&plain, &[], &pcap);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!std::fs::read_to_string(plain.join("ssl.log")).unwrap().contains("ocsp_status"));
    // A trust store that is not one is refused, naming the file and the policy.
    let not_a_store = dir.join("leaf.ext");
    let out = tls_ns::wirelog_read(&dir.join("bad"), &["--zeek-policy", "validate-ocsp", "--ca-file", not_a_store.to_str().unwrap()], &pcap);
    assert!(!out.status.success());
    assert!(text(&out).contains("--zeek-policy validate-ocsp: trust store (--ca-file) ") && text(&out).contains("leaf.ext: "), "{}", text(&out));
    eprintln!("{} connections, {:.1} s", cases.len(), t0.elapsed().as_secs_f64());
    let _ = std::fs::remove_dir_all(&dir);
}
