//! The connection tracker: packets in, conn records out.

use wirelog_decode::{Checksum, IpPacket, Transport};
use wirelog_parse::detect::{Detected, Detection};
use wirelog_parse::services::{SigStream, TcpSignature};
use wirelog_parse::starttls::Cleartext;
use wirelog_parse::stream::{Budget, SegFlags};
use wirelog_parse::{Dir, Protocol, Transaction, TxSink};
use wirelog_procs::NewConn;
use wirelog_record::{ConnRecord, Proto, TxRecord, UidGenerator};

use crate::app::{protocol_index, AppConfig, AppState, AppStats, APP_SLOT_BYTES};

/// The signature streams of connections no parser claimed, by table index:
/// looked up for every payload segment of such a connection, so hashed a
/// word at a time: on echo-connections.pcap.gz (500 unclaimed connections
/// of ~104 segments) `sig_push` 25.3 M -> 21.3 M instructions, the whole
/// run 261.1 M -> 257.0 M (callgrind, `read -q -C --no-store`).
type SigStreams = std::collections::HashMap<u32, Box<SigStream>, std::hash::BuildHasherDefault<wirelog_parse::fingerprint::WordHasher>>;
use crate::conn::{Conn, DatagramState, Overflow, ProtoState, TcpStates, Timer, TimerBases, NO_APP};
use crate::slab::Slab;
use crate::flow::{FlowKey, FlowSlot, FlowTable};
use crate::keep::{uid_for, KeepRule, KeepState, KeepVerdict};
use crate::key::{ConnKey, Side};
use crate::ports::{PortSet, DEFAULT_TCP_SERVER_PORTS, DEFAULT_UDP_SERVER_PORTS};
use crate::table::{ConnTable, Entry, StoredKey, V4Tuple, V6Pairs};
use crate::tcp::Segment;
use crate::timer::{TimerEntry, TimerWheel};

const SEC: i64 = 1_000_000_000;

/// `capture --cpu-budget` step 1b never stops the last parsed connection
/// of a protocol (see `Tracker::set_thinning`): an estimate needs at least
/// one connection to rest on, and stopping it would save less than the
/// next step of the shedding order (the governor takes that one instead,
/// told by `AppStats::parsing_by` that nothing is left to stop).
pub const THIN_FLOOR: u64 = 1;

/// Tracker settings; the defaults are Zeek's.
#[derive(Clone)]
pub struct TrackerConfig {
    pub tcp_inactivity_ns: i64,
    pub udp_inactivity_ns: i64,
    pub icmp_inactivity_ns: i64,
    /// `tcp_attempt_delay`: an unanswered SYN is reported after this long.
    pub tcp_attempt_delay_ns: i64,
    /// `tcp_close_delay`: a closed connection lingers this long before removal.
    pub tcp_close_delay_ns: i64,
    /// `tcp_reset_delay`.
    pub tcp_reset_delay_ns: i64,
    /// `tcp_connection_linger`: idle time before a half-closed connection may expire.
    pub tcp_linger_ns: i64,
    /// `tcp_SYN_timeout`: first expiry check after the connection starts.
    pub tcp_syn_timeout_ns: i64,
    /// `tcp_session_timer`: period of the expiry checks.
    pub tcp_session_timer_ns: i64,
    /// Upper bound on tracked connections; beyond it the least recently active are evicted.
    pub max_connections: usize,
    /// Count content gaps of connections that never completed a handshake (Zeek's
    /// `report_gaps_for_partial`, off by default).
    pub report_gaps_for_partial: bool,
    pub tcp_server_ports: PortSet,
    pub udp_server_ports: PortSet,
    /// UDP flows to these responder ports are DNS sessions (where Zeek attaches its DNS analyzer).
    pub dns_ports: PortSet,
    /// Zeek's `dns_session_timeout`: a UDP DNS flow idle this long ends (0 disables).
    pub dns_session_timeout_ns: i64,
    /// Seed for uids; `None` draws one from the clock.
    pub uid_seed: Option<u64>,
    /// Length of a flow time bucket (aligned to the wall clock).
    pub flow_interval_ns: i64,
    /// Upper bound on flows per bucket; beyond it the bucket is written early.
    pub max_flows: usize,
    /// Application parsing (HTTP, MySQL, PostgreSQL, Redis, DNS); `None` = off.
    pub app: Option<AppConfig>,
    /// One memory budget for the tables and the stream buffers (see
    /// [`SharedMemory`]); `None`: each keeps its fixed limit.
    pub shared_memory: Option<SharedMemory>,
    /// TCP segments without payload and without SYN/FIN/RST never reach the
    /// tracker (`capture --skip-empty-tcp` drops them in the kernel). Nothing
    /// waits for them: byte counts come from sequence numbers and a
    /// connection is closed by its FINs/RST, as without the filter. TCP conn
    /// records say so, because packet counts and history then lack pure ACKs.
    pub empty_tcp_skipped: bool,
}

impl Default for TrackerConfig {
    fn default() -> Self {
        TrackerConfig {
            tcp_inactivity_ns: 300 * SEC,
            udp_inactivity_ns: 60 * SEC,
            icmp_inactivity_ns: 60 * SEC,
            tcp_attempt_delay_ns: 5 * SEC,
            tcp_close_delay_ns: 5 * SEC,
            tcp_reset_delay_ns: 5 * SEC,
            tcp_linger_ns: 5 * SEC,
            tcp_syn_timeout_ns: 5 * SEC,
            tcp_session_timer_ns: 6 * SEC,
            max_connections: 1 << 20,
            report_gaps_for_partial: false,
            tcp_server_ports: PortSet::from_ports(DEFAULT_TCP_SERVER_PORTS),
            udp_server_ports: PortSet::from_ports(DEFAULT_UDP_SERVER_PORTS),
            dns_ports: PortSet::from_ports(&[53, 137, 5353, 5355]),
            dns_session_timeout_ns: 10 * SEC,
            uid_seed: None,
            flow_interval_ns: 300 * SEC,
            max_flows: 1 << 20,
            app: None,
            shared_memory: None,
            empty_tcp_skipped: false,
        }
    }
}

/// `--memory` with parsing on: the stream buffers' share
/// (`AppConfig::total_buffer_bytes`) is lent to the tables while the buffers
/// leave it unused, and taken back as they need it. Without it the buffers'
/// share was set aside whether or not a parser ever buffered a byte, so
/// parsing on held fewer connections and flows than `--no-parse` on traffic
/// nothing parses (540 k UDP flows: a flow table of 524,288 with parsing,
/// 699,050 without, and every flow bucket written early twice).
///
/// Once per batch of records ([`Tracker::move_records_into`]) the tracker
/// sets: the flow table's limit to its share (1/4, as the budget splits
/// `--memory`) of `bytes` less what the buffers hold, between `min_flows`
/// (its share when the buffers hold their whole share) and
/// `TrackerConfig::max_flows` (its share of the whole of `bytes`); and the
/// buffers' limit to their share less what the flow table holds beyond
/// `min_flows`. A flow table above a lowered limit does not shrink at once:
/// a new flow writes the bucket early, as when it is full. The bound (tables
/// at their bytes per entry at most, plus buffers) is `bytes`, give or take
/// one batch's growth.
///
/// The connection table does not borrow: it keeps its own capacity, which
/// `capture` and `read` make its share of what the buffers' share leaves
/// (src/cli.rs, `TrackArgs::budget`). Lending to it too grew the floods
/// test's table past half its flood and `memory_budget`'s peak past its
/// bound (BENCHMARKS.md, "Against goProbe", branch gp36); the connection
/// side that did it was dead in `capture` and `read` since, and was
/// removed (issue 35, branch conn35).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedMemory {
    /// `--memory`.
    pub bytes: usize,
    /// The flow table's limit when the buffers hold their whole share.
    pub min_flows: usize,
}

mod kernel;

/// Counters of what the tracker did with the packets it was given.
#[derive(Debug, Default, Clone)]
pub struct TrackStats {
    pub packets: u64,
    pub connections: u64,
    /// Connections removed early because the table was full (their records are still written).
    pub evicted: u64,
    /// IP packets of protocols without connection semantics here (e.g. ESP, SCTP).
    pub not_tracked: u64,
    /// Packets dropped for a bad IPv4 header checksum (as Zeek drops them).
    pub bad_ip_checksum: u64,
    pub peak_connections: u64,
    /// New connections not queued for process resolution because the queue
    /// was full (see [`Tracker::queue_new_connections`]).
    pub new_conns_dropped: u64,
    /// Bytes missing from TCP streams, summed over the connections that
    /// ended (their records' `missed_bytes`): the loss table's.
    pub missed_bytes: u64,
}

pub struct Tracker {
    cfg: TrackerConfig,
    table: ConnTable<Conn>,
    /// What does not fit in the entries: counters past 2^32, latest times 4.3 s or more after the last progress.
    overflow: Overflow,
    /// What the TCP timers in the entries count from (fixed at creation).
    timer_bases: TimerBases,
    /// TCP endpoint state of the TCP connections (see `slab`).
    tcp: TcpStates,
    /// The parsers' states, by `Conn::app`.
    apps: Slab<AppState>,
    flows: FlowTable,
    wheel: TimerWheel,
    uids: UidGenerator,
    seed: u64,
    out: Vec<ConnRecord>,
    stats: TrackStats,
    now: i64,
    evict_cursor: usize,
    /// The timer wheel is cleared of stale checks when it grows past this.
    compact_wheel_at: usize,
    sample: Vec<u32>,
    due: Vec<TimerEntry>,
    /// Out-of-order stream bytes, shared by every parsed connection.
    budget: Budget,
    /// The first stream bytes of the connections whose service signatures
    /// are still matched (`Detection::has_sig_stream`), by table index;
    /// charged to `budget` as parser state.
    sig_streams: SigStreams,
    txs: Vec<TxRecord>,
    app_stats: AppStats,
    /// New connections for the process resolver, at most `new_conns_cap`
    /// between two takes (0: not collected).
    new_conns: Vec<NewConn>,
    new_conns_cap: usize,
    /// Where [`Tracker::finish_some`] goes on in the slab.
    finish_from: usize,
    /// `--pcap-dir`: per-connection uids and counts, and the verdict on
    /// the last packet (`None`: no packets are kept).
    keep: Option<KeepState>,
    /// `--kernel-accounting`: the connections delegated to the kernel.
    kernel: Option<Box<crate::kernel::Delegations>>,
    /// `capture --cpu-budget` step 1: new connections are parsed 1 in
    /// `sample_n` (1: all), drawn with `sample_rng` (random rather than
    /// every N-th, so a pattern in the connections cannot line up with N).
    sample_n: u32,
    sample_rng: u64,
    /// Step 1b: connections already parsed go on 1 in `thin_k` (1: all).
    thin_k: u32,
    /// Step 1b, per protocol: the weight of stopped connections, still
    /// open, that no parsed connection stands for yet (the next parsed
    /// connection of the protocol to make a transaction takes it);
    /// negative when stopped connections ended after their weight was
    /// taken (the next one gives that back). See `set_thinning`.
    orphans: [i64; Protocol::ALL.len()],
    /// Packet time the skip-empty-TCP filter was last switched off (see
    /// [`Tracker::set_empty_tcp_skipped`]); `i64::MIN`: never.
    empty_tcp_off_at: i64,
}

