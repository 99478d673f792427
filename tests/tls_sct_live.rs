//! Zeek's validate-sct policy on handshakes made here: `tests/sct_certs.py`
//! makes three CT logs of a list (two ECDSA P-256 of one operator, one RSA
//! of another) and one not in it, a CA, a leaf whose certificate extension
//! holds four SCTs over its precertificate (two valid, one with a bad
//! signature, one of the unlisted log), a TLS `signed_certificate_timestamp`
//! extension with two SCTs (one valid over that leaf, one over another
//! certificate, `openssl s_server -serverinfo`), a leaf without SCTs, and
//! a stapled OCSP response for that one (`-status_file`) with an SCT list
//! in its single response (one valid, one over another certificate) and
//! another in its responseExtensions (one valid), both of which Zeek's OCSP
//! analyzer reads and OpenSSL's CT code reads only the first.
//! `openssl s_server`s in a network namespace serve them, `openssl
//! s_client -ct -ctlogfile` connects to each (OpenSSL's own CT code checks
//! every SCT: the reference), tcpdump captures `lo`, and `wirelog read
//! --zeek-policy validate-sct --ct-logs` must give, per connection,
//! `valid_ct_logs` and `valid_ct_operators` as the distinct logs and
//! operators of the SCTs OpenSSL found valid. Read again without the CA as
//! trust store, a certificate SCT of a leaf sent alone cannot be checked
//! (no issuer key: Zeek's validate-sct.zeek tries only the cached
//! intermediate, the verified chain and the certificates sent), so that
//! server's count is 0; TLS 1.3 (certificates encrypted) leaves both unset.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::process::Command;

use common::live::text;
use common::lo::{have, LoNs, Reap};
use common::tls_ns::{self, Server};

type Row = HashMap<String, String>;

/// The descriptions of the logs whose SCTs `openssl s_client -ct` found
/// valid: each SCT it prints starts with `SCT validation status: X`, and
/// names its log (`Log       : description`) when the log is in its list.
fn valid_logs(s_client: &str) -> Vec<String> {
    let mut status = "";
    let mut out = Vec::new();
    for line in s_client.lines() {
        if let Some(s) = line.strip_prefix("SCT validation status: ") {
            status = s.trim();
        } else if let Some(name) = line.trim_start().strip_prefix("Log       : ") {
            if status == "valid" {
                out.push(name.trim().to_string());
            }
        }
    }
    out
}

