//! Sinks: where records go. For now, Zeek-compatible conn.log files and a
//! flows.log in the same conventions.
//!
//! The TSV form has Zeek's header lines (`#separator`, `#fields`, `#types`,
//! ...) and field formatting, so `zeek-cut` and SIEM parsers written for Zeek
//! read it unchanged. The JSON form is one object per line with Zeek's field
//! names, unset fields omitted (as Zeek's JSON writer does).

mod flows;
mod zeek;

pub use flows::FlowLogWriter;
pub use zeek::{ConnLogWriter, LogFormat};
