//! `wirelog read`: capture files -> probe (decode, track, parse) -> records -> output
//! (logs and store, written on their own thread).

use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use wirelog_capture::bpf;
use wirelog_capture::filter::FileFilter;
use wirelog_decode::{ChecksumMode, DecodeStats};
use wirelog_probe::{Probe, SkipReason};
use wirelog_query::time::format_rfc3339;
use wirelog_record::{LossCount, LossMeter, LossRecord, LossTotals};
use wirelog_source::CaptureReader;
use wirelog_store::{earlier_ingests_of, identify, read_ingests, Ingest};

use crate::cli::ReadArgs;
use crate::output::{Output, OutputConfig};
use wirelog_sink::Summary;
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

/// An input opened and recognised before anything is created.
struct Input {
    reader: CaptureReader,
    /// Content identity when the input is a regular file and a store is
    /// written (stdin and pipes cannot be recognised again).
    identity: Option<String>,
    /// How many ingests of the store are this capture (recorded under its
    /// identity or, by an older wirelog, under the identity's first form).
    held: usize,
    path: PathBuf,
}

pub fn run(args: ReadArgs) -> Result<ExitCode> {
    args.check()?;
    // Everything that can be wrong with the command is found before any
    // directory, lock, log header or file is created.
    let mut out_cfg = OutputConfig { empty_tcp_note: args.probe.skip_empty_tcp, ..args.output.config() };
    args.pcap.record_in(&mut out_cfg)?;
    // ClickHouse rows name the capture files they came from (flows carry
    // `file:IFID` like the store).
    let files: Vec<String> = args
        .captures
        .iter()
        .map(|p| p.file_name().map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into_owned()))
        .collect();
    out_cfg.clickhouse = crate::clickhouse::sink_config(&args.output, &files.join(","))?;
    let mut probe_cfg = args.probe.config().map_err(|e| anyhow!(e))?;
    // --skip-empty-tcp is the filter capture attaches in the kernel, run
    // here with the user's own.
    let expr = match args.probe.skip_empty_tcp {
        true => bpf::expression(args.filter.as_deref(), true),
        false => args.filter.clone(),
    };
    let mut filter = match &expr {
        Some(expr) => Some(FileFilter::new(expr).map_err(|e| anyhow!("--filter: {e}"))?),
        None => None,
    };
    let (mut inputs, unreadable) = open_inputs(&args.captures)?;
    if inputs.is_empty() {
        return Ok(ExitCode::from(1));
    }
    if let Some(f) = filter.as_mut() {
        for input in &inputs {
            for i in input.reader.interfaces() {
                f.prepare(i.linktype.0)
                    .map_err(|e| anyhow!("{}: {}", input.reader.name(), e.message))?;
            }
        }
    }
    out_cfg.check()?;
    if let Some((dir, _)) = &out_cfg.store {
        check_not_ingested(dir, &mut inputs, args.again)?;
    }
    // The run's name: the same in every run of the same captures and
    // options, so what a killed run sent to ClickHouse is recognised when
    // the capture is read again (tokens and uids), and its staged store
    // files are the ones replaced.
    let options = format!(
        "{:?}|{:?}|{}|{:?}",
        args.probe,
        expr,
        files.join(","),
        out_cfg.clickhouse.as_ref().map(|c| (c.batch_rows, c.batch_bytes))
    );
    if out_cfg.clickhouse.is_some() && out_cfg.store.is_none() {
        identify_inputs(&mut inputs)?;
    }
    let key = run_key(inputs.iter().map(|i| i.identity.as_deref().map(|id| (id, i.held))), &options);
    if let Some(k) = key {
        // Uids follow from the capture: the same connection, the same uid.
        probe_cfg.track.uid_seed.get_or_insert(k);
    }
    if let Some(c) = out_cfg.clickhouse.as_mut() {
        c.run_key = key.map(|k| format!("{k:016x}"));
    }
    out_cfg.run = Some(match key {
        Some(k) => format!("{k:016x}"),
        // Stdin or a pipe: a name of its own (a killed run's files are
        // removed all the same).
        None => format!("x{:x}-{}", wirelog_store::retention::now_ns(), std::process::id()),
    });
    if args.processes {
        eprintln!("wirelog: note: capture files carry no process information; --processes records none (it works with `capture`)");
    }
    let mut output = crate::output::start(out_cfg)?.output;

    let mut probe = Probe::new(probe_cfg);
    // --pcap-dir: packets the rules keep go to a writer thread.
    let keeping = args.pcap.start()?;
    if let Some(k) = &keeping {
        k.attach(&mut probe, true)?;
    }

    // Printed once, in the summary, with the evictions it caused.
    let budget = memory_line(&args.probe);

    let total_bytes: Option<u64> = inputs.iter().map(|i| i.reader.total_len()).sum();
    let progress = Progress::new(!args.quiet, total_bytes);
    let mut bytes_before = 0u64;
    let mut packets = 0u64;
    let mut matched = 0u64;
    let mut problems_reported = 0usize;
    let mut ingests = Vec::new();
    // The loss table: per file and minute of packet time.
    let mut loss = ReadLoss::default();
    // A failure (an unwritable disk, say) ends the reading, and the summary
    // of what was read and written is still printed.
    let mut failed: Option<anyhow::Error> = None;
    // Bad checksums are judged per file, so the warning names the file.
    'files: for Input { mut reader, identity, path, .. } in inputs {
        // The file's name, as ClickHouse's rows name it (stdin: `<stdin>`).
        match path.file_name().filter(|_| path.as_os_str() != "-") {
            Some(n) => loss.meter.set_source(&n.to_string_lossy()),
            None => loss.meter.set_source(reader.name()),
        }
        let (bad_before, decoded_before) = {
            let ds = probe.decode_stats();
            (ds.bad_transport_checksum + ds.bad_ip_checksum, ds.decoded)
        };
        let mut first_skips: Vec<(SkipReason, FirstSkip)> = Vec::new();
        let mut file_packets = 0u64;
        let (mut first_ns, mut last_ns) = (i64::MAX, i64::MIN);
        while let Some(p) = reader.next_packet() {
            if loss.meter.due(p.ts_ns) {
                loss.close(&probe, packets + file_packets, p.ts_ns);
            }
            file_packets += 1;
            first_ns = first_ns.min(p.ts_ns);
            last_ns = last_ns.max(p.ts_ns);
            let keep = match filter.as_mut() {
                Some(f) => f.matches(p.linktype.0, p.data, p.wire_len),
                None => true,
            };
            matched += keep as u64;
            match keep.then(|| probe.packet(&p)) {
                Some(Err(reason)) if REPORTED_SKIPS.contains(&reason) => {
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
                Some(_) | None => {}
            }
            if file_packets.is_multiple_of(DRAIN_EVERY) {
                if let Err(e) = drain(&mut probe, &mut output, &mut loss.rows) {
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
        if let Some(identity) = identity {
            ingests.push(Ingest {
                identity,
                path: path.display().to_string(),
                packets: file_packets,
                first_ns: if file_packets > 0 { first_ns } else { 0 },
                last_ns: if file_packets > 0 { last_ns } else { 0 },
                ingested_ns: wirelog_store::retention::now_ns(),
                filter: expr.clone().unwrap_or_default(),
            });
        }
        // A gzip file's problems are found in what it decompresses to: the
        // offset says so (a compressed offset would point elsewhere).
        let of_stream = if reader.is_gzip() { " of the decompressed stream" } else { "" };
        for p in reader.problems() {
            problems_reported += 1;
            eprintln!(
                "wirelog: {}: {} at byte {}{of_stream}: {}{}",
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
            // For gzip, the reader's position counts compressed bytes read
            // so far (the decompressor reads ahead): an approximate place.
            let at = if reader.is_gzip() {
                format!("about byte {} of the compressed file", s.offset)
            } else {
                format!("ending at byte {}", s.offset)
            };
            eprintln!(
                "wirelog: {}: {} packet(s) skipped: {}, first is packet {} ({at})",
                name,
                s.count,
                reason.as_str(),
                s.packet,
            );
        }
        let ds = probe.decode_stats();
        let (bad, decoded) = (ds.bad_transport_checksum + ds.bad_ip_checksum - bad_before, ds.decoded - decoded_before);
        checksum_warning(&name, bad, decoded, args.probe.checksums.mode());
        // The file's last minute, with the records it could not read.
        loss.problems += reader.problems().iter().map(|p| p.count).sum::<u64>();
        if file_packets > 0 {
            loss.close(&probe, packets, last_ns);
        }
        if let Err(e) = drain(&mut probe, &mut output, &mut loss.rows) {
            failed = Some(e);
            break;
        }
    }
    if let Some(f) = &filter {
        for (linktype, why) in f.failures() {
            eprintln!("wirelog: warning: packets of link type {linktype} never match: {why}");
        }
    }

    let summary = match failed {
        None => {
            // Connections still open end in steps, their records handed on
            // as they come: the records of a full table never sit in memory
            // at once (they would count against --memory's constant).
            let mut r = Ok(());
            while r.is_ok() && !probe.finish_some(DRAIN_EVERY as usize) {
                r = drain(&mut probe, &mut output, &mut loss.rows);
            }
            // What the connections ended here lost: the last file's last minute.
            loss.close(&probe, packets, loss.meter.open_minute().unwrap_or(0));
            r.and_then(|()| drain(&mut probe, &mut output, &mut loss.rows))
                .and_then(|()| {
                    let mut last = output.batch();
                    last.ingests = ingests;
                    output.send(last).map_err(anyhow::Error::from)
                })
                .and_then(|()| Ok(output.finish()?))
        }
        Some(e) => Err(e),
    };
    let (summary, failed) = match summary {
        Ok(s) => (s, None),
        Err(e) => (Summary::default(), Some(e)),
    };
    progress.finish();
    probe.stop_keeping();
    let pcap_end = keeping.map(|k| k.finish());

    if !args.quiet {
        let st = probe.track_stats();
        let ds = probe.decode_stats();
        let matched = match &filter {
            Some(f) => format!(" ({matched} matched the filter '{}')", f.expression()),
            None => String::new(),
        };
        let mut line = format!(
            "wirelog: {} packets{}, {} connections ({} evicted), {} flow records, {} decoded",
            packets, matched, st.connections, st.evicted, summary.flows, ds.decoded
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
        if let Some(c) = checksum_line(ds, args.probe.checksums.mode()) {
            eprintln!("wirelog: {c}");
        }
        eprintln!("{budget}, {} evicted", st.evicted);
        if let Some(t) = summary.states_text() {
            eprintln!("wirelog: conn_state: {t}");
        }
        let no_memory = probe.app_stats().no_memory;
        if no_memory > 0 {
            eprintln!("wirelog: parsing: {}", crate::capture::no_memory_text(no_memory).trim_start_matches("; "));
        }
        if let Some(txs) = summary.txs_text() {
            let a = probe.app_stats();
            let mut line = format!("wirelog: transactions: {txs}");
            if a.parse.unparsed_bytes > 0 || a.gave_up > 0 {
                line.push_str(&format!(
                    "; {} bytes not parsed, {} gaps, {} connections not parseable (TLS, compression)",
                    a.parse.unparsed_bytes, a.parse.gaps, a.gave_up
                ));
            }
            if a.parse.cut_bytes > 0 {
                // Counted in the bytes not parsed too (the loss table's
                // unparsed_bytes); said apart since a larger
                // --stream-memory gets them back.
                line.push_str(&format!(
                    "; of those, {} bytes of messages cut whole for want of memory (raise --stream-memory)",
                    a.parse.cut_bytes
                ));
            }
            if a.beyond_snaplen_bytes > 0 {
                // Segments cut by the capture's snap length: their bytes
                // past it are in place in their streams, not gaps.
                line.push_str(&format!(
                    "; {} bytes beyond the snap length (sent, not captured; not gaps)",
                    a.beyond_snaplen_bytes
                ));
            }
            eprintln!("{line}");
        }
        // Messages a parser read but could not use (an unknown opcode, a
        // reply to nothing seen): counted, so none is lost unsaid.
        let malformed = probe.app_stats().parse.malformed;
        if malformed > 0 {
            eprintln!("wirelog: parsers: {malformed} malformed messages (not of the protocol, or unpaired)");
        }
    }


    // --pcap-dir: what was kept, cut and dropped.
    let pcap_lost = pcap_end.is_some_and(|end| {
        if end.lost || !args.quiet {
            eprintln!("{}", end.line);
        }
        end.lost
    });
    if let Some(e) = failed {
        return Err(e);
    }
    if crate::output::report(&summary, args.quiet) || pcap_lost {
        return Ok(ExitCode::from(crate::output::EXIT_PARTIAL));
    }

    // Non-zero only when nothing could be read at all.
    if packets == 0 && (unreadable > 0 || problems_reported > 0) {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// The checksum verdicts of the summary, unless checksums were ignored.
pub fn checksum_line(ds: &DecodeStats, mode: ChecksumMode) -> Option<String> {
    (mode != ChecksumMode::Ignore).then(|| {
        format!(
            "checksums ({}): {} valid, {} offloaded, {} bad",
            match mode {
                ChecksumMode::Auto => "auto",
                ChecksumMode::Verify => "verify",
                ChecksumMode::Ignore => "ignore",
            },
            ds.good_checksum,
            ds.offloaded_checksum,
            ds.bad_ip_checksum + ds.bad_transport_checksum
        )
    })
}

/// What --memory gives the tracker, for stderr at start and in the summary.
pub fn memory_line(probe: &crate::cli::ProbeArgs) -> String {
    let track = &probe.track;
    match (track.budget(&probe.app), track.lent_budget(&probe.app)) {
        (Ok((conns, flows, stream)), Ok(lent)) => format!(
            "wirelog: memory budget {}: up to {conns} connections, {flows} flows per bucket, {} of stream buffers{}",
            crate::limits::human(track.memory),
            crate::limits::human(stream),
            lent.map_or(String::new(), |(_, f)| format!(
                " (lent to the flow table while unused: {f} flows per bucket once the buffers take it all)"
            ))
        ),
        (Err(e), _) | (_, Err(e)) => format!("wirelog: {e}"),
    }
}

/// Hands the records of ended connections and flow buckets to the writer,
/// in a batch it gave back empty.
fn drain(probe: &mut Probe, output: &mut Output, losses: &mut Vec<LossRecord>) -> Result<()> {
    let mut batch = output.batch();
    probe.drain(&mut batch);
    batch.losses.append(losses);
    Ok(output.send(batch)?)
}

/// `read`'s rows of the loss table: one per file and minute of packet time
/// (and per protocol whose parsers lost something), from the probe's
/// counters, the packets read and the records the reader could not read.
#[derive(Default)]
struct ReadLoss {
    meter: LossMeter,
    /// Records of the files done that could not be read.
    problems: u64,
    /// Rows not handed to the output yet.
    rows: Vec<LossRecord>,
}

impl ReadLoss {
    /// Ends the open minute: `read` packets read so far (all files), the
    /// next minute the one of `next_ns`.
    fn close(&mut self, probe: &Probe, read: u64, next_ns: i64) {
        let mut t: LossTotals = Default::default();
        probe.loss_totals(&mut t);
        t[0].set(LossCount::KernelPackets, read);
        t[0].add(LossCount::Undecoded, self.problems);
        self.meter.close_minute(&t, next_ns, &mut self.rows);
    }
}

fn open(path: &Path) -> Result<CaptureReader, wirelog_source::OpenError> {
    if path.as_os_str() == "-" {
        CaptureReader::from_reader("<stdin>", Box::new(io::stdin()))
    } else {
        CaptureReader::open(path)
    }
}

/// Opens every input. Unreadable ones are reported and left out (the others
/// are still read), except trailing arguments that are no files but read as
/// a filter expression: `read x.pcap port 80` is tcpdump's habit for `-f`.
fn open_inputs(paths: &[PathBuf]) -> Result<(Vec<Input>, usize)> {
    let missing = |p: &PathBuf| p.as_os_str() != "-" && std::fs::symlink_metadata(p).is_err();
    let trailing = paths.iter().rev().take_while(|p| missing(p)).count();
    for start in paths.len() - trailing..paths.len() {
        let words: Vec<String> = paths[start..].iter().map(|p| p.display().to_string()).collect();
        let expr = words.join(" ");
        if FileFilter::new(&expr).is_ok() {
            bail!(
                "{}: No such file or directory; did you mean `-f '{}'`?",
                paths[start].display(),
                expr.replace('\'', "'\\''")
            );
        }
    }
    let mut inputs = Vec::new();
    let mut unreadable = 0;
    for path in paths {
        match open(path) {
            Ok(reader) => inputs.push(Input { reader, identity: None, held: 0, path: path.clone() }),
            Err(e) => {
                eprintln!("wirelog: {e}");
                unreadable += 1;
            }
        }
    }
    Ok((inputs, unreadable))
}

/// The identity of every input that is a regular file (read without a
/// store, for ClickHouse's run key).
fn identify_inputs(inputs: &mut [Input]) -> Result<()> {
    for i in inputs.iter_mut().filter(|i| i.path.as_os_str() != "-") {
        if std::fs::metadata(&i.path).is_ok_and(|m| m.is_file()) {
            i.identity = Some(identify(&i.path).with_context(|| format!("{}: cannot read", i.path.display()))?);
        }
    }
    Ok(())
}

/// A run's key: a 64-bit FNV-1a hash of each input's identity and how
/// often the store already holds it (`Input::held`: a second `--again` read
/// is a run of its own, not a resend of the first), and of the `options`
/// that shape the records and the ClickHouse batches. `None` when an input
/// has no identity (standard input, a pipe: it cannot be recognised again).
fn run_key<'a>(identities: impl Iterator<Item = Option<(&'a str, usize)>>, options: &str) -> Option<u64> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut add = |bytes: &[u8]| {
        for &b in bytes.iter().chain(&[0xff]) {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    };
    add(b"wirelog read 1");
    for id in identities {
        let (id, generation) = id?;
        add(id.as_bytes());
        add(&generation.to_le_bytes());
    }
    add(options.as_bytes());
    Some(h)
}

/// Refuses inputs the store already holds (or given twice), naming the
/// earlier ingest, unless `again`; sets the identity of each regular file
/// and how often the store holds it.
fn check_not_ingested(store: &Path, inputs: &mut [Input], again: bool) -> Result<()> {
    // What a killed read left is finished (committed) or removed first, so
    // a capture refused below is whole in the store (README: After a crash).
    if store.is_dir() {
        if let Some(note) = wirelog_store::staging::recover_unlocked(store)?.and_then(|r| r.note(store)) {
            eprintln!("{note}");
        }
    }
    let earlier = if store.is_dir() { read_ingests(store)? } else { Vec::new() };
    for i in 0..inputs.len() {
        let path = inputs[i].path.clone();
        if path.as_os_str() == "-" || !std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            continue;
        }
        let id = identify(&path).with_context(|| format!("{}: cannot read", path.display()))?;
        let held = earlier_ingests_of(&path, &id, &earlier).with_context(|| format!("{}: cannot read", path.display()))?;
        if !again {
            if let Some(e) = held.last() {
                let filter = if e.filter.is_empty() { String::new() } else { format!(", filter '{}'", e.filter) };
                bail!(
                    "{}: already in the store {}: read on {} as {} ({} packets from {} to {}{}); \
                     reading it again would count its traffic twice (--again reads it anyway)",
                    path.display(),
                    store.display(),
                    format_rfc3339(e.ingested_ns - e.ingested_ns % 1_000_000_000),
                    e.path,
                    e.packets,
                    format_rfc3339(e.first_ns),
                    format_rfc3339(e.last_ns),
                    filter
                );
            }
            if let Some(j) = inputs[..i].iter().position(|o| o.identity.as_deref() == Some(&id)) {
                bail!(
                    "{}: same content as {}, given earlier on the command line; \
                     reading both would count its traffic twice (--again reads it anyway)",
                    path.display(),
                    inputs[j].path.display()
                );
            }
        }
        inputs[i].identity = Some(id);
        inputs[i].held = held.len();
    }
    Ok(())
}

/// Like Zeek: when most of a file's checksums are wrong, its packets were
/// changed after the sender computed them (a middlebox rewriting without
/// fixing, a broken capture tool), or, in verify mode, offloaded; says so,
/// naming the file, and how to read it anyway. Offloaded checksums in auto
/// mode are not wrong.
fn checksum_warning(file: &str, bad: u64, decoded: u64, mode: ChecksumMode) {
    if bad == 0 || bad * 10 <= decoded {
        return;
    }
    let hint = match mode {
        ChecksumMode::Verify => "likely from checksum offloading (or a loopback capture); \
                                 --checksums auto (the default) accepts offloaded checksums, -C ignores all",
        _ => "and they are not offloaded checksums; -C ignores checksums",
    };
    eprintln!("wirelog: warning: {file}: {bad} of {decoded} IP packets have bad checksums, {hint}; their connections are incomplete.");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_key_follows_the_inputs_their_generation_and_the_options() {
        // Each input: its identity and how often the store holds it.
        let key = |ids: &[Option<(&str, usize)>], opts: &str| run_key(ids.iter().copied(), opts);
        let one = key(&[Some(("10-ab", 0))], "o");
        assert!(one.is_some());
        // Not recorded in the store (killed, then read again): the same key.
        assert_eq!(one, key(&[Some(("10-ab", 0))], "o"), "the same run, the same key");
        // Read again with --again after it was recorded: a run of its own.
        assert_ne!(one, key(&[Some(("10-ab", 1))], "o"));
        assert_ne!(key(&[Some(("10-ab", 1))], "o"), key(&[Some(("10-ab", 2))], "o"), "and each time again");
        assert_ne!(one, key(&[Some(("10-ab", 0))], "p"), "other options");
        assert_ne!(one, key(&[Some(("10-ab", 0)), Some(("12-cd", 0))], "o"), "another input");
        assert_ne!(
            key(&[Some(("1-a", 0)), Some(("2-b", 0))], ""),
            key(&[Some(("2-b", 0)), Some(("1-a", 0))], ""),
            "order counts"
        );
        assert_eq!(key(&[Some(("10-ab", 0)), None], "o"), None, "standard input is never the same");
    }
}
