//! Errors of the store: each names the file or directory and what is wrong.

use std::fmt;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub enum StoreError {
    /// A file system operation failed (create, write, fsync, rename, list, ...).
    Io {
        path: PathBuf,
        op: &'static str,
        source: std::io::Error,
    },
    /// A file is not valid Parquet, or not a file of this store's schema.
    Corrupt { path: PathBuf, what: String },
    /// Encoding a file failed (a bug or an exhausted resource, not bad input).
    Encode { path: PathBuf, what: String },
    /// A scan asked for a column the kind does not have.
    UnknownColumn { kind: &'static str, column: String },
    /// A transaction row does not fit its kind's columns (wrong number or
    /// type of `extra` cells): nothing of the call was buffered.
    BadRow {
        kind: &'static str,
        column: String,
        what: String,
    },
    /// Bad options (zero sizes, bad compression level, ...).
    Invalid(String),
    /// The callback of a scan gave up; its message is passed through.
    Callback(String),
}

impl StoreError {
    pub(crate) fn io(path: &Path, op: &'static str, source: std::io::Error) -> Self {
        StoreError::Io {
            path: path.to_path_buf(),
            op,
            source,
        }
    }
    pub(crate) fn corrupt(path: &Path, what: impl fmt::Display) -> Self {
        StoreError::Corrupt {
            path: path.to_path_buf(),
            what: what.to_string(),
        }
    }
    pub(crate) fn encode(path: &Path, what: impl fmt::Display) -> Self {
        StoreError::Encode {
            path: path.to_path_buf(),
            what: what.to_string(),
        }
    }
    /// The file system is full (ENOSPC) or the quota spent (EDQUOT): the
    /// write may succeed later, once space is freed.
    pub fn is_out_of_space(&self) -> bool {
        matches!(self, StoreError::Io { source, .. }
            if matches!(source.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT)))
    }

    /// The path the error is about, when there is one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            StoreError::Io { path, .. }
            | StoreError::Corrupt { path, .. }
            | StoreError::Encode { path, .. } => Some(path),
            _ => None,
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Io { path, op, source } => {
                let hint = match source.raw_os_error() {
                    Some(libc::EACCES) | Some(libc::EPERM) => {
                        " (is the data directory writable by this user?)"
                    }
                    Some(libc::ENOSPC) => " (the disk is full: lower the retention limits)",
                    Some(libc::EROFS) => " (the file system is mounted read-only)",
                    Some(libc::ENOTDIR) => " (a path component is not a directory)",
                    _ => "",
                };
                write!(f, "store: cannot {op} {}: {source}{hint}", path.display())
            }
            StoreError::Corrupt { path, what } => {
                write!(f, "store: corrupt file {}: {what}", path.display())
            }
            StoreError::Encode { path, what } => {
                write!(f, "store: cannot encode {}: {what}", path.display())
            }
            StoreError::UnknownColumn { kind, column } => {
                write!(f, "store: {kind} have no column named {column:?}")
            }
            StoreError::BadRow { kind, column, what } => {
                write!(f, "store: bad {kind} row, column {column:?}: {what}")
            }
            StoreError::Invalid(m) => write!(f, "store: invalid options: {m}"),
            StoreError::Callback(m) => write!(f, "{m}"),
        }
    }
}

// The I/O error's text is part of the message (with a hint), so it is not
// also returned as a source: error chains would print it twice.
impl std::error::Error for StoreError {}
