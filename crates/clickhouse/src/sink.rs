//! The ClickHouse sink: records to RowBinary batches on the output thread,
//! inserts on a sender thread of its own, failures to the spool.
//!
//! `write` never waits for the network: a cut batch is handed to the sender
//! through a bounded queue, and when the queue is full (ClickHouse slow or
//! away) it goes to the spool on disk instead. Order is kept by sequence
//! number: while anything is spooled, new batches are spooled behind it and
//! the sender sends the spool oldest first; only with an empty spool do
//! batches go straight from the queue to the server.
//!
//! A retry never doubles rows: each batch carries an
//! `insert_deduplication_token` fixed when it is cut (kept in its spool
//! file), and the tables remember recent tokens
//! (`non_replicated_deduplication_window`), so an insert the server applied
//! but whose answer was lost (timeout, crash, SIGKILL) is a no-op when sent
//! again. (ReplacingMergeTree on a batch id would also converge, but only
//! at merge time: until then every count and sum would be doubled.)
//!
//! Certificates are folded before they are sent: a batch of the `x509`
//! table holds one row per certificate, role and hour with its count of
//! handshakes ([`CertRows`], the store's own), and the table (a
//! `SummingMergeTree`) folds the rows of successive batches as it merges.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use std::{io, path::PathBuf};

use bytes::Bytes;
use wirelog_record::Batch;
use wirelog_store::{tx_kind, CertRows, Kind};

use crate::client::{self, Server};
use crate::rows::{Health, Rows};
use crate::schema::Table;
use crate::spool::{Payload, Spool};

/// Batches waiting in memory for the sender; beyond, batches are spooled.
const QUEUE: usize = 8;
const BACKOFF_MIN: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// "Spool full" is said at most this often.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The sink's settings (`--clickhouse*`, `--spool-*`, `--probe-name`).
#[derive(Debug, Clone)]
pub struct Config {
    pub server: Server,
    /// This probe's name in every row.
    pub probe: String,
    /// The interface (live) or capture file (read) for rows that do not
    /// carry their own (flows do).
    pub iface: String,
    pub spool_dir: PathBuf,
    pub spool_size: u64,
    /// A table's batch is sent at this many rows, bytes or seconds,
    /// whichever comes first.
    pub batch_rows: u64,
    pub batch_bytes: usize,
    pub batch_age: Duration,
    /// At the end of the run, how long to keep retrying what is spooled
    /// before leaving it for the next run.
    pub drain: Duration,
}

/// What the sink did, for the run's summary.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub sent_rows: u64,
    pub sent_batches: u64,
    /// Batches that went to the spool at some point (sent later or not).
    pub spooled_batches: u64,
    /// Failed attempts (each retried).
    pub failures: u64,
    /// Dropped because the spool was full.
    pub dropped_rows: u64,
    pub dropped_batches: u64,
    /// Still in the spool at the end (the next run sends them).
    pub left_batches: u64,
    pub left_rows: u64,
    pub last_error: Option<String>,
    pub spool_dir: PathBuf,
}

#[derive(Default)]
struct Counters {
    sent_rows: AtomicU64,
    sent_batches: AtomicU64,
    spooled_batches: AtomicU64,
    failures: AtomicU64,
    dropped_rows: AtomicU64,
    dropped_batches: AtomicU64,
}

struct Shared {
    spool: Mutex<Spool>,
    counters: Counters,
    last_error: Mutex<Option<String>>,
    last_warn: Mutex<Option<Instant>>,
}

impl Shared {
    /// Spools a batch, or drops and counts it when the spool is full or
    /// cannot be written (the local store and logs go on either way).
    fn spool(&self, p: &Payload) {
        let put = self.spool.lock().unwrap().put(p);
        let why = match put {
            Ok(true) => {
                self.counters.spooled_batches.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Ok(false) => "the spool is full (--spool-size)".to_string(),
            Err(e) => e.to_string(),
        };
        self.counters.dropped_rows.fetch_add(p.rows, Ordering::Relaxed);
        self.counters.dropped_batches.fetch_add(1, Ordering::Relaxed);
        let mut last = self.last_warn.lock().unwrap();
        if last.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
            *last = Some(Instant::now());
            eprintln!(
                "wirelog: warning: clickhouse: {why}: a batch of {} {} rows is dropped ({} rows dropped so far; counted in the summary and the health table)",
                p.rows,
                p.table.name(),
                self.counters.dropped_rows.load(Ordering::Relaxed)
            );
        }
    }

