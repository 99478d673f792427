//! `wirelog capture`: live interfaces -> probe (decode, track, parse) -> records -> logs/store.
//!
//! Threads: one worker per `--workers`, each owning one ring per interface
//! (joined in a PACKET_FANOUT group per interface when there are several
//! workers) and its own probe, so nothing is shared per packet;
//! one output thread (see `output`) receiving record batches; the main
//! thread waits for a signal or `--duration` and prints statistics.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use wirelog_capture::privs::{self, User};
use wirelog_capture::ring::{self, Ring, RingConfig, RingError, Waiter};
use wirelog_counters::{CaptureStats, WorkerCounters};
use wirelog_capture::budget::{self, CpuBudget, Governor};
use wirelog_capture::stop::Stop;
use wirelog_capture::sockprog::{self, SocketProgram, Stages};
use wirelog_capture::{bpf, now_ns, Framing, Interface};
use wirelog_probe::{KernelAccounting, Probe, ProbeConfig, SkipReason, TrackerConfig};
use wirelog_procs::{ConnSender, HookState, Resolver};

use crate::cli::CaptureArgs;
use crate::limits;
use crate::output::{Batch, BatchSender, OutputConfig};

/// Timers run at most this often while connections are open (the tracker's
/// timer wheel ticks every ~1.07 s, so running it more often gains nothing).
const TICK_NS: i64 = 1_000_000_000;

/// Idle workers with nothing tracked sleep at most this long.
const MAX_IDLE_NS: i64 = 60_000_000_000;

/// Blocks taken from one ring before the worker loop goes round (see
/// `Worker::drain_rings`).
const BLOCKS_PER_ROUND: usize = 8;

/// New connections a worker queues for the process resolver between two
/// shipments (one round of at most `BLOCKS_PER_ROUND` blocks per ring);
/// beyond it they are counted, not queued.
const NEW_CONNS_PER_ROUND: usize = 16_384;

/// Connections (then flows) a worker ends per step at exit, each step's
/// records handed to the output thread before the next (`read`'s step).
const FINISH_STEP: usize = 4096;

/// Bytes before the IP header in what a socket of this framing receives
/// (what the kernel accounting program skips).
fn l3_offset(f: Framing) -> i32 {
    if f == Framing::Ethernet {
        14
    } else {
        0
    }
}

/// The refusal message of `--kernel-accounting`, printed once the capture started.
fn kernel_refused(why: &str, step3: bool) -> String {
    if step3 {
        format!("wirelog: --cpu-budget: the kernel refused the kernel accounting program ({why}); shedding without step 3 (kernel accounting)")
    } else {
        format!("wirelog: --kernel-accounting: the kernel refused the eBPF program ({why}); capturing without it, every packet through the ring")
    }
}

/// The summary's words for connections not parsed for want of stream
/// memory (nothing when there were none).
pub(crate) fn no_memory_text(n: u64) -> String {
    if n == 0 {
        return String::new();
    }
    format!("; {n} connections not parsed: the stream memory had no room for their parsers' state (raise --stream-memory)")
}

