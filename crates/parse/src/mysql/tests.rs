//! MySQL parser tests: hand-made packets for edge cases, the Packetbeat
//! system-test pcaps (facts from shared/testdata/packetbeat/manifest.json),
//! Zeek's mysql.log baseline, and damaged input.

use super::*;
use crate::testutil::{parse_pcap, stress, tcp_events};
use crate::{truncate, Protocol, ProtocolParser};

fn all(rel: &str, port: u16) -> Vec<Transaction> {
    parse_pcap(rel, &[port], Protocol::Mysql, &ParseConfig::default()).into_iter().flatten().collect()
}

fn my(t: &Transaction) -> &MysqlTx {
    match &t.detail {
        Detail::Mysql(m) => m,
        d => panic!("not mysql: {d:?}"),
    }
}

/// Packetbeat reports SQL commands only (no login, ping, quit).
fn queries(txs: &[Transaction]) -> Vec<&Transaction> {
    txs.iter().filter(|t| matches!(my(t).command, "query" | "stmt_prepare" | "stmt_execute")).collect()
}

fn pkt(seq: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = (payload.len() as u32).to_le_bytes()[..3].to_vec();
    v.push(seq);
    v.extend_from_slice(payload);
    v
}

fn run(chunks: &[(Dir, Vec<u8>)], cfg: &ParseConfig) -> (Vec<Transaction>, MysqlParser) {
    let mut p = MysqlParser::new(cfg);
    let mut out = Vec::new();
    for (i, (d, c)) in chunks.iter().enumerate() {
        p.data(*d, i as i64 * 1000, c, &mut out);
    }
    p.finish(0, &mut out);
    (out, p)
}

// ---- Packetbeat: test_0001_mysql_spaces ----
#[test]
fn pb_mysql_with_whitespaces() {
    let txs = all("packetbeat/pcaps/mysql_with_whitespaces.pcap", 3306);
    // Ours also has the login and the five COM_PINGs Packetbeat does not report.
    assert_eq!(txs.len(), 13);
    assert_eq!(my(&txs[0]).command, "login");
    assert_eq!(my(&txs[0]).user(), Some("root"));
    assert_eq!(my(&txs[0]).server_version(), Some("5.6.19"));
    let q = queries(&txs);
    assert_eq!(q.len(), 7);
    assert_eq!(my(q[0]).method(), "SET");
    assert_eq!(q[0].status, TxStatus::Ok);
    assert_eq!(my(q[2]).method(), "DROP");
    assert_eq!(q[2].status, TxStatus::Ok);
    assert_eq!(my(q[3]).method(), "CREATE");
    assert_eq!(q[3].status, TxStatus::Ok);
    assert_eq!(my(q[5]).method(), "SELECT");
    assert_eq!(q[5].status, TxStatus::Ok);
    // Packetbeat's `path` "test.test" is database.table; we keep the
    // database (from the handshake), not the table names.
    assert_eq!(my(q[5]).database(), Some("test"));
    assert_eq!(q[5].response.unwrap().bytes, 118);
    assert_eq!(my(q[5]).num_rows, Some(1));
    assert_eq!(my(q[5]).num_fields, Some(2));
    assert!(q.iter().all(|t| t.request.is_some() && t.response.is_some()));
    assert_eq!(my(q[3]).fingerprint.as_deref(), Some("create table test (a varchar(?), b varchar(?))"));
}

// ---- Packetbeat: test_0017_mysql_long_result / test_0020 send options ----
#[test]
fn pb_mysql_long_result() {
    let txs = all("packetbeat/pcaps/mysql_long_result.pcap", 3306);
    assert_eq!(txs.len(), 1);
    let m = my(&txs[0]);
    assert_eq!(m.num_rows, Some(15));
    assert_eq!(m.num_fields, Some(3));
    assert_eq!(txs[0].status, TxStatus::Ok);
    // Packetbeat's `response` text (rows as CSV, capped by max_rows and
    // max_row_length) and `request` options have no counterpart: rows are
    // counted, never stored.
}

#[test]
fn pb_mysql_long_over_100k() {
    let txs = all("packetbeat/pcaps/mysql_long.pcap", 3306);
    assert_eq!(txs.len(), 1);
    assert_eq!(my(&txs[0]).num_rows, Some(400));
    assert_eq!(txs[0].status, TxStatus::Ok);
    assert!(txs[0].response.unwrap().bytes > 100_000);
}

// ---- Packetbeat: test_0028_mysql_error ----
#[test]
fn pb_mysql_error() {
    let txs = all("packetbeat/pcaps/mysql_err_database_not_selected.pcap", 3306);
    assert_eq!(txs.len(), 1);
    let m = my(&txs[0]);
    assert_eq!(m.method(), "SELECT");
    assert_eq!(txs[0].status, TxStatus::Error);
    assert_eq!(m.error_code, Some(1046));
    // Packetbeat joins them as "3D000: No database selected".
    assert_eq!(m.sql_state.as_deref(), Some("3D000"));
    assert_eq!(m.error_message.as_deref(), Some("No database selected"));
}

// ---- Packetbeat: test_0064_mysql_prepare_statement (port 3307) ----
#[test]
fn pb_mysql_prepare_statement() {
    let txs = all("packetbeat/pcaps/mysql_prepare_statement.pcap", 3307);
    assert_eq!(txs.len(), 2);
    assert_eq!(my(&txs[0]).command, "stmt_prepare");
    let e = my(&txs[1]);
    assert_eq!(e.command, "stmt_execute");
    assert_eq!(e.method(), "SELECT");
    assert_eq!(txs[1].status, TxStatus::Ok);
    assert_eq!(e.params.iter().next(), Some("A1224638"));
    assert_eq!(e.num_rows, Some(1));
    assert_eq!(e.statement_id, my(&txs[0]).statement_id);
    assert!(e.query.as_deref().unwrap().starts_with("select distinct count(distinct purchasede0_.id)"));
    assert!(txs.iter().all(|t| t.request.is_some() && t.response.is_some()));
}

// ---- Packetbeat: test_0064_mysql_windows_lineending ----
#[test]
fn pb_mysql_windows_lineending() {
    let txs = all("packetbeat/pcaps/mysql_windows_lineending.pcap", 3306);
    let q = queries(&txs);
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].status, TxStatus::Ok);
    assert_eq!(my(q[0]).method(), "SELECT");
    // The COM_QUIT after it is ours only.
    assert_eq!(my(txs.last().unwrap()).command, "quit");
}

// ---- Packetbeat: test_0067_mysql_connection_phase ----
#[test]
fn pb_mysql_connection_phase() {
    let txs = all("packetbeat/pcaps/mysql_connection.pcap", 3306);
    // Packetbeat reports only `SELECT DATABASE()` from this capture; we report
    // every command: login (with an auth switch), 4 queries, init_db, quit.
    let cmds: Vec<_> = txs.iter().map(|t| my(t).command).collect();
    assert_eq!(cmds, ["login", "query", "query", "query", "init_db", "query", "query", "quit"]);
    assert!(txs.iter().any(|t| my(t).query.as_deref() == Some("SELECT DATABASE()")));
    assert_eq!(txs[0].status, TxStatus::Ok);
    // The database selected by COM_INIT_DB is current afterwards.
    assert_eq!(my(&txs[5]).database(), Some("test"));
    // The records share one session until it changes; the change makes a
    // new one (the records before it still hold the old).
    let session = |i: usize| my(&txs[i]).session.clone().expect("the login's user is known");
    assert!((2..5).all(|i| std::sync::Arc::ptr_eq(&session(1), &session(i))));
    assert!(!std::sync::Arc::ptr_eq(&session(4), &session(5)));
    assert_eq!(session(5).user, session(4).user);
}

