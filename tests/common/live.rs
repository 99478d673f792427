//! Shared by the live-capture tests (capture_live.rs, capture_servers.rs):
//! the requirement switch, running commands, and a `wirelog capture` child
//! that is stopped by SIGINT or killed when its test fails.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_wirelog");

/// WIRELOG_REQUIRE_ALL_TESTS=1 (CI): a missing requirement fails the test.
pub fn required() -> bool {
    std::env::var("WIRELOG_REQUIRE_ALL_TESTS").is_ok_and(|v| v == "1")
}

/// Skips with a message, or fails when every test is required.
pub fn skip(why: &str) {
    assert!(!required(), "WIRELOG_REQUIRE_ALL_TESTS=1 but {why}");
    eprintln!("SKIPPED: {why}");
}

pub fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

/// Runs a command to its end; it must succeed.
pub fn sh(args: &[&str]) {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A program's stdout then its stderr, for messages.
pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The text after `key` on the first line that has it, trimmed.
pub fn after<'a>(s: &'a str, key: &str) -> Option<&'a str> {
    s.lines().find_map(|l| l.split_once(key).map(|(_, r)| r.trim()))
}

/// A number in `line` just before `what` (a figure of a stats line).
pub fn count_before(line: &str, what: &str) -> u64 {
    line.split(what).next().unwrap().rsplit(' ').next().unwrap().parse().unwrap_or_else(|_| panic!("{what} in {line}"))
}

/// The whole numbers in `line`, in order (a stats line's figures).
pub fn numbers(line: &str) -> Vec<u64> {
    line.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).filter_map(|s| s.parse().ok()).collect()
}

/// The tls-plaintext summary line of a capture's stderr.
pub fn tls_plaintext_stats(err: &str) -> &str {
    err.lines().find(|l| l.contains("wirelog: tls-plaintext: ") && l.contains("events")).unwrap_or_else(|| panic!("{err}"))
}

/// A running `wirelog capture` inside a network namespace.
pub struct LiveCapture {
    child: Child,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Drop for LiveCapture {
    fn drop(&mut self) {
        // Only when a test failed before stop(): no capture outlives its test.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl LiveCapture {
    /// `ip netns exec NS wirelog capture -i IFACE ARGS...`; returns once its
    /// sockets are open (its first stderr line says so).
    pub fn start(ns: &str, iface: &str, args: &[&std::ffi::OsStr]) -> LiveCapture {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns, BIN, "capture", "-i", iface])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start wirelog capture");
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        err.read_line(&mut first).unwrap();
        assert!(first.contains("capturing on"), "capture did not start: {first}");
        let stderr = std::thread::spawn(move || {
            let mut rest = first;
            err.read_to_string(&mut rest).unwrap();
            rest
        });
        LiveCapture { child, stderr: Some(stderr) }
    }

    /// `capture -i lo` in namespace `ns` with no store and no periodic
    /// stats, as root, its logs into `logs`, then `extra` flags.
    pub fn lo_logs(ns: &str, logs: &Path, extra: &[&str]) -> LiveCapture {
        let mut args: Vec<&std::ffi::OsStr> =
            ["--no-store", "--stats-interval", "0", "--user", "root", "--logs"].iter().map(std::ffi::OsStr::new).collect();
        args.push(logs.as_os_str());
        args.extend(extra.iter().map(std::ffi::OsStr::new));
        LiveCapture::start(ns, "lo", &args)
    }

    /// wirelog's pid (`ip netns exec` execs the command).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGINT, then the exit status must be 0. Returns stderr.
    pub fn stop(self) -> String {
        let (status, err) = self.interrupt();
        assert!(status.success(), "capture exited with {status}: {err}");
        err
    }

    /// SIGINT; the exit status and stderr.
    pub fn interrupt(mut self) -> (std::process::ExitStatus, String) {
        sh(&["kill", "-INT", &self.child.id().to_string()]);
        let status = self.child.wait().unwrap();
        (status, self.stderr.take().unwrap().join().unwrap())
    }
}

/// The last `wirelog: stats:` line of a capture's stderr.
pub fn last_stats(stderr: &str) -> &str {
    stderr.lines().rev().find(|l| l.starts_with("wirelog: stats: ")).expect("a stats line")
}
