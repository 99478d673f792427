//! The probe: wirelog's packet loop, written once. `read`, each `capture`
//! worker, the benchmarks and the fuzz target all drive a [`Probe`].
//!
//! A probe owns one decoder (with its fragment table) and one connection
//! tracker (with its parsers and flow table). Each [`Packet`] goes through
//! [`Probe::packet`]: decoded, then tracked, or counted as skipped with its
//! reason. Records of ended connections, flow buckets and transactions
//! collect inside until [`Probe::drain`] moves them into a
//! [`wirelog_record::Batch`] (reused: the output stage hands it back empty).
//! Timers run on packet time; [`Probe::advance`] moves them on without a
//! packet (a live probe on an idle link), and [`Probe::finish`] ends every
//! open connection at the end of input.
//!
//! Its settings are one [`ProbeConfig`], built once from the command line
//! (the same flags and defaults for `read` and `capture`).
//!
//! ```
//! use wirelog_packet::{LinkType, Packet};
//! use wirelog_probe::{Probe, ProbeConfig};
//! use wirelog_record::Batch;
//!
//! // A raw IPv4 UDP datagram 10.0.0.1:1234 -> 10.0.0.2:53.
//! let udp = [
//!     0x45, 0, 0, 30, 0, 1, 0, 0, 64, 17, 0x66, 0xcc, 10, 0, 0, 1, 10, 0, 0, 2, //
//!     0x04, 0xd2, 0, 53, 0, 10, 0, 0, b'h', b'i',
//! ];
//! let mut probe = Probe::new(ProbeConfig::default());
//! assert!(probe.packet(&Packet::new(LinkType::RAW, 1_700_000_000_000_000_000, &udp)).is_ok());
//! probe.finish();
//! let mut batch = Batch::default();
//! probe.drain(&mut batch);
//! assert_eq!(batch.conns.len(), 1);
//! assert_eq!(probe.decode_stats().decoded, 1);
//! ```

#![forbid(unsafe_code)]

use wirelog_decode::{DecodeConfig, DecodeStats, Decoded, Decoder};
use wirelog_record::Batch;
use wirelog_track::{AppStats, TrackStats, Tracker};

pub use wirelog_decode::{ChecksumMode, SkipReason};
pub use wirelog_packet::{KernelChecksum, LinkType, Packet};
pub use wirelog_procs::NewConn;
pub use wirelog_pcapdir::{KeepCounters, KeepSender};
pub use wirelog_track::{AppConfig, KeepRule, KeepVerdict, KernelAccounting, TrackerConfig, KERNEL_MAX_CONNECTIONS};

/// Everything that decides what a probe makes of packets; the defaults are
/// the command line's.
#[derive(Clone)]
pub struct ProbeConfig {
    /// How IP/TCP/UDP/ICMP checksums are treated (`--checksums`).
    pub checksums: ChecksumMode,
    /// Incomplete IP fragment series are dropped after this long, packet
    /// time (`--frag-timeout`).
    pub frag_timeout_ns: i64,
    /// Connection and flow tracking and application parsing: timeouts,
    /// server ports, the table sizes `--memory` gives, parser options, and
    /// whether empty TCP segments were filtered out before the probe
    /// (`--skip-empty-tcp`, noted on TCP records).
    pub track: TrackerConfig,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        let decode = DecodeConfig::default();
        ProbeConfig {
            checksums: decode.checksums,
            frag_timeout_ns: decode.frag_timeout_ns,
            track: TrackerConfig::default(),
        }
    }
}

/// Decoder and tracker of one packet stream (see the crate docs).
pub struct Probe {
    decoder: Decoder,
    tracker: Tracker,
    /// Names interface ids the first time they are seen (live `any`, where
    /// every packet carries its kernel ifindex).
    namer: Option<fn(u32) -> String>,
    named: Vec<u32>,
    /// The id named last: packets of one interface come in runs, so most
    /// packets are settled by one compare.
    last_named: u32,
    /// `--pcap-dir`: where kept packets go (`None`: none are).
    keeper: Option<Keeper>,
}