// ---- Zeek: scripts.base.protocols.mysql.wireshark mysql.log ----
#[test]
fn zeek_mysql_log() {
    let txs = all("zeek/mysql/mysql.pcap", 3306);
    let log = std::fs::read_to_string(crate::testutil::path("zeek/mysql/mysql.log")).unwrap();
    let want: Vec<Vec<&str>> = log.lines().filter(|l| !l.starts_with('#')).map(|l| l.split('\t').collect()).collect();
    assert_eq!(txs.len(), want.len());
    for (t, w) in txs.iter().zip(&want) {
        let m = my(t);
        let (cmd, arg, success, rows) = (w[6], w[7], w[8], w[9]);
        assert_eq!(m.command, cmd);
        let ours = if cmd == "login" { m.user() } else { m.query.as_deref() };
        assert_eq!(ours.unwrap_or(""), if arg == "(empty)" { "" } else { arg }, "{cmd}");
        if success == "-" {
            assert!(t.response.is_none());
        } else {
            assert_eq!(t.status == TxStatus::Ok, success == "T", "{arg}");
            // Zeek's rows are the OK packet's affected rows (0 for result sets).
            assert_eq!(m.affected_rows.unwrap_or(0).to_string(), rows, "{arg}");
        }
    }
}

#[test]
fn zeek_mysql_encrypted_gives_up() {
    let evs = tcp_events("zeek/mysql/encrypted.pcap", &[3306]);
    let mut p = MysqlParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    for e in &evs {
        if let crate::testutil::Ev::Data { dir, ts_ns, data, .. } = e {
            if p.gave_up() {
                break;
            }
            p.data(*dir, *ts_ns, data, &mut out);
        }
    }
    assert_eq!(p.gave_up_reason(), Some(GiveUp::Tls));
    // Zeek's mysql.log is empty for this connection too.
    assert!(out.is_empty());
}

// ---- Hand-made edge cases ----

fn greeting(caps: u32) -> Vec<u8> {
    let mut g = vec![0x0a];
    g.extend_from_slice(b"8.0.36\0");
    g.extend_from_slice(&7u32.to_le_bytes());
    g.extend_from_slice(b"abcdefgh\0");
    g.extend_from_slice(&(caps as u16).to_le_bytes());
    g.push(0x21);
    g.extend_from_slice(&2u16.to_le_bytes());
    g.extend_from_slice(&((caps >> 16) as u16).to_le_bytes());
    g.push(21);
    g.extend_from_slice(&[0; 10]);
    g.extend_from_slice(b"ijklmnopqrst\0mysql_native_password\0");
    pkt(0, &g)
}

fn hs_response(caps: u32, user: &str, db: Option<&str>) -> Vec<u8> {
    let mut r = caps.to_le_bytes().to_vec();
    r.extend_from_slice(&(1u32 << 24).to_le_bytes());
    r.push(0x21);
    r.extend_from_slice(&[0; 23]);
    r.extend_from_slice(user.as_bytes());
    r.push(0);
    r.push(20);
    r.extend_from_slice(&[7; 20]);
    if let Some(db) = db {
        r.extend_from_slice(db.as_bytes());
        r.push(0);
    }
    pkt(1, &r)
}

const BASE_CAPS: u32 = CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION | CLIENT_CONNECT_WITH_DB;

fn ok(seq: u8, affected: u8, id: u8) -> Vec<u8> {
    pkt(seq, &[0x00, affected, id, 2, 0, 0, 0])
}

fn coldef(seq: u8) -> Vec<u8> {
    pkt(seq, b"\x03def\x04test\x01t\x01t\x01a\x01a\x0c\x21\x00\x0a\x00\x00\x00\xfd\x00\x00\x00\x00\x00")
}

#[test]
fn handshake_and_deprecate_eof_result_set() {
    let caps = BASE_CAPS | CLIENT_DEPRECATE_EOF;
    let mut srv = coldef(2);
    srv.splice(0..0, pkt(1, &[1]));
    srv.extend(pkt(3, b"\x01x"));
    srv.extend(pkt(4, b"\x00"));
    srv.extend(pkt(5, b"\xfb"));
    srv.extend(pkt(6, &[0xfe, 0, 0, 2, 0, 0, 0]));
    let chunks = vec![
        (Dir::ToClient, greeting(caps)),
        (Dir::ToServer, hs_response(caps, "app", Some("shop"))),
        (Dir::ToClient, ok(2, 0, 0)),
        (Dir::ToServer, pkt(0, b"\x03SELECT a FROM t WHERE id = 5")),
        (Dir::ToClient, srv),
    ];
    let (out, _) = run(&chunks, &ParseConfig::default());
    assert_eq!(out.len(), 2);
    let m = my(&out[1]);
    assert_eq!(m.num_rows, Some(3));
    assert_eq!(m.num_fields, Some(1));
    assert_eq!(m.user(), Some("app"));
    assert_eq!(m.database(), Some("shop"));
    assert_eq!(m.server_version(), Some("8.0.36"));
    assert_eq!(m.fingerprint.as_deref(), Some("select a from t where id = ?"));
}

#[test]
fn byte_by_byte_equals_whole() {
    let caps = BASE_CAPS;
    let mut srv = pkt(1, &[1]);
    srv.extend(coldef(2));
    srv.extend(pkt(3, &[0xfe, 0, 0, 2, 0]));
    srv.extend(pkt(4, b"\x01x"));
    srv.extend(pkt(5, &[0xfe, 0, 0, 2, 0]));
    let chunks = vec![
        (Dir::ToClient, greeting(caps)),
        (Dir::ToServer, hs_response(caps, "u", None)),
        (Dir::ToClient, ok(2, 0, 0)),
        (Dir::ToServer, pkt(0, b"\x03select 1")),
        (Dir::ToClient, srv),
        (Dir::ToServer, pkt(0, b"\x03insert into t values (1)")),
        (Dir::ToClient, ok(1, 1, 42)),
    ];
    let (whole, _) = run(&chunks, &ParseConfig::default());
    let bytes: Vec<(Dir, Vec<u8>)> = chunks.iter().flat_map(|(d, c)| c.iter().map(move |b| (*d, vec![*b]))).collect();
    let (split, _) = run(&bytes, &ParseConfig::default());
    assert_eq!(whole.len(), 3);
    let strip = |v: &[Transaction]| {
        v.iter()
            .map(|t| (t.status, t.request.map(|s| s.bytes), t.response.map(|s| s.bytes), t.detail.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&whole), strip(&split));
    assert_eq!(my(&whole[2]).affected_rows, Some(1));
    assert_eq!(my(&whole[2]).insert_id, Some(42));
    assert_eq!(my(&whole[1]).num_rows, Some(1));
}

#[test]
fn err_packet_and_use_tracking() {
    let chunks = vec![
        (Dir::ToServer, pkt(0, b"\x03USE `inventory`")),
        (Dir::ToClient, ok(1, 0, 0)),
        (Dir::ToServer, pkt(0, b"\x03select * from nope")),
        (Dir::ToClient, pkt(1, b"\xff\x7a\x04#42S02Table 'inventory.nope' doesn't exist")),
        (Dir::ToServer, pkt(0, b"\x0e")),
        (Dir::ToClient, ok(1, 0, 0)),
    ];
    let (out, _) = run(&chunks, &ParseConfig::default());
    assert_eq!(out.len(), 3);
    assert_eq!(out[1].status, TxStatus::Error);
    let m = my(&out[1]);
    assert_eq!(m.database(), Some("inventory"));
    assert_eq!(m.error_code, Some(1146));
    assert_eq!(m.sql_state.as_deref(), Some("42S02"));
    assert_eq!(my(&out[2]).command, "ping");
}

#[test]
fn ssl_request_gives_up() {
    let caps = BASE_CAPS | CLIENT_SSL;
    let mut r = caps.to_le_bytes().to_vec();
    r.extend_from_slice(&[0; 28]);
    let chunks =
        vec![(Dir::ToClient, greeting(caps)), (Dir::ToServer, pkt(1, &r)), (Dir::ToClient, vec![0x16, 3, 1, 0, 5])];
    let (out, p) = run(&chunks, &ParseConfig::default());
    assert!(out.is_empty());
    assert_eq!(p.gave_up_reason(), Some(GiveUp::Tls));
    assert_eq!(p.stats().unparsed_bytes, 5);
}

/// Inside TLS (the TLS library's plaintext): the stream opens with the
/// handshake response at sequence id 2; it is the login, with its user and
/// database, and the commands after it carry them, as in the clear.
#[test]
fn in_tls_the_login_is_the_second_packet() {
    let caps = BASE_CAPS | CLIENT_SSL | CLIENT_DEPRECATE_EOF;
    let mut login = hs_response(caps, "app", Some("shop"));
    login[3] = 2;
    assert!(looks_like_login_in_tls(&login));
    // MariaDB's extended capabilities in the filler's last 4 bytes.
    let mut mariadb = login.clone();
    mariadb[4 + 28] = 0x1d;
    assert!(looks_like_login_in_tls(&mariadb));
    // Neither the clear handshake response nor a command passes for it.
    assert!(!looks_like_login_in_tls(&hs_response(caps, "app", Some("shop"))));
    assert!(!looks_like_login_in_tls(&pkt(0, b"\x03select 1 from dual where 1 = 1 and 2 = 2")));
    let mut srv = pkt(1, &[1]);
    srv.extend(coldef(2));
    srv.extend(pkt(3, b"\x01x"));
    srv.extend(pkt(4, &[0xfe, 0, 0, 2, 0, 0, 0]));
    let chunks = [
        (Dir::ToServer, login),
        (Dir::ToClient, ok(3, 0, 0)),
        (Dir::ToServer, pkt(0, b"\x03SELECT a FROM t")),
        (Dir::ToClient, srv),
    ];
    let mut p = MysqlParser::in_tls(&ParseConfig::default());
    let mut out = Vec::new();
    for (i, (d, c)) in chunks.iter().enumerate() {
        p.data(*d, i as i64 * 1000, c, &mut out);
    }
    p.finish(0, &mut out);
    assert_eq!(out.len(), 2, "{out:#?}");
    assert_eq!(my(&out[0]).command, "login");
    assert_eq!(out[0].status, TxStatus::Ok);
    assert_eq!(out[0].response.map(|s| s.bytes), Some(11));
    let m = my(&out[1]);
    assert_eq!((m.user(), m.database()), (Some("app"), Some("shop")));
    assert_eq!((m.num_rows, m.num_fields), (Some(1), Some(1)));
    assert_eq!(p.gave_up_reason(), None);
}

#[test]
fn compress_gives_up_after_login() {
    let caps = BASE_CAPS | CLIENT_COMPRESS;
    let chunks = vec![
        (Dir::ToClient, greeting(caps)),
        (Dir::ToServer, hs_response(caps, "u", None)),
        (Dir::ToClient, ok(2, 0, 0)),
        (Dir::ToServer, vec![1, 2, 3, 4, 5, 6, 7, 8]),
    ];
    let (out, p) = run(&chunks, &ParseConfig::default());
    assert_eq!(out.len(), 1);
    assert_eq!(p.gave_up_reason(), Some(GiveUp::Compressed));
}

#[test]
fn redact_and_truncate() {
    let cfg = ParseConfig { redact: true, max_text_bytes: 20, ..ParseConfig::default() };
    let chunks = vec![
        (Dir::ToServer, pkt(0, b"\x03select * from users where password = 'hunter2'")),
        (Dir::ToClient, ok(1, 0, 0)),
    ];
    let (out, _) = run(&chunks, &cfg);
    let m = my(&out[0]);
    assert_eq!(m.query.as_deref(), Some("select * from users "));
    assert!(m.query_truncated);
    assert_eq!(m.fingerprint.as_deref(), Some("select * from users where password = ?"));
}

#[test]
fn stmt_close_has_no_response_and_quit() {
    let chunks = vec![(Dir::ToServer, pkt(0, b"\x19\x01\x00\x00\x00")), (Dir::ToServer, pkt(0, b"\x01"))];
    let (out, _) = run(&chunks, &ParseConfig::default());
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|t| t.status == TxStatus::Ok && t.response.is_none()));
}

