//! Community ID v1 (https://github.com/corelight/community-id-spec): a hash of
//! the flow tuple that Zeek, Suricata and Packetbeat all compute the same way,
//! so records from different tools join on it.

use crate::IpAddr16;

/// ICMP "port" mapping of the spec: request/reply types pair up, other
/// messages are one-way (their code stands in for the destination port).
fn icmp_ports(v6: bool, icmp_type: u16, code: u16) -> (u16, u16, bool) {
    match u8::try_from(icmp_type)
        .ok()
        .and_then(|t| wirelog_packet::icmp::counterpart(v6, t))
    {
        Some(c) => (icmp_type, c as u16, false),
        None => (icmp_type, code, true),
    }
}

/// Computes `1:<base64(sha1(...))>` with seed 0.
///
/// For ICMP pass the type as `sport` and the code as `dport`, from the packet
/// that opened the connection (its originator side).
pub fn community_id_v1(
    src: &IpAddr16,
    dst: &IpAddr16,
    ip_proto: u8,
    sport: u16,
    dport: u16,
) -> CommunityId {
    let (mut sport, mut dport, one_way) = match ip_proto {
        1 => icmp_ports(false, sport, dport),
        58 => icmp_ports(true, sport, dport),
        _ => (sport, dport, false),
    };
    let v4 = src.is_v4() && dst.is_v4();
    let (mut a, mut b): (&[u8], &[u8]) = if v4 {
        (&src.0[12..], &dst.0[12..])
    } else {
        (&src.0[..], &dst.0[..])
    };
    let has_ports = matches!(ip_proto, 1 | 6 | 17 | 58 | 132);
    if !one_way && (a, sport) > (b, dport) {
        std::mem::swap(&mut a, &mut b);
        std::mem::swap(&mut sport, &mut dport);
    }
    let mut h = sha1_smol::Sha1::new();
    h.update(&0u16.to_be_bytes());
    h.update(a);
    h.update(b);
    h.update(&[ip_proto, 0]);
    if has_ports {
        h.update(&sport.to_be_bytes());
        h.update(&dport.to_be_bytes());
    }
    let digest = h.digest().bytes();
    let mut out = CommunityId { text: [0; 30] };
    out.text[..2].copy_from_slice(b"1:");
    base64_into(&digest, &mut out.text[2..]);
    out
}

/// A Community ID v1 string (`1:` + 28 base64 characters), stored inline.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommunityId {
    text: [u8; 30],
}

impl CommunityId {
    /// Not computed yet: the tracker leaves it so and the output stage fills
    /// it ([`crate::ConnRecord::fill_community_id`]), so the SHA-1 runs off
    /// the packet thread. Reads as the empty string.
    pub const PENDING: CommunityId = CommunityId { text: [0; 30] };

    pub fn is_pending(&self) -> bool {
        self.text[0] == 0
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII is ever written.
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }

    pub fn as_bytes(&self) -> &[u8] {
        if self.is_pending() {
            return &[];
        }
        &self.text
    }
}

impl std::fmt::Display for CommunityId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for CommunityId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for CommunityId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// Standard base64 of 20 bytes into exactly 28 characters.
fn base64_into(input: &[u8; 20], out: &mut [u8]) {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (i, chunk) in input.chunks(3).enumerate() {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = ((b[0] as u32) << 16) | ((b[1] as u32) << 8) | b[2] as u32;
        let o = &mut out[i * 4..i * 4 + 4];
        o[0] = T[(n >> 18) as usize & 63];
        o[1] = T[(n >> 12) as usize & 63];
        o[2] = if chunk.len() > 1 {
            T[(n >> 6) as usize & 63]
        } else {
            b'='
        };
        o[3] = if chunk.len() > 2 {
            T[n as usize & 63]
        } else {
            b'='
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn ip(s: &str) -> IpAddr16 {
        match s.parse::<IpAddr>().unwrap() {
            IpAddr::V4(v) => IpAddr16::from_v4(v.octets()),
            IpAddr::V6(v) => IpAddr16(v.octets()),
        }
    }

    // Vectors from the Community ID specification's baseline (seed 0).
    #[test]
    fn pending_reads_empty_until_computed() {
        let p = CommunityId::PENDING;
        assert!(p.is_pending() && p.as_str().is_empty() && p.as_bytes().is_empty());
        let c = community_id_v1(&ip("8.8.8.8"), &ip("192.168.1.52"), 17, 53, 54585);
        assert!(!c.is_pending() && c.as_bytes().len() == 30);
    }

    #[test]
    fn spec_vectors() {
        assert_eq!(
            community_id_v1(&ip("128.232.110.120"), &ip("66.35.250.204"), 6, 34855, 80),
            "1:LQU9qZlK+B5F3KDmev6m5PMibrg="
        );
        assert_eq!(
            community_id_v1(&ip("66.35.250.204"), &ip("128.232.110.120"), 6, 80, 34855),
            "1:LQU9qZlK+B5F3KDmev6m5PMibrg="
        );
        assert_eq!(
            community_id_v1(&ip("8.8.8.8"), &ip("192.168.1.52"), 17, 53, 54585),
            "1:d/FP5EW3wiY1vCndhwleRRKHowQ="
        );
        assert_eq!(
            community_id_v1(&ip("192.168.0.89"), &ip("192.168.0.1"), 1, 8, 0),
            "1:X0snYXpgwiv9TZtqg64sgzUn6Dk="
        );
        assert_eq!(
            community_id_v1(&ip("192.168.0.1"), &ip("192.168.0.89"), 1, 0, 0),
            "1:X0snYXpgwiv9TZtqg64sgzUn6Dk="
        );
        assert_eq!(
            community_id_v1(
                &ip("fe80::200:86ff:fe05:80da"),
                &ip("fe80::260:97ff:fe07:69ea"),
                58,
                135,
                0
            ),
            "1:dGHyGvjMfljg6Bppwm3bg0LO8TY="
        );
    }
}
