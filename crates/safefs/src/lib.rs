//! Files as a careful root daemon writes them.
//!
//! wirelog runs as root (then as an unprivileged user) and writes into
//! directories an administrator names: `--logs`, `--store`, `--pcap-dir`,
//! the ClickHouse spool. Anyone who can write into such a directory could
//! plant a symbolic link (`conn.log -> /etc/shadow`) or a hard link there and
//! have root truncate, overwrite or create the file it points to. So every
//! file operation here goes through a [`Dir`]:
//!
//! - a directory is opened with `O_DIRECTORY|O_NOFOLLOW` (its last component
//!   is never a link) and refused when it is world-writable without the
//!   sticky bit, naming it: anyone could replace its entries under us;
//! - every file and directory is created relative to that descriptor
//!   (`openat`, `mkdirat`), new files with `O_CREAT|O_EXCL|O_NOFOLLOW`, so a
//!   planted name makes the creation fail (EEXIST) and never follows it;
//! - a file replaced atomically is written under a temporary name and renamed
//!   within the same directory (`renameat`);
//! - an existing file is opened with `O_NOFOLLOW` and kept only when it is a
//!   regular file with one link, owned by us, root, or the directory's owner
//!   (who can replace any entry of the directory anyway).
//!
//! Ownership: [`give_created_to`] names the unprivileged user a root process
//! will become; from then on what this crate *creates* (and only that) is
//! given to it through the new descriptor (`fchown`), never by path, never
//! recursively, never an existing file.
//!
//! The user-given path's ancestors are resolved as usual: they are the
//! administrator's choice (e.g. `/var/run -> /run`).
//!
//! All `unsafe` of the crate is the libc calls in [`sys`], each on a valid
//! NUL-terminated name and a descriptor this crate owns.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Mode of the directories created (before the umask): never writable by others.
const DIR_MODE: libc::mode_t = 0o755;
/// Mode of the files created (before the umask).
const FILE_MODE: libc::mode_t = 0o644;

/// The user what is created from now on is given to, `uid << 32 | gid`;
/// `NOBODY_YET` while there is none. A process-wide setting: it is decided
/// once, before the outputs open, by the process that will drop privileges.
static GIVE_TO: AtomicU64 = AtomicU64::new(NOBODY_YET);
const NOBODY_YET: u64 = u64::MAX;

/// From now on, every file and directory this crate creates is given to
/// `uid:gid` (the user a root process is about to become), through its new
/// descriptor. Files created by that user itself are left as they are.
pub fn give_created_to(uid: u32, gid: u32) {
    GIVE_TO.store((uid as u64) << 32 | gid as u64, Ordering::SeqCst);
}

/// Stops giving what is created away (tests; a process that stays root).
pub fn keep_created() {
    GIVE_TO.store(NOBODY_YET, Ordering::SeqCst);
}

/// The user created files are given to, if any.
pub fn created_owner() -> Option<(u32, u32)> {
    match GIVE_TO.load(Ordering::SeqCst) {
        NOBODY_YET => None,
        v => Some(((v >> 32) as u32, v as u32)),
    }
}

/// Gives a descriptor this process just created to the chosen user.
fn give(fd: &OwnedFd, path: &Path) -> io::Result<()> {
    let Some((uid, gid)) = created_owner() else {
        return Ok(());
    };
    if sys::geteuid() == uid {
        return Ok(());
    }
    sys::fchown(fd, uid, gid).map_err(|e| named(path, &format!("cannot give it to uid {uid}"), e))
}

/// An error naming `path`, keeping the kind.
fn named(path: &Path, what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {what}: {e}", path.display()))
}

fn refused(path: &Path, why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, format!("{}: {why}: refused", path.display()))
}

/// A name inside a directory: one component, not `.` or `..`.
fn entry_name(dir: &Path, name: &OsStr) -> io::Result<CString> {
    let b = name.as_bytes();
    if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: {:?} is not a name inside the directory", dir.display(), name),
        ));
    }
    CString::new(b).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{}: NUL in name", dir.display())))
}

fn path_cstr(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("{}: NUL in path", path.display())))
}

/// A directory opened without following a link, checked; files and
/// directories are created and opened relative to it.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
    /// The directory's owner: files it owns are trusted like our own.
    owner: u32,
}

