//! The command line tells the truth, through the binary: `read -f` keeps the
//! packets tcpdump keeps, nothing is created for a run that cannot start, a
//! store refuses to count a capture twice, `wirelog store` shows and checks
//! what a store holds, cut query output says so, and table, CSV and JSON
//! carry the same numbers in the same words.

mod common;

use common::sample_pcap;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn wirelog_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run wirelog")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh directory for one test.
fn scratch(name: &str) -> PathBuf {
    common::scratch("cli_truth", name)
}

fn have_tcpdump() -> bool {
    Command::new("tcpdump")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// tcpdump's count of packets matching `expr`, None when it refuses the
/// expression for this file.
fn tcpdump_count(file: &Path, expr: &str) -> Option<u64> {
    let o = Command::new("tcpdump")
        .arg("-r")
        .arg(file)
        .arg("--count")
        .arg(expr)
        .output()
        .unwrap();
    if !o.status.success() {
        return None;
    }
    let out = text(&o.stdout);
    let n = out
        .split_whitespace()
        .next()
        .unwrap_or_else(|| panic!("tcpdump --count said {out:?}"));
    Some(n.parse().unwrap())
}

/// wirelog's count from its summary line, None when it refused the filter.
fn wirelog_count(dir: &Path, file: &Path, expr: &str) -> Option<u64> {
    let o = wirelog_in(
        dir,
        &["read", "--no-store", "-f", expr, file.to_str().unwrap()],
    );
    let err = text(&o.stderr);
    if !o.status.success() {
        assert!(
            err.contains("filter") || err.contains(expr),
            "{expr}: {err}"
        );
        return None;
    }
    let i = err
        .find(" matched the filter")
        .unwrap_or_else(|| panic!("{expr}: no count in {err}"));
    let n = err[..i].rsplit('(').next().unwrap();
    Some(n.parse().unwrap())
}

fn shared(rel: &str) -> PathBuf {
    Path::new("/work/shared/testdata").join(rel)
}

#[test]
fn read_filter_keeps_what_tcpdump_keeps() {
    if !have_tcpdump() {
        eprintln!("SKIPPED: tcpdump not installed");
        return;
    }
    let dir = scratch("filter");
    let mut files = vec![sample_pcap(&dir)];
    for rel in [
        "zeek/vlan_qinq/q-in-q.pcap",
        "zeek/mpls_in_vlan/mpls-in-vlan.pcap",
        "packetbeat/pcaps/http_over_vlan.pcap",
        "packetbeat/pcaps/802.1q-q-in-q-icmp.pcap",
        "zeek/ftp_ipv6/ipv6.pcap",
        "zeek/ipv6_frag_dns/ipv6-fragmented-dns.pcap",
        "zeek/http_no_crlf/no_crlf.pcap",
        "zeek/mysql/mysql.pcap",
        "zeek/gtp_outer_ip_frag/gtp1_gn_normal_incl_fragmentation.pcap",
        "zeek/llc_fddi_large/llc.pcap",
        "linktypes/tcpdump_LINKTYPE_RAW_ipv4.pcap",
        "linktypes/tcpdump_LINKTYPE_IPV6.pcap",
        "linktypes/tcpdump_tcp_handshake_nano_sll.pcap",
        "linktypes/tcpdump_tcp_rst_diag_null.pcap",
        "linktypes/zeek_linux_dlt_sll2.pcap",
        "zeek/redis/django-cloud.pcapng",
    ] {
        let p = shared(rel);
        if p.exists() {
            files.push(p);
        } else {
            eprintln!("note: {} missing", p.display());
        }
    }
    let exprs = [
        "tcp",
        "udp",
        "icmp or icmp6",
        "ip6",
        "not ip and not ip6",
        "host 127.0.0.1",
        "src host ::1",
        "net 10.0.0.0/8",
        "dst net 172.16.0.0/12 or src net 192.168.0.0/16",
        "port 80",
        "udp port 53",
        "portrange 1-1023",
        "tcp dst portrange 3000-9000",
        "vlan",
        "vlan 13",
        "vlan and vlan 10",
        "vlan 1 and tcp",
        "vlan and mpls",
        "ip proto 17",
        "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0",
        "tcp[13] = 0x12",
        "tcp[tcpflags] & tcp-push != 0 and tcp dst port 80",
        "ip[8] < 64",
        "ip[6:2] & 0x3fff != 0",
        "ip6[6] = 44",
        "tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420",
        "len > 100",
        "greater 1000",
        "less 80",
        "ether multicast",
        "ip6 net fe80::/10",
    ];
    let mut matched_somewhere: BTreeMap<&str, u64> = BTreeMap::new();
    for file in &files {
        for expr in exprs {
            let want = tcpdump_count(file, expr);
            let got = wirelog_count(&dir, file, expr);
            assert_eq!(
                got,
                want,
                "{} with '{expr}' (None: refused)",
                file.display()
            );
            *matched_somewhere.entry(expr).or_default() += got.unwrap_or(0);
        }
    }
    eprintln!(
        "packets matched per expression over {} files: {matched_somewhere:?}",
        files.len()
    );
    let useful = matched_somewhere.values().filter(|n| **n > 0).count();
    assert!(
        useful >= 25,
        "expressions that matched some packet: {matched_somewhere:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn trailing_filter_words_get_a_hint_and_create_nothing() {
    let dir = scratch("hint");
    let pcap = sample_pcap(&dir);
    let o = wirelog_in(&dir, &["read", pcap.to_str().unwrap(), "port", "80"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("did you mean `-f 'port 80'`?"),
        "{}",
        text(&o.stderr)
    );
    assert!(
        o.stdout.is_empty(),
        "no conn.log header: {}",
        text(&o.stdout)
    );
    assert!(!dir.join("wirelog-data").exists());
    // A bad filter is named, before anything is created.
    let o = wirelog_in(&dir, &["read", "-f", "port eighty", pcap.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("port eighty"),
        "{}",
        text(&o.stderr)
    );
    assert!(!dir.join("wirelog-data").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_inputs_leave_no_directory_and_print_nothing() {
    let dir = scratch("bad");
    std::fs::write(dir.join("empty.pcap"), b"").unwrap();
    std::fs::write(dir.join("text.pcap"), b"this is not a capture\n").unwrap();
    for input in ["missing.pcap", "empty.pcap", "text.pcap"] {
        let o = wirelog_in(&dir, &["read", input]);
        assert_eq!(o.status.code(), Some(1), "{input}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(input),
            "{input}: {}",
            text(&o.stderr)
        );
        assert!(o.stdout.is_empty(), "{input}: {}", text(&o.stdout));
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into())
            .collect();
        left.sort();
        assert_eq!(left, ["empty.pcap", "text.pcap"], "{input}");
    }
    // --logs naming a file.
    let pcap = sample_pcap(&dir);
    let o = wirelog_in(
        &dir,
        &["read", "--logs", "text.pcap", pcap.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("--logs text.pcap: is a file, not a directory"),
        "{}",
        text(&o.stderr)
    );
    assert!(!dir.join("wirelog-data").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every file of a directory tree with its size.
fn listing(dir: &Path) -> BTreeMap<PathBuf, u64> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                out.insert(e.path(), m.len());
            }
        }
    }
    out
}

#[test]
fn a_second_read_is_refused_and_the_store_is_unchanged() {
    let dir = scratch("again");
    let pcap = sample_pcap(&dir);
    let store = dir.join("wirelog-data");
    let o = wirelog_in(&dir, &["read", "--logs", "logs", "sample.pcap"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let before = listing(&store);
    // Same bytes under another name.
    std::fs::copy(&pcap, dir.join("copy.pcap")).unwrap();
    let o = wirelog_in(&dir, &["read", "--logs", "logs", "copy.pcap"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("copy.pcap: already in the store wirelog-data"),
        "{err}"
    );
    assert!(
        err.contains("as sample.pcap (341 packets from 2026-11-22T08:28:48.240535Z"),
        "{err}"
    );
    assert!(err.contains("--again"), "{err}");
    assert_eq!(listing(&store), before, "nothing in the store changed");
    // The same file twice on one command line.
    let o = wirelog_in(
        &dir,
        &["read", "--store", "other", "sample.pcap", "copy.pcap"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("copy.pcap: same content as sample.pcap"),
        "{}",
        text(&o.stderr)
    );
    assert!(!dir.join("other").exists());
    // Another writer holds the store: refused before any log is created.
    if Command::new("flock").arg("--version").output().is_ok() {
        // --no-fork: the lock holder is this very process, gone when killed.
        let mut holder = Command::new("flock")
            .arg("--no-fork")
            .arg(store.join(".writer.lock"))
            .args(["sh", "-c", "echo held; exec sleep 30"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(holder.stdout.take().unwrap()), &mut line).unwrap();
        assert_eq!(line, "held\n");
        let o = wirelog_in(&dir, &["read", "--again", "--logs", "logs2", "copy.pcap"]);
        let _ = holder.kill();
        let _ = holder.wait();
        assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
        assert!(text(&o.stderr).contains("another wirelog process is writing"), "{}", text(&o.stderr));
        assert!(!dir.join("logs2").exists(), "no log directory for a refused run");
        assert_eq!(listing(&store), before, "nothing in the store changed");
    }
    // --again reads it, and conns double.
    let count = |dir: &Path| {
        let o = wirelog_in(dir, &["query", "conns", "--format", "csv"]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stdout)
    };
    let one = count(&dir);
    let o = wirelog_in(&dir, &["read", "--again", "--logs", "logs", "copy.pcap"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let two = count(&dir);
    let records = |csv: &str| -> u64 {
        let mut lines = csv.lines();
        let head: Vec<&str> = lines.next().unwrap().split(',').collect();
        let i = head
            .iter()
            .position(|h| *h == "conns")
            .unwrap_or_else(|| panic!("{csv}"));
        lines
            .map(|l| l.split(',').nth(i).unwrap().parse::<u64>().unwrap())
            .sum()
    };
    assert_eq!(records(&two), 2 * records(&one), "{one}\n{two}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A capture's identity as wirelog recorded it before the `v` form: its
/// size and a 64-bit FNV-1a of the size (little-endian) then the first and
/// last MiB, a byte at a time (written here from that description, not
/// from the product's code).
fn first_form_identity(bytes: &[u8]) -> String {
    let size = bytes.len();
    let edge = 1 << 20;
    let mut hashed = bytes[..size.min(edge)].to_vec();
    if size > edge {
        hashed.extend_from_slice(&bytes[(size - edge).max(edge)..]);
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in (size as u64).to_le_bytes().iter().chain(&hashed) {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{size}-{h:016x}")
}

/// A store an older wirelog wrote holds its captures under the first form
/// of the identity: such a capture is still refused, and `--again` reads it.
#[test]
fn a_capture_recorded_by_an_older_wirelog_is_refused_too() {
    let dir = scratch("old_identity");
    let pcap = sample_pcap(&dir);
    let bytes = std::fs::read(&pcap).unwrap();
    let o = wirelog_in(&dir, &["read", "--logs", "logs", "sample.pcap"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // The registry as the older wirelog wrote it: the same line, the
    // identity in its first form.
    let list = dir.join("wirelog-data/ingested.tsv");
    let now = std::fs::read_to_string(&list).unwrap();
    let new_form = now.lines().nth(1).unwrap().split('\t').next().unwrap().to_string();
    assert!(new_form.starts_with(&format!("{}-v", bytes.len())), "{now}");
    let old_form = first_form_identity(&bytes);
    std::fs::write(&list, now.replace(&new_form, &old_form)).unwrap();
    let before = listing(&dir.join("wirelog-data"));
    std::fs::copy(&pcap, dir.join("copy.pcap")).unwrap();
    let o = wirelog_in(&dir, &["read", "--logs", "logs", "copy.pcap"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("copy.pcap: already in the store wirelog-data"), "{err}");
    assert!(err.contains("as sample.pcap (341 packets from 2026-11-22T08:28:48.240535Z"), "{err}");
    assert_eq!(listing(&dir.join("wirelog-data")), before, "nothing in the store changed");
    // Another capture of another size is not taken for it.
    std::fs::write(dir.join("longer.pcap"), [&bytes[..], &bytes[24..]].concat()).unwrap();
    let o = wirelog_in(&dir, &["read", "--logs", "logs3", "longer.pcap"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // --again reads it, recorded under the new form beside the old.
    let o = wirelog_in(&dir, &["read", "--again", "--logs", "logs2", "copy.pcap"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let ids: Vec<String> = std::fs::read_to_string(&list)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert_eq!((ids[0].as_str(), ids[2].as_str()), (old_form.as_str(), new_form.as_str()), "{ids:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn store_shows_what_it_holds_and_check_names_bad_files() {
    let dir = scratch("store");
    sample_pcap(&dir);
    let o = wirelog_in(
        &dir,
        &["read", "--retain", "30d", "--logs", "logs", "sample.pcap"],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = wirelog_in(&dir, &["store", "--check"]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("files checked"),
        "{}",
        text(&o.stderr)
    );
    // Rows per kind equal the records of the logs of the same run.
    let log_records = |name: &str| {
        std::fs::read_to_string(dir.join("logs").join(name))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .count() as u64
    };
    let rows = |kind: &str| -> u64 {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{kind} ")))
            .unwrap_or_else(|| panic!("{out}"));
        line.split_whitespace().nth(3).unwrap().parse().unwrap()
    };
    assert_eq!(rows("conns"), log_records("conn.log"), "{out}");
    assert_eq!(rows("flows"), log_records("flows.log"), "{out}");
    assert_eq!(rows("http"), log_records("http.log"), "{out}");
    assert!(out.contains("sources ingested: 1\n"), "{out}");
    assert!(
        out.contains("sample.pcap  341 packets, 2026-11-22T08:28:48.240535Z .. "),
        "{out}"
    );
    assert!(out.contains("retention: age 30d, size none"), "{out}");
    // A damaged file: --check names it and fails.
    let conns = dir.join("wirelog-data/conns");
    let mut victim = None;
    let mut stack = vec![conns];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                victim = Some(p);
            }
        }
    }
    let victim = victim.expect("a conns file");
    // Every Parquet file of the store, whatever its tables (conns, flows,
    // each transaction kind, the loss table).
    let mut files = 0;
    let mut stack = vec![dir.join("wirelog-data")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                files += 1;
            }
        }
    }
    assert!(files >= 5, "the store holds {files} Parquet files");
    let bytes = std::fs::read(&victim).unwrap();
    let mut damaged = bytes.clone();
    for b in &mut damaged[8..bytes.len() / 2] {
        *b ^= 0x5a;
    }
    std::fs::write(&victim, &damaged).unwrap();
    let o = wirelog_in(&dir, &["store", "--check"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    let rel = victim.strip_prefix(&dir).unwrap();
    assert!(
        err.contains(&format!("corrupt file {}: ", rel.display())),
        "{err}"
    );
    assert!(err.contains(&format!("1 of {files} files are bad")), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A store of the demo capture, read once per test that needs one.
fn demo_store(name: &str) -> PathBuf {
    let dir = scratch(name);
    sample_pcap(&dir);
    let o = wirelog_in(&dir, &["read", "--quiet", "--no-parse", "sample.pcap"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    dir
}

#[test]
fn a_cut_query_says_so_on_stderr_in_every_format() {
    let dir = demo_store("cut");
    // Piped: the default format is CSV; 15 flow groups, 10 shown by default.
    let all = wirelog_in(&dir, &["query", "flows", "--top", "0"]);
    assert!(all.status.success(), "{}", text(&all.stderr));
    let groups = text(&all.stdout).lines().count() - 1;
    assert!(
        groups > 10,
        "the demo capture has more than 10 flow groups: {}",
        text(&all.stdout)
    );
    assert!(
        all.stderr.is_empty(),
        "nothing cut, nothing said: {}",
        text(&all.stderr)
    );
    let note = format!("wirelog: 10 of {groups} groups shown (--top 10; --top 0 shows all)\n");
    for format in [None, Some("csv"), Some("json"), Some("table")] {
        let mut args = vec!["query", "flows"];
        if let Some(f) = format {
            args.extend(["--format", f]);
        }
        let o = wirelog_in(&dir, &args);
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert_eq!(text(&o.stderr), note, "{format:?}");
        let out = text(&o.stdout);
        let rows = match format {
            Some("json") => out.lines().filter(|l| l.starts_with('{')).count(),
            // Header and the summary line.
            Some("table") => out.lines().count() - 2,
            _ => out.lines().count() - 1,
        };
        assert_eq!(rows, 10, "{format:?}: {out}");
    }
    let o = wirelog_in(&dir, &["query", "flows", "--top", "3", "--format", "json"]);
    assert_eq!(
        text(&o.stderr),
        format!("wirelog: 3 of {groups} groups shown (--top 3; --top 0 shows all)\n")
    );
    // --help states the default.
    let o = wirelog_in(&dir, &["query", "--help"]);
    let help = text(&o.stdout);
    assert!(
        help.contains("[default: 10]") && help.contains("0 shows") && help.contains("all"),
        "{help}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Rows of a query in one format, as maps from column to the value's text
/// (JSON strings unquoted; the table's `%` column and summary line left out).
fn rows_of(dir: &Path, args: &[&str], format: &str) -> Vec<BTreeMap<String, String>> {
    let mut all = vec!["query"];
    all.extend_from_slice(args);
    all.extend(["--top", "0", "--format", format]);
    let o = wirelog_in(dir, &all);
    assert!(o.status.success(), "{all:?}: {}", text(&o.stderr));
    let out = text(&o.stdout);
    let split = |l: &str| -> Vec<String> {
        match format {
            "csv" => l.split(',').map(str::to_string).collect(),
            _ => l.split_whitespace().map(str::to_string).collect(),
        }
    };
    match format {
        "json" => out
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| {
                let body = l
                    .trim_end_matches(',')
                    .trim_start_matches('{')
                    .trim_end_matches('}');
                body.split(',')
                    .map(|kv| {
                        let (k, v) = kv.split_once(':').unwrap();
                        let v = if v == "null" { "" } else { v.trim_matches('"') };
                        (k.trim_matches('"').to_string(), v.to_string())
                    })
                    .collect()
            })
            .collect(),
        _ => {
            let mut lines = out.lines();
            let head = split(lines.next().unwrap());
            let body: Vec<&str> = lines.collect();
            let body = if format == "table" {
                &body[..body.len() - 1]
            } else {
                &body[..]
            };
            body.iter()
                .map(|l| {
                    head.iter()
                        .cloned()
                        .zip(split(l))
                        .filter(|(k, _)| k != "%")
                        .map(|(k, v)| {
                            (
                                k,
                                if format == "table" && v == "-" {
                                    String::new()
                                } else {
                                    v
                                },
                            )
                        })
                        .collect()
                })
                .collect()
        }
    }
}

#[test]
fn table_csv_and_json_carry_the_same_values_in_the_same_words() {
    let dir = scratch("formats");
    sample_pcap(&dir);
    let o = wirelog_in(&dir, &["read", "--quiet", "sample.pcap"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for args in [
        &["flows", "--by", "proto"][..],
        &["conns", "--by", "proto,conn_state"],
        &["conns", "--by", "resp_p", "--every", "1m"],
        &["mysql", "--by", "command"],
        &["http", "--by", "method,status_code"],
        &["dns", "--by", "qtype_name,rcode_name"],
    ] {
        let csv = rows_of(&dir, args, "csv");
        assert!(!csv.is_empty(), "{args:?}");
        assert_eq!(rows_of(&dir, args, "json"), csv, "{args:?}: JSON vs CSV");
        assert_eq!(rows_of(&dir, args, "table"), csv, "{args:?}: table vs CSV");
        for r in &csv {
            if let Some(p) = r.get("proto") {
                assert!(
                    ["tcp", "udp", "icmp", "ipv6-icmp", "icmp6"].contains(&p.as_str()),
                    "{args:?}: {r:?}"
                );
            }
            for (k, v) in r {
                if k.ends_with("_s") && !v.is_empty() {
                    let (_, frac) = v.split_once('.').unwrap_or_else(|| panic!("{k}={v}"));
                    assert_eq!(frac.len(), 6, "{k}={v}: seconds with 6 decimals");
                }
                if [
                    "conns",
                    "count",
                    "pkts",
                    "bytes",
                    "orig_bytes",
                    "resp_bytes",
                ]
                .contains(&k.as_str())
                {
                    assert!(v.parse::<u64>().is_ok(), "{k}={v}: an exact count");
                }
            }
        }
    }
    // The same totals as the conn log: exact counts in the table's summary.
    let o = wirelog_in(&dir, &["query", "conns", "--format", "table", "--top", "1"]);
    let out = text(&o.stdout);
    assert!(
        out.lines()
            .last()
            .unwrap()
            .contains("of 29 records matched; total 29 conns"),
        "{out}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn login_commands_have_a_named_group() {
    let dir = scratch("login");
    sample_pcap(&dir);
    let pg = shared("zeek/postgresql/psql-create-insert-select-delete-drop.pcap");
    let mut args = vec!["read", "--quiet", "-C", "sample.pcap"];
    if pg.exists() {
        args.push(pg.to_str().unwrap());
    }
    let o = wirelog_in(&dir, &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for (kind, logins) in [("mysql", 2u64), ("pgsql", if pg.exists() { 1 } else { 0 })] {
        let rows = rows_of(&dir, &[kind], "csv");
        assert!(
            rows.iter().all(|r| !r["fingerprint"].is_empty()),
            "{kind}: an unnamed group: {rows:?}"
        );
        let login: u64 = rows
            .iter()
            .filter(|r| r["fingerprint"] == "<login>")
            .map(|r| r["count"].parse::<u64>().unwrap())
            .sum();
        // Each login transaction, counted by command, is in the group.
        let field = "command";
        let by_cmd = rows_of(&dir, &[kind, "--by", field], "csv");
        let want: u64 = by_cmd
            .iter()
            .filter(|r| ["login", "startup"].contains(&r[field].as_str()))
            .map(|r| r["count"].parse::<u64>().unwrap())
            .sum();
        assert_eq!(login, want, "{kind}: {rows:?} vs {by_cmd:?}");
        assert!(login >= logins, "{kind}: {rows:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn help_puts_options_under_their_headings() {
    let dir = scratch("help");
    let headings = |cmd: &str| -> BTreeMap<String, String> {
        let o = wirelog_in(&dir, &[cmd, "--help"]);
        let help = text(&o.stdout);
        let mut heading = String::new();
        let mut out = BTreeMap::new();
        for l in help.lines() {
            if !l.starts_with(' ') && l.ends_with(':') {
                heading = l.trim_end_matches(':').to_string();
            } else if let Some(long) = l.split_whitespace().find(|w| w.starts_with("--")) {
                out.insert(long.trim_end_matches(',').to_string(), heading.clone());
            }
        }
        out
    };
    let capture = headings("capture");
    for (opt, heading) in [
        ("--config", "Options"),
        ("--quiet", "Options"),
        ("--interface", "Capture"),
        ("--filter", "Capture"),
        ("--store", "Output"),
        ("--tcp-timeout", "Connection tracking"),
        ("--redact", "Application transactions"),
    ] {
        assert_eq!(
            capture.get(opt).map(String::as_str),
            Some(heading),
            "capture {opt}: {capture:?}"
        );
    }
    let read = headings("read");
    for (opt, heading) in [
        ("--quiet", "Options"),
        ("--filter", "Input"),
        ("--again", "Input"),
        ("--logs", "Output"),
        ("--max-connections", "Connection tracking"),
        ("--no-parse", "Application transactions"),
    ] {
        assert_eq!(
            read.get(opt).map(String::as_str),
            Some(heading),
            "read {opt}: {read:?}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
