//! Counters of a live capture, written by each worker (once per block, with
//! relaxed atomics: nothing is shared per packet) and read by whoever prints
//! them (every `--stats-interval`, on exit, `/metrics` and `/api/health`).
//!
//! They count the whole packet loop (ring, decoder, tracker, parsers, output
//! queue), not AF_PACKET alone, so they live apart from `wirelog-capture`:
//! the API server (`wirelog-serve`) publishes them without linking the
//! capture code.

#![forbid(unsafe_code)]

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One worker's counters.
#[derive(Debug, Default)]
pub struct WorkerCounters {
    /// Packets taken from the ring (after the kernel filter).
    pub packets: AtomicU64,
    /// Their wire length.
    pub bytes: AtomicU64,
    /// Packets the kernel passed to this worker's sockets (PACKET_STATISTICS
    /// tp_packets, which includes the drops).
    pub kernel_packets: AtomicU64,
    /// Packets the kernel dropped: the ring was full (`tp_drops`), or the
    /// socket program refused them while the worker paused at its CPU
    /// budget (`shed_packets`, a part of this).
    pub kernel_drops: AtomicU64,
    /// Times a ring was full.
    pub kernel_freezes: AtomicU64,
    /// Connections ended early because the connection table was full.
    pub evicted: AtomicU64,
    /// Flows written before their bucket ended because the flow table was full.
    pub flows_early: AtomicU64,
    /// Packets that are not IP (ARP, LLDP, STP...): expected on any link,
    /// counted apart so that `not_decoded` means something went wrong.
    pub not_ip: AtomicU64,
    /// IP packets not decoded (truncated, malformed, tunnels not decoded,
    /// fragments dropped).
    pub not_decoded: AtomicU64,
    /// Decoded packets whose checksums were valid (or the kernel said so).
    pub checksum_valid: AtomicU64,
    /// Decoded packets whose TCP/UDP checksum was offloaded (never computed).
    pub checksum_offloaded: AtomicU64,
    /// Decoded packets with a bad IP or transport checksum (not used).
    pub checksum_bad: AtomicU64,
    /// Connections in this worker's table now (a gauge).
    pub conns_open: AtomicU64,
    /// Application streams given to a parser (connections parsed).
    pub streams_parsed: AtomicU64,
    /// Gaps (missing stream bytes) the parsers were told of, over ended connections.
    pub parse_gaps: AtomicU64,
    /// Stream bytes the parsers skipped as unparseable, over ended connections.
    pub unparsed_bytes: AtomicU64,
    /// Bytes of TCP segments past the snap length (`capture --snaplen`):
    /// sent and seen, not copied; not loss (their streams keep their place).
    pub beyond_snaplen_bytes: AtomicU64,
    /// Parsers that gave up on their connection (compression, not the protocol).
    pub parsers_gave_up: AtomicU64,
    /// Connections not parsed because the stream memory had no room for a
    /// parser's state (`--stream-memory`).
    pub parse_no_memory: AtomicU64,
    /// Times the worker stopped reading its rings to wait for the output
    /// thread, having held [`MAX_HELD_RECORDS`] records for it
    /// already (the kernel drops packets meanwhile).
    pub output_waits: AtomicU64,
    /// Bytes missing from TCP streams (conn.log's `missed_bytes`), over
    /// ended connections.
    pub missed_bytes: AtomicU64,
    /// `--cpu-budget`: this worker's thread CPU time, ns.
    pub cpu_ns: AtomicU64,
    /// `--cpu-budget` step 1: new connections are parsed 1 in this many
    /// now (a gauge; 1: all of them, or no budget).
    pub sample_n: AtomicU64,
    /// Step 1: connections whose parsing sampling skipped (their
    /// transactions are missing; the parsed ones carry the weight).
    pub sampled_out: AtomicU64,
    /// Step 1: wall time sampling was on, ns.
    pub shed_sampling_ns: AtomicU64,
    /// `--cpu-budget` step 1b: connections already parsed go on 1 in this
    /// many now (a gauge; 1: all of them, or no budget).
    pub thin_k: AtomicU64,
    /// Step 1b: parsed connections whose parsing stopped part way.
    pub parse_stopped: AtomicU64,
    /// Step 1b: wall time thinning was on, ns.
    pub shed_thinning_ns: AtomicU64,
    /// Step 2: wall time the skip-empty-TCP filter was on, ns.
    pub shed_skip_empty_ns: AtomicU64,
    /// Step 3: wall time kernel accounting was on, ns.
    pub shed_kernel_ns: AtomicU64,
    /// Step 4: wall time the worker left its rings to the kernel (the
    /// budget spent), ns; what the kernel dropped meanwhile is in `kernel_drops`.
    pub shed_paused_ns: AtomicU64,
    /// Step 4: times the worker paused.
    pub shed_pauses: AtomicU64,
    /// Step 4: packets (and their wire bytes) the socket programs refused
    /// while the worker paused (`sockprog::FLAG_SHED`): in `kernel_packets`
    /// and `kernel_drops` too, as drops in the kernel by this cause.
    pub shed_packets: AtomicU64,
    pub shed_bytes: AtomicU64,
}