impl Tracker {
    pub fn new(cfg: TrackerConfig) -> Self {
        let uids = match cfg.uid_seed {
            Some(s) => UidGenerator::new(s),
            None => UidGenerator::from_entropy(),
        };
        let seed = {
            let mut g = match cfg.uid_seed {
                Some(s) => UidGenerator::new(s ^ 0x5eed),
                None => UidGenerator::from_entropy(),
            };
            let u = g.next_uid();
            u.as_str().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
            })
        };
        let cfg_budget = cfg.app.as_ref().map_or(0, |a| a.total_buffer_bytes);
        Tracker {
            table: ConnTable::with_capacity(cfg.max_connections),
            overflow: Overflow::default(),
            timer_bases: TimerBases([
                cfg.tcp_attempt_delay_ns,
                cfg.tcp_close_delay_ns.min(cfg.tcp_reset_delay_ns),
                cfg.tcp_session_timer_ns,
            ]),
            tcp: TcpStates::with_capacity(cfg.max_connections, cfg.report_gaps_for_partial),
            apps: Slab::with_capacity_small_pages(if cfg.app.is_some() { cfg.max_connections } else { 0 }),
            flows: FlowTable::new(cfg.flow_interval_ns, cfg.max_flows, seed ^ 0xf10f),
            cfg,
            wheel: TimerWheel::new(),
            uids,
            seed,
            out: Vec::new(),
            stats: TrackStats::default(),
            now: i64::MIN,
            evict_cursor: 0,
            compact_wheel_at: 0,
            sample: Vec::new(),
            due: Vec::new(),
            budget: Budget::new(cfg_budget),
            sig_streams: SigStreams::default(),
            txs: Vec::new(),
            app_stats: AppStats::default(),
            new_conns: Vec::new(),
            new_conns_cap: 0,
            finish_from: 0,
            keep: None,
            kernel: None,
            sample_n: 1,
            sample_rng: seed | 1,
            thin_k: 1,
            orphans: [0; Protocol::ALL.len()],
            empty_tcp_off_at: i64::MIN,
        }
    }

    /// The kernel's skip-empty-TCP filter was switched on or off while
    /// capturing (`--cpu-budget` step 2): TCP records of connections open
    /// while it was on say so. `at_ns`: when, in packet time.
    pub fn set_empty_tcp_skipped(&mut self, on: bool, at_ns: i64) {
        if self.cfg.empty_tcp_skipped && !on {
            self.empty_tcp_off_at = at_ns;
        }
        self.cfg.empty_tcp_skipped = on;
    }

    /// Parses from now on 1 in `n` of the new connections whose protocol is
    /// found (a connection is parsed whole or not at all: the draw is made
    /// before its first byte is parsed); their transactions carry the
    /// weight `n`. Connections already parsing go on. 1: all of them.
    pub fn set_sampling(&mut self, n: u32) {
        self.sample_n = n.max(1);
    }

    /// `capture --cpu-budget` step 1b: connections already being parsed go
    /// on being parsed 1 in `k` (a power of two; 1: all). Each parsed
    /// connection is drawn at its next packet, once per doubling of `k`
    /// since its last draw (kept with probability 1 in the ratio), except
    /// the last [`THIN_FLOOR`] parsed connections of its protocol, which
    /// are always kept (the estimate needs at least one connection to rest
    /// on; the budget, if it still cannot be held, takes the next step of
    /// the shedding order instead). Left out, its parsing stops for good
    /// (its transactions so far stay; what its parser held is dropped;
    /// counted in `AppStats::parse_stopped`) and its weight (its own and
    /// what it carried) goes to its protocol's pool, which the next parsed
    /// connection of that protocol to make a transaction takes
    /// (`carried`): the weights of the parsed connections of a protocol
    /// always add up to the connections of that protocol open and parsed
    /// at some point (when a stopped connection ends its weight is taken
    /// back, and what a parsed one carried goes back to the pool when it
    /// ends), so the
    /// sum of the transactions' weights estimates every connection's
    /// transactions by those of the connections still parsed (a ratio
    /// estimator: exact when the connections are alike, as sysbench's
    /// are). A smaller `k` later stops nothing more; stopped connections
    /// are not parsed again (a parser cannot start in the middle of a
    /// stream), and kept ones keep what they carry. New connections start
    /// at the current `k` (only step 1 draws them).
    pub fn set_thinning(&mut self, k: u32) {
        self.thin_k = k.clamp(1, 1 << 16).next_power_of_two();
    }

    /// Collects the tuple of every connection created, at most `cap`
    /// between two [`Tracker::take_new_connections`] (beyond it they are
    /// counted in `new_conns_dropped`): the only work process resolution
    /// adds to the packet path, once per connection, never per packet.
    pub fn queue_new_connections(&mut self, cap: usize) {
        self.new_conns_cap = cap;
        self.new_conns = Vec::with_capacity(cap);
    }

    /// Swaps the connections created since the last call into `into`
    /// (cleared first).
    pub fn take_new_connections(&mut self, into: &mut Vec<NewConn>) {
        into.clear();
        if self.new_conns.is_empty() {
            return;
        }
        std::mem::swap(into, &mut self.new_conns);
        // One allocation per take with new connections, none per connection
        // while the rate holds: sized like the batch just taken, not like the
        // cap (16 k entries, ~0.9 MB, would be allocated on every ship).
        self.new_conns.reserve(into.len().min(self.new_conns_cap));
    }

    /// Decides for every packet from now on whether it is kept to disk
    /// (see [`KeepRule`]); [`Tracker::keep_verdict`] tells.
    pub fn keep_packets(&mut self, rule: KeepRule) {
        self.keep = Some(KeepState::new(rule));
    }

    /// The verdict on the packet passed last (not kept when keeping is off).
    #[inline]
    pub fn keep_verdict(&self) -> KeepVerdict {
        self.keep.as_ref().map_or(KeepVerdict::default(), |k| k.verdict)
    }

    /// The verdict on a packet that reaches no connection (not decoded).
    #[inline]
    pub fn unrelated_verdict(&mut self) -> KeepVerdict {
        match self.keep.as_mut() {
            Some(k) => {
                k.unrelated();
                k.verdict
            }
            None => KeepVerdict::default(),
        }
    }

    /// Out-of-order stream bytes held right now (0 once every connection ended).
    pub fn stream_buffer_bytes(&self) -> usize {
        self.budget.used()
    }

    /// Parser state held right now and charged to the same budget as the
    /// out-of-order bytes (HTTP/2's HPACK tables, streams and header
    /// blocks; 0 once every connection ended).
    pub fn parser_state_bytes(&self) -> usize {
        self.budget.state()
    }

    /// What application parsing did so far.
    pub fn app_stats(&self) -> &AppStats {
        &self.app_stats
    }

    /// Transactions parsed since the last call.
    pub fn take_transactions(&mut self) -> std::vec::Drain<'_, TxRecord> {
        self.txs.drain(..)
    }

    pub fn stats(&self) -> &TrackStats {
        &self.stats
    }

    pub fn active_connections(&self) -> usize {
        self.table.len()
    }

    /// Where the line between the tables and the stream buffers is now
    /// ([`SharedMemory`]): (connections: the table's own capacity, which
    /// does not borrow; flows per bucket, stream-buffer limit, stream bytes
    /// held: buffered and parser state).
    pub fn memory_shares(&self) -> (usize, usize, usize, usize) {
        (
            self.table.capacity(),
            self.flows.max_flows(),
            self.budget.limit(),
            self.budget.used() + self.budget.state(),
        )
    }

    /// TCP endpoint states held (one per open TCP connection).
    pub fn tcp_states(&self) -> usize {
        self.tcp.len()
    }

    /// Bytes of tracker memory per tracked TCP connection (table entry,
    /// slots, TCP slab); a UDP or ICMP connection takes the TCP state's
    /// bytes (68: 64 and its free-list entry) less, an IPv6 one its address pair more.
    pub fn bytes_per_connection(&self) -> usize {
        self.table.bytes_per_connection() + TcpStates::bytes_per_value()
    }

    /// Records of connections that ended since the last call.
    pub fn take_records(&mut self) -> std::vec::Drain<'_, ConnRecord> {
        self.out.drain(..)
    }

    /// Flow records of the buckets that ended since the last call.
    pub fn take_flows(&mut self) -> std::vec::Drain<'_, wirelog_record::FlowRecord> {
        self.flows.take_records()
    }

    /// Moves the records of connections and flow buckets that ended, and
    /// the transactions parsed, since the last call to the end of `conns`,
    /// `flows` and `txs`. An empty vector is swapped with the tracker's own
    /// rather than filled, so handing records on copies none of them (a
    /// record is a few hundred bytes; on many short connections copying
    /// them cost ~5% of the packet path).
    pub fn move_records_into(&mut self, conns: &mut Vec<ConnRecord>, flows: &mut Vec<wirelog_record::FlowRecord>, txs: &mut Vec<TxRecord>) {
        move_all(&mut self.out, conns);
        self.flows.move_records_into(flows);
        move_keeping_room(&mut self.txs, txs, TX_ROOM_MAX);
        self.share_memory();
    }

    /// Moves the line between the tables and the stream buffers
    /// ([`SharedMemory`]); once per batch.
    fn share_memory(&mut self) {
        let (Some(m), Some(app)) = (self.cfg.shared_memory, self.cfg.app.as_ref()) else {
            return;
        };
        let per_flow = Self::table_bytes_per_flow();
        let streams = self.budget.used() + self.budget.state();
        let rest = m.bytes.saturating_sub(streams);
        // The same split as the budget's (src/cli.rs, TrackArgs::budget).
        let min_flows = m.min_flows.min(self.cfg.max_flows);
        self.flows.set_max_flows((rest / 4 / per_flow).clamp(min_flows, self.cfg.max_flows));
        let lent = self.flows.len().saturating_sub(min_flows) * per_flow;
        self.budget.set_limit(app.total_buffer_bytes.saturating_sub(lent));
    }

    /// Names the interface whose packets are passed with id `iface`.
    pub fn set_iface_name(&mut self, iface: u32, name: &str) {
        self.flows.set_iface_name(iface, name);
    }

    /// Flows written before their bucket ended because the flow table was full.
    pub fn flows_emitted_early(&self) -> u64 {
        self.flows.early_emits
    }

    /// Bytes of table memory a tracked connection takes at most (its table
    /// entry, its share of the slot array at full load, TCP's endpoint
    /// state, an IPv6 address pair, and its checks in the timer wheel),
    /// before any parser state: what a memory budget in bytes is divided by.
    /// The wheel holds up to two checks per connection of the table's
    /// capacity: the stale checks of evicted connections are dropped once
    /// they pass that (`Tracker::evict_one`).
    pub const fn table_bytes_per_connection() -> usize {
        std::mem::size_of::<Option<crate::table::Entry<Conn>>>()
            + crate::table::SLOT_BYTES_PER_CONNECTION
            + TcpStates::bytes_per_value()
            + ConnTable::<Conn>::V6_BYTES
            + 2 * crate::timer::BYTES_PER_CHECK
    }

    /// Bytes a flow of the flow table takes at most.
    pub const fn table_bytes_per_flow() -> usize {
        crate::flow::FlowTable::max_bytes_per_flow()
    }

    /// Bytes of flow-table memory per flow.
    pub fn bytes_per_flow(&self) -> usize {
        self.flows.bytes_per_flow()
    }

    /// Key of a packet, or None for protocols without connections here.
    #[inline]
    pub fn key_of(pkt: &IpPacket<'_>) -> Option<ConnKey> {
        let (sport, dport) = match pkt.transport {
            Transport::Tcp { sport, dport, .. } | Transport::Udp { sport, dport, .. } => {
                (sport, dport)
            }
            // Zeek's ICMP "ports": the type, and the answering type (or the code for one-way messages).
            Transport::Icmp {
                v6,
                icmp_type,
                code,
                ..
            } => (
                icmp_type as u16,
                wirelog_decode::icmp::counterpart(v6, icmp_type).unwrap_or(code) as u16,
            ),
            Transport::Other { .. } => return None,
        };
        Some(ConnKey {
            src: pkt.src,
            dst: pkt.dst,
            sport,
            dport,
            proto: pkt.proto,
        })
    }

    #[inline]
    pub fn hash_of(&self, key: &ConnKey) -> u64 {
        key.symmetric_hash(self.seed)
    }

    /// Prefetches the table slot a key will probe (call ~16 packets ahead).
    #[cfg(feature = "bench")]
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        self.table.prefetch(hash);
    }

    /// Prefetches the connection entry of a slot prefetched earlier (call ~8 packets ahead).
    #[cfg(feature = "bench")]
    #[inline]
    pub fn prefetch_entry(&self, hash: u64) {
        self.table.prefetch_entry(hash);
    }

    /// The table hash of a packet's tuple, from a [`wirelog_decode::FlowHint`].
    #[cfg(feature = "bench")]
    #[inline]
    pub fn hint_hash(&self, h: &wirelog_decode::FlowHint) -> u64 {
        ConnKey {
            src: h.src,
            dst: h.dst,
            sport: h.sport,
            dport: h.dport,
            proto: h.proto,
        }
        .symmetric_hash(self.seed)
    }

    /// Moves the flow table to the bucket of `ts`; with kernel accounting,
    /// what the kernel counted lands in the bucket that ends first. A
    /// packet tests only the boundary, once: the kernel is asked about at a
    /// crossing, out of line (testing it first, on each of two calls a
    /// packet, cost 18.7 instructions a packet on mysql.pcap with the code
    /// it kept around it: BENCHMARKS.md, branch pkt53).
    #[inline(always)]
    fn advance_flows(&mut self, ts: i64) {
        if ts >= self.flows.next_boundary() {
            self.cross_flow_boundary(ts);
        }
    }

    #[cold]
    #[inline(never)]
    fn cross_flow_boundary(&mut self, ts: i64) {
        if self.kernel.is_some() {
            self.kernel_merge_all();
        }
        self.flows.advance(ts);
    }

    /// Runs timers up to packet time `now`, and ends the flow bucket if `now`
    /// is past it (live capture calls this on an idle link with the clock).
    #[inline]
    pub fn advance(&mut self, now: i64) {
        if now <= self.now {
            return;
        }
        self.now = now;
        self.advance_flows(now);
        if self.wheel.nothing_due(now) {
            return;
        }
        self.fire_due(now);
    }

    #[inline(never)]
    fn fire_due(&mut self, now: i64) {
        let mut due = std::mem::take(&mut self.due);
        loop {
            due.clear();
            self.wheel.advance(now, &mut due);
            if due.is_empty() {
                break;
            }
            // A check may reschedule at a deadline that is already due: loop.
            for &e in &due {
                self.on_timer(e, now);
            }
        }
        self.due = due;
    }

    /// Processes one decoded packet at packet time `ts_ns`, captured on interface `iface`.
    #[inline]
    pub fn packet(&mut self, ts_ns: i64, iface: u32, pkt: &IpPacket<'_>) {
        // The packets `key_of` gives no key; the others' key is made only if
        // the table's last connection is not theirs (see `packet_keyed`).
        if let Transport::Other { .. } = pkt.transport {
            self.stats.not_tracked += 1;
            if pkt.checksum != Checksum::BadIp {
                // No connection semantics (ESP, GRE, ...): still traffic, counted as a flow
                // from the sender, without a port.
                self.advance_flows(ts_ns);
                let fk = FlowKey {
                    client: pkt.src,
                    server: pkt.dst,
                    server_port: 0,
                    proto: pkt.proto,
                    iface,
                };
                self.flows.count(&fk, true, pkt.ip_len, ts_ns);
            }
            return;
        }
        self.packet_keyed(ts_ns, iface, pkt, None);
    }

    /// Like [`Tracker::packet`] for a packet that has a key (`key`, or made
    /// from `pkt` when needed); the connection's table slot, unless the packet
    /// was dropped (a bad IP checksum). A TCP or UDP packet over IPv4 is first
    /// compared with the table's last connection as the table's integers
    /// ([`ConnTable::find_recent`]): consecutive packets of one connection, the
    /// common case on a busy link, are neither keyed, hashed nor probed for
    /// (building the 38-byte key and splitting its addresses back into IPv4
    /// words took ~40 instructions a packet: BENCHMARKS.md, branch pkt52).
    /// Always inlined: it has two callers ([`Tracker::packet`],
    /// [`Tracker::packet_kept`]), and the packet path ran 5-12% slower when
    /// it was called out of line (`wirelog-bench pipeline`).
    #[inline(always)]
    fn packet_keyed(&mut self, ts_ns: i64, iface: u32, pkt: &IpPacket<'_>, key: Option<&ConnKey>) -> Option<u32> {
        // `advance` moves the flows too: a packet that moves the time makes
        // one boundary test, not two.
        if ts_ns > self.now {
            self.advance(ts_ns);
        } else {
            self.advance_flows(ts_ns);
        }
        self.stats.packets += 1;
        if pkt.checksum == Checksum::BadIp {
            self.stats.bad_ip_checksum += 1;
            return None;
        }
        let seg = match pkt.transport {
            Transport::Tcp {
                flags,
                seq,
                ack,
                window,
                payload_len,
                payload,
                ..
            } => Some(Segment {
                flags,
                seq,
                ack,
                window,
                len: payload_len,
                payload_complete: payload.len() as u32 >= payload_len,
            }),
            _ => None,
        };

        let recent = match pkt.transport {
            Transport::Tcp { sport, dport, .. } | Transport::Udp { sport, dport, .. } if pkt.ip_version == 4 => {
                self.table.find_recent(V4Tuple::of_ipv4(&pkt.src, &pkt.dst, sport, dport, pkt.proto))
            }
            _ => None,
        };
        // The key and its hash, once made (a lookup past the last connection, a reuse, a new connection).
        let mut keyed = None;
        let found = match recent {
            Some(f) => Some(f),
            None => {
                let (k, h) = self.key_and_hash(key, pkt)?;
                keyed = Some((k, h));
                self.table.find(&k, h)
            }
        };
        let (idx, side, created) = match found {
            Some((idx, side)) => {
                // Only a SYN can start a new connection on a known tuple.
                let reuse = match &seg {
                    Some(s) if s.flags & wirelog_decode::tcp_flags::SYN != 0 => {
                        matches!(self.table.get(idx).map(|e| (&e.value.state, ts_ns <= e.value.start_ns)), Some((ProtoState::Tcp(p), at_start)) if self.tcp.with(p, |t| t.is_reuse(s, at_start)) == Some(true))
                    }
                    _ => false,
                };
                if reuse {
                    let (key, hash) = match keyed {
                        Some(kh) => kh,
                        None => self.key_and_hash(key, pkt)?,
                    };
                    self.remove(idx);
                    let (i, s) = self.create(ts_ns, pkt, &key, hash, seg.as_ref(), true);
                    (i, s, true)
                } else {
                    (idx, side, false)
                }
            }
            None => {
                let (key, hash) = match keyed {
                    Some(kh) => kh,
                    None => self.key_and_hash(key, pkt)?,
                };
                let (i, s) = self.create(ts_ns, pkt, &key, hash, seg.as_ref(), false);
                (i, s, true)
            }
        };
        if self.kernel.is_some() && !created {
            self.kernel_before_packet(idx, ts_ns, side == Side::Orig, seg.as_ref());
        }
        self.deliver(idx, side == Side::Orig, iface, ts_ns, pkt, seg.as_ref(), created);
        if self.kernel.is_some() {
            self.kernel_after_packet(idx, iface, ts_ns, side == Side::Orig, seg.as_ref());
        }
        Some(idx)
    }

    /// A packet's key (`key` if the caller made it) and its table hash; None
    /// only for a packet without one, which `packet_keyed`'s callers never pass.
    #[inline(always)]
    fn key_and_hash(&self, key: Option<&ConnKey>, pkt: &IpPacket<'_>) -> Option<(ConnKey, u64)> {
        let k = match key {
            Some(k) => *k,
            None => Self::key_of(pkt)?,
        };
        Some((k, self.hash_of(&k)))
    }

    /// [`Tracker::packet`] with packets kept (see [`Tracker::keep_packets`]):
    /// also decides whether this one is. A path of its own, so that the
    /// packet path without keeping has not a branch more.
    #[inline(never)]
    pub fn packet_kept(&mut self, ts_ns: i64, iface: u32, pkt: &IpPacket<'_>) -> KeepVerdict {
        let Some(k) = self.keep.as_mut() else {
            self.packet(ts_ns, iface, pkt);
            return KeepVerdict::default();
        };
        k.unrelated();
        let Some(key) = Self::key_of(pkt) else {
            self.packet(ts_ns, iface, pkt);
            return self.keep_verdict();
        };
        if let Some(idx) = self.packet_keyed(ts_ns, iface, pkt, Some(&key)) {
            // The packet's own tuple against the connection's (which may
            // have been flipped): who sent it.
            if let (Some(k), Some(e), Some(stored)) = (self.keep.as_mut(), self.table.get(idx), self.table.key(idx)) {
                let orig = key.src == stored.src && key.sport == stored.sport;
                k.judge(idx, orig, e.value.has_app(), pkt);
            }
        }
        self.keep_verdict()
    }

    fn create(
        &mut self,
        ts: i64,
        pkt: &IpPacket<'_>,
        key: &ConnKey,
        hash: u64,
        seg: Option<&Segment>,
        reused: bool,
    ) -> (u32, Side) {
        if self.table.is_full() {
            self.evict_one();
        }
        // Zeek's WantConnection: guess the originator when the first packet
        // is not a SYN (TCPAnalyzer::WantConnection, src/packet_analysis/
        // protocol/tcp/TCP.cc), or for UDP when only the source port is a
        // likely server port (UDPAnalyzer::WantConnection, .../udp/UDP.cc);
        // ICMP keeps the first sender (the default WantConnection of
        // IPBasedAnalyzer.h). IPBasedAnalyzer::NewConn (.../ip/
        // IPBasedAnalyzer.cc) then flips only when the responder is not the
        // IPv4 broadcast address (IPAddr::IsBroadcast: 255.255.255.255):
        // a DHCP server's broadcast offer from 67 to 68 keeps it originator.
        let want_flip = match (pkt.transport, seg) {
            (Transport::Tcp { .. }, Some(s)) => {
                let syn = s.flags & wirelog_decode::tcp_flags::SYN != 0;
                let ack = s.flags & wirelog_decode::tcp_flags::ACK != 0;
                if syn && !ack {
                    false
                } else if syn && ack && !reused {
                    // A SYN-ACK comes from the responder. (Zeek's own baselines show it
                    // flipping such connections, except when the SYN-ACK replaced a
                    // connection through port reuse.)
                    true
                } else {
                    let ports = &self.cfg.tcp_server_ports;
                    if ports.contains(key.sport) {
                        if ports.contains(key.dport) {
                            !syn && key.sport < key.dport
                        } else {
                            true
                        }
                    } else {
                        false
                    }
                }
            }
            (Transport::Udp { .. }, _) => {
                self.cfg.udp_server_ports.contains(key.sport)
                    && !self.cfg.udp_server_ports.contains(key.dport)
            }
            _ => false,
        };
        let flip = want_flip && !key.dst.is_ipv4_broadcast();
        let state = match pkt.transport {
            Transport::Tcp { .. } => ProtoState::Tcp(self.tcp.insert()),
            Transport::Udp { .. } => ProtoState::Udp(DatagramState::new()),
            _ => ProtoState::Icmp(DatagramState::new()),
        };
        let detection = if self.cfg.app.is_some() {
            Detection::default()
        } else {
            Detection::OVER
        };
        let mut conn = Conn::new(ts, pkt.vlan, pkt.inner_vlan, state, detection);
        let stored = if flip {
            conn.hist.add_raw(b'^');
            key.reversed()
        } else {
            *key
        };
        let idx = self.table.insert(stored, hash, conn);
        if let Some(k) = self.keep.as_mut() {
            k.start(idx, self.uids.next_uid());
        }
        self.stats.connections += 1;
        if self.new_conns_cap > 0 {
            if self.new_conns.len() < self.new_conns_cap {
                self.new_conns.push(NewConn {
                    ts_ns: ts,
                    proto: stored.proto,
                    src: stored.src.0,
                    sport: stored.sport,
                    dst: stored.dst.0,
                    dport: stored.dport,
                });
            } else {
                self.stats.new_conns_dropped += 1;
            }
        }
        self.stats.peak_connections = self.stats.peak_connections.max(self.table.len() as u64);
        (idx, if flip { Side::Resp } else { Side::Orig })
    }

    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn deliver(
        &mut self,
        idx: u32,
        is_orig: bool,
        iface: u32,
        ts: i64,
        pkt: &IpPacket<'_>,
        seg: Option<&Segment>,
        created: bool,
    ) {
        let Some((entry, keys)) = self.table.get_mut_keys(idx) else {
            return;
        };
        // The flow is counted here, with the entry at hand: counting it apart
        // took a second table access a packet.
        count_flow(&mut self.flows, entry, keys, is_orig, iface, ts, pkt);
        let conn = &mut entry.value;
        // Each path below stores the times once: the latest packet's, and
        // the last progress (this packet's time if it made progress):
        // `Overflow::progress` or `Overflow::touch`.
        let bad = pkt.checksum == Checksum::BadTransport;
        let mut flip = false;
        // Packets only push deadlines later, which the lazy wheel handles when the
        // old deadline comes; only a new connection or a change that can bring a
        // deadline earlier needs a wheel operation.
        let mut reschedule = created;
        match (&mut conn.state, seg) {
            (ProtoState::Tcp(part), Some(seg)) => {
                let had_syn_only = part.syn_only();
                let Some((t, cold)) = self.tcp.get_mut(part) else {
                    self.overflow.touch(idx, &mut conn.last_ns, &mut conn.seen_after_last, ts);
                    return;
                };
                if bad {
                    self.overflow.touch(idx, &mut conn.last_ns, &mut conn.seen_after_last, ts);
                    t.checksum_error(is_orig, &mut conn.hist, cold);
                    if created {
                        self.schedule(idx);
                    }
                    return;
                }
                if t.process_if_established(is_orig, seg, &mut conn.hist, cold) {
                    // The common case has no effect to test (and left no lone SYN).
                    self.overflow.progress(idx, &mut conn.last_ns, &mut conn.seen_after_last, ts);
                } else {
                    let (touch, fx) = t.process_general(is_orig, seg, &mut conn.hist, cold);
                    reschedule |= fx.state_changed
                        || fx.attempt_timer
                        || fx.close_complete
                        || fx.reset_timer
                        || fx.expire_check;
                    if touch {
                        self.overflow.progress(idx, &mut conn.last_ns, &mut conn.seen_after_last, ts);
                    } else {
                        self.overflow.touch(idx, &mut conn.last_ns, &mut conn.seen_after_last, ts);
                    }
                    if fx.attempt_timer | fx.close_complete | fx.reset_timer | fx.expire_check {
                        let times = (conn.start_ns, conn.last_ns, ts);
                        set_tcp_timers(part, idx, fx, times, &self.cfg, &self.timer_bases, &mut self.overflow);
                    }
                    flip = fx.flip;
                    // A first SYN (a state change) or a packet on a connection
                    // that had only a SYN may leave it with only a SYN.
                    if had_syn_only || fx.state_changed {
                        self.tcp.settle(part);
                    }
                }
            }
            (ProtoState::Udp(d), _) => {
                if bad {
                    self.overflow.touch(idx, &mut conn.last_ns, &mut conn.seen_after_last, ts);
                    let n = self.overflow.checksum_error(idx, !is_orig as usize);
                    conn.hist.scaled(is_orig, b'C', n);
                    if created {
                        self.schedule(idx);
                    }
                    return;
                }
                self.overflow.progress(idx, &mut conn.last_ns, &mut conn.seen_after_last, ts);
                conn.hist.check_raw(
                    if is_orig { 0x1 } else { 0x2 },
                    if is_orig { b'D' } else { b'd' },
                );
                let len = match pkt.transport {
                    Transport::Udp { payload_len, .. } => payload_len as i64,
                    _ => 0,
                };
                d.add(is_orig, len);
            }
            (ProtoState::Icmp(d), _) => {
                if bad {
                    self.overflow.touch(idx, &mut conn.last_ns, &mut conn.seen_after_last, ts);
                    if created {
                        self.schedule(idx);
                    }
                    return;
                }
                self.overflow.progress(idx, &mut conn.last_ns, &mut conn.seen_after_last, ts);
                let len = match pkt.transport {
                    // Zeek counts the ICMP message after its 8-byte header.
                    Transport::Icmp { payload_len, .. } => payload_len as i64 - 4,
                    _ => 0,
                };
                d.add(is_orig, len);
            }
            _ => {
                self.overflow.touch(idx, &mut conn.last_ns, &mut conn.seen_after_last, ts);
                return;
            }
        }
        let side = !is_orig as usize;
        if conn.count(side, pkt.ip_len) {
            self.overflow.carry(idx, conn, side, pkt.ip_len);
        }
        // Decided while the entry is at hand: connections with nothing to
        // parse (most of them) cost no second table access. A flip restarts
        // detection, so it always goes on.
        let parse = flip || conn.has_app() || !conn.detection.is_over();
        if flip {
            self.flip(idx);
        }
        if reschedule {
            self.schedule(idx);
        }
        if parse {
            self.feed_app(idx, is_orig != flip, ts, pkt);
        }
    }

    /// Hands a packet's payload to the connection's parser, choosing the
    /// protocol first if the connection has none yet.
    #[inline(never)]
    fn feed_app(&mut self, idx: u32, is_orig: bool, ts: i64, pkt: &IpPacket<'_>) {
        let Some(cfg) = self.cfg.app.as_ref() else {
            return;
        };
        let Some((e, keys)) = self.table.get_mut_keys(idx) else {
            return;
        };
        let dir = if is_orig {
            Dir::ToServer
        } else {
            Dir::ToClient
        };
        // `wire_len`: the TCP payload's length on the wire (a segment cut by
        // the snap length carries less; the reassembler places the rest).
        let (tcp, payload, wire_len) = match pkt.transport {
            Transport::Tcp {
                flags,
                seq,
                ack,
                payload,
                payload_len,
                ..
            } => (Some((flags, seq, ack)), payload, payload_len),
            Transport::Udp { payload, .. } => (None, payload, payload.len() as u32),
            _ => return,
        };
        if !e.value.has_app() {
            let syn = matches!(tcp, Some((f, _, _)) if f & wirelog_decode::tcp_flags::SYN != 0);
            if payload.is_empty() && !syn {
                return;
            }
            let by_port = cfg.ports.get(e.key.dport());
            let app = match (tcp, by_port) {
                (Some(_), Some(p)) => Some(AppState::new_stream(p, uid_for(&mut self.uids, &self.keep, idx))),
                // The flow's parser is made at its first datagram, if it fits
                // (`AppState::datagram`).
                (None, Some(p @ (Protocol::Dns | Protocol::Memcached))) => {
                    Some(AppState::new_stream(p, uid_for(&mut self.uids, &self.keep, idx)))
                }
                (None, _) => {
                    // A service named without a parser (crate
                    // wirelog_parse::services): DHCP, NTP, SIP, on the
                    // responder ports Zeek attaches their analyzers to
                    // (every datagram, as the analyzer sees every one) or
                    // by signature on any port (the first datagrams).
                    use wirelog_parse::services::{udp_datagram, UdpLook};
                    let c = &mut e.value;
                    let before_bytes = match &c.state {
                        ProtoState::Udp(d) => d.orig_len.max(0) + d.resp_len.max(0) - payload.len() as i64,
                        _ => 0,
                    };
                    let n = self.overflow.counts(idx, c);
                    let before = (before_bytes, (n[0] + n[2]).saturating_sub(1));
                    match udp_datagram(&mut c.detection, e.key.dport(), dir, payload, before) {
                        UdpLook::Continue => {}
                        UdpLook::Over => c.detection.end(),
                        UdpLook::Flip => self.flip_by_service(idx, is_orig, pkt.ip_len as u64),
                    }
                    return;
                }
                // SMTP, IMAP, POP3, XMPP, LDAP, FTP, IRC by their ports:
                // the cleartext is watched for STARTTLS and the protocol
                // confirmed as Zeek confirms it (wirelog_parse::starttls).
                (Some(_), None) if Cleartext::by_port(e.key.dport()).is_some() => Cleartext::by_port(e.key.dport())
                    .map(|c| AppState::new_starttls(c, uid_for(&mut self.uids, &self.keep, idx))),
                // SSH by its port: watched for its confirmation (wirelog_parse::ssh),
                // from the first payload on (the watcher reads no empty segment:
                // a connection to 22 without payload costs no allocation), once
                // both directions carried a packet. Zeek's analyzer confirms
                // only after both sides' version lines (ssh-protocol.pac,
                // `update_version`); a payload before the other direction's
                // first packet is a capture of one side (half duplex, the
                // handshake's SYN or SYN-ACK never seen), which it cannot
                // confirm: not watched, no allocation.
                (Some(_), None) if e.key.dport() == wirelog_parse::ssh::SSH_RESP_PORT => {
                    if payload.is_empty() {
                        return;
                    }
                    let n = self.overflow.counts(idx, &e.value);
                    if n[0] == 0 || n[2] == 0 {
                        e.value.detection.end();
                        return;
                    }
                    Some(AppState::new_ssh(wirelog_parse::ssh::SshStart::AtStart, uid_for(&mut self.uids, &self.keep, idx)))
                }
                (Some((_, seq, _)), None) if cfg.by_content && !payload.is_empty() => {
                    match e.value.detection.look(dir, payload) {
                        Detected::Protocol(p) => Some(AppState::new_stream(p, uid_for(&mut self.uids, &self.keep, idx))),
                        // The originator's first bytes are a server's greeting
                        // (MySQL handshake): the capture missed the handshake
                        // and guessed the roles wrong. Flip as Zeek does when
                        // an analyzer confirms the responder (history `^`),
                        // then detect again from the server's side.
                        Detected::Reversed(_) => {
                            self.flip(idx);
                            self.feed_app(idx, false, ts, pkt);
                            return;
                        }
                        // No parser's: the service signatures, on the first
                        // bytes of each direction's stream (wirelog_parse::
                        // services::SigStream); one that matched is watched
                        // for its confirmation as on its port.
                        Detected::Nothing => {
                            let det = &mut e.value.detection;
                            let sig = if det.signatures_done() {
                                None
                            } else {
                                sig_push(&mut self.sig_streams, &mut self.budget, &mut self.app_stats, det, idx, dir, seq, payload)
                            };
                            let Some(sig) = sig else {
                                if det.signatures_done() && det.looked_both() {
                                    det.end();
                                }
                                return;
                            };
                            use wirelog_parse::starttls::Start;
                            let uid = uid_for(&mut self.uids, &self.keep, idx);
                            Some(match sig {
                                TcpSignature::Smtp => AppState::new_starttls(Cleartext::Smtp, uid),
                                TcpSignature::Pop3 => AppState::new_starttls(Cleartext::Pop3, uid),
                                // The client's USER line is a command (FTP.cc:122 confirms on
                                // it) once the server's login reply completes the signature.
                                TcpSignature::Ftp => AppState::new_starttls_from(Cleartext::Ftp, Start::FtpAwaitsLogin, uid),
                                // The client's NICK/USER lines are commands Zeek's analyzer
                                // confirms on (IRC.cc:155) when the signature hands them over.
                                TcpSignature::Irc => AppState::new_starttls_from(Cleartext::Irc, Start::Confirmed, uid),
                                // The originator's SERVER line (and the PASS before it) is a
                                // command of `IsValidClientCommand` (IRC.cc:43-53), which
                                // confirms once the PIA replays it (IRC.cc:155).
                                TcpSignature::IrcServers => AppState::new_starttls_from(Cleartext::Irc, Start::Confirmed, uid),
                                // The client's whole first message (ldap.spicy:1224).
                                TcpSignature::Ldap => AppState::new_starttls_from(Cleartext::Ldap, Start::Confirmed, uid),
                                // The originator's stream header confirms (xmpp-analyzer.pac:20-22);
                                // the responder's does not: the client's is waited for.
                                TcpSignature::Xmpp { by } => AppState::new_starttls_from(
                                    Cleartext::Xmpp,
                                    if by == Dir::ToServer { Start::Confirmed } else { Start::Fresh },
                                    uid,
                                ),
                                TcpSignature::Ssh { first, version } => {
                                    AppState::new_ssh(wirelog_parse::ssh::SshStart::AfterVersion(first, version), uid)
                                }
                            })
                        }
                    }
                }
                (Some(_), None) => {
                    if !cfg.by_content {
                        e.value.detection.end();
                    }
                    return;
                }
            };
            match app {
                Some(a) if !sampled_in(&mut self.sample_rng, self.sample_n) => {
                    // Sampled out: never parsed, counted (per protocol too,
                    // for the completeness line's "1 in N").
                    e.value.detection.end();
                    self.app_stats.sampled_out += 1;
                    self.app_stats.sampled_out_by[protocol_index(a.protocol)] += 1;
                    return;
                }
                Some(mut a) => {
                    let p = protocol_index(a.protocol);
                    // A connection watched for STARTTLS is not counted as
                    // TLS: its handshakes are, as transactions.
                    if !a.watches_cleartext() {
                        self.app_stats.connections[p] += 1;
                    }
                    if !self.budget.try_charge_state(APP_SLOT_BYTES) {
                        // No room for its slot: not parsed, counted now (it
                        // has no state to be counted from at its end).
                        e.value.detection.end();
                        self.app_stats.no_memory += 1;
                        self.app_stats.no_memory_by[p] += 1;
                        return;
                    }
                    a.weight = self.sample_n;
                    a.set_keep(self.thin_k.trailing_zeros() as u8);
                    self.app_stats.parsing += 1;
                    self.app_stats.parsing_by[p] += 1;
                    e.value.app = self.apps.insert(a);
                }
                None => {
                    e.value.detection.end();
                    return;
                }
            }
        }
        // Zeek's analyzers that skip partial connections read this payload
        // only if the connection is not partial now (`TcpConn::is_partial`).
        let Some(app) = self.apps.get_mut(e.value.app) else {
            return;
        };
        let (state, tcp_states) = (&e.value.state, &self.tcp);
        app.payload_seen(payload.len(), || match state {
            ProtoState::Tcp(part) => tcp_states.with(part, |t| t.is_partial()).unwrap_or(true),
            _ => false,
        });
        let thin = self.thin_k.trailing_zeros() as u8;
        if app.keep() < thin && !app.stopped {
            // Step 1b's draw (see `set_thinning`).
            let ratio = 1u32 << (thin - app.keep());
            app.set_keep(thin);
            let p = protocol_index(app.protocol);
            if self.app_stats.parsing_by[p] > THIN_FLOOR && !sampled_in(&mut self.sample_rng, ratio) {
                app.shed(&mut self.budget);
                self.orphans[p] += app.weight as i64 + app.carried as i64;
                app.carried = 0;
                self.app_stats.parsing = self.app_stats.parsing.saturating_sub(1);
                self.app_stats.parsing_by[p] = self.app_stats.parsing_by[p].saturating_sub(1);
                self.app_stats.parse_stopped += 1;
                self.app_stats.parse_stopped_by[p] += 1;
                return;
            }
        }
        // The parser writes what it completes straight into the batch.
        let mut out = BatchTxs::new(&mut self.txs, app, &e.key, keys);
        match tcp {
            Some((flags, seq, ack)) => {
                use wirelog_decode::tcp_flags::{ACK, FIN, RST, SYN};
                let f = SegFlags {
                    syn: flags & SYN != 0,
                    fin: flags & FIN != 0,
                    rst: flags & RST != 0,
                };
                app.segment(
                    dir,
                    seq,
                    ts,
                    payload,
                    wire_len,
                    f,
                    (flags & ACK != 0).then_some(ack),
                    cfg,
                    &mut self.budget,
                    &mut out,
                );
            }
            None => app.datagram(dir, ts, payload, cfg, &mut self.budget, &mut out),
        }
        let made = out.made();
        if made > 0 {
            // Step 1b's pool, looked at only when transactions are made
            // (their weight is all it changes): `Protocol` is declared in
            // the order of `Protocol::ALL`, so no search.
            let pool = &mut self.orphans[app.protocol as usize];
            if *pool != 0 && !app.stopped {
                take_orphans(pool, app);
                let weight = app.weight.saturating_add(app.carried);
                for r in out.made_records() {
                    r.sample_weight = weight;
                }
            }
            app.transactions += made as u64;
            self.app_stats.transactions += made as u64;
        }
    }

    /// Ends the parsing of a connection: what is pending becomes transactions.
    /// Returns the service to report and the uid the parser used.
    fn finish_app(&mut self, idx: u32) -> (Option<&'static str>, Option<wirelog_record::Uid>) {
        let Some(cfg) = self.cfg.app.as_ref() else {
            return (None, None);
        };
        let Some((e, keys)) = self.table.get_mut_keys(idx) else {
            return (None, None);
        };
        if e.value.detection.has_sig_stream() {
            drop_sig_stream(&mut self.sig_streams, &mut self.budget, &mut e.value.detection, idx);
        }
        let Some(mut app) = self.apps.take(std::mem::replace(&mut e.value.app, NO_APP)) else {
            return (e.value.detection.service().map(|s| s.name()), None);
        };
        self.budget.charge_state(APP_SLOT_BYTES, 0);
        let p = protocol_index(app.protocol);
        if !app.shed {
            self.app_stats.parsing = self.app_stats.parsing.saturating_sub(1);
            self.app_stats.parsing_by[p] = self.app_stats.parsing_by[p].saturating_sub(1);
        }
        // Step 1b's pool (see `set_thinning`): a stopped connection that
        // ends needs no one to stand for it; what a parsed one carried
        // still does.
        self.orphans[p] += if app.shed { -(app.weight as i64) } else { app.carried as i64 };
        let end = self.overflow.seen(idx, &e.value);
        let mut out = BatchTxs::new(&mut self.txs, &app, &e.key, keys);
        let (st, stopped) = app.finish(end, cfg, &mut self.budget, &mut out);
        let made = out.made() as u64;
        app.transactions += made;
        self.app_stats.transactions += made;
        let p = &mut self.app_stats.parse;
        p.unparsed_bytes += st.unparsed_bytes;
        p.gaps += st.gaps;
        p.resyncs += st.resyncs;
        p.malformed += st.malformed;
        p.cut_bytes += st.cut_bytes;
        self.app_stats.beyond_snaplen_bytes += app.beyond_snaplen_bytes();
        let gave_up = (stopped && !app.shed && !app.parser_done()) as u64;
        self.app_stats.gave_up += gave_up;
        // The same, per protocol (the loss table's rows per protocol).
        let i = crate::app::protocol_index(app.protocol);
        let by = &mut self.app_stats.parse_by[i];
        by.unparsed_bytes += st.unparsed_bytes;
        by.gaps += st.gaps;
        by.resyncs += st.resyncs;
        by.malformed += st.malformed;
        by.cut_bytes += st.cut_bytes;
        self.app_stats.gave_up_by[i] += gave_up;
        let no_room = app.no_room() as u64;
        self.app_stats.no_memory += no_room;
        self.app_stats.no_memory_by[i] += no_room;
        (app.conn_service(stopped), Some(app.uid))
    }

    /// Swaps originator and responder of a connection (Zeek's FlipRoles).
    fn flip(&mut self, idx: u32) {
        // The parser's notion of request and response is now backwards: end
        // it (its pending messages are written) and let detection start over.
        if self.table.get(idx).is_some_and(|e| e.value.has_app()) {
            let _ = self.finish_app(idx);
            self.app_stats.flipped += 1;
        }
        if let Some(e) = self.table.get_mut(idx) {
            if self.cfg.app.is_some() {
                if e.value.detection.has_sig_stream() {
                    drop_sig_stream(&mut self.sig_streams, &mut self.budget, &mut e.value.detection, idx);
                }
                e.value.detection.restart();
            }
        }
        self.table.reverse_key(idx);
        let Some(e) = self.table.get_mut(idx) else {
            return;
        };
        let c = &mut e.value;
        // The client changed: later packets count in the other orientation's flow.
        c.flow = FlowSlot::NONE;
        self.overflow.swap_sides(idx, c);
        if let ProtoState::Tcp(p) = &mut c.state {
            if let Some((t, cold)) = self.tcp.get_mut(p) {
                t.flip(cold);
            }
        }
        c.hist.add_raw(b'^');
        if let Some(k) = self.keep.as_mut() {
            k.flip(idx);
        }
    }

    /// Flips the roles because a service's rule said so (NTP's), while its
    /// datagram is being handled: Zeek's analyzer flips before the UDP
    /// analyzer counts the datagram, which is then counted with the
    /// direction it had before the flip (`UDPAnalyzer::DeliverPacket`,
    /// src/packet_analysis/protocol/udp/UDP.cc: `adapter->DeliverPacket`
    /// first, then `CheckHistory` and `UpdateLength` with the same
    /// `is_orig`; the size analyzer, after the NTP one, counts it so too).
    /// Its packet and IP bytes go back to the side they were counted on.
    fn flip_by_service(&mut self, idx: u32, was_orig: bool, ip_len: u64) {
        self.flip(idx);
        let Some(e) = self.table.get_mut(idx) else { return };
        let c = &mut e.value;
        let mut n = self.overflow.counts(idx, c);
        // After the flip, the side the datagram was counted on is the other one.
        let (from, to) = if was_orig { (2, 0) } else { (0, 2) };
        if n[from] > 0 {
            n[from] -= 1;
            n[from + 1] = n[from + 1].saturating_sub(ip_len);
            n[to] += 1;
            n[to + 1] += ip_len;
            self.overflow.set(idx, c, n);
        }
    }

    /// The earliest time the connection could be removed, given its state.
    fn next_deadline(&self, idx: u32, dport: u16, c: &Conn) -> i64 {
        let seen = self.overflow.seen(idx, c);
        let mut d = i64::MAX;
        match &c.state {
            ProtoState::Tcp(part) => {
                let Some((past_handshake, attempt, expire)) =
                    self.tcp.with(part, |t| (t.past_handshake(), t.attempt_condition(), t.is_active() && t.expire_condition()))
                else {
                    return d;
                };
                let (start, bases, ovf) = (c.start_ns, &self.timer_bases, &self.overflow);
                d = part.timer(Timer::Delete, idx, start, bases, ovf);
                let timeout = if past_handshake {
                    self.cfg.tcp_inactivity_ns
                } else {
                    self.cfg.udp_inactivity_ns
                };
                d = d.min(c.last_ns + timeout);
                if part.is_set(Timer::Attempt) && attempt {
                    d = d.min(part.timer(Timer::Attempt, idx, start, bases, ovf));
                }
                if expire && !part.timers_cancelled {
                    // Zeek checks at start + SYN timeout + k * session timer, and removes
                    // once the connection has been idle longer than the linger time.
                    let floor = (c.last_ns + self.cfg.tcp_linger_ns).max(seen);
                    let first = c.start_ns + self.cfg.tcp_syn_timeout_ns;
                    let period = self.cfg.tcp_session_timer_ns;
                    let grid = if first > floor {
                        first
                    } else {
                        first + ((floor - first) / period + 1) * period
                    };
                    d = d.min(grid);
                    let extra = part.timer(Timer::ExpireExtra, idx, start, bases, ovf);
                    if extra != i64::MAX && extra > floor {
                        d = d.min(extra);
                    }
                }
            }
            ProtoState::Udp(_) => {
                d = d.min(c.last_ns + self.cfg.udp_inactivity_ns);
                let period = self.cfg.dns_session_timeout_ns;
                if period > 0 && self.cfg.dns_ports.contains(dport) {
                    // Zeek's DNS analyzer checks every session timeout from the
                    // start and ends the flow once idle for a second less than that.
                    let floor = (c.last_ns + period - SEC).max(seen + 1);
                    let k = ((floor - c.start_ns) + period - 1)
                        .div_euclid(period)
                        .max(1);
                    d = d.min(c.start_ns + k * period);
                }
            }
            ProtoState::Icmp(_) => d = d.min(c.last_ns + self.cfg.icmp_inactivity_ns),
        }
        d
    }

    /// Makes sure a wheel entry exists no later than the connection's next deadline.
    fn schedule(&mut self, idx: u32) {
        let Some(e) = self.table.get(idx) else { return };
        let d = self.next_deadline(idx, e.key.dport(), &e.value);
        let c = &e.value;
        if d < c.scheduled_at {
            if let Some(e) = self.table.get_mut(idx) {
                e.value.scheduled_at = d;
            }
            self.wheel.schedule(TimerEntry { deadline: d, idx });
        }
    }

    fn on_timer(&mut self, e: TimerEntry, now: i64) {
        let Some(entry) = self.table.get_mut(e.idx) else {
            return;
        };
        if entry.value.scheduled_at != e.deadline {
            // Superseded by an earlier deadline, or the slot was reused. A
            // stale check with its connection's pending deadline (a reused
            // slot's new connection, or one rescheduled back to it) fires
            // with that deadline's own check, at the same time: the first of
            // the two does the work, the second finds it moved on.
            return;
        }
        let start = entry.value.start_ns;
        if let ProtoState::Tcp(part) = &mut entry.value.state {
            if part.is_set(Timer::Attempt)
                && part.timer(Timer::Attempt, e.idx, start, &self.timer_bases, &self.overflow) <= now
                && self.tcp.with(part, |t| t.attempt_condition()) != Some(true)
            {
                // the attempt timer fired with nothing to do
                part.set_timer(Timer::Attempt, i64::MAX, e.idx, start, &self.timer_bases, &mut self.overflow);
            }
        }
        if self.kernel.is_some() {
            // The connection may have been busy in the kernel.
            let _ = self.kernel_merge(e.idx, false);
        }
        let entry = self.table.get(e.idx).unwrap();
        let d = self.next_deadline(e.idx, entry.key.dport(), &entry.value);
        if d <= now {
            self.remove(e.idx);
        } else {
            let entry = self.table.get_mut(e.idx).unwrap();
            entry.value.scheduled_at = d;
            self.wheel.schedule(TimerEntry { deadline: d, idx: e.idx });
        }
    }

    fn remove(&mut self, idx: u32) {
        if self.kernel.is_some() {
            let _ = self.kernel_merge(idx, true);
        }
        let (service, uid) = self.finish_app(idx);
        let uid = self.keep.as_ref().and_then(|k| k.uid(idx)).or(uid);
        let uids = &mut self.uids;
        let tcp = &mut self.tcp;
        let overflow = &mut self.overflow;
        let seed = self.seed;
        if let Some(mut r) = self.table.remove_with(idx, |k| k.symmetric_hash(seed), |e, key| {
            let part = match &e.value.state {
                ProtoState::Tcp(p) => Some(p),
                _ => None,
            };
            let r = e.value.to_record(
                key,
                part.and_then(|p| tcp.get(p)).as_deref().map(|t| (t, tcp.cold())),
                uid.unwrap_or_else(|| uids.next_uid()),
                overflow.counts(idx, &e.value),
            );
            overflow.forget(idx);
            if let Some(p) = part {
                tcp.remove(p);
            }
            r
        }) {
            r.service = service;
            // Switched off live (`--cpu-budget`): noted on the connections
            // that were open while it was on (started before it went off).
            let skipped = self.cfg.empty_tcp_skipped || r.ts_ns < self.empty_tcp_off_at;
            r.empty_tcp_skipped = skipped && r.proto == Proto::Tcp;
            self.stats.missed_bytes += r.missed_bytes;
            self.out.push(r);
        }
    }

    /// Table full: remove the least recently active of a few sampled connections.
    fn evict_one(&mut self) {
        self.evict_cursor = self
            .evict_cursor
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut sample = std::mem::take(&mut self.sample);
        self.table.sample(self.evict_cursor >> 33, 8, &mut sample);
        let victim = sample.iter().copied().min_by_key(|&i| {
            self.table
                .get(i)
                .map(|e| self.overflow.seen(i, &e.value))
                .unwrap_or(i64::MAX)
        });
        self.sample = sample;
        if let Some(v) = victim {
            self.remove(v);
            self.stats.evicted += 1;
            // The checks of evicted connections stay in the wheel until
            // their deadline: dropped once they outnumber the table, so the
            // wheel stays within the memory budget (amortised: at most once
            // per table-full of evictions).
            if self.wheel.len() > self.compact_wheel_at.max(2 * self.table.capacity() + 4096) {
                let table = &self.table;
                self.wheel.retain(|e| {
                    table.get(e.idx).is_some_and(|c| c.value.scheduled_at == e.deadline)
                });
                self.compact_wheel_at = 2 * self.wheel.len();
            }
        }
    }

    /// End of input: every connection still open is written with its current
    /// state, as Zeek does when it terminates.
    pub fn finish(&mut self) {
        while !self.finish_some(usize::MAX) {}
    }

    /// [`Tracker::finish`] in steps: ends at most `max` open connections per
    /// call and says when none is left (the flow bucket is then written too,
    /// `max` flows a call). Taking the records between steps keeps the end
    /// of a large table from holding every record in memory at once.
    pub fn finish_some(&mut self, max: usize) -> bool {
        self.wheel.drain_all();
        let (live, next) = self.table.live_from(self.finish_from, max);
        self.finish_from = next;
        if live.is_empty() {
            if !self.flows.rotate_some(max) {
                return false;
            }
            self.finish_from = 0;
            return true;
        }
        for idx in live {
            self.remove(idx);
        }
        false
    }
}

