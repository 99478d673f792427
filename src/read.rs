//! `wirelog read`: capture files -> decode -> track -> records -> output
//! (logs and store, written on their own thread).

use std::io;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use wirelog_decode::{DecodeConfig, Decoded, Decoder, SkipReason};
use wirelog_record::ConnState;
use wirelog_source::CaptureReader;
use wirelog_track::Tracker;

use crate::cli::ReadArgs;
use crate::output::{Output, OutputSummary};
use crate::progress::Progress;

/// Records are handed to the sink every this many packets, so logs grow as
/// connections end rather than all at the end.
const DRAIN_EVERY: u64 = 4096;

/// Problems with a file's packets worth a line of their own, with where they
/// first appeared. (Packets that are fine but unused here, like tunnels not
/// decoded yet or non-IP frames, are only counted in the summary.)
const REPORTED_SKIPS: [SkipReason; 3] = [
    SkipReason::UnknownLinkType,
    SkipReason::Truncated,
    SkipReason::Malformed,
];

struct FirstSkip {
    count: u64,
    packet: u64,
    offset: u64,
}

pub fn run(args: ReadArgs) -> Result<ExitCode> {
    args.check()?;
    let mut output = Output::start(args.output.config())?;

    let mut decoder = Decoder::new(DecodeConfig {
        verify_checksums: !args.ignore_checksums,
        frag_timeout_ns: args.frag_timeout.as_nanos() as i64,
        ..DecodeConfig::default()
    });
    let mut tracker = Tracker::new(
        args.track.tracker_config(&args.app).map_err(|e| anyhow::anyhow!(e))?,
    );

    let budget = memory_line(&args.track, &args.app);
    if !args.quiet {
        eprintln!("{budget}");
    }

    let total_bytes: Option<u64> = args
        .captures
        .iter()
        .map(|p| {
            if p.as_os_str() == "-" {
                None
            } else {
                std::fs::metadata(p).ok().map(|m| m.len())
            }
        })
        .sum();
    let progress = Progress::new(!args.quiet, total_bytes);
    let mut bytes_before = 0u64;
    let mut packets = 0u64;
    let mut unreadable = 0usize;
    let mut problems_reported = 0usize;
    // A failure (an unwritable disk, say) ends the reading, and the summary
    // of what was read and written is still printed.
    let mut failed: Option<anyhow::Error> = None;
    'files: for path in &args.captures {
        let mut reader = match open(path) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("wirelog: {e}");
                unreadable += 1;
                continue;
            }
        };
        let mut first_skips: Vec<(SkipReason, FirstSkip)> = Vec::new();
        let mut file_packets = 0u64;
        while let Some(p) = reader.next_packet() {
            file_packets += 1;
            match decoder.decode(p.linktype, p.ts_ns, p.data) {
                Decoded::Ip(ip) => tracker.packet(p.ts_ns, p.if_id as u16, &ip),
                Decoded::Skipped(reason) if REPORTED_SKIPS.contains(&reason) => {
                    match first_skips.iter_mut().find(|(r, _)| *r == reason) {
                        Some((_, s)) => s.count += 1,
                        None => first_skips.push((
                            reason,
                            FirstSkip {
                                count: 1,
                                packet: file_packets,
                                offset: reader.position(),
                            },
                        )),
                    }
                }
                Decoded::Skipped(_) => {}
            }
            if file_packets.is_multiple_of(DRAIN_EVERY) {
                if let Err(e) = drain(&mut tracker, &mut output) {
                    failed = Some(e);
                    packets += file_packets;
                    break 'files;
                }
                progress.update(bytes_before + reader.position(), packets + file_packets);
            }
        }
        packets += file_packets;
        bytes_before += reader.position();
        let name = reader.name().to_string();
        for p in reader.problems() {
            problems_reported += 1;
            eprintln!(
                "wirelog: {}: {} at byte {}: {}{}",
                name,
                p.kind.as_str(),
                p.first_offset,
                p.detail,
                if p.count > 1 {
                    format!(" ({} times)", p.count)
                } else {
                    String::new()
                }
            );
        }
        for (reason, s) in &first_skips {
            problems_reported += 1;
            eprintln!(
                "wirelog: {}: {} packet(s) skipped: {}, first is packet {} (ending at byte {})",
                name,
                s.count,
                reason.as_str(),
                s.packet,
                s.offset
            );
        }
        if let Err(e) = drain(&mut tracker, &mut output) {
            failed = Some(e);
            break;
        }
    }

    let summary = match failed {
        None => {
            // Connections still open end in steps, their records handed on
            // as they come: the records of a full table never sit in memory
            // at once (they would count against --memory's constant).
            let mut r = Ok(());
            while r.is_ok() && !tracker.finish_some(DRAIN_EVERY as usize) {
                r = drain(&mut tracker, &mut output);
            }
            r.and_then(|()| drain(&mut tracker, &mut output)).and_then(|()| output.finish())
        }
        Some(e) => Err(e),
    };
    let (summary, failed) = match summary {
        Ok(s) => (s, None),
        Err(e) => (OutputSummary::default(), Some(e)),
    };
    progress.finish();

    if !args.quiet {
        let st = tracker.stats();
        let ds = decoder.stats();
        let mut line = format!(
            "wirelog: {} packets, {} connections ({} evicted), {} flow records, {} decoded",
            packets, st.connections, st.evicted, summary.flows, ds.decoded
        );
        let skipped: Vec<String> = ds
            .skipped_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(r, n)| format!("{} {}", n, r.as_str()))
            .collect();
        if !skipped.is_empty() {
            line.push_str(&format!("; not used: {}", skipped.join(", ")));
        }
        if st.not_tracked > 0 {
            line.push_str(&format!(
                "; {} IP packets of untracked protocols",
                st.not_tracked
            ));
        }
        eprintln!("{line}");
        eprintln!("{budget}, {} evicted", st.evicted);
        let states: Vec<String> = ConnState::ALL
            .iter()
            .filter(|s| summary.states[**s as usize] > 0)
            .map(|s| format!("{} {}", s.as_str(), summary.states[*s as usize]))
            .collect();
        if !states.is_empty() {
            eprintln!("wirelog: conn_state: {}", states.join(", "));
        }
        let txs: Vec<String> = wirelog_parse::Protocol::ALL
            .iter()
            .zip(summary.txs)
            .filter(|(_, n)| *n > 0)
            .map(|(p, n)| format!("{} {}", p.name(), n))
            .collect();
        if !txs.is_empty() {
            let a = tracker.app_stats();
            let mut line = format!("wirelog: transactions: {}", txs.join(", "));
            if a.parse.unparsed_bytes > 0 || a.gave_up > 0 {
                line.push_str(&format!(
                    "; {} bytes not parsed, {} gaps, {} connections not parseable (TLS, compression)",
                    a.parse.unparsed_bytes, a.parse.gaps, a.gave_up
                ));
            }
            eprintln!("{line}");
        }
    }

    // Like Zeek: a capture where most checksums are wrong was almost surely
    // taken on a host with checksum offloading (or on loopback), where the
    // kernel never fills them in; say how to read it.
    let ds = decoder.stats();
    if !args.ignore_checksums
        && ds.bad_transport_checksum > 0
        && ds.bad_transport_checksum * 10 > ds.decoded
    {
        eprintln!(
            "wirelog: warning: {} of {} IP packets have bad checksums, likely from checksum offloading \
             (or a loopback capture); their connections are incomplete. Use -C to ignore checksums.",
            ds.bad_transport_checksum, ds.decoded
        );
    }

    if let Some(e) = failed {
        return Err(e);
    }
    if let Some(t) = summary.space_text() {
        eprintln!("{t}");
    }
    if summary.dropped() > 0 {
        eprintln!(
            "wirelog: {} records could not be written, the disk stayed full: {}",
            summary.dropped(),
            summary.dropped_text()
        );
        return Ok(ExitCode::from(crate::output::EXIT_PARTIAL));
    }

    // Non-zero only when nothing could be read at all.
    if packets == 0 && (unreadable > 0 || problems_reported > 0) {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// What --memory gives the tracker, for stderr at start and in the summary.
pub fn memory_line(track: &crate::cli::TrackArgs, app: &crate::cli::AppArgs) -> String {
    match track.budget(app) {
        Ok((conns, flows, stream)) => format!(
            "wirelog: memory budget {}: up to {conns} connections, {flows} flows per bucket, {} of stream buffers",
            crate::limits::human(track.memory),
            crate::limits::human(stream)
        ),
        Err(e) => format!("wirelog: {e}"),
    }
}

/// Hands the records of ended connections and flow buckets to the writer.
fn drain(tracker: &mut Tracker, output: &mut Output) -> Result<()> {
    let mut batch = output.batch();
    batch.conns.extend(tracker.take_records());
    batch.flows.extend(tracker.take_flows());
    batch.txs.extend(tracker.take_transactions());
    output.send(batch)
}

fn open(path: &Path) -> Result<CaptureReader, wirelog_source::OpenError> {
    if path.as_os_str() == "-" {
        CaptureReader::from_reader("<stdin>", Box::new(io::stdin()))
    } else {
        CaptureReader::open(path)
    }
}
