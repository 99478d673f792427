//! The packets of chosen connections, from the indexes: each file's index
//! says where its records are; they are read where they are (no scan of
//! the data) and written in time order to one nanosecond pcap file. Files
//! whose time cannot hold the connections are passed over by their names,
//! and a closed file's sorted index is sought into, not read whole.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::index::lookup;
use crate::name::list_pcaps;
use crate::writer::{is_ns_pcap, PCAP_NS_MAGIC};

/// Packets of one connection may be written this long after the next file
/// began (several workers share the writer, each a little behind); a
/// connection's packets may come this long after its record ends.
const FILE_OVERLAP_NS: i64 = 60_000_000_000;

/// When the wanted connections had packets, as far as the caller knows
/// (their records' start and end; `None`: unknown): files that cannot hold
/// any of them are not read.
#[derive(Debug, Clone, Copy, Default)]
pub struct Window {
    pub from_ns: Option<i64>,
    pub to_ns: Option<i64>,
}

/// What an extraction found.
#[derive(Debug, Default)]
pub struct ExtractSummary {
    pub packets: u64,
    /// Uids with at least one packet in the directory.
    pub uids_found: usize,
    /// pcap files whose index was read, and those with packets written.
    pub files_indexed: usize,
    /// Bytes read from the indexes.
    pub index_bytes: u64,
    pub files_read: usize,
    /// Files without an index, indexes that ended inside a block.
    pub warnings: Vec<String>,
}

/// A record to copy: (time, file, offset, captured length).
type Rec = (i64, usize, u64, u32);

/// Writes the packets of `uids` found in `dir` to `out`, in time order.
/// Files outside `window` (widened by a minute each side) are not looked
/// at: by their names (a file's successor began before the window, or it
/// began after it), then by the times in their index.
pub fn extract(dir: &Path, uids: &HashSet<String>, window: Window, out: &mut dyn Write) -> io::Result<ExtractSummary> {
    plan(dir, uids, window)?.write(out)
}

/// Where the packets of some connections are, read from the indexes only:
/// what [`Extraction::write`] will copy, and how many bytes that makes
/// (known before anything is written, as an HTTP download needs).
pub struct Extraction {
    summary: ExtractSummary,
    recs: Vec<Rec>,
    opened: Vec<File>,
    linktype: u32,
    snaplen: u32,
}

impl Extraction {
    /// Packets found.
    pub fn packets(&self) -> u64 {
        self.recs.len() as u64
    }

    /// The size of the pcap file [`Extraction::write`] writes.
    pub fn bytes(&self) -> u64 {
        24 + self.recs.iter().map(|r| 16 + u64::from(r.3)).sum::<u64>()
    }

    /// What the indexes said (uids found, files, warnings).
    pub fn summary(&self) -> &ExtractSummary {
        &self.summary
    }

    /// Writes the nanosecond pcap file: its header, then the packets in
    /// time order, read where the indexes say they are.
    pub fn write(self, out: &mut dyn Write) -> io::Result<ExtractSummary> {
        let Extraction { mut summary, recs, opened, linktype, snaplen } = self;
        let mut w = io::BufWriter::with_capacity(1 << 20, out);
        w.write_all(&PCAP_NS_MAGIC.to_le_bytes())?;
        w.write_all(&2u16.to_le_bytes())?;
        w.write_all(&4u16.to_le_bytes())?;
        w.write_all(&[0u8; 8])?;
        w.write_all(&snaplen.max(65535).to_le_bytes())?;
        w.write_all(&linktype.to_le_bytes())?;
        let mut buf = Vec::new();
        for &(_, fi, o, cap) in &recs {
            buf.resize(16 + cap as usize, 0);
            opened[fi].read_exact_at(&mut buf, o)?;
            w.write_all(&buf)?;
            summary.packets += 1;
        }
        w.flush()?;
        Ok(summary)
    }
}

/// Finds the packets of `uids` in `dir` (see [`extract`]) without copying
/// them.
pub fn plan(dir: &Path, uids: &HashSet<String>, window: Window) -> io::Result<Extraction> {
    let files = list_pcaps(dir).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    let mut s = ExtractSummary::default();
    let mut found: HashSet<String> = HashSet::new();
    let mut recs: Vec<Rec> = Vec::new();
    let mut opened: Vec<(usize, File)> = Vec::new();
    let mut linktype: Option<u32> = None;
    let mut snaplen = 0u32;
    let (from, to) = (window.from_ns.unwrap_or(i64::MIN), window.to_ns.unwrap_or(i64::MAX));
    for (i, f) in files.iter().enumerate() {
        let next = files.get(i + 1).map_or(i64::MAX, |n| n.start_ns);
        if next < from.saturating_sub(FILE_OVERLAP_NS) || f.start_ns > to.saturating_add(FILE_OVERLAP_NS) {
            continue;
        }
        let wide = (from.saturating_sub(FILE_OVERLAP_NS), to.saturating_add(FILE_OVERLAP_NS));
        let ix = match lookup(&f.index_path(), uids, Some(wide)) {
            Ok(ix) => ix,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                s.warnings.push(format!("{}: no index, its packets are not searched", f.path.display()));
                continue;
            }
            Err(e) => return Err(e),
        };
        s.files_indexed += 1;
        s.index_bytes += ix.bytes_read;
        if ix.torn_tail {
            s.warnings.push(format!("{}: the index ends inside a block (a writer was stopped); its complete blocks are used", f.index_path().display()));
        }
        if ix.entries.is_empty() {
            continue;
        }
        let file = File::open(&f.path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", f.path.display())))?;
        let len = file.metadata()?.len();
        let mut head = [0u8; 24];
        file.read_exact_at(&mut head, 0)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: pcap header: {e}", f.path.display())))?;
        if !is_ns_pcap(&head) {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{}: not a nanosecond pcap file", f.path.display())));
        }
        let lt = u32::from_le_bytes(head[20..24].try_into().unwrap());
        match linktype {
            None => linktype = Some(lt),
            Some(l) if l != lt => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{}: link type {lt}, other packets have {l}: one pcap file cannot hold both", f.path.display()),
                ))
            }
            Some(_) => {}
        }
        snaplen = snaplen.max(u32::from_le_bytes(head[16..20].try_into().unwrap()));
        let end = len.min(ix.data_end);
        for e in &ix.entries {
            found.insert(e.uid.clone());
            for &o in &e.offsets {
                let mut h = [0u8; 16];
                file.read_exact_at(&mut h, o)?;
                let sec = u32::from_le_bytes(h[0..4].try_into().unwrap()) as i64;
                let ns = u32::from_le_bytes(h[4..8].try_into().unwrap()) as i64;
                let cap = u32::from_le_bytes(h[8..12].try_into().unwrap());
                if o + 16 + cap as u64 > end {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{}: the index points past the data (record at byte {o})", f.path.display()),
                    ));
                }
                recs.push((sec * 1_000_000_000 + ns, opened.len(), o, cap));
            }
        }
        opened.push((i, file));
    }
    recs.sort_unstable();
    recs.dedup();
    s.uids_found = found.len();
    s.files_read = opened.len();
    let opened = opened.into_iter().map(|(_, f)| f).collect();
    Ok(Extraction { summary: s, recs, opened, linktype: linktype.unwrap_or(1), snaplen })
}
