//! TLS parser tests on the reference captures in shared/testdata/tls:
//! JA4 against FoxIO's expected values, ssl.log fields against Zeek's
//! baselines (matched by 4-tuple), chunking invariance, bounds.

use std::collections::HashMap;

use super::*;
use crate::testutil::{self, Ev, Rng};

const PORTS: &[u16] = &[
    443, 5228, 8443, 25, 143, 110, 3306, 5432, 1080, 3000, 465, 993, 995,
];
const DIR: &str = "tls";

type Tuple = (String, u16, String, u16);

/// Runs one TlsParser per connection over `events`; handshakes per connection.
fn run(events: &[Ev]) -> Vec<Vec<TlsHandshake>> {
    let mut ps: Vec<TlsParser> = Vec::new();
    let mut out = Vec::new();
    for e in events {
        let conn = match e {
            Ev::Data { conn, .. } | Ev::Gap { conn, .. } => *conn,
        };
        while ps.len() <= conn {
            ps.push(TlsParser::with_limits(TlsLimits::default()));
        }
        match e {
            Ev::Data {
                dir, ts_ns, data, ..
            } => ps[conn].data(*dir, *ts_ns, data, &mut out),
            Ev::Gap {
                dir, ts_ns, len, ..
            } => ps[conn].gap(*dir, *ts_ns, *len, &mut out),
        }
    }
    assert!(out.is_empty(), "the TLS parser emits no transactions");
    ps.iter_mut()
        .map(|p| {
            p.finish(0, &mut out);
            p.take_handshakes()
        })
        .collect()
}

/// In-order events of every connection of `rel`, through the real TCP
/// reassembler (some captures have segments out of order), with each
/// connection's 4-tuple (the helpers number connections the same way).
fn events(rel: &str) -> (Vec<Ev>, Vec<Tuple>) {
    use crate::stream::{Budget, Chunk, Reassembler};
    let rel = format!("{DIR}/{rel}");
    let (_, tuples) = testutil::tcp_events_with_tuples(&rel, PORTS);
    let segs = testutil::tcp_segments(&rel, PORTS);
    let mut budget = Budget::new(1 << 24);
    let mut streams: Vec<[Reassembler; 2]> = Vec::new();
    let mut out = Vec::new();
    let mut last = 0;
    for s in &segs {
        while streams.len() <= s.conn {
            streams.push([Reassembler::new(1 << 20), Reassembler::new(1 << 20)]);
        }
        let (conn, dir) = (s.conn, s.dir);
        let d = if dir == Dir::ToServer { 0 } else { 1 };
        streams[conn][d].segment(
            s.seq,
            s.ts_ns,
            &s.payload,
            s.flags,
            &mut budget,
            &mut |c| match c {
                Chunk::Data { ts_ns, data } => out.push(Ev::Data {
                    conn,
                    dir,
                    ts_ns,
                    data: data.to_vec(),
                }),
                Chunk::Gap { ts_ns, len } | Chunk::Cut { ts_ns, len } => out.push(Ev::Gap {
                    conn,
                    dir,
                    ts_ns,
                    len,
                }),
            },
        );
        last = s.ts_ns;
    }
    for (conn, st) in streams.iter_mut().enumerate() {
        for (d, dir) in [Dir::ToServer, Dir::ToClient].into_iter().enumerate() {
            st[d].flush(last, &mut budget, &mut |c| match c {
                Chunk::Data { ts_ns, data } => out.push(Ev::Data {
                    conn,
                    dir,
                    ts_ns,
                    data: data.to_vec(),
                }),
                Chunk::Gap { ts_ns, len } | Chunk::Cut { ts_ns, len } => out.push(Ev::Gap {
                    conn,
                    dir,
                    ts_ns,
                    len,
                }),
            });
        }
    }
    assert_eq!(
        tuples.len(),
        streams.len(),
        "{rel}: connection numbering differs"
    );
    (out, tuples)
}

fn parse_pcap(rel: &str) -> (Vec<Vec<TlsHandshake>>, Vec<Tuple>) {
    let (evs, tuples) = events(rel);
    (run(&evs), tuples)
}

/// Rows of a pretty-printed `ja4_expected.json` as key -> raw value (quotes
/// stripped); the file is one key per line, so no JSON parser is needed.
fn ja4_rows(case: &str) -> Vec<HashMap<String, String>> {
    let text = std::fs::read_to_string(testutil::path(&format!("{DIR}/{case}/ja4_expected.json")))
        .unwrap();
    let body = &text[text.find("\"rows\"").expect("rows")..];
    let mut rows = Vec::new();
    let mut cur: Option<HashMap<String, String>> = None;
    // Nested objects (`second_client_hello`) are skipped: depth 1 is a row.
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
                if let Some(r) = cur.take() {
                    rows.push(r);
                }
            }
        } else if let (1, Some(r), Some((k, v))) = (depth, cur.as_mut(), l.split_once("\": ")) {
            let v = v.trim_end_matches(',').trim_matches('"');
            r.insert(k.trim_start_matches('"').to_string(), v.to_string());
        }
    }
    rows
}

