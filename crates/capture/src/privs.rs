//! Dropping privileges once the capture sockets are open: an open AF_PACKET
//! socket keeps working without any capability, so the rest of the process
//! (decoding other people's packets) runs as an unprivileged user.

use std::ffi::{CStr, CString};
use std::path::Path;

use crate::{CaptureError, ErrorKind};

/// A user to run as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
}

impl User {
    /// Looks a user up by name (getpwnam_r), or by number.
    pub fn lookup(name: &str) -> Result<User, CaptureError> {
        let unknown = || CaptureError::new(ErrorKind::Privileges, format!("--user {name}: no such user"));
        let cname = CString::new(name).map_err(|_| unknown())?;
        let mut buf = vec![0 as libc::c_char; 16384];
        // SAFETY: passwd is plain data; zeroed is a valid value.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: all pointers are valid for the sizes given.
        let r = unsafe { libc::getpwnam_r(cname.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut result) };
        if r != 0 || result.is_null() {
            if let Ok(uid) = name.parse::<libc::uid_t>() {
                return Ok(User { name: name.to_string(), uid, gid: uid });
            }
            return Err(unknown());
        }
        // SAFETY: getpwnam_r filled pw_name with a NUL-terminated string.
        let pname = unsafe { CStr::from_ptr(pw.pw_name) }.to_string_lossy().into_owned();
        Ok(User { name: pname, uid: pw.pw_uid, gid: pw.pw_gid })
    }
}

/// True when running as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: no arguments.
    unsafe { libc::geteuid() == 0 }
}

/// Checks that `user` can create and remove entries in the directory
/// `dir` (and, with `recursive`, in every directory below it, links not
/// followed) once it is that user with no supplementary group, as
/// [`drop_to`] leaves it. Nothing is changed: wirelog gives the user only
/// what it creates itself (see wirelog-safefs), never an existing directory,
/// so one that is not the user's already is refused here, named, before
/// any packet is read rather than at the first file written in it.
pub fn check_writable(dir: &Path, user: &User, recursive: bool) -> Result<(), CaptureError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| CaptureError::os(ErrorKind::Privileges, dir.display(), e))?;
    if !meta.is_dir() {
        return Ok(());
    }
    let mode = meta.mode();
    // Write and search permission for the class the user falls in.
    let wx = if meta.uid() == user.uid {
        mode & 0o300 == 0o300
    } else if meta.gid() == user.gid {
        mode & 0o030 == 0o030
    } else {
        mode & 0o003 == 0o003
    };
    if !wx {
        return Err(CaptureError::new(
            ErrorKind::Privileges,
            format!(
                "{} is not writable by {} (uid {}), the user capture runs as once its sockets are open; \
                 wirelog gives that user only what it creates itself: give it this directory \
                 (chown {} {}), name a directory wirelog may create, or use --user root",
                dir.display(),
                user.name,
                user.uid,
                user.name,
                dir.display()
            ),
        ));
    }
    if recursive {
        let entries = std::fs::read_dir(dir).map_err(|e| CaptureError::os(ErrorKind::Privileges, dir.display(), e))?;
        for e in entries {
            let e = e.map_err(|e| CaptureError::os(ErrorKind::Privileges, dir.display(), e))?;
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                check_writable(&e.path(), user, true)?;
            }
        }
    }
    Ok(())
}

/// Becomes `user` for good: no supplementary groups, its group, its uid, no
/// new privileges via exec, and no capabilities left (checked in
/// /proc/self/status). Call before starting threads.
pub fn drop_to(user: &User) -> Result<(), CaptureError> {
    drop_to_inner(user)?;
    no_new_privs()?;
    verify_no_capabilities()
}

fn drop_to_inner(user: &User) -> Result<(), CaptureError> {
    let fail = |what: &str| {
        CaptureError::last_os(ErrorKind::Privileges, format!("dropping privileges to {}: {what}", user.name))
    };
    // SAFETY: plain syscalls.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0 {
            return Err(fail("setgroups"));
        }
        if libc::setgid(user.gid) != 0 {
            return Err(fail("setgid"));
        }
        if libc::setuid(user.uid) != 0 {
            return Err(fail("setuid"));
        }
        // setuid(0) must now fail, or the drop did not stick.
        if user.uid != 0 && libc::setuid(0) == 0 {
            return Err(CaptureError::new(ErrorKind::Privileges, "setuid(0) still succeeds after dropping privileges"));
        }
    }
    Ok(())
}

/// CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE: what reading other users'
/// /proc/PID/fd takes (`capture --processes`).
pub const CAPS_READ_PROCS: u64 = (1 << 2) | (1 << 19);

