//! Redis parser tests: hand-made RESP2/RESP3 exchanges, the Packetbeat
//! system-test pcap, Zeek's redis.log baseline, and damaged input.

use super::*;
use std::sync::Arc;
use crate::testutil::{parse_pcap, stress, tcp_events};
use crate::Protocol;

fn rd(t: &Transaction) -> &RedisTx {
    match &t.detail {
        Detail::Redis(m) => m,
        d => panic!("not redis: {d:?}"),
    }
}

fn run(chunks: &[(Dir, &[u8])], cfg: &ParseConfig) -> (Vec<Transaction>, RedisParser) {
    let mut p = RedisParser::new(cfg);
    let mut out = Vec::new();
    for (i, (d, c)) in chunks.iter().enumerate() {
        p.data(*d, i as i64 * 1000, c, &mut out);
    }
    p.finish(0, &mut out);
    (out, p)
}

fn cmd(args: &[&str]) -> Vec<u8> {
    let mut v = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        v.extend(format!("${}\r\n{}\r\n", a.len(), a).into_bytes());
    }
    v
}

// ---- Packetbeat: test_0022_redis_send_options (port 6380) ----
#[test]
fn pb_redis_one_transaction() {
    let txs: Vec<_> =
        parse_pcap("packetbeat/pcaps/redis_one_transaction.pcap", &[6380], Protocol::Redis, &ParseConfig::default())
            .into_iter()
            .flatten()
            .collect();
    assert_eq!(txs.len(), 1);
    let r = rd(&txs[0]);
    assert_eq!(&*r.command, "LINDEX");
    assert_eq!(r.key.as_deref(), Some("test"));
    assert_eq!(r.args, "test 1");
    assert_eq!(r.reply_type, Some("bulk"));
    assert_eq!(r.reply.as_deref(), Some("hello1"));
    assert_eq!(r.reply_len, Some(6));
    assert_eq!(txs[0].status, TxStatus::Ok);
    assert_eq!(txs[0].request.unwrap().bytes, 33);
    assert_eq!(txs[0].response.unwrap().bytes, 12);
    // send_request/send_response toggle Packetbeat's raw `request`/`response`
    // text, which we do not store (args and reply summary instead).
}

// ---- Zeek: scripts.base.protocols.redis.django-cloud redis.log ----
#[test]
fn zeek_django_cloud() {
    let txs: Vec<_> = parse_pcap("zeek/redis/django-cloud.pcapng", &[10625], Protocol::Redis, &ParseConfig::default())
        .into_iter()
        .flatten()
        .collect();
    let log = std::fs::read_to_string(crate::testutil::path("zeek/redis/redis.log")).unwrap();
    let want: Vec<Vec<&str>> = log.lines().filter(|l| !l.starts_with('#')).map(|l| l.split('\t').collect()).collect();
    assert_eq!(txs.len(), want.len());
    for (t, w) in txs.iter().zip(&want) {
        let r = rd(t);
        let (name, key, value, success, reply) = (w[6], w[7], w[8], w[9], w[10]);
        assert_eq!(&*r.command, name);
        assert_eq!(r.key.as_deref(), Some(key));
        if value != "-" {
            // Zeek logs the value only; ours has the options after it (`PX 60000`).
            assert_eq!(r.args.split(' ').nth(1), Some(value));
        }
        assert_eq!(t.status == TxStatus::Ok, success == "T");
        let ours = r.reply.as_deref().unwrap_or("");
        assert_eq!(ours, if reply == "(empty)" { "" } else { reply }, "{name} {key}");
    }
}

// ---- Hand-made ----

