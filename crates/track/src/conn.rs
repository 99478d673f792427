//! One tracked connection and its conversion to a conn record.

use wirelog_decode::IpAddr16;
use wirelog_record::{CommunityId, ConnRecord, ConnState, Proto, Uid};

use crate::history::HistoryState;
use crate::key::ConnKey;
use crate::tcp::TcpConn;

/// UDP and ICMP keep only what Zeek's session adapters keep: payload sizes
/// per side (-1 until that side sent anything) and checksum-error counts.
#[derive(Debug, Clone)]
pub struct DatagramState {
    pub orig_len: i64,
    pub resp_len: i64,
    pub orig_chk: u32,
    pub resp_chk: u32,
}

impl DatagramState {
    pub fn new() -> Self {
        DatagramState {
            orig_len: -1,
            resp_len: -1,
            orig_chk: 0,
            resp_chk: 0,
        }
    }

    pub fn add(&mut self, is_orig: bool, len: i64) {
        let l = if is_orig {
            &mut self.orig_len
        } else {
            &mut self.resp_len
        };
        if *l < 0 {
            *l = len;
        } else {
            *l += len;
        }
    }
}

impl Default for DatagramState {
    fn default() -> Self {
        Self::new()
    }
}

/// TCP's part of a connection entry: where its endpoint state is, and the
/// timers only TCP has (`i64::MAX` when not set). Beside the datagram state
/// in the same enum, it costs the entry nothing.
#[derive(Debug, Clone, Copy)]
pub struct TcpPart {
    /// The connection's [`TcpConn`] in the tracker's TCP slab.
    pub slab: u32,
    /// The analyzer timers were cancelled by a complete close.
    pub timers_cancelled: bool,
    /// Connection-attempt timer.
    pub attempt_at: i64,
    /// Removal time once closed or reset.
    pub delete_at: i64,
    /// An extra expiry check after a half close.
    pub expire_extra_at: i64,
}

impl TcpPart {
    pub fn new(slab: u32) -> Self {
        TcpPart {
            slab,
            timers_cancelled: false,
            attempt_at: i64::MAX,
            delete_at: i64::MAX,
            expire_extra_at: i64::MAX,
        }
    }
}

#[derive(Debug, Clone)]
pub enum ProtoState {
    Tcp(TcpPart),
    Udp(DatagramState),
    Icmp(DatagramState),
}

pub struct Conn {
    pub start_ns: i64,
    /// Last time the connection made progress (Zeek's LastTime).
    pub last_ns: i64,
    /// Time of the latest packet of any kind (timers never fire before it).
    pub seen_ns: i64,
    pub orig_pkts: u64,
    pub orig_ip_bytes: u64,
    pub resp_pkts: u64,
    pub resp_ip_bytes: u64,
    pub hist: HistoryState,
    pub vlan: Option<u16>,
    pub inner_vlan: Option<u16>,
    pub state: ProtoState,
    /// This connection's flow in the current bucket.
    pub flow: crate::flow::FlowSlot,
    /// The deadline of the pending wheel entry, and its generation.
    pub scheduled_at: i64,
    pub generation: u32,
    /// Application parsing, for connections whose protocol was recognised.
    pub(crate) app: Option<Box<crate::app::AppState>>,
    /// Content-detection progress (over when parsing is off, nothing was
    /// recognised, or the protocol is known).
    pub(crate) detection: wirelog_parse::detect::Detection,
}

/// Zeek's `Site::private_address_space` (scripts/base/utils/site.zeek, the
/// IANA IPv4 and IPv6 special-purpose registries), which Zeek copies into
/// `Site::local_nets` by default (`private_address_space_is_local`): the
/// networks behind `local_orig`/`local_resp`. IPv4 blocks, as (network, prefix).
const PRIVATE_V4: &[([u8; 4], u8)] = &[
    ([0, 0, 0, 0], 8),         // "this network", RFC 791
    ([10, 0, 0, 0], 8),        // private use, RFC 1918
    ([100, 64, 0, 0], 10),     // shared address space (CGN), RFC 6598
    ([127, 0, 0, 0], 8),       // loopback, RFC 1122
    ([169, 254, 0, 0], 16),    // link local, RFC 3927
    ([172, 16, 0, 0], 12),     // private use, RFC 1918
    ([192, 0, 0, 0], 24),      // IETF protocol assignments, RFC 6890
    ([192, 0, 2, 0], 24),      // TEST-NET-1, RFC 5737
    ([192, 168, 0, 0], 16),    // private use, RFC 1918
    ([198, 18, 0, 0], 15),     // benchmarking, RFC 2544
    ([198, 51, 100, 0], 24),   // TEST-NET-2, RFC 5737
    ([203, 0, 113, 0], 24),    // TEST-NET-3, RFC 5737
    ([240, 0, 0, 0], 4),       // reserved, RFC 1112
    ([255, 255, 255, 255], 32), // limited broadcast, RFC 919/8190
];

