//! `wirelog read`: capture files -> decode -> track -> conn records -> logs.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use wirelog_decode::{DecodeConfig, Decoded, Decoder, SkipReason};
use wirelog_record::{ConnRecord, ConnState, FlowRecord};
use wirelog_sink::{ConnLogWriter, FlowLogWriter, LogFormat};
use wirelog_source::CaptureReader;
use wirelog_store::{Store, StoreOptions};
use wirelog_track::{PortSet, Tracker, TrackerConfig};

use crate::cli::{LogFormatArg, ReadArgs};
use crate::progress::Progress;

/// Records are handed to the sink every this many packets, so logs grow as
/// connections end rather than all at the end.
const DRAIN_EVERY: u64 = 4096;

/// Problems with a file's packets worth a line of their own, with where they
/// first appeared. (Packets that are fine but unused here, like tunnels not
/// decoded yet or non-IP frames, are only counted in the summary.)
const REPORTED_SKIPS: [SkipReason; 3] = [SkipReason::UnknownLinkType, SkipReason::Truncated, SkipReason::Malformed];

struct FirstSkip {
    count: u64,
    packet: u64,
    offset: u64,
}

pub fn run(args: ReadArgs) -> Result<ExitCode> {
    let format = match args.log_format {
        LogFormatArg::Tsv => LogFormat::Tsv,
        LogFormatArg::Json => LogFormat::Json,
    };
    let create = |dir: &Path, name: &str| -> Result<Box<dyn Write>> {
        let path = dir.join(name);
        let f = File::create(&path).with_context(|| format!("cannot write {}", path.display()))?;
        Ok(Box::new(BufWriter::with_capacity(1 << 16, f)))
    };
    let (out, flows_out): (Box<dyn Write>, Option<Box<dyn Write>>) = match &args.logs {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create log directory {}", dir.display()))?;
            (create(dir, "conn.log")?, Some(create(dir, "flows.log")?))
        }
        None => (Box::new(BufWriter::with_capacity(1 << 16, io::stdout().lock())), None),
    };
    let mut store = if args.no_store {
        None
    } else {
        let opts = StoreOptions { retain_age: args.retain, retain_bytes: args.retain_size, ..StoreOptions::default() };
        Some(Store::open(&args.store, opts)?)
    };
    let mut sink = ConnLogWriter::new(out, format);
    let mut flow_sink = flows_out.map(|o| FlowLogWriter::new(o, format));

    let mut decoder = Decoder::new(DecodeConfig {
        verify_checksums: !args.ignore_checksums,
        frag_timeout_ns: args.frag_timeout.as_nanos() as i64,
        ..DecodeConfig::default()
    });
    let (tcp_server_ports, udp_server_ports) =
        PortSet::parse_list(&args.server_ports).map_err(|e| anyhow::anyhow!("--server-ports: {e}"))?;
    let mut tracker = Tracker::new(TrackerConfig {
        tcp_server_ports,
        udp_server_ports,
        dns_session_timeout_ns: args.dns_timeout.as_nanos() as i64,
        tcp_inactivity_ns: args.tcp_timeout.as_nanos() as i64,
        udp_inactivity_ns: args.udp_timeout.as_nanos() as i64,
        icmp_inactivity_ns: args.icmp_timeout.as_nanos() as i64,
        max_connections: args.max_connections.max(1),
        report_gaps_for_partial: args.report_gaps_for_partial,
        uid_seed: args.seed,
        flow_interval_ns: args.flow_interval.as_nanos().max(1_000_000) as i64,
        ..TrackerConfig::default()
    });

    let total_bytes: Option<u64> = args
        .captures
        .iter()
        .map(|p| if p.as_os_str() == "-" { None } else { std::fs::metadata(p).ok().map(|m| m.len()) })
        .sum();
    let progress = Progress::new(!args.quiet, total_bytes);
    let mut bytes_before = 0u64;
    let mut packets = 0u64;
    let mut unreadable = 0usize;
    let mut problems_reported = 0usize;
    let mut state_counts = [0u64; ConnState::ALL.len()];
    let mut flow_records = 0u64;
    let mut conn_buf: Vec<ConnRecord> = Vec::new();
    let mut flow_buf: Vec<FlowRecord> = Vec::new();
    let mut write_records = |tracker: &mut Tracker,
                             sink: &mut ConnLogWriter<Box<dyn Write>>,
                             flow_sink: &mut Option<FlowLogWriter<Box<dyn Write>>>,
                             store: &mut Option<Store>|
     -> Result<()> {
        conn_buf.clear();
        flow_buf.clear();
        conn_buf.extend(tracker.take_records());
        flow_buf.extend(tracker.take_flows());
        for r in &conn_buf {
            state_counts[r.conn_state as usize] += 1;
            sink.write(r)?;
        }
        flow_records += flow_buf.len() as u64;
        if let Some(s) = flow_sink.as_mut() {
            for f in &flow_buf {
                s.write(f)?;
            }
        }
        if let Some(st) = store.as_mut() {
            st.append_conns(&conn_buf)?;
            st.append_flows(&flow_buf)?;
        }
        Ok(())
    };

    for path in &args.captures {
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
                        None => first_skips
                            .push((reason, FirstSkip { count: 1, packet: file_packets, offset: reader.position() })),
                    }
                }
                Decoded::Skipped(_) => {}
            }
            if file_packets.is_multiple_of(DRAIN_EVERY) {
                write_records(&mut tracker, &mut sink, &mut flow_sink, &mut store)?;
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
                if p.count > 1 { format!(" ({} times)", p.count) } else { String::new() }
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
        write_records(&mut tracker, &mut sink, &mut flow_sink, &mut store)?;
    }

    tracker.finish();
    write_records(&mut tracker, &mut sink, &mut flow_sink, &mut store)?;
    sink.finish()?;
    if let Some(s) = flow_sink.as_mut() {
        s.finish()?;
    }
    if let Some(st) = store.take() {
        st.close()?;
    }
    progress.finish();

    if !args.quiet {
        let st = tracker.stats();
        let ds = decoder.stats();
        let mut line = format!(
            "wirelog: {} packets, {} connections ({} evicted), {} flow records, {} decoded",
            packets, st.connections, st.evicted, flow_records, ds.decoded
        );
        let skipped: Vec<String> =
            ds.skipped_iter().filter(|(_, n)| *n > 0).map(|(r, n)| format!("{} {}", n, r.as_str())).collect();
        if !skipped.is_empty() {
            line.push_str(&format!("; not used: {}", skipped.join(", ")));
        }
        if st.not_tracked > 0 {
            line.push_str(&format!("; {} IP packets of untracked protocols", st.not_tracked));
        }
        eprintln!("{line}");
        let states: Vec<String> = ConnState::ALL
            .iter()
            .filter(|s| state_counts[**s as usize] > 0)
            .map(|s| format!("{} {}", s.as_str(), state_counts[*s as usize]))
            .collect();
        if !states.is_empty() {
            eprintln!("wirelog: conn_state: {}", states.join(", "));
        }
    }

    // Like Zeek: a capture where most checksums are wrong was almost surely
    // taken on a host with checksum offloading (or on loopback), where the
    // kernel never fills them in; say how to read it.
    let ds = decoder.stats();
    if !args.ignore_checksums && ds.bad_transport_checksum > 0 && ds.bad_transport_checksum * 10 > ds.decoded {
        eprintln!(
            "wirelog: warning: {} of {} IP packets have bad checksums, likely from checksum offloading \
             (or a loopback capture); their connections are incomplete. Use -C to ignore checksums.",
            ds.bad_transport_checksum, ds.decoded
        );
    }

    // Non-zero only when nothing could be read at all.
    if packets == 0 && (unreadable > 0 || problems_reported > 0) {
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn open(path: &Path) -> Result<CaptureReader, wirelog_source::OpenError> {
    if path.as_os_str() == "-" {
        CaptureReader::from_reader("<stdin>", Box::new(io::stdin()))
    } else {
        CaptureReader::open(path)
    }
}