#[test]
fn large_packet_continuation() {
    // A 16 MiB - 1 payload row followed by its continuation counts as one row.
    let mut srv = pkt(1, &[1]);
    srv.extend(coldef(2));
    srv.extend(pkt(3, &[0xfe, 0, 0, 2, 0]));
    let mut big = vec![0xfc, 0xff, 0xff];
    big.resize(MAX_PAYLOAD, b'x');
    srv.extend(pkt(4, &big));
    srv.extend(pkt(5, &[b'y'; 10]));
    srv.extend(pkt(6, &[0xfe, 0, 0, 2, 0]));
    let mut chunks = vec![(Dir::ToServer, pkt(0, b"\x03select blob from t"))];
    for c in srv.chunks(1460) {
        chunks.push((Dir::ToClient, c.to_vec()));
    }
    let (out, p) = run(&chunks, &ParseConfig::default());
    assert_eq!(out.len(), 1);
    assert_eq!(my(&out[0]).num_rows, Some(1));
    assert_eq!(out[0].response.unwrap().bytes, srv.len() as u64);
    assert_eq!(p.stats().malformed, 0);
}

#[test]
fn gap_resync_on_next_command() {
    let mut p = MysqlParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    p.data(Dir::ToServer, 1, &pkt(0, b"\x03select 1"), &mut out);
    p.gap(Dir::ToClient, 2, 100, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].status, TxStatus::NoResponse);
    // Tail of the lost response: dropped until a new command is answered.
    p.data(Dir::ToClient, 3, b"\x05\x00\x00\x07\xfe\x00\x00\x02\x00", &mut out);
    p.data(Dir::ToServer, 4, &pkt(0, b"\x03select 2"), &mut out);
    p.data(Dir::ToClient, 5, &ok(1, 0, 0), &mut out);
    assert_eq!(out.len(), 2);
    assert_eq!(out[1].status, TxStatus::Ok);
    assert_eq!(p.stats().resyncs, 1);
    assert_eq!(p.stats().unparsed_bytes, 9);
    // A gap in the request direction: resync on the next seq-0 command.
    p.gap(Dir::ToServer, 6, 10, &mut out);
    p.data(Dir::ToServer, 7, b"garbage bytes", &mut out);
    p.data(Dir::ToServer, 8, &pkt(0, b"\x03select 3"), &mut out);
    p.data(Dir::ToClient, 9, &ok(1, 0, 0), &mut out);
    assert_eq!(out.len(), 3);
    assert_eq!(my(&out[2]).query.as_deref(), Some("select 3"));
}

#[test]
fn timeout_and_no_request() {
    let mut p = MysqlParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    p.data(Dir::ToClient, 0, &ok(1, 3, 0), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].status, TxStatus::NoRequest);
    p.data(Dir::ToServer, 1, &pkt(0, b"\x03select sleep(100)"), &mut out);
    p.expire(5_000_000_000, &mut out);
    assert_eq!(out.len(), 1);
    p.expire(20_000_000_000, &mut out);
    assert_eq!(out.len(), 2);
    assert_eq!(out[1].status, TxStatus::NoResponse);
}

#[test]
fn looks_like_is_specific() {
    assert!(looks_like(Dir::ToClient, &greeting(BASE_CAPS)));
    assert!(looks_like(Dir::ToServer, &pkt(0, b"\x03select 1")));
    assert!(looks_like(Dir::ToServer, &hs_response(BASE_CAPS, "u", None)));
    for junk in [
        &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        b"HTTP/1.1 200 OK\r\n",
        b"*1\r\n$4\r\nPING\r\n",
        b"hello world\n",
        b"+OK\r\n",
    ] {
        assert!(!looks_like(Dir::ToServer, junk), "{junk:?}");
        assert!(!looks_like(Dir::ToClient, junk), "{junk:?}");
    }
    for f in ["mysql_connection.pcap", "mysql_with_whitespaces.pcap"] {
        let evs = tcp_events(&format!("packetbeat/pcaps/{f}"), &[3306]);
        let crate::testutil::Ev::Data { dir, data, .. } = &evs[0] else { panic!() };
        assert!(looks_like(*dir, data), "{f}");
    }
}

#[test]
fn never_panics_on_damaged_streams() {
    let cfg = ParseConfig { max_header_bytes: 512, max_text_bytes: 64, ..ParseConfig::default() };
    for (f, port) in [
        ("packetbeat/pcaps/mysql_connection.pcap", 3306),
        ("packetbeat/pcaps/mysql_with_whitespaces.pcap", 3306),
        ("packetbeat/pcaps/mysql_prepare_statement.pcap", 3307),
        ("packetbeat/pcaps/mysql_long_result.pcap", 3306),
        ("packetbeat/pcaps/mysql_long.pcap", 3306),
        ("zeek/mysql/mysql.pcap", 3306),
        ("zeek/mysql/encrypted.pcap", 3306),
    ] {
        let evs = tcp_events(f, &[port]);
        stress(&evs, || Box::new(MysqlParser::new(&cfg)));
    }
}

