use super::*;
use crate::detect::{by_content, Detected};
use crate::testutil::{run_parser, tcp_events};
use crate::Protocol;

fn fr(ty: u8, channel: u16, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![ty];
    v.extend_from_slice(&channel.to_be_bytes());
    v.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    v.extend_from_slice(payload);
    v.push(0xce);
    v
}

fn meth(channel: u16, class: u16, id: u16, args: &[u8]) -> Vec<u8> {
    fr(1, channel, &[&class.to_be_bytes()[..], &id.to_be_bytes(), args].concat())
}

fn ss(s: &str) -> Vec<u8> {
    let mut v = vec![s.len() as u8];
    v.extend_from_slice(s.as_bytes());
    v
}

/// A content header (basic class) with a content-type, and the body.
fn content(channel: u16, body: &[u8], ctype: &str) -> Vec<u8> {
    let mut h = vec![0, 60, 0, 0];
    h.extend_from_slice(&(body.len() as u64).to_be_bytes());
    h.extend_from_slice(&0x8000u16.to_be_bytes());
    h.extend_from_slice(&ss(ctype));
    [fr(2, channel, &h), fr(3, channel, body)].concat()
}

fn publish(channel: u16, exchange: &str, key: &str, body: &[u8]) -> Vec<u8> {
    let args = [&[0u8, 0][..], &ss(exchange), &ss(key), &[0]].concat();
    [meth(channel, 60, 40, &args), content(channel, body, "text/plain")].concat()
}

fn am(t: &Transaction) -> &AmqpTx {
    match &t.detail {
        Detail::Amqp(a) => a,
        _ => panic!("not amqp"),
    }
}

fn run(steps: &[(Dir, Vec<u8>)]) -> (Vec<Transaction>, ParseStats) {
    let mut p = AmqpParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    for (i, (dir, b)) in steps.iter().enumerate() {
        p.data(*dir, i as i64 * 1000, b, &mut out);
    }
    p.finish(1_000_000, &mut out);
    (out, p.stats())
}

use Dir::{ToClient as C, ToServer as S};

#[test]
fn declare_publish_get_close() {
    let (out, stats) = run(&[
        (S, PROTOCOL_HEADER.to_vec()),
        (S, meth(1, 20, 10, &ss(""))),
        (C, meth(1, 20, 11, &[0, 0, 0, 0])),
        // queue.declare "" exclusive; the server names it.
        (S, meth(1, 50, 10, &[&[0u8, 0][..], &ss(""), &[0b100], &[0, 0, 0, 0]].concat())),
        (C, meth(1, 50, 11, &[&ss("amq.gen-1")[..], &[0, 0, 0, 3], &[0, 0, 0, 0]].concat())),
        (S, publish(1, "", "amq.gen-1", b"hello")),
        (S, meth(1, 60, 70, &[&[0u8, 0][..], &ss("amq.gen-1"), &[1]].concat())),
        (C, [meth(1, 60, 71, &[&7u64.to_be_bytes()[..], &[0], &ss(""), &ss("amq.gen-1"), &[0, 0, 0, 2]].concat()), content(1, b"hello", "text/plain")].concat()),
        (S, meth(1, 60, 70, &[&[0u8, 0][..], &ss("amq.gen-1"), &[0]].concat())),
        (C, meth(1, 60, 72, &ss(""))),
        // A passive declare of a queue that is not there: the server
        // closes the channel, 404, which answers it.
        (S, meth(1, 50, 10, &[&[0u8, 0][..], &ss("x"), &[1], &[0, 0, 0, 0]].concat())),
        (C, meth(1, 20, 40, &[&404u16.to_be_bytes()[..], &ss("NOT_FOUND - no queue 'x'"), &[0, 50, 0, 10]].concat())),
        (S, meth(1, 20, 41, &[])),
    ]);
    assert_eq!(stats, ParseStats::default());
    let r: Vec<_> = out.iter().map(|t| (am(t).method, am(t).answer, t.status)).collect();
    assert_eq!(
        r,
        [
            ("channel.open", Some("channel.open-ok"), TxStatus::Ok),
            ("queue.declare", Some("queue.declare-ok"), TxStatus::Ok),
            ("basic.publish", None, TxStatus::Ok),
            ("basic.get", Some("basic.get-ok"), TxStatus::Ok),
            ("basic.get", Some("basic.get-empty"), TxStatus::Ok),
            ("queue.declare", Some("channel.close"), TxStatus::Error),
            ("channel.close", Some("channel.close-ok"), TxStatus::Error),
        ]
    );
    assert_eq!((am(&out[5]).reply_code, am(&out[5]).flags.as_str()), (Some(404), "passive"));
    let d = am(&out[1]);
    assert_eq!((d.queue.as_deref(), d.flags.as_str(), d.messages), (Some("amq.gen-1"), "exclusive", Some(3)));
    let p = am(&out[2]);
    assert_eq!((p.exchange.as_deref(), p.routing_key.as_deref(), p.body_bytes, p.content_type.as_deref()), (Some(""), Some("amq.gen-1"), Some(5), Some("text/plain")));
    assert!(out[2].response.is_none());
    let g = am(&out[3]);
    assert_eq!((g.delivery_tag, g.body_bytes, g.messages, g.flags.as_str()), (Some(7), Some(5), Some(2), "no-ack"));
    assert_eq!(out[3].latency_ns(), Some(1000));
    let c = am(&out[6]);
    assert_eq!((c.from_server, c.reply_code, c.reply_text.as_deref()), (true, Some(404), Some("NOT_FOUND - no queue 'x'")));
    // The server's exchange: its frames are the response, no request.
    assert!(out[6].request.is_none() && out[6].latency_ns().is_none());
}