/// Appends `from` to `into`, emptying `from`; swaps them when `into` is empty.
/// Feeds one segment to the connection's signature stream (made at its
/// first payload that no parser claimed, if the stream memory has room:
/// else counted and matching ends), and drops the stream once a signature
/// matched or matching is over.
#[allow(clippy::too_many_arguments)]
fn sig_push(
    streams: &mut SigStreams,
    budget: &mut Budget,
    stats: &mut AppStats,
    det: &mut Detection,
    idx: u32,
    dir: Dir,
    seq: u32,
    payload: &[u8],
) -> Option<TcpSignature> {
    let size = std::mem::size_of::<SigStream>();
    if !det.has_sig_stream() {
        if !budget.try_charge_state(size) {
            stats.signature_no_room += 1;
            det.end_signatures();
            return None;
        }
        stats.signature_streams += 1;
        det.set_sig_stream(true);
        streams.insert(idx, SigStream::new());
    }
    let Some(s) = streams.get_mut(&idx) else {
        det.end_signatures();
        return None;
    };
    let r = s.push(dir, seq, payload);
    stats.signature_holes += r.hole as u64;
    if r.found.is_some() || r.done || s.stalled() {
        drop_sig_stream(streams, budget, det, idx);
    }
    r.found
}

/// Ends signature matching on a connection and gives its stream's memory back.
fn drop_sig_stream(streams: &mut SigStreams, budget: &mut Budget, det: &mut Detection, idx: u32) {
    if streams.remove(&idx).is_some() {
        budget.charge_state(std::mem::size_of::<SigStream>(), 0);
    }
    det.end_signatures();
}

