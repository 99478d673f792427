//! Which packets are kept to disk (`--pcap-dir`), decided per connection as
//! the tracker sees each packet: the tracker knows the connection, its uid
//! and how much payload each side sent so far, so no second pass over the
//! packets is needed.
//!
//! A packet of a connection is kept when the connection qualifies (every
//! connection, or only those with a parser) and either it carries SYN, FIN
//! or RST (it changes the connection's state) or its side had sent fewer
//! than `cutoff` payload bytes before it (so the packet that crosses the
//! cutoff is kept whole). Payload bytes are counted per packet, as they
//! appear on the wire, retransmissions included. Packets of no connection
//! (not IP, held fragments, protocols without ports) are kept unless only
//! parsed connections are.

use wirelog_decode::{tcp_flags, IpPacket, Transport};
use wirelog_record::Uid;

/// What to keep (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepRule {
    /// Only packets of connections with a parser, from the packet on that
    /// chose it (the server port at the first packet, or the content).
    pub parsed_only: bool,
    /// Payload bytes kept per connection side; `u64::MAX`: all.
    pub cutoff: u64,
}

/// The verdict on the packet the tracker saw last.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeepVerdict {
    pub keep: bool,
    /// The uid its connection's records have (none: no connection).
    pub uid: Option<Uid>,
}

#[derive(Clone, Copy)]
struct KeepConn {
    uid: Uid,
    /// Payload bytes sent so far by the side that was the originator when
    /// the connection was created, and by the other.
    sent: [u64; 2],
}

/// Per connection (by table slot): its uid, minted when it is created so
/// that packets written before it ends can name it, and its counts.
pub(crate) struct KeepState {
    rule: KeepRule,
    conns: Vec<KeepConn>,
    pub verdict: KeepVerdict,
}

impl KeepState {
    pub fn new(rule: KeepRule) -> KeepState {
        KeepState { rule, conns: Vec::new(), verdict: KeepVerdict::default() }
    }

    /// The verdict on a packet of no connection.
    #[inline]
    pub fn unrelated(&mut self) {
        self.verdict = KeepVerdict { keep: !self.rule.parsed_only, uid: None };
    }

    /// A connection was created in slot `idx`.
    pub fn start(&mut self, idx: u32, uid: Uid) {
        let i = idx as usize;
        let c = KeepConn { uid, sent: [0, 0] };
        if i >= self.conns.len() {
            self.conns.resize(i + 1, c);
        }
        self.conns[i] = c;
    }

    pub fn uid(&self, idx: u32) -> Option<Uid> {
        self.conns.get(idx as usize).map(|c| c.uid)
    }

    /// The connection's sides were swapped: its counts follow their hosts.
    pub fn flip(&mut self, idx: u32) {
        if let Some(c) = self.conns.get_mut(idx as usize) {
            c.sent.swap(0, 1);
        }
    }

    /// A packet of the connection in `idx`, sent by its originator if
    /// `orig`; `parsed`: the connection has a parser.
    pub fn judge(&mut self, idx: u32, orig: bool, parsed: bool, pkt: &IpPacket<'_>) {
        let Some(c) = self.conns.get_mut(idx as usize) else {
            return;
        };
        let (len, state) = match pkt.transport {
            Transport::Tcp { flags, payload_len, .. } => {
                (payload_len, flags & (tcp_flags::SYN | tcp_flags::FIN | tcp_flags::RST) != 0)
            }
            Transport::Udp { payload_len, .. } | Transport::Icmp { payload_len, .. } => (payload_len, false),
            Transport::Other { .. } => (0, false),
        };
        let sent = &mut c.sent[usize::from(!orig)];
        let keep = (parsed || !self.rule.parsed_only) && (state || *sent < self.rule.cutoff);
        *sent = sent.saturating_add(u64::from(len));
        self.verdict = KeepVerdict { keep, uid: Some(c.uid) };
    }
}

/// The uid of the connection in slot `idx`: the one minted when it was
/// created if packets are kept, else a new one.
pub(crate) fn uid_for(uids: &mut wirelog_record::UidGenerator, keep: &Option<KeepState>, idx: u32) -> Uid {
    keep.as_ref().and_then(|k| k.uid(idx)).unwrap_or_else(|| uids.next_uid())
}