#[test]
fn sha256_vectors() {
    assert_eq!(
        sha256_hex(b""),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    assert_eq!(
        sha256_hex(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
    );
    assert_eq!(
        sha256_hex(&vec![b'a'; 1_000_000]),
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
    );
}

#[test]
fn grease_values() {
    let all: Vec<u16> = (0..=u16::MAX).filter(|&v| is_grease(v)).collect();
    assert_eq!(all.len(), 16);
    assert!(all.contains(&0x0a0a) && all.contains(&0xfafa));
    assert!(!is_grease(0xeeee) && !is_grease(0xefef) && !is_grease(0xff85));
}

/// Every TCP JA4 of FoxIO's captures equals ours (QUIC rows are out of
/// scope: the Initial packets are not decrypted yet).
#[test]
fn ja4_matches_foxio() {
    let cases = [
        ("ja4_tls12_single_hello", "tls12.pcap"),
        ("ja4_ipv6_alpn_h2", "tls-alpn-h2.pcap"),
        ("ja4_non_ascii_alpn", "tls-non-ascii-alpn.pcapng"),
        ("ja4_socks_tls10", "socks-https-example.pcap"),
        ("ja4_browser_many_hellos", "tls-handshake.pcapng"),
    ];
    let (mut total, mut agree, mut hrr) = (0, 0, 0);
    let mut failed = Vec::new();
    for (case, pcap) in cases {
        let (hss, tuples) = parse_pcap(&format!("{case}/{pcap}"));
        let by_tuple: HashMap<&Tuple, &Vec<TlsHandshake>> = tuples.iter().zip(&hss).collect();
        let rows = ja4_rows(case);
        let (mut n, mut ok, mut quic) = (0, 0, 0);
        for r in &rows {
            if r["transport"] != "tcp" {
                quic += 1;
                continue;
            }
            let Some(want) = r.get("ja4") else { continue };
            n += 1;
            let key = (
                r["src"].clone(),
                r["src_port"].parse().unwrap(),
                r["dst"].clone(),
                r["dst_port"].parse().unwrap(),
            );
            let got = by_tuple
                .get(&key)
                .and_then(|h| h.first())
                .and_then(|h| h.ja4.clone());
            let got_s = got.as_ref().map(|j| j.ja4.as_str());
            if got_s == Some(want.as_str()) {
                ok += 1;
            } else {
                failed.push(format!("{case} {key:?}: got {got_s:?}, want {want}"));
            }
            let h = by_tuple.get(&key).and_then(|h| h.first());
            if h.is_some_and(|h| h.hello_retry) {
                hrr += 1;
                // After the retry: the real ServerHello, the second ClientHello.
                let h = h.unwrap();
                assert_eq!(h.client_hellos, 2, "{key:?}");
                assert!(h.server_hello.as_ref().is_some_and(|s| !s.retry), "{key:?}");
                assert_eq!(h.version_name().as_deref(), Some("TLSv13"), "{key:?}");
                assert!(
                    h.ssl_history.starts_with("Cj") && h.ssl_history[2..].contains("Cs"),
                    "{key:?} {}",
                    h.ssl_history
                );
            }
            if let (Some(g), Some(wr)) = (&got, r.get("ja4_r")) {
                if &g.ja4_r != wr {
                    failed.push(format!("{case} {key:?} ja4_r: got {}, want {wr}", g.ja4_r));
                }
            }
        }
        eprintln!("{case}: JA4 {ok}/{n} TCP rows agree ({quic} QUIC rows out of scope)");
        total += n;
        agree += ok;
    }
    eprintln!("JA4 total: {agree}/{total}");
    assert!(failed.is_empty(), "{failed:#?}");
    assert!(hrr >= 5, "the five HelloRetryRequest connections: {hrr}");
    assert!(total >= 65, "expected at least 65 TCP rows, found {total}");
}

/// A Zeek log (or .cut) as rows of column -> value.
fn zeek_rows(rel: &str) -> Vec<HashMap<String, String>> {
    let text = std::fs::read_to_string(testutil::path(&format!("{DIR}/{rel}"))).unwrap();
    let mut fields: Vec<String> = Vec::new();
    let mut rows = Vec::new();
    for line in text.lines() {
        if let Some(f) = line.strip_prefix("#fields\t") {
            fields = f.split('\t').map(str::to_string).collect();
        } else if line.starts_with("ts\tuid\t") {
            fields = line.split('\t').map(str::to_string).collect();
        } else if !line.starts_with('#') && !fields.is_empty() && !line.is_empty() {
            rows.push(
                fields
                    .iter()
                    .cloned()
                    .zip(line.split('\t').map(str::to_string))
                    .collect(),
            );
        }
    }
    rows
}

fn opt(v: Option<String>) -> String {
    v.unwrap_or_else(|| "-".into())
}

fn tf(b: bool) -> String {
    if b { "T" } else { "F" }.into()
}

/// ssl.log columns that the parser fills, as Zeek writes them.
fn ssl_columns(h: &TlsHandshake) -> Vec<(&'static str, String)> {
    vec![
        ("version", opt(h.version_name())),
        ("cipher", opt(h.cipher_name())),
        ("curve", opt(h.curve_name())),
        ("server_name", opt(h.server_name.clone())),
        ("resumed", tf(h.resumed)),
        ("established", tf(h.established)),
        ("next_protocol", opt(h.next_protocol.clone())),
        ("last_alert", opt(h.last_alert_name())),
        ("ssl_history", h.ssl_history.clone()),
        (
            "cert_chain_fps",
            h.server_cert_fps().map_or("-".into(), |v| {
                if v.is_empty() {
                    "(empty)".into()
                } else {
                    v.join(",")
                }
            }),
        ),
        ("client_cert_chain_fps", client_fps(h)),
    ]
}

/// Zeek: `-` when no certificate was seen on the connection, `(empty)` when
/// only the server sent some.
fn client_fps(h: &TlsHandshake) -> String {
    let client: Vec<String> = h
        .client_certs
        .iter()
        .flat_map(|c| c.certs.iter().map(|d| sha256_hex(d)))
        .collect();
    let any = h.server_certs.as_ref().is_some_and(|c| c.count > 0) || !client.is_empty();
    match (any, client.is_empty()) {
        (false, _) => "-".into(),
        (true, true) => "(empty)".into(),
        (true, false) => client.join(","),
    }
}

/// ssl.log fields of every Zeek case's TCP connections agree with the baseline.
#[test]
fn ssl_fields_match_zeek() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "tls10_sni_basic",
            "tls-conn-with-extensions.pcap",
            "ssl.log",
        ),
        ("tls11_no_sni", "tls1_1.pcap", "ssl.log"),
        ("tls12_rsa_chain", "tls1.2.pcap", "ssl.log"),
        ("tls12_ecdhe", "ecdhe.pcap", "ssl.log"),
        ("tls12_ecdsa", "ecdsa-cert.pcap", "ssl.log"),
        (
            "tls12_failures",
            "tls-1.2-handshake-failure.pcap",
            "ssl.handshake-failure.log",
        ),
        (
            "tls12_failures",
            "tls1.2-late-protocol-error.pcap",
            "ssl.late-protocol-error.log",
        ),
        (
            "tls12_alpn_ocsp_sct",
            "signed_certificate_timestamp.pcap",
            "ssl-all.log",
        ),
        (
            "tls12_alpn_ocsp_sct",
            "signed_certificate_timestamp-2.pcap",
            "ssl-all.log",
        ),
        (
            "tls13_psk_resumption",
            "tls13_psk_succesfull.pcap",
            "ssl.log",
        ),
        (
            "tls13_drafts",
            "tls13draft16-chrome55.0.2879.0-canary-aborted.pcap",
            "ssl.draft16-chrome55-aborted.log",
        ),
        (
            "tls13_drafts",
            "tls13draft16-chrome55.0.2879.0-canary.pcap",
            "ssl.draft16-chrome55.log",
        ),
        (
            "tls13_drafts",
            "tls13draft16-ff52.a01-aborted.pcap",
            "ssl.draft16-ff52-aborted.log",
        ),
        (
            "tls13_drafts",
            "tls13draft16-ff52.a01.pcap",
            "ssl.draft16-ff52.log",
        ),
        (
            "tls13_drafts",
            "tls13draft23-chrome67.0.3368.0-canary.pcap",
            "ssl.draft23.log",
        ),
        (
            "tls13_drafts",
            "chrome-63.0.3211.0-canary-tls_experiment.pcap",
            "ssl.experiment.log",
        ),
        ("starttls_smtp", "smtp-starttls.pcap", "ssl.log"),
        ("starttls_imap", "imap-starttls.pcap", "ssl.log"),
        ("starttls_pop3", "pop3-starttls.pcap", "ssl.log"),
        ("x509_cert_repeat", "google-cert-repeat.pcap", "ssl.log"),
        (
            "cert_request_ipv6",
            "certificate-request-failed.pcap",
            "ssl.log",
        ),
        (
            "starttls_databases",
            "encrypted.pcap",
            "ssl.mysql-encrypted.log",
        ),
        (
            "starttls_databases",
            "tls-12-amazon-rds.pcap",
            "ssl.mysql-rds-tls12.log",
        ),
        (
            "starttls_databases",
            "tls-13-amazon-rds.pcap",
            "ssl.mysql-rds-tls13.log",
        ),
        (
            "starttls_databases",
            "psql-aws-ssl-require.pcap",
            "ssl.postgresql-rds.cut",
        ),
    ];
    let mut failed = Vec::new();
    let (mut all_n, mut all_ok) = (0, 0);
    for &(case, pcap, log) in cases {
        let (hss, tuples) = parse_pcap(&format!("{case}/{pcap}"));
        let by_tuple: HashMap<&Tuple, &Vec<TlsHandshake>> = tuples.iter().zip(&hss).collect();
        let (mut n, mut ok) = (0, 0);
        for row in zeek_rows(&format!("{case}/{log}")) {
            let key = (
                row["id.orig_h"].clone(),
                row["id.orig_p"].parse().unwrap(),
                row["id.resp_h"].clone(),
                row["id.resp_p"].parse().unwrap(),
            );
            let Some(hs) = by_tuple.get(&key).map(|v| v.as_slice()) else {
                continue; // a row of another pcap of the same log (ssl-all.log)
            };
            let Some(h) = hs.first() else {
                n += 1;
                failed.push(format!("{case}/{pcap} {key:?}: no handshake"));
                continue;
            };
            for (col, got) in ssl_columns(h) {
                let Some(want) = row.get(col) else { continue };
                n += 1;
                if &got == want {
                    ok += 1;
                } else {
                    failed.push(format!(
                        "{case}/{pcap} {key:?} {col}: got {got}, want {want}"
                    ));
                }
            }
        }
        eprintln!("{case}/{pcap}: {ok}/{n} ssl.log fields agree");
        if n == 0 {
            failed.push(format!(
                "{case}/{pcap}: no row of {log} matched a connection: {tuples:?}"
            ));
        }
        all_n += n;
        all_ok += ok;
    }
    eprintln!("ssl.log total: {all_ok}/{all_n}");
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Re-chunks every data event at random sizes (1 byte up to whole segments).
fn rechunk(events: &[Ev], rng: &mut Rng, max: usize) -> Vec<Ev> {
    let mut out = Vec::new();
    for e in events {
        match e {
            Ev::Data {
                conn,
                dir,
                ts_ns,
                data,
            } => {
                let mut rest: &[u8] = data;
                while !rest.is_empty() {
                    let n = 1 + rng.below(rest.len().min(max));
                    out.push(Ev::Data {
                        conn: *conn,
                        dir: *dir,
                        ts_ns: *ts_ns,
                        data: rest[..n].to_vec(),
                    });
                    rest = &rest[n..];
                }
            }
            g => out.push(g.clone()),
        }
    }
    out
}

/// Merges consecutive data events of the same connection and direction, so
/// records arrive in few large pieces (several records per call).
fn coalesce(events: &[Ev]) -> Vec<Ev> {
    let mut out: Vec<Ev> = Vec::new();
    for e in events {
        if let (
            Some(Ev::Data {
                conn: c0,
                dir: d0,
                data: buf,
                ..
            }),
            Ev::Data {
                conn, dir, data, ..
            },
        ) = (out.last_mut(), e)
        {
            if c0 == conn && d0 == dir {
                buf.extend_from_slice(data);
                continue;
            }
        }
        out.push(e.clone());
    }
    out
}

