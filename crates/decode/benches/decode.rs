//! ns/packet for `Decoder::decode` on in-memory Ethernet/IPv4/TCP packets.
//!
//! `cargo bench -p wirelog-decode` (no external harness: the numbers are a
//! best-of-N average over a batch, enough to watch the per-packet budget).

use std::hint::black_box;
use std::time::Instant;

use wirelog_decode::{checksum, ChecksumMode, DecodeConfig, Decoded, Decoder, LinkType, Transport};

/// A valid Ethernet/IPv4/TCP packet (checksums filled in) with `payload` bytes.
fn packet(i: u32, payload: usize) -> Vec<u8> {
    let mut p = Vec::with_capacity(14 + 40 + payload);
    p.extend_from_slice(&[
        0x00, 0x10, 0xdb, 0x88, 0xd2, 0xef, 0xc8, 0xbc, 0xc8, 0x96, 0xd2, 0xa0, 0x08, 0x00,
    ]);
    let total = (40 + payload) as u16;
    let src = [10, 0, (i >> 8) as u8, i as u8];
    let dst = [192, 168, 1, 1];
    let mut ip = [
        0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let c = checksum::checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(&ip);
    let mut tcp = vec![0u8; 20 + payload];
    tcp[0..2].copy_from_slice(&(40000 + (i % 20000) as u16).to_be_bytes());
    tcp[2..4].copy_from_slice(&443u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&(i.wrapping_mul(2654435761)).to_be_bytes());
    tcp[8..12].copy_from_slice(&7u32.to_be_bytes());
    tcp[12] = 0x50;
    tcp[13] = 0x18;
    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
    for (k, b) in tcp[20..].iter_mut().enumerate() {
        *b = (k as u32 ^ i) as u8;
    }
    let sum = checksum::sum(
        &tcp,
        checksum::pseudo_header_v4(&src, &dst, 6, tcp.len() as u32),
    );
    tcp[16..18].copy_from_slice(&(!checksum::fold(sum)).to_be_bytes());
    p.extend_from_slice(&tcp);
    p
}

/// `cargo bench -p wirelog-decode -- WORD` runs only the cases whose name has WORD.
fn selected(name: &str) -> bool {
    std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .all(|w| name.contains(&w))
}

fn run(name: &str, packets: &[Vec<u8>], verify: bool) {
    if !selected(name) {
        return;
    }
    let mut d = Decoder::new(DecodeConfig {
        checksums: if verify { ChecksumMode::Verify } else { ChecksumMode::Ignore },
        ..Default::default()
    });
    let rounds = 200 * 4096 / packets.len();
    let mut best = f64::MAX;
    let mut sink = 0u64;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..rounds {
            for p in packets {
                match d.decode(LinkType::ETHERNET, 0, black_box(p)) {
                    Decoded::Ip(ip) => {
                        if let Transport::Tcp {
                            seq, payload_len, ..
                        } = ip.transport
                        {
                            sink = sink.wrapping_add(u64::from(seq) + u64::from(payload_len));
                        }
                    }
                    Decoded::Skipped(_) => sink += 1,
                }
            }
        }
        let ns = t.elapsed().as_nanos() as f64 / (rounds * packets.len()) as f64;
        best = best.min(ns);
    }
    black_box(sink);
    println!("{name:<45} {best:6.2} ns/packet");
}

/// The floor: walking the same packets and reading a few header bytes.
fn baseline(packets: &[Vec<u8>]) {
    if !selected("baseline") {
        return;
    }
    let rounds = 200 * 4096 / packets.len();
    let mut best = f64::MAX;
    let mut sink = 0u64;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..rounds {
            for p in packets {
                let p = black_box(p);
                sink = sink.wrapping_add(u64::from(p[12]) + u64::from(p[23]) + u64::from(p[40]));
            }
        }
        best = best.min(t.elapsed().as_nanos() as f64 / (rounds * packets.len()) as f64);
    }
    black_box(sink);
    println!(
        "{:<45} {best:6.2} ns/packet",
        "baseline: read 3 header bytes"
    );
}

fn main() {
    // Mostly small packets, as on a real link (ACKs, requests), some full-size.
    let sizes = [0usize, 0, 0, 64, 200, 0, 1460, 0, 512, 0];
    let mixed: Vec<Vec<u8>> = (0..4096u32)
        .map(|i| packet(i, sizes[i as usize % sizes.len()]))
        .collect();
    let acks: Vec<Vec<u8>> = (0..4096u32).map(|i| packet(i, 0)).collect();
    baseline(&mixed);
    run("eth/ipv4/tcp, no checksum verification", &mixed, false);
    run("eth/ipv4/tcp, pure ACKs, no verification", &acks, false);
    run(
        "eth/ipv4/tcp, checksums verified (mixed sizes)",
        &mixed,
        true,
    );
    run("eth/ipv4/tcp, checksums verified (pure ACKs)", &acks, true);
    // Few enough packets to stay in L1/L2: the decoder's own cost, without
    // cache misses on packet bytes.
    let hot: Vec<Vec<u8>> = mixed[..128].to_vec();
    run("cache-hot 128 packets, no verification", &hot, false);
    run("cache-hot 128 packets, checksums verified", &hot, true);
}
