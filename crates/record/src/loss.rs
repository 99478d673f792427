//! The completeness record: per capture source (the interfaces a capture
//! worker reads, or a file `read` reads) and minute, what did not make it
//! into the records and why. Each count is taken from a counter that
//! already exists (the kernel's PACKET_STATISTICS, the decoder's, the
//! tracker's and the parsers' statistics, the sinks' dropped records): a
//! row holds how much each grew during its minute, so a sum over rows is
//! the run's total and nothing is counted twice.
//!
//! A source's row has `protocol` unset and every count but the parsers';
//! the parsers' counts (gaps, bytes not parsed, malformed messages, parsers
//! that gave up) are in one row
//! per protocol that had any, so that a sum over all rows of a minute is
//! still each count once. Records the sinks dropped are in a row of their
//! own, source `sinks` (the output stage knows no interface).

use crate::Protocol;

/// Declares the counts of a loss row in one list: [`LossCount`], its
/// column names and their descriptions follow from it.
macro_rules! loss_counts {
    ($($(#[$doc:meta])* $v:ident = $name:literal: $what:literal,)*) => {
        /// One count of a [`LossRecord`]; [`LossCount::ALL`] is the
        /// column order everywhere (store, ClickHouse, queries).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum LossCount {
            $($(#[$doc])* $v,)*
        }

        impl LossCount {
            pub const ALL: [LossCount; [$(LossCount::$v),*].len()] = [$(LossCount::$v),*];

            /// The column name (store, queries, API, ClickHouse).
            pub const fn name(self) -> &'static str {
                match self {
                    $(LossCount::$v => $name,)*
                }
            }

            /// What it counts, for people (`wirelog query --help`, README).
            pub const fn what(self) -> &'static str {
                match self {
                    $(LossCount::$v => $what,)*
                }
            }
        }
    };
}

loss_counts! {
    Packets = "packets": "packets the probe read (after the capture filter)",
    KernelPackets = "kernel_packets": "packets the kernel passed to the capture sockets, its drops included (PACKET_STATISTICS tp_packets, and the packets the CPU budget shed); for a file, the packets in it",
    KernelDrops = "kernel_drops": "packets the kernel dropped because the ring was full (tp_drops) or the CPU budget shed them while the worker paused (capture --cpu-budget step 4)",
    RingFull = "ring_full": "times a ring was full (tp_freeze_q_cnt)",
    Undecoded = "undecoded": "IP packets not decoded (truncated, malformed, fragments given up) or records of a capture file that could not be read",
    Evicted = "evicted": "connections ended early because the connection table was full (--memory)",
    FlowsEarly = "flows_early": "flows written before their bucket ended because the flow table was full",
    MissedBytes = "missed_bytes": "bytes missing from TCP streams (the sum of conn.log's missed_bytes of the connections that ended)",
    Gaps = "gaps": "gaps in parsed streams (holes the parsers had to resynchronise after)",
    UnparsedBytes = "unparsed_bytes": "stream bytes the parsers skipped as unparseable",
    Malformed = "malformed": "messages a parser read but could not use",
    GaveUp = "gave_up": "connections whose parser gave up (compression, not the protocol)",
    Sampled = "sampled": "connections not parsed because parsing was sampled (capture --cpu-budget), in the rows of their protocol",
    RecordsDropped = "records_dropped": "records a sink could not write (a full disk, a spool that overflowed)",
    Parsed = "parsed": "connections whose parsing began, in the rows of their protocol (with sampled: 1 in (parsed + sampled) / parsed parsed)",
    ParseStopped = "parse_stopped": "parsed connections whose parsing stopped part way because the CPU budget thinned them (capture --cpu-budget step 1b): their transactions from then on are missing, in the rows of their protocol",
    BeyondSnaplen = "beyond_snaplen_bytes": "bytes of TCP segments past the snap length (capture --snaplen, or a file's): sent and seen, not copied; not loss (their streams keep their place, no gap)",
    NoMemory = "no_memory": "connections not parsed because the stream memory (--stream-memory) had no room for a parser's state at their first payload, in the rows of their protocol",
}

/// The counts a protocol's row carries (the parsers'); a source's row
/// carries the others.
pub const PROTOCOL_COUNTS: [LossCount; 8] = [
    LossCount::Gaps,
    LossCount::UnparsedBytes,
    LossCount::Malformed,
    LossCount::GaveUp,
    LossCount::Sampled,
    LossCount::Parsed,
    LossCount::ParseStopped,
    LossCount::NoMemory,
];

/// The counts of one row, indexed by [`LossCount`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LossCounts(pub [u64; LossCount::ALL.len()]);

impl LossCounts {
    pub fn get(&self, c: LossCount) -> u64 {
        self.0[c as usize]
    }

    pub fn set(&mut self, c: LossCount, v: u64) {
        self.0[c as usize] = v;
    }

    pub fn add(&mut self, c: LossCount, v: u64) {
        self.0[c as usize] += v;
    }

    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|n| *n == 0)
    }

    /// How much each count grew since `before` (a counter that went back,
    /// as a ring reopened, counts from zero again).
    pub fn since(&self, before: &LossCounts) -> LossCounts {
        let mut d = LossCounts::default();
        for (i, (now, was)) in self.0.iter().zip(before.0).enumerate() {
            d.0[i] = if *now >= was { now - was } else { *now };
        }
        d
    }
}

