//! `read --clickhouse` into a real ClickHouse engine (chdb behind
//! tests/clickhouse/endpoint.py, one endpoint shared by this file, a data
//! port and a database per test): what arrives equals the local store
//! (`wirelog query`), every record exactly once through refusals, 500s in
//! the middle of a batch, inserts applied but never answered, an outage, a
//! SIGKILL with batches spooled and a restart, SIGKILLs at random moments
//! and the recovery README gives; two probes into one database;
//! `clickhouse init` upgrades or says what it cannot do.
//!
//! Needs python3 with chdb-core, lz4, clickhouse-cityhash (scripts/test.sh
//! installs them). Without them the tests fail when
//! WIRELOG_REQUIRE_ALL_TESTS=1 and are skipped (loudly) otherwise.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_wirelog");

/// The endpoint process; it exits when our end of its stdin closes (this
/// test process ends) and removes its data directory.
struct Endpoint {
    control: u16,
    _stdin: Mutex<ChildStdin>,
    _child: Mutex<Child>,
}

static ENDPOINT: OnceLock<Option<Endpoint>> = OnceLock::new();

fn endpoint_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clickhouse/endpoint.py")
}

fn endpoint() -> Option<&'static Endpoint> {
    ENDPOINT
        .get_or_init(|| {
            let ok = Command::new("python3")
                .args(["-c", "import chdb, lz4, clickhouse_cityhash"])
                .output()
                .is_ok_and(|o| o.status.success());
            if !ok {
                common::live::skip("python3 with chdb-core, lz4 and clickhouse-cityhash is missing (scripts/test.sh installs them)");
                return None;
            }
            let mut child = Command::new("python3")
                .arg(endpoint_script())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("start the endpoint");
            let stdin = child.stdin.take().unwrap();
            let mut line = String::new();
            BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
            let control = line
                .strip_prefix("control ")
                .and_then(|p| p.trim().parse().ok())
                .unwrap_or_else(|| panic!("endpoint said {line:?}"));
            Some(Endpoint { control, _stdin: Mutex::new(stdin), _child: Mutex::new(child) })
        })
        .as_ref()
}

