use super::*;
use crate::detect::{by_content, Detected};
use crate::Protocol;

/// A control packet: fixed header (type, flags, remaining length) + body.
fn pkt(t: u8, flags: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![t << 4 | flags];
    let mut n = body.len();
    loop {
        let b = (n % 128) as u8;
        n /= 128;
        v.push(if n > 0 { b | 0x80 } else { b });
        if n == 0 {
            break;
        }
    }
    v.extend_from_slice(body);
    v
}

fn s16(s: &str) -> Vec<u8> {
    let mut v = (s.len() as u16).to_be_bytes().to_vec();
    v.extend_from_slice(s.as_bytes());
    v
}

fn connect(level: u8, client: &str) -> Vec<u8> {
    let mut b = s16("MQTT");
    b.extend_from_slice(&[level, 0x02, 0, 60]);
    if level >= 5 {
        // Properties: session expiry interval (0x11, four bytes).
        b.extend_from_slice(&[5, 0x11, 0, 0, 0, 10]);
    }
    b.extend_from_slice(&s16(client));
    pkt(1, 0, &b)
}

fn publish(qos: u8, topic: &str, id: u16, props: Option<&[u8]>, payload: &[u8]) -> Vec<u8> {
    let mut b = s16(topic);
    if qos > 0 {
        b.extend_from_slice(&id.to_be_bytes());
    }
    if let Some(p) = props {
        b.push(p.len() as u8);
        b.extend_from_slice(p);
    }
    b.extend_from_slice(payload);
    pkt(3, qos << 1, &b)
}

fn run(steps: &[(Dir, Vec<u8>)]) -> (Vec<Transaction>, ParseStats) {
    let mut p = MqttParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    for (i, (dir, b)) in steps.iter().enumerate() {
        p.data(*dir, i as i64 * 1000, b, &mut out);
    }
    p.finish(1_000_000, &mut out);
    (out, p.stats())
}

fn mq(t: &Transaction) -> &MqttTx {
    match &t.detail {
        Detail::Mqtt(m) => m,
        _ => panic!("not mqtt"),
    }
}

use Dir::{ToClient as C, ToServer as S};

#[test]
fn connect_publish_subscribe_ping_disconnect_3_1_1() {
    let (out, stats) = run(&[
        (S, connect(4, "sensor-1")),
        (C, pkt(2, 0, &[0, 0])),
        (S, publish(0, "a/b", 0, None, b"hello")),
        (S, publish(1, "a/c", 7, None, b"xyz")),
        (C, pkt(4, 0, &[0, 7])),
        (S, pkt(8, 2, &[[0, 9].as_slice(), &s16("t/#"), &[1], &s16("u/+"), &[2]].concat())),
        (C, pkt(9, 0, &[0, 9, 1, 0x80])),
        (S, pkt(12, 0, &[])),
        (C, pkt(13, 0, &[])),
        (S, pkt(14, 0, &[])),
    ]);
    assert_eq!(stats, ParseStats::default());
    let r: Vec<_> = out.iter().map(|t| (mq(t).packet_type, t.status)).collect();
    assert_eq!(
        r,
        [
            ("connect", TxStatus::Ok),
            ("publish", TxStatus::Ok),
            ("publish", TxStatus::Ok),
            ("subscribe", TxStatus::Error),
            ("pingreq", TxStatus::Ok),
            ("disconnect", TxStatus::Ok)
        ]
    );
    let c = mq(&out[0]);
    assert_eq!((c.version, c.client_id.as_deref(), c.reason_code), (Some(4), Some("sensor-1"), Some(0)));
    assert_eq!(out[0].latency_ns(), Some(1000));
    let q0 = mq(&out[1]);
    assert_eq!((q0.topic.as_deref(), q0.qos, q0.payload_bytes, q0.packet_id), (Some("a/b"), Some(0), Some(5), None));
    assert!(out[1].response.is_none());
    let q1 = mq(&out[2]);
    assert_eq!((q1.topic.as_deref(), q1.qos, q1.payload_bytes, q1.packet_id), (Some("a/c"), Some(1), Some(3), Some(7)));
    assert_eq!(out[2].response.unwrap().bytes, 4);
    let sub = mq(&out[3]);
    assert_eq!((sub.topic.as_deref(), sub.topics, sub.qos, sub.reason_code), (Some("t/#"), Some(2), Some(1), Some(0x80)));
    assert!(out[5].response.is_none());
}

