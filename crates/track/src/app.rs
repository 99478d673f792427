//! Application parsing attached to connections: which protocol a connection
//! carries, its two reassembled byte streams, and the parser that turns them
//! into transactions.
//!
//! Only connections whose protocol is recognised pay for any of this: the
//! others carry an empty `Option<Box<AppState>>` and a byte of probe state.
//! A protocol is chosen by the server port (at the SYN, so the reassembler
//! starts from the initial sequence number), else by the first payload bytes
//! of each direction (so MySQL on 3307 or HTTP on 8080 is still found).

use wirelog_parse::detect::PortMap;
use wirelog_parse::dns::UdpDns;
use wirelog_parse::stream::{Budget, Chunk, Reassembler, SegFlags};
use wirelog_parse::{ConnParser, Dir, ParseConfig, ParseStats, Protocol, ProtocolParser, StreamParser, Transaction};
use wirelog_record::Uid;

/// Application parsing settings.
#[derive(Clone, Debug)]
pub struct AppConfig {
    /// Server ports per protocol.
    pub ports: PortMap,
    /// Also recognise protocols by their first bytes on other ports.
    pub by_content: bool,
    pub parse: ParseConfig,
    /// Out-of-order bytes one stream may hold while waiting for a hole to fill.
    pub stream_buffer_bytes: usize,
    /// Out-of-order bytes all streams together may hold.
    pub total_buffer_bytes: usize,
}

impl Default for AppConfig {
    fn default() -> Self {
        AppConfig {
            ports: PortMap::default(),
            by_content: true,
            parse: ParseConfig::default(),
            stream_buffer_bytes: 256 * 1024,
            total_buffer_bytes: 64 << 20,
        }
    }
}

pub(crate) enum AppParser {
    Stream {
        parser: ConnParser,
        /// Client-to-server and server-to-client streams.
        streams: [Reassembler; 2],
    },
    Udp(UdpDns),
}

pub(crate) struct AppState {
    pub protocol: Protocol,
    /// Minted when parsing starts, so transactions written before the
    /// connection ends carry the uid its conn record will have.
    pub uid: Uid,
    pub parser: AppParser,
    /// The parser gave up (TLS, compression, not this protocol): bytes are no
    /// longer fed, the service stays.
    pub stopped: bool,
    /// Transactions emitted so far.
    pub transactions: u64,
}

/// `Conn::app_probe` bits: which directions' first payload was tried for content detection.
pub(crate) const PROBED_ORIG: u8 = 1;
pub(crate) const PROBED_RESP: u8 = 2;
/// Nothing to parse on this connection (no protocol recognised, or parsing is off).
pub(crate) const PROBE_DONE: u8 = 4;

/// Counters of application parsing across connections.
#[derive(Debug, Default, Clone)]
pub struct AppStats {
    /// Connections parsed, per protocol (indexed like [`Protocol::ALL`]).
    pub connections: [u64; Protocol::ALL.len()],
    pub transactions: u64,
    /// Parsers that gave up (compressed MySQL, not the protocol after all);
    /// a TLS parser done after its handshake is not one.
    pub gave_up: u64,
    /// What parsers could not use, summed over ended connections.
    pub parse: ParseStats,
    /// Connections whose parsing was abandoned by a role flip.
    pub flipped: u64,
}

pub(crate) fn protocol_index(p: Protocol) -> usize {
    Protocol::ALL.iter().position(|x| *x == p).unwrap_or(0)
}

impl AppState {
    pub fn new_stream(protocol: Protocol, uid: Uid, cfg: &AppConfig) -> Box<AppState> {
        Box::new(AppState {
            protocol,
            uid,
            parser: AppParser::Stream {
                parser: protocol.stream_parser(&cfg.parse),
                streams: [
                    Reassembler::new(cfg.stream_buffer_bytes),
                    Reassembler::new(cfg.stream_buffer_bytes),
                ],
            },
            stopped: false,
            transactions: 0,
        })
    }

