//! File system helpers: directory fsync, advisory locks, atomic publication.
//!
//! Every file and directory the store creates, renames or removes goes
//! through a directory opened without following a link (wirelog-safefs):
//! a link planted in a store (a `.writer.lock`, a temporary, a partition
//! directory) is refused or replaced, never followed.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use wirelog_safefs::Dir;

use crate::error::StoreError;

/// Opens the directory `dir` (its last component not a link).
pub(crate) fn open_dir(dir: &Path) -> Result<Dir, StoreError> {
    Dir::open(dir).map_err(|e| StoreError::io(dir, "open directory", e))
}

/// The directory holding `path`, opened, and the entry's name in it.
fn parent_of(path: &Path) -> Result<(Dir, &std::ffi::OsStr), StoreError> {
    wirelog_safefs::parent_of(path).map_err(|e| StoreError::io(path, "open the directory of", e))
}

/// Creates the new file `path` exclusively (nothing of that name, a link
/// included, is followed or reused).
pub(crate) fn create_new(path: &Path) -> Result<File, StoreError> {
    let (dir, name) = parent_of(path)?;
    dir.create_new(name).map_err(|e| StoreError::io(path, "create", e))
}

/// Creates the temporary `path` afresh: a leftover of a killed run (or
/// anything planted) of that name is removed first.
pub(crate) fn create_temp(path: &Path) -> Result<File, StoreError> {
    let (dir, name) = parent_of(path)?;
    dir.remove_file(name).map_err(|e| StoreError::io(path, "remove", e))?;
    dir.create_new(name).map_err(|e| StoreError::io(path, "create", e))
}

/// Reads the store's own small file `path` (a list, its limits): never
/// through a link, only a regular file with one link (see wirelog-safefs).
/// None when it does not exist.
pub(crate) fn read_own_file(path: &Path) -> Result<Option<String>, StoreError> {
    use std::io::Read;
    let (dir, name) = match wirelog_safefs::parent_of(path) {
        Ok(x) => x,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io(path, "open the directory of", e)),
    };
    let mut f = match dir.open_file(name, false) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io(path, "read", e)),
    };
    let mut text = String::new();
    f.read_to_string(&mut text).map_err(|e| StoreError::io(path, "read", e))?;
    Ok(Some(text))
}

/// Opens (creating, durably) the directory `path` below the store `root`,
/// one component at a time, never following a link: a partition directory
/// planted as a link is refused, named.
pub(crate) fn create_below(root: &Path, path: &Path) -> Result<Dir, StoreError> {
    walk_below(root, path, |d| d.sync().map_err(|e| StoreError::io(d.path(), "fsync directory", e)))
}

/// [`create_below`] without its fsyncs: the directories whose entries it
/// changed are added to `parents` (each once), for the caller to fsync
/// once each before anything relies on the new directories (a commit's
/// partitions, a staged run's tree).
pub(crate) fn create_below_unsynced(root: &Path, path: &Path, parents: &mut Vec<PathBuf>) -> Result<Dir, StoreError> {
    walk_below(root, path, |d| {
        if !parents.iter().any(|p| p == d.path()) {
            parents.push(d.path().to_path_buf());
        }
        Ok(())
    })
}

/// Opens `path` below `root` a component at a time, creating what is
/// missing; `created_in` is told of each directory an entry was made in.
fn walk_below(root: &Path, path: &Path, mut created_in: impl FnMut(&Dir) -> Result<(), StoreError>) -> Result<Dir, StoreError> {
    let rel = path.strip_prefix(root).map_err(|_| {
        StoreError::io(path, "create directory", std::io::Error::other(format!("not below {}", root.display())))
    })?;
    let mut d = open_dir(root)?;
    for c in rel.components() {
        let name = c.as_os_str();
        d = match d.open_dir(name) {
            Ok(sub) => sub,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let sub = d.create_dir(name).map_err(|e| StoreError::io(&d.join(name), "create directory", e))?;
                created_in(&d)?;
                sub
            }
            Err(e) => return Err(StoreError::io(&d.join(name), "open directory", e)),
        };
    }
    Ok(d)
}

/// fsyncs a directory so that entries created, renamed or removed in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    let f = File::open(dir).map_err(|e| StoreError::io(dir, "open directory", e))?;
    f.sync_all()
        .map_err(|e| StoreError::io(dir, "fsync directory", e))
}

/// Creates `dir` and its missing parents, fsyncing each parent whose
/// entries changed so the new directories survive a crash.
pub(crate) fn create_dirs_durable(dir: &Path) -> Result<(), StoreError> {
    if dir.is_dir() && !dir.is_symlink() {
        return Ok(());
    }
    let mut missing = Vec::new();
    let mut p = dir;
    while std::fs::symlink_metadata(p).is_err() {
        missing.push(p.to_path_buf());
        match p.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => p = parent,
            _ => break,
        }
    }
    Dir::create(dir).map_err(|e| StoreError::io(dir, "create directory", e))?;
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
    /// Opens the lock file (read-only is enough for flock), created when
    /// missing; an existing one only when it is a regular file of one link
    /// reached without a link (a planted one is refused, named).
    fn open(path: &Path) -> Result<File, StoreError> {
        let (dir, name) = parent_of(path)?;
        dir.open_lock(name).map_err(|e| StoreError::io(path, "open lock file", e))
    }

    /// Takes the lock without waiting: `Ok(None)` when someone else holds it.
    pub(crate) fn try_lock(path: &Path) -> Result<Option<DirLock>, StoreError> {
        let file = DirLock::open(path)?;
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
        let file = DirLock::open(path)?;
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
    publish_synced(file, tmp, dst, sync, sync)
}

/// [`publish`], the file's fsync and the directory's chosen apart: a staged
/// run's directories are fsynced once each before its commit record
/// ([`crate::staging`]), not once per file.
pub(crate) fn publish_synced(file: &File, tmp: &Path, dst: &Path, sync: bool, sync_dir: bool) -> Result<(), StoreError> {
    if sync {
        file.sync_all()
            .map_err(|e| StoreError::io(tmp, "fsync", e))?;
    }
    let (dir, name) = parent_of(dst)?;
    let tmp_name = tmp.file_name().unwrap_or_default();
    if tmp.parent() != dst.parent() {
        let e = std::io::Error::other(format!("{} is not beside it", tmp.display()));
        return Err(StoreError::io(dst, "rename temporary file into", e));
    }
    dir.rename(tmp_name, name).map_err(|e| StoreError::io(dst, "rename temporary file into", e))?;
    if sync_dir {
        dir.sync().map_err(|e| StoreError::io(dir.path(), "fsync directory", e))?;
    }
    Ok(())
}

/// Removes a file, ignoring that it is already gone.
pub(crate) fn remove_file_if_exists(path: &Path) -> Result<bool, StoreError> {
    let (dir, name) = match wirelog_safefs::parent_of(path) {
        Ok(x) => x,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(StoreError::io(path, "remove", e)),
    };
    dir.remove_file(name).map_err(|e| StoreError::io(path, "remove", e))
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