#[test]
fn qos2_both_ways_and_v5_properties() {
    let (out, stats) = run(&[
        (S, connect(5, "")),
        // CONNACK with an empty property list.
        (C, pkt(2, 0, &[0, 0, 0])),
        // QoS 2 from the client, with a content-type property (0x03).
        (S, publish(2, "x", 1, Some(&[0x03, 0, 4, b't', b'e', b'x', b't']), b"12345678")),
        (C, pkt(5, 0, &[0, 1])), // PUBREC, reason code left out (0)
        (S, pkt(6, 0, &[0, 1, 0, 0])),
        (C, pkt(7, 0, &[0, 1, 0, 0])),
        // QoS 2 to the client, a message delivered: same id in the
        // server's space.
        (C, publish(2, "y", 1, Some(&[]), b"ab")),
        (S, pkt(5, 0, &[0, 1])),
        (C, pkt(6, 0, &[0, 1])),
        (S, pkt(7, 0, &[0, 1])),
        // QoS 1 refused: PUBACK with 0x87 (not authorized).
        (S, publish(1, "z", 2, Some(&[]), b"")),
        (C, pkt(4, 0, &[0, 2, 0x87, 0])),
        // The server disconnects: 0x8E, session taken over.
        (C, pkt(14, 0, &[0x8e, 0])),
    ]);
    assert_eq!(stats, ParseStats::default());
    let r: Vec<_> = out.iter().map(|t| (mq(t).packet_type, mq(t).from_server, t.status, mq(t).reason_code)).collect();
    assert_eq!(
        r,
        [
            ("connect", false, TxStatus::Ok, Some(0)),
            ("publish", false, TxStatus::Ok, Some(0)),
            ("publish", true, TxStatus::Ok, Some(0)),
            ("publish", false, TxStatus::Error, Some(0x87)),
            ("disconnect", true, TxStatus::Error, Some(0x8e)),
        ]
    );
    assert_eq!(mq(&out[0]).version, Some(5));
    let p = &out[1];
    assert_eq!(mq(p).payload_bytes, Some(8));
    // PUBLISH + PUBREL, PUBREC + PUBCOMP.
    assert_eq!(p.request.unwrap().bytes, publish(2, "x", 1, Some(&[0x03, 0, 4, b't', b'e', b'x', b't']), b"12345678").len() as u64 + 6);
    assert_eq!(p.response.unwrap().bytes, 4 + 6);
    assert_eq!(p.latency_ns(), Some(3000));
    // Delivered: the server's PUBLISH and PUBREL, no request.
    let d = &out[2];
    assert_eq!((mq(d).topic.as_deref(), mq(d).payload_bytes), (Some("y"), Some(2)));
    assert!(d.request.is_none());
    assert_eq!(d.response.unwrap().bytes, publish(2, "y", 1, Some(&[]), b"ab").len() as u64 + 4);
    assert_eq!(mq(&out[3]).payload_bytes, Some(0));
}

