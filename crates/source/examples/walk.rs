//! Walks capture files and reports the cost of the walk alone.
//!
//! `cargo run --release -p wirelog-source --example walk -- FILE... [--repeat N]`
//!
//! With `--repeat N` each file is walked N times (reopened each time) and the
//! best run is reported, which hides first-touch page faults of a cold file.

use std::path::Path;
use std::time::Instant;

use wirelog_source::CaptureReader;

fn main() {
    let mut repeat = 1usize;
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--repeat" {
            repeat = args.next().and_then(|n| n.parse().ok()).unwrap_or(1).max(1);
        } else {
            files.push(a);
        }
    }
    if files.is_empty() {
        eprintln!("usage: walk FILE... [--repeat N]   (FILE may be - for stdin)");
        std::process::exit(2);
    }
    let mut failed = false;
    for f in &files {
        let mut best: Option<(f64, u64, u64)> = None;
        for _ in 0..repeat {
            let start = Instant::now();
            let mut r = match CaptureReader::open(Path::new(f)) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("{e}");
                    failed = true;
                    break;
                }
            };
            // Touch the data so the walk cannot be optimised into nothing.
            let (mut bytes, mut check) = (0u64, 0u64);
            while let Some(p) = r.next_packet() {
                bytes += p.data.len() as u64;
                check = check.wrapping_add(p.ts_ns as u64 ^ u64::from(p.wire_len));
            }
            let secs = start.elapsed().as_secs_f64();
            std::hint::black_box(check);
            if best.is_none() {
                for p in r.problems() {
                    eprintln!(
                        "{}: {} x{} (first at byte {}: {})",
                        r.name(),
                        p.kind.as_str(),
                        p.count,
                        p.first_offset,
                        p.detail
                    );
                }
            }
            if best.is_none() || best.is_some_and(|(b, _, _)| secs < b) {
                best = Some((secs, r.packets(), bytes));
            }
        }
        if let Some((secs, packets, bytes)) = best {
            let ns = if packets > 0 {
                secs * 1e9 / packets as f64
            } else {
                0.0
            };
            println!(
                "{f}: {packets} packets, {bytes} bytes, {:.3} ms, {ns:.1} ns/packet, {:.0} MB/s",
                secs * 1e3,
                bytes as f64 / secs / 1e6
            );
        }
    }
    if failed {
        std::process::exit(1);
    }
}
