//! One tracked connection and its conversion to a conn record.

use wirelog_decode::IpAddr16;
use wirelog_record::{community_id_v1, ConnRecord, ConnState, Proto, Uid};

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

#[derive(Debug, Clone)]
pub enum ProtoState {
    Tcp(TcpConn),
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
    /// Connection-attempt timer (TCP), `i64::MAX` when not set.
    pub attempt_at: i64,
    /// Removal time once closed or reset, `i64::MAX` when not set.
    pub delete_at: i64,
    /// An extra expiry check after a half close, `i64::MAX` when not set.
    pub expire_extra_at: i64,
    /// The analyzer timers were cancelled by a complete close.
    pub timers_cancelled: bool,
    /// This connection's flow in the current bucket.
    pub flow: crate::flow::FlowSlot,
    /// The deadline of the pending wheel entry, and its generation.
    pub scheduled_at: i64,
    pub generation: u32,
    /// Application parsing, for connections whose protocol was recognised.
    pub(crate) app: Option<Box<crate::app::AppState>>,
    /// Content-detection progress (`app::PROBED_*`, `app::PROBE_DONE`).
    pub(crate) app_probe: u8,
}

/// Is `a` in Zeek's private address space (which Zeek counts as local by default)?
pub fn is_private(a: &IpAddr16) -> bool {
    if a.is_v4() {
        let o = &a.0[12..];
        o[0] == 10
            || o[0] == 127
            || (o[0] == 172 && (o[1] & 0xf0) == 16)
            || (o[0] == 192 && o[1] == 168)
            || (o[0] == 100 && (o[1] & 0xc0) == 64)
            || (o[0] == 169 && o[1] == 254)
    } else {
        let b = &a.0;
        (b[0] & 0xfe) == 0xfc
            || (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
            || a.0 == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    }
}

impl Conn {
    /// The conn record; `uid` is minted by the caller (uids are random, so
    /// minting one when the record is written is as good as at the first packet).
    pub fn to_record(&self, key: &ConnKey, uid: Uid) -> ConnRecord {
        let history = self.hist.letters;
        let dur = self.last_ns - self.start_ns;
        let (proto, orig_size, resp_size, conn_state, missed) = match &self.state {
            ProtoState::Tcp(t) => (
                Proto::Tcp,
                t.orig_size(),
                t.resp_size(),
                t.conn_state(history.as_str()),
                t.missed_bytes,
            ),
            ProtoState::Udp(d) => {
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
            ProtoState::Icmp(d) => (
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
            community_id: community_id_v1(&key.src, &key.dst, key.proto, key.sport, key.dport),
            vlan: self.vlan,
            inner_vlan: self.inner_vlan,
            empty_tcp_skipped: false,
            orig_proc: None,
            resp_proc: None,
        }
    }
}
