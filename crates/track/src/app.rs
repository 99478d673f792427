//! Application parsing attached to connections: which protocol a connection
//! carries, its two reassembled byte streams, and the parser that turns them
//! into transactions.
//!
//! Only connections whose protocol is recognised pay for any of this: the
//! others carry an empty index (`Conn::app`, 4 bytes) and a byte of probe state.
//! A protocol is chosen by the server port (at the SYN, so the reassembler
//! starts from the initial sequence number), else by the first payload bytes
//! of each direction (so MySQL on 3307 or HTTP on 8080 is still found).
//!
//! Chosen by port, a connection gets its uid and is counted at the SYN, but
//! its parser and reassemblers (over a kilobyte) only at its first payload
//! byte: until then [`AppParser::Waiting`] keeps the two sequence numbers the
//! reassemblers would have learnt from the empty segments, so a SYN scan or
//! flood costs a small slot per connection (`Tracker::apps`), not a parser.

use wirelog_parse::detect::PortMap;
use wirelog_parse::dns::UdpDns;
use wirelog_parse::memcached::udp::UdpMemcached;
use wirelog_parse::starttls::Cleartext;
use wirelog_parse::stream::{Budget, Chunk, Reassembler, SegFlags};
use wirelog_parse::{ConnParser, Dir, ParseConfig, ParseStats, Protocol, ProtocolParser, StreamParser, TxSink};
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
    /// No payload yet in either direction (client-to-server, server-to-client).
    Waiting([StreamStart; 2]),
    Stream(Box<StreamApp>),
    Udp(Box<UdpDns>),
    /// Memcached over UDP (its 8-byte frame header, pairing by request id).
    UdpMemcached(Box<UdpMemcached>),
}

pub(crate) struct StreamApp {
    parser: ConnParser,
    /// Client-to-server and server-to-client streams.
    streams: [Reassembler; 2],
}

/// What a [`Reassembler`] learns from one direction's empty segments: where
/// the stream starts (the first segment's sequence number, after the SYN's)
/// and where its FIN is. Replayed into the reassembler when payload arrives,
/// so it ends up in the state it would have had from the SYN on.
#[derive(Clone, Copy, Default)]
pub(crate) struct StreamStart {
    next: Option<u32>,
    fin: Option<u32>,
}

impl StreamStart {
    /// The same bookkeeping as `Reassembler::segment` for an empty segment.
    fn empty_segment(&mut self, seq: u32, flags: SegFlags) {
        let data_seq = if flags.syn { seq.wrapping_add(1) } else { seq };
        self.next.get_or_insert(data_seq);
        if flags.fin && self.fin.is_none() {
            self.fin = Some(data_seq);
        }
    }

    /// A reassembler in the state these segments left it in.
    fn reassembler(self, max_buffer: usize, budget: &mut Budget) -> Reassembler {
        let mut r = Reassembler::new(max_buffer);
        let mut no_chunk = |_: Chunk<'_>| {};
        let plain = SegFlags { syn: false, fin: false, rst: false };
        if let Some(next) = self.next {
            r.segment(next, 0, &[], plain, budget, &mut no_chunk);
        }
        if let Some(fin) = self.fin {
            r.segment(fin, 0, &[], SegFlags { fin: true, ..plain }, budget, &mut no_chunk);
        }
        r
    }

    /// Whether flushing this stream would report bytes lost before its FIN
    /// (the capture missed them): only a real reassembler and parser can say.
    fn fin_beyond_start(self) -> bool {
        matches!((self.next, self.fin), (Some(n), Some(f)) if n != f)
    }
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
    /// Parser state bytes charged to the budget (`ConnParser::state_bytes`
    /// when last asked), given back when the connection ends.
    /// (4 bytes: a parser holds at most what the shared budget leaves, far
    /// below 4 GiB; a larger state would be charged as 4 GiB.)
    state_charged: u32,
    /// The connection's own weight: N when parsed as 1 in N connections
    /// (`capture --cpu-budget` step 1).
    pub weight: u32,
    /// The weight of connections step 1b stopped that this one stands for
    /// (see `Tracker::set_thinning`): its transactions weigh `weight +
    /// carried`.
    pub carried: u32,
    /// Two things in a byte, so that the state stays within its 80: step
    /// 1b's log2 of the K this connection was last drawn at (see
    /// `Tracker::set_thinning`; a larger K draws it again), in the low
    /// bits ([`AppState::keep`]; K is at most 2^16), and
    /// [`NO_ROOM`] ([`AppState::no_room`]).
    keep_and_no_room: u8,
    /// Step 1b left it out: parsing stopped for good (`stopped` too);
    /// what it held is discarded, not flushed, and it is no parser that
    /// gave up.
    pub shed: bool,
    /// A cleartext protocol watched for STARTTLS (its parser is made for
    /// it; `protocol` is then TLS, what it may turn to).
    cleartext: Option<(Cleartext, wirelog_parse::starttls::Start)>,
    /// A connection watched for SSH's confirmation (`protocol` is then
    /// TLS, unused: no transactions come of it).
    ssh: Option<wirelog_parse::ssh::SshStart>,
    /// Payload was handed over while the TCP connection was not partial
    /// (Zeek's `IsPartial`): the analyzers that skip partial connections
    /// (`zeek_skips_partial`) read it (`payload_seen`).
    whole_payload: bool,
}

