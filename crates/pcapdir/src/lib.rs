//! Kept packets: the pcap files `--pcap-dir` writes, their index, and the
//! way back from a connection uid to its packets.
//!
//! A probe hands the packets it keeps to a [`KeepSender`], which copies them
//! into a batch and passes full batches to the writer thread with
//! `try_send`: a packet path never waits for the disk. A batch that does not
//! fit in the queue is dropped from the pcap and counted (the records are
//! not affected). The writer ([`PcapDir`]) writes nanosecond pcap files in
//! large sequential writes, rotates them by size and by wall-clock-aligned
//! packet time, flushes each written range to disk and drops it from the
//! page cache, and keeps the directory a ring bounded by count, size and age.
//!
//! Beside each `NAME.pcap` an index `NAME.idx` says, per connection uid,
//! where its packets are ([`index`]); it is appended only once the data it
//! points to is on disk, and sorted by uid hash once the file is closed.
//! [`extract`] looks the chosen uids up in the indexes (seeking in sorted
//! ones) and writes their packets, in time order, to one pcap file.

pub mod extract;
pub mod index;
mod name;
mod ring;
mod writer;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

pub use name::{list_pcaps, PcapFile};
pub use ring::RingLimits;
pub use wirelog_record::Uid;
pub use writer::{PcapDir, PcapDirConfig, WriterSummary};

/// A batch is handed to the writer when it holds this many bytes of packets...
const BATCH_BYTES: usize = 256 << 10;
/// ... or this many packets.
const BATCH_PACKETS: usize = 2048;

/// One kept packet's place in a [`KeptBatch`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Meta {
    pub ts_ns: i64,
    pub orig_len: u32,
    pub cap_len: u32,
    pub linktype: u32,
    pub uid: Option<Uid>,
}

/// Packets copied out of a packet path, on their way to the writer.
#[derive(Default)]
pub struct KeptBatch {
    pub(crate) data: Vec<u8>,
    pub(crate) meta: Vec<Meta>,
}

impl KeptBatch {
    fn clear(&mut self) {
        self.data.clear();
        self.meta.clear();
    }
}

/// What every sender of one directory counted, and what its writer did
/// (read by `capture`'s stats line and `read`'s summary).
#[derive(Default, Debug)]
pub struct KeepCounters {
    /// Packets handed to the writer.
    pub kept: AtomicU64,
    /// Packets the keep rules left out (cutoff, `parsed`, `--pcap-filter`).
    pub cut: AtomicU64,
    /// Packets to keep that did not fit in the writer's queue.
    pub dropped: AtomicU64,
    /// Packets and bytes (records with their headers) written to pcap files.
    pub written: AtomicU64,
    pub written_bytes: AtomicU64,
    /// Packets lost to write errors (a full disk).
    pub write_failed: AtomicU64,
    /// pcap files opened and ring files deleted.
    pub files: AtomicU64,
    pub deleted: AtomicU64,
}

impl KeepCounters {
    /// `kept K, cut C, dropped D (queue full), written W to F files (B bytes)`.
    pub fn text(&self) -> String {
        let mut s = format!(
            "pcap: {} packets kept, {} cut, {} dropped (writer queue full), {} written ({} bytes) to {} files, {} old files deleted",
            self.kept.load(Relaxed),
            self.cut.load(Relaxed),
            self.dropped.load(Relaxed),
            self.written.load(Relaxed),
            self.written_bytes.load(Relaxed),
            self.files.load(Relaxed),
            self.deleted.load(Relaxed),
        );
        let failed = self.write_failed.load(Relaxed);
        if failed > 0 {
            s.push_str(&format!(", {failed} lost to write errors"));
        }
        s
    }
}

/// A packet path's end of the writer's queue: copies kept packets into a
/// batch and sends full batches, without ever blocking unless it was made to
/// wait (reading files: nothing is lost for going faster than the disk).
pub struct KeepSender {
    tx: SyncSender<KeptBatch>,
    /// Emptied batches the writer gives back (one lock per batch).
    spares: Arc<Mutex<Vec<KeptBatch>>>,
    counters: Arc<KeepCounters>,
    batch: KeptBatch,
    snaplen: u32,
    /// Counted here, published with each batch.
    cut: u64,
    /// Wait for room in the queue instead of dropping (offline readers).
    wait: bool,
}

impl KeepSender {
    /// Keeps one packet: its first `snaplen` bytes, its time, its length on
    /// the wire, its link type and its connection's uid (none for packets of
    /// no connection).
    #[inline]
    pub fn keep(&mut self, ts_ns: i64, wire_len: u32, linktype: u32, data: &[u8], uid: Option<Uid>) {
        let cap = data.len().min(self.snaplen as usize);
        self.batch.data.extend_from_slice(&data[..cap]);
        self.batch.meta.push(Meta {
            ts_ns,
            orig_len: wire_len.max(cap as u32),
            cap_len: cap as u32,
            linktype,
            uid,
        });
        if self.batch.data.len() >= BATCH_BYTES || self.batch.meta.len() >= BATCH_PACKETS {
            self.flush();
        }
    }

    /// Counts a packet the rules left out.
    #[inline]
    pub fn cut(&mut self) {
        self.cut += 1;
    }

    /// Hands what was kept so far to the writer (or drops it, counted, when
    /// the writer's queue is full).
    pub fn flush(&mut self) {
        if self.cut > 0 {
            self.counters.cut.fetch_add(std::mem::take(&mut self.cut), Relaxed);
        }
        if self.batch.meta.is_empty() {
            return;
        }
        let n = self.batch.meta.len() as u64;
        let spare = self.spares.lock().ok().and_then(|mut s| s.pop()).unwrap_or_default();
        let full = std::mem::replace(&mut self.batch, spare);
        let sent = if self.wait {
            self.tx.send(full).map_err(|e| TrySendError::Disconnected(e.0))
        } else {
            self.tx.try_send(full)
        };
        match sent {
            Ok(()) => {
                self.counters.kept.fetch_add(n, Relaxed);
            }
            Err(TrySendError::Full(mut b)) | Err(TrySendError::Disconnected(mut b)) => {
                self.counters.dropped.fetch_add(n, Relaxed);
                b.clear();
                self.batch = b;
            }
        }
    }

    pub fn counters(&self) -> &Arc<KeepCounters> {
        &self.counters
    }

    /// Waits for room in the writer's queue instead of dropping a batch: for
    /// reading files, where the packet path may wait for the disk (a live
    /// capture worker never does).
    pub fn waiting(mut self) -> KeepSender {
        self.wait = true;
        self
    }
}

impl Drop for KeepSender {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests;
