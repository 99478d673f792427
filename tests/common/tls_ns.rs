//! The set-up the TLS policy tests share (tls_validate_live.rs,
//! tls_ocsp_live.rs, tls_sct_live.rs): certificates made with `openssl` in
//! the test's own directory, `openssl s_server`s (one connection each) in a
//! namespace with only `lo` ([`LoNs`]), tcpdump on that `lo`, `openssl
//! s_client` to each server, and `wirelog read` of the capture.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use super::live::text;
use super::lo::{settle, LoNs, Proc};

/// An empty directory `<target tmp>/<name>-<pid>` for one test.
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs openssl in `dir`: its success and its output (stdout, then stderr).
pub fn openssl_run(dir: &Path, args: &[&str]) -> (bool, String) {
    let o = Command::new("openssl").args(args).current_dir(dir).output().unwrap();
    (o.status.success(), text(&o))
}

/// Runs openssl in `dir`; it must succeed. Its stdout.
pub fn openssl(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("openssl").args(args).current_dir(dir).output().unwrap();
    assert!(o.status.success(), "openssl {args:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A new P-256 key, unencrypted (the arguments of `openssl req`).
const EC: [&str; 5] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];

/// `stem.pem` (key `stem.key`) in `dir`: a self-signed certificate for
/// `subj` (`/CN=...`), valid 30 days; a CA (critical basicConstraints,
/// keyUsage keyCertSign and cRLSign) when `ca`.
pub fn self_signed(dir: &Path, stem: &str, subj: &str, ca: bool) {
    let (key, pem) = (format!("{stem}.key"), format!("{stem}.pem"));
    let mut a = vec!["req", "-x509"];
    a.extend(EC);
    a.extend(["-keyout", &key, "-out", &pem, "-days", "30", "-subj", subj]);
    if ca {
        a.extend(["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"]);
    }
    openssl(dir, &a);
}

/// A new key `stem.key` and its request `stem.csr` for `subj`.
pub fn request(dir: &Path, stem: &str, subj: &str) {
    let (key, csr) = (format!("{stem}.key"), format!("{stem}.csr"));
    let mut a = vec!["req", "-new"];
    a.extend(EC);
    a.extend(["-keyout", &key, "-out", &csr, "-subj", subj]);
    openssl(dir, &a);
}

/// `stem.pem` (key `stem.key`) for `subj`, issued by `ca` (its .pem and
/// .key) with `serial` and the extensions of the file `ext`, valid 20 days.
pub fn issue(dir: &Path, stem: &str, subj: &str, ca: &str, serial: &str, ext: &str) {
    request(dir, stem, subj);
    let (csr, pem, cacert, cakey) = (format!("{stem}.csr"), format!("{stem}.pem"), format!("{ca}.pem"), format!("{ca}.key"));
    openssl(dir, &["x509", "-req", "-in", &csr, "-CA", &cacert, "-CAkey", &cakey, "-set_serial", serial, "-days", "20", "-extfile", ext, "-out", &pem]);
}

/// One `openssl s_server`: it accepts one connection on 127.0.0.1:`port`
/// and answers as `-www`, with the certificate `<leaf>.pem` and key
/// `<leaf>.key` of the test's directory, TLS 1.3 alone when `tls13`, else
/// TLS 1.2 alone, and `extra` arguments after those.
pub struct Server {
    pub port: u16,
    pub leaf: String,
    pub tls13: bool,
    pub extra: Vec<String>,
}

/// Starts `servers` in `ns` (each one's output in `dir/s_server-PORT.log`)
/// and returns once each says it accepts.
pub fn s_servers(ns: &LoNs, dir: &Path, servers: &[Server]) -> Vec<Proc> {
    let mut procs = Vec::new();
    for s in servers {
        let (p, cert, key) = (s.port.to_string(), dir.join(format!("{}.pem", s.leaf)), dir.join(format!("{}.key", s.leaf)));
        let mut a = vec!["openssl", "s_server", "-accept", &p, "-cert", cert.to_str().unwrap(), "-key", key.to_str().unwrap(), "-naccept", "1", "-www"];
        a.push(if s.tls13 { "-tls1_3" } else { "-tls1_2" });
        a.extend(s.extra.iter().map(String::as_str));
        let log = dir.join(format!("s_server-{}.log", s.port));
        procs.push((ns.spawn("openssl s_server", &a, &log), log));
    }
    procs
        .into_iter()
        .map(|(mut p, log)| {
            let accepts = || std::fs::read_to_string(&log).unwrap_or_default().contains("ACCEPT");
            p.wait_ready(Duration::from_secs(20), &log, accepts);
            p
        })
        .collect()
}

/// tcpdump of `ns`'s `lo`, TCP ports `first` to `last`, into `pcap`.
pub fn tcpdump(ns: &LoNs, pcap: &Path, first: u16, last: u16) -> Proc {
    ns.tcpdump(pcap, &["tcp", "portrange", &format!("{first}-{last}")])
}

/// Ends a capture: once `pcap` has stopped growing, stops `tcpdump`, then
/// the servers.
pub fn finish(pcap: &Path, tcpdump: Proc, servers: Vec<Proc>) {
    settle(pcap);
    tcpdump.interrupt();
    drop(servers);
}

/// `openssl s_client` in `ns` to 127.0.0.1:`port` for www.example.org
/// with `extra` arguments, stdin empty: its output (stdout, then stderr).
pub fn s_client(ns: &LoNs, port: u16, extra: &[&str]) -> String {
    let addr = format!("127.0.0.1:{port}");
    let mut a = vec!["openssl", "s_client", "-connect", &addr, "-servername", "www.example.org"];
    a.extend(extra);
    text(&ns.cmd(&a).stdin(Stdio::null()).output().unwrap())
}

/// `wirelog read --no-store --quiet --logs LOGS ARGS... PCAP`: its output,
/// success or not.
pub fn wirelog_read(logs: &Path, args: &[&str], pcap: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["read", "--no-store", "--quiet", "--logs"])
        .arg(logs)
        .args(args)
        .arg(pcap)
        .output()
        .unwrap()
}
