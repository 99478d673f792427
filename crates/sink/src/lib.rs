//! Sinks: where records go: Zeek-compatible conn.log files, and a flows.log
//! and transaction logs (http.log, dns.log, mysql.log, ...) in the same
//! conventions.
//!
//! The TSV form has Zeek's header lines (`#separator`, `#fields`, `#types`,
//! ...) and field formatting, so `zeek-cut` and SIEM parsers written for Zeek
//! read it unchanged. The JSON form is one object per line with Zeek's field
//! names, unset fields omitted (as Zeek's JSON writer does).

mod file;
mod flows;
mod procs;
mod tx;
mod zeek;

pub use file::{available, LogFile, LogFileStats};
pub use flows::FlowLogWriter;
pub use tx::{tx_log_name, TxLogWriter};
pub use zeek::{ConnLogWriter, LogFormat};
