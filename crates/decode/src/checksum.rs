//! The Internet checksum (RFC 1071) and the TCP/UDP/ICMPv6 pseudo-headers.
//!
//! Pure functions over byte slices. Partial sums are carried in a `u64` so that
//! pieces (pseudo-header, header, payload) can be added up before one final
//! fold; a `u64` cannot overflow for any input shorter than 2^32 words.

/// Adds `data` to a running one's-complement sum.
///
/// The bytes are summed as little-endian 64-bit words with the carries kept
/// in a `u128` (one add and one add-with-carry per 8 bytes), and the folded
/// result is byte-swapped back: the one's complement sum commutes with byte
/// swapping (RFC 1071 section 2(B)), and 2^16 is 1 modulo 2^16 - 1, so wide
/// words fold to the same 16-bit sum. `data` is treated as if it started at
/// an even offset of the checksummed message; a trailing odd byte is padded
/// with a zero byte (RFC 1071).
#[inline]
pub fn sum(data: &[u8], acc: u64) -> u64 {
    let mut wide = 0u128;
    let mut rest = data;
    while let Some((w, r)) = rest.split_first_chunk::<8>() {
        wide += u128::from(u64::from_le_bytes(*w));
        rest = r;
    }
    // The tail, without a variable-length copy (a memcpy call costs more than
    // the sum of a short header).
    if let Some((w, r)) = rest.split_first_chunk::<4>() {
        wide += u128::from(u32::from_le_bytes(*w));
        rest = r;
    }
    if let Some((w, r)) = rest.split_first_chunk::<2>() {
        wide += u128::from(u16::from_le_bytes(*w));
        rest = r;
    }
    // A trailing odd byte is the low byte of a little-endian word, which is
    // the high byte of the big-endian word RFC 1071 pads.
    if let Some(&b) = rest.first() {
        wide += u128::from(b);
    }
    let (lo, carry) = (wide as u64).overflowing_add((wide >> 64) as u64);
    acc + u64::from(fold(lo).swap_bytes()) + u64::from(carry)
}

/// Folds a running sum to 16 bits (end-around carry).
#[inline]
pub fn fold(acc: u64) -> u16 {
    // Add-with-carry at each width; a carry out leaves room for itself.
    let (s, c) = (acc as u32).overflowing_add((acc >> 32) as u32);
    let x = s.wrapping_add(u32::from(c));
    let (s, c) = (x as u16).overflowing_add((x >> 16) as u16);
    s.wrapping_add(u16::from(c))
}

/// The checksum field value for `data` (with its checksum field zeroed).
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum(data, 0))
}

/// True when a sum taken over a message *including* its checksum field is
/// valid (all ones after folding).
#[inline]
pub fn is_valid(acc: u64) -> bool {
    fold(acc) == 0xffff
}

/// True when the checksum field at `field` of a TCP or UDP segment holds the
/// offload signature: the folded sum of the pseudo-header alone (`pseudo`),
/// not complemented. That is what Linux writes for CHECKSUM_PARTIAL
/// (`tcp_v4_send_check`, `udp4_hwcsum` store `~csum_tcpudp_magic(.., 0)`)
/// so that the NIC only has to add the segment's bytes; a capture taken
/// before the NIC (any outgoing packet, all of loopback) keeps it.
#[inline]
pub fn is_offload_signature(segment: &[u8], field: usize, pseudo: u64) -> bool {
    match segment.get(field..field + 2) {
        Some(&[hi, lo]) => u16::from_be_bytes([hi, lo]) == fold(pseudo),
        _ => false,
    }
}

/// Sum of the IPv4 pseudo-header: source, destination, zero, protocol, and the
/// transport length (header + payload).
#[inline]
pub fn pseudo_header_v4(src: &[u8; 4], dst: &[u8; 4], proto: u8, len: u32) -> u64 {
    u64::from(u32::from_be_bytes(*src))
        + u64::from(u32::from_be_bytes(*dst))
        + u64::from(proto)
        + u64::from(len)
}

