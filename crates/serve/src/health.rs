//! The probe's health: this process's CPU and memory, a live capture's
//! counters, and what the store holds; sampled every [`SAMPLE_EVERY`] into a
//! ring of [`SAMPLES`] so the UI can draw them over time.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::{json, Value};
use wirelog_store::{file_summary, list_partitions, partition_files, Kind};

use crate::api::State;
use crate::procstat;

pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(2);
/// One hour at one sample every 2 s.
pub(crate) const SAMPLES: usize = 1800;

/// A running capture's counters, read when a page or a scrape asks (never
/// pushed from the packet path).
pub trait Live: Send + Sync + 'static {
    fn snapshot(&self) -> LiveSnapshot;
}

impl<F: Fn() -> LiveSnapshot + Send + Sync + 'static> Live for F {
    fn snapshot(&self) -> LiveSnapshot {
        self()
    }
}

/// What a capture's stats line says, per worker.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LiveSnapshot {
    pub interfaces: Vec<String>,
    pub workers: Vec<WorkerLive>,
    /// Records the output could not write (disk full).
    pub records_dropped: u64,
    /// Connections ended (written) per conn_state, Zeek's names.
    pub conns_ended: Vec<(&'static str, u64)>,
    /// Transactions written per (protocol, status).
    pub transactions: Vec<(&'static str, &'static str, u64)>,
    /// What this run wrote to the store (`None`: no store).
    pub store: Option<StoreWritten>,
}

/// The store writer's figures of this run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StoreWritten {
    pub rows: u64,
    pub bytes: u64,
    pub files: u64,
    /// Flushes per upper bound in seconds (`f64::MAX`: above the others),
    /// not cumulative.
    pub flush_buckets: Vec<(f64, u64)>,
    pub flush_seconds: f64,
    /// Times the output thread waited for the store's thread, which was
    /// more records behind than it keeps for it.
    pub waits: u64,
}

/// One worker's counters, as the capture's stats line has them.
pub use wirelog_counters::WorkerStats as WorkerLive;

impl LiveSnapshot {
    pub fn total(&self) -> WorkerLive {
        self.workers.iter().sum()
    }
}

/// One kind in the store: from the files' footers, no rows read.
#[derive(Debug, Clone, Serialize)]
pub struct KindExtent {
    pub kind: &'static str,
    pub files: u64,
    pub rows: u64,
    pub bytes: u64,
    /// First and last record time, ns since the epoch.
    pub first_ns: Option<i64>,
    pub last_ns: Option<i64>,
    /// Of `rows`, the records of the running capture still in memory
    /// (`capture --listen`: not yet in a store file).
    pub in_memory: u64,
}

/// The store's extent with the running capture's records in memory added
/// (`/api/extent`: the UI's timeline and default range include them).
pub(crate) fn with_records(store: &[KindExtent], records: &wirelog_store::LiveRecords) -> Vec<KindExtent> {
    let mut out = store.to_vec();
    for (kind, n, lo, hi) in records.held() {
        let i = match out.iter().position(|e| e.kind == kind.as_str()) {
            Some(i) => i,
            None => {
                out.push(KindExtent { kind: kind.as_str(), files: 0, rows: 0, bytes: 0, first_ns: None, last_ns: None, in_memory: 0 });
                out.len() - 1
            }
        };
        let e = &mut out[i];
        e.rows += n;
        e.in_memory += n;
        if let Some(lo) = lo {
            e.first_ns = Some(e.first_ns.map_or(lo, |x| x.min(lo)));
        }
        if let Some(hi) = hi {
            e.last_ns = Some(e.last_ns.map_or(hi, |x| x.max(hi)));
        }
    }
    out
}

pub(crate) fn extent(dir: &Path) -> Vec<KindExtent> {
    Kind::ALL
        .iter()
        .map(|&kind| {
            let mut e = KindExtent {
                kind: kind.as_str(),
                files: 0,
                rows: 0,
                bytes: 0,
                first_ns: None,
                last_ns: None,
                in_memory: 0,
            };
            for p in list_partitions(dir, kind).unwrap_or_default() {
                let Ok((files, _)) = partition_files(&p.path) else {
                    continue;
                };
                for f in files {
                    let Ok(s) = file_summary(&f) else { continue };
                    e.files += 1;
                    e.rows += s.rows;
                    e.bytes += std::fs::metadata(&f).map_or(0, |m| m.len());
                    if let Some((a, b)) = s.time_range {
                        e.first_ns = Some(e.first_ns.map_or(a, |x| x.min(a)));
                        e.last_ns = Some(e.last_ns.map_or(b, |x| x.max(b)));
                    }
                }
            }
            e
        })
        .collect()
}

/// One point of the health history.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Sample {
    pub t: f64,
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
    pub live: Option<WorkerLive>,
}

fn sample(state: &State) -> Sample {
    let (cpu, rss) = procstat::read();
    Sample {
        t: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
        cpu_seconds: cpu,
        rss_bytes: rss,
        live: state.opts.live.as_ref().map(|l| l.snapshot().total()),
    }
}

pub(crate) async fn sample_loop(state: Arc<State>) {
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    loop {
        tick.tick().await;
        let s = sample(&state);
        let mut h = state.history.lock().unwrap_or_else(|e| e.into_inner());
        if h.len() == SAMPLES {
            h.pop_front();
        }
        h.push_back(s);
    }
}

pub(crate) fn report(state: &State) -> Value {
    let now = sample(state);
    let history: Vec<Sample> = state
        .history
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .cloned()
        .collect();
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_s": state.started.elapsed().as_secs_f64(),
        "now": now,
        "live": state.opts.live.as_ref().map(|l| l.snapshot()),
        "records_in_memory": state.opts.records.as_ref().map(|r| {
            let s = r.stats();
            json!({"bytes": s.bytes, "max_bytes": s.max_bytes, "records": s.records,
                   "evicted": s.evicted, "failures": s.failures})
        }),
        "store": state.opts.store.as_ref().map(|_| (*state.extent().unwrap_or_default()).clone()),
        "backend": state.opts.backend.as_ref().map(|b| b.name()),
        "sample_every_s": SAMPLE_EVERY.as_secs_f64(),
        "history": history,
    })
}
