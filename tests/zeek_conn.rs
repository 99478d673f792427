//! wirelog's conn records against Zeek's own baselines.
//!
//! For every case in `../shared/testdata/zeek/` with a conn.log (or a cut of
//! it), wirelog reads the same pcap in the mode that corresponds to the way
//! Zeek was run (`-C` where Zeek used it; `--checksums verify` where the
//! baseline depends on Zeek rejecting offloaded checksums, which wirelog's
//! default accepts), and every compared field of every
//! record, matched by its 5-tuple, must agree exactly, unless the
//! difference is listed in `exception()` with its reason. The scoreboard is
//! printed (run with `--nocapture` to see it) and recorded in BENCHMARKS.md.

mod common;

use common::parse_log;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Fields compared when the expected file has them (Zeek names).
const COMPARED: &[&str] = &[
    "conn_state",
    "history",
    "duration",
    "orig_bytes",
    "resp_bytes",
    "missed_bytes",
    "orig_pkts",
    "orig_ip_bytes",
    "resp_pkts",
    "resp_ip_bytes",
];

struct Case {
    case: &'static str,
    expected: &'static str,
    pcap: &'static str,
    /// Extra wirelog flags matching the Zeek run (e.g. -C).
    flags: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        case: "tcp_miss_end_data",
        expected: "conn.log",
        pcap: "miss_end_data.pcap",
        flags: &["--report-gaps-for-partial"],
    },
    Case {
        case: "tcp_retransmit_rsto",
        expected: "conn.log",
        pcap: "retransmit-fast009.pcap",
        flags: &["-C"],
    },
    // conn-all.log is Zeek with every due timer expired before the next packet
    // (max_timer_expires=0), which is what wirelog does.
    Case {
        case: "tcp_expire_timers",
        expected: "conn-all.log",
        pcap: "retransmit-timeout.pcapng",
        flags: &["-C"],
    },
    Case {
        case: "tcp_bad_checksum",
        expected: "conn.syn-bad.cut",
        pcap: "syn-bad.pcap",
        flags: &[],
    },
    Case {
        case: "tcp_bad_checksum",
        expected: "conn.dns-corrupt.cut",
        pcap: "dns-corrupt.pcap",
        flags: &[],
    },
    Case {
        case: "conn_size_flip",
        expected: "conn.one-sided-2745.cut",
        pcap: "one-sided-2745.pcap",
        flags: &["-C"],
    },
    Case {
        case: "conn_size_flip",
        expected: "conn.ctu-64702-888.cut",
        pcap: "ctu-64702-888.pcap",
        flags: &["-C"],
    },
    Case {
        case: "tcp_flip_without_syn",
        expected: "conn.log",
        pcap: "http-on-irc-port-missing-syn.pcapng",
        flags: &[],
    },
    // Bare mode (-b) with only the conn scripts: Zeek knows no likely server ports.
    // This baseline needs `--checksums verify`: every bad checksum of the trace
    // is an offload signature, which wirelog's default (auto) accepts and
    // Zeek rejects.
    Case {
        case: "checksums_ignore_nets",
        expected: "conn.log",
        pcap: "localhost-bad-chksum.pcap",
        flags: &["--server-ports", "none", "--checksums", "verify"],
    },
    // Zeek ignored checksums for 192.168.0.0/16, where every bad packet of this trace comes from.
    Case {
        case: "checksums_ignore_nets",
        expected: "conn.ignore-checksums.log",
        pcap: "localhost-bad-chksum.pcap",
        flags: &["-C"],
    },
    Case {
        case: "ssh_half_duplex",
        expected: "conn.client-side.log",
        pcap: "ssh.client-side-half-duplex.pcap",
        flags: &[],
    },
    Case {
        case: "ssh_half_duplex",
        expected: "conn.server-side.log",
        pcap: "ssh.server-side-half-duplex.pcap",
        flags: &[],
    },
    Case {
        case: "vlan_qinq",
        expected: "conn.log",
        pcap: "q-in-q.pcap",
        flags: &[],
    },
    Case {
        case: "vlan_qinq",
        expected: "conn.vlan-logging.log",
        pcap: "q-in-q.pcap",
        flags: &[],
    },
    Case {
        case: "mpls_in_vlan",
        expected: "conn.log",
        pcap: "mpls-in-vlan.pcap",
        flags: &["-C"],
    },
    Case {
        case: "ftp_ipv6",
        expected: "conn.ipv6.log",
        pcap: "ipv6.pcap",
        flags: &[],
    },
    Case {
        case: "ftp_ipv6",
        expected: "conn.ipv4.log",
        pcap: "ipv4.pcap",
        flags: &[],
    },
    Case {
        case: "ntp_misordered",
        expected: "conn.log",
        pcap: "misordered-ntp.pcap",
        flags: &["-C"],
    },
    Case {
        case: "http_no_crlf",
        expected: "conn.log",
        pcap: "no_crlf.pcap",
        flags: &[],
    },
    Case {
        case: "http_padding",
        expected: "conn.log",
        pcap: "tcp-http-with-padding.pcap",
        flags: &["-C"],
    },
    Case {
        case: "http_m57_long_gap",
        expected: "conn.cut",
        pcap: "m57-long-49583-80.pcap",
        flags: &[],
    },
    Case {
        case: "mysql",
        expected: "conn.encrypted.log",
        pcap: "encrypted.pcap",
        flags: &[],
    },
    Case {
        case: "postgresql",
        expected: "conn.greenhouse.cut",
        pcap: "greenhouse-app.pcap",
        flags: &["-C"],
    },
    Case {
        case: "postgresql",
        expected: "conn.psql-create-insert-select.cut",
        pcap: "psql-create-insert-select-delete-drop.pcap",
        flags: &[],
    },
    Case {
        case: "redis",
        expected: "conn.log",
        pcap: "django-cloud.pcapng",
        flags: &[],
    },
    Case {
        case: "pcapng_multi_interface",
        expected: "conn.log",
        pcap: "pcapng-multi-interface.pcapng",
        flags: &["-C"],
    },
    Case {
        case: "teredo_tunnel",
        expected: "conn.log",
        pcap: "Teredo.pcap",
        flags: &[],
    },
    Case {
        case: "llc_fddi_large",
        expected: "conn.log",
        pcap: "llc.pcap",
        flags: &["-C"],
    },
    Case {
        case: "gtp_outer_ip_frag",
        expected: "conn.log",
        pcap: "gtp1_gn_normal_incl_fragmentation.pcap",
        flags: &["-C"],
    },
    Case {
        case: "gtp_s3_tunnel",
        expected: "conn.log",
        pcap: "gtp2_different_udp_port.pcap",
        flags: &["-C"],
    },
];

