//! `wirelog serve`'s API against `wirelog query` on stores built by `wirelog
//! read` from real captures: the demo capture (samples/sample.pcap.gz:
//! HTTP, DNS, MySQL over loopback) plus Packetbeat's pgsql_extended_query.pcap
//! and redis_one_transaction.pcap (../shared/testdata/packetbeat), so every kind has rows.
//! The same question asked both ways must give the same rows; bad parameters
//! give 400 naming the parameter; the token is required off loopback.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::serve::{enc, get, request, start, store};
use serde_json::Value;

fn captures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let pb = root.join("../shared/testdata/packetbeat/pcaps");
    vec![
        root.join("samples/sample.pcap.gz"),
        pb.join("pgsql_extended_query.pcap"),
        pb.join("redis_one_transaction.pcap"),
    ]
}

fn demo_store(tag: &str) -> PathBuf {
    let c = captures();
    let refs: Vec<&Path> = c.iter().map(|p| p.as_path()).collect();
    store(tag, &refs)
}

fn wirelog_json(store: &Path, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .arg("query")
        .args(args)
        .arg("--store")
        .arg(store)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "query {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn api(addr: std::net::SocketAddr, path: &str) -> Value {
    let (status, body) = get(addr, path);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

const SUMS: &[&str] = &["conns", "orig_pkts", "resp_pkts", "pkts", "pkts_out", "pkts_in", "orig_bytes", "resp_bytes", "bytes_out", "bytes_in", "bytes", "count", "errors", "request_bytes", "response_bytes"];

#[test]
fn api_answers_equal_wirelog_query() {
    let st = demo_store("api");
    let s = st.to_str().unwrap();
    let srv = start(&["serve", "--store", s, "--listen", "127.0.0.1:0"]);

    // (kind, where, by, sort, top, every, from, to)
    type Question<'a> = (&'a str, &'a str, &'a str, &'a str, &'a str, &'a str, &'a str, &'a str);
    let questions: &[Question] = &[
        ("flows", "", "", "", "", "", "", ""),
        ("conns", "", "", "", "0", "", "", ""),
        ("conns", "proto = tcp", "service", "conns", "", "", "", ""),
        ("conns", "", "resp_p", "bytes", "2", "", "", ""),
        ("conns", "", "", "", "", "1s", "", ""),
        ("conns", "", "service", "", "3", "2s", "", ""),
        ("http", "status_code >= 400", "uri", "", "", "", "", ""),
        ("http", "", "host,uri", "p99", "3", "", "", ""),
        ("mysql", "", "fingerprint", "count", "0", "", "", ""),
        ("dns", "", "", "", "", "", "", ""),
        ("dns", "rcode_name != NOERROR", "query,rcode_name", "", "", "", "", ""),
        ("pgsql", "", "", "", "", "", "", ""),
        ("redis", "", "command", "", "", "", "", ""),
        ("conns", "", "orig_h", "", "", "", "2026-11-22T08:28:50Z", "2026-11-22T08:29:00Z"),
        ("http", "", "uri", "", "", "500ms", "2026-11-22T08:28:48Z", "2026-11-22T08:28:50Z"),
    ];
    let mut compared_rows = 0;
    for &(kind, w, by, sort, top, every, from, to) in questions {
        let mut args: Vec<&str> = vec![kind];
        let mut path = format!("/api/query?kind={kind}");
        for (flag, name, v) in [
            ("--where", "where", w),
            ("--by", "by", by),
            ("--sort", "sort", sort),
            ("--top", "top", top),
            ("--every", "every", every),
            ("--from", "from", from),
            ("--to", "to", to),
        ] {
            if !v.is_empty() {
                args.push(flag);
                args.push(v);
                path.push_str(&format!("&{name}={}", enc(v)));
            }
        }
        let want = wirelog_json(&st, &args);
        let got = api(srv.addr, &path);
        assert_eq!(got["rows"], want, "{path} vs wirelog query {args:?}");
        compared_rows += want.as_array().unwrap().len();
        // The columns name every field of every row, in order.
        let cols: Vec<String> = got["columns"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_string()).collect();
        for r in got["rows"].as_array().unwrap() {
            let keys: Vec<String> = r.as_object().unwrap().keys().cloned().collect();
            let mut sorted_cols = cols.clone();
            sorted_cols.sort();
            let mut sorted_keys = keys;
            sorted_keys.sort();
            assert_eq!(sorted_keys, sorted_cols, "{path}");
        }
        // total = every group (wirelog query --top 0, no series); other =
        // total - the rows shown.
        if every.is_empty() {
            let mut all_args = args.clone();
            if let Some(i) = all_args.iter().position(|a| *a == "--top") {
                all_args.remove(i + 1);
                all_args.remove(i);
            }
            all_args.extend(["--top", "0"]);
            let all = wirelog_json(&st, &all_args);
            let all = all.as_array().unwrap();
            assert_eq!(got["groups"].as_u64().unwrap() as usize, all.len(), "{path}");
            for k in SUMS {
                if got["total"].get(*k).is_none() {
                    continue;
                }
                let total: u64 = all.iter().map(|r| r[*k].as_u64().unwrap()).sum();
                assert_eq!(got["total"][*k].as_u64(), Some(total), "{path} total {k}");
                let shown: u64 = got["rows"].as_array().unwrap().iter().map(|r| r[*k].as_u64().unwrap()).sum();
                if all.len() > got["rows"].as_array().unwrap().len() {
                    assert_eq!(got["other"][*k].as_u64(), Some(total - shown), "{path} other {k}");
                } else {
                    assert!(got["other"].is_null(), "{path}");
                }
            }
        }
    }
    assert!(compared_rows > 60, "only {compared_rows} rows compared");

    // Drill-down: the records of a kind are the rows of `wirelog query`
    // grouped by every field that tells records apart, by time.
    let http_all = wirelog_json(&st, &["http", "--top", "0"]);
    let n_http: u64 = http_all.as_array().unwrap().iter().map(|r| r["count"].as_u64().unwrap()).sum();
    let recs = api(srv.addr, "/api/records?kind=http&limit=1000");
    let rows = recs["rows"].as_array().unwrap();
    assert_eq!(rows.len() as u64, n_http, "one row per HTTP transaction");
    assert!(rows.iter().all(|r| r["count"] == 1));
    assert!(rows.windows(2).all(|w| w[0]["ts"].as_str() >= w[1]["ts"].as_str()), "records come newest first");
    let limited = api(srv.addr, "/api/records?kind=conns&limit=3");
    assert_eq!(limited["rows"].as_array().unwrap().len(), 3);
    assert_eq!(limited["truncated"], true);
    // Pages: consecutive offsets cover every record once, in the order of
    // the whole list, for the default order and for any column either way.
    // With a range, a page in time order is read from the range's end (or
    // start) outwards: the same rows, and the range's count.
    let unranged = api(srv.addr, "/api/records?kind=conns&limit=10000");
    let range = "&from=2000-01-01&to=2100-01-01";
    for (sort, want) in [("", unranged.clone()), ("&sort=ts:asc", api(srv.addr, "/api/records?kind=conns&limit=10000&sort=ts:asc"))] {
        let got = api(srv.addr, &format!("/api/records?kind=conns&limit=10000{sort}{range}"));
        assert_eq!(got["rows"], want["rows"], "{sort} with a range");
        assert_eq!(got["groups"], want["groups"]);
        assert_eq!(got["total"]["bytes"], want["total"]["bytes"]);
        let page = api(srv.addr, &format!("/api/records?kind=conns&limit=5&offset=5{sort}{range}"));
        assert_eq!(page["rows"].as_array().unwrap()[..], want["rows"].as_array().unwrap()[5..10], "{sort} page 2 with a range");
        assert_eq!(page["groups"], want["groups"]);
        assert_eq!(page["truncated"], true);
    }
    for sort in ["", "&sort=ts:asc", "&sort=bytes", "&sort=duration:asc", "&sort=resp_p:desc", range, &format!("&sort=ts:asc{range}")[..]] {
        let all = api(srv.addr, &format!("/api/records?kind=conns&limit=10000{sort}"));
        let all = all["rows"].as_array().unwrap().clone();
        assert!(all.len() > 20, "{sort}: {} conns", all.len());
        let mut paged = Vec::new();
        for page in 0.. {
            let got = api(srv.addr, &format!("/api/records?kind=conns&limit=7&offset={}{sort}", page * 7));
            assert_eq!(got["offset"], page * 7);
            let rows = got["rows"].as_array().unwrap();
            paged.extend(rows.iter().cloned());
            assert_eq!(got["truncated"], paged.len() < all.len(), "{sort} page {page}");
            if rows.is_empty() || paged.len() >= all.len() {
                break;
            }
        }
        let uids = |v: &[serde_json::Value]| v.iter().map(|r| r["uid"].as_str().unwrap().to_string()).collect::<Vec<_>>();
        assert_eq!(uids(&paged), uids(&all), "{sort}: the pages are the whole list in order");
    }
    let asc = api(srv.addr, "/api/records?kind=conns&limit=10000&sort=duration:asc");
    let d: Vec<f64> = asc["rows"].as_array().unwrap().iter().filter_map(|r| r["duration"].as_f64()).collect();
    assert!(d.windows(2).all(|w| w[0] <= w[1]), "sorted by duration: {d:?}");

    // Sequence: a keep-alive HTTP connection's transactions, in order, equal
    // `wirelog query http --where 'uid = X'` per record.
    let mut per_uid: BTreeMap<String, usize> = BTreeMap::new();
    for r in rows {
        *per_uid.entry(r["uid"].as_str().unwrap().to_string()).or_default() += 1;
    }
    let (uid, n) = per_uid.iter().max_by_key(|(_, n)| **n).unwrap();
    assert!(*n >= 4, "the demo has a connection with 4 requests");
    let seq = api(srv.addr, &format!("/api/sequence?uid={uid}"));
    assert_eq!(seq["conn"]["uid"], uid.as_str());
    let calls = seq["calls"].as_array().unwrap();
    assert_eq!(calls.len(), *n);
    let want = wirelog_json(&st, &["http", "--where", &format!("uid = {uid}"), "--by", "ts,uri,status_code,latency", "--sort", "ts", "--top", "0"]);
    for (c, w) in calls.iter().zip(want.as_array().unwrap()) {
        assert_eq!(c["kind"], "http");
        for k in ["ts", "uri", "status_code", "latency"] {
            assert_eq!(c[k], w[k], "sequence {uid} field {k}");
        }
    }

    // Service map: HTTP edges carry every HTTP transaction; DNS and MySQL too.
    let map = api(srv.addr, "/api/map");
    for kind in ["http", "dns", "mysql", "pgsql", "redis"] {
        let want: u64 = wirelog_json(&st, &[kind, "--top", "0"]).as_array().unwrap().iter().map(|r| r["count"].as_u64().unwrap()).sum();
        let got: u64 = map["edges"].as_array().unwrap().iter().filter(|e| e["protocol"] == kind).map(|e| e["count"].as_u64().unwrap()).sum();
        assert_eq!(got, want, "map edges of {kind}");
        assert!(want > 0, "{kind} has transactions in the test store");
    }
    for e in map["edges"].as_array().unwrap() {
        let ids: Vec<&str> = map["nodes"].as_array().unwrap().iter().map(|n| n["id"].as_str().unwrap()).collect();
        assert!(ids.contains(&e["from"].as_str().unwrap()) && ids.contains(&e["to"].as_str().unwrap()));
    }

    // Extent and metrics: rows per kind from the footers equal the records.
    let ext = api(srv.addr, "/api/extent");
    let (status, metrics) = get(srv.addr, "/metrics");
    assert_eq!(status, 200);
    for e in ext.as_array().unwrap() {
        let kind = e["kind"].as_str().unwrap();
        let rows = e["rows"].as_u64().unwrap();
        let want: u64 = match kind {
            "flows" => wirelog_json(&st, &["flows", "--by", "bucket,client,server,server_port,proto", "--top", "0"]).as_array().unwrap().len() as u64,
            "conns" => wirelog_json(&st, &["conns", "--top", "0"]).as_array().unwrap().iter().map(|r| r["conns"].as_u64().unwrap()).sum(),
            // The loss table is summed, not listed, by `query loss`: its rows as DuckDB counts them.
            "loss" => {
                let glob = st.join("loss/*/*/*.parquet");
                let py = format!("import duckdb\nprint(duckdb.connect().execute(\"select count(*) from read_parquet('{}')\").fetchone()[0])", glob.display());
                let out = std::process::Command::new("python3").arg("-c").arg(&py).output().unwrap();
                assert!(out.status.success(), "duckdb: {}", String::from_utf8_lossy(&out.stderr));
                String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
            }
            k => wirelog_json(&st, &[k, "--top", "0"]).as_array().unwrap().iter().map(|r| r["count"].as_u64().unwrap()).sum(),
        };
        assert_eq!(rows, want, "extent rows of {kind}");
        let line = format!("wirelog_store_rows{{kind=\"{kind}\"}} {rows}");
        assert!(metrics.lines().any(|l| l == line), "metrics lack {line}:\n{metrics}");
    }
    assert!(metrics.contains("wirelog_build_info{version=\""));
    assert!(metrics.lines().any(|l| l.starts_with("process_cpu_seconds_total ")));
    assert!(metrics.lines().any(|l| l.starts_with("process_resident_memory_bytes ")));

    let health = api(srv.addr, "/api/health");
    assert!(health["now"]["rss_bytes"].as_u64().unwrap() > 1 << 20);
    assert!(health["live"].is_null());

    // The UI is served from the binary.
    let (status, html) = get(srv.addr, "/");
    assert_eq!(status, 200);
    assert!(html.contains("<script type=\"module\" src=\"/ui/app.js\">"), "{html}");
    for f in ["app.js", "charts.js", "style.css"] {
        let (status, body) = get(srv.addr, &format!("/ui/{f}"));
        assert_eq!(status, 200, "{f}");
        assert!(body.len() > 500, "{f} is empty");
    }

    // Accept-Encoding: gzip is honoured: the same rows, compressed.
    let path = "/api/records?kind=conns&limit=1000";
    let (status, head, gz) = common::serve::request_raw(srv.addr, "GET", path, &["Accept-Encoding: gzip, deflate"]);
    assert_eq!(status, 200);
    assert!(head.to_ascii_lowercase().contains("content-encoding: gzip"), "{head}");
    assert!(gz.starts_with(&[0x1f, 0x8b]), "not gzip");
    let mut gunzip = std::process::Command::new("gzip")
        .arg("-dc")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("gzip");
    std::io::Write::write_all(&mut gunzip.stdin.take().unwrap(), &gz).unwrap();
    let out = gunzip.wait_with_output().unwrap();
    assert!(out.status.success());
    let unzipped: Value = serde_json::from_slice(&out.stdout).unwrap();
    let plain = api(srv.addr, path);
    assert_eq!(unzipped["rows"], plain["rows"]);
    assert!(gz.len() * 3 < out.stdout.len(), "{} bytes gzipped from {}", gz.len(), out.stdout.len());
    let (_, head, _) = common::serve::request_raw(srv.addr, "GET", path, &[]);
    assert!(!head.to_ascii_lowercase().contains("content-encoding"), "{head}");
}

/// The server keeps the columns it decoded (`store::ColumnCache`): its
/// answers still equal `wirelog query`'s (no cache) when asked again, after
/// a capture was read into the store while it served, and after retention
/// deleted that capture's hour.
#[test]
fn cached_answers_follow_the_store() {
    let c = captures();
    let st = store("cache", &[c[0].as_path()]);
    let s = st.to_str().unwrap();
    let srv = start(&["serve", "--store", s, "--listen", "127.0.0.1:0"]);
    let questions: &[&[&str]] = &[
        &["conns"],
        &["conns", "--by", "service,conn_state", "--top", "0"],
        &["conns", "--every", "1s"],
        &["conns", "--by", "orig_h", "--from", "2026-11-22T08:28:50Z", "--to", "2026-11-22T08:29:00Z"],
        &["http", "--by", "uri", "--sort", "p99"],
        &["dns", "--by", "rcode_name"],
        &["pgsql", "--by", "server"],
    ];
    let ask = |args: &[&str]| {
        let mut path = format!("/api/query?kind={}", args[0]);
        for kv in args[1..].chunks(2) {
            path.push_str(&format!("&{}={}", kv[0].trim_start_matches("--"), enc(kv[1])));
        }
        path
    };
    // The API's count of connections and of PostgreSQL transactions.
    let check = |when: &str| -> (u64, u64) {
        for q in questions {
            let want = wirelog_json(&st, q);
            for round in ["cold", "warm"] {
                let got = api(srv.addr, &ask(q));
                assert_eq!(got["rows"], want, "{when}, {round}: {q:?}");
            }
        }
        let total = |kind: &str, k: &str| api(srv.addr, &format!("/api/query?kind={kind}"))["total"][k].as_u64().unwrap_or(0);
        (total("conns", "conns"), total("pgsql", "count"))
    };
    let demo = check("the demo capture");
    // A capture read into the store while it serves: new files, new hours.
    let read = |extra: &[&str], pcap: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
            .args(["read", "-C", "--quiet", "--store", s])
            .args(extra)
            .arg(pcap)
            .output()
            .unwrap();
        assert!(out.status.success(), "wirelog read: {}", String::from_utf8_lossy(&out.stderr));
    };
    read(&[], &c[1]);
    let more = check("a capture read since");
    assert!(more.0 > demo.0 && more.1 > 0, "{more:?} after adding a capture, {demo:?} before");
    // Retention (30 days), run by the next read (Redis, the same hour of
    // 2015), deletes the file of the capture read above (PostgreSQL), not
    // the demo's.
    read(&["--retain", "30d"], &c[2]);
    let after = check("retention deleted an old hour");
    assert_eq!(after.1, 0, "the PostgreSQL transactions went with their file ({after:?}, {more:?} before)");
    assert!(after.0 > demo.0, "the demo's and Redis' connections are left ({after:?}, {demo:?} of the demo)");
}