#[test]
fn pipelined_commands_pair_in_order() {
    let mut c = cmd(&["SET", "k", "v"]);
    c.extend(cmd(&["GET", "k"]));
    c.extend(cmd(&["INCR", "n"]));
    c.extend(b"PING\r\n");
    let s = b"+OK\r\n$1\r\nv\r\n-WRONGTYPE Operation against a key\r\n+PONG\r\n";
    let (out, _) = run(&[(Dir::ToServer, &c), (Dir::ToClient, s)], &ParseConfig::default());
    assert_eq!(out.len(), 4);
    let got: Vec<_> =
        out.iter().map(|t| (&*rd(t).command, rd(t).reply_type, rd(t).reply.as_deref(), t.status)).collect();
    assert_eq!(
        got,
        [
            ("SET", Some("simple"), Some("OK"), TxStatus::Ok),
            ("GET", Some("bulk"), Some("v"), TxStatus::Ok),
            ("INCR", Some("error"), Some("WRONGTYPE Operation against a key"), TxStatus::Error),
            ("PING", Some("simple"), Some("PONG"), TxStatus::Ok),
        ]
    );
    // Byte by byte gives the same.
    let bytes: Vec<(Dir, &[u8])> =
        c.chunks(1).map(|b| (Dir::ToServer, b)).chain(s.chunks(1).map(|b| (Dir::ToClient, b))).collect();
    let (split, _) = run(&bytes, &ParseConfig::default());
    assert_eq!(split.iter().map(|t| &t.detail).collect::<Vec<_>>(), out.iter().map(|t| &t.detail).collect::<Vec<_>>());
    assert_eq!(split[1].response.unwrap().bytes, 7);
}

#[test]
fn resp3_types_and_attributes() {
    let c =
        [cmd(&["HELLO", "3", "AUTH", "u", "secret"]), cmd(&["HGETALL", "h"]), cmd(&["X"]), cmd(&["Y"]), cmd(&["Z"])]
            .concat();
    let s: &[u8] = b"%2\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n\
|1\r\n+ttl\r\n:5\r\n%1\r\n+a\r\n*2\r\n,1.5\r\n#t\r\n\
>3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n\
_\r\n\
=10\r\ntxt:hello!\r\n\
(12345678901234567890\r\n";
    let (out, p) = run(&[(Dir::ToServer, &c), (Dir::ToClient, s)], &ParseConfig::default());
    assert_eq!(out.len(), 5);
    assert_eq!(rd(&out[0]).args, "? ? ? ?");
    assert_eq!(rd(&out[0]).key, None);
    assert_eq!((rd(&out[0]).reply_type, rd(&out[0]).reply_len), (Some("map"), Some(2)));
    assert_eq!((rd(&out[1]).reply_type, rd(&out[1]).reply_len), (Some("map"), Some(1)));
    assert_eq!(rd(&out[2]).reply_type, Some("null"));
    assert_eq!(rd(&out[3]).reply.as_deref(), Some("txt:hello!"));
    assert_eq!(rd(&out[4]).reply.as_deref(), Some("12345678901234567890"));
    assert_eq!(p.pushes(), 1);
    assert!(out.iter().all(|t| t.status == TxStatus::Ok));
}

#[test]
fn resp2_pubsub() {
    let c = [cmd(&["SUBSCRIBE", "a", "b"]), cmd(&["PING"])].concat();
    let s: &[u8] = b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n\
*3\r\n$7\r\nmessage\r\n$1\r\na\r\n$5\r\nhello\r\n*2\r\n$4\r\npong\r\n$0\r\n\r\n";
    let (out, p) = run(&[(Dir::ToServer, &c), (Dir::ToClient, s)], &ParseConfig::default());
    assert_eq!(out.len(), 2);
    assert_eq!(&*rd(&out[0]).command, "SUBSCRIBE");
    assert_eq!(out[0].response.unwrap().bytes, 60);
    assert_eq!(&*rd(&out[1]).command, "PING");
    assert_eq!(p.pushes(), 1);
}

