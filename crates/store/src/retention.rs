//! Retention: whole hour partitions are deleted by age and by total size.
//!
//! A partition is first renamed to a hidden name (`.del-hour=HH-<nanos>`),
//! which readers ignore, and then removed: a reader sees a partition whole or
//! not at all. `Store::open` removes what a crash left of such a deletion.

use std::path::Path;
use std::time::Duration;

use crate::batch::Kind;
use crate::error::StoreError;
use crate::fsutil::{list_dir, sync_dir};
use crate::layout::{list_partitions, Partition};

/// What a retention pass deleted and kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionReport {
    pub partitions_deleted: u64,
    pub bytes_deleted: u64,
    pub partitions_kept: u64,
    pub bytes_kept: u64,
}

/// The wall clock, ns since the epoch.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Where the last retention limits given to a writer are kept, for
/// `wirelog store` to show: `<age seconds or ->\t<bytes or ->\t<set at ns>`.
const LIMITS_FILE: &str = "retention.tsv";

/// The retention limits a writer of this store was last opened with, and
/// when (limits are options of each run; the store applies them while a
/// writer has it open).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedLimits {
    pub age: Option<Duration>,
    pub bytes: Option<u64>,
    pub set_ns: i64,
}

pub(crate) fn record_limits(dir: &Path, age: Option<Duration>, bytes: Option<u64>) -> Result<(), StoreError> {
    let dash = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
    let text = format!("{}\t{}\t{}\n", dash(age.map(|a| a.as_secs())), dash(bytes), now_ns());
    let dst = dir.join(LIMITS_FILE);
    let tmp = dir.join(format!(".{LIMITS_FILE}.tmp"));
    let mut f = crate::fsutil::create_temp(&tmp)?;
    std::io::Write::write_all(&mut f, text.as_bytes()).map_err(|e| StoreError::io(&tmp, "write", e))?;
    crate::fsutil::publish(&f, &tmp, &dst, true)
}

/// The limits recorded by [`record_limits`], None when no run set any.
pub fn recorded_limits(dir: &Path) -> Result<Option<RecordedLimits>, StoreError> {
    let path = dir.join(LIMITS_FILE);
    let Some(text) = crate::fsutil::read_own_file(&path)? else {
        return Ok(None);
    };
    let f: Vec<&str> = text.trim_end().split('\t').collect();
    let num = |s: &str| -> Result<Option<u64>, StoreError> {
        if s == "-" {
            return Ok(None);
        }
        s.parse().map(Some).map_err(|_| StoreError::corrupt(&path, format!("{s:?} is not a number")))
    };
    if f.len() != 3 {
        return Err(StoreError::corrupt(&path, "expected 3 tab-separated fields"));
    }
    Ok(Some(RecordedLimits {
        age: num(f[0])?.map(Duration::from_secs),
        bytes: num(f[1])?,
        set_ns: num(f[2])?.unwrap_or(0) as i64,
    }))
}

/// Bytes of the files in a directory (not recursive: partitions are flat).
pub fn dir_bytes(dir: &Path) -> Result<u64, StoreError> {
    let mut total = 0;
    for (_, p) in list_dir(dir)? {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_file() => total += m.len(),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io(&p, "stat", e)),
        }
    }
    Ok(total)
}

/// Deletes a partition directory: hidden rename first, then removal.
pub fn delete_partition(p: &Partition) -> Result<(), StoreError> {
    let Some(parent) = p.path.parent() else {
        return Ok(());
    };
    let name = p
        .path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("hour");
    let hidden = parent.join(format!(".del-{name}-{}", now_ns()));
    match std::fs::rename(&p.path, &hidden) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StoreError::io(&p.path, "rename for deletion", e)),
    }
    sync_dir(parent)?;
    // A compaction finishing inside the directory at this moment can make
    // one removal fail (directory not empty): try again once.
    if std::fs::remove_dir_all(&hidden).is_err() {
        std::fs::remove_dir_all(&hidden).map_err(|e| StoreError::io(&hidden, "remove", e))?;
    }
    // Drop the date directory once its last hour is gone.
    if list_dir(parent)?.is_empty() {
        let _ = std::fs::remove_dir(parent);
        if let Some(kind_dir) = parent.parent() {
            let _ = sync_dir(kind_dir);
        }
    }
    Ok(())
}

/// Applies retention to a data directory: partitions that ended before
/// `now_ns - retain_age` go first, then the oldest ones (both kinds, by
/// hour) while the total size exceeds `retain_bytes`.
pub fn enforce_retention(
    dir: &Path,
    now_ns: i64,
    retain_age: Option<Duration>,
    retain_bytes: Option<u64>,
) -> Result<RetentionReport, StoreError> {
    let mut parts: Vec<(Partition, u64)> = Vec::new();
    for kind in Kind::ALL {
        for p in list_partitions(dir, kind)? {
            let b = dir_bytes(&p.path)?;
            parts.push((p, b));
        }
    }
    parts.sort_by_key(|(p, _)| (p.hour, Kind::ALL.iter().position(|&k| k == p.kind)));
    let mut report = RetentionReport::default();
    let mut total: u64 = parts.iter().map(|(_, b)| b).sum();
    let cutoff =
        retain_age.map(|a| now_ns.saturating_sub(a.as_nanos().min(i64::MAX as u128) as i64));
    for (p, bytes) in &parts {
        let too_old = cutoff.is_some_and(|c| p.end_ns() <= c);
        let too_big = retain_bytes.is_some_and(|max| total > max);
        if too_old || too_big {
            delete_partition(p)?;
            report.partitions_deleted += 1;
            report.bytes_deleted += bytes;
            total -= bytes;
        } else {
            report.partitions_kept += 1;
            report.bytes_kept += bytes;
        }
    }
    Ok(report)
}