pub fn run(args: CaptureArgs) -> Result<ExitCode> {
    args.check()?;
    let stop = Stop::install()?;

    // Interfaces, then filters: everything that can be wrong with the
    // command line fails before any socket opens.
    let mut ifaces: Vec<Interface> = Vec::new();
    for name in &args.interfaces {
        if ifaces.iter().any(|i| &i.name == name) {
            continue;
        }
        ifaces.push(Interface::lookup(name)?);
    }
    if ifaces.len() > 1 && ifaces.iter().any(|i| i.index == 0) {
        bail!("-i any already captures every interface; give it alone");
    }
    let expr = bpf::expression(args.filter.as_deref(), args.probe.skip_empty_tcp);
    let mut programs: Vec<(Framing, bpf::Program)> = Vec::new();
    if let Some(e) = &expr {
        for iface in &ifaces {
            if !programs.iter().any(|(f, _)| *f == iface.framing) {
                programs.push((iface.framing, bpf::compile(e, iface.framing, args.snaplen)?));
            }
        }
    }

    // --cpu-budget step 2: the skip-empty-TCP filter (with the user's
    // filter) compiled now, swapped onto the sockets when the load asks;
    // not when the sockets' one filter is the eBPF program, nor when it
    // is already on.
    // Without libpcap (which compiles it) the budget goes on without step 2,
    // and says so.
    let mut step2 = args.cpu_budget.is_some() && !args.probe.skip_empty_tcp;
    let mut skip_programs: Vec<(Framing, bpf::Program)> = Vec::new();
    if step2 {
        let e = bpf::expression(args.filter.as_deref(), true).unwrap_or_default();
        for iface in &ifaces {
            if !skip_programs.iter().any(|(f, _)| *f == iface.framing) {
                match bpf::compile(&e, iface.framing, args.snaplen) {
                    Ok(p) => skip_programs.push((iface.framing, p)),
                    Err(why) => {
                        eprintln!("wirelog: --cpu-budget: cannot compile the skip-empty-tcp filter ({why}); shedding without that step");
                        step2 = false;
                        break;
                    }
                }
            }
        }
    }

    // Rings: per worker, one per interface. The ring size is per interface,
    // split over the workers.
    let per_socket = (args.ring_size as usize / args.workers).max(1 << 20);
    let sockets = args.workers * ifaces.len();
    limits::check_ring_memory(
        (per_socket as u64).saturating_mul(sockets as u64),
        per_socket as u64,
        sockets,
        args.force_ring_size,
    )?;
    let mut block_size = ring::DEFAULT_BLOCK_SIZE;
    while per_socket / block_size < 8 && block_size > 64 << 10 {
        block_size /= 2;
    }
    // The socket programs' stages (capture::sockprog): the user's filter
    // alone and the skip-empty-TCP filter alone, per framing.
    let user_expr = bpf::expression(args.filter.as_deref(), false);
    let mut stage_programs: Vec<(Framing, Option<bpf::Program>, Option<bpf::Program>)> = Vec::new();
    for iface in &ifaces {
        if stage_programs.iter().any(|(f, _, _)| *f == iface.framing) {
            continue;
        }
        let user = user_expr.as_ref().map(|e| bpf::compile(e, iface.framing, args.snaplen)).transpose()?;
        let skip = if args.probe.skip_empty_tcp || step2 { bpf::compile(bpf::SKIP_EMPTY_TCP, iface.framing, args.snaplen).ok() } else { None };
        stage_programs.push((iface.framing, user, skip));
    }

    // --kernel-accounting: the program is loaded (while privileged) before
    // the rings, which run it as the last stage of their socket program.
    // --cpu-budget loads it too, for step 3, its stage switched off by the
    // socket programs' flag until the load asks (not with --pcap-dir:
    // counted packets are not kept).
    let step3 = args.cpu_budget.is_some() && !args.kernel_accounting && args.pcap.pcap_dir.is_none();
    let kernel = if args.kernel_accounting || step3 {
        let offsets: Vec<i32> = ifaces.iter().map(|i| l3_offset(i.framing)).collect();
        KernelAccounting::load(wirelog_probe::KERNEL_MAX_CONNECTIONS, &offsets, args.snaplen)
            .map(Some)
            .map_err(|e| kernel_refused(&e.to_string(), step3))
    } else {
        Ok(None)
    };
    // One eBPF program per socket (capture::sockprog), loaded while
    // privileged: non-IP packets counted in the kernel, the user's filter,
    // the skip-empty-TCP stage behind a map flag, kernel accounting last.
    // Refused, the sockets keep the classic filter and everything is
    // counted in user space, as before.
    let mut socket_refused: Option<String> = None;
    let mut socket_programs: Vec<Vec<Option<Arc<SocketProgram>>>> = Vec::new();
    for _ in 0..args.workers {
        let mut per_ring = Vec::new();
        for iface in &ifaces {
            if socket_refused.is_some() {
                per_ring.push(None);
                continue;
            }
            let (_, user, skip) = stage_programs.iter().find(|(f, _, _)| *f == iface.framing).expect("compiled per framing");
            let tail = match &kernel {
                Ok(Some(k)) => match k.tail(l3_offset(iface.framing), args.snaplen) {
                    Ok(t) => Some(t),
                    Err(e) => {
                        socket_refused = Some(e.to_string());
                        per_ring.push(None);
                        continue;
                    }
                },
                _ => None,
            };
            let stages = Stages {
                framing: iface.framing,
                snaplen: args.snaplen,
                count_non_ip: args.pcap.pcap_dir.is_none(),
                user: user.as_deref(),
                skip_empty: skip.as_deref(),
                tail,
                shed: args.cpu_budget.is_some(),
            };
            // A program that would only run the user's filter is not
            // loaded: the classic filter does the same for less
            // (`Stages::needed`).
            if !stages.needed(args.cpu_budget.is_some()) {
                per_ring.push(None);
                continue;
            }
            match SocketProgram::load(&stages) {
                Ok(p) => {
                    let flags = start_flags(args.probe.skip_empty_tcp, args.kernel_accounting);
                    if flags != 0 {
                        p.set_flags(flags).context("setting the socket program's flags")?;
                    }
                    per_ring.push(Some(Arc::new(p)));
                }
                Err(e) => {
                    socket_refused = Some(if e.log.is_empty() { e.to_string() } else { format!("{e}: {}", e.log.lines().last().unwrap_or("")) });
                    per_ring.push(None);
                }
            }
        }
        socket_programs.push(per_ring);
    }
    if socket_refused.is_some() {
        for p in socket_programs.iter_mut().flatten() {
            *p = None;
        }
    }
    // Kernel accounting runs only inside the socket program.
    let kernel = match (kernel, &socket_refused) {
        (Ok(Some(_)), Some(why)) => Err(kernel_refused(why, step3)),
        (k, _) => k,
    };
    let group_base = std::process::id() as u16;
    let mut worker_rings: Vec<Vec<(Ring, usize)>> = Vec::new();
    for worker_programs in &socket_programs {
        let mut rings = Vec::new();
        for (i, iface) in ifaces.iter().enumerate() {
            let cfg = RingConfig {
                block_size,
                ring_size: per_socket,
                snaplen: args.snaplen,
                promiscuous: !args.no_promisc,
                fanout_group: (args.workers > 1).then(|| group_base.wrapping_add(i as u16)),
                filter: programs.iter().find(|(f, _)| *f == iface.framing).map(|(_, p)| p.clone()),
                ebpf_filter: worker_programs[i].as_ref().map(|p| p.fd()),
                if_id: i as u32,
                swappable_filter: step2,
                ..RingConfig::default()
            };
            let r = Ring::open(iface, &cfg)?;
            if let Some(wanted) = r.shrunk_from() {
                eprintln!(
                    "wirelog: interface {}: not enough memory for a {} MiB ring, using {} MiB",
                    iface.name,
                    wanted >> 20,
                    r.size() >> 20
                );
            }
            rings.push((r, i));
        }
        worker_rings.push(rings);
    }

    // The socket program replaces each socket's classic filter; refused
    // by a socket, that socket keeps its classic filter (the same packets
    // but for the non-IP ones, which user space counts), and kernel
    // accounting is off: sockets that took the program before a refusal
    // pass every packet while nothing is delegated.
    for (w, rings) in worker_rings.iter().enumerate() {
        for (j, (r, _)) in rings.iter().enumerate() {
            if r.ebpf_refused().is_some() {
                socket_programs[w][j] = None;
            }
        }
    }
    let refused = worker_rings.iter().flatten().find_map(|(r, _)| r.ebpf_refused());
    let socket_refused = socket_refused.or_else(|| refused.map(|r| format!("attaching it to a capture socket: {r}")));
    let kernel_refused = match (&kernel, refused) {
        (Ok(Some(_)), Some(why)) => Some(kernel_refused(&format!("attaching it to a capture socket: {why}"), step3)),
        (Err(why), _) => Some(why.clone()),
        _ => None,
    };
    let kernel = kernel.ok().flatten().filter(|_| kernel_refused.is_none());

    // Bad tracking options fail before anything is written.
    let probe_cfg = args.probe.config().map_err(|e| anyhow::anyhow!(e))?;

    // The process resolver asks the kernel about sockets of this network
    // namespace: its socket opens here, its thread starts once privileges
    // are settled.
    // The eBPF connect hook loads here too, while privileged.
    let mut resolver = if args.processes {
        Some(Resolver::open(!args.no_ebpf).context("--processes: cannot open a NETLINK_SOCK_DIAG socket")?)
    } else {
        None
    };
    let hook_line = resolver.as_ref().and_then(|r| match r.hook() {
        HookState::Loaded { note } => note.as_ref().map(|n| format!("wirelog: processes: eBPF connect hook loaded; {n}")),
        HookState::Off => None,
        HookState::Refused(why) => Some(format!(
            "wirelog: processes: the eBPF connect hook was refused ({why}); using sock_diag and /proc only, \
             so the client end of a connection over before the resolver asks stays unattributed"
        )),
    });
    let hook_summary = resolver.as_ref().map(|r| match r.hook() {
        HookState::Loaded { .. } => "eBPF connect hook on",
        HookState::Off => "eBPF connect hook off (--no-ebpf)",
        HookState::Refused(_) => "eBPF connect hook refused",
    });

    // --tls-plaintext, --socket-data: maps, programs and library probes,
    // while privileged.
    let limit = |l: &str| (!l.is_empty()).then(|| wirelog_tlsplain::Limit::parse(l)).transpose().map_err(|e| anyhow::anyhow!(e));
    let tls = match (&args.tls_plaintext, &args.socket_data) {
        (None, None) => None,
        (tls, socket) => {
            let cfg = wirelog_tlsplain::Config {
                tls_library: tls.is_some(),
                limit: tls.as_deref().map(limit).transpose()?.flatten(),
                socket: socket.as_deref().map(limit).transpose()?,
                ring_size: args.tls_plaintext_ring as usize,
                parse: probe_cfg.track.app.as_ref().map(|a| a.parse.clone()).unwrap_or_default(),
            };
            let flags = if tls.is_some() { "--tls-plaintext" } else { "--socket-data" };
            let c = wirelog_tlsplain::Capturer::load(cfg).map_err(|e| anyhow::anyhow!("{flags}: {e}"))?;
            Some(c)
        }
    };
    let tls_join_stats: Arc<wirelog_tlsplain::JoinStats> = Arc::default();
    let tls_join = |c: &wirelog_tlsplain::Capturer| -> Box<dyn wirelog_record::TxJoin> {
        if args.socket_data.is_some() {
            Box::new(wirelog_tlsplain::Join::with_socket_claims(tls_join_stats.clone(), c.claims()))
        } else {
            Box::new(wirelog_tlsplain::Join::new(tls_join_stats.clone()))
        }
    };

    // Outputs, created while still privileged; what wirelog creates from
    // here on (and only that) is given to the user it becomes.
    let target = target_user(args.user.as_deref())?;
    if let Some(u) = &target {
        wirelog_safefs::give_created_to(u.uid, u.gid);
    }
    // --listen: the records are kept in memory too until the store has them.
    let records = args.serve.listen.map(|_| wirelog_store::LiveRecords::new(args.serve.live_memory as usize));
    let mut out_cfg = OutputConfig {
        records: records.clone(),
        // --cpu-budget step 2 may switch the filter on: the column is there.
        empty_tcp_note: args.probe.skip_empty_tcp || step2,
        sample_weights: args.cpu_budget.is_some(),
        processes: resolver.as_ref().map(|r| r.owners()),
        tls_join: tls.as_ref().map(tls_join),
        clickhouse: crate::clickhouse::sink_config(&args.output, &args.interfaces.join(","))?,
        ..args.output.config()
    };
    args.pcap.record_in(&mut out_cfg)?;
    let started = crate::output::start(out_cfg)?;
    let (output, mut owned_paths, health) = (started.output, started.paths, started.health);
    // --pcap-dir: the writer's directory is made (and given away) with the outputs.
    let keeping = args.pcap.start()?;
    let pcap_counters = keeping.as_ref().map(|k| k.counters());
    owned_paths.extend(keeping.as_ref().map(|k| (k.dir.clone(), false)));
    let dropped = output.dropped_counter();

    let tls_files = tls.as_ref().map(|c| c.files());
    let tls_notes = tls.as_ref().map(|c| c.notes.clone()).unwrap_or_default();
    let mut tls = TlsStart { pending: tls.map(|c| (c, output.sender())), stop: Arc::default(), running: None };
    drop_privileges(target.as_ref(), &owned_paths, resolver.as_mut(), &mut tls)?;

    let names: Vec<String> = ifaces.iter().map(|i| i.name.clone()).collect();
    let counters: Vec<Arc<WorkerCounters>> = (0..args.workers).map(|_| Arc::default()).collect();
    // --listen / --metrics-listen: bound before any worker starts, so a taken
    // port fails cleanly; they only read the counters.
    let store_dir = (!args.output.no_store).then(|| args.output.store.clone());
    let servers = crate::serve::start_in_capture(&args, store_dir, &counters, &names, &dropped, output.live(), records.clone())?;
    let mut workers: Vec<JoinHandle<Result<WorkerEnd>>> = Vec::new();
    let all_socket_programs: Vec<Arc<SocketProgram>> = socket_programs.iter().flatten().flatten().cloned().collect();
    for ((id, rings), socket_programs) in worker_rings.into_iter().enumerate().zip(socket_programs) {
        let c = counters[id].clone();
        let mut probe = Probe::new(ProbeConfig {
            track: TrackerConfig {
                // Distinct uid streams per worker when seeded.
                uid_seed: probe_cfg.track.uid_seed.map(|s| s.wrapping_add(id as u64)),
                ..probe_cfg.track.clone()
            },
            ..probe_cfg.clone()
        });
        for (i, n) in names.iter().enumerate() {
            probe.set_iface_name(i as u32, n);
        }
        if ifaces.iter().any(|i| i.index == 0) {
            // On `any` packets carry their own ifindex: named when first seen.
            probe.name_interfaces_with(wirelog_capture::interface_name);
        }
        if resolver.is_some() {
            probe.queue_new_connections(NEW_CONNS_PER_ROUND);
        }
        if let Some(k) = &keeping {
            k.attach(&mut probe, false)?;
        }
        if let Some(k) = &kernel {
            probe.kernel_accounting(k.clone());
            if step3 {
                // Step 3 starts off.
                probe.set_kernel_accounting(false);
            }
        }
        let budget = args.cpu_budget.map(|b| BudgetPlan {
            budget: b,
            kernel_step: step3 && kernel.is_some(),
            all: counters.clone(),
            filters: step2.then(|| {
                rings
                    .iter()
                    .map(|(r, _)| {
                        let normal = programs.iter().find(|(f, _)| *f == r.framing()).map_or_else(|| Ring::keep_all(args.snaplen), |(_, p)| p.clone());
                        let skip = skip_programs.iter().find(|(f, _)| *f == r.framing()).map(|(_, p)| p.clone()).unwrap_or_default();
                        (normal, skip)
                    })
                    .collect()
            }),
        });
        let tx = output.sender();
        let w = Worker {
            budget,
            rings,
            probe,
            counters: c,
            batch: tx.batch(),
            tx,
            stop,
            flow_interval_ns: probe_cfg.track.flow_interval_ns,
            iface_names: names.clone(),
            loss: wirelog_record::LossMeter::new(names.join(",")),
            warned_down: Default::default(),
            procs: resolver.as_ref().map(|r| r.sender()),
            socket_programs,
            sock_flags: start_flags(args.probe.skip_empty_tcp, args.kernel_accounting),
            non_ip_seen: (0, 0),
            shed_refused: false,
        };
        let h = std::thread::Builder::new()
            .name(format!("wirelog-w{id}"))
            .spawn(move || {
                let r = w.run();
                if r.is_err() {
                    stop.trigger();
                }
                r
            })
            .context("cannot start a worker thread")?;
        workers.push(h);
    }

    if !args.quiet {
        eprintln!(
            "wirelog: capturing on {} with {} worker(s){}",
            names.join(", "),
            args.workers,
            expr.as_ref().map(|_| ", kernel filter attached").unwrap_or("")
        );
        eprintln!("{} (per worker)", crate::read::memory_line(&args.probe));
        if let Some(b) = args.cpu_budget {
            let mut steps = String::from("parse sampling, then thinning of parsed connections");
            if step2 {
                steps.push_str(", then skip-empty-tcp");
            }
            if step3 && kernel.is_some() {
                steps.push_str(", then kernel accounting");
            }
            if args.probe.skip_empty_tcp {
                steps.push_str(" (skip-empty-tcp on throughout)");
            }
            if args.kernel_accounting && kernel.is_some() {
                steps.push_str(" (kernel accounting on throughout)");
            }
            steps.push_str(", then kernel drops");
            if socket_refused.is_none() {
                steps.push_str(" (shed by the socket programs while a worker pauses, once kernel accounting is on)");
            }
            eprintln!("wirelog: cpu budget: {b} for the whole process, held within {}% over any 10 s; sheds {steps}", budget::BURST_NS / 100_000_000);
        }
        if records.is_some() {
            // Beside the trackers' budget: the other memory the run may hold.
            eprintln!(
                "wirelog: live records: up to {} in memory until the store has them (--live-memory)",
                crate::limits::human(args.serve.live_memory)
            );
        }
        crate::serve::announce(&servers);
    }
    if let Some(l) = &hook_line {
        eprintln!("{l}");
    }
    for n in &tls_notes {
        eprintln!("{n}");
    }
    if let (Some(files), false, true) = (&tls_files, args.quiet, args.tls_plaintext.is_some()) {
        eprintln!("wirelog: tls-plaintext: probing SSL_read/SSL_write in {}", files.join(", "));
    }
    if let Some(l) = &kernel_refused {
        eprintln!("{l}");
    } else if let (Some(why), false) = (&socket_refused, args.quiet) {
        eprintln!("wirelog: the kernel refused the socket program ({why}); classic filter, non-IP packets counted in user space");
    }

    // Main thread: sleep until stopped, printing statistics on the way.
    let started = Instant::now();
    // What starting cost (the rings' pages above all: a 300 MiB ring is
    // ~0.5 CPU-s of the kernel zeroing them), said apart from the run the
    // budget governs: the workers' governors begin about now.
    let start_cpu_ns = budget::process_cpu_ns();
    let snapshot = || CaptureStats { workers: counters.iter().map(|c| c.snapshot()).collect() };
    let mut next_stats = (!args.stats_interval.is_zero()).then(|| started + args.stats_interval);
    let health_every = args.output.clickhouse.clickhouse_health_interval;
    let mut next_health = health.as_ref().map(|_| started + health_every);
    let mut health_base = (crate::clickhouse::Usage::now(), snapshot().total(), 0u64, started);
    loop {
        let now = Instant::now();
        if args.duration.is_some_and(|d| now >= started + d) {
            stop.trigger();
        }
        let mut until = args.duration.map(|d| started + d);
        for s in [next_stats, next_health].into_iter().flatten() {
            until = Some(until.map_or(s, |u| u.min(s)));
        }
        let timeout = until.map_or(-1, |u| u.saturating_duration_since(now).as_millis().min(i32::MAX as u128) as i32);
        if stop.wait(timeout)? {
            break;
        }
        if let Some(s) = next_stats {
            if Instant::now() >= s {
                if !args.quiet {
                    eprintln!("wirelog: stats: {}{}", snapshot(), dropped_note(&dropped));
                    if let Some(c) = &pcap_counters {
                        eprintln!("wirelog: {}", c.text());
                    }
                }
                next_stats = Some(s + args.stats_interval);
            }
        }
        if let (Some(h), Some(at)) = (&health, next_health) {
            if Instant::now() >= at {
                let probe_drops = dropped.load(std::sync::atomic::Ordering::Relaxed);
                let now = (crate::clickhouse::Usage::now(), snapshot().total(), probe_drops, Instant::now());
                h.push(crate::clickhouse::health_row(&health_base, &now));
                health_base = now;
                next_health = Some(at + health_every);
            }
        }
    }

    let mut first_err: Option<anyhow::Error> = None;
    let mut ends: Vec<WorkerEnd> = Vec::new();
    for h in workers {
        match h.join() {
            Ok(Ok(e)) => ends.push(e),
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert(anyhow::anyhow!("a worker thread panicked"));
            }
        }
    }
    // The TLS reader hands over what its connections still hold before the
    // output stage closes.
    let tls_stats = tls.stop();
    // The workers are done (their probes no longer keep packets): the pcap
    // writer writes what is queued and closes its file.
    let pcap_end = keeping.map(|k| k.finish());
    // The workers are done: the output writes what is queued and closes.
    let written = match output.finish() {
        Ok(w) => Some(w),
        Err(e) => {
            // The writer's own error explains a worker's "output stopped".
            first_err = Some(e.into());
            None
        }
    };
    let procs_stats = resolver.map(|r| {
        let owners = r.owners();
        r.stop();
        owners.stats().to_string()
    });
    if !args.quiet {
        let why = match stop.signal() {
            _ if first_err.is_some() => "an error",
            Some(2) => "SIGINT",
            Some(15) => "SIGTERM",
            Some(_) => "a signal",
            None => "end of --duration",
        };
        let w = written.as_ref().cloned().unwrap_or_default();
        let txs: u64 = w.txs.iter().sum();
        eprintln!(
            "wirelog: stopped by {why} after {:.1} s: {} connections, {} flow records, {txs} transactions",
            started.elapsed().as_secs_f64(),
            w.conns,
            w.flows
        );
        eprintln!("wirelog: stats: {}{}", snapshot(), dropped_note(&dropped));
        if let Some(k) = &kernel {
            let (pkts, bytes) = k.counted();
            let (written, behind, resumed) = k.written();
            eprintln!(
                "wirelog: kernel accounting: {pkts} packets ({bytes} IP bytes) counted in the kernel, not copied through the ring; {} connections not delegated (map full); {} map calls; {written} entries written ({behind} from packets more than 1 s old), {resumed} resumed ({} not taken){}",
                k.map_full(),
                k.map_calls(),
                k.not_taken(),
                if step3 { format!("; {} connections taken back when step 3 went off", k.taken_back()) } else { String::new() }
            );
        }
        if !all_socket_programs.is_empty() {
            let (pkts, bytes) = all_socket_programs.iter().fold((0, 0), |(p, b), s| {
                let (sp, sb) = s.non_ip();
                (p + sp, b + sb)
            });
            eprintln!("wirelog: socket program: {pkts} packets not IP ({bytes} bytes) counted in the kernel, not copied through the ring");
        }
        if let Some(end) = pcap_end.as_ref().filter(|e| !e.lost) {
            eprintln!("{}", end.line);
        }
        // The figures `/metrics` publishes live, as `read` prints them.
        if let Some(t) = w.states_text() {
            eprintln!("wirelog: conn_state: {t}");
        }
        if let Some(t) = w.txs_text() {
            eprintln!("wirelog: transactions: {t}");
        }
        if let Some(b) = args.cpu_budget {
            let cpu = (budget::process_cpu_ns() - start_cpu_ns) as f64 / 1e9;
            let secs = started.elapsed().as_secs_f64();
            // Step 3 unavailable is said, as in the start line.
            let no_step3 = if step3 && kernel.is_none() { " (step 3 unavailable: the kernel refused its program)" } else { "" };
            eprintln!(
                "wirelog: cpu budget {b}: the process used {cpu:.2} CPU-s in {secs:.1} s ({:.1}% of a core; {:.2} CPU-s more to start, before it); shed: {}{no_step3}",
                cpu / secs.max(1e-9) * 100.0,
                start_cpu_ns as f64 / 1e9,
                snapshot().shed_text()
            );
        }
        let a = snapshot().total();
        eprintln!(
            "wirelog: parsing: {} streams, {} gaps, {} bytes not parsed, {} parsers gave up{}{}",
            a.streams_parsed,
            a.parse_gaps,
            a.unparsed_bytes,
            a.parsers_gave_up,
            no_memory_text(a.parse_no_memory),
            // Not loss: said apart from the gaps, as `read` does.
            if a.beyond_snaplen_bytes > 0 {
                format!("; {} bytes beyond the snap length (sent, not captured; not gaps)", a.beyond_snaplen_bytes)
            } else {
                String::new()
            }
        );
        if let Some(p) = procs_stats {
            let dropped: u64 = ends.iter().map(|e| e.new_conns_dropped).sum();
            let hook = hook_summary.unwrap_or_default();
            eprintln!("wirelog: processes: {p}; {dropped} new connections not queued (worker queue full); {hook}");
        }
        if let Some((t, socket)) = &tls_stats {
            if args.tls_plaintext.is_some() {
                eprintln!("wirelog: tls-plaintext: {t}; join: {tls_join_stats}");
            }
            if let Some(s) = socket {
                eprintln!("wirelog: socket-data: {s}; join: {tls_join_stats}");
            }
        }
        let bad: u64 = ends.iter().map(|e| e.bad_checksums).sum();
        let decoded: u64 = ends.iter().map(|e| e.decoded).sum();
        if bad > 0 && bad * 10 > decoded {
            let hint = if args.probe.checksums.mode() == wirelog_decode::ChecksumMode::Verify {
                "likely from checksum offloading; --checksums auto (the default) accepts offloaded checksums"
            } else {
                "and they are not offloaded checksums; -C ignores checksums"
            };
            eprintln!("wirelog: warning: {bad} of {decoded} IP packets have bad checksums, {hint}");
        }
    }
    // Shown even with --quiet: packets are missing from the pcap files.
    let pcap_lost = pcap_end.is_some_and(|end| {
        if end.lost {
            eprintln!("{}", end.line);
        }
        end.lost
    });
    if let Some(e) = first_err {
        return Err(e);
    }
    if written.as_ref().is_some_and(|w| crate::output::report(w, args.quiet)) || pcap_lost {
        return Ok(ExitCode::from(crate::output::EXIT_PARTIAL));
    }
    Ok(ExitCode::SUCCESS)
}

