//! The store as one of the output stage's sinks: records appended as they
//! come, Parquet files written at least every `StoreOptions::flush_interval`
//! (5 minutes: a crash loses at most this much, plus what is queued), small files
//! of closed hours compacted in the background, and the captures read
//! listed once every one of their rows is in a file and every other sink
//! is done with them ([`Sink::commit`]).

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wirelog_record::{Batch, Ingest};
use wirelog_sink::{Live, Sink, SinkEnd, Space};

use crate::compact::{Compactor, CompactorOptions};
use crate::live::LiveRecords;
use crate::{Kind, Store, StoreError, StoreOptions, WriteStats};

fn io_error(e: StoreError) -> io::Error {
    io::Error::other(e)
}

pub struct StoreSink {
    /// Taken at close.
    store: Option<Store>,
    compactor: Option<Compactor>,
    /// Captures whose records have all been given (listed at close).
    ingests: Vec<Ingest>,
    last_flush: Instant,
    live: Arc<Live>,
    /// The store's writing waits for space, and stderr said so.
    paused: bool,
}

impl StoreSink {
    /// Opens (locks) the store in `dir` and starts compacting it at low
    /// priority; flushes are published to `live`. With `run` (`read`), the
    /// files are written in staging under that name and enter the store
    /// only at the commit (see [`crate::staging`]).
    pub fn open(dir: &Path, opts: StoreOptions, live: Arc<Live>, run: Option<&str>) -> Result<StoreSink, StoreError> {
        StoreSink::open_with(dir, opts, live, run, None)
    }

    /// [`StoreSink::open`] for a capture that keeps its records in memory
    /// until the store has them (`capture --listen`): flushes mark their
    /// files and hand the records over (see [`crate::live`]).
    pub fn open_live(dir: &Path, opts: StoreOptions, live: Arc<Live>, records: Arc<LiveRecords>) -> Result<StoreSink, StoreError> {
        StoreSink::open_with(dir, opts, live, None, Some(records))
    }

    fn open_with(
        dir: &Path,
        opts: StoreOptions,
        live: Arc<Live>,
        run: Option<&str>,
        records: Option<Arc<LiveRecords>>,
    ) -> Result<StoreSink, StoreError> {
        let pcap_dir = opts.pcap_dir.clone();
        let mut store = Store::open(dir, opts)?;
        if let Some(p) = pcap_dir {
            // Under the lock Store::open took.
            crate::pcap_dirs::record_pcap_dir(dir, &p)?;
        }
        if let Some(r) = &records {
            store.set_live(r.clone());
        }
        if let Some(note) = store.recovered().note(dir) {
            eprintln!("{note}");
        }
        if let Some(run) = run {
            store.stage(run)?;
        }
        // Small files of closed hours (short runs, frequent flushes) are
        // merged while we run.
        let mut copts = CompactorOptions::default();
        copts.compact.live = records;
        let compactor = Compactor::start(dir.to_path_buf(), copts);
        Ok(StoreSink {
            store: Some(store),
            compactor: Some(compactor),
            ingests: Vec::new(),
            last_flush: Instant::now(),
            live,
            paused: false,
        })
    }

    /// Says on stderr when the store's writing starts waiting for space
    /// (below `--min-free`, or the disk full) and when it resumes, naming
    /// the store: the output's disk-full warning names only the first file
    /// that waits, and a pause at the last flush would otherwise show only
    /// in the summary.
    fn note_waiting(&mut self) {
        let Some(st) = self.store.as_ref() else {
            return;
        };
        let waiting = st.waiting();
        if waiting && !self.paused {
            let why = st
                .stats()
                .last_space_error
                .clone()
                .unwrap_or_else(|| format!("store {}: free space below --min-free", st.dir().display()));
            eprintln!(
                "wirelog: warning: {why}: the store's writing is paused; its rows wait in memory and are \
                 written when space returns (beyond the bound they are dropped and counted)"
            );
        } else if !waiting && self.paused {
            eprintln!("wirelog: store {}: space is back, writing resumed", st.dir().display());
        }
        self.paused = waiting;
    }