pub(crate) fn move_all<T>(from: &mut Vec<T>, into: &mut Vec<T>) {
    if into.is_empty() {
        std::mem::swap(from, into);
    } else {
        into.append(from);
    }
}

/// Transactions the tracker keeps room for between two hand-overs (see
/// [`move_keeping_room`]): the bound a recycled batch keeps too
/// (`wirelog_record`'s `RECYCLED_CAPACITY`), so that a burst (the end of a
/// capture, a writer that fell behind) does not pin its peak.
const TX_ROOM_MAX: usize = wirelog_record::RECYCLED_CAPACITY;

/// [`move_all`], then `from` (now the empty vector `into` had, when it was
/// swapped) made to hold as many records as were just moved, up to `max`,
/// and never more than `max`. The tracker's transactions grow one at a time
/// as parsers make them: a vector that started each hand-over empty grew by
/// `realloc` (~10 times, copying, per batch of 2,000 transactions); with
/// room for the last batch it is one allocation when the batch handed back
/// had less room, none when it had enough (recycled batches keep theirs).
/// A vector made here gets [`ROOM_SLACK`] more than the last batch: made
/// exactly as large, it was short for about every other batch (`read`'s
/// batches of 4,096 packets vary by a few transactions), so a recycled batch
/// was dropped for a new one or grew by doubling: fresh pages for each
/// batch (a mysql_text read's 528-byte records: ~1 MB, ~20% of its page
/// faults, issue 36). With the slack the few batches in flight settle.
pub(crate) fn move_keeping_room<T>(from: &mut Vec<T>, into: &mut Vec<T>, max: usize) {
    let moved = from.len();
    move_all(from, into);
    let want = moved.min(max);
    if from.capacity() < want {
        // The short vector goes before the new one is made, so that the
        // allocator can take its memory (already touched) into the new one.
        drop(std::mem::take(from));
        from.reserve_exact((want + want / ROOM_SLACK).min(max));
    } else if from.capacity() > max {
        from.shrink_to(max);
    }
}

