//! The output stage: one thread takes batches of records from the packet
//! path and writes the logs and the store, so formatting text and encoding
//! Parquet never stall packet processing (on captures of many short
//! connections that work is as large as tracking itself).
//!
//! The queue between the two is bounded: when the disk cannot keep up, the
//! packet path waits (offline that is right; live, the kernel ring absorbs
//! it and its drops are counted). Batches come back empty on a second
//! channel so their vectors are reused instead of reallocated.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use wirelog_parse::Protocol;
use wirelog_procs::Owners;
pub use wirelog_record::Batch;
use wirelog_record::{ConnState, TxStatus};
use wirelog_sink::{tx_log_name, ConnLogWriter, FlowLogWriter, LogFile, LogFormat, OpenLog, TxLogWriter};
use wirelog_store::compact::{Compactor, CompactorOptions};
use wirelog_record::Ingest;
use wirelog_store::{Kind, Store, StoreOptions};

/// Batches in flight between the packet path and the writer (per producer
/// about one; live capture has one producer per worker).
const QUEUE_DEPTH: usize = 16;

/// Log lines written are flushed to their files within this long, so `tail -f`
/// on a live probe's logs follows the traffic.
const LOG_FLUSH: Duration = Duration::from_secs(1);

/// The store's buffers are written to Parquet files at least this often
/// while running: a crash loses at most this much (plus what is queued).
const STORE_FLUSH: Duration = Duration::from_secs(300);

/// Exit code of a run that lost records because the disk stayed full
/// (every record that was written is whole; the summary says what is missing).
pub const EXIT_PARTIAL: u8 = 3;

/// Bytes of lines one log file keeps in memory while its disk is full;
/// beyond, lines are dropped and counted.
const LOG_PENDING: usize = 8 << 20;

/// The free space to leave on the file systems written to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MinFree {
    /// 5% of the file system, at most 256 MiB.
    Auto,
    Bytes(u64),
    /// Percent of the file system's size.
    Percent(f64),
}

impl MinFree {
    /// The floor in bytes for the file system holding `dir`.
    pub fn bytes_for(self, dir: &Path) -> u64 {
        match self {
            MinFree::Auto => MinFree::Percent(5.0).bytes_for(dir).min(256 << 20),
            MinFree::Bytes(b) => b,
            MinFree::Percent(p) => wirelog_store::disk_space(dir)
                .map(|d| (d.total as f64 * p / 100.0) as u64)
                .unwrap_or(0),
        }
    }
}

/// Where records go.
pub struct OutputConfig {
    /// Directory for conn.log and flows.log; `None` writes conn records to
    /// standard output and no flows log.
    pub logs: Option<PathBuf>,
    pub format: LogFormat,
    /// Store directory and options; `None` writes no store.
    pub store: Option<(PathBuf, StoreOptions)>,
    /// conn.log gets the `empty_tcp_skipped` column (capture --skip-empty-tcp).
    pub empty_tcp_note: bool,
    /// capture --processes: records get their ends' owners from the
    /// resolver, and logs the process columns.
    pub processes: Option<Owners>,
    /// Free space left on the disks of the logs and the store.
    pub min_free: MinFree,
    /// --clickhouse: the ClickHouse sink's settings.
    pub clickhouse: Option<wirelog_clickhouse::Config>,
}

/// How long the writer waits for the resolver to catch up with the
/// connections queued before a batch (it resolves a batch in milliseconds;
/// past this, records are written without the owners still missing).
const PROCS_SYNC: Duration = Duration::from_millis(500);

