//! Packet sequences through decode and connection tracking: no panic, and the
//! tracker's output stays consistent with its input.
//!
//! The input is a series of `[flags][dt][len][bytes]` records: `flags` picks
//! the link type (raw IPv4/IPv6 or Ethernet) and whether checksums are
//! verified, `dt` advances packet time (up to ~4 minutes, so every timer
//! fires), the bytes are one packet. Packets often belong to the same few
//! connections because the fuzzer mutates one seed, so the TCP state machine,
//! flips, reuse and gap accounting are all reached.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wirelog_packet::{LinkType, Packet};
use wirelog_probe::{AppConfig, ChecksumMode, Probe, ProbeConfig, TrackerConfig};
use wirelog_record::Batch;

fuzz_target!(|data: &[u8]| {
    let verify = data.first().is_some_and(|b| b & 0x80 != 0);
    // Bit 6 of the first byte turns application parsing on (reassembly and
    // parsers behind the tracker, with a tiny stream budget).
    let app = data.first().is_some_and(|b| b & 0x40 != 0).then(|| AppConfig {
        total_buffer_bytes: 4096,
        stream_buffer_bytes: 1024,
        ..AppConfig::default()
    });
    let mut probe = Probe::new(ProbeConfig {
        checksums: if verify { ChecksumMode::Verify } else { ChecksumMode::Ignore },
        track: TrackerConfig { max_connections: 16, uid_seed: Some(1), app, ..TrackerConfig::default() },
        ..ProbeConfig::default()
    });
    let mut batch = Batch::default();
    let mut ts: i64 = 1_700_000_000_000_000_000;
    let mut rest = data;
    let mut packets = 0u64;
    // Packets of the connections open at the end, of every flow, and every
    // transaction, as they are drained.
    let (mut total, mut flow_pkts) = (0u64, 0u64);
    let mut txs = Vec::new();
    while rest.len() >= 3 {
        let (flags, dt, len) = (rest[0], rest[1], rest[2] as usize);
        rest = &rest[3..];
        let n = len.min(rest.len());
        let (pkt, tail) = rest.split_at(n);
        rest = tail;
        // dt: low values are microseconds apart, high values jump seconds to minutes.
        ts += if dt < 200 { dt as i64 * 1_000 } else { (dt as i64 - 199) * 5_000_000_000 };
        let lt = match flags & 3 {
            0 => LinkType::RAW,
            1 => LinkType::ETHERNET,
            2 => LinkType::IPV6,
            _ => LinkType::IPV4,
        };
        packets += 1;
        let _ = probe.packet(&Packet { if_id: (flags >> 2 & 1) as u32, ..Packet::new(lt, ts, pkt) });
        probe.drain(&mut batch);
        for r in &batch.conns {
            check(r);
        }
        flow_pkts += batch.flows.iter().map(|f| f.pkts_in + f.pkts_out).sum::<u64>();
        txs.append(&mut batch.txs);
        batch.clear();
    }
    probe.finish();
    probe.drain(&mut batch);
    for r in &batch.conns {
        check(r);
        total += r.orig_pkts + r.resp_pkts;
    }
    assert!(total <= packets);
    flow_pkts += batch.flows.iter().map(|f| f.pkts_in + f.pkts_out).sum::<u64>();
    assert!(flow_pkts <= packets && flow_pkts >= total, "flows {flow_pkts}, conns {total}, packets {packets}");
    assert_eq!(probe.active_connections(), 0);
    txs.append(&mut batch.txs);
    for t in txs {
        if let (Some(a), Some(b)) = (t.tx.request, t.tx.response) {
            assert!(a.first_ns <= a.last_ns && b.first_ns <= b.last_ns);
        }
    }
});

fn check(r: &wirelog_record::ConnRecord) {
    if let Some(d) = r.duration_ns {
        assert!(d > 0);
    }
    assert_eq!(r.orig_bytes.is_some(), r.duration_ns.is_some());
    assert!(r.community_id.as_str().starts_with("1:"));
    assert!(!r.history.as_str().contains('\0'));
}
