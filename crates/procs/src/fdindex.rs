//! Socket inode -> pid, from the links in /proc/PID/fd, kept up to date
//! incrementally: a miss lists /proc once and reads the fds of processes
//! not indexed yet; only if the inode is still unknown are processes of the
//! socket's uid read again, at most a budget of them per batch. No miss
//! ever walks every process's fds.

use std::collections::{HashMap, HashSet};

/// What indexing cost, for the statistics and the benchmark.
#[derive(Debug, Default, Clone, Copy)]
pub struct IndexStats {
    /// Listings of /proc.
    pub listings: u64,
    /// Processes whose fd directory was read.
    pub pid_scans: u64,
    /// fd links read.
    pub fd_links: u64,
}

struct Pid {
    uid: u32,
    inodes: Vec<u64>,
}

/// Processes remembered as recently asked about.
const HOT: usize = 32;

#[derive(Default)]
pub struct FdIndex {
    by_inode: HashMap<u64, u32>,
    pids: HashMap<u32, Pid>,
    /// Cursor for re-reading processes of a uid round-robin, so a budget
    /// smaller than the uid's processes still reaches all of them.
    rescan_from: u32,
    /// Processes whose sockets were asked about lately, latest last: the
    /// ones likely to open the next (servers accepting, clients in a loop)
    /// are read again first.
    hot: Vec<u32>,
    pub stats: IndexStats,
}

impl FdIndex {
    pub fn lookup(&self, inode: u64) -> Option<u32> {
        self.by_inode.get(&inode).copied()
    }

    /// A socket of `pid` was asked about: read it again first next time.
    pub fn touch(&mut self, pid: u32) {
        if self.hot.last() == Some(&pid) {
            return;
        }
        self.hot.retain(|&p| p != pid);
        if self.hot.len() >= HOT {
            self.hot.remove(0);
        }
        self.hot.push(pid);
    }

    /// Lists /proc: reads the fds of new processes, forgets ended ones.
    /// Returns the new pids (their owners' cached details are stale).
    pub fn refresh_new(&mut self, new: &mut Vec<u32>) {
        new.clear();
        self.stats.listings += 1;
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return;
        };
        let mut alive = HashSet::with_capacity(self.pids.len() + 16);
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            alive.insert(pid);
            if !self.pids.contains_key(&pid) {
                new.push(pid);
            }
        }
        let gone: Vec<u32> = self.pids.keys().copied().filter(|p| !alive.contains(p)).collect();
        for p in gone {
            self.forget(p);
        }
        for &p in new.iter() {
            self.scan(p);
        }
    }

    /// Reads again the fds of known processes running as `uid`, the ones
    /// asked about lately first, until every inode of `wanted` is indexed
    /// or `budget` processes were read; returns how many were.
    pub fn rescan_uid(&mut self, uid: u32, budget: usize, wanted: &[u64]) -> usize {
        let all_found = |idx: &FdIndex| wanted.iter().all(|i| idx.by_inode.contains_key(i));
        let hot: Vec<u32> =
            self.hot.iter().rev().copied().filter(|p| self.pids.get(p).is_some_and(|e| e.uid == uid)).take(budget).collect();
        let mut read = 0;
        for &p in &hot {
            self.scan(p);
            read += 1;
            if all_found(self) {
                return read;
            }
        }
        let budget = budget - hot.len();
        let mut pids: Vec<u32> =
            self.pids.iter().filter(|(k, p)| p.uid == uid && !hot.contains(k)).map(|(&k, _)| k).collect();
        pids.sort_unstable();
        let start = pids.partition_point(|&p| p < self.rescan_from);
        let take: Vec<u32> = pids[start..].iter().chain(&pids[..start]).take(budget).copied().collect();
        if let Some(&last) = take.last() {
            self.rescan_from = last + 1;
        }
        for &p in &take {
            self.scan(p);
            read += 1;
            if all_found(self) {
                break;
            }
        }
        read
    }

    fn forget(&mut self, pid: u32) {
        if let Some(p) = self.pids.remove(&pid) {
            for i in p.inodes {
                if self.by_inode.get(&i) == Some(&pid) {
                    self.by_inode.remove(&i);
                }
            }
        }
    }

    fn scan(&mut self, pid: u32) {
        self.forget(pid);
        self.stats.pid_scans += 1;
        let uid = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|v| v.split_whitespace().nth(1)?.parse().ok())
            })
            .unwrap_or(u32::MAX);
        let mut inodes = Vec::new();
        if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
            for e in dir.flatten() {
                self.stats.fd_links += 1;
                let Ok(target) = std::fs::read_link(e.path()) else {
                    continue;
                };
                let Some(inode) = target
                    .to_str()
                    .and_then(|s| s.strip_prefix("socket:["))
                    .and_then(|s| s.strip_suffix(']'))
                    .and_then(|s| s.parse::<u64>().ok())
                else {
                    continue;
                };
                inodes.push(inode);
                // A socket shared by several processes (a listener inherited
                // by workers) is named after the first, usually the parent.
                let owner = self.by_inode.entry(inode).or_insert(pid);
                if *owner > pid && !self.pids.contains_key(owner) {
                    *owner = pid;
                }
            }
        }
        self.pids.insert(pid, Pid { uid, inodes });
    }

    pub fn lookup_pid(&self, pid: u32) -> bool {
        self.pids.contains_key(&pid)
    }

    pub fn processes(&self) -> usize {
        self.pids.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn inode_of(fd: i32) -> u64 {
        let t = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
        t.to_str().unwrap().trim_start_matches("socket:[").trim_end_matches(']').parse().unwrap()
    }

    #[test]
    fn new_sockets_of_a_known_process_are_found_by_rescanning_its_uid() {
        let mut idx = FdIndex::default();
        let mut new = Vec::new();
        idx.refresh_new(&mut new);
        assert!(new.contains(&std::process::id()));
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let inode = inode_of(s.as_raw_fd());
        assert_eq!(idx.lookup(inode), None);
        // Already indexed: a listing alone does not read it again.
        idx.refresh_new(&mut new);
        assert!(!new.contains(&std::process::id()));
        let uid = idx.pids[&std::process::id()].uid;
        let mut budget_rounds = 0;
        while idx.lookup(inode).is_none() {
            budget_rounds += 1;
            assert!(budget_rounds < 10_000, "never found");
            idx.rescan_uid(uid, 64, &[inode]);
        }
        assert_eq!(idx.lookup(inode), Some(std::process::id()));
    }
}
