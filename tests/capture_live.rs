//! `wirelog capture` on real interfaces: two network namespaces joined by a
//! veth pair (created per test, removed on drop even when a test panics);
//! captures are replayed with tcpreplay into one end and captured on the
//! other, and the records compared with `wirelog read` of the same file.
//!
//! These tests need root, `ip netns` and tcpreplay. Without them they are
//! skipped with a message, unless WIRELOG_REQUIRE_ALL_TESTS=1 (CI), where a
//! missing requirement fails the test.

mod common;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::process::Command;
use std::time::{Duration, Instant};

use common::live::{last_stats, sh, skip, LiveCapture, BIN};
use common::veth::{requirements, VethPair};
use common::{gunzip, read_log, sample_pcap};

/// Two namespaces `a` (capture side) and `b` (replay side) joined by a veth
/// pair whose ends take jumbo frames, their `lo` down, or None (a skip)
/// without root, `ip netns` or tcpreplay. The test runs beside this file's
/// other tests but not beside a CPU-budget test ([`MACHINE`]).
fn netns() -> Option<Ns> {
    let turn = Turn::Beside(MACHINE.read().unwrap_or_else(|e| e.into_inner()));
    netns_in(turn)
}

/// [`netns`] for a CPU-budget test: it runs alone among this file's tests.
fn netns_alone() -> Option<Ns> {
    let turn = Turn::Alone(MACHINE.write().unwrap_or_else(|e| e.into_inner()));
    netns_in(turn)
}

fn netns_in(turn: Turn) -> Option<Ns> {
    if !requirements("live capture tests", &[("ip", "netns"), ("tcpreplay", "--version")]) {
        return None;
    }
    Some(Ns { pair: VethPair::with_mtu_lo_down("c", 9000), _turn: turn })
}

/// Whose turn the machine is. A CPU-budget test holds a worker to a few
/// tenths of a percent of a core, and how much work it sheds depends on
/// what each packet costs: another test of this file replaying at top speed
/// on the other core (cargo runs a file's tests two at a time here) made
/// that cost rise, and the step-3 test then met the regime of a budget far
/// below the need, where step 3 counts nothing (README, step 3's measured
/// limit; 1 whole-suite run in 6 failed so, BENCHMARKS.md "The step-3 live
/// test and step 3 under a load well above the budget"). So a budget test
/// holds this lock for writing and every other live test of this file for
/// reading: the budget tests meet the load they are written for.
static MACHINE: RwLock<()> = RwLock::new(());

