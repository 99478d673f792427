//! PostgreSQL parser tests: hand-made messages, the Packetbeat system-test
//! pcaps (facts from shared/testdata/packetbeat/manifest.json), Zeek's
//! postgresql.log baselines, and damaged input.

use super::*;
use crate::testutil::{parse_pcap, stress, tcp_events};
use crate::Protocol;

fn all(rel: &str) -> Vec<Transaction> {
    parse_pcap(rel, &[5432], Protocol::Pgsql, &ParseConfig::default()).into_iter().flatten().collect()
}

fn pg(t: &Transaction) -> &PgsqlTx {
    match &t.detail {
        Detail::Pgsql(m) => m,
        d => panic!("not pgsql: {d:?}"),
    }
}

fn msg(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![ty];
    v.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    v.extend_from_slice(body);
    v
}

fn startup(params: &[(&str, &str)]) -> Vec<u8> {
    let mut b = PROTO_3.to_be_bytes().to_vec();
    for (k, v) in params {
        b.extend_from_slice(k.as_bytes());
        b.push(0);
        b.extend_from_slice(v.as_bytes());
        b.push(0);
    }
    b.push(0);
    let mut v = (b.len() as u32 + 4).to_be_bytes().to_vec();
    v.extend(b);
    v
}

fn run(chunks: &[(Dir, Vec<u8>)]) -> (Vec<Transaction>, PgsqlParser) {
    let mut p = PgsqlParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    for (i, (d, c)) in chunks.iter().enumerate() {
        p.data(*d, i as i64 * 1000, c, &mut out);
    }
    p.finish(0, &mut out);
    (out, p)
}

fn z() -> Vec<u8> {
    msg(b'Z', b"I")
}

fn cc(tag: &str) -> Vec<u8> {
    let mut b = tag.as_bytes().to_vec();
    b.push(0);
    msg(b'C', &b)
}

// ---- Packetbeat: test_0009_pgsql.test_select ----
#[test]
fn pb_pgsql_select() {
    let txs = all("packetbeat/pcaps/pgsql_request_response.pcap");
    assert_eq!(txs.len(), 1);
    let p = pg(&txs[0]);
    assert_eq!(p.method(), "SELECT");
    assert_eq!(p.query.as_deref(), Some("select * from test"));
    assert_eq!(txs[0].response.unwrap().bytes, 202);
    assert_eq!(p.num_rows, 4);
    assert_eq!(p.num_fields, Some(3));
    assert_eq!(txs[0].status, TxStatus::Ok);
    // Packetbeat's `response` text (rows as CSV) is not kept: rows are counted.
}

// ---- Packetbeat: test_0009_pgsql.test_insert ----
#[test]
fn pb_pgsql_insert() {
    let txs = all("packetbeat/pcaps/pgsql_insert.pcap");
    assert_eq!(txs.len(), 1);
    assert_eq!(pg(&txs[0]).method(), "INSERT");
    assert_eq!(txs[0].response.unwrap().bytes, 16);
    assert_eq!(txs[0].request.unwrap().bytes, 63);
    assert_eq!(pg(&txs[0]).rows, Some(1));
    assert_eq!(pg(&txs[0]).command_tag.as_deref(), Some("INSERT 0 1"));
}

// ---- Packetbeat: test_0009_pgsql.test_insert_error ----
#[test]
fn pb_pgsql_insert_error() {
    let txs = all("packetbeat/pcaps/pgsql_insert_error.pcap");
    assert_eq!(txs.len(), 1);
    let p = pg(&txs[0]);
    assert_eq!(p.method(), "INSERT");
    assert_eq!(txs[0].status, TxStatus::Error);
    assert_eq!(p.error_code.as_deref(), Some("23505"));
    assert_eq!(p.error_severity.as_deref(), Some("ERROR"));
    assert!(p.error_message.as_deref().unwrap().starts_with("duplicate key value"));
}