#[test]
fn local_infile_multi_results_and_errors_mid_rows() {
    let mut srv_rows = pkt(1, &[1]);
    srv_rows.extend(coldef(2));
    srv_rows.extend(pkt(3, &[0xfe, 0, 0, 0x0a, 0]));
    srv_rows.extend(pkt(4, b"\x01a"));
    srv_rows.extend(pkt(5, b"\xff\x25\x05#HY000Query execution was interrupted"));
    let chunks = vec![
        // LOAD DATA LOCAL INFILE: the server asks for the file, the client
        // sends it and an empty packet, the server answers OK.
        (Dir::ToServer, pkt(0, b"\x03LOAD DATA LOCAL INFILE 'x.csv' INTO TABLE t")),
        (Dir::ToClient, pkt(1, b"\xfbx.csv")),
        (Dir::ToServer, [pkt(2, b"1,2\n3,4\n"), pkt(3, b"")].concat()),
        (Dir::ToClient, pkt(4, &[0, 2, 0, 2, 0, 0, 0])),
        // Two statements: OK with SERVER_MORE_RESULTS_EXISTS, then OK.
        (Dir::ToServer, pkt(0, b"\x03insert into t values (1); insert into t values (2)")),
        (Dir::ToClient, [pkt(1, &[0, 1, 5, 0x0a, 0, 0, 0]), pkt(2, &[0, 1, 6, 2, 0, 0, 0])].concat()),
        // A result set cut short by an error.
        (Dir::ToServer, pkt(0, b"\x03select a from t")),
        (Dir::ToClient, srv_rows),
        (Dir::ToServer, pkt(0, b"\x04t\0")),
        (Dir::ToClient, [coldef(1), coldef(2), pkt(3, &[0xfe, 0, 0, 2, 0])].concat()),
    ];
    let (out, p) = run(&chunks, &ParseConfig::default());
    assert_eq!(out.len(), 4);
    assert_eq!(out[0].status, TxStatus::Ok);
    assert_eq!(my(&out[0]).affected_rows, Some(2));
    assert_eq!(out[0].request.unwrap().bytes, chunks[0].1.len() as u64 + chunks[2].1.len() as u64);
    assert_eq!(my(&out[1]).affected_rows, Some(2));
    assert_eq!(my(&out[1]).insert_id, Some(6));
    assert_eq!(out[2].status, TxStatus::Error);
    assert_eq!(my(&out[2]).num_rows, Some(1));
    assert_eq!(my(&out[2]).error_code, Some(1317));
    assert_eq!(my(&out[3]).command, "field_list");
    assert_eq!(my(&out[3]).num_fields, Some(2));
    assert_eq!(p.stats().malformed, 0);
}

/// A response's first byte in 0x01..=0xfa is a result set's column count
/// (told first), except for the two commands whose answers are not result
/// sets: COM_STATISTICS's text ("Uptime: ..."), COM_FIELD_LIST's column
/// definitions. Each case next to a result set of 0xfa columns (the
/// largest one-byte count) and one of 1 column.
#[test]
fn a_first_byte_that_counts_columns_only_for_result_sets() {
    let mut wide = pkt(1, &[0xfa]);
    for i in 0..0xfa_u8 {
        wide.extend(coldef(2 + i));
    }
    wide.extend(pkt(0xfc, &[0xfe, 0, 0, 2, 0]));
    wide.extend(pkt(0xfd, b"\x01x"));
    wide.extend(pkt(0xfe, &[0xfe, 0, 0, 2, 0]));
    let chunks = vec![
        (Dir::ToServer, pkt(0, &[COM_STATISTICS])),
        (Dir::ToClient, pkt(1, b"Uptime: 5  Threads: 1  Questions: 2")),
        (Dir::ToServer, pkt(0, b"\x03select * from w")),
        (Dir::ToClient, wide),
        (Dir::ToServer, pkt(0, b"\x04t\0")),
        (Dir::ToClient, [coldef(1), coldef(2), pkt(3, &[0xfe, 0, 0, 2, 0])].concat()),
        (Dir::ToServer, pkt(0, b"\x03select a from t")),
        (Dir::ToClient, [pkt(1, &[1]), coldef(2), pkt(3, &[0xfe, 0, 0, 2, 0]), pkt(4, b"\x01a")].concat()),
        (Dir::ToClient, pkt(5, &[0xfe, 0, 0, 2, 0])),
    ];
    let (out, p) = run(&chunks, &ParseConfig::default());
    assert_eq!(out.len(), 4);
    assert_eq!(my(&out[0]).command, "statistics");
    assert_eq!((out[0].status, my(&out[0]).num_fields, my(&out[0]).num_rows), (TxStatus::Ok, None, None));
    assert_eq!((out[1].status, my(&out[1]).num_fields, my(&out[1]).num_rows), (TxStatus::Ok, Some(0xfa), Some(1)));
    assert_eq!(my(&out[2]).command, "field_list");
    assert_eq!((out[2].status, my(&out[2]).num_fields, my(&out[2]).num_rows), (TxStatus::Ok, Some(2), None));
    assert_eq!((out[3].status, my(&out[3]).num_fields, my(&out[3]).num_rows), (TxStatus::Ok, Some(1), Some(1)));
    assert_eq!(p.stats().malformed, 0);
}

#[test]
fn real_captures_parse_cleanly() {
    for (f, port) in [
        ("packetbeat/pcaps/mysql_connection.pcap", 3306),
        ("packetbeat/pcaps/mysql_err_database_not_selected.pcap", 3306),
        ("packetbeat/pcaps/mysql_with_whitespaces.pcap", 3306),
        ("packetbeat/pcaps/mysql_prepare_statement.pcap", 3307),
        ("packetbeat/pcaps/mysql_windows_lineending.pcap", 3306),
        ("packetbeat/pcaps/mysql_long_result.pcap", 3306),
        ("packetbeat/pcaps/mysql_long.pcap", 3306),
        ("zeek/mysql/mysql.pcap", 3306),
    ] {
        let evs = tcp_events(f, &[port]);
        let s = crate::testutil::stats_of(&evs, || Box::new(MysqlParser::new(&ParseConfig::default())));
        assert_eq!(s, ParseStats::default(), "{f}");
    }
}

/// Rough throughput of the three parsers over real captures (run with
/// `cargo test --release -p wirelog-parse throughput -- --ignored --nocapture`).
#[test]
#[ignore]
fn throughput() {
    let cases: [(&str, u16, Protocol); 4] = [
        ("packetbeat/pcaps/mysql_long.pcap", 3306, Protocol::Mysql),
        ("zeek/mysql/mysql.pcap", 3306, Protocol::Mysql),
        ("zeek/postgresql/greenhouse-app.pcap", 5432, Protocol::Pgsql),
        ("zeek/redis/django-cloud.pcapng", 10625, Protocol::Redis),
    ];
    for (f, port, proto) in cases {
        let evs = tcp_events(f, &[port]);
        let bytes: usize =
            evs.iter().map(|e| if let crate::testutil::Ev::Data { data, .. } = e { data.len() } else { 0 }).sum();
        let cfg = ParseConfig::default();
        let rounds = (50_000_000 / bytes.max(1)).max(1);
        let t = std::time::Instant::now();
        let mut n = 0;
        for _ in 0..rounds {
            n += crate::testutil::run_parser(&evs, || Box::new(proto.stream_parser(&cfg))).iter().map(Vec::len).sum::<usize>();
        }
        let s = t.elapsed().as_secs_f64();
        eprintln!("{f}: {:.0} MB/s, {:.0} k transactions/s", (bytes * rounds) as f64 / s / 1e6, n as f64 / s / 1e3);
    }
}

