use super::*;
use crate::testutil::{run_parser, tcp_events};

fn kt(t: &Transaction) -> &KafkaTx {
    match &t.detail {
        Detail::Kafka(k) => k,
        _ => panic!("not kafka"),
    }
}

/// A capture made here: a Kafka 4.1.1 broker (KRaft, one node) and
/// kafka-python 3.0: an admin client creating topic `orders` (2
/// partitions), a producer sending 10 messages with acks all, a consumer in
/// group `g1` reading them and committing. tshark counts 10 Produce v9,
/// 16 Fetch v12, 7 Metadata v13, 7 ApiVersions v4, 5 JoinGroup v7, 5
/// FindCoordinator v6 requests, ... (`-Y kafka -e kafka.request_key -e kafka.api_version`).
const CAPTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/kafka-kraft-4.1.1.pcap");

#[test]
fn a_real_broker_conversation() {
    let ev = tcp_events(CAPTURE, &[9092]);
    let txs = run_parser(&ev, || Box::new(KafkaParser::new(&ParseConfig::default())));
    let all: Vec<_> = txs.iter().flatten().collect();
    let count = |api: &str| all.iter().filter(|t| kt(t).api == api).count();
    assert_eq!(
        [count("produce"), count("fetch"), count("metadata"), count("api_versions"), count("join_group"), count("find_coordinator")],
        [10, 16, 7, 7, 5, 5],
        "{all:#?}"
    );
    // ApiVersions v4 is newer than this broker's: it answers
    // UNSUPPORTED_VERSION (tshark: "Unsupported API version") and the
    // client retries with v3.
    for t in &all {
        let k = kt(t);
        assert!(t.request.is_some(), "{t:#?}");
        if k.api == "api_versions" && k.error.is_some() {
            assert_eq!((k.error.as_deref(), t.status), (Some("UNSUPPORTED_VERSION"), TxStatus::Error));
        }
    }
    let produced: u64 = all.iter().filter(|t| kt(t).api == "produce").map(|t| kt(t).records.unwrap()).sum();
    assert_eq!(produced, 10);
    for t in all.iter().filter(|t| kt(t).api == "produce") {
        let k = kt(t);
        assert_eq!((k.acks, k.topic.as_deref(), k.partitions, k.client_id.as_deref(), t.status), (Some("-1"), Some("orders"), Some(1), Some("wl-producer"), TxStatus::Ok), "{t:#?}");
        assert_eq!(k.throttle_ms, Some(0));
    }
    let fetched: u64 = all.iter().filter(|t| kt(t).api == "fetch").filter_map(|t| kt(t).records).sum();
    assert_eq!(fetched, 10);
    let f = all.iter().find(|t| kt(t).api == "fetch").unwrap();
    assert_eq!((kt(f).max_wait_ms, kt(f).client_id.as_deref()), (Some(200), Some("wl-consumer")));
    let groups: Vec<_> = all.iter().filter(|t| matches!(kt(t).api, "join_group" | "sync_group" | "heartbeat" | "offset_commit")).map(|t| kt(t).group.as_deref()).collect();
    assert!(!groups.is_empty() && groups.iter().all(|g| *g == Some("g1")), "{groups:?}");
}

fn req(key: u16, version: u16, corr: u32, client: &str, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::new();
    m.extend_from_slice(&key.to_be_bytes());
    m.extend_from_slice(&version.to_be_bytes());
    m.extend_from_slice(&corr.to_be_bytes());
    m.extend_from_slice(&(client.len() as u16).to_be_bytes());
    m.extend_from_slice(client.as_bytes());
    m.extend_from_slice(body);
    let mut v = (m.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(&m);
    v
}

fn resp(corr: u32, body: &[u8]) -> Vec<u8> {
    let mut v = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    v.extend_from_slice(&corr.to_be_bytes());
    v.extend_from_slice(body);
    v
}

#[test]
fn acks_zero_out_of_order_and_unknown_apis() {
    let mut p = KafkaParser::new(&ParseConfig::default());
    let mut out = Vec::new();
    // Produce v2 (not flexible), acks 0, one topic, one partition, no records.
    let body = [&0i16.to_be_bytes()[..], &1000i32.to_be_bytes(), &1i32.to_be_bytes(), &1u16.to_be_bytes(), b"t", &1i32.to_be_bytes(), &0i32.to_be_bytes(), &(-1i32).to_be_bytes()].concat();
    p.data(Dir::ToServer, 0, &req(0, 2, 1, "c", &body), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!((kt(&out[0]).acks, out[0].status, kt(&out[0]).topic.as_deref()), (Some("0"), TxStatus::Ok, Some("t")));
    // Heartbeat v0 and an unknown API, answered in the other order.
    p.data(Dir::ToServer, 1, &[req(12, 0, 2, "c", &[&2u16.to_be_bytes()[..], b"gg"].concat()), req(999, 0, 3, "c", &[])].concat(), &mut out);
    p.data(Dir::ToClient, 2, &resp(3, &[]), &mut out);
    p.data(Dir::ToClient, 3, &resp(2, &27i16.to_be_bytes()), &mut out);
    p.data(Dir::ToClient, 4, &resp(77, &[]), &mut out);
    let r: Vec<_> = out.iter().map(|t| (kt(t).api, kt(t).correlation_id, t.status, kt(t).error.as_deref())).collect();
    assert_eq!(
        r,
        [
            ("produce", 1, TxStatus::Ok, None),
            ("unknown", 3, TxStatus::Ok, None),
            ("heartbeat", 2, TxStatus::Error, Some("REBALANCE_IN_PROGRESS")),
            ("unknown", 77, TxStatus::NoRequest, None),
        ]
    );
    assert_eq!(kt(&out[2]).group.as_deref(), Some("gg"));
    // A request never answered.
    p.data(Dir::ToServer, 5, &req(3, 0, 9, "c", &0i32.to_be_bytes()), &mut out);
    p.finish(6, &mut out);
    assert_eq!((kt(&out[4]).api, out[4].status), ("metadata", TxStatus::NoResponse));
    // A size no Kafka message has loses the framing.
    p.data(Dir::ToServer, 7, &[0xff, 0xff, 0xff, 0xff, 0], &mut out);
    assert_eq!(p.stats().unparsed_bytes, 5);
}

#[test]
fn fuzzed_bytes_never_panic() {
    let mut seed = 3u64;
    let pieces: Vec<Vec<u8>> = vec![
        req(0, 9, 1, "c", &[1, 0xff, 0xff, 0, 0, 0, 1, 2, 2, b't', 2, 0, 0, 0, 0, 5, 1, 2, 3, 4]),
        req(1, 12, 2, "c", &[0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, b't']),
        req(3, 13, 3, "c", &[0, 2, 0]),
        resp(1, &[0, 2, 2, b't', 2, 0, 0, 0, 0, 0, 3]),
        resp(2, &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2]),
        resp(3, &[0, 0xff, 0xff, 0xff]),
        vec![0, 0, 0, 2, 0],
    ];
    for _ in 0..3000 {
        let mut p = KafkaParser::new(&ParseConfig { max_header_bytes: 64, max_text_bytes: 2, ..ParseConfig::default() });
        let mut out = Vec::new();
        for step in 0..10 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let piece = &pieces[(seed >> 33) as usize % pieces.len()];
            let cut = (seed >> 20) as usize % (piece.len() + 1);
            let dir = if seed & 1 == 0 { Dir::ToServer } else { Dir::ToClient };
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
