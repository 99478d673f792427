//! `wirelog serve` under abuse, as the fault probe of issue 28 ran it:
//! slowloris clients (a request head sent a byte a second), idle clients
//! (connected, silent) and more connections than the cap. The README's
//! bounds must hold (header read 10 s, idle 5 s, 256 connections, the
//! untrusted closed first) while normal requests are still answered.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::serve::{get, start, store};

const HEADER_READ_S: f64 = 10.0;
const IDLE_S: f64 = 5.0;
const MAX_CONNECTIONS: usize = 256;
/// Slack for a loaded test machine (the timers themselves are exact).
const SLACK_S: f64 = 3.0;

fn demo_store(tag: &str) -> std::path::PathBuf {
    let sample = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/sample.pcap.gz");
    store(tag, &[&sample])
}

/// Waits until the server closes `s` (EOF or reset), at most `limit`;
/// `tick` runs each 200 ms (a slowloris sends its next byte there).
fn closed_after(s: &mut TcpStream, limit: Duration, mut tick: impl FnMut(&mut TcpStream)) -> Option<Duration> {
    let t0 = Instant::now();
    s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut b = [0u8; 512];
    while t0.elapsed() < limit {
        match s.read(&mut b) {
            Ok(0) => return Some(t0.elapsed()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return Some(t0.elapsed()),
        }
        tick(s);
    }
    None
}

/// The server's open TCP sockets (its listener included), from /proc.
fn sockets(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|l| l.to_string_lossy().starts_with("socket:"))
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn slowloris_and_idle_clients_are_closed_within_the_timeouts_while_requests_are_answered() {
    let st = demo_store("abuse-slow");
    let srv = start(&["serve", "--store", st.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    let addr = srv.addr;
    let mut clients = Vec::new();
    for i in 0..200 {
        let slow = i % 2 == 0;
        clients.push(std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            let mut sent = 0usize;
            let head = b"GET /api/health HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
            let mut last = Instant::now();
            let closed = closed_after(&mut s, Duration::from_secs(30), |s| {
                // A byte a second, never the end of the head.
                if slow && last.elapsed() >= Duration::from_secs(1) && sent < head.len() {
                    let _ = s.write_all(&head[sent..sent + 1]);
                    sent += 1;
                    last = Instant::now();
                }
            });
            (slow, closed)
        }));
    }
    // Normal requests meanwhile, each answered promptly.
    let t0 = Instant::now();
    let mut answered = 0;
    while t0.elapsed() < Duration::from_secs(14) {
        let r = Instant::now();
        let (status, body) = get(addr, "/api/extent");
        assert_eq!(status, 200, "{body}");
        assert!(r.elapsed() < Duration::from_secs(2), "a normal request took {:?}", r.elapsed());
        answered += 1;
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(answered >= 20, "{answered}");
    for c in clients {
        let (slow, closed) = c.join().unwrap();
        let closed = closed.unwrap_or_else(|| panic!("a {} client was held 30 s", if slow { "slowloris" } else { "idle" }));
        let (lo, hi) = if slow { (HEADER_READ_S - 0.5, HEADER_READ_S + SLACK_S) } else { (IDLE_S - 0.5, IDLE_S + SLACK_S) };
        let s = closed.as_secs_f64();
        assert!(s >= lo && s <= hi, "a {} client closed after {s:.1} s, not within {lo}..{hi}", if slow { "slowloris" } else { "idle" });
    }
    // The server holds nothing of them now: its listener only.
    assert!(sockets(srv.child.id()) <= 1, "{} sockets", sockets(srv.child.id()));
}

/// A keep-alive GET on `s`: the status and body (by Content-Length).
fn keep_alive_get(s: &mut TcpStream, path: &str, auth: &str) -> (u16, String) {
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{auth}\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut raw = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        let n = s.read(&mut b).unwrap();
        assert!(n > 0, "closed before the answer: {}", String::from_utf8_lossy(&raw));
        raw.extend_from_slice(&b[..n]);
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse().unwrap())
                .expect("content-length");
            if raw.len() >= end + 4 + len {
                let status = head.split(' ').nth(1).unwrap().parse().unwrap();
                return (status, String::from_utf8_lossy(&raw[end + 4..end + 4 + len]).into_owned());
            }
        }
    }
}

fn is_closed(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(n) => n == 0,
        Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
    }
}

