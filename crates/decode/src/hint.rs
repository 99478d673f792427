//! A cheap look at a packet's flow tuple, for prefetching.
//!
//! Tracking a million connections is dominated by cache misses on the
//! connection table. Callers that see packets a few steps ahead read their
//! tuple here (plain Ethernet or raw IP, IPv4 without fragmentation, IPv6
//! without extension headers, TCP or UDP: the overwhelming majority) and ask
//! the table to load the slot before the packet is processed. Anything else
//! returns None and is simply not prefetched: this is a hint, never a decode.

use crate::{IpAddr16, LinkType};

/// The tuple of a packet as sent (source first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowHint {
    pub src: IpAddr16,
    pub dst: IpAddr16,
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
}

#[inline]
fn be16(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*d.get(at)?, *d.get(at + 1)?]))
}

/// The tuple of a TCP or UDP packet, or None when it takes more than a glance.
#[inline]
pub fn flow_hint(lt: LinkType, data: &[u8]) -> Option<FlowHint> {
    let ip = match lt {
        LinkType::ETHERNET => {
            let mut at = 12;
            let mut et = be16(data, at)?;
            if et == 0x8100 {
                at += 4;
                et = be16(data, at)?;
            }
            match et {
                0x0800 | 0x86dd => data.get(at + 2..)?,
                _ => return None,
            }
        }
        LinkType::RAW | LinkType::IPV4 | LinkType::IPV6 => data,
        _ => return None,
    };
    match ip.first()? >> 4 {
        4 => {
            let ihl = ((ip[0] & 0x0f) as usize) * 4;
            let proto = *ip.get(9)?;
            let frag = be16(ip, 6)?;
            if !matches!(proto, 6 | 17) || frag & 0x3fff != 0 || ihl < 20 {
                return None;
            }
            let src: [u8; 4] = ip.get(12..16)?.try_into().ok()?;
            let dst: [u8; 4] = ip.get(16..20)?.try_into().ok()?;
            Some(FlowHint {
                src: IpAddr16::from_v4(src),
                dst: IpAddr16::from_v4(dst),
                sport: be16(ip, ihl)?,
                dport: be16(ip, ihl + 2)?,
                proto,
            })
        }
        6 => {
            let proto = *ip.get(6)?;
            if !matches!(proto, 6 | 17) {
                return None;
            }
            Some(FlowHint {
                src: IpAddr16(ip.get(8..24)?.try_into().ok()?),
                dst: IpAddr16(ip.get(24..40)?.try_into().ok()?),
                sport: be16(ip, 40)?,
                dport: be16(ip, 42)?,
                proto,
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ChecksumMode, DecodeConfig, Decoded, Decoder, Transport};

    /// On every packet of real captures, a hint (when given) names the same
    /// tuple as the full decode.
    #[test]
    fn hints_agree_with_decoding() {
        for rel in [
            "zeek/ftp_ipv6/ipv6.pcap",
            "zeek/ftp_ipv6/ipv4.pcap",
            "zeek/vlan_qinq/q-in-q.pcap",
            "zeek/http_padding/tcp-http-with-padding.pcap",
        ] {
            let mut d = Decoder::new(DecodeConfig {
                checksums: ChecksumMode::Ignore,
                ..DecodeConfig::default()
            });
            let mut hinted = 0;
            for p in crate::testpcap::read(rel) {
                let hint = flow_hint(p.linktype, &p.data);
                if let (Some(h), Decoded::Ip(ip)) = (hint, d.decode(p.linktype, p.ts_ns, &p.data)) {
                    let (sport, dport) = match ip.transport {
                        Transport::Tcp { sport, dport, .. }
                        | Transport::Udp { sport, dport, .. } => (sport, dport),
                        _ => panic!("{rel}: hint for a non-TCP/UDP packet"),
                    };
                    assert_eq!(
                        (h.src, h.dst, h.sport, h.dport, h.proto),
                        (ip.src, ip.dst, sport, dport, ip.proto),
                        "{rel}"
                    );
                    hinted += 1;
                }
            }
            assert!(
                hinted > 0 || rel.contains("q-in-q"),
                "{rel}: no packet hinted"
            );
        }
    }
}