#[test]
fn confirms_pair_with_publishes() {
    let (out, stats) = run(&[
        (S, meth(1, 85, 10, &[0])),
        (C, meth(1, 85, 11, &[])),
        (S, [publish(1, "ex", "a", b"1"), publish(1, "ex", "b", b"22"), publish(1, "ex", "c", b"333")].concat()),
        // ack 2 with multiple: the first two; nack 3.
        (C, meth(1, 60, 80, &[&2u64.to_be_bytes()[..], &[1]].concat())),
        (C, meth(1, 60, 120, &[&3u64.to_be_bytes()[..], &[0]].concat())),
        // A delivery and the client's ack of it.
        (C, [meth(1, 60, 60, &[&ss("ctag")[..], &9u64.to_be_bytes(), &[1], &ss("ex"), &ss("k")].concat()), content(1, &[0; 300], "application/json")].concat()),
        (S, meth(1, 60, 80, &[&9u64.to_be_bytes()[..], &[0]].concat())),
    ]);
    assert_eq!(stats, ParseStats::default());
    let r: Vec<_> = out.iter().map(|t| (am(t).method, am(t).delivery_tag, am(t).answer, t.status)).collect();
    assert_eq!(
        r,
        [
            ("confirm.select", None, Some("confirm.select-ok"), TxStatus::Ok),
            ("basic.publish", Some(1), Some("basic.ack"), TxStatus::Ok),
            ("basic.publish", Some(2), Some("basic.ack"), TxStatus::Ok),
            ("basic.publish", Some(3), Some("basic.nack"), TxStatus::Error),
            ("basic.deliver", Some(9), None, TxStatus::Ok),
            ("basic.ack", Some(9), None, TxStatus::Ok),
        ]
    );
    assert_eq!(out[1].latency_ns(), Some(1000));
    assert_eq!(out[1].response.unwrap().bytes, 21);
    assert_eq!(out[2].response.unwrap().bytes, 0);
    let d = &out[4];
    assert!(am(d).from_server && d.request.is_none());
    assert_eq!((am(d).body_bytes, am(d).flags.as_str(), am(d).routing_key.as_deref()), (Some(300), "redelivered", Some("k")));
}

#[test]
fn split_frames_no_wait_and_unanswered() {
    let mut p = AmqpParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    // A publish whose body (100 kB) comes in many pieces.
    let body = vec![b'x'; 100_000];
    let all = publish(3, "big", "k", &body);
    for (i, c) in all.chunks(1448).enumerate() {
        p.data(S, i as i64, c, &mut out);
    }
    assert_eq!(out.len(), 1);
    assert_eq!((am(&out[0]).body_bytes, out[0].request.unwrap().bytes), (Some(100_000), all.len() as u64));
    // queue.bind with no-wait: alone, at once.
    p.data(S, 100, &meth(3, 50, 20, &[&[0u8, 0][..], &ss("q"), &ss("ex"), &ss("rk"), &[1], &[0, 0, 0, 0]].concat()), &mut out);
    assert_eq!(out.len(), 2);
    assert_eq!((am(&out[1]).method, am(&out[1]).flags.as_str(), out[1].status), ("queue.bind", "no-wait", TxStatus::Ok));
    // A declare never answered; an answer never asked.
    p.data(S, 101, &meth(3, 40, 10, &[&[0u8, 0][..], &ss("logs"), &ss("fanout"), &[2], &[0, 0, 0, 0]].concat()), &mut out);
    p.data(C, 102, &meth(3, 50, 21, &[]), &mut out);
    assert_eq!(out[2].status, TxStatus::NoRequest);
    p.finish(103, &mut out);
    let d = &out[3];
    assert_eq!((am(d).method, am(d).exchange_type.as_deref(), am(d).flags.as_str(), d.status), ("exchange.declare", Some("fanout"), "durable", TxStatus::NoResponse));
    assert_eq!(p.stats().malformed, 1);
}