impl Dir {
    /// Opens the directory `path`; its last component must not be a link.
    pub fn open(path: &Path) -> io::Result<Dir> {
        let c = path_cstr(path)?;
        let fd = sys::open(&c, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .map_err(|e| dir_open_error(path, e))?;
        Dir::checked(fd, path.to_path_buf())
    }

    /// Opens the directory `path`, creating it and its missing parents
    /// (each new one given away, see [`give_created_to`]). The last
    /// component is never followed as a link; existing ancestors are
    /// resolved as usual.
    pub fn create(path: &Path) -> io::Result<Dir> {
        match Dir::open(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            other => return other,
        }
        let name = path
            .file_name()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("{}: no directory name", path.display())))?;
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let parent = match Dir::open_following(parent) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Dir::create(parent)?,
            other => other?,
        };
        parent.create_dir(name)
    }

    /// Opens the directory `path` following links (the ancestors of a path
    /// an administrator named), checked like every other.
    fn open_following(path: &Path) -> io::Result<Dir> {
        let c = path_cstr(path)?;
        let fd = sys::open(&c, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC)
            .map_err(|e| named(path, "cannot open directory", e))?;
        Dir::checked(fd, path.to_path_buf())
    }

    fn checked(fd: OwnedFd, path: PathBuf) -> io::Result<Dir> {
        let st = sys::fstat(&fd).map_err(|e| named(&path, "cannot stat", e))?;
        if st.st_mode & libc::S_IWOTH != 0 && st.st_mode & libc::S_ISVTX == 0 {
            return Err(refused(
                &path,
                "world-writable directory without the sticky bit (anyone could plant links in it; chmod o-w or +t)",
            ));
        }
        Ok(Dir { fd, path, owner: st.st_uid })
    }

    /// The directory's path (for messages and for readers).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of an entry.
    pub fn join(&self, name: impl AsRef<OsStr>) -> PathBuf {
        self.path.join(name.as_ref())
    }

    /// Opens the subdirectory `name` (not a link).
    pub fn open_dir(&self, name: impl AsRef<OsStr>) -> io::Result<Dir> {
        let name = name.as_ref();
        let path = self.join(name);
        let c = entry_name(&self.path, name)?;
        let fd = sys::openat(&self.fd, &c, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC, 0)
            .map_err(|e| dir_open_error(&path, e))?;
        Dir::checked(fd, path)
    }

    /// Opens the subdirectory `name`, creating it (given away) when missing.
    pub fn create_dir(&self, name: impl AsRef<OsStr>) -> io::Result<Dir> {
        let name = name.as_ref();
        let path = self.join(name);
        let c = entry_name(&self.path, name)?;
        let made = match sys::mkdirat(&self.fd, &c, DIR_MODE) {
            Ok(()) => true,
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => false,
            Err(e) => return Err(named(&path, "cannot create directory", e)),
        };
        let dir = self.open_dir(name)?;
        if made {
            give(&dir.fd, &path)?;
        }
        Ok(dir)
    }

    /// Creates the new file `name` for reading and writing: fails (EEXIST)
    /// when anything has that name, a link included. Given away.
    pub fn create_new(&self, name: impl AsRef<OsStr>) -> io::Result<File> {
        let name = name.as_ref();
        let path = self.join(name);
        let c = entry_name(&self.path, name)?;
        let flags = libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let fd = sys::openat(&self.fd, &c, flags, FILE_MODE).map_err(|e| named(&path, "cannot create", e))?;
        give(&fd, &path)?;
        Ok(File::from(fd))
    }

    /// Opens the existing file `name` (read-only, or for reading and
    /// writing), never through a link, and only when it is a regular file
    /// with one link owned by us, root or the directory's owner.
    pub fn open_file(&self, name: impl AsRef<OsStr>, write: bool) -> io::Result<File> {
        let name = name.as_ref();
        let path = self.join(name);
        let c = entry_name(&self.path, name)?;
        let access = if write { libc::O_RDWR } else { libc::O_RDONLY };
        // O_NONBLOCK: a FIFO planted under the name must not hang the open.
        let fd = sys::openat(&self.fd, &c, access | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC, 0)
            .map_err(|e| file_open_error(&path, e))?;
        let st = sys::fstat(&fd).map_err(|e| named(&path, "cannot stat", e))?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(refused(&path, "not a regular file"));
        }
        if st.st_nlink != 1 {
            return Err(refused(&path, &format!("{} hard links (it could be another file)", st.st_nlink)));
        }
        let euid = sys::geteuid();
        if st.st_uid != euid && st.st_uid != 0 && st.st_uid != self.owner {
            return Err(refused(
                &path,
                &format!("owned by uid {}, not by us (uid {euid}), root or the directory's owner", st.st_uid),
            ));
        }
        sys::clear_nonblock(&fd).map_err(|e| named(&path, "cannot open", e))?;
        Ok(File::from(fd))
    }

    /// Opens the lock file `name` read-only (enough for flock), creating it
    /// when missing. An existing one is checked as by [`Dir::open_file`].
    pub fn open_lock(&self, name: impl AsRef<OsStr>) -> io::Result<File> {
        let name = name.as_ref();
        loop {
            match self.open_file(name, false) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                other => return other,
            }
            match self.create_new(name) {
                // Someone created it between the two calls: open theirs.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                other => return other,
            }
        }
    }

    /// Renames `from` to `to` within this directory (replacing `to`; a link
    /// named `to` is replaced, never followed).
    pub fn rename(&self, from: impl AsRef<OsStr>, to: impl AsRef<OsStr>) -> io::Result<()> {
        let (from, to) = (from.as_ref(), to.as_ref());
        let cf = entry_name(&self.path, from)?;
        let ct = entry_name(&self.path, to)?;
        sys::renameat(&self.fd, &cf, &ct).map_err(|e| named(&self.join(to), "cannot rename into", e))
    }

    /// Removes the file (or link) `name`; false when there was none.
    pub fn remove_file(&self, name: impl AsRef<OsStr>) -> io::Result<bool> {
        let name = name.as_ref();
        let c = entry_name(&self.path, name)?;
        match sys::unlinkat(&self.fd, &c, 0) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(named(&self.join(name), "cannot remove", e)),
        }
    }

    /// Makes the entries created, renamed and removed in it durable.
    pub fn sync(&self) -> io::Result<()> {
        sys::fsync(&self.fd).map_err(|e| named(&self.path, "cannot fsync directory", e))
    }
}

