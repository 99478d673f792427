//! Packet sources: capture files (pcap, pcapng, either gzip-compressed, or stdin).
//!
//! A source hands out borrowed [`Packet`]s, valid until the next call, so the
//! hot path never copies packet bytes. Problems in the input (a truncated file,
//! a corrupt block, ...) never stop the read where it can go on: they are
//! counted per [`ProblemKind`], with the file and byte offset of the first
//! occurrence, and the caller reports them once per kind.
//!
//! Formats: pcap (micro- or nanosecond, either byte order), pcapng (any number
//! of sections and interfaces), and either of them gzip-compressed. Regular
//! files are memory-mapped and walked in place; gzip, pipes and stdin stream
//! through one reusable buffer.
//!
//! ```no_run
//! use wirelog_source::CaptureReader;
//!
//! let mut reader = CaptureReader::open("capture.pcap.gz".as_ref())?;
//! let mut bytes = 0u64;
//! while let Some(pkt) = reader.next_packet() {
//!     bytes += pkt.data.len() as u64;
//! }
//! for p in reader.problems() {
//!     eprintln!("{}: {} ({}x, first at byte {}: {})",
//!         reader.name(), p.kind.as_str(), p.count, p.first_offset, p.detail);
//! }
//! # Ok::<(), wirelog_source::OpenError>(())
//! ```

mod error;
mod format;
mod input;
mod pcap;
mod pcapng;
mod problem;
mod reader;
#[cfg(test)]
mod testutil;

pub use error::{OpenError, OpenErrorKind};
pub use reader::CaptureReader;
/// The packet type, link types and time are `wirelog-packet`'s, shared with
/// live capture and the decoder.
pub use wirelog_packet::{KernelChecksum, LinkType, Packet, TimestampNs};

/// What can be wrong with a capture file. Each kind is reported once, with a count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ProblemKind {
    /// The file ends in the middle of a record or block.
    Truncated,
    /// A block or record header is inconsistent (bad length, bad magic); skipped.
    CorruptBlock,
    /// A packet record's captured length exceeds the file's snaplen or a sane maximum.
    OversizedPacket,
    /// A packet refers to a pcapng interface that was never described.
    UnknownInterface,
    /// The decompressor reported an error (corrupt gzip stream).
    Decompression,
    /// An I/O error while reading.
    Io,
}

impl ProblemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProblemKind::Truncated => "truncated file",
            ProblemKind::CorruptBlock => "corrupt block",
            ProblemKind::OversizedPacket => "oversized packet record",
            ProblemKind::UnknownInterface => "packet on undeclared interface",
            ProblemKind::Decompression => "decompression error",
            ProblemKind::Io => "I/O error",
        }
    }
}

/// First occurrence and count of one problem kind in one file.
#[derive(Debug, Clone)]
pub struct Problem {
    pub kind: ProblemKind,
    pub count: u64,
    /// Byte offset (in the uncompressed stream) of the first occurrence.
    pub first_offset: u64,
    /// Human-readable detail of the first occurrence, e.g. "block length 12 < 16".
    pub detail: String,
}

/// One capture interface: a pcapng interface description block, or the pcap
/// file header.
#[derive(Debug, Clone)]
pub struct Interface {
    /// The id its packets carry: its position among all IDBs of the file
    /// (unique across pcapng sections); 0 for pcap.
    pub if_id: u32,
    /// pcapng section (0-based) that declared it; 0 for pcap.
    pub section: u32,
    pub linktype: LinkType,
    /// Snapshot length; 0 means no limit (pcapng).
    pub snaplen: u32,
    /// Raw timestamp resolution (`if_tsresol`): 6 = microseconds (the pcapng
    /// default and pcap), 9 = nanoseconds; high bit set = power of 2.
    pub tsresol: u8,
    /// `if_tsoffset`: seconds added to every timestamp (already applied to `ts_ns`).
    pub ts_offset_s: i64,
    pub(crate) conv: format::TsConv,
    pub(crate) offset_ns: i64,
}

/// Container format of a capture file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileFormat {
    Pcap {
        nanosecond: bool,
        big_endian: bool,
    },
    /// Byte order may differ per section.
    Pcapng,
}
