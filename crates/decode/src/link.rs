//! Link-layer dispatch: from a LINKTYPE and the captured bytes to the start of
//! the IP header.

use crate::{ethernet, fddi, nflog, null, ppp, raw, sll, sll2, LinkType, SkipReason};

/// Which IP version the link layer announced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Net {
    V4,
    V6,
    /// The link layer does not say (raw IP): the version nibble decides.
    Any,
}

/// The outer two VLAN ids seen on the way down; deeper tags are stepped over
/// but not kept (Zeek keeps two as well).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Vlans {
    pub outer: Option<u16>,
    pub inner: Option<u16>,
}

impl Vlans {
    #[inline]
    pub fn push(&mut self, vid: u16) {
        if self.outer.is_none() {
            self.outer = Some(vid);
        } else if self.inner.is_none() {
            self.inner = Some(vid);
        }
    }
}

/// LINKTYPE values handled here that `wirelog_packet::LinkType` has no
/// constant for.
pub(crate) mod extra {
    use crate::LinkType;
    pub const FDDI: LinkType = LinkType(10);
    pub const C_HDLC: LinkType = LinkType(104);
}

/// Strips the link layer. `Ok` holds the announced IP version and the bytes
/// from the IP header on (possibly with link-layer padding at the end).
#[inline(always)]
pub(crate) fn network<'a>(
    lt: LinkType,
    data: &'a [u8],
    vlans: &mut Vlans,
) -> Result<(Net, &'a [u8]), SkipReason> {
    match lt {
        LinkType::ETHERNET => ethernet::network(data, vlans),
        LinkType::LINUX_SLL => sll::network(data, vlans),
        LinkType::LINUX_SLL2 => sll2::network(data, vlans),
        LinkType::RAW
        | LinkType::RAW_BSD12
        | LinkType::RAW_BSD14
        | LinkType::IPV4
        | LinkType::IPV6 => Ok((raw::announced(lt), data)),
        LinkType::NULL => null::network(data, false),
        LinkType::LOOP => null::network(data, true),
        LinkType::PPP => ppp::ppp_network(data),
        LinkType::PPP_HDLC => ppp::hdlc_network(data, vlans),
        LinkType::PPP_ETHER => ppp::pppoe_network(data),
        extra::C_HDLC => ppp::chdlc_network(data, vlans),
        LinkType::NFLOG => nflog::network(data),
        extra::FDDI => fddi::network(data, vlans),
        _ => Err(SkipReason::UnknownLinkType),
    }
}

/// Every LINKTYPE the decoder understands; anything else is
/// [`SkipReason::UnknownLinkType`].
pub const SUPPORTED: &[LinkType] = &[
    LinkType::ETHERNET,
    LinkType::LINUX_SLL,
    LinkType::LINUX_SLL2,
    LinkType::RAW,
    LinkType::RAW_BSD12,
    LinkType::RAW_BSD14,
    LinkType::IPV4,
    LinkType::IPV6,
    LinkType::NULL,
    LinkType::LOOP,
    LinkType::PPP,
    LinkType::PPP_HDLC,
    LinkType::PPP_ETHER,
    extra::C_HDLC,
    LinkType::NFLOG,
    extra::FDDI,
];
