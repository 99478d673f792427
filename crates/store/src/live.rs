//! A running capture's records not yet in the store (`capture --listen`):
//! kept in memory per kind, bounded in bytes, and merged with the store by
//! the API's queries so that every record is counted once.
//!
//! How a record is counted once. Both the store ([`crate::StoreSink`]) and
//! the live records ([`LiveSink`]) are sinks of the same output stage, fed
//! the same batches in the same order, so the n-th record of a kind is the
//! same record for both: that number is the record's identity here.
//!
//! - The store counts the records of each kind it is given. Every file a
//!   flush writes carries, in its metadata (`wirelog.live`), this run's name
//!   and the count at the flush's start: every record of the file is below
//!   it. When the flush has written every buffered row, the store calls
//!   [`LiveRecords::committed`] with that count: records below it are in the
//!   store (or were dropped by it, and counted there), and leave memory at
//!   that moment (a chunk that straddles the mark is cut).
//! - A query takes, under one lock, the mark `m` and the chunks held (all
//!   of them at or above `m`), then scans the store leaving out this run's
//!   files marked above `m` ([`crate::Scan::live_upto`]). A file marked at
//!   or below `m` holds records below `m` only, which memory no longer has;
//!   a file marked above `m` (written after the snapshot, or by a flush that
//!   a full disk left half done) holds records at or above the mark before
//!   its own flush began, which is `m` or later: they are in the snapshot.
//! - Compaction merges this run's files only when no query could still need
//!   them left out (their mark is at or below every open query's `m`), and
//!   the merged file is unmarked.
//!
//! Memory: decoded columns, the oldest chunk (of any kind) evicted first
//! past the bound; records evicted before the store has them are counted
//! and every answer over that kind says how many it lacks.
//! Certificates (`x509`) are the store's own fold of TLS records and are not
//! kept here: they appear at the store's flush.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use wirelog_record::Batch as Records;
use wirelog_sink::Sink;

use crate::batch::{Batch, Column, Kind};
use crate::encode::{encode_in_memory, RowSource};
use crate::error::StoreError;
use crate::reader::decode_in_memory;
use crate::tx::TxBuf;
use crate::tx_record::tx_kind;
use crate::writer::{ConnBuf, FlowBuf};

/// Records of a kind gathered before they are decoded into a chunk (also
/// done every [`CHUNK_EVERY`]).
const CHUNK_ROWS: usize = 16 * 1024;
/// How long a record waits in the live sink before queries see it.
const CHUNK_EVERY: Duration = Duration::from_secs(1);

fn slot(kind: Kind) -> usize {
    Kind::ALL
        .iter()
        .position(|&k| k == kind)
        .expect("every kind is in Kind::ALL")
}

/// Heap bytes of a batch's columns (what the bound counts).
fn batch_bytes(b: &Batch) -> usize {
    b.columns
        .iter()
        .map(|(_, c)| match c {
            Column::U8(v) => v.capacity(),
            Column::U16(v) => v.capacity() * 2,
            Column::U32(v) => v.capacity() * 4,
            Column::U64(v) => v.capacity() * 8,
            Column::OptU64(v) => v.capacity() * 16,
            Column::I64(v) => v.capacity() * 8,
            Column::OptI64(v) => v.capacity() * 16,
            Column::Ip(v) => v.capacity() * 16,
            Column::Str(v) => v.capacity() * 24 + v.iter().map(String::capacity).sum::<usize>(),
            Column::Bool(v) => v.capacity(),
        })
        .sum::<usize>()
        + std::mem::size_of::<Batch>()
}

/// The rows of `b` from `skip` on.
fn without_first(b: &Batch, skip: usize) -> Batch {
    let rows: Vec<usize> = (skip..b.rows()).collect();
    Batch {
        kind: b.kind,
        columns: b
            .columns
            .iter()
            .map(|(n, c)| (*n, c.select(&rows)))
            .collect(),
    }
}