/// The stats line's note of records lost to a full disk (empty when none).
fn dropped_note(dropped: &std::sync::atomic::AtomicU64) -> String {
    match dropped.load(std::sync::atomic::Ordering::Relaxed) {
        0 => String::new(),
        n => format!(", {n} records dropped (disk full)"),
    }
}

/// The user a capture started as root becomes (`--user`, default
/// `nobody`); None when it stays root (`--user root`) or did not start as
/// root (then `--user` is refused: changing user needs root).
fn target_user(user: Option<&str>) -> Result<Option<User>> {
    if !privs::is_root() {
        if let Some(u) = user {
            bail!("--user {u}: changing user needs root");
        }
        return Ok(None);
    }
    let u = User::lookup(user.unwrap_or("nobody"))?;
    Ok((u.uid != 0).then_some(u))
}

/// Becomes the unprivileged user `target` (see [`target_user`]), once the
/// output directories are checked to be writable by it: wirelog gave it
/// what it created, never an existing directory or file. Not as root (e.g.
/// with file capabilities), capabilities are dropped.
///
/// With `--processes` the resolver's thread is started here: as the new
/// user but keeping the two capabilities reading /proc/PID/fd of every
/// process takes, which this thread then gives up before any worker starts.
fn drop_privileges(
    target: Option<&User>,
    outputs: &[(PathBuf, bool)],
    resolver: Option<&mut Resolver>,
    tls: &mut TlsStart,
) -> Result<()> {
    let spawn = |r: Option<&mut Resolver>, tls: &mut TlsStart| -> Result<()> {
        if let Some(r) = r {
            r.spawn().context("cannot start the process resolver thread")?;
        }
        tls.spawn()
    };
    if !privs::is_root() {
        spawn(resolver, tls)?;
        privs::drop_capabilities()?;
        return Ok(());
    }
    let Some(u) = target else {
        return spawn(resolver, tls);
    };
    for (dir, below) in outputs {
        privs::check_writable(dir, u, *below)?;
    }
    if resolver.is_none() && tls.pending.is_none() {
        privs::drop_to(u)?;
    } else {
        // The resolver and the TLS reader read other users' /proc entries.
        privs::drop_to_keeping(u, privs::CAPS_READ_PROCS)?;
        spawn(resolver, tls)?;
        privs::drop_capabilities()?;
    }
    Ok(())
}