/// What the writer wrote.
#[derive(Default, Debug, Clone)]
pub struct OutputSummary {
    pub conns: u64,
    pub flows: u64,
    /// Connections per [`ConnState`], indexed by the state's discriminant.
    pub states: [u64; ConnState::ALL.len()],
    /// Transactions per protocol, indexed like [`Protocol::ALL`].
    pub txs: [u64; Protocol::ALL.len()],
    /// Store rows dropped per kind (the disk stayed full), like [`Kind::ALL`].
    pub store_dropped: [u64; Kind::ALL.len()],
    /// Log lines dropped per file name (the disk stayed full).
    pub log_dropped: Vec<(String, u64)>,
    /// Writes that found the disk full, or were put off by --min-free.
    pub space_failures: u64,
    pub pauses: u64,
    /// Store partitions deleted to keep --min-free.
    pub freed_partitions: u64,
    pub clickhouse: Option<wirelog_clickhouse::Summary>,
}

impl OutputSummary {
    /// Records dropped, store rows and log lines together.
    pub fn dropped(&self) -> u64 {
        self.store_dropped.iter().sum::<u64>() + self.log_dropped.iter().map(|(_, n)| n).sum::<u64>()
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
        (self.space_failures + self.pauses + self.freed_partitions > 0).then(|| {
            format!(
                "wirelog: disk: {} writes found no space, {} waited below --min-free, {} store partitions deleted to keep it",
                self.space_failures, self.pauses, self.freed_partitions
            )
        })
    }

    /// "conns 120, flows 3" for the store, "conn.log 120" for the logs.
    pub fn dropped_text(&self) -> String {
        let mut parts: Vec<String> = Kind::ALL
            .iter()
            .zip(self.store_dropped)
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("store {} {n}", k.as_str()))
            .collect();
        parts.extend(self.log_dropped.iter().filter(|(_, n)| *n > 0).map(|(f, n)| format!("{f} {n}")));
        parts.join(", ")
    }
}

/// What the output thread has written so far, for `/metrics`: stored once
/// per batch (or per flush) with relaxed atomics, read only when scraped.
#[derive(Debug, Default)]
pub struct OutputLive {
    /// Connections ended, per [`ConnState`] (indexed by its discriminant).
    pub states: [AtomicU64; ConnState::ALL.len()],
    /// Transactions per protocol ([`Protocol::ALL`]) and status ([`TX_STATUS`]).
    pub txs: [[AtomicU64; TX_STATUS.len()]; Protocol::ALL.len()],
    pub store_rows: AtomicU64,
    pub store_bytes: AtomicU64,
    pub store_files: AtomicU64,
    /// Store flushes per [`FLUSH_BUCKETS`] bound (the last: above them all),
    /// not cumulative, and their summed duration in nanoseconds.
    pub flushes: [AtomicU64; FLUSH_BUCKETS.len() + 1],
    pub flush_ns: AtomicU64,
}

/// Every [`TxStatus`], in the order of [`OutputLive::txs`].
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

impl OutputLive {
    fn flushed(&self, took: Duration) {
        let s = took.as_secs_f64();
        let i = FLUSH_BUCKETS.iter().position(|b| s <= *b).unwrap_or(FLUSH_BUCKETS.len());
        self.flushes[i].fetch_add(1, Ordering::Relaxed);
        self.flush_ns.fetch_add(took.as_nanos() as u64, Ordering::Relaxed);
    }

    fn store_written(&self, w: &wirelog_store::WriteStats) {
        self.store_rows.store(w.rows, Ordering::Relaxed);
        self.store_bytes.store(w.bytes, Ordering::Relaxed);
        self.store_files.store(w.files, Ordering::Relaxed);
    }
}

pub struct Output {
    live: Arc<OutputLive>,
    tx: Option<SyncSender<Batch>>,
    /// Written batches coming back empty, for any producer to refill.
    recycled: Arc<Mutex<Receiver<Batch>>>,
    handle: Option<JoinHandle<Result<OutputSummary>>>,
    /// Directories and files created for the output (to hand to the user
    /// live capture drops privileges to).
    paths: Vec<PathBuf>,
    /// Records dropped so far for lack of space (for the stats line).
    dropped: Arc<AtomicU64>,
    health: Option<wirelog_clickhouse::HealthSender>,
}

/// A handle for another thread to queue batches (live capture's workers).
#[derive(Clone)]
pub struct BatchSender {
    tx: SyncSender<Batch>,
    recycled: Arc<Mutex<Receiver<Batch>>>,
}