struct Chunk {
    /// Insertion order across kinds (the oldest is evicted first).
    id: u64,
    /// Number of its first record among the kind's records.
    first: u64,
    batch: Arc<Batch>,
    bytes: usize,
    /// Its first and last record time (ns), for the extent.
    times: Option<(i64, i64)>,
}

/// The first and last time of a batch's records.
fn time_range(b: &Batch) -> Option<(i64, i64)> {
    let Some(Column::I64(v)) = b.column(crate::schema::time_column(b.kind)) else {
        return None;
    };
    Some((*v.iter().min()?, *v.iter().max()?))
}

impl Chunk {
    fn end(&self) -> u64 {
        self.first + self.batch.rows() as u64
    }
}

#[derive(Default)]
struct KindRecords {
    chunks: VecDeque<Chunk>,
    /// Records below this number are the store's.
    committed: u64,
    /// Records below this number were evicted (or committed).
    evicted_upto: u64,
    /// Records evicted before the store had them.
    evicted: u64,
}

struct Inner {
    kinds: Vec<KindRecords>,
    bytes: usize,
    next_id: u64,
    /// Open queries: (id, kind slot, the mark they read at).
    readers: Vec<(u64, usize, u64)>,
    next_reader: u64,
}

/// A capture's records in memory, shared by the live sink (which adds
/// them), the store (which takes them over) and the API (which reads them).
pub struct LiveRecords {
    run: String,
    max_bytes: usize,
    inner: Mutex<Inner>,
    /// Decoding failures of the live sink (a record it could not keep).
    failures: AtomicU64,
}

impl std::fmt::Debug for LiveRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveRecords")
            .field("run", &self.run)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

/// What a query reads from memory for one kind; while it is held,
/// compaction leaves this run's files above its mark alone.
pub struct LiveView {
    live: Arc<LiveRecords>,
    reader: u64,
    /// The store has the kind's records below this number.
    pub committed: u64,
    /// The records at or above it, in order.
    pub batches: Vec<Arc<Batch>>,
    /// Records at or above `committed` evicted from memory: not in this
    /// answer until the store's next flush.
    pub missing: u64,
}

impl LiveView {
    /// The running capture's name, which marks its store files.
    pub fn run(&self) -> &str {
        self.live.run()
    }
}

impl Drop for LiveView {
    fn drop(&mut self) {
        let mut g = self.live.lock();
        g.readers.retain(|r| r.0 != self.reader);
    }
}

/// The figures `/api/health` and `/metrics` show.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveStats {
    pub bytes: u64,
    pub max_bytes: u64,
    /// Records held, all kinds.
    pub records: u64,
    /// Records evicted before the store had them, all kinds.
    pub evicted: u64,
    /// Records the live sink could not keep (an encoding failure).
    pub failures: u64,
}