/// Whether Zeek's analyzer for conn.log's `service` (its first name:
/// `mysql` of `mysql,ssl`) reads nothing of a partial TCP connection.
/// Each returns from its stream delivery while `TCP()->IsPartial()`:
/// HTTP (src/analyzer/protocol/http/HTTP.cc:939), SSL (ssl/SSL.cc:85, and
/// `check_partial` in ssl/spicy/SSL.spicy:633), SSH (ssh/SSH.cc:38), POP3
/// (pop3/POP3.cc:67), IMAP (imap/IMAP.cc:40), XMPP (xmpp/XMPP.cc:38),
/// MySQL (mysql/MySQL.cc:53); SMTP's line readers skip partial
/// connections (`SetSkipPartial`, smtp/SMTP.cc:52,57; ContentLine.cc:83).
/// The others named here (FTP, IRC, LDAP, DNS, PostgreSQL, Redis, the
/// UDP services) do not look at it.
///
/// It does not matter how the analyzer was attached. By port it is given
/// the stream from the start; by a signature (DPD), the PIA matches and
/// buffers a partial connection's stream like any other (`PIA_TCP::
/// DeliverStream`, src/analyzer/protocol/pia/PIA.cc:286-311, no partial
/// check) and on a match replays the buffer into the new analyzer
/// (`ActivateAnalyzer`, PIA.cc:328-362, `ReplayStreamBuffer` :441-450,
/// through `NextStream`): the same `DeliverStream` and the same
/// `IsPartial()` return, so its parser never runs and never calls
/// `AnalyzerConfirmation` (MySQL's and the binpac analyzers' confirmations
/// come from their parsers, e.g. mysql-analyzer.pac's). A service found
/// by content here follows the same rule ([`AppState::conn_service`]).
pub(crate) fn zeek_skips_partial(service: &str) -> bool {
    let first = service.split(',').next().unwrap_or(service);
    matches!(first, "http" | "ssl" | "ssh" | "pop3" | "imap" | "xmpp" | "mysql" | "smtp")
}

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
    /// Bytes of parsed streams that were sent but cut by the snap length
    /// (`--snaplen`, or the capture file's), summed over ended connections:
    /// in place in their streams, handed to the parsers as cuts
    /// (`StreamParser::cut`), not counted as gaps.
    pub beyond_snaplen_bytes: u64,
    /// Connections whose parsing was abandoned by a role flip.
    pub flipped: u64,
    /// `parse` and `gave_up` per protocol (indexed like [`Protocol::ALL`]).
    pub parse_by: [ParseStats; Protocol::ALL.len()],
    pub gave_up_by: [u64; Protocol::ALL.len()],
    /// Connections found but not parsed: `capture --cpu-budget` sampled
    /// them out (see `Tracker::set_sampling`).
    pub sampled_out: u64,
    /// `sampled_out` per protocol (indexed like [`Protocol::ALL`]).
    pub sampled_out_by: [u64; Protocol::ALL.len()],
    /// Connections whose parsing `capture --cpu-budget` step 1b stopped
    /// part way (see `Tracker::set_thinning`): their transactions from
    /// then on are missing, and per protocol.
    pub parse_stopped: u64,
    pub parse_stopped_by: [u64; Protocol::ALL.len()],
    /// Connections with a parser now (a gauge; not those step 1b stopped).
    pub parsing: u64,
    /// Connections whose first stream bytes were kept for the service
    /// signatures (`wirelog_parse::services::SigStream`), those whose
    /// stream had a hole there (a segment ahead of it was not held: that
    /// direction's matching stopped), and those the stream memory had no
    /// room for (matched on nothing more).
    pub signature_streams: u64,
    pub signature_holes: u64,
    pub signature_no_room: u64,
    /// Connections not parsed because the stream memory had no room for a
    /// parser's state ([`PARSER_STATE_BYTES`]) at their first payload, or
    /// for their slot ([`APP_SLOT_BYTES`]) when their parser was chosen, and
    /// per protocol.
    pub no_memory: u64,
    pub no_memory_by: [u64; Protocol::ALL.len()],
    /// `parsing` per protocol (indexed like [`Protocol::ALL`]): step 1b
    /// never stops the last [`crate::THIN_FLOOR`] of a protocol.
    pub parsing_by: [u64; Protocol::ALL.len()],
}

