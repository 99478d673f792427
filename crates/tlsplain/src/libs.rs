//! Which TLS library files to probe, and which processes to watch.
//!
//! A uprobe is set on a file (the kernel keys it by inode) and fires in
//! every process that maps that file, including processes started later. So
//! the probes go on each distinct library file once: the system's own
//! `libssl.so.*` at start, then every other copy a process maps (a
//! container's, a bundled one), found by reading `/proc/PID/maps` of each
//! process once when it is first seen, and again for a bounded number of
//! known processes per round (a program may load the library late, as
//! Python does on `import ssl`). A file is opened through
//! `/proc/PID/root/...`, so a container's library is the container's.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where the system's libraries are, for the files probed at start.
const SYSTEM_DIRS: [&str; 5] = ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/lib64", "/usr/local/lib"];

/// Known processes re-read per round for a library loaded late.
pub const REREAD_PER_ROUND: usize = 64;

/// A file's identity: (device, inode).
pub type FileId = (u64, u64);

/// True for the names of OpenSSL's (and BoringSSL's, LibreSSL's) libssl
/// and of GnuTLS's library (`libgnutls.so.30`; not its `-dane`,
/// `-openssl` or C++ companions, which hold no record functions).
pub fn is_libssl(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.starts_with("libssl.so") || name.starts_with("libssl3.so") || name.starts_with("libgnutls.so")
}

/// The system's libssl files (by identity, one path each).
pub fn system_files() -> Vec<(FileId, PathBuf)> {
    let mut out: Vec<(FileId, PathBuf)> = Vec::new();
    for d in SYSTEM_DIRS {
        let Ok(rd) = std::fs::read_dir(d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if !is_libssl(&p.to_string_lossy()) {
                continue;
            }
            if let Ok(m) = std::fs::metadata(&p) {
                let id = (m.dev(), m.ino());
                if m.is_file() && !out.iter().any(|(i, _)| *i == id) {
                    out.push((id, p));
                }
            }
        }
    }
    out
}

/// The libssl files process `pid` maps, as paths openable from here.
pub fn mapped_by(pid: u32) -> Vec<(FileId, PathBuf)> {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else { return Vec::new() };
    let mut out: Vec<(FileId, PathBuf)> = Vec::new();
    for line in maps.lines() {
        // address perms offset dev inode path
        let mut f = line.split_whitespace();
        let (Some(_), Some(_), Some(_), Some(_), Some(inode), Some(path)) = (f.next(), f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        if inode == "0" || !path.starts_with('/') || !is_libssl(path) {
            continue;
        }
        let p = PathBuf::from(format!("/proc/{pid}/root{path}"));
        if let Ok(m) = std::fs::metadata(&p) {
            let id = (m.dev(), m.ino());
            if !out.iter().any(|(i, _)| *i == id) {
                out.push((id, p));
            }
        }
    }
    out
}

/// The processes `--tls-plaintext` is limited to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Limit {
    Pid(u32),
    /// The process name (`comm`, as `ps -o comm` shows it).
    Comm(String),
    /// A cgroup v2 path (as in /proc/PID/cgroup, from the hierarchy's root):
    /// processes in it or below it.
    Cgroup(String),
}

impl Limit {
    /// Digits are a pid, a path starting with '/' a cgroup, anything else
    /// a process name.
    pub fn parse(s: &str) -> Result<Limit, String> {
        if s.is_empty() {
            return Err("--tls-plaintext: an empty PID|COMM|CGROUP".into());
        }
        if s.bytes().all(|b| b.is_ascii_digit()) {
            return s.parse().map(Limit::Pid).map_err(|_| format!("--tls-plaintext: pid {s} out of range"));
        }
        if s.starts_with('/') {
            return Ok(Limit::Cgroup(s.trim_end_matches('/').to_string()));
        }
        if s.len() > 15 {
            return Err(format!("--tls-plaintext: {s:?} is longer than a process name (comm, 15 bytes) can be"));
        }
        Ok(Limit::Comm(s.to_string()))
    }

    pub fn matches(&self, pid: u32) -> bool {
        match self {
            Limit::Pid(p) => *p == pid,
            Limit::Comm(c) => std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|n| n.trim_end() == c),
            Limit::Cgroup(g) => std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|t| {
                t.lines().any(|l| {
                    let path = l.splitn(3, ':').nth(2).unwrap_or("");
                    path == g || path.starts_with(&format!("{g}/")) || g.is_empty()
                })
            }),
        }
    }
}