/// Rows counted from their packet headers (issue 36) agree with the
/// packet-at-a-time path: a 300-row result set fed whole, byte by byte and
/// in 7-byte pieces gives the same rows, response bytes and malformed count,
/// with a NULL-first row (0xfb), an empty row and one out-of-order sequence
/// id among the rows.
#[test]
fn rows_counted_from_headers_agree_with_splits() {
    let caps = BASE_CAPS;
    let mut srv = pkt(1, &[2]);
    srv.extend(coldef(2));
    srv.extend(coldef(3));
    srv.extend(pkt(4, &[0xfe, 0, 0, 2, 0]));
    let mut seq = 5u8;
    for i in 0..300u32 {
        let row = match i {
            7 => vec![0xfb, 1, b'x'],
            11 => vec![],
            _ => {
                let v = i.to_string();
                let mut r = vec![v.len() as u8];
                r.extend(v.as_bytes());
                r.extend([1, b'y']);
                r
            }
        };
        let s = if i == 200 { seq.wrapping_add(1) } else { seq };
        srv.extend(pkt(s, &row));
        seq = s.wrapping_add(1);
    }
    srv.extend(pkt(seq, &[0xfe, 0, 0, 2, 0]));
    let chunks = vec![
        (Dir::ToClient, greeting(caps)),
        (Dir::ToServer, hs_response(caps, "u", None)),
        (Dir::ToClient, ok(2, 0, 0)),
        (Dir::ToServer, pkt(0, b"\x03select id, v from t")),
        (Dir::ToClient, srv),
        (Dir::ToServer, pkt(0, b"\x03select 1")),
        (Dir::ToClient, ok(1, 0, 0)),
    ];
    let strip = |v: &[Transaction]| {
        v.iter()
            .map(|t| (t.status, t.request.map(|s| s.bytes), t.response.map(|s| s.bytes), t.detail.clone()))
            .collect::<Vec<_>>()
    };
    let (whole, pw) = run(&chunks, &ParseConfig::default());
    assert_eq!(my(&whole[1]).num_rows, Some(300));
    assert_eq!(my(&whole[1]).num_fields, Some(2));
    assert_eq!(whole[2].status, TxStatus::Ok);
    assert_eq!(pw.stats().malformed, 1);
    for piece in [1, 7] {
        let split: Vec<(Dir, Vec<u8>)> =
            chunks.iter().flat_map(|(d, c)| c.chunks(piece).map(move |b| (*d, b.to_vec()))).collect();
        let (out, p) = run(&split, &ParseConfig::default());
        assert_eq!(strip(&whole), strip(&out), "{piece}-byte pieces");
        assert_eq!(p.stats().malformed, 1, "{piece}-byte pieces");
    }
}

/// A row cut by a segment's end is skipped by its length (issue 36): only
/// its first byte is kept while the rest arrives, so a result set of large
/// rows split at every offset of its first rows gives the same rows and
/// bytes as fed whole, and the framer never holds more than one byte of a
/// row.
#[test]
fn rows_cut_by_segments_are_skipped_by_length() {
    let caps = BASE_CAPS;
    let mut srv = pkt(1, &[1]);
    srv.extend(coldef(2));
    srv.extend(pkt(3, &[0xfe, 0, 0, 2, 0]));
    let mut seq = 4u8;
    for i in 0..40u32 {
        // 600-byte rows: a text column of 598 bytes (lenenc 0xfc + 2 bytes
        // of length, then the text; the first byte 0xfc is a row's).
        let mut row = vec![0xfc, 0x53, 0x02];
        row.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, 0x253));
        srv.extend(pkt(seq, &row));
        seq = seq.wrapping_add(1);
    }
    srv.extend(pkt(seq, &[0xfe, 0, 0, 2, 0]));
    let head = vec![
        (Dir::ToClient, greeting(caps)),
        (Dir::ToServer, hs_response(caps, "u", None)),
        (Dir::ToClient, ok(2, 0, 0)),
        (Dir::ToServer, pkt(0, b"\x03select v from t")),
    ];
    let tail = vec![(Dir::ToServer, pkt(0, b"\x03select 1")), (Dir::ToClient, ok(1, 0, 0))];
    let strip = |v: &[Transaction]| {
        v.iter()
            .map(|t| (t.status, t.request.map(|s| s.bytes), t.response.map(|s| s.bytes), t.detail.clone()))
            .collect::<Vec<_>>()
    };
    let mut whole = head.clone();
    whole.push((Dir::ToClient, srv.clone()));
    whole.extend(tail.clone());
    let (want, _) = run(&whole, &ParseConfig::default());
    assert_eq!(my(&want[1]).num_rows, Some(40));
    assert_eq!(want[1].response.map(|s| s.bytes), Some(srv.len() as u64));
    // The result set in two segments, cut at every offset of its first
    // three rows (and of the end of the last ones), then in 1000-byte pieces.
    let rows_at = 5 + coldef(2).len() + 9;
    let cuts = (0..rows_at + 3 * 604).chain(srv.len() - 2 * 604..srv.len());
    for cut in cuts {
        let mut p = MysqlParser::new(&ParseConfig::default());
        let mut out = Vec::new();
        for (i, (d, c)) in head.iter().enumerate() {
            p.data(*d, i as i64, c, &mut out);
        }
        p.data(Dir::ToClient, 10, &srv[..cut], &mut out);
        let f = &p.fr[1];
        let in_row = f.in_packet
            && p.pending.in_flight().is_some_and(|pd| pd.state == Resp::Rows)
            && f.buf.first().is_some_and(|b| !matches!(b, 0xfe | 0xff));
        assert!(!in_row || f.buf.len() == 1, "cut at {cut}: {} bytes of a row kept", f.buf.len());
        for c in srv[cut..].chunks(1000) {
            p.data(Dir::ToClient, 11, c, &mut out);
        }
        for (d, c) in &tail {
            p.data(*d, 12, c, &mut out);
        }
        p.finish(0, &mut out);
        assert_eq!(strip(&want), strip(&out), "cut at {cut}");
        assert_eq!(p.stats().malformed, 0, "cut at {cut}");
    }
}