/// What a parsed TCP connection's parser state takes at least, charged to
/// the stream memory while it lives (`--stream-memory`'s share of
/// `--memory`): the boxed `StreamApp` (the parser, the largest of which
/// sizes the enum, and both directions' reassemblers) and its allocation's
/// header. What a parser holds on the heap beyond it is charged on top
/// (`ConnParser::state_bytes`).
pub const PARSER_STATE_BYTES: usize = std::mem::size_of::<StreamApp>() + 16;

/// The same for a UDP DNS flow's parser (its box; the queries waiting for
/// answers are charged on top, `UdpDns::held_bytes`).
pub const UDP_DNS_STATE_BYTES: usize = std::mem::size_of::<UdpDns>() + 16;

/// The same for a UDP Memcached flow's parser (its box; the requests and
/// responses waiting are charged on top, `UdpMemcached::held_bytes`).
pub const UDP_MEMCACHED_STATE_BYTES: usize = std::mem::size_of::<UdpMemcached>() + 16;

/// A flow's slot in the tracker's slab of [`AppState`]s (with the slab's
/// free-list entry), charged to the stream memory from when a parser is
/// chosen for the flow (by port at its first packet, or by signature) to
/// its end: a flood of flows on a parsed port that never send a payload
/// otherwise holds 84 bytes each outside `--memory`. A flow the stream
/// memory has no room for gets no slot and is not parsed (`no_memory`).
pub const APP_SLOT_BYTES: usize = crate::slab::Slab::<AppState>::bytes_per_value();

/// The bit of `AppState::keep_and_no_room` set when the stream memory had
/// no room for the parser's state (`AppState::charge_first`).
const NO_ROOM: u8 = 0x80;

pub(crate) fn protocol_index(p: Protocol) -> usize {
    Protocol::ALL.iter().position(|x| *x == p).unwrap_or(0)
}

impl AppState {
    /// A TCP connection of `protocol`, or a UDP flow of DNS or Memcached:
    /// its parser is made at its first payload byte (datagram), if it fits.
    pub fn new_stream(protocol: Protocol, uid: Uid) -> AppState {
        AppState {
            protocol,
            uid,
            parser: AppParser::Waiting([StreamStart::default(); 2]),
            stopped: false,
            transactions: 0,
            state_charged: 0,
            weight: 1,
            carried: 0,
            keep_and_no_room: 0,
            shed: false,
            cleartext: None,
            ssh: None,
            whole_payload: false,
        }
    }

    /// A TCP connection of a cleartext protocol that may turn to TLS by
    /// STARTTLS (chosen by its server port, `Cleartext::by_port`).
    pub fn new_starttls(cleartext: Cleartext, uid: Uid) -> AppState {
        AppState::new_starttls_from(cleartext, wirelog_parse::starttls::Start::Fresh, uid)
    }

    /// The same, found by a signature (`wirelog_parse::services`): `start`
    /// says what the signature's bytes already confirmed.
    pub fn new_starttls_from(cleartext: Cleartext, start: wirelog_parse::starttls::Start, uid: Uid) -> AppState {
        let mut a = AppState::new_stream(Protocol::Tls, uid);
        a.cleartext = Some((cleartext, start));
        a
    }

    /// A TCP connection watched for SSH's confirmation (by its port or
    /// by signature, `wirelog_parse::ssh`).
    pub fn new_ssh(at: wirelog_parse::ssh::SshStart, uid: Uid) -> AppState {
        let mut a = AppState::new_stream(Protocol::Tls, uid);
        a.ssh = Some(at);
        a
    }


    /// Creates the parser and reassemblers of a waiting stream, in the state
    /// the empty segments so far would have left them in.
    fn start_parsing(&mut self, cfg: &AppConfig, budget: &mut Budget) {
        if let AppParser::Waiting(starts) = self.parser {
            // The parser's state is charged to the stream memory, and made
            // only if it fits: a flood of connections that each send a
            // first payload would otherwise hold 2.4 KB apiece outside
            // `--memory` (300,000 connections of one HTTP request head each
            // under `--memory 64M`: 609 MB peak RSS, 2026-11-30).
            if !self.charge_first(budget, PARSER_STATE_BYTES) {
                return;
            }
            let [to_server, to_client] = starts;
            self.parser = AppParser::Stream(Box::new(StreamApp {
                parser: match (self.cleartext, self.ssh) {
                    (Some((c, start)), _) => ConnParser::starttls_from(c, start, &cfg.parse),
                    (None, Some(at)) => ConnParser::Ssh(wirelog_parse::ssh::SshConn::start(at)),
                    (None, None) => self.protocol.stream_parser(&cfg.parse),
                },
                streams: [
                    to_server.reassembler(cfg.stream_buffer_bytes, budget),
                    to_client.reassembler(cfg.stream_buffer_bytes, budget),
                ],
            }));
        }
    }