/// The directory holding `path`, opened, and the file's name in it.
pub fn parent_of(path: &Path) -> io::Result<(Dir, &OsStr)> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("{}: no file name", path.display())))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((Dir::open(dir)?, name))
}

/// Why opening a directory failed: a link or a non-directory is named so.
fn dir_open_error(path: &Path, e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::ELOOP) => refused(path, "a symbolic link, not a directory"),
        Some(libc::ENOTDIR) if is_link(path) => refused(path, "a symbolic link, not a directory"),
        Some(libc::ENOTDIR) => named(path, "not a directory", e),
        _ => named(path, "cannot open directory", e),
    }
}

fn file_open_error(path: &Path, e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::ELOOP) => refused(path, "a symbolic link"),
        _ => named(path, "cannot open", e),
    }
}

fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// The libc calls, each wrapped once: the only `unsafe` of the crate.
mod sys {
    use super::*;
    use std::ffi::CStr;
    use std::os::fd::FromRawFd;

    fn fd_or_err(fd: libc::c_int) -> io::Result<OwnedFd> {
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor the kernel just returned, owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    fn ok_or_err(rc: libc::c_int) -> io::Result<()> {
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn open(path: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
        // SAFETY: path is NUL-terminated; no file is created (no mode needed).
        fd_or_err(unsafe { libc::open(path.as_ptr(), flags) })
    }

    pub fn openat(dir: &OwnedFd, name: &CStr, flags: libc::c_int, mode: libc::mode_t) -> io::Result<OwnedFd> {
        // SAFETY: dir is an open descriptor; name is NUL-terminated; the
        // mode is passed as the variadic unsigned int openat reads with O_CREAT.
        fd_or_err(unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, mode as libc::c_uint) })
    }

    pub fn mkdirat(dir: &OwnedFd, name: &CStr, mode: libc::mode_t) -> io::Result<()> {
        // SAFETY: dir is an open descriptor; name is NUL-terminated.
        ok_or_err(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) })
    }

    pub fn renameat(dir: &OwnedFd, from: &CStr, to: &CStr) -> io::Result<()> {
        // SAFETY: dir is an open descriptor; both names are NUL-terminated.
        ok_or_err(unsafe { libc::renameat(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr()) })
    }

    pub fn unlinkat(dir: &OwnedFd, name: &CStr, flags: libc::c_int) -> io::Result<()> {
        // SAFETY: dir is an open descriptor; name is NUL-terminated.
        ok_or_err(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) })
    }

    pub fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
        // SAFETY: stat is plain data, zeroed is valid; fstat fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: an open descriptor; `st` is ours to write.
        ok_or_err(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
        Ok(st)
    }

    pub fn fchown(fd: &OwnedFd, uid: u32, gid: u32) -> io::Result<()> {
        // SAFETY: an open descriptor; plain integers.
        ok_or_err(unsafe { libc::fchown(fd.as_raw_fd(), uid, gid) })
    }

    pub fn fsync(fd: &OwnedFd) -> io::Result<()> {
        // SAFETY: an open descriptor.
        ok_or_err(unsafe { libc::fsync(fd.as_raw_fd()) })
    }

    pub fn clear_nonblock(fd: &OwnedFd) -> io::Result<()> {
        // SAFETY: fcntl on an open descriptor with integer arguments.
        let fl = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
        if fl < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above.
        ok_or_err(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK) })
    }

    pub fn geteuid() -> u32 {
        // SAFETY: no arguments, cannot fail.
        unsafe { libc::geteuid() }
    }
}

#[cfg(test)]
mod tests;