/// A packet filter of its own for kept packets (`--pcap-filter`): true keeps.
pub type KeepFilter = Box<dyn FnMut(&Packet<'_>) -> bool + Send>;

/// The packets the tracker's verdict keeps (and the filter passes), copied
/// to the pcap writer's queue.
struct Keeper {
    sender: KeepSender,
    filter: Option<KeepFilter>,
}

impl Keeper {
    /// Out of line: the loop pays one branch per packet when nothing is kept.
    #[inline(never)]
    fn offer(&mut self, p: &Packet<'_>, v: KeepVerdict) {
        if v.keep && self.filter.as_mut().is_none_or(|f| f(p)) {
            self.sender.keep(p.ts_ns, p.wire_len, p.linktype.0, p.data, v.uid);
        } else {
            self.sender.cut();
        }
    }
}

impl Probe {
    pub fn new(cfg: ProbeConfig) -> Probe {
        Probe {
            decoder: Decoder::new(DecodeConfig {
                checksums: cfg.checksums,
                frag_timeout_ns: cfg.frag_timeout_ns,
                ..DecodeConfig::default()
            }),
            tracker: Tracker::new(cfg.track),
            namer: None,
            named: Vec::new(),
            last_named: u32::MAX,
            keeper: None,
        }
    }

    /// Decodes and tracks one packet; `Err` says why it was not tracked
    /// (counted in [`Probe::decode_stats`] either way).
    ///
    /// Always inlined into the caller's loop, as the decoder is: an
    /// out-of-line call here passed the packet through the stack and cost
    /// up to 10% on many short connections (`wirelog-bench pipeline`).
    #[inline(always)]
    pub fn packet(&mut self, p: &Packet<'_>) -> Result<(), SkipReason> {
        // Matched by reference: binding the packet by value copied its ~100
        // bytes out of the decoder's result on every packet.
        match &self.decoder.packet(p) {
            Decoded::Ip(ip) => {
                if self.namer.is_some() && p.if_id != self.last_named {
                    name_interface(&mut self.tracker, &mut self.named, self.namer, p.if_id);
                    self.last_named = p.if_id;
                }
                match self.keeper.as_mut() {
                    None => self.tracker.packet(p.ts_ns, p.if_id, ip),
                    Some(k) => k.offer(p, self.tracker.packet_kept(p.ts_ns, p.if_id, ip)),
                }
                Ok(())
            }
            &Decoded::Skipped(r) => {
                if let Some(k) = self.keeper.as_mut() {
                    k.offer(p, self.tracker.unrelated_verdict());
                }
                Err(r)
            }
        }
    }

    /// Runs timers up to `now_ns` and ends the flow bucket if `now_ns` is
    /// past it, without a packet (live capture calls this with the clock).
    #[inline]
    pub fn advance(&mut self, now_ns: i64) {
        self.tracker.advance(now_ns);
    }

    /// Moves the records of connections and flow buckets that ended, and the
    /// transactions parsed, since the last call into `batch` (appended).
    pub fn drain(&mut self, batch: &mut Batch) {
        self.tracker.move_records_into(&mut batch.conns, &mut batch.flows, &mut batch.txs);
        if let Some(k) = self.keeper.as_mut() {
            k.sender.flush();
        }
    }

    /// Keeps packets from now on: those `rule` keeps and `filter` (if any)
    /// passes go to `sender`, with their connection's uid (which the
    /// connection's records then carry). Call before the first packet.
    pub fn keep_packets(&mut self, rule: KeepRule, sender: KeepSender, filter: Option<KeepFilter>) {
        self.tracker.keep_packets(rule);
        self.keeper = Some(Keeper { sender, filter });
    }

    /// Hands the packets kept so far to the writer and stops keeping (the
    /// writer can then finish).
    pub fn stop_keeping(&mut self) {
        self.keeper = None;
    }

    /// End of input: every connection still open ends with its current
    /// state (as Zeek does when it terminates), and the flow bucket too.
    pub fn finish(&mut self) {
        self.tracker.finish();
    }

    /// [`Probe::finish`] in steps of at most `max` connections, true once
    /// none is left: draining between steps keeps the records of a full
    /// table from sitting in memory at once.
    pub fn finish_some(&mut self, max: usize) -> bool {
        self.tracker.finish_some(max)
    }

    /// Names the interface whose packets carry `if_id` (flow records carry
    /// the name; unnamed ids are `if<N>`).
    pub fn set_iface_name(&mut self, if_id: u32, name: &str) {
        self.tracker.set_iface_name(if_id, name);
    }

    /// Names each interface id with `namer` the first time a packet of it is
    /// tracked (live `any`: ids are kernel ifindexes, not known in advance).
    pub fn name_interfaces_with(&mut self, namer: fn(u32) -> String) {
        self.namer = Some(namer);
    }

    /// Queues the tuple of every new connection, at most `cap` between two
    /// [`Probe::take_new_connections`] (the rest are counted), for the
    /// process resolver.
    pub fn queue_new_connections(&mut self, cap: usize) {
        self.tracker.queue_new_connections(cap);
    }

    /// Delegates connections to the kernel accounting program (`capture
    /// --kernel-accounting`).
    pub fn kernel_accounting(&mut self, k: std::sync::Arc<wirelog_track::KernelAccounting>) {
        self.tracker.kernel_accounting(k);
    }

    /// `capture --cpu-budget` step 3: connections are delegated to the
    /// kernel accounting program from now on, or taken back (see
    /// [`Tracker::set_kernel_accounting`]).
    pub fn set_kernel_accounting(&mut self, on: bool) {
        self.tracker.set_kernel_accounting(on);
    }

    /// `--kernel-accounting`: after a ring block, hands back to the kernel
    /// the connections the tracker has caught up with (see
    /// [`wirelog_track::Tracker::kernel_rearm`]).
    #[inline]
    pub fn kernel_rearm(&mut self) {
        self.tracker.kernel_rearm();
    }

    /// `capture --cpu-budget` step 1: parses 1 in `n` new connections (see
    /// [`Tracker::set_sampling`]).
    pub fn set_sampling(&mut self, n: u32) {
        self.tracker.set_sampling(n);
    }

    /// `capture --cpu-budget` step 1b: connections already parsed go on
    /// 1 in `k` (see [`Tracker::set_thinning`]).
    pub fn set_thinning(&mut self, k: u32) {
        self.tracker.set_thinning(k);
    }

    /// `capture --cpu-budget` step 2: the kernel's skip-empty-TCP filter
    /// went on or off at `at_ns` (packet time; records note it).
    pub fn set_empty_tcp_skipped(&mut self, on: bool, at_ns: i64) {
        self.tracker.set_empty_tcp_skipped(on, at_ns);
    }

    /// The connections created since the last call, swapped into `into`.
    pub fn take_new_connections(&mut self, into: &mut Vec<NewConn>) {
        self.tracker.take_new_connections(into);
    }

    /// Packets decoded and skipped (by reason), checksum verdicts, fragments.
    pub fn decode_stats(&self) -> &DecodeStats {
        self.decoder.stats()
    }

    /// Connections tracked, evicted, untracked protocols.
    pub fn track_stats(&self) -> &TrackStats {
        self.tracker.stats()
    }

    /// What application parsing did.
    pub fn app_stats(&self) -> &AppStats {
        self.tracker.app_stats()
    }

    /// The probe's share of the loss table's counts, cumulative since it
    /// started, into `out` (the source's row at 0, each protocol's at 1 +
    /// its index): what the decoder, the tracker and the parsers already
    /// count. The kernel's counts, sampling and the sinks' drops are the
    /// caller's (see `wirelog_record::loss`).
    pub fn loss_totals(&self, out: &mut wirelog_record::LossTotals) {
        use wirelog_decode::SkipReason;
        use wirelog_record::LossCount as C;
        let ds = self.decoder.stats();
        let undecoded: u64 = ds
            .skipped_iter()
            .filter(|(r, _)| !matches!(r, SkipReason::NotIp | SkipReason::FragmentHeld))
            .map(|(_, n)| n)
            .sum();
        let ts = self.tracker.stats();
        let src = &mut out[0];
        src.set(C::Packets, ds.packets());
        src.set(C::Undecoded, undecoded);
        src.set(C::Evicted, ts.evicted);
        src.set(C::FlowsEarly, self.tracker.flows_emitted_early());
        src.set(C::MissedBytes, ts.missed_bytes);
        let a = self.tracker.app_stats();
        src.set(C::BeyondSnaplen, a.beyond_snaplen_bytes);
        for (i, row) in out[1..].iter_mut().enumerate() {
            let p = &a.parse_by[i];
            row.set(C::Gaps, p.gaps);
            row.set(C::UnparsedBytes, p.unparsed_bytes);
            row.set(C::Malformed, p.malformed);
            row.set(C::GaveUp, a.gave_up_by[i]);
            row.set(C::Sampled, a.sampled_out_by[i]);
            row.set(C::Parsed, a.connections[i]);
            row.set(C::ParseStopped, a.parse_stopped_by[i]);
            row.set(C::NoMemory, a.no_memory_by[i]);
        }
    }

    /// Connections open right now.
    pub fn active_connections(&self) -> usize {
        self.tracker.active_connections()
    }

    /// The tracker, for its sizes and gauges (memory per connection and
    /// flow, stream buffers held, flows written early).
    pub fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    /// Hashes the tuple of a packet still to come and prefetches its table
    /// slot (call ~16 packets ahead); the hash is for
    /// [`Probe::prefetch_entry`]. Benchmark experiments only.
    #[cfg(feature = "bench")]
    #[inline]
    pub fn prefetch_slot(&self, p: &Packet<'_>) -> Option<u64> {
        let h = wirelog_decode::flow_hint(p.linktype, p.data).map(|h| self.tracker.hint_hash(&h))?;
        self.tracker.prefetch(h);
        Some(h)
    }

    /// Prefetches the connection entry of a slot prefetched earlier (call
    /// ~8 packets ahead). Benchmark experiments only.
    #[cfg(feature = "bench")]
    #[inline]
    pub fn prefetch_entry(&self, hash: u64) {
        self.tracker.prefetch_entry(hash);
    }
}

/// The cold part of naming: once per interface id.
#[cold]
#[inline(never)]
fn name_interface(tracker: &mut Tracker, named: &mut Vec<u32>, namer: Option<fn(u32) -> String>, if_id: u32) {
    if let Some(namer) = namer.filter(|_| !named.contains(&if_id)) {
        named.push(if_id);
        tracker.set_iface_name(if_id, &namer(if_id));
    }
}

#[cfg(test)]
mod tests;