/// A vector [`move_keeping_room`] makes has room for the last batch and
/// 1/`ROOM_SLACK` more.
const ROOM_SLACK: usize = 4;

/// Whether the next connection found is parsed when 1 in `n` are
/// (xorshift64 on `rng`: cheap, once per new connection found).
/// A parsed connection takes its protocol's pool of step 1b (see
/// `Tracker::set_thinning`): the weight of stopped connections it stands
/// for from now on, or, when the pool is negative, gives back what it
/// carried for connections that have since ended.
fn take_orphans(pool: &mut i64, app: &mut AppState) {
    if *pool > 0 {
        let take = (*pool).min((u32::MAX - app.carried) as i64);
        app.carried += take as u32;
        *pool -= take;
    } else {
        let give = (-*pool).min(app.carried as i64);
        app.carried -= give as u32;
        *pool += give;
    }
}

fn sampled_in(rng: &mut u64, n: u32) -> bool {
    if n <= 1 {
        return true;
    }
    let mut x = *rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    x.is_multiple_of(n as u64)
}

/// The tracker's batch as a parser's [`TxSink`]: each transaction goes into
/// its record in the batch with its connection's fields as the parser hands
/// it over (before: into a list the tracker then moved each from, one more
/// copy of the record and the list's drain: ~76 instructions of a mysql_text
/// statement's 3,400 on the packet thread, issue 36).
struct BatchTxs<'a> {
    txs: &'a mut Vec<TxRecord>,
    /// The batch's length before the parser ran.
    start: usize,
    key: &'a StoredKey,
    pairs: &'a V6Pairs,
    uid: wirelog_record::Uid,
    sample_weight: u32,
}