// ---- Packetbeat: test_0009_pgsql_extended_query ----
#[test]
fn pb_pgsql_extended_query() {
    let txs = all("packetbeat/pcaps/pgsql_extended_query.pcap");
    // Ours: startup, the driver's `SET extra_float_digits = 3` Execute and
    // the SELECT; Packetbeat reports the SELECT only.
    let kinds: Vec<_> = txs.iter().map(|t| pg(t).kind).collect();
    assert_eq!(kinds, ["startup", "execute", "execute"]);
    let st = pg(&txs[0]);
    assert_eq!(st.auth_method, Some("ok"));
    assert_eq!(txs[0].status, TxStatus::Ok);
    assert_eq!(pg(&txs[1]).query.as_deref(), Some("SET extra_float_digits = 3"));
    let o = &txs[2];
    assert_eq!(pg(o).method(), "SELECT");
    assert_eq!(pg(o).query.as_deref(), Some("SELECT * from test where id = $1"));
    assert_eq!(pg(o).fingerprint.as_deref(), Some("select * from test where id = ?"));
    assert_eq!(o.request.unwrap().bytes, 90);
    assert_eq!(o.response.unwrap().bytes, 101);
    assert_eq!(pg(o).num_rows, 1);
    assert_eq!(pg(o).statement.as_deref(), Some(""));
}

// ---- Packetbeat: test_0018_pgsql_long_result / test_0021 send options ----
#[test]
fn pb_pgsql_long_result() {
    let txs = all("packetbeat/pcaps/pgsql_long_result.pcap");
    assert_eq!(txs.len(), 1);
    assert_eq!(pg(&txs[0]).num_rows, 15);
    assert_eq!(pg(&txs[0]).rows, Some(15));
    // max_rows / max_row_length / send_request / send_response shape
    // Packetbeat's stored text, which we do not store.
}

fn zeek_rows(file: &str) -> Vec<Vec<String>> {
    let log = std::fs::read_to_string(crate::testutil::path(file)).unwrap();
    log.lines()
        .filter(|l| l.starts_with("XXXXXXXXXX"))
        .map(|l| l.split('\t').map(|f| f.replace("\\x0a", "\n")).collect())
        .collect()
}

/// Compares with a Zeek postgresql.log: per connection, kind, user,
/// database, query text (Zeek keeps the `;`), success, rows.
fn compare_zeek(pcap: &str, log: &str) {
    let conns = parse_pcap(pcap, &[5432], Protocol::Pgsql, &ParseConfig::default());
    let mut want = zeek_rows(log);
    // Zeek's log interleaves connections by time; ours are per connection
    // (in order of first packet): group Zeek's by uid, stably.
    let mut uids: Vec<String> = Vec::new();
    for w in &want {
        if !uids.contains(&w[1]) {
            uids.push(w[1].clone());
        }
    }
    want.sort_by_key(|w| uids.iter().position(|u| *u == w[1]));
    let ours: Vec<&Transaction> = conns.iter().flatten().filter(|t| pg(t).kind != "terminate").collect();
    let want: Vec<&Vec<String>> = want.iter().filter(|w| w[9] != "terminate").collect();
    assert_eq!(ours.len(), want.len());
    for (t, w) in ours.iter().zip(&want) {
        let p = pg(t);
        let kind = match w[9].as_str() {
            "simple_query" => "query",
            k => k,
        };
        assert_eq!(p.kind, kind);
        if kind == "ssl_request" {
            // Zeek says success F for a refused SSL request; ours is an
            // answered exchange (status Ok) whose answer is the tag `N`.
            assert_eq!(p.command_tag.as_deref(), Some(w[12].as_str()));
            continue;
        }
        assert_eq!(p.user.as_deref(), Some(w[6].as_str()));
        assert_eq!(p.database.as_deref(), Some(w[7].as_str()));
        if kind == "query" {
            assert_eq!(p.query.as_deref(), Some(w[10].trim().trim_end_matches(';')));
            assert_eq!(p.num_rows.to_string(), w[14], "{}", w[10]);
        }
        assert_eq!(t.status == TxStatus::Ok, w[13] == "T");
    }
}

