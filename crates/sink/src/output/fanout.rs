//! The fan-out: every batch counted once, given its owners, then handed to
//! each sink in order; the run's summary and the live counters.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wirelog_record::loss::{minute_of, SINKS_SOURCE};
use wirelog_record::{Batch, ConnState, LossCount, LossCounts, LossRecord, ProcOwners, Protocol, TxJoin, TxStatus};

use crate::output::threaded::SinkThread;
use crate::{Sink, SinkEnd, Space};

/// How long the fan-out waits for the resolver to catch up with the
/// connections queued before a batch (it resolves a batch in milliseconds;
/// past this, records are written without the owners still missing).
const PROCS_SYNC: Duration = Duration::from_millis(500);

/// Every [`TxStatus`], in the order of [`Live::txs`].
pub const TX_STATUS: [TxStatus; 5] =
    [TxStatus::Ok, TxStatus::Error, TxStatus::NoResponse, TxStatus::NoRequest, TxStatus::Partial];

fn status_index(s: TxStatus) -> usize {
    // Exhaustive: a new status fails to compile here, not at run time.
    match s {
        TxStatus::Ok => 0,
        TxStatus::Error => 1,
        TxStatus::NoResponse => 2,
        TxStatus::NoRequest => 3,
        TxStatus::Partial => 4,
    }
}

/// Upper bounds of the store flush latency histogram, seconds.
pub const FLUSH_BUCKETS: [f64; 9] = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0];

/// What the output stage has written so far, for `/metrics`: stored once
/// per batch (or per store flush) with relaxed atomics, read only when
/// scraped.
#[derive(Debug, Default)]
pub struct Live {
    /// Connections ended, per [`ConnState`] (indexed by its discriminant).
    pub states: [AtomicU64; ConnState::ALL.len()],
    /// Transactions per protocol ([`Protocol::ALL`]) and status ([`TX_STATUS`]).
    pub txs: [[AtomicU64; TX_STATUS.len()]; Protocol::ALL.len()],
    /// The store's rows, bytes and files written (published by the store sink).
    pub store_rows: AtomicU64,
    pub store_bytes: AtomicU64,
    pub store_files: AtomicU64,
    /// Store flushes per [`FLUSH_BUCKETS`] bound (the last: above them all),
    /// not cumulative, and their summed duration in nanoseconds.
    pub flushes: [AtomicU64; FLUSH_BUCKETS.len() + 1],
    pub flush_ns: AtomicU64,
    /// Times the output thread waited for a sink on its own thread (the
    /// store) that was more than `MAX_PENDING_RECORDS` records behind.
    pub sink_waits: AtomicU64,
}

impl Live {
    /// One store flush that took `took`.
    pub fn flushed(&self, took: Duration) {
        let s = took.as_secs_f64();
        let i = FLUSH_BUCKETS.iter().position(|b| s <= *b).unwrap_or(FLUSH_BUCKETS.len());
        self.flushes[i].fetch_add(1, Ordering::Relaxed);
        self.flush_ns.fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    }

    /// The store's totals so far.
    pub fn store_written(&self, rows: u64, bytes: u64, files: u64) {
        self.store_rows.store(rows, Ordering::Relaxed);
        self.store_bytes.store(bytes, Ordering::Relaxed);
        self.store_files.store(files, Ordering::Relaxed);
    }
}

/// What the output stage wrote: the records it was given, and what each
/// sink said at its close.
#[derive(Default, Debug, Clone)]
pub struct Summary {
    pub conns: u64,
    pub flows: u64,
    /// Connections per [`ConnState`], indexed by the state's discriminant.
    pub states: [u64; ConnState::ALL.len()],
    /// Transactions per protocol, indexed like [`Protocol::ALL`].
    pub txs: [u64; Protocol::ALL.len()],
    /// Each sink's name and end, in the order they were given.
    pub sinks: Vec<(String, SinkEnd)>,
    /// Times the output thread waited for a sink on its own thread (see
    /// [`Live::sink_waits`]).
    pub sink_waits: u64,
}