#[test]
fn chunking_does_not_change_results() {
    let pcaps = [
        "tls10_sni_basic/tls-conn-with-extensions.pcap",
        "tls12_rsa_chain/tls1.2.pcap",
        "tls13_psk_resumption/tls13_psk_succesfull.pcap",
        "tls13_drafts/tls13draft16-ff52.a01.pcap",
        "starttls_smtp/smtp-starttls.pcap",
        "starttls_databases/encrypted.pcap",
        "ja4_socks_tls10/socks-https-example.pcap",
        "ja4_browser_many_hellos/tls-handshake.pcapng",
        "x509_cert_repeat/google-cert-repeat.pcap",
    ];
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    for pcap in pcaps {
        let (evs, _) = events(pcap);
        let want = run(&evs);
        assert!(
            want.iter().any(|h| !h.is_empty()),
            "{pcap}: no handshake at all"
        );
        // Merged events carry the first piece's time: compare without ts.
        let no_ts = |v: Vec<Vec<TlsHandshake>>| -> Vec<Vec<TlsHandshake>> {
            v.into_iter()
                .map(|c| {
                    c.into_iter()
                        .map(|h| TlsHandshake { ts_ns: 0, ..h })
                        .collect()
                })
                .collect()
        };
        assert!(
            no_ts(run(&coalesce(&evs))) == no_ts(want.clone()),
            "{pcap}: coalesced differs"
        );
        for max in [1, 3, 7, 100, 2000] {
            let got = run(&rechunk(&evs, &mut rng, max));
            assert!(
                got == want,
                "{pcap}: chunks of at most {max} differ: {:?}",
                got.iter().map(|h| h.len()).collect::<Vec<_>>()
            );
        }
    }
}

/// Re-frames the plaintext handshake records at the start of a direction's
/// bytes so that every record carries at most `k` bytes of handshake data:
/// messages then span several records. Stops at the first non-handshake
/// record (the rest is copied as is).
fn refragment(stream: &[u8], k: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = stream;
    while rest.len() >= 5 && rest[0] == 22 {
        let len = u16::from_be_bytes([rest[3], rest[4]]) as usize;
        if rest.len() < 5 + len {
            break;
        }
        for piece in rest[5..5 + len].chunks(k) {
            out.extend_from_slice(&[22, rest[1], rest[2], 0, piece.len() as u8]);
            out.extend_from_slice(piece);
        }
        rest = &rest[5 + len..];
    }
    out.extend_from_slice(rest);
    out
}

/// Handshake messages split over many records give the same result as
/// whole ones (both directions, TLS 1.0 to 1.3, STARTTLS).
#[test]
fn messages_split_over_records() {
    for pcap in [
        "tls10_sni_basic/tls-conn-with-extensions.pcap",
        "tls12_ecdhe/ecdhe.pcap",
        "tls13_psk_resumption/tls13_psk_succesfull.pcap",
        "ja4_tls12_single_hello/tls12.pcap",
        "x509_cert_repeat/google-cert-repeat.pcap",
    ] {
        let (evs, _) = events(pcap);
        let merged = coalesce(&evs);
        let want: Vec<Vec<TlsHandshake>> = run(&merged)
            .into_iter()
            .map(|c| {
                c.into_iter()
                    .map(|h| TlsHandshake { ts_ns: 0, ..h })
                    .collect()
            })
            .collect();
        for k in [1, 5, 200] {
            // Only the first event of each direction is re-framed (the
            // hellos and the server's first flight), one connection at a time.
            let mut seen = std::collections::HashSet::new();
            let evs2: Vec<Ev> = merged
                .iter()
                .map(|e| match e {
                    Ev::Data {
                        conn,
                        dir,
                        ts_ns,
                        data,
                    } if seen.insert((*conn, *dir)) => Ev::Data {
                        conn: *conn,
                        dir: *dir,
                        ts_ns: *ts_ns,
                        data: refragment(data, k),
                    },
                    e => e.clone(),
                })
                .collect();
            let got: Vec<Vec<TlsHandshake>> = run(&evs2)
                .into_iter()
                .map(|c| {
                    c.into_iter()
                        .map(|h| TlsHandshake { ts_ns: 0, ..h })
                        .collect()
                })
                .collect();
            assert!(got == want, "{pcap}: records of {k} bytes differ");
        }
    }
}

#[test]
fn damaged_input_never_panics() {
    for pcap in [
        "tls12_ecdhe/ecdhe.pcap",
        "starttls_pop3/pop3-starttls.pcap",
        "tls13_drafts/tls13draft23-chrome67.0.3368.0-canary.pcap",
    ] {
        let (evs, _) = events(pcap);
        testutil::stress(&evs, || {
            Box::new(TlsParser::with_limits(TlsLimits::default()))
        });
    }
}

/// A minimal ClientHello record (TLS 1.2, one cipher, SNI) for synthetic tests.
fn client_hello_record() -> Vec<u8> {
    let name = b"example.org";
    let mut sni = vec![0, 0];
    let list_len = 3 + name.len();
    sni.extend_from_slice(&((list_len + 2) as u16).to_be_bytes());
    sni.extend_from_slice(&(list_len as u16).to_be_bytes());
    sni.push(0);
    sni.extend_from_slice(&(name.len() as u16).to_be_bytes());
    sni.extend_from_slice(name);
    let mut body = vec![3, 3];
    body.extend_from_slice(&[7; 32]);
    body.push(0); // session id
    body.extend_from_slice(&[0, 2, 0xc0, 0x2f, 1, 0]);
    body.extend_from_slice(&(sni.len() as u16).to_be_bytes());
    body.extend_from_slice(&sni);
    let mut hs = vec![1, 0, (body.len() >> 8) as u8, body.len() as u8];
    hs.extend_from_slice(&body);
    let mut rec = vec![22, 3, 1, (hs.len() >> 8) as u8, hs.len() as u8];
    rec.extend_from_slice(&hs);
    rec
}

fn server_flight_tls12() -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend_from_slice(&[9; 32]);
    body.push(0);
    body.extend_from_slice(&[0xc0, 0x2f, 0]);
    let mut hs = vec![2, 0, 0, body.len() as u8];
    hs.extend_from_slice(&body);
    hs.extend_from_slice(&[14, 0, 0, 0]); // ServerHelloDone in the same record
    let mut rec = vec![22, 3, 3, 0, hs.len() as u8];
    rec.extend_from_slice(&hs);
    rec
}

/// After the handshake, application data is counted and never buffered.
#[test]
fn application_data_is_counted_not_buffered() {
    let mut p = TlsParser::with_limits(TlsLimits::default());
    let mut out = Vec::new();
    p.data(Dir::ToServer, 1, &client_hello_record(), &mut out);
    p.data(Dir::ToClient, 2, &server_flight_tls12(), &mut out);
    p.data(
        Dir::ToServer,
        3,
        &[16, 0, 0, 0, 20, 3, 3, 0, 1, 1, 22, 3, 3, 0, 3, 1, 2, 3][5..],
        &mut out,
    ); // stray bytes
    let mut p = TlsParser::with_limits(TlsLimits::default());
    p.data(Dir::ToServer, 1, &client_hello_record(), &mut out);
    p.data(Dir::ToClient, 2, &server_flight_tls12(), &mut out);
    // Client: ClientKeyExchange, CCS, encrypted Finished.
    p.data(
        Dir::ToServer,
        3,
        &[
            22, 3, 3, 0, 4, 16, 0, 0, 0, 20, 3, 3, 0, 1, 1, 22, 3, 3, 0, 3, 1, 2, 3,
        ],
        &mut out,
    );
    assert!(!p.handshake_done());
    // Server: CCS, encrypted Finished: established.
    p.data(
        Dir::ToClient,
        4,
        &[20, 3, 3, 0, 1, 1, 22, 3, 3, 0, 2, 9, 9],
        &mut out,
    );
    assert!(p.handshake_done());
    let hs = p.take_handshakes();
    assert_eq!(hs.len(), 1);
    let h = &hs[0];
    assert!(h.established && !h.resumed);
    assert_eq!(h.ssl_history, "CsnGIi");
    assert_eq!(h.server_name.as_deref(), Some("example.org"));
    assert_eq!(
        h.cipher_name().as_deref(),
        Some("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256")
    );
    assert_eq!(p.buffered_capacity(), 0);
    // 10 MB of application data in 16 KiB records, fed in odd chunks.
    let mut rec = vec![23, 3, 3, 0x40, 0];
    rec.extend(std::iter::repeat_n(0xab, 0x4000));
    let mut sent = 0u64;
    for k in 0..600 {
        let chunk = &rec[k % 7..];
        p.data(Dir::ToClient, 5, chunk, &mut out);
        sent += chunk.len() as u64;
        assert_eq!(p.buffered_capacity(), 0);
    }
    assert_eq!(p.bytes(Dir::ToClient).1, sent);
    assert!(p.take_handshakes().is_empty() && out.is_empty());
    assert!(!p.gave_up());
}

