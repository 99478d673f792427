//! Sinks: where records go: Zeek-compatible conn.log files, and a flows.log
//! and transaction logs (http.log, dns.log, mysql.log, ssl.log with its
//! x509.log, ...) in the same conventions.
//!
//! The TSV form has Zeek's header lines (`#separator`, `#fields`, `#types`,
//! ...) and field formatting, so `zeek-cut` and SIEM parsers written for Zeek
//! read it unchanged. The JSON form is one object per line with Zeek's field
//! names, unset fields omitted (as Zeek's JSON writer does).

mod file;
mod flows;
mod procs;
mod tls;
mod tx;
mod zeek;

pub use file::{available, LogFile, LogFileStats};
pub use flows::FlowLogWriter;
pub use tls::{OpenLog, X509LogWriter};
pub use tx::{tx_log_name, TxLogWriter};
pub use zeek::{ConnLogWriter, LogFormat};

/// Where records go: a log writer, the store, ClickHouse. The output stage
/// owns every sink on its one thread and hands each the same batches in
/// order; nothing here runs on the packet path. A sink that cannot write
/// keeps (spools, buffers) or counts what it could not write; an `Err` from
/// it ends the run, so it is for failures nothing can be done about.
pub trait Sink: Send {
    /// Its name in messages and the summary ("conn.log", "store", ...).
    fn name(&self) -> &str;
    /// Takes the records of one batch (a batch may hold only ingests).
    fn write(&mut self, batch: &wirelog_record::Batch) -> std::io::Result<()>;
    /// Called about once a second with no batch: write out what is due
    /// (log lines for `tail -f`, a store's periodic flush, a ClickHouse
    /// batch past its age limit, retries of a spool).
    fn tick(&mut self, now: std::time::Instant) -> std::io::Result<()>;
    /// The end of the run: write out everything held and release the files.
    fn close(&mut self) -> std::io::Result<()>;
}
