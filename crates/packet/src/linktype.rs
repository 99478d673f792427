/// A libpcap link-layer header type (LINKTYPE_*), kept even when unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LinkType(pub u32);

impl LinkType {
    pub const NULL: LinkType = LinkType(0);
    pub const ETHERNET: LinkType = LinkType(1);
    pub const PPP: LinkType = LinkType(9);
    pub const PPP_HDLC: LinkType = LinkType(50);
    pub const PPP_ETHER: LinkType = LinkType(51);
    pub const RAW: LinkType = LinkType(101);
    pub const LOOP: LinkType = LinkType(108);
    pub const LINUX_SLL: LinkType = LinkType(113);
    pub const IPV4: LinkType = LinkType(228);
    pub const IPV6: LinkType = LinkType(229);
    pub const NFLOG: LinkType = LinkType(239);
    pub const LINUX_SLL2: LinkType = LinkType(276);
    /// Some writers use DLT_RAW's BSD value 12 (or 14 on OpenBSD) in pcap files.
    pub const RAW_BSD12: LinkType = LinkType(12);
    pub const RAW_BSD14: LinkType = LinkType(14);
}

impl std::fmt::Display for LinkType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}
