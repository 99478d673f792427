//! `wirelog-bench streams --conns N [--rounds R]`: memory with many parsed
//! streams open at once, and after they end.
//!
//! Each round opens N HTTP/1.1 connections at once (handshake, a request
//! each, the response header and the first half of its body; every tenth
//! connection also gets its last body segment before the middle one, so the
//! reassembler holds it out of order), then completes and closes them all
//! and lets the close timers run. Rounds use different addresses. Printed
//! per round: heap bytes (counted by the allocator) and resident memory with
//! all streams open and after they ended, transactions, out-of-order bytes
//! held at the peak and after the end. "No growth" means every round ends
//! with the heap of the first.

use wirelog_packet::{LinkType, Packet};
use wirelog_probe::{AppConfig, ChecksumMode, Probe, ProbeConfig, TrackerConfig};
use wirelog_record::Batch;

const BODY: usize = 3000;
const SEC: i64 = 1_000_000_000;

fn rss_mb() -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// One IPv4/TCP packet (LINKTYPE_IPV4). (Every header field is an argument:
/// the call sites read like the packets they make.) Checksums are left zero: the
/// benchmark reads like `wirelog read -C`.
#[allow(clippy::too_many_arguments)]
fn packet(
    buf: &mut Vec<u8>,
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    payload: &[u8],
) {
    buf.clear();
    let total = 20 + 20 + payload.len();
    buf.extend_from_slice(&[
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        0,
        0x40,
        0,
        64,
        6,
        0,
        0,
    ]);
    buf.extend_from_slice(&src);
    buf.extend_from_slice(&dst);
    buf.extend_from_slice(&sport.to_be_bytes());
    buf.extend_from_slice(&dport.to_be_bytes());
    buf.extend_from_slice(&seq.to_be_bytes());
    buf.extend_from_slice(&ack.to_be_bytes());
    buf.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
    buf.extend_from_slice(payload);
}

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const PSH_ACK: u8 = 0x18;
const ACK: u8 = 0x10;

