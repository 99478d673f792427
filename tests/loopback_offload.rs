//! Captures of a host's own traffic, taken the way a user takes them:
//! `tcpdump -i lo` while curl talks to nginx and clients talk to MariaDB,
//! all inside a network namespace this test creates. On loopback Linux never
//! fills in TCP/UDP checksums (CHECKSUM_PARTIAL), so every packet carries the
//! offload signature.
//!
//! (a) `wirelog read` with no option gives the same conn records and
//!     transactions as with `-C`; a copy of the capture with a few checksums
//!     corrupted (not to the signature) rejects exactly those packets: the
//!     summary's bad count is the number corrupted, each one's connection has
//!     history `C`/`c` and counts that many packets fewer.
//! (b) Server-first: MariaDB on a non-standard port. A Python client opens
//!     the TCP connection while the server's packets on that port are held
//!     in a qdisc (so the greeting is not sent yet), tcpdump starts, the
//!     qdisc goes and the server's retransmitted greeting is the first packet
//!     of the connection the capture sees; the client then logs in and runs
//!     queries (raw MySQL protocol, an account with no password). Every query
//!     is found with `--ports mysql=PORT` and by content alone.
//!
//! Needs root, `ip netns`, tc (htb and u32), tcpdump, nginx, curl, MariaDB
//! and python3 (scripts/test.sh installs them); without them the test is
//! skipped with a message (fails under WIRELOG_REQUIRE_ALL_TESTS=1).

mod common;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::live::{is_root, skip, BIN};
use common::lo::{have, settle, wait_for, LoNs};
use common::read_log;

type Row = HashMap<String, String>;

const HTTP_PORT: &str = "8080";
/// Not a MySQL port anywhere in wirelog's defaults.
const DB_PORT: &str = "13306";
const QUERIES: usize = 20;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wirelog-lo-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `wirelog read ARGS PCAP` into `out`/logs; returns stderr (the summary).
fn read(pcap: &Path, out: &Path, args: &[&str]) -> String {
    let _ = std::fs::remove_dir_all(out);
    let o = Command::new(BIN)
        .arg("read")
        .args(args)
        .arg("--logs")
        .arg(out.join("logs"))
        .arg("--store")
        .arg(out.join("store"))
        .arg(pcap)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "wirelog read {args:?}: {err}");
    err
}

fn rows(out: &Path, log: &str) -> Vec<Row> {
    let p = out.join("logs").join(log);
    if p.exists() {
        read_log(&p)
    } else {
        Vec::new()
    }
}

/// (valid, offloaded, bad) from the summary's checksum line.
fn checksum_counts(summary: &str) -> (u64, u64, u64) {
    let line = summary
        .lines()
        .find(|l| l.contains("checksums (") && l.contains(" offloaded"))
        .unwrap_or_else(|| panic!("no checksum line in:\n{summary}"));
    let nums: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    (nums[0], nums[1], nums[2])
}

/// Connection key independent of orientation: the two endpoints, sorted.
fn endpoints(r: &Row) -> (String, String) {
    let a = format!("{}:{}", r["id.orig_h"], r["id.orig_p"]);
    let b = format!("{}:{}", r["id.resp_h"], r["id.resp_p"]);
    if a < b {
        (a, b)
    } else {
        (b, a)
    }
}

/// conn.log without uid and ts, keyed by oriented 5-tuple.
fn conns(out: &Path) -> BTreeMap<String, String> {
    const F: [&str; 10] = [
        "conn_state", "history", "service", "orig_bytes", "resp_bytes", "missed_bytes", "orig_pkts",
        "resp_pkts", "orig_ip_bytes", "resp_ip_bytes",
    ];
    rows(out, "conn.log")
        .iter()
        .map(|r| {
            let k = format!("{} {}:{} > {}:{}", r["proto"], r["id.orig_h"], r["id.orig_p"], r["id.resp_h"], r["id.resp_p"]);
            (k, F.iter().map(|f| format!("{f}={}", r[*f])).collect::<Vec<_>>().join(" "))
        })
        .collect()
}