    fn failed(&self, e: &client::ChError) {
        self.counters.failures.fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock().unwrap() = Some(e.0.clone());
    }

    fn sent(&self, p: &Payload) {
        self.counters.sent_rows.fetch_add(p.rows, Ordering::Relaxed);
        self.counters.sent_batches.fetch_add(1, Ordering::Relaxed);
    }
}

enum Msg {
    Batch(Payload),
    /// The run ends: retry the spool until this instant, then stop.
    Close(Instant),
}

/// Health rows handed in by the capture loop (another thread).
#[derive(Clone, Default)]
pub struct HealthSender(Arc<Mutex<Vec<Health>>>);

impl HealthSender {
    pub fn push(&self, h: Health) {
        self.0.lock().unwrap().push(h);
    }
}

pub struct ClickHouseSink {
    cfg: Config,
    tables: Vec<(Rows, Option<Instant>)>,
    /// The certificates of the `x509` batch being collected, encoded when
    /// it is cut.
    certs: CertRows,
    next_seq: u64,
    run_id: String,
    tx: Option<SyncSender<Msg>>,
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
    health: HealthSender,
    /// Dropped rows already reported in a health row.
    health_dropped: u64,
    summary: Option<Summary>,
}

fn slot(t: Table) -> usize {
    Table::ALL.iter().position(|x| *x == t).unwrap_or(0)
}

impl ClickHouseSink {
    /// Opens the spool (batches of an earlier run are sent first) and
    /// starts the sender thread. Nothing is sent before the first batch.
    pub fn start(cfg: Config) -> io::Result<ClickHouseSink> {
        cfg.server.check().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let spool = Spool::open(&cfg.spool_dir, cfg.spool_size)?;
        if !spool.is_empty() {
            eprintln!(
                "wirelog: clickhouse: {} batches ({} rows) from an earlier run are in the spool {}; sending them first",
                spool.len(),
                spool.rows(),
                spool.dir().display()
            );
        }
        let next_seq = spool.max_seq().map_or(0, |s| s + 1);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let run_id = format!("{:x}{:x}", now.as_nanos() as u64, std::process::id());
        let shared = Arc::new(Shared {
            spool: Mutex::new(spool),
            counters: Counters::default(),
            last_error: Mutex::new(None),
            last_warn: Mutex::new(None),
        });
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let server = cfg.server.clone();
        let sh = shared.clone();
        let rt = client::runtime()?;
        let handle = std::thread::Builder::new()
            .name("wirelog-clickhouse".into())
            .spawn(move || sender(rt, server, sh, rx))?;
        Ok(ClickHouseSink {
            tables: Table::ALL.iter().map(|_| (Rows::default(), None)).collect(),
            certs: CertRows::default(),
            cfg,
            next_seq,
            run_id,
            tx: Some(tx),
            shared,
            handle: Some(handle),
            health: HealthSender::default(),
            health_dropped: 0,
            summary: None,
        })
    }

    /// A handle for the capture loop to queue health rows.
    pub fn health_sender(&self) -> HealthSender {
        self.health.clone()
    }

    /// Rows dropped so far (full spool).
    pub fn dropped_rows(&self) -> u64 {
        self.shared.counters.dropped_rows.load(Ordering::Relaxed)
    }

    fn rows(&mut self, t: Table) -> &mut Rows {
        let s = &mut self.tables[slot(t)];
        s.1.get_or_insert_with(Instant::now);
        &mut s.0
    }

    /// Cuts a table's batch when it reached its row or byte limit.
    fn cut_if_full(&mut self, t: Table) {
        let r = &self.tables[slot(t)].0;
        let (rows, bytes) = match t {
            Table::Store(Kind::X509) => (self.certs.len() as u64, self.certs.bytes()),
            _ => (r.rows, r.buf.len()),
        };
        if rows >= self.cfg.batch_rows || bytes >= self.cfg.batch_bytes {
            self.cut(t);
        }
    }