/// As a connection's parser: one transaction when the handshake is over,
/// with the handshake's spans, and then done (the caller stops
/// reassembling); a plaintext stream on a TLS port yields nothing.
#[test]
fn tls_conn_emits_one_transaction_and_stops() {
    use crate::{Detail, ParseConfig, TxStatus};
    let mut c = TlsConn::new(&ParseConfig::default());
    let mut out = Vec::new();
    c.data(Dir::ToServer, 10, &client_hello_record(), &mut out);
    c.data(Dir::ToClient, 20, &server_flight_tls12(), &mut out);
    let kex = [22, 3, 3, 0, 4, 16, 0, 0, 0, 20, 3, 3, 0, 1, 1, 22, 3, 3, 0, 3, 1, 2, 3];
    c.data(Dir::ToServer, 30, &kex, &mut out);
    assert!(out.is_empty() && !c.gave_up());
    c.data(Dir::ToClient, 40, &[20, 3, 3, 0, 1, 1, 22, 3, 3, 0, 2, 9, 9], &mut out);
    assert_eq!(out.len(), 1);
    assert!(c.gave_up(), "done after the handshake: the reassembler stops");
    let tx = &out[0];
    assert_eq!(tx.status, TxStatus::Ok);
    let (req, resp) = (tx.request.unwrap(), tx.response.unwrap());
    assert_eq!((req.first_ns, req.last_ns), (10, 30));
    assert_eq!((resp.first_ns, resp.last_ns), (20, 40));
    assert_eq!(req.bytes, (client_hello_record().len() + kex.len()) as u64);
    let Detail::Tls(t) = &tx.detail else { panic!("{:?}", tx.detail) };
    assert_eq!(t.server_name.as_deref(), Some("example.org"));
    assert_eq!(t.version.as_deref(), Some("TLSv12"));
    assert!(t.established && t.ja4.as_deref().is_some_and(|j| j.starts_with("t12d")));
    assert_eq!(t.cert_chain_fps(), None);
    assert_eq!(t.client_cert_chain_fps(), None);
    c.finish(50, &mut out);
    assert_eq!(out.len(), 1, "finish after the handshake adds nothing");

    let mut c = TlsConn::new(&ParseConfig::default());
    let mut out = Vec::new();
    for _ in 0..20 {
        c.data(Dir::ToServer, 1, &[b'x'; 4000], &mut out);
    }
    assert!(c.gave_up() && out.is_empty());
    c.finish(2, &mut out);
    assert!(out.is_empty());
}

/// STARTTLS: a PostgreSQL connection whose SSLRequest is answered `S` is
/// handed to the TLS parser, which records the handshake after it.
#[test]
fn pgsql_ssl_request_hands_over_to_tls() {
    use crate::{ConnParser, Detail, ParseConfig, Protocol, ProtocolParser};
    let mut c = Protocol::Pgsql.stream_parser(&ParseConfig::default());
    let mut out = Vec::new();
    c.data(Dir::ToServer, 1, &[0, 0, 0, 8, 4, 0xd2, 0x16, 0x2f], &mut out);
    c.data(Dir::ToClient, 2, b"S", &mut out);
    assert!(matches!(c, ConnParser::Tls(_)));
    assert_eq!(c.service(Protocol::Pgsql), "postgresql");
    c.data(Dir::ToServer, 3, &client_hello_record(), &mut out);
    c.data(Dir::ToClient, 4, &server_flight_tls12(), &mut out);
    c.finish(5, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].detail.protocol(), Protocol::Tls);
    assert!(matches!(&out[0].detail, Detail::Tls(t) if t.server_name.as_deref() == Some("example.org")));
    assert_eq!(c.service(Protocol::Pgsql), "postgresql,ssl");
}

/// The TLS parser that takes a connection over after STARTTLS reads with
/// the connection's TLS limits, not the defaults: a ClientHello longer than
/// a lowered `max_message` is malformed after the hand-over as it is on a
/// plain TLS connection, and parses with the defaults.
#[test]
fn starttls_keeps_the_connections_tls_limits() {
    use crate::{ConnParser, Detail, ParseConfig, Protocol, ProtocolParser};
    let hello = client_hello_record();
    let small = ParseConfig { tls: TlsLimits { max_message: hello.len() / 2, ..TlsLimits::default() }, ..ParseConfig::default() };
    let run = |outer: Protocol, cfg: &ParseConfig| {
        let mut c = outer.stream_parser(cfg);
        let mut out = Vec::new();
        match outer {
            Protocol::Pgsql => {
                c.data(Dir::ToServer, 1, &[0, 0, 0, 8, 4, 0xd2, 0x16, 0x2f], &mut out);
                c.data(Dir::ToClient, 2, b"S", &mut out);
                assert!(matches!(c, ConnParser::Tls(_)), "handed over");
            }
            _ => assert!(matches!(c, ConnParser::Tls(_))),
        }
        c.data(Dir::ToServer, 3, &hello, &mut out);
        c.finish(4, &mut out);
        let sni = match out.first().map(|t| &t.detail) {
            Some(Detail::Tls(t)) => t.server_name.as_deref().map(String::from),
            _ => None,
        };
        (c.stats().malformed, sni)
    };
    for outer in [Protocol::Tls, Protocol::Pgsql] {
        assert_eq!(run(outer, &small).0, 1, "{outer:?}: the lowered limit applies");
        assert_eq!(run(outer, &ParseConfig::default()), (0, Some("example.org".into())), "{outer:?}");
    }
}

/// A handshake message beyond the cap is counted as malformed and the
/// direction is given up; nothing near the declared size is allocated.
#[test]
fn oversized_message_is_bounded() {
    let mut p = TlsParser::with_limits(TlsLimits {
        max_message: 1000,
        ..TlsLimits::default()
    });
    let mut out = Vec::new();
    p.data(Dir::ToServer, 1, &client_hello_record(), &mut out);
    // A Certificate message declaring 16 MB, in a record.
    let mut rec = vec![22, 3, 3, 0x40, 0, 11, 0xff, 0xff, 0xff];
    rec.extend(std::iter::repeat_n(0, 0x4000 - 4));
    // ServerHello first, so the server side is in the handshake.
    p.data(Dir::ToClient, 2, &server_flight_tls12(), &mut out);
    for _ in 0..10 {
        p.data(Dir::ToClient, 3, &rec, &mut out);
    }
    assert!(p.buffered_capacity() < 64 * 1024);
    assert_eq!(p.stats().malformed, 1);
    p.finish(4, &mut out);
    let hs = p.take_handshakes();
    assert_eq!(hs.len(), 1);
    assert!(!hs[0].established);
}

/// A ClientHello handshake message with the given ciphers and extensions.
fn client_hello_msg(session_id: &[u8], ciphers: &[u16], exts: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend_from_slice(&[1; 32]);
    body.push(session_id.len() as u8);
    body.extend_from_slice(session_id);
    body.extend_from_slice(&((ciphers.len() * 2) as u16).to_be_bytes());
    for c in ciphers {
        body.extend_from_slice(&c.to_be_bytes());
    }
    body.extend_from_slice(&[1, 0]);
    let mut e = Vec::new();
    for (t, d) in exts {
        e.extend_from_slice(&t.to_be_bytes());
        e.extend_from_slice(&(d.len() as u16).to_be_bytes());
        e.extend_from_slice(d);
    }
    body.extend_from_slice(&(e.len() as u16).to_be_bytes());
    body.extend_from_slice(&e);
    let mut m = vec![1, 0, (body.len() >> 8) as u8, body.len() as u8];
    m.extend_from_slice(&body);
    m
}

/// GREASE everywhere, ECH, PSK, ALPN with one character, a signature list
/// with GREASE: the parsed fields and the JA4 rules.
#[test]
fn client_hello_fields_and_ja4_rules() {
    let exts = vec![
        (0x3a3a, vec![]),                             // GREASE extension
        (0x0010, vec![0, 4, 1, b'x', 1, b'y']),       // ALPN "x", "y"
        (0x002b, vec![6, 0x7a, 0x7a, 3, 4, 3, 3]),    // supported_versions with GREASE
        (0x000d, vec![0, 6, 0x0a, 0x0a, 4, 3, 8, 4]), // signature_algorithms with GREASE
        (0x0022, vec![0, 2, 6, 3]),                   // delegated_credentials: not signatures
        (0xfe0d, vec![0, 0, 1, 0, 1]),                // encrypted_client_hello
        (0x002d, vec![1, 1]),                         // psk_key_exchange_modes
        (0x0029, vec![0, 0]),                         // pre_shared_key (last)
    ];
    let msg = client_hello_msg(&[], &[0x1a1a, 0x1301, 0x00ff], &exts);
    let ch = super::parser::client_hello(&msg[4..]).unwrap();
    assert!(ch.ech && ch.pre_shared_key && ch.server_name.is_none());
    assert_eq!(ch.alpn, vec![b"x".to_vec(), b"y".to_vec()]);
    assert_eq!(ch.signature_algorithms, vec![0x0a0a, 0x0403, 0x0804]);
    let j = ja4(&ch);
    // No SNI -> i; 2 ciphers and 7 extensions without GREASE; ALPN "x" -> xx.
    assert!(j.ja4.starts_with("t13i0207xx_"), "{}", j.ja4);
    assert_eq!(
        j.ja4_r,
        "t13i0207xx_00ff,1301_000d,0022,0029,002b,002d,fe0d_0403,0804"
    );
    // A record carrying the message, split into three records.
    let mut p = TlsParser::with_limits(TlsLimits::default());
    let mut out = Vec::new();
    for piece in msg.chunks(msg.len() / 3 + 1) {
        let mut rec = vec![22, 3, 1, 0, piece.len() as u8];
        rec.extend_from_slice(piece);
        p.data(Dir::ToServer, 1, &rec, &mut out);
    }
    p.finish(2, &mut out);
    let h = &p.take_handshakes()[0];
    assert!(h.ech && h.ja4.as_ref() == Some(&j) && h.ssl_history == "C");
}