/// capture --tls-plaintext: the reader thread, started with the
/// credentials the resolver gets (see `drop_privileges`), stopped before
/// the output stage closes.
struct TlsStart {
    pending: Option<(wirelog_tlsplain::Capturer, BatchSender)>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    running: Option<wirelog_tlsplain::Running>,
}

impl TlsStart {
    fn spawn(&mut self) -> Result<()> {
        let Some((c, sender)) = self.pending.take() else { return Ok(()) };
        let emit = move |txs: &mut Vec<wirelog_record::TxRecord>| {
            if txs.is_empty() {
                return;
            }
            let mut b = sender.batch();
            b.txs.append(txs);
            // A stopped writer reports its own error at the end.
            let _ = sender.send(b);
        };
        self.running = Some(c.spawn(self.stop.clone(), emit).context("cannot start the TLS reader thread")?);
        Ok(())
    }

    /// Stops the reader (it hands over what it holds first); its counters:
    /// the TLS library's, and the socket's (`--socket-data`).
    fn stop(self) -> Option<(Arc<wirelog_tlsplain::Stats>, Option<Arc<wirelog_tlsplain::Stats>>)> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.running.map(|r| {
            let socket = r.socket_stats();
            (r.join(), socket)
        })
    }
}

/// What a worker reports when it ends.
/// The socket programs' flags at start: the stages on throughout.
fn start_flags(skip_empty_tcp: bool, kernel_accounting: bool) -> u32 {
    let mut f = 0;
    if skip_empty_tcp {
        f |= sockprog::FLAG_SKIP_EMPTY;
    }
    if kernel_accounting {
        f |= sockprog::FLAG_KERNEL_ACCOUNTING;
    }
    f
}

