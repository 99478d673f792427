//! Shared by the end-to-end tests: captures of real traffic made on demand.

// Each test binary includes this module and uses a part of it.
#![allow(dead_code)]

pub mod live;
pub mod lo;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

static GENERATE: Mutex<()> = Mutex::new(());

pub fn peers_dir() -> PathBuf {
    std::env::var_os("WIRELOG_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/wirelog-peers"))
}

/// Path of a generated capture, running the generator if it is missing.
/// Returns None (and the test is skipped) only when not root and not required.
pub fn capture(script: &str, pcap: &str) -> Option<PathBuf> {
    let _guard = GENERATE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = peers_dir();
    let path = dir.join("pcaps").join(pcap);
    if path.exists() {
        return Some(path);
    }
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.starts_with(b"0"))
        .unwrap_or(false);
    if !is_root {
        let required = std::env::var("WIRELOG_REQUIRE_ALL_TESTS")
            .map(|v| v == "1")
            .unwrap_or(false);
        assert!(
            !required,
            "generating {pcap} needs root (network namespaces)"
        );
        eprintln!("SKIPPED: generating {pcap} needs root; run the suite as root (scripts/test.sh)");
        return None;
    }
    let script_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/bench")
        .join(script);
    let status = Command::new("bash")
        .arg(&script_path)
        .env("PEERS_DIR", &dir)
        .status()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script_path.display()));
    assert!(status.success(), "{script} failed");
    assert!(path.exists(), "{script} did not produce {}", path.display());
    Some(path)
}

/// Rows of a Zeek-style log written by wirelog (`#fields` header, tab-separated).
pub fn read_log(p: &Path) -> Vec<HashMap<String, String>> {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut fields: Vec<String> = Vec::new();
    let mut rows = Vec::new();
    for line in text.lines() {
        if let Some(f) = line.strip_prefix("#fields\t") {
            fields = f.split('\t').map(String::from).collect();
        } else if !line.starts_with('#') {
            rows.push(
                fields
                    .iter()
                    .cloned()
                    .zip(line.split('\t').map(String::from))
                    .collect(),
            );
        }
    }
    rows
}