#[test]
fn sslv2_client_hello_is_recognised() {
    // SSLv2 record: len, type 1, version 3.1, 2 cipher specs, no session id, 16-byte challenge.
    let mut body = vec![
        1, 3, 1, 0, 6, 0, 0, 0, 16, 0x00, 0x00, 0x2f, 0x07, 0x00, 0xc0,
    ];
    body.extend_from_slice(&[5; 16]);
    let mut rec = vec![0x80 | (body.len() >> 8) as u8, body.len() as u8];
    rec.extend_from_slice(&body);
    let mut p = TlsParser::with_limits(TlsLimits::default());
    let mut out = Vec::new();
    p.data(Dir::ToServer, 1, &rec, &mut out);
    p.data(Dir::ToClient, 2, &server_flight_tls12(), &mut out);
    p.finish(3, &mut out);
    let h = &p.take_handshakes()[0];
    assert!(h.sslv2_hello);
    let ch = h.client_hello.as_ref().unwrap();
    assert_eq!((ch.version, ch.ciphers.clone()), (0x0301, vec![0x002f]));
    assert_eq!(h.ssl_history, "Csn");
    assert_eq!(h.version_name().as_deref(), Some("TLSv12"));
}

#[test]
fn plaintext_is_not_tls() {
    let mut p = TlsParser::with_limits(TlsLimits {
        max_preamble: 4096,
        ..TlsLimits::default()
    });
    let mut out = Vec::new();
    for _ in 0..300 {
        p.data(
            Dir::ToServer,
            1,
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
            &mut out,
        );
    }
    assert!(p.gave_up());
    p.finish(2, &mut out);
    assert!(p.take_handshakes().is_empty());
}

/// Micro benchmark: ns per handshake parsed (each connection's events up to
/// the end of its handshake, as the reassembler delivers them, replayed in
/// memory through a fresh parser), and ns per 1448-byte chunk after the
/// handshake. Run with
/// `cargo test --release -p wirelog-parse tls::tests::bench_handshake -- --ignored --nocapture`.
#[test]
#[ignore]
fn bench_handshake() {
    for pcap in [
        "ja4_browser_many_hellos/tls-handshake.pcapng",
        "x509_cert_repeat/google-cert-repeat.pcap",
    ] {
        let (evs, _) = events(pcap);
        // Per connection: its events until the handshake is done.
        let mut conns: Vec<Vec<&Ev>> = Vec::new();
        let mut probe: Vec<TlsParser> = Vec::new();
        let mut out = Vec::new();
        for e in &evs {
            let (c, dir, data) = match e {
                Ev::Data {
                    conn, dir, data, ..
                } => (*conn, *dir, data),
                Ev::Gap { .. } => continue,
            };
            while conns.len() <= c {
                conns.push(Vec::new());
                probe.push(TlsParser::with_limits(TlsLimits::default()));
            }
            if !probe[c].handshake_done() {
                probe[c].data(dir, 0, data, &mut out);
                conns[c].push(e);
            }
        }
        // Connections with a handshake (established, or ended by the capture).
        let conns: Vec<Vec<&Ev>> = conns
            .into_iter()
            .zip(&probe)
            .filter(|(_, p)| p.current().client_hello.is_some() || p.handshake_done())
            .map(|(c, _)| c)
            .collect();
        let bytes: usize = conns
            .iter()
            .flatten()
            .map(|e| {
                if let Ev::Data { data, .. } = e {
                    data.len()
                } else {
                    0
                }
            })
            .sum();
        let rounds = 3000;
        let t = std::time::Instant::now();
        let mut n = 0;
        for _ in 0..rounds {
            for c in &conns {
                let mut p = TlsParser::with_limits(TlsLimits::default());
                for e in c {
                    if let Ev::Data {
                        dir, ts_ns, data, ..
                    } = e
                    {
                        p.data(*dir, *ts_ns, data, &mut out);
                    }
                }
                p.finish(0, &mut out);
                n += p.take_handshakes().len();
            }
        }
        let el = t.elapsed().as_nanos() as f64;
        assert_eq!(n, conns.len() * rounds);
        eprintln!(
            "{pcap}: {} handshakes ({bytes} bytes) x {rounds}: {:.0} ns per handshake",
            conns.len(),
            el / n as f64
        );
    }
    // After the handshake: 1448-byte chunks of application-data records.
    let mut p = TlsParser::with_limits(TlsLimits::default());
    let mut out = Vec::new();
    p.data(Dir::ToServer, 1, &client_hello_record(), &mut out);
    p.data(Dir::ToClient, 2, &server_flight_tls12(), &mut out);
    p.data(
        Dir::ToServer,
        3,
        &[
            22, 3, 3, 0, 4, 16, 0, 0, 0, 20, 3, 3, 0, 1, 1, 22, 3, 3, 0, 3, 1, 2, 3,
        ],
        &mut out,
    );
    p.data(
        Dir::ToClient,
        4,
        &[20, 3, 3, 0, 1, 1, 22, 3, 3, 0, 2, 9, 9],
        &mut out,
    );
    assert!(p.handshake_done());
    let chunk = vec![0x17u8; 1448];
    let k = 20_000_000;
    let t = std::time::Instant::now();
    for _ in 0..k {
        p.data(Dir::ToClient, 5, std::hint::black_box(&chunk), &mut out);
    }
    eprintln!(
        "after the handshake: {:.2} ns per 1448-byte chunk",
        t.elapsed().as_nanos() as f64 / k as f64
    );
}

/// Prints what the parser finds in one capture:
/// `TLS_PCAP=case/file.pcap cargo test --release -p wirelog-parse tls::tests::debug_dump -- --ignored --nocapture`.
#[test]
#[ignore]
fn debug_dump() {
    let pcap = std::env::var("TLS_PCAP").expect("TLS_PCAP=<case>/<pcap> under shared/testdata/tls");
    let (hss, tuples) = parse_pcap(&pcap);
    for (h, t) in hss.iter().zip(&tuples) {
        for x in h {
            eprintln!(
                "{t:?} {:?} {:?} {:?} {} est={} hist={}",
                x.version_name(),
                x.cipher_name(),
                x.curve_name(),
                x.resumed,
                x.established,
                x.ssl_history
            );
        }
    }
}

#[test]
fn md5_vectors() {
    assert_eq!(md5_hex(b""), "d41d8cd98f00b204e9800998ecf8427e");
    assert_eq!(md5_hex(b"abc"), "900150983cd24fb0d6963f7d28e17f72");
    assert_eq!(
        md5_hex(
            b"12345678901234567890123456789012345678901234567890123456789012345678901234567890"
        ),
        "57edf4a22be3c955ac49da2e2107b67a"
    );
}

/// JA3 and JA3S of every TCP hello equal tshark's (files ja3.tshark.tsv in
/// every case folder): the first ClientHello and the last ServerHello of
/// each connection.
#[test]
fn ja3_matches_tshark() {
    let root = testutil::path(DIR);
    let mut cases: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .collect();
    cases.sort_by_key(|e| e.file_name());
    let mut failed = Vec::new();
    let (mut all_n, mut all_ok) = (0, 0);
    for case in cases {
        let case = case.file_name().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(format!("{root}/{case}/ja3.tshark.tsv")).unwrap();
        let mut lines = text.lines();
        let cols: Vec<&str> = lines.next().unwrap().split('\t').collect();
        let rows: Vec<HashMap<&str, &str>> = lines
            .map(|l| cols.iter().copied().zip(l.split('\t')).collect())
            .collect();
        let mut pcaps: Vec<String> = std::fs::read_dir(format!("{root}/{case}"))
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".pcap") || n.ends_with(".pcapng"))
            .collect();
        pcaps.sort();
        let (mut n, mut ok) = (0, 0);
        for pcap in &pcaps {
            let (hss, tuples) = parse_pcap(&format!("{case}/{pcap}"));
            let by_tuple: HashMap<&Tuple, &Vec<TlsHandshake>> = tuples.iter().zip(&hss).collect();
            let mine = rows
                .iter()
                .filter(|r| r["transport"] == "tcp" && r.get("pcap").is_none_or(|p| p == pcap));
            // First client row, last server row per connection.
            let mut want: HashMap<(Tuple, bool), &str> = HashMap::new();
            for r in mine {
                let client = r["hello"] == "client";
                let (a, ap, b, bp) = (r["src"], r["src_port"], r["dst"], r["dst_port"]);
                let t: Tuple = if client {
                    (a.into(), ap.parse().unwrap(), b.into(), bp.parse().unwrap())
                } else {
                    (b.into(), bp.parse().unwrap(), a.into(), ap.parse().unwrap())
                };
                if client {
                    want.entry((t, true)).or_insert(r["ja3_md5"]);
                } else {
                    want.insert((t, false), r["ja3_md5"]);
                }
            }
            for ((t, client), md5) in want {
                n += 1;
                let h = by_tuple.get(&t).and_then(|v| v.first());
                let got = h
                    .and_then(|h| if client { h.ja3() } else { h.ja3s() })
                    .map(|j| j.md5);
                if got.as_deref() == Some(md5) {
                    ok += 1;
                } else {
                    let s = h
                        .and_then(|h| if client { h.ja3() } else { h.ja3s() })
                        .map(|j| j.string);
                    failed.push(format!(
                        "{case}/{pcap} {t:?} client={client}: got {got:?} ({s:?}), want {md5}"
                    ));
                }
            }
        }
        eprintln!("{case}: JA3/JA3S {ok}/{n} agree");
        all_n += n;
        all_ok += ok;
    }
    eprintln!("JA3/JA3S total: {all_ok}/{all_n}");
    assert!(failed.is_empty(), "{failed:#?}");
}

