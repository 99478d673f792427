//! `wirelog store`: what a store holds (partitions, files, rows and bytes
//! per kind, time range, the captures ingested, retention) and, with
//! `--check`, whether every file reads back whole.

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::{bail, Result};
use wirelog_query::time::format_rfc3339;
use wirelog_store::retention::recorded_limits;
use wirelog_store::{
    file_summary, list_partitions, partition_files, read_ingests, verify_file, Kind,
};

use crate::cli::StoreArgs;

#[derive(Default)]
struct KindTotals {
    partitions: u64,
    files: u64,
    rows: u64,
    bytes: u64,
    range: Option<(i64, i64)>,
}

pub fn run(args: StoreArgs) -> Result<ExitCode> {
    let dir = &args.store;
    if !dir.is_dir() {
        bail!(
            "{}: no store here (write one with `wirelog read --store {}`)",
            dir.display(),
            dir.display()
        );
    }
    let mut out = io::stdout().lock();
    // One message per bad file, each naming it.
    let mut bad: Vec<String> = Vec::new();
    let mut checked = 0u64;
    let mut rows_total = 0u64;
    let mut files_total = 0u64;
    writeln!(out, "store {}", dir.display())?;
    writeln!(
        out,
        "{:<6} {:>10} {:>7} {:>12} {:>14}  time range (UTC)",
        "kind", "partitions", "files", "rows", "bytes"
    )?;
    for kind in Kind::ALL {
        let mut t = KindTotals::default();
        for p in list_partitions(dir, kind)? {
            t.partitions += 1;
            let (files, corrupt) = partition_files(&p.path)?;
            for (path, what) in corrupt {
                t.files += 1;
                t.bytes += std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                bad.push(format!("store: corrupt file {}: {what}", path.display()));
            }
            for path in files {
                t.files += 1;
                t.bytes += std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                match file_summary(&path) {
                    Ok(s) => {
                        t.rows += s.rows;
                        if let Some((lo, hi)) = s.time_range {
                            t.range =
                                Some(t.range.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
                        }
                    }
                    Err(e) => {
                        bad.push(e.to_string());
                        continue;
                    }
                }
                if args.check {
                    checked += 1;
                    if let Err(e) = verify_file(&path) {
                        bad.push(e.to_string());
                    }
                }
            }
        }
        rows_total += t.rows;
        files_total += t.files;
        if t.partitions == 0 {
            continue;
        }
        let range = match t.range {
            Some((lo, hi)) => format!("{} .. {}", format_rfc3339(lo), format_rfc3339(hi)),
            None => "-".into(),
        };
        writeln!(
            out,
            "{:<6} {:>10} {:>7} {:>12} {:>14}  {}",
            kind.as_str(),
            t.partitions,
            t.files,
            t.rows,
            t.bytes,
            range
        )?;
    }
    let ingests = read_ingests(dir)?;
    writeln!(out, "sources ingested: {}", ingests.len())?;
    for i in &ingests {
        let filter = if i.filter.is_empty() {
            String::new()
        } else {
            format!(" filter '{}'", i.filter)
        };
        writeln!(
            out,
            "  {}  {}  {} packets, {} .. {}{}  ({})",
            format_rfc3339(i.ingested_ns - i.ingested_ns.rem_euclid(1_000_000_000)),
            i.path,
            i.packets,
            format_rfc3339(i.first_ns),
            format_rfc3339(i.last_ns),
            filter,
            i.identity
        )?;
    }
    match recorded_limits(dir)? {
        Some(l) if l.age.is_some() || l.bytes.is_some() => {
            let age = l
                .age
                .map(|a| seconds(a.as_secs()))
                .unwrap_or_else(|| "none".into());
            let size = l
                .bytes
                .map(|b| format!("{b} bytes"))
                .unwrap_or_else(|| "none".into());
            writeln!(
                out,
                "retention: age {age}, size {size} (as last set by a writer, {}; applied while one writes)",
                format_rfc3339(l.set_ns - l.set_ns.rem_euclid(1_000_000_000))
            )?;
        }
        _ => writeln!(
            out,
            "retention: none set (kept until deleted; see --retain, --retain-size)"
        )?,
    }
    out.flush()?;
    drop(out);
    if args.check {
        for m in &bad {
            eprintln!("wirelog: {m}");
        }
        if !bad.is_empty() {
            eprintln!("wirelog: {} of {} files are bad", bad.len(), files_total);
            return Ok(ExitCode::from(1));
        }
        eprintln!("wirelog: {checked} files checked, {rows_total} rows read back, all whole");
    } else if !bad.is_empty() {
        for m in &bad {
            eprintln!("wirelog: {m}");
        }
        eprintln!(
            "wirelog: {} bad files (run with --check to read every file)",
            bad.len()
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// `30d`, `12h`, `90s`: the largest unit that divides.
fn seconds(s: u64) -> String {
    match s {
        0 => "0s".into(),
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}