// ---- Zeek: scripts.base.protocols.postgresql.psql-create-insert-select ----
#[test]
fn zeek_psql_create_insert_select() {
    compare_zeek(
        "zeek/postgresql/psql-create-insert-select-delete-drop.pcap",
        "zeek/postgresql/postgresql.psql-create-insert-select.log",
    );
    let txs = all("zeek/postgresql/psql-create-insert-select-delete-drop.pcap");
    assert_eq!(pg(&txs[0]).application_name.as_deref(), Some("psql"));
    // Zeek: backend_arg SASL,SASLContinue,SASLFinal then auth_ok.
    assert_eq!(pg(&txs[0]).auth_method, Some("sasl_final"));
    assert_eq!(pg(txs.last().unwrap()).kind, "terminate");
}

// ---- Zeek: scripts.base.protocols.postgresql.greenhouse-app ----
#[test]
fn zeek_greenhouse() {
    compare_zeek("zeek/postgresql/greenhouse-app.pcap", "zeek/postgresql/postgresql.greenhouse.log");
}

// ---- Hand-made edge cases ----

#[test]
fn startup_md5_and_ready() {
    let chunks = vec![
        (Dir::ToServer, startup(&[("user", "bob"), ("database", "shop"), ("application_name", "app")])),
        (Dir::ToClient, msg(b'R', &[0, 0, 0, 5, 1, 2, 3, 4])),
        (Dir::ToServer, msg(b'p', b"md5abc\0")),
        (Dir::ToClient, [msg(b'R', &[0, 0, 0, 0]), msg(b'S', b"a\0b\0"), msg(b'K', &[0; 8]), z()].concat()),
        (Dir::ToServer, msg(b'Q', b"select 1; select 'a;b'; \0")),
        (
            Dir::ToClient,
            [
                msg(b'T', &[0, 1]),
                msg(b'D', &[0]),
                cc("SELECT 1"),
                msg(b'T', &[0, 1]),
                msg(b'D', &[0]),
                cc("SELECT 1"),
                z(),
            ]
            .concat(),
        ),
    ];
    let (out, _) = run(&chunks);
    assert_eq!(out.len(), 3);
    let s = pg(&out[0]);
    assert_eq!(
        (s.kind, s.user.as_deref(), s.database.as_deref(), s.application_name.as_deref()),
        ("startup", Some("bob"), Some("shop"), Some("app"))
    );
    assert_eq!(s.auth_method, Some("md5"));
    assert_eq!(out[0].request.unwrap().bytes, chunks[0].1.len() as u64 + chunks[2].1.len() as u64);
    assert_eq!(pg(&out[1]).query.as_deref(), Some("select 1"));
    assert_eq!(pg(&out[2]).query.as_deref(), Some("select 'a;b'"));
    assert_eq!(pg(&out[2]).num_rows, 1);
    assert_eq!(out[2].request.unwrap().bytes, 0);
    assert!(out.iter().all(|t| t.status == TxStatus::Ok));
}

#[test]
fn multi_statement_error_skips_rest() {
    let chunks = vec![
        (Dir::ToServer, msg(b'Q', b"insert into t values (1); bad; select 2\0")),
        (Dir::ToClient, [cc("INSERT 0 1"), msg(b'E', b"SERROR\0VERROR\0C42601\0Msyntax error\0\0"), z()].concat()),
    ];
    let (out, _) = run(&chunks);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].status, TxStatus::Ok);
    assert_eq!(out[1].status, TxStatus::Error);
    assert_eq!(pg(&out[1]).query.as_deref(), Some("bad"));
    assert_eq!(pg(&out[1]).error_code.as_deref(), Some("42601"));
}