/// The fuzz entry on scripts built from real streams (each event a step,
/// so the records are valid and then damaged) and on noise, as a smoke run
/// of `fuzz/fuzz_targets/parse_tls.rs` without cargo-fuzz.
#[test]
fn fuzz_entry_smoke() {
    let mut rng = Rng(0xf022_7e11);
    for pcap in [
        "tls12_ecdhe/ecdhe.pcap",
        "starttls_databases/encrypted.pcap",
        "tls13_psk_resumption/tls13_psk_succesfull.pcap",
    ] {
        let (evs, _) = events(pcap);
        for round in 0..64u8 {
            let mut script = vec![round];
            for e in evs.iter().filter(|e| matches!(e, Ev::Data { conn: 0, .. })) {
                let Ev::Data { dir, data, .. } = e else {
                    continue;
                };
                for piece in data.chunks(32) {
                    let mut piece = piece.to_vec();
                    if rng.below(10) == 0 {
                        let i = rng.below(piece.len());
                        piece[i] = rng.next() as u8;
                    }
                    let d = if *dir == Dir::ToServer { 0 } else { 1 };
                    script.push((((piece.len() - 1) as u8) << 3) | d);
                    script.extend_from_slice(&piece);
                }
            }
            fuzz(&script);
            let noise: Vec<u8> = (0..rng.below(2000)).map(|_| rng.next() as u8).collect();
            fuzz(&noise);
        }
    }
}

fn list<T: std::fmt::Display>(v: impl IntoIterator<Item = T>) -> String {
    let s: Vec<String> = v.into_iter().map(|x| x.to_string()).collect();
    if s.is_empty() {
        "-".into()
    } else {
        s.join(",")
    }
}

/// The raw hello fields of Zeek's ssl-log-ext policy (the inputs of the
/// next round's extra columns and of JA3) agree with its baselines.
#[test]
fn hello_fields_match_zeek_ssl_log_ext() {
    let cases = [
        ("tls11_no_sni", "tls1_1.pcap", "ssl-log-ext.log"),
        ("tls12_ecdhe", "ecdhe.pcap", "ssl-log-ext.log"),
        (
            "tls13_drafts",
            "tls13draft23-chrome67.0.3368.0-canary.pcap",
            "ssl-log-ext.draft23.log",
        ),
    ];
    let mut failed = Vec::new();
    let (mut n, mut ok) = (0, 0);
    for (case, pcap, log) in cases {
        let (hss, tuples) = parse_pcap(&format!("{case}/{pcap}"));
        let by_tuple: HashMap<&Tuple, &Vec<TlsHandshake>> = tuples.iter().zip(&hss).collect();
        for row in zeek_rows(&format!("{case}/{log}")) {
            let key = (
                row["id.orig_h"].clone(),
                row["id.orig_p"].parse().unwrap(),
                row["id.resp_h"].clone(),
                row["id.resp_p"].parse().unwrap(),
            );
            let h = by_tuple
                .get(&key)
                .and_then(|v| v.first())
                .expect("a handshake");
            let (ch, sh) = (
                h.client_hello.as_ref().unwrap(),
                h.server_hello.as_ref().unwrap(),
            );
            let cols = [
                ("server_version", sh.version.to_string()),
                ("client_version", ch.version.to_string()),
                ("client_ciphers", list(&ch.ciphers)),
                ("ssl_client_exts", list(&ch.extensions)),
                ("ssl_server_exts", list(&sh.extensions)),
                ("point_formats", list(&ch.point_formats)),
                ("client_curves", list(&ch.groups)),
                (
                    "orig_alpn",
                    list(
                        ch.alpn
                            .iter()
                            .map(|a| String::from_utf8_lossy(a).into_owned()),
                    ),
                ),
                ("client_supported_versions", list(&ch.supported_versions)),
                ("server_supported_version", list(sh.selected_version)),
                ("client_key_share_groups", list(&ch.key_share_groups)),
                ("server_key_share_group", list(sh.key_share_group)),
                ("client_comp_methods", list(&ch.compression)),
                (
                    "sigalgs",
                    list(ch.signature_algorithms.iter().map(|s| s & 0xff)),
                ),
                (
                    "hashalgs",
                    list(ch.signature_algorithms.iter().map(|s| s >> 8)),
                ),
            ];
            for (col, got) in cols {
                n += 1;
                if got == row[col] {
                    ok += 1;
                } else {
                    failed.push(format!(
                        "{case} {key:?} {col}: got {got}, want {}",
                        row[col]
                    ));
                }
            }
        }
    }
    eprintln!("ssl-log-ext hello fields: {ok}/{n} agree");
    assert!(n >= 45 && failed.is_empty(), "{failed:#?}");
}

/// Where a handshake's time goes: the ClientHello parse and JA4 alone.
#[test]
#[ignore]
fn bench_parts() {
    let (evs, _) = events("ja4_tls12_single_hello/tls12.pcap");
    let Ev::Data { data, .. } = &evs[0] else {
        panic!()
    };
    let body = &data[9..];
    let k = 200_000;
    let t = std::time::Instant::now();
    for _ in 0..k {
        std::hint::black_box(super::parser::client_hello(std::hint::black_box(body)));
    }
    eprintln!(
        "client_hello parse: {:.0} ns",
        t.elapsed().as_nanos() as f64 / k as f64
    );
    let ch = super::parser::client_hello(body).unwrap();
    let t = std::time::Instant::now();
    for _ in 0..k {
        std::hint::black_box(ja4(std::hint::black_box(&ch)));
    }
    eprintln!("ja4: {:.0} ns", t.elapsed().as_nanos() as f64 / k as f64);
    let t = std::time::Instant::now();
    for _ in 0..k {
        std::hint::black_box(ja3(std::hint::black_box(&ch)));
    }
    eprintln!("ja3: {:.0} ns", t.elapsed().as_nanos() as f64 / k as f64);
}

/// Every certificate in Zeek's x509 logs is among the DER certificates the
/// parser kept (same SHA-256), and `host_cert`/`client_cert` agree with the
/// position and sender: the input of the x509 round.
#[test]
fn certificates_match_zeek_x509_logs() {
    let root = testutil::path(DIR);
    let mut cases: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    cases.sort();
    let (mut n, mut ok) = (0, 0);
    let mut failed = Vec::new();
    for case in cases {
        let files: Vec<String> = std::fs::read_dir(format!("{root}/{case}"))
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        // (fingerprint, host_cert, client_cert) of every certificate we kept.
        let mut ours = std::collections::HashSet::new();
        for pcap in files
            .iter()
            .filter(|f| f.ends_with(".pcap") || f.ends_with(".pcapng"))
        {
            for h in parse_pcap(&format!("{case}/{pcap}")).0.iter().flatten() {
                for (chain, client) in [(&h.server_certs, "F"), (&h.client_certs, "T")] {
                    for (i, der) in chain.iter().flat_map(|c| c.certs.iter()).enumerate() {
                        ours.insert((sha256_hex(der), if i == 0 { "T" } else { "F" }, client));
                    }
                }
            }
        }
        for log in files
            .iter()
            .filter(|f| f.starts_with("x509") && f.ends_with(".log"))
        {
            for row in zeek_rows(&format!("{case}/{log}")) {
                n += 1;
                let key = (
                    row["fingerprint"].clone(),
                    row["host_cert"].as_str(),
                    row["client_cert"].as_str(),
                );
                if ours.contains(&(key.0.clone(), key.1, key.2)) {
                    ok += 1;
                } else {
                    failed.push(format!("{case}/{log}: {key:?} not kept"));
                }
            }
        }
    }
    eprintln!("x509 certificates kept: {ok}/{n}");
    assert!(n >= 20 && failed.is_empty(), "{failed:#?}");
}

