//! A TLS 1.2 handshake far beyond one record, made here: an OpenSSL server
//! (`s_server`) whose certificate carries 40,000 DNS names (2.3 MB of DER,
//! one Certificate message over ~150 records), asking for a client
//! certificate (1,000 names, 34 kB, three records: a larger one would not
//! fit the stateless session ticket s_server makes), and a client on libssl
//! (`tests/tls_big_client.py`: OpenSSL's own clients refuse a certificate
//! list over 100 kB); the namespace's `lo` cuts every packet to 600 bytes
//! (MTU 600, no segmentation offload: `gso_max_segs 1`), so the handshake
//! arrives in thousands of small segments. tcpdump captures it and
//! `wirelog read` must give every field: the certificates as `openssl x509`
//! prints them (fingerprint, subject, issuer, serial, all 40,000 names),
//! the handshake as tshark dissects it (its messages and their order, the
//! curve, the SNI, the client certificate's length; tshark does not
//! reassemble the 2.3 MB message, so the server's `x` is the one letter it
//! cannot confirm), `sni_matches_cert`. With `--stream-memory 1M` the
//! server's Certificate message does not fit: it is cut, counted and said,
//! and every other field stays.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::lo::{have, settle, wait_for, LoNs, Reap};

type Row = HashMap<String, String>;

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn run(args: &[&str]) -> String {
    let o = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(o.status.success(), "{args:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A self-signed ECDSA certificate whose subjectAltName lists `names`.
fn make_cert(dir: &Path, stem: &str, org: &str, cn: &str, names: &[String]) {
    let mut cnf = format!(
        "[req]\ndistinguished_name=dn\nx509_extensions=ext\nprompt=no\n[dn]\nO={org}\nCN={cn}\n[ext]\nsubjectAltName=@alt\n[alt]\n"
    );
    for (i, n) in names.iter().enumerate() {
        cnf.push_str(&format!("DNS.{}={n}\n", i + 1));
    }
    let cnf_path = dir.join(format!("{stem}.cnf"));
    std::fs::write(&cnf_path, cnf).unwrap();
    let p = |s: &str| dir.join(format!("{stem}{s}")).to_str().unwrap().to_string();
    run(&[
        "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", &p(".key"), "-out", &p(".pem"), "-days", "30", "-config", cnf_path.to_str().unwrap(),
    ]);
}

/// What `openssl x509` says of a certificate: (fingerprint, subject,
/// issuer, serial), in Zeek's notation (lower-case hex fingerprint,
/// RFC 2253 names, upper-case hex serial), and its DNS names.
fn openssl_facts(pem: &Path) -> ([String; 4], Vec<String>) {
    let out = run(&[
        "openssl", "x509", "-noout", "-fingerprint", "-sha256", "-subject", "-issuer", "-serial",
        "-nameopt", "RFC2253", "-ext", "subjectAltName", "-in", pem.to_str().unwrap(),
    ]);
    let val = |key: &str| {
        out.lines().find_map(|l| l.strip_prefix(key)).unwrap_or_else(|| panic!("{key} in {out}")).trim().to_string()
    };
    let fp = val("sha256 Fingerprint=").replace(':', "").to_lowercase();
    let names = out
        .lines()
        .filter(|l| l.contains("DNS:"))
        .flat_map(|l| l.split(',').map(|n| n.trim().trim_start_matches("DNS:").to_string()))
        .collect();
    ([fp, val("subject="), val("issuer="), val("serial=")], names)
}

/// `wirelog read` of the capture with `flags`: (ssl.log rows, x509.log
/// rows, the summary on stderr).
fn read(dir: &Path, pcap: &Path, tag: &str, flags: &[&str]) -> (Vec<Row>, Vec<Row>, String) {
    let logs = dir.join(tag);
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["read", "--no-store", "--seed", "1", "--logs"])
        .arg(&logs)
        .args(flags)
        .arg(pcap)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let log = |n: &str| common::parse_log(&std::fs::read_to_string(logs.join(n)).unwrap_or_default());
    (log("ssl.log"), log("x509.log"), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The x509.log row of a fingerprint.
fn cert_row_in<'a>(x509: &'a [Row], fp: &str) -> &'a Row {
    x509.iter().find(|x| x["fingerprint"] == fp).unwrap_or_else(|| panic!("no x509 row {fp}"))
}

/// tshark as every reading here runs it. The namespace's loopback drops
/// packets when its backlog is full (in about half the runs here), so a
/// segment comes back as a retransmission after later ones; tshark
/// reassembles TLS across such a gap only with out-of-order reassembly on
/// (off by default), and otherwise misses the client's Certificate.
const TSHARK: [&str; 3] = ["tshark", "-o", "tcp.reassemble_out_of_order:TRUE"];

/// tshark's account of the capture: the handshake as Zeek's ssl_history
/// letters (handshake messages and ChangeCipherSpec records in capture
/// order, client upper case), the server's named curve, the SNI and the
/// client certificate's length.
fn tshark_account(pcap: &Path) -> (String, String, String, String) {
    let out = run(&[
        TSHARK[0], TSHARK[1], TSHARK[2], "-r", pcap.to_str().unwrap(), "-Y", "tls", "-T", "fields", "-E", "separator=;",
        "-e", "tcp.dstport", "-e", "tls.record.content_type", "-e", "tls.handshake.type",
        "-e", "tls.handshake.server_named_curve", "-e", "tls.handshake.extensions_server_name",
        "-e", "tls.handshake.certificate_length",
    ]);
    let (mut history, mut curve, mut sni, mut client_cert_len) = (String::new(), String::new(), String::new(), String::new());
    for l in out.lines() {
        let f: Vec<&str> = l.split(';').collect();
        let client = f[0] == "443";
        let case = |c: char| if client { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() };
        // Record types and handshake types, each in its frame's order.
        let mut types = f[2].split(',').filter(|t| !t.is_empty());
        for ct in f[1].split(',') {
            match ct {
                "20" => history.push(case('i')),
                "22" => {
                    // An encrypted Finished has no type tshark can read.
                    if let Some(t) = types.next() {
                        history.push(case(match t {
                            "1" => 'c', "2" => 's', "4" => 't', "11" => 'x', "12" => 'k', "13" => 'r', "14" => 'n',
                            "15" => 'y', "16" => 'g', "20" => 'f',
                            t => panic!("handshake type {t}"),
                        }));
                        // Several messages in one record.
                        for t in types.by_ref() {
                            history.push(case(match t { "12" => 'k', "13" => 'r', "14" => 'n', "16" => 'g', "15" => 'y', _ => '?' }));
                        }
                    }
                }
                _ => {}
            }
        }
        if !f[3].is_empty() {
            curve = f[3].to_string();
        }
        if !f[4].is_empty() {
            sni = f[4].to_string();
        }
        if client && !f[5].is_empty() {
            client_cert_len = f[5].to_string();
        }
    }
    (history, curve, sni, client_cert_len)
}

#[test]
fn a_handshake_of_megabytes_in_small_segments_gives_every_field() {
    let tools = ["openssl", "tcpdump", "tshark", "python3"];
    if !(tools.iter().all(|t| have(t)) && common::live::is_root()) {
        common::live::skip("needs root, openssl, tcpdump, tshark and python3");
        return;
    }
    let t0 = std::time::Instant::now();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tls-large-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let server_names: Vec<String> = std::iter::once("big.wirelog.test".to_string())
        .chain((2..=40_000).map(|i| format!("host-{i:05}.a-rather-long-subdomain-for-size.wirelog.test")))
        .collect();
    make_cert(&dir, "server", "wirelog tests", "big.wirelog.test", &server_names);
    let client_names: Vec<String> = (1..=1000).map(|i| format!("client-{i:04}.clients.wirelog.test")).collect();
    make_cert(&dir, "client", "wirelog clients", "client.wirelog.test", &client_names);
    let f = |n: &str| dir.join(n).to_str().unwrap().to_string();

    let ns = LoNs::new("tlsbig");
    let _reap = Reap(&ns);
    // Small segments on the wire and in the capture: a 600-byte MTU, and no
    // segmentation offload (tcpdump would see 64 kB super-packets).
    common::live::sh(&["ip", "-n", &ns.name, "link", "set", "lo", "mtu", "600", "gso_max_segs", "1"]);
    let pcap = dir.join("big.pcap");
    let tlog = dir.join("tcpdump.log");
    let tcpdump = ns.spawn(
        "tcpdump",
        &["tcpdump", "-i", "lo", "-n", "-s", "0", "-B", "65536", "-U", "-w", pcap.to_str().unwrap(), "tcp", "port", "443"],
        &tlog,
    );
    wait_for("tcpdump", Duration::from_secs(20), || std::fs::read_to_string(&tlog).unwrap_or_default().contains("listening on"));
    let slog = dir.join("s_server.log");
    let _server = ns.spawn(
        "openssl s_server",
        &[
            "openssl", "s_server", "-accept", "443", "-tls1_2", "-www", "-cert", &f("server.pem"), "-key", &f("server.key"),
            "-verify", "1", "-CAfile", &f("client.pem"), "-curves", "prime256v1",
        ],
        &slog,
    );
    wait_for("s_server", Duration::from_secs(20), || std::fs::read_to_string(&slog).unwrap_or_default().contains("ACCEPT"));
    let client = ns
        .cmd(&[
            "python3", concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tls_big_client.py"), "127.0.0.1", "443",
            "big.wirelog.test", &f("client.pem"), &f("client.key"),
        ])
        .output()
        .unwrap();
    assert!(client.status.success(), "client: {}", text(&client));
    let said = String::from_utf8_lossy(&client.stdout).into_owned();
    settle(&pcap);
    tcpdump.interrupt();
    let tcpdump_said = std::fs::read_to_string(&tlog).unwrap();
    assert!(tcpdump_said.lines().any(|l| l.trim() == "0 packets dropped by kernel"), "{tcpdump_said}");

    let (server_facts, server_sans) = openssl_facts(&dir.join("server.pem"));
    let (client_facts, _) = openssl_facts(&dir.join("client.pem"));
    assert_eq!(server_sans.len(), 40_000);
    let der = |stem: &str| run(&["sh", "-c", &format!("openssl x509 -in {} -outform der | wc -c", f(&format!("{stem}.pem")))]);
    let server_der: usize = der("server").trim().parse().unwrap();
    assert!(server_der > 2_000_000, "the server certificate is {server_der} bytes");
    let (history, curve, sni, client_cert_len) = tshark_account(&pcap);
    let client_der: usize = der("client").trim().parse().unwrap();
    assert_eq!(client_cert_len, client_der.to_string(), "tshark's client certificate length");
    // Each small segment: thousands of them.
    let packets = run(&["tshark", "-r", pcap.to_str().unwrap(), "-T", "fields", "-e", "frame.number"]).lines().count();
    assert!(packets > 4000, "{packets} packets");

    let (ssl, x509, _) = read(&dir, &pcap, "logs", &[]);
    assert_eq!(ssl.len(), 1, "{ssl:?}");
    let r = &ssl[0];
    let cipher = said.lines().find_map(|l| l.strip_prefix("cipher ")).unwrap();
    assert_eq!(r["version"], "TLSv12");
    assert_eq!(r["cipher"], cipher);
    assert_eq!(curve, "0x0017", "tshark: secp256r1");
    assert_eq!(r["curve"], "secp256r1");
    assert_eq!(r["server_name"], sni);
    assert_eq!(r["established"], "T");
    // tshark's letters, with the server's Certificate (which it does not
    // reassemble) after its ServerHello.
    assert!(history.starts_with("Cs") && !history.contains('x'), "tshark: {history}");
    let with_x = format!("Csx{}", &history[2..]);
    assert_eq!(r["ssl_history"], with_x);
    assert_eq!(r["cert_chain_fps"], server_facts[0]);
    assert_eq!(r["client_cert_chain_fps"], client_facts[0]);
    assert_eq!(r["sni_matches_cert"], "T");
    assert_eq!(r["subject"], server_facts[1]);
    assert_eq!(r["issuer"], server_facts[2]);
    let cert_row = |fp: &str| cert_row_in(&x509, fp);
    for (facts, client_cert) in [(&server_facts, "F"), (&client_facts, "T")] {
        let x = cert_row(&facts[0]);
        assert_eq!(x["certificate.subject"], facts[1]);
        assert_eq!(x["certificate.issuer"], facts[2]);
        assert_eq!(x["certificate.serial"], facts[3]);
        assert_eq!((x["host_cert"].as_str(), x["client_cert"].as_str()), ("T", client_cert));
    }
    let sans: Vec<&str> = cert_row(&server_facts[0])["san.dns"].split(',').collect();
    assert_eq!(sans, server_sans.iter().map(String::as_str).collect::<Vec<_>>());

    // Zeek's policies: the client certificate's subject and issuer
    // (SSL::log_include_client_certificate_subject_issuer), the raw hello
    // fields of ssl-log-ext as tshark reads them, the DER in base64.
    let (ssl, x509, _) = read(&dir, &pcap, "logs-policies", &["--zeek-policy", "all"]);
    let r = &ssl[0];
    assert_eq!(r["client_subject"], client_facts[1]);
    assert_eq!(r["client_issuer"], client_facts[2]);
    // certificate-request-info: the CA s_server's -CAfile names; validate-certs
    // against the system's store: the self-signed leaf is OpenSSL's error 18,
    // in Zeek's spelling.
    assert_eq!(r["requested_client_certificate_authorities"], client_facts[1].replace('\\', "\\\\").replace(',', "\\x2c"));
    assert_eq!(r["validation_status"], "self signed certificate");
    let hello = |typ: &str, fields: &[&str]| -> Vec<String> {
        let mut args = TSHARK.to_vec();
        args.extend(["-r", pcap.to_str().unwrap(), "-Y"]);
        let filter = format!("tls.handshake.type == {typ}");
        args.push(&filter);
        args.extend(["-T", "fields", "-E", "separator=;"]);
        for f in fields {
            args.extend(["-e", f]);
        }
        let out = run(&args);
        let line = out.lines().next().unwrap_or_else(|| panic!("no handshake of type {typ}"));
        line.split(';').map(String::from).collect()
    };
    // tshark prints some numbers in hex (0x0303), Zeek's logs in decimal.
    let dec = |list: &str| {
        let one = |n: &str| match n.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).unwrap().to_string(),
            None => n.to_string(),
        };
        list.split(',').map(one).collect::<Vec<_>>().join(",")
    };
    let ch = hello("1", &["tls.handshake.version", "tls.handshake.ciphersuite", "tls.handshake.extension.type"]);
    assert_eq!(r["client_version"], dec(&ch[0]));
    assert_eq!(r["client_ciphers"], dec(&ch[1]), "tshark's cipher suites");
    assert_eq!(r["ssl_client_exts"], dec(&ch[2]), "tshark's extension types");
    let sh = hello("2", &["tls.handshake.version", "tls.handshake.extension.type"]);
    assert_eq!(r["server_version"], dec(&sh[0]));
    assert_eq!(r["ssl_server_exts"], dec(&sh[1]));
    let ticket = hello("4", &["tls.handshake.session_ticket_lifetime_hint"]);
    assert_eq!(r["ticket_lifetime_hint"], dec(&ticket[0]));
    let base64 = |stem: &str| run(&["sh", "-c", &format!("openssl x509 -in {} -outform der | base64 -w0", f(&format!("{stem}.pem")))]);
    assert_eq!(cert_row_in(&x509, &client_facts[0])["cert"], base64("client").trim());
    assert_eq!(cert_row_in(&x509, &server_facts[0])["cert"].len(), base64("server").trim().len());

    // 1 MiB of stream memory: the 2.3 MB message cannot be kept.
    let (ssl, x509, summary) = read(&dir, &pcap, "logs-1m", &["--stream-memory", "1M", "--memory", "16M"]);
    let r = &ssl[0];
    let cut = 4 + 3 + 3 + server_der;
    assert!(
        summary.contains(&format!("of those, {cut} bytes of messages cut whole for want of memory")),
        "{summary}"
    );
    assert_eq!(r["cert_chain_fps"], "-");
    assert_eq!(r["subject"], "-");
    assert_eq!(r["client_cert_chain_fps"], client_facts[0]);
    assert_eq!((r["curve"].as_str(), r["established"].as_str()), ("secp256r1", "T"));
    assert_eq!(r["ssl_history"], with_x);
    assert_eq!(x509.len(), 1);
    eprintln!("{packets} packets, server certificate {server_der} bytes, {:.1} s", t0.elapsed().as_secs_f64());
    let _ = std::fs::remove_dir_all(&dir);
}