#[test]
fn bad_parameters_are_400_naming_the_parameter() {
    let st = demo_store("bad");
    let srv = start(&["serve", "--store", st.to_str().unwrap(), "--listen", "127.0.0.1:0", "--max-rows", "50"]);
    let cases: &[(&str, &str)] = &[
        ("/api/query", "kind"),
        ("/api/query?kind=packets", "kind"),
        ("/api/query?kind=conns&where=dport%20%3D", "where"),
        ("/api/query?kind=conns&where=nosuchfield%20%3D%201", "where"),
        ("/api/query?kind=conns&where=dport%20%3D%20http", "where"),
        ("/api/query?kind=conns&by=nosuch", "by"),
        ("/api/query?kind=conns&sort=nosuch", "sort"),
        ("/api/query?kind=conns&top=-1", "top"),
        ("/api/query?kind=conns&top=51", "top"),
        ("/api/query?kind=conns&every=often", "every"),
        ("/api/query?kind=conns&every=1ms&from=2026-01-01&to=2026-02-01", "every"),
        ("/api/query?kind=conns&from=yesterday", "from"),
        ("/api/query?kind=conns&from=2026-02-01&to=2026-01-01", "from"),
        ("/api/query?kind=conns&kind=flows", "kind"),
        ("/api/query?kind=conns&limit=3", "limit"),
        ("/api/records?kind=http&limit=x", "limit"),
        ("/api/records?kind=http&where=(", "where"),
        ("/api/records?kind=http&offset=x", "offset"),
        ("/api/records?kind=http&sort=nosuch", "sort"),
        ("/api/sequence", "uid"),
        ("/api/sequence?uid=C1%22%20or%20true", "uid"),
        ("/api/map?top=abc", "top"),
    ];
    for (path, param) in cases {
        let (status, body) = get(srv.addr, path);
        assert_eq!(status, 400, "{path}: {body}");
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
        assert_eq!(v["parameter"], *param, "{path}: {body}");
        assert!(v["error"].as_str().unwrap().contains(&format!("'{param}'")), "{path}: {body}");
    }
    // top=0 is "all", capped at --max-rows; a limit within it is fine.
    let (status, _) = get(srv.addr, "/api/query?kind=conns&top=0");
    assert_eq!(status, 200);
    assert_eq!(get(srv.addr, "/api/nothing").0, 404);
    // No write endpoints, no CORS.
    let (status, _) = request(srv.addr, "POST", "/api/query?kind=conns", &["Content-Length: 0"]);
    assert_eq!(status, 405);
    let (status, _) = request(srv.addr, "DELETE", "/", &[]);
    assert_eq!(status, 405);
    let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
    use std::io::{Read, Write};
    write!(s, "OPTIONS /api/query HTTP/1.1\r\nHost: x\r\nOrigin: http://evil.example\r\nAccess-Control-Request-Method: GET\r\nConnection: close\r\n\r\n").unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    assert!(!raw.to_ascii_lowercase().contains("access-control-allow"), "{raw}");
    // The server still answers after all that.
    assert_eq!(get(srv.addr, "/api/query?kind=dns").0, 200);
}

