//! `wirelog capture` of real servers and clients: nginx + wrk/curl, MariaDB +
//! sysbench, dnsmasq + dig. Each test creates two network namespaces, a
//! server side and a client side joined by a veth pair, starts the server
//! in one and `wirelog capture` on the veth end of the other before any
//! client connects, runs the clients, and compares the logs with what the
//! server itself recorded (nginx's access log and stub_status counters,
//! MariaDB's status counters, dnsmasq's statistics) and what the clients
//! printed (dig). The capture starts before the first connection and stops
//! after the last one has ended, so nothing may be missing: the comparisons
//! are exact.
//!
//! Needs root, `ip netns` and the servers and clients (scripts/test.sh
//! installs them). Without them the tests are skipped with a message, unless
//! WIRELOG_REQUIRE_ALL_TESTS=1, where a missing requirement fails the test.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::live::{is_root, last_stats, sh, skip, LiveCapture, BIN};
use common::lo::{have, Proc};
use common::read_log;
/// Addresses on the veth pair (each test has its own namespaces, so they
/// never clash).
const SERVER_IP: &str = "192.168.77.1";
const CLIENT_IP: &str = "192.168.77.2";

type Row = HashMap<String, String>;

/// Root, `ip netns` and the given programs, or a skip (failure under
/// WIRELOG_REQUIRE_ALL_TESTS=1).
fn requirements(progs: &[&str]) -> bool {
    if !is_root() {
        skip("live server tests need root (network namespaces)");
        return false;
    }
    if !Command::new("ip").args(["netns", "list"]).output().is_ok_and(|o| o.status.success()) {
        skip("`ip netns` is not available");
        return false;
    }
    let missing: Vec<&str> = progs.iter().copied().filter(|p| !have(p)).collect();
    if !missing.is_empty() {
        skip(&format!("not installed: {} (scripts/test.sh installs them)", missing.join(", ")));
        return false;
    }
    true
}

/// Server namespace `s` and client namespace `c` joined by a veth pair;
/// deleted on drop.
struct Netns {
    s: String,
    c: String,
    vc: String,
}

impl Netns {
    fn new() -> Netns {
        static N: AtomicU32 = AtomicU32::new(0);
        let id = format!("{}{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let ns = Netns { s: format!("wlss{id}"), c: format!("wlsc{id}"), vc: format!("wsc{id}") };
        let vs = format!("wss{id}");
        // `ns` exists already: a failure from here on still removes what was made.
        sh(&["ip", "netns", "add", &ns.s]);
        sh(&["ip", "netns", "add", &ns.c]);
        sh(&["ip", "link", "add", &vs, "netns", &ns.s, "type", "veth", "peer", "name", &ns.vc, "netns", &ns.c]);
        for (n, v, ip) in [(&ns.s, &vs, SERVER_IP), (&ns.c, &ns.vc, CLIENT_IP)] {
            // IPv4 only on the pair: no IPv6 neighbour or multicast-listener
            // chatter in the capture.
            sh(&["ip", "netns", "exec", n, "sysctl", "-q", "-w", &format!("net.ipv6.conf.{v}.disable_ipv6=1")]);
            sh(&["ip", "-n", n, "addr", "add", &format!("{ip}/24"), "dev", v]);
            sh(&["ip", "-n", n, "link", "set", v, "up"]);
            sh(&["ip", "-n", n, "link", "set", "lo", "up"]);
        }
        ns
    }

    fn cmd(ns: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]).args(args);
        c
    }

    /// Runs a program in namespace `ns` to its end; it must succeed.
    fn run(ns: &str, args: &[&str]) -> Output {
        let out = Self::cmd(ns, args).output().unwrap_or_else(|e| panic!("{args:?}: {e}"));
        assert!(
            out.status.success(),
            "{args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        out
    }

    /// Starts a server in the server namespace, its output to `log`.
    fn server(&self, name: &'static str, args: &[&str], log: &Path) -> Proc {
        let f = std::fs::File::create(log).unwrap();
        let child = Self::cmd(&self.s, args)
            .stdin(Stdio::null())
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        Proc { name, child }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end inside it (and its peer).
        let _ = Command::new("ip").args(["netns", "del", &self.s]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.c]).status();
    }
}

/// A running `wirelog capture` on the client end of the veth pair.
struct Capture {
    cap: LiveCapture,
    logs: PathBuf,
    started: Instant,
}

impl Capture {
    /// Starts capturing into `dir`/logs and `dir`/store; returns once its
    /// sockets are open.
    fn start(ns: &Netns, dir: &Path) -> Capture {
        let (logs, store) = (dir.join("logs"), dir.join("store"));
        let _ = std::fs::remove_dir_all(&logs);
        let _ = std::fs::remove_dir_all(&store);
        let args = ["--logs".as_ref(), logs.as_os_str(), "--store".as_ref(), store.as_os_str()];
        Capture { cap: LiveCapture::start(&ns.c, &ns.vc, &args), logs, started: Instant::now() }
    }

