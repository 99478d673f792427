//! Two network namespaces, `a` (the capture side, where servers and the
//! UI run) and `b` (the replay side), joined by a veth pair; deleted on
//! drop. For the tests that replay a capture into `b`'s end and capture
//! `a`'s (capture_live.rs, live_records.rs, serve_live.rs).

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use super::live::sh;

pub struct VethPair {
    pub a: String,
    pub b: String,
    /// The end in `a`.
    pub va: String,
    /// The end in `b`.
    pub vb: String,
}

impl VethPair {
    /// Namespaces `wl<tag>a…` and `wl<tag>b…` (a one-letter `tag` per
    /// test file keeps the names apart), both ends up with IPv6 off (no
    /// neighbour or multicast-listener chatter mixing with the replayed
    /// frames), and each namespace's `lo` up.
    pub fn new(tag: &str) -> VethPair {
        Self::make(tag, None, true)
    }

    /// [`VethPair::new`] with both ends' MTU `mtu` (jumbo frames pass whole).
    pub fn with_mtu(tag: &str, mtu: u32) -> VethPair {
        Self::make(tag, Some(mtu), true)
    }

    /// [`VethPair::with_mtu`] with each namespace's `lo` left down, as
    /// capture_live's floods were measured: with `lo` up, its port-scan
    /// flood had 47,308 and 43,737 kernel drops in two runs and too few
    /// evictions; with it down, 0 drops in the runs since (load 17 on 2
    /// cores; the cause not found).
    pub fn with_mtu_lo_down(tag: &str, mtu: u32) -> VethPair {
        Self::make(tag, Some(mtu), false)
    }

    fn make(tag: &str, mtu: Option<u32>, lo_up: bool) -> VethPair {
        static N: AtomicU32 = AtomicU32::new(0);
        let id = format!("{}{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let ns = VethPair { a: format!("wl{tag}a{id}"), b: format!("wl{tag}b{id}"), va: format!("w{tag}a{id}"), vb: format!("w{tag}b{id}") };
        sh(&["ip", "netns", "add", &ns.a]);
        sh(&["ip", "netns", "add", &ns.b]);
        let mtu = mtu.map(|m| m.to_string());
        let mtu: Vec<&str> = mtu.iter().flat_map(|m| ["mtu", m.as_str()]).collect();
        let mut link = vec!["ip", "link", "add", &ns.va, "netns", &ns.a];
        link.extend(&mtu);
        link.extend(["type", "veth", "peer", "name", &ns.vb, "netns", &ns.b]);
        link.extend(&mtu);
        sh(&link);
        for (n, v) in [(&ns.a, &ns.va), (&ns.b, &ns.vb)] {
            sh(&["ip", "netns", "exec", n, "sysctl", "-q", "-w", &format!("net.ipv6.conf.{v}.disable_ipv6=1")]);
            sh(&["ip", "-n", n, "link", "set", v, "up"]);
            if lo_up {
                sh(&["ip", "-n", n, "link", "set", "lo", "up"]);
            }
        }
        ns
    }

    /// `curl` of `url` inside namespace a (where the server's loopback is):
    /// the body, or None on any failure.
    pub fn get(&self, url: &str) -> Option<String> {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.a, "curl", "-s", "-f", "--max-time", "20", url])
            .output()
            .ok()?;
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).to_string())
    }

    /// Polls `url` from namespace a every 200 ms until it answers (at most
    /// 20 s; `what` names the server in the failure).
    pub fn wait_answer(&self, url: &str, what: &str) {
        let t0 = std::time::Instant::now();
        while self.get(url).is_none() {
            assert!(t0.elapsed() < std::time::Duration::from_secs(20), "{what} did not answer");
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// Replays `pcap` into the b end as fast as it goes; tcpreplay must succeed.
    pub fn replay(&self, pcap: &Path) {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.b, "tcpreplay", "--topspeed", "-q", "-i", &self.vb])
            .arg(pcap)
            .output()
            .expect("run tcpreplay");
        assert!(out.status.success(), "tcpreplay {}: {}", pcap.display(), String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end inside it (and its peer).
        let _ = Command::new("ip").args(["netns", "del", &self.a]).status();
        let _ = Command::new("ip").args(["netns", "del", &self.b]).status();
    }
}

/// True if `prog arg` runs and succeeds (`--version` and the like: is it installed).
pub fn runs(prog: &str, arg: &str) -> bool {
    Command::new(prog).arg(arg).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).status().is_ok_and(|s| s.success())
}

/// Root and every (program, argument) of `progs` running, or a skip
/// naming what is missing; `who` names the tests.
pub fn requirements(who: &str, progs: &[(&str, &str)]) -> bool {
    if !super::live::is_root() {
        super::live::skip(&format!("{who} needs root (network namespaces)"));
        return false;
    }
    for &(prog, arg) in progs {
        if !runs(prog, arg) {
            super::live::skip(&format!("{prog} is not installed"));
            return false;
        }
    }
    true
}
