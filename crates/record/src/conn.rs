use crate::{community_id_v1, CommunityId, IpAddr16, Uid};

/// Transport protocol of a connection, as Zeek's `proto` column names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Proto {
    Tcp,
    Udp,
    Icmp,
}

impl Proto {
    pub fn as_str(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Icmp => "icmp",
        }
    }
}

/// Zeek's `conn_state` codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConnState {
    S0,
    S1,
    SF,
    REJ,
    S2,
    S3,
    RSTO,
    RSTR,
    RSTOS0,
    RSTRH,
    SH,
    SHR,
    OTH,
}

impl ConnState {
    pub const ALL: [ConnState; 13] = [
        ConnState::S0,
        ConnState::S1,
        ConnState::SF,
        ConnState::REJ,
        ConnState::S2,
        ConnState::S3,
        ConnState::RSTO,
        ConnState::RSTR,
        ConnState::RSTOS0,
        ConnState::RSTRH,
        ConnState::SH,
        ConnState::SHR,
        ConnState::OTH,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ConnState::S0 => "S0",
            ConnState::S1 => "S1",
            ConnState::SF => "SF",
            ConnState::REJ => "REJ",
            ConnState::S2 => "S2",
            ConnState::S3 => "S3",
            ConnState::RSTO => "RSTO",
            ConnState::RSTR => "RSTR",
            ConnState::RSTOS0 => "RSTOS0",
            ConnState::RSTRH => "RSTRH",
            ConnState::SH => "SH",
            ConnState::SHR => "SHR",
            ConnState::OTH => "OTH",
        }
    }
}

/// Zeek's connection history string, kept inline: letters are recorded at
/// most a few times each, so a short fixed buffer holds every real history.
/// Letters past the capacity are dropped and `truncated` is set.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct History {
    letters: [u8; History::CAPACITY],
    len: u8,
    pub truncated: bool,
}

impl History {
    pub const CAPACITY: usize = 22;

    pub const fn new() -> Self {
        History {
            letters: [0; History::CAPACITY],
            len: 0,
            truncated: false,
        }
    }

    #[inline]
    pub fn push(&mut self, c: u8) {
        if (self.len as usize) < Self::CAPACITY {
            self.letters[self.len as usize] = c;
            self.len += 1;
        } else {
            self.truncated = true;
        }
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }

    /// The letters as bytes (always ASCII).
    pub fn as_bytes(&self) -> &[u8] {
        &self.letters[..self.len as usize]
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for History {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// One connection, with the fields and meaning of Zeek's conn.log.
#[derive(Debug, Clone)]
pub struct ConnRecord {
    /// Time of the first packet, ns since the epoch.
    pub ts_ns: i64,
    pub uid: Uid,
    pub orig_h: IpAddr16,
    pub orig_p: u16,
    pub resp_h: IpAddr16,
    pub resp_p: u16,
    pub proto: Proto,
    /// Detected application protocol (empty until detection exists).
    pub service: Option<&'static str>,
    /// None when the connection lasted 0 s (Zeek then leaves duration and
    /// byte counts unset).
    pub duration_ns: Option<i64>,
    pub orig_bytes: Option<u64>,
    pub resp_bytes: Option<u64>,
    pub conn_state: ConnState,
    pub local_orig: bool,
    pub local_resp: bool,
    pub missed_bytes: u64,
    pub history: History,
    pub orig_pkts: u64,
    pub orig_ip_bytes: u64,
    pub resp_pkts: u64,
    pub resp_ip_bytes: u64,
    pub ip_proto: u8,
    /// [`CommunityId::PENDING`] as the tracker makes the record; filled
    /// from the tuple above by [`ConnRecord::fill_community_id`].
    pub community_id: CommunityId,
    /// Outer 802.1Q VLAN and inner (Q-in-Q) VLAN of the first packet.
    pub vlan: Option<u16>,
    pub inner_vlan: Option<u16>,
    /// Captured with TCP segments without payload or SYN/FIN/RST dropped
    /// (`--skip-empty-tcp`): packet counts and history lack pure ACKs.
    pub empty_tcp_skipped: bool,
    /// The processes behind the originator's and responder's ends when they
    /// are local (live capture with `--processes`).
    pub orig_proc: crate::Proc,
    pub resp_proc: crate::Proc,
}

impl ConnRecord {
    /// Computes the Community ID from the record's own tuple if it is still
    /// pending (the output stage does this once per record, before any
    /// sink reads it).
    pub fn fill_community_id(&mut self) {
        if self.community_id.is_pending() {
            self.community_id =
                community_id_v1(&self.orig_h, &self.resp_h, self.ip_proto, self.orig_p, self.resp_p);
        }
    }
}