    fn cut(&mut self, t: Table) {
        if t == Table::Store(Kind::X509) && !self.certs.is_empty() {
            let rows = &mut self.tables[slot(t)].0;
            for i in 0..self.certs.len() {
                rows.cert(&self.cfg.probe, &self.cfg.iface, &self.certs, i);
            }
            self.certs.clear();
        }
        let s = &mut self.tables[slot(t)];
        s.1 = None;
        if s.0.rows == 0 {
            return;
        }
        let rows = std::mem::take(&mut s.0);
        let seq = self.next_seq;
        self.next_seq += 1;
        let p = Payload {
            seq,
            table: t,
            token: format!("{}-{}-{seq}", self.cfg.probe, self.run_id),
            rows: rows.rows,
            data: Bytes::from(rows.buf),
        };
        // Behind spooled batches, a new one waits its turn in the spool too.
        let spooled = !self.shared.spool.lock().unwrap().is_empty();
        let p = match (&self.tx, spooled) {
            (Some(tx), false) => match tx.try_send(Msg::Batch(p)) {
                Ok(()) => return,
                Err(TrySendError::Full(Msg::Batch(p)) | TrySendError::Disconnected(Msg::Batch(p))) => p,
                Err(_) => return,
            },
            _ => p,
        };
        self.shared.spool(&p);
    }

    fn take_health(&mut self) {
        let rows: Vec<Health> = std::mem::take(&mut *self.health.0.lock().unwrap());
        if rows.is_empty() {
            return;
        }
        let dropped = self.dropped_rows();
        let spool_bytes = self.shared.spool.lock().unwrap().bytes();
        for mut h in rows {
            h.sink_dropped_rows = dropped - self.health_dropped;
            self.health_dropped = dropped;
            h.spool_bytes = spool_bytes;
            let (probe, iface) = (self.cfg.probe.clone(), self.cfg.iface.clone());
            self.rows(Table::Health).health(&probe, &iface, &h);
        }
        // A minute's row is worth sending now.
        self.cut(Table::Health);
    }

    /// Ends the sink and says what it did (also what [`Sink::close`] does).
    pub fn finish(&mut self) -> Summary {
        if let Some(s) = &self.summary {
            return s.clone();
        }
        self.take_health();
        for t in Table::ALL {
            self.cut(t);
        }
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(Msg::Close(Instant::now() + self.cfg.drain));
        }
        let waiting = self.shared.spool.lock().unwrap().len();
        if waiting > 0 {
            eprintln!(
                "wirelog: clickhouse: {waiting} batches wait for ClickHouse; retrying for up to {:?} (--clickhouse-drain), then they stay in the spool for the next run",
                self.cfg.drain
            );
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        let c = &self.shared.counters;
        let spool = self.shared.spool.lock().unwrap();
        let s = Summary {
            sent_rows: c.sent_rows.load(Ordering::Relaxed),
            sent_batches: c.sent_batches.load(Ordering::Relaxed),
            spooled_batches: c.spooled_batches.load(Ordering::Relaxed),
            failures: c.failures.load(Ordering::Relaxed),
            dropped_rows: c.dropped_rows.load(Ordering::Relaxed),
            dropped_batches: c.dropped_batches.load(Ordering::Relaxed),
            left_batches: spool.len() as u64,
            left_rows: spool.rows(),
            last_error: self.shared.last_error.lock().unwrap().clone(),
            spool_dir: spool.dir().to_path_buf(),
        };
        drop(spool);
        self.summary = Some(s.clone());
        s
    }
}

impl Summary {
    /// The summary line(s) of a run.
    pub fn text(&self) -> String {
        let mut s = format!(
            "wirelog: clickhouse: {} rows sent in {} batches",
            self.sent_rows, self.sent_batches
        );
        if self.failures > 0 {
            s.push_str(&format!(
                ", {} failed attempts retried ({} batches spooled)",
                self.failures, self.spooled_batches
            ));
        }
        if self.dropped_rows > 0 {
            s.push_str(&format!(
                "; {} rows in {} batches DROPPED (spool full)",
                self.dropped_rows, self.dropped_batches
            ));
        }
        if self.left_batches > 0 {
            s.push_str(&format!(
                "; {} batches ({} rows) wait in the spool {} for the next run",
                self.left_batches,
                self.left_rows,
                self.spool_dir.display()
            ));
        }
        if let (Some(e), true) = (&self.last_error, self.failures > 0) {
            s.push_str(&format!("\nwirelog: clickhouse: last error: {e}"));
        }
        s
    }
}

impl wirelog_sink::Sink for ClickHouseSink {
    fn name(&self) -> &str {
        "clickhouse"
    }

