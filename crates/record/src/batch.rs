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
    /// Completeness rows (the `loss` table): what each packet path and the
    /// sinks could not record, per minute.
    pub losses: Vec<crate::LossRecord>,
}

/// Room for records of each kind a recycled batch keeps (see [`Batch::recycle`]):
/// above what a batch normally carries (`read` hands over every 4,096 packets,
/// a capture worker every few ring blocks).
pub const RECYCLED_CAPACITY: usize = 16_384;

impl Batch {
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty() && self.flows.is_empty() && self.txs.is_empty() && self.ingests.is_empty() && self.losses.is_empty()
    }

    /// Fills what the packet path leaves to the output stage (each
    /// connection's Community ID): once per record, before the sinks.
    pub fn fill_deferred(&mut self) {
        for r in &mut self.conns {
            r.fill_community_id();
        }
    }

    /// Records held (connections, flows and transactions).
    pub fn records(&self) -> usize {
        self.conns.len() + self.flows.len() + self.txs.len()
    }

    /// Empties the batch for reuse. Vectors that grew past
    /// [`RECYCLED_CAPACITY`] records (a live capture worker held the batch
    /// while the writer was behind) give the rest back, so that one stall
    /// does not pin its peak memory in every recycled batch for the rest of the run.
    pub fn recycle(&mut self) {
        self.clear();
        self.conns.shrink_to(RECYCLED_CAPACITY);
        self.flows.shrink_to(RECYCLED_CAPACITY);
        self.txs.shrink_to(RECYCLED_CAPACITY);
    }

    pub fn clear(&mut self) {
        self.conns.clear();
        self.flows.clear();
        self.txs.clear();
        self.ingests.clear();
        self.losses.clear();
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

#[cfg(test)]
mod recycle_tests {
    use super::*;

    #[test]
    fn a_recycled_batch_keeps_normal_room_and_gives_back_a_stalls_peak() {
        let mut b = Batch::default();
        b.txs.reserve_exact(10);
        b.recycle();
        assert!(b.is_empty() && b.txs.capacity() >= 10);
        b.conns.reserve_exact(RECYCLED_CAPACITY * 8);
        b.recycle();
        assert!(b.conns.capacity() >= 10 && b.conns.capacity() <= RECYCLED_CAPACITY);
    }
}