struct WorkerEnd {
    decoded: u64,
    bad_checksums: u64,
    new_conns_dropped: u64,
}

/// `--cpu-budget`: what a worker needs to hold its share.
struct BudgetPlan {
    budget: CpuBudget,
    /// Every worker's counters: their CPU time tells what the other
    /// threads of the process use.
    all: Vec<Arc<WorkerCounters>>,
    /// Per ring: its own filter and the skip-empty-TCP one (step 2);
    /// `None`: step 2 is not available.
    filters: Option<Vec<(bpf::Program, bpf::Program)>>,
    /// Step 3 is available: the kernel accounting program is loaded, its
    /// stage in every socket program, switched off.
    kernel_step: bool,
}

/// A worker's governor at work (built on the worker's thread: it reads
/// that thread's CPU clock).
struct Governed {
    plan: BudgetPlan,
    gov: Governor,
    /// The rings must be left alone this long (ns) before the next block.
    pause_ns: i64,
    /// When the share was last set, and the process's and the workers' CPU then.
    share_at: i64,
    process_at: i64,
    workers_at: u64,
    /// What the other threads used lately (cores, smoothed).
    others: f64,
}

/// How often a worker looks at what the other threads use.
const SHARE_EVERY_NS: i64 = 1_000_000_000;

impl Governed {
    fn new(plan: BudgetPlan) -> Governed {
        let share = budget::worker_share(plan.budget, plan.all.len(), 0.0);
        let (wall, cpu) = (budget::mono_ns(), budget::thread_cpu_ns());
        let mut gov = Governor::new(share, plan.filters.is_some(), wall, cpu);
        if plan.kernel_step {
            gov.allow_kernel_accounting();
        }
        Governed {
            gov,
            plan,
            pause_ns: 0,
            share_at: wall,
            process_at: budget::process_cpu_ns(),
            workers_at: 0,
            others: 0.0,
        }
    }