/// Records a capture worker keeps while the output thread is behind (a disk
/// that stalls, a burst) before it waits for it: about ten seconds of a busy
/// database's statements, so a stall costs memory instead of packets.
pub const MAX_HELD_RECORDS: usize = 262_144;

/// A plain copy of one worker's counters: what the stats line prints and
/// what `/metrics` and `/api/health` publish (with the `serde` feature).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct WorkerStats {
    pub packets: u64,
    pub bytes: u64,
    pub kernel_packets: u64,
    pub kernel_drops: u64,
    pub kernel_freezes: u64,
    pub evicted: u64,
    pub flows_early: u64,
    pub not_ip: u64,
    pub not_decoded: u64,
    pub checksum_valid: u64,
    pub checksum_offloaded: u64,
    pub checksum_bad: u64,
    pub conns_open: u64,
    pub streams_parsed: u64,
    pub parse_gaps: u64,
    pub unparsed_bytes: u64,
    pub beyond_snaplen_bytes: u64,
    pub parsers_gave_up: u64,
    pub parse_no_memory: u64,
    pub output_waits: u64,
    pub missed_bytes: u64,
    pub cpu_ns: u64,
    pub sample_n: u64,
    pub sampled_out: u64,
    pub shed_sampling_ns: u64,
    pub thin_k: u64,
    pub parse_stopped: u64,
    pub shed_thinning_ns: u64,
    pub shed_skip_empty_ns: u64,
    pub shed_kernel_ns: u64,
    pub shed_paused_ns: u64,
    pub shed_pauses: u64,
    pub shed_packets: u64,
    pub shed_bytes: u64,
}

