//! HTTP/2 made here, checked against what the clients saw: nghttpd (h2c,
//! prior knowledge) in a network namespace, `nghttp` with several
//! concurrent streams (one of them a 404), `h2load` with many streams on a
//! few connections and `curl --http2-prior-knowledge` (one request per
//! connection: curl 7.88 drops a second one); tcpdump captures the
//! loopback, `wirelog read` makes http.log, and every request the clients
//! made is one record with the status they got.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::lo::{have, settle, wait_for, LoNs};

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn nghttpd_h2load_curl_streams_all_found() {
    if !(have("nghttpd") && have("nghttp") && have("h2load") && have("curl") && have("tcpdump") && common::live::is_root()) {
        common::live::skip("needs root, nghttp2-server, nghttp2-client, curl and tcpdump");
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("http2-live-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let www = dir.join("www");
    std::fs::create_dir_all(&www).unwrap();
    std::fs::write(www.join("a.txt"), "a".repeat(512)).unwrap();
    std::fs::write(www.join("b.txt"), "b".repeat(20_000)).unwrap();
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
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog")).args(["read", "--quiet", "--no-store", "--logs"]).arg(&logs).arg(&pcap).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
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
    let conns = common::read_log(&logs.join("conn.log"));
    assert!(conns.iter().all(|c| c["service"] == "http2"), "{conns:?}");
}