/// Cumulative counts of a packet path: the source's (index 0) and each
/// protocol's (1 + its index in [`Protocol::ALL`]).
pub type LossTotals = [LossCounts; 1 + Protocol::ALL.len()];

/// One row of the `loss` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LossRecord {
    /// The minute's start (ns since the epoch): packet time for `read`,
    /// the wall clock for `capture`.
    pub ts_ns: i64,
    /// The interfaces of a capture worker (comma-joined), the capture
    /// file's name, or `sinks`.
    pub source: String,
    /// The protocol of a parsers' row; `None` for a source's row.
    pub protocol: Option<Protocol>,
    pub counts: LossCounts,
}

/// The source name of the output stage's rows (records the sinks dropped).
pub const SINKS_SOURCE: &str = "sinks";

pub const MINUTE_NS: i64 = 60_000_000_000;

/// The minute `ns` falls in (its start).
pub fn minute_of(ns: i64) -> i64 {
    ns.div_euclid(MINUTE_NS) * MINUTE_NS
}

/// Turns a packet path's cumulative counts into one row per minute: the
/// packet path calls [`LossMeter::due`] with its clock and, when due,
/// [`LossMeter::close_minute`] with its counts then.
#[derive(Debug, Clone, Default)]
pub struct LossMeter {
    source: String,
    /// The open minute's start; `None` before the first time is known.
    minute: Option<i64>,
    last: LossTotals,
}

impl LossMeter {
    pub fn new(source: impl Into<String>) -> LossMeter {
        LossMeter { source: source.into(), minute: None, last: [LossCounts::default(); 1 + Protocol::ALL.len()] }
    }

    /// Starts the first minute at `now_ns` if none is open; true when
    /// `now_ns` is past the open minute (its row is due).
    #[inline]
    pub fn due(&mut self, now_ns: i64) -> bool {
        match self.minute {
            Some(m) => now_ns >= m + MINUTE_NS,
            None => {
                self.minute = Some(minute_of(now_ns));
                false
            }
        }
    }

    /// Ends the open minute with the counts `now` (cumulative since the
    /// start) and opens the minute of `next_ns`: pushes the source's row
    /// (a minute with packets and nothing lost says so too) and a row for
    /// each protocol whose counts grew; counts that did not grow make no row.
    pub fn close_minute(&mut self, now: &LossTotals, next_ns: i64, out: &mut Vec<LossRecord>) {
        let ts_ns = self.minute.unwrap_or_else(|| minute_of(next_ns));
        for (i, (n, was)) in now.iter().zip(&self.last).enumerate() {
            let d = n.since(was);
            if d.is_zero() {
                continue;
            }
            out.push(LossRecord {
                ts_ns,
                source: self.source.clone(),
                protocol: i.checked_sub(1).map(|p| Protocol::ALL[p]),
                counts: d,
            });
        }
        self.last = *now;
        // A close within the open minute (the end of a file, of a run)
        // leaves it open: later rows of that minute add to it.
        self.minute = Some(minute_of(next_ns));
    }

    /// Rows from here on are `source`'s; its minutes open at its first time.
    pub fn set_source(&mut self, source: &str) {
        source.clone_into(&mut self.source);
        self.minute = None;
    }

    /// The open minute's start.
    pub fn open_minute(&self) -> Option<i64> {
        self.minute
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_per_minute_with_what_grew_in_it() {
        let mut m = LossMeter::new("eth0");
        let mut totals: LossTotals = [LossCounts::default(); 1 + Protocol::ALL.len()];
        let t0 = 10 * MINUTE_NS + 5;
        assert!(!m.due(t0));
        totals[0].set(LossCount::Packets, 100);
        totals[0].set(LossCount::KernelDrops, 3);
        assert!(!m.due(t0 + MINUTE_NS - 6));
        assert!(m.due(11 * MINUTE_NS));
        let mut out = Vec::new();
        m.close_minute(&totals, 11 * MINUTE_NS, &mut out);
        assert_eq!(out.len(), 1, "no protocol grew: the source's row only");
        assert_eq!(out[0].ts_ns, 10 * MINUTE_NS);
        assert_eq!(out[0].counts.get(LossCount::KernelDrops), 3);
        // The next minute has only what grew since.
        totals[0].set(LossCount::Packets, 150);
        totals[1 + Protocol::Http.index()].set(LossCount::Gaps, 2);
        out.clear();
        m.close_minute(&totals, 13 * MINUTE_NS + 1, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].ts_ns, 11 * MINUTE_NS);
        assert_eq!(out[0].counts.get(LossCount::Packets), 50);
        assert_eq!(out[0].counts.get(LossCount::KernelDrops), 0);
        assert_eq!(out[1].protocol, Some(Protocol::Http));
        assert_eq!(out[1].counts.get(LossCount::Gaps), 2);
        assert!(!m.due(13 * MINUTE_NS + 2), "the minute of the next time is open");
    }

    #[test]
    fn every_count_has_a_distinct_column() {
        let mut names: Vec<&str> = LossCount::ALL.iter().map(|c| c.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), LossCount::ALL.len());
    }
}