    /// The share left by the other threads, measured once a second.
    fn reshare(&mut self, wall: i64) {
        let dw = wall - self.share_at;
        if dw < SHARE_EVERY_NS {
            return;
        }
        let process = budget::process_cpu_ns();
        let workers: u64 = self.plan.all.iter().map(|c| c.cpu_ns.load(std::sync::atomic::Ordering::Relaxed)).sum();
        let others = ((process - self.process_at) - (workers as i64 - self.workers_at as i64)).max(0) as f64 / dw as f64;
        // Smoothed: the output thread works in bursts (flushes).
        self.others = if self.workers_at == 0 { others } else { 0.5 * self.others + 0.5 * others };
        self.share_at = wall;
        self.process_at = process;
        self.workers_at = workers;
        self.gov.set_share(budget::worker_share(self.plan.budget, self.plan.all.len(), self.others));
    }
}

struct Worker {
    /// `--cpu-budget` (built into a [`Governed`] on the worker's thread).
    budget: Option<BudgetPlan>,
    /// (ring, interface position in the -i list)
    rings: Vec<(Ring, usize)>,
    probe: Probe,
    counters: Arc<WorkerCounters>,
    /// Records collect here until shipped; replaced by one the output
    /// stage gave back empty.
    batch: Batch,
    tx: BatchSender,
    stop: Stop,
    flow_interval_ns: i64,
    iface_names: Vec<String>,
    /// The loss table's rows of this worker, per minute of the wall clock.
    loss: wirelog_record::LossMeter,
    /// Interfaces already reported down.
    warned_down: std::collections::HashSet<usize>,
    /// capture --processes: new connections go to the resolver.
    procs: Option<ConnSender>,
    /// Per ring: its socket program, when the socket took it.
    socket_programs: Vec<Option<Arc<SocketProgram>>>,
    /// The socket programs' flags now (`sockprog::FLAG_*`).
    sock_flags: u32,
    /// Non-IP packets and bytes the socket programs counted, as last read.
    non_ip_seen: (u64, u64),
    /// A socket program refused [`sockprog::FLAG_SHED`]: pauses leave the
    /// rings to the kernel's ring drops, as without a socket program.
    shed_refused: bool,
}

impl Worker {
    fn run(mut self) -> Result<WorkerEnd> {
        let mut governed = self.budget.take().map(Governed::new);
        let retire_ns = ring::DEFAULT_RETIRE_MS as i64 * 1_000_000;
        // Packets in a block the kernel has not retired yet are at most this
        // old: timers run this far behind the wall clock, so they never run
        // ahead of packets still to come.
        let lag_ns = retire_ns + 50_000_000;
        let mut waiter = Waiter::new(self.rings.iter().map(|(r, _)| r.fd()), self.stop.fd());
        let mut next_tick = now_ns() + TICK_NS;
        let mut drain_until: Option<i64> = None;
        loop {
            if self.drain_rings(governed.as_mut()) {
                self.ship()?;
            }
            if let Some(g) = governed.as_mut() {
                self.govern(g);
            }
            let now = now_ns();
            if drain_until.is_none() && self.stop.is_set() {
                // The kernel retires the last, partly filled block within the
                // retire timeout: wait that long for it, then finish.
                drain_until = Some(now + lag_ns);
            }
            if let Some(d) = drain_until {
                if now >= d {
                    break;
                }
                if let Some(e) = waiter.wait(((d - now) / 1_000_000 + 1) as i32, false)? {
                    self.ring_error(e)?;
                }
                continue;
            }
            if now >= next_tick {
                self.probe.advance(now - lag_ns);
                self.update_stats();
                if self.loss.due(now) {
                    self.loss_rows(now);
                }
                self.ship()?;
                next_tick = now + TICK_NS;
            }
            let wake = if self.probe.active_connections() > 0 {
                next_tick
            } else {
                // Nothing to expire: only the flow bucket's end matters.
                let iv = self.flow_interval_ns;
                let bucket_end = ((now - lag_ns).div_euclid(iv) + 1) * iv + lag_ns;
                bucket_end.min(now + MAX_IDLE_NS)
            };
            let timeout_ms = ((wake - now).max(0) / 1_000_000 + 1).min(i32::MAX as i64) as i32;
            if let Some(e) = waiter.wait(timeout_ms, true)? {
                self.ring_error(e)?;
            }
            if self.probe.active_connections() == 0 && now_ns() >= wake {
                // A bucket ended on an idle link: rotate it now.
                self.probe.advance(now_ns() - lag_ns);
                self.ship()?;
            }
        }
        self.set_shedding(false);
        while self.drain_rings(None) {}
        // Connections still open end in steps, each step after a batch came
        // back from the writer (no ring is read any more: waiting loses
        // nothing). Ended at once, or in steps sent without waiting, a table of
        // 540 k connections had its records pile up before the store: ~375 MB
        // peak RSS at exit against ~165 MB while capturing, ~320 MB this way
        // (BENCHMARKS.md, "Issue 36: live memory at 540 k connections (branch
        // rss50)").
        while !self.probe.finish_some(FINISH_STEP) {
            self.ship_waiting()?;
        }
        self.update_stats();
        self.loss.due(now_ns());
        self.loss_rows(now_ns());
        self.ship()?;
        // What the output thread had no room for yet goes now, waiting.
        let held = std::mem::take(&mut self.batch);
        self.tx.send(held)?;
        let ds = self.probe.decode_stats();
        Ok(WorkerEnd {
            decoded: ds.decoded,
            bad_checksums: ds.bad_ip_checksum + ds.bad_transport_checksum,
            new_conns_dropped: self.probe.track_stats().new_conns_dropped,
        })
    }

    /// Processes the retired blocks of every ring, at most
    /// [`BLOCKS_PER_ROUND`] per ring so that a saturated link still lets the
    /// loop ship records, run timers and see a stop; true if any block was.
    ///
    /// Governed (`--cpu-budget`), each block is charged to the budget and
    /// the round ends as soon as the budget is spent (see [`Worker::govern`]).
    fn drain_rings(&mut self, mut governed: Option<&mut Governed>) -> bool {
        if governed.as_ref().is_some_and(|g| g.pause_ns > 0) {
            return false;
        }
        let Worker { rings, probe, counters, .. } = self;
        let mut any = false;
        for (ring, _) in rings.iter_mut() {
            let mut blocks = 0;
            while blocks < BLOCKS_PER_ROUND {
                let Some(mut block) = ring.next_block() else {
                    break;
                };
                blocks += 1;
                any = true;
                let (mut packets, mut bytes, mut not_ip, mut not_decoded) = (0u64, 0u64, 0u64, 0u64);
                while let Some(p) = block.next_packet() {
                    packets += 1;
                    bytes += p.wire_len as u64;
                    let Some(pkt) = p.packet() else {
                        not_ip += 1;
                        continue;
                    };
                    match probe.packet(&pkt) {
                        Ok(()) | Err(SkipReason::FragmentHeld) => {}
                        Err(SkipReason::NotIp) => not_ip += 1,
                        Err(_) => not_decoded += 1,
                    }
                }
                probe.kernel_rearm();
                counters.add_batch(packets, bytes);
                if not_ip > 0 {
                    counters.not_ip.fetch_add(not_ip, std::sync::atomic::Ordering::Relaxed);
                }
                if not_decoded > 0 {
                    counters.not_decoded.fetch_add(not_decoded, std::sync::atomic::Ordering::Relaxed);
                }
                if let Some(g) = governed.as_deref_mut() {
                    g.pause_ns = g.gov.charge(budget::mono_ns(), budget::thread_cpu_ns());
                    if g.pause_ns > 0 {
                        return true;
                    }
                }
            } // the block goes back to the kernel here
        }
        any
    }