#[test]
fn redact_truncate_and_big_bulk() {
    let cfg = ParseConfig { redact: true, max_text_bytes: 8, ..ParseConfig::default() };
    let big = "x".repeat(100_000);
    let c = cmd(&["SET", "user:1", &big]);
    let s = format!("${}\r\n{}\r\n", big.len(), big);
    let mut chunks: Vec<(Dir, &[u8])> = c.chunks(1460).map(|x| (Dir::ToServer, x)).collect();
    chunks.push((Dir::ToServer, &b"*2\r\n$3\r\nGET\r\n$6\r\nuser:1\r\n"[..]));
    chunks.push((Dir::ToClient, b"+OK\r\n"));
    chunks.extend(s.as_bytes().chunks(1460).map(|x| (Dir::ToClient, x)));
    let (out, p) = run(&chunks, &cfg);
    assert_eq!(out.len(), 2);
    assert_eq!(rd(&out[0]).args, "user:1 ?");
    assert_eq!(rd(&out[0]).key.as_deref(), Some("user:1"));
    assert_eq!(out[0].request.unwrap().bytes, c.len() as u64);
    // Redacting drops bulk contents of replies.
    assert_eq!(rd(&out[1]).reply, None);
    assert_eq!(rd(&out[1]).reply_len, Some(100_000));
    assert_eq!(out[1].response.unwrap().bytes, s.len() as u64);
    assert_eq!(p.stats(), ParseStats::default());
    let cfg = ParseConfig { max_text_bytes: 8, ..ParseConfig::default() };
    let (out, _) = run(&chunks, &cfg);
    assert_eq!(rd(&out[0]).args, "user:1 x");
    assert!(rd(&out[0]).args_truncated);
}

#[test]
fn gap_resync_and_orphans() {
    let mut p = RedisParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    p.data(Dir::ToServer, 1, &cmd(&["GET", "a"]), &mut out);
    p.data(Dir::ToClient, 2, b"$100\r\nabc", &mut out);
    p.gap(Dir::ToClient, 3, 50, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].status, TxStatus::NoResponse);
    p.data(Dir::ToClient, 4, b"rest of the body\r\n", &mut out);
    p.data(Dir::ToServer, 5, &cmd(&["GET", "b"]), &mut out);
    p.data(Dir::ToClient, 6, b"$1\r\nz\r\n", &mut out);
    assert_eq!(out.len(), 2);
    assert_eq!(rd(&out[1]).reply.as_deref(), Some("z"));
    assert_eq!(p.stats().resyncs, 1);
    // A reply without a command.
    p.data(Dir::ToClient, 7, b":7\r\n", &mut out);
    assert_eq!(out[2].status, TxStatus::NoRequest);
    // Garbage from the client: framing lost, then found again.
    p.data(Dir::ToServer, 8, b"*x\r\n", &mut out);
    p.data(Dir::ToServer, 9, &cmd(&["DEL", "c"]), &mut out);
    p.data(Dir::ToClient, 10, b":1\r\n", &mut out);
    assert_eq!(&*rd(out.last().unwrap()).command, "DEL");
    assert_eq!(p.stats().malformed, 1);
}

#[test]
fn timeout() {
    let mut p = RedisParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    p.data(Dir::ToServer, 0, &cmd(&["BLPOP", "q", "0"]), &mut out);
    p.expire(5_000_000_000, &mut out);
    assert!(out.is_empty());
    p.expire(10_000_000_001, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].status, TxStatus::NoResponse);
}

#[test]
fn looks_like_is_specific() {
    assert!(looks_like(Dir::ToServer, &cmd(&["GET", "k"])));
    assert!(looks_like(Dir::ToServer, b"PING\r\n"));
    assert!(looks_like(Dir::ToClient, b"+PONG\r\n"));
    assert!(looks_like(Dir::ToClient, b"-NOAUTH Authentication required.\r\n"));
    for junk in [
        &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        b"HTTP/1.1 200 OK\r\n",
        b"hello world\n",
        b"*** banner ***\r\n",
        b"+++ATH0\r\n",
    ] {
        assert!(!looks_like(Dir::ToServer, junk), "{junk:?}");
        assert!(!looks_like(Dir::ToClient, junk), "{junk:?}");
    }
    let evs = tcp_events("packetbeat/pcaps/redis_one_transaction.pcap", &[6380]);
    let crate::testutil::Ev::Data { dir, data, .. } = &evs[0] else { panic!() };
    assert!(looks_like(*dir, data));
}