#[test]
fn the_connection_cap_holds_and_closes_untrusted_connections_first() {
    let st = demo_store("abuse-cap");
    let token = "t0ken-for-the-abuse-test-0123456789";
    let srv = start(&["serve", "--store", st.to_str().unwrap(), "--listen", "127.0.0.1:0", "--token", token]);
    let addr: SocketAddr = srv.addr;
    let bearer = format!("Authorization: Bearer {token}\r\n");
    // A client that gave the token, and one that gave a wrong one.
    let mut trusted = TcpStream::connect(addr).unwrap();
    assert_eq!(keep_alive_get(&mut trusted, "/api/health", &bearer).0, 200);
    let mut wrong = TcpStream::connect(addr).unwrap();
    assert_eq!(keep_alive_get(&mut wrong, "/api/health", "Authorization: Bearer nope\r\n").0, 401);
    // Then more silent connections than the cap.
    let flood: Vec<TcpStream> = (0..MAX_CONNECTIONS + 100).map(|_| TcpStream::connect(addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(500));
    let held = sockets(srv.child.id());
    assert!(held <= MAX_CONNECTIONS + 1, "{held} sockets open (cap {MAX_CONNECTIONS} and the listener)");
    // The untrusted went first, the oldest first: the wrong-token client
    // and the first of the flood are closed, the newest are not.
    assert!(is_closed(&mut wrong), "the wrong-token connection is still open");
    let mut flood = flood;
    assert!(is_closed(&mut flood[0]), "the oldest silent connection is still open");
    let last = flood.len() - 1;
    assert!(!is_closed(&mut flood[last]), "the newest silent connection was closed");
    // The trusted one still works, and a new request is answered.
    assert_eq!(keep_alive_get(&mut trusted, "/api/extent", &bearer).0, 200);
    let (status, body) = common::serve::request(addr, "GET", "/api/health", &[&format!("Authorization: Bearer {token}")]);
    assert_eq!(status, 200, "{body}");
}

/// API strictness: an unknown parameter is a 400 naming it on every
/// endpoint; the interval cap holds without `from`/`to`; an answer read
/// around a corrupt store file says which (`warnings`).
#[test]
fn unknown_parameters_open_intervals_and_corrupt_files_are_said() {
    // 6,000 UDP connections 10 ms apart (a minute of them).
    let input = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("abuse-strict.pcap");
    std::fs::write(&input, common::synthetic_pcap(6000)).unwrap();
    let st = store("abuse-strict", &[&input]);
    let srv = start(&["serve", "--store", st.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    let addr = srv.addr;
    for path in [
        "/api/query?kind=conns&bogus=1",
        "/api/records?kind=conns&bogus=1",
        "/api/sequence?uid=C1&bogus=1",
        "/api/pcap?uid=C1&bogus=1",
        "/api/map?bogus=1",
        "/api/extent?bogus=1",
        "/api/health?bogus=1",
        "/metrics?bogus=1",
    ] {
        let (status, body) = get(addr, path);
        assert_eq!(status, 400, "{path}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["parameter"], "bogus", "{path}: {body}");
    }
    assert_eq!(get(addr, "/api/extent").0, 200);
    assert_eq!(get(addr, "/api/health").0, 200);

    // Without 'from' or 'to', the intervals holding records are counted:
    // 1 us or 1 ms gives 6,000 of them.
    for path in ["/api/query?kind=conns&every=1us", "/api/query?kind=conns&every=1ms&from=0", "/api/query?kind=conns&every=1us&to=2100-01-01"] {
        let (status, body) = get(addr, path);
        assert_eq!(status, 400, "{path}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["parameter"], "every", "{path}: {body}");
        assert!(v["error"].as_str().unwrap().contains("at most 5000"), "{path}: {body}");
    }
    let (status, body) = get(addr, "/api/query?kind=conns&every=10s");
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(v.get("warnings").is_none(), "{body}");

    // A corrupt conns file: the answer is partial and says so, naming it.
    let mut files = Vec::new();
    common::parquet_files(&st.join("conns"), &mut files);
    let bad = files.first().expect("a conns file").clone();
    let mut bytes = std::fs::read(&bad).unwrap();
    let mid = bytes.len() / 2;
    bytes.truncate(mid);
    std::fs::write(&bad, &bytes).unwrap();
    let name = bad.file_name().unwrap().to_string_lossy().into_owned();
    for path in ["/api/query?kind=conns&by=proto", "/api/records?kind=conns", "/api/map"] {
        let (status, body) = get(addr, path);
        assert_eq!(status, 200, "{path}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
        let w = v["warnings"].as_array().unwrap_or_else(|| panic!("{path}: no warnings: {body}"));
        assert!(w.iter().any(|x| x.as_str().unwrap().contains(&name)), "{path}: {body}");
    }
}