    /// Charges a parser's fixed state (`fixed` bytes) to the stream memory
    /// before the parser is made, if it fits: whether it did. If not, the
    /// connection is stopped and counted ([`AppState::no_room`]); its
    /// parser must then be left (or put back) `Waiting`.
    fn charge_first(&mut self, budget: &mut Budget, fixed: usize) -> bool {
        if !budget.try_charge_state(fixed) {
            self.stopped = true;
            self.keep_and_no_room |= NO_ROOM;
            return false;
        }
        self.state_charged = u32::try_from(fixed).unwrap_or(u32::MAX);
        true
    }

    /// The parser's state now takes `now_bytes`: the stream memory is
    /// charged the difference from what was charged before (0 gives it
    /// all back, at the connection's end). Asked after every delivery.
    #[inline]
    fn recharge(&mut self, budget: &mut Budget, now_bytes: usize) {
        let now = u32::try_from(now_bytes).unwrap_or(u32::MAX);
        if now != self.state_charged {
            budget.charge_state(self.state_charged as usize, now as usize);
            self.state_charged = now;
        }
    }

    /// The stream memory had no room for a parser's state when the first
    /// payload came ([`PARSER_STATE_BYTES`]; a UDP flow's first datagram,
    /// [`UDP_DNS_STATE_BYTES`], [`UDP_MEMCACHED_STATE_BYTES`]): the
    /// connection is not parsed, and is counted (`AppStats::no_memory`).
    /// A flag of its own, set where the room was refused: no other path
    /// that stops a waiting connection is counted.
    pub fn no_room(&self) -> bool {
        self.keep_and_no_room & NO_ROOM != 0
    }

    /// Step 1b: log2 of the K this connection was last drawn at.
    pub fn keep(&self) -> u8 {
        self.keep_and_no_room & !NO_ROOM
    }

    /// Step 1b drew the connection at K = 2^`log2_k` (`set_thinning` keeps
    /// K within 2^16: the low 7 bits hold it).
    pub fn set_keep(&mut self, log2_k: u8) {
        debug_assert!(log2_k < NO_ROOM, "{log2_k}");
        self.keep_and_no_room = (self.keep_and_no_room & NO_ROOM) | (log2_k & !NO_ROOM);
    }

    /// `--cpu-budget` step 1b: parsing stops here for good. Reassembled
    /// bytes not parsed yet and half-seen messages are dropped (counted by
    /// the caller as a connection no longer parsed), never flushed: a
    /// request whose response is not parsed is not written as unanswered.
    pub fn shed(&mut self, budget: &mut Budget) {
        self.shed = true;
        self.stopped = true;
        if let AppParser::Stream(s) = &mut self.parser {
            for s in s.streams.iter_mut() {
                s.discard(budget);
            }
        }
    }

    /// Whether the connection's packets can change nothing of this state
    /// any more (`partial`: the TCP connection's, settled): its parsing
    /// stopped, and no payload would name its service now that did not
    /// already ([`AppState::payload_seen`]). Such a connection may be
    /// counted in the kernel (`--kernel-accounting`, `--cpu-budget` step 3).
    /// `partial` is asked only of a stopped parser that has not yet seen
    /// the whole payload (a lookup in the TCP state).
    pub fn counts_only(&self, partial: impl FnOnce() -> bool) -> bool {
        self.stopped && (self.whole_payload || partial())
    }

    /// Whether the parser stopped because it had read all it wanted (a TLS
    /// handshake), not because it could not parse.
    pub fn parser_done(&self) -> bool {
        matches!(&self.parser, AppParser::Stream(s) if s.parser.done())
    }

    /// A cleartext protocol watched for STARTTLS.
    pub fn watches_cleartext(&self) -> bool {
        self.cleartext.is_some() || self.ssh.is_some()
    }