/// The parameters as the parser decoded them before they were written into
/// one joined text (a `String` each): the reference `exec_params` must agree
/// with, item by item.
fn exec_params_reference(arg: &[u8], st: &mut Stmt, redact: bool, budget: usize) -> Vec<String> {
    let n = st.num_params as usize;
    if n == 0 {
        return Vec::new();
    }
    let bitmap_at = 9;
    let bitmap_len = n.div_ceil(8);
    let Some(bitmap) = arg.get(bitmap_at..bitmap_at + bitmap_len) else {
        return Vec::new();
    };
    let mut pos = bitmap_at + bitmap_len;
    let Some(&bound) = arg.get(pos) else {
        return Vec::new();
    };
    pos += 1;
    if bound == 1 {
        let Some(types) = arg.get(pos..pos + 2 * n) else {
            return Vec::new();
        };
        st.types = types.to_vec();
        pos += 2 * n;
    }
    if st.types.len() != 2 * n {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(n);
    let mut used = 0usize;
    for i in 0..n {
        if bitmap[i / 8] & (1 << (i % 8)) != 0 {
            out.push("NULL".to_string());
            continue;
        }
        let t = st.types[2 * i];
        let unsigned = st.types[2 * i + 1] & 0x80 != 0;
        let fixed = |w: usize, pos: &mut usize| -> Option<u64> {
            let v = le(arg.get(*pos..*pos + w)?);
            *pos += w;
            Some(v)
        };
        let v = match t {
            1 => fixed(1, &mut pos).map(|v| if unsigned { v.to_string() } else { (v as u8 as i8).to_string() }),
            2 | 13 => fixed(2, &mut pos).map(|v| if unsigned { v.to_string() } else { (v as u16 as i16).to_string() }),
            3 | 9 => fixed(4, &mut pos).map(|v| if unsigned { v.to_string() } else { (v as u32 as i32).to_string() }),
            8 => fixed(8, &mut pos).map(|v| if unsigned { v.to_string() } else { (v as i64).to_string() }),
            4 => fixed(4, &mut pos).map(|v| f32::from_bits(v as u32).to_string()),
            5 => fixed(8, &mut pos).map(|v| f64::from_bits(v).to_string()),
            6 => Some("NULL".to_string()),
            7 | 10 | 12 => {
                let l = *arg.get(pos).unwrap_or(&0) as usize;
                let b = arg.get(pos + 1..pos + 1 + l);
                pos += 1 + l;
                b.map(|b| {
                    let y = u16_at(b, 0).unwrap_or(0);
                    let g = |k: usize| b.get(k).copied().unwrap_or(0);
                    if l > 4 {
                        format!("{y:04}-{:02}-{:02} {:02}:{:02}:{:02}", g(2), g(3), g(4), g(5), g(6))
                    } else {
                        format!("{y:04}-{:02}-{:02}", g(2), g(3))
                    }
                })
            }
            11 => {
                let l = *arg.get(pos).unwrap_or(&0) as usize;
                pos += 1 + l;
                Some("time".to_string())
            }
            _ => {
                let l = lenenc(arg, &mut pos).map(|l| l as usize);
                l.and_then(|l| {
                    let b = arg.get(pos..pos + l);
                    pos += l;
                    b.map(text)
                })
            }
        };
        let Some(mut v) = v else { break };
        if redact {
            v = "?".to_string();
        }
        let room = budget.saturating_sub(used);
        truncate(&mut v, room);
        used += v.len();
        out.push(v);
    }
    out
}

/// COM_STMT_EXECUTE payloads of random types and values (integers of each
/// width and sign, floats, dates of every length, strings with multi-byte
/// characters, NULLs, payloads cut anywhere), decoded into one joined text:
/// the same items as the reference gives, under small and large budgets.
#[test]
fn exec_params_agree_with_the_reference() {
    let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15u64);
    const TYPES: [u8; 14] = [1, 2, 13, 3, 9, 8, 4, 5, 6, 7, 10, 12, 11, 253];
    for round in 0..20_000 {
        let n = 1 + (next() % 12) as usize;
        let mut arg = vec![0u8; 9];
        let nulls: Vec<u8> = (0..n.div_ceil(8)).map(|_| if next().is_multiple_of(4) { next() as u8 } else { 0 }).collect();
        arg.extend_from_slice(&nulls);
        arg.push(1);
        let mut types = Vec::new();
        for _ in 0..n {
            types.push(TYPES[(next() % TYPES.len() as u64) as usize]);
            types.push(if next().is_multiple_of(2) { 0x80 } else { 0 });
        }
        arg.extend_from_slice(&types);
        for i in 0..n {
            let v = next();
            match types[2 * i] {
                1 => arg.push(v as u8),
                2 | 13 => arg.extend_from_slice(&(v as u16).to_le_bytes()),
                3 | 9 | 4 => arg.extend_from_slice(&(v as u32).to_le_bytes()),
                8 | 5 => arg.extend_from_slice(&v.to_le_bytes()),
                6 => {}
                7 | 10 | 12 | 11 => {
                    let l = [0usize, 1, 4, 7, 11][(v % 5) as usize];
                    arg.push(l as u8);
                    arg.extend((0..l).map(|k| (v >> (k % 8 * 8)) as u8 % 60));
                }
                _ => {
                    let s = ["", "abc", "é,ü", "a,b", "ключ", "x\u{1F600}y"][(v % 6) as usize].repeat(1 + (v >> 8) as usize % 3);
                    arg.push(s.len() as u8);
                    arg.extend_from_slice(s.as_bytes());
                }
            }
        }
        // Now and then a payload cut short.
        if round % 7 == 0 {
            let cut = (next() as usize) % (arg.len() + 1);
            arg.truncate(cut);
        }
        let redact = round % 11 == 0;
        let budget = [usize::MAX, 40, 7, 0][round % 4];
        let mk = || Stmt { query: None, fingerprint: None, num_params: n as u16, types: Vec::new() };
        let (mut a, mut b) = (mk(), mk());
        let want = exec_params_reference(&arg, &mut a, redact, budget);
        let got = exec_params(&arg, &mut b, redact, budget);
        assert_eq!(got.iter().collect::<Vec<_>>(), want, "round {round}: {arg:?}");
        assert_eq!(got.joined(), want.join(","), "round {round}");
    }
}

/// `use_target` as it was before its first-word test (issue 36): the whole
/// text checked as UTF-8 and trimmed, then `use ` looked for.
fn use_target_reference(q: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(q).ok()?.trim();
    let rest = s.get(..4).filter(|p| p.eq_ignore_ascii_case("use ")).map(|_| &s[4..])?;
    let db = rest.trim().trim_end_matches(';').trim().trim_matches('`');
    (!db.is_empty() && !db.contains(char::is_whitespace)).then(|| db.to_string())
}

/// The first-word test of `use_target` changes no answer: statements made
/// of white space (ASCII, vertical tab, non-ASCII), `use`/`USE`/`uSe`,
/// other words, quotes, invalid UTF-8 and cut texts, 200,000 of them.
#[test]
fn use_target_agrees_with_the_reference() {
    let parts: [&[u8]; 20] = [
        b" ", b"\t", b"\x0b", b"\x0c", b"\r\n", "\u{a0}".as_bytes(), "\u{2003}".as_bytes(), b"use", b"USE", b"uSe",
        b"db1", b"`d b`", b";", b"select", b"\xff", b"\xc3", b"\x01", b"\x7f", b"u", b"U",
    ];
    let mut next = crate::xorshift(0x9e37_79b9_7f4a_7c15);
    for case in 0..200_000 {
        let mut q = Vec::new();
        for _ in 0..next() % 7 {
            q.extend_from_slice(parts[(next() % parts.len() as u64) as usize]);
        }
        if case % 3 == 0 {
            q.truncate((next() % (q.len() as u64 + 1)) as usize);
        }
        assert_eq!(use_target(&q), use_target_reference(&q), "{:?}", String::from_utf8_lossy(&q));
    }
    assert_eq!(use_target(b"\x0b use `shop`;"), Some("shop".to_string()));
    assert_eq!(use_target("\u{a0}USE shop".as_bytes()), Some("shop".to_string()));
    assert_eq!(use_target(b"select 1"), None);
}

/// A query that is not UTF-8 is recorded as before (`from_utf8_lossy`'s
/// replacement characters); valid text is borrowed as it is.
#[test]
fn query_text_valid_or_not() {
    let caps = BASE_CAPS;
    let chunks = vec![
        (Dir::ToClient, greeting(caps)),
        (Dir::ToServer, hs_response(caps, "u", None)),
        (Dir::ToClient, ok(2, 0, 0)),
        (Dir::ToServer, pkt(0, b"\x03select 'caf\xc3\xa9', 'x\xffy' from t")),
        (Dir::ToClient, ok(1, 0, 0)),
        (Dir::ToServer, pkt(0, "\x03select 'café' from t".as_bytes())),
        (Dir::ToClient, ok(1, 0, 0)),
    ];
    let (out, _) = run(&chunks, &ParseConfig::default());
    assert_eq!(my(&out[1]).query.as_deref(), Some("select 'café', 'x\u{fffd}y' from t"));
    assert_eq!(my(&out[2]).query.as_deref(), Some("select 'café' from t"));
    let lossy = String::from_utf8_lossy(b"select 'caf\xc3\xa9', 'x\xffy' from t");
    let fp = Fingerprints::default().of(&lossy, Dialect::Mysql);
    assert_eq!(my(&out[1]).fingerprint.as_deref(), Some(&*fp));
}