impl<'a> BatchTxs<'a> {
    #[inline]
    fn new(txs: &'a mut Vec<TxRecord>, app: &AppState, key: &'a StoredKey, pairs: &'a V6Pairs) -> Self {
        let start = txs.len();
        BatchTxs { txs, start, key, pairs, uid: app.uid, sample_weight: app.weight.saturating_add(app.carried) }
    }

    /// Transactions the parser wrote.
    #[inline]
    fn made(&self) -> usize {
        self.txs.len() - self.start
    }

    /// The records of the transactions the parser wrote.
    fn made_records(&mut self) -> &mut [TxRecord] {
        &mut self.txs[self.start..]
    }

    #[cold]
    #[inline(never)]
    fn push_growing(&mut self, tx: Transaction) {
        let rec = self.record(tx);
        self.txs.push(rec);
    }

    #[inline]
    fn record(&self, tx: Transaction) -> TxRecord {
        // The connection's tuple is made from its key (for an IPv6 pair a
        // slab lookup) at the first transaction, and copied from the record
        // before for the next ones: once per segment that makes any, none
        // for those that make none. (Kept in an `Option` field instead, it
        // cost the segment of one transaction 7 instructions more, its
        // store and reload; callgrind, mysql_text.)
        let (orig_h, orig_p, resp_h, resp_p, transport) = match (self.made(), self.txs.last()) {
            (1.., Some(r)) => (r.orig_h, r.orig_p, r.resp_h, r.resp_p, r.transport),
            _ => {
                let key = self.key.full(self.pairs);
                let transport = if key.proto == 17 {
                    Proto::Udp
                } else {
                    Proto::Tcp
                };
                (key.src, key.sport, key.dst, key.dport, transport)
            }
        };
        TxRecord {
            uid: self.uid,
            orig_h,
            orig_p,
            resp_h,
            resp_p,
            transport,
            protocol: tx.detail.protocol(),
            tx,
            orig_proc: None,
            resp_proc: None,
            source: Default::default(),
            sample_weight: self.sample_weight,
        }
    }
}

