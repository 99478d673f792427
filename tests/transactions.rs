//! Application transactions against what the real servers and clients said
//! about the same traffic: nginx's access log, MariaDB's own status counters
//! and dig's printed answers, all recorded by ../shared/bench's generators
//! while they captured (the servers ran in network namespaces the generators
//! created).

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `wirelog read` on a capture and returns the rows of `log` (TSV).
fn transactions(pcap: &Path, tag: &str, log: &str) -> Vec<HashMap<String, String>> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tx-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["read", "-C", "--quiet", "--no-store", "--logs"])
        .arg(&dir)
        .arg(pcap)
        .output()
        .expect("run wirelog");
    assert!(
        out.status.success(),
        "wirelog read {}: {}",
        pcap.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    common::read_log(&dir.join(log))
}

fn results(name: &str) -> PathBuf {
    common::peers_dir().join("results").join(name)
}

fn num(r: &HashMap<String, String>, k: &str) -> u64 {
    r.get(k)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number {k} in {r:?}"))
}

/// Every request nginx logged appears once in http.log with the same client
/// port, method, URI, status and response size ($bytes_sent: headers and
/// body as sent); the only exceptions are requests answered after the
/// capture stopped.
#[test]
fn http_matches_nginx_access_log() {
    let Some(pcap) = common::capture("gen_http.sh", "http.pcap") else {
        return;
    };
    let recs = transactions(&pcap, "http", "http.log");
    type Key = (u64, String, String, u64, u64);
    let mut logged: HashMap<Key, Vec<f64>> = HashMap::new();
    let access = std::fs::read_to_string(results("http.access.log"))
        .expect("nginx access log of gen_http.sh");
    for line in access.lines() {
        // 1795335136.339 127.0.0.1:60586 "GET /static/1k.html HTTP/1.1" 200 318 567 rt=...
        let (head, rest) = line.split_once(" \"").expect("access log line");
        let (req, tail) = rest.split_once("\" ").expect("access log request");
        let mut h = head.split(' ');
        let t: f64 = h.next().unwrap().parse().unwrap();
        let port: u64 = h
            .next()
            .unwrap()
            .rsplit(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let mut r = req.split(' ');
        let (method, uri) = (r.next().unwrap().to_string(), r.next().unwrap().to_string());
        let f: Vec<&str> = tail.split(' ').collect();
        let (status, bytes_sent) = (f[0].parse().unwrap(), f[2].parse().unwrap());
        logged
            .entry((port, method, uri, status, bytes_sent))
            .or_default()
            .push(t);
    }
    let last_ts = recs
        .iter()
        .map(|r| r["ts"].parse::<f64>().unwrap())
        .fold(0.0, f64::max);
    // The clients keep running while tcpdump stops: what is cut off lies in
    // the capture's last moments. nginx logs with millisecond resolution
    // when a response is written, so allow for both.
    let cut_off = last_ts - 0.1;
    let (mut matched, mut unanswered, mut partly) = (0, 0, 0);
    for r in &recs {
        if r["status"] == "no_response" {
            // Its answer came after the capture stopped: nginx logged it then.
            let answered_late = logged.iter().any(|(k, ts)| {
                k.0 == num(r, "id.orig_p")
                    && k.1 == r["method"]
                    && k.2 == r["uri"]
                    && ts
                        .iter()
                        .any(|t| *t >= cut_off && *t + 0.001 >= num_f(r, "ts"))
            });
            assert!(
                answered_late,
                "unanswered request not answered after the capture's end: {r:?}"
            );
            unanswered += 1;
            continue;
        }
        // A response cut off by the capture's end is partial: what was seen
        // plus the declared bytes not seen is what nginx sent, and nginx
        // logged it when it finished, after the capture's last moments.
        let partial = r["status"] == "partial";
        let mut bytes = num(r, "response_bytes");
        if partial {
            bytes += num(r, "response_missed_bytes");
            partly += 1;
        }
        let key = (
            num(r, "id.orig_p"),
            r["method"].clone(),
            r["uri"].clone(),
            num(r, "status_code"),
            bytes,
        );
        let times = logged
            .get_mut(&key)
            .unwrap_or_else(|| panic!("http.log record not in nginx's log: {r:?}"));
        assert!(
            !partial || times.iter().any(|t| *t >= cut_off),
            "response cut short before the capture's end: {r:?}"
        );
        assert!(
            // Earliest first: records come in time order, like the log.
            !times.is_empty() && {
                times.remove(0);
                true
            },
            "http.log has more records than nginx for {key:?}"
        );
        if times.is_empty() {
            logged.remove(&key);
        }
        matched += 1;
    }
    // What nginx logged and wirelog did not: only responses finished after the
    // last captured packet (nginx logs when a response completes).
    let left: Vec<_> = logged
        .iter()
        .flat_map(|(k, ts)| ts.iter().map(move |t| (k, *t)))
        .collect();
    for (k, t) in &left {
        assert!(*t >= cut_off, "nginx logged {k:?} at {t}, before the capture ended ({last_ts}), but http.log lacks it");
    }
    println!("http: {matched} transactions equal to nginx's log ({partly} of them cut short by the capture's end), {unanswered} answered after the capture, {} logged by nginx after the capture's end", left.len());
    assert!(
        matched > 10_000,
        "expected the ~11.6k requests of gen_http.sh, matched {matched}"
    );
}

fn num_f(r: &HashMap<String, String>, k: &str) -> f64 {
    r.get(k)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number {k} in {r:?}"))
}

fn server_status(name: &str) -> HashMap<String, u64> {
    let text = std::fs::read_to_string(results(name)).expect("server status of gen_mysql.sh");
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.to_string(), w.next()?.parse().ok()?))
        })
        .collect()
}

