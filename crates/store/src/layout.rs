//! Where things live under the data directory.
//!
//! ```text
//! <dir>/flows/date=YYYY-MM-DD/hour=HH/part-<unix_nanos>-<seq>.parquet
//! <dir>/conns/date=YYYY-MM-DD/hour=HH/part-<unix_nanos>-<seq>.parquet
//! <dir>/{http,mysql,pgsql,redis,dns}/date=YYYY-MM-DD/hour=HH/...        (transactions)
//!                                     compact-<unix_nanos>-<seq>.parquet   (merged small files)
//!                                     .part-*.tmp / .compact-*.tmp         (being written: ignored)
//! <dir>/flows/date=YYYY-MM-DD/.del-hour=HH-*                              (being deleted: ignored)
//! <dir>/.writer.lock  <dir>/.compact.lock                                 (flock(2) locks)
//! <dir>/.staging/<run>/<kind>/date=../hour=../part-*.parquet, COMMIT      (a read's files until
//!                                                                          it commits: staging.rs)
//! ```

use std::path::{Path, PathBuf};

use crate::batch::Kind;
use crate::error::StoreError;
use crate::fsutil::list_dir;
use crate::time::{parse_date_dir, parse_hour_dir, partition_name, NS_PER_HOUR};

/// One hour of one kind: a directory of Parquet files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    pub kind: Kind,
    /// Hours since the epoch (UTC).
    pub hour: i64,
    pub path: PathBuf,
}

impl Partition {
    /// First ns of the hour.
    pub fn start_ns(&self) -> i64 {
        self.hour.saturating_mul(NS_PER_HOUR)
    }
    /// First ns after the hour.
    pub fn end_ns(&self) -> i64 {
        (self.hour + 1).saturating_mul(NS_PER_HOUR)
    }
}

pub(crate) fn kind_dir(dir: &Path, kind: Kind) -> PathBuf {
    dir.join(kind.as_str())
}

pub(crate) fn partition_path(dir: &Path, kind: Kind, hour: i64) -> PathBuf {
    let (d, h) = partition_name(hour);
    kind_dir(dir, kind).join(d).join(h)
}

/// The partitions of a kind, oldest first. Directories that do not parse as
/// partitions (and hidden ones) are ignored.
pub fn list_partitions(dir: &Path, kind: Kind) -> Result<Vec<Partition>, StoreError> {
    let mut out = Vec::new();
    for (dname, dpath) in list_dir(&kind_dir(dir, kind))? {
        let Some(days) = parse_date_dir(&dname) else {
            continue;
        };
        if !dpath.is_dir() {
            continue;
        }
        for (hname, hpath) in list_dir(&dpath)? {
            let Some(h) = parse_hour_dir(&hname) else {
                continue;
            };
            if hpath.is_dir() {
                out.push(Partition {
                    kind,
                    hour: days * 24 + h,
                    path: hpath,
                });
            }
        }
    }
    out.sort_by_key(|p| p.hour);
    Ok(out)
}

/// Recognises a partition directory path (`.../<kind>/date=.../hour=..`).
pub fn parse_partition_path(path: &Path) -> Option<Partition> {
    let hname = path.file_name()?.to_str()?;
    let date = path.parent()?;
    let dname = date.file_name()?.to_str()?;
    let kind = Kind::from_name(date.parent()?.file_name()?.to_str()?)?;
    let hour = parse_date_dir(dname)? * 24 + parse_hour_dir(hname)?;
    Some(Partition {
        kind,
        hour,
        path: path.to_path_buf(),
    })
}