#[test]
fn never_panics_on_damaged_streams() {
    let cfg = ParseConfig { max_header_bytes: 64, max_text_bytes: 16, ..ParseConfig::default() };
    for (f, port) in [("packetbeat/pcaps/redis_one_transaction.pcap", 6380), ("zeek/redis/django-cloud.pcapng", 10625)]
    {
        let evs = tcp_events(f, &[port]);
        stress(&evs, || Box::new(RedisParser::new(&cfg)));
    }
}

#[test]
fn inline_commands_and_nested_replies() {
    let c: &[u8] = b"SET  k   v\r\nLRANGE l 0 -1\r\n";
    let s: &[u8] = b"+OK\r\n*2\r\n*1\r\n:1\r\n|1\r\n+a\r\n+b\r\n$-1\r\n";
    let (out, _) = run(&[(Dir::ToServer, c), (Dir::ToClient, s)], &ParseConfig::default());
    assert_eq!(out.len(), 2);
    assert_eq!((&*rd(&out[0]).command, rd(&out[0]).args.as_str(), rd(&out[0]).num_args), ("SET", "k v", 2));
    assert_eq!((rd(&out[1]).reply_type, rd(&out[1]).reply_len), (Some("array"), Some(2)));
    assert_eq!(out[1].response.unwrap().bytes, s.len() as u64 - 5);
}

#[test]
fn real_captures_parse_cleanly() {
    for (f, port) in [("packetbeat/pcaps/redis_one_transaction.pcap", 6380), ("zeek/redis/django-cloud.pcapng", 10625)]
    {
        let evs = tcp_events(f, &[port]);
        let s = crate::testutil::stats_of(&evs, || Box::new(RedisParser::new(&ParseConfig::default())));
        assert_eq!(s, ParseStats::default(), "{f}");
    }
}

/// Content detection across protocols on real first bytes: each SQL/Redis
/// capture is claimed by its own protocol, and no HTTP, TLS or DNS capture
/// (nor the other two protocols') is claimed by the wrong one.
#[test]
fn content_detection_on_real_first_bytes() {
    use crate::detect::by_content;
    let ours = [
        ("packetbeat/pcaps/mysql_connection.pcap", 3306, Protocol::Mysql),
        ("packetbeat/pcaps/mysql_with_whitespaces.pcap", 3306, Protocol::Mysql),
        ("packetbeat/pcaps/mysql_err_database_not_selected.pcap", 3306, Protocol::Mysql),
        ("zeek/mysql/mysql.pcap", 3306, Protocol::Mysql),
        ("packetbeat/pcaps/pgsql_extended_query.pcap", 5432, Protocol::Pgsql),
        ("zeek/postgresql/greenhouse-app.pcap", 5432, Protocol::Pgsql),
        ("zeek/postgresql/psql-create-insert-select-delete-drop.pcap", 5432, Protocol::Pgsql),
        ("packetbeat/pcaps/redis_one_transaction.pcap", 6380, Protocol::Redis),
        ("zeek/redis/django-cloud.pcapng", 10625, Protocol::Redis),
    ];
    for (f, port, proto) in ours {
        let evs = tcp_events(f, &[port]);
        let crate::testutil::Ev::Data { dir, data, .. } = &evs[0] else { panic!() };
        assert_eq!(by_content(*dir, data), crate::detect::Detected::Protocol(proto), "{f}");
    }
    let others = [
        "packetbeat/pcaps/http_post.pcap",
        "packetbeat/pcaps/http_basicauth.pcap",
        "packetbeat/pcaps/http_get_2k_file.pcap",
        "packetbeat/pcaps/wsgi_loopback.pcap",
        "packetbeat/pcaps/hide_secret_POST.pcap",
        "packetbeat/pcaps/dns_tcp_axfr.pcap",
        "zeek/mysql/encrypted.pcap",
    ];
    for f in others {
        let evs = tcp_events(f, &[80, 8080, 8888, 8000, 53]);
        for e in &evs {
            let crate::testutil::Ev::Data { dir, data, .. } = e else { continue };
            assert!(!crate::pgsql::looks_like(*dir, data) && !looks_like(*dir, data), "{f}");
            // MySQL's own capture is MySQL until the TLS switch; its TLS records are not.
            if !f.contains("mysql") {
                assert!(!crate::mysql::looks_like(*dir, data), "{f}");
            } else if data.first() == Some(&0x16) || data.first() == Some(&0x17) {
                assert!(!crate::mysql::looks_like(*dir, data), "{f} TLS");
            }
        }
    }
}