impl BatchSender {
    /// Queues a batch; waits while the writer is behind. Fails only when the
    /// writer stopped (its error is reported by [`Output::finish`]).
    pub fn send(&self, batch: Batch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        self.tx.send(batch).map_err(|_| anyhow!("the output thread stopped"))
    }

    /// An empty batch, reusing the vectors of one already written when possible.
    pub fn batch(&self) -> Batch {
        recycled(&self.recycled)
    }
}

/// A batch the writer gave back, or a new one (once per ship: the lock is
/// never contended for long).
fn recycled(r: &Mutex<Receiver<Batch>>) -> Batch {
    r.lock().ok().and_then(|r| r.try_recv().ok()).unwrap_or_default()
}

/// Standard output, or a log file that keeps whole lines on a full disk.
enum LogOut {
    Stdout(BufWriter<io::Stdout>),
    File(LogFile),
}

impl Write for LogOut {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            LogOut::Stdout(w) => w.write(b),
            LogOut::File(f) => f.write(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            LogOut::Stdout(w) => w.flush(),
            LogOut::File(f) => f.flush(),
        }
    }
}

impl LogOut {
    fn file(&mut self) -> Option<&mut LogFile> {
        match self {
            LogOut::File(f) => Some(f),
            LogOut::Stdout(_) => None,
        }
    }
}

struct Writer {
    conn_log: ConnLogWriter<LogOut>,
    flow_log: Option<FlowLogWriter<LogOut>>,
    /// Directory and format for the transaction logs, opened at their first record.
    tx_logs: Option<(PathBuf, LogFormat)>,
    tx_writers: Vec<(Protocol, TxLogWriter<LogOut>)>,
    store: Option<Store>,
    compactor: Option<Compactor>,
    ingests: Vec<Ingest>,
    summary: OutputSummary,
    /// Free-space floor of the log directory, bytes.
    log_min_free: u64,
    /// A "disk full" warning is out and no "resumed" yet.
    warned_full: bool,
    dropped: Arc<AtomicU64>,
    live: Arc<OutputLive>,
    /// Transactions per protocol and status (published to `live`).
    tx_status: [[u64; TX_STATUS.len()]; Protocol::ALL.len()],
    owners: Option<Owners>,
    /// The resolver missed the last wait (see `write`).
    procs_behind: bool,
    clickhouse: Option<wirelog_clickhouse::ClickHouseSink>,
}

impl OutputConfig {
    /// Checks the output paths without creating anything: an existing path
    /// where a directory is wanted must be a directory.
    pub fn check(&self) -> Result<()> {
        let not_dir = |opt: &str, dir: &Path| -> Result<()> {
            match std::fs::metadata(dir) {
                Ok(m) if !m.is_dir() => Err(anyhow!("{opt} {}: is a file, not a directory", dir.display())),
                _ => Ok(()),
            }
        };
        if let Some(dir) = &self.logs {
            not_dir("--logs", dir)?;
        }
        if let Some((dir, _)) = &self.store {
            not_dir("--store", dir)?;
        }
        Ok(())
    }
}