    /// `--cpu-budget`: pauses when the budget is spent (the kernel keeps
    /// what fits in the rings and drops the rest, counted), and applies
    /// what the governor decides at the end of each control period.
    fn govern(&mut self, g: &mut Governed) {
        use std::sync::atomic::Ordering::Relaxed;
        if g.pause_ns > 0 {
            // Only once step 3 is on: before it, a pause is a burst the
            // ring absorbs and the worker reads after (nothing lost when it
            // fits); with step 3 on, the load is sustained and a backlog
            // would keep the worker behind the wire, where the entries it
            // writes for the kernel never match.
            self.set_shedding(!self.stop.is_set() && g.gov.shed().kernel_accounting);
            let t0 = budget::mono_ns();
            let end = t0 + g.pause_ns;
            let mut now = t0;
            // In slices: a stop is seen within one.
            while now < end && !self.stop.is_set() {
                std::thread::sleep(Duration::from_nanos((end - now).min(budget::PAUSE_SLICE_NS) as u64));
                now = budget::mono_ns();
            }
            let slept = now - t0;
            g.gov.paused(slept);
            g.pause_ns = g.gov.charge(budget::mono_ns(), budget::thread_cpu_ns());
            if self.stop.is_set() {
                g.pause_ns = 0;
            }
            if g.pause_ns == 0 {
                self.set_shedding(false);
            }
        }
        let (wall, cpu) = (budget::mono_ns(), budget::thread_cpu_ns());
        self.counters.cpu_ns.store(cpu.max(0) as u64, Relaxed);
        g.reshare(wall);
        let a = self.probe.app_stats();
        let work = budget::Work {
            found: a.connections.iter().sum::<u64>() + a.sampled_out,
            parsing: a.parsing,
            transactions: a.transactions,
            stoppable: a.parsing_by.iter().map(|n| n.saturating_sub(wirelog_track::THIN_FLOOR)).sum(),
            tcp_open: self.probe.tracker().tcp_states() as u64,
        };
        if let Some(change) = g.gov.control(wall, cpu, work) {
            if change.to.sample != change.from.sample {
                self.probe.set_sampling(change.to.sample);
            }
            if change.to.thin != change.from.thin {
                self.probe.set_thinning(change.to.thin);
            }
            if change.to.skip_empty_tcp != change.from.skip_empty_tcp {
                self.swap_filters(g, change.to.skip_empty_tcp);
            }
            if change.to.kernel_accounting != change.from.kernel_accounting {
                self.switch_kernel_accounting(g, change.to.kernel_accounting);
            }
        }
        let c = &self.counters;
        c.sample_n.store(g.gov.shed().sample as u64, Relaxed);
        c.shed_sampling_ns.store(g.gov.sampling_ns, Relaxed);
        c.thin_k.store(g.gov.shed().thin as u64, Relaxed);
        c.shed_thinning_ns.store(g.gov.thinning_ns, Relaxed);
        c.shed_skip_empty_ns.store(g.gov.skip_empty_ns, Relaxed);
        c.shed_kernel_ns.store(g.gov.kernel_ns, Relaxed);
        c.shed_paused_ns.store(g.gov.paused_ns, Relaxed);
        c.shed_pauses.store(g.gov.pauses, Relaxed);
    }

    /// Step 4 in the kernel: while the worker pauses with step 3 on (the
    /// caller's gate), its socket programs
    /// refuse every packet that reaches their last stage, after kernel
    /// accounting, and count it ([`sockprog::FLAG_SHED`]); cleared when the
    /// pause ends. The ring then holds no backlog built during the pause
    /// (the worker resumes at the wire's present, where step 3's entries
    /// match the kernel's chain) and the kernel copies nothing into it
    /// meanwhile (on loopback that copy runs on the sender's thread: the
    /// server's). Only when every ring of the worker has its socket
    /// program; without (the classic filter's fallback) the pause leaves
    /// the rings to fill and the kernel to drop when full, as before. A
    /// flag write that fails is said once, and the pauses go on without.
    fn set_shedding(&mut self, on: bool) {
        if on == (self.sock_flags & sockprog::FLAG_SHED != 0) || self.shed_refused {
            return;
        }
        if self.socket_programs.is_empty() || self.socket_programs.iter().any(Option::is_none) {
            return;
        }
        let flags = if on { self.sock_flags | sockprog::FLAG_SHED } else { self.sock_flags & !sockprog::FLAG_SHED };
        for (prog, (_, pos)) in self.socket_programs.iter().zip(&self.rings) {
            let Some(p) = prog else { continue };
            if let Err(e) = p.set_flags(flags) {
                eprintln!("wirelog: --cpu-budget: interface {}: setting the socket program's flag: {e}; pausing without shedding in the kernel", self.iface_names[*pos]);
                self.sock_flags &= !sockprog::FLAG_SHED;
                for p in self.socket_programs.iter().flatten() {
                    let _ = p.set_flags(self.sock_flags);
                }
                self.shed_refused = true;
                return;
            }
        }
        self.sock_flags = flags;
    }

    /// Step 2 on or off: every ring of this worker gets the other filter.
    /// A socket that refuses is said once, and step 2 is not used again.
    fn swap_filters(&mut self, g: &mut Governed, skip: bool) {
        let Some(filters) = g.plan.filters.as_ref() else { return };
        for (((ring, pos), (normal, skipping)), prog) in self.rings.iter().zip(filters).zip(&self.socket_programs) {
            // A socket program has the stage: its flag, not a new filter.
            let flags = if skip { self.sock_flags | sockprog::FLAG_SKIP_EMPTY } else { self.sock_flags & !sockprog::FLAG_SKIP_EMPTY };
            let done = match prog {
                Some(p) => p.set_flags(flags).map_err(|e| format!("setting the socket program's flag: {e}")),
                None => ring.swap_filter(if skip { skipping } else { normal }).map_err(|e| e.to_string()),
            };
            if let Err(e) = done {
                eprintln!("wirelog: --cpu-budget: interface {}: {e}; not dropping empty TCP segments in the kernel", self.iface_names[*pos]);
                for (((ring, _), (normal, _)), prog) in self.rings.iter().zip(filters).zip(&self.socket_programs) {
                    match prog {
                        Some(p) => drop(p.set_flags(self.sock_flags & !sockprog::FLAG_SKIP_EMPTY)),
                        None => drop(ring.swap_filter(normal)),
                    }
                }
                self.sock_flags &= !sockprog::FLAG_SKIP_EMPTY;
                g.plan.filters = None;
                g.gov.forbid_skip_empty();
                self.probe.set_empty_tcp_skipped(false, now_ns());
                return;
            }
        }
        self.sock_flags = if skip { self.sock_flags | sockprog::FLAG_SKIP_EMPTY } else { self.sock_flags & !sockprog::FLAG_SKIP_EMPTY };
        self.probe.set_empty_tcp_skipped(skip, now_ns());
    }