/// Column definitions and the EOF after them are skipped by their headers
/// (issue 36, `skip_run`) as the packet-at-a-time path counts them: with the
/// handshake not seen (EOF style unknown), a classic result set (EOF after
/// 5 columns: the style learnt as classic) and, on another connection, one
/// without that EOF (learnt as deprecated), an ERR after the columns, and a
/// column definition with a sequence id out of order, each fed whole, byte
/// by byte and in 5-byte pieces, give the same records, the same EOF style
/// and malformed count; a column definition cut by a segment's end keeps one
/// byte.
#[test]
fn column_definitions_skipped_by_headers_agree_with_splits() {
    let result = |classic: bool, err_after: bool, bad_seq: bool| {
        let mut srv = pkt(1, &[5]);
        let mut seq = 2u8;
        for i in 0..5 {
            let s = if bad_seq && i == 3 { seq.wrapping_add(1) } else { seq };
            srv.extend(coldef(s));
            seq = s.wrapping_add(1);
        }
        if err_after {
            srv.extend(pkt(seq, b"\xff\x15\x04#HY000stop"));
            return srv;
        }
        if classic {
            srv.extend(pkt(seq, &[0xfe, 0, 0, 2, 0]));
            seq += 1;
        }
        for r in 0..3u8 {
            srv.extend(pkt(seq, &[1, b'0' + r]));
            seq += 1;
        }
        srv.extend(pkt(seq, &[0xfe, 0, 0, 2, 0, 0, 0][..if classic { 5 } else { 7 }]));
        srv
    };
    for classic in [true, false] {
        let chunks = vec![
            (Dir::ToServer, pkt(0, b"\x03select a, b, c, d, e from t")),
            (Dir::ToClient, result(classic, false, false)),
            (Dir::ToServer, pkt(0, b"\x03select a, b, c, d, e from u")),
            (Dir::ToClient, result(classic, true, false)),
            (Dir::ToServer, pkt(0, b"\x03select a, b, c, d, e from v")),
            (Dir::ToClient, result(classic, false, true)),
            (Dir::ToServer, pkt(0, b"\x03select 1")),
            (Dir::ToClient, ok(1, 0, 0)),
        ];
        let strip = |v: &[Transaction]| {
            v.iter()
                .map(|t| (t.status, t.request.map(|s| s.bytes), t.response.map(|s| s.bytes), t.detail.clone()))
                .collect::<Vec<_>>()
        };
        let (whole, pw) = run(&chunks, &ParseConfig::default());
        assert_eq!(whole.len(), 4, "classic {classic}");
        assert_eq!((my(&whole[0]).num_fields, my(&whole[0]).num_rows), (Some(5), Some(3)), "classic {classic}");
        assert_eq!(whole[1].status, TxStatus::Error);
        assert_eq!(my(&whole[1]).error_code, Some(0x415));
        assert_eq!(my(&whole[2]).num_rows, Some(3), "classic {classic}");
        assert_eq!(whole[3].status, TxStatus::Ok);
        assert_eq!(pw.deprecate_eof, Some(!classic));
        assert_eq!(pw.stats().malformed, 1, "classic {classic}");
        for piece in [1, 5] {
            let split: Vec<(Dir, Vec<u8>)> =
                chunks.iter().flat_map(|(d, c)| c.chunks(piece).map(move |b| (*d, b.to_vec()))).collect();
            let (out, p) = run(&split, &ParseConfig::default());
            assert_eq!(strip(&whole), strip(&out), "classic {classic}, {piece}-byte pieces");
            assert_eq!(p.deprecate_eof, pw.deprecate_eof, "classic {classic}, {piece}-byte pieces");
            assert_eq!(p.stats().malformed, 1, "classic {classic}, {piece}-byte pieces");
        }
        // Cut inside the third column definition: one byte of it is kept.
        let srv = result(classic, false, false);
        let cut = 5 + 2 * coldef(2).len() + 10;
        let mut p = MysqlParser::new(&ParseConfig::default());
        let mut out = Vec::new();
        p.data(Dir::ToServer, 0, &chunks[0].1, &mut out);
        p.data(Dir::ToClient, 1, &srv[..cut], &mut out);
        assert!(p.fr[1].in_packet && p.fr[1].buf.len() == 1, "classic {classic}: {} bytes kept", p.fr[1].buf.len());
        p.data(Dir::ToClient, 2, &srv[cut..], &mut out);
        assert_eq!(strip(&whole[..1]), strip(&out), "classic {classic}, cut at {cut}");
    }
}

/// A response framed in `skip_run`'s one loop, from its column count to the
/// EOF/OK that ends it (issue 36, mysql51): two result sets (the first's end
/// announcing more results, left to the general path), with classic EOFs
/// and with EOF deprecated at the handshake, give the same records and
/// counts as fed whole when the server's bytes are split in two segments at
/// every offset (a header, a column count, a row or the final EOF cut).
#[test]
fn a_response_framed_in_one_run_agrees_with_every_split() {
    for deprecate in [false, true] {
        let caps = if deprecate { BASE_CAPS | CLIENT_DEPRECATE_EOF } else { BASE_CAPS };
        let end = |seq: u8, more: bool| {
            let status = if more { 0x0a } else { 2 };
            let p = [0xfe, 0, 0, status, 0, 0, 0];
            pkt(seq, &p[..if deprecate { 7 } else { 5 }])
        };
        let mut srv = Vec::new();
        let mut seq = 1u8;
        for (cols, rows, more) in [(2u8, 3u8, true), (1, 2, false)] {
            srv.extend(pkt(seq, &[cols]));
            seq += 1;
            for _ in 0..cols {
                srv.extend(coldef(seq));
                seq += 1;
            }
            if !deprecate {
                srv.extend(end(seq, false));
                seq += 1;
            }
            for r in 0..rows {
                srv.extend(pkt(seq, &[1, b'0' + r]));
                seq += 1;
            }
            srv.extend(end(seq, more));
            seq += 1;
        }
        let login = [
            (Dir::ToClient, greeting(caps)),
            (Dir::ToServer, hs_response(caps, "u", Some("db"))),
            (Dir::ToClient, ok(2, 0, 0)),
            (Dir::ToServer, pkt(0, b"\x03call two_results()")),
        ];
        let after = [(Dir::ToServer, pkt(0, b"\x03select 1")), (Dir::ToClient, ok(1, 0, 0))];
        let strip = |v: &[Transaction]| {
            v.iter()
                .map(|t| (t.status, t.request.map(|s| s.bytes), t.response.map(|s| s.bytes), t.detail.clone()))
                .collect::<Vec<_>>()
        };
        let mut chunks = login.to_vec();
        chunks.push((Dir::ToClient, srv.clone()));
        chunks.extend(after.iter().cloned());
        let (whole, pw) = run(&chunks, &ParseConfig::default());
        assert_eq!(whole.len(), 3, "deprecate {deprecate}");
        assert_eq!(whole[1].status, TxStatus::Ok);
        assert_eq!((my(&whole[1]).num_fields, my(&whole[1]).num_rows), (Some(1), Some(5)), "deprecate {deprecate}");
        assert_eq!(whole[1].response.unwrap().bytes, srv.len() as u64);
        assert_eq!(whole[2].status, TxStatus::Ok);
        assert_eq!(pw.stats().malformed, 0);
        for cut in 1..srv.len() {
            let mut chunks = login.to_vec();
            chunks.push((Dir::ToClient, srv[..cut].to_vec()));
            chunks.push((Dir::ToClient, srv[cut..].to_vec()));
            chunks.extend(after.iter().cloned());
            let (out, p) = run(&chunks, &ParseConfig::default());
            assert_eq!(strip(&whole), strip(&out), "deprecate {deprecate}, split at {cut}");
            assert_eq!(p.stats().malformed, 0, "deprecate {deprecate}, split at {cut}");
        }
    }
}

// ---- Segments cut by the snap length (issue 36) ----

/// Feeds `seg` as a segment of `dir` seen at `ts` whose capture kept its
/// first `snap` bytes: the data, then the cut (as the reassembler hands them).
fn snapped(p: &mut MysqlParser, dir: Dir, ts: i64, seg: &[u8], snap: usize, out: &mut Vec<Transaction>) {
    let n = seg.len().min(snap);
    if n > 0 {
        p.data(dir, ts, &seg[..n], out);
    }
    if seg.len() > n {
        p.cut(dir, ts, (seg.len() - n) as u64, out);
    }
}

/// A result set of `rows` one-column rows (classic EOFs), sequence ids from 1.
fn result_set(rows: usize) -> Vec<u8> {
    let mut v = pkt(1, &[1]);
    v.extend(coldef(2));
    v.extend(pkt(3, &[0xfe, 0, 0, 2, 0]));
    let mut seq = 4u8;
    for i in 0..rows {
        v.extend(pkt(seq, format!("\x10row number {i:06}").as_bytes()));
        seq = seq.wrapping_add(1);
    }
    v.extend(pkt(seq, &[0xfe, 0, 0, 2, 0]));
    v
}

