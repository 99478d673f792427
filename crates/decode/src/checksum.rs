//! The Internet checksum (RFC 1071) and the TCP/UDP/ICMPv6 pseudo-headers.
//!
//! Pure functions over byte slices. Partial sums are carried in a `u64` so that
//! pieces (pseudo-header, header, payload) can be added up before one final
//! fold; a `u64` cannot overflow for any input shorter than 2^32 words.

/// Adds `data` to a running one's-complement sum.
///
/// The bytes are summed as little-endian 32-bit words, which the compiler
/// vectorises, and the folded result is byte-swapped back: the one's
/// complement sum commutes with byte swapping (RFC 1071 section 2(B)), and 2^16
/// is 1 modulo 2^16 - 1, so 32-bit words fold to the same 16-bit sum.
/// `data` is treated as if it started at an even offset of the checksummed
/// message; a trailing odd byte is padded with a zero byte (RFC 1071).
#[inline]
pub fn sum(data: &[u8], acc: u64) -> u64 {
    let mut le = 0u64;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        le += u64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    }
    let rest = chunks.remainder();
    let mut i = 0;
    if rest.len() >= 2 {
        le += u64::from(u16::from_le_bytes([rest[0], rest[1]]));
        i = 2;
    }
    if let Some(&b) = rest.get(i) {
        // The high byte of a big-endian word is the low byte of a little-endian one.
        le += u64::from(b);
    }
    acc + u64::from(fold(le).swap_bytes())
}

/// Folds a running sum to 16 bits (end-around carry).
#[inline]
pub fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
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
            assert_eq!(fold(sum(&data[cut..], sum(&data[..cut], 0))), whole, "cut {cut}");
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
            0x45, 0x00, 0x00, 0x40, 0xdf, 0x8e, 0x40, 0x00, 0x40, 0x06, 0x6d, 0xd3, 0x8d, 0x8e, 0xe4, 0x05,
            0xc0, 0x96, 0xbb, 0x2b,
        ];
        assert!(is_valid(sum(&hdr, 0)));
        hdr[9] ^= 1;
        assert!(!is_valid(sum(&hdr, 0)));
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
        assert_eq!(fold(pseudo_header_v6(&s, &d, 17, 1234)), fold(sum(&bytes, 0)));
        let mut b4 = Vec::new();
        b4.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2, 0, 6]);
        b4.extend_from_slice(&40u16.to_be_bytes());
        assert_eq!(fold(pseudo_header_v4(&[10, 0, 0, 1], &[10, 0, 0, 2], 6, 40)), fold(sum(&b4, 0)));
    }
}