impl LiveRecords {
    /// Keeps at most about `max_bytes` of decoded records.
    pub fn new(max_bytes: usize) -> Arc<LiveRecords> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        Arc::new(LiveRecords {
            run: format!("{}-{now}", std::process::id()),
            max_bytes,
            inner: Mutex::new(Inner {
                kinds: Kind::ALL.iter().map(|_| KindRecords::default()).collect(),
                bytes: 0,
                next_id: 0,
                readers: Vec::new(),
                next_reader: 0,
            }),
            failures: AtomicU64::new(0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This run's name in the store files' `wirelog.live` marks.
    pub fn run(&self) -> &str {
        &self.run
    }

    /// The kinds kept here: all but the certificates (the store's fold).
    pub fn covers(&self, kind: Kind) -> bool {
        kind != Kind::X509
    }

    /// The store has every record of `kind` below `upto` (written, or
    /// dropped and counted): they leave memory now.
    pub fn committed(&self, kind: Kind, upto: u64) {
        let mut g = self.lock();
        let Inner { kinds, bytes, .. } = &mut *g;
        let k = &mut kinds[slot(kind)];
        if upto <= k.committed {
            return;
        }
        k.committed = upto;
        k.evicted_upto = k.evicted_upto.max(upto);
        while let Some(c) = k.chunks.front_mut() {
            if c.end() <= upto {
                *bytes -= c.bytes;
                k.chunks.pop_front();
            } else {
                if c.first < upto {
                    let cut = without_first(&c.batch, (upto - c.first) as usize);
                    let b = batch_bytes(&cut);
                    *bytes = *bytes - c.bytes + b;
                    c.bytes = b;
                    c.times = time_range(&cut);
                    c.batch = Arc::new(cut);
                    c.first = upto;
                }
                break;
            }
        }
    }

    /// Adds the kind's records numbered from `first`; the oldest chunks go
    /// while more than the bound is held.
    fn push(&self, kind: Kind, first: u64, batch: Batch) {
        let mut g = self.lock();
        let id = g.next_id;
        g.next_id += 1;
        let k = &mut g.kinds[slot(kind)];
        let mut first = first;
        let mut batch = batch;
        // The store may already have some (it runs on its own thread).
        if first < k.committed {
            let skip = (k.committed - first) as usize;
            if skip >= batch.rows() {
                return;
            }
            batch = without_first(&batch, skip);
            first = k.committed;
        }
        let bytes = batch_bytes(&batch);
        let times = time_range(&batch);
        k.chunks.push_back(Chunk {
            id,
            first,
            batch: Arc::new(batch),
            bytes,
            times,
        });
        g.bytes += bytes;
        while g.bytes > self.max_bytes {
            // The oldest chunk of any kind: the fronts are each kind's oldest.
            let Some(s) = g
                .kinds
                .iter()
                .enumerate()
                .filter_map(|(i, k)| k.chunks.front().map(|c| (c.id, i)))
                .min()
                .map(|(_, i)| i)
            else {
                break;
            };
            let k = &mut g.kinds[s];
            let c = k.chunks.pop_front().expect("a front chunk");
            k.evicted += c.end() - c.first.max(k.committed);
            k.evicted_upto = k.evicted_upto.max(c.end());
            g.bytes -= c.bytes;
        }
    }

    /// The kind's records in memory and the mark they start at; the view
    /// holds compaction off this run's later files until dropped.
    pub fn view(self: &Arc<Self>, kind: Kind) -> LiveView {
        let mut g = self.lock();
        let s = slot(kind);
        let reader = g.next_reader;
        g.next_reader += 1;
        let k = &g.kinds[s];
        let committed = k.committed;
        let batches = k.chunks.iter().map(|c| c.batch.clone()).collect();
        let missing = k.evicted_upto.saturating_sub(committed);
        g.readers.push((reader, s, committed));
        LiveView {
            live: self.clone(),
            reader,
            committed,
            batches,
            missing,
        }
    }

    /// The highest mark of this run's files of `kind` that compaction may
    /// merge now: no open query leaves them out.
    pub fn mergeable_upto(&self, kind: Kind) -> u64 {
        let g = self.lock();
        let s = slot(kind);
        g.readers
            .iter()
            .filter(|r| r.1 == s)
            .map(|r| r.2)
            .fold(g.kinds[s].committed, u64::min)
    }

    /// Per kind, records held and their first and last time (ns), for the
    /// extent.
    pub fn held(&self) -> Vec<(Kind, u64, Option<i64>, Option<i64>)> {
        let g = self.lock();
        Kind::ALL
            .iter()
            .zip(&g.kinds)
            .filter(|(_, k)| !k.chunks.is_empty())
            .map(|(&kind, k)| {
                let n = k.chunks.iter().map(|c| c.batch.rows() as u64).sum();
                let lo = k.chunks.iter().filter_map(|c| c.times).map(|t| t.0).min();
                let hi = k.chunks.iter().filter_map(|c| c.times).map(|t| t.1).max();
                (kind, n, lo, hi)
            })
            .collect()
    }

    pub fn stats(&self) -> LiveStats {
        let g = self.lock();
        LiveStats {
            bytes: g.bytes as u64,
            max_bytes: self.max_bytes as u64,
            records: g
                .kinds
                .iter()
                .flat_map(|k| &k.chunks)
                .map(|c| c.batch.rows() as u64)
                .sum(),
            evicted: g.kinds.iter().map(|k| k.evicted).sum(),
            failures: self.failures.load(Ordering::Relaxed),
        }
    }
}

/// One kind's records gathered by the live sink.
// One per record kind, kept for the sink's life and never moved per record:
// its size is not copied around.
#[allow(clippy::large_enum_variant)]
enum Gather {
    Flows(FlowBuf),
    Conns(ConnBuf),
    Tx(TxBuf),
    Loss(crate::loss::LossRows),
}

impl Gather {
    fn source(&self) -> &dyn RowSource {
        match self {
            Gather::Flows(b) => b,
            Gather::Conns(b) => b,
            Gather::Tx(b) => b,
            Gather::Loss(b) => b,
        }
    }
    fn clear(&mut self) {
        match self {
            Gather::Flows(b) => b.clear(),
            Gather::Conns(b) => b.clear(),
            Gather::Tx(b) => b.clear(),
            Gather::Loss(b) => b.rows.clear(),
        }
    }
}

/// The sink that keeps a capture's records in [`LiveRecords`]: on its own
/// thread (decoding costs more than the logs), it gathers each kind's
/// records and hands them over as decoded columns every [`CHUNK_EVERY`] or
/// [`CHUNK_ROWS`] records, encoded and decoded by the store's own code so
/// that a record reads the same from memory as from a file.
pub struct LiveSink {
    live: Arc<LiveRecords>,
    /// Per kind ([`Kind::ALL`] order; `None` for x509): the records
    /// gathered, and the number of the first of them.
    gather: Vec<Option<(Gather, u64)>>,
    formats: Vec<Option<crate::pqfile::Format>>,
    last: Instant,
}

impl LiveSink {
    pub fn new(live: Arc<LiveRecords>) -> Result<LiveSink, StoreError> {
        let mut gather = Vec::new();
        let mut formats = Vec::new();
        for kind in Kind::ALL {
            if !live.covers(kind) {
                gather.push(None);
                formats.push(None);
                continue;
            }
            let g = match kind {
                Kind::Flows => Gather::Flows(FlowBuf::default()),
                Kind::Conns => Gather::Conns(ConnBuf::default()),
                Kind::Loss => Gather::Loss(Default::default()),
                _ => Gather::Tx(TxBuf::new(kind).in_arrival_order()),
            };
            gather.push(Some((g, 0)));
            formats.push(Some(crate::schema::live_format(kind, CHUNK_ROWS)));
        }
        Ok(LiveSink {
            live,
            gather,
            formats,
            last: Instant::now(),
        })
    }

    /// Hands the gathered records of `kind` over.
    fn hand_over(&mut self, s: usize) {
        let (Some((g, first)), Some(fmt)) =
            (self.gather[s].as_mut(), self.formats[s].as_ref())
        else {
            return;
        };
        let src = g.source();
        let n = src.len();
        if n == 0 {
            return;
        }
        let kind = src.kind();
        let rows: Vec<u32> = (0..n as u32).collect();
        match encode_in_memory(src, &rows, fmt)
            .and_then(|bytes| decode_in_memory(bytes, kind))
        {
            Ok(batch) => self.live.push(kind, *first, batch),
            Err(_) => {
                self.live.failures.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
        g.clear();
        *first += n as u64;
    }

    fn hand_over_all(&mut self) {
        for s in 0..self.gather.len() {
            self.hand_over(s);
        }
        self.last = Instant::now();
    }
}

impl Sink for LiveSink {
    fn name(&self) -> &str {
        // Its thread: wirelog-live.
        "live"
    }

    fn own_thread(&self) -> bool {
        true
    }

    fn write(&mut self, batch: &Records) -> io::Result<()> {
        let full = |g: &Option<(Gather, u64)>| {
            g.as_ref()
                .is_some_and(|(g, _)| g.source().len() >= CHUNK_ROWS)
        };
        let s = slot(Kind::Conns);
        for r in &batch.conns {
            if let Some((Gather::Conns(b), _)) = self.gather[s].as_mut() {
                b.push(r);
            }
            if full(&self.gather[s]) {
                self.hand_over(s);
            }
        }
        let s = slot(Kind::Flows);
        for r in &batch.flows {
            if let Some((Gather::Flows(b), _)) = self.gather[s].as_mut() {
                b.push(r);
            }
            if full(&self.gather[s]) {
                self.hand_over(s);
            }
        }
        for r in &batch.txs {
            let s = slot(tx_kind(r.protocol));
            if let Some((Gather::Tx(b), _)) = self.gather[s].as_mut() {
                b.push_record(r);
            }
            if full(&self.gather[s]) {
                self.hand_over(s);
            }
        }
        let s = slot(Kind::Loss);
        if let Some((Gather::Loss(b), _)) = self.gather[s].as_mut() {
            b.rows.extend_from_slice(&batch.losses);
        }
        if self.last.elapsed() >= CHUNK_EVERY {
            self.hand_over_all();
        }
        Ok(())
    }

    fn tick(&mut self, _now: Instant) -> io::Result<()> {
        if self.last.elapsed() >= CHUNK_EVERY {
            self.hand_over_all();
        }
        Ok(())
    }

    fn close(&mut self) -> io::Result<wirelog_sink::SinkEnd> {
        self.hand_over_all();
        Ok(wirelog_sink::SinkEnd::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Scan, Store, StoreOptions};
    use wirelog_record::UidGenerator;

    /// Rows a query sees: this run's files up to the mark, then memory.
    fn counted(dir: &std::path::Path, live: &Arc<LiveRecords>) -> (u64, u64) {
        let view = live.view(Kind::Conns);
        let scan = Scan::new(Kind::Conns)
            .columns(&["ts", "orig_pkts"])
            .live_upto(live.run(), view.committed);
        let (mut rows, mut sum) = (0u64, 0u64);
        let add = |b: &Batch, rows: &mut u64, sum: &mut u64| {
            *rows += b.rows() as u64;
            if let Some(Column::U64(v)) = b.column("orig_pkts") {
                *sum += v.iter().sum::<u64>();
            }
        };
        crate::scan_ref(dir, &scan, |b| {
            add(b, &mut rows, &mut sum);
            Ok(())
        })
        .unwrap();
        for b in &view.batches {
            add(b, &mut rows, &mut sum);
        }
        (rows, sum)
    }

    #[test]
    fn every_record_is_counted_once_across_flushes() {
        let dir = std::env::temp_dir().join(format!("wirelog-live-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let live = LiveRecords::new(64 << 20);
        let mut st = Store::open(
            &dir,
            StoreOptions {
                sync: false,
                flush_rows: 5000,
                ..Default::default()
            },
        )
        .unwrap();
        st.set_live(live.clone());
        let mut sink = LiveSink::new(live.clone()).unwrap();
        let mut uids = UidGenerator::new(1);
        let (mut given, mut sum) = (0u64, 0u64);
        let start = 1_700_000_000_000_000_000;
        for round in 0..12u64 {
            let recs: Vec<_> = (0..1500)
                .map(|i| crate::synth::conn(round * 1500 + i, start, 1_000_000_000, &mut uids))
                .collect();
            given += recs.len() as u64;
            sum += recs.iter().map(|r| r.orig_pkts).sum::<u64>();
            let batch = Records {
                conns: recs,
                ..Default::default()
            };
            // Memory first, or the store first: either order counts once.
            if round % 2 == 0 {
                sink.write(&batch).unwrap();
                sink.hand_over_all();
                st.append_conns(&batch.conns).unwrap();
            } else {
                st.append_conns(&batch.conns).unwrap();
                assert!(counted(&dir, &live).0 <= given);
                sink.write(&batch).unwrap();
                sink.hand_over_all();
            }
            // A flush every few rounds, and a full buffer (5000 rows) on its own.
            if round % 5 == 4 {
                st.flush().unwrap();
            }
            assert_eq!(counted(&dir, &live), (given, sum), "round {round}");
        }
        st.flush().unwrap();
        assert_eq!(counted(&dir, &live), (given, sum));
        assert_eq!(
            live.stats().records,
            0,
            "the store has every record: memory holds none"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_query_open_across_a_flush_still_counts_once() {
        let dir = std::env::temp_dir().join(format!("wirelog-live-open-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let live = LiveRecords::new(64 << 20);
        let mut st = Store::open(
            &dir,
            StoreOptions {
                sync: false,
                ..Default::default()
            },
        )
        .unwrap();
        st.set_live(live.clone());
        let mut sink = LiveSink::new(live.clone()).unwrap();
        let mut uids = UidGenerator::new(2);
        let recs: Vec<_> = (0..3000)
            .map(|i| crate::synth::conn(i, 1_700_000_000_000_000_000, 1_000_000, &mut uids))
            .collect();
        let batch = Records {
            conns: recs,
            ..Default::default()
        };
        sink.write(&batch).unwrap();
        sink.hand_over_all();
        st.append_conns(&batch.conns).unwrap();
        // The view is taken, then the store flushes, then the files are read.
        let view = live.view(Kind::Conns);
        assert_eq!(live.mergeable_upto(Kind::Conns), 0);
        st.flush().unwrap();
        assert_eq!(
            live.mergeable_upto(Kind::Conns),
            0,
            "the open view holds compaction back"
        );
        let scan = Scan::new(Kind::Conns)
            .columns(&["ts"])
            .live_upto(live.run(), view.committed);
        let mut from_files = 0;
        let stats = crate::scan_ref(&dir, &scan, |b| {
            from_files += b.rows();
            Ok(())
        })
        .unwrap();
        let from_memory: usize = view.batches.iter().map(|b| b.rows()).sum();
        assert_eq!((from_files, from_memory), (0, 3000));
        assert_eq!(stats.files_live, 1);
        drop(view);
        assert_eq!(live.mergeable_upto(Kind::Conns), 3000);
        assert_eq!(counted(&dir, &live).0, 3000);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_bound_evicts_the_oldest_and_says_how_many_are_missing() {
        let live = LiveRecords::new(200_000);
        let mut sink = LiveSink::new(live.clone()).unwrap();
        let mut uids = UidGenerator::new(3);
        for round in 0..20u64 {
            let recs: Vec<_> = (0..500)
                .map(|i| {
                    crate::synth::conn(
                        round * 500 + i,
                        1_700_000_000_000_000_000,
                        1_000_000,
                        &mut uids,
                    )
                })
                .collect();
            sink.write(&Records {
                conns: recs,
                ..Default::default()
            })
            .unwrap();
            sink.hand_over_all();
        }
        let s = live.stats();
        assert!(s.bytes <= 200_000, "{s:?}");
        assert!(s.evicted > 0, "{s:?}");
        assert_eq!(s.evicted + s.records, 10_000);
        let view = live.view(Kind::Conns);
        assert_eq!(view.missing, s.evicted);
        // The store taking them over settles what was missing.
        drop(view);
        live.committed(Kind::Conns, 10_000);
        assert_eq!(live.view(Kind::Conns).missing, 0);
        assert_eq!(live.stats().bytes, 0);
    }
}
