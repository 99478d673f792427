//! `capture --tls-plaintext` against real programs: nginx with TLS (a
//! self-signed certificate made by the test) in a network namespace, curl
//! and Python's `http.client` over HTTPS, all linked to the system's
//! OpenSSL, and gnutls-cli, linked to the system's GnuTLS. Every request the
//! clients made is in http.log with the method,
//! URI, status and sizes the clients saw, `source` tls-library, the client's
//! and nginx's pid and process, on the connection whose ssl.log row (from the
//! packets) has the same uid and whose conn.log service is `ssl,http`.
//! Python runs after the capture started, with its own copy of libssl (a
//! library file no process mapped at the start): it is found and probed. A
//! tiny ring buffer under a burst loses events: they are counted, and no
//! record is wrong.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::live::{tls_plaintext_stats, LiveCapture};
use common::lo::{needs, LoNs, Proc};

type Row = HashMap<String, String>;

fn rows(p: &Path) -> Vec<Row> {
    common::read_log(p)
}

struct Site {
    ns: LoNs,
    dir: PathBuf,
    nginx: Proc,
}

const PORT: u16 = 8443;

/// The two tests one at a time: the uprobes see every process of the host,
/// so the tiny-ring test's 2 MB of responses also pass through the other
/// test's capture. With both running at once, the gnutls-cli response that
/// test checks went missing twice in eight runs of the binary (never when it
/// ran alone); the likely cause is that traffic, not a loss of its own.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn requirements() -> bool {
    needs("tls-plaintext tests (eBPF, namespaces)", &["nginx", "curl", "openssl", "python3", "gnutls-cli"])
}

/// nginx serving `/small` (a short body), `/big` (100,000 bytes, several
/// TLS records) and echoing POST sizes, with a certificate made here.
fn site(tag: &str) -> Site {
    let dir = common::scratch("tls_plaintext", tag);
    let ns = LoNs::new("tp");
    common::tls::self_signed(&dir, "/CN=localhost", 1, &[]);
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("small"), "hello over TLS\n").unwrap();
    std::fs::write(www.join("big"), vec![b'z'; 100_000]).unwrap();
    let d = dir.display();
    let http = format!(
        r#"
    access_log off;
    server {{
        listen 127.0.0.1:{PORT} ssl;
        ssl_certificate {d}/cert.pem;
        ssl_certificate_key {d}/key.pem;
        root {d}/www;
        location /post {{ return 201 "created\n"; }}
    }}
"#
    );
    std::fs::write(dir.join("nginx.conf"), common::nginx::conf(&dir, &http)).unwrap();
    let conf = dir.join("nginx.conf");
    let out = dir.join("nginx.out");
    let mut nginx = ns.spawn("nginx", &["nginx", "-c", conf.to_str().unwrap()], &out);
    nginx.wait_ready(Duration::from_secs(10), &out, || {
        ns.cmd(&["curl", "-skf", "-o", "/dev/null", &format!("https://127.0.0.1:{PORT}/small")])
            .status()
            .is_ok_and(|s| s.success())
    });
    Site { ns, dir, nginx }
}

fn capture(site: &Site, extra: &[&str]) -> LiveCapture {
    LiveCapture::lo_logs(&site.ns.name, &site.dir.join("logs"), extra)
}

/// What a client saw of one request.
#[derive(Debug)]
struct Seen {
    method: &'static str,
    uri: String,
    status: u16,
    request_body: u64,
    response_body: u64,
}

/// The Python client: its own copy of libssl (LD_LIBRARY_PATH), a pause so
/// the capture finds that library, then a GET and a POST on one connection;
/// prints its pid and what it got.
const PY_CLIENT: &str = r#"
import http.client, os, ssl, sys, time
time.sleep(float(sys.argv[2]))
ctx = ssl._create_unverified_context()
c = http.client.HTTPSConnection("127.0.0.1", int(sys.argv[1]), context=ctx)
print(os.getpid())
c.request("GET", "/big?from=python")
r = c.getresponse(); b = r.read()
print("GET", "/big?from=python", r.status, 0, len(b))
body = b"k=" + b"v" * 5000
c.request("POST", "/post", body=body, headers={"Content-Type": "application/x-www-form-urlencoded"})
r = c.getresponse(); b = r.read()
print("POST", "/post", r.status, len(body), len(b))
"#;