#[allow(dead_code)] // held, never read: its drop ends the turn
enum Turn {
    Beside(RwLockReadGuard<'static, ()>),
    Alone(RwLockWriteGuard<'static, ()>),
}

/// A test's namespaces and its turn of the machine; the pair is removed
/// (first field, dropped first) before the turn ends.
struct Ns {
    pair: VethPair,
    _turn: Turn,
}

impl std::ops::Deref for Ns {
    type Target = VethPair;
    fn deref(&self) -> &VethPair {
        &self.pair
    }
}

/// A running `wirelog capture` in namespace a, writing logs under `dir`.
struct Capture {
    cap: LiveCapture,
    dir: PathBuf,
}

impl Capture {
    /// Starts a capture on the a end, writing logs to `dir`, and returns once
    /// its sockets are open.
    fn start(ns: &VethPair, dir: &Path, extra: &[&str]) -> Capture {
        Self::start_on(ns, &ns.va, dir, extra)
    }

    fn start_on(ns: &VethPair, iface: &str, dir: &Path, extra: &[&str]) -> Capture {
        let dir = &dir.join("capture");
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        let logs = dir.join("logs");
        let mut args: Vec<&OsStr> = vec![OsStr::new("--logs"), logs.as_os_str()];
        if !extra.contains(&"--store") {
            args.push(OsStr::new("--no-store"));
        }
        args.extend(extra.iter().map(OsStr::new));
        Capture { cap: LiveCapture::start(&ns.a, iface, &args), dir: dir.to_path_buf() }
    }

    fn pid(&self) -> u32 {
        self.cap.pid()
    }

    /// SIGINT, then the exit status must be 0. Returns stderr.
    fn stop(self) -> String {
        self.cap.stop()
    }
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("wirelog-capture-{}-{name}", std::process::id()))
}

/// `wirelog read` of a capture: its conn records.
fn read_conns(pcap: &Path, dir: &Path) -> Vec<BTreeMap<String, String>> {
    let logs = dir.join("read-logs");
    let out = Command::new(BIN)
        .args(["read", "-C", "--quiet", "--no-store", "--logs"])
        .arg(&logs)
        .arg(pcap)
        .output()
        .expect("run wirelog read");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    read_log(&logs.join("conn.log")).into_iter().map(|r| r.into_iter().collect()).collect()
}

/// The fields compared between live and file. Left out, on purpose: `ts` and
/// `duration` (live timestamps are the replay's, and --topspeed squeezes
/// the gaps) and `uid` (random).
const COMPARED: &[&str] = &[
    "proto",
    "id.orig_h",
    "id.orig_p",
    "id.resp_h",
    "id.resp_p",
    "service",
    "orig_bytes",
    "resp_bytes",
    "conn_state",
    "local_orig",
    "local_resp",
    "missed_bytes",
    "history",
    "orig_pkts",
    "orig_ip_bytes",
    "resp_pkts",
    "resp_ip_bytes",
    "tunnel_parents",
    "vlan",
    "inner_vlan",
];

fn key(r: &BTreeMap<String, String>, fields: &[&str]) -> String {
    fields.iter().map(|f| r.get(*f).map(String::as_str).unwrap_or("?")).collect::<Vec<_>>().join(" ")
}

fn sorted(rows: &[BTreeMap<String, String>], fields: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = rows.iter().map(|r| key(r, fields)).collect();
    v.sort();
    v
}

fn assert_same(what: &str, live: &[BTreeMap<String, String>], file: &[BTreeMap<String, String>], fields: &[&str]) {
    let (l, f) = (sorted(live, fields), sorted(file, fields));
    if l != f {
        let only_live: Vec<&String> = l.iter().filter(|x| !f.contains(x)).collect();
        let only_file: Vec<&String> = f.iter().filter(|x| !l.contains(x)).collect();
        panic!(
            "{what}: live and file records differ ({} vs {})\nfields: {}\nonly live: {only_live:#?}\nonly file: {only_file:#?}",
            l.len(),
            f.len(),
            fields.join(" ")
        );
    }
}

/// The packet count of the last stats line.
fn packets_of(stderr: &str) -> u64 {
    let line = last_stats(stderr);
    line["wirelog: stats: ".len()..].split(' ').next().unwrap().parse().unwrap()
}

fn testdata(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/zeek").join(p)
}

/// Replays `pcap` while capturing with `extra` flags; returns (conns, stderr).
fn live(ns: &VethPair, pcap: &Path, dir: &Path, extra: &[&str]) -> (Vec<BTreeMap<String, String>>, String) {
    let cap = Capture::start(ns, dir, extra);
    ns.replay(pcap);
    // The last partly filled block is retired within 100 ms; shutdown waits for it.
    let logs = cap.dir.join("logs/conn.log");
    let err = cap.stop();
    let conns = read_log(&logs).into_iter().map(|r| r.into_iter().collect()).collect();
    (conns, err)
}

/// Every record of the replayed file, live, equals `wirelog read`'s.
#[test]
fn replayed_captures_give_the_records_of_read() {
    let Some(ns) = netns() else { return };
    let dir = tmp("replay");
    let mut pcaps: Vec<PathBuf> = [
        "mysql/mysql.pcap",
        "postgresql/greenhouse-app.pcap",
        "postgresql/psql-create-insert-select-delete-drop.pcap",
        "http_m57_long_gap/m57-long-49583-80.pcap",
        "http_no_crlf/no_crlf.pcap",
        "http_padding/tcp-http-with-padding.pcap",
        "ftp_ipv6/ipv4.pcap",
        "ftp_ipv6/ipv6.pcap",
        "icmp_events/icmp-ping.pcap",
        "tcp_rst_behavior/syn-then-stuff-then-rst.pcap",
        "tcp_miss_end_data/miss_end_data.pcap",
        "vlan_qinq/q-in-q.pcap",
        "ipv6_frag_dns/ipv6-fragmented-dns.pcap",
    ]
    .iter()
    .map(|p| testdata(p))
    .collect();
    pcaps.push(sample_pcap(&dir));
    let mut txs = 0;
    for pcap in &pcaps {
        // Several of these traces carry real bad checksums (Zeek reads them
        // with -C), so both sides ignore checksums: capture's default (auto)
        // rejects them as `read` without -C would.
        let (live, err) = live(&ns, pcap, &dir, &["-C"]);
        let file = read_conns(pcap, &dir);
        assert!(!file.is_empty(), "{}: no records from read", pcap.display());
        assert_same(&pcap.display().to_string(), &live, &file, COMPARED);
        assert!(!err.contains("warning"), "{}: unexpected stderr: {err}", pcap.display());
        txs += assert_same_transactions(&pcap.display().to_string(), &dir.join("capture/logs"), &dir.join("read-logs"));
    }
    // HTTP, MySQL, PostgreSQL and DNS are all among the replayed traces.
    assert!(txs > 100, "only {txs} transactions compared");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Application transactions live equal those of `wirelog read`: every field
/// but the times (the replay's own) and the uids (random). Returns how many
/// were compared.
fn assert_same_transactions(what: &str, live: &Path, file: &Path) -> usize {
    let mut n = 0;
    for log in ["http.log", "dns.log", "mysql.log", "pgsql.log", "redis.log"] {
        let rows = |p: &Path| -> Vec<BTreeMap<String, String>> {
            if p.exists() {
                read_log(p).into_iter().map(|r| r.into_iter().collect()).collect()
            } else {
                Vec::new()
            }
        };
        let (l, f) = (rows(&live.join(log)), rows(&file.join(log)));
        let Some(first) = f.first().or(l.first()) else { continue };
        let times = ["ts", "uid", "latency", "first_byte_latency", "rtt"];
        let fields: Vec<&str> = first.keys().map(String::as_str).filter(|k| !times.contains(k)).collect();
        assert_same(&format!("{what}: {log}"), &l, &f, &fields);
        n += f.len();
    }
    n
}

/// With two workers, the same records as with one (and as read): both
/// directions of every connection reached the same worker, or they would
/// show up as two half connections. Both workers got packets.
#[test]
fn two_workers_give_the_same_records() {
    let Some(ns) = netns() else { return };
    let dir = tmp("workers");
    let pcaps = [gunzip(&testdata("echo_connections_large/echo-connections.pcap.gz"), &dir), sample_pcap(&dir)];
    for pcap in &pcaps {
        let (live, err) = live(&ns, pcap, &dir, &["--workers", "2"]);
        let file = read_conns(pcap, &dir);
        assert_same(&format!("{} with 2 workers", pcap.display()), &live, &file, COMPARED);
        let stats = last_stats(&err);
        let per: Vec<u64> = stats
            .split("workers: ")
            .nth(1)
            .expect("per-worker counters")
            .split(", ")
            .map(|w| w.split(' ').nth(1).unwrap().parse().unwrap())
            .collect();
        assert_eq!(per.len(), 2, "{stats}");
        assert!(per.iter().all(|&p| p > 0), "a worker got no packets: {stats}");
        assert!(stats.contains(" 0 dropped"), "kernel drops: {stats}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// --skip-empty-tcp: fewer packets reach the probe, the same bytes and states.
#[test]
fn skip_empty_tcp_keeps_bytes_with_fewer_packets() {
    let Some(ns) = netns() else { return };
    let dir = tmp("skip");
    let pcaps = [
        testdata("mysql/mysql.pcap"),
        testdata("http_no_crlf/no_crlf.pcap"),
        testdata("postgresql/greenhouse-app.pcap"),
        // IPv6, TCP right after the fixed header: the filter's IPv6 branch.
        testdata("ftp_ipv6/ipv6.pcap"),
    ];
    let fields =
        ["proto", "id.orig_h", "id.orig_p", "id.resp_h", "id.resp_p", "orig_bytes", "resp_bytes", "conn_state"];
    for pcap in &pcaps {
        let (all, err_all) = live(&ns, pcap, &dir, &[]);
        let (skipped, err_skip) = live(&ns, pcap, &dir, &["--skip-empty-tcp"]);
        let (n_all, n_skip) = (packets_of(&err_all), packets_of(&err_skip));
        eprintln!("{}: {n_all} packets, {n_skip} with --skip-empty-tcp", pcap.display());
        assert!(n_skip < n_all, "{}: {n_skip} packets with --skip-empty-tcp, {n_all} without", pcap.display());
        assert_same(&format!("{} --skip-empty-tcp", pcap.display()), &skipped, &all, &fields);
        // Every TCP record says its packet counts lack the pure ACKs; without
        // the option conn.log keeps exactly Zeek's columns.
        for r in &skipped {
            let expect = if r["proto"] == "tcp" { "T" } else { "-" };
            assert_eq!(r.get("empty_tcp_skipped").map(String::as_str), Some(expect), "{r:?}");
        }
        assert!(all.iter().all(|r| !r.contains_key("empty_tcp_skipped")));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// --config: the file's options apply, the command line's -i replaces the
/// file's interfaces.
#[test]
fn config_file_options_apply_and_the_command_line_wins() {
    let Some(ns) = netns() else { return };
    let dir = tmp("config");
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("capture.conf");
    std::fs::write(
        &conf,
        "# as an operator would write it\ninterface = nosuch0   # replaced by -i\n\
         skip-empty-tcp = true\nworkers = 2\nfilter = \"tcp\"\n",
    )
    .unwrap();
    let pcap = testdata("http_no_crlf/no_crlf.pcap");
    let (conns, err) = live(&ns, &pcap, &dir, &["--config", conf.to_str().unwrap()]);
    let file = read_conns(&pcap, &dir);
    assert!(!conns.is_empty());
    // skip-empty-tcp from the file: the note column, the same bytes and states.
    assert!(conns.iter().all(|r| r.get("empty_tcp_skipped").map(String::as_str) == Some("T")), "{conns:?}");
    let tcp: Vec<_> = file.into_iter().filter(|r| r["proto"] == "tcp").collect();
    assert_same(
        "--config",
        &conns,
        &tcp,
        &["id.orig_h", "id.orig_p", "id.resp_p", "orig_bytes", "resp_bytes", "conn_state"],
    );
    // workers = 2 from the file.
    let stats = last_stats(&err);
    assert_eq!(stats.split("workers: ").nth(1).expect("per-worker counters").split(", ").count(), 2, "{stats}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bad input fails before capturing, with one clear line and a non-zero
/// exit (no root needed: nothing is opened).
#[test]
fn bad_filter_and_missing_interface_fail_cleanly() {
    let run = |args: &[&str]| {
        let out = Command::new(BIN).args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = run(&["capture", "-i", "lo", "--no-store", "--filter", "tcp port eighty"]);
    assert_ne!(code, Some(0));
    if err.contains("libpcap, which was not found") {
        skip("libpcap is not installed");
    } else {
        // libpcap's own message.
        assert_eq!(err.trim(), "wirelog: bad filter 'tcp port eighty': unknown port 'eighty'");
    }
    let (code, err) = run(&["capture", "-i", "nosuch0", "--no-store"]);
    assert_ne!(code, Some(0));
    assert_eq!(err.trim(), "wirelog: interface nosuch0: no such interface");
    let (code, err) = run(&["capture", "-i", "lo", "--no-store", "--workers", "0"]);
    assert_ne!(code, Some(0));
    assert_eq!(err.lines().count(), 1, "{err}");
    // A config file's mistakes are named by file and line.
    let conf = tmp("bad.conf");
    std::fs::write(&conf, "workers = 2\ncolour = red\n").unwrap();
    let (code, err) = run(&["capture", "-i", "lo", "--no-store", "--config", conf.to_str().unwrap()]);
    assert_ne!(code, Some(0));
    assert_eq!(
        err.trim(),
        format!("wirelog: {}:2: unknown option \"colour\" (see `wirelog capture --help`)", conf.display())
    );
    let (code, err) = run(&["capture", "-i", "lo", "--config", "/nonexistent/wirelog.conf"]);
    assert_ne!(code, Some(0));
    assert_eq!(err.trim(), "wirelog: --config /nonexistent/wirelog.conf: No such file or directory (os error 2)");
    let _ = std::fs::remove_file(&conf);
    // Without the right to open packet sockets (as nobody when run as root).
    let is_root = Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    let out = if is_root {
        Command::new("runuser").args(["-u", "nobody", "--", BIN, "capture", "-i", "lo", "--no-store"]).output()
    } else {
        Command::new(BIN).args(["capture", "-i", "lo", "--no-store"]).output()
    }
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(
        err.trim(),
        "wirelog: interface lo: socket(AF_PACKET): Operation not permitted (os error 1) \
         (capturing needs root, or CAP_NET_RAW and CAP_NET_ADMIN)"
    );
}

/// CPU time (ns, all threads, from schedstat) and voluntary context switches
/// (all threads) of a process.
fn cpu_and_wakeups(pid: u32) -> (u64, u64) {
    let (mut cpu, mut vol) = (0, 0);
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let t = t.unwrap().path();
        if let Ok(s) = std::fs::read_to_string(t.join("schedstat")) {
            cpu += s.split(' ').next().unwrap().parse::<u64>().unwrap();
        }
        if let Ok(s) = std::fs::read_to_string(t.join("status")) {
            if let Some(v) = s.lines().find_map(|l| l.strip_prefix("voluntary_ctxt_switches:")) {
                vol += v.trim().parse::<u64>().unwrap();
            }
        }
    }
    (cpu, vol)
}

fn idle(secs: u64) {
    let Some(ns) = netns() else { return };
    let dir = tmp(&format!("idle{secs}"));
    let cap = Capture::start(&ns, &dir, &[]);
    std::thread::sleep(Duration::from_millis(500));
    let (cpu0, vol0) = cpu_and_wakeups(cap.pid());
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let (cpu1, vol1) = cpu_and_wakeups(cap.pid());
    let wall = t0.elapsed().as_secs_f64();
    let status = std::fs::read_to_string(format!("/proc/{}/status", cap.pid())).unwrap();
    let line = |k: &str| status.lines().find(|l| l.starts_with(k)).unwrap().to_string();
    let rss = line("VmRSS:");
    // Started as root: now nobody, with no capability left.
    assert!(line("Uid:").split_whitespace().skip(1).all(|u| u == "65534"), "{}", line("Uid:"));
    assert_eq!(line("CapEff:").split_whitespace().nth(1), Some("0000000000000000"));
    cap.stop();
    let cpu_share = (cpu1 - cpu0) as f64 / 1e9 / wall;
    let wakeups = (vol1 - vol0) as f64 / wall;
    eprintln!("idle {wall:.1} s: CPU {:.4}% of a core, {wakeups:.2} wakeups/s, {rss}", cpu_share * 100.0);
    assert!(cpu_share <= 0.001, "idle CPU {:.4}% > 0.1%", cpu_share * 100.0);
    assert!(wakeups <= 2.0, "{wakeups:.2} wakeups/s > 2");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An idle interface: the probe sleeps (short version of the 60 s test).
#[test]
fn idle_probe_sleeps() {
    idle(10);
}

/// The issue's full 60 s idle measurement (slow: run with --ignored).
#[test]
#[ignore]
fn idle_probe_sleeps_60s() {
    idle(60);
}

/// Live timers run on the wall clock: on a link gone idle, the flow bucket
/// ends and its flows reach flows.log (and UDP/ICMP connections expire)
/// without another packet and before the capture stops.
#[test]
fn flow_buckets_end_on_an_idle_link() {
    let Some(ns) = netns() else { return };
    let dir = tmp("rotate");
    let cap = Capture::start(&ns, &dir, &["--flow-interval", "1s", "--icmp-timeout", "1s"]);
    ns.replay(&testdata("icmp_events/icmp-ping.pcap"));
    let flows = cap.dir.join("logs/flows.log");
    let conns = cap.dir.join("logs/conn.log");
    // Bucket end (<= 1 s) + timer lag (150 ms) + log flush (<= 1 s), with margin.
    let t0 = Instant::now();
    // A log appears with its header, at its first write: until then it is absent.
    let records = |p: &Path| if p.exists() { read_log(p) } else { Vec::new() };
    while t0.elapsed() < Duration::from_secs(6) && (records(&flows).is_empty() || records(&conns).is_empty()) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let (f, c) = (read_log(&flows), read_log(&conns));
    eprintln!("flows and conn records after {:.1} s idle", t0.elapsed().as_secs_f64());
    cap.stop();
    assert!(!f.is_empty(), "no flow record while still capturing");
    assert_eq!(c.len(), 1, "the ping connection did not expire while capturing");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Loopback with real TCP traffic (each packet passes lo twice, going out
/// and coming in: counted once), with two workers, writing the store as
/// `nobody` after the privilege drop: `wirelog query` finds the connections.
#[test]
fn loopback_traffic_counted_once_and_stored() {
    let Some(ns) = netns() else { return };
    let dir = tmp("lo");
    sh(&["ip", "-n", &ns.a, "link", "set", "lo", "up"]);
    let store = dir.join("store");
    let _ = std::fs::remove_dir_all(&store);
    let store_s = store.to_str().unwrap().to_string();
    let cap = Capture::start_on(&ns, "lo", &dir, &["--workers", "2", "--store", &store_s]);
    // 20 connections: the client sends 1000 bytes, the server answers 300.
    let script = "import socket,threading\n\
        s=socket.socket(); s.bind(('127.0.0.1',5555)); s.listen(32)\n\
        def serve():\n\
        \x20   for _ in range(20):\n\
        \x20       c,_=s.accept(); n=0\n\
        \x20       while n<1000: n+=len(c.recv(4096))\n\
        \x20       c.sendall(b'y'*300); c.close()\n\
        t=threading.Thread(target=serve); t.start()\n\
        for _ in range(20):\n\
        \x20   k=socket.create_connection(('127.0.0.1',5555)); k.sendall(b'x'*1000)\n\
        \x20   m=0\n\
        \x20   while m<300:\n\
        \x20       d=k.recv(4096)\n\
        \x20       if not d: break\n\
        \x20       m+=len(d)\n\
        \x20   k.close()\n\
        t.join()\n";
    let out = Command::new("ip").args(["netns", "exec", &ns.a, "python3", "-c", script]).output().unwrap();
    assert!(out.status.success(), "traffic: {}", String::from_utf8_lossy(&out.stderr));
    let logs = cap.dir.join("logs/conn.log");
    cap.stop();
    let conns = read_log(&logs);
    let tcp: Vec<_> = conns.iter().filter(|r| r["proto"] == "tcp" && r["id.resp_p"] == "5555").collect();
    assert_eq!(tcp.len(), 20, "{conns:#?}");
    for r in &tcp {
        assert_eq!((r["orig_bytes"].as_str(), r["resp_bytes"].as_str()), ("1000", "300"), "{r:?}");
        assert_eq!(r["conn_state"], "SF", "{r:?}");
        // Doubled packets would show as retransmissions and double counts.
        let pkts: u64 = r["orig_pkts"].parse::<u64>().unwrap() + r["resp_pkts"].parse::<u64>().unwrap();
        assert!((7..=12).contains(&pkts), "{pkts} packets: {r:?}");
        assert!(!r["history"].contains('T') && !r["history"].contains('t'), "retransmissions: {r:?}");
    }
    let q = Command::new(BIN)
        .args(["query", "conns", "--format", "csv", "--where", "dport = 5555", "--by", "dport", "--store", &store_s])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&q.stdout).into_owned();
    assert!(q.status.success(), "query: {}", String::from_utf8_lossy(&q.stderr));
    assert!(text.lines().nth(1).is_some_and(|l| l.starts_with("5555,20")), "query output: {text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A user filter runs in the kernel: only its packets reach the probe.
#[test]
fn user_filter_keeps_only_its_traffic() {
    let Some(ns) = netns() else { return };
    let dir = tmp("filter");
    let echo = gunzip(&testdata("echo_connections_large/echo-connections.pcap.gz"), &dir);
    let cap = Capture::start(&ns, &dir, &["--filter", "tcp port 3306"]);
    ns.replay(&echo);
    ns.replay(&testdata("mysql/mysql.pcap"));
    let logs = cap.dir.join("logs/conn.log");
    let err = cap.stop();
    assert!(err.contains("kernel filter attached"), "{err}");
    assert_eq!(packets_of(&err), 57, "{err}");
    let conns = read_log(&logs);
    assert_eq!(conns.len(), 1, "{conns:#?}");
    assert_eq!(conns[0]["id.resp_p"], "3306");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stalled probe with a small ring: the kernel drops, and the counters
/// say so (kernel packets = processed + dropped).
#[test]
fn kernel_drops_are_counted() {
    let Some(ns) = netns() else { return };
    let dir = tmp("drops");
    let echo = gunzip(&testdata("echo_connections_large/echo-connections.pcap.gz"), &dir);
    let cap = Capture::start(&ns, &dir, &["--ring-size", "1M"]);
    sh(&["kill", "-STOP", &cap.pid().to_string()]);
    ns.replay(&echo); // 82,582 packets, ~12 MB of ring slots: far more than 1 MiB
    sh(&["kill", "-CONT", &cap.pid().to_string()]);
    let err = cap.stop();
    let line = last_stats(&err);
    // "...; kernel: K packets, D dropped (...)"
    let kernel_part: Vec<&str> = line.split("kernel: ").nth(1).unwrap().split(' ').collect();
    let (processed, kernel, dropped): (u64, u64, u64) =
        (packets_of(&err), kernel_part[0].parse().unwrap(), kernel_part[2].parse().unwrap());
    eprintln!("{line}");
    assert!(dropped > 0, "{line}");
    assert_eq!(kernel, 82_582, "{line}");
    assert_eq!(processed + dropped, kernel, "{line}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same stalled probe writing a store: its loss table holds the
/// kernel's drops and packets, equal to the summary's, and says how
/// complete the capture is.
#[test]
fn kernel_drops_are_in_the_loss_table() {
    let Some(ns) = netns() else { return };
    let dir = tmp("drops-loss");
    let echo = gunzip(&testdata("echo_connections_large/echo-connections.pcap.gz"), &dir);
    let store = dir.join("store");
    let store_s = store.to_str().unwrap().to_string();
    let cap = Capture::start(&ns, &dir, &["--ring-size", "1M", "--store", &store_s]);
    sh(&["kill", "-STOP", &cap.pid().to_string()]);
    ns.replay(&echo);
    sh(&["kill", "-CONT", &cap.pid().to_string()]);
    let err = cap.stop();
    let line = last_stats(&err);
    let kernel_part: Vec<&str> = line.split("kernel: ").nth(1).unwrap().split(' ').collect();
    let (kernel, dropped): (u64, u64) = (kernel_part[0].parse().unwrap(), kernel_part[2].parse().unwrap());
    assert!(dropped > 0, "{line}");
    let q = Command::new(BIN)
        .args(["query", "loss", "--every", "1h", "--format", "json", "--store", &store_s])
        .output()
        .unwrap();
    let qerr = String::from_utf8_lossy(&q.stderr);
    assert!(q.status.success(), "{qerr}");
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&q.stdout).unwrap();
    let sum = |c: &str| rows.iter().map(|r| r[c].as_u64().unwrap()).sum::<u64>();
    eprintln!("{line}\n{rows:?}\n{qerr}");
    assert_eq!(sum("kernel_drops"), dropped, "{rows:?}");
    assert_eq!(sum("kernel_packets"), kernel, "{rows:?}");
    assert_eq!(sum("packets"), packets_of(&err), "{rows:?}");
    assert_eq!(sum("packets") + sum("kernel_drops"), sum("kernel_packets"), "{rows:?}");
    assert!(qerr.contains(&format!("of packets seen ({dropped} of {kernel} dropped by the kernel)")), "{qerr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `capture --pcap-dir` (two workers, privileges dropped to nobody): the
/// kept files hold exactly the replayed frames, and their index names the
/// uids of the capture's own conn records.
#[test]
fn capture_keeps_the_replayed_packets_indexed_by_record_uid() {
    use common::kept::{kept_files, kept_records, read_index, read_pcap};
    let Some(ns) = netns() else { return };
    let dir = tmp("pcapdir");
    for pcap in [sample_pcap(&dir), testdata("http_no_crlf/no_crlf.pcap")] {
        let pd = dir.join("pcap");
        let _ = std::fs::remove_dir_all(&pd);
        let pd_s = pd.to_str().unwrap();
        let (live, err) = live(&ns, &pcap, &dir, &["-C", "--workers", "2", "--pcap-dir", pd_s, "--pcap-file-size", "256K"]);
        let frames = |recs: Vec<common::kept::Rec>| {
            let mut v: Vec<(u32, Vec<u8>)> = recs.into_iter().map(|r| (r.orig_len, r.data)).collect();
            v.sort();
            v
        };
        let want = frames(read_pcap(&pcap).0);
        assert_eq!(frames(kept_records(&pd)), want, "{}", pcap.display());
        assert!(err.contains(&format!("pcap: {} packets kept, 0 cut, 0 dropped", want.len())), "{err}");
        let uids: std::collections::BTreeSet<&str> = live.iter().map(|c| c["uid"].as_str()).collect();
        let mut indexed = std::collections::BTreeSet::new();
        for f in kept_files(&pd) {
            indexed.extend(read_index(&f.with_extension("idx")).0.into_keys());
        }
        assert!(!indexed.is_empty());
        for u in &indexed {
            assert!(uids.contains(u.as_str()), "{}: index uid {u} is no conn record's", pcap.display());
        }
        for u in uids {
            assert!(indexed.contains(u), "{}: conn {u} has no packets in the index", pcap.display());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A TCP conversation being written into a synthetic capture.
struct Conv {
    c: ([u8; 4], u16),
    s: ([u8; 4], u16),
    seq: [u32; 2],
    t_us: u64,
    segs: Vec<common::TcpSeg>,
}

const SYN: u8 = 0x02;
const FIN: u8 = 0x01;
const RST: u8 = 0x04;
const PSH_ACK: u8 = 0x18;
const ACK: u8 = 0x10;

impl Conv {
    /// Starts with the three-way handshake.
    fn open(c: ([u8; 4], u16), s: ([u8; 4], u16), t_us: u64) -> Conv {
        let mut v = Conv { c, s, seq: [1_000_000, 3_000_000_000], t_us, segs: Vec::new() };
        v.seg(true, SYN, 0, 65535);
        v.seg(false, SYN | ACK, 0, 65535);
        v.seg(true, ACK, 0, 65535);
        v
    }

    /// A segment from one side with `len` payload bytes at its next sequence number.
    fn seg(&mut self, from_client: bool, flags: u8, len: usize, window: u16) {
        let (me, peer) = if from_client { (0, 1) } else { (1, 0) };
        let ack = if flags & ACK != 0 { self.seq[peer] } else { 0 };
        let (src, dst) = if from_client { (self.c, self.s) } else { (self.s, self.c) };
        let payload: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
        self.segs.push(common::TcpSeg { t_us: self.t_us, src, dst, flags, seq: self.seq[me], ack, window, payload });
        self.seq[me] = self.seq[me].wrapping_add(len as u32 + u32::from(flags & (SYN | FIN) != 0));
        self.t_us += 50;
    }

    /// Data from one side the capture never saw (a gap).
    fn lost(&mut self, from_client: bool, len: u32) {
        let me = if from_client { 0 } else { 1 };
        self.seq[me] = self.seq[me].wrapping_add(len);
    }

    fn close(&mut self) {
        self.seg(false, FIN | ACK, 0, 65535);
        self.seg(true, FIN | ACK, 0, 65535);
        self.seg(false, ACK, 0, 65535);
    }
}

/// Bulk transfers on unparsed ports (one clean, one with a retransmission, a
/// zero window, a gap and a reset), and an HTTP exchange with a large body.
fn bulk_tcp_pcap() -> Vec<u8> {
    let (c, s) = ([10, 77, 0, 1], [10, 77, 0, 2]);
    let mut segs = Vec::new();
    let mut clean = Conv::open((c, 40_001), (s, 5001), 1_700_000_000_000_000);
    clean.seg(true, PSH_ACK, 100, 65535);
    for i in 0..3000 {
        if i % 500 == 0 {
            // A pause longer than the ring's block timeout: the tracker
            // catches up with the kernel and delegates (see crate::kernel).
            clean.t_us += 250_000;
        }
        clean.seg(false, PSH_ACK, 1400, 65535);
        if i % 2 == 1 {
            clean.seg(true, ACK, 0, 65535);
        }
    }
    clean.seg(true, ACK, 0, 65535);
    clean.close();
    let mut odd = Conv::open((c, 40_002), (s, 5002), clean.t_us);
    odd.seg(false, PSH_ACK, 20, 65535);
    for i in 0..2000 {
        if i % 400 == 0 {
            odd.t_us += 250_000;
        }
        match i {
            500 => {
                // A retransmission of the previous segment.
                odd.seq[0] = odd.seq[0].wrapping_sub(1000);
                odd.seg(true, PSH_ACK, 1000, 65535);
            }
            800 => odd.seg(false, ACK, 0, 0),
            1200 => odd.lost(true, 1000),
            _ => {}
        }
        odd.seg(true, PSH_ACK, 1000, 65535);
        odd.seg(false, ACK, 0, 65535);
        if i % 100 == 0 {
            odd.seg(false, PSH_ACK, 50, 65535);
            odd.seg(true, ACK, 0, 65535);
        }
    }
    odd.seg(true, RST | ACK, 0, 0);
    let mut http = Conv::open((c, 40_003), (s, 80), odd.t_us);
    let req = b"GET /big HTTP/1.1\r\nHost: example\r\n\r\n";
    http.segs.push(common::TcpSeg { t_us: http.t_us, src: http.c, dst: http.s, flags: PSH_ACK, seq: http.seq[0], ack: http.seq[1], window: 65535, payload: req.to_vec() });
    http.seq[0] += req.len() as u32;
    http.t_us += 50;
    let body = 300 * 1400;
    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {body}\r\n\r\n");
    let mut resp = head.into_bytes();
    resp.extend((0..body).map(|i| b'a' + (i % 26) as u8));
    for chunk in resp.chunks(1400) {
        http.segs.push(common::TcpSeg { t_us: http.t_us, src: http.s, dst: http.c, flags: PSH_ACK, seq: http.seq[1], ack: http.seq[0], window: 65535, payload: chunk.to_vec() });
        http.seq[1] += chunk.len() as u32;
        http.t_us += 50;
        http.seg(true, ACK, 0, 65535);
    }
    http.close();
    for v in [clean, odd, http] {
        segs.extend(v.segs);
    }
    common::tcp_pcap(&segs)
}

/// Turns the kernel's receive timestamps on for every packet (a socket with
/// SO_TIMESTAMPNS, kept open): two captures of the same packet then read
/// the same time from it instead of each its own clock read.
fn timestamps_on() -> std::net::UdpSocket {
    use std::os::fd::AsRawFd;
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let on: libc::c_int = 1;
    // SAFETY: setsockopt with an int.
    let r = unsafe {
        libc::setsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, (&on as *const libc::c_int).cast(), 4)
    };
    assert_eq!(r, 0, "SO_TIMESTAMPNS");
    // The kernel turns it on from a work queue.
    std::thread::sleep(Duration::from_millis(200));
    s
}

fn rows(p: &Path) -> Vec<BTreeMap<String, String>> {
    if p.exists() {
        read_log(p).into_iter().map(|r| r.into_iter().collect()).collect()
    } else {
        Vec::new()
    }
}

/// The identity issue 18 asks for: two captures of the same replay, with and
/// without --kernel-accounting, write the same conn.log, flows.log and
/// transaction logs, field for field (times included: both read the
/// kernel's timestamp of each packet; uids from the same seed), while the
/// kernel counted most of the bulk packets instead of passing them.
#[test]
fn kernel_accounting_keeps_every_record() {
    let Some(ns) = netns() else { return };
    let dir = tmp("kacct");
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("bulk.pcap");
    std::fs::write(&pcap, bulk_tcp_pcap()).unwrap();
    let _ts = timestamps_on();
    // At the capture's own pace (pauses in the transfers), then as one
    // sustained stream (`--pps`): the tracker sees a packet only once its
    // ring block is retired (within 100 ms), so on a sustained stream the
    // kernel resumes counting from its own chain (what it numbered and
    // followed while suspended) rather than waiting for the tracker to
    // catch up.
    // With -f and --skip-empty-tcp (stages of the same socket program before
    // the kernel accounting stage), on both sides.
    let runs = [
        (&["--no-parse"][..], None),
        (&[][..], None),
        (&["--no-parse"][..], Some("20000")),
        (&["--no-parse", "-f", "tcp"][..], None),
        (&["--no-parse", "--skip-empty-tcp"][..], None),
    ];
    for (extra, pps) in runs {
        let with: Vec<&str> = [&["--kernel-accounting", "--seed", "7"][..], extra].concat();
        let without: Vec<&str> = [&["--seed", "7"][..], extra].concat();
        let k = Capture::start(&ns, &dir.join("k"), &with);
        let p = Capture::start(&ns, &dir.join("p"), &without);
        let rate: Vec<&str> = pps.map(|p| vec!["--pps", p]).unwrap_or_default();
        let out = Command::new("ip")
            .args(["netns", "exec", &ns.b, "tcpreplay", "-q", "-i", &ns.vb])
            .args(&rate)
            .arg(&pcap)
            .output()
            .expect("run tcpreplay");
        assert!(out.status.success(), "tcpreplay: {}", String::from_utf8_lossy(&out.stderr));
        let (kdir, pdir) = (k.dir.join("logs"), p.dir.join("logs"));
        let (kerr, perr) = (k.stop(), p.stop());
        let what = format!("--kernel-accounting {extra:?} {rate:?}");
        let line = kerr.lines().find(|l| l.starts_with("wirelog: kernel accounting:")).unwrap_or_else(|| panic!("{what}: no kernel accounting line: {kerr}"));
        let counted: u64 = line["wirelog: kernel accounting: ".len()..].split(' ').next().unwrap().parse().unwrap();
        let (seen_k, seen_p) = (packets_of(&kerr), packets_of(&perr));
        eprintln!("{what}: {counted} packets counted in the kernel; {seen_k} packets through the ring with it, {seen_p} without");
        assert!(stats_clean(&kerr) && stats_clean(&perr), "{what}: ring drops\n{kerr}\n{perr}");
        assert_eq!(seen_k + counted, seen_p, "{what}: every packet either crossed or was counted");
        // Parsing on, content detection holds the unparsed ports' first
        // packets in user space a while longer: fewer are counted there.
        // The floor is a share of the packets the capture passes (a ninth,
        // a ninetieth with parsing: 1,000 and 100 of this capture's 9,164).
        // With --skip-empty-tcp the kernel drops the empty ACKs before the
        // accounting stage, and what is left to count varies with how soon
        // the tracker delegates: 520 to 955 of 5,336 in five runs on
        // 2026-11-29, so it is held to the lower share.
        let floor = if extra.is_empty() || extra.contains(&"--skip-empty-tcp") { seen_p / 90 } else { seen_p / 9 };
        assert!(counted > floor, "{what}: only {counted} packets counted in the kernel");
        for log in ["conn.log", "flows.log", "http.log"] {
            let (kr, pr) = (rows(&kdir.join(log)), rows(&pdir.join(log)));
            if log != "http.log" || extra.is_empty() {
                assert!(!pr.is_empty(), "{what}: no {log}");
            }
            let Some(first) = pr.first() else { continue };
            let fields: Vec<&str> = first.keys().map(String::as_str).collect();
            assert_same(&format!("{what}: {log}"), &kr, &pr, &fields);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Packets counted in the kernel (kernel accounting's summary line; 0
/// without one).
fn counted_in_kernel(stderr: &str) -> u64 {
    stderr.lines().find_map(|l| l.strip_prefix("wirelog: kernel accounting: ")).map_or(0, |l| l.split(' ').next().unwrap().parse().unwrap())
}

/// No packet was dropped by the ring.
fn stats_clean(stderr: &str) -> bool {
    last_stats(stderr).contains(" 0 dropped")
}

/// The kernel's counts in the last stats line: (packets it passed, dropped).
fn kernel_counts(stderr: &str) -> (u64, u64) {
    let line = last_stats(stderr);
    let k = &line[line.find("kernel: ").expect("kernel counts") + "kernel: ".len()..];
    let mut w = k.split(' ');
    let passed = w.next().unwrap().parse().unwrap();
    let dropped = w.nth(1).unwrap().parse().unwrap();
    (passed, dropped)
}

/// TCP segments of a capture the skip-empty-TCP filter drops (IPv4, no
/// payload, none of SYN/FIN/RST, not a fragment: the capture is IPv4 only).
fn empty_tcp_segments(pcap: &Path) -> u64 {
    let out = Command::new("tcpdump")
        .args(["-nn", "-q", "-r"])
        .arg(pcap)
        .arg("tcp and ip[6:2] & 0x1fff == 0 and tcp[13] & 7 == 0 and ip[2:2] - ((ip[0] & 0x0f) << 2) - ((tcp[12] & 0xf0) >> 2) == 0")
        .output()
        .expect("tcpdump");
    assert!(out.status.success(), "tcpdump: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout.iter().filter(|b| **b == b'\n').count() as u64
}

/// Issue 35: a CPU budget a third of what the capture costs without one
/// (at least 0.1% of a core), while the sysbench MySQL capture is replayed
/// three times at top speed into an 8 MiB ring. (tcpreplay into a veth
/// reaches 30-100 k packets/s on the shared 2-core test machine, which
/// costs the capture 1-3% of a core: a fixed 3% would not bind there, so
/// the budget follows what the unbudgeted run measured.) The capture
/// process's CPU (every thread, from schedstat) from the start of the
/// replay until the ring is worked through stays within the budget plus
/// the stated tolerance (the governor's 0.5 s burst, and 5 ms); the
/// shedding is said; and every packet sent is accounted for: taken from the
/// ring, dropped by the kernel (counted), or an empty TCP segment the
/// swapped-in filter dropped while step 2 was on. Step 1b keeps its floor
/// (of the connections parsed, at least one never stopped). Then one loop
/// with the same budget into a ring that holds it whole: nothing dropped,
/// connections stopped, and the summed weights within 5% of the capture's
/// statements.
///
/// The unbudgeted baseline must lose nothing (what the budgeted run lacks
/// is then what it shed), but a capture starved of CPU by a loaded machine
/// lost 24,205 packets of an 8 MiB ring in a parallel suite run: the
/// baseline gets a ring that holds the whole replay ([`ring_for_replay`]),
/// so that its worker falling behind delays packets instead of losing
/// them. The budgeted run keeps the 8 MiB ring: that is what step 4 leaves
/// to the kernel.
#[test]
fn cpu_budget_holds_on_a_sysbench_replay() {
    let Some(ns) = netns_alone() else { return };
    let Some(pcap) = common::capture("gen_mysql.sh", "mysql.pcap") else { return };
    let dir = tmp("budget");
    let sent = |out: &std::process::Output| -> u64 {
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let a = &text[text.find("Actual: ").expect("tcpreplay's count") + "Actual: ".len()..];
        a.split(' ').next().unwrap().parse().unwrap()
    };
    // (packets sent, CPU-s, wall s, stderr, mysql.log rows, their summed
    // weights, MySQL connections in conn.log)
    let run = |loops: u32, ring: &str, extra: &[&str]| -> (u64, f64, f64, String, u64, u64, u64) {
        let flags: Vec<&str> = [&["--ring-size", ring][..], extra].concat();
        let cap = Capture::start(&ns, &dir.join(format!("b{}-{loops}", extra.len())), &flags);
        std::thread::sleep(Duration::from_millis(300));
        let (cpu0, _) = cpu_and_wakeups(cap.pid());
        let t0 = Instant::now();
        let out = Command::new("ip")
            .args(["netns", "exec", &ns.b, "tcpreplay", "--topspeed", "--loop", &loops.to_string(), "-i", &ns.vb])
            .arg(&pcap)
            .output()
            .expect("run tcpreplay");
        assert!(out.status.success(), "tcpreplay: {}", String::from_utf8_lossy(&out.stderr));
        let n = sent(&out);
        let replay_s = t0.elapsed().as_secs_f64();
        // The ring holds what the worker has not read yet: the window goes
        // on while it works through it.
        std::thread::sleep(Duration::from_secs(2));
        let (cpu1, _) = cpu_and_wakeups(cap.pid());
        let wall = t0.elapsed().as_secs_f64();
        let cpu = (cpu1 - cpu0) as f64 / 1e9;
        let log = cap.dir.join("logs/mysql.log");
        let conn_log = cap.dir.join("logs/conn.log");
        let err = cap.stop();
        let rows = read_log(&log);
        let weighted: u64 = rows.iter().map(|r| r.get("sample_weight").map_or(1, |w| w.parse::<u64>().unwrap())).sum();
        let mysql_conns = read_log(&conn_log).iter().filter(|c| c["id.resp_p"] == "3306").count() as u64;
        eprintln!("{flags:?}: {n} packets sent in {replay_s:.2} s; capture used {cpu:.3} CPU-s over {wall:.2} s ({:.2}% of a core); mysql.log {} rows, weights {weighted}; {mysql_conns} MySQL connections", cpu / wall * 100.0, rows.len());
        (n, cpu, wall, err, rows.len() as u64, weighted, mysql_conns)
    };
    let whole = ring_for_replay(&pcap, 3);
    let (free_sent, free_cpu, free_wall, free_err, statements, _, _) = run(3, &whole, &[]);
    // The unbudgeted run lost nothing: what is missing below was shed.
    assert!(stats_clean(&free_err), "{free_err}");
    assert_eq!(packets_of(&free_err), free_sent, "{free_err}");
    let pct = (free_cpu / free_wall * 100.0 / 3.0).max(0.1);
    let arg = format!("{pct:.1}%");
    let budget = arg.trim_end_matches('%').parse::<f64>().unwrap() / 100.0;
    let (sent_n, cpu, wall, err, rows, estimate, mysql_conns) = run(3, "8M", &["--cpu-budget", &arg]);
    let limit = budget * (wall + 0.5) + 0.005;
    assert!(cpu <= limit, "--cpu-budget {arg}: {cpu:.3} CPU-s over {wall:.2} s, limit {limit:.3}\n{err}");
    // The budget is shown without a zero tenth ("1%" for 1.0%).
    let shown = arg.replace(".0%", "%");
    let said = format!("wirelog: cpu budget: {shown} of a core for the whole process");
    assert!(err.contains(&said), "{said}?\n{err}");
    let shed = err.lines().find(|l| l.starts_with(&format!("wirelog: cpu budget {shown} of a core: "))).unwrap_or_else(|| panic!("no shed line: {err}"));
    eprintln!("{shed}");
    assert!(shed.contains("(1b) parsed connections thinned "), "step 1b not said: {shed}");
    // Every packet sent is accounted for (step 3's counted in the kernel
    // are in neither the ring's nor the kernel's counts).
    let taken = packets_of(&err);
    let (passed, dropped) = kernel_counts(&err);
    assert_eq!(passed, taken + dropped, "{err}");
    let counted = counted_in_kernel(&err);
    let filtered = sent_n - passed - counted;
    let step2_on = !shed.contains("(2) skip-empty-tcp 0.0 s");
    let empties = if step2_on { empty_tcp_segments(&pcap) * 3 } else { 0 };
    eprintln!("sent {sent_n}: {taken} taken, {dropped} dropped by the kernel, {counted} counted in the kernel (step 3), {filtered} empty TCP segments filtered (of {empties} sent)");
    assert!(filtered <= empties, "{filtered} packets missing beyond the kernel's drops, only {empties} empty TCP segments sent\n{err}");
    assert!(dropped > 0 || filtered > 0 || counted > 0, "nothing was shed at {arg}?\n{err}");
    // Step 1b's floor: a draw never stops the last parsed MySQL
    // connection (`parsing_by[p] > THIN_FLOOR` in crates/track/src/
    // tracker.rs), so after the run's last stop one parsed connection was
    // left: at most all but one of the connections whose parsing began
    // were stopped. What the tracker sees of the replay is not 3 x 4
    // connections: sysbench's capture ends with its connections open, most
    // or all of them (S1; three of four in one made here), and the next
    // loop's SYN on such a tuple goes on in the same connection (its bytes
    // are retransmissions to the tracker: it makes rows in the first loop
    // only); one that closed (SF) is opened anew by each loop. Here three
    // loops made six connections, four at a time. Those step 1 did not
    // parse (its "connections not parsed") never began.
    let count_before = |l: &str, what: &str| -> u64 { l.find(what).map_or(0, |i| l[..i].rsplit(['(', ' ']).next().unwrap().parse().unwrap()) };
    let stopped = count_before(shed, " connections no longer parsed");
    let parsed = mysql_conns.saturating_sub(count_before(shed, " connections not parsed"));
    assert!(mysql_conns >= 4, "the replay's connections: {mysql_conns}\n{err}");
    assert!(stopped < parsed.max(1), "the floor: {stopped} of {parsed} parsed connections stopped ({mysql_conns} in conn.log)\n{shed}");
    let error = estimate as f64 / statements as f64 - 1.0;
    eprintln!("statements: {statements} unbudgeted; budgeted {rows} rows, weights {estimate} ({:+.1}%), {stopped} connections stopped, {dropped} kernel drops", error * 100.0);
    // Step 1b's estimate: the transactions' weights (`sample_weight`,
    // summed) against the statements, on a replay where the estimate can
    // be judged. Not the run above: its kernel drops leave gaps in the
    // parsed connections too, whose statements are lost whatever their
    // weight (step 4 is counted, not estimated), and its later loops are
    // retransmissions on the connections that stay open, with no
    // statements, while a connection stopped in the first loop is still
    // stood for. So: one loop, every connection busy to its end, into a
    // ring that holds it whole (step 4's pauses then delay packets instead
    // of dropping them), the same budget; the truth is `read` of the
    // capture.
    let (_, one_cpu, _, one_err, one_rows, one_estimate, _) = run(1, &ring_for_replay(&pcap, 1), &["--cpu-budget", &arg]);
    let truth = dir.join("truth");
    let out = Command::new(BIN).args(["read", "--quiet", "--no-store", "--logs"]).arg(&truth).arg(&pcap).output().expect("wirelog read");
    assert!(out.status.success(), "wirelog read: {}", String::from_utf8_lossy(&out.stderr));
    let one_statements = read_log(&truth.join("mysql.log")).len() as u64;
    let one_shed = one_err.lines().find(|l| l.starts_with(&format!("wirelog: cpu budget {shown} of a core: "))).unwrap_or_else(|| panic!("no shed line: {one_err}"));
    // The run's CPU is said apart from the start's (the 300 MiB ring's
    // pages: 0.5-0.7 CPU-s here, which once read as 23% of a 0.8% budget).
    // The run's said CPU covers the window measured here (from 300 ms
    // after the start to 2 s after the replay), and the start is said.
    let said_cpu: f64 = one_shed[one_shed.find("the process used ").unwrap() + "the process used ".len()..].split(' ').next().unwrap().parse().unwrap();
    let start_cpu: f64 = one_shed[..one_shed.find(" CPU-s more to start").expect("the start's CPU said apart")].rsplit(' ').next().unwrap().parse().unwrap();
    eprintln!("one loop: said {said_cpu:.2} CPU-s after {start_cpu:.2} CPU-s to start; measured {one_cpu:.3} CPU-s");
    assert!(said_cpu + 0.01 >= one_cpu, "said {said_cpu} CPU-s, measured {one_cpu}\n{one_shed}");
    let one_stopped = count_before(one_shed, " connections no longer parsed");
    let (_, one_dropped) = kernel_counts(&one_err);
    let one_error = one_estimate as f64 / one_statements as f64 - 1.0;
    eprintln!("one loop: {one_statements} statements; budgeted {one_rows} rows, weights {one_estimate} ({:+.1}%), {one_stopped} connections stopped, {one_dropped} kernel drops", one_error * 100.0);
    assert_eq!(one_dropped, 0, "the ring holds the loop whole\n{one_err}");
    assert!(one_stopped > 0 && one_rows < one_statements, "nothing to estimate: {one_rows} rows of {one_statements} statements\n{one_shed}");
    assert!(one_error.abs() <= 0.05, "estimate {one_estimate} of {one_statements} statements ({:+.1}%)\n{one_err}", one_error * 100.0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `--ring-size` that holds `loops` replays of a capture whole: per
/// packet its captured bytes plus 128 (TPACKET_V3's frame header, the
/// link-layer address and the alignment: 80-96 bytes), a quarter more for
/// what a block leaves unused at its end, in MiB.
fn ring_for_replay(pcap: &Path, loops: u64) -> String {
    let b = std::fs::read(pcap).unwrap();
    let le = match b[..4] {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
        _ => panic!("{}: not a classic pcap", pcap.display()),
    };
    let u32_at = |i: usize| {
        let w = [b[i], b[i + 1], b[i + 2], b[i + 3]];
        if le { u32::from_le_bytes(w) } else { u32::from_be_bytes(w) }
    };
    let (mut at, mut bytes) = (24usize, 0u64);
    while at + 16 <= b.len() {
        let caplen = u32_at(at + 8) as usize;
        bytes += caplen as u64 + 128;
        at += 16 + caplen;
    }
    let mib = (bytes * loops * 5 / 4) / (1 << 20) + 1;
    format!("{}M", mib.max(8))
}

/// VmHWM (peak resident memory) of a process, bytes.
fn peak_rss(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = s.lines().find_map(|l| l.strip_prefix("VmHWM:")).unwrap().trim().trim_end_matches(" kB").trim().parse().unwrap();
    kb * 1024
}

/// Issue 35: memory stays within `--memory 64M` (plus a stated constant)
/// under a SYN flood (400,000 sources), a port scan (6 sources x 65,535
/// ports) and a flood of tiny UDP flows (400,000 sources), each replayed at
/// top speed: each packet a new connection, more than twice what the table
/// holds (the start line's "up to N connections" at 64M with 16 MiB of
/// stream buffers: read from the line, as the entry's size changes with
/// the layout). Peak RSS (VmHWM,
/// read before the capture stops) stays below 64 MiB + 64 MiB (the
/// constant BENCHMARKS "Memory budget" measured: the binary, the 4 MiB
/// ring, queued record batches, the allocator); every connection the table
/// could not hold was evicted, counted (or had begun long enough before the
/// last to have ended by its timeout); and every packet sent became a conn
/// record or was counted as a kernel drop.
#[test]
fn memory_holds_under_floods() {
    let Some(ns) = netns() else { return };
    let dir = tmp("floods");
    std::fs::create_dir_all(&dir).unwrap();
    let syn = |src: [u8; 4], sport: u16, dport: u16| common::TcpSeg {
        t_us: 1_700_000_000_000_000,
        src: (src, sport),
        dst: ([10, 200, 0, 1], dport),
        flags: 0x02,
        seq: 1,
        ack: 0,
        window: 1024,
        payload: Vec::new(),
    };
    // 400,000: more than twice the table `--memory 64M` holds (159,277 connections at 237 bytes each).
    let flood: Vec<common::TcpSeg> = (0..400_000u32).map(|i| syn([11, (i >> 16) as u8, (i >> 8) as u8, i as u8], 40000, 80)).collect();
    let scan: Vec<common::TcpSeg> = (0..6u8).flat_map(|s| (1..=65535u16).map(move |p| (s, p))).map(|(s, p)| syn([12, 0, 0, s], 50000, p)).collect();
    let floods = [
        ("syn-flood", common::tcp_pcap(&flood)),
        ("port-scan", common::tcp_pcap(&scan)),
        ("udp-flows", common::synthetic_pcap(400_000)),
    ];
    drop((flood, scan));
    let limit = (64u64 << 20) + (64 << 20);
    for (name, bytes) in floods {
        let pcap = dir.join(format!("{name}.pcap"));
        std::fs::write(&pcap, &bytes).unwrap();
        drop(bytes);
        let cap = Capture::start(&ns, &dir.join(name), &["--memory", "64M", "--stream-memory", "16M", "--ring-size", "4M"]);
        let t0 = Instant::now();
        let out = Command::new("ip")
            .args(["netns", "exec", &ns.b, "tcpreplay", "--topspeed", "-i", &ns.vb])
            .arg(&pcap)
            .output()
            .expect("run tcpreplay");
        assert!(out.status.success(), "tcpreplay: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        let sent: u64 = text[text.find("Actual: ").expect("tcpreplay's count") + 8..].split(' ').next().unwrap().parse().unwrap();
        let replay_s = t0.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_secs(1));
        let rss = peak_rss(cap.pid());
        let logs = cap.dir.join("logs/conn.log");
        let err = cap.stop();
        let line = last_stats(&err);
        let evicted: u64 = line[..line.find(" connections evicted").expect("evictions")].rsplit(' ').next().unwrap().parse().unwrap();
        let (_, dropped) = kernel_counts(&err);
        let rows = read_log(&logs);
        let conns = rows.len() as u64;
        // A connection may also end by its timeout while the replay runs
        // (under load a replay can outlast the shortest one, a lone SYN's 5
        // s: `tcp_syn_timeout_ns` in crates/track/src/tracker.rs), freeing
        // its slot without an eviction. At most the connections that began
        // 5 s or more before the last one can have ended so.
        let starts: Vec<f64> = rows.iter().map(|r| r["ts"].parse().expect("conn.log ts")).collect();
        let last = starts.iter().copied().fold(f64::MIN, f64::max);
        let expirable = starts.iter().filter(|&&t| t <= last - 5.0).count() as u64;
        eprintln!("{name}: {sent} packets in {replay_s:.2} s; peak RSS {} MiB; {evicted} connections evicted; {conns} conn records ({expirable} begun 5 s or more before the last); {dropped} kernel drops", rss >> 20);
        assert!(rss <= limit, "{name}: peak RSS {} MiB above 64 MiB + 64 MiB\n{err}", rss >> 20);
        let held: u64 = err[err.find(": up to ").expect("the table's size") + 8..].split(' ').next().unwrap().parse().unwrap();
        assert!(sent >= 2 * held, "{name}: {sent} packets is no flood for a table of {held}");
        assert!(evicted + held + expirable >= sent - dropped, "{name}: only {evicted} of {sent} connections evicted, the table holds {held}, {expirable} may have timed out\n{err}");
        assert_eq!(conns + dropped, sent, "{name}: every packet a conn record or a counted drop\n{err}");
        std::fs::remove_file(&pcap).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 35, step 1: with a budget half of what the unbudgeted run of the
/// mixed capture (thousands of short HTTP and DNS connections) cost, and a
/// ring that holds the whole replay (256 MiB: nothing is dropped, so what is
/// missing is what sampling left out), the transactions' weights
/// (`sample_weight`, summed) estimate the unbudgeted run's HTTP and DNS
/// counts within 25%. (Measured: 1-5%, BENCHMARKS "CPU budget"; the bound
/// leaves room for N up to 16 on ~1,500 connections, whose standard error
/// is ~10%.) The store keeps the weights too: `wirelog query`'s totals
/// over the sampled run equal the logs' summed weights and say they are
/// estimated; over the unsampled run they are the exact counts and say
/// nothing of the kind.
#[test]
fn cpu_budget_sampling_estimates_the_unsampled_totals() {
    let Some(ns) = netns_alone() else { return };
    let Some(pcap) = common::capture("gen_mixed.sh", "mixed.pcap") else { return };
    let dir = tmp("sampling");
    // (CPU share of a core, stderr, per log: (rows, summed weights, the
    // store's query total, whether the query said "estimated"))
    type Run = (f64, String, BTreeMap<&'static str, (u64, u64, u64, bool)>);
    let run = |extra: &[&str]| -> Run {
        let store = dir.join(format!("store{}", extra.len()));
        let store_s = store.to_str().unwrap().to_string();
        let flags: Vec<&str> = [&["--ring-size", "256M", "--force-ring-size", "--store", &store_s][..], extra].concat();
        let cap = Capture::start(&ns, &dir.join(format!("s{}", extra.len())), &flags);
        std::thread::sleep(Duration::from_millis(300));
        let (cpu0, _) = cpu_and_wakeups(cap.pid());
        let t0 = Instant::now();
        ns.replay(&pcap);
        std::thread::sleep(Duration::from_secs(5));
        let (cpu1, _) = cpu_and_wakeups(cap.pid());
        let share = (cpu1 - cpu0) as f64 / 1e9 / t0.elapsed().as_secs_f64();
        let logs = cap.dir.join("logs");
        let err = cap.stop();
        let mut got = BTreeMap::new();
        for (log, kind) in [("http.log", "http"), ("dns.log", "dns")] {
            let rows = rows(&logs.join(log));
            let w: u64 = rows.iter().map(|r| r.get("sample_weight").map_or(1, |w| w.parse::<u64>().unwrap())).sum();
            let q = Command::new(BIN)
                .args(["query", kind, "--by", "transport", "--format", "table", "--store", &store_s])
                .output()
                .unwrap();
            let (out, qerr) = (String::from_utf8_lossy(&q.stdout), String::from_utf8_lossy(&q.stderr));
            assert!(q.status.success(), "{out}{qerr}");
            let total: u64 = out
                .split("; total ")
                .nth(1)
                .and_then(|t| t.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no total in {out}"));
            let estimated = qerr.contains("wirelog: estimated: ");
            assert_eq!(estimated, out.contains("(estimated"), "{out}{qerr}");
            got.insert(log, (rows.len() as u64, w, total, estimated));
        }
        eprintln!("{flags:?}: {:.2}% of a core; {got:?}", share * 100.0);
        (share, err, got)
    };
    let (free_share, free_err, free) = run(&[]);
    assert!(stats_clean(&free_err), "{free_err}");
    for (log, &(rows, weights, total, estimated)) in &free {
        assert_eq!((weights, total, estimated), (rows, rows, false), "{log}: nothing sampled, the query is exact");
    }
    let arg = format!("{:.1}%", (free_share * 100.0 / 2.0).max(0.1));
    let (_, err, sampled) = run(&["--cpu-budget", &arg]);
    assert!(stats_clean(&err), "the ring held the replay: nothing dropped\n{err}");
    let shed = err.lines().find(|l| l.starts_with("wirelog: cpu budget ")).unwrap_or_else(|| panic!("no shed line: {err}"));
    eprintln!("{shed}");
    assert!(!shed.contains("(0 connections not parsed"), "sampling shed nothing at {arg}\n{err}");
    let mut any_estimated = false;
    for log in ["http.log", "dns.log"] {
        let (want, ..) = free[log];
        let (rows, estimate, queried, estimated) = sampled[log];
        assert!(want > 500, "{log}: the capture has {want} transactions");
        let error = (estimate as f64 - want as f64).abs() / want as f64;
        eprintln!("{log}: {want} unsampled; sampled {rows} rows weighing {estimate} ({:+.1}%); query total {queried}, estimated: {estimated}", (estimate as f64 / want as f64 - 1.0) * 100.0);
        assert!(error <= 0.25, "{log}: estimate {estimate} vs {want} unsampled\n{err}");
        // The store's answer is the logs' weighted sum, marked when a weight was above 1.
        assert_eq!(queried, estimate, "{log}: query total vs summed weights");
        assert_eq!(estimated, estimate > rows, "{log}");
        any_estimated |= estimated;
    }
    assert!(any_estimated, "sampling shed connections, yet no query said so");
    // The completeness line names each sampled protocol's 1 in N and when,
    // from the loss table's per-protocol parsed and sampled counts.
    let q = Command::new(BIN).args(["query", "loss", "--format", "csv", "--store"]).arg(dir.join("store2")).output().unwrap();
    let line = String::from_utf8_lossy(&q.stderr).into_owned();
    eprintln!("{line}");
    assert!(q.status.success(), "{line}");
    let named: Vec<&str> = ["HTTP", "DNS"].into_iter().filter(|p| line.contains(&format!("{p} sampled 1 in "))).collect();
    assert!(!named.is_empty() && line.contains("transaction counts there are estimates"), "{line}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The "N packets not IP" of the last stats line.
fn not_ip_of(stderr: &str) -> u64 {
    let line = last_stats(stderr);
    let end = line.find(" packets not IP").expect("a not IP count");
    line[..end].rsplit(' ').next().unwrap().parse().unwrap()
}

/// Issue 36: ARP, LLDP and STP frames are counted in the kernel by the
/// socket program, not copied to user space; the stats line says exactly
/// how many, the same as when a filter lets them through to user space
/// (`-f`), where they are counted as before.
#[test]
fn non_ip_frames_are_counted_in_the_kernel() {
    let Some(ns) = netns() else { return };
    let dir = tmp("nonip");
    std::fs::create_dir_all(&dir).unwrap();
    let mut conv = Conv::open(([10, 78, 0, 1], 40_001), ([10, 78, 0, 2], 5001), 1_700_000_000_000_000);
    for _ in 0..20 {
        conv.seg(true, PSH_ACK, 100, 65535);
        conv.seg(false, ACK, 0, 65535);
    }
    conv.close();
    let ip_packets = conv.segs.len() as u64;
    let mut pcap = common::tcp_pcap(&conv.segs);
    let mac = [0x02, 0, 0, 0, 0, 9];
    let eth = |dst: [u8; 6], ethertype: u16, body: &[u8]| {
        let mut f = dst.to_vec();
        f.extend_from_slice(&mac);
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(body);
        f.resize(f.len().max(60), 0);
        f
    };
    let arp = eth([0xff; 6], 0x0806, &[0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 9, 10, 78, 0, 9, 0, 0, 0, 0, 0, 0, 10, 78, 0, 1]);
    let lldp = eth([0x01, 0x80, 0xc2, 0, 0, 0x0e], 0x88cc, &[2, 7, 4, 2, 0, 0, 0, 0, 9, 4, 2, 7, 0x31, 6, 2, 0, 120, 0, 0]);
    // STP: an 802.3 frame (a length, not an EtherType) with LLC 42 42 03.
    let stp = eth([0x01, 0x80, 0xc2, 0, 0, 0], 38, &[0x42, 0x42, 0x03, 0, 0, 0, 0]);
    let mut frames = Vec::new();
    for i in 0..150 {
        frames.push(match i % 3 {
            0 => &arp,
            1 => &lldp,
            _ => &stp,
        });
    }
    for (i, f) in frames.iter().enumerate() {
        let t = 1_700_000_100 + i as u32 / 50;
        pcap.extend_from_slice(&t.to_le_bytes());
        pcap.extend_from_slice(&((i as u32 % 50) * 1000).to_le_bytes());
        pcap.extend_from_slice(&(f.len() as u32).to_le_bytes());
        pcap.extend_from_slice(&(f.len() as u32).to_le_bytes());
        pcap.extend_from_slice(f);
    }
    let path = dir.join("nonip.pcap");
    std::fs::write(&path, &pcap).unwrap();
    let (_, kernel) = live(&ns, &path, &dir.join("k"), &[]);
    let (_, user) = live(&ns, &path, &dir.join("u"), &["-f", "not ip6"]);
    eprintln!("kernel: {}\nuser: {}", last_stats(&kernel), last_stats(&user));
    assert!(!kernel.contains("refused the socket program"), "{kernel}");
    assert_eq!(not_ip_of(&kernel), 150, "{kernel}");
    assert_eq!(not_ip_of(&user), 150, "{user}");
    assert!(kernel.contains("wirelog: socket program: 150 packets not IP"), "{kernel}");
    // With -f alone no socket program is loaded (the classic filter does
    // the same for less: `capture::sockprog::Stages::needed`); user space
    // counts what the filter passes.
    assert!(!user.contains("wirelog: socket program:"), "{user}");
    // Every packet counted once (IPv6 the namespace sends, if any, aside).
    assert!(packets_of(&kernel) >= ip_packets + 150, "{kernel}");
    assert_eq!(packets_of(&user), ip_packets + 150, "{user}");
    assert!(stats_clean(&kernel), "{kernel}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `pcap` with every frame rewritten by `frame` (the records' times kept,
/// their lengths the new frames').
fn map_frames(pcap: &[u8], frame: impl Fn(&[u8]) -> Vec<u8>) -> Vec<u8> {
    let mut out = pcap[..24].to_vec();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        let len = u32::from_le_bytes(pcap[at + 8..at + 12].try_into().unwrap()) as usize;
        let g = frame(&pcap[at + 16..at + 16 + len]);
        out.extend_from_slice(&pcap[at..at + 8]);
        out.extend_from_slice(&(g.len() as u32).to_le_bytes());
        out.extend_from_slice(&(g.len() as u32).to_le_bytes());
        out.extend_from_slice(&g);
        at += 16 + len;
    }
    out
}

/// `pcap` (Ethernet, as `common::tcp_pcap` writes it) with `tags` (TPID,
/// VLAN id) put after the MAC addresses of every frame.
fn tag_frames(pcap: &[u8], tags: &[(u16, u16)]) -> Vec<u8> {
    map_frames(pcap, |f| {
        let mut g = f[..12].to_vec();
        for (i, &(tpid, vid)) in tags.iter().enumerate() {
            if i == 0 {
                g.extend_from_slice(&tpid.to_be_bytes());
            }
            g.extend_from_slice(&vid.to_be_bytes());
            g.extend_from_slice(&tags.get(i + 1).map_or([f[12], f[13]], |t| t.0.to_be_bytes()));
        }
        g.extend_from_slice(&f[14..]);
        g
    })
}

/// `pcap` (Ethernet, IPv4, as `common::tcp_pcap` writes it) with every
/// frame's IP packet carried in a PPPoE session (RFC 2516: version and type
/// 1, code 0, session 0x1234) as PPP protocol 0x0021.
fn pppoe_frames(pcap: &[u8]) -> Vec<u8> {
    map_frames(pcap, |f| {
        assert_eq!(&f[12..14], &[0x08, 0x00], "IPv4 frames only");
        let ip_len = u16::from_be_bytes([f[16], f[17]]);
        let mut g = f[..12].to_vec();
        g.extend_from_slice(&[0x88, 0x64, 0x11, 0x00, 0x12, 0x34]);
        g.extend_from_slice(&(ip_len + 2).to_be_bytes());
        g.extend_from_slice(&[0x00, 0x21]);
        g.extend_from_slice(&f[14..]);
        g
    })
}

/// Issue 36: non-IP frames behind VLAN tags (802.1Q, QinQ 802.1ad + 802.1Q,
/// two 802.1Q, 0x9100; ARP, LLDP, STP and Cisco SNAP behind them) and PPPoE
/// frames that carry no IP (discovery, and sessions carrying LCP or IPCP;
/// untagged and behind a tag) are counted in the kernel, exactly, with the
/// veth's `rxvlan` offload on and off (the kernel takes the outer tag into
/// the metadata either way, see `capture::sockprog::ethernet_non_ip`); TCP
/// behind the same tags, and in PPPoE sessions, reaches user space whole
/// and gives `wirelog read`'s records, VLAN ids included. With a filter
/// (`-f`) everything goes to user space, which counts the same.
#[test]
fn tagged_non_ip_frames_are_counted_in_the_kernel() {
    let Some(ns) = netns() else { return };
    let dir = tmp("vlan-nonip");
    std::fs::create_dir_all(&dir).unwrap();
    // (tags, in a PPPoE session)
    let encaps: [(&[(u16, u16)], bool); 5] = [
        (&[(0x8100, 10)], false),
        (&[(0x88a8, 20), (0x8100, 30)], false),
        (&[(0x8100, 40), (0x8100, 41)], false),
        (&[], true),
        (&[(0x8100, 60)], true),
    ];
    let mut pcap = Vec::new();
    let mut ip_packets = 0;
    for (i, &(tags, pppoe)) in encaps.iter().enumerate() {
        let mut conv = Conv::open(([10, 79, 0, 1], 40_001 + i as u16), ([10, 79, 0, 2], 5001), 1_700_000_000_000_000 + i as u64 * 1_000_000);
        for _ in 0..10 {
            conv.seg(true, PSH_ACK, 100, 65535);
            conv.seg(false, ACK, 0, 65535);
        }
        conv.close();
        ip_packets += conv.segs.len() as u64;
        let mut framed = common::tcp_pcap(&conv.segs);
        if pppoe {
            framed = pppoe_frames(&framed);
        }
        if !tags.is_empty() {
            framed = tag_frames(&framed, tags);
        }
        pcap.extend_from_slice(if i == 0 { &framed[..] } else { &framed[24..] });
    }
    let mac = [0x02, 0, 0, 0, 0, 9];
    // dst, src, then `tags` and `ethertype` (or an 802.3 length), `body`.
    let eth = |dst: [u8; 6], tags: &[(u16, u16)], ethertype: u16, body: &[u8]| {
        let mut f = dst.to_vec();
        f.extend_from_slice(&mac);
        for &(tpid, vid) in tags {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&vid.to_be_bytes());
        }
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(body);
        f.resize(f.len().max(64), 0);
        f
    };
    let arp = [0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 9, 10, 79, 0, 9, 0, 0, 0, 0, 0, 0, 10, 79, 0, 1];
    let lldp = [2, 7, 4, 2, 0, 0, 0, 0, 9, 4, 2, 7, 0x31, 6, 2, 0, 120, 0, 0];
    let bcast = [0xff; 6];
    let lldp_dst = [0x01, 0x80, 0xc2, 0, 0, 0x0e];
    let kinds = [
        eth(bcast, &[(0x8100, 10)], 0x0806, &arp),
        eth(lldp_dst, &[(0x8100, 10)], 0x88cc, &lldp),
        eth(bcast, &[(0x88a8, 20), (0x8100, 30)], 0x0806, &arp),
        eth(lldp_dst, &[(0x8100, 40), (0x8100, 41)], 0x88cc, &lldp),
        eth(bcast, &[(0x9100, 50)], 0x0806, &arp),
        // 802.3 behind a tag: STP (LLC 42 42 03) and PVST+ (SNAP, Cisco OUI).
        eth([0x01, 0x80, 0xc2, 0, 0, 0], &[(0x8100, 10)], 38, &[0x42, 0x42, 0x03, 0, 0, 0, 0]),
        eth([0x01, 0, 0x0c, 0xcc, 0xcc, 0xcd], &[(0x8100, 10)], 50, &[0xaa, 0xaa, 0x03, 0, 0, 0x0c, 0x01, 0x0b, 0, 0]),
        // PPPoE discovery (PADI, PADO behind a tag), and sessions carrying
        // LCP (echo request) and, behind a tag, IPCP (configure request).
        eth(bcast, &[], 0x8863, &[0x11, 0x09, 0, 0, 0, 4, 1, 1, 0, 0]),
        eth(mac, &[(0x8100, 60)], 0x8863, &[0x11, 0x07, 0, 0, 0, 4, 1, 1, 0, 0]),
        eth(mac, &[], 0x8864, &[0x11, 0, 0x12, 0x34, 0, 10, 0xc0, 0x21, 9, 1, 0, 8, 0, 0, 0, 0]),
        eth(mac, &[(0x8100, 60)], 0x8864, &[0x11, 0, 0x12, 0x34, 0, 12, 0x80, 0x21, 1, 1, 0, 10, 3, 6, 10, 79, 0, 9]),
    ];
    let n_kinds = kinds.len() as u32;
    let non_ip = 20 * n_kinds as u64;
    for i in 0..non_ip as u32 {
        let f = &kinds[(i % n_kinds) as usize];
        let t = 1_700_000_100 + i / 50;
        pcap.extend_from_slice(&t.to_le_bytes());
        pcap.extend_from_slice(&((i % 50) * 1000).to_le_bytes());
        pcap.extend_from_slice(&(f.len() as u32).to_le_bytes());
        pcap.extend_from_slice(&(f.len() as u32).to_le_bytes());
        pcap.extend_from_slice(f);
    }
    let path = dir.join("vlan-nonip.pcap");
    std::fs::write(&path, &pcap).unwrap();
    let file = read_conns(&path, &dir);
    assert_eq!(file.len(), encaps.len(), "{file:?}");

    let ethtool = common::veth::runs("ethtool", "--version");
    if !ethtool {
        skip("ethtool is not installed: the veth's rxvlan offload stays as it is");
    }
    let modes: &[&str] = if ethtool { &["off", "on"] } else { &["as is"] };
    for mode in modes {
        if ethtool {
            sh(&["ip", "netns", "exec", &ns.a, "ethtool", "-K", &ns.va, "rxvlan", mode, "rx-vlan-stag-hw-parse", mode]);
        }
        let (conns, kernel) = live(&ns, &path, &dir.join("k"), &[]);
        let (user_conns, user) = live(&ns, &path, &dir.join("u"), &["-f", "not ip6"]);
        eprintln!("rxvlan {mode}: kernel: {}\nuser: {}", last_stats(&kernel), last_stats(&user));
        assert!(!kernel.contains("refused the socket program"), "{kernel}");
        assert!(kernel.contains(&format!("wirelog: socket program: {non_ip} packets not IP")), "rxvlan {mode}: {kernel}");
        assert_eq!(not_ip_of(&kernel), non_ip, "rxvlan {mode}: {kernel}");
        assert!(!user.contains("wirelog: socket program:"), "with -f alone the classic filter runs: {user}");
        assert_eq!(not_ip_of(&user), non_ip, "rxvlan {mode}: {user}");
        // What the kernel counted + what came through the ring = what it
        // passed, and the same as user space saw when it got them all.
        assert_eq!(packets_of(&user), ip_packets + non_ip, "{user}");
        assert_eq!(packets_of(&kernel), kernel_counts(&kernel).0, "{kernel}");
        assert!(packets_of(&kernel) >= ip_packets + non_ip, "{kernel}");
        assert!(stats_clean(&kernel) && stats_clean(&user), "{kernel}\n{user}");
        assert_same(&format!("rxvlan {mode}, non-IP in the kernel"), &conns, &file, COMPARED);
        assert_same(&format!("rxvlan {mode}, -f"), &user_conns, &file, COMPARED);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Long TCP connections for `--cpu-budget` step 3: four conversations
/// (unparsed ports) that send data both ways, every segment carrying
/// payload (none is an empty segment step 2 would drop: the totals stay
/// exact whichever steps are on), in two captures to replay one after the
/// other: the handshakes and 12,500 exchanges per conversation (100,000
/// packets), then as many again and the FINs.
fn long_tcp_pcaps() -> [Vec<u8>; 2] {
    let (c, s) = ([10, 78, 0, 1], [10, 78, 0, 2]);
    let t0 = 1_700_000_000_000_000;
    let mut convs: Vec<Conv> = (0..4u16).map(|i| Conv::open((c, 41_000 + i), (s, 6000 + i), t0 + i as u64 * 10)).collect();
    let mut out = [Vec::new(), Vec::new()];
    for (phase, pcap) in out.iter_mut().enumerate() {
        for v in convs.iter_mut() {
            // (The first capture starts with the handshakes Conv::open wrote.)
            for _ in 0..12_500 {
                v.seg(true, PSH_ACK, 400, 65535);
                v.seg(false, PSH_ACK, 100, 65535);
                v.t_us += 100;
            }
            if phase == 1 {
                v.seg(false, FIN | ACK, 0, 65535);
                v.seg(true, FIN | ACK, 0, 65535);
            }
        }
        let mut segs: Vec<&common::TcpSeg> = convs.iter().flat_map(|v| &v.segs).collect();
        segs.sort_by_key(|s| s.t_us);
        let segs: Vec<common::TcpSeg> = segs.into_iter().map(|s| common::TcpSeg { payload: s.payload.clone(), ..*s }).collect();
        *pcap = common::tcp_pcap(&segs);
        for v in convs.iter_mut() {
            v.segs.clear();
        }
    }
    out
}

/// Replays `parts` from namespace b at `pps` packets/s, `quiet` between
/// them, then waits 3 s while the worker works through what its ring holds.
/// Returns the capture's CPU seconds from just before the first replay and
/// the wall seconds since it.
fn replay_parts_at(ns: &VethPair, cap: &Capture, parts: &[PathBuf], quiet: Duration, pps: u32) -> (f64, f64) {
    std::thread::sleep(Duration::from_millis(300));
    let (cpu0, _) = cpu_and_wakeups(cap.pid());
    let t0 = Instant::now();
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(quiet);
        }
        let out = Command::new("ip").args(["netns", "exec", &ns.b, "tcpreplay", "--pps", &pps.to_string(), "-q", "-i", &ns.vb]).arg(p).output().expect("run tcpreplay");
        assert!(out.status.success(), "tcpreplay: {}", String::from_utf8_lossy(&out.stderr));
        eprintln!("replay {i} done at {:.1} s", t0.elapsed().as_secs_f64());
    }
    std::thread::sleep(Duration::from_secs(3));
    let (cpu1, _) = cpu_and_wakeups(cap.pid());
    ((cpu1 - cpu0) as f64 / 1e9, t0.elapsed().as_secs_f64())
}

/// Issue 35 step 3: kernel accounting as a live step. Long bulk TCP
/// connections (no parsing: steps 1 and 1b save nothing) replayed at 13 k
/// packets/s with a budget of 0.2% of a core. Load-sensitive (BENCHMARKS.md,
/// "The step-3 live test and step 3 under a load well above the budget"):
/// at 10 k packets/s, as it was, it failed about 1 run in 6 on a loaded
/// machine: the worker needs about 0.2% of a core at that rate, the budget
/// itself, and its share is what the other threads leave (between a
/// quarter of the budget and all of it), so when they used little it sat
/// between the governor's 50% and 90% of its share and nothing moved past
/// step 2. At 13 k it needs ~0.26%, above its share however little the
/// others use (2026-11-29, ten runs, eight with two busy loops on the two
/// cores: step 3 on 7.7-22.4 s and 4-16 connections taken back, against
/// 2.1 and 10.6 s, 4 and 8, in two loaded runs at 10 k; those needs
/// included the governor's pause-and-wake loop, fixed on 2026-11-30, which
/// had the worker at its share doing nothing but waking: the worker then
/// used 0.03-0.05 CPU-s here, 0.01-0.02 since, and on an idle machine it
/// could stay paused to the end, step 3 never taken back). A budget well
/// below the need does not help: step 3 then comes at once but the worker
/// pauses and sheds in the kernel (step 4), and a shed packet the kernel
/// numbered for a suspended entry leaves the tracker unable to resume it,
/// so the kernel counts nothing (0.1% and 0.15%, measured there). At top
/// speed its ring backlog grew for seconds, and entries written from a
/// state that far behind count nothing. The governor goes to step 2, then
/// step 3 (the kernel counts the established connections); in the quiet 5 s
/// that follow it takes step 3 back and the tracker takes the delegated
/// connections back; the second replay brings it on again, and the FINs end
/// the connections. The conn records equal `wirelog read`'s of the same
/// packets, field for field but for times and uids (nothing counted twice
/// or lost on the way to the kernel and back), and flows.log's totals equal
/// conn.log's. The ring holds both replays, so the budget's pauses delay
/// packets rather than drop them; should the kernel drop some anyway (a
/// starved machine), packet totals must be short by exactly its drops. The
/// summary says how long step 3 was on and how many connections were
/// taken back.
#[test]
fn cpu_budget_step3_counts_connections_in_the_kernel_and_gives_them_back() {
    let Some(ns) = netns_alone() else { return };
    let dir = tmp("step3");
    std::fs::create_dir_all(&dir).unwrap();
    let pcaps = [dir.join("long1.pcap"), dir.join("long2.pcap")];
    for (p, b) in pcaps.iter().zip(long_tcp_pcaps()) {
        std::fs::write(p, b).unwrap();
    }
    let truth = {
        let logs = dir.join("read-logs");
        let out = Command::new(BIN).args(["read", "-C", "--quiet", "--no-store", "--no-parse", "--logs"]).arg(&logs).args(&pcaps).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        rows(&logs.join("conn.log"))
    };
    assert_eq!(truth.len(), 4);
    assert!(truth.iter().all(|r| r["history"].starts_with("Sh")), "{truth:?}");
    let mib = |r: String| r.trim_end_matches('M').parse::<u64>().unwrap();
    let ring = format!("{}M", mib(ring_for_replay(&pcaps[0], 1)) + mib(ring_for_replay(&pcaps[1], 1)));
    let cap = Capture::start(&ns, &dir, &["--no-parse", "--ring-size", &ring, "--cpu-budget", "0.2%"]);
    // Quiet between the parts: calm periods, step 3 goes off with
    // connections delegated.
    let (cpu, wall) = replay_parts_at(&ns, &cap, &pcaps, Duration::from_secs(5), 13_000);
    // Said, not asserted: at 0.2% the other threads' own use is most of
    // the budget (BENCHMARKS.md, "Step 3 as a live step").
    eprintln!("capture CPU {cpu:.3} s over {wall:.1} s ({:.2}% of a core; the budget's bound {:.3} s)", cpu / wall * 100.0, 0.002 * (wall + 0.5) + 0.005);
    let logs = cap.dir.join("logs");
    let err = cap.stop();
    let start = err.lines().find(|l| l.starts_with("wirelog: cpu budget: ")).unwrap_or_else(|| panic!("no start line: {err}"));
    assert!(start.contains("then skip-empty-tcp, then kernel accounting, then kernel drops"), "{start}");
    let shed = err.lines().find(|l| l.starts_with("wirelog: cpu budget 0.2% of a core: ")).unwrap_or_else(|| panic!("no shed line: {err}"));
    let kline = err.lines().find(|l| l.starts_with("wirelog: kernel accounting: ")).unwrap_or_else(|| panic!("no kernel accounting line: {err}"));
    eprintln!("{err}");
    let step3_s: f64 = shed[shed.find("(3) kernel accounting ").unwrap() + "(3) kernel accounting ".len()..].split(' ').next().unwrap().parse().unwrap();
    assert!(step3_s > 0.0, "step 3 never on: {shed}");
    let counted = counted_in_kernel(&err);
    let taken_back: u64 = kline[..kline.find(" connections taken back").expect("taken back")].rsplit(' ').next().unwrap().parse().unwrap();
    assert!(counted > 1000, "{kline}");
    assert!(taken_back > 0, "step 3 never went off with connections delegated: {shed}\n{kline}");
    // Every packet either crossed the ring or was counted in the kernel
    // (or the kernel dropped it, counted).
    let (taken, (_, dropped)) = (packets_of(&err), kernel_counts(&err));
    let live = rows(&logs.join("conn.log"));
    let flows = rows(&logs.join("flows.log"));
    let n = |r: &BTreeMap<String, String>, k: &str| -> u64 { r[k].parse().unwrap() };
    let sum = |rs: &[BTreeMap<String, String>], ks: &[&str]| -> u64 { rs.iter().map(|r| ks.iter().map(|k| n(r, k)).sum::<u64>()).sum() };
    let sent: u64 = sum(&truth, &["orig_pkts", "resp_pkts"]);
    let conn_pkts = sum(&live, &["orig_pkts", "resp_pkts"]);
    let step2_s = shed.find("(2) skip-empty-tcp ").map_or("?", |i| shed[i + "(2) skip-empty-tcp ".len()..].split(' ').next().unwrap());
    eprintln!("sent {sent}: {taken} through the ring, {counted} counted in the kernel, {dropped} dropped by the kernel; conn.log {conn_pkts} packets; {taken_back} connections taken back; step 2 on {step2_s} s, step 3 on {step3_s} s");
    assert_eq!(taken + counted + dropped, sent, "{err}");
    assert_eq!(conn_pkts + dropped, sent, "{err}");
    assert_eq!(sum(&flows, &["pkts_out", "pkts_in"]), conn_pkts, "flows.log vs conn.log packets");
    assert_eq!(sum(&flows, &["bytes_out", "bytes_in"]), sum(&live, &["orig_ip_bytes", "resp_ip_bytes"]), "flows.log vs conn.log bytes");
    if dropped == 0 {
        assert_same("conn.log with step 3 on and off", &live, &truth, COMPARED);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 35, steps 1b and 3 together on the sysbench MySQL replay: a
/// connection step 1b stopped needs only counts, so step 3 may hand it to
/// the kernel (a parser's connection never is), and take it back unparsed.
/// The capture is made to fit the 9000-byte veth by tests/fit_segments.py
/// (its loopback segments of up to 64 KiB cut as TCP would have: a frame
/// above the MTU is not sent by tcpreplay, and each was a hole, after which
/// the kernel passes every packet as irregular: 0 counted), without its
/// empty ACKs (step 2, on before step 3, drops those in the kernel without
/// counting them, which would leave conn.log short by a number no counter
/// gives), and cut in two, 80,000 and 40,000 packets, replayed at 10 k
/// packets/s with 4 s of quiet between, under `--cpu-budget 0.4%` (the four
/// parsed connections cost more at this rate: step 1b stops all but its
/// floor, then steps 2 and 3 come), with a ring that holds both parts.
///
/// Asserted (deterministic): step 1b stopped connections and kept its
/// floor, step 3 was on, every packet went through the ring or was counted
/// in the kernel or dropped by it (counted), conn.log's packet totals are
/// `wirelog read`'s of the same captures less the kernel's drops (and field
/// for field equal to them, uids and times aside, when it dropped none),
/// flows.log's equal conn.log's, and the process's CPU from the first
/// replay to 3 s after the second stays within the budget plus its
/// tolerance (0.5 s of burst, and 5 ms). Printed, not asserted: how many
/// packets the kernel counted and how many connections were taken back.
/// Both depend on how far the paused worker is behind the wire: its entries
/// are written from states that far behind, suspended at the connection's
/// next packet, and resumed only once the worker reaches it (BENCHMARKS.md
/// "Step 3 where it did not engage": 0 to 43,602 counted in runs of this
/// replay on a loaded machine, and step 3 went off in none, the worker
/// still working through its backlog in the quiet).
#[test]
fn cpu_budget_step3_counts_connections_step_1b_stopped() {
    let Some(ns) = netns_alone() else { return };
    let Some(pcap) = common::capture("gen_mysql.sh", "mysql.pcap") else { return };
    let dir = tmp("step3-1b");
    std::fs::create_dir_all(&dir).unwrap();
    let pcaps = [dir.join("part1.pcap"), dir.join("part2.pcap")];
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fit_segments.py");
    let out = Command::new("python3").arg(&script).arg(&pcap).args(["--mtu", "9000", "--parts", "80000", "40000"]).args(&pcaps).output().expect("python3");
    assert!(out.status.success(), "fit_segments.py: {}", String::from_utf8_lossy(&out.stderr));
    let truth = {
        let logs = dir.join("read-logs");
        let out = Command::new(BIN).args(["read", "-C", "--quiet", "--no-store", "--logs"]).arg(&logs).args(&pcaps).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        rows(&logs.join("conn.log"))
    };
    assert_eq!(truth.len(), 4, "sysbench's four connections");
    let mib = |r: String| r.trim_end_matches('M').parse::<u64>().unwrap();
    let ring = format!("{}M", mib(ring_for_replay(&pcaps[0], 1)) + mib(ring_for_replay(&pcaps[1], 1)));
    let cap = Capture::start(&ns, &dir, &["--ring-size", &ring, "--cpu-budget", "0.4%"]);
    let (cpu, wall) = replay_parts_at(&ns, &cap, &pcaps, Duration::from_secs(4), 10_000);
    let limit = 0.004 * (wall + 0.5) + 0.005;
    let logs = cap.dir.join("logs");
    let err = cap.stop();
    eprintln!("{err}");
    eprintln!("capture CPU {cpu:.3} s over {wall:.1} s ({:.3}% of a core; the budget's bound {limit:.3} s)", cpu / wall * 100.0);
    let shed = err.lines().find(|l| l.starts_with("wirelog: cpu budget 0.4% of a core: ")).unwrap_or_else(|| panic!("no shed line: {err}"));
    let kline = err.lines().find(|l| l.starts_with("wirelog: kernel accounting: ")).unwrap_or_else(|| panic!("no kernel accounting line: {err}"));
    let stopped: u64 = shed.find(" connections no longer parsed").map_or(0, |i| shed[..i].rsplit(['(', ' ']).next().unwrap().parse().unwrap());
    assert!((1..4).contains(&stopped), "step 1b stopped {stopped} of 4 (its floor keeps one): {shed}");
    let step3_s: f64 = shed[shed.find("(3) kernel accounting ").unwrap() + "(3) kernel accounting ".len()..].split(' ').next().unwrap().parse().unwrap();
    let counted = counted_in_kernel(&err);
    let taken_back: u64 = kline[..kline.find(" connections taken back").expect("taken back")].rsplit(' ').next().unwrap().parse().unwrap();
    let (taken, (_, dropped)) = (packets_of(&err), kernel_counts(&err));
    let live = rows(&logs.join("conn.log"));
    let flows = rows(&logs.join("flows.log"));
    let n = |r: &BTreeMap<String, String>, k: &str| -> u64 { r[k].parse().unwrap() };
    let sum = |rs: &[BTreeMap<String, String>], ks: &[&str]| -> u64 { rs.iter().map(|r| ks.iter().map(|k| n(r, k)).sum::<u64>()).sum() };
    let sent = sum(&truth, &["orig_pkts", "resp_pkts"]);
    let conn_pkts = sum(&live, &["orig_pkts", "resp_pkts"]);
    eprintln!("sent {sent}: {taken} through the ring, {counted} counted in the kernel, {dropped} dropped by the kernel; conn.log {conn_pkts} packets; {stopped} connections stopped by 1b; step 3 on {step3_s} s, {taken_back} connections taken back\n{kline}");
    assert!(step3_s > 0.0, "step 3 never on: {shed}");
    assert_eq!(taken + counted + dropped, sent, "{err}");
    assert_eq!(conn_pkts + dropped, sent, "{err}");
    assert_eq!(sum(&flows, &["pkts_out", "pkts_in"]), conn_pkts, "flows.log vs conn.log packets");
    assert_eq!(sum(&flows, &["bytes_out", "bytes_in"]), sum(&live, &["orig_ip_bytes", "resp_ip_bytes"]), "flows.log vs conn.log bytes");
    if dropped == 0 {
        assert_same("conn.log with steps 1b and 3", &live, &truth, COMPARED);
    }
    assert!(cpu <= limit, "--cpu-budget 0.4%: {cpu:.3} CPU-s over {wall:.2} s, limit {limit:.3}\n{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