/// Statements of one sysbench oltp_read_only transaction (BEGIN, 14
/// SELECTs, COMMIT) times its 4 connections: what can be in flight when the
/// generator's tcpdump stops. Its SIGINT drops what the kernel still holds
/// for it, so the capture's tail (each connection's last statements and its
/// FIN) is missing while the server counted them; pt-query-digest over the
/// same capture finds exactly the statements mysql.log has.
const IN_FLIGHT_AT_CAPTURE_END: u64 = 4 * 16;

/// Never more statements than the server ran, and none missing but what the
/// capture's end can cut off.
fn assert_captured(what: &str, ours: u64, server: u64, counter: &str) {
    assert!(
        ours <= server,
        "{what}: {ours} in mysql.log, more than the server's {counter} {server}"
    );
    assert!(
        server - ours <= IN_FLIGHT_AT_CAPTURE_END,
        "{what}: {ours} in mysql.log, {} fewer than the server's {counter} {server}",
        server - ours
    );
}

/// MariaDB's own counters against mysql.log, per statement type.
#[test]
fn mysql_matches_server_counters() {
    let Some(prepared) = common::capture("gen_mysql.sh", "mysql.pcap") else {
        return;
    };
    let recs = transactions(&prepared, "mysql", "mysql.log");
    let st = server_status("mysql.server_status.txt");
    let count = |cmd: &str| recs.iter().filter(|r| r["cmd"] == cmd).count() as u64;
    println!(
        "mysql.pcap: stmt_execute {} (server {}), stmt_prepare {} (server {})",
        count("stmt_execute"),
        st["Com_stmt_execute"],
        count("stmt_prepare"),
        st["Com_stmt_prepare"]
    );
    for (cmd, counter) in [
        ("stmt_execute", "Com_stmt_execute"),
        ("stmt_prepare", "Com_stmt_prepare"),
    ] {
        assert_captured(cmd, count(cmd), st[counter], counter);
    }
    let bad: Vec<_> = recs
        .iter()
        .filter(|r| r["cmd"] == "stmt_execute" && (r["arg"] == "-" || r["fingerprint"] == "-"))
        .collect();
    assert!(
        bad.is_empty(),
        "executions without their statement text: {:?}",
        &bad[..bad.len().min(3)]
    );

    let Some(text) = common::capture("gen_mysql.sh", "mysql_text.pcap") else {
        return;
    };
    let recs = transactions(&text, "mysql_text", "mysql.log");
    let st = server_status("mysql_text.server_status.txt");
    assert_eq!(
        recs.iter().filter(|r| r["cmd"] == "login").count(),
        4,
        "sysbench's 4 connections"
    );
    for (word, counter) in [
        ("SELECT", "Com_select"),
        ("BEGIN", "Com_begin"),
        ("COMMIT", "Com_commit"),
    ] {
        let ours = recs
            .iter()
            .filter(|r| {
                r["cmd"] == "query"
                    && r["arg"]
                        .split_whitespace()
                        .next()
                        .is_some_and(|w| w.eq_ignore_ascii_case(word))
            })
            .count() as u64;
        let server = st[counter];
        println!("mysql_text.pcap: {word} {ours} (server {counter} {server})");
        assert_captured(word, ours, server, counter);
    }
    let failed = recs.iter().filter(|r| r["status"] == "error").count();
    assert_eq!(failed, 0, "sysbench's queries all succeeded");
}