impl Output {
    /// Opens every file (so a bad path is reported before any packet is
    /// read) and starts the writer thread.
    pub fn start(cfg: OutputConfig) -> Result<Output> {
        cfg.check()?;
        let mut store_path = None;
        // The store first: its lock is what another process may hold, and
        // a refusal must leave no log behind.
        let (store, compactor) = match cfg.store {
            Some((dir, mut opts)) => {
                if opts.min_free_bytes == 0 {
                    let _ = std::fs::create_dir_all(&dir);
                    opts.min_free_bytes = cfg.min_free.bytes_for(&dir);
                }
                let store = Store::open(&dir, opts)?;
                store_path = Some(dir.clone());
                // Small files of closed hours (short runs, frequent flushes)
                // are merged while we run, at low priority.
                (
                    Some(store),
                    Some(Compactor::start(dir, CompactorOptions::default())),
                )
            }
            None => (None, None),
        };
        let spool = cfg.clickhouse.as_ref().map(|c| c.spool_dir.clone());
        let clickhouse = cfg.clickhouse.map(wirelog_clickhouse::ClickHouseSink::start).transpose()?;
        let health = clickhouse.as_ref().map(|c| c.health_sender());
        let mut paths: Vec<PathBuf> = store_path.into_iter().chain(spool).collect();
        let log_min_free = cfg.logs.as_deref().map_or(0, |d| {
            let _ = std::fs::create_dir_all(d);
            cfg.min_free.bytes_for(d)
        });
        let mut create = |dir: &Path, name: &str| -> Result<LogOut> {
            let path = dir.join(name);
            let f = LogFile::create(&path, LOG_PENDING, log_min_free)?;
            paths.push(path);
            Ok(LogOut::File(f))
        };
        let (conn_out, flow_out): (LogOut, Option<LogOut>) = match &cfg.logs {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create log directory {}", dir.display()))?;
                (create(dir, "conn.log")?, Some(create(dir, "flows.log")?))
            }
            None => (LogOut::Stdout(BufWriter::with_capacity(1 << 16, io::stdout())), None),
        };
        if let Some(dir) = &cfg.logs {
            paths.push(dir.clone());
            // Transaction logs appear only when there is something to log;
            // ones left from an earlier run would read as this run's.
            for name in Protocol::ALL.map(tx_log_name).into_iter().chain(["x509.log".into()]) {
                let old = dir.join(name);
                if old.exists() {
                    std::fs::remove_file(&old)
                        .with_context(|| format!("cannot replace {}", old.display()))?;
                }
            }
        }
        let mut writer = Writer {
            conn_log: ConnLogWriter::new(conn_out, cfg.format)
                .with_empty_tcp_note(cfg.empty_tcp_note)
                .with_processes(cfg.processes.is_some()),
            flow_log: flow_out.map(|o| FlowLogWriter::new(o, cfg.format)),
            tx_logs: cfg.logs.clone().map(|d| (d, cfg.format)),
            tx_writers: Vec::new(),
            store,
            compactor,
            ingests: Vec::new(),
            summary: OutputSummary::default(),
            owners: cfg.processes,
            procs_behind: false,
            log_min_free,
            warned_full: false,
            dropped: Arc::new(AtomicU64::new(0)),
            live: Arc::default(),
            tx_status: Default::default(),
            clickhouse,
        };
        let dropped = writer.dropped.clone();
        let live = writer.live.clone();
        let (tx, rx) = mpsc::sync_channel::<Batch>(QUEUE_DEPTH);
        let (recycle_tx, recycled) = mpsc::sync_channel::<Batch>(QUEUE_DEPTH + 1);
        let handle = std::thread::Builder::new()
            .name("wirelog-output".into())
            .spawn(move || {
                let mut last_log_flush = Instant::now();
                let mut last_store_flush = Instant::now();
                // Lines written but not flushed yet: wait at most LOG_FLUSH
                // for more, otherwise sleep until records come.
                let mut dirty = false;
                let mut last_tick = Instant::now();
                loop {
                    let next = if dirty {
                        match rx.recv_timeout(LOG_FLUSH.saturating_sub(last_log_flush.elapsed())) {
                            Ok(b) => Some(b),
                            Err(RecvTimeoutError::Timeout) => None,
                            Err(RecvTimeoutError::Disconnected) => break,
                        }
                    } else if writer.clickhouse.is_some() {
                        // The ClickHouse sink sends batches by age: tick while idle.
                        match rx.recv_timeout(LOG_FLUSH) {
                            Ok(b) => Some(b),
                            Err(RecvTimeoutError::Timeout) => None,
                            Err(RecvTimeoutError::Disconnected) => break,
                        }
                    } else {
                        match rx.recv() {
                            Ok(b) => Some(b),
                            Err(_) => break,
                        }
                    };
                    if last_tick.elapsed() >= LOG_FLUSH {
                        last_tick = Instant::now();
                        if let Some(c) = writer.clickhouse.as_mut() {
                            wirelog_sink::Sink::tick(c, last_tick)?;
                        }
                    }
                    if next.is_none() {
                        writer.retry()?;
                    }
                    if let Some(mut batch) = next {
                        writer.write(&mut batch)?;
                        batch.clear();
                        let _ = recycle_tx.try_send(batch);
                        dirty = true;
                        if last_store_flush.elapsed() >= STORE_FLUSH {
                            writer.flush_store()?;
                            last_store_flush = Instant::now();
                        }
                    }
                    if dirty && last_log_flush.elapsed() >= LOG_FLUSH {
                        writer.flush_logs()?;
                        last_log_flush = Instant::now();
                        // While the disk is full, wake up to retry.
                        dirty = writer.waiting();
                    }
                    writer.report_space();
                }
                writer.finish()
            })
            .context("cannot start the output thread")?;
        Ok(Output { live, tx: Some(tx), recycled: Arc::new(Mutex::new(recycled)), handle: Some(handle), paths, dropped, health })
    }

    /// The directories and files the output created.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// What the writer has written so far (for `/metrics`).
    pub fn live(&self) -> Arc<OutputLive> {
        self.live.clone()
    }

    /// Records dropped so far because the disk stayed full (store rows and
    /// log lines), updated as the writer goes.
    pub fn dropped_counter(&self) -> Arc<AtomicU64> {
        self.dropped.clone()
    }

    /// Where capture's statistics loop hands health rows (with --clickhouse).
    pub fn health(&self) -> Option<wirelog_clickhouse::HealthSender> {
        self.health.clone()
    }

    /// A handle for other threads to queue batches.
    pub fn sender(&self) -> BatchSender {
        BatchSender { tx: self.tx.clone().expect("output running"), recycled: self.recycled.clone() }
    }

    /// An empty batch, reusing the vectors of one already written when possible.
    pub fn batch(&self) -> Batch {
        recycled(&self.recycled)
    }

    /// Queues a batch; waits while the writer is [`QUEUE_DEPTH`] batches behind.
    pub fn send(&mut self, batch: Batch) -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let sent = self
            .tx
            .as_ref()
            .map(|tx| tx.send(batch).is_ok())
            .unwrap_or(false);
        if sent {
            return Ok(());
        }
        // The writer stopped: its error is the one to report.
        Err(self
            .join()
            .err()
            .unwrap_or_else(|| anyhow!("the output thread stopped")))
    }

    /// Writes what is queued, closes logs and store, and says what was written.
    pub fn finish(mut self) -> Result<OutputSummary> {
        self.join()
    }

    fn join(&mut self) -> Result<OutputSummary> {
        drop(self.tx.take());
        match self.handle.take() {
            Some(h) => h
                .join()
                .map_err(|_| anyhow!("the output thread panicked"))?,
            None => Err(anyhow!("the output thread already stopped")),
        }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if self.handle.is_some() {
            let _ = self.join();
        }
    }
}

