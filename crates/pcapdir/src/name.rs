//! File names of the ring: `wirelog-20261126T095000.123456789Z-000001.pcap`,
//! the UTC time of the file's first packet and a sequence number, so that
//! names sort by time; the index beside it ends in `.idx`.

use std::io;
use std::path::{Path, PathBuf};

use wirelog_record::civil::civil_from_days;

const PREFIX: &str = "wirelog-";

/// One pcap file of a directory.
#[derive(Debug, Clone)]
pub struct PcapFile {
    pub path: PathBuf,
    /// Time of its first packet, from its name.
    pub start_ns: i64,
    /// Bytes of the pcap file and its index.
    pub bytes: u64,
}

impl PcapFile {
    pub fn index_path(&self) -> PathBuf {
        index_path(&self.path)
    }
}

pub(crate) fn index_path(pcap: &Path) -> PathBuf {
    pcap.with_extension("idx")
}

/// The name of a file whose first packet is at `ts_ns`.
pub(crate) fn file_name(ts_ns: i64, seq: u64) -> String {
    let secs = ts_ns.div_euclid(1_000_000_000);
    let nanos = ts_ns.rem_euclid(1_000_000_000);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    format!(
        "{PREFIX}{y:04}{m:02}{d:02}T{:02}{:02}{:02}.{nanos:09}Z-{seq:06}.pcap",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// The time in a name [`file_name`] made, or `None` for other files.
fn parse_name(name: &str) -> Option<i64> {
    let rest = name.strip_prefix(PREFIX)?.strip_suffix(".pcap")?;
    let b = rest.as_bytes();
    if b.len() < 33 || b[8] != b'T' || b[15] != b'.' || b[25] != b'Z' || b[26] != b'-' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| rest.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (h, mi, s) = (num(9..11)?, num(11..13)?, num(13..15)?);
    let nanos = num(16..25)?;
    let days = wirelog_record::civil::days_from_civil(y, mo as u32, d as u32);
    Some(((days * 86_400 + h * 3600 + mi * 60 + s) * 1_000_000_000) + nanos)
}

/// The pcap files of `dir` that wirelog wrote, oldest first (by name).
pub fn list_pcaps(dir: &Path) -> io::Result<Vec<PcapFile>> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        let Some(start_ns) = name.to_str().and_then(parse_name) else {
            continue;
        };
        let path = e.path();
        let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        let bytes = size(&path) + size(&index_path(&path));
        files.push(PcapFile { path, start_ns, bytes });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_by_time_and_parse_back() {
        let t = 1_764_150_600_123_456_789; // 2025-11-26T09:50:00.123456789Z
        let n = file_name(t, 7);
        assert_eq!(n, "wirelog-20251126T095000.123456789Z-000007.pcap");
        assert_eq!(parse_name(&n), Some(t));
        assert!(file_name(t, 999) < file_name(t + 1, 0));
        assert!(file_name(t, 1) < file_name(t, 2));
        assert_eq!(parse_name("wirelog-x.pcap"), None);
        assert_eq!(parse_name("other.pcap"), None);
    }
}