#[test]
fn token_required_off_loopback_and_checked_on_every_request() {
    let st = demo_store("token");
    let s = st.to_str().unwrap();
    // Not loopback, no token: refused before listening.
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["serve", "--store", s, "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--listen 0.0.0.0:0") && err.contains("--token"), "{err}");
    // A short token is refused too.
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["serve", "--store", s, "--listen", "0.0.0.0:0", "--token", "short"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));

    let token = "t0ken-for-the-serve-test-0123456789";
    let file = st.parent().unwrap().join("token");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    let srv = start(&["serve", "--store", s, "--listen", "0.0.0.0:0", "--token-file", file.to_str().unwrap()]);
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], srv.addr.port()));
    for path in ["/", "/ui/app.js", "/api/query?kind=conns", "/api/health", "/metrics"] {
        assert_eq!(get(addr, path).0, 401, "{path} without a token");
        let wrong = format!("Authorization: Bearer {}x", &token[..token.len() - 1]);
        assert_eq!(request(addr, "GET", path, &[&wrong]).0, 401, "{path} with a wrong token");
        let right = format!("Authorization: Bearer {token}");
        assert_eq!(request(addr, "GET", path, &[&right]).0, 200, "{path} with the token");
        let sep = if path.contains('?') { '&' } else { '?' };
        assert_eq!(get(addr, &format!("{path}{sep}token={token}")).0, 200, "{path}?token=");
        assert_eq!(get(addr, &format!("{path}{sep}token=nope")).0, 401, "{path}?token=nope");
    }
}