impl WorkerCounters {
    pub fn snapshot(&self) -> WorkerStats {
        WorkerStats {
            packets: self.packets.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            kernel_packets: self.kernel_packets.load(Relaxed),
            kernel_drops: self.kernel_drops.load(Relaxed),
            kernel_freezes: self.kernel_freezes.load(Relaxed),
            evicted: self.evicted.load(Relaxed),
            flows_early: self.flows_early.load(Relaxed),
            not_ip: self.not_ip.load(Relaxed),
            not_decoded: self.not_decoded.load(Relaxed),
            checksum_valid: self.checksum_valid.load(Relaxed),
            checksum_offloaded: self.checksum_offloaded.load(Relaxed),
            checksum_bad: self.checksum_bad.load(Relaxed),
            conns_open: self.conns_open.load(Relaxed),
            streams_parsed: self.streams_parsed.load(Relaxed),
            parse_gaps: self.parse_gaps.load(Relaxed),
            unparsed_bytes: self.unparsed_bytes.load(Relaxed),
            beyond_snaplen_bytes: self.beyond_snaplen_bytes.load(Relaxed),
            parsers_gave_up: self.parsers_gave_up.load(Relaxed),
            parse_no_memory: self.parse_no_memory.load(Relaxed),
            output_waits: self.output_waits.load(Relaxed),
            missed_bytes: self.missed_bytes.load(Relaxed),
            cpu_ns: self.cpu_ns.load(Relaxed),
            sample_n: self.sample_n.load(Relaxed),
            sampled_out: self.sampled_out.load(Relaxed),
            shed_sampling_ns: self.shed_sampling_ns.load(Relaxed),
            thin_k: self.thin_k.load(Relaxed),
            parse_stopped: self.parse_stopped.load(Relaxed),
            shed_thinning_ns: self.shed_thinning_ns.load(Relaxed),
            shed_skip_empty_ns: self.shed_skip_empty_ns.load(Relaxed),
            shed_kernel_ns: self.shed_kernel_ns.load(Relaxed),
            shed_paused_ns: self.shed_paused_ns.load(Relaxed),
            shed_pauses: self.shed_pauses.load(Relaxed),
            shed_packets: self.shed_packets.load(Relaxed),
            shed_bytes: self.shed_bytes.load(Relaxed),
        }
    }

    /// Adds a batch (one block) of packets.
    #[inline]
    pub fn add_batch(&self, packets: u64, bytes: u64) {
        self.packets.fetch_add(packets, Relaxed);
        self.bytes.fetch_add(bytes, Relaxed);
    }
}

/// Counters of all workers.
#[derive(Debug, Clone, Default)]
pub struct CaptureStats {
    pub workers: Vec<WorkerStats>,
}

impl<'a> std::iter::Sum<&'a WorkerStats> for WorkerStats {
    fn sum<I: Iterator<Item = &'a WorkerStats>>(iter: I) -> WorkerStats {
        iter.fold(WorkerStats::default(), |t, w| WorkerStats {
            packets: t.packets + w.packets,
            bytes: t.bytes + w.bytes,
            kernel_packets: t.kernel_packets + w.kernel_packets,
            kernel_drops: t.kernel_drops + w.kernel_drops,
            kernel_freezes: t.kernel_freezes + w.kernel_freezes,
            evicted: t.evicted + w.evicted,
            flows_early: t.flows_early + w.flows_early,
            not_ip: t.not_ip + w.not_ip,
            not_decoded: t.not_decoded + w.not_decoded,
            checksum_valid: t.checksum_valid + w.checksum_valid,
            checksum_offloaded: t.checksum_offloaded + w.checksum_offloaded,
            checksum_bad: t.checksum_bad + w.checksum_bad,
            conns_open: t.conns_open + w.conns_open,
            streams_parsed: t.streams_parsed + w.streams_parsed,
            parse_gaps: t.parse_gaps + w.parse_gaps,
            unparsed_bytes: t.unparsed_bytes + w.unparsed_bytes,
            beyond_snaplen_bytes: t.beyond_snaplen_bytes + w.beyond_snaplen_bytes,
            parsers_gave_up: t.parsers_gave_up + w.parsers_gave_up,
            parse_no_memory: t.parse_no_memory + w.parse_no_memory,
            output_waits: t.output_waits + w.output_waits,
            missed_bytes: t.missed_bytes + w.missed_bytes,
            cpu_ns: t.cpu_ns + w.cpu_ns,
            // A gauge: the most any worker samples.
            sample_n: t.sample_n.max(w.sample_n),
            sampled_out: t.sampled_out + w.sampled_out,
            shed_sampling_ns: t.shed_sampling_ns + w.shed_sampling_ns,
            // A gauge, like sample_n.
            thin_k: t.thin_k.max(w.thin_k),
            parse_stopped: t.parse_stopped + w.parse_stopped,
            shed_thinning_ns: t.shed_thinning_ns + w.shed_thinning_ns,
            shed_skip_empty_ns: t.shed_skip_empty_ns + w.shed_skip_empty_ns,
            shed_kernel_ns: t.shed_kernel_ns + w.shed_kernel_ns,
            shed_paused_ns: t.shed_paused_ns + w.shed_paused_ns,
            shed_pauses: t.shed_pauses + w.shed_pauses,
            shed_packets: t.shed_packets + w.shed_packets,
            shed_bytes: t.shed_bytes + w.shed_bytes,
        })
    }
}

