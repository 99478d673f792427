//! What travels from the packet path to the sinks: records in batches, and
//! the captures whose records are complete once a batch is written.

use crate::{ConnRecord, FlowRecord, TxRecord};

/// Records handed from the packet path to the output stage in one message.
/// Batches are reused: the output stage clears them and sends them back, so
/// their vectors keep their capacity.
#[derive(Default)]
pub struct Batch {
    pub conns: Vec<ConnRecord>,
    pub flows: Vec<FlowRecord>,
    pub txs: Vec<TxRecord>,
    /// Captures whose records are all in this batch or earlier ones: a
    /// store lists them once those are written.
    pub ingests: Vec<Ingest>,
}

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty() && self.flows.is_empty() && self.txs.is_empty() && self.ingests.is_empty()
    }

    /// Records held (connections, flows and transactions).
    pub fn records(&self) -> usize {
        self.conns.len() + self.flows.len() + self.txs.len()
    }

    pub fn clear(&mut self) {
        self.conns.clear();
        self.flows.clear();
        self.txs.clear();
        self.ingests.clear();
    }
}

/// One capture file read completely (`wirelog read`): what a store lists in
/// its registry so the same capture is not read twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ingest {
    /// Content identity of the file (the store's `identify`).
    pub identity: String,
    /// The path as given when it was read.
    pub path: String,
    pub packets: u64,
    /// Time of the first and last packet (ns since the epoch; 0 without packets).
    pub first_ns: i64,
    pub last_ns: i64,
    /// When it was read (ns since the epoch).
    pub ingested_ns: i64,
    /// The packet filter it was read with ("" for none).
    pub filter: String,
}