/// Sum of the IPv6 pseudo-header (RFC 8200 section 8.1): source, destination,
/// 32-bit upper-layer length, three zero bytes, next header.
#[inline]
pub fn pseudo_header_v6(src: &[u8; 16], dst: &[u8; 16], next_header: u8, len: u32) -> u64 {
    sum(src, 0) + sum(dst, 0) + u64::from(len) + u64::from(next_header)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of RFC 1071 section 3.
    #[test]
    fn rfc1071_example() {
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(&data, 0)), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    /// Any split of a message at an even offset sums the same as the whole,
    /// and odd lengths pad with a zero byte.
    #[test]
    fn split_and_odd_lengths() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1001).collect();
        let whole = fold(sum(&data, 0));
        for cut in (0..data.len()).step_by(2) {
            assert_eq!(
                fold(sum(&data[cut..], sum(&data[..cut], 0))),
                whole,
                "cut {cut}"
            );
        }
        let mut padded = data.clone();
        padded.push(0);
        assert_eq!(fold(sum(&padded, 0)), whole);
        // Naive 16-bit reference.
        let mut acc = 0u32;
        for w in padded.chunks(2) {
            acc += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        assert_eq!(fold(u64::from(acc)), whole);
    }

    /// The header of a real IPv4 packet (first packet of
    /// zeek/tcp_bad_checksum/syn-bad.pcap) checks out, and a flipped bit does not.
    #[test]
    fn ipv4_header() {
        let mut hdr = [
            0x45, 0x00, 0x00, 0x40, 0xdf, 0x8e, 0x40, 0x00, 0x40, 0x06, 0x6d, 0xd3, 0x8d, 0x8e,
            0xe4, 0x05, 0xc0, 0x96, 0xbb, 0x2b,
        ];
        assert!(is_valid(sum(&hdr, 0)));
        hdr[9] ^= 1;
        assert!(!is_valid(sum(&hdr, 0)));
    }

    /// Against a naive 16-bit big-endian sum, for every length and start
    /// offset up to a few words, and extreme values that make carries.
    #[test]
    fn matches_naive_sum() {
        fn naive(d: &[u8]) -> u16 {
            let mut acc = 0u64;
            for w in d.chunks(2) {
                acc += u64::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
            }
            while acc >> 16 != 0 {
                acc = (acc & 0xffff) + (acc >> 16);
            }
            acc as u16
        }
        let mut x = 0x1234_5678u32;
        let noise: Vec<u8> = (0..300)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        for data in [noise, vec![0xff; 300], vec![0; 300]] {
            for start in 0..9 {
                for len in 0..(300 - start) {
                    let d = &data[start..start + len];
                    assert_eq!(fold(sum(d, 0)), naive(d), "start {start} len {len}");
                }
            }
        }
        assert_eq!(fold(u64::MAX), 0xffff);
        assert_eq!(fold(0x1_0000), 1);
    }

    #[test]
    fn pseudo_headers() {
        // The v6 pseudo-header's length is 32 bits; a v4-style 16-bit sum of the
        // same fields must agree for short lengths.
        let s = [1u8; 16];
        let d = [2u8; 16];
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&s);
        bytes.extend_from_slice(&d);
        bytes.extend_from_slice(&1234u32.to_be_bytes());
        bytes.extend_from_slice(&[0, 0, 0, 17]);
        assert_eq!(
            fold(pseudo_header_v6(&s, &d, 17, 1234)),
            fold(sum(&bytes, 0))
        );
        let mut b4 = Vec::new();
        b4.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2, 0, 6]);
        b4.extend_from_slice(&40u16.to_be_bytes());
        assert_eq!(
            fold(pseudo_header_v4(&[10, 0, 0, 1], &[10, 0, 0, 2], 6, 40)),
            fold(sum(&b4, 0))
        );
    }
}