/// Transactions of a log as sorted lines of the named fields.
fn txs(out: &Path, log: &str, fields: &[&str]) -> Vec<String> {
    let mut v: Vec<String> =
        rows(out, log).iter().map(|r| fields.iter().map(|f| r[*f].as_str()).collect::<Vec<_>>().join(" ")).collect();
    v.sort();
    v
}

const HTTP_FIELDS: [&str; 7] = ["id.orig_p", "id.resp_p", "method", "uri", "status_code", "response_body_len", "status"];
const MYSQL_FIELDS: [&str; 6] = ["id.orig_p", "id.resp_p", "cmd", "arg", "success", "status"];

/// Writes a copy of `src` (pcap, Ethernet or raw IPv4 on `lo`) where a few
/// TCP data segments carry a corrupt checksum: neither the offload
/// signature nor the correct value. Prints one JSON object per corrupted
/// packet (its ports).
const CORRUPT_PY: &str = r#"
import json, struct, sys
src, dst, every, most = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
data = bytearray(open(src, 'rb').read())
magic = data[:4]
assert magic in (b'\xd4\xc3\xb2\xa1', b'\x4d\x3c\xb2\xa1'), 'little-endian pcap expected'
linktype = struct.unpack_from('<I', data, 20)[0]
l2 = {1: 14, 101: 0, 228: 0}[linktype]
def fold(s):
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return s
def csum(b):
    if len(b) % 2:
        b = b + b'\0'
    return fold(sum(struct.unpack('!%dH' % (len(b) // 2), b)))
off, n, done = 24, 0, []
while off + 16 <= len(data) and len(done) < most:
    incl = struct.unpack_from('<I', data, off + 8)[0]
    p = off + 16
    ip = p + l2
    off = p + incl
    if data[ip] >> 4 != 4 or data[ip + 9] != 6:
        continue
    ihl = (data[ip] & 15) * 4
    total = struct.unpack_from('!H', data, ip + 2)[0]
    tcp = ip + ihl
    doff = (data[tcp + 12] >> 4) * 4
    if total - ihl - doff <= 0:
        continue
    n += 1
    if n % every != 3:
        continue
    seg = bytes(data[tcp:ip + total])
    pseudo = csum(bytes(data[ip + 12:ip + 20]) + struct.pack('!HH', 6, total - ihl))
    field = struct.unpack_from('!H', data, tcp + 16)[0]
    zeroed = seg[:16] + b'\0\0' + seg[18:]
    right = (~fold(csum(zeroed) + pseudo)) & 0xffff
    new = field ^ 0x0101
    assert new != pseudo and new != right
    struct.pack_into('!H', data, tcp + 16, new)
    sport, dport = struct.unpack_from('!HH', data, tcp)
    done.append({'sport': sport, 'dport': dport, 'offloaded': field == pseudo})
open(dst, 'wb').write(data)
for d in done:
    print(json.dumps(d))
"#;

/// A MySQL client speaking the protocol itself: connects, says so, waits for
/// the server's greeting (held back by the test), logs in as `wl` with no
/// password (mysql_native_password), runs QUERIES statements and quits.
const CLIENT_PY: &str = r#"
import socket, struct, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(('127.0.0.1', port))
s.settimeout(60)
print('connected', flush=True)
def recv_exact(k):
    b = b''
    while len(b) < k:
        c = s.recv(k - len(b))
        if not c:
            raise SystemExit('server closed')
        b += c
    return b
def packet():
    h = recv_exact(4)
    return h[3], recv_exact(h[0] | h[1] << 8 | h[2] << 16)
def send(seq, body):
    s.sendall(struct.pack('<I', len(body))[:3] + bytes([seq]) + body)
seq, greeting = packet()
assert greeting[0] == 10, greeting[:1]
print('greeting', greeting[1:greeting.index(b'\0', 1)].decode(), flush=True)
caps = 0x1 | 0x4 | 0x200 | 0x2000 | 0x8000 | 0x80000
body = struct.pack('<IIB', caps, 1 << 24, 33) + b'\0' * 23 + b'wl\0' + b'\0' + b'mysql_native_password\0'
send(seq + 1, body)
_, ok = packet()
assert ok[0] == 0, ok
for i in range(n):
    send(0, b'\x03' + ("SELECT %d AS n, 'wirelog-server-first-%d' AS tag" % (i, i)).encode())
    _, p = packet()
    assert p[0] not in (0x00, 0xff), p
    eofs = 0
    while eofs < 2:
        _, p = packet()
        if p[0] == 0xfe and len(p) < 9:
            eofs += 1
print('queries', n, flush=True)
send(0, b'\x01')
s.close()
"#;

fn requirements() -> bool {
    if !is_root() {
        skip("loopback capture tests need root (network namespaces)");
        return false;
    }
    let progs = ["tcpdump", "tc", "nginx", "curl", "python3", "mariadbd", "mariadb-install-db", "mariadb", "mariadb-admin"];
    let missing: Vec<&str> = progs.iter().copied().filter(|p| !have(p)).collect();
    if !missing.is_empty() {
        skip(&format!("not installed: {} (scripts/test.sh installs them)", missing.join(", ")));
        return false;
    }
    true
}

fn nginx_conf(dir: &Path) -> String {
    format!(
        "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/nginx.err;\n\
         events {{ worker_connections 64; }}\n\
         http {{\n  access_log {d}/access.log;\n  client_body_temp_path {d}/tmp;\n  proxy_temp_path {d}/tmp;\n\
         fastcgi_temp_path {d}/tmp;\n  uwsgi_temp_path {d}/tmp;\n  scgi_temp_path {d}/tmp;\n\
         server {{ listen 127.0.0.1:{HTTP_PORT}; root {d}/www; }}\n}}\n",
        d = dir.display()
    )
}

/// Starts MariaDB on 127.0.0.1:DB_PORT in `ns`, with account `wl` (no
/// password) for TCP clients.
fn start_mariadb(ns: &LoNs, dir: &Path) -> common::lo::Proc {
    let data = dir.join("data");
    let sock = dir.join("mysql.sock");
    let out = Command::new("mariadb-install-db")
        .args(["--no-defaults", "--user=root", "--auth-root-authentication-method=socket"])
        .arg(format!("--datadir={}", data.display()))
        .output()
        .expect("run mariadb-install-db");
    assert!(out.status.success(), "mariadb-install-db: {}", String::from_utf8_lossy(&out.stderr));
    let socket = format!("--socket={}", sock.display());
    let mut db = ns.spawn(
        "mariadbd",
        &[
            "mariadbd",
            "--no-defaults",
            "--user=root",
            &format!("--datadir={}", data.display()),
            &socket,
            &format!("--port={DB_PORT}"),
            "--bind-address=127.0.0.1",
            &format!("--pid-file={}/mysql.pid", dir.display()),
            &format!("--log-error={}/mysql.err", dir.display()),
            "--skip-name-resolve",
            "--skip-log-bin",
            "--innodb-buffer-pool-size=32M",
        ],
        &dir.join("mariadbd.out"),
    );
    wait_for("mariadbd", Duration::from_secs(60), || {
        assert!(db.alive(), "mariadbd exited: {}", std::fs::read_to_string(dir.join("mysql.err")).unwrap_or_default());
        ns.cmd(&["mariadb-admin", "--no-defaults", "-uroot", &socket, "ping"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    ns.run(&[
        "mariadb",
        "--no-defaults",
        "-uroot",
        &socket,
        "-e",
        "CREATE USER 'wl'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING ''",
    ]);
    db
}

#[test]
fn loopback_capture_offload_and_server_first() {
    if !requirements() {
        return;
    }
    let t0 = Instant::now();
    let ns = LoNs::new("lo");
    let dir = tmp("servers");
    std::fs::create_dir_all(dir.join("www")).unwrap();
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    for (name, size) in [("index.html", 512usize), ("a.txt", 3000), ("big.bin", 200_000)] {
        let body: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
        std::fs::write(dir.join("www").join(name), body).unwrap();
    }
    std::fs::write(dir.join("nginx.conf"), nginx_conf(&dir)).unwrap();
    let conf = dir.join("nginx.conf");
    let mut nginx = ns.spawn("nginx", &["nginx", "-c", conf.to_str().unwrap()], &dir.join("nginx.out"));
    let url = format!("http://127.0.0.1:{HTTP_PORT}");
    wait_for("nginx", Duration::from_secs(10), || {
        assert!(nginx.alive(), "nginx exited: {}", std::fs::read_to_string(dir.join("nginx.out")).unwrap());
        ns.cmd(&["curl", "-sf", "-o", "/dev/null", &format!("{url}/index.html")]).status().is_ok_and(|s| s.success())
    });
    let db = start_mariadb(&ns, &dir);

    // ---- (a) no option == -C; corrupted copy rejects exactly those packets.
    let pcap = dir.join("lo.pcap");
    let dump = ns.tcpdump(&pcap, &["tcp"]);
    for _ in 0..3 {
        // One connection, several requests (keep-alive), and a 404.
        ns.run(&[
            "curl", "-s", "-o", "/dev/null", "-o", "/dev/null", "-o", "/dev/null", "-o", "/dev/null",
            &format!("{url}/index.html"), &format!("{url}/a.txt"), &format!("{url}/big.bin"),
            &format!("{url}/missing"),
        ]);
    }
    for i in 0..3 {
        ns.run(&[
            "mariadb", "--no-defaults", "--skip-ssl", "-h127.0.0.1", &format!("-P{DB_PORT}"), "-uwl", "-N", "-B",
            "-e", &format!("SELECT {i}; SELECT 'loopback-{i}'; SELECT @@version"),
        ]);
    }
    settle(&pcap);
    dump.interrupt();

    let (auto_out, ign_out) = (dir.join("auto"), dir.join("ignore"));
    let auto_sum = read(&pcap, &auto_out, &[]);
    read(&pcap, &ign_out, &["-C"]);
    let (valid, offloaded, bad) = checksum_counts(&auto_sum);
    eprintln!("loopback capture, no option: {valid} valid, {offloaded} offloaded, {bad} bad");
    assert_eq!(bad, 0, "{auto_sum}");
    assert!(offloaded > 100, "a loopback capture is offloaded: {auto_sum}");
    assert!(!auto_sum.contains("warning"), "no checksum warning on a clean capture: {auto_sum}");
    let (ca, ci) = (conns(&auto_out), conns(&ign_out));
    assert_eq!(ca, ci, "conn.log with no option vs -C");
    assert_eq!(ca.len(), 3 + 3, "3 curl and 3 mariadb connections: {ca:#?}");
    let (ha, ma) = (txs(&auto_out, "http.log", &HTTP_FIELDS), txs(&auto_out, "mysql.log", &MYSQL_FIELDS));
    assert_eq!(ha, txs(&ign_out, "http.log", &HTTP_FIELDS), "http.log with no option vs -C");
    assert_eq!(ma, txs(&ign_out, "mysql.log", &MYSQL_FIELDS), "mysql.log with no option vs -C");
    assert_eq!(ha.len(), 12, "{ha:#?}");
    let queries = ma.iter().filter(|l| l.contains(" query ")).count();
    assert!(queries >= 9, "{ma:#?}");
    assert!(ma.iter().filter(|l| l.contains(" login ")).count() == 3, "{ma:#?}");

    let bad_copy = dir.join("lo-corrupt.pcap");
    std::fs::write(dir.join("corrupt.py"), CORRUPT_PY).unwrap();
    let out = Command::new("python3")
        .arg(dir.join("corrupt.py"))
        .args([pcap.to_str().unwrap(), bad_copy.to_str().unwrap(), "9", "6"])
        .output()
        .unwrap();
    assert!(out.status.success(), "corrupt.py: {}", String::from_utf8_lossy(&out.stderr));
    let corrupted: Vec<(String, String, bool)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let port = |k: &str| l.split(&format!("\"{k}\": ")).nth(1).unwrap().split([',', '}']).next().unwrap().to_string();
            (port("sport"), port("dport"), port("offloaded") == "true")
        })
        .collect();
    assert!(corrupted.len() >= 4, "too few data segments to corrupt: {corrupted:?}");
    assert!(corrupted.iter().all(|c| c.2), "every loopback segment carried the signature: {corrupted:?}");
    let bad_out = dir.join("corrupt");
    let bad_sum = read(&bad_copy, &bad_out, &[]);
    let (_, _, bad) = checksum_counts(&bad_sum);
    assert_eq!(bad as usize, corrupted.len(), "summary's bad count vs packets corrupted: {bad_sum}");
    let orig_rows: HashMap<(String, String), Row> =
        rows(&auto_out, "conn.log").into_iter().map(|r| (endpoints(&r), r)).collect();
    let bad_rows = rows(&bad_out, "conn.log");
    let mut per_conn: HashMap<(String, String), Vec<bool>> = HashMap::new();
    for (sport, dport, _) in &corrupted {
        let r = bad_rows
            .iter()
            .find(|r| {
                (&r["id.orig_p"] == sport && &r["id.resp_p"] == dport)
                    || (&r["id.orig_p"] == dport && &r["id.resp_p"] == sport)
            })
            .unwrap_or_else(|| panic!("no connection {sport}<->{dport}"));
        per_conn.entry(endpoints(r)).or_default().push(&r["id.orig_p"] == sport);
    }
    for r in &bad_rows {
        let k = endpoints(r);
        let before = &orig_rows[&k];
        let pkts = |r: &Row| r["orig_pkts"].parse::<usize>().unwrap() + r["resp_pkts"].parse::<usize>().unwrap();
        match per_conn.get(&k) {
            None => assert_eq!(conns_line(r), conns_line(before), "an untouched connection changed"),
            Some(from_orig) => {
                assert_eq!(pkts(r), pkts(before) - from_orig.len(), "{r:?}");
                for (o, letter) in [(true, 'C'), (false, 'c')] {
                    if from_orig.contains(&o) {
                        assert!(r["history"].contains(letter), "history {} lacks {letter}: {r:?}", r["history"]);
                    } else {
                        assert!(!r["history"].contains(letter), "history {} has {letter}: {r:?}", r["history"]);
                    }
                }
            }
        }
    }
    eprintln!(
        "(a) {} connections and {} + {} transactions equal with and without -C; {} corrupted segments rejected in {} connections",
        ca.len(),
        ha.len(),
        ma.len(),
        corrupted.len(),
        per_conn.len()
    );

    // ---- (b) server-first: the greeting is the first packet captured.
    // The server's packets from DB_PORT go through a class of 1 byte/s with
    // a 1-byte bucket: the SYN-ACK spends the bucket, the greeting waits.
    let tc = |args: &[&str]| ns.cmd(&[&["tc"][..], args].concat()).output().is_ok_and(|o| o.status.success());
    let shaped = tc(&["qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "10"])
        && tc(&["class", "add", "dev", "lo", "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit", "quantum", "60000"])
        && tc(&["class", "add", "dev", "lo", "parent", "1:", "classid", "1:20", "htb", "rate", "8bit", "ceil", "8bit", "burst", "1", "cburst", "1", "quantum", "1514"])
        && tc(&["filter", "add", "dev", "lo", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip", "sport", DB_PORT, "0xffff", "flowid", "1:20"]);
    if !shaped {
        skip("tc htb/u32 not available: cannot hold the server's greeting back");
        return;
    }
    std::fs::write(dir.join("client.py"), CLIENT_PY).unwrap();
    let mut client = ns
        .cmd(&["python3", dir.join("client.py").to_str().unwrap(), DB_PORT, &QUERIES.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(client.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "connected");
    let sf_pcap = dir.join("server-first.pcap");
    let dump = ns.tcpdump(&sf_pcap, &["tcp", "port", DB_PORT]);
    // The held greeting is dropped with the qdisc; the server retransmits it.
    assert!(tc(&["qdisc", "del", "dev", "lo", "root"]), "remove the qdisc");
    let said: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let status = client.wait().unwrap();
    let mut err = String::new();
    let _ = std::io::Read::read_to_string(&mut client.stderr.take().unwrap(), &mut err);
    assert!(status.success(), "client: {said:?} {err}");
    assert_eq!(said.last().map(String::as_str), Some(format!("queries {QUERIES}").as_str()), "{said:?}");
    settle(&sf_pcap);
    dump.interrupt();
    drop(db);
    drop(nginx);

    // The capture starts with the server's greeting: no SYN, data from the server.
    let first = Command::new("tcpdump").args(["-n", "-r", sf_pcap.to_str().unwrap(), "-c", "1"]).output().unwrap();
    let first = String::from_utf8_lossy(&first.stdout).into_owned();
    assert!(first.contains(&format!("127.0.0.1.{DB_PORT} >")) && !first.contains("[S"), "first packet: {first}");
    for (name, args) in [("--ports", vec!["--ports", "mysql=13306"]), ("content alone", vec![])] {
        let out = dir.join(format!("sf-{}", args.len()));
        read(&sf_pcap, &out, &args);
        let conn = rows(&out, "conn.log");
        assert_eq!(conn.len(), 1, "{name}: {conn:?}");
        assert_eq!(conn[0]["id.resp_p"], DB_PORT, "{name}: the server is the responder: {:?}", conn[0]);
        assert!(conn[0]["history"].contains('^'), "{name}: flipped: {:?}", conn[0]);
        // No SYN was seen: the connection is partial for Zeek, whose MySQL
        // analyzer reads nothing of it (MySQL.cc:53, `zeek_skips_partial` in
        // crates/track/src/app.rs) whether it was attached by port or by a
        // signature (the PIA replays into the same check), so conn.log names
        // no service either way; mysql.log still has every statement (below).
        assert_eq!(conn[0]["service"], "-", "{name}");
        let my = rows(&out, "mysql.log");
        let found: Vec<&str> = my.iter().filter(|r| r["cmd"] == "query").map(|r| r["arg"].as_str()).collect();
        for i in 0..QUERIES {
            let q = format!("SELECT {i} AS n, 'wirelog-server-first-{i}' AS tag");
            assert!(found.contains(&q.as_str()), "{name}: query {i} missing: {found:?}");
        }
        assert_eq!(found.len(), QUERIES, "{name}: {found:?}");
        assert!(my.iter().filter(|r| r["cmd"] == "query").all(|r| r["status"] == "ok" && r["success"] == "T"), "{name}: {my:?}");
        assert_eq!(my.iter().filter(|r| r["cmd"] == "login").count(), 1, "{name}: {my:?}");
        eprintln!("(b) {name}: {} queries, history {}", found.len(), conn[0]["history"]);
    }
    println!("loopback capture: offload and server-first checked in {:.1} s", t0.elapsed().as_secs_f64());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The fields `conns` compares, for one row.
fn conns_line(r: &Row) -> String {
    ["conn_state", "history", "orig_bytes", "resp_bytes", "orig_pkts", "resp_pkts"].iter().map(|f| r[*f].clone()).collect::<Vec<_>>().join(" ")
}
