//! Raw IP link types: no link header at all, the packet starts with the IP
//! header.
//!
//! - LINKTYPE_RAW (101), and DLT_RAW's platform values 12 and 14 that some
//!   writers put in pcap files: IPv4 or IPv6, told apart by the version nibble.
//! - LINKTYPE_IPV4 (228) and LINKTYPE_IPV6 (229): one version only; a packet of
//!   the other version is malformed.

use crate::link::Net;
use crate::LinkType;

/// The IP version a raw link type promises.
#[inline]
pub(crate) fn announced(lt: LinkType) -> Net {
    match lt {
        LinkType::IPV4 => Net::V4,
        LinkType::IPV6 => Net::V6,
        _ => Net::Any,
    }
}

/// The version nibble of a raw IP packet, if it has a first byte.
#[inline]
pub fn ip_version(data: &[u8]) -> Option<u8> {
    data.first().map(|b| b >> 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announced_versions() {
        assert_eq!(announced(LinkType::IPV4), Net::V4);
        assert_eq!(announced(LinkType::IPV6), Net::V6);
        for lt in [LinkType::RAW, LinkType::RAW_BSD12, LinkType::RAW_BSD14] {
            assert_eq!(announced(lt), Net::Any);
        }
        assert_eq!(ip_version(&[0x45]), Some(4));
        assert_eq!(ip_version(&[0x60, 0]), Some(6));
        assert_eq!(ip_version(&[]), None);
    }
}
