//! The examples in `wirelog query --help` and `wirelog pcap --help` run as
//! written (through `sh -c`, in a directory holding the default store
//! `wirelog-data`), and each succeeds: the store is the demo capture
//! (samples/sample.pcap.gz) moved to the last hour, so `--last 1h` finds
//! it, read with `--pcap-dir` (recorded in the store, which is how the
//! `pcap` examples find the packets) and `--seed 1` (so the uid example
//! names a connection of it).
//!
//! Every other subcommand's examples run as written too: `read`'s in a
//! directory holding the demo capture; `capture`'s and `serve`'s (as root)
//! each in a network namespace of its own (an interface named `eth0` made
//! when the example names it) and a private mount namespace whose /tmp,
//! /var/log, /var/lib and /run are empty tmpfs, so their absolute paths
//! and port 9180 are theirs; `serve --clickhouse http://clickhouse:8123`
//! against the test ClickHouse endpoint (tests/clickhouse/endpoint.py)
//! reached under that name. And each summary has one memory-budget line.

mod common;

use common::lo::{LoNs, Reap};
use common::{live, sample_pcap, scratch};
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_wirelog");

/// The example command lines of a subcommand's `--help`: the lines after
/// `Examples:` that start with `wirelog `, without a trailing remark in
/// parentheses set off by spaces.
fn examples(sub: &str) -> Vec<String> {
    let out = Command::new(BIN).args([sub, "--help"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut inside = false;
    let mut v = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t == "Examples:" {
            inside = true;
            continue;
        }
        if inside {
            if !t.starts_with("wirelog ") {
                inside = false;
                continue;
            }
            let cmd = match t.find("   (") {
                Some(i) => t[..i].trim_end(),
                None => t,
            };
            v.push(cmd.to_string());
        }
    }
    v
}

/// The demo capture with every timestamp moved so that its last packet was
/// ten minutes ago (classic little-endian microsecond pcap: a 24-byte file
/// header, then 16-byte record headers whose first field is the seconds).
fn recent_copy(pcap: &Path, out: &Path) {
    let mut b = std::fs::read(pcap).unwrap();
    assert_eq!(&b[..4], &[0xd4, 0xc3, 0xb2, 0xa1], "the demo capture is a classic LE pcap");
    let mut offsets = Vec::new();
    let mut at = 24;
    while at + 16 <= b.len() {
        offsets.push(at);
        let incl = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + incl;
    }
    let last = offsets.iter().map(|&o| u32::from_le_bytes(b[o..o + 4].try_into().unwrap())).max().unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as u32;
    let delta = now - 600 - last;
    for o in offsets {
        let ts = u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) + delta;
        b[o..o + 4].copy_from_slice(&ts.to_le_bytes());
    }
    std::fs::write(out, b).unwrap();
}

#[test]
fn query_and_pcap_help_examples_run_as_written() {
    let dir = scratch("help_examples", "run");
    let recent = dir.join("recent.pcap");
    recent_copy(&sample_pcap(&dir.join("in")), &recent);
    let read = Command::new(BIN)
        .current_dir(&dir)
        .args(["read", "--quiet", "--seed", "1", "--pcap-dir", "wirelog-pcap", "--logs", "logs", "recent.pcap"])
        .output()
        .unwrap();
    assert!(read.status.success(), "{}", String::from_utf8_lossy(&read.stderr));

    let mut ran = 0;
    for sub in ["query", "pcap"] {
        let list = examples(sub);
        assert!(list.len() >= 3, "{sub} --help has its examples: {list:?}");
        for cmd in list {
            // `wirelog` on PATH is the binary under test.
            let bin_dir = Path::new(BIN).parent().unwrap();
            let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
            let o = Command::new("sh").current_dir(&dir).env("PATH", path).args(["-c", &cmd]).output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(o.status.success(), "{cmd}: exit {:?}\n{err}", o.status.code());
            if sub == "pcap" {
                // Each writes packets: its file has more than the header.
                let file = cmd.rsplit(' ').next().unwrap();
                let len = std::fs::metadata(dir.join(file)).unwrap().len();
                assert!(len > 24, "{cmd}: {len} bytes\n{err}");
                assert!(err.contains(" of them have packets in ") && !err.contains(" 0 of them"), "{cmd}: {err}");
            } else {
                assert!(!o.stdout.is_empty(), "{cmd}: no output");
            }
            eprintln!("ran: {cmd}");
            ran += 1;
        }
    }
    assert!(ran >= 15);
}

