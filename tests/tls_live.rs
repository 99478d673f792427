//! TLS made here, checked against what the clients printed: an OpenSSL
//! server (`s_server -www`, a self-signed ECDSA certificate made by the test)
//! in a network namespace, curl with TLS 1.2 and 1.3 and ALPN, `s_client`
//! with a resumed TLS 1.2 session and a refused TLS 1.1 handshake; tcpdump
//! captures the loopback, `wirelog read` makes ssl.log and x509.log, and
//! each record agrees with its client's account (version, cipher, resumed,
//! ALPN, the alert) and with the certificate (fingerprint, subject, SANs).

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::live::{after, text};
use common::lo::{have, settle, wait_for, LoNs};
use common::tls::{iana, self_signed, sha256_fingerprint, zeek_version};

type Row = HashMap<String, String>;

/// `wirelog read` of a capture into logs: (ssl.log, x509.log) rows.
fn read_logs(dir: &Path, pcap: &Path) -> (Vec<Row>, Vec<Row>) {
    let logs = dir.join("logs");
    common::read_pcap(pcap, &logs, None, &["--quiet"]);
    let log = |name: &str| common::parse_log(&std::fs::read_to_string(logs.join(name)).unwrap());
    (log("ssl.log"), log("x509.log"))
}

#[test]
fn records_match_what_the_clients_printed() {
    if !(have("openssl") && have("curl") && have("tcpdump") && common::live::is_root()) {
        eprintln!("skipped: needs root, openssl, curl and tcpdump");
        return;
    }
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tls-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let p = |n: &str| dir.join(n).to_str().unwrap().to_string();
    let names = ["tls12.test", "tls13.test", "resume.test"];
    let san: Vec<String> = names.iter().map(|n| format!("DNS:{n}")).collect();
    let san = format!("subjectAltName={}", san.join(","));
    let cert = self_signed(&dir, "/O=wirelog tests/CN=wirelog.test", 30, &["-addext", &san]);
    let fp = sha256_fingerprint(&cert.cert);

    let ns = LoNs::new("tls");
    let pcap = dir.join("tls.pcap");
    let tcpdump = ns.tcpdump(&pcap, &["tcp", "port", "443"]);
    let slog = dir.join("s_server.log");
    let _server = ns.spawn(
        "openssl s_server",
        &[
            "openssl",
            "s_server",
            "-accept",
            "443",
            "-cert",
            &p("cert.pem"),
            "-key",
            &p("key.pem"),
            "-www",
            "-alpn",
            "http/1.1",
        ],
        &slog,
    );
    wait_for("s_server", Duration::from_secs(20), || {
        std::fs::read_to_string(&slog)
            .unwrap_or_default()
            .contains("ACCEPT")
    });
    let curl = |name: &str, tls: &[&str]| {
        let resolve = format!("{name}:443:127.0.0.1");
        let url = format!("https://{name}/");
        let mut args = vec![
            "curl",
            "-sS",
            "-v",
            "-k",
            "--http1.1",
            "--resolve",
            &resolve,
            &url,
        ];
        args.extend_from_slice(tls);
        let o = ns.cmd(&args).output().unwrap();
        assert!(o.status.success(), "curl {name}: {}", text(&o));
        text(&o)
    };
    let c12 = curl("tls12.test", &["--tls-max", "1.2"]);
    let c13 = curl("tls13.test", &["--tlsv1.3"]);
    let s_client = |extra: &[&str]| {
        let mut args = vec![
            "openssl",
            "s_client",
            "-connect",
            "127.0.0.1:443",
            "-tls1_2",
        ];
        args.extend_from_slice(extra);
        let o = ns
            .cmd(&args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        text(&o)
    };
    let first = s_client(&["-servername", "resume.test", "-sess_out", &p("sess.pem")]);
    let second = s_client(&["-servername", "resume.test", "-sess_in", &p("sess.pem")]);
    let old = {
        let o = ns
            .cmd(&[
                "openssl",
                "s_client",
                "-connect",
                "127.0.0.1:443",
                "-tls1_1",
                "-servername",
                "old.test",
            ])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(!o.status.success(), "TLS 1.1 must be refused: {}", text(&o));
        text(&o)
    };
    settle(&pcap);
    tcpdump.interrupt();

    let (ssl, x509) = read_logs(&dir, &pcap);
    let by_name = |n: &str| -> Vec<&Row> { ssl.iter().filter(|r| r["server_name"] == n).collect() };
    assert_eq!(ssl.len(), 5, "{ssl:#?}");

    // curl, TLS 1.2: version, cipher and ALPN as curl printed them; the certificate.
    let r = by_name("tls12.test")[0];
    let conn = after(&c12, "SSL connection using").unwrap(); // "TLSv1.2 / ECDHE-ECDSA-AES256-GCM-SHA384 ..."
    let mut w = conn.split(" / ");
    assert_eq!(r["version"], zeek_version(w.next().unwrap()));
    assert_eq!(
        r["cipher"],
        iana(w.next().unwrap().split_whitespace().next().unwrap())
    );
    assert!(
        c12.contains("ALPN: server accepted http/1.1")
            || c12.contains("ALPN, server accepted to use http/1.1"),
        "{c12}"
    );
    assert_eq!(r["next_protocol"], "http/1.1");
    assert_eq!(r["established"], "T");
    assert_eq!(r["cert_chain_fps"], fp);
    assert_eq!(r["sni_matches_cert"], "T");
    assert_eq!(r["subject"], "CN=wirelog.test,O=wirelog tests");
    assert!(r["orig_alpn"].contains("http/1.1"), "{r:?}");
    assert!(r["ja4"].starts_with("t12d"), "{r:?}");

    // curl, TLS 1.3: version and cipher; ALPN and the certificate are encrypted.
    let r = by_name("tls13.test")[0];
    let conn = after(&c13, "SSL connection using").unwrap();
    let mut w = conn.split(" / ");
    assert_eq!(r["version"], zeek_version(w.next().unwrap()));
    assert_eq!(
        r["cipher"],
        w.next().unwrap().split_whitespace().next().unwrap()
    );
    assert_eq!(r["established"], "T");
    assert_eq!(
        (r["next_protocol"].as_str(), r["cert_chain_fps"].as_str()),
        ("-", "-")
    );
    assert!(
        r["ja4"].starts_with("t13d") && r["client_supported_versions"].contains("772"),
        "{r:?}"
    );

    // s_client, a TLS 1.2 session and its resumption, as s_client said.
    let rs = by_name("resume.test");
    assert_eq!(rs.len(), 2);
    assert!(first.contains("New, TLSv1.2"), "{first}");
    assert!(second.contains("Reused, TLSv1.2"), "{second}");
    assert_eq!(
        (rs[0]["resumed"].as_str(), rs[1]["resumed"].as_str()),
        ("F", "T")
    );
    assert_eq!(rs[0]["cipher"], iana(after(&first, "Cipher    :").unwrap()));
    assert_eq!(rs[0]["cert_chain_fps"], fp);
    assert_eq!(
        rs[1]["cert_chain_fps"], "-",
        "a resumed session sends no certificate"
    );

    // s_client, TLS 1.1 refused: the server's alert.
    let r = by_name("old.test")[0];
    // OpenSSL prints the alert it received as "... alert internal error:...".
    let alert = after(&old, " alert ")
        .and_then(|a| a.split(':').next())
        .unwrap_or_else(|| panic!("no alert in {old}"))
        .replace(' ', "_");
    assert_eq!(
        (r["established"].as_str(), r["last_alert"].as_str()),
        ("F", alert.as_str())
    );
    assert_eq!(r["status"], "error");

    // x509.log: the one certificate, once (Zeek's de-duplication), with its SANs.
    assert_eq!(x509.len(), 1, "{x509:#?}");
    assert_eq!(x509[0]["fingerprint"], fp);
    assert_eq!(x509[0]["san.dns"], names.join(","));
    assert_eq!(x509[0]["certificate.key_type"], "ecdsa");
    assert_eq!(x509[0]["certificate.curve"], "prime256v1");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs openssl to its end; it must succeed.
fn openssl(args: &[&str]) -> String {
    let o = Command::new("openssl").args(args).output().unwrap();
    assert!(o.status.success(), "openssl {args:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The digest of a certificate's DER (`alg`: `-sha256`, `-sha1`), in hex.
fn der_digest(pem: &str, alg: &str) -> String {
    let der = format!("{pem}.der");
    openssl(&["x509", "-in", pem, "-outform", "DER", "-out", &der]);
    let out = openssl(&["dgst", alg, "-r", &der]);
    out.split_whitespace().next().unwrap().to_string()
}

fn nginx_tls_conf(dir: &Path) -> String {
    let d = dir.display();
    let http = format!(
        r#"
    log_format tls '$ssl_protocol $ssl_cipher $ssl_client_verify $ssl_client_fingerprint $ssl_client_s_dn';
    server {{
        listen 127.0.0.1:443 ssl;
        ssl_certificate {d}/server.pem;
        ssl_certificate_key {d}/server.key;
        ssl_client_certificate {d}/ca.pem;
        ssl_verify_client on;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_tickets off;
        access_log {d}/access.log tls;
        location / {{ return 200 "ok\n"; }}
    }}"#
    );
    common::nginx::conf(dir, &http)
}

/// nginx asks for a client certificate (`ssl_verify_client on`, a CA made
/// here) and curl sends one made here: over TLS 1.2 ssl.log's
/// `client_cert_chain_fps` is the SHA-256 of the client certificate's DER
/// (the certificate nginx verified: its access log names the same
/// certificate by SHA-1 and subject) and x509.log has it as a client's
/// certificate; over TLS 1.3 (the client's Certificate encrypted) nginx
/// verified one too, and ssl.log names none.
#[test]
fn client_certificate_to_nginx() {
    if !(have("nginx") && have("openssl") && have("curl") && have("tcpdump") && common::live::is_root()) {
        eprintln!("skipped: needs root, nginx, openssl, curl and tcpdump");
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tls-client-cert-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let p = |n: &str| dir.join(n).to_str().unwrap().to_string();
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    let self_signed = |name: &str, subj: &str| {
        let mut a = vec!["req", "-x509"];
        a.extend(ec);
        let (key, pem) = (p(&format!("{name}.key")), p(&format!("{name}.pem")));
        a.extend(["-keyout", &key, "-out", &pem, "-days", "30", "-subj", subj]);
        openssl(&a);
    };
    self_signed("ca", "/O=wirelog tests/CN=wirelog test CA");
    self_signed("server", "/O=wirelog tests/CN=mtls.test");
    let mut a = vec!["req"];
    a.extend(ec);
    let (ckey, csr) = (p("client.key"), p("client.csr"));
    a.extend(["-keyout", &ckey, "-out", &csr, "-subj", "/O=wirelog tests/CN=client one"]);
    openssl(&a);
    let (cpem, ca, cakey) = (p("client.pem"), p("ca.pem"), p("ca.key"));
    openssl(&["x509", "-req", "-in", &csr, "-CA", &ca, "-CAkey", &cakey, "-CAcreateserial", "-days", "30", "-out", &cpem]);
    let (client_sha256, client_sha1) = (der_digest(&cpem, "-sha256"), der_digest(&cpem, "-sha1"));
    let server_sha256 = der_digest(&p("server.pem"), "-sha256");
    std::fs::write(dir.join("nginx.conf"), nginx_tls_conf(&dir)).unwrap();

    let ns = LoNs::new("mtls");
    let pcap = dir.join("mtls.pcap");
    let tcpdump = ns.tcpdump(&pcap, &["tcp", "port", "443"]);
    let conf = p("nginx.conf");
    let _nginx = ns.spawn("nginx", &["nginx", "-c", &conf], &dir.join("nginx.out"));
    wait_for("nginx", Duration::from_secs(20), || {
        ns.cmd(&["curl", "-sk", "-o", "/dev/null", "https://127.0.0.1/"]).output().is_ok_and(|o| o.status.success())
    });
    // That probe (no certificate: nginx answers 400) is the first connection.
    let curl = |tls: &[&str]| {
        let mut args = vec![
            "curl", "-sS", "-v", "-k", "--resolve", "mtls.test:443:127.0.0.1", "--cert", &cpem, "--key", &ckey,
        ];
        args.extend(tls);
        args.push("https://mtls.test/");
        let o = ns.cmd(&args).output().unwrap();
        assert!(o.status.success(), "curl {tls:?}: {}", text(&o));
        assert_eq!(String::from_utf8_lossy(&o.stdout), "ok\n", "{}", text(&o));
        text(&o)
    };
    let c12 = curl(&["--tls-max", "1.2"]);
    let c13 = curl(&["--tlsv1.3"]);
    settle(&pcap);
    tcpdump.interrupt();

    // nginx's account: each curl's certificate verified, named by SHA-1.
    let access = std::fs::read_to_string(dir.join("access.log")).unwrap();
    let verified: Vec<Vec<&str>> = access
        .lines()
        .map(|l| l.splitn(5, ' ').collect::<Vec<_>>())
        .filter(|f| f.get(2) == Some(&"SUCCESS"))
        .collect();
    assert_eq!(verified.len(), 2, "{access}");
    for f in &verified {
        assert_eq!(f[3], client_sha1, "nginx verified another certificate: {access}");
        assert!(f[4].contains("CN=client one"), "{access}");
    }
    assert_eq!((verified[0][0], verified[1][0]), ("TLSv1.2", "TLSv1.3"), "{access}");

    let (ssl, x509) = read_logs(&dir, &pcap);
    let by_name: Vec<&Row> = ssl.iter().filter(|r| r["server_name"] == "mtls.test").collect();
    assert_eq!(by_name.len(), 2, "{ssl:#?}");

    // TLS 1.2: the client's certificate in plaintext, as curl sent it.
    let r = by_name[0];
    assert!(c12.contains("TLSv1.2"), "{c12}");
    assert_eq!(r["version"], "TLSv12", "{r:?}");
    assert_eq!(r["cipher"], iana(verified[0][1]), "{r:?}");
    assert_eq!(r["established"], "T", "{r:?}");
    assert_eq!(r["client_cert_chain_fps"], client_sha256, "{r:?}");
    assert_eq!(r["cert_chain_fps"], server_sha256, "{r:?}");

    // TLS 1.3: nginx verified a certificate, but it travelled encrypted.
    let r = by_name[1];
    assert!(c13.contains("TLSv1.3"), "{c13}");
    assert_eq!((r["version"].as_str(), r["established"].as_str()), ("TLSv13", "T"), "{r:?}");
    assert_eq!((r["client_cert_chain_fps"].as_str(), r["cert_chain_fps"].as_str()), ("-", "-"), "{r:?}");

    // x509.log: the client's certificate as a client's, and the server's.
    let client: Vec<&Row> = x509.iter().filter(|r| r["fingerprint"] == client_sha256).collect();
    assert_eq!(client.len(), 1, "{x509:#?}");
    assert_eq!(
        (client[0]["client_cert"].as_str(), client[0]["host_cert"].as_str()),
        ("T", "T"),
        "{x509:#?}"
    );
    assert_eq!(client[0]["certificate.subject"], "CN=client one,O=wirelog tests");
    assert_eq!(client[0]["certificate.issuer"], "CN=wirelog test CA,O=wirelog tests");
    assert!(x509.iter().any(|r| r["fingerprint"] == server_sha256 && r["client_cert"] == "F"), "{x509:#?}");
    let _ = std::fs::remove_dir_all(&dir);
}