#[test]
fn extended_pipeline_named_statements() {
    let mut c = msg(b'P', b"s1\0select $1\0\0\0");
    c.extend(msg(b'B', b"p1\0s1\0\0\0\0\0"));
    c.extend(msg(b'E', b"p1\0\0\0\0\0"));
    c.extend(msg(b'B', b"\0s1\0\0\0\0\0"));
    c.extend(msg(b'E', b"\0\0\0\0\0"));
    c.extend(msg(b'S', b""));
    let s = [
        msg(b'1', b""),
        msg(b'2', b""),
        msg(b'D', &[0]),
        cc("SELECT 1"),
        msg(b'2', b""),
        msg(b'D', &[0]),
        msg(b'D', &[0]),
        cc("SELECT 2"),
        z(),
    ]
    .concat();
    // Bytes one at a time and whole must agree.
    let (whole, _) = run(&[(Dir::ToServer, c.clone()), (Dir::ToClient, s.clone())]);
    let bytes: Vec<(Dir, Vec<u8>)> =
        c.iter().map(|b| (Dir::ToServer, vec![*b])).chain(s.iter().map(|b| (Dir::ToClient, vec![*b]))).collect();
    let (split, _) = run(&bytes);
    assert_eq!(whole.len(), 2);
    for out in [&whole, &split] {
        assert_eq!(pg(&out[0]).query.as_deref(), Some("select $1"));
        assert_eq!(pg(&out[0]).statement.as_deref(), Some("s1"));
        assert_eq!(pg(&out[1]).num_rows, 2);
        assert_eq!(out[0].request.unwrap().bytes + out[1].request.unwrap().bytes, c.len() as u64);
    }
}

#[test]
fn extended_error_then_skipped_execute() {
    let mut c = msg(b'P', b"\0select bad\0\0\0");
    c.extend(msg(b'B', b"\0\0\0\0\0\0"));
    c.extend(msg(b'E', b"\0\0\0\0\0"));
    c.extend(msg(b'E', b"\0\0\0\0\0"));
    c.extend(msg(b'S', b""));
    let s = [msg(b'E', b"SERROR\0C42703\0Mcolumn does not exist\0\0"), z()].concat();
    let (out, _) = run(&[(Dir::ToServer, c), (Dir::ToClient, s)]);
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].status, TxStatus::Error);
    assert_eq!(out[1].status, TxStatus::NoResponse);
}

#[test]
fn prepare_only_batch() {
    let c = [msg(b'P', b"st\0select 1\0\0\0"), msg(b'D', b"Sst\0"), msg(b'S', b"")].concat();
    let s = [msg(b'1', b""), msg(b't', &[0, 0]), msg(b'T', &[0, 1]), z()].concat();
    let (out, _) = run(&[(Dir::ToServer, c), (Dir::ToClient, s)]);
    assert_eq!(out.len(), 1);
    assert_eq!(pg(&out[0]).kind, "parse");
    assert_eq!(pg(&out[0]).query.as_deref(), Some("select 1"));
    assert_eq!(out[0].status, TxStatus::Ok);
}

#[test]
fn ssl_request_s_gives_up_n_continues() {
    let ssl = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f].to_vec();
    let (out, p) = run(&[(Dir::ToServer, ssl.clone()), (Dir::ToClient, b"S\x16\x03\x01".to_vec())]);
    assert!(out.is_empty());
    assert_eq!(p.gave_up_reason(), Some(GiveUp::Tls));
    let (out, p) = run(&[
        (Dir::ToServer, ssl),
        (Dir::ToClient, b"N".to_vec()),
        (Dir::ToServer, startup(&[("user", "u")])),
        (Dir::ToClient, [msg(b'R', &[0, 0, 0, 0]), z()].concat()),
    ]);
    assert!(!p.gave_up());
    assert_eq!(out.len(), 2);
    assert_eq!(pg(&out[0]).kind, "ssl_request");
    assert_eq!(pg(&out[1]).kind, "startup");
    assert_eq!(pg(&out[1]).database.as_deref(), Some("u"));
}