impl TxSink for BatchTxs<'_> {
    #[inline]
    fn push(&mut self, tx: Transaction) {
        if self.txs.len() < self.txs.capacity() {
            // Room known before the record is made: `push` cannot grow the
            // vector here, and the record is written in its place (one copy
            // of the transaction, not two through the stack; the growing
            // path is apart so that the compiler does not merge the two).
            let rec = self.record(tx);
            self.txs.push(rec);
        } else {
            self.push_growing(tx);
        }
    }

    #[inline]
    fn len(&self) -> usize {
        self.txs.len()
    }
}

/// The TCP timers a packet at `ts` set or cancelled (`fx`), as Zeek's
/// analyzer does; `times` is the connection's start, last progress (after
/// the packet) and the packet's time. Out of line: one packet in many sets a timer.
#[inline(never)]
fn set_tcp_timers(
    part: &mut crate::conn::TcpPart,
    idx: u32,
    fx: crate::tcp::Effects,
    (start, last, ts): (i64, i64, i64),
    cfg: &TrackerConfig,
    bases: &TimerBases,
    ovf: &mut Overflow,
) {
    if fx.attempt_timer {
        part.set_timer(Timer::Attempt, ts + cfg.tcp_attempt_delay_ns, idx, start, bases, ovf);
    }
    if fx.close_complete {
        // Zeek cancels the analyzer's timers and deletes the connection
        // a close delay after its last activity.
        part.timers_cancelled = true;
        part.set_timer(Timer::Attempt, i64::MAX, idx, start, bases, ovf);
        part.set_timer(Timer::ExpireExtra, i64::MAX, idx, start, bases, ovf);
        let at = part.timer(Timer::Delete, idx, start, bases, ovf).min(last + cfg.tcp_close_delay_ns);
        part.set_timer(Timer::Delete, at, idx, start, bases, ovf);
    }
    if fx.reset_timer {
        let at = part.timer(Timer::Delete, idx, start, bases, ovf).min(ts + cfg.tcp_reset_delay_ns);
        part.set_timer(Timer::Delete, at, idx, start, bases, ovf);
    }
    if fx.expire_check && !part.timers_cancelled {
        part.set_timer(Timer::ExpireExtra, last + cfg.tcp_session_timer_ns, idx, start, bases, ovf);
    }
}

/// Counts the packet in its connection's flow: the originator is the client.
/// Every packet of the connection counts, bad checksums included: flows
/// account for traffic, conn records for what Zeek would make of it.
#[inline(always)]
fn count_flow(
    flows: &mut FlowTable,
    e: &mut Entry<Conn>,
    keys: &V6Pairs,
    is_orig: bool,
    iface: u32,
    ts: i64,
    pkt: &IpPacket<'_>,
) {
    if flows.count_cached(e.value.flow, is_orig, pkt.ip_len, ts) {
        return;
    }
    count_flow_keyed(flows, e, keys, is_orig, iface, ts, pkt);
}

/// [`count_flow`] when the connection's cached flow slot is stale (a new
/// connection, or the bucket rotated): the flow is found by its key.
#[inline(never)]
fn count_flow_keyed(
    flows: &mut FlowTable,
    e: &mut Entry<Conn>,
    keys: &V6Pairs,
    is_orig: bool,
    iface: u32,
    ts: i64,
    pkt: &IpPacket<'_>,
) {
    // ICMP has no server port; the key's "ports" are message types.
    let server_port = if matches!(pkt.transport, Transport::Icmp { .. }) {
        0
    } else {
        e.key.dport()
    };
    let key = keys.full(&e.key);
    let fk = FlowKey {
        client: key.src,
        server: key.dst,
        server_port,
        proto: key.proto,
        iface,
    };
    e.value.flow = flows.count(&fk, is_orig, pkt.ip_len, ts);
}

#[cfg(test)]
mod size_budget {
    /// The per-connection memory reported in BENCHMARKS.md: a table entry
    /// (key, tag, counters, history, times, datagram state or TCP's slab
    /// index and timers, flow slot, parser index) plus two 8-byte slots,
    /// and TCP's endpoint state in its slab. Growing it is a decision, not
    /// an accident; the parts are printed (`-- --nocapture`) to show where
    /// the bytes go.
    #[test]
    fn connection_entry_stays_within_budget() {
        use std::mem::size_of;
        type Entry = crate::table::Entry<crate::conn::Conn>;
        let entry = size_of::<Option<Entry>>();
        let tcp = crate::conn::TcpStates::bytes_per_value();
        let parts = [
            ("key (IPv4 inline, else an index)", size_of::<crate::table::StoredKey>()),
            ("start, last-progress times", 2 * size_of::<i64>()),
            ("latest packet time, after the last progress", size_of::<u32>()),
            ("packet counters (low 16 bits), byte counters (low 32)", 2 * size_of::<u16>() + 2 * size_of::<u32>()),
            ("history", size_of::<crate::history::HistoryState>()),
            ("VLAN ids", 2 * size_of::<u16>()),
            ("proto state (TCP: slab index, timers as u32 offsets; UDP/ICMP: payload sizes)", size_of::<crate::conn::ProtoState>()),
            ("flow slot", size_of::<crate::flow::FlowSlot>()),
            ("wheel deadline", size_of::<i64>()),
            ("parser's index in its slab", size_of::<u32>()),
            ("detection", size_of::<wirelog_parse::detect::Detection>()),
        ];
        for (what, n) in parts {
            println!("{n:4} B  {what}");
        }
        let sum: usize = parts.iter().map(|p| p.1).sum();
        println!("{entry:4} B  table entry ({} B of padding), TCP state in the slab {tcp} B, IPv6 pair {} B", entry - sum, crate::table::ConnTable::<crate::conn::Conn>::V6_BYTES);
        assert!(sum <= entry && entry - sum < 8, "fields moved or padding grew: {sum} of {entry}");
        assert!(entry <= 112, "connection entry grew to {entry} bytes");
        assert!(tcp <= 56, "TCP state grew to {tcp} bytes");
        // What the memory budget charges a connection: every part it may have.
        assert_eq!(
            super::Tracker::table_bytes_per_connection(),
            entry + 11 + tcp + crate::table::ConnTable::<crate::conn::Conn>::V6_BYTES + 2 * 8
        );
    }
}

