//! `wirelog read`'s ssl.log and x509.log against Zeek's baselines, and the
//! ja4 column against FoxIO's expected values, on every case of
//! `../shared/testdata/tls/`.
//!
//! Each capture is read in the mode Zeek was run in (`-C` where Zeek used
//! it, per the case's NOTE.md). ssl.log rows are matched by 4-tuple, x509.log
//! rows by (fingerprint, host_cert, client_cert); every column both logs have
//! is compared (`ts` and `uid` excepted: masked by btest, random by design),
//! and must agree exactly unless `exception()` gives the reason. Columns
//! only Zeek writes (policy scripts wirelog does not have) are listed with
//! the reason in `NOT_WRITTEN`. The scoreboard is printed (`--nocapture`) and
//! recorded in BENCHMARKS.md.

mod common;

use common::parse_log;
use common::tls_cases::{testdata, Log, CASES};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use Log::*;
use std::process::Command;

type Row = HashMap<String, String>;

/// Zeek columns wirelog does not write, with the reason (not compared).
const NOT_WRITTEN: &[(&str, &str)] = &[];

/// Every case is read with the Zeek policies some of its baselines were
/// made with (ssl-log-ext.log, x509.base64.log, cert_request_ipv6's
/// ssl.log with certificate-request-info, validate-certs'
/// validation_status in x509_cert_repeat and tls12_alpn_ocsp_sct): their
/// columns are
/// compared where Zeek wrote them, and a baseline without them has no such
/// column to compare (only Zeek's columns are).
///
/// validate-certs checks chains against the system's trust store (Debian's
/// ca-certificates), where Zeek's runs used the Mozilla list Zeek ships
/// (x509_cert_repeat) and a 2014 snapshot of it (tls12_alpn_ocsp_sct,
/// `testing/scripts/external-ca-list.zeek`): the verdicts agree on these
/// captures, at their packet times, but would differ for a chain whose
/// root is in one list and not in the other.
///
/// validate-sct (tls12_alpn_ocsp_sct's valid_ct_logs, valid_ct_operators)
/// checks SCTs against the CT log list Zeek's test had: Zeek's
/// ct-list.zeek plus the seven older logs its test script adds
/// (`testing/btest/scripts/policy/protocols/ssl/validate-sct.zeek`),
/// `tests/data/ct-logs-zeek-btest.tsv`, made by `scripts/gen_ct_logs.py`
/// from the two scripts.
const POLICIES: &[&str] = &[
    "--zeek-policy",
    "ssl-log-ext,log-certs-base64,certificate-request-info,validate-certs,validate-sct",
    "--ct-logs",
    concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ct-logs-zeek-btest.tsv"),
];

/// Differences wirelog has on purpose, with the reason. None today: the
/// STARTTLS cases' `imap,ssl` and `pop3,ssl` agree since the cleartext is
/// watched (parse::starttls); kept so a difference is stated, not hidden.
fn exception(case: &str, log: Log, field: &str, zeek: &str, ours: &str) -> Option<&'static str> {
    let _ = (case, log, field, zeek, ours);
    None
}

fn tuple(r: &Row) -> String {
    let g = |k: &str| r.get(k).map(String::as_str).unwrap_or("?");
    format!(
        "{} {} {} {}",
        g("id.orig_h"),
        g("id.orig_p"),
        g("id.resp_h"),
        g("id.resp_p")
    )
}

