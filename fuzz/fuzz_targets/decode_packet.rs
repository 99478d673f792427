//! Any bytes through `Decoder::decode`: it must never panic, and what it
//! returns must stay within the input and agree with its own counters.
//!
//! Byte 0 picks a link type from the supported list and byte 1 a mode; the
//! rest is the data:
//! - mode 0..=0x3f: the data is one packet, decoded with checksums on and off.
//! - mode 0x40..=0x7f: the data is a series of `[len][bytes]` records fed as
//!   consecutive packets to one decoder with a tiny fragment budget and a
//!   short timeout, so fragment series, eviction and expiry are reached.
//! - mode 0x80..=0xff: the data is one IPv4 or IPv6 packet (raw link type)
//!   that the target cuts into well-formed fragments and feeds in an order
//!   and with duplicates chosen by the mode byte, so reassembly of every
//!   transport is reached without the fuzzer having to discover fragment
//!   headers by itself.

#![no_main]

use libfuzzer_sys::fuzz_target;
use wirelog_decode::{ChecksumMode, DecodeConfig, Decoded, Decoder, LinkType, Transport, SUPPORTED_LINKTYPES};

/// Decodes one packet and checks what can be checked without an oracle.
fn check(d: &mut Decoder, lt: LinkType, ts: i64, data: &[u8]) {
    let before = d.stats().packets();
    let limit = d.config().frag_max_bytes;
    let r = d.decode(lt, ts, data);
    if let Decoded::Ip(p) = r {
        assert!(p.ip_version == 4 || p.ip_version == 6);
        assert!(p.ip_len <= 65535 + 40 || !p.reassembled);
        let within = |payload: &[u8], len: u32| {
            assert!(payload.len() <= len as usize, "payload {} > declared {len}", payload.len());
            if !p.reassembled {
                // Borrowed from the packet: never longer than the input.
                assert!(payload.len() <= data.len());
            }
        };
        match p.transport {
            Transport::Tcp { payload, payload_len, .. } => within(payload, payload_len),
            Transport::Udp { payload, payload_len, .. } => within(payload, payload_len),
            Transport::Icmp { payload, payload_len, .. } => within(payload, payload_len),
            Transport::Other { .. } => {}
        }
    }
    assert_eq!(d.stats().packets(), before + 1);
    assert!(d.fragments_held().1 <= limit);
}

/// IPv4 one's complement header checksum (the decoder's own is under test).
fn ip_checksum(h: &[u8]) -> u16 {
    let mut s = 0u32;
    for w in h.chunks(2) {
        s += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
    }
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Cuts `ip` into fragments of `unit * 8` bytes (IPv4 header flags and
/// offsets, or an IPv6 fragment header after the fixed header).
fn fragments(ip: &[u8], unit: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let step = unit.max(1) * 8;
    match ip.first().map(|b| b >> 4) {
        Some(4) if ip.len() >= 20 => {
            let hl = (usize::from(ip[0] & 0x0f) * 4).clamp(20, ip.len());
            let (hdr, payload) = ip.split_at(hl);
            let mut off = 0;
            while off < payload.len() || off == 0 {
                let end = (off + step).min(payload.len());
                let more = end < payload.len();
                let mut f = hdr.to_vec();
                f.extend_from_slice(&payload[off..end]);
                let total = f.len() as u16;
                f[2..4].copy_from_slice(&total.to_be_bytes());
                let fo = ((off / 8) as u16 & 0x1fff) | if more { 0x2000 } else { 0 };
                f[6..8].copy_from_slice(&fo.to_be_bytes());
                f[10..12].copy_from_slice(&[0, 0]);
                let c = ip_checksum(&f[..hl]);
                f[10..12].copy_from_slice(&c.to_be_bytes());
                out.push(f);
                if !more {
                    break;
                }
                off = end;
            }
        }
        Some(6) if ip.len() >= 40 => {
            let (hdr, payload) = ip.split_at(40);
            let mut off = 0;
            loop {
                let end = (off + step).min(payload.len());
                let more = end < payload.len();
                let mut f = hdr.to_vec();
                f[6] = 44;
                f.push(hdr[6]);
                f.push(0);
                let fo = ((off as u16) & 0xfff8) | u16::from(more);
                f.extend_from_slice(&fo.to_be_bytes());
                f.extend_from_slice(&0x1234_5678u32.to_be_bytes());
                f.extend_from_slice(&payload[off..end]);
                let plen = (f.len() - 40) as u16;
                f[4..6].copy_from_slice(&plen.to_be_bytes());
                out.push(f);
                if !more {
                    break;
                }
                off = end;
            }
        }
        _ => {}
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let [lt_byte, mode, rest @ ..] = data else { return };
    let (lt_byte, mode) = (*lt_byte, *mode);
    let lt = SUPPORTED_LINKTYPES[usize::from(lt_byte) % SUPPORTED_LINKTYPES.len()];
    match mode {
        0..=0x3f => {
            for checksums in [ChecksumMode::Verify, ChecksumMode::Ignore, ChecksumMode::Auto] {
                let mut d = Decoder::new(DecodeConfig { checksums, ..Default::default() });
                check(&mut d, lt, 0, rest);
                // Unknown link types are refused, never misread.
                let r = d.decode(LinkType(0xffff), 0, rest);
                assert!(matches!(r, Decoded::Skipped(_)));
            }
        }
        0x40..=0x7f => {
            let cfg = DecodeConfig {
                checksums: if mode & 1 == 1 { ChecksumMode::Verify } else { ChecksumMode::Ignore },
                frag_timeout_ns: 1_000,
                frag_max_bytes: 64 + usize::from(mode & 0x3e) * 64,
            };
            let mut d = Decoder::new(cfg);
            let mut buf = rest;
            let mut ts = 0i64;
            while let [len, tail @ ..] = buf {
                let n = usize::from(*len).min(tail.len());
                let (pkt, next) = tail.split_at(n);
                check(&mut d, lt, ts, pkt);
                ts += i64::from(*len & 0x0f) * 100;
                buf = next;
            }
        }
        _ => {
            let unit = usize::from(mode & 0x07) + 1;
            let frags = fragments(rest, unit);
            if frags.is_empty() {
                return;
            }
            let mut d = Decoder::new(DecodeConfig { checksums: if mode & 0x08 != 0 { ChecksumMode::Verify } else { ChecksumMode::Ignore }, ..Default::default() });
            // Orders: as cut, reversed, rotated, or with every piece twice.
            let n = frags.len();
            let order: Vec<usize> = match (mode >> 4) & 0x03 {
                0 => (0..n).collect(),
                1 => (0..n).rev().collect(),
                2 => (0..n).map(|i| (i + usize::from(mode)) % n).collect(),
                _ => (0..n).flat_map(|i| [i, i]).collect(),
            };
            let mut reassembled = 0;
            for i in order {
                let before = d.stats().reassembled;
                check(&mut d, LinkType::RAW, 0, &frags[i]);
                reassembled += d.stats().reassembled - before;
            }
            // The pieces of one datagram complete it at most once (a repeat
            // after completion starts a new, incomplete datagram).
            assert!(reassembled <= 1);
        }
    }
});