/// Differences wirelog has on purpose, by case, record and field, with the reason.
fn exception(case: &str, expected: &str, row: &Row, field: &str) -> Option<&'static str> {
    let _ = expected;
    // Zeek decapsulates tunnels and logs the inner connections (tunnel_parents
    // set); wirelog does not decode tunnels yet and counts such packets as
    // "tunnel not decoded", so inner connections are absent.
    if row
        .get("tunnel_parents")
        .is_some_and(|t| t != "-" && t != "(empty)")
    {
        return Some("inner connection of a tunnel: tunnel decapsulation not implemented yet");
    }
    // (None other: the NTP flip of `ntp_misordered` is Zeek's NTP rule,
    // which wirelog applies, `wirelog_parse::services::udp_datagram`.)
    let _ = (case, field);
    None
}

type Row = HashMap<String, String>;

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/zeek")
}

fn tuple(r: &Row) -> Option<String> {
    Some(format!(
        "{} {} {} {} {}",
        r.get("id.orig_h")?,
        r.get("id.orig_p")?,
        r.get("id.resp_h")?,
        r.get("id.resp_p")?,
        r.get("proto").map(String::as_str).unwrap_or("")
    ))
}

fn run_wirelog(pcap: &Path, flags: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .arg("read")
        .arg("--quiet")
        .arg("--no-store")
        .args(["--seed", "1"])
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
    String::from_utf8(out.stdout).expect("utf-8 output")
}