    /// conn.log's `service` when the parser decides it whatever it parsed
    /// (a STARTTLS protocol, named once confirmed); None when the
    /// caller's rule applies.
    pub fn confirmed_service(&self) -> Option<Option<&'static str>> {
        match &self.parser {
            AppParser::Stream(s) => s.parser.confirmed_service(),
            AppParser::Waiting(_) if self.watches_cleartext() => Some(None),
            _ => None,
        }
    }

    /// The payload of one delivery: whether the TCP connection was partial
    /// when it came (Zeek's `IsPartial`, `TcpConn::is_partial`; false over
    /// UDP). Empty payloads say nothing. `partial` (a TCP state lookup, ~30
    /// instructions) is asked only when its answer can change something: a
    /// payload while no payload was whole yet, not at every segment.
    #[inline]
    pub fn payload_seen(&mut self, payload_len: usize, partial: impl FnOnce() -> bool) {
        if payload_len > 0 && !self.whole_payload {
            self.whole_payload = !partial();
        }
    }

    /// conn.log's `service` once parsing ended (`stopped`: the parser gave
    /// up or was stopped), the one place a connection with a parser is
    /// named, whether its protocol was found by port or by content. Like
    /// Zeek, a service is named once its analyzer understood the traffic:
    /// here, once a transaction was parsed (or the protocol was recognised
    /// and then turned out encrypted or compressed; not TLS: a port-443
    /// stream that is not TLS is no "ssl"), or as the parser confirmed it
    /// (STARTTLS protocols, SSH). What Zeek's analyzer never read (the
    /// payload of a partial connection, [`zeek_skips_partial`]) confirms
    /// nothing: no service from it.
    pub fn conn_service(&self, stopped: bool) -> Option<&'static str> {
        let service = self.confirmed_service().unwrap_or_else(|| {
            (self.transactions > 0 || stopped && self.protocol != Protocol::Tls).then(|| self.service())
        });
        service.filter(|s| self.whole_payload || !zeek_skips_partial(s))
    }

    /// conn.log's `service` (`mysql,ssl` when TLS was found inside MySQL).
    pub fn service(&self) -> &'static str {
        match &self.parser {
            AppParser::Stream(s) => s.parser.service(self.protocol),
            AppParser::Waiting(_) | AppParser::Udp(_) | AppParser::UdpMemcached(_) => self.protocol.service(),
        }
    }

    /// One TCP segment of the connection; `ack` is its acknowledgement
    /// number when the ACK flag is set. `wire_len` is its payload's length
    /// on the wire: a segment cut by the snap length carries less
    /// (`payload`), and its bytes past the cut reach the parser as a cut
    /// ([`StreamParser::cut`]), not as a gap.
    #[allow(clippy::too_many_arguments)]
    pub fn segment(
        &mut self,
        dir: Dir,
        seq: u32,
        ts_ns: i64,
        payload: &[u8],
        wire_len: u32,
        flags: SegFlags,
        ack: Option<u32>,
        cfg: &AppConfig,
        budget: &mut Budget,
        out: &mut dyn TxSink,
    ) {
        if self.stopped {
            return;
        }
        if let AppParser::Waiting(starts) = &mut self.parser {
            if wire_len == 0 {
                // A fresh parser's `expire` has nothing to expire and it
                // cannot give up without bytes: the start is all that changes.
                starts[(dir == Dir::ToClient) as usize].empty_segment(seq, flags);
                return;
            }
            self.start_parsing(cfg, budget);
        }
        let AppParser::Stream(s) = &mut self.parser else {
            return;
        };
        let StreamApp { parser, streams } = &mut **s;
        // What the parser may hold after this packet: what it holds now
        // plus what the shared budget has left (a TLS handshake message of
        // megabytes is kept only within it, else cut and counted).
        parser.set_allowance(self.state_charged as usize + budget.available());
        let this = (dir == Dir::ToClient) as usize;
        if let Some(ack) = ack {
            // What this packet acknowledges of the other direction comes
            // first: those bytes were sent before it.
            let other_dir = if this == 0 { Dir::ToClient } else { Dir::ToServer };
            streams[1 - this].acked(ack, ts_ns, budget, &mut |c| match c {
                Chunk::Data { ts_ns, data } => parser.data(other_dir, ts_ns, data, out),
                Chunk::Gap { ts_ns, len } => parser.gap(other_dir, ts_ns, len, out),
                Chunk::Cut { ts_ns, len } => parser.cut(other_dir, ts_ns, len, out),
            });
        }
        let stream = &mut streams[this];
        stream.segment_cut(seq, ts_ns, payload, wire_len, flags, budget, &mut |c| match c {
            Chunk::Data { ts_ns, data } => parser.data(dir, ts_ns, data, out),
            Chunk::Gap { ts_ns, len } => parser.gap(dir, ts_ns, len, out),
            Chunk::Cut { ts_ns, len } => parser.cut(dir, ts_ns, len, out),
        });
        parser.expire(ts_ns, out);
        let now = PARSER_STATE_BYTES + parser.state_bytes();
        if parser.gave_up() {
            self.stopped = true;
            for s in streams.iter_mut() {
                s.discard(budget);
            }
        }
        self.recharge(budget, now);
    }

    /// Bytes of this connection's streams beyond the snap length (sent, in
    /// place, not captured: [`Chunk::Cut`]), so far.
    pub fn beyond_snaplen_bytes(&self) -> u64 {
        match &self.parser {
            AppParser::Stream(s) => s.streams.iter().map(|r| r.stats().cut_bytes).sum(),
            _ => 0,
        }
    }

    /// One UDP datagram of the connection. A UDP flow's parser (DNS or
    /// Memcached, by its protocol) is made at its first datagram, and only
    /// if its state fits the stream memory, as a TCP connection's is at its
    /// first payload byte ([`AppState::start_parsing`]): a flood from as
    /// many sources makes no parser it cannot keep (300,000 DNS queries
    /// from as many sources held 1.8 KB a flow outside `--memory`: 360 MiB
    /// of peak RSS under `--memory 64M`, 2026-11-30); a flow without room
    /// is not parsed, and counted ([`AppState::no_room`]).
    pub fn datagram(
        &mut self,
        dir: Dir,
        ts_ns: i64,
        payload: &[u8],
        cfg: &AppConfig,
        budget: &mut Budget,
        out: &mut dyn TxSink,
    ) {
        if self.shed || self.stopped {
            return;
        }
        if let AppParser::Waiting(_) = self.parser {
            let fixed = match self.protocol {
                Protocol::Dns => UDP_DNS_STATE_BYTES,
                Protocol::Memcached => UDP_MEMCACHED_STATE_BYTES,
                _ => return,
            };
            if !self.charge_first(budget, fixed) {
                return;
            }
            self.parser = match self.protocol {
                Protocol::Dns => AppParser::Udp(Box::new(UdpDns::new(&cfg.parse))),
                _ => AppParser::UdpMemcached(Box::new(UdpMemcached::new(&cfg.parse))),
            };
        }
        let (fixed, held) = match &mut self.parser {
            AppParser::Udp(d) => {
                d.datagram(dir, ts_ns, payload, out);
                d.expire(ts_ns, out);
                (UDP_DNS_STATE_BYTES, d.held_bytes())
            }
            AppParser::UdpMemcached(m) => {
                m.datagram(dir, ts_ns, payload, out);
                m.expire(ts_ns, out);
                (UDP_MEMCACHED_STATE_BYTES, m.held_bytes())
            }
            AppParser::Waiting(_) | AppParser::Stream(_) => return,
        };
        self.recharge(budget, fixed + held);
    }

    /// The connection ended at `ts_ns`: holes become gaps, pending requests
    /// and responses become unmatched transactions, buffers return to the budget.
    pub fn finish(
        &mut self,
        ts_ns: i64,
        cfg: &AppConfig,
        budget: &mut Budget,
        out: &mut dyn TxSink,
    ) -> (ParseStats, bool) {
        if self.shed && matches!(self.parser, AppParser::Waiting(_)) {
            return (ParseStats::default(), false);
        }
        if let AppParser::Waiting(starts) = self.parser {
            // Without payload and without a FIN past the stream's start, a
            // parser would flush nothing, finish with nothing pending and
            // count nothing (`fresh_parsers_finish_empty`): none is made.
            if !starts.iter().any(|s| s.fin_beyond_start()) {
                return (ParseStats::default(), false);
            }
            self.start_parsing(cfg, budget);
        }
        let ended = match &mut self.parser {
            AppParser::Waiting(_) => (ParseStats::default(), false),
            AppParser::Stream(s) => {
                let StreamApp { parser, streams } = &mut **s;
                if !self.stopped {
                    for (i, s) in streams.iter_mut().enumerate() {
                        let dir = if i == 0 { Dir::ToServer } else { Dir::ToClient };
                        s.flush(ts_ns, budget, &mut |c| match c {
                            Chunk::Data { ts_ns, data } => parser.data(dir, ts_ns, data, out),
                            Chunk::Gap { ts_ns, len } => parser.gap(dir, ts_ns, len, out),
                            Chunk::Cut { ts_ns, len } => parser.cut(dir, ts_ns, len, out),
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
                if !self.shed {
                    d.finish(ts_ns, out);
                }
                (d.stats(), false)
            }
            AppParser::UdpMemcached(m) => {
                if !self.shed {
                    m.finish(ts_ns, out);
                }
                (m.stats(), false)
            }
        };
        // Whatever the parser was, its state goes back to the stream memory.
        self.recharge(budget, 0);
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `AppState::finish` skips for a stream that never carried payload
    /// must be nothing: a fresh parser of every protocol expires nothing,
    /// has not given up, finishes with no transaction and counts nothing.
    #[test]
    fn fresh_parsers_finish_empty() {
        let cfg = ParseConfig::default();
        for p in Protocol::ALL {
            let mut parser = p.stream_parser(&cfg);
            let mut out = Vec::new();
            parser.expire(i64::MAX / 2, &mut out);
            assert!(!parser.gave_up(), "{p:?}");
            parser.finish(i64::MAX / 2, &mut out);
            assert!(out.is_empty(), "{p:?}");
            assert_eq!(parser.stats(), ParseStats::default(), "{p:?}");
        }
    }

    /// Everything a reassembler delivers after a connection's empty segments
    /// went through `StreamStart` is what it delivers after seeing them itself.
    #[test]
    fn waiting_start_replays_empty_segments() {
        const SYN: SegFlags = SegFlags { syn: true, fin: false, rst: false };
        const ACK: SegFlags = SegFlags { syn: false, fin: false, rst: false };
        const FIN: SegFlags = SegFlags { syn: false, fin: true, rst: false };
        let cases: &[&[(u32, SegFlags)]] = &[
            &[(1000, SYN)],
            &[(1000, SYN), (1001, ACK)],
            &[(1000, SYN), (1001, FIN)],
            &[(1000, SYN), (1041, FIN)],
            &[(1001, ACK), (1001, ACK)],
            &[(1050, FIN)],
            &[(u32::MAX, SYN), (3, FIN)],
            &[],
        ];
        let later: &[(u32, &[u8], SegFlags)] = &[(1011, b"later", ACK), (1001, b"0123456789", ACK), (1016, b"end", FIN)];
        for case in cases {
            let (mut b1, mut b2) = (Budget::new(1 << 20), Budget::new(1 << 20));
            let mut direct = Reassembler::new(1 << 16);
            let mut start = StreamStart::default();
            let mut none = |_: Chunk<'_>| panic!("an empty segment delivered a chunk");
            for &(seq, f) in *case {
                direct.segment(seq, 0, &[], f, &mut b1, &mut none);
                start.empty_segment(seq, f);
            }
            let mut replayed = start.reassembler(1 << 16, &mut b2);
            let mut log1 = Vec::new();
            let mut log2 = Vec::new();
            for (r, b, log) in [(&mut direct, &mut b1, &mut log1), (&mut replayed, &mut b2, &mut log2)] {
                let mut sink = |c: Chunk<'_>| {
                    log.push(match c {
                        Chunk::Data { ts_ns, data } => (ts_ns, data.to_vec(), 0),
                        Chunk::Gap { ts_ns, len } => (ts_ns, Vec::new(), len),
                        Chunk::Cut { ts_ns, len } => (ts_ns, b"cut".to_vec(), len),
                    })
                };
                for (i, &(seq, data, f)) in later.iter().enumerate() {
                    r.segment(seq, i as i64 + 1, data, f, b, &mut sink);
                }
                r.flush(9, b, &mut sink);
            }
            assert_eq!(log1, log2, "{case:?}");
            assert_eq!(direct.stats(), replayed.stats(), "{case:?}");
            assert_eq!(direct.is_closed(), replayed.is_closed(), "{case:?}");
            assert_eq!(b1.used(), b2.used(), "{case:?}");
        }
    }

    /// An HTTP/2 connection's state (HPACK tables, the stream table,
    /// buffered header blocks) is charged to the budget as it grows with
    /// open streams and inserted header fields, takes room from
    /// out-of-order bytes, and is given back when the connection ends.
    #[test]
    fn http2_state_is_charged_to_the_budget() {
        fn frame(ty: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
            let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
            f.extend_from_slice(&[ty, flags]);
            f.extend_from_slice(&stream.to_be_bytes());
            f.extend_from_slice(payload);
            f
        }
        const PLAIN: SegFlags = SegFlags { syn: false, fin: false, rst: false };
        let cfg = AppConfig::default();
        let mut budget = Budget::new(1 << 20);
        let mut out = Vec::new();
        let uid = wirelog_record::UidGenerator::new(1).next_uid();
        let mut app = AppState::new_stream(Protocol::Http, uid);
        let mut seq = 1000u32;
        let mut send = |app: &mut AppState, budget: &mut Budget, bytes: &[u8], out: &mut Vec<wirelog_parse::Transaction>| {
            app.segment(Dir::ToServer, seq, 1, bytes, bytes.len() as u32, PLAIN, None, &cfg, budget, out);
            seq = seq.wrapping_add(bytes.len() as u32);
        };
        let mut c = wirelog_parse::http2::PREFACE.to_vec();
        c.extend(frame(4, 0, 0, &[]));
        send(&mut app, &mut budget, &c, &mut out);
        let at_start = budget.state();
        assert!(at_start >= std::mem::size_of::<wirelog_parse::http2::Http2Parser>(), "{at_start}");
        // 64 GETs left open, each inserting a new :authority (literal with
        // incremental indexing, name index 1) into the client's HPACK table.
        let mut last = at_start;
        let mut grew = 0;
        for i in 0..64u32 {
            let host = format!("host-{i:04}.example");
            let mut block = vec![0x82, 0x86, 0x84, 0x41, host.len() as u8];
            block.extend_from_slice(host.as_bytes());
            send(&mut app, &mut budget, &frame(1, 0x5, 1 + 2 * i, &block), &mut out);
            assert!(budget.state() >= last, "state shrank at stream {i}: {} < {last}", budget.state());
            grew += (budget.state() > last) as u32;
            last = budget.state();
        }
        println!("HTTP/2 state charged: {at_start} B after the preface, {last} B with 64 open streams and 64 HPACK entries");
        // Every insert adds its RFC size (name + value + 32) at least.
        assert!(last >= at_start + 64 * (10 + 17 + 32), "{at_start} -> {last}");
        assert!(grew >= 60, "grew at {grew} of 64 streams");
        assert!(out.is_empty(), "no stream ended: {out:?}");
        // The state takes room from out-of-order bytes: a budget with just
        // the state's room left refuses a segment beyond the hole.
        let mut tight = Budget::new(last + 10);
        tight.charge_state(0, last);
        let mut r = Reassembler::new(1 << 16);
        r.segment(1, 0, &[], PLAIN, &mut tight, &mut |_| {});
        r.segment(100, 0, &[0; 20], PLAIN, &mut tight, &mut |_| {});
        assert_eq!((tight.used(), tight.refused), (0, 1));
        // The end of the connection gives it all back.
        let _ = app.finish(2, &cfg, &mut budget, &mut out);
        assert_eq!(out.len(), 64);
        assert_eq!((budget.state(), budget.used()), (0, 0));
    }

    /// The services whose Zeek analyzer skips partial connections, by the
    /// first name of conn.log's `service`.
    #[test]
    fn partial_rule_follows_zeeks_analyzers() {
        for s in ["http", "ssl", "ssh", "smtp", "pop3", "imap", "xmpp", "mysql", "mysql,ssl", "smtp,ssl"] {
            assert!(zeek_skips_partial(s), "{s}");
        }
        for s in ["ftp", "irc", "ldap", "dns", "postgresql", "redis", "ftp,ssl", "http2", "dhcp"] {
            assert!(!zeek_skips_partial(s), "{s}");
        }
    }

    /// Step 1b's pools are indexed by `protocol as usize` on the packet
    /// path (no search): the declaration order is `Protocol::ALL`'s.
    #[test]
    fn protocols_are_declared_in_their_index_order() {
        for (i, p) in Protocol::ALL.iter().enumerate() {
            assert_eq!(*p as usize, i, "{p:?}");
            assert_eq!(protocol_index(*p), i);
        }
    }

    /// `no_memory` counts the connections the stream memory refused a
    /// parser's state, and only those: a waiting connection stopped by any
    /// other path (step 1b's `shed`, or any later one) is not counted, and
    /// step 1b's K beside the flag in the same byte leaves it alone.
    #[test]
    fn no_room_is_set_only_where_room_was_refused() {
        const PLAIN: SegFlags = SegFlags { syn: false, fin: false, rst: false };
        let cfg = AppConfig::default();
        let mut uids = wirelog_record::UidGenerator::new(1);
        let mut out = Vec::new();
        let head = b"GET / HTTP/1.1\r\n";
        let mut full = Budget::new(PARSER_STATE_BYTES - 1);
        let mut refused = AppState::new_stream(Protocol::Http, uids.next_uid());
        refused.set_keep(16);
        refused.segment(Dir::ToServer, 1, 1, head, head.len() as u32, PLAIN, None, &cfg, &mut full, &mut out);
        assert!(refused.stopped && refused.no_room());
        assert!(matches!(refused.parser, AppParser::Waiting(_)));
        assert_eq!((refused.keep(), full.state()), (16, 0));
        refused.set_keep(3);
        assert!(refused.no_room() && refused.keep() == 3);
        assert_eq!(refused.finish(2, &cfg, &mut full, &mut out).0, ParseStats::default());
        assert!(refused.no_room());
        // Stopped while waiting by step 1b, or by another path.
        let mut shed = AppState::new_stream(Protocol::Http, uids.next_uid());
        shed.shed(&mut full);
        let mut stopped = AppState::new_stream(Protocol::Http, uids.next_uid());
        stopped.stopped = true;
        stopped.set_keep(16);
        for a in [&shed, &stopped] {
            assert!(a.stopped && matches!(a.parser, AppParser::Waiting(_)) && !a.no_room());
        }
        // Room enough: parsed, not counted.
        let mut room = Budget::new(PARSER_STATE_BYTES);
        let mut parsed = AppState::new_stream(Protocol::Http, uids.next_uid());
        parsed.segment(Dir::ToServer, 1, 1, head, head.len() as u32, PLAIN, None, &cfg, &mut room, &mut out);
        assert!(!parsed.stopped && !parsed.no_room() && matches!(parsed.parser, AppParser::Stream(_)));
        // UDP: a flow refused at its first datagram goes back to waiting.
        let query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01";
        let mut dns = AppState::new_stream(Protocol::Dns, uids.next_uid());
        dns.datagram(Dir::ToServer, 1, query, &cfg, &mut Budget::new(UDP_DNS_STATE_BYTES - 1), &mut out);
        assert!(dns.no_room() && matches!(dns.parser, AppParser::Waiting(_)));
        let mut mc = AppState::new_stream(Protocol::Memcached, uids.next_uid());
        mc.datagram(Dir::ToServer, 1, b"\0\x01\0\0\0\x01\0\0get a\r\n", &cfg, &mut Budget::new(1 << 20), &mut out);
        assert!(!mc.no_room() && matches!(mc.parser, AppParser::UdpMemcached(_)));
        assert!(out.is_empty(), "{out:?}");
    }

    /// A connection waiting for payload holds a small slab slot, not a parser.
    #[test]
    fn waiting_state_is_small() {
        let size = std::mem::size_of::<AppState>();
        println!("AppState {size} B, StreamApp {} B, UdpDns {} B", std::mem::size_of::<StreamApp>(), std::mem::size_of::<UdpDns>());
        assert!(size <= 80, "AppState grew to {size} bytes");
    }
}
