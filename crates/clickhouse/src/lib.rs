//! wirelog's ClickHouse sink: flows, connections, every transaction kind and
//! the probe's health rows, inserted in batches over ClickHouse's HTTP
//! interface with the official `clickhouse` crate (RowBinary, LZ4), with an
//! on-disk spool that keeps what ClickHouse did not take; and the schema
//! `wirelog clickhouse init` creates.
//!
//! Nothing here runs on the packet path: the output stage calls the sink
//! ([`ClickHouseSink`], a [`wirelog_sink::Sink`]), which only encodes rows
//! and hands batches to its own sender thread.

mod client;
pub mod query;
mod rows;
pub mod schema;
mod sink;
mod spool;

pub use client::{run_sql, ChError, Server};
pub use rows::Health;
pub use schema::{Layout, Table, SCHEMA_VERSION};
pub use sink::{ClickHouseSink, Config, HealthSender, Summary};
pub use spool::Spool;