#[test]
fn gap_resync_and_mid_stream() {
    let mut p = PgsqlParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    // Capture starts mid-session: a typed query first.
    p.data(Dir::ToServer, 1, &msg(b'Q', b"select 1\0"), &mut out);
    p.gap(Dir::ToClient, 2, 50, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].status, TxStatus::NoResponse);
    p.data(Dir::ToClient, 3, b"garbage\x00\x00", &mut out);
    p.data(Dir::ToServer, 4, &msg(b'Q', b"select 2\0"), &mut out);
    p.data(Dir::ToClient, 5, &[cc("SELECT 0"), z()].concat(), &mut out);
    assert_eq!(out.len(), 2);
    assert_eq!(pg(&out[1]).query.as_deref(), Some("select 2"));
    assert_eq!(out[1].status, TxStatus::Ok);
    assert_eq!(p.stats().resyncs, 1);
    // A response with no request.
    p.data(Dir::ToClient, 6, &[cc("DELETE 3"), z()].concat(), &mut out);
    assert_eq!(out.len(), 3);
    assert_eq!(out[2].status, TxStatus::NoRequest);
    assert_eq!(pg(&out[2]).rows, Some(3));
}

#[test]
fn timeout() {
    let mut p = PgsqlParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    p.data(Dir::ToServer, 0, &msg(b'Q', b"select pg_sleep(60)\0"), &mut out);
    p.expire(1_000_000_000, &mut out);
    assert!(out.is_empty());
    p.expire(11_000_000_000, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].status, TxStatus::NoResponse);
}

#[test]
fn redact_and_split_helpers() {
    assert_eq!(split_statements("a; 'x;y' ; $$ b;c $$; -- c;\n d"), vec!["a", "'x;y'", "$$ b;c $$", "-- c;\n d"]);
    assert_eq!(tag_rows("INSERT 0 7"), Some(7));
    assert_eq!(tag_rows("BEGIN"), None);
    let mut p = PgsqlParser::new(&ParseConfig { redact: true, ..ParseConfig::default() });
    let mut out = Vec::new();
    p.data(Dir::ToServer, 0, &msg(b'Q', b"select * from u where pw = 'secret'\0"), &mut out);
    p.finish(0, &mut out);
    assert_eq!(pg(&out[0]).query.as_deref(), Some("select * from u where pw = ?"));
}

#[test]
fn looks_like_is_specific() {
    assert!(looks_like(Dir::ToServer, &startup(&[("user", "u")])));
    assert!(looks_like(Dir::ToServer, &[0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]));
    assert!(looks_like(Dir::ToClient, &msg(b'R', &[0, 0, 0, 5, 1, 2, 3, 4])));
    for junk in [
        &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        b"HTTP/1.1 200 OK\r\n",
        b"*1\r\n$4\r\nPING\r\n",
        b"hello world\n",
        b"Random text here",
    ] {
        assert!(!looks_like(Dir::ToServer, junk), "{junk:?}");
        assert!(!looks_like(Dir::ToClient, junk), "{junk:?}");
    }
    let evs = tcp_events("packetbeat/pcaps/pgsql_extended_query.pcap", &[5432]);
    let crate::testutil::Ev::Data { dir, data, .. } = &evs[0] else { panic!() };
    assert!(looks_like(*dir, data));
}

#[test]
fn never_panics_on_damaged_streams() {
    let cfg = ParseConfig { max_header_bytes: 512, max_text_bytes: 64, ..ParseConfig::default() };
    for f in [
        "packetbeat/pcaps/pgsql_extended_query.pcap",
        "packetbeat/pcaps/pgsql_insert.pcap",
        "packetbeat/pcaps/pgsql_insert_error.pcap",
        "packetbeat/pcaps/pgsql_long_result.pcap",
        "packetbeat/pcaps/pgsql_request_response.pcap",
        "zeek/postgresql/psql-create-insert-select-delete-drop.pcap",
        "zeek/postgresql/greenhouse-app.pcap",
    ] {
        let evs = tcp_events(f, &[5432]);
        stress(&evs, || Box::new(PgsqlParser::new(&cfg)));
    }
}