fn cert_key(r: &Row) -> String {
    let g = |k: &str| r.get(k).map(String::as_str).unwrap_or("?");
    format!(
        "{} {} {}",
        g("fingerprint"),
        g("host_cert"),
        g("client_cert")
    )
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempdir(tag: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("wirelog-tls-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

/// Runs `wirelog read --logs` on a capture; the logs by file name.
fn run_wirelog(pcap: &Path, flags: &[&str], tag: &str) -> HashMap<String, Vec<Row>> {
    let dir = tempdir(tag);
    let logs = dir.0.join("logs");
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .arg("read")
        .arg("--quiet")
        .arg("--no-store")
        .args(["--seed", "1"])
        .arg("--logs")
        .arg(&logs)
        .args(flags)
        .arg(pcap)
        .output()
        .expect("run wirelog");
    assert!(
        out.status.success(),
        "wirelog failed on {}: {}",
        pcap.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut m = HashMap::new();
    for name in ["ssl.log", "x509.log", "conn.log"] {
        let text = std::fs::read_to_string(logs.join(name)).unwrap_or_default();
        m.insert(name.to_string(), parse_log(&text));
    }
    m
}

#[derive(Default, Clone, Copy)]
struct Score {
    rows: usize,
    matched: usize,
    fields: usize,
    agree: usize,
    excepted: usize,
}

impl Score {
    fn add(&mut self, o: Score) {
        self.rows += o.rows;
        self.matched += o.matched;
        self.fields += o.fields;
        self.agree += o.agree;
        self.excepted += o.excepted;
    }
}

#[test]
fn ssl_and_x509_logs_agree_with_zeek() {
    let not_written: HashMap<&str, &str> = NOT_WRITTEN.iter().copied().collect();
    let mut failures = Vec::new();
    let mut board = Vec::new();
    let mut totals: HashMap<&str, Score> = HashMap::new();
    let mut skipped_cols: HashSet<&str> = HashSet::new();
    let mut reasons: Vec<String> = Vec::new();
    for (n, c) in CASES.iter().enumerate() {
        let dir = testdata().join(c.case);
        let flags: Vec<&str> = c.flags.iter().chain(POLICIES).copied().collect();
        let ours = run_wirelog(&dir.join(c.pcap), &flags, &n.to_string());
        for &(log, file) in c.expected {
            let text = std::fs::read_to_string(dir.join(file)).expect("expected file");
            let expected = parse_log(&text);
            let (our_name, key): (&str, fn(&Row) -> String) = match log {
                Ssl => ("ssl.log", tuple),
                X509 => ("x509.log", cert_key),
                Conn => ("conn.log", tuple),
            };
            let mine: HashMap<String, &Row> = ours[our_name].iter().map(|r| (key(r), r)).collect();
            let pcap_tuples: HashSet<String> = ours["conn.log"].iter().map(tuple).collect();
            let mut s = Score::default();
            for want in &expected {
                // A shared log (ssl-all.log) has rows of other captures.
                if log != X509 && !pcap_tuples.contains(&tuple(want)) {
                    continue;
                }
                s.rows += 1;
                let Some(got) = mine.get(&key(want)) else {
                    failures.push(format!("{}/{file}: no row for {}", c.case, key(want)));
                    continue;
                };
                s.matched += 1;
                for (col, zv) in want {
                    if matches!(col.as_str(), "ts" | "uid") {
                        continue;
                    }
                    if log == Conn && col != "service" {
                        continue;
                    }
                    let Some(ov) = got.get(col) else {
                        if not_written.contains_key(col.as_str()) {
                            skipped_cols.insert(not_written.get_key_value(col.as_str()).unwrap().0);
                        } else {
                            failures.push(format!("{}/{file}: column {col} not written", c.case));
                        }
                        continue;
                    };
                    s.fields += 1;
                    if ov == zv {
                        s.agree += 1;
                    } else if let Some(why) = exception(c.case, log, col, zv, ov) {
                        s.excepted += 1;
                        reasons.push(format!(
                            "{}/{file} {} {col}: ours {ov}, Zeek {zv}: {why}",
                            c.case,
                            key(want)
                        ));
                    } else {
                        failures.push(format!(
                            "{}/{file} {} {col}: ours {ov:?}, Zeek {zv:?}",
                            c.case,
                            key(want)
                        ));
                    }
                }
            }
            // Nothing extra: every row we log for the capture is one Zeek logs.
            if log == X509 && ours[our_name].len() != expected.len() {
                failures.push(format!(
                    "{}/{file}: {} x509 rows, Zeek {}",
                    c.case,
                    ours[our_name].len(),
                    expected.len()
                ));
            }
            if s.rows == 0 {
                failures.push(format!("{}/{file}: no expected row compared", c.case));
            }
            board.push(format!(
                "{:<22} {:<52} {:>5}/{:<5} {:>6}/{:<6} {:>3}",
                c.case,
                format!("{} ({})", file, c.pcap),
                s.matched,
                s.rows,
                s.agree,
                s.fields,
                s.excepted
            ));
            totals
                .entry(match log {
                    Ssl => "ssl.log",
                    X509 => "x509.log",
                    Conn => "conn.log service",
                })
                .or_default()
                .add(s);
        }
    }
    eprintln!(
        "{:<22} {:<52} {:>11} {:>13} {:>3}",
        "case", "expected (pcap)", "rows", "fields", "exc"
    );
    for l in &board {
        eprintln!("{l}");
    }
    let mut names: Vec<_> = totals.keys().copied().collect();
    names.sort();
    for n in names {
        let t = totals[n];
        eprintln!(
            "total {n}: rows {}/{}, fields {}/{} agree, {} excepted",
            t.matched, t.rows, t.agree, t.fields, t.excepted
        );
    }
    for r in &reasons {
        eprintln!("excepted: {r}");
    }
    let mut cols: Vec<_> = skipped_cols.into_iter().collect();
    cols.sort();
    for c in cols {
        eprintln!("not written: {c}: {}", not_written[c]);
    }
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Rows of a pretty-printed `ja4_expected.json` (one key per line; nested
/// objects skipped), as key -> raw value.
fn ja4_rows(path: &Path) -> Vec<Row> {
    let text = std::fs::read_to_string(path).unwrap();
    let body = &text[text.find("\"rows\"").expect("rows")..];
    let mut rows = Vec::new();
    let mut cur: Option<Row> = None;
    let mut depth = 0;
    for line in body.lines().skip(1) {
        let l = line.trim();
        if l.ends_with('{') {
            depth += 1;
            if depth == 1 {
                cur = Some(HashMap::new());
            }
        } else if l.starts_with('}') {
            depth -= 1;
            if depth == 0 {
                rows.extend(cur.take());
            }
        } else if let (1, Some(r), Some((k, v))) = (depth, cur.as_mut(), l.split_once("\": ")) {
            let v = v.trim_end_matches(',').trim_matches('"');
            r.insert(k.trim_start_matches('"').to_string(), v.to_string());
        }
    }
    rows
}

/// The ja4 column of ssl.log equals FoxIO's value for every TCP ClientHello
/// of their captures (QUIC rows need Initial decryption: out of scope).
#[test]
fn ja4_column_matches_foxio() {
    let cases: &[(&str, &str, &[&str])] = &[
        ("ja4_tls12_single_hello", "tls12.pcap", &[]),
        ("ja4_ipv6_alpn_h2", "tls-alpn-h2.pcap", &[]),
        ("ja4_non_ascii_alpn", "tls-non-ascii-alpn.pcapng", &[]),
        // TLS through a SOCKS proxy: the first bytes are the SOCKS request,
        // so the proxy's port is named as a TLS port.
        (
            "ja4_socks_tls10",
            "socks-https-example.pcap",
            &["--ports", "tls=1080"],
        ),
        ("ja4_browser_many_hellos", "tls-handshake.pcapng", &[]),
    ];
    let (mut total, mut agree) = (0, 0);
    let mut failures = Vec::new();
    for (n, &(case, pcap, flags)) in cases.iter().enumerate() {
        let dir = testdata().join(case);
        let ours = run_wirelog(&dir.join(pcap), flags, &format!("ja4-{n}"));
        let by_tuple: HashMap<String, &Row> =
            ours["ssl.log"].iter().map(|r| (tuple(r), r)).collect();
        let (mut k, mut ok) = (0, 0);
        for r in ja4_rows(&dir.join("ja4_expected.json")) {
            if r["transport"] != "tcp" {
                continue;
            }
            let Some(want) = r.get("ja4") else { continue };
            k += 1;
            let key = format!(
                "{} {} {} {}",
                r["src"], r["src_port"], r["dst"], r["dst_port"]
            );
            let got = by_tuple.get(&key).and_then(|row| row.get("ja4"));
            if got == Some(want) {
                ok += 1;
            } else {
                failures.push(format!("{case} {key}: ours {got:?}, FoxIO {want}"));
            }
        }
        eprintln!("{case}: ja4 {ok}/{k} TCP ClientHellos agree");
        total += k;
        agree += ok;
    }
    eprintln!("ja4 total: {agree}/{total}");
    assert!(total >= 65, "expected at least 65 TCP rows, found {total}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The JSON logs carry what the TSV logs carry: every line is valid JSON
/// (checked by Python's parser), a field is present exactly when the TSV
/// column is set, and text and list values are the same.
#[test]
fn json_logs_match_tsv_logs() {
    let cases: &[(&str, &str, &[&str])] = &[
        ("x509_cert_repeat", "google-cert-repeat.pcap", &["-C"]),
        ("starttls_databases", "tls-12-amazon-rds.pcap", &[]),
        (
            "tls12_alpn_ocsp_sct",
            "signed_certificate_timestamp.pcap",
            &[],
        ),
        ("ja4_browser_many_hellos", "tls-handshake.pcapng", &[]),
    ];
    let mut compared = 0;
    for (n, &(case, pcap, flags)) in cases.iter().enumerate() {
        let dir = testdata().join(case);
        let tsv = run_wirelog(&dir.join(pcap), flags, &format!("json-tsv-{n}"));
        let mut jflags = flags.to_vec();
        jflags.extend(["--log-format", "json"]);
        let tmp = tempdir(&format!("json-{n}"));
        let logs = tmp.0.join("logs");
        let st = Command::new(env!("CARGO_BIN_EXE_wirelog"))
            .args(["read", "--quiet", "--no-store", "--seed", "1", "--logs"])
            .arg(&logs)
            .args(&jflags)
            .arg(dir.join(pcap))
            .status()
            .unwrap();
        assert!(st.success());
        for name in ["ssl.log", "x509.log"] {
            let path = logs.join(name);
            if !path.exists() {
                assert!(tsv[name].is_empty(), "{case}: {name} only in TSV");
                continue;
            }
            // Python prints each record as key<TAB>value lines (lists joined
            // by commas, booleans as T/F, text as is), records separated by
            // an empty line.
            let out = Command::new("python3")
                .arg("-c")
                .arg(
                    "import json,sys\n\
                     for l in open(sys.argv[1]):\n\
                     \x20   r=json.loads(l)\n\
                     \x20   for k,v in r.items():\n\
                     \x20       if isinstance(v,bool): v='T' if v else 'F'\n\
                     \x20       elif isinstance(v,list): v=','.join(map(str,v)) if v else '(empty)'\n\
                     \x20       elif isinstance(v,str): v=v if v else '(empty)'\n\
                     \x20       else: v='#'\n\
                     \x20       print(k+'\\t'+v)\n\
                     \x20   print()\n",
                )
                .arg(&path)
                .output()
                .expect("python3");
            assert!(
                out.status.success(),
                "{case}/{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8(out.stdout).unwrap();
            let json: Vec<Row> = text
                .split("\n\n")
                .filter(|r| !r.trim().is_empty())
                .map(|r| {
                    r.lines()
                        .filter_map(|l| l.split_once('\t'))
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect()
                })
                .collect();
            assert_eq!(json.len(), tsv[name].len(), "{case}/{name}: rows");
            for (j, t) in json.iter().zip(&tsv[name]) {
                for (k, tv) in t {
                    match j.get(k) {
                        None => assert_eq!(tv, "-", "{case}/{name} {k}: set in TSV only"),
                        // Numbers are written by one formatter for both.
                        Some(jv) if jv == "#" => {}
                        // Plain text is not escaped in JSON; compare where TSV did not escape.
                        Some(jv) if !tv.contains('\\') && k != "uid" => {
                            assert_eq!(jv, tv, "{case}/{name} {k}");
                            compared += 1;
                        }
                        Some(_) => {}
                    }
                }
                assert!(
                    j.keys().all(|k| t.contains_key(k)),
                    "{case}/{name}: a JSON key not in TSV"
                );
            }
        }
    }
    assert!(compared > 500, "{compared} values compared");
}

/// `--zeek-policy log-hostcerts-only` logs each chain's first certificate
/// only (Zeek's `X509::log_policy` hook in
/// policy/protocols/ssl/log-hostcerts-only.zeek breaks for the others):
/// Zeek's tls12_ecdhe chain of three gives its leaf alone.
#[test]
fn log_hostcerts_only_keeps_the_leaf() {
    let dir = testdata().join("tls12_ecdhe");
    let all = run_wirelog(&dir.join("ecdhe.pcap"), &[], "hosts-all");
    let hosts = run_wirelog(&dir.join("ecdhe.pcap"), &["--zeek-policy", "log-hostcerts-only"], "hosts-only");
    assert_eq!(all["x509.log"].len(), 3);
    let leaf: Vec<&Row> = all["x509.log"].iter().filter(|r| r["host_cert"] == "T").collect();
    assert_eq!(hosts["x509.log"].iter().collect::<Vec<_>>(), leaf);
    // The policy changes x509.log only.
    assert_eq!(hosts["ssl.log"], all["ssl.log"]);
}

/// A policy wirelog does not write, or no policy at all, is refused with
/// the option and the name in the message.
#[test]
fn zeek_policy_names_are_checked() {
    let pcap = testdata().join("tls12_ecdhe/ecdhe.pcap");
    for (name, says) in [
        ("known-certs", "--zeek-policy known-certs: not written by wirelog (known_certs.log"),
        ("ssl-log-ext,no-such", "--zeek-policy no-such: unknown policy (known: ssl-log-ext, ssl-client-subject-issuer, log-certs-base64, log-hostcerts-only, certificate-request-info, validate-certs, validate-ocsp, validate-sct, all)"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
            .args(["read", "--quiet", "--no-store", "--zeek-policy", name])
            .arg(&pcap)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{name}: {err}");
    }
    // A trust store without the policy that reads it.
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["read", "--quiet", "--no-store", "--zeek-policy", "ssl-log-ext", "--ca-file", "/etc/ssl/certs/ca-certificates.crt"])
        .arg(&pcap)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--ca-file /etc/ssl/certs/ca-certificates.crt: only --zeek-policy validate-certs and validate-ocsp use a trust store"), "{err}");
    // A CT log list without the policy that reads it; a bad list names
    // the file and line.
    let list = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/ct-logs-zeek-btest.tsv");
    let bad = tempdir("bad-ct-list");
    let bad_list = bad.0.join("ct.tsv");
    std::fs::write(&bad_list, "# a comment\nAAAA\tMFkw\tOp\tDesc\n").unwrap();
    for (args, says) in [
        (vec!["--zeek-policy", "validate-certs", "--ct-logs", list], format!("--ct-logs {list}: only --zeek-policy validate-sct uses a CT log list")),
        (
            vec!["--zeek-policy", "validate-sct", "--ct-logs", bad_list.to_str().unwrap()],
            format!("--zeek-policy validate-sct: CT log list (--ct-logs) {}:2: the log id has 3 bytes, 32 wanted", bad_list.display()),
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
            .args(["read", "--quiet", "--no-store", "--logs"])
            .arg(bad.0.join("logs"))
            .args(&args)
            .arg(&pcap)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&says), "{args:?}: {err}");
    }
}