fn python(site: &Site, libdir: &Path, delay: &str) -> (u32, Vec<Seen>) {
    let out = site
        .ns
        .cmd(&["env", &format!("LD_LIBRARY_PATH={}", libdir.display()), "python3", "-c", PY_CLIENT, &PORT.to_string(), delay])
        .output()
        .unwrap();
    assert!(out.status.success(), "python: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let pid = lines.next().unwrap().parse().unwrap();
    let seen = lines
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Seen {
                method: if f[0] == "GET" { "GET" } else { "POST" },
                uri: f[1].into(),
                status: f[2].parse().unwrap(),
                request_body: f[3].parse().unwrap(),
                response_body: f[4].parse().unwrap(),
            }
        })
        .collect();
    (pid, seen)
}

/// curl, two requests on one connection; its pid and what it printed for each.
fn curl(site: &Site) -> (u32, Vec<Seen>) {
    let url = |p: &str| format!("https://127.0.0.1:{PORT}{p}");
    let c = site
        .ns
        .cmd(&["curl", "-sk", "--http1.1", "-w", "%{http_code} %{size_download}\\n", "-o", "/dev/null", &url("/small"), "-o", "/dev/null", &url("/big")])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // `ip netns exec` execs the command: this is curl's pid.
    let pid = c.id();
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success());
    let seen = String::from_utf8_lossy(&out.stdout)
        .lines()
        .zip(["/small", "/big"])
        .map(|(l, uri)| {
            let (code, size) = l.split_once(' ').unwrap();
            Seen { method: "GET", uri: uri.into(), status: code.parse().unwrap(), request_body: 0, response_body: size.parse().unwrap() }
        })
        .collect();
    (pid, seen)
}

