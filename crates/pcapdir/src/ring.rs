//! The ring: closed pcap files are deleted, oldest first, while the
//! directory holds more files, more bytes or older packets than allowed.
//! The open file is never deleted.

use std::path::Path;

use crate::name::{list_pcaps, PcapFile};

/// Bounds of the ring (`--pcap-keep count=100,size=50G,age=7d`); `None`:
/// unbounded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingLimits {
    /// Files, the open one included.
    pub count: Option<u64>,
    /// Bytes of pcap files and indexes, the open file counted at its full
    /// `--pcap-file-size`.
    pub size: Option<u64>,
    /// A closed file goes once its newest packet (the next file's first) is
    /// this much older than the newest packet written (packet time).
    pub age_ns: Option<i64>,
}

impl RingLimits {
    /// Parses `count=N,size=SIZE,age=DURATION` (any subset, in any order);
    /// `parse_size` and `parse_duration` read the values.
    pub fn parse(
        s: &str,
        parse_size: impl Fn(&str) -> Result<u64, String>,
        parse_duration_ns: impl Fn(&str) -> Result<i64, String>,
    ) -> Result<RingLimits, String> {
        let mut r = RingLimits::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("'{part}': expected count=N, size=SIZE or age=DURATION"))?;
            match k.trim() {
                "count" => {
                    let n: u64 = v.trim().parse().map_err(|_| format!("count={v}: not a number"))?;
                    if n < 2 {
                        return Err(format!("count={v}: at least 2 (the open file and one closed)"));
                    }
                    r.count = Some(n);
                }
                "size" => r.size = Some(parse_size(v)?),
                "age" => r.age_ns = Some(parse_duration_ns(v)?),
                other => return Err(format!("'{other}': unknown bound (count, size or age)")),
            }
        }
        if r == RingLimits::default() {
            return Err(format!("'{s}': no bound given (count=N, size=SIZE, age=DURATION)"));
        }
        Ok(r)
    }

    pub fn is_unbounded(&self) -> bool {
        *self == RingLimits::default()
    }
}

/// Deletes the oldest closed files of `dir` beyond `limits`; `open` is the
/// file being written (never deleted), `file_size` what it may grow to,
/// `newest_ns` the newest packet time written. Returns the files deleted.
pub(crate) fn enforce(
    dir: &Path,
    limits: &RingLimits,
    open: Option<&Path>,
    file_size: u64,
    newest_ns: i64,
) -> std::io::Result<Vec<PcapFile>> {
    if limits.is_unbounded() {
        return Ok(Vec::new());
    }
    let all = list_pcaps(dir)?;
    let open_start = open.and_then(|o| all.iter().find(|f| f.path == o).map(|f| f.start_ns));
    let closed: Vec<&PcapFile> = all.iter().filter(|f| Some(f.path.as_path()) != open).collect();
    let reserved = if open.is_some() { 1 } else { 0 };
    let mut total: u64 = closed.iter().map(|f| f.bytes).sum::<u64>() + if open.is_some() { file_size } else { 0 };
    let mut count = closed.len() as u64 + reserved;
    let mut deleted = Vec::new();
    for (i, f) in closed.iter().enumerate() {
        let next_start = closed.get(i + 1).map(|n| n.start_ns).or(open_start).unwrap_or(i64::MAX);
        let too_many = limits.count.is_some_and(|c| count > c);
        let too_big = limits.size.is_some_and(|s| total > s);
        let too_old = limits.age_ns.is_some_and(|a| next_start < newest_ns.saturating_sub(a));
        if !(too_many || too_big || too_old) {
            break;
        }
        // Removed through the directory (never following a link).
        let (dir, name) = wirelog_safefs::parent_of(&f.path)?;
        dir.remove_file(name)?;
        let _ = dir.remove_file(f.index_path().file_name().unwrap_or_default());
        total -= f.bytes;
        count -= 1;
        deleted.push((*f).clone());
    }
    Ok(deleted)
}
