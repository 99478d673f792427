//! HTTP/2 made here, checked against what the clients saw: nghttpd (h2c,
//! prior knowledge) in a network namespace, `nghttp` with several
//! concurrent streams (one of them a 404), `h2load` with many streams on a
//! few connections and `curl --http2-prior-knowledge` (one request per
//! connection: curl 7.88 drops a second one); tcpdump captures the
//! loopback, `wirelog read` makes http.log, and every request the clients
//! made is one record with the status they got.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::live::text;
use common::lo::{have, settle, wait_for, LoNs};

/// The files both servers serve, in `dir/www`: a.txt (512 bytes) and
/// b.txt (20,000 bytes).
fn www(dir: &Path) -> PathBuf {
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("a.txt"), "a".repeat(512)).unwrap();
    std::fs::write(www.join("b.txt"), "b".repeat(20_000)).unwrap();
    www
}

#[test]
fn nghttpd_h2load_curl_streams_all_found() {
    if !(have("nghttpd") && have("nghttp") && have("h2load") && have("curl") && have("tcpdump") && common::live::is_root()) {
        common::live::skip("needs root, nghttp2-server, nghttp2-client, curl and tcpdump");
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("http2-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let www = www(&dir);
    let ns = LoNs::new("h2");
    let pcap = dir.join("h2.pcap");
    let tcpdump = ns.tcpdump(&pcap, &["tcp", "port", "8080"]);
    let _server = ns.spawn("nghttpd", &["nghttpd", "--no-tls", "-a", "127.0.0.1", "-d", www.to_str().unwrap(), "8080"], &dir.join("nghttpd.log"));
    wait_for("nghttpd", Duration::from_secs(20), || {
        ns.cmd(&["curl", "-s", "-o", "/dev/null", "--http2-prior-knowledge", "http://127.0.0.1:8080/a.txt"]).output().is_ok_and(|o| o.status.success())
    });
    // nghttp: three streams at once on one connection; its -s summary is
    // not needed, the exit status and the 404 are.
    let o = ns.run(&["nghttp", "-n", "-v", "http://127.0.0.1:8080/a.txt", "http://127.0.0.1:8080/b.txt", "http://127.0.0.1:8080/missing"]);
    let v = String::from_utf8_lossy(&o.stdout);
    assert_eq!(v.matches(":status: 200").count(), 2, "{v}");
    assert_eq!(v.matches(":status: 404").count(), 1, "{v}");
    // h2load: 300 requests on 3 connections, 10 streams at a time.
    let o = ns.run(&["h2load", "-n", "300", "-c", "3", "-m", "10", "http://127.0.0.1:8080/a.txt"]);
    let h = String::from_utf8_lossy(&o.stdout);
    assert!(h.contains("300 succeeded") && h.contains("300 2xx"), "{h}");
    // curl: 5 connections, one request each.
    for _ in 0..5 {
        let o = ns.run(&["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--http2-prior-knowledge", "http://127.0.0.1:8080/b.txt"]);
        assert_eq!(String::from_utf8_lossy(&o.stdout), "200", "{}", text(&o));
    }
    settle(&pcap);
    tcpdump.interrupt();

    let logs = dir.join("logs");
    common::read_pcap(&pcap, &logs, None, &["--quiet"]);
    let rows = common::read_log(&logs.join("http.log"));
    let mut by: HashMap<(String, String), usize> = HashMap::new();
    for r in &rows {
        assert_eq!((r["version"].as_str(), r["end_state"].as_str(), r["method"].as_str()), ("2", "complete", "GET"), "{r:?}");
        *by.entry((r["uri"].clone(), r["status_code"].clone())).or_default() += 1;
        if r["uri"] == "/b.txt" {
            assert_eq!(r["response_body_len"], "20000", "{r:?}");
        }
    }
    // The readiness probe's request(s) on /a.txt come on top: at least one.
    let a = by[&("/a.txt".to_string(), "200".to_string())];
    assert!(a > 301, "{by:?}");
    assert_eq!(by[&("/b.txt".to_string(), "200".to_string())], 6, "{by:?}");
    assert_eq!(by[&("/missing".to_string(), "404".to_string())], 1, "{by:?}");
    assert_eq!(by.len(), 3, "{by:?}");
    // A readiness probe that came before the server listened is a refused
    // connection (REJ) with nothing to parse; every other one is HTTP/2.
    let conns = common::read_log(&logs.join("conn.log"));
    assert!(conns.iter().filter(|c| c["conn_state"] != "REJ").all(|c| c["service"] == "http2"), "{conns:?}");
    assert!(conns.iter().any(|c| c["service"] == "http2"), "{conns:?}");
}

/// nginx 1.22 serving h2c (`listen … http2` on a cleartext port) to `curl
/// --http2-prior-knowledge` (one request per connection) and `nghttp`
/// (several streams at once: GETs with a 404, then POSTs; curl's body goes
/// in a PUT), and the HTTP/1.1
/// `Upgrade: h2c` path on a real capture: `curl --http2` to nghttpx's
/// cleartext frontend (neither nginx nor nghttpd takes the Upgrade), which
/// proxies to nginx. Every request is one http.log record with version 2
/// and the status the client printed; an upgraded request is stream 1 with
/// `info_code` 101.
#[test]
fn nginx_h2c_and_upgrade_through_nghttpx() {
    if !(have("nginx") && have("nghttpx") && have("nghttp") && have("curl") && have("tcpdump") && common::live::is_root()) {
        common::live::skip("needs root, nginx, nghttp2-proxy, nghttp2-client, curl and tcpdump");
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("http2-nginx-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let www = www(&dir);
    let body = dir.join("body.json");
    std::fs::write(&body, r#"{"name":"probe","values":[1,2,3]}"#).unwrap();
    // 8081: the clients' h2c server; 8083: nghttpx's backend (not captured,
    // so its proxied requests are not counted twice); 8082: nghttpx.
    let http = format!(
        r#"
    access_log off;
    server {{
        listen 127.0.0.1:8081 http2;
        listen 127.0.0.1:8083 http2;
        root {};
        location = /ready {{ return 200 "ok\n"; }}
        location = /echo {{ return 201 "made\n"; }}
        location /up/ {{ dav_methods PUT; create_full_put_path on; }}
    }}"#,
        www.display()
    );
    std::fs::write(dir.join("nginx.conf"), common::nginx::conf(&dir, &http)).unwrap();
    let ns = LoNs::new("h2n");
    let pcap = dir.join("h2n.pcap");
    let tcpdump = ns.tcpdump(&pcap, &["tcp", "port", "8081", "or", "tcp", "port", "8082"]);
    let conf = dir.join("nginx.conf");
    let _nginx = ns.spawn("nginx", &["nginx", "-c", conf.to_str().unwrap()], &dir.join("nginx.out"));
    let errlog = dir.join("nghttpx.err");
    let errlog_arg = format!("--errorlog-file={}", errlog.display());
    let _nghttpx = ns.spawn(
        "nghttpx",
        &["nghttpx", "--conf=/dev/null", "--workers=1", "--frontend=127.0.0.1,8082;no-tls", "--backend=127.0.0.1,8083;;proto=h2", &errlog_arg],
        &dir.join("nghttpx.out"),
    );
    for port in [8081, 8082] {
        let url = format!("http://127.0.0.1:{port}/ready");
        wait_for("nginx and nghttpx", Duration::from_secs(20), || {
            ns.cmd(&["curl", "-s", "-o", "/dev/null", "--http2-prior-knowledge", &url]).output().is_ok_and(|o| o.status.success())
        });
    }
    // What the clients made, as (port, method, uri, status they printed).
    let mut made: Vec<(u16, String, String, String)> = Vec::new();
    let curl = |args: &[&str]| -> String {
        let mut a = vec!["curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{http_version}"];
        a.extend_from_slice(args);
        let o = ns.run(&a);
        let s = String::from_utf8_lossy(&o.stdout).to_string();
        let (code, version) = s.split_once(' ').unwrap_or_else(|| panic!("{s}"));
        assert_eq!(version, "2", "{args:?}: {s}");
        code.to_string()
    };
    // curl's body goes in a PUT that nginx reads (WebDAV, 201): to a POST
    // on `return` nginx answers before reading the body and then resets
    // the stream (NO_ERROR), which curl 7.88 at times takes for a failure
    // (exit 92) without printing the status; nghttp's POSTs below take it.
    for (method, path, extra) in [("GET", "/a.txt", None), ("GET", "/missing", None), ("PUT", "/up/item.json", Some(&body))] {
        let url = format!("http://127.0.0.1:8081{path}");
        let data = extra.map(|b| format!("@{}", b.display()));
        let mut args = vec!["--http2-prior-knowledge", url.as_str()];
        if let Some(d) = &data {
            args.extend_from_slice(&["-X", "PUT", "-H", "content-type: application/json", "--data-binary", d.as_str()]);
        }
        made.push((8081, method.into(), path.into(), curl(&args)));
    }
    // nghttp: each run is one connection with its requests as concurrent
    // streams; the statuses it printed, in stream order, are its requests'
    // (it opens them in the order given).
    let nghttp = |args: &[&str], method: &str, paths: &[&str], made: &mut Vec<(u16, String, String, String)>| {
        let mut a = vec!["nghttp", "-n", "-v"];
        a.extend_from_slice(args);
        let urls: Vec<String> = paths.iter().map(|p| format!("http://127.0.0.1:8081{p}")).collect();
        a.extend(urls.iter().map(String::as_str));
        let o = ns.run(&a);
        let v = String::from_utf8_lossy(&o.stdout).to_string();
        let mut got: Vec<(u32, String)> = v
            .lines()
            .filter_map(|l| {
                let (_, rest) = l.split_once("recv (stream_id=")?;
                let (id, rest) = rest.split_once(") :status: ")?;
                Some((id.parse().ok()?, rest.trim().to_string()))
            })
            .collect();
        got.sort();
        assert_eq!(got.len(), paths.len(), "{v}");
        for (p, (_, status)) in paths.iter().zip(got) {
            made.push((8081, method.into(), p.to_string(), status));
        }
    };
    nghttp(&[], "GET", &["/a.txt", "/b.txt", "/gone"], &mut made);
    let d = body.to_str().unwrap();
    nghttp(&["-d", d], "POST", &["/echo", "/nope"], &mut made);
    // Upgrade: h2c through nghttpx, one request per connection.
    for path in ["/b.txt", "/absent"] {
        let url = format!("http://127.0.0.1:8082{path}");
        made.push((8082, "GET".into(), path.into(), curl(&["--http2", url.as_str()])));
    }
    let want_statuses: Vec<&str> = made.iter().map(|m| m.3.as_str()).collect();
    assert_eq!(want_statuses, ["200", "404", "201", "200", "200", "404", "201", "404", "200", "404"], "{made:?}");
    settle(&pcap);
    tcpdump.interrupt();

    let logs = dir.join("logs");
    common::read_pcap(&pcap, &logs, None, &["--quiet"]);
    let rows = common::read_log(&logs.join("http.log"));
    let mut got: Vec<(u16, String, String, String)> = Vec::new();
    let mut ready = 0;
    for r in &rows {
        assert_eq!((r["version"].as_str(), r["end_state"].as_str()), ("2", "complete"), "{r:?}");
        let port: u16 = r["id.resp_p"].parse().unwrap();
        if r["uri"] == "/ready" {
            assert_eq!(r["status_code"], "200", "{r:?}");
            ready += 1;
            continue;
        }
        if port == 8082 {
            // The upgraded request: stream 1, answered by 101 first.
            assert_eq!((r["stream_id"].as_str(), r["info_code"].as_str()), ("1", "101"), "{r:?}");
        }
        if r["method"] == "POST" || r["method"] == "PUT" {
            assert_eq!(r["request_body_len"], std::fs::metadata(&body).unwrap().len().to_string(), "{r:?}");
        }
        if r["uri"] == "/b.txt" {
            assert_eq!(r["response_body_len"], "20000", "{r:?}");
        }
        got.push((port, r["method"].clone(), r["uri"].clone(), r["status_code"].clone()));
    }
    assert!(ready >= 2, "{ready} readiness requests");
    got.sort();
    made.sort();
    assert_eq!(got, made);
    // A readiness probe that came before the server listened is a refused
    // connection (REJ) with nothing to parse; every other one is HTTP/2.
    let conns = common::read_log(&logs.join("conn.log"));
    assert!(conns.iter().filter(|c| c["conn_state"] != "REJ").all(|c| c["service"] == "http2"), "{conns:?}");
    assert!(conns.iter().any(|c| c["service"] == "http2"), "{conns:?}");
}