/// A handshake that agreed on `h2` by ALPN makes the connection's service
/// `ssl,http2`; the others stay `ssl`.
#[test]
fn alpn_h2_names_the_service() {
    let mut h2 = 0;
    for rel in ["tls12_alpn_ocsp_sct/signed_certificate_timestamp.pcap", "tls12_alpn_ocsp_sct/signed_certificate_timestamp-2.pcap", "tls12_ecdhe/ecdhe.pcap"] {
        let (evs, _) = events(rel);
        let n = evs.iter().map(|e| match e { Ev::Data { conn, .. } | Ev::Gap { conn, .. } => *conn + 1 }).max().unwrap_or(0);
        for c in 0..n {
            let mut p = super::TlsConn::new(&crate::ParseConfig::default());
            let mut out = Vec::new();
            for e in &evs {
                match e {
                    Ev::Data { conn, dir, ts_ns, data } if *conn == c => p.data(*dir, *ts_ns, data, &mut out),
                    Ev::Gap { conn, dir, ts_ns, len } if *conn == c => p.gap(*dir, *ts_ns, *len, &mut out),
                    _ => {}
                }
            }
            p.finish(0, &mut out);
            let agreed = out.iter().any(|t| matches!(&t.detail, crate::Detail::Tls(h) if h.next_protocol.as_deref() == Some("h2")));
            assert_eq!(p.service(), if agreed { "ssl,http2" } else { "ssl" }, "{rel} conn {c}");
            h2 += agreed as usize;
        }
    }
    assert!(h2 > 0, "no h2 handshake in the captures");
}

/// Handshake messages of one direction, framed into records of at most
/// `rec` bytes.
fn records(msgs: &[Vec<u8>], rec: usize) -> Vec<u8> {
    let flat: Vec<u8> = msgs.concat();
    let mut out = Vec::new();
    for piece in flat.chunks(rec) {
        out.extend_from_slice(&[22, 3, 3]);
        out.extend_from_slice(&(piece.len() as u16).to_be_bytes());
        out.extend_from_slice(piece);
    }
    out
}

/// A handshake message of type `typ` around `body`.
fn hs_msg(typ: u8, body: &[u8]) -> Vec<u8> {
    let n = body.len();
    let mut m = vec![typ, (n >> 16) as u8, (n >> 8) as u8, n as u8];
    m.extend_from_slice(body);
    m
}

/// A Certificate message holding `certs` (opaque bytes: only framing matters here).
fn certificate_msg(certs: &[Vec<u8>]) -> Vec<u8> {
    let mut list = Vec::new();
    for c in certs {
        let n = c.len();
        list.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8]);
        list.extend_from_slice(c);
    }
    let n = list.len();
    let mut body = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8];
    body.extend_from_slice(&list);
    hs_msg(11, &body)
}

/// A TLS 1.2 ECDHE handshake whose server sends a `leaf`-byte certificate
/// and a CA, and whose client answers a CertificateRequest with a
/// `client`-byte certificate, every message cut into records of 1000 bytes,
/// fed in chunks of 700 (as small segments deliver them): (client, server)
/// byte streams.
fn large_handshake(leaf: usize, client: usize) -> (Vec<u8>, Vec<u8>, Vec<Vec<u8>>, Vec<u8>) {
    let server_certs = vec![vec![0x5a; leaf], vec![0xca; 1500]];
    let client_cert = vec![0xc1; client];
    let mut sh = vec![3, 3];
    sh.extend_from_slice(&[9; 32]);
    sh.push(0);
    sh.extend_from_slice(&[0xc0, 0x2f, 0]);
    // ServerKeyExchange: named_curve secp256r1 (23), a point, a signature.
    let mut ske = vec![3, 0, 23, 65];
    ske.extend_from_slice(&[4; 65]);
    ske.extend_from_slice(&[4, 1, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8]);
    let server = records(
        &[
            hs_msg(2, &sh),
            certificate_msg(&server_certs),
            hs_msg(12, &ske),
            hs_msg(13, &[1, 1, 0, 2, 4, 1, 0, 0]),
            hs_msg(14, &[]),
        ],
        1000,
    );
    let mut c = client_hello_record();
    c.extend(records(
        &[certificate_msg(std::slice::from_ref(&client_cert)), hs_msg(16, &[32; 33])],
        1000,
    ));
    (c, server, server_certs, client_cert)
}

/// Feeds a handshake in chunks of 700 bytes, then both sides' CCS and an
/// encrypted record; the handshake it gave.
fn feed_large(p: &mut TlsParser, client: &[u8], server: &[u8]) -> TlsHandshake {
    let mut out = Vec::new();
    let (hello, rest) = client.split_at(client_hello_record().len());
    p.data(Dir::ToServer, 1, hello, &mut out);
    for c in server.chunks(700) {
        p.data(Dir::ToClient, 2, c, &mut out);
    }
    for c in rest.chunks(700) {
        p.data(Dir::ToServer, 3, c, &mut out);
    }
    let fin = [20, 3, 3, 0, 1, 1, 22, 3, 3, 0, 40];
    p.data(Dir::ToServer, 4, &fin, &mut out);
    p.data(Dir::ToServer, 4, &[0; 40], &mut out);
    p.data(Dir::ToClient, 5, &fin, &mut out);
    p.data(Dir::ToClient, 5, &[0; 40], &mut out);
    p.finish(6, &mut out);
    let mut hs = p.take_handshakes();
    assert_eq!(hs.len(), 1);
    hs.pop().unwrap()
}

/// A server certificate of 3 MB (thousands of names make them that big)
/// and a client certificate of 600 kB, over records of 1000 bytes and
/// segments of 700: every message is reassembled, the certificates kept
/// whole, the curve after them read, the history complete, and nothing is
/// left buffered afterwards.
#[test]
fn large_certificates_over_many_records_are_kept() {
    let (client, server, server_certs, client_cert) = large_handshake(3 << 20, 600 << 10);
    let mut p = TlsParser::with_limits(TlsLimits::default());
    let hs = feed_large(&mut p, &client, &server);
    assert!(hs.established);
    assert_eq!(hs.curve_name().as_deref(), Some("secp256r1"));
    assert_eq!(hs.ssl_history, "CsxkrnXGIi");
    let sc = hs.server_certs.as_ref().unwrap();
    assert_eq!((sc.count, &sc.certs), (2, &server_certs));
    let cc = hs.client_certs.as_ref().unwrap();
    assert_eq!((cc.count, &cc.certs), (1, &vec![client_cert]));
    assert_eq!(p.stats().cut_bytes, 0);
    assert_eq!(p.stats().malformed, 0);
    assert_eq!(p.buffered_capacity(), 0);
    assert_eq!(p.held(), 0);
    // Its CertificateRequest names no CA: an empty list, not none.
    assert_eq!(hs.requested_cas, Some(vec![]));
}

/// A CertificateRequest's `certificate_authorities` list.
fn ca_list(names: &[&[u8]]) -> Vec<u8> {
    let mut list = Vec::new();
    for n in names {
        list.extend_from_slice(&(n.len() as u16).to_be_bytes());
        list.extend_from_slice(n);
    }
    let mut v = (list.len() as u16).to_be_bytes().to_vec();
    v.extend(list);
    v
}

/// The CA names of a CertificateRequest in each version's form: TLS 1.0
/// and 1.1 without signature algorithms (RFC 4346 7.4.4), TLS 1.2 with
/// them (RFC 5246 7.4.4), TLS 1.3 in the certificate_authorities extension
/// (RFC 8446 4.3.2, 4.2.4); bytes after the list ignored, a list that
/// overruns the message refused.
#[test]
fn certificate_request_names_in_each_form() {
    let (a, b): (&[u8], &[u8]) = (b"\x30\x03\x31\x01A", b"\x30\x00");
    let mut tls10 = vec![2, 1, 64];
    tls10.extend(ca_list(&[a, b]));
    assert_eq!(certificate_request_cas(&tls10, 0x0301), Some(vec![a, b]));
    assert_eq!(certificate_request_cas(&tls10, 0x0302), Some(vec![a, b]));
    let mut tls12 = vec![1, 1, 0, 4, 4, 1, 8, 4];
    tls12.extend(ca_list(&[a, b]));
    tls12.extend_from_slice(b"trailing");
    assert_eq!(certificate_request_cas(&tls12, 0x0303), Some(vec![a, b]));
    let mut tls13 = vec![2, 7, 7];
    let ext47 = ca_list(&[b, a]);
    let mut exts = vec![0, 13, 0, 4, 0, 2, 4, 3, 0, 47];
    exts.extend_from_slice(&(ext47.len() as u16).to_be_bytes());
    exts.extend(ext47);
    tls13.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    tls13.extend(exts);
    assert_eq!(certificate_request_cas(&tls13, 0x0304), Some(vec![b, a]));
    assert_eq!(certificate_request_cas(&tls13, 0x7f1c), Some(vec![b, a]));
    assert_eq!(certificate_request_cas(&[0, 0, 8, 0, 13, 0, 4, 0, 2, 4, 3], 0x0304), Some(vec![]));
    assert_eq!(certificate_request_cas(&[1, 1, 0, 2, 4, 1, 0, 0], 0x0303), Some(vec![]));
    assert_eq!(certificate_request_cas(&[1, 1, 0, 2, 4, 1, 0, 9, 0, 5, 1], 0x0303), None);
    assert_eq!(certificate_request_cas(&[1], 0x0303), None);
}