/// Array elements skipped by their lengths (issue 36) agree with the
/// element-at-a-time path: a 1,000-element LRANGE reply (a nested array and
/// an integer among the bulks) and a RESP2 pub/sub message, fed whole, byte by
/// byte and in 7-byte pieces, give the same transactions and bytes.
#[test]
fn array_elements_skipped_by_length_agree_with_splits() {
    let mut reply = b"*1000\r\n".to_vec();
    for i in 0..1000 {
        match i {
            500 => reply.extend(b"*2\r\n$1\r\na\r\n:7\r\n"),
            600 => reply.extend(b":42\r\n"),
            700 => reply.extend(b"$-1\r\n"),
            _ => reply.extend(format!("${}\r\nitem-{i}\r\n", format!("item-{i}").len()).into_bytes()),
        }
    }
    let sub = cmd(&["SUBSCRIBE", "news"]);
    let confirm = b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n".to_vec();
    let message = b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n".to_vec();
    let lrange = cmd(&["LRANGE", "l", "0", "-1"]);
    let chunks: Vec<(Dir, &[u8])> = vec![
        (Dir::ToServer, &lrange),
        (Dir::ToClient, &reply),
        (Dir::ToServer, &sub),
        (Dir::ToClient, &confirm),
        (Dir::ToClient, &message),
    ];
    let strip = |v: &[Transaction]| {
        v.iter()
            .map(|t| (t.status, t.request.map(|s| s.bytes), t.response.map(|s| s.bytes), t.detail.clone()))
            .collect::<Vec<_>>()
    };
    let (whole, pw) = run(&chunks, &ParseConfig::default());
    assert_eq!(whole.len(), 2);
    assert_eq!(rd(&whole[0]).reply_type, Some("array"));
    assert_eq!(whole[0].response.unwrap().bytes, reply.len() as u64);
    assert_eq!(pw.pushes(), 1);
    for piece in [1, 7] {
        let split: Vec<(Dir, &[u8])> = chunks.iter().flat_map(|(d, c)| c.chunks(piece).map(move |b| (*d, b))).collect();
        let (out, p) = run(&split, &ParseConfig::default());
        assert_eq!(strip(&whole), strip(&out), "{piece}-byte pieces");
        assert_eq!(p.pushes(), 1, "{piece}-byte pieces");
    }
}