/// Runs `example` as written in a fresh network namespace (its `lo` up;
/// with an interface named `eth0`, a veth pair, when the example names
/// it) and a private mount namespace whose /tmp, /var/log, /var/lib and
/// /run are empty tmpfs, so the example's absolute paths are its own;
/// `prepare` runs first in the same place (a store, a token file), `probe`
/// while it runs (traffic, requests; their output is kept), then a
/// SIGTERM ends an example that has not ended, and `after` looks at what
/// it left. Returns the exit status of the example, its stderr and the
/// output of `probe` and `after`.
fn run_in_namespace(dir: &Path, example: &str, prepare: &str, probe: &str, after: &str) -> (i32, String, String) {
    let ns = LoNs::new("hx");
    let _reap = Reap(&ns);
    if example.contains("-i eth0") {
        live::sh(&["ip", "-n", &ns.name, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0p"]);
        for (dev, addr) in [("eth0", "10.77.0.1/24"), ("eth0p", "10.77.0.2/24")] {
            live::sh(&["ip", "-n", &ns.name, "addr", "add", addr, "dev", dev]);
            live::sh(&["ip", "-n", &ns.name, "link", "set", dev, "up"]);
        }
    }
    let bin_dir = Path::new(BIN).parent().unwrap();
    // The example's last command replaces the shell, so the SIGTERM reaches it.
    let script = match example.rsplit_once("&& ") {
        Some((first, last)) => format!("{first}&& exec {last}\n"),
        None => format!("exec {example}\n"),
    };
    std::fs::write(dir.join("example.sh"), script).unwrap();
    let wrapper = format!(
        "set -u\n\
         for m in /tmp /var/log /var/lib /run; do mount -t tmpfs -o size=64m tmpfs $m || exit 90; done\n\
         cd '{dir}' || exit 91\n\
         export PATH='{bin}':\"$PATH\"\n\
         {prepare}\n\
         sh example.sh > example.out 2> example.err &\n\
         pid=$!\n\
         sleep 2\n\
         ( {probe} ) > probe.out 2>&1\n\
         kill -0 $pid 2>/dev/null && kill -TERM $pid\n\
         wait $pid\n\
         echo $? > example.rc\n\
         ( {after} ) >> probe.out 2>&1\n",
        dir = dir.display(),
        bin = bin_dir.display(),
    );
    std::fs::write(dir.join("wrapper.sh"), wrapper).unwrap();
    let o = ns.cmd(&["unshare", "-m", "sh", dir.join("wrapper.sh").to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{example}: wrapper {:?}\n{}", o.status.code(), String::from_utf8_lossy(&o.stderr));
    let rc = std::fs::read_to_string(dir.join("example.rc")).unwrap().trim().parse().unwrap();
    let err = std::fs::read_to_string(dir.join("example.err")).unwrap();
    let probe = std::fs::read_to_string(dir.join("probe.out")).unwrap();
    (rc, err, probe)
}

fn root_or_skip(what: &str) -> bool {
    if !live::is_root() {
        live::skip(what);
        return false;
    }
    true
}

/// Every example of `capture --help` runs as written (as root: each opens
/// packet sockets in a namespace of its own; those without `--duration`
/// run until the SIGTERM they are written to wait for), exits 0, says
/// what it captured and wrote its logs where it says; ping traffic runs
/// meanwhile. The `--cpu-budget` one also states its budget and use.
#[test]
fn capture_help_examples_run_as_written() {
    if !root_or_skip("capturing needs root") {
        return;
    }
    let list = examples("capture");
    assert!(list.len() >= 4, "capture --help has its examples: {list:?}");
    let handles: Vec<_> = list
        .into_iter()
        .enumerate()
        .map(|(i, cmd)| {
            std::thread::spawn(move || {
                let dir = scratch("help_examples", &format!("capture{i}"));
                let target = if cmd.contains("-i eth0") { "10.77.0.2" } else { "127.0.0.1" };
                // Where its records go: the --logs directory, else the store.
                let out = cmd.split_once("--logs ").map_or("wirelog-data", |(_, r)| r.split(' ').next().unwrap()).to_string();
                let probe = format!("ping -c 4 -i 0.2 {target}; sleep 5");
                let (rc, err, probe) = run_in_namespace(&dir, &cmd, "", &probe, &format!("find {out} -type f"));
                (cmd, rc, err, probe)
            })
        })
        .collect();
    for h in handles {
        let (cmd, rc, err, probe) = h.join().unwrap();
        assert_eq!(rc, 0, "{cmd}: exit {rc}\n{err}");
        assert!(err.lines().any(|l| l.starts_with("wirelog: ") && l.contains(" packets, ")), "{cmd}: no summary\n{err}");
        if cmd.contains("--logs ") {
            assert!(probe.lines().any(|l| l.ends_with("/conn.log")), "{cmd}: its --logs directory holds no conn.log: {probe}\n{err}");
        } else {
            assert!(probe.lines().any(|l| l.contains("conn")), "{cmd}: its store holds no connections: {probe}\n{err}");
        }
        assert_eq!(err.matches("wirelog: memory budget ").count(), 1, "{cmd}: one memory-budget line\n{err}");
        if cmd.contains("--cpu-budget") {
            assert!(err.contains("wirelog: cpu budget: 5% of a core for the whole process"), "{err}");
            assert!(err.contains("wirelog: cpu budget 5% of a core: the process used "), "{err}");
        }
        eprintln!("ran: {cmd}");
    }
}

/// Every example of `serve --help` runs as written and serves: each in a
/// namespace of its own (the same port), the store made first where the
/// example expects one; the UI page and the API answer (with the token
/// where the example sets one, 401 without).
#[test]
fn serve_help_examples_run_as_written() {
    if !root_or_skip("namespaces need root") {
        return;
    }
    let list = examples("serve");
    assert!(list.len() >= 3, "serve --help has its examples: {list:?}");
    let sample = sample_pcap(&scratch("help_examples", "serve-sample"));
    let mut ran = 0;
    for (i, cmd) in list.iter().enumerate() {
        let dir = scratch("help_examples", &format!("serve{i}"));
        let api = "http://127.0.0.1:9180/api/extent";
        let (prepare, probe) = if cmd.starts_with("wirelog read samples/sample.pcap.gz") {
            std::fs::create_dir_all(dir.join("samples")).unwrap();
            std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/sample.pcap.gz"), dir.join("samples/sample.pcap.gz")).unwrap();
            (String::new(), format!("curl -s -o /dev/null -w '%{{http_code}}\\n' http://127.0.0.1:9180/; curl -s -o /dev/null -w '%{{http_code}}\\n' {api}"))
        } else if cmd.contains("--store /var/lib/wirelog") {
            let prepare = format!(
                "wirelog read --quiet --store /var/lib/wirelog '{}' > /dev/null 2>&1 || exit 92\nmkdir -p /run/wirelog && echo wirelog-test-token-0123456789 > /run/wirelog/token || exit 93",
                sample.display()
            );
            let probe = format!(
                "curl -s -o /dev/null -w '%{{http_code}}\\n' {api}; curl -s -o /dev/null -w '%{{http_code}}\\n' -H 'Authorization: Bearer wirelog-test-token-0123456789' {api}"
            );
            (prepare, probe)
        } else if cmd.contains("--clickhouse http://clickhouse:8123") {
            // A ClickHouse named `clickhouse` on 8123: the test endpoint
            // (the ClickHouse engine, chdb, behind tests/clickhouse/endpoint.py)
            // on a port of its own, forwarded from 8123, the name in this
            // mount namespace's /etc/hosts; two probes' records sent to it.
            let endpoint = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clickhouse/endpoint.py");
            let ch = "--clickhouse http://clickhouse:8123";
            let prepare = format!(
                "cp /etc/hosts hosts && echo '127.0.0.1 clickhouse' >> hosts && mount --bind hosts /etc/hosts || exit 94\n\
                 mkfifo ep.in && (sleep 120 > ep.in 2>/dev/null &) && python3 '{ep}' < ep.in > ep.out 2> ep.err &\n\
                 for i in $(seq 150); do grep -q '^control ' ep.out 2>/dev/null && break; sleep 0.2; done\n\
                 port=$(curl -s http://127.0.0.1:$(sed -n 's/^control //p' ep.out)/port/new) || exit 95\n\
                 socat TCP-LISTEN:8123,fork,reuseaddr TCP:127.0.0.1:$port > /dev/null 2>&1 &\n\
                 sleep 0.5\n\
                 wirelog clickhouse init {ch} > init.log 2>&1 || exit 96\n\
                 for p in web-3 web-4 web-5; do wirelog read --no-store {ch} --probe-name $p '{sample}' > /dev/null 2>> read.log || exit 97; done",
                ep = endpoint.display(),
                sample = sample.display(),
            );
            let probe = "curl -s -o /dev/null -w '%{http_code}\\n' 'http://127.0.0.1:9180/'; \
                         curl -s 'http://127.0.0.1:9180/api/query?kind=conns&by=proto' | \
                         python3 -c 'import json,sys; print(sum(r[\"conns\"] for r in json.load(sys.stdin)[\"rows\"]))'";
            (prepare, probe.to_string())
        } else {
            panic!("an example this test does not know how to run: {cmd}");
        };
        let up = "for i in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:9180/metrics && break; sleep 0.2; done";
        let (_rc, err, probe) = run_in_namespace(&dir, cmd, &prepare, &format!("{up}; {probe}"), "true");
        let codes: Vec<&str> = probe.lines().collect();
        if cmd.contains("--token-file") {
            assert_eq!(codes, ["401", "200"], "{cmd}: without and with the token\n{err}");
        } else if cmd.contains("--clickhouse") {
            // Answered from ClickHouse, for the two probes named only: twice
            // the sample's connections (a third probe sent them too).
            assert_eq!(codes, ["200", &(2 * sample_conns(&sample)).to_string()], "{cmd}: {probe}\n{err}");
        } else {
            assert_eq!(codes, ["200", "200"], "{cmd}: the page and the API\n{err}");
        }
        assert!(err.contains("wirelog: serving ") && err.contains(" on http://"), "{cmd}: {err}");
        eprintln!("ran: {cmd}");
        ran += 1;
    }
    assert!(ran >= 3);
}

/// Every example of `read --help` runs as written in a directory holding
/// the demo capture where the examples name it, and writes what it says:
/// the store, the logs (JSON when asked), the kept packets.
#[test]
fn read_help_examples_run_as_written() {
    let list = examples("read");
    assert!(list.len() >= 3, "read --help has its examples: {list:?}");
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    for (i, cmd) in list.iter().enumerate() {
        let dir = scratch("help_examples", &format!("read{i}"));
        std::fs::create_dir_all(dir.join("samples")).unwrap();
        std::fs::copy(Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/sample.pcap.gz"), dir.join("samples/sample.pcap.gz")).unwrap();
        let o = Command::new("sh").current_dir(&dir).env("PATH", &path).args(["-c", cmd]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{cmd}: exit {:?}\n{err}", o.status.code());
        assert!(err.lines().any(|l| l.starts_with("wirelog: ") && l.contains(" packets") && l.contains(" connections")), "{cmd}: {err}");
        if cmd.contains("--no-store") {
            assert!(!dir.join("wirelog-data").exists(), "{cmd}");
        } else {
            assert!(dir.join("wirelog-data").is_dir(), "{cmd}: no store");
        }
        if let Some((_, rest)) = cmd.split_once("--logs ") {
            let conn = std::fs::read_to_string(dir.join(rest.split(' ').next().unwrap()).join("conn.log")).unwrap();
            if cmd.contains("--log-format json") {
                assert!(conn.lines().all(|l| l.starts_with('{')), "{cmd}: {conn}");
            }
            if cmd.contains("tcp port 3306") {
                assert!(conn.contains("3306") && !conn.contains("\"dns\""), "{cmd}: {conn}");
            }
        } else {
            assert!(!o.stdout.is_empty(), "{cmd}: conn records on standard output");
        }
        if cmd.contains("--pcap-dir wirelog-pcap") {
            assert!(std::fs::read_dir(dir.join("wirelog-pcap")).unwrap().next().is_some(), "{cmd}: no kept packets");
        }
        eprintln!("ran: {cmd}");
    }
}

/// The connections of a capture, as a store of it counts them.
fn sample_conns(pcap: &Path) -> u64 {
    let dir = scratch("help_examples", "sample-count");
    let store = dir.join("store");
    let o = Command::new(BIN).args(["read", "--quiet", "--store"]).arg(&store).arg(pcap).output().unwrap();
    assert!(o.status.success());
    let o = Command::new(BIN).args(["query", "conns", "--by", "proto", "--format", "json", "--store"]).arg(&store).output().unwrap();
    let rows: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    rows.as_array().unwrap().iter().map(|r| r["conns"].as_u64().unwrap()).sum()
}

/// `read` prints its memory budget once in its summary.
#[test]
fn read_prints_one_memory_budget_line() {
    let dir = scratch("help_examples", "budget-line");
    let pcap = sample_pcap(&dir);
    let o = Command::new(BIN).current_dir(&dir).args(["read", "--no-store"]).arg(&pcap).args(["--logs", "logs"]).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(err.matches("wirelog: memory budget ").count(), 1, "{err}");
}
