//! Every capture in `../shared/testdata/linktypes/` (file formats and link
//! layers of all kinds) is read by `wirelog read` without a reported problem,
//! and wirelog counts as many packets as Wireshark's `capinfos` does. The
//! reference counts are computed here with the real tool, not written down.

use std::path::{Path, PathBuf};
use std::process::Command;

fn linktypes_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/linktypes")
}

fn capinfos_count(f: &Path) -> u64 {
    let out = Command::new("capinfos")
        .args(["-M", "-c"])
        .arg(f)
        .output()
        .expect(
            "capinfos must be installed (Debian package wireshark-common; .ci/run installs it)",
        );
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("Number of packets:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no packet count from capinfos for {}: {}",
                f.display(),
                text
            )
        })
}

/// Runs `wirelog read` and returns (packets read, stderr lines other than the summary).
fn wirelog_count(f: &Path) -> (u64, Vec<String>, bool) {
    let out = Command::new(env!("CARGO_BIN_EXE_wirelog"))
        .args(["read", "-C", "--no-store"])
        .arg(f)
        .output()
        .expect("run wirelog");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let mut packets = None;
    let mut problems = Vec::new();
    for line in err.lines() {
        if let Some(rest) = line.strip_prefix("wirelog: ") {
            if let Some((n, tail)) = rest.split_once(" packets, ") {
                if tail.contains("connections") {
                    packets = n.parse().ok();
                    continue;
                }
            }
            // Summary lines, not problems.
            if rest.starts_with("conn_state:")
                || rest.starts_with("transactions:")
                || rest.starts_with("memory budget ")
            {
                continue;
            }
        }
        problems.push(line.to_string());
    }
    (
        packets.unwrap_or_else(|| panic!("no summary line for {}: {}", f.display(), err)),
        problems,
        out.status.success(),
    )
}

#[test]
fn every_linktype_capture_reads_cleanly_with_capinfos_counts() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(linktypes_dir())
        .expect("shared testdata")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("pcap" | "pcapng")
            )
        })
        .collect();
    files.sort();
    assert!(
        files.len() >= 15,
        "expected the shared link-type captures, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for f in &files {
        let want = capinfos_count(f);
        let (got, problems, ok) = wirelog_count(f);
        let name = f.file_name().unwrap().to_string_lossy();
        println!("{name}: capinfos {want}, wirelog {got}");
        if !ok {
            failures.push(format!("{name}: non-zero exit"));
        }
        if got != want {
            failures.push(format!(
                "{name}: capinfos counts {want} packets, wirelog {got}"
            ));
        }
        if !problems.is_empty() {
            failures.push(format!("{name}: problems reported: {problems:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