/// The processes seen so far and the library files already probed.
#[derive(Default)]
pub struct Scanner {
    seen: HashSet<u32>,
    /// Known processes in the order they are re-read.
    order: Vec<u32>,
    next: usize,
    pub files: HashMap<FileId, PathBuf>,
}

/// What one round found.
#[derive(Default)]
pub struct Found {
    /// Library files not probed before.
    pub files: Vec<(FileId, PathBuf)>,
    /// Processes first seen this round.
    pub new_pids: Vec<u32>,
}

impl Scanner {
    /// Lists /proc: new processes have their maps read; up to
    /// [`REREAD_PER_ROUND`] known ones are read again.
    pub fn round(&mut self) -> Found {
        let mut found = Found::default();
        let Ok(rd) = std::fs::read_dir("/proc") else { return found };
        let mut alive = HashSet::new();
        for e in rd.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            alive.insert(pid);
            if self.seen.insert(pid) {
                self.order.push(pid);
                found.new_pids.push(pid);
                self.look(pid, &mut found);
            }
        }
        self.seen.retain(|p| alive.contains(p));
        self.order.retain(|p| alive.contains(p));
        for _ in 0..REREAD_PER_ROUND.min(self.order.len()) {
            self.next %= self.order.len();
            let pid = self.order[self.next];
            self.next += 1;
            self.look(pid, &mut found);
        }
        found
    }

    fn look(&mut self, pid: u32, found: &mut Found) {
        for (id, path) in mapped_by(pid) {
            if !self.files.contains_key(&id) && !found.files.iter().any(|(i, _)| *i == id) {
                found.files.push((id, path));
            }
        }
    }
}

/// The path of a file for messages: without the `/proc/PID/root` prefix.
pub fn shown(p: &Path) -> String {
    let s = p.to_string_lossy();
    match s.strip_prefix("/proc/").and_then(|r| r.split_once("/root/")) {
        Some((_, rest)) => format!("/{rest}"),
        None => s.into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_a_pid_a_cgroup_or_a_name() {
        assert_eq!(Limit::parse("1234").unwrap(), Limit::Pid(1234));
        assert_eq!(Limit::parse("/system.slice/nginx.service/").unwrap(), Limit::Cgroup("/system.slice/nginx.service".into()));
        assert_eq!(Limit::parse("nginx").unwrap(), Limit::Comm("nginx".into()));
        assert!(Limit::parse("").unwrap_err().contains("empty"));
        assert!(Limit::parse("99999999999").unwrap_err().contains("out of range"));
        assert!(Limit::parse("a-very-long-process-name").unwrap_err().contains("15 bytes"));
        let me = std::process::id();
        assert!(Limit::Pid(me).matches(me));
        let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
        assert!(Limit::Comm(comm.trim_end().into()).matches(me));
        assert!(!Limit::Comm("surely-not-us".into()).matches(me));
        // Every process is under the root cgroup.
        assert!(Limit::Cgroup(String::new()).matches(me));
    }

    #[test]
    fn library_names_and_shown_paths() {
        assert!(is_libssl("/usr/lib/x86_64-linux-gnu/libssl.so.3"));
        assert!(is_libssl("libssl.so.1.1"));
        assert!(!is_libssl("/usr/lib/x86_64-linux-gnu/libcrypto.so.3"));
        assert!(!is_libssl("/usr/lib/x86_64-linux-gnu/libssl-dev.txt"));
        assert!(is_libssl("/usr/lib/x86_64-linux-gnu/libgnutls.so.30"));
        assert!(!is_libssl("/usr/lib/x86_64-linux-gnu/libgnutls-openssl.so.27"));
        assert!(!is_libssl("/usr/lib/x86_64-linux-gnu/libgnutlsxx.so.30"));
        assert_eq!(shown(Path::new("/proc/42/root/usr/lib/libssl.so.3")), "/usr/lib/libssl.so.3");
        assert_eq!(shown(Path::new("/usr/lib/libssl.so.3")), "/usr/lib/libssl.so.3");
    }
}
