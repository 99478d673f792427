//! File system helpers: directory fsync, advisory locks, atomic publication.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use crate::error::StoreError;

/// fsyncs a directory so that entries created, renamed or removed in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    let f = File::open(dir).map_err(|e| StoreError::io(dir, "open directory", e))?;
    f.sync_all()
        .map_err(|e| StoreError::io(dir, "fsync directory", e))
}

/// Creates `dir` and its missing parents, fsyncing each parent whose
/// entries changed so the new directories survive a crash.
pub(crate) fn create_dirs_durable(dir: &Path) -> Result<(), StoreError> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut missing = Vec::new();
    let mut p = dir;
    while !p.exists() {
        missing.push(p.to_path_buf());
        match p.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => p = parent,
            _ => break,
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| StoreError::io(dir, "create directory", e))?;
    for d in missing.iter().rev() {
        if let Some(parent) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent)?;
        }
    }
    Ok(())
}

/// An exclusive advisory lock (flock) held while this value lives; the
/// kernel drops it when the process dies, so a crash never leaves it stuck.
#[derive(Debug)]
pub(crate) struct DirLock {
    _file: File,
}

impl DirLock {
    /// Takes the lock without waiting: `Ok(None)` when someone else holds it.
    pub(crate) fn try_lock(path: &Path) -> Result<Option<DirLock>, StoreError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| StoreError::io(path, "create lock file", e))?;
        // SAFETY: flock on a file descriptor we own.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(Some(DirLock { _file: file }));
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            Ok(None)
        } else {
            Err(StoreError::io(path, "lock", err))
        }
    }

    /// Takes the lock, waiting for the holder to release it.
    pub(crate) fn lock(path: &Path) -> Result<DirLock, StoreError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| StoreError::io(path, "create lock file", e))?;
        loop {
            // SAFETY: flock on a file descriptor we own.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Ok(DirLock { _file: file });
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(StoreError::io(path, "lock", err));
            }
        }
    }
}

/// Names readers never look at: hidden files (temporaries, locks, partitions
/// being deleted) and anything that is not a `.parquet` file.
pub(crate) fn is_data_file(name: &str) -> bool {
    !name.starts_with('.') && name.ends_with(".parquet")
}

/// Publishes a fully written temporary file under its final name:
/// fsync the file, rename it, fsync the directory.
pub(crate) fn publish(file: &File, tmp: &Path, dst: &Path, sync: bool) -> Result<(), StoreError> {
    if sync {
        file.sync_all()
            .map_err(|e| StoreError::io(tmp, "fsync", e))?;
    }
    std::fs::rename(tmp, dst).map_err(|e| StoreError::io(dst, "rename temporary file into", e))?;
    if sync {
        if let Some(dir) = dst.parent() {
            sync_dir(dir)?;
        }
    }
    Ok(())
}

/// Removes a file, ignoring that it is already gone.
pub(crate) fn remove_file_if_exists(path: &Path) -> Result<bool, StoreError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(StoreError::io(path, "remove", e)),
    }
}

/// The sorted entries of a directory, an empty list when it is gone.
pub(crate) fn list_dir(dir: &Path) -> Result<Vec<(String, PathBuf)>, StoreError> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io(dir, "list directory", e)),
    };
    let mut out = Vec::new();
    for ent in rd {
        let ent = match ent {
            Ok(ent) => ent,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(StoreError::io(dir, "list directory", e)),
        };
        if let Ok(name) = ent.file_name().into_string() {
            out.push((name, ent.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Space on the file system holding a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskSpace {
    /// Bytes an unprivileged writer may still use.
    pub available: u64,
    /// Size of the file system.
    pub total: u64,
}

/// statvfs of the file system holding `path`.
pub fn disk_space(path: &Path) -> std::io::Result<DiskSpace> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: `statvfs` is plain integers, for which all zeroes is a value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: statvfs fills the struct; c is a valid C string.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let frsize = st.f_frsize as u64;
    Ok(DiskSpace {
        available: (st.f_bavail as u64).saturating_mul(frsize),
        total: (st.f_blocks as u64).saturating_mul(frsize),
    })
}