/// The login, a query answered by a result set in `segs` server segments
/// (seen at 10, 11, ...), then `select 2` answered by OK; every segment cut
/// after `snap` bytes.
fn cut_session(snap: usize, rows: usize, segs: usize) -> (Vec<Transaction>, MysqlParser) {
    let mut p = MysqlParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    snapped(&mut p, Dir::ToClient, 1, &greeting(BASE_CAPS), snap, &mut out);
    snapped(&mut p, Dir::ToServer, 2, &hs_response(BASE_CAPS, "app", Some("shop")), snap, &mut out);
    snapped(&mut p, Dir::ToClient, 3, &ok(2, 0, 0), snap, &mut out);
    snapped(&mut p, Dir::ToServer, 4, &pkt(0, b"\x03SELECT a FROM t"), snap, &mut out);
    let rs = result_set(rows);
    let per = rs.len().div_ceil(segs);
    for (i, seg) in rs.chunks(per).enumerate() {
        snapped(&mut p, Dir::ToClient, 10 + i as i64, seg, snap, &mut out);
    }
    snapped(&mut p, Dir::ToServer, 100, &pkt(0, b"\x03select 2"), snap, &mut out);
    snapped(&mut p, Dir::ToClient, 101, &ok(1, 3, 0), snap, &mut out);
    p.finish(200, &mut out);
    (out, p)
}

/// A result set longer than what the capture kept of its segments: the
/// statement keeps its response size (the stream's), its times (the last
/// segment's), its status from the first packet, its number of columns;
/// its rows, not all seen, are unset, never a wrong count. The next
/// command is read as usual, and nothing counts as a gap.
#[test]
fn result_set_cut_after_its_first_bytes() {
    let (whole, _) = cut_session(usize::MAX, 100, 3);
    assert_eq!(whole.len(), 3);
    assert_eq!(my(&whole[1]).num_rows, Some(100));
    for segs in [1, 3] {
        let (out, p) = cut_session(80, 100, segs);
        assert_eq!(out.len(), 3, "{segs} segments");
        let (w, c) = (&whole[1], &out[1]);
        assert_eq!(c.status, TxStatus::Ok);
        assert_eq!(c.request, w.request);
        assert_eq!(c.response.map(|r| (r.first_ns, r.bytes)), w.response.map(|r| (r.first_ns, r.bytes)));
        assert_eq!(c.response.unwrap().last_ns, 10 + segs as i64 - 1);
        assert_eq!(my(c).num_fields, Some(1));
        assert_eq!(my(c).num_rows, None);
        assert_eq!(my(c).query.as_deref(), Some("SELECT a FROM t"));
        assert_eq!(my(c).user(), Some("app"));
        assert_eq!(my(c).database(), Some("shop"));
        // The next statement, after the cut response, as in the whole capture.
        assert_eq!(out[2].status, TxStatus::Ok);
        assert_eq!(my(&out[2]).query.as_deref(), Some("select 2"));
        assert_eq!(my(&out[2]).affected_rows, Some(3));
        assert_eq!((out[2].request, out[2].response), (whole[2].request, whole[2].response));
        assert_eq!((p.stats().gaps, p.stats().malformed, p.stats().resyncs), (0, 0, 0));
    }
    // A cut that ends inside a row, the next segment whole: the framing
    // holds and every row is counted.
    let rs = result_set(10);
    let mut p = MysqlParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    p.data(Dir::ToServer, 1, &pkt(0, b"\x03SELECT a FROM t"), &mut out);
    // The segment ends 14 bytes into the last row (24 bytes), the cut
    // takes its last 5: inside the row's payload, past its first byte.
    let at = rs.len() - 9 - 10;
    snapped(&mut p, Dir::ToClient, 2, &rs[..at], at - 5, &mut out);
    p.data(Dir::ToClient, 3, &rs[at..], &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(my(&out[0]).num_rows, Some(10));
    assert_eq!(out[0].response.unwrap().bytes, rs.len() as u64);
}

/// An ERR packet cut in its message: the statement is an error with its
/// code and state, the message as far as it was captured.
#[test]
fn err_packet_cut_in_its_message() {
    let mut p = MysqlParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    p.data(Dir::ToServer, 1, &pkt(0, b"\x03SELECT nope"), &mut out);
    let mut err = vec![0xff];
    err.extend_from_slice(&1146u16.to_le_bytes());
    err.extend_from_slice(b"#42S02Table 'shop.nope' doesn't exist, and a long explanation follows");
    let err = pkt(1, &err);
    snapped(&mut p, Dir::ToClient, 2, &err, 30, &mut out);
    assert_eq!(out.len(), 1, "the ERR packet's end is known: the statement is done");
    assert_eq!(out[0].status, TxStatus::Error);
    assert_eq!(my(&out[0]).error_code, Some(1146));
    assert_eq!(my(&out[0]).sql_state.as_deref(), Some("42S02"));
    assert_eq!(my(&out[0]).error_message.as_deref(), Some("Table 'shop.nope'"));
    assert_eq!(out[0].response.unwrap().bytes, err.len() as u64);
    // Only its first byte captured: still an error, its code unknown.
    p.data(Dir::ToServer, 3, &pkt(0, b"\x03SELECT nope"), &mut out);
    snapped(&mut p, Dir::ToClient, 4, &err, 5, &mut out);
    assert_eq!(out.len(), 2);
    assert_eq!(out[1].status, TxStatus::Error);
    assert_eq!(my(&out[1]).error_code, None);
    assert_eq!(out[1].response.unwrap().bytes, err.len() as u64);
    assert_eq!(p.stats().gaps, 0);
}

/// A login packet cut by the snap length (connection attributes make it
/// long): the user and the database when their NUL was captured, none
/// (not a cut name) when not.
#[test]
fn cut_login_keeps_user_and_database() {
    let mut hs = hs_response(BASE_CAPS, "app", Some("shop"));
    // Connection attributes after the database (not parsed), as MariaDB's
    // clients send them: the packet is ~300 bytes.
    hs.extend_from_slice(&[b'x'; 250]);
    let len = hs.len() - 4;
    hs[..3].copy_from_slice(&(len as u32).to_le_bytes()[..3]);
    let db_end = hs.windows(5).position(|w| w == b"shop\0").unwrap() + 5;
    for (snap, user, db) in [
        (db_end, Some("app"), Some("shop")),
        (db_end + 40, Some("app"), Some("shop")),
        (db_end - 2, Some("app"), None),
        (4 + 32 + 2, None, None),
    ] {
        let mut p = MysqlParser::new(&ParseConfig::default());
        let mut out = Vec::new();
        p.data(Dir::ToClient, 1, &greeting(BASE_CAPS), &mut out);
        snapped(&mut p, Dir::ToServer, 2, &hs, snap, &mut out);
        p.data(Dir::ToClient, 3, &ok(2, 0, 0), &mut out);
        snapped(&mut p, Dir::ToServer, 4, &pkt(0, b"\x03select 1"), snap, &mut out);
        p.data(Dir::ToClient, 5, &ok(1, 0, 0), &mut out);
        assert_eq!(out.len(), 2, "snap {snap}");
        assert_eq!(my(&out[0]).command, "login");
        assert_eq!(out[0].status, TxStatus::Ok);
        assert_eq!(out[0].request.unwrap().bytes, hs.len() as u64);
        assert_eq!(my(&out[0]).user(), user, "snap {snap}");
        assert_eq!(my(&out[1]).user(), user, "snap {snap}");
        assert_eq!(my(&out[1]).database(), db, "snap {snap}");
    }
}

/// A long query cut by the snap length: its first bytes, marked cut; its
/// request size the whole packet's; the answer paired with it.
#[test]
fn long_query_cut() {
    let q = format!("\x03SELECT a FROM t WHERE b IN ({})", vec!["1234"; 100].join(","));
    let req = pkt(0, q.as_bytes());
    let mut p = MysqlParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    snapped(&mut p, Dir::ToServer, 1, &req, 40, &mut out);
    p.data(Dir::ToClient, 2, &ok(1, 0, 0), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].status, TxStatus::Ok);
    assert_eq!(out[0].request.unwrap().bytes, req.len() as u64);
    assert_eq!(my(&out[0]).query.as_deref(), Some(&q[1..36]));
    assert!(my(&out[0]).query_truncated);
}
