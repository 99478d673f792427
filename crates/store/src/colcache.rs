//! Decoded column chunks kept between scans (`wirelog serve`): a store file
//! never changes once written (new rows go to new files, compaction and
//! retention delete whole files), so a chunk decoded for one question is the
//! same for the next. One page of the UI asks some 30 questions of the same
//! few files; decompressing and decoding their columns each time was most of
//! the cost of a question over a short range.
//!
//! A chunk is keyed by its file's identity (path, device and inode, size and
//! modification time, read when the file is opened for the scan), its row
//! group and its column: a file replaced under the same name is another key,
//! and a deleted file's chunks are never asked for again and age out. The
//! cache is bounded in bytes (least recently used chunks go first); a chunk
//! larger than a quarter of the bound is not kept.

use std::collections::HashMap;
use std::fmt;
use std::fs::Metadata;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::batch::Column;

/// What names one version of a store file.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct FileId {
    path: PathBuf,
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl FileId {
    pub(crate) fn of(path: &Path, m: &Metadata) -> FileId {
        use std::os::unix::fs::MetadataExt;
        FileId {
            path: path.to_path_buf(),
            dev: m.dev(),
            ino: m.ino(),
            size: m.len(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    file: FileId,
    row_group: usize,
    column: usize,
}

struct Entry {
    col: Arc<Column>,
    bytes: usize,
    used: u64,
}

struct Inner {
    map: HashMap<Key, Entry>,
    bytes: usize,
    clock: u64,
}

/// Counts since the cache was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ColumnCacheStats {
    pub hits: u64,
    pub misses: u64,
    /// Chunks dropped to stay within the bound.
    pub evicted: u64,
    /// Chunks and bytes held now.
    pub chunks: u64,
    pub bytes: u64,
}

/// A bounded cache of decoded column chunks, shared by the scans given it
/// ([`crate::Scan::cache`]); cheap to clone (one cache).
#[derive(Clone)]
pub struct ColumnCache {
    inner: Arc<Mutex<Inner>>,
    max_bytes: usize,
    hits: Arc<AtomicU64>,
    misses: Arc<AtomicU64>,
    evicted: Arc<AtomicU64>,
}

impl fmt::Debug for ColumnCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ColumnCache")
            .field("max_bytes", &self.max_bytes)
            .field("stats", &self.stats())
            .finish()
    }
}

/// Two scans are equal whatever cache they use: a cached chunk equals the
/// one decoded from the file.
impl PartialEq for ColumnCache {
    fn eq(&self, _: &ColumnCache) -> bool {
        true
    }
}
impl Eq for ColumnCache {}

/// Heap bytes a decoded column holds (strings: their text and their header).
pub(crate) fn column_bytes(c: &Column) -> usize {
    use std::mem::size_of;
    match c {
        Column::U8(v) => v.len(),
        Column::U16(v) => v.len() * 2,
        Column::U32(v) => v.len() * 4,
        Column::U64(v) => v.len() * 8,
        Column::OptU64(v) => v.len() * size_of::<Option<u64>>(),
        Column::I64(v) => v.len() * 8,
        Column::OptI64(v) => v.len() * size_of::<Option<i64>>(),
        Column::Ip(v) => v.len() * 16,
        Column::Str(v) => v.iter().map(|s| s.capacity() + size_of::<String>()).sum(),
        Column::Bool(v) => v.len(),
    }
}

impl ColumnCache {
    /// A cache holding at most `max_bytes` of decoded columns.
    pub fn new(max_bytes: usize) -> ColumnCache {
        ColumnCache {
            inner: Arc::new(Mutex::new(Inner {
                map: HashMap::new(),
                bytes: 0,
                clock: 0,
            })),
            max_bytes,
            hits: Arc::default(),
            misses: Arc::default(),
            evicted: Arc::default(),
        }
    }

    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    pub fn stats(&self) -> ColumnCacheStats {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        ColumnCacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evicted: self.evicted.load(Ordering::Relaxed),
            chunks: g.map.len() as u64,
            bytes: g.bytes as u64,
        }
    }

    pub(crate) fn get(
        &self,
        file: &FileId,
        row_group: usize,
        column: usize,
    ) -> Option<Arc<Column>> {
        let key = Key {
            file: file.clone(),
            row_group,
            column,
        };
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.clock += 1;
        let now = g.clock;
        match g.map.get_mut(&key) {
            Some(e) => {
                e.used = now;
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(e.col.clone())
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    pub(crate) fn put(&self, file: &FileId, row_group: usize, column: usize, col: Arc<Column>) {
        let bytes = column_bytes(&col) + 64;
        if bytes > self.max_bytes / 4 {
            return;
        }
        let key = Key {
            file: file.clone(),
            row_group,
            column,
        };
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.clock += 1;
        let used = g.clock;
        if let Some(old) = g.map.insert(key, Entry { col, bytes, used }) {
            g.bytes -= old.bytes;
        }
        g.bytes += bytes;
        if g.bytes <= self.max_bytes {
            return;
        }
        // Oldest first until within the bound (a few thousand chunks at most:
        // one sort per overflow is cheap beside the decoding it saves).
        let mut by_age: Vec<(u64, Key)> = g.map.iter().map(|(k, e)| (e.used, k.clone())).collect();
        by_age.sort_unstable_by_key(|(u, _)| *u);
        for (_, k) in by_age {
            if g.bytes <= self.max_bytes * 3 / 4 {
                break;
            }
            if let Some(e) = g.map.remove(&k) {
                g.bytes -= e.bytes;
                self.evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u64) -> FileId {
        FileId {
            path: PathBuf::from(format!("/f{n}")),
            dev: 1,
            ino: n,
            size: 10,
            mtime_ns: 5,
        }
    }

    #[test]
    fn bounded_in_bytes_oldest_out_first() {
        let c = ColumnCache::new(10_000);
        let col = || Arc::new(Column::U64(vec![7; 200])); // 1,600 B + 64
        for i in 0..5 {
            c.put(&id(i), 0, 0, col());
        }
        assert!(c.get(&id(0), 0, 0).is_some(), "5 x 1,664 B fit in 10,000");
        c.put(&id(5), 0, 0, col());
        c.put(&id(6), 0, 0, col());
        let s = c.stats();
        assert!(s.bytes <= 10_000, "{s:?}");
        assert!(s.evicted >= 1, "{s:?}");
        // id(0) was used last among the first ones, id(1) is the oldest.
        assert!(c.get(&id(1), 0, 0).is_none());
        assert!(c.get(&id(0), 0, 0).is_some());
        assert!(c.get(&id(6), 0, 0).is_some());
        // Too big for the cache: not kept, nothing evicted for it.
        c.put(&id(9), 0, 0, Arc::new(Column::U64(vec![0; 1000])));
        assert!(c.get(&id(9), 0, 0).is_none());
    }

    #[test]
    fn another_version_of_a_file_is_another_key() {
        let c = ColumnCache::new(1 << 20);
        c.put(&id(1), 0, 3, Arc::new(Column::U8(vec![1, 2])));
        let mut newer = id(1);
        newer.mtime_ns += 1;
        assert!(c.get(&newer, 0, 3).is_none());
        assert!(c.get(&id(1), 0, 4).is_none());
        assert!(c.get(&id(1), 1, 3).is_none());
        assert_eq!(*c.get(&id(1), 0, 3).unwrap(), Column::U8(vec![1, 2]));
    }
}