impl Writer {
    fn write(&mut self, batch: &mut Batch) -> Result<()> {
        if let Some(o) = &self.owners {
            // A resolver that fell behind is waited for once, not on every
            // batch: the capture workers wait for this thread when its queue
            // is full, and must not wait for /proc. Until it has caught up,
            // records go out with the owners known so far.
            let limit = if self.procs_behind { Duration::ZERO } else { PROCS_SYNC };
            self.procs_behind = !own(o, batch, limit);
        }
        for r in &batch.conns {
            self.summary.states[r.conn_state as usize] += 1;
            self.conn_log.write(r)?;
        }
        self.summary.conns += batch.conns.len() as u64;
        self.summary.flows += batch.flows.len() as u64;
        if let Some(s) = self.flow_log.as_mut() {
            for f in &batch.flows {
                s.write(f)?;
            }
        }
        if let Some(st) = self.store.as_mut() {
            st.append_conns(&batch.conns)?;
            st.append_flows(&batch.flows)?;
        }
        for t in &batch.txs {
            let p = Protocol::ALL.iter().position(|p| *p == t.protocol).unwrap_or(0);
            self.summary.txs[p] += 1;
            self.tx_status[p][status_index(t.tx.status)] += 1;
            if let Some(w) = self.tx_writer(t.protocol)? {
                w.write(t)?;
            }
        }
        if let Some(st) = self.store.as_mut() {
            st.append_tx_records(&batch.txs)?;
        }
        if let Some(c) = self.clickhouse.as_mut() {
            wirelog_sink::Sink::write(c, batch)?;
        }
        self.ingests.extend_from_slice(&batch.ingests);
        self.publish();
        if let Some(o) = &self.owners {
            // Written: the owners of these connections are not needed again.
            for r in &batch.conns {
                o.forget(r.ip_proto, r.orig_h.0, r.orig_p, r.resp_h.0, r.resp_p);
            }
        }
        Ok(())
    }