    /// SIGINT; the exit status must be 0 and the kernel must have dropped
    /// nothing (a drop would explain a difference without being one).
    /// Returns the logs' directory.
    fn stop(self) -> PathBuf {
        let err = self.cap.stop();
        let stats = last_stats(&err);
        eprintln!("captured for {:.1} s: {stats}", self.started.elapsed().as_secs_f64());
        assert!(stats.contains(" 0 dropped"), "kernel drops: {stats}");
        // ARP on the pair is not IP; every IP packet of real servers decodes.
        assert!(stats.ends_with(" 0 packets not decoded"), "{stats}");
        self.logs
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wirelog-servers-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Rows of a log, none if the log was not written.
fn rows(logs: &Path, log: &str) -> Vec<Row> {
    let p = logs.join(log);
    if p.exists() {
        read_log(&p)
    } else {
        Vec::new()
    }
}

fn num(r: &Row, k: &str) -> u64 {
    r.get(k).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("no number {k} in {r:?}"))
}

/// Polls `f` every 100 ms for at most `limit`.
fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "{what}: not ready after {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Deterministic pseudo-random numbers (no dependency, same mix every run).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

// ---------------------------------------------------------------- nginx --

const HTTP_PORT: &str = "8080";

/// nginx's stub_status counters (accepted connections, requests), asked on
/// the server's loopback: never on the captured link.
fn nginx_counters(ns: &Netns) -> (u64, u64) {
    let out = Netns::run(&ns.s, &["curl", "-s", "--max-time", "5", "http://127.0.0.1:8081/status"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // Active connections: 1 \n server accepts handled requests \n 5 5 7 \n ...
    let n: Vec<u64> = text
        .lines()
        .nth(2)
        .unwrap_or_else(|| panic!("stub_status: {text}"))
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    (n[0], n[2])
}

/// The wrk request mix: static files of 600 B to 256 KiB (text gzipped, so
/// chunked), a 404 and a POST; each connection thinks DELAY_MS on average
/// between requests and stops sending after SEND_S seconds, so that when wrk
/// exits (which aborts whatever it has in flight) no request is under way.
const WRK_LUA: &str = r#"
local paths = {
  {25, "GET", "/index.html"}, {20, "GET", "/static/1k.html"}, {15, "GET", "/static/4k.css"},
  {10, "GET", "/static/16k.js"}, {8, "GET", "/static/64k.png"}, {2, "GET", "/static/256k.jpg"},
  {10, "GET", "/missing/page.html"}, {10, "POST", "/api/items"},
}
local total = 0
for _, p in ipairs(paths) do total = total + p[1] end
local mean = tonumber(os.getenv("DELAY_MS"))
local quiet_from = os.time() + tonumber(os.getenv("SEND_S"))
local body = string.rep("x", 300)
request = function()
  local r = math.random(total)
  for _, p in ipairs(paths) do
    r = r - p[1]
    if r <= 0 then
      -- wrk.format() replaces wrk.headers by the table given: copy -H's in.
      local hdr = {["User-Agent"] = "wrk-wirelog-test", ["Accept-Encoding"] = "gzip"}
      for k, v in pairs(wrk.headers) do hdr[k] = v end
      if p[2] == "POST" then
        hdr["Content-Type"] = "application/x-www-form-urlencoded"
        return wrk.format("POST", p[3], hdr, "data=" .. body)
      end
      return wrk.format(p[2], p[3], hdr)
    end
  end
end
delay = function()
  if os.time() >= quiet_from then return 3600000 end
  return math.random(math.floor(mean / 2), math.floor(mean * 3 / 2))
end
"#;

fn write_site(www: &Path) {
    let mut rnd = Lcg(42);
    let words = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit"];
    let mut text = |n: usize| {
        let mut s = String::new();
        while s.len() < n {
            s.push_str(words[rnd.below(words.len() as u64) as usize]);
            s.push(' ');
        }
        s.truncate(n);
        s
    };
    std::fs::create_dir_all(www.join("static")).unwrap();
    std::fs::write(www.join("index.html"), format!("<html><body>{}</body></html>\n", text(600))).unwrap();
    for (name, n) in [("1k.html", 1024), ("4k.css", 4096), ("16k.js", 16384)] {
        std::fs::write(www.join("static").join(name), text(n)).unwrap();
    }
    let mut rnd = Lcg(7);
    for (name, n) in [("64k.png", 65536), ("256k.jpg", 262144)] {
        let bytes: Vec<u8> = (0..n).map(|_| rnd.below(256) as u8).collect();
        std::fs::write(www.join("static").join(name), bytes).unwrap();
    }
}

fn nginx_conf(dir: &Path, www: &Path) -> String {
    let d = dir.display();
    let http = format!(
        r#"
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    log_format probe '$msec $remote_port "$request" $status $bytes_sent $request_length $connection $content_length';
    sendfile on;
    keepalive_timeout 65;
    keepalive_requests 100000;
    gzip on; gzip_min_length 256; gzip_types text/css application/javascript text/plain;
    server {{
        listen {SERVER_IP}:{HTTP_PORT};
        access_log {d}/access.log probe;
        root {};
        location /api/ {{ default_type application/json; return 200 '{{"ok":true,"id":42}}\n'; }}
    }}
    server {{
        listen 127.0.0.1:8081;
        access_log off;
        location = /status {{ stub_status; }}
    }}"#,
        www.display()
    );
    common::nginx::conf(dir, &http)
}

/// One line of nginx's access log.
struct Access {
    port: u64,
    method: String,
    uri: String,
    status: u64,
    bytes_sent: u64,
    request_length: u64,
    connection: u64,
}

fn parse_access(line: &str) -> Access {
    // 1700000000.123 40312 "POST /api/items HTTP/1.1" 200 169 195 17 305
    let mut q = line.split('"');
    let head: Vec<&str> = q.next().unwrap().split_whitespace().collect();
    let req: Vec<&str> = q.next().expect("a request line").split(' ').collect();
    let tail: Vec<u64> =
        q.next().unwrap().split_whitespace().map(|x| if x == "-" { 0 } else { x.parse().unwrap() }).collect();
    // /api/ answers with `return`, which discards the request body unread:
    // $request_length leaves it out, though it was sent.
    let discarded = if req[1].starts_with("/api/") { tail[4] } else { 0 };
    Access {
        port: head[1].parse().unwrap(),
        method: req[0].to_string(),
        uri: req[1].to_string(),
        status: tail[0],
        bytes_sent: tail[1],
        request_length: tail[2] + discarded,
        connection: tail[3],
    }
}

/// nginx serving static files to wrk (keep-alive and `Connection: close`)
/// and curl (HEAD, 304, 206, HTTP/1.0): every request of nginx's access log
/// is once in http.log with the same client port, method, URI, status and
/// response size ($bytes_sent, headers included), and http.log has nothing
/// else; conn.log has as many connections to the server as nginx accepted,
/// and each carries the bytes nginx logged for its requests and responses;
/// the store (`wirelog query http`) has the same requests and bytes.
#[test]
fn nginx_access_log_equals_http_log() {
    if !requirements(&["nginx", "wrk", "curl"]) {
        return;
    }
    let t0 = Instant::now();
    let ns = Netns::new();
    let dir = tmp("nginx");
    let www = dir.join("www");
    write_site(&www);
    std::fs::write(dir.join("nginx.conf"), nginx_conf(&dir, &www)).unwrap();
    std::fs::write(dir.join("mix.lua"), WRK_LUA).unwrap();
    let conf = dir.join("nginx.conf");
    let mut nginx = ns.server("nginx", &["nginx", "-c", conf.to_str().unwrap()], &dir.join("nginx.out"));
    wait_for("nginx", Duration::from_secs(10), || {
        assert!(nginx.alive(), "nginx exited: {}", std::fs::read_to_string(dir.join("nginx.out")).unwrap());
        Netns::cmd(&ns.s, &["curl", "-sf", "-o", "/dev/null", "http://127.0.0.1:8081/status"])
            .status()
            .is_ok_and(|s| s.success())
    });
    let (accepts0, requests0) = nginx_counters(&ns);

    let cap = Capture::start(&ns, &dir);
    let url = format!("http://{SERVER_IP}:{HTTP_PORT}");
    let lua = dir.join("mix.lua");
    let wrk = |conns: &str, extra: &[&str]| {
        let mut c = Netns::cmd(&ns.c, &["wrk", "-t1", conns, "-d5s", "-s", lua.to_str().unwrap()]);
        c.args(extra).arg(&url).env("DELAY_MS", "40").env("SEND_S", "3").stdout(Stdio::piped()).stderr(Stdio::piped());
        c.spawn().expect("start wrk")
    };
    let keep_alive = wrk("-c16", &[]);
    let close = wrk("-c4", &["-H", "Connection: close"]);
    // curl's own kinds of request, beside wrk's.
    let css = www.join("static/4k.css");
    for _ in 0..5 {
        for args in [
            vec!["-I", "/index.html"],
            vec!["-z", css.to_str().unwrap(), "/static/4k.css"],
            vec!["-r", "1000-1999", "/static/64k.png"],
            vec!["-0", "/static/1k.html"],
            vec!["/no/such/file"],
        ] {
            let (path, opts) = args.split_last().unwrap();
            let mut a = vec!["curl", "-s", "-o", "/dev/null", "--max-time", "5"];
            a.extend(opts);
            let u = format!("{url}{path}");
            a.push(&u);
            Netns::run(&ns.c, &a);
        }
    }
    for (name, w) in [("keep-alive", keep_alive), ("close", close)] {
        let out = w.wait_with_output().unwrap();
        assert!(out.status.success(), "wrk {name}: {}", String::from_utf8_lossy(&out.stderr));
        let report = String::from_utf8_lossy(&out.stdout);
        eprintln!("wrk {name}: {}", report.lines().find(|l| l.contains("requests in")).unwrap_or("?").trim());
    }
    // Every connection has been closed by wrk's exit; let nginx see the last
    // FINs before counting.
    std::thread::sleep(Duration::from_millis(500));
    let (accepts1, requests1) = nginx_counters(&ns);
    let logs = cap.stop();
    drop(nginx);

    let access: Vec<Access> =
        std::fs::read_to_string(dir.join("access.log")).unwrap().lines().map(parse_access).collect();
    // The second stub_status request was accepted and counted before it
    // reported; the first is in the first snapshot already.
    let (accepted, requested) = (accepts1 - accepts0 - 1, requests1 - requests0 - 1);
    assert_eq!(access.len() as u64, requested, "nginx's access log against its own request counter");

    let http = rows(&logs, "http.log");
    type Key = (u64, String, String, u64, u64);
    let mut logged: BTreeMap<Key, u64> = BTreeMap::new();
    for a in &access {
        *logged.entry((a.port, a.method.clone(), a.uri.clone(), a.status, a.bytes_sent)).or_default() += 1;
    }
    let mut ours: BTreeMap<Key, u64> = BTreeMap::new();
    for r in &http {
        // Complete on a fully captured connection: "error" only for 4xx/5xx.
        let complete = if num(r, "status_code") >= 400 { "error" } else { "ok" };
        assert_eq!(r["status"], complete, "{r:?}");
        let k = (
            num(r, "id.orig_p"),
            r["method"].clone(),
            r["uri"].clone(),
            num(r, "status_code"),
            num(r, "response_bytes"),
        );
        *ours.entry(k).or_default() += 1;
    }
    let only_nginx: Vec<_> = logged.iter().filter(|(k, n)| ours.get(*k) != Some(n)).collect();
    let only_ours: Vec<_> = ours.iter().filter(|(k, n)| logged.get(*k) != Some(n)).collect();
    assert!(
        only_nginx.is_empty() && only_ours.is_empty(),
        "(port, method, uri, status, bytes) with different counts:\nnginx: {only_nginx:#?}\nhttp.log: {only_ours:#?}"
    );
    let mut statuses: BTreeMap<u64, u64> = BTreeMap::new();
    for a in &access {
        *statuses.entry(a.status).or_default() += 1;
    }
    for s in [200, 206, 304, 404] {
        assert!(statuses.contains_key(&s), "no status {s} among {statuses:?}");
    }

    // Connections: the bytes of each, per client port, as nginx logged them
    // (request lengths in, bytes sent out).
    let conns: Vec<Row> = rows(&logs, "conn.log")
        .into_iter()
        .filter(|r| r["proto"] == "tcp" && r["id.resp_h"] == SERVER_IP && r["id.resp_p"] == HTTP_PORT)
        .collect();
    assert_eq!(conns.len() as u64, accepted, "conn.log's connections against nginx's accepted connections");
    let mut per_conn: BTreeMap<u64, (u64, u64, u64)> = BTreeMap::new();
    for a in &access {
        let e = per_conn.entry(a.connection).or_insert((a.port, 0, 0));
        e.1 += a.request_length;
        e.2 += a.bytes_sent;
    }
    let mut nginx_bytes: Vec<(u64, u64, u64)> = per_conn.into_values().collect();
    // nginx logs no line for a connection without a request.
    let mut conn_bytes: Vec<(u64, u64, u64)> = conns
        .iter()
        .filter(|r| num(r, "orig_bytes") > 0)
        .map(|r| (num(r, "id.orig_p"), num(r, "orig_bytes"), num(r, "resp_bytes")))
        .collect();
    nginx_bytes.sort();
    conn_bytes.sort();
    assert_eq!(conn_bytes, nginx_bytes, "(client port, bytes in, bytes out) per connection: conn.log vs nginx");
    for r in &conns {
        // All closed in order by either side, nothing missed.
        assert_eq!((r["conn_state"].as_str(), num(r, "missed_bytes")), ("SF", 0), "{r:?}");
    }
    // Each wrk first connects once to check the address (and closes), and
    // each of the 4 `Connection: close` clients has connected again after
    // its last response when wrk exits.
    let idle = conns.len() - nginx_bytes.len();
    assert_eq!(idle, 2 + 4, "connections without a request");
    println!(
        "nginx: {} requests in http.log equal to nginx's access log ({statuses:?}); {} connections in conn.log = \
         nginx's accepted ({} with requests, bytes equal per connection; {idle} opened by wrk without a request, as expected); {:.1} s",
        http.len(),
        conns.len(),
        nginx_bytes.len(),
        t0.elapsed().as_secs_f64()
    );
    assert!(http.len() > 300, "too few requests for a meaningful comparison: {}", http.len());
    // The store has the same requests: `wirelog query` counts them per status.
    let q = Command::new(BIN)
        .args(["query", "http", "--by", "status_code", "--format", "csv", "--store"])
        .arg(dir.join("store"))
        .output()
        .expect("run wirelog query");
    assert!(q.status.success(), "query: {}", String::from_utf8_lossy(&q.stderr));
    let text = String::from_utf8_lossy(&q.stdout).into_owned();
    let head: Vec<&str> = text.lines().next().unwrap_or("").split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name} in {text}"));
    let (sc, cnt, rb) = (col("status_code"), col("count"), col("response_bytes"));
    let stored: BTreeMap<u64, (u64, u64)> = text
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let n = |i: usize| f[i].parse::<u64>().unwrap_or_else(|_| panic!("query row {l}"));
            (n(sc), (n(cnt), n(rb)))
        })
        .collect();
    let mut expected: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for a in &access {
        let e = expected.entry(a.status).or_default();
        e.0 += 1;
        e.1 += a.bytes_sent;
    }
    assert_eq!(stored, expected, "the store's (requests, response bytes) per status vs nginx's log");
    println!("nginx: the store's requests and response bytes per status equal nginx's log: {stored:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

// -------------------------------------------------------------- MariaDB --

/// MariaDB's client over the unix socket: statements that never cross the
/// captured link.
fn sql(ns: &Netns, sock: &Path, q: &str) -> String {
    let s = format!("--socket={}", sock.display());
    let out = Netns::run(&ns.s, &["mariadb", "--no-defaults", "-uroot", &s, "-N", "-B", "-e", q]);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn global_status(ns: &Netns, sock: &Path) -> HashMap<String, u64> {
    sql(ns, sock, "SHOW GLOBAL STATUS")
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('\t')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

const SB_TABLES: &str = "--tables=2";
const SB_ROWS: &str = "--table-size=10000";

/// sysbench oltp_read_only over TCP from the client namespace, captured,
/// between two snapshots of the server's counters taken over the unix
/// socket. Returns (mysql.log, conn.log to port 3306, counter deltas).
fn sysbench_captured(ns: &Netns, sock: &Path, dir: &Path, ps_mode: &str) -> (Vec<Row>, Vec<Row>, HashMap<String, i64>) {
    let before = global_status(ns, sock);
    let cap = Capture::start(ns, dir);
    let host = format!("--mysql-host={SERVER_IP}");
    let mode = format!("--db-ps-mode={ps_mode}");
    let out = Netns::run(
        &ns.c,
        &[
            "sysbench",
            "oltp_read_only",
            "--db-driver=mysql",
            &host,
            "--mysql-port=3306",
            "--mysql-user=sbtest",
            "--mysql-password=sbtest",
            "--mysql-db=sbtest",
            SB_TABLES,
            SB_ROWS,
            "--threads=4",
            "--time=3",
            "--rate=100",
            &mode,
            "run",
        ],
    );
    let report = String::from_utf8_lossy(&out.stdout);
    eprintln!(
        "sysbench {ps_mode}: {}",
        report.lines().filter(|l| l.contains("queries:") || l.contains("transactions:")).collect::<Vec<_>>().join("; ")
    );
    // sysbench has closed its connections; the server's side of the close
    // (its FIN) follows at once.
    std::thread::sleep(Duration::from_millis(500));
    let logs = cap.stop();
    let after = global_status(ns, sock);
    let delta = after.iter().map(|(k, v)| (k.clone(), *v as i64 - *before.get(k).unwrap_or(&0) as i64)).collect();
    let conns =
        rows(&logs, "conn.log").into_iter().filter(|r| r["proto"] == "tcp" && r["id.resp_p"] == "3306").collect();
    (rows(&logs, "mysql.log"), conns, delta)
}

fn count_by(recs: &[Row], f: impl Fn(&Row) -> String) -> BTreeMap<String, i64> {
    let mut m = BTreeMap::new();
    for r in recs {
        *m.entry(f(r)).or_default() += 1;
    }
    m
}

/// The first word of a statement, upper case.
fn verb(r: &Row) -> String {
    r["arg"].split_whitespace().next().unwrap_or("").to_ascii_uppercase()
}

/// MariaDB with sysbench oltp_read_only (4 threads), text protocol and
/// server-side prepared statements: mysql.log has exactly as many commands
/// of each kind as the server's own counters went up (SHOW GLOBAL STATUS
/// before and after, over the unix socket, so not captured), as many logins
/// and conn.log connections as the server counted, and all succeeded.
#[test]
fn mariadb_counters_equal_mysql_log() {
    if !requirements(&["mariadbd", "mariadb-install-db", "mariadb", "mariadb-admin", "sysbench"]) {
        return;
    }
    let t0 = Instant::now();
    let ns = Netns::new();
    let dir = tmp("mariadb");
    let data = dir.join("data");
    let sock = dir.join("mysql.sock");
    let out = Command::new("mariadb-install-db")
        .args(["--no-defaults", "--user=root", "--auth-root-authentication-method=socket"])
        .arg(format!("--datadir={}", data.display()))
        .output()
        .expect("run mariadb-install-db");
    assert!(out.status.success(), "mariadb-install-db: {}", String::from_utf8_lossy(&out.stderr));
    let (datadir, socket) = (format!("--datadir={}", data.display()), format!("--socket={}", sock.display()));
    let (pid_file, err_log) =
        (format!("--pid-file={}/mysql.pid", dir.display()), format!("--log-error={}/mysql.err", dir.display()));
    let bind = format!("--bind-address={SERVER_IP}");
    let mut db = ns.server(
        "mariadbd",
        &[
            "mariadbd",
            "--no-defaults",
            "--user=root",
            &datadir,
            &socket,
            "--port=3306",
            &bind,
            &pid_file,
            &err_log,
            "--skip-name-resolve",
            "--skip-log-bin",
            "--innodb-buffer-pool-size=64M",
            "--innodb-flush-log-at-trx-commit=2",
        ],
        &dir.join("mariadbd.out"),
    );
    wait_for("mariadbd", Duration::from_secs(60), || {
        assert!(db.alive(), "mariadbd exited: {}", std::fs::read_to_string(dir.join("mysql.err")).unwrap_or_default());
        Netns::cmd(&ns.s, &["mariadb-admin", "--no-defaults", "-uroot", &socket, "ping"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    sql(
        &ns,
        &sock,
        "CREATE DATABASE sbtest; CREATE USER 'sbtest'@'%' IDENTIFIED BY 'sbtest'; GRANT ALL ON sbtest.* TO 'sbtest'@'%';",
    );
    // The tables are filled over the socket: nothing on the link yet. (As
    // root: sbtest@localhost is shadowed by the anonymous ''@localhost.)
    Netns::run(
        &ns.s,
        &[
            "sysbench",
            "oltp_read_only",
            "--db-driver=mysql",
            &format!("--mysql-socket={}", sock.display()),
            "--mysql-user=root",
            "--mysql-db=sbtest",
            SB_TABLES,
            SB_ROWS,
            "prepare",
        ],
    );

    let mut checked = Vec::new();
    for ps_mode in ["disable", "auto"] {
        let (recs, conns, d) = sysbench_captured(&ns, &sock, &dir.join(ps_mode), ps_mode);
        let cmds = count_by(&recs, |r| r["cmd"].clone());
        let nonzero: BTreeMap<&String, &i64> = d
            .iter()
            .filter(|(k, v)| **v != 0 && (k.starts_with("Com_") || *k == "Connections" || *k == "Questions"))
            .collect();
        eprintln!("{ps_mode}: mysql.log commands {cmds:?}\nserver counter deltas {nonzero:?}");
        let failed: Vec<&Row> = recs.iter().filter(|r| r["status"] != "ok" || r["success"] == "F").collect();
        assert!(failed.is_empty(), "{ps_mode}: commands not ok: {:?}", &failed[..failed.len().min(5)]);
        // The snapshot after the capture logged in over the socket; the one
        // before had already been counted.
        let connections = d["Connections"] - 1;
        assert_eq!(cmds.get("login").copied().unwrap_or(0), connections, "{ps_mode}: logins vs Connections");
        assert_eq!(conns.len() as i64, connections, "{ps_mode}: conn.log connections vs Connections");
        for r in &conns {
            assert_eq!((r["conn_state"].as_str(), num(r, "missed_bytes")), ("SF", 0), "{r:?}");
        }
        let by_verb = count_by(&recs, |r| if r["cmd"] == "query" { verb(r) } else { String::new() });
        let executed_verb = count_by(&recs, |r| if r["cmd"] == "stmt_execute" { verb(r) } else { String::new() });
        let mut pairs: Vec<(String, i64, i64)> = Vec::new();
        let mut pair = |what: &str, ours: i64, counter: &str| {
            pairs.push((
                what.to_string(),
                ours,
                *d.get(counter).unwrap_or_else(|| panic!("no {counter} in SHOW GLOBAL STATUS")),
            ));
        };
        let c = |m: &BTreeMap<String, i64>, k: &str| m.get(k).copied().unwrap_or(0);
        // Statements run by COM_QUERY or COM_STMT_EXECUTE count in the
        // statement's own counter (the status snapshots count only in
        // Com_show_status).
        pair("SELECT", c(&by_verb, "SELECT") + c(&executed_verb, "SELECT"), "Com_select");
        pair("BEGIN", c(&by_verb, "BEGIN") + c(&executed_verb, "BEGIN"), "Com_begin");
        pair("COMMIT", c(&by_verb, "COMMIT") + c(&executed_verb, "COMMIT"), "Com_commit");
        pair("stmt_prepare", c(&cmds, "stmt_prepare"), "Com_stmt_prepare");
        pair("stmt_execute", c(&cmds, "stmt_execute"), "Com_stmt_execute");
        pair("stmt_close", c(&cmds, "stmt_close"), "Com_stmt_close");
        pair("stmt_reset", c(&cmds, "stmt_reset"), "Com_stmt_reset");
        // Questions counts statements (COM_QUERY, COM_STMT_EXECUTE) and
        // COM_QUIT, not COM_STMT_PREPARE/CLOSE; besides sysbench's, the
        // snapshots' own: the SHOW of the second, the quit of the first.
        let snapshots = 2;
        pair(
            "query + stmt_execute + quit",
            c(&cmds, "query") + c(&cmds, "stmt_execute") + c(&cmds, "quit") + snapshots,
            "Questions",
        );
        for (what, ours, server) in &pairs {
            assert_eq!(ours, server, "{ps_mode}: {what} in mysql.log vs the server's counter");
        }
        if ps_mode == "disable" {
            assert!(c(&by_verb, "SELECT") > 1000, "{ps_mode}: {by_verb:?}");
        } else {
            assert!(c(&cmds, "stmt_execute") > 1000, "{ps_mode}: {cmds:?}");
            let bare: Vec<&Row> = recs
                .iter()
                .filter(|r| r["cmd"] == "stmt_execute" && (r["arg"] == "-" || r["fingerprint"] == "-"))
                .collect();
            assert!(bare.is_empty(), "executions without their statement: {:?}", &bare[..bare.len().min(3)]);
        }
        checked.push(format!("{ps_mode}: {connections} connections, {pairs:?}"));
    }
    drop(db);
    println!(
        "mariadb: equal to the server's counters (ours, server's): {}; {:.1} s",
        checked.join("; "),
        t0.elapsed().as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// -------------------------------------------------------------- dnsmasq --

/// dnsmasq's "queries answered locally" and "queries forwarded" counters,
/// which it writes to its log on SIGUSR1.
fn dnsmasq_answered(server: &Proc, log: &Path) -> u64 {
    let text = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    let lines_before = text(log).lines().count();
    sh(&["kill", "-USR1", &server.child.id().to_string()]);
    let mut n = None;
    wait_for("dnsmasq statistics", Duration::from_secs(5), || {
        // queries forwarded 0, queries answered locally 361
        n = text(log).lines().skip(lines_before).find_map(|l| {
            let (_, rest) = l.split_once("queries forwarded ")?;
            let (fwd, local) = rest.split_once(", queries answered locally ")?;
            Some(fwd.trim().parse::<u64>().ok()? + local.trim().parse::<u64>().ok()?)
        });
        n.is_some()
    });
    n.unwrap()
}

/// One answer dig printed.
struct Dig {
    id: u64,
    qname: String,
    qtype: String,
    status: String,
    answers: Vec<String>,
}

fn parse_dig(text: &str) -> Vec<Dig> {
    let mut out = Vec::new();
    for block in text.split("\n; <<>> DiG").skip(1) {
        let Some(h) = block.lines().find(|l| l.starts_with(";; ->>HEADER<<-")) else { continue };
        let status = h.split("status: ").nth(1).unwrap().split(',').next().unwrap().to_string();
        let id: u64 = h.rsplit("id: ").next().unwrap().trim().parse().unwrap();
        let q = block.lines().skip_while(|l| !l.starts_with(";; QUESTION SECTION:")).nth(1).unwrap();
        let qf: Vec<&str> = q.trim_start_matches(';').split_whitespace().collect();
        let answers = block
            .lines()
            .skip_while(|l| !l.starts_with(";; ANSWER SECTION:"))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            // name ttl class type rdata...
            .map(|l| l.split_whitespace().skip(4).collect::<Vec<_>>().join(" "))
            .collect();
        out.push(Dig {
            id,
            qname: qf[0].trim_end_matches('.').to_lowercase(),
            qtype: qf[2].to_string(),
            status,
            answers,
        });
    }
    out
}

/// Whether an answer of dns.log is dig's rdata: names and addresses are
/// the same; for MX, SRV and TXT dns.log keeps the target name or the text.
fn same_answer(ours: &str, dig: &str) -> bool {
    let d = dig.trim_end_matches('.');
    let o = ours.trim_end_matches('.');
    o == d
        || dig.split_whitespace().count() > 1
            && (o == dig.split_whitespace().last().unwrap().trim_end_matches('.') || o.ends_with(d.trim_matches('"')))
}

/// dnsmasq answering from a hosts file and a few local records; dig asks it
/// several hundred questions over UDP and TCP (A, AAAA, MX, TXT, SRV, CNAME,
/// PTR, NXDOMAIN): every answer dig printed is in dns.log once, with its id,
/// name, type, transport, rcode and answers, dns.log has nothing else, and
/// as many as dnsmasq counted.
#[test]
fn dnsmasq_answers_equal_dns_log() {
    if !requirements(&["dnsmasq", "dig"]) {
        return;
    }
    let t0 = Instant::now();
    let ns = Netns::new();
    let dir = tmp("dns");
    let mut rnd = Lcg(11);
    let (mut hosts, mut addrs) = (String::new(), Vec::new());
    for i in 0..300 {
        let a = format!("10.{}.{}.{}", i / 250, i % 250, 1 + rnd.below(250));
        hosts += &format!("{a} host{i}.probe.test\n");
        addrs.push(a);
        if i % 3 == 0 {
            hosts += &format!("fd00::{i:x} host{i}.probe.test\n");
        }
    }
    std::fs::write(dir.join("hosts"), hosts).unwrap();
    let (mut udp, mut tcp) = (String::new(), String::new());
    for _ in 0..400 {
        let name = format!("host{}.probe.test", rnd.below(300));
        udp += &match rnd.below(20) {
            0..=9 => format!("{name} A\n"),
            10..=12 => format!("{name} AAAA\n"),
            13..=15 => format!("nx{}.probe.test A\n", rnd.below(1_000_000)),
            16 => "probe.test MX\ninfo.probe.test TXT\n".to_string(),
            17 => "_mysql._tcp.probe.test SRV\n".to_string(),
            18 => "www.probe.test A\n".to_string(),
            // Reverse lookups of listed addresses, and of others (refused:
            // dnsmasq has no upstream server).
            _ => format!("-x {}\n", addrs[rnd.below(300) as usize]),
        };
        udp += &match rnd.below(10) {
            0 => format!("-x 10.0.{}.0\n", rnd.below(250)),
            _ => String::new(),
        };
    }
    for _ in 0..60 {
        tcp += &match rnd.below(4) {
            0 => format!("nx{}.probe.test AAAA\n", rnd.below(1_000_000)),
            _ => format!("host{}.probe.test A\n", rnd.below(300)),
        };
    }
    std::fs::write(dir.join("udp.batch"), &udp).unwrap();
    std::fs::write(dir.join("tcp.batch"), &tcp).unwrap();
    let log = dir.join("dnsmasq.log");
    let (addn, pid, logf) = (
        format!("--addn-hosts={}", dir.join("hosts").display()),
        format!("--pid-file={}", dir.join("dnsmasq.pid").display()),
        format!("--log-facility={}", log.display()),
    );
    let listen = format!("--listen-address={SERVER_IP}");
    let mut dnsmasq = ns.server(
        "dnsmasq",
        &[
            "dnsmasq",
            "-k",
            "--user=root",
            "--conf-file=/dev/null",
            "--no-resolv",
            "--no-hosts",
            &addn,
            &listen,
            "--listen-address=127.0.0.1",
            "--bind-interfaces",
            "--port=53",
            "--local=/probe.test/",
            "--domain-needed",
            "--cache-size=1000",
            &pid,
            &logf,
            "--txt-record=info.probe.test,probe test record",
            "--mx-host=probe.test,mail.probe.test,10",
            "--srv-host=_mysql._tcp.probe.test,db.probe.test,3306",
            "--cname=www.probe.test,host1.probe.test",
            "--host-record=mail.probe.test,10.9.9.9",
            "--host-record=db.probe.test,10.9.9.10,fd00::99",
        ],
        &dir.join("dnsmasq.out"),
    );
    // Ready when it answers on its loopback address: not on the captured link.
    wait_for("dnsmasq", Duration::from_secs(10), || {
        assert!(dnsmasq.alive(), "dnsmasq exited: {}", std::fs::read_to_string(dir.join("dnsmasq.out")).unwrap());
        Netns::cmd(&ns.s, &["dig", "+short", "+tries=1", "+time=1", "@127.0.0.1", "host1.probe.test"])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    let answered0 = dnsmasq_answered(&dnsmasq, &log);

    let cap = Capture::start(&ns, &dir);
    let at = format!("@{SERVER_IP}");
    let dig = |batch: &str, extra: &[&str]| {
        let f = dir.join(batch);
        let mut a = vec!["dig", at.as_str(), "+tries=1", "+time=2"];
        a.extend(extra);
        a.extend(["-f", f.to_str().unwrap()]);
        String::from_utf8_lossy(&Netns::run(&ns.c, &a).stdout).into_owned()
    };
    let (udp_out, tcp_out) = (dig("udp.batch", &[]), dig("tcp.batch", &["+tcp"]));
    let logs = cap.stop();
    let answered = dnsmasq_answered(&dnsmasq, &log) - answered0;
    drop(dnsmasq);

    let recs = rows(&logs, "dns.log");
    let mut by_id: HashMap<(u64, String, String, String), Vec<&Row>> = HashMap::new();
    for r in &recs {
        let k = (num(r, "trans_id"), r["query"].to_lowercase(), r["qtype_name"].clone(), r["proto"].clone());
        by_id.entry(k).or_default().push(r);
    }
    let (udp_q, tcp_q) = (udp.lines().count(), tcp.lines().count());
    let mut checked = 0;
    let mut rcodes: BTreeMap<String, u64> = BTreeMap::new();
    for (text, proto, asked) in [(&udp_out, "udp", udp_q), (&tcp_out, "tcp", tcp_q)] {
        let digs = parse_dig(text);
        assert_eq!(digs.len(), asked, "{proto}: dig printed {} answers to {asked} questions", digs.len());
        for d in digs {
            let k = (d.id, d.qname.clone(), d.qtype.clone(), proto.to_string());
            let r = by_id
                .get_mut(&k)
                .and_then(|v| v.pop())
                .unwrap_or_else(|| panic!("dig's answer {k:?} is not (or not once more) in dns.log"));
            assert_eq!(r["rcode_name"], d.status, "{k:?}: rcode");
            // Answered ("error" for an error rcode), never "no_response".
            assert_eq!(r["status"], if d.status == "NOERROR" { "ok" } else { "error" }, "{k:?}");
            let ours: Vec<&str> = if r["answers"] == "-" { vec![] } else { r["answers"].split(',').collect() };
            assert_eq!(ours.len(), d.answers.len(), "{k:?}: answers {ours:?} vs dig's {:?}", d.answers);
            for (o, a) in ours.iter().zip(&d.answers) {
                assert!(same_answer(o, a), "{k:?}: answer {o:?} vs dig's {a:?}");
            }
            *rcodes.entry(format!("{} {}", d.qtype, d.status)).or_default() += 1;
            checked += 1;
        }
    }
    let extra: Vec<_> = by_id.values().flatten().collect();
    assert!(extra.is_empty(), "dns.log records dig did not print: {extra:?}");
    assert_eq!(recs.len(), checked);
    // dnsmasq answers each TCP connection in a forked child, whose counts
    // die with it: its statistics count the UDP queries.
    let udp_logged = recs.iter().filter(|r| r["proto"] == "udp").count();
    assert_eq!(answered, udp_logged as u64, "dnsmasq's count of UDP queries against dns.log");
    println!(
        "dns: {checked} of dig's answers ({udp_q} udp, {tcp_q} tcp; {rcodes:?}) equal in dns.log, \
         dnsmasq counted {answered} over UDP, as many as dns.log; {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    for k in [
        "A NOERROR",
        "AAAA NOERROR",
        "MX NOERROR",
        "TXT NOERROR",
        "SRV NOERROR",
        "PTR NOERROR",
        "A NXDOMAIN",
        "PTR REFUSED",
    ] {
        assert!(rcodes.contains_key(k), "no {k} among {rcodes:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