/// `serve --pcap-dir`: `/api/pcap?uid=` gives the connection's packets,
/// byte for byte what `wirelog pcap --where 'uid = ...'` extracts (itself
/// checked against tcpdump in tests/pcap_keep.rs); the sequence view links
/// to it; unknown and bad uids, and a server keeping no packets, say why.
#[test]
fn pcap_download_equals_wirelog_pcap() {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-pcap");
    let _ = std::fs::remove_dir_all(&base);
    let (st, logs, pd) = (base.join("store"), base.join("logs"), base.join("pcap"));
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/sample.pcap.gz");
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["read", "-C", "--quiet", "--store"])
        .arg(&st)
        .arg("--logs")
        .arg(&logs)
        .arg("--pcap-dir")
        .arg(&pd)
        .arg(&sample)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let conns = common::read_log(&logs.join("conn.log"));
    // Connections of each protocol, the first few of each.
    let mut uids: Vec<String> = Vec::new();
    for proto in ["tcp", "udp"] {
        uids.extend(conns.iter().filter(|c| c["proto"] == proto).take(3).map(|c| c["uid"].clone()));
    }
    assert!(uids.len() >= 4, "{uids:?}");

    let srv = start(&["serve", "--store", st.to_str().unwrap(), "--pcap-dir", pd.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    for uid in &uids {
        let (status, head, body) = common::serve::request_raw(srv.addr, "GET", &format!("/api/pcap?uid={uid}"), &[]);
        assert_eq!(status, 200, "{uid}: {head}");
        let h = head.to_ascii_lowercase();
        assert!(h.contains("content-type: application/vnd.tcpdump.pcap"), "{head}");
        assert!(h.contains(&format!("content-disposition: attachment; filename=\"wirelog-{}.pcap\"", uid.to_ascii_lowercase())), "{head}");
        assert!(h.contains(&format!("content-length: {}", body.len())), "{head}");
        let cli = Command::new(env!("CARGO_BIN_EXE_wirelog"))
            .args(["pcap", "--where", &format!("uid = \"{uid}\""), "--store", st.to_str().unwrap(), "--pcap-dir", pd.to_str().unwrap(), "-o", "-"])
            .output()
            .unwrap();
        assert!(cli.status.success(), "{}", String::from_utf8_lossy(&cli.stderr));
        assert!(body.len() > 24 + 16, "{uid}: no packet");
        assert_eq!(body, cli.stdout, "{uid}: the download differs from `wirelog pcap`");
        let seq = api(srv.addr, &format!("/api/sequence?uid={uid}"));
        assert_eq!(seq["pcap"], format!("/api/pcap?uid={uid}"), "{seq}");
    }
    let (status, body) = get(srv.addr, "/api/pcap?uid=Cnosuchconnection1");
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("no packets of connection Cnosuchconnection1"), "{body}");
    let (status, body) = get(srv.addr, "/api/pcap?uid=a-b");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("\"parameter\":\"uid\""), "{body}");
    drop(srv);

    let srv = start(&["serve", "--store", st.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    let (status, body) = get(srv.addr, &format!("/api/pcap?uid={}", uids[0]));
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("keeps no packets"), "{body}");
    let seq = api(srv.addr, &format!("/api/sequence?uid={}", uids[0]));
    assert!(seq["pcap"].is_null(), "{seq}");
}
