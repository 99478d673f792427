//! Cgroup v2 ids to paths, for owners whose process is gone before its
//! /proc/PID/cgroup could be read: the eBPF hook records the cgroup id,
//! which is the inode number of the cgroup's directory in cgroupfs.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Directories walked per listing at most, so a host with huge cgroup
/// trees cannot stall the resolver.
const MAX_DIRS: usize = 100_000;
/// A miss lists the tree again at most this often.
const RELIST_AFTER: Duration = Duration::from_secs(1);

#[derive(Default)]
pub struct CgroupNames {
    /// Where cgroup2 is mounted; `None` until looked for, `Some(None)` when
    /// not mounted in this mount namespace (e.g. under `ip netns exec`).
    root: Option<Option<PathBuf>>,
    paths: HashMap<u64, String>,
    listed: Option<Instant>,
}

impl CgroupNames {
    /// The cgroup path ("/system.slice/nginx.service") of a cgroup id.
    pub fn path(&mut self, id: u64) -> Option<String> {
        if let Some(p) = self.paths.get(&id) {
            return Some(p.clone());
        }
        if self.listed.is_some_and(|t| t.elapsed() < RELIST_AFTER) {
            return None;
        }
        let root = self.root.get_or_insert_with(cgroup2_mount).clone()?;
        self.listed = Some(Instant::now());
        self.paths.clear();
        let mut stack = vec![root.clone()];
        let mut seen = 0;
        while let Some(dir) = stack.pop() {
            seen += 1;
            if seen > MAX_DIRS {
                break;
            }
            let Ok(m) = std::fs::metadata(&dir) else { continue };
            let rel = dir.strip_prefix(&root).map(|r| format!("/{}", r.display())).unwrap_or_default();
            self.paths.insert(m.ino(), rel);
            let Ok(rd) = std::fs::read_dir(&dir) else { continue };
            stack.extend(rd.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()));
        }
        self.paths.get(&id).cloned()
    }
}

/// The mount point of the cgroup2 hierarchy, from /proc/self/mountinfo.
fn cgroup2_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        if right.split(' ').next()? != "cgroup2" {
            return None;
        }
        Some(Path::new(left.split(' ').nth(4)?).to_path_buf())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_cgroup_is_found_by_its_inode() {
        let Some(root) = cgroup2_mount() else {
            eprintln!("SKIPPED: no cgroup2 mounted");
            return;
        };
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let path = own.lines().find_map(|l| l.strip_prefix("0::")).expect("a cgroup v2 line").to_string();
        let ino = std::fs::metadata(root.join(path.trim_start_matches('/'))).unwrap().ino();
        let mut c = CgroupNames::default();
        assert_eq!(c.path(ino).as_deref(), Some(path.as_str()));
    }
}