/// The IPv6 blocks of the same list (each IPv4 block above also appears
/// there as its 6to4 form, 2002:V4::/16+prefix, handled from `PRIVATE_V4`).
const PRIVATE_V6: &[([u8; 16], u8)] = &[
    ([0; 16], 128),                                                  // unspecified, RFC 4291
    ([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 128),         // loopback, RFC 4291
    ([0, 0x64, 0xff, 0x9b, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 48), // IPv4-IPv6 translation, RFC 8215
    ([1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 64),          // discard-only, RFC 6666
    ([0x20, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 23),       // IETF protocol assignments, RFC 2928
    ([0x20, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 48),       // benchmarking, RFC 5180
    ([0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 32), // documentation, RFC 3849
    ([0xfc, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 7),        // unique local, RFC 4193
    ([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 10),    // link-local unicast, RFC 4291
];

/// True when the first `bits` bits of `a` and `net` agree.
fn prefix_match(a: &[u8], net: &[u8], bits: u8) -> bool {
    let (whole, rest) = (usize::from(bits / 8), bits % 8);
    a[..whole] == net[..whole]
        && (rest == 0 || (a[whole] ^ net[whole]) & (0xff << (8 - rest)) == 0)
}

/// Is `a` in Zeek's private address space (which Zeek counts as local by default)?
pub fn is_private(a: &IpAddr16) -> bool {
    let v4_private = |v4: &[u8]| PRIVATE_V4.iter().any(|(net, bits)| prefix_match(v4, net, *bits));
    if a.is_v4() {
        return v4_private(&a.0[12..]);
    }
    let b = &a.0;
    // 6to4 (2002::/16) embeds an IPv4 address in bits 16..48: Zeek lists the
    // 6to4 form of every IPv4 block.
    if b[0] == 0x20 && b[1] == 0x02 && v4_private(&b[2..6]) {
        return true;
    }
    PRIVATE_V6.iter().any(|(net, bits)| prefix_match(b, net, *bits))
}

impl Conn {
    /// The conn record; `uid` is minted by the caller (uids are random, so
    /// minting one when the record is written is as good as at the first
    /// packet). `tcp` is the connection's TCP state (from the slab), if TCP.
    pub fn to_record(&self, key: &ConnKey, tcp: Option<&TcpConn>, uid: Uid) -> ConnRecord {
        let history = self.hist.letters;
        let dur = self.last_ns - self.start_ns;
        let (proto, orig_size, resp_size, conn_state, missed) = match (&self.state, tcp) {
            (ProtoState::Tcp(_), Some(t)) => (
                Proto::Tcp,
                t.orig_size(),
                t.resp_size(),
                t.conn_state(history.as_str()),
                t.missed_bytes,
            ),
            // Never: a TCP entry's slab state lives as long as the entry.
            // A release build still writes the record (sizes unknown, OTH)
            // rather than lose it; a debug build says where it went wrong.
            (ProtoState::Tcp(_), None) => {
                debug_assert!(false, "TCP connection {key:?} has no slab state");
                (Proto::Tcp, 0, 0, ConnState::OTH, 0)
            }
            (ProtoState::Udp(d), _) => {
                let st = match (d.orig_len >= 0, d.resp_len >= 0) {
                    (true, true) => ConnState::SF,
                    (true, false) => ConnState::S0,
                    (false, true) => ConnState::SHR,
                    (false, false) => ConnState::OTH,
                };
                (
                    Proto::Udp,
                    d.orig_len.max(0) as u64,
                    d.resp_len.max(0) as u64,
                    st,
                    0,
                )
            }
            (ProtoState::Icmp(d), _) => (
                Proto::Icmp,
                d.orig_len.max(0) as u64,
                d.resp_len.max(0) as u64,
                ConnState::OTH,
                0,
            ),
        };
        let has_dur = dur > 0;
        ConnRecord {
            ts_ns: self.start_ns,
            uid,
            orig_h: key.src,
            orig_p: key.sport,
            resp_h: key.dst,
            resp_p: key.dport,
            proto,
            service: None,
            duration_ns: has_dur.then_some(dur),
            orig_bytes: has_dur.then_some(orig_size),
            resp_bytes: has_dur.then_some(resp_size),
            conn_state,
            local_orig: is_private(&key.src),
            local_resp: is_private(&key.dst),
            missed_bytes: missed,
            history,
            orig_pkts: self.orig_pkts,
            orig_ip_bytes: self.orig_ip_bytes,
            resp_pkts: self.resp_pkts,
            resp_ip_bytes: self.resp_ip_bytes,
            ip_proto: key.proto,
            // The output stage computes it (SHA-1, ~1,500 instructions) off the packet thread.
            community_id: CommunityId::PENDING,
            vlan: self.vlan,
            inner_vlan: self.inner_vlan,
            empty_tcp_skipped: false,
            orig_proc: None,
            resp_proc: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn private(s: &str) -> bool {
        let ip: std::net::IpAddr = s.parse().unwrap();
        let a = match ip {
            std::net::IpAddr::V4(v4) => IpAddr16::from_v4(v4.octets()),
            std::net::IpAddr::V6(v6) => IpAddr16(v6.octets()),
        };
        is_private(&a)
    }

    /// Edges of Zeek's Site::private_address_space blocks.
    #[test]
    fn zeek_private_address_space() {
        for yes in [
            "0.0.0.0", "0.255.255.255", "10.1.2.3", "100.64.0.1", "100.127.255.255", "127.0.0.1",
            "169.254.1.1", "172.31.255.255", "192.0.0.9", "192.0.2.1", "192.168.1.1", "198.19.0.1",
            "198.51.100.7", "203.0.113.9", "240.0.0.1", "255.255.255.254", "255.255.255.255", "::",
            "::1", "64:ff9b:1::1", "100::1", "2001::1", "2001:1ff::1", "2001:2::1", "2001:db8::1",
            "fd00::1", "fe80::1", "febf::1", "2002:a01:203::1", "2002:c0a8:101::", "2002:ffff:ffff::",
            "2002:6440::", "2002:7f00::1",
        ] {
            assert!(private(yes), "{yes}");
        }
        for no in [
            "1.1.1.1", "100.128.0.1", "100.63.255.255", "172.32.0.1", "192.0.1.1", "192.169.0.1",
            "198.20.0.1", "223.255.255.255", "8.8.8.8", "2001:200::1", "2001:4860::8888", "fec0::1",
            "2002:808:808::", "::2", "2a00::1",
        ] {
            assert!(!private(no), "{no}");
        }
    }
}