    pub fn new_udp_dns(uid: Uid, cfg: &AppConfig) -> Box<AppState> {
        Box::new(AppState {
            protocol: Protocol::Dns,
            uid,
            parser: AppParser::Udp(UdpDns::new(&cfg.parse)),
            stopped: false,
            transactions: 0,
        })
    }

    /// Whether the parser stopped because it had read all it wanted (a TLS
    /// handshake), not because it could not parse.
    pub fn parser_done(&self) -> bool {
        matches!(&self.parser, AppParser::Stream { parser, .. } if parser.done())
    }

    /// conn.log's `service` (`mysql,ssl` when TLS was found inside MySQL).
    pub fn service(&self) -> &'static str {
        match &self.parser {
            AppParser::Stream { parser, .. } => parser.service(self.protocol),
            AppParser::Udp(_) => self.protocol.service(),
        }
    }

    /// One TCP segment of the connection; `ack` is its acknowledgement
    /// number when the ACK flag is set.
    #[allow(clippy::too_many_arguments)]
    pub fn segment(
        &mut self,
        dir: Dir,
        seq: u32,
        ts_ns: i64,
        payload: &[u8],
        flags: SegFlags,
        ack: Option<u32>,
        budget: &mut Budget,
        out: &mut Vec<Transaction>,
    ) {
        if self.stopped {
            return;
        }
        let AppParser::Stream { parser, streams } = &mut self.parser else {
            return;
        };
        let this = (dir == Dir::ToClient) as usize;
        if let Some(ack) = ack {
            // What this packet acknowledges of the other direction comes
            // first: those bytes were sent before it.
            let other_dir = if this == 0 { Dir::ToClient } else { Dir::ToServer };
            streams[1 - this].acked(ack, ts_ns, budget, &mut |c| match c {
                Chunk::Data { ts_ns, data } => parser.data(other_dir, ts_ns, data, out),
                Chunk::Gap { ts_ns, len } => parser.gap(other_dir, ts_ns, len, out),
            });
        }
        let stream = &mut streams[this];
        stream.segment(seq, ts_ns, payload, flags, budget, &mut |c| match c {
            Chunk::Data { ts_ns, data } => parser.data(dir, ts_ns, data, out),
            Chunk::Gap { ts_ns, len } => parser.gap(dir, ts_ns, len, out),
        });
        parser.expire(ts_ns, out);
        if parser.gave_up() {
            self.stopped = true;
            for s in streams.iter_mut() {
                s.discard(budget);
            }
        }
    }

    /// One UDP datagram of the connection.
    pub fn datagram(&mut self, dir: Dir, ts_ns: i64, payload: &[u8], out: &mut Vec<Transaction>) {
        if let AppParser::Udp(d) = &mut self.parser {
            d.datagram(dir, ts_ns, payload, out);
            d.expire(ts_ns, out);
        }
    }

    /// The connection ended at `ts_ns`: holes become gaps, pending requests
    /// and responses become unmatched transactions, buffers return to the budget.
    pub fn finish(
        &mut self,
        ts_ns: i64,
        budget: &mut Budget,
        out: &mut Vec<Transaction>,
    ) -> (ParseStats, bool) {
        match &mut self.parser {
            AppParser::Stream { parser, streams } => {
                if !self.stopped {
                    for (i, s) in streams.iter_mut().enumerate() {
                        let dir = if i == 0 { Dir::ToServer } else { Dir::ToClient };
                        s.flush(ts_ns, budget, &mut |c| match c {
                            Chunk::Data { ts_ns, data } => parser.data(dir, ts_ns, data, out),
                            Chunk::Gap { ts_ns, len } => parser.gap(dir, ts_ns, len, out),
                        });
                    }
                    parser.finish(ts_ns, out);
                }
                for s in streams.iter_mut() {
                    s.discard(budget);
                }
                (parser.stats(), self.stopped)
            }
            AppParser::Udp(d) => {
                d.finish(ts_ns, out);
                (d.stats(), false)
            }
        }
    }
}