/// Like [`drop_to`], but the calling thread keeps the capabilities in
/// `keep` (and only them, if it had them); threads it starts next inherit
/// them until [`drop_capabilities`] clears them in the caller. Other
/// threads already running keep none.
pub fn drop_to_keeping(user: &User, keep: u64) -> Result<(), CaptureError> {
    // SAFETY: plain prctl; keeps the permitted set across setuid, for this
    // thread only.
    if unsafe { libc::prctl(libc::PR_SET_KEEPCAPS, 1, 0, 0, 0) } != 0 {
        return Err(CaptureError::last_os(ErrorKind::Privileges, "prctl(PR_SET_KEEPCAPS)"));
    }
    let dropped = drop_to_inner(user);
    // SAFETY: as above.
    unsafe { libc::prctl(libc::PR_SET_KEEPCAPS, 0, 0, 0, 0) };
    dropped?;
    set_capabilities(keep)?;
    no_new_privs()
}

/// Sets the calling thread's effective and permitted capabilities to
/// `caps` (bits as in CapEff), inheritable none.
fn set_capabilities(caps: u64) -> Result<(), CaptureError> {
    #[repr(C)]
    struct CapHeader {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    struct CapData {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut hdr = CapHeader { version: 0x2008_0522, pid: 0 }; // _LINUX_CAPABILITY_VERSION_3
    let (lo, hi) = (caps as u32, (caps >> 32) as u32);
    let data = [
        CapData { effective: lo, permitted: lo, inheritable: 0 },
        CapData { effective: hi, permitted: hi, inheritable: 0 },
    ];
    // SAFETY: capset with a v3 header and two data words, as the ABI requires.
    if unsafe { libc::syscall(libc::SYS_capset, &mut hdr, data.as_ptr()) } != 0 {
        return Err(CaptureError::last_os(ErrorKind::Privileges, "setting capabilities (capset)"));
    }
    Ok(())
}

/// For a non-root process started with file capabilities (setcap
/// cap_net_raw,cap_net_admin+ep): clears every capability once the sockets
/// are open.
pub fn drop_capabilities() -> Result<(), CaptureError> {
    set_capabilities(0)?;
    no_new_privs()?;
    verify_no_capabilities()
}

fn no_new_privs() -> Result<(), CaptureError> {
    // SAFETY: plain prctl.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(CaptureError::last_os(ErrorKind::Privileges, "prctl(PR_SET_NO_NEW_PRIVS)"));
    }
    Ok(())
}

/// The effective capability mask (CapEff in /proc/self/status).
pub fn effective_capabilities() -> Result<u64, CaptureError> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| CaptureError::os(ErrorKind::Privileges, "/proc/self/status", e))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .ok_or_else(|| CaptureError::new(ErrorKind::Privileges, "no CapEff line in /proc/self/status"))
}

fn verify_no_capabilities() -> Result<(), CaptureError> {
    match effective_capabilities()? {
        0 => Ok(()),
        caps => Err(CaptureError::new(
            ErrorKind::Privileges,
            format!("capabilities still effective after dropping privileges: {caps:#x}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users() {
        let root = User::lookup("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        let e = User::lookup("no-such-user-wirelog").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Privileges);
        assert!(e.message.contains("no such user"));
        assert_eq!(User::lookup("4242").unwrap().uid, 4242);
    }

    #[test]
    fn capabilities_are_readable() {
        let caps = effective_capabilities().unwrap();
        assert_eq!(caps != 0, is_root() || caps != 0);
    }

    /// Runs the real drop in a child process (it cannot be undone).
    #[test]
    fn drop_to_nobody_leaves_no_capabilities() {
        if !is_root() {
            eprintln!("SKIPPED: dropping privileges needs root");
            return;
        }
        let nobody = User::lookup("nobody").unwrap();
        let dir = std::env::temp_dir().join(format!("wirelog-privs-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        for d in [dir.clone(), dir.join("sub")] {
            std::os::unix::fs::chown(&d, Some(nobody.uid), Some(nobody.gid)).unwrap();
        }
        check_writable(&dir, &nobody, true).unwrap();
        // SAFETY: fork in a test; the child only makes syscalls and exits.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let ok = drop_to(&nobody).is_ok()
                && effective_capabilities().ok() == Some(0)
                && std::fs::write(dir.join("sub/f"), b"x").is_ok()
                && std::fs::write("/root/wirelog-must-fail", b"x").is_err();
            // SAFETY: leaving the child without running the parent's destructors.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        // SAFETY: waiting for our child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child failed: {status}");
    }

    /// A directory below that stays root's is named; nothing is changed.
    #[test]
    fn a_directory_not_the_users_is_named() {
        use std::os::unix::fs::MetadataExt;
        if !is_root() {
            return;
        }
        let nobody = User::lookup("nobody").unwrap();
        let dir = std::env::temp_dir().join(format!("wirelog-privs-check-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("conn/2026-01-01")).unwrap();
        for d in [dir.clone(), dir.join("conn")] {
            std::os::unix::fs::chown(&d, Some(nobody.uid), Some(nobody.gid)).unwrap();
        }
        check_writable(&dir, &nobody, false).unwrap();
        let e = check_writable(&dir, &nobody, true).unwrap_err();
        assert!(e.message.contains("conn/2026-01-01 is not writable by nobody"), "{}", e.message);
        assert_eq!(std::fs::metadata(dir.join("conn/2026-01-01")).unwrap().uid(), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
