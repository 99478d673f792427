//! `wirelog serve` for the tests: a store built by `wirelog read`, a server
//! on an ephemeral loopback port (killed on drop), and a tiny HTTP client.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Reads `pcaps` (one stream) into a fresh store under the test's tmp dir.
pub fn store(tag: &str, pcaps: &[&Path]) -> PathBuf {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("serve-{tag}"));
    let _ = std::fs::remove_dir_all(&base);
    let store = base.join("store");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wirelog"));
    cmd.args(["read", "-C", "--quiet", "--store"]).arg(&store).arg("--logs").arg(base.join("logs"));
    cmd.args(pcaps);
    let out = cmd.output().expect("run wirelog read");
    assert!(out.status.success(), "wirelog read: {}", String::from_utf8_lossy(&out.stderr));
    store
}

/// A running `wirelog` server; killed (by its PID) when dropped.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `wirelog ARGS` and waits for its "serving ... on http://ADDR/"
/// line (or "metrics on http://ADDR/").
pub fn start(args: &[&str]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start wirelog");
    let err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            eprintln!("[wirelog] {line}");
            if !sent {
                if let Some(i) = line.find("http://") {
                    let rest = &line[i + 7..];
                    let a = &rest[..rest.find('/').unwrap_or(rest.len())];
                    if let Ok(a) = a.parse::<SocketAddr>() {
                        let _ = tx.send(a);
                        sent = true;
                    }
                }
            }
        }
    });
    let addr = match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(a) => a,
        Err(_) => {
            let _ = child.kill();
            panic!("wirelog {args:?} did not say where it listens");
        }
    };
    Server { child, addr }
}

/// One request; (status, body). `headers` are extra header lines.
pub fn request(addr: SocketAddr, method: &str, path: &str, headers: &[&str]) -> (u16, String) {
    let (status, _, body) = request_raw(addr, method, path, headers);
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// One request; (status, response head, body bytes), the body de-chunked.
pub fn request_raw(addr: SocketAddr, method: &str, path: &str, headers: &[&str]) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(raw.len());
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let body = raw.get(split + 4..).unwrap_or_default();
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.to_vec()
    };
    (status, head, body)
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let len = String::from_utf8_lossy(&b[..eol]);
        let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
        let rest = &b[eol + 2..];
        if n == 0 || rest.len() < n {
            break;
        }
        out.extend_from_slice(&rest[..n]);
        b = rest.get(n + 2..).unwrap_or_default();
    }
    out
}

pub fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    request(addr, "GET", path, &[])
}

/// Percent-encodes a query parameter value.
pub fn enc(s: &str) -> String {
    let mut o = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            o.push(b as char);
        } else {
            o.push_str(&format!("%{b:02X}"));
        }
    }
    o
}
