//! One network namespace with only its loopback up, for tests that capture
//! `lo` with tcpdump (the way a user captures their own host: every TCP/UDP
//! checksum offloaded). Processes started in it are stopped by PID on drop;
//! the namespace is deleted on drop.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::live::sh;

pub struct LoNs {
    pub name: String,
}

impl LoNs {
    pub fn new(tag: &str) -> LoNs {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!("wl{tag}{}x{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        sh(&["ip", "netns", "add", &name]);
        let ns = LoNs { name };
        sh(&["ip", "-n", &ns.name, "link", "set", "lo", "up"]);
        ns
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).args(args);
        c
    }

    /// Runs a program in the namespace to its end; it must succeed.
    pub fn run(&self, args: &[&str]) -> Output {
        let out = self.cmd(args).output().unwrap_or_else(|e| panic!("{args:?}: {e}"));
        assert!(
            out.status.success(),
            "{args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        out
    }

    /// Starts a long-running program in the namespace, output to `log`.
    pub fn spawn(&self, name: &'static str, args: &[&str], log: &Path) -> Proc {
        let f = std::fs::File::create(log).unwrap();
        let child = self
            .cmd(args)
            .stdin(Stdio::null())
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        Proc { name, child }
    }

    /// True if something in the namespace accepts a TCP connection on
    /// 127.0.0.1:`port` (tried once, by Python's socket module).
    pub fn accepts(&self, port: u16) -> bool {
        let probe = format!("import socket; socket.create_connection(('127.0.0.1', {port})).close()");
        self.cmd(&["python3", "-c", &probe]).output().is_ok_and(|o| o.status.success())
    }

    /// True if a socket of the namespace listens on 127.0.0.1:`port`
    /// (TCP), or is bound there (`udp`), as `ss` lists them.
    pub fn listening(&self, port: u16, udp: bool) -> bool {
        let out = self.cmd(&["ss", if udp { "-uanH" } else { "-tlnH" }]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).contains(&format!("127.0.0.1:{port} "))
    }

    /// Waits (at most 15 s) until `server`, started here with its output in
    /// `log`, is [`listening`](LoNs::listening) on `port`; fails at once,
    /// with the log, if it has exited.
    pub fn wait_listening(&self, server: &mut Proc, log: &Path, port: u16, udp: bool) {
        server.wait_ready(Duration::from_secs(15), log, || self.listening(port, udp));
    }

    /// tcpdump on the namespace's `lo` into `pcap` (whole packets, written
    /// as they come); returns once tcpdump says it is listening.
    pub fn tcpdump(&self, pcap: &Path, filter: &[&str]) -> Proc {
        let log = pcap.with_extension("tcpdump.log");
        let mut args = vec!["tcpdump", "-i", "lo", "-n", "-s", "0", "-U", "-w", pcap.to_str().unwrap()];
        args.extend_from_slice(filter);
        let mut p = self.spawn("tcpdump", &args, &log);
        wait_for("tcpdump", Duration::from_secs(20), || {
            assert!(p.alive(), "tcpdump exited: {}", std::fs::read_to_string(&log).unwrap_or_default());
            std::fs::read_to_string(&log).unwrap_or_default().contains("listening on")
        });
        p
    }
}

/// Ends every process still in a namespace (a broker's runtime, epmd, a
/// JVM) by PID when dropped, before the namespace itself goes; twice, for
/// children started while the first round was ending their parents.
pub struct Reap<'a>(pub &'a LoNs);

impl Drop for Reap<'_> {
    fn drop(&mut self) {
        for _ in 0..2 {
            let pids = Command::new("ip").args(["netns", "pids", &self.0.name]).output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
            for pid in pids.split_whitespace() {
                let _ = Command::new("kill").arg(pid).status();
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

impl Drop for LoNs {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

/// A process started by a test; SIGTERM (then SIGKILL) by PID on drop.
pub struct Proc {
    pub name: &'static str,
    pub child: Child,
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Polls `ready` (at most `limit`) until it holds; fails at once, with
    /// the text of `log`, if the process has exited.
    pub fn wait_ready(&mut self, limit: Duration, log: &Path, mut ready: impl FnMut() -> bool) {
        let name = self.name;
        wait_for(name, limit, || {
            assert!(self.alive(), "{name} exited: {}", std::fs::read_to_string(log).unwrap_or_default());
            ready()
        });
    }

    /// SIGINT and wait (tcpdump flushes its file and exits).
    pub fn interrupt(mut self) {
        let _ = Command::new("kill").args(["-INT", &self.child.id().to_string()]).status();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) && self.alive() {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // `ip netns exec` execs the program: the child's pid is the program's.
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).stderr(Stdio::null()).status();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if !self.alive() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!("{} did not stop on SIGTERM: killed", self.name);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `file` has not grown for a second (at most 30 s): tcpdump
/// exits on SIGINT without writing what it has not read yet, and on a busy
/// machine it can lag the traffic by seconds.
pub fn settle(file: &Path) {
    let size = || std::fs::metadata(file).map(|m| m.len()).unwrap_or(0);
    let t0 = Instant::now();
    let (mut last, mut since) = (size(), Instant::now());
    while t0.elapsed() < Duration::from_secs(30) && since.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(100));
        let now = size();
        if now != last {
            (last, since) = (now, Instant::now());
        }
    }
}

/// Polls `f` every 100 ms for at most `limit`.
pub fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "{what}: not ready after {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Root (`root_for` says what for) and every one of `progs` on PATH, or a
/// skip naming what is missing (a failure under WIRELOG_REQUIRE_ALL_TESTS=1).
pub fn needs(root_for: &str, progs: &[&str]) -> bool {
    if !super::live::is_root() {
        super::live::skip(&format!("{root_for} need root"));
        return false;
    }
    let missing: Vec<&str> = progs.iter().copied().filter(|p| !have(p)).collect();
    if !missing.is_empty() {
        super::live::skip(&format!("not installed: {} (scripts/test.sh installs them)", missing.join(", ")));
        return false;
    }
    true
}

/// True if `prog` is on PATH or in /usr/sbin.
pub fn have(prog: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {prog} || test -x /usr/sbin/{prog}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
