//! Sinks: where records go, and the output stage that feeds them.
//!
//! The output stage ([`Output`]) is one thread: the packet path queues
//! [`Batch`]es of records, the thread counts them (the run's summary and the
//! live counters `/metrics` reads), fills in the owners of local ends
//! (`capture --processes`) and hands each batch, in order, to every enabled
//! [`Sink`]. A sink is one type implementing the trait: the Zeek-style logs
//! here (conn.log, flows.log, one log per protocol, x509.log), the store
//! (`wirelog_store::StoreSink`), ClickHouse (`wirelog_clickhouse`).
//!
//! The TSV logs have Zeek's header lines (`#separator`, `#fields`, `#types`,
//! ...) and field formatting, so `zeek-cut` and SIEM parsers written for Zeek
//! read them unchanged. The JSON form is one object per line with Zeek's
//! field names, unset fields omitted (as Zeek's JSON writer does).
//!
//! ```
//! use wirelog_sink::{ConnLogWriter, LogFormat, LogOut, Output};
//! use wirelog_record::Batch;
//!
//! // conn.log to standard output, nothing else.
//! let conn_log = ConnLogWriter::new(LogOut::stdout(), LogFormat::Tsv);
//! let mut output = Output::start(vec![Box::new(conn_log)], None, Default::default()).unwrap();
//! output.send(Batch::default()).unwrap();
//! let summary = output.finish().unwrap();
//! assert_eq!(summary.conns, 0);
//! ```

pub mod logs;
pub mod output;

use std::io;
use std::time::Instant;

pub use logs::file::{available, LogFile, LogFileStats};
pub use logs::flows::FlowLogWriter;
pub use logs::out::{LogDir, LogOut, TakeLines};
pub use logs::tls::X509LogWriter;
pub use logs::tx::{tx_log_name, TxLogWriter, TxLogs};
pub use logs::zeek::{ConnLogWriter, LogFormat};
pub use output::fanout::{Live, Summary, FLUSH_BUCKETS, TX_STATUS};
pub use output::threaded::MAX_PENDING_RECORDS;
pub use output::{BatchSender, Output};
pub use wirelog_record::Batch;

/// Where records go: a log, the store, ClickHouse. The output stage owns
/// every sink on its thread (or, for [`Sink::own_thread`], a thread of the
/// sink's own) and hands each the same batches in order; nothing here runs
/// on the packet path. A sink that cannot write keeps
/// (spools, buffers) or counts what it could not write; an `Err` from it
/// ends the run, so it is for failures nothing can be done about.
pub trait Sink: Send {
    /// Its name in messages ("conn.log", "store", "clickhouse", ...).
    fn name(&self) -> &str;
    /// Takes the records of one batch (a batch may hold only ingests).
    fn write(&mut self, batch: &Batch) -> io::Result<()>;
    /// Called about once a second, with or without batches: write out what
    /// is due (log lines for `tail -f`, a store's periodic flush, a
    /// ClickHouse batch past its age limit) and try again what waits for
    /// disk space.
    fn tick(&mut self, now: Instant) -> io::Result<()>;
    /// How it stands with disk space now (for the warning when the disk
    /// fills and the running count of what was dropped).
    fn space(&self) -> Space {
        Space::default()
    }
    /// The end of the run: write out everything held, release the files, and
    /// say what could not be written.
    fn close(&mut self) -> io::Result<SinkEnd>;
    /// After every sink of the run has closed, in the same order: make the
    /// run final. `complete` is true when every sink closed without an error
    /// and none lost records (a ClickHouse batch dropped): only then may the
    /// captures read be recorded as ingested (the store), since each of them
    /// is then in every sink, or durably on its way (a spool). Called once,
    /// also after a failure (with `false`).
    fn commit(&mut self, complete: bool) -> io::Result<()> {
        let _ = complete;
        Ok(())
    }
    /// True for a sink whose writes cost more than the rest of the output
    /// stage (the store's Parquet encoding): it then runs on a thread of its
    /// own, fed the same batches in the same order, and ticked there.
    fn own_thread(&self) -> bool {
        false
    }
}

/// A sink's disk-space state (see [`Sink::space`]).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Space {
    /// Records dropped so far because the disk stayed full.
    pub dropped: u64,
    /// Set while records wait in memory for space: why, naming the file.
    pub waiting: Option<String>,
}

/// What a sink says when it closes (see [`Sink::close`]).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct SinkEnd {
    /// Records dropped because the disk stayed full, per file or table
    /// ("conn.log", "store conns"), the ones with drops only.
    pub dropped: Vec<(String, u64)>,
    /// Writes that found the disk full (each kept for a retry).
    pub space_failures: u64,
    /// Writes put off because free space was below `--min-free`.
    pub pauses: u64,
    /// Store partitions deleted to keep `--min-free`.
    pub freed_partitions: u64,
    /// A line for the run's summary (ClickHouse: rows sent, spooled, lost).
    pub report: Option<Report>,
}

/// A sink's own line in the run's summary.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub text: String,
    /// Shown even with `--quiet` (something is missing or left over).
    pub always: bool,
    /// Records were lost: the run ends "partial" (exit code 3).
    pub lost: bool,
}