#[test]
fn copy_in_and_notices() {
    let chunks = vec![
        (Dir::ToServer, msg(b'Q', b"COPY t FROM STDIN\0")),
        (Dir::ToClient, msg(b'G', &[0, 0, 1, 0, 0])),
        (Dir::ToServer, [msg(b'd', b"1\t2\n"), msg(b'c', b"")].concat()),
        (Dir::ToClient, [msg(b'N', b"SNOTICE\0Mhi\0\0"), cc("COPY 1"), z()].concat()),
    ];
    let (out, p) = run(&chunks);
    assert_eq!(out.len(), 1);
    assert_eq!(pg(&out[0]).rows, Some(1));
    assert_eq!(out[0].request.unwrap().bytes, (chunks[0].1.len() + chunks[2].1.len()) as u64);
    assert_eq!(out[0].status, TxStatus::Ok);
    assert_eq!(p.stats().malformed, 0);
}

#[test]
fn real_captures_parse_cleanly() {
    for f in [
        "packetbeat/pcaps/pgsql_extended_query.pcap",
        "packetbeat/pcaps/pgsql_insert.pcap",
        "packetbeat/pcaps/pgsql_insert_error.pcap",
        "packetbeat/pcaps/pgsql_long_result.pcap",
        "packetbeat/pcaps/pgsql_request_response.pcap",
        "zeek/postgresql/psql-create-insert-select-delete-drop.pcap",
        "zeek/postgresql/greenhouse-app.pcap",
    ] {
        let evs = tcp_events(f, &[5432]);
        let s = crate::testutil::stats_of(&evs, || Box::new(PgsqlParser::new(&ParseConfig::default())));
        assert_eq!(s, ParseStats::default(), "{f}");
    }
}

#[test]
fn unanswered_startup_and_batch_are_no_response() {
    let chunks = vec![(Dir::ToServer, startup(&[("user", "u")]))];
    let (out, _) = run(&chunks);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].status, TxStatus::NoResponse);
    let chunks = vec![
        (Dir::ToServer, [msg(b'C', b"Sx\0"), msg(b'S', b"")].concat()),
        (Dir::ToClient, z()),
        (Dir::ToServer, [msg(b'P', b"\0select 1\0\0\0"), msg(b'S', b""), msg(b'X', b"")].concat()),
    ];
    let (out, _) = run(&chunks);
    let got: Vec<_> = out.iter().map(|t| (pg(t).kind, t.status)).collect();
    assert_eq!(got, [("close", TxStatus::Ok), ("parse", TxStatus::NoResponse), ("terminate", TxStatus::Ok)]);
}

/// DataRows skipped by their lengths (issue 36) agree with the
/// message-at-a-time path: 500 rows fed whole, byte by byte and in 7-byte
/// pieces give the same rows, response bytes and transactions.
#[test]
fn data_rows_counted_by_length_agree_with_splits() {
    let mut srv = msg(b'T', b"\x00\x01id\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x17\x00\x04\xff\xff\xff\xff\x00\x00");
    for i in 0..500u32 {
        let v = i.to_string();
        let mut body = vec![0, 1];
        body.extend((v.len() as u32).to_be_bytes());
        body.extend(v.as_bytes());
        srv.extend(msg(b'D', &body));
    }
    srv.extend(cc("SELECT 500"));
    srv.extend(z());
    let chunks = vec![
        (Dir::ToServer, msg(b'Q', b"select id from t\0")),
        (Dir::ToClient, srv),
        (Dir::ToServer, msg(b'Q', b"select 1\0")),
        (Dir::ToClient, [msg(b'T', b"\x00\x00"), msg(b'D', b"\x00\x00"), cc("SELECT 1"), z()].concat()),
    ];
    let strip = |v: &[Transaction]| {
        v.iter()
            .map(|t| (t.status, t.request.map(|s| s.bytes), t.response.map(|s| s.bytes), t.detail.clone()))
            .collect::<Vec<_>>()
    };
    let (whole, _) = run(&chunks);
    assert_eq!(whole.len(), 2);
    assert_eq!(pg(&whole[0]).num_rows, 500);
    assert_eq!(pg(&whole[1]).num_rows, 1);
    for piece in [1, 7] {
        let split: Vec<(Dir, Vec<u8>)> =
            chunks.iter().flat_map(|(d, c)| c.chunks(piece).map(move |b| (*d, b.to_vec()))).collect();
        assert_eq!(strip(&whole), strip(&run(&split).0), "{piece}-byte pieces");
    }
}