    fn published(&self, took: Duration, stats: &WriteStats) {
        self.live.flushed(took);
        self.live.store_written(stats.rows, stats.bytes, stats.files);
    }

    fn flush_if_due(&mut self) -> io::Result<()> {
        let every = self.store.as_ref().map_or(Duration::MAX, |st| st.options().flush_interval);
        if self.last_flush.elapsed() < every {
            return Ok(());
        }
        if let Some(st) = self.store.as_mut() {
            let t = Instant::now();
            st.flush().map_err(io_error)?;
            let took = t.elapsed();
            let stats = st.stats().clone();
            self.published(took, &stats);
        }
        self.last_flush = Instant::now();
        Ok(())
    }
}

impl Sink for StoreSink {
    fn name(&self) -> &str {
        "store"
    }

    /// Encoding and compressing Parquet costs more per record than every
    /// other sink together: on its own thread it uses another core instead
    /// of holding up the output thread (and through it the packet path).
    fn own_thread(&self) -> bool {
        true
    }

    fn write(&mut self, batch: &Batch) -> io::Result<()> {
        if let Some(st) = self.store.as_mut() {
            st.append_conns(&batch.conns).map_err(io_error)?;
            st.append_flows(&batch.flows).map_err(io_error)?;
            st.append_tx_records(&batch.txs).map_err(io_error)?;
            st.append_losses(&batch.losses).map_err(io_error)?;
        }
        self.ingests.extend_from_slice(&batch.ingests);
        self.flush_if_due()?;
        self.note_waiting();
        Ok(())
    }

    fn tick(&mut self, _now: Instant) -> io::Result<()> {
        if let Some(st) = self.store.as_mut().filter(|st| st.waiting()) {
            st.retry().map_err(io_error)?;
        }
        self.flush_if_due()?;
        self.note_waiting();
        Ok(())
    }

    fn space(&self) -> Space {
        let Some(st) = self.store.as_ref() else {
            return Space::default();
        };
        let s = st.stats();
        Space {
            dropped: s.dropped_total(),
            waiting: st.waiting().then(|| {
                s.last_space_error
                    .clone()
                    .unwrap_or_else(|| format!("store {}: free space below --min-free", st.dir().display()))
            }),
        }
    }

    /// Writes every row out (into staging for a `read`); the store stays
    /// locked until the commit.
    fn close(&mut self) -> io::Result<SinkEnd> {
        let mut end = SinkEnd::default();
        // The last flush first, so that a pause it meets (or its end) is said.
        if let Some(st) = self.store.as_mut() {
            st.flush().map_err(io_error)?;
        }
        self.note_waiting();
        if let Some(st) = self.store.as_mut() {
            let t = Instant::now();
            let stats = st.finish().map_err(io_error)?;
            self.published(t.elapsed(), &stats);
            end.dropped = Kind::ALL
                .iter()
                .zip(stats.dropped)
                .filter(|(_, n)| *n > 0)
                .map(|(k, n)| (format!("store {}", k.as_str()), n))
                .collect();
            end.space_failures = stats.space_failures;
            end.pauses = stats.pauses;
            end.freed_partitions = stats.freed_partitions;
        }
        if let Some(c) = self.compactor.take() {
            // The pass in progress finishes; a later run picks up the rest.
            if let Some(e) = c.stop().last_error {
                eprintln!("wirelog: warning: store compaction: {e}");
            }
        }
        Ok(end)
    }

    /// The run's files enter the store; the captures read are recorded
    /// only when the run is `complete` (every other sink has all of it) and
    /// the store has every row.
    fn commit(&mut self, complete: bool) -> io::Result<()> {
        let Some(mut st) = self.store.take() else { return Ok(()) };
        let ingests = complete.then_some(self.ingests.as_slice());
        let recorded = st.commit(ingests).map_err(io_error)?;
        if !recorded && !self.ingests.is_empty() {
            let why = match complete {
                false => "not every sink has all of its records (see above)",
                true => "some of its rows could not be written to the store",
            };
            eprintln!(
                "wirelog: warning: the capture is not recorded as ingested: {why}; reading it again is allowed \
                 (the rows this run wrote to the store stay: a second read adds its rows again)"
            );
        }
        Ok(())
    }
}
