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
//! again. For `read` the token is the same in every run of the same input
//! ([`Config::run_key`]: the capture's identity, then the table and the
//! batch's position in it, batches cut by size only) and so are the rows
//! (uids seeded from the same key): a run killed half-way and read again
//! sends batches the server already holds under the tokens it remembers. (ReplacingMergeTree on a batch id would also converge, but only
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
    /// `read`: the run's input identity (the same for every run of the
    /// same capture and options). Then a batch's token is this key, the
    /// table and the batch's position in the table, and batches are cut by
    /// rows and bytes only (never by age), so they are the same batches in
    /// every run. `None` (live capture): tokens unique to the run.
    pub run_key: Option<String>,
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
    /// Batches cut so far per table ([`Table::ALL`] order): the position
    /// of the next in its table.
    cut_count: Vec<u64>,
    tx: Option<SyncSender<Msg>>,
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
    health: HealthSender,
    /// Dropped rows already reported in a health row.
    health_dropped: u64,
    summary: Option<Summary>,
}

/// A batch's `insert_deduplication_token`. With a run key (`read`):
/// `<probe>-<key>-<table>-<position>`, the same batch in every run of the
/// same input, so a resend after a crash is deduplicated; health rows
/// (about this run, not the input) and live capture: the run's own
/// `<probe>-<run id>-<seq>`.
fn token(cfg: &Config, run_id: &str, t: Table, position: u64, seq: u64) -> String {
    match &cfg.run_key {
        Some(key) if t != Table::Health => format!("{}-{key}-{}-{position}", cfg.probe, t.name()),
        _ => format!("{}-{run_id}-{seq}", cfg.probe),
    }
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
            cut_count: vec![0; Table::ALL.len()],
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

    /// Whether a table's batch reached its row or byte limit.
    fn full(&self, t: Table) -> bool {
        let r = &self.tables[slot(t)].0;
        let (rows, bytes) = match t {
            Table::Store(Kind::X509) => (self.certs.len() as u64, self.certs.bytes()),
            _ => (r.rows, r.buf.len()),
        };
        rows >= self.cfg.batch_rows || bytes >= self.cfg.batch_bytes
    }

    /// Cuts a table's batch when it reached its row or byte limit.
    fn cut_if_full(&mut self, t: Table) {
        if self.full(t) {
            self.cut(t);
        }
    }

    /// [`Self::cut_if_full`] while `write` holds the probe and interface
    /// names (moved out of the configuration, not copied): they go back for
    /// the cut, which names the probe in the token.
    fn cut_if_full_holding(&mut self, t: Table, probe: &mut String, iface: &mut String) {
        if self.full(t) {
            std::mem::swap(&mut self.cfg.probe, probe);
            std::mem::swap(&mut self.cfg.iface, iface);
            self.cut(t);
            std::mem::swap(&mut self.cfg.probe, probe);
            std::mem::swap(&mut self.cfg.iface, iface);
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
        let position = self.cut_count[slot(t)];
        self.cut_count[slot(t)] += 1;
        let p = Payload {
            seq,
            table: t,
            token: token(&self.cfg, &self.run_id, t, position, seq),
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

    /// Rows dropped so far (a full spool): the loss table's
    /// `records_dropped`, with the other sinks'. Never a wait: the spool
    /// is this sink's own room.
    fn space(&self) -> wirelog_sink::Space {
        wirelog_sink::Space { dropped: self.dropped_rows(), waiting: None }
    }

    fn write(&mut self, b: &Batch) -> io::Result<()> {
        let mut probe = std::mem::take(&mut self.cfg.probe);
        let mut iface = std::mem::take(&mut self.cfg.iface);
        // A batch is cut at the row that fills it, not at the end of `b`:
        // its bounds depend on the records only, whatever batches they came in.
        let t = Table::Store(Kind::Flows);
        for f in &b.flows {
            self.rows(t).flow(&probe, f);
            self.cut_if_full_holding(t, &mut probe, &mut iface);
        }
        let t = Table::Store(Kind::Conns);
        for r in &b.conns {
            self.rows(t).conn(&probe, &iface, r);
            self.cut_if_full_holding(t, &mut probe, &mut iface);
        }
        for r in &b.txs {
            let t = Table::Store(tx_kind(r.protocol));
            self.rows(t).tx(&probe, &iface, t, r);
            self.cut_if_full_holding(t, &mut probe, &mut iface);
        }
        let t = Table::Store(Kind::Loss);
        for r in &b.losses {
            self.rows(t).loss(&probe, &iface, r);
            self.cut_if_full_holding(t, &mut probe, &mut iface);
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
            // Reading files, batches are cut by size only (see Config::run_key).
            if self.cfg.run_key.is_some() && t != Table::Health {
                continue;
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_record::UidGenerator;
    use wirelog_sink::Sink;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wirelog-chsink-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// A sink whose server refuses every connection (port 1 on loopback):
    /// every batch ends in the spool `dir`, where its token can be read.
    fn sink(dir: &Path, run_key: Option<&str>) -> ClickHouseSink {
        ClickHouseSink::start(Config {
            server: Server {
                url: "http://127.0.0.1:1".into(),
                user: None,
                password: None,
                database: "wirelog".into(),
                timeout: Duration::from_secs(1),
            },
            probe: "p".into(),
            iface: "a.pcap".into(),
            spool_dir: dir.to_path_buf(),
            spool_size: 1 << 30,
            batch_rows: 7,
            batch_bytes: 1 << 20,
            batch_age: Duration::from_millis(100),
            drain: Duration::ZERO,
            run_key: run_key.map(str::to_string),
        })
        .unwrap()
    }

    /// `n` connections with the uids of `seed`, handed over in batches of
    /// the sizes `sizes` (repeated), with a tick after each.
    fn feed(mut s: ClickHouseSink, n: u64, seed: u64, sizes: &[usize]) {
        let mut uids = UidGenerator::new(seed);
        let conns: Vec<_> = (0..n).map(|i| wirelog_store::synth::conn(i, 1_700_000_000_000_000_000, 1000, &mut uids)).collect();
        let mut rest = conns.as_slice();
        for &size in sizes.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (now, later) = rest.split_at(size.min(rest.len()));
            s.write(&Batch { conns: now.to_vec(), ..Batch::default() }).unwrap();
            s.tick(Instant::now() + Duration::from_secs(5)).unwrap();
            rest = later;
        }
        s.finish();
        // Dropped: the spool's lock goes with it.
    }

    /// The spool's batches: token -> data.
    fn spooled(dir: &Path) -> BTreeMap<String, Bytes> {
        let spool = Spool::open(dir, u64::MAX).unwrap();
        let (Some(first), Some(last)) = (spool.first(), spool.max_seq()) else { return BTreeMap::new() };
        (first..=last).filter_map(|s| spool.read(s).ok()).map(|p| (p.token, p.data)).collect()
    }

    use std::collections::BTreeMap;
    use std::path::Path;

    #[test]
    fn a_run_key_gives_the_same_batches_and_tokens_whatever_the_grouping_and_timing() {
        let (a, b, c) = (tmpdir("key-a"), tmpdir("key-b"), tmpdir("key-c"));
        feed(sink(&a, Some("k1")), 40, 9, &[3, 11, 1]);
        feed(sink(&b, Some("k1")), 40, 9, &[40]);
        let (x, y) = (spooled(&a), spooled(&b));
        // 40 rows in batches of 7: 6 batches, position 0..5 of the table.
        let tokens: Vec<&str> = x.keys().map(String::as_str).collect();
        assert_eq!(tokens, (0..6).map(|i| format!("p-k1-conns-{i}")).collect::<Vec<_>>());
        assert_eq!(x, y, "the same tokens over the same bytes");
        // Without a key (live capture) the ticks cut batches by age and
        // tokens are the run's own.
        feed(sink(&c, None), 40, 9, &[3, 11, 1]);
        let z = spooled(&c);
        assert!(z.len() > 6, "cut by age too: {}", z.len());
        assert!(z.keys().all(|t| !t.contains("k1") && t.starts_with("p-")), "{z:?}");
        for d in [a, b, c] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }
}