/// gnutls-cli (GnuTLS's client: `gnutls_record_send`/`gnutls_record_recv`
/// on libgnutls.so.30), one request; its pid and what it got.
fn gnutls_cli(site: &Site) -> (u32, Seen) {
    use std::io::Write;
    let mut c = site
        .ns
        .cmd(&["gnutls-cli", "--insecure", "--logfile=/dev/null", "-p", &PORT.to_string(), "127.0.0.1"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // `ip netns exec` execs the command: this is gnutls-cli's pid.
    let pid = c.id();
    // Its stdin's end: it sends the request, then reads until nginx closes.
    c.stdin.take().unwrap().write_all(b"GET /small?from=gnutls HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success(), "gnutls-cli: {:?}", out.status);
    let text = String::from_utf8_lossy(&out.stdout);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("gnutls-cli printed {text:?}"));
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (pid, Seen { method: "GET", uri: "/small?from=gnutls".into(), status, request_body: 0, response_body: body.len() as u64 })
}

/// A copy of the system's libssl in its own directory: another file (inode)
/// for the capture to find while it runs.
fn libssl_copy(dir: &Path) -> PathBuf {
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    let sys = ["/usr/lib/x86_64-linux-gnu/libssl.so.3", "/lib/x86_64-linux-gnu/libssl.so.3"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("the system's libssl.so.3");
    std::fs::copy(sys, lib.join("libssl.so.3")).unwrap();
    lib
}

#[test]
fn https_requests_of_curl_and_python_are_in_http_log_with_their_processes_and_uids() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !requirements() {
        return;
    }
    let t0 = Instant::now();
    let site = site("main");
    let lib = libssl_copy(&site.dir);
    let cap = capture(&site, &["--tls-plaintext"]);
    let (curl_pid, curl_seen) = curl(&site);
    let (py_pid, py_seen) = python(&site, &lib, "1.5");
    let (gnutls_pid, gnutls_seen) = gnutls_cli(&site);
    std::thread::sleep(Duration::from_millis(500));
    let err = cap.stop();
    let logs = site.dir.join("logs");
    let http = rows(&logs.join("http.log"));
    let ssl = rows(&logs.join("ssl.log"));
    let conns = rows(&logs.join("conn.log"));
    let nginx_pid = site.nginx.pid().to_string();
    // Only this test's server: the probes see every process of the host.
    let ours: Vec<&Row> = http.iter().filter(|r| r["resp_pid"] == nginx_pid).collect();
    assert_eq!(ours.len(), 5, "{ours:#?}\n{err}");
    let mut uids = HashMap::new();
    let seen_by = curl_seen.iter().map(|s| (s, "curl")).chain(py_seen.iter().map(|s| (s, "python3")));
    for (seen, client) in seen_by.chain([(&gnutls_seen, "gnutls-cli")]) {
        let r = ours
            .iter()
            .find(|r| r["uri"] == seen.uri && r["method"] == seen.method)
            .unwrap_or_else(|| panic!("{seen:?} not in http.log: {ours:#?}\n{err}"));
        assert_eq!(r["status_code"], seen.status.to_string(), "{r:?}");
        assert_eq!(r["request_body_len"], seen.request_body.to_string(), "{r:?}");
        assert_eq!(r["response_body_len"], seen.response_body.to_string(), "{r:?}");
        assert_eq!(r["status"], "ok", "{r:?}");
        assert_eq!(r["source"], "tls-library", "{r:?}");
        assert_eq!(r["orig_proc"], client, "{r:?}");
        assert_eq!(r["resp_proc"], "nginx", "{r:?}");
        match client {
            "python3" => assert_eq!(r["orig_pid"], py_pid.to_string(), "{r:?}"),
            "gnutls-cli" => assert_eq!(r["orig_pid"], gnutls_pid.to_string(), "{r:?}"),
            _ => assert_eq!(r["orig_pid"], curl_pid.to_string(), "{r:?}"),
        }
        assert!(r["latency"].parse::<f64>().unwrap() > 0.0, "{r:?}");
        // The uid is the packet path's connection: its ssl.log row and its
        // conn.log row, whose service now names what was inside.
        let uid = &r["uid"];
        assert!(ssl.iter().any(|s| &s["uid"] == uid), "no ssl.log row with uid {uid}: {ssl:#?}");
        let c = conns.iter().find(|c| &c["uid"] == uid).unwrap_or_else(|| panic!("no conn.log row {uid}"));
        assert_eq!(c["service"], "ssl,http", "{c:?}");
        assert_eq!(c["id.resp_p"], PORT.to_string());
        uids.entry(client).or_insert_with(Vec::new).push(uid.clone());
    }
    // curl's and Python's connections each with their two requests,
    // gnutls-cli's with its one.
    for (client, u) in &uids {
        assert_eq!(u.len(), if *client == "gnutls-cli" { 1 } else { 2 }, "{client}");
        assert_eq!(u[0], u[u.len() - 1], "{client}'s requests on one connection");
    }
    assert_ne!(uids["curl"][0], uids["python3"][0]);
    assert_ne!(uids["gnutls-cli"][0], uids["python3"][0]);
    // The copy of libssl that only Python mapped was found and probed.
    assert!(err.contains("tls-plaintext:"), "{err}");
    let stats = tls_plaintext_stats(&err);
    assert!(stats.contains("0 ring records lost"), "{stats}");
    eprintln!("{stats}\ntook {:?}", t0.elapsed());
}

/// A ring of one page under a burst of large responses: events are lost;
/// the loss is counted and reported as gaps, and no record says anything
/// the clients did not see (a request is complete and right, or flagged).
#[test]
fn a_tiny_ring_loses_events_counted_and_no_record_is_wrong() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !requirements() {
        return;
    }
    let site = site("tiny");
    let cap = capture(&site, &["--tls-plaintext", "--tls-plaintext-ring", "4096"]);
    let url = format!("https://127.0.0.1:{PORT}/big");
    // 20 requests on one connection, each 100,000 bytes in several records.
    let mut args = vec!["curl", "-sk", "--http1.1", "-w", "%{http_code} %{size_download}\\n"];
    for _ in 0..20 {
        args.extend(["-o", "/dev/null", url.as_str()]);
    }
    let out = site.ns.cmd(&args).output().unwrap();
    assert!(out.status.success());
    let sizes: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(String::from).collect();
    assert_eq!(sizes.len(), 20);
    assert!(sizes.iter().all(|s| s == "200 100000"), "{sizes:?}");
    std::thread::sleep(Duration::from_millis(500));
    let err = cap.stop();
    let http = rows(&site.dir.join("logs/http.log"));
    let nginx_pid = site.nginx.pid().to_string();
    let ours: Vec<&Row> = http.iter().filter(|r| r["resp_pid"] == nginx_pid).collect();
    let stats = tls_plaintext_stats(&err);
    let lost = common::live::count_before(stats, " ring records lost");
    assert!(lost > 0, "a one-page ring under 2 MB of responses lost nothing? {stats}");
    for r in &ours {
        // Whatever survived is this request, complete, or a record that
        // says it is not.
        assert!(r["uri"] == "/big" || r["uri"] == "-", "{r:?}");
        if r["status"] == "ok" {
            assert_eq!(r["method"], "GET", "{r:?}");
            assert_eq!(r["status_code"], "200", "{r:?}");
            let body: u64 = r["response_body_len"].parse().unwrap();
            let missed: u64 = r.get("response_missed_bytes").and_then(|m| m.parse().ok()).unwrap_or(0);
            assert_eq!(body + missed, 100_000, "{r:?}");
        }
    }
    assert!(ours.len() <= 20, "{ours:#?}");
    eprintln!("{stats}; {} of 20 requests recorded", ours.len());
}

/// gnutls-cli sends its request, then (its input ended) TLS's close_notify;
/// nginx answers and closes, and when the alert came after nginx's last
/// read, its close resets the connection. gnutls-cli then reads the
/// response from a socket TCP has closed under it, whose local port the
/// kernel has taken back (0): 1 to 9 of 40 connections so in runs here,
/// and before the fix each such response went to a connection of port 0,
/// its request recorded as unanswered. 40 requests: every one answered on
/// its own connection, whatever the resets.
#[test]
fn responses_read_after_a_reset_stay_on_their_connections() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !requirements() {
        return;
    }
    let site = site("resets");
    let cap = capture(&site, &["--tls-plaintext"]);
    let mut pids = Vec::new();
    for _ in 0..40 {
        let (pid, seen) = gnutls_cli(&site);
        assert_eq!(seen.status, 200);
        pids.push(pid.to_string());
    }
    std::thread::sleep(Duration::from_millis(500));
    let err = cap.stop();
    let logs = site.dir.join("logs");
    let http = rows(&logs.join("http.log"));
    let conns = rows(&logs.join("conn.log"));
    let nginx_pid = site.nginx.pid().to_string();
    let ours: Vec<&Row> = http.iter().filter(|r| r["resp_pid"] == nginx_pid).collect();
    let stats = tls_plaintext_stats(&err);
    assert_eq!(ours.len(), 40, "{ours:#?}\n{stats}");
    for pid in &pids {
        let r = ours.iter().find(|r| &r["orig_pid"] == pid).unwrap_or_else(|| panic!("gnutls-cli {pid} not in http.log: {stats}"));
        assert_eq!((r["status"].as_str(), r["status_code"].as_str()), ("ok", "200"), "{r:?}\n{stats}");
        let c = conns.iter().find(|c| c["uid"] == r["uid"]).unwrap_or_else(|| panic!("no conn.log row for {r:?}"));
        assert_eq!(c["id.orig_p"], r["id.orig_p"], "{c:?}");
    }
    let resets = conns.iter().filter(|c| c["id.resp_p"] == PORT.to_string() && c["conn_state"].starts_with("RST")).count();
    assert_eq!(common::live::count_before(stats, " events on no connection"), 0, "{stats}");
    eprintln!("40 gnutls-cli requests, {resets} of their connections reset\n{stats}");
}