/// A DataRow cut by a segment's end is skipped by its length (issue 36):
/// none of its body is copied while the rest arrives, and the rows and
/// bytes are those of the result fed whole, for a cut at every offset of
/// the first rows.
#[test]
fn data_rows_cut_by_segments_keep_nothing() {
    let mut srv = msg(b'T', b"\x00\x01id\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x19\xff\xff\xff\xff\xff\xff\x00\x00");
    for i in 0..20u8 {
        let mut body = vec![0, 1, 0, 0, 1, 0];
        body.extend(std::iter::repeat_n(b'a' + i, 256));
        srv.extend(msg(b'D', &body));
    }
    srv.extend(cc("SELECT 20"));
    srv.extend(z());
    let q = msg(b'Q', b"select v from t\0");
    let mut p = PgsqlParser::new(&ParseConfig::default());
    let mut want = Vec::new();
    p.data(Dir::ToServer, 0, &q, &mut want);
    p.data(Dir::ToClient, 1, &srv, &mut want);
    assert_eq!(pg(&want[0]).num_rows, 20);
    // ReadyForQuery is an acknowledgement, not counted as the response.
    assert_eq!(want[0].response.map(|s| s.bytes), Some((srv.len() - z().len()) as u64));
    for cut in 0..srv.len().min(4 * 267) {
        let mut p = PgsqlParser::new(&ParseConfig::default());
        let mut out = Vec::new();
        p.data(Dir::ToServer, 0, &q, &mut out);
        p.data(Dir::ToClient, 1, &srv[..cut], &mut out);
        let f = &p.fr[1];
        assert!(!(f.in_msg && f.ty == b'D') || f.buf.is_empty(), "cut at {cut}: {} bytes of a row kept", f.buf.len());
        p.data(Dir::ToClient, 1, &srv[cut..], &mut out);
        let got: Vec<_> = out.iter().map(|t| (t.status, t.response.map(|s| s.bytes), pg(t).num_rows)).collect();
        let exp: Vec<_> = want.iter().map(|t| (t.status, t.response.map(|s| s.bytes), pg(t).num_rows)).collect();
        assert_eq!(got, exp, "cut at {cut}");
    }
}

/// A connection's statements of one shape share their fingerprint, its
/// repeated CommandComplete tags share their text, and a simple query of
/// one statement keeps no list of the others; the startup's parameters are
/// shared with every transaction.
#[test]
fn fingerprints_tags_and_startup_shared_per_connection() {
    let mut chunks = vec![(Dir::ToServer, startup(&[("user", "app"), ("database", "shop")]))];
    chunks.push((Dir::ToClient, [msg(b'R', &0u32.to_be_bytes()), z()].concat()));
    for i in 0..3 {
        chunks.push((Dir::ToServer, msg(b'Q', format!("SELECT * FROM t WHERE id = {i}\0").as_bytes())));
        chunks.push((Dir::ToClient, [cc("SELECT 1"), z()].concat()));
    }
    let (out, _) = run(&chunks);
    let q: Vec<&PgsqlTx> = out.iter().map(pg).filter(|t| t.kind == "query").collect();
    assert_eq!(q.len(), 3);
    assert_eq!(q[2].query.as_deref(), Some("SELECT * FROM t WHERE id = 2"));
    assert_eq!(q[0].fingerprint.as_deref(), Some("select * from t where id = ?"));
    let (a, b) = (q[0], q[2]);
    assert!(Arc::ptr_eq(a.fingerprint.as_ref().unwrap(), b.fingerprint.as_ref().unwrap()));
    assert!(Arc::ptr_eq(a.command_tag.as_ref().unwrap(), b.command_tag.as_ref().unwrap()));
    assert!(Arc::ptr_eq(a.user.as_ref().unwrap(), b.user.as_ref().unwrap()));
    assert_eq!((b.command_tag.as_deref(), b.rows, b.database.as_deref()), (Some("SELECT 1"), Some(1), Some("shop")));
}