#[test]
fn valid_ct_logs_and_operators_agree_with_openssl() {
    let tools = ["openssl", "tcpdump", "python3"];
    if !(tools.iter().all(|t| have(t)) && common::live::is_root()) {
        common::live::skip("needs root, openssl, python3 and tcpdump");
        return;
    }
    let t0 = std::time::Instant::now();
    let dir = tls_ns::fresh_dir("tls-sct");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/sct_certs.py");
    let o = Command::new("python3").arg(script).arg(&dir).output().unwrap();
    assert!(o.status.success(), "sct_certs.py: {}", text(&o));
    // The list for OpenSSL (its CTLOG_STORE file) and each log's operator.
    let list = std::fs::read_to_string(dir.join("ct-logs.tsv")).unwrap();
    let mut operator = HashMap::new();
    let mut cnf = String::new();
    let mut sections = String::new();
    for (i, l) in list.lines().filter(|l| !l.starts_with('#')).enumerate() {
        let f: Vec<&str> = l.split('\t').collect();
        operator.insert(f[3].to_string(), f[2].to_string());
        cnf.push_str(if i == 0 { "enabled_logs = " } else { "," });
        cnf.push_str(&format!("log{i}"));
        sections.push_str(&format!("[log{i}]\ndescription = {}\nkey = {}\n", f[3], f[1]));
    }
    std::fs::write(dir.join("ctlog.cnf"), format!("{cnf}\n{sections}")).unwrap();

    // (port, leaf, CA sent after it, TLS extension SCTs, TLS 1.3, OCSP
    // response stapled)
    let cases: &[(u16, &str, bool, bool, bool, bool)] = &[
        (4451, "sct", true, true, false, false),
        (4452, "sct", false, false, false, false),
        (4453, "plain", false, true, false, false),
        (4454, "sct", true, true, true, false),
        (4455, "plain", false, false, false, true),
    ];
    let ns = LoNs::new("tlssct");
    let _reap = Reap(&ns);
    let pcap = dir.join("tls.pcap");
    let tcpdump = tls_ns::tcpdump(&ns, &pcap, 4451, 4455);
    let path = |f: &str| dir.join(f).to_str().unwrap().to_string();
    let servers: Vec<Server> = cases
        .iter()
        .map(|&(port, leaf, chain, serverinfo, tls13, staple)| {
            let mut extra = Vec::new();
            if chain {
                extra.extend(["-cert_chain".to_string(), path("ca.pem")]);
            }
            if serverinfo {
                extra.extend(["-serverinfo".to_string(), path("serverinfo.pem")]);
            }
            if staple {
                extra.extend(["-status_file".to_string(), path("ocsp.der")]);
            }
            Server { port, leaf: leaf.to_string(), tls13, extra }
        })
        .collect();
    let servers = tls_ns::s_servers(&ns, &dir, &servers);
    // One at a time, in order (the caches depend on it); each client asks
    // for SCTs and checks them with OpenSSL's CT code (`-ct` also asks for
    // a stapled OCSP response, whose single responses' SCTs it checks).
    let (cnf_path, ca_path) = (dir.join("ctlog.cnf"), dir.join("ca.pem"));
    let mut reference: HashMap<u16, (BTreeSet<String>, BTreeSet<String>)> = HashMap::new();
    for &(port, ..) in cases {
        let out = tls_ns::s_client(&ns, port, &["-ct", "-ctlogfile", cnf_path.to_str().unwrap(), "-CAfile", ca_path.to_str().unwrap()]);
        assert!(out.contains("CONNECTED") && out.contains("Verify return code: 0 (ok)"), "s_client {port}: {out}");
        let logs: BTreeSet<String> = valid_logs(&out).into_iter().collect();
        let ops = logs.iter().map(|l| operator[l].clone()).collect();
        reference.insert(port, (logs, ops));
    }
    tls_ns::finish(&pcap, tcpdump, servers);

    // What OpenSSL found, against what the script made: the leaf's A and B
    // and the TLS extension's D (4451); A and B alone (4452, the CA from
    // the trust store); the TLS extension's B, signed over the plain leaf
    // (4453).
    let count = |set: &BTreeSet<String>| set.len().to_string();
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<String>>();
    assert_eq!(reference[&4451].0, names(&["Test log A", "Test log B (RSA)", "Test log D"]), "OpenSSL on 4451");
    assert_eq!(reference[&4452].0, names(&["Test log A", "Test log B (RSA)"]), "OpenSSL on 4452");
    assert_eq!(reference[&4453].0, names(&["Test log B (RSA)"]), "OpenSSL on 4453");
    // The single response's A (D's is over the other leaf); not B, in the
    // responseExtensions, which OpenSSL's CT code does not read.
    assert_eq!(reference[&4455].0, names(&["Test log A"]), "OpenSSL on 4455");
    // Zeek's OCSP analyzer reads both places (OCSP.cc:502-509, 540-547):
    // B counts too.
    let mut ocsp_logs = reference[&4455].0.clone();
    ocsp_logs.insert("Test log B (RSA)".to_string());
    let ocsp_ops = ocsp_logs.iter().map(|l| operator[l].clone()).collect();
    reference.insert(4455, (ocsp_logs, ocsp_ops));
    assert_eq!(count(&reference[&4455].1), "2", "Op One and Op Two");

    let ct_logs = path("ct-logs.tsv");
    let read = |tag: &str, extra: &[&str]| -> Vec<Row> {
        let logs = dir.join(tag);
        let mut args = vec!["--zeek-policy", "validate-sct", "--ct-logs", &ct_logs];
        args.extend(extra);
        let out = tls_ns::wirelog_read(&logs, &args, &pcap);
        assert!(out.status.success(), "{}", text(&out));
        let log = std::fs::read_to_string(logs.join("ssl.log")).unwrap();
        // validate-sct loads validate-certs: its column comes first.
        assert!(log.contains("\tvalidation_status\tvalid_ct_logs\tvalid_ct_operators\t"), "{log}");
        common::parse_log(&log)
    };
    let with_ca = read("logs-ca", &["--ca-file", ca_path.to_str().unwrap()]);
    let system = read("logs-system", &[]);
    for &(port, _, _, _, tls13, _) in cases {
        let row = |rows: &[Row]| rows.iter().find(|r| r["id.resp_p"] == port.to_string()).cloned().unwrap_or_else(|| panic!("no ssl.log row for port {port}"));
        let (ca, sys) = (row(&with_ca), row(&system));
        if tls13 {
            assert_eq!(ca["version"], "TLSv13");
            for r in [&ca, &sys] {
                assert_eq!((r["valid_ct_logs"].as_str(), r["valid_ct_operators"].as_str()), ("-", "-"), "port {port}");
            }
            continue;
        }
        let (logs, ops) = &reference[&port];
        assert_eq!(ca["validation_status"], "ok", "port {port}");
        assert_eq!((ca["valid_ct_logs"].clone(), ca["valid_ct_operators"].clone()), (count(logs), count(ops)), "port {port} with --ca-file");
        // The system's trust store does not know the CA: the chain does
        // not validate; the leaf sent alone has no issuer key to check its
        // certificate's SCTs with.
        assert_ne!(sys["validation_status"], "ok", "port {port}");
        let want = if port == 4452 { ("0".to_string(), "0".to_string()) } else { (count(logs), count(ops)) };
        assert_eq!((sys["valid_ct_logs"].clone(), sys["valid_ct_operators"].clone()), want, "port {port} with the system's trust store");
    }
    eprintln!("{} connections, {:.1} s", cases.len(), t0.elapsed().as_secs_f64());
    let _ = std::fs::remove_dir_all(&dir);
}