#[cfg(test)]
mod parser_slots {
    /// A connection's parser state is a slot of the tracker's slab
    /// (`Conn::app`) from its SYN (HTTP by port) until the connection
    /// ends, then freed for the next; its transactions are still written.
    /// The same for its endpoints' cold slot (`tcp::ColdParts`), taken at
    /// its FIN.
    #[test]
    fn a_parser_slot_lives_as_long_as_its_connection() {
        use wirelog_decode::{ChecksumMode, DecodeConfig, Decoded, Decoder, LinkType, Packet};
        let cfg = crate::TrackerConfig { app: Some(crate::AppConfig::default()), uid_seed: Some(1), ..crate::TrackerConfig::default() };
        let mut t = super::Tracker::new(cfg);
        let mut dec = Decoder::new(DecodeConfig { checksums: ChecksumMode::Ignore, ..DecodeConfig::default() });
        // Client port `c` to 80: flags, sequence and acknowledgement numbers, payload.
        let frame = |c: u16, to_server: bool, flags: u8, seq: u32, ack: u32, payload: &[u8]| {
            let (src, dst) = if to_server { (([10, 0, 0, 1], c), ([10, 0, 0, 2], 80)) } else { (([10, 0, 0, 2], 80), ([10, 0, 0, 1], c)) };
            crate::kernel::tests::frame_carrying(src, dst, flags, seq, ack, payload)
        };
        let (req, resp) = (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", b"HTTP/1.1 204 No Content\r\n\r\n");
        let mut ts = 1_700_000_000_000_000_000i64;
        for round in 0..2u16 {
            for c in 0..10u16 {
                let port = 40_000 + 10 * round + c;
                for f in [
                    frame(port, true, 0x02, 100, 0, b""),
                    frame(port, false, 0x12, 500, 101, b""),
                    frame(port, true, 0x18, 101, 501, req),
                    frame(port, false, 0x18, 501, 101 + req.len() as u32, resp),
                    frame(port, true, 0x11, 101 + req.len() as u32, 501 + resp.len() as u32, b""),
                ] {
                    ts += 1_000;
                    if let Decoded::Ip(ip) = dec.packet(&Packet::new(LinkType::ETHERNET, ts, &f)) {
                        t.packet(ts, 0, &ip);
                    }
                }
            }
            assert_eq!(t.apps.len(), 10, "one parser state per open connection");
            assert_eq!(t.tcp.cold().len(), 10, "a cold slot per connection that sent a FIN");
            t.finish();
            assert_eq!(t.apps.len(), 0, "freed when the connections ended");
            assert_eq!(t.tcp.cold().len(), 0);
            assert_eq!(t.take_records().count(), 10);
            assert_eq!(t.app_stats().parsing, 0);
        }
        assert_eq!(t.take_transactions().len(), 20, "each connection's request and response made a transaction");
    }

    /// Two pipelined requests in one segment, both answered in one: the
    /// answering segment makes both transactions, the second taking the
    /// connection's tuple from the first's record (`BatchTxs::record`);
    /// each carries the connection's addresses, ports and transport.
    #[test]
    fn transactions_of_one_segment_carry_their_connection() {
        use wirelog_decode::{ChecksumMode, DecodeConfig, Decoded, Decoder, LinkType, Packet};
        use wirelog_record::{IpAddr16, Proto};
        let cfg = crate::TrackerConfig { app: Some(crate::AppConfig::default()), uid_seed: Some(1), ..crate::TrackerConfig::default() };
        let mut t = super::Tracker::new(cfg);
        let mut dec = Decoder::new(DecodeConfig { checksums: ChecksumMode::Ignore, ..DecodeConfig::default() });
        let (client, server) = (([10, 0, 0, 1], 40_000), ([10, 0, 0, 2], 80));
        let req = b"GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n";
        let resp = b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n";
        let mut ts = 1_700_000_000_000_000_000i64;
        for f in [
            crate::kernel::tests::frame_carrying(client, server, 0x02, 100, 0, b""),
            crate::kernel::tests::frame_carrying(server, client, 0x12, 500, 101, b""),
            crate::kernel::tests::frame_carrying(client, server, 0x18, 101, 501, req),
            crate::kernel::tests::frame_carrying(server, client, 0x18, 501, 101 + req.len() as u32, resp),
        ] {
            ts += 1_000;
            if let Decoded::Ip(ip) = dec.packet(&Packet::new(LinkType::ETHERNET, ts, &f)) {
                t.packet(ts, 0, &ip);
            }
        }
        let made: Vec<_> = t.take_transactions().map(|r| (r.orig_h, r.orig_p, r.resp_h, r.resp_p, r.transport)).collect();
        let tuple = (IpAddr16::from_v4([10, 0, 0, 1]), 40_000, IpAddr16::from_v4([10, 0, 0, 2]), 80, Proto::Tcp);
        assert_eq!(made, [tuple, tuple]);
    }

    /// A flow on a parsed port holds its slot ([`crate::app::APP_SLOT_BYTES`])
    /// in the stream memory from its SYN (no payload yet, no parser state)
    /// until it ends; with no room left for a slot a flow is not parsed,
    /// counted in `no_memory`, in its protocol's row.
    #[test]
    fn a_parser_slot_is_charged_to_the_stream_memory() {
        use crate::app::APP_SLOT_BYTES;
        use wirelog_decode::{ChecksumMode, DecodeConfig, Decoded, Decoder, LinkType, Packet};
        let (n, room) = (25usize, 20usize);
        let app = crate::AppConfig { total_buffer_bytes: room * APP_SLOT_BYTES, ..crate::AppConfig::default() };
        let cfg = crate::TrackerConfig { app: Some(app), uid_seed: Some(1), ..crate::TrackerConfig::default() };
        let mut t = super::Tracker::new(cfg);
        let mut dec = Decoder::new(DecodeConfig { checksums: ChecksumMode::Ignore, ..DecodeConfig::default() });
        let mut ts = 1_700_000_000_000_000_000i64;
        for c in 0..n as u16 {
            let syn = crate::kernel::tests::frame_carrying(([10, 0, 0, 1], 40_000 + c), ([10, 0, 0, 2], 80), 0x02, 100, 0, b"");
            ts += 1_000;
            if let Decoded::Ip(ip) = dec.packet(&Packet::new(LinkType::ETHERNET, ts, &syn)) {
                t.packet(ts, 0, &ip);
            }
            let held = (c as usize + 1).min(room);
            assert_eq!((t.apps.len(), t.parser_state_bytes()), (held, held * APP_SLOT_BYTES), "flow {c}");
        }
        let http = crate::app::protocol_index(wirelog_parse::Protocol::Http);
        let stats = t.app_stats();
        assert_eq!((stats.no_memory, stats.no_memory_by[http], stats.connections[http]), ((n - room) as u64, (n - room) as u64, n as u64));
        t.finish();
        assert_eq!((t.apps.len(), t.parser_state_bytes(), t.app_stats().no_memory), (0, 0, (n - room) as u64));
        assert_eq!(t.take_records().count(), n);
    }
}

#[cfg(test)]
mod hand_over {
    use super::move_keeping_room;

    /// The tracker's vector keeps room for the batch it handed over
    /// (allocated once when the batch it got back had less), appends into
    /// a batch that already holds records, and gives back what a burst
    /// grew beyond the bound.
    #[test]
    fn room_is_kept_for_the_next_batch_and_bounded() {
        let max = 100;
        let mut tracker: Vec<u64> = (0..60).collect();
        // A fresh batch: swapped, then room made for 60 at once.
        let mut batch = Vec::new();
        move_keeping_room(&mut tracker, &mut batch, max);
        assert_eq!(batch, (0..60).collect::<Vec<_>>());
        assert!(tracker.is_empty() && tracker.capacity() >= 60);
        let room = tracker.as_ptr();
        tracker.extend(0..60);
        assert_eq!(tracker.as_ptr(), room, "60 records grew the vector");
        // A recycled batch with enough room: swapped, nothing allocated.
        let mut recycled: Vec<u64> = Vec::with_capacity(80);
        let had = recycled.as_ptr();
        move_keeping_room(&mut tracker, &mut recycled, max);
        assert_eq!(tracker.as_ptr(), had);
        assert_eq!(recycled.len(), 60);
        // A batch already holding records: appended, the tracker's room stays.
        tracker.extend(0..5);
        let own = tracker.as_ptr();
        move_keeping_room(&mut tracker, &mut recycled, max);
        assert_eq!((recycled.len(), tracker.len(), tracker.as_ptr()), (65, 0, own));
        // A burst of 1,000: the room kept for the next batch is the bound.
        tracker.extend(0..1_000);
        let mut big = Vec::new();
        move_keeping_room(&mut tracker, &mut big, max);
        assert_eq!(big.len(), 1_000);
        assert!(tracker.capacity() >= max && tracker.capacity() < 1_000);
        // A batch handed back with more room than the bound is shrunk.
        let mut huge: Vec<u64> = Vec::with_capacity(5_000);
        tracker.push(1);
        move_keeping_room(&mut tracker, &mut huge, max);
        assert!(tracker.capacity() <= max, "kept {}", tracker.capacity());
    }

    /// Batches of about the same size going round (`read`'s): once each
    /// vector was made with the slack, none is made again, none grows.
    #[test]
    fn batches_of_varying_size_settle_without_new_vectors() {
        let max = 10_000;
        let mut tracker: Vec<u64> = Vec::new();
        // Three batches in flight, handed back in turn (a ring), each round's
        // batch 1,990 to 2,030 records.
        let mut ring: Vec<Vec<u64>> = (0..3).map(|_| Vec::new()).collect();
        let mut made = 0;
        for round in 0..60 {
            let n = 1_990 + (round * 17) % 41;
            let before = (tracker.as_ptr(), tracker.capacity());
            tracker.extend(0..n as u64);
            let grew = tracker.as_ptr() != before.0 || tracker.capacity() != before.1;
            let mut batch = std::mem::take(&mut ring[round % 3]);
            batch.clear();
            let back = batch.as_ptr();
            move_keeping_room(&mut tracker, &mut batch, max);
            let remade = tracker.as_ptr() != back;
            if round >= 6 {
                assert!(!grew && !remade, "round {round}: {n} records grew or remade a vector");
            }
            made += remade as usize;
            assert_eq!(batch.len(), n);
            ring[round % 3] = batch;
        }
        assert!(made <= 4, "{made} vectors made");
    }
}