    /// The log of a protocol, created at its first transaction (like Zeek,
    /// a log with nothing to say is not written).
    fn tx_writer(&mut self, p: Protocol) -> Result<Option<&mut TxLogWriter<LogOut>>> {
        let Some((dir, format)) = &self.tx_logs else {
            return Ok(None);
        };
        let i = match self.tx_writers.iter().position(|(q, _)| *q == p) {
            Some(i) => i,
            None => {
                let path = dir.join(tx_log_name(p));
                let out = LogOut::File(LogFile::create(&path, LOG_PENDING, self.log_min_free)?);
                let (x509, min_free) = (dir.join("x509.log"), self.log_min_free);
                let open_x509: OpenLog<LogOut> = Box::new(move || Ok(LogOut::File(LogFile::create(&x509, LOG_PENDING, min_free)?)));
                self.tx_writers.push((p, TxLogWriter::new(out, *format, p).with_processes(self.owners.is_some()).with_x509(open_x509)));
                self.tx_writers.len() - 1
            }
        };
        Ok(Some(&mut self.tx_writers[i].1))
    }

    fn flush_logs(&mut self) -> Result<()> {
        self.conn_log.flush()?;
        if let Some(s) = self.flow_log.as_mut() {
            s.flush()?;
        }
        for (_, w) in &mut self.tx_writers {
            w.flush()?;
        }
        Ok(())
    }

    /// The log files (not standard output).
    fn log_files(&mut self) -> Vec<&mut LogFile> {
        let mut logs: Vec<&mut LogOut> = vec![self.conn_log.get_mut()];
        if let Some(f) = self.flow_log.as_mut() {
            logs.push(f.get_mut());
        }
        for (_, w) in &mut self.tx_writers {
            let (out, x509) = w.outputs_mut();
            logs.push(out);
            logs.extend(x509);
        }
        logs.into_iter().filter_map(LogOut::file).collect()
    }

    /// True while records wait in memory for disk space.
    fn waiting(&mut self) -> bool {
        self.store.as_ref().is_some_and(Store::waiting) || self.log_files().iter().any(|f| f.waiting())
    }

    /// Tries again what waits for space.
    fn retry(&mut self) -> Result<()> {
        if let Some(st) = self.store.as_mut() {
            if st.waiting() {
                st.retry()?;
            }
        }
        for f in self.log_files() {
            if f.waiting() {
                f.flush()?;
            }
        }
        Ok(())
    }

