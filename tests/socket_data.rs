//! `capture --socket-data` against real programs: plaintext HTTP between
//! nginx and curl and Python's `http.client` in a network namespace made
//! here. Two captures of that namespace's `lo` run at once, the packet
//! path's alone and one with `--socket-data`: http.log is the same in both,
//! field by field (times, uids and latencies aside), the second's from the
//! socket system calls (source=socket, with the client's and nginx's
//! processes) and without the packet path's copy of any transaction.
//! The MariaDB case is in tls_plaintext_db.rs (its server set-up).

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::live::{is_root, skip};
use common::lo::{have, wait_for, LoNs, Proc};
use common::live::count_before;
use common::socket_pair::{assert_same, stats, Pair};

const PORT: u16 = 8080;

struct Site {
    ns: LoNs,
    dir: PathBuf,
    _nginx: Proc,
}

/// nginx serving `/small`, `/big` (40,000 bytes, several writes) and
/// taking PUTs under `/up/` (WebDAV: it reads the whole body before it
/// answers), in the clear. (A server that answers before it has read a
/// request's body, as nginx's `return` does, makes the two views differ:
/// on the wire the answer comes before the body's last bytes, in the
/// client's system calls after them; README, "Inside TLS".)
fn site() -> Site {
    let dir = common::scratch("socket_data", "nginx");
    let ns = LoNs::new("sd");
    let www = dir.join("www");
    std::fs::create_dir_all(www.join("up")).unwrap();
    std::fs::write(www.join("small"), "hello over a socket\n").unwrap();
    std::fs::write(www.join("big"), vec![b'z'; 40_000]).unwrap();
    let d = dir.display();
    let http = format!(
        r#"
    access_log off;
    server {{
        listen 127.0.0.1:{PORT};
        root {d}/www;
        location /up/ {{ dav_methods PUT; }}
    }}
"#
    );
    std::fs::write(dir.join("nginx.conf"), common::nginx::conf(&dir, &http)).unwrap();
    let conf = dir.join("nginx.conf");
    let mut nginx = ns.spawn("nginx", &["nginx", "-c", conf.to_str().unwrap()], &dir.join("nginx.out"));
    wait_for("nginx", Duration::from_secs(10), || {
        assert!(nginx.alive(), "nginx exited: {}", std::fs::read_to_string(dir.join("nginx.out")).unwrap_or_default());
        ns.cmd(&["curl", "-sf", "-o", "/dev/null", &format!("http://127.0.0.1:{PORT}/small")]).status().is_ok_and(|s| s.success())
    });
    Site { ns, dir, _nginx: nginx }
}

const PY_CLIENT: &str = r#"
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
c.request("GET", "/big?from=python")
r = c.getresponse(); b = r.read()
assert r.status == 200 and len(b) == 40000
c.request("PUT", "/up/python", body=b"v" * 5000)
r = c.getresponse(); r.read()
assert r.status == 201, r.status
"#;

#[test]
fn http_from_the_socket_is_the_packet_paths_http_log_with_processes() {
    if !is_root() {
        skip("socket-data tests need root (eBPF, namespaces)");
        return;
    }
    for p in ["nginx", "curl", "python3"] {
        if !have(p) {
            skip(&format!("{p} is not installed"));
            return;
        }
    }
    let t0 = Instant::now();
    let site = site();
    let pair = Pair::start(&site.ns, &site.dir);
    let url = |p: &str| format!("http://127.0.0.1:{PORT}{p}");
    // Two requests on one connection, then a PUT on another.
    site.ns.run(&["curl", "-sf", "-o", "/dev/null", &url("/small"), "-o", "/dev/null", &url("/big")]);
    site.ns.run(&["curl", "-sf", "-o", "/dev/null", "-X", "PUT", "--data-binary", &"p".repeat(3000), &url("/up/curl")]);
    site.ns.run(&["python3", "-c", PY_CLIENT, &PORT.to_string()]);
    std::thread::sleep(Duration::from_millis(700));
    let (packet_logs, socket_logs) = (pair.packet_logs.clone(), pair.socket_logs.clone());
    let err = pair.stop();
    let rows = assert_same((&packet_logs, &socket_logs), "http.log", PORT, &["curl", "python3"], "nginx", &err);
    assert_eq!(rows.len(), 5, "{rows:#?}\n{err}");
    for (uri, status, request_body, body) in [
        ("/small", "200", "0", "20"),
        ("/big", "200", "0", "40000"),
        ("/up/curl", "201", "3000", "0"),
        ("/big?from=python", "200", "0", "40000"),
        ("/up/python", "201", "5000", "0"),
    ] {
        assert!(
            rows.iter().any(|r| r["uri"] == uri && r["status_code"] == status && r["request_body_len"] == request_body && r["response_body_len"] == body),
            "{uri} {status} {request_body} {body}: {rows:#?}"
        );
    }
    let s = stats(&err);
    // Every transaction the socket capture's packet path made was left for
    // the socket's (one source per connection); none was let go undecided.
    assert_eq!(count_before(s, " packet-path transactions left for the socket's"), 5, "{s}");
    assert_eq!(count_before(s, " ring records lost"), 0, "{s}");
    eprintln!("{s}\nnginx: 5 records equal from packets and from the socket; {:.1} s", t0.elapsed().as_secs_f64());
    drop(site.dir);
}

/// A bad limit names the option and the reason.
#[test]
fn a_bad_socket_data_limit_is_refused_naming_the_option() {
    let out = Command::new(common::live::BIN).args(["capture", "-i", "lo", "--socket-data", "a-very-long-process-name"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--socket-data") && err.contains("15 bytes"), "{err}");
}