/// A command's arguments are collected in buffers the connection keeps (no
/// vector per argument), and its joined text is kept in place when short,
/// else allocated once at its length; what is recorded is what the
/// per-argument vectors gave.
#[test]
fn arguments_in_kept_buffers_and_text_in_place_or_at_its_length() {
    let mut p = RedisParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    for i in 0..50 {
        let key = format!("key:{i}");
        let value = "v".repeat(i);
        p.data(Dir::ToServer, i as i64, &cmd(&["set", &key, &value, "EX", "10"]), &mut out);
        p.data(Dir::ToClient, i as i64, b"+OK\r\n", &mut out);
        let r = rd(out.last().unwrap());
        assert_eq!((&*r.command, r.key.as_deref()), ("SET", Some(key.as_str())));
        assert_eq!(r.args, format!("{key} {value} EX 10").as_str());
        assert_eq!(r.args.is_inline(), r.args.len() <= SmallText::INLINE, "{:?}", r.args);
        assert!(r.key.as_ref().unwrap().is_inline());
        assert_eq!(r.num_args, 4);
    }
    assert_eq!(out.len(), 50);
    // The room of the last message is kept for the next, bounded by the budget.
    let s = &p.sides[0];
    assert!(s.msg.arg_bytes.is_empty() && s.msg.arg_bytes.capacity() > 0);
    assert!(s.msg.arg_bytes.capacity() <= p.arg_budget().max(64));
    // Redacted and secret arguments: the same text as before.
    let cfg = ParseConfig { redact: true, ..ParseConfig::default() };
    let (out, _) = run(&[(Dir::ToServer, &cmd(&["GET", "k1", "x"])), (Dir::ToClient, b"$1\r\na\r\n")], &cfg);
    assert_eq!((rd(&out[0]).args.as_str(), rd(&out[0]).args.is_inline()), ("k1 ?", true));
    let (out, _) = run(&[(Dir::ToServer, &cmd(&["AUTH", "u", "pw"])), (Dir::ToClient, b"+OK\r\n")], &ParseConfig::default());
    assert_eq!((rd(&out[0]).args.as_str(), rd(&out[0]).key.as_deref()), ("? ?", None));
}

/// Command names and long scalar replies are shared between a connection's
/// commands; short replies (scalar or bulk) are kept in place.
#[test]
fn names_and_scalar_replies_shared_per_connection() {
    let mut chunks: Vec<(Dir, Vec<u8>)> = Vec::new();
    for i in 0..3 {
        chunks.push((Dir::ToServer, cmd(&["set", &format!("k{i}"), "v"])));
        chunks.push((Dir::ToClient, b"+OK\r\n".to_vec()));
        chunks.push((Dir::ToServer, cmd(&["get", &format!("k{i}")])));
        chunks.push((Dir::ToClient, b"$1\r\nv\r\n".to_vec()));
    }
    let chunks: Vec<(Dir, &[u8])> = chunks.iter().map(|(d, c)| (*d, c.as_slice())).collect();
    let (out, _) = run(&chunks, &ParseConfig::default());
    let r: Vec<&RedisTx> = out.iter().map(rd).collect();
    assert_eq!(r.len(), 6);
    assert_eq!((&*r[0].command, r[0].reply.as_deref(), &*r[5].command, r[5].reply.as_deref()), ("SET", Some("OK"), "GET", Some("v")));
    assert!(Arc::ptr_eq(&r[0].command, &r[4].command));
    assert!(r.iter().all(|t| t.reply.as_ref().unwrap().is_inline()));
    let long = format!("+{}\r\n", "x".repeat(SmallText::INLINE + 1));
    let ping = cmd(&["ping"]);
    let chunks = [(Dir::ToServer, &ping[..]), (Dir::ToClient, long.as_bytes()), (Dir::ToServer, &ping), (Dir::ToClient, long.as_bytes())];
    let (out, _) = run(&chunks, &ParseConfig::default());
    let (Some(a), Some(b)) = (rd(&out[0]).reply.as_ref().and_then(|r| r.shared()), rd(&out[1]).reply.as_ref().and_then(|r| r.shared())) else {
        panic!("{:?}", out)
    };
    assert!(Arc::ptr_eq(a, b) && a.len() == SmallText::INLINE + 1);
}