/// A shared capture's transaction log, whole and cut to 256 bytes a packet.
struct CutTo256 {
    whole: Vec<HashMap<String, String>>,
    cut: Vec<HashMap<String, String>>,
    /// The whole and the cut capture's `read` summaries (stderr).
    whole_summary: String,
    summary: String,
}

/// `whole_pcap` read as it is and cut by `editcap -s 256`, with the same flags.
fn cut_pcap_to_256(whole_pcap: &Path, proto: &str, scratch: &str) -> CutTo256 {
    let dir = common::scratch("transactions", scratch);
    let cut_pcap = dir.join(format!("{proto}_256.pcap"));
    let st = Command::new("editcap")
        .args(["-s", "256"])
        .arg(whole_pcap)
        .arg(&cut_pcap)
        .status()
        .expect("run editcap (wireshark-common)");
    assert!(st.success(), "editcap -s 256");
    let log = format!("{proto}.log");
    let read = |pcap: &Path, logs: &str| {
        let logs = dir.join(logs);
        let out = common::read_pcap(pcap, &logs, None, &["-C"]);
        (common::read_log(&logs.join(&log)), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (whole, whole_summary) = read(whole_pcap, "whole_logs");
    let (cut, summary) = read(&cut_pcap, "logs");
    CutTo256 { whole, cut, whole_summary, summary }
}

/// The number before " gaps, " in a `read` summary (said only when some
/// bytes were not parsed or missed; none said: 0).
fn gaps(summary: &str) -> u64 {
    summary
        .split(" gaps, ")
        .next()
        .filter(|head| head.len() < summary.len())
        .and_then(|head| head.rsplit(' ').next())
        .map(|n| n.parse().unwrap_or_else(|_| panic!("gaps in {summary}")))
        .unwrap_or(0)
}

/// Prints `what` with the cut read's transaction line, and checks that the
/// bytes past the snap length were counted as such, not as gaps: the cut
/// read has the whole read's gaps (a capture's own loss), no more.
fn no_gaps_in_cuts(whole_summary: &str, summary: &str, what: &str) {
    println!("{what}; {}", summary.lines().filter(|l| l.contains("transactions")).collect::<Vec<_>>().join(" "));
    assert_eq!(
        gaps(summary),
        gaps(whole_summary),
        "bytes beyond the snap length are not gaps: {summary}\nthe whole read: {whole_summary}"
    );
    assert!(summary.contains("bytes beyond the snap length"), "{summary}");
}

/// A transaction's time and four-tuple, and its place among the log's
/// transactions of that time and tuple (a client sends several requests in
/// one segment: sysbench's COM_STMT_CLOSE and COM_QUIT): the same in a whole
/// and a cut read.
type Key = (String, String, String, String, String, usize);

fn keys(log: &[HashMap<String, String>]) -> Vec<Key> {
    let mut seen: HashMap<[&str; 5], usize> = HashMap::new();
    log.iter()
        .map(|r| {
            let t = ["ts", "id.orig_h", "id.orig_p", "id.resp_h", "id.resp_p"].map(|k| r[k].as_str());
            let n = seen.entry(t).or_insert(0);
            *n += 1;
            let [ts, oh, op, rh, rp] = t.map(str::to_owned);
            (ts, oh, op, rh, rp, *n)
        })
        .collect()
}

/// The cut read's transactions by `keys`; one for each key of the whole
/// read (both logs hold each key once).
fn by_key(cut: &[HashMap<String, String>]) -> HashMap<Key, &HashMap<String, String>> {
    let m: HashMap<Key, &HashMap<String, String>> = keys(cut).into_iter().zip(cut).collect();
    assert_eq!(m.len(), cut.len(), "two transactions of the cut log under one key");
    m
}

/// mysql.pcap cut to its first 256 bytes of each packet (`editcap -s
/// 256`, what `capture --snaplen 256` keeps; issue 36) against the whole
/// capture: every statement is recorded, with the same connection (a
/// `read` seeds uids from the capture's content: one uid of the cut run per
/// connection of the whole one), time, command, text (or its first bytes,
/// when the packet was cut inside it), status, sizes and latencies; rows
/// either the same or unset (a result set longer than what was kept of its
/// packets), never another number; and no gap.
#[test]
fn mysql_cut_to_256_bytes_keeps_every_statement() {
    let Some(whole_pcap) = common::capture("gen_mysql.sh", "mysql.pcap") else {
        return;
    };
    mysql_cut_matches_whole(&cut_pcap_to_256(&whole_pcap, "mysql", "snaplen"), "mysql.pcap");
    // Stopped in the middle, as a capture may be: inside a result set.
    let last = pcap_packets(&whole_pcap) / 2;
    let half_pcap = first_packets(&whole_pcap, last, "mysql");
    mysql_cut_matches_whole(&cut_pcap_to_256(&half_pcap, "mysql", "snaplen_half"), &format!("its first {last} packets"));
}

fn mysql_cut_matches_whole(c: &CutTo256, what: &str) {
    let CutTo256 { whole, cut, whole_summary, summary } = c;
    let by_key = by_key(cut);
    assert_eq!(cut.len(), whole.len(), "statements of the cut capture ({what})");
    let mut uids: HashMap<&str, &str> = HashMap::new();
    let (mut rows_unset, mut cut_args) = (0usize, 0usize);
    for (w, k) in whole.iter().zip(keys(whole)) {
        let c = by_key
            .get(&k)
            .unwrap_or_else(|| panic!("not in the cut capture's log ({what}): {w:?}"));
        let uid = *uids.entry(&w["uid"]).or_insert(&c["uid"]);
        assert_eq!(uid, c["uid"], "one connection, one uid: {w:?}");
        for f in [
            "cmd",
            "status",
            "success",
            "request_bytes",
            "response_bytes",
            "latency",
            "first_byte_latency",
            "user",
            "database",
            "num_fields",
            "error_code",
        ] {
            assert_eq!(w[f], c[f], "{f} of {w:?}\nin the cut log ({what}): {c:?}");
        }
        if w["arg"] != c["arg"] {
            // A request longer than what was kept: its first bytes.
            assert!(
                c["arg"].len() >= 100 && w["arg"].starts_with(&c["arg"]),
                "arg of {w:?}\nin the cut log: {c:?}"
            );
            cut_args += 1;
        }
        if w["rows"] != c["rows"] {
            assert_eq!(c["rows"], "-", "rows of {w:?}\nin the cut log: {c:?}");
            rows_unset += 1;
        }
    }
    let distinct: std::collections::HashSet<&str> = uids.values().copied().collect();
    assert_eq!(distinct.len(), uids.len(), "two connections of the whole capture under one uid");
    no_gaps_in_cuts(
        whole_summary,
        summary,
        &format!("{what} cut to 256 bytes: {} statements, rows unset on {rows_unset}, text cut on {cut_args}", whole.len()),
    );
}

/// http.pcap cut to 256 bytes a packet (`editcap -s 256`, issue 36) against
/// the whole capture: every transaction is recorded and paired with its
/// request (same time, connection, method, URI), with the same status,
/// content type, request and response sizes and latencies; a response body
/// whose length the cut hides (a chunked body past its chunk-size line, a
/// header block cut before its Content-Length) has its bytes counted as
/// missed instead, never as another length; and no gap. The same for the
/// capture's first half, which ends inside responses as a capture stopped
/// at any moment does: those are partial in both reads, their declared
/// bytes not seen counted as missed.
#[test]
fn http_cut_to_256_bytes_keeps_status_sizes_and_pairing() {
    let Some(whole_pcap) = common::capture("gen_http.sh", "http.pcap") else {
        return;
    };
    let all = cut_pcap_to_256(&whole_pcap, "http", "snaplen_http");
    http_cut_matches_whole(&all, "http.pcap");
    // The capture stopped right after the first segment of a large
    // response past its middle: that response is cut short in both reads.
    let last = first_large_response_past_the_middle(&whole_pcap);
    let half_pcap = first_packets(&whole_pcap, last, "http");
    let half = cut_pcap_to_256(&half_pcap, "http", "snaplen_http_half");
    let partial = half.whole.iter().filter(|r| r["status"] == "partial").count();
    assert!(partial > 0, "the first {last} packets end inside no response: {}", half.whole_summary);
    http_cut_matches_whole(&half, &format!("its first {last} packets ({partial} responses cut short)"));
}

/// The first `last` packets of `pcap` (`editcap -r`), as a capture
/// stopped there would hold them.
fn first_packets(pcap: &Path, last: u64, proto: &str) -> PathBuf {
    let part = common::scratch("transactions", &format!("{proto}_first_part")).join(format!("{proto}_first_{last}.pcap"));
    let st = Command::new("editcap")
        .arg("-r")
        .arg(pcap)
        .arg(&part)
        .arg(format!("1-{last}"))
        .status()
        .expect("run editcap (wireshark-common)");
    assert!(st.success(), "editcap -r {} 1-{last}", pcap.display());
    part
}

/// A capture's packet count.
fn pcap_packets(pcap: &Path) -> u64 {
    common::kept::read_pcap(pcap).0.len() as u64
}

/// The number (from 1) of the first packet past the capture's middle that
/// opens a 200 response declaring a body of more than 16 KiB (any link type).
fn first_large_response_past_the_middle(pcap: &Path) -> u64 {
    let (recs, _) = common::kept::read_pcap(pcap);
    let from = recs.len() / 2;
    let large = |data: &[u8]| {
        let Some(at) = data.windows(15).position(|w| w == b"HTTP/1.1 200 OK") else {
            return false;
        };
        String::from_utf8_lossy(&data[at..])
            .split("\r\n")
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|len| len > 16 * 1024)
    };
    let i = recs[from..]
        .iter()
        .position(|r| large(&r.data))
        .unwrap_or_else(|| panic!("no response of more than 16 KiB past the middle of {}", pcap.display()));
    (from + i + 1) as u64
}

fn http_cut_matches_whole(c: &CutTo256, what: &str) {
    let CutTo256 { whole, cut, whole_summary, summary } = c;
    let by_key = by_key(cut);
    assert_eq!(cut.len(), whole.len(), "transactions of the cut capture ({what})");
    let mut body_hidden = 0usize;
    for (w, k) in whole.iter().zip(keys(whole)) {
        let c = by_key
            .get(&k)
            .unwrap_or_else(|| panic!("not in the cut capture's log ({what}): {w:?}"));
        for f in [
            "method",
            "uri",
            "host",
            "status_code",
            "status_msg",
            "response_content_type",
            "request_body_len",
            "status",
            "request_bytes",
            "response_bytes",
            "latency",
            "first_byte_latency",
        ] {
            assert_eq!(w[f], c[f], "{f} of {w:?}\nin the cut log ({what}): {c:?}");
        }
        if w["response_body_len"] != c["response_body_len"] {
            // Hidden by the cut: fewer body bytes, the rest counted as missed.
            let n = |r: &HashMap<String, String>, f: &str| r[f].parse::<u64>().unwrap_or(0);
            assert!(
                n(c, "response_body_len") < n(w, "response_body_len") && n(c, "response_missed_bytes") > 0,
                "response_body_len of {w:?}\nin the cut log ({what}): {c:?}"
            );
            body_hidden += 1;
        }
    }
    no_gaps_in_cuts(
        whole_summary,
        summary,
        &format!("{what} cut to 256 bytes: {} transactions, response body length hidden on {body_hidden}", whole.len()),
    );
}

/// dig's printed answers (id, name, type, status, answer data) against dns.log.
#[test]
fn dns_matches_dig() {
    let Some(pcap) = common::capture("gen_mixed.sh", "mixed.pcap") else {
        return;
    };
    let recs = transactions(&pcap, "mixed", "dns.log");
    // dig draws each message id at random, so the same name and type asked over UDP and over TCP
    // share an id about once in 200 runs (315 such pairs in gen_mixed.sh's batches, 65,536 ids):
    // the join is on everything dig's output names, the server and the transport included.
    type Key = (String, String, u64, String, String);
    let mut by_id: HashMap<Key, &HashMap<String, String>> = HashMap::new();
    for r in &recs {
        by_id.insert(
            (
                r["id.resp_h"].clone(),
                r["proto"].clone(),
                num(r, "trans_id"),
                r["query"].to_lowercase(),
                r["qtype_name"].clone(),
            ),
            r,
        );
    }
    let mut checked = 0;
    for (file, server, proto) in [
        ("mixed.dig_udp.txt", "127.0.0.53", "udp"),
        ("mixed.dig_tcp.txt", "127.0.0.53", "tcp"),
        ("mixed.dig_v6.txt", "::1", "udp"),
    ] {
        let text = std::fs::read_to_string(results(file)).expect("dig output of gen_mixed.sh");
        for block in text.split("\n; <<>> DiG").skip(1) {
            let Some(h) = block.lines().find(|l| l.starts_with(";; ->>HEADER<<-")) else {
                continue;
            };
            let status = h
                .split("status: ")
                .nth(1)
                .unwrap()
                .split(',')
                .next()
                .unwrap()
                .to_string();
            let id: u64 = h.rsplit("id: ").next().unwrap().trim().parse().unwrap();
            let q = block
                .lines()
                .skip_while(|l| !l.starts_with(";; QUESTION SECTION:"))
                .nth(1)
                .unwrap();
            let qf: Vec<&str> = q.trim_start_matches(';').split_whitespace().collect();
            let (qname, qtype) = (
                qf[0].trim_end_matches('.').to_lowercase(),
                qf[2].to_string(),
            );
            let answers: Vec<String> = block
                .lines()
                .skip_while(|l| !l.starts_with(";; ANSWER SECTION:"))
                .skip(1)
                .take_while(|l| !l.trim().is_empty())
                .map(|l| {
                    l.split_whitespace()
                        .last()
                        .unwrap()
                        .trim_end_matches('.')
                        .trim_matches('"')
                        .to_string()
                })
                .collect();
            // A record of this id and question from `server` over `proto`: the transport is part of
            // the match, so a record on the wrong transport fails here.
            let key = (server.to_string(), proto.to_string(), id, qname.clone(), qtype.clone());
            let r = by_id.get(&key).unwrap_or_else(|| {
                panic!("{file}: dig's answer id {id} {qname} {qtype} from {server} over {proto} is not in dns.log")
            });
            assert_eq!(r["rcode_name"], status, "{qname} {qtype} id {id}: rcode");
            let ours: Vec<String> = if r["answers"] == "-" {
                vec![]
            } else {
                r["answers"].split(',').map(String::from).collect()
            };
            assert_eq!(
                ours.len(),
                answers.len(),
                "{qname} {qtype}: answers {ours:?} vs dig {answers:?}"
            );
            for (o, d) in ours.iter().zip(&answers) {
                assert!(
                    o.trim_end_matches('.').ends_with(d.as_str()),
                    "{qname} {qtype}: answer {o:?} vs dig's {d:?}"
                );
            }
            checked += 1;
        }
    }
    println!("dns: {checked} of dig's answers found in dns.log with the same rcode and answers");
    assert!(
        checked > 1000,
        "expected the gen_mixed.sh dig answers, checked {checked}"
    );
}