/// One HTTP request on loopback: (status, body).
fn http(port: u16, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the endpoint");
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

/// A data port of its own and a database of its own for one test.
struct Ch {
    control: u16,
    port: u16,
    db: String,
}

impl Ch {
    fn new(db: &str) -> Option<Ch> {
        Ch::with_auth(db, "")
    }

    fn with_auth(db: &str, query: &str) -> Option<Ch> {
        let e = endpoint()?;
        let (st, port) = http(e.control, "GET", &format!("/port/new{query}"), "");
        assert_eq!(st, 200);
        Some(Ch { control: e.control, port: port.trim().parse().unwrap(), db: db.to_string() })
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn ctl(&self, cmd: &str) {
        let (st, body) = http(self.control, "GET", &format!("/port/{}/{cmd}", self.port), "");
        assert_eq!(st, 200, "{cmd}: {body}");
    }

    fn stats(&self) -> String {
        http(self.control, "GET", &format!("/port/{}/stats", self.port), "").1
    }

    /// A statement run by the engine directly (not through the data port).
    fn sql(&self, q: &str) -> String {
        let (st, body) = http(self.control, "POST", &format!("/sql?database={}", self.db), q);
        assert_eq!(st, 200, "{q}: {body}");
        body
    }

    fn wirelog(&self, args: &[&str]) -> Output {
        let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        all.extend(["--clickhouse".into(), self.url(), "--clickhouse-database".into(), self.db.clone()]);
        Command::new(BIN).args(&all).output().expect("run wirelog")
    }

    fn init(&self) {
        let o = self.wirelog(&["clickhouse", "init"]);
        assert!(o.status.success(), "init: {}", String::from_utf8_lossy(&o.stderr));
    }

    /// Rows per probe: {table: count}.
    fn counts(&self, probe: Option<&str>) -> BTreeMap<String, u64> {
        let w = probe.map(|p| format!(" WHERE probe = '{p}'")).unwrap_or_default();
        ["flows", "conns", "http", "mysql", "pgsql", "redis", "dns"]
            .iter()
            .map(|t| (t.to_string(), self.sql(&format!("SELECT count() FROM {t}{w}")).trim().parse().unwrap()))
            .collect()
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wirelog-ch-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Small real captures of every protocol (Packetbeat's test captures).
fn small_captures() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/packetbeat/pcaps");
    let mut v: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
        .map(|p| p.display().to_string())
        .collect();
    v.sort();
    v
}

fn csv(text: &str) -> Vec<BTreeMap<String, String>> {
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap_or("").split(',').map(str::to_string).collect();
    lines
        .map(|l| {
            // Quoted fields (fingerprints) may hold commas: numbers are last.
            let mut vals: Vec<String> = Vec::new();
            let mut cur = String::new();
            let mut quoted = false;
            for c in l.chars() {
                match c {
                    '"' => quoted = !quoted,
                    ',' if !quoted => vals.push(std::mem::take(&mut cur)),
                    c => cur.push(c),
                }
            }
            vals.push(cur);
            header.iter().cloned().zip(vals).collect()
        })
        .collect()
}

/// Totals of a kind in the local store, through `wirelog query` (every group).
fn store_totals(store: &Path, kind: &str, cols: &[&str]) -> Vec<u64> {
    let o = Command::new(BIN)
        .args(["query", kind, "--store", store.to_str().unwrap(), "--format", "csv", "--top", "0"])
        .output()
        .unwrap();
    assert!(o.status.success(), "query {kind}: {}", String::from_utf8_lossy(&o.stderr));
    let rows = csv(&String::from_utf8_lossy(&o.stdout));
    cols.iter()
        .map(|c| rows.iter().map(|r| r.get(*c).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)).sum())
        .collect()
}

/// The same totals in ClickHouse.
fn ch_totals(ch: &Ch, kind: &str, exprs: &[&str], probe: Option<&str>) -> Vec<u64> {
    let w = probe.map(|p| format!(" WHERE probe = '{p}'")).unwrap_or_default();
    let out = ch.sql(&format!("SELECT {} FROM {kind}{w}", exprs.join(", ")));
    out.trim().split('\t').map(|v| v.parse().unwrap_or_else(|_| panic!("{kind}: {out:?}"))).collect()
}

/// Every table's count and sums in ClickHouse (for `probe`) equal the store's.
fn assert_equals_store(ch: &Ch, store: &Path, probe: Option<&str>) {
    let checks: &[(&str, &[&str], &[&str])] = &[
        (
            "flows",
            &["conns", "pkts_out", "pkts_in", "bytes_out", "bytes_in"],
            &["sum(conns)", "sum(pkts_out)", "sum(pkts_in)", "sum(bytes_out)", "sum(bytes_in)"],
        ),
        (
            "conns",
            &["conns", "orig_pkts", "resp_pkts", "orig_bytes", "resp_bytes"],
            &["count()", "sum(orig_pkts)", "sum(resp_pkts)", "sum(ifNull(orig_bytes, 0))", "sum(ifNull(resp_bytes, 0))"],
        ),
    ];
    for (kind, cols, exprs) in checks {
        assert_eq!(ch_totals(ch, kind, exprs, probe), store_totals(store, kind, cols), "{kind} ({probe:?})");
    }
    for kind in ["http", "mysql", "pgsql", "redis", "dns"] {
        assert_eq!(
            ch_totals(ch, kind, &["count()", "sum(ifNull(request_bytes, 0))", "sum(ifNull(response_bytes, 0))"], probe),
            store_totals(store, kind, &["count", "request_bytes", "response_bytes"]),
            "{kind} ({probe:?})"
        );
    }
    // The loss table: each count summed, as `query loss` sums the store's.
    let counts = ["packets", "kernel_packets", "undecoded", "missed_bytes", "gaps", "unparsed_bytes", "malformed", "records_dropped"];
    let o = Command::new(BIN)
        .args(["query", "loss", "--every", "1h", "--format", "csv", "--store", store.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "query loss: {}", String::from_utf8_lossy(&o.stderr));
    let rows = csv(&String::from_utf8_lossy(&o.stdout));
    let local: Vec<u64> = counts.iter().map(|c| rows.iter().map(|r| r[*c].parse::<u64>().unwrap()).sum()).collect();
    let sums: Vec<String> = counts.iter().map(|c| format!("sum({c})")).collect();
    let sums: Vec<&str> = sums.iter().map(String::as_str).collect();
    assert_eq!(ch_totals(ch, "loss", &sums, probe), local, "loss ({probe:?}): {counts:?}");
    assert!(local[1] > 0, "the loss table counts the captures' packets: {local:?}");
    // Exactly once: no connection twice.
    let w = probe.map(|p| format!(" WHERE probe = '{p}'")).unwrap_or_default();
    let dup = ch.sql(&format!("SELECT count() - uniqExact(uid) FROM conns{w}"));
    assert_eq!(dup.trim(), "0", "connections in ClickHouse more than once");
}

/// One question to the store and to ClickHouse (`--probe probe`): both
/// answer, with something, and the same on standard output.
fn ask_both(ch: &Ch, store: &Path, probe: &str, q: &[&str]) -> (Output, Output) {
    let local = Command::new(BIN)
        .arg("query")
        .args(q)
        .args(["--format", "csv", "--store", store.to_str().unwrap()])
        .output()
        .unwrap();
    let mut args: Vec<&str> = vec!["query"];
    args.extend(q.iter());
    args.extend(["--format", "csv", "--probe", probe]);
    let remote = ch.wirelog(&args);
    assert!(local.status.success() && remote.status.success(), "{q:?}: {} / {}", stderr(&local), stderr(&remote));
    let out = String::from_utf8_lossy(&local.stdout);
    assert_eq!(String::from_utf8_lossy(&remote.stdout), out, "{q:?}");
    assert!(out.lines().count() >= 2, "{q:?} answered nothing: {out}");
    (local, remote)
}

fn read_args<'a>(store: &'a str, probe: &'a str, spool: &'a str, caps: &'a [String]) -> Vec<&'a str> {
    let mut a = vec!["read", "-q", "--store", store, "--probe-name", probe, "--spool-dir", spool];
    a.extend(caps.iter().map(String::as_str));
    a
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Issue 33's six protocols (common::datastores' captures: MongoDB,
/// Memcached, AMQP, Cassandra, Kafka, MQTT): each one's table in ClickHouse
/// holds the store's rows, bytes and errors.
#[test]
fn datastores_into_clickhouse_equal_the_store() {
    let Some(ch) = Ch::new("ds") else { return };
    ch.init();
    let d = tmp("ds");
    let (store, spool) = (d.join("store"), d.join("spool"));
    let caps: Vec<String> = common::datastores::datastore_captures(&d).iter().map(|p| p.display().to_string()).collect();
    let mut args = read_args(store.to_str().unwrap(), "probe-ds", spool.to_str().unwrap(), &caps);
    args.insert(1, "-C");
    let o = ch.wirelog(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    for kind in ["mongodb", "memcached", "kafka", "amqp", "mqtt", "cassandra"] {
        let local = store_totals(&store, kind, &["count", "request_bytes", "response_bytes", "errors"]);
        assert!(local[0] > 0, "{kind}: no transactions in the store");
        let remote = ch_totals(&ch, kind, &["count()", "sum(ifNull(request_bytes, 0))", "sum(ifNull(response_bytes, 0))", "countIf(status = 'error')"], Some("probe-ds"));
        assert_eq!(remote, local, "{kind}: ClickHouse vs the store (count, request_bytes, response_bytes, errors)");
    }
}

#[test]
fn read_into_clickhouse_equals_the_store() {
    let Some(ch) = Ch::new("e2e") else { return };
    let Some(mixed) = common::capture("gen_mixed.sh", "mixed.pcap") else { return };
    ch.init();
    let d = tmp("e2e");
    let (store, spool) = (d.join("store"), d.join("spool"));
    let mut caps = small_captures();
    caps.push(mixed.display().to_string());
    let mut args = read_args(store.to_str().unwrap(), "probe-a", spool.to_str().unwrap(), &caps);
    // Small batches: many inserts, each with its own token.
    args.extend(["--clickhouse-batch-rows", "5000"]);
    let o = ch.wirelog(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_equals_store(&ch, &store, Some("probe-a"));
    // A packet run's transactions all say so, in both.
    for kind in ["http", "mysql", "pgsql", "redis", "dns"] {
        assert_eq!(ch.sql(&format!("SELECT countIf(source != 'packets') FROM {kind}")).trim(), "0", "{kind}");
    }
    ask_both(&ch, &store, "probe-a", &["http", "--where", "source = packets", "--by", "source"]);
    let counts = ch.counts(None);
    for (t, n) in &counts {
        assert!(*n > 0, "no {t} rows: {counts:?}");
    }
    // Identity: every row names the probe and where it came from.
    assert_eq!(ch.sql("SELECT DISTINCT probe FROM conns").trim(), "probe-a");
    let ifaces = ch.sql("SELECT DISTINCT iface FROM http ORDER BY iface");
    assert!(ifaces.contains("mixed.pcap") && ifaces.contains("http_post.pcap"), "{ifaces}");
    // Types the engine checked: addresses as IPv6, times as DateTime64.
    let row = ch.sql("SELECT toTypeName(orig_h), toTypeName(ts), min(ts) > '2000-01-01' FROM conns GROUP BY 1, 2");
    // (TabSeparated escapes the quotes.)
    assert_eq!(row.trim(), "IPv6\tDateTime64(6, \\'UTC\\')\t1");
    assert!(std::fs::read_dir(&spool).unwrap().all(|e| !e.unwrap().file_name().to_string_lossy().ends_with(".batch")));

    // One query, two backends: the same answer, byte for byte.
    let questions: &[&[&str]] = &[
        &["flows"],
        &["flows", "--by", "proto,dport", "--top", "0"],
        &["flows", "--where", "dport = 443 or dport = 80", "--by", "sip,dip", "--top", "5"],
        &["flows", "--where", "sip in 192.168.0.0/16 or (sip = ::1 and bytes > 10k)", "--by", "dip", "--sort", "packets"],
        &["flows", "--every", "5m", "--by", "dport", "--top", "3"],
        &["conns", "--by", "conn_state", "--top", "0"],
        &["conns", "--where", "orig_bytes != 0 and not proto = udp", "--by", "resp_p", "--sort", "duration_p99"],
        &["conns", "--where", "history ~ '^Sh' and duration > 100ms", "--by", "orig_h,resp_h"],
        &["conns", "--where", "service = \"\"", "--every", "1m"],
        &["conns", "--where", "host = 127.0.0.1 or net = fe80::/10", "--by", "proto"],
        &["http", "--by", "host,status_code", "--top", "0"],
        &["http", "--where", "status_code >= 400 or method = POST", "--by", "uri", "--sort", "p95"],
        &["mysql", "--sort", "p99", "--top", "3"],
        &["mysql", "--where", "error_code > 0", "--by", "error_code,fingerprint"],
        &["pgsql"],
        &["redis", "--by", "command", "--every", "1h"],
        &["dns", "--where", "rcode_name != NOERROR", "--by", "query"],
        &["dns", "--by", "qtype_name", "--from", "2000-01-01", "--to", "2100-01-01"],
        // Grouped by ClickHouse: fields of each kind, nullable keys, time
        // series, every percentile and the mean as sort keys, top-N with
        // groups left out (the note on standard error says how many).
        &["conns", "--by", "service", "--sort", "p95", "--top", "2"],
        &["conns", "--by", "orig_h,resp_p,proto", "--every", "5m", "--sort", "duration_p50", "--top", "3"],
        &["conns", "--by", "duration", "--top", "5", "--sort", "conns"],
        &["conns", "--by", "vlan,local_orig,conn_state", "--sort", "duration_p99:asc", "--top", "0"],
        &["conns", "--by", "ts", "--every", "1h", "--top", "3"],
        &["conns", "--where", "duration > 1ms", "--every", "1m", "--sort", "p50", "--top", "0"],
        &["http", "--by", "method,status_code", "--every", "1m", "--sort", "latency_avg", "--top", "0"],
        &["http", "--by", "host", "--sort", "p50:asc", "--top", "2"],
        &["http", "--where", "uri ~ ?", "--by", "uri", "--top", "0"],
        &["mysql", "--by", "command,status", "--sort", "errors", "--top", "0"],
        &["mysql", "--by", "server,server_port", "--every", "5m", "--sort", "p95"],
        &["pgsql", "--by", "command_tag,status", "--sort", "p99", "--top", "2"],
        &["redis", "--by", "reply_type", "--sort", "latency_p50:asc", "--top", "0"],
        &["redis", "--by", "client", "--sort", "bytes", "--top", "1"],
        &["dns", "--by", "qtype_name,rcode_name", "--every", "5m", "--sort", "p99", "--top", "2"],
        &["dns", "--by", "latency", "--sort", "count", "--top", "4"],
        &["flows", "--by", "iface", "--every", "1h", "--sort", "conns"],
        // The loss table (`query --clickhouse loss`): summed by the same
        // code, so the same minutes, counts and completeness line.
        &["loss"],
        &["loss", "--by", "source,protocol", "--every", "1h"],
        &["loss", "--where", "packets > 0 or protocol = http", "--by", "protocol", "--every", "1d"],
    ];
    for q in questions {
        let (local, remote) = ask_both(&ch, &store, "probe-a", q);
        assert_eq!(stderr(&remote), stderr(&local), "{q:?}");
    }
    // Another probe's name: nothing.
    let o = ch.wirelog(&["query", "conns", "--format", "csv", "--probe", "nobody"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 1, "{}", String::from_utf8_lossy(&o.stdout));
    let o = ch.wirelog(&["query", "loss", "--format", "csv", "--probe", "nobody"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 1, "{}", String::from_utf8_lossy(&o.stdout));

    // Sampled transactions (`capture --cpu-budget`'s weights): every HTTP
    // row standing for 3, the counts and sums ClickHouse groups are 3 times
    // the store's, marked estimated; the latencies' percentiles, of a
    // sample weighted evenly, are the store's.
    let http = ["query", "http", "--by", "host", "--sort", "p95", "--top", "0", "--format", "csv"];
    let local = Command::new(BIN).args(http).args(["--store", store.to_str().unwrap()]).output().unwrap();
    assert!(local.status.success() && !stderr(&local).contains("estimated"), "{}", stderr(&local));
    ch.sql("ALTER TABLE http UPDATE sample_weight = 3 WHERE 1 SETTINGS mutations_sync = 2");
    let mut args = http.to_vec();
    args.extend(["--probe", "probe-a"]);
    let remote = ch.wirelog(&args);
    assert!(remote.status.success(), "{}", stderr(&remote));
    assert!(stderr(&remote).contains("wirelog: estimated: "), "{}", stderr(&remote));
    let (l, r) = (csv(&String::from_utf8_lossy(&local.stdout)), csv(&String::from_utf8_lossy(&remote.stdout)));
    assert!(!l.is_empty() && l.len() == r.len(), "{l:?} / {r:?}");
    for (l, r) in l.iter().zip(&r) {
        assert_eq!(l["host"], r["host"]);
        for c in ["count", "errors", "request_bytes", "response_bytes"] {
            assert_eq!(r[c].parse::<u64>().unwrap(), 3 * l[c].parse::<u64>().unwrap(), "{c}: {l:?} / {r:?}");
        }
        for c in ["latency_p50_s", "latency_p95_s", "latency_p99_s", "latency_avg_s"] {
            assert_eq!(r[c], l[c], "{c}: {l:?} / {r:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// Certificates: the TLS reference captures with certificates into the
/// store and ClickHouse, in batches of a few rows so one certificate's
/// handshakes arrive in several rows: `query x509` answers the same from
/// both (one row per certificate, its handshakes summed), and once
/// ClickHouse has merged (`OPTIMIZE ... FINAL`) the table holds one row per
/// certificate, role and hour with the same sums.
#[test]
fn certificates_into_clickhouse_equal_the_store() {
    use common::tls_cases::{testdata, Log, CASES};
    let Some(ch) = Ch::new("certs") else { return };
    ch.init();
    let d = tmp("certs");
    let (store, spool) = (d.join("store"), d.join("spool"));
    let caps: Vec<String> = CASES
        .iter()
        .filter(|c| c.expected.iter().any(|e| e.0 == Log::X509) && !c.flags.contains(&"--ports"))
        .map(|c| testdata().join(c.case).join(c.pcap).display().to_string())
        .collect();
    assert!(caps.len() >= 8, "{caps:?}");
    let mut args = read_args(store.to_str().unwrap(), "p", spool.to_str().unwrap(), &caps);
    args.extend(["-C", "--clickhouse-batch-rows", "2"]);
    let o = ch.wirelog(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let local_total: u64 = store_totals(&store, "x509", &["handshakes"])[0];
    assert!(local_total >= 30, "{local_total} handshakes in the store");
    assert_eq!(ch_totals(&ch, "x509", &["sum(handshakes)"], Some("p")), [local_total]);
    let keys = "uniqExact(fingerprint, role, host_cert, toStartOfHour(ts))";
    let before = ch_totals(&ch, "x509", &["count()", keys], None);
    assert!(before[0] > before[1], "batches of 2 rows left nothing to fold: {before:?}");

    let every = "fingerprint,role,host_cert,version,serial,subject,issuer,not_valid_before,not_valid_after,key_alg,\
                 sig_alg,key_type,key_length,exponent,curve,san_dns,san_uri,san_email,san_ip,basic_constraints_ca,\
                 basic_constraints_path_len";
    let questions: &[&[&str]] = &[
        &["x509", "--top", "0"],
        &["x509", "--by", every, "--top", "0"],
        &["x509", "--by", "fingerprint,role", "--sort", "handshakes", "--top", "3"],
        &["x509", "--where", "basic_constraints_ca = true or key_length >= 4096", "--by", "subject"],
        &["x509", "--expiring", "0s", "--by", "subject,not_valid_after", "--top", "0"],
        &["x509", "--by", "key_type", "--every", "1h", "--top", "0"],
    ];
    // (The row counts on standard error differ until ClickHouse merges.)
    for q in questions {
        ask_both(&ch, &store, "p", q);
    }
    ch.sql("OPTIMIZE TABLE x509 FINAL");
    let after = ch_totals(&ch, "x509", &["count()", keys, "sum(handshakes)"], None);
    println!(
        "x509: {local_total} handshakes, {} (certificate, role, hour) keys; ClickHouse rows: {} in batches of 2, {} after the merge",
        before[1], before[0], after[0]
    );
    assert_eq!(after, [before[1], before[1], local_total], "one row per certificate, role and hour after the merge");
    for q in questions {
        let (local, remote) = ask_both(&ch, &store, "p", q);
        assert_eq!(stderr(&remote), stderr(&local), "after the merge {q:?}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn refused_then_flushed_later_exactly_once() {
    let Some(ch) = Ch::new("refused") else { return };
    ch.init();
    ch.ctl("down");
    let d = tmp("refused");
    let (store, spool) = (d.join("store"), d.join("spool"));
    let caps = small_captures();
    let mut args = read_args(store.to_str().unwrap(), "p", spool.to_str().unwrap(), &caps);
    args.extend(["--clickhouse-drain", "1s", "--clickhouse-batch-rows", "50"]);
    let o = ch.wirelog(&args);
    // The local store is written whatever ClickHouse does; the run says
    // what waits in the spool.
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("wait in the spool"), "{}", stderr(&o));
    ch.ctl("up");
    assert_eq!(ch.counts(None).values().sum::<u64>(), 0);
    let o = ch.wirelog(&["clickhouse", "flush", "--spool-dir", spool.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_equals_store(&ch, &store, Some("p"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn failures_mid_batch_unanswered_inserts_and_an_outage_lose_and_double_nothing() {
    let Some(ch) = Ch::new("faults") else { return };
    ch.init();
    // Two inserts fail half-way with a 500, then one is applied but never
    // answered (the probe times out and sends it again: same token), one
    // connection is dropped without an answer; then the port goes away for
    // 3 s in the middle of the run.
    ch.ctl("fault?mode=fail500&count=2");
    ch.ctl("fault?mode=hang&count=1");
    ch.ctl("fault?mode=drop&count=1");
    let d = tmp("faults");
    let (store, spool) = (d.join("store"), d.join("spool"));
    let caps = small_captures();
    let mut args = read_args(store.to_str().unwrap(), "p", spool.to_str().unwrap(), &caps);
    args.extend(["--clickhouse-batch-rows", "20", "--clickhouse-timeout", "2s", "--clickhouse-drain", "60s"]);
    let o = ch.wirelog(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_equals_store(&ch, &store, Some("p"));
    let stats = ch.stats();
    assert!(stats.contains("\"faults\": 4"), "{stats}");

    // An outage: down for 3 s while a second probe runs; it retries with
    // backoff and delivers everything when the server is back.
    ch.ctl("down?secs=3");
    let store2 = d.join("store2");
    let spool2 = d.join("spool2");
    let mut args = read_args(store2.to_str().unwrap(), "q", spool2.to_str().unwrap(), &caps);
    args.extend(["--clickhouse-batch-rows", "20", "--clickhouse-drain", "60s"]);
    let t = Instant::now();
    let o = ch.wirelog(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(t.elapsed() >= Duration::from_secs(2), "the outage was not seen");
    assert_equals_store(&ch, &store2, Some("q"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn sigkill_with_batches_spooled_then_restart_delivers_each_record_once() {
    let Some(ch) = Ch::new("sigkill") else { return };
    ch.init();
    ch.ctl("down");
    let d = tmp("sigkill");
    let (store, spool) = (d.join("store"), d.join("spool"));
    let caps = small_captures();
    let mut args: Vec<String> = read_args(store.to_str().unwrap(), "p", spool.to_str().unwrap(), &caps)
        .into_iter()
        .map(String::from)
        .collect();
    args.extend(["--clickhouse-batch-rows", "30", "--clickhouse-drain", "120s"].map(String::from));
    args.extend(["--clickhouse".into(), ch.url(), "--clickhouse-database".into(), ch.db.clone()]);
    let mut child = Command::new(BIN).args(&args).stderr(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
    // Wait until the run is draining (logs and store written, in staging;
    // every batch spooled), then kill it without a chance to clean up.
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let t = Instant::now();
    while !line.contains("batches wait for ClickHouse") {
        line.clear();
        if err.read_line(&mut line).unwrap() == 0 || t.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the run never waited for ClickHouse");
        }
    }
    std::thread::sleep(Duration::from_millis(1500));
    let spooled = std::fs::read_dir(&spool)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".batch"))
        .count();
    assert!(spooled > 1, "{spooled} batches spooled");
    child.kill().unwrap();
    child.wait().unwrap();
    // Back, but the first insert is applied and never answered: the
    // restarted probe sends it again with the token from the spool file.
    ch.ctl("up");
    ch.ctl("fault?mode=hang&count=1");
    let o = ch.wirelog(&["clickhouse", "flush", "--spool-dir", spool.to_str().unwrap(), "--clickhouse-timeout", "2s"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("from an earlier run"), "{}", stderr(&o));
    // Killed before the capture was recorded: the store shows none of it
    // until the same read runs again (README, "After a crash"), and that
    // run's batches are the ones ClickHouse already has.
    let counts = ch.counts(Some("p"));
    let o = Command::new(BIN).args(&args).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("unfinished read"), "{}", stderr(&o));
    assert_eq!(ch.counts(Some("p")), counts, "the second run's batches were deduplicated");
    assert_equals_store(&ch, &store, Some("p"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn two_probes_into_one_database_per_probe_and_fleet_wide() {
    let Some(ch) = Ch::with_auth("fleet", "?user=probe&password=s3cret") else { return };
    let d = tmp("fleet");
    // Wrong password: a clear error naming the server's complaint.
    let o = Command::new(BIN)
        .args(["clickhouse", "init", "--clickhouse", &ch.url(), "--clickhouse-database", "fleet", "--clickhouse-user", "probe"])
        .env("WIRELOG_CLICKHOUSE_PASSWORD", "wrong")
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("Authentication failed"), "{}", stderr(&o));
    let pw = d.join("pw");
    std::fs::write(&pw, "s3cret\n").unwrap();
    let auth = ["--clickhouse-user", "probe", "--clickhouse-password-file", pw.to_str().unwrap()];
    let mut init = vec!["clickhouse", "init"];
    init.extend(auth);
    let o = ch.wirelog(&init);
    assert!(o.status.success(), "{}", stderr(&o));
    let caps = small_captures();
    let (half_a, half_b) = caps.split_at(caps.len() / 2);
    let run = |name: &str, caps: &[String]| {
        let store = d.join(format!("store-{name}"));
        let spool = d.join(format!("spool-{name}"));
        let mut args: Vec<String> = read_args(store.to_str().unwrap(), name, spool.to_str().unwrap(), caps)
            .into_iter()
            .map(String::from)
            .collect();
        args.extend(auth.map(String::from));
        args.extend(["--clickhouse".into(), ch.url(), "--clickhouse-database".into(), "fleet".into()]);
        (Command::new(BIN).args(&args).stdout(Stdio::null()).spawn().unwrap(), store)
    };
    let (mut a, store_a) = run("alpha", half_a);
    let (mut b, store_b) = run("beta", half_b);
    assert!(a.wait().unwrap().success() && b.wait().unwrap().success());
    assert_equals_store(&ch, &store_a, Some("alpha"));
    assert_equals_store(&ch, &store_b, Some("beta"));
    let (ca, cb, all) = (ch.counts(Some("alpha")), ch.counts(Some("beta")), ch.counts(None));
    for (t, n) in &all {
        assert_eq!(*n, ca[t] + cb[t], "{t}");
    }
    // The same query per probe (= its own store) and fleet-wide.
    let q = |extra: &[&str]| {
        let mut a = vec!["query", "conns", "--by", "proto", "--format", "csv"];
        a.extend(extra);
        a.extend(auth);
        let o = ch.wirelog(&a);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let local = |store: &Path| {
        let o = Command::new(BIN)
            .args(["query", "conns", "--by", "proto", "--format", "csv", "--store", store.to_str().unwrap()])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert_eq!(q(&["--probe", "alpha"]), local(&store_a));
    assert_eq!(q(&["--probe", "beta"]), local(&store_b));
    assert_eq!(q(&["--probe", "alpha,beta"]), q(&[]));
    let fleet = csv(&q(&[]));
    let total: u64 = fleet.iter().map(|r| r["conns"].parse::<u64>().unwrap()).sum();
    assert_eq!(total, all["conns"]);
    let _ = std::fs::remove_dir_all(&d);
}

/// An API answer without what differs by backend for the same records:
/// the time it took and the rows scanned (the store counts the rows of the
/// row groups it read, ClickHouse only what matched).
fn comparable(mut v: serde_json::Value) -> serde_json::Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("elapsed_ms");
        o.remove("rows_scanned");
    }
    v
}

fn api_json(addr: std::net::SocketAddr, path: &str) -> serde_json::Value {
    let (status, body) = common::serve::get(addr, path);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

#[test]
fn serve_from_clickhouse_answers_as_serve_from_the_store() {
    let Some(ch) = Ch::new("serve") else { return };
    ch.init();
    let d = tmp("serve");
    let caps = small_captures();
    // Two probes into ClickHouse; the store holds probe-a's records only.
    let (store, spool) = (d.join("store"), d.join("spool"));
    let o = ch.wirelog(&read_args(store.to_str().unwrap(), "probe-a", spool.to_str().unwrap(), &caps));
    assert!(o.status.success(), "{}", stderr(&o));
    let (store_b, spool_b) = (d.join("store-b"), d.join("spool-b"));
    let o = ch.wirelog(&read_args(store_b.to_str().unwrap(), "probe-b", spool_b.to_str().unwrap(), &caps[..3]));
    assert!(o.status.success(), "{}", stderr(&o));
    let local = common::serve::start(&["serve", "--store", store.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    let url = ch.url();
    let remote = common::serve::start(&[
        "serve", "--clickhouse", &url, "--clickhouse-database", &ch.db, "--probe", "probe-a", "--listen", "127.0.0.1:0",
    ]);
    let questions = [
        "/api/query?kind=conns",
        "/api/query?kind=conns&by=service&sort=p95&top=2",
        "/api/query?kind=conns&by=proto&every=1h&sort=duration_p99",
        "/api/query?kind=flows&by=dport&top=3",
        "/api/query?kind=http&by=host,status_code&top=0",
        "/api/query?kind=http&where=status_code%20%3E%3D%20400&by=uri",
        "/api/query?kind=mysql&sort=p99&top=3",
        "/api/query?kind=pgsql&by=command_tag",
        "/api/query?kind=redis&by=command&every=1m",
        "/api/query?kind=dns&by=qtype_name,rcode_name&sort=latency_avg&top=2",
        "/api/query?kind=dns&by=query&from=2000-01-01&to=2100-01-01",
        "/api/records?kind=http&limit=1000",
        "/api/records?kind=conns&limit=5",
        "/api/map",
    ];
    let mut rows = 0;
    for q in questions {
        let want = comparable(api_json(local.addr, q));
        let got = comparable(api_json(remote.addr, q));
        assert_eq!(got, want, "{q}");
        rows += want["rows"].as_array().map_or(0, |r| r.len());
    }
    assert!(rows > 100, "only {rows} rows compared");
    // A connection's sequence: the same conn and calls.
    let recs = api_json(local.addr, "/api/records?kind=mysql&limit=1000");
    let uid = recs["rows"][0]["uid"].as_str().unwrap().to_string();
    let q = format!("/api/sequence?uid={uid}");
    let want = api_json(local.addr, &q);
    assert!(!want["calls"].as_array().unwrap().is_empty(), "{want}");
    assert_eq!(api_json(remote.addr, &q), want, "{q}");
    // The extent: rows and times per kind as the store's (files and bytes
    // are ClickHouse's parts, not Parquet files).
    let (want, got) = (api_json(local.addr, "/api/extent"), api_json(remote.addr, "/api/extent"));
    for (w, g) in want.as_array().unwrap().iter().zip(got.as_array().unwrap()) {
        for k in ["kind", "rows", "first_ns", "last_ns"] {
            assert_eq!(g[k], w[k], "extent {k}: {g} vs {w}");
        }
    }
    // Fleet-wide: both probes' records.
    let fleet = common::serve::start(&["serve", "--clickhouse", &url, "--clickhouse-database", &ch.db, "--listen", "127.0.0.1:0"]);
    let all = api_json(fleet.addr, "/api/query?kind=conns&by=proto&top=0");
    let (a, b) = (counts_of(&ch, "probe-a"), counts_of(&ch, "probe-b"));
    assert_eq!(all["total"]["conns"].as_u64(), Some(a + b), "{all}");
    // ClickHouse away: 502 naming it, not a hang or an empty answer.
    ch.ctl("down");
    let (status, body) = common::serve::get(remote.addr, "/api/query?kind=conns");
    ch.ctl("up");
    assert_eq!(status, 502, "{body}");
    assert!(body.contains("ClickHouse http://127.0.0.1:"), "{body}");
    // Not there at all: serve says so at start.
    let o = Command::new(BIN)
        .args(["serve", "--clickhouse", &url, "--clickhouse-database", "nosuchdb", "--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("nosuchdb"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&d);
}

fn counts_of(ch: &Ch, probe: &str) -> u64 {
    ch.sql(&format!("SELECT count() FROM conns WHERE probe = '{probe}'")).trim().parse().unwrap()
}

#[test]
fn init_upgrades_what_it_can_and_names_what_it_cannot() {
    let Some(ch) = Ch::new("schema") else { return };
    ch.init();
    assert_eq!(ch.sql("SELECT max(version) FROM wirelog_schema").trim(), wirelog_clickhouse::SCHEMA_VERSION.to_string());
    // A table with the deduplication window, partitioned by day, TTL on --retain.
    let o = ch.wirelog(&["clickhouse", "init", "--retain", "30d"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ddl = ch.sql("SELECT create_table_query FROM system.tables WHERE database = 'schema' AND name = 'flows'");
    for want in ["PARTITION BY toDate(bucket)", "non_replicated_deduplication_window = 10000", "TTL toDateTime(bucket) + toIntervalSecond(2592000)", "LowCardinality(String)", "CODEC(Delta(8), ZSTD(1))"] {
        assert!(ddl.contains(want), "{want} not in {ddl}");
    }
    // A column gone missing is added back.
    ch.sql("ALTER TABLE http DROP COLUMN user_agent");
    let o = ch.wirelog(&["clickhouse", "init"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("1 missing columns added"), "{}", stderr(&o));
    assert_eq!(ch.sql("SELECT count() FROM system.columns WHERE database = 'schema' AND table = 'http' AND name = 'user_agent'").trim(), "1");
    // A version 1 database (transaction tables without the owner columns)
    // is upgraded: the columns are added in the schema's place, so inserts
    // (RowBinary, no column list) fit.
    let owners = ["pid", "proc", "exe", "user", "container", "pod"];
    for side in ["orig", "resp"] {
        for o in owners {
            ch.sql(&format!("ALTER TABLE http DROP COLUMN {side}_{o}"));
        }
    }
    // (Version 1 had no certificate table either.)
    ch.sql("DROP TABLE x509");
    ch.sql("TRUNCATE TABLE wirelog_schema");
    ch.sql("INSERT INTO wirelog_schema (version, wirelog) VALUES (1, 'old')");
    let o = ch.wirelog(&["clickhouse", "init"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = wirelog_clickhouse::SCHEMA_VERSION;
    assert!(stderr(&o).contains(&format!("upgraded from schema version 1 to {v}")), "{}", stderr(&o));
    let cols = ch.sql("SELECT name FROM system.columns WHERE database = 'schema' AND table = 'http' ORDER BY position");
    let cols: Vec<&str> = cols.lines().collect();
    let want: Vec<String> = ["orig", "resp"].iter().flat_map(|s| owners.map(|o| format!("{s}_{o}"))).collect();
    assert_eq!(cols[cols.len() - 12..], want, "{cols:?}");
    // The http table's own columns end with HTTP/2's (record::http's
    // declared order), then the columns of every kind (`source`).
    assert_eq!(cols[cols.len() - 14..cols.len() - 12], ["promised_by", "source"], "{cols:?}");
    // A version 2 database (no certificate table): init creates it, a
    // SummingMergeTree keyed by probe, certificate, role and hour.
    ch.sql("DROP TABLE x509");
    ch.sql("TRUNCATE TABLE wirelog_schema");
    ch.sql("INSERT INTO wirelog_schema (version, wirelog) VALUES (2, 'old')");
    let o = ch.wirelog(&["clickhouse", "init"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("upgraded from schema version 2 to {v}")), "{}", stderr(&o));
    let ddl = ch.sql("SELECT engine, sorting_key FROM system.tables WHERE database = 'schema' AND name = 'x509'");
    assert_eq!(ddl.trim(), "SummingMergeTree\tprobe, fingerprint, role, host_cert, toStartOfHour(ts)", "{ddl}");
    assert_eq!(ch.sql("SELECT max(version) FROM wirelog_schema").trim(), v.to_string());
    // A version 4 database (transaction tables without `source` and
    // without sample weights): init adds `source` after the kind's own
    // columns, before the owners, and `sample_weight` after
    // `first_byte_latency`.
    for t in ["http", "dns", "mysql"] {
        ch.sql(&format!("ALTER TABLE {t} DROP COLUMN source"));
        ch.sql(&format!("ALTER TABLE {t} DROP COLUMN sample_weight"));
    }
    ch.sql("TRUNCATE TABLE wirelog_schema");
    ch.sql("INSERT INTO wirelog_schema (version, wirelog) VALUES (4, 'old')");
    let o = ch.wirelog(&["clickhouse", "init"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("upgraded from schema version 4 to {v}")), "{}", stderr(&o));
    for t in ["http", "dns", "mysql"] {
        let cols = ch.sql(&format!("SELECT name, type FROM system.columns WHERE database = 'schema' AND table = '{t}' ORDER BY position"));
        let cols: Vec<&str> = cols.lines().collect();
        assert_eq!(cols[cols.len() - 13], "source\tLowCardinality(String)", "{t}: {cols:?}");
        let at = cols.iter().position(|c| c.starts_with("first_byte_latency\t")).unwrap();
        assert_eq!(cols[at + 1], "sample_weight\tNullable(UInt64)", "{t}: {cols:?}");
    }
    // A column of another type, and a newer schema: said, nothing changed.
    ch.sql("ALTER TABLE dns MODIFY COLUMN qtype Nullable(String)");
    let o = ch.wirelog(&["clickhouse", "init"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("dns.qtype is Nullable(String), wirelog writes Nullable(UInt64)"), "{}", stderr(&o));
    ch.sql("ALTER TABLE dns MODIFY COLUMN qtype Nullable(UInt64)");
    ch.sql("INSERT INTO wirelog_schema (version, wirelog) VALUES (99, 'future')");
    let o = ch.wirelog(&["clickhouse", "init"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("schema version 99"), "{}", stderr(&o));
    // The cluster layout, as printed.
    let o = ch.wirelog(&["clickhouse", "init", "--cluster", "fleet", "--print"]);
    let ddl = String::from_utf8_lossy(&o.stdout);
    assert!(ddl.contains("ReplicatedMergeTree") && ddl.contains("ENGINE = Distributed(`fleet`"), "{ddl}");
}

/// `--cluster`: every statement parses in the real engine, and the layout
/// runs in chdb configured with the cluster and the macros, with what needs
/// Keeper left out (ON CLUSTER; ReplicatedMergeTree as MergeTree, its path
/// and replica checked): the Distributed tables are created over the local
/// ones with the same columns (tests/clickhouse/cluster_ddl.py).
#[test]
fn cluster_ddl_parses_and_runs_as_far_as_one_process_can() {
    if endpoint().is_none() {
        return;
    }
    let o = Command::new(BIN)
        .args(["clickhouse", "init", "--clickhouse", "http://127.0.0.1:1", "--cluster", "fleet", "--retain", "90d", "--print"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let mut child = Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clickhouse/cluster_ddl.py"))
        .arg("fleet")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&o.stdout).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["parsed"], v["statements"], "{v}");
    let tables = v["tables"].as_object().unwrap();
    for t in ["flows", "conns", "http", "mysql", "pgsql", "redis", "dns", "tls", "x509", "health", "wirelog_schema"] {
        assert_eq!(tables[t], "Distributed", "{v}");
        let family = if t == "x509" { "SummingMergeTree" } else { "MergeTree" };
        assert_eq!(tables[&format!("{t}_local")], family, "{v}");
        assert_eq!(v["distributed"][t], true, "{t}: columns differ from {t}_local: {v}");
    }
}

#[test]
fn a_full_spool_drops_counts_and_says_so() {
    let Some(ch) = Ch::new("full") else { return };
    let Some(mixed) = common::capture("gen_mixed.sh", "mixed.pcap") else { return };
    ch.init();
    ch.ctl("down");
    let d = tmp("full");
    let (store, spool) = (d.join("store"), d.join("spool"));
    let caps = [mixed.display().to_string()];
    let mut args = read_args(store.to_str().unwrap(), "p", spool.to_str().unwrap(), &caps);
    args.extend(["--spool-size", "1M", "--clickhouse-batch-rows", "1000", "--clickhouse-drain", "1s"]);
    let o = ch.wirelog(&args);
    let err = stderr(&o);
    // The store is whole; ClickHouse's share is partial: exit code 3.
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("the spool is full (--spool-size)"), "{err}");
    let dropped: u64 = err
        .split("; ")
        .find_map(|p| p.strip_suffix(" batches DROPPED (spool full)"))
        .and_then(|p| p.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no dropped count in {err}"));
    assert!(dropped > 0);
    let size: u64 = std::fs::read_dir(&spool).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
    assert!(size <= 1 << 20, "spool {size} bytes");
    ch.ctl("up");
    let o = ch.wirelog(&["clickhouse", "flush", "--spool-dir", spool.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    // What arrived plus what was counted as dropped is everything the store holds.
    let arrived: u64 = ch.counts(None).values().sum();
    let o = Command::new(BIN).args(["store", "--store", store.to_str().unwrap()]).output().unwrap();
    let listing = String::from_utf8_lossy(&o.stdout);
    let local: u64 = listing
        .lines()
        .filter(|l| ["flows ", "conns ", "http ", "mysql ", "pgsql ", "redis ", "dns "].iter().any(|k| l.starts_with(k)))
        .map(|l| l.split_whitespace().nth(3).unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(arrived > 0, "nothing arrived");
    assert_eq!(arrived + dropped, local, "{listing}\n{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Health rows while capturing (on the host's loopback, where the probe's
/// own inserts to the endpoint are the traffic).
#[test]
fn capture_sends_health_rows() {
    if !common::live::is_root() {
        common::live::skip("live capture needs root");
        return;
    }
    let Some(ch) = Ch::new("health") else { return };
    ch.init();
    let d = tmp("health");
    let spool = d.join("spool");
    let filter = format!("tcp port {}", ch.port);
    let o = ch.wirelog(&[
        "capture", "-i", "lo", "-q", "--duration", "4s", "--no-store", "--logs", d.join("logs").to_str().unwrap(),
        "-f", &filter, "--probe-name", "h1", "--spool-dir", spool.to_str().unwrap(),
        "--clickhouse-health-interval", "1s", "--clickhouse-batch-age", "1s",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = ch.sql("SELECT count(), countIf(rss_bytes > 1000000), sum(packets) > 0, max(interval_s), min(probe = 'h1' AND iface = 'lo') FROM health");
    let f: Vec<&str> = rows.trim().split('\t').collect();
    let n: u64 = f[0].parse().unwrap();
    assert!(n >= 3, "{rows}");
    assert_eq!(f[1].parse::<u64>().unwrap(), n, "{rows}");
    assert_eq!(&f[2..], ["1", "1", "1"], "{rows}");
    // Connections to the endpoint itself were recorded too, tagged with the interface.
    assert!(ch.counts(Some("h1"))["conns"] > 0);
    let _ = std::fs::remove_dir_all(&d);
}

/// A test-only server: HTTP/1.1 on one loopback port, the same over TLS
/// (Python's ssl, linked to the system's OpenSSL) on another; prints both
/// ports, exits when its stdin closes.
const TWO_PORT_SERVER: &str = r#"
import http.server, os, ssl, sys, threading
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = b"x" * 1000
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
plain = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
tls = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
tls.socket = ctx.wrap_socket(tls.socket, server_side=True)
for s in (plain, tls):
    threading.Thread(target=s.serve_forever, daemon=True).start()
print(plain.server_address[1], tls.server_address[1], flush=True)
sys.stdin.read()
os._exit(0)
"#;

/// `capture --tls-plaintext` into the store and ClickHouse: the `source`
/// column says where each transaction's bytes came from, `packets` for the
/// clear port's and `tls-library` for the TLS port's, in both, and queries
/// filter and group by it the same on both.
#[test]
fn tls_plaintext_source_reaches_the_store_and_clickhouse() {
    if !common::live::is_root() {
        common::live::skip("tls-plaintext needs root (eBPF)");
        return;
    }
    for p in ["openssl", "curl", "python3"] {
        if !common::lo::have(p) {
            common::live::skip(&format!("{p} is not installed"));
            return;
        }
    }
    let Some(ch) = Ch::new("tlssource") else { return };
    ch.init();
    let d = tmp("tlssource");
    let (store, spool) = (d.join("store"), d.join("spool"));
    let (key, cert) = (d.join("key.pem"), d.join("cert.pem"));
    let o = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=localhost"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let mut server = Command::new("python3")
        .args(["-c", TWO_PORT_SERVER])
        .arg(&cert)
        .arg(&key)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let ports: Vec<u16> = line.split_whitespace().map(|p| p.parse().unwrap()).collect();
    let (clear, tls) = (ports[0], ports[1]);
    let filter = format!("tcp port {clear} or tcp port {tls}");
    // Only the server's TLS calls: the probes see every process of the host.
    let pid = server.id().to_string();
    let mut cap = Command::new(BIN)
        .args(["capture", "-i", "lo", "--stats-interval", "0", "--user", "root", "-f", &filter, "--tls-plaintext", &pid])
        .args(["--store", store.to_str().unwrap(), "--probe-name", "tls1", "--spool-dir", spool.to_str().unwrap()])
        .args(["--clickhouse-batch-age", "1s", "--clickhouse", &ch.url(), "--clickhouse-database", &ch.db])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(cap.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    assert!(first.contains("capturing on"), "capture did not start: {first}");
    let rest = std::thread::spawn(move || {
        let mut rest = first;
        err.read_to_string(&mut rest).unwrap();
        rest
    });
    for (scheme, port) in [("http", clear), ("https", tls)] {
        let url = format!("{scheme}://127.0.0.1:{port}/a");
        let o = Command::new("curl").args(["-skf", "--http1.1", "-o", "/dev/null", "-o", "/dev/null", &url, &url]).output().unwrap();
        assert!(o.status.success(), "curl {url}: {}", stderr(&o));
    }
    // The TLS transactions wait for their connection's end in the packets.
    std::thread::sleep(Duration::from_millis(500));
    common::live::sh(&["kill", "-INT", &cap.id().to_string()]);
    let status = cap.wait().unwrap();
    let err = rest.join().unwrap();
    drop(server.stdin.take());
    let _ = server.wait();
    assert!(status.success(), "{err}");
    // ClickHouse: two requests per port, each port's from its source.
    let got = ch.sql(&format!(
        "SELECT server_port, source, count() FROM http WHERE probe = 'tls1' AND server_port IN ({clear}, {tls}) GROUP BY server_port, source ORDER BY server_port = {tls}"
    ));
    assert_eq!(got, format!("{clear}\tpackets\t2\n{tls}\ttls-library\t2\n"), "{err}");
    // The store and ClickHouse answer one query the same, filtering and
    // grouping by source.
    let (local, _) = ask_both(&ch, &store, "tls1", &["http", "--where", "source = tls-library or source = packets", "--by", "server_port,source"]);
    let rows = csv(&String::from_utf8_lossy(&local.stdout));
    let mut seen: Vec<(String, String, String)> = rows
        .iter()
        .filter(|r| [clear.to_string(), tls.to_string()].contains(&r["server_port"]))
        .map(|r| (r["server_port"].clone(), r["source"].clone(), r["count"].clone()))
        .collect();
    seen.sort_by_key(|r| r.0 == tls.to_string());
    let want = [(clear.to_string(), "packets".to_string(), "2".to_string()), (tls.to_string(), "tls-library".to_string(), "2".to_string())];
    assert_eq!(seen, want, "{rows:?}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Rows per kind in a local store, read by DuckDB (conns, flows), and an
/// MD5 of its sorted connection uids.
fn store_rows_and_uids(store: &Path) -> (u64, u64, String) {
    let glob = |kind: &str| store.join(kind).join("*/*/*.parquet").display().to_string();
    let script = format!(
        "import duckdb,glob\n\
         c=duckdb.connect()\n\
         n=lambda g: c.execute(\"select count(*) from read_parquet('%s')\" % g).fetchone()[0] if glob.glob(g) else 0\n\
         u=c.execute(\"select md5(coalesce(string_agg(uid, ',' order by uid), '')) from read_parquet('{0}')\").fetchone()[0] if glob.glob('{0}') else ''\n\
         print(n('{0}'), n('{1}'), u)",
        glob("conns"),
        glob("flows")
    );
    let out = Command::new("python3").arg("-c").arg(&script).output().unwrap();
    assert!(out.status.success(), "DuckDB on {}: {}", store.display(), String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let f: Vec<&str> = text.split_whitespace().collect();
    (f[0].parse().unwrap(), f[1].parse().unwrap(), f.get(2).unwrap_or(&"").to_string())
}

/// ClickHouse's MD5 of a probe's sorted connection uids (as DuckDB writes it).
fn ch_uids(ch: &Ch, probe: &str) -> String {
    ch.sql(&format!(
        "SELECT lower(hex(MD5(arrayStringConcat(arraySort(groupArray(uid)), ',')))) FROM conns WHERE probe = '{probe}'"
    ))
    .trim()
    .to_string()
}

/// SIGKILL of `read --store --clickhouse` at 20 random moments (every other
/// one while every fourth insert is answered 503), each followed by the
/// recovery README gives (`clickhouse flush`, then the same `read` again):
/// the store and ClickHouse each hold exactly one clean run's rows, with
/// the clean run's uids (the same connection, the same uid, in every run).
#[test]
fn twenty_kills_of_read_then_the_recovery_give_exactly_one_run_in_the_store_and_clickhouse() {
    let Some(ch) = Ch::new("exact") else { return };
    ch.init();
    let d = tmp("exact");
    let pcap = d.join("many.pcap");
    std::fs::write(&pcap, common::synthetic_pcap(10_000)).unwrap();
    let args = |probe: &str| -> Vec<String> {
        let (store, spool) = (d.join(format!("store-{probe}")), d.join(format!("spool-{probe}")));
        let mut a: Vec<String> = ["read", "-q", "--udp-timeout", "1s", "--clickhouse-batch-rows", "2000"].map(String::from).to_vec();
        a.extend(["--store".into(), store.display().to_string(), "--spool-dir".into(), spool.display().to_string()]);
        a.extend(["--probe-name".into(), probe.into(), "--clickhouse-drain".into(), "60s".into()]);
        a.extend(["--clickhouse".into(), ch.url(), "--clickhouse-database".into(), ch.db.clone()]);
        a.push(pcap.display().to_string());
        a
    };
    // One clean run: what every recovered one must hold.
    let t = Instant::now();
    let o = Command::new(BIN).args(args("clean")).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let whole = t.elapsed();
    let (conns, flows, uids) = store_rows_and_uids(&d.join("store-clean"));
    assert_eq!(conns, 10_000, "one connection per packet");
    assert!(flows > 0);
    let want = ch.counts(Some("clean"));
    assert_eq!((want["conns"], want["flows"]), (conns, flows), "the clean run in ClickHouse");
    assert_eq!(ch_uids(&ch, "clean"), uids, "ClickHouse's uids are the store's");

    let mut seed = (std::process::id() as u64) << 16 | 1;
    // Kills the recovery read found recorded (the run had finished) and
    // those whose staged store files it removed.
    let (mut finished, mut unfinished) = (0, 0);
    for k in 0..20 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // Anywhere in a run, its start and its end included.
        let at = Duration::from_micros(seed % (whole.as_micros() as u64 * 6 / 5).max(1));
        let probe = format!("k{k}");
        let flaky = k % 2 == 1;
        if flaky {
            ch.ctl("flaky?every=4");
        }
        let mut child = Command::new(BIN).args(args(&probe)).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        std::thread::sleep(at);
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        // The recovery, with the 503s going on.
        let spool = d.join(format!("spool-{probe}"));
        if spool.is_dir() {
            let o = ch.wirelog(&["clickhouse", "flush", "--spool-dir", spool.to_str().unwrap(), "--wait", "60s"]);
            assert!(o.status.success(), "kill {k} at {at:?}: flush: {}", stderr(&o));
        }
        let o = Command::new(BIN).args(args(&probe)).output().unwrap();
        // A run killed after it recorded the capture left nothing to do.
        let done = stderr(&o).contains("already in the store");
        finished += done as u32;
        unfinished += stderr(&o).contains("unfinished read") as u32;
        assert!(o.status.success() || done, "kill {k} at {at:?}: read again: {}", stderr(&o));
        if flaky {
            ch.ctl("flaky?every=0");
        }
        let store = d.join(format!("store-{probe}"));
        let what = format!("kill {k} at {at:?} (503s: {flaky}, already recorded: {done})");
        assert_eq!(store_rows_and_uids(&store), (conns, flows, uids.clone()), "{what}: the store");
        assert_eq!(ch.counts(Some(&probe)), want, "{what}: ClickHouse");
        assert_eq!(ch_uids(&ch, &probe), uids, "{what}: ClickHouse's uids");
        let staged = std::fs::read_dir(store.join(".staging")).map(|r| r.count()).unwrap_or(0);
        assert_eq!(staged, 0, "{what}: runs left in staging");
    }
    eprintln!("20 kills: {finished} after the run had recorded its capture, {unfinished} left staged files");
    assert!(unfinished > 0, "no kill landed in the middle of a run");
    let _ = std::fs::remove_dir_all(&d);
}
