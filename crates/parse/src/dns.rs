//! DNS: placeholder until the parser lands.

use crate::{Dir, ParseConfig, ParseStats, StreamParser, Transaction};

#[derive(Clone, Debug, Default, PartialEq)]
pub struct DnsTx {}

/// DNS over TCP (2-byte length-prefixed messages).
pub struct TcpDns {
    stats: ParseStats,
}

impl TcpDns {
    pub fn new(_cfg: &ParseConfig) -> Self {
        TcpDns { stats: ParseStats::default() }
    }
}

impl StreamParser for TcpDns {
    fn data(&mut self, _dir: Dir, _ts_ns: i64, data: &[u8], _out: &mut Vec<Transaction>) {
        self.stats.unparsed_bytes += data.len() as u64;
    }
    fn gap(&mut self, _dir: Dir, _ts_ns: i64, _len: u64, _out: &mut Vec<Transaction>) {
        self.stats.gaps += 1;
    }
    fn expire(&mut self, _now_ns: i64, _out: &mut Vec<Transaction>) {}
    fn finish(&mut self, _ts_ns: i64, _out: &mut Vec<Transaction>) {}
    fn gave_up(&self) -> bool {
        true
    }
    fn stats(&self) -> ParseStats {
        self.stats
    }
}

/// DNS over UDP: one message per datagram, queries paired with answers by id.
pub struct UdpDns {
    stats: ParseStats,
}

impl UdpDns {
    pub fn new(_cfg: &ParseConfig) -> Self {
        UdpDns { stats: ParseStats::default() }
    }

    /// One datagram of the flow, in `dir` (ToServer = to the DNS server port).
    pub fn datagram(&mut self, _dir: Dir, _ts_ns: i64, data: &[u8], _out: &mut Vec<Transaction>) {
        self.stats.unparsed_bytes += data.len() as u64;
    }

    pub fn expire(&mut self, _now_ns: i64, _out: &mut Vec<Transaction>) {}
    pub fn finish(&mut self, _ts_ns: i64, _out: &mut Vec<Transaction>) {}
    pub fn stats(&self) -> ParseStats {
        self.stats
    }
}