pub fn run(conns: usize, rounds: usize, parse: bool) -> Result<(), String> {
    let mut tracker = Probe::new(ProbeConfig {
        checksums: ChecksumMode::Ignore,
        track: TrackerConfig {
            max_connections: conns.max(1 << 16) * 2,
            uid_seed: Some(1),
            app: parse.then(AppConfig::default),
            ..TrackerConfig::default()
        },
        ..ProbeConfig::default()
    });
    let mut buf = Vec::with_capacity(4096);
    let mut ts: i64 = 1_700_000_000 * SEC;
    let response_head =
        format!("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {BODY}\r\n\r\n");
    let body = vec![b'x'; BODY];
    let (b1, b2, b3) = (
        &body[..BODY / 2],
        &body[BODY / 2..BODY * 3 / 4],
        &body[BODY * 3 / 4..],
    );
    let heap_start = crate::live_heap_bytes();
    for round in 0..rounds {
        let server = [10, 200, round as u8, 1];
        let client = |i: usize| {
            [
                10,
                (round as u8).wrapping_add(1),
                (i >> 16) as u8,
                (i >> 8) as u8,
            ]
        };
        let port = |i: usize| 1024 + (i & 0xff) as u16 * 200 + (i >> 24) as u16;
        let feed = |tracker: &mut Probe, buf: &[u8], ts: i64| {
            let _ = tracker.packet(&Packet::new(LinkType::IPV4, ts, buf));
        };
        let requests: Vec<String> = (0..conns)
            .map(|i| {
                format!(
                    "GET /item/{i} HTTP/1.1\r\nHost: bench\r\nUser-Agent: wirelog-bench\r\n\r\n"
                )
            })
            .collect();
        // Open everything.
        for (i, req) in requests.iter().enumerate() {
            let (c, p) = (client(i), port(i));
            ts += 1000;
            packet(&mut buf, c, server, p, 80, 1000, 0, SYN, &[]);
            feed(&mut tracker, &buf, ts);
            packet(&mut buf, server, c, 80, p, 5000, 1001, SYN | ACK, &[]);
            feed(&mut tracker, &buf, ts);
            packet(&mut buf, c, server, p, 80, 1001, 5001, ACK, &[]);
            feed(&mut tracker, &buf, ts);
            packet(
                &mut buf,
                c,
                server,
                p,
                80,
                1001,
                5001,
                PSH_ACK,
                req.as_bytes(),
            );
            feed(&mut tracker, &buf, ts);
            let mut s = 5001u32;
            packet(
                &mut buf,
                server,
                c,
                80,
                p,
                s,
                1001 + req.len() as u32,
                PSH_ACK,
                response_head.as_bytes(),
            );
            feed(&mut tracker, &buf, ts);
            s += response_head.len() as u32;
            packet(
                &mut buf,
                server,
                c,
                80,
                p,
                s,
                1001 + req.len() as u32,
                PSH_ACK,
                b1,
            );
            feed(&mut tracker, &buf, ts);
            if i % 10 == 0 {
                // The last part first: held by the reassembler until the middle arrives.
                let s3 = s + (b1.len() + b2.len()) as u32;
                packet(
                    &mut buf,
                    server,
                    c,
                    80,
                    p,
                    s3,
                    1001 + req.len() as u32,
                    PSH_ACK,
                    b3,
                );
                feed(&mut tracker, &buf, ts);
            }
        }
        let open_rss = rss_mb();
        let open_heap = crate::live_heap_bytes();
        let held = tracker.tracker().stream_buffer_bytes();
        let live = tracker.active_connections();
        // Complete and close everything.
        for (i, req) in requests.iter().enumerate() {
            let (c, p) = (client(i), port(i));
            ts += 1000;
            let cack = 1001 + req.len() as u32;
            let s2 = 5001 + (response_head.len() + b1.len()) as u32;
            packet(&mut buf, server, c, 80, p, s2, cack, PSH_ACK, b2);
            feed(&mut tracker, &buf, ts);
            let s3 = s2 + b2.len() as u32;
            if i % 10 != 0 {
                packet(&mut buf, server, c, 80, p, s3, cack, PSH_ACK, b3);
                feed(&mut tracker, &buf, ts);
            }
            let end = s3 + b3.len() as u32;
            packet(&mut buf, c, server, p, 80, cack, end, FIN | ACK, &[]);
            feed(&mut tracker, &buf, ts);
            packet(&mut buf, server, c, 80, p, end, cack + 1, FIN | ACK, &[]);
            feed(&mut tracker, &buf, ts);
            packet(&mut buf, c, server, p, 80, cack + 1, end + 1, ACK, &[]);
            feed(&mut tracker, &buf, ts);
        }
        // Let the close timers remove every connection.
        ts += 60 * SEC;
        tracker.advance(ts);
        let mut batch = Batch::default();
        tracker.drain(&mut batch);
        let records = batch.conns.len();
        let ok = batch
            .txs
            .iter()
            .filter(|t| t.tx.status == wirelog_parse::TxStatus::Ok)
            .count();
        let n_txs = batch.txs.len();
        drop(batch);
        drop(requests);
        let heap_after = crate::live_heap_bytes();
        println!(
            "round={} conns={} open_connections={} rss_open_mb={:.0} heap_open_mb={:.1} out_of_order_bytes_held={} records={} transactions={} ok={} connections_left={} out_of_order_bytes_after={} rss_after_mb={:.0} heap_after_mb={:.1} heap_before_first_round_mb={:.1}",
            round + 1,
            conns,
            live,
            open_rss,
            open_heap as f64 / 1048576.0,
            held,
            records,
            n_txs,
            ok,
            tracker.active_connections(),
            tracker.tracker().stream_buffer_bytes(),
            rss_mb(),
            heap_after as f64 / 1048576.0,
            heap_start as f64 / 1048576.0
        );
    }
    Ok(())
}