#[test]
fn split_packets_unanswered_and_unpaired() {
    let big = publish(1, "big/topic", 3, None, &[7u8; 5000]);
    let mut p = MqttParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    let c = connect(4, "c");
    for (i, b) in c.iter().enumerate() {
        // A CONNECT a byte at a time.
        p.data(S, i as i64, std::slice::from_ref(b), &mut out);
    }
    p.data(S, 100, &big[..3], &mut out);
    p.data(S, 101, &big[3..2000], &mut out);
    p.data(S, 102, &big[2000..], &mut out);
    // A PUBACK for an id never seen, and a SUBSCRIBE never answered.
    p.data(C, 103, &pkt(4, 0, &[0, 99]), &mut out);
    p.data(S, 104, &pkt(8, 2, &[[0, 5].as_slice(), &s16("q"), &[0]].concat()), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!((mq(&out[0]).packet_type, out[0].status, mq(&out[0]).packet_id), ("puback", TxStatus::NoRequest, Some(99)));
    p.expire(104 + ParseConfig::default().transaction_timeout_ns + 1, &mut out);
    assert_eq!(out.len(), 4);
    p.finish(10_000_000_000_000, &mut out);
    assert_eq!(out.len(), 4);
    let big_tx = out.iter().find(|t| mq(t).topic.as_deref() == Some("big/topic")).unwrap();
    assert_eq!((big_tx.status, mq(big_tx).payload_bytes), (TxStatus::NoResponse, Some(5000)));
    assert_eq!(big_tx.request.unwrap(), Span { first_ns: 100, last_ns: 102, bytes: big.len() as u64 });
    let conn = out.iter().find(|t| mq(t).packet_type == "connect").unwrap();
    assert_eq!(mq(conn).client_id.as_deref(), Some("c"));
    assert_eq!(p.stats().malformed, 1);
}

#[test]
fn a_gap_inside_a_payload_keeps_the_framing() {
    let big = publish(1, "t", 3, None, &[7u8; 3000]);
    let mut p = MqttParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    p.data(S, 0, &big[..1000], &mut out);
    p.gap(S, 1, 1000, &mut out);
    p.data(S, 2, &big[2000..], &mut out);
    p.data(C, 3, &pkt(4, 0, &[0, 3]), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].status, mq(&out[0]).payload_bytes), (TxStatus::Ok, Some(3000)));
    // A gap between packets loses the direction.
    p.gap(S, 4, 10, &mut out);
    p.data(S, 5, &pkt(12, 0, &[]), &mut out);
    assert!(!p.gave_up());
    p.gap(C, 6, 10, &mut out);
    assert!(p.gave_up());
    assert_eq!(p.stats().gaps, 3);
    assert_eq!(p.stats().unparsed_bytes, 22);
}

#[test]
fn connect_is_detected_by_content() {
    assert_eq!(by_content(Dir::ToServer, &connect(4, "x")), Detected::Protocol(Protocol::Mqtt));
    assert_eq!(by_content(Dir::ToServer, &connect(5, "x")), Detected::Protocol(Protocol::Mqtt));
    let mut v31 = s16("MQIsdp");
    v31.extend_from_slice(&[3, 2, 0, 60]);
    v31.extend_from_slice(&s16("old"));
    assert_eq!(by_content(Dir::ToServer, &pkt(1, 0, &v31)), Detected::Protocol(Protocol::Mqtt));
    assert_eq!(by_content(Dir::ToClient, &connect(4, "x")), Detected::Nothing);
    assert_eq!(probe(Dir::ToServer, &pkt(12, 0, &[])), crate::detect::Probe::NotForUs);
}

#[test]
fn fuzzed_bytes_never_panic() {
    let mut seed = 11u64;
    let pieces: Vec<Vec<u8>> = vec![
        connect(5, "c"),
        connect(4, "c"),
        publish(2, "x", 1, Some(&[1, 2]), b"abc"),
        pkt(5, 0, &[0, 1]),
        pkt(6, 0, &[0, 1]),
        pkt(7, 0, &[0, 1, 0x80]),
        pkt(9, 0, &[0, 1, 0, 0]),
        vec![0x30, 0xff, 0xff, 0xff, 0x7f],
        vec![0xe0],
    ];
    for _ in 0..3000 {
        let mut p = MqttParser::new(&ParseConfig { max_header_bytes: 64, max_text_bytes: 2, ..ParseConfig::default() });
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
        p.finish(0, &mut out);
    }
}