#[test]
fn protocol_header_is_detected() {
    assert_eq!(by_content(Dir::ToServer, PROTOCOL_HEADER), Detected::Protocol(Protocol::Amqp));
    assert_eq!(by_content(Dir::ToServer, b"AMQP\x00\x00\x09\x00"), Detected::Nothing);
    assert_eq!(by_content(Dir::ToClient, PROTOCOL_HEADER), Detected::Nothing);
}

/// Packetbeat's captures (shared/testdata/packetbeat2): the methods in
/// order, as Packetbeat's system tests list them, with the set-up it hides.
#[test]
fn packetbeat_captures() {
    let ev = tcp_events("packetbeat2/pcaps/amqp_publish.pcap", &[5672]);
    let txs = run_parser(&ev, || Box::new(AmqpParser::new(&ParseConfig::default())));
    let all: Vec<_> = txs.iter().flatten().collect();
    let methods: Vec<_> = all.iter().map(|t| am(t).method).collect();
    assert_eq!(
        methods,
        [
            "connection.start",
            "connection.tune",
            "connection.open",
            "channel.open",
            "queue.declare",
            "basic.publish",
            "channel.close",
            "connection.close"
        ],
        "{all:#?}"
    );
    assert!(all.iter().all(|t| t.status == TxStatus::Ok), "{all:#?}");
    let publish = am(all[5]);
    assert_eq!((publish.routing_key.as_deref(), publish.body_bytes, publish.content_type.as_deref()), (Some("hello"), Some(5), Some("text/plain")));

    let ev = tcp_events("packetbeat2/pcaps/amqp_emit_receive.pcap", &[5672]);
    let txs = run_parser(&ev, || Box::new(AmqpParser::new(&ParseConfig::default())));
    let mut all: Vec<_> = txs.iter().flatten().collect();
    all.sort_by_key(|t| t.ts_ns());
    let shown: Vec<_> = all.iter().map(|t| am(t).method).filter(|m| !m.starts_with("connection.") && !m.starts_with("channel.") && *m != "basic.qos").collect();
    assert_eq!(shown, ["exchange.declare", "queue.declare", "queue.bind", "basic.consume", "exchange.declare", "basic.publish", "basic.deliver"], "{all:#?}");
    let deliver = all.iter().find(|t| am(t).method == "basic.deliver").unwrap();
    assert_eq!((am(deliver).delivery_tag, am(deliver).exchange.as_deref(), am(deliver).flags.as_str()), (Some(1), Some("logs"), ""));
}

#[test]
fn fuzzed_bytes_never_panic() {
    let mut seed = 5u64;
    let pieces: Vec<Vec<u8>> = vec![
        PROTOCOL_HEADER.to_vec(),
        publish(1, "e", "k", b"abc"),
        meth(1, 85, 10, &[0]),
        meth(1, 85, 11, &[]),
        meth(1, 60, 80, &[&0u64.to_be_bytes()[..], &[1]].concat()),
        meth(1, 60, 70, &[0, 0, 3]),
        meth(1, 60, 71, &[1, 2]),
        fr(3, 1, b"zz"),
        fr(2, 1, &[0, 60, 0, 0, 0xff]),
        vec![1, 0, 1, 0xff, 0xff, 0xff, 0xff],
    ];
    for _ in 0..3000 {
        let mut p = AmqpParser::new(&ParseConfig { max_header_bytes: 64, max_text_bytes: 2, ..ParseConfig::default() });
        let mut out = Vec::new();
        for step in 0..10 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let piece = &pieces[(seed >> 33) as usize % pieces.len()];
            let cut = (seed >> 20) as usize % (piece.len() + 1);
            let dir = if seed & 1 == 0 { S } else { C };
            if seed & 6 == 6 {
                p.gap(dir, step, (seed >> 40) % 9, &mut out);
            } else {
                p.data(dir, step, &piece[cut..], &mut out);
            }
        }
        p.expire(1 << 40, &mut out);
        p.finish(0, &mut out);
    }
}