#[derive(Default)]
struct Score {
    expected_rows: usize,
    matched_rows: usize,
    excepted_rows: usize,
    fields: usize,
    agree: usize,
    excepted_fields: usize,
}

#[test]
fn conn_records_agree_with_zeek() {
    let mut failures = Vec::new();
    let mut board = Vec::new();
    let mut total = Score::default();
    for c in CASES {
        let dir = testdata().join(c.case);
        let expected_text = std::fs::read_to_string(dir.join(c.expected)).expect("expected file");
        let expected = parse_log(&expected_text);
        let ours = parse_log(&run_wirelog(&dir.join(c.pcap), c.flags));
        let mut s = Score {
            expected_rows: expected.len(),
            ..Default::default()
        };

        // Group our records by tuple, in output order, to pair with Zeek's.
        let mut by_tuple: HashMap<String, Vec<&Row>> = HashMap::new();
        for r in &ours {
            by_tuple
                .entry(tuple(r).unwrap_or_default())
                .or_default()
                .push(r);
        }
        let mut next_of: HashMap<String, usize> = HashMap::new();
        let have_ids = expected
            .first()
            .map(|r| r.contains_key("id.orig_h"))
            .unwrap_or(false);
        for (i, exp) in expected.iter().enumerate() {
            let mine = if have_ids {
                // A tuple matches in either orientation only if wirelog picked the
                // same originator; the orientation is part of what is compared.
                let t = tuple(exp).unwrap();
                let t_noproto = t.rsplit_once(' ').map(|(a, _)| a.to_string()).unwrap();
                let key = by_tuple
                    .keys()
                    .find(|k| **k == t || (!exp.contains_key("proto") && k.starts_with(&t_noproto)))
                    .cloned();
                key.and_then(|k| {
                    let n = next_of.entry(k.clone()).or_insert(0);
                    let r = by_tuple.get(&k).and_then(|v| v.get(*n)).copied();
                    *n += 1;
                    r
                })
            } else {
                ours.get(i)
            };
            let Some(mine) = mine else {
                if let Some(why) = exception(c.case, c.expected, exp, "*") {
                    s.excepted_rows += 1;
                    let _ = why;
                } else {
                    failures.push(format!(
                        "{}/{}: no wirelog record for {:?}",
                        c.case,
                        c.expected,
                        tuple(exp)
                    ));
                }
                continue;
            };
            s.matched_rows += 1;
            for f in COMPARED {
                let Some(want) = exp.get(*f) else { continue };
                let got = mine.get(*f).map(String::as_str).unwrap_or("<missing>");
                s.fields += 1;
                if got == want {
                    s.agree += 1;
                } else if let Some(why) = exception(c.case, c.expected, exp, f) {
                    s.excepted_fields += 1;
                    eprintln!(
                        "  excepted {}/{} {:?} {}: zeek {} wirelog {} ({})",
                        c.case,
                        c.expected,
                        tuple(exp),
                        f,
                        want,
                        got,
                        why
                    );
                } else {
                    failures.push(format!(
                        "{}/{} {:?} {}: zeek {} wirelog {}",
                        c.case,
                        c.expected,
                        tuple(exp),
                        f,
                        want,
                        got
                    ));
                }
            }
        }
        board.push(format!(
            "| {} | {} | {} | {}/{} | {} | {}/{} | {} |",
            c.case,
            c.expected,
            c.flags.join(" "),
            s.matched_rows,
            s.expected_rows,
            s.excepted_rows,
            s.agree,
            s.fields,
            s.excepted_fields
        ));
        total.expected_rows += s.expected_rows;
        total.matched_rows += s.matched_rows;
        total.excepted_rows += s.excepted_rows;
        total.fields += s.fields;
        total.agree += s.agree;
        total.excepted_fields += s.excepted_fields;
    }
    println!("\nZeek conn.log scoreboard");
    println!("| case | expected file | mode | records matched | records excepted | fields agreeing | fields excepted |");
    println!("|---|---|---|---|---|---|---|");
    for line in &board {
        println!("{line}");
    }
    println!(
        "| **total: {} cases** | | | {}/{} | {} | {}/{} | {} |",
        CASES.len(),
        total.matched_rows,
        total.expected_rows,
        total.excepted_rows,
        total.agree,
        total.fields,
        total.excepted_fields
    );
    if !failures.is_empty() {
        panic!(
            "{} disagreements with Zeek:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

/// `tcp_rst_behavior`: Zeek printed `<history>, <conn_state>` for one
/// connection per pcap (run with -b -C). The only source of RSTOS0 in the suite.
#[test]
fn rst_behavior_agrees_with_zeek() {
    let dir = testdata().join("tcp_rst_behavior");
    let expected = std::fs::read_to_string(dir.join("expected_history_state.txt")).unwrap();
    let want: Vec<&str> = expected.lines().filter(|l| !l.starts_with('#')).collect();
    let pcaps = [
        "single-rst.pcap",
        "syn-then-rst.pcap",
        "syn-then-ack-then-rst.pcap",
        "syn-then-stuff-then-rst.pcap",
    ];
    assert_eq!(want.len(), pcaps.len());
    for (pcap, want) in pcaps.iter().zip(want) {
        let rows = parse_log(&run_wirelog(&dir.join(pcap), &["-C"]));
        assert_eq!(rows.len(), 1, "{pcap}");
        let got = format!("{}, {}", rows[0]["history"], rows[0]["conn_state"]);
        println!("{pcap}: zeek {want:?} wirelog {got:?}");
        assert_eq!(got, want, "{pcap}");
    }
}

/// conn.log `service` against Zeek's, on every case whose expected file has
/// the column. Zeek names a service once an analyzer confirmed the protocol;
/// wirelog names the protocols it parses (see README, "Services"). The rows
/// where they differ are listed here, each with why; the list must be
/// exact (a row that comes to agree, or a new difference, fails the test),
/// so the gap is measured rather than hidden. Run with --nocapture for the
/// count.
#[test]
fn service_agrees_with_zeek_except_the_listed_rows() {
    // (case, expected file, "orig_h orig_p resp_h resp_p", zeek, wirelog, why)
    const KNOWN: &[(&str, &str, &str, &str, &str, &str)] = &[
        ("checksums_ignore_nets", "conn.ignore-checksums.log", "192.168.1.28 53246 35.221.46.9 80", "-", "http", "Zeek ran bare (-b conn) without its HTTP scripts"),
        ("ftp_ipv6", "conn.ipv6.log", "2001:470:1f11:81f:c999:d94:aa7c:2e3e 49186 2001:470:4867:99::21 57086", "ftp-data", "-", "FTP data connections are expected from the control channel's PASV/PORT replies, which wirelog does not parse (it names the control connection only)"),
        ("ftp_ipv6", "conn.ipv6.log", "2001:470:1f11:81f:c999:d94:aa7c:2e3e 49187 2001:470:4867:99::21 57087", "ftp-data", "-", "as above"),
        ("ftp_ipv6", "conn.ipv6.log", "2001:470:1f11:81f:c999:d94:aa7c:2e3e 49188 2001:470:4867:99::21 57088", "ftp-data", "-", "as above"),
        ("ftp_ipv6", "conn.ipv6.log", "2001:470:4867:99::21 55785 2001:470:1f11:81f:c999:d94:aa7c:2e3e 49189", "ftp-data", "-", "as above"),
        ("ftp_ipv6", "conn.ipv6.log", "2001:470:4867:99::21 55647 2001:470:1f11:81f:c999:d94:aa7c:2e3e 49190", "ftp-data", "-", "as above"),
        ("ftp_ipv6", "conn.ipv4.log", "141.142.220.235 37604 199.233.217.249 56666", "ftp-data", "-", "FTP data connection (see above)"),
        ("ftp_ipv6", "conn.ipv4.log", "141.142.220.235 59378 199.233.217.249 56667", "ftp-data", "-", "as above"),
        ("ftp_ipv6", "conn.ipv4.log", "199.233.217.249 61920 141.142.220.235 33582", "ftp-data", "-", "as above"),
        ("ftp_ipv6", "conn.ipv4.log", "199.233.217.249 61918 141.142.220.235 37835", "ftp-data", "-", "as above"),
        ("teredo_tunnel", "conn.log", "192.168.2.16 3797 65.55.158.80 3544", "teredo", "-", "tunnels are not decapsulated (the outer connection is named by Zeek's Teredo analyzer)"),
        ("teredo_tunnel", "conn.log", "192.168.2.16 3797 83.170.1.38 32900", "teredo", "-", "as above"),
        ("gtp_outer_ip_frag", "conn.log", "239.114.155.111 2152 63.94.149.181 2152", "gtpv1", "-", "tunnels are not decapsulated (GTPv1)"),
        ("gtp_s3_tunnel", "conn.log", "207.233.125.40 2152 167.55.105.244 2152", "gtpv1", "-", "as above"),
        ("gtp_s3_tunnel", "conn.log", "167.55.105.244 5906 207.233.125.40 2152", "gtpv1", "-", "as above"),
    ];
    let mut seen = Vec::new();
    let (mut rows, mut agree) = (0, 0);
    for c in CASES {
        let dir = testdata().join(c.case);
        let expected = parse_log(&std::fs::read_to_string(dir.join(c.expected)).expect("expected file"));
        if !expected.first().is_some_and(|r| r.contains_key("service") && r.contains_key("proto")) {
            continue;
        }
        let ours = parse_log(&run_wirelog(&dir.join(c.pcap), c.flags));
        let mut by_tuple: HashMap<String, Vec<&Row>> = HashMap::new();
        for r in &ours {
            by_tuple.entry(tuple(r).unwrap_or_default()).or_default().push(r);
        }
        for exp in &expected {
            let (Some(t), Some(want)) = (tuple(exp), exp.get("service")) else { continue };
            if exception(c.case, c.expected, exp, "*").is_some() {
                continue; // not matched by tuple at all (tunnel inner, NTP flip)
            }
            let Some(mine) = by_tuple.get_mut(&t).and_then(|v| (!v.is_empty()).then(|| v.remove(0))) else {
                continue; // the conn scoreboard reports missing rows
            };
            rows += 1;
            let got = mine.get("service").map(String::as_str).unwrap_or("<missing>");
            if got == want {
                agree += 1;
            } else {
                let short = t.rsplit_once(' ').map(|(a, _)| a.to_string()).unwrap();
                seen.push((c.case, c.expected, short, want.clone(), got.to_string()));
            }
        }
    }
    println!(
        "service: {agree}/{rows} rows agree with Zeek; {} rows differ, as the {} listed differences say",
        seen.len(),
        KNOWN.len()
    );
    let mut problems = Vec::new();
    for (case, file, t, want, got) in &seen {
        if !KNOWN.iter().any(|k| k.0 == *case && k.1 == *file && k.2 == t && k.3 == want && k.4 == got) {
            problems.push(format!("new difference {case}/{file} {t}: zeek {want} wirelog {got}"));
        }
    }
    for k in KNOWN {
        if !seen.iter().any(|(case, file, t, want, got)| k.0 == *case && k.1 == *file && k.2 == t && k.3 == want && k.4 == got) {
            problems.push(format!("listed difference no longer seen (remove it): {}/{} {} ({})", k.0, k.1, k.2, k.5));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// IPv6 addresses in conn.log as Zeek writes them (`IPAddr::AsString` through
/// `zeek_inet_ntop6`, zeek/zeek-3rdparty zeek_inet_ntop.c): the last 32 bits
/// as a dotted quad after a leading run of 6 zero groups, or of 4 and
/// `ffff:0`; other addresses as RFC 5952 writes them. A capture made here:
/// one UDP datagram over Ethernet/IPv6 per pair of addresses.
#[test]
fn ipv6_addresses_are_written_as_zeek_writes_them() {
    let pairs: [(&str, &str, &str, &str); 3] = [
        ("::102:304", "::ffff:0:506:708", "::1.2.3.4", "::ffff:0:5.6.7.8"),
        ("2001:db8::1", "::2", "2001:db8::1", "::2"),
        ("fe80::1:0:0:1", "1::102:304", "fe80::1:0:0:1", "1::102:304"),
    ];
    let mut pcap = Vec::new();
    pcap.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    pcap.extend_from_slice(&2u16.to_le_bytes());
    pcap.extend_from_slice(&4u16.to_le_bytes());
    pcap.extend_from_slice(&[0; 8]);
    pcap.extend_from_slice(&65_535u32.to_le_bytes());
    pcap.extend_from_slice(&1u32.to_le_bytes()); // Ethernet
    for (i, (src, dst, _, _)) in pairs.iter().enumerate() {
        let payload = b"wirelog";
        let udp_len = 8 + payload.len();
        let mut frame = Vec::new();
        frame.extend_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd]);
        frame.extend_from_slice(&[0x60, 0, 0, 0]);
        frame.extend_from_slice(&(udp_len as u16).to_be_bytes());
        frame.extend_from_slice(&[17, 64]);
        frame.extend_from_slice(&src.parse::<std::net::Ipv6Addr>().unwrap().octets());
        frame.extend_from_slice(&dst.parse::<std::net::Ipv6Addr>().unwrap().octets());
        frame.extend_from_slice(&(40_000 + i as u16).to_be_bytes());
        frame.extend_from_slice(&9_999u16.to_be_bytes());
        frame.extend_from_slice(&(udp_len as u16).to_be_bytes());
        frame.extend_from_slice(&[0, 0]);
        frame.extend_from_slice(payload);
        pcap.extend_from_slice(&(1_700_000_000 + i as u32).to_le_bytes());
        pcap.extend_from_slice(&0u32.to_le_bytes());
        pcap.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        pcap.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        pcap.extend_from_slice(&frame);
    }
    let dir = common::scratch("zeek_conn", "ipv6_text");
    let file = dir.join("ipv6_text.pcap");
    std::fs::write(&file, &pcap).unwrap();
    let rows = parse_log(&run_wirelog(&file, &["-C"]));
    assert_eq!(rows.len(), pairs.len(), "{rows:?}");
    for (_, _, orig, resp) in pairs {
        assert!(
            rows.iter().any(|r| r["id.orig_h"] == orig && r["id.resp_h"] == resp),
            "{orig} -> {resp} not in {rows:?}"
        );
    }
    // The store's answers (CLI, API and UI share their text) show each
    // address as conn.log does, and the text shown selects it back.
    let store = dir.join("store");
    common::read_pcap(&file, &dir.join("logs"), Some(&store), &["--quiet", "-C"]);
    let csv = common::query_csv(&store, "conns", &["--by", "orig_h,resp_h", "--top", "0"]);
    for (_, _, orig, resp) in pairs {
        assert!(csv.lines().any(|l| l.starts_with(&format!("{orig},{resp},"))), "{orig},{resp} not in {csv}");
        let one = common::query_csv(&store, "conns", &["--where", &format!("resp_h = {resp}"), "--by", "orig_h"]);
        assert!(one.lines().any(|l| l.starts_with(&format!("{orig},"))), "resp_h = {resp}: {one}");
        assert_eq!(one.lines().count(), 2, "resp_h = {resp}: {one}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