    /// Step 3 on or off: the accounting stage of every socket program of
    /// this worker (a map write each), and the tracker delegating
    /// connections or taking them back. Off, the stage stops first, so the
    /// kernel counts nothing once the tracker takes connections back; on,
    /// it starts first, so that no entry is written with the stage off. A
    /// socket program that refuses the write is said once, and step 3 is
    /// not used again.
    fn switch_kernel_accounting(&mut self, g: &mut Governed, on: bool) {
        if !on {
            self.sock_flags &= !sockprog::FLAG_KERNEL_ACCOUNTING;
        } else {
            self.sock_flags |= sockprog::FLAG_KERNEL_ACCOUNTING;
        }
        for (prog, (_, pos)) in self.socket_programs.iter().zip(&self.rings) {
            // Every ring of a worker with the step has its socket program
            // (kernel accounting runs only inside it).
            let Some(p) = prog else { continue };
            if let Err(e) = p.set_flags(self.sock_flags) {
                eprintln!("wirelog: --cpu-budget: interface {}: setting the socket program's flag: {e}; not counting connections in the kernel", self.iface_names[*pos]);
                self.sock_flags &= !sockprog::FLAG_KERNEL_ACCOUNTING;
                for p in self.socket_programs.iter().flatten() {
                    let _ = p.set_flags(self.sock_flags);
                }
                g.gov.forbid_kernel_accounting();
                self.probe.set_kernel_accounting(false);
                return;
            }
        }
        self.probe.set_kernel_accounting(on);
    }

    /// A socket error: the interface went down (go on: capture resumes when
    /// it comes back up) or disappeared (stop with an error).
    fn ring_error(&mut self, e: RingError) -> Result<()> {
        let (ring, pos) = &self.rings[e.ring];
        let name = &self.iface_names[*pos];
        if ring.interface_gone() {
            bail!("interface {name} disappeared ({})", e.error);
        }
        if self.warned_down.insert(*pos) {
            eprintln!("wirelog: interface {name}: {} (capture resumes when it is up)", e.error);
        }
        // A device that is down wakes nobody; avoid spinning if it keeps erroring.
        std::thread::sleep(Duration::from_millis(100));
        Ok(())
    }

    fn update_stats(&mut self) {
        use std::sync::atomic::Ordering::Relaxed;
        let (mut p, mut d, mut f) = (0, 0, 0);
        for (r, _) in self.rings.iter_mut() {
            let k = r.kernel_stats();
            p += k.packets;
            d += k.drops;
            f += k.freeze_q_cnt;
        }
        let c = &self.counters;
        // Non-IP packets counted in the kernel: where user space counted
        // them (packets, bytes, not IP, and what passed the filter).
        let (mut np, mut nb) = (0, 0);
        for s in self.socket_programs.iter().flatten() {
            let (p, b) = s.non_ip();
            np += p;
            nb += b;
        }
        let (dp, db) = (np - self.non_ip_seen.0, nb - self.non_ip_seen.1);
        self.non_ip_seen = (np, nb);
        if dp > 0 {
            c.add_batch(dp, db);
            c.not_ip.fetch_add(dp, Relaxed);
        }
        // Packets shed in the kernel during pauses (step 4): refused by
        // the socket program, so in neither of the ring's counts; they
        // were offered to the socket and dropped there, by this cause.
        let (mut sp, mut sb) = (0, 0);
        for s in self.socket_programs.iter().flatten() {
            let (p, b) = s.shed();
            sp += p;
            sb += b;
        }
        c.shed_packets.store(sp, Relaxed);
        c.shed_bytes.store(sb, Relaxed);
        c.kernel_packets.store(p + np + sp, Relaxed);
        c.kernel_drops.store(d + sp, Relaxed);
        c.kernel_freezes.store(f, Relaxed);
        c.evicted.store(self.probe.track_stats().evicted, Relaxed);
        c.missed_bytes.store(self.probe.track_stats().missed_bytes, Relaxed);
        c.flows_early.store(self.probe.tracker().flows_emitted_early(), Relaxed);
        let ds = self.probe.decode_stats();
        c.checksum_valid.store(ds.good_checksum, Relaxed);
        c.checksum_offloaded.store(ds.offloaded_checksum, Relaxed);
        c.checksum_bad.store(ds.bad_ip_checksum + ds.bad_transport_checksum, Relaxed);
        c.conns_open.store(self.probe.active_connections() as u64, Relaxed);
        let a = self.probe.app_stats();
        c.streams_parsed.store(a.connections.iter().sum(), Relaxed);
        c.parse_gaps.store(a.parse.gaps, Relaxed);
        c.unparsed_bytes.store(a.parse.unparsed_bytes, Relaxed);
        c.beyond_snaplen_bytes.store(a.beyond_snaplen_bytes, Relaxed);
        c.parsers_gave_up.store(a.gave_up, Relaxed);
        c.parse_no_memory.store(a.no_memory, Relaxed);
        c.sampled_out.store(a.sampled_out, Relaxed);
        c.parse_stopped.store(a.parse_stopped, Relaxed);
    }

    /// Ends the loss table's open minute (see `wirelog_record::loss`): the
    /// probe's counts, and the ring's and sampling's as the stats line
    /// and `/metrics` have them (`update_stats` just published them).
    fn loss_rows(&mut self, now: i64) {
        use wirelog_record::LossCount as C;
        let mut t: wirelog_record::LossTotals = Default::default();
        self.probe.loss_totals(&mut t);
        let c = self.counters.snapshot();
        let src = &mut t[0];
        src.set(C::Packets, c.packets);
        src.set(C::KernelPackets, c.kernel_packets);
        src.set(C::KernelDrops, c.kernel_drops);
        src.set(C::RingFull, c.kernel_freezes);
        src.set(C::Undecoded, c.not_decoded);
        // Sampled connections are in their protocol's rows (the probe's).
        self.loss.close_minute(&t, now, &mut self.batch.losses);
    }

    /// Sends the records that ended since the last call, if any.
    fn ship(&mut self) -> Result<()> {
        self.hand_new_connections();
        self.probe.drain(&mut self.batch);
        if self.batch.is_empty() {
            return Ok(());
        }
        // The output thread may be behind (a disk stall, a burst of
        // statements): keep collecting rather than stop reading the rings,
        // which the kernel would answer by dropping packets. Only past a
        // bound on what is held does the worker wait.
        let full = std::mem::take(&mut self.batch);
        match self.tx.try_send(full)? {
            None => self.batch = self.tx.batch(),
            Some(held) if held.records() < wirelog_counters::MAX_HELD_RECORDS => self.batch = held,
            Some(held) => {
                self.counters.output_waits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.tx.send(held)?;
                self.batch = self.tx.batch();
            }
        }
        Ok(())
    }

    /// At exit, after the last ring block: what the probe holds goes to the
    /// output thread, and the next step waits for a batch the writer gave
    /// back (nothing is lost by waiting now), so that records do not pile
    /// up between the steps of the finish.
    fn ship_waiting(&mut self) -> Result<()> {
        self.hand_new_connections();
        self.probe.drain(&mut self.batch);
        let full = std::mem::take(&mut self.batch);
        self.tx.send(full)?;
        self.batch = self.tx.batch_written();
        Ok(())
    }

    /// New connections go to the process resolver before the records that
    /// may end them, so the writer finds them resolved (it waits for what
    /// was queued first).
    fn hand_new_connections(&mut self) {
        if let Some(p) = &self.procs {
            let mut new = Vec::new();
            self.probe.take_new_connections(&mut new);
            p.send(new);
        }
    }
}