impl Summary {
    /// Records dropped because the disk stayed full, all sinks together.
    pub fn dropped(&self) -> u64 {
        self.sinks.iter().flat_map(|(_, e)| &e.dropped).map(|(_, n)| n).sum()
    }

    /// "store conns 120, conn.log 3": what was dropped, where.
    pub fn dropped_text(&self) -> String {
        let parts: Vec<String> =
            self.sinks.iter().flat_map(|(_, e)| &e.dropped).map(|(f, n)| format!("{f} {n}")).collect();
        parts.join(", ")
    }

    /// "SF 12, S0 3": connections per state, the states seen only.
    pub fn states_text(&self) -> Option<String> {
        let parts: Vec<String> = ConnState::ALL
            .iter()
            .filter(|s| self.states[**s as usize] > 0)
            .map(|s| format!("{} {}", s.as_str(), self.states[*s as usize]))
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// "http 5, dns 10": transactions per protocol, the protocols seen only.
    pub fn txs_text(&self) -> Option<String> {
        let parts: Vec<String> = Protocol::ALL
            .iter()
            .zip(self.txs)
            .filter(|(_, n)| *n > 0)
            .map(|(p, n)| format!("{} {}", p.name(), n))
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// What a full or nearly full disk did, when it did anything.
    pub fn space_text(&self) -> Option<String> {
        let sum = |f: fn(&SinkEnd) -> u64| self.sinks.iter().map(|(_, e)| f(e)).sum::<u64>();
        let (failures, pauses, freed) =
            (sum(|e| e.space_failures), sum(|e| e.pauses), sum(|e| e.freed_partitions));
        (failures + pauses + freed > 0).then(|| {
            format!(
                "wirelog: disk: {failures} writes found no space, {pauses} waited below --min-free, {freed} store partitions deleted to keep it"
            )
        })
    }

    /// The sinks' own summary lines, with whether each is shown under `--quiet`.
    pub fn reports(&self) -> impl Iterator<Item = &crate::Report> {
        self.sinks.iter().filter_map(|(_, e)| e.report.as_ref())
    }

    /// A sink lost records (the disk stayed full, a spool overflowed): the
    /// run is "partial".
    pub fn partial(&self) -> bool {
        self.dropped() > 0 || self.reports().any(|r| r.lost)
    }
}

/// A sink of the run, written on the output thread or on its own.
enum Slot {
    Here(Box<dyn Sink>),
    Thread(SinkThread),
}

impl Slot {
    fn name(&self) -> &str {
        match self {
            Slot::Here(s) => s.name(),
            Slot::Thread(t) => t.name(),
        }
    }

    fn space(&self) -> Space {
        match self {
            Slot::Here(s) => s.space(),
            Slot::Thread(t) => t.space(),
        }
    }

    fn close(&mut self) -> io::Result<SinkEnd> {
        match self {
            Slot::Here(s) => s.close(),
            Slot::Thread(t) => t.close(),
        }
    }

    fn commit(&mut self, complete: bool) -> io::Result<()> {
        match self {
            Slot::Here(s) => s.commit(complete),
            Slot::Thread(t) => t.commit(complete),
        }
    }
}

/// The sinks of a run and what is done to every batch before them.
pub(crate) struct Fanout {
    sinks: Vec<Slot>,
    /// Some sinks run on their own thread.
    threaded: bool,
    summary: Summary,
    /// Transactions per protocol and status (published to `live`).
    tx_status: [[u64; TX_STATUS.len()]; Protocol::ALL.len()],
    live: Arc<Live>,
    /// Records dropped so far for lack of space, all sinks (the stats line).
    dropped: Arc<AtomicU64>,
    /// A "disk full" warning is out and no "resumed" yet.
    warned_full: bool,
    owners: Option<Box<dyn ProcOwners>>,
    /// The resolver missed the last wait (see `write`).
    procs_behind: bool,
    /// capture --tls-plaintext: transactions from the TLS library joined
    /// with the packet path's connections before the sinks see them.
    join: Option<Box<dyn TxJoin>>,
    /// The latest minute of the packet path's loss rows (packet time for
    /// `read`): the sinks' own rows are put in it.
    loss_minute: Option<i64>,
    /// Records dropped that loss rows already say.
    loss_reported: u64,
    /// When the sinks' loss row is next due (once a minute).
    loss_due: Instant,
}

/// How often the sinks' dropped records become a loss row.
const LOSS_EVERY: Duration = Duration::from_secs(60);

impl Fanout {
    /// `recycle` takes the batches a sink's own thread held last; `tick` is
    /// how often such a thread ticks its sink.
    pub(crate) fn new(
        sinks: Vec<Box<dyn Sink>>,
        owners: Option<Box<dyn ProcOwners>>,
        live: Arc<Live>,
        dropped: Arc<AtomicU64>,
        tick: Duration,
        recycle: &SyncSender<Batch>,
    ) -> io::Result<Self> {
        let sinks = sinks
            .into_iter()
            .map(|s| match s.own_thread() {
                true => SinkThread::start(s, tick, recycle.clone()).map(Slot::Thread),
                false => Ok(Slot::Here(s)),
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Fanout {
            threaded: sinks.iter().any(|s| matches!(s, Slot::Thread(_))),
            sinks,
            summary: Summary::default(),
            tx_status: Default::default(),
            live,
            dropped,
            warned_full: false,
            owners,
            procs_behind: false,
            join: None,
            loss_minute: None,
            loss_reported: 0,
            loss_due: Instant::now() + LOSS_EVERY,
        })
    }

    pub(crate) fn set_join(&mut self, join: Option<Box<dyn TxJoin>>) {
        self.join = join;
    }

    /// Writes what the join releases on a tick or at the end.
    fn write_joined(&mut self, f: impl FnOnce(&mut dyn TxJoin, &mut Batch)) -> io::Result<()> {
        let Some(mut j) = self.join.take() else { return Ok(()) };
        let mut b = Batch::default();
        f(j.as_mut(), &mut b);
        let r = if b.is_empty() { Ok(None) } else { self.write(b) };
        self.join = Some(j);
        r.map(|_| ())
    }

    /// Writes `batch` to every sink; gives it back when no sink's thread
    /// still holds it (that thread gives it back instead).
    pub(crate) fn write(&mut self, mut batch: Batch) -> io::Result<Option<Batch>> {
        if let Some(j) = &mut self.join {
            j.join(&mut batch);
        }
        batch.fill_deferred();
        if let Some(m) = batch.losses.iter().map(|r| r.ts_ns).max() {
            self.loss_minute = Some(self.loss_minute.map_or(m, |l| l.max(m)));
        }
        if let Some(o) = &self.owners {
            // A resolver that fell behind is waited for once, not on every
            // batch: the capture workers wait for this thread when its queue
            // is full, and must not wait for /proc. Until it has caught up,
            // records go out with the owners known so far.
            let limit = if self.procs_behind { Duration::ZERO } else { PROCS_SYNC };
            self.procs_behind = !o.own(&mut batch, limit);
        }
        self.count(&batch);
        for s in &mut self.sinks {
            if let Slot::Here(s) = s {
                s.write(&batch)?;
            }
        }
        if let Some(o) = &self.owners {
            // Written (or owned, for the sinks on their own threads): the
            // owners of these connections are not needed again.
            o.forget(&batch);
        }
        if !self.threaded {
            return Ok(Some(batch));
        }
        let shared = Arc::new(batch);
        let mut waited = false;
        for s in &mut self.sinks {
            if let Slot::Thread(t) = s {
                waited |= t.write(&shared)?;
            }
        }
        self.waited(waited);
        Ok(Arc::into_inner(shared))
    }

    fn waited(&mut self, waited: bool) {
        if waited {
            self.summary.sink_waits += 1;
            self.live.sink_waits.store(self.summary.sink_waits, Ordering::Relaxed);
        }
    }

    /// The run's totals, and the live counters from them.
    fn count(&mut self, batch: &Batch) {
        for r in &batch.conns {
            self.summary.states[r.conn_state as usize] += 1;
        }
        self.summary.conns += batch.conns.len() as u64;
        self.summary.flows += batch.flows.len() as u64;
        for t in &batch.txs {
            let p = Protocol::ALL.iter().position(|p| *p == t.protocol).unwrap_or(0);
            self.summary.txs[p] += 1;
            self.tx_status[p][status_index(t.tx.status)] += 1;
        }
        for (a, n) in self.live.states.iter().zip(self.summary.states) {
            a.store(n, Ordering::Relaxed);
        }
        for (row, counts) in self.live.txs.iter().zip(&self.tx_status) {
            for (a, n) in row.iter().zip(counts) {
                a.store(*n, Ordering::Relaxed);
            }
        }
    }

    /// The records the sinks dropped since the last such row, as a loss
    /// row of source `sinks` (none when nothing more was dropped).
    fn write_sink_loss(&mut self) -> io::Result<()> {
        let dropped = self.dropped.load(Ordering::Relaxed);
        if dropped <= self.loss_reported {
            return Ok(());
        }
        let mut counts = LossCounts::default();
        counts.set(LossCount::RecordsDropped, dropped - self.loss_reported);
        self.loss_reported = dropped;
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);
        let row = LossRecord {
            ts_ns: self.loss_minute.unwrap_or_else(|| minute_of(wall)),
            source: SINKS_SOURCE.to_string(),
            protocol: None,
            counts,
        };
        self.write(Batch { losses: vec![row], ..Batch::default() }).map(|_| ())
    }

    pub(crate) fn tick(&mut self, now: Instant) -> io::Result<()> {
        if now >= self.loss_due {
            self.loss_due = now + LOSS_EVERY;
            self.write_sink_loss()?;
        }
        self.write_joined(|j, b| j.tick(b))?;
        // The sinks on their own threads tick themselves; what they were
        // too busy to take at the last batch is offered again.
        let mut waited = false;
        for s in &mut self.sinks {
            match s {
                Slot::Here(s) => s.tick(now)?,
                Slot::Thread(t) => waited |= t.pump()?,
            }
        }
        self.waited(waited);
        Ok(())
    }

    /// Says once when the disk fills up (naming the file) and when writing
    /// resumes; keeps the dropped counter current.
    pub(crate) fn report_space(&mut self) {
        let mut dropped = 0;
        let mut why: Option<String> = None;
        for s in &self.sinks {
            let sp = s.space();
            dropped += sp.dropped;
            why = why.or(sp.waiting);
        }
        self.dropped.store(dropped, Ordering::Relaxed);
        match why {
            Some(w) if !self.warned_full => {
                eprintln!(
                    "wirelog: warning: {w}; records wait in memory and are written when space returns \
                     (beyond the bound they are dropped and counted)"
                );
                self.warned_full = true;
            }
            None if self.warned_full => {
                eprintln!("wirelog: disk space is back, writing resumed");
                self.warned_full = false;
            }
            _ => {}
        }
    }

    /// Closes the sinks in order (a sink that waits on a network, given
    /// last, finds the files already whole), then commits them in order
    /// ([`Sink::commit`]): the store records the captures read only after
    /// ClickHouse has sent or spooled its last batch, so a kill at any
    /// moment leaves no capture recorded whose rows are not all on their way.
    /// Every sink is closed even when one fails (a failing log must not keep
    /// ClickHouse from draining its queue to the spool); the first failure,
    /// naming its sink, is the result.
    pub(crate) fn close(mut self) -> io::Result<Summary> {
        let mut failed: Option<io::Error> = self.write_joined(|j, b| j.finish(b)).err();
        // What the sinks dropped so far goes into the loss table before
        // they close (what a sink drops at its close is in the summary).
        self.report_space();
        if let Err(e) = self.write_sink_loss() {
            failed.get_or_insert(e);
        }
        for s in &mut self.sinks {
            match s.close() {
                Ok(end) => self.summary.sinks.push((s.name().to_string(), end)),
                Err(e) => {
                    let e = io::Error::new(e.kind(), format!("{}: {e}", s.name()));
                    failed.get_or_insert(e);
                }
            }
        }
        let complete = failed.is_none() && !self.summary.reports().any(|r| r.lost);
        for s in &mut self.sinks {
            if let Err(e) = s.commit(complete) {
                let e = io::Error::new(e.kind(), format!("{}: {e}", s.name()));
                failed.get_or_insert(e);
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        self.dropped.store(self.summary.dropped(), Ordering::Relaxed);
        // The sinks' last flush wrote what waited: the disk came back before
        // the end (what stayed unwritten is in the summary instead).
        if self.warned_full && self.summary.dropped() == 0 {
            eprintln!("wirelog: disk space is back, writing resumed");
        }
        Ok(self.summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_status_order_matches_its_index() {
        for (i, s) in TX_STATUS.iter().enumerate() {
            assert_eq!(status_index(*s), i, "{}", s.as_str());
        }
    }

    /// A sink that records whether it was closed, failing its close if told.
    struct Probe {
        name: &'static str,
        fail: bool,
        closed: Arc<AtomicU64>,
    }

    impl Sink for Probe {
        fn name(&self) -> &str {
            self.name
        }
        fn write(&mut self, _: &Batch) -> io::Result<()> {
            Ok(())
        }
        fn tick(&mut self, _: Instant) -> io::Result<()> {
            Ok(())
        }
        fn close(&mut self) -> io::Result<SinkEnd> {
            self.closed.fetch_add(1, Ordering::Relaxed);
            if self.fail {
                Err(io::Error::other("disk on fire"))
            } else {
                Ok(SinkEnd::default())
            }
        }
    }

    #[test]
    fn a_failing_close_does_not_keep_later_sinks_open() {
        let closed = Arc::new(AtomicU64::new(0));
        let sink = |name, fail| -> Box<dyn Sink> { Box::new(Probe { name, fail, closed: closed.clone() }) };
        let (recycle, _recycled) = std::sync::mpsc::sync_channel(1);
        let fanout = Fanout::new(
            vec![sink("conn.log", true), sink("store", false), sink("clickhouse", true)],
            None,
            Arc::default(),
            Arc::default(),
            Duration::from_secs(1),
            &recycle,
        )
        .unwrap();
        let err = fanout.close().unwrap_err();
        assert_eq!(closed.load(Ordering::Relaxed), 3, "every sink is closed");
        assert_eq!(err.to_string(), "conn.log: disk on fire", "the first failure, named");
    }

    /// A sink on its own thread: counts its writes, notes the thread they
    /// ran on, fails the `fail_at`th.
    struct Threaded {
        threads: Arc<std::sync::Mutex<Vec<String>>>,
        writes: u64,
        fail_at: Option<u64>,
    }

    impl Sink for Threaded {
        fn name(&self) -> &str {
            "store"
        }
        fn write(&mut self, _: &Batch) -> io::Result<()> {
            self.writes += 1;
            let name = std::thread::current().name().unwrap_or("").to_string();
            self.threads.lock().unwrap().push(name);
            match self.fail_at == Some(self.writes) {
                true => Err(io::Error::other("disk on fire")),
                false => Ok(()),
            }
        }
        fn tick(&mut self, _: Instant) -> io::Result<()> {
            Ok(())
        }
        fn close(&mut self) -> io::Result<SinkEnd> {
            // The count travels back in the end's counters.
            Ok(SinkEnd { pauses: self.writes, ..SinkEnd::default() })
        }
        fn own_thread(&self) -> bool {
            true
        }
    }

    fn threaded_fanout(fail_at: Option<u64>, threads: &Arc<std::sync::Mutex<Vec<String>>>) -> Fanout {
        let closed = Arc::new(AtomicU64::new(0));
        let sinks: Vec<Box<dyn Sink>> = vec![
            Box::new(Probe { name: "conn.log", fail: false, closed }),
            Box::new(Threaded { threads: threads.clone(), writes: 0, fail_at }),
        ];
        let (recycle, _recycled) = std::sync::mpsc::sync_channel(64);
        Fanout::new(sinks, None, Arc::default(), Arc::default(), Duration::from_secs(1), &recycle).unwrap()
    }

    #[test]
    fn a_sink_on_its_own_thread_gets_every_batch_and_ends_in_its_place() {
        let threads = Arc::default();
        let mut fanout = threaded_fanout(None, &threads);
        for _ in 0..20 {
            fanout.write(Batch::default()).unwrap();
        }
        let summary = fanout.close().unwrap();
        let names: Vec<&str> = summary.sinks.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["conn.log", "store"], "sinks end in the order given");
        assert_eq!(summary.sinks[1].1.pauses, 20, "every batch written before the close");
        let threads = threads.lock().unwrap();
        assert_eq!(threads.len(), 20);
        assert!(threads.iter().all(|t| t == "wirelog-store"), "written on its own thread: {threads:?}");
    }

    #[test]
    fn a_failure_on_a_sinks_own_thread_ends_the_run_with_its_error() {
        let threads = Arc::default();
        let mut fanout = threaded_fanout(Some(2), &threads);
        let err = (0..1000)
            .find_map(|_| {
                std::thread::sleep(Duration::from_millis(1));
                fanout.write(Batch::default()).err()
            })
            .expect("the failed write surfaces");
        assert_eq!(err.to_string(), "disk on fire");
        let err = fanout.close().unwrap_err();
        assert_eq!(err.to_string(), "store: disk on fire", "named at the close too");
        assert_eq!(threads.lock().unwrap().len(), 2, "nothing written after the failure");
    }

    /// A sink that keeps the Community IDs of the connections it is given.
    struct Ids {
        seen: Arc<std::sync::Mutex<Vec<String>>>,
        own_thread: bool,
    }

    impl Sink for Ids {
        fn name(&self) -> &str {
            "ids"
        }
        fn write(&mut self, b: &Batch) -> io::Result<()> {
            let mut seen = self.seen.lock().unwrap();
            seen.extend(b.conns.iter().map(|r| r.community_id.to_string()));
            Ok(())
        }
        fn tick(&mut self, _: Instant) -> io::Result<()> {
            Ok(())
        }
        fn close(&mut self) -> io::Result<SinkEnd> {
            Ok(SinkEnd::default())
        }
        fn own_thread(&self) -> bool {
            self.own_thread
        }
    }

    #[test]
    fn sinks_see_the_community_id_the_tracker_left_pending() {
        let mut r = crate::logs::zeek::tests::record();
        let want = wirelog_record::community_id_v1(&r.orig_h, &r.resp_h, r.ip_proto, r.orig_p, r.resp_p);
        r.community_id = wirelog_record::CommunityId::PENDING;
        assert_eq!(r.community_id.as_str(), "");
        let here = Arc::default();
        let there = Arc::default();
        let sinks: Vec<Box<dyn Sink>> = vec![
            Box::new(Ids { seen: Arc::clone(&here), own_thread: false }),
            Box::new(Ids { seen: Arc::clone(&there), own_thread: true }),
        ];
        let (recycle, _recycled) = std::sync::mpsc::sync_channel(4);
        let mut fanout =
            Fanout::new(sinks, None, Arc::default(), Arc::default(), Duration::from_secs(1), &recycle).unwrap();
        fanout.write(Batch { conns: vec![r.clone(), r], ..Batch::default() }).unwrap();
        fanout.close().unwrap();
        let want = vec![want.to_string(); 2];
        assert!(want[0].starts_with("1:") && want[0].len() == 30);
        assert_eq!(*here.lock().unwrap(), want, "the sink on the output thread");
        assert_eq!(*there.lock().unwrap(), want, "the sink on a thread of its own");
    }

    /// A sink that notes its close and commit in a log shared by all,
    /// losing records or failing its close if told.
    struct Ordered {
        name: &'static str,
        log: Arc<std::sync::Mutex<Vec<String>>>,
        lost: bool,
        fail: bool,
        own_thread: bool,
    }

    impl Sink for Ordered {
        fn name(&self) -> &str {
            self.name
        }
        fn write(&mut self, _: &Batch) -> io::Result<()> {
            Ok(())
        }
        fn tick(&mut self, _: Instant) -> io::Result<()> {
            Ok(())
        }
        fn close(&mut self) -> io::Result<SinkEnd> {
            self.log.lock().unwrap().push(format!("close {}", self.name));
            if self.fail {
                return Err(io::Error::other("disk on fire"));
            }
            let report = self.lost.then(|| crate::Report { text: "lost".into(), always: true, lost: true });
            Ok(SinkEnd { report, ..SinkEnd::default() })
        }
        fn commit(&mut self, complete: bool) -> io::Result<()> {
            self.log.lock().unwrap().push(format!("commit {} {complete}", self.name));
            Ok(())
        }
        fn own_thread(&self) -> bool {
            self.own_thread
        }
    }

    /// The log of a run of a store (on its own thread) and a ClickHouse
    /// sink; `lost`/`fail`: what ClickHouse does at its close.
    fn commit_log(lost: bool, fail: bool) -> Vec<String> {
        let log = Arc::default();
        let sink = |name, lost, fail, own_thread| -> Box<dyn Sink> {
            Box::new(Ordered { name, log: Arc::clone(&log), lost, fail, own_thread })
        };
        let (recycle, _recycled) = std::sync::mpsc::sync_channel(4);
        let sinks = vec![sink("store", false, false, true), sink("clickhouse", lost, fail, false)];
        let mut fanout =
            Fanout::new(sinks, None, Arc::default(), Arc::default(), Duration::from_secs(1), &recycle).unwrap();
        fanout.write(Batch::default()).unwrap();
        let _ = fanout.close();
        let out = log.lock().unwrap().clone();
        out
    }

    #[test]
    fn sinks_commit_after_every_sink_closed_complete_only_when_none_lost_or_failed() {
        assert_eq!(
            commit_log(false, false),
            ["close store", "close clickhouse", "commit store true", "commit clickhouse true"],
            "the store records the captures only once ClickHouse closed"
        );
        assert_eq!(commit_log(true, false)[2..], ["commit store false", "commit clickhouse false"]);
        assert_eq!(commit_log(false, true)[2..], ["commit store false", "commit clickhouse false"]);
    }

    #[test]
    fn flushes_land_in_their_bucket() {
        let live = Live::default();
        live.flushed(Duration::from_micros(500));
        live.flushed(Duration::from_millis(1));
        live.flushed(Duration::from_millis(70));
        live.flushed(Duration::from_secs(60));
        let n: Vec<u64> = live.flushes.iter().map(|a| a.load(Ordering::Relaxed)).collect();
        // <= 1 ms twice, <= 100 ms once, above 30 s once.
        assert_eq!(n, [2, 0, 0, 0, 1, 0, 0, 0, 0, 1]);
        assert_eq!(live.flush_ns.load(Ordering::Relaxed), 60_071_500_000);
    }
}