    /// Says once when the disk fills up (naming the file) and when writing
    /// resumes; keeps the dropped counter current.
    fn report_space(&mut self) {
        let mut dropped = 0;
        let mut why: Option<String> = None;
        if let Some(st) = self.store.as_ref() {
            let s = st.stats();
            dropped += s.dropped_total();
            if st.waiting() {
                why = Some(s.last_space_error.clone().unwrap_or_else(|| {
                    format!("store {}: free space below --min-free", st.dir().display())
                }));
            }
        }
        for f in self.log_files() {
            dropped += f.stats().dropped;
            if f.waiting() && why.is_none() {
                why = Some(f.stats().last_error.clone().unwrap_or_else(|| {
                    format!("{}: free space below --min-free", f.path().display())
                }));
            }
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

    fn flush_store(&mut self) -> Result<()> {
        if let Some(st) = self.store.as_mut() {
            let t = Instant::now();
            st.flush()?;
            self.live.flushed(t.elapsed());
            self.live.store_written(st.stats());
        }
        Ok(())
    }

    /// Once per batch: the running totals to the atomics `/metrics` reads.
    fn publish(&self) {
        for (a, n) in self.live.states.iter().zip(self.summary.states) {
            a.store(n, Ordering::Relaxed);
        }
        for (row, counts) in self.live.txs.iter().zip(&self.tx_status) {
            for (a, n) in row.iter().zip(counts) {
                a.store(*n, Ordering::Relaxed);
            }
        }
    }

    fn finish(mut self) -> Result<OutputSummary> {
        self.conn_log.finish()?;
        if let Some(s) = self.flow_log.as_mut() {
            s.finish()?;
        }
        for (_, w) in &mut self.tx_writers {
            w.finish()?;
        }
        if let Some(mut st) = self.store.take() {
            if !st.record_ingests(&self.ingests)? && !self.ingests.is_empty() {
                eprintln!(
                    "wirelog: warning: the capture is not recorded as ingested: some of its rows could not be written; \
                     reading it again is allowed"
                );
            }
            let t = Instant::now();
            let stats = st.close()?;
            self.live.flushed(t.elapsed());
            self.live.store_written(&stats);
            self.summary.store_dropped = stats.dropped;
            self.summary.space_failures += stats.space_failures;
            self.summary.pauses += stats.pauses;
            self.summary.freed_partitions = stats.freed_partitions;
        }
        self.report_space();
        // What still waits for space in the logs is given up, counted.
        let abandoned: Vec<_> = self
            .log_files()
            .into_iter()
            .map(|f| {
                let name = f.path().file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                (name, f.abandon_pending())
            })
            .collect();
        for (name, st) in abandoned {
            self.summary.space_failures += st.space_failures;
            self.summary.pauses += st.pauses;
            if st.dropped > 0 {
                self.summary.log_dropped.push((name, st.dropped));
            }
        }
        self.dropped.store(self.summary.dropped(), Ordering::Relaxed);
        // Last: the logs and the store are whole before waiting for ClickHouse.
        self.summary.clickhouse = self.clickhouse.as_mut().map(|c| c.finish());
        if let Some(c) = self.compactor.take() {
            // The pass in progress finishes; a later run picks up the rest.
            let status = c.stop();
            if let Some(e) = status.last_error {
                eprintln!("wirelog: warning: store compaction: {e}");
            }
        }
        Ok(self.summary)
    }
}

/// Gives each record the owners of its local ends, once the resolver has
/// seen every connection queued before the batch.
/// False when the resolver had not caught up within `limit`.
fn own(o: &Owners, batch: &mut Batch, limit: Duration) -> bool {
    let caught_up = o.sync(limit);
    for r in &mut batch.conns {
        r.orig_proc = o.get(r.ip_proto, r.orig_h.0, r.orig_p, r.resp_h.0, r.resp_p);
        r.resp_proc = o.get(r.ip_proto, r.resp_h.0, r.resp_p, r.orig_h.0, r.orig_p);
    }
    for t in &mut batch.txs {
        let proto = if t.transport == wirelog_record::Proto::Udp { 17 } else { 6 };
        t.orig_proc = o.get(proto, t.orig_h.0, t.orig_p, t.resp_h.0, t.resp_p);
        t.resp_proc = o.get(proto, t.resp_h.0, t.resp_p, t.orig_h.0, t.orig_p);
    }
    caught_up
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

    #[test]
    fn flushes_land_in_their_bucket() {
        let live = OutputLive::default();
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