impl CaptureStats {
    pub fn total(&self) -> WorkerStats {
        self.workers.iter().sum()
    }

    /// `--cpu-budget`: which shedding steps were active and for how long
    /// (seconds of the longest worker), and what they shed.
    pub fn shed_text(&self) -> String {
        let t = self.total();
        let most = |f: fn(&WorkerStats) -> u64| self.workers.iter().map(f).max().unwrap_or(0) as f64 / 1e9;
        format!(
            "(1) parse sampling {:.1} s ({} connections not parsed, 1 in {} now), (1b) parsed connections thinned {:.1} s ({} connections no longer parsed, 1 in {} kept now), (2) skip-empty-tcp {:.1} s, (3) kernel accounting {:.1} s, (4) rings left to the kernel {:.1} s ({} pauses, {} packets dropped by the kernel, {} of them shed by the socket program during pauses); workers used {:.2} CPU-s",
            most(|w| w.shed_sampling_ns),
            t.sampled_out,
            t.sample_n.max(1),
            most(|w| w.shed_thinning_ns),
            t.parse_stopped,
            t.thin_k.max(1),
            most(|w| w.shed_skip_empty_ns),
            most(|w| w.shed_kernel_ns),
            most(|w| w.shed_paused_ns),
            t.shed_pauses,
            t.kernel_drops,
            t.shed_packets,
            t.cpu_ns as f64 / 1e9
        )
    }
}

/// One line: totals, then per-worker packets/bytes when there are several.
impl fmt::Display for CaptureStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.total();
        write!(
            f,
            "{} packets, {} bytes; kernel: {} packets, {} dropped ({} ring-full events); probe: {} connections evicted, {} flows written early, checksums {} valid {} offloaded {} bad, {} packets not IP, {} packets not decoded",
            t.packets, t.bytes, t.kernel_packets, t.kernel_drops, t.kernel_freezes, t.evicted, t.flows_early,
            t.checksum_valid, t.checksum_offloaded, t.checksum_bad, t.not_ip, t.not_decoded
        )?;
        if t.shed_packets > 0 {
            write!(f, "; {} packets ({} bytes) of the dropped shed by the CPU budget in the kernel", t.shed_packets, t.shed_bytes)?;
        }
        if t.output_waits > 0 {
            write!(f, "; workers waited {} times for the output thread", t.output_waits)?;
        }
        if self.workers.len() > 1 {
            let per: Vec<String> = self
                .workers
                .iter()
                .enumerate()
                .map(|(i, w)| format!("#{i} {} packets {} bytes", w.packets, w.bytes))
                .collect();
            write!(f, "; workers: {}", per.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_and_line() {
        let a = WorkerCounters::default();
        a.add_batch(3, 300);
        let b = WorkerCounters::default();
        b.add_batch(2, 100);
        b.kernel_drops.fetch_add(1, Relaxed);
        let s = CaptureStats { workers: vec![a.snapshot(), b.snapshot()] };
        assert_eq!(s.total().packets, 5);
        assert_eq!(s.total().bytes, 400);
        let line = s.to_string();
        assert!(line.starts_with("5 packets, 400 bytes; kernel: 0 packets, 1 dropped"), "{line}");
        assert!(line.ends_with("workers: #0 3 packets 300 bytes, #1 2 packets 100 bytes"), "{line}");
    }
}
