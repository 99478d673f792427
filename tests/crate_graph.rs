//! The crate graph points one way: every crate's normal dependencies on
//! other wirelog crates are the ones ARCHITECTURE.md's crate table lets it
//! have ("may depend on"), and the read side of the graph (records, the
//! store, queries, the API server, ClickHouse) links none of the packet
//! side's machinery (the eBPF loader, the socket-owner resolver, the
//! decoder, AF_PACKET). Read from the manifests and the table themselves,
//! so a new dependency or an edited table that disagree fail here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The wirelog crates a manifest's `[dependencies]` name (not dev- or
/// build-dependencies: those do not reach a user of the crate).
fn normal_deps(manifest: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(manifest).unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    let mut in_deps = false;
    let mut deps = BTreeSet::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if !in_deps {
            continue;
        }
        let name = line.split(['=', '.', ' ']).next().unwrap_or("");
        if let Some(short) = name.strip_prefix("wirelog-") {
            deps.insert(short.to_string());
        }
    }
    deps
}

/// The crates of the workspace, by short name (`record` for `wirelog-record`).
fn workspace() -> BTreeMap<String, BTreeSet<String>> {
    let mut crates = BTreeMap::new();
    for entry in std::fs::read_dir(root().join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        let manifest = dir.join("Cargo.toml");
        if manifest.exists() {
            let name = dir.file_name().unwrap().to_str().unwrap().to_string();
            crates.insert(name, normal_deps(&manifest));
        }
    }
    crates
}

/// ARCHITECTURE.md's crate table: each crate's "may depend on" cell, as
/// the crate names written in backticks there (`None` for "any").
fn table() -> BTreeMap<String, Option<BTreeSet<String>>> {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let start = text.find("| crate | job | may depend on |").expect("ARCHITECTURE.md has the crate table");
    let mut rows = BTreeMap::new();
    for line in text[start..].lines().skip(2) {
        if !line.starts_with('|') {
            break;
        }
        let name = line[1..].split('|').next().unwrap().trim().trim_matches('`').to_string();
        let may = line.trim_end().trim_end_matches('|').rsplit('|').next().unwrap().trim();
        let allowed = if may.starts_with("any") {
            None
        } else {
            Some(may.split('`').skip(1).step_by(2).map(str::to_string).collect())
        };
        rows.insert(name, allowed);
    }
    rows
}

#[test]
fn every_crate_depends_only_on_what_the_table_allows() {
    let table = table();
    for (name, deps) in workspace() {
        let allowed = table
            .get(&name)
            .unwrap_or_else(|| panic!("crates/{name} has no row in ARCHITECTURE.md's crate table"));
        let Some(allowed) = allowed else { continue };
        let extra: Vec<_> = deps.difference(allowed).collect();
        assert!(extra.is_empty(), "crates/{name} depends on {extra:?}, which ARCHITECTURE.md does not allow it");
        let unused: Vec<_> = allowed.difference(&deps).collect();
        assert!(unused.is_empty(), "ARCHITECTURE.md lets crates/{name} depend on {unused:?}, which it does not");
    }
}

#[test]
fn the_read_side_links_no_packet_machinery() {
    let crates = workspace();
    let closure = |start: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start.to_string()];
        while let Some(c) = todo.pop() {
            for d in &crates[&c] {
                if seen.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
        seen
    };
    for reader in ["record", "store", "query", "serve", "clickhouse"] {
        let reached = closure(reader);
        for machinery in ["procs", "ebpf", "decode", "capture"] {
            assert!(!reached.contains(machinery), "wirelog-{reader} reaches wirelog-{machinery}: {reached:?}");
        }
    }
    // The closure is not vacuous: the packet side does reach them.
    assert!(closure("probe").is_superset(&["procs", "ebpf", "decode"].map(String::from).into()));
}