    fn write(&mut self, b: &Batch) -> io::Result<()> {
        let probe = std::mem::take(&mut self.cfg.probe);
        let iface = std::mem::take(&mut self.cfg.iface);
        if !b.flows.is_empty() {
            let t = Table::Store(Kind::Flows);
            for f in &b.flows {
                self.rows(t).flow(&probe, f);
            }
        }
        if !b.conns.is_empty() {
            let t = Table::Store(Kind::Conns);
            for r in &b.conns {
                self.rows(t).conn(&probe, &iface, r);
            }
        }
        for r in &b.txs {
            let t = Table::Store(tx_kind(r.protocol));
            self.rows(t).tx(&probe, &iface, t, r);
        }
        self.cfg.probe = probe;
        self.cfg.iface = iface;
        let x509 = Table::Store(Kind::X509);
        for r in b.txs.iter().filter(|r| r.protocol == wirelog_record::Protocol::Tls) {
            let before = self.certs.len();
            self.certs.push_record(r);
            if self.certs.len() > before {
                // The batch's age runs from its first certificate.
                self.rows(x509);
                self.cut_if_full(x509);
            }
        }
        for t in Table::ALL {
            self.cut_if_full(t);
        }
        Ok(())
    }

    fn tick(&mut self, now: Instant) -> io::Result<()> {
        self.take_health();
        for t in Table::ALL {
            if self.tables[slot(t)].1.is_some_and(|since| now.duration_since(since) >= self.cfg.batch_age) {
                self.cut(t);
            }
        }
        Ok(())
    }

    fn close(&mut self) -> io::Result<wirelog_sink::SinkEnd> {
        let s = self.finish();
        let report = wirelog_sink::Report {
            text: s.text(),
            always: s.dropped_rows + s.left_batches > 0,
            lost: s.dropped_rows > 0,
        };
        Ok(wirelog_sink::SinkEnd { report: Some(report), ..Default::default() })
    }
}

impl Drop for ClickHouseSink {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The sender thread: inserts batches in order; what fails is spooled and
/// retried with exponential backoff.
fn sender(rt: tokio::runtime::Runtime, server: Server, shared: Arc<Shared>, rx: Receiver<Msg>) {
    let client = server.client();
    let send = |p: &Payload| -> Result<(), client::ChError> { rt.block_on(client::insert(&server, &client, p)) };
    let mut backoff = BACKOFF_MIN;
    let mut retry_at: Option<Instant> = None;
    let mut closing: Option<Instant> = None;
    let mut open = true;
    loop {
        let first = shared.spool.lock().unwrap().first();
        let Some(seq) = first else {
            // Nothing spooled: straight from the queue to the server.
            if closing.is_some() || !open {
                return;
            }
            match rx.recv() {
                Ok(Msg::Batch(p)) => {
                    if let Err(e) = send(&p) {
                        shared.failed(&e);
                        shared.spool(&p);
                        retry_at = Some(Instant::now() + backoff);
                    } else {
                        shared.sent(&p);
                    }
                }
                Ok(Msg::Close(d)) => closing = Some(d),
                Err(_) => open = false,
            }
            continue;
        };
        // Spooled batches first: what is queued joins them, in order.
        while let Ok(m) = rx.try_recv() {
            match m {
                Msg::Batch(p) => shared.spool(&p),
                Msg::Close(d) => closing = Some(d),
            }
        }
        let now = Instant::now();
        if retry_at.is_none_or(|t| now >= t) {
            let read = shared.spool.lock().unwrap().read(seq);
            match read {
                Err(e) => {
                    eprintln!("wirelog: warning: clickhouse: spooled batch {seq}: {e}; set aside as .bad");
                    shared.spool.lock().unwrap().quarantine(seq);
                }
                Ok(p) => match send(&p) {
                    Ok(()) => {
                        shared.sent(&p);
                        if let Err(e) = shared.spool.lock().unwrap().remove(seq) {
                            eprintln!("wirelog: warning: clickhouse: {e}");
                        }
                        backoff = BACKOFF_MIN;
                        retry_at = None;
                    }
                    Err(e) => {
                        shared.failed(&e);
                        retry_at = Some(Instant::now() + backoff);
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                    }
                },
            }
            continue;
        }
        let mut until = retry_at.unwrap_or(now);
        if let Some(d) = closing.or((!open).then_some(now)) {
            if now >= d {
                return;
            }
            until = until.min(d);
        }
        if !open {
            std::thread::sleep(until.saturating_duration_since(now));
            continue;
        }
        match rx.recv_timeout(until.saturating_duration_since(now)) {
            Ok(Msg::Batch(p)) => shared.spool(&p),
            Ok(Msg::Close(d)) => closing = Some(d),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => open = false,
        }
    }
}