/// Through the parser: the server's CertificateRequest gives the names
/// (held against the memory granted), the chosen version picks the form.
#[test]
fn the_parser_keeps_the_requested_ca_names() {
    let (a, b): (&[u8], &[u8]) = (b"\x30\x05\x31\x03abc", b"\x30\x01Z");
    let mut sh = vec![3, 3];
    sh.extend_from_slice(&[9; 32]);
    sh.push(0);
    sh.extend_from_slice(&[0xc0, 0x2f, 0]);
    let mut req = vec![1, 1, 0, 2, 4, 1];
    req.extend(ca_list(&[a, b]));
    let server = records(&[hs_msg(2, &sh), hs_msg(13, &req), hs_msg(14, &[])], 1000);
    let mut p = TlsParser::with_limits(TlsLimits::default());
    let mut out = Vec::new();
    p.data(Dir::ToServer, 1, &client_hello_record(), &mut out);
    p.data(Dir::ToClient, 2, &server, &mut out);
    assert_eq!(p.current().requested_cas, Some(vec![a.to_vec(), b.to_vec()]));
    assert_eq!(p.held(), a.len() + b.len());
    assert_eq!(p.stats().malformed, 0);
    // Granted less than both names: the first is kept, the rest cut and counted.
    let mut p = TlsParser::with_limits(TlsLimits::default());
    p.set_allowance(a.len() + 1);
    p.data(Dir::ToServer, 1, &client_hello_record(), &mut out);
    p.data(Dir::ToClient, 2, &server, &mut out);
    assert_eq!(p.current().requested_cas, Some(vec![a.to_vec()]));
    assert_eq!(p.stats().cut_bytes, b.len() as u64);
}

/// The same handshake granted 1 MiB: the server's Certificate message is
/// passed over by its length and counted, the client's (600 kB) kept; the
/// letters, the curve and `established` are still there, and the parser
/// never held more than it was granted.
#[test]
fn a_certificate_message_over_the_allowance_is_cut_and_counted() {
    let (client, server, _, client_cert) = large_handshake(3 << 20, 600 << 10);
    let grant = 1 << 20;
    let mut p = TlsParser::with_limits(TlsLimits::default());
    p.set_allowance(grant);
    let mut out = Vec::new();
    let (hello, rest) = client.split_at(client_hello_record().len());
    p.data(Dir::ToServer, 1, hello, &mut out);
    let mut most = 0;
    for c in server.chunks(700) {
        p.data(Dir::ToClient, 2, c, &mut out);
        most = most.max(p.held());
    }
    for c in rest.chunks(700) {
        p.data(Dir::ToServer, 3, c, &mut out);
        most = most.max(p.held());
    }
    assert!(most <= grant, "held {most} of {grant}");
    let cert_msg = 4 + 3 + (3 + (3 << 20)) + (3 + 1500);
    assert_eq!(p.stats().cut_bytes, cert_msg as u64);
    assert!(p.stats().unparsed_bytes >= cert_msg as u64);
    let fin = [20, 3, 3, 0, 1, 1, 23, 3, 3, 0, 40];
    for (dir, ts) in [(Dir::ToServer, 4), (Dir::ToClient, 5)] {
        p.data(dir, ts, &fin, &mut out);
        p.data(dir, ts, &[0; 40], &mut out);
    }
    let hs = p.take_handshakes().pop().unwrap();
    assert!(hs.established);
    assert_eq!(hs.curve_name().as_deref(), Some("secp256r1"));
    assert_eq!(hs.ssl_history, "CsxkrnXGIi");
    assert!(hs.server_certs.is_none());
    assert_eq!(hs.client_certs.unwrap().certs, vec![client_cert]);
}

/// A gap inside a message being passed over costs nothing more: the
/// messages after it are read.
#[test]
fn a_gap_inside_a_cut_message_is_passed_over_too() {
    let (client, server, _, _) = large_handshake(200 << 10, 1000);
    let mut p = TlsParser::with_limits(TlsLimits::default());
    p.set_allowance(64 << 10);
    let mut out = Vec::new();
    p.data(Dir::ToServer, 1, &client[..client_hello_record().len()], &mut out);
    // The ServerHello record and the first record of the Certificate
    // message, then a hole of 500 bytes inside the second record.
    let first = 5 + 42 + 5 + 1000;
    p.data(Dir::ToClient, 2, &server[..first + 100], &mut out);
    p.gap(Dir::ToClient, 2, 500, &mut out);
    p.data(Dir::ToClient, 2, &server[first + 600..], &mut out);
    let hs = p.current();
    assert_eq!(hs.curve_name().as_deref(), Some("secp256r1"));
    assert_eq!(hs.ssl_history, "Csxkrn");
    assert_eq!(p.stats().gaps, 1);
}

/// CertificateStatus (RFC 6066 8) as Zeek takes it (zeek/zeek a13de64f
/// `tls-handshake-protocol.pac:180-184`, `tls-handshake-analyzer.pac:419-442`):
/// status_type 1 with a non-empty response is kept whole (the length field
/// unchecked, the rest of the message is the response), another type or an
/// empty response is not, a later one replaces it; held against the
/// memory granted, cut and counted beyond it.
#[test]
fn the_parser_keeps_the_stapled_ocsp_response() {
    let mut sh = vec![3, 3];
    sh.extend_from_slice(&[9; 32]);
    sh.push(0);
    sh.extend_from_slice(&[0xc0, 0x2f, 0]);
    let resp: &[u8] = b"\x30\x03\x0a\x01\x00";
    let status = |typ: u8, body: &[u8]| {
        let mut m = vec![typ];
        m.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        m.extend_from_slice(body);
        m
    };
    let run = |msgs: &[Vec<u8>], grant: Option<usize>| {
        let mut all = vec![hs_msg(2, &sh)];
        all.extend(msgs.iter().map(|m| hs_msg(22, m)));
        all.push(hs_msg(14, &[]));
        let server = records(&all, 1000);
        let mut p = TlsParser::with_limits(TlsLimits::default());
        if let Some(g) = grant {
            p.set_allowance(g);
        }
        let mut out = Vec::new();
        p.data(Dir::ToServer, 1, &client_hello_record(), &mut out);
        p.data(Dir::ToClient, 2, &server, &mut out);
        (p.current().ocsp_response.clone(), p.held(), p.stats().cut_bytes, p.current().ssl_history.clone())
    };
    let (kept, held, cut, history) = run(&[status(1, resp)], None);
    assert_eq!(kept.as_deref(), Some(resp));
    assert_eq!((held, cut), (resp.len(), 0));
    assert_eq!(history, "Csun");
    // The length field is not checked: the rest of the message is the response.
    let mut odd = vec![1, 0, 0, 1];
    odd.extend_from_slice(resp);
    assert_eq!(run(&[odd], None).0.as_deref(), Some(resp));
    assert_eq!(run(&[status(2, resp)], None).0, None);
    assert_eq!(run(&[status(1, b"")], None).0, None);
    assert_eq!(run(&[status(1, b"\x30\x00"), status(1, resp)], None).0.as_deref(), Some(resp));
    // Granted less than the response: not kept, counted.
    let (kept, held, cut, _) = run(&[status(1, resp)], Some(resp.len() - 1));
    assert_eq!((kept, held, cut), (None, 0, resp.len() as u64));
}

/// Zeek's capture with a stapled response (the `u` of CsxuknGIti): both
/// connections keep it, a DER OCSPResponse (a SEQUENCE) whose responseStatus
/// is successful (`0a 01 00` after the SEQUENCE's length).
#[test]
fn zeeks_stapling_capture_keeps_the_response() {
    for rel in ["tls12_alpn_ocsp_sct/signed_certificate_timestamp.pcap", "tls12_alpn_ocsp_sct/signed_certificate_timestamp-2.pcap"] {
        let (conns, _) = parse_pcap(rel);
        let hs: Vec<&TlsHandshake> = conns.iter().flatten().collect();
        assert_eq!(hs.len(), 1, "{rel}");
        let r = hs[0].ocsp_response.as_deref().unwrap_or_else(|| panic!("{rel}: no response"));
        assert_eq!(r[0], 0x30, "{rel}");
        let len_bytes = if r[1] & 0x80 != 0 { 1 + (r[1] & 0x7f) as usize } else { 1 };
        assert_eq!(&r[1 + len_bytes..4 + len_bytes], &[0x0a, 0x01, 0x00], "{rel}");
        assert!(hs[0].ssl_history.contains('u'), "{rel}");
    }
}
