//! `capture --cpu-budget`: what the operator lets the capture cost, and the
//! governor each worker runs to hold it.
//!
//! Each worker reads its own thread CPU time once per ring block (one
//! `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`: nothing per packet) and charges
//! it to a token bucket filled at the worker's share of the budget. Two
//! things follow from the bucket:
//!
//! - **The hard bound.** A worker whose bucket is empty stops reading its
//!   rings until the bucket has refilled: the rings fill and the kernel
//!   drops what does not fit, counted by `PACKET_STATISTICS` (step 4 of the
//!   shedding order, always there as the backstop). The bucket holds at most
//!   [`BURST_NS`] of budget, so over any window of `T` seconds a worker
//!   uses at most `share * (T + BURST)`: over 10 s, 5% above its share.
//! - **Cheaper work first.** Every [`CONTROL_NS`] the governor compares what
//!   the worker used with its share and moves one notch along the shedding
//!   order (see [`Shed`]): above [`HIGH`] of the share (or paused at all) it
//!   sheds more, below [`LOW`] for [`CALM_PERIODS`] periods in a row it sheds
//!   less (the gap between the two and the wait are the hysteresis). The
//!   order: (1) parse only 1 in N new connections, N doubling up to
//!   [`MAX_SAMPLE`] while new connections come; (1b) stop parsing
//!   established connections, keeping 1 in K of them (paced, see below);
//!   (2) drop empty TCP segments in the kernel (the socket program's
//!   skip-empty stage switched on by a map flag, `crate::sockprog`; where
//!   the kernel refused that program, `--skip-empty-tcp`'s classic filter
//!   swapped onto the sockets); (3) kernel accounting of established TCP
//!   connections (`--kernel-accounting`'s program, loaded at start and
//!   switched by a map flag of the socket program, `crate::sockprog`: the
//!   tracker delegates connections while it is on and takes them back
//!   when it goes off, `wirelog_track::Tracker::set_kernel_accounting`),
//!   while connections are open; then only the backstop is left.
//!
//! **Step 1b's pace.** What the budget needs is that parsing costs less;
//! what an estimate needs is connections still parsed, each standing for
//! the ones stopped. The first version doubled K every period: the four
//! connections of a busy sysbench were all stopped within 1-2 s (9.7-13.6
//! k statements recorded of 93-98 k, and nothing left to estimate the rest
//! by), because a stopped connection's saving shows only in the period
//! after its next packet, so the governor doubled K again before it saw
//! the effect of the last step, and nothing stopped the draw at the last
//! connection. Now:
//! - The draw is made over connections, once per doubling of K, at each
//!   parsed connection's next packet (`Tracker::set_thinning`), and never
//!   stops the last `wirelog_track::THIN_FLOOR` (1) parsed connection of a
//!   protocol. A stopped connection's weight goes to a parsed one of its
//!   protocol, so the transactions' weights always add up to the
//!   connections open (a ratio estimator: each parsed connection stands
//!   for the stopped ones as well as itself).
//! - After K doubled, nothing further moves along the order for
//!   [`THIN_SETTLE_PERIODS`] periods (step 1's N excepted, which concerns
//!   connections yet to come): one for the draws to happen, the others to
//!   measure what they saved; over budget in between, only the bucket
//!   (the backstop) acts.
//! - When every protocol is down to its floor ([`Work::stoppable`] is 0)
//!   and the budget still is not held, step 2 takes over, then the
//!   backstop: the last connections are never stopped for the budget's
//!   sake.
//! - Back when load falls: K halves after a calm spell like every step
//!   (connections stopped stay stopped: a parser cannot start in the
//!   middle of a stream; new connections are parsed again, at step 1's N).
//! - Counting: MySQL's statements on a stopped connection are not counted:
//!   the parser is what frames them (a client segment is not a statement:
//!   one may carry several, a large one spans segments), and a framer kept
//!   for counting would cost most of what the parser costs. The weights
//!   are the estimate; the loss table counts the connections stopped
//!   (`parse_stopped`, per protocol).
//!
//! The budget covers the whole process, not the workers alone: the output
//! thread (logs, store, ClickHouse) and the rest are measured too
//! ([`process_cpu_ns`] minus what the workers used), and each worker's share
//! is what they leave, split evenly, never below a quarter of an even split.

use std::fmt;

/// A worker's bucket holds at most this much of its budget (ns of budget
/// time): the burst a quiet worker may spend at once, and the tolerance the
/// budget is held with over a window (`BURST_NS / window`).
pub const BURST_NS: i64 = 500_000_000;

/// How often the governor looks at what the worker used and moves along
/// the shedding order.
pub const CONTROL_NS: i64 = 250_000_000;

/// Above this fraction of its share over a control period, a worker sheds more.
pub const HIGH: f64 = 0.9;

/// Below this fraction, for [`CALM_PERIODS`] periods in a row, it sheds less.
pub const LOW: f64 = 0.5;

/// Control periods below [`LOW`] before a step is taken back (2 s).
pub const CALM_PERIODS: u32 = 8;

/// The largest N of 1-in-N parse sampling: beyond it an estimate rests on
/// too few connections to say much (a sixty-fourth of them).
pub const MAX_SAMPLE: u32 = 64;

/// The largest K of step 1b (established connections kept parsing 1 in
/// K): at 64 a handful of busy connections is as good as none parsed.
pub const MAX_THIN: u32 = 64;

/// Control periods K stays at before step 1b may double it again: the
/// period in which the draws happen (each connection's next packet), then
/// three to see what stopping them saved (1 s in all).
pub const THIN_SETTLE_PERIODS: u32 = 4;

/// A worker whose bucket is empty pauses until the bucket holds this much
/// of its budget (ns of budget time), and at least twice what its last
/// wake from a pause cost (`Governor::wake_cost`), not merely until it is
/// no longer empty: waking and the block read next cost CPU. A worker
/// woken at exactly zero was in debt again at once and paused again; with
/// a block waiting in its ring its poll did not wait either, so on an idle
/// machine, where a sleep ends on time, it paused for good. It then spent
/// its whole share on waking and no period was ever calm (the step-3 live
/// test, 2026-11-30: paused 22.7 s of 24 with the kernel counting nearly
/// every packet, and step 3 never went off). A tenth of the burst.
pub const RESUME_NS: i64 = BURST_NS / 10;

/// The longest single pause the governor asks for. Long enough that one
/// pause's refill (`share * MAX_PAUSE_NS`) exceeds what waking from it
/// costs even at the smallest share (0.1% of a core, a quarter of it: 250
/// µs a second, against tens of µs a wake); the worker sleeps it in slices
/// of [`PAUSE_SLICE_NS`] and looks at the stop flag between.
pub const MAX_PAUSE_NS: i64 = 1_000_000_000;

/// The slices a pause is slept in (a stop is seen within one).
pub const PAUSE_SLICE_NS: i64 = 100_000_000;

/// A CPU budget in cores (0.05 = 5% of one core).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuBudget {
    cores: f64,
}

impl CpuBudget {
    /// `5%` (of one core) or `0.5` (cores, for all workers together).
    /// Errors name the flag and say what is accepted.
    pub fn parse(s: &str) -> Result<CpuBudget, String> {
        let t = s.trim();
        let bad = |why: &str| format!("--cpu-budget {s:?}: {why}; give a share of one core such as 5% or a number of cores such as 0.5");
        let (num, scale) = match t.strip_suffix('%') {
            Some(n) => (n.trim(), 0.01),
            None => (t, 1.0),
        };
        if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit() || b == b'.') || num.bytes().filter(|b| *b == b'.').count() > 1 {
            return Err(bad("not a number"));
        }
        let v: f64 = num.parse().map_err(|_| bad("not a number"))?;
        let cores = v * scale;
        if cores < 0.001 {
            return Err(bad("below 0.1% of a core, too little to capture anything"));
        }
        if cores > 1024.0 {
            return Err(bad("above 1024 cores"));
        }
        Ok(CpuBudget { cores })
    }

    pub fn cores(self) -> f64 {
        self.cores
    }
}

impl fmt::Display for CpuBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.cores < 1.0 {
            // To a hundredth of a percent: 0.15% is not said as 0.2%.
            write!(f, "{}% of a core", (self.cores * 10_000.0).round() / 100.0)
        } else {
            write!(f, "{} cores", (self.cores * 100.0).round() / 100.0)
        }
    }
}

fn clock_ns(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// CPU time of the calling thread (user + system), ns.
pub fn thread_cpu_ns() -> i64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time of the whole process (every thread), ns.
pub fn process_cpu_ns() -> i64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// Monotonic wall time, ns (pauses and periods; never jumps).
pub fn mono_ns() -> i64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// How far along the shedding order a worker is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shed {
    /// Step 1: new connections are parsed 1 in `sample` (1: all of them).
    pub sample: u32,
    /// Step 1b: connections already parsed go on being parsed 1 in
    /// `thin` (1: all of them); the others stop for good.
    pub thin: u32,
    /// Step 2: empty TCP segments are dropped in the kernel.
    pub skip_empty_tcp: bool,
    /// Step 3: established TCP connections are counted in the kernel.
    pub kernel_accounting: bool,
}

impl Shed {
    pub const NONE: Shed = Shed { sample: 1, thin: 1, skip_empty_tcp: false, kernel_accounting: false };
}

/// What the worker's probe did so far (running totals, or a gauge), which
/// tells the governor whether a step would save anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// Connections found (parsed or sampled out): step 1 helps only
    /// while new ones come.
    pub found: u64,
    /// Connections being parsed now (a gauge) ...
    pub parsing: u64,
    /// ... and transactions made so far: step 1b helps only while parsed
    /// connections still make some ...
    pub transactions: u64,
    /// ... and some are above the floor of their protocol (a gauge: parsed
    /// connections step 1b could still stop, `parsing_by` less
    /// `wirelog_track::THIN_FLOOR` per protocol).
    pub stoppable: u64,
    /// TCP connections open now (a gauge): step 3 helps only while there
    /// are some for the kernel to count.
    pub tcp_open: u64,
}

/// What the worker must change after a control period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub from: Shed,
    pub to: Shed,
}

/// One worker's governor (see the module docs). Pure arithmetic on the
/// times it is given, so tests drive it with made-up clocks.
#[derive(Debug)]
pub struct Governor {
    /// CPU ns this worker may use per wall ns.
    share: f64,
    tokens: f64,
    last_wall: i64,
    last_cpu: i64,
    period_start: i64,
    period_cpu: i64,
    /// What the probe had done when the period started.
    period_work: Work,
    paused_in_period: bool,
    /// CPU ns the last wakes from a pause cost (the charge right after a
    /// pause, halved into the last value): the bucket must hold more than
    /// that when a pause ends ([`RESUME_NS`]).
    wake_cost: f64,
    /// The next charge follows a pause.
    after_pause: bool,
    calm: u32,
    /// Periods since step 1b's K last doubled (see
    /// [`THIN_SETTLE_PERIODS`]).
    thin_age: u32,
    shed: Shed,
    /// Whether step 2 may be used (not with a kernel program of its own, or
    /// when the user asked for --skip-empty-tcp already).
    skip_empty_available: bool,
    /// Whether step 3 may be used (the kernel accounting program loaded,
    /// and not on throughout with `--kernel-accounting`).
    kernel_available: bool,
    /// Time (wall ns) each step was active, and paused.
    pub sampling_ns: u64,
    pub thinning_ns: u64,
    pub skip_empty_ns: u64,
    pub kernel_ns: u64,
    pub paused_ns: u64,
    pub pauses: u64,
    /// The largest N used.
    pub max_sample: u32,
    /// The largest K used (step 1b).
    pub max_thin: u32,
}

impl Governor {
    /// A governor for a worker allowed `share` cores, starting at `wall`
    /// with the thread's CPU time `cpu`; the bucket starts full.
    pub fn new(share: f64, skip_empty_available: bool, wall: i64, cpu: i64) -> Governor {
        Governor {
            share,
            tokens: share * BURST_NS as f64,
            last_wall: wall,
            last_cpu: cpu,
            period_start: wall,
            period_cpu: cpu,
            period_work: Work::default(),
            paused_in_period: false,
            wake_cost: 0.0,
            after_pause: false,
            calm: 0,
            thin_age: THIN_SETTLE_PERIODS,
            shed: Shed::NONE,
            skip_empty_available,
            kernel_available: false,
            sampling_ns: 0,
            thinning_ns: 0,
            skip_empty_ns: 0,
            kernel_ns: 0,
            paused_ns: 0,
            pauses: 0,
            max_sample: 1,
            max_thin: 1,
        }
    }

    pub fn share(&self) -> f64 {
        self.share
    }

    /// A new share (what the other threads leave changed).
    pub fn set_share(&mut self, share: f64) {
        self.share = share;
        self.tokens = self.tokens.min(share * BURST_NS as f64);
    }

    /// Step 2 cannot be used (a socket refused the filter): turned off if
    /// on, never taken again.
    pub fn forbid_skip_empty(&mut self) {
        self.skip_empty_available = false;
        self.shed.skip_empty_tcp = false;
    }

    /// Step 3 may be used (the kernel accounting program is loaded and
    /// switched off).
    pub fn allow_kernel_accounting(&mut self) {
        self.kernel_available = true;
    }

    /// Step 3 cannot be used (a socket refused the flag): turned off if
    /// on, never taken again.
    pub fn forbid_kernel_accounting(&mut self) {
        self.kernel_available = false;
        self.shed.kernel_accounting = false;
    }

    pub fn shed(&self) -> Shed {
        self.shed
    }

    /// Charges the CPU used since the last call; returns how long the
    /// worker must pause (0: go on), at most [`MAX_PAUSE_NS`].
    pub fn charge(&mut self, wall: i64, cpu: i64) -> i64 {
        let dw = (wall - self.last_wall).max(0);
        let dc = (cpu - self.last_cpu).max(0);
        self.last_wall = wall;
        self.last_cpu = cpu;
        if std::mem::take(&mut self.after_pause) {
            self.wake_cost = 0.5 * (self.wake_cost + dc as f64);
        }
        self.tokens = (self.tokens + dw as f64 * self.share).min(self.share * BURST_NS as f64) - dc as f64;
        if self.tokens >= 0.0 {
            return 0;
        }
        // Refilled to [`RESUME_NS`] of budget, and twice a wake's cost,
        // after this long.
        let resume = (RESUME_NS as f64 * self.share).max(2.0 * self.wake_cost);
        let need = ((resume - self.tokens) / self.share).ceil() as i64;
        self.paused_in_period = true;
        need.clamp(1, MAX_PAUSE_NS)
    }

    /// The worker paused for `ns` (counted as the time step 4 was active).
    pub fn paused(&mut self, ns: i64) {
        self.paused_ns += ns.max(0) as u64;
        self.pauses += 1;
        self.after_pause = true;
    }

    /// Once per loop: at the end of a control period, moves one notch along
    /// the shedding order and says what changed (None: nothing did).
    /// `work`: what the probe did so far (see [`Work`]).
    pub fn control(&mut self, wall: i64, cpu: i64, work: Work) -> Option<Change> {
        let elapsed = wall - self.period_start;
        if elapsed < CONTROL_NS {
            return None;
        }
        let used = (cpu - self.period_cpu).max(0) as f64;
        let ratio = used / (self.share * elapsed as f64);
        if self.shed.sample > 1 {
            self.sampling_ns += elapsed as u64;
        }
        if self.shed.thin > 1 {
            self.thinning_ns += elapsed as u64;
        }
        if self.shed.skip_empty_tcp {
            self.skip_empty_ns += elapsed as u64;
        }
        if self.shed.kernel_accounting {
            self.kernel_ns += elapsed as u64;
        }
        let paused = std::mem::take(&mut self.paused_in_period);
        let new_conns = work.found > self.period_work.found;
        let parsing = work.stoppable > 0 && work.transactions > self.period_work.transactions;
        self.thin_age = self.thin_age.saturating_add(1);
        self.period_start = wall;
        self.period_cpu = cpu;
        self.period_work = work;
        let from = self.shed;
        if paused || ratio > HIGH {
            self.calm = 0;
            if self.shed.sample < MAX_SAMPLE && new_conns {
                self.shed.sample *= 2;
            } else if self.thin_age < THIN_SETTLE_PERIODS {
                // Step 1b's last draws: their effect is not measured yet
                // (only the bucket acts meanwhile).
            } else if self.shed.thin < MAX_THIN && parsing {
                self.shed.thin *= 2;
                self.thin_age = 0;
            } else if self.skip_empty_available && !self.shed.skip_empty_tcp {
                self.shed.skip_empty_tcp = true;
            } else if self.kernel_available && !self.shed.kernel_accounting && work.tcp_open > 0 {
                self.shed.kernel_accounting = true;
            }
        } else if ratio < LOW {
            // A worker asleep on an idle link calls rarely: every period
            // it slept through was calm.
            self.calm += (elapsed / CONTROL_NS).max(1) as u32;
            if self.calm >= CALM_PERIODS {
                self.calm = 0;
                if self.shed.kernel_accounting {
                    self.shed.kernel_accounting = false;
                } else if self.shed.skip_empty_tcp {
                    self.shed.skip_empty_tcp = false;
                } else if self.shed.thin > 1 {
                    self.shed.thin /= 2;
                } else if self.shed.sample > 1 {
                    self.shed.sample /= 2;
                }
            }
        } else {
            self.calm = 0;
        }
        self.max_sample = self.max_sample.max(self.shed.sample);
        self.max_thin = self.max_thin.max(self.shed.thin);
        (self.shed != from).then_some(Change { from, to: self.shed })
    }
}

/// Each worker's share: the budget less what the other threads use, split
/// evenly over the workers, never below a quarter of an even split (so a
/// burst of the output thread cannot stop capture altogether).
pub fn worker_share(budget: CpuBudget, workers: usize, others_cores: f64) -> f64 {
    let even = budget.cores() / workers.max(1) as f64;
    ((budget.cores() - others_cores.max(0.0)) / workers.max(1) as f64).max(even / 4.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    /// Connections found so far, none being parsed.
    fn found(n: u64) -> Work {
        Work { found: n, ..Work::default() }
    }

    #[test]
    fn parses_percent_and_cores_strictly() {
        assert_eq!(CpuBudget::parse("5%").unwrap().cores(), 0.05);
        assert_eq!(CpuBudget::parse("0.5").unwrap().cores(), 0.5);
        assert_eq!(CpuBudget::parse(" 150% ").unwrap().cores(), 1.5);
        assert_eq!(CpuBudget::parse("2").unwrap().cores(), 2.0);
        for bad in ["", "%", "5%%", "-5%", "five", "0", "0%", "1e3", "0.00001", "2000", "5 %x", "1.2.3"] {
            let e = CpuBudget::parse(bad).unwrap_err();
            assert!(e.starts_with("--cpu-budget "), "{bad}: {e}");
        }
        assert_eq!(CpuBudget::parse("3%").unwrap().to_string(), "3% of a core");
        assert_eq!(CpuBudget::parse("0.15%").unwrap().to_string(), "0.15% of a core");
        assert_eq!(CpuBudget::parse("0.2%").unwrap().to_string(), "0.2% of a core");
        assert_eq!(CpuBudget::parse("1.0%").unwrap().to_string(), "1% of a core");
        assert_eq!(CpuBudget::parse("0.5").unwrap().to_string(), "50% of a core");
        assert_eq!(CpuBudget::parse("2").unwrap().to_string(), "2 cores");
    }

    /// A worker that wants `demand` cores gets paused so that over any
    /// window it uses its share plus at most the burst.
    #[test]
    fn bucket_holds_the_share_over_any_window() {
        let share = 0.03;
        let mut g = Governor::new(share, true, 0, 0);
        let (mut wall, mut cpu) = (0i64, 0i64);
        let mut used_at = vec![(0i64, 0i64)];
        // Blocks of 2 ms CPU each, back to back, for 30 s.
        while wall < 30_000 * MS {
            wall += 2 * MS;
            cpu += 2 * MS;
            let p = g.charge(wall, cpu);
            if p > 0 {
                wall += p;
                g.paused(p);
                assert_eq!(g.charge(wall, cpu), 0, "refilled after the pause");
            }
            g.control(wall, cpu, found(wall as u64));
            used_at.push((wall, cpu));
        }
        // Every 10 s window: at most share * (10 s + burst).
        for (i, &(w0, c0)) in used_at.iter().enumerate() {
            let Some(&(w1, c1)) = used_at[i..].iter().find(|(w, _)| *w >= w0 + 10_000 * MS) else { break };
            let limit = share * ((w1 - w0) + BURST_NS) as f64 + 2.0 * MS as f64;
            assert!((c1 - c0) as f64 <= limit, "window at {w0}: {} > {limit}", c1 - c0);
        }
        // Over the whole run it used its share (within 2%).
        let (w, c) = *used_at.last().unwrap();
        assert!((c as f64 / w as f64 - share).abs() < share * 0.02, "{}", c as f64 / w as f64);
        assert!(g.paused_ns > 0 && g.pauses > 0);
        // Always over: the governor went all the way along the order.
        assert_eq!(g.shed(), Shed { sample: MAX_SAMPLE, thin: 1, skip_empty_tcp: true, kernel_accounting: false });
        assert_eq!(g.max_sample, MAX_SAMPLE);
    }

    /// Shedding goes one notch per period while over and comes back, in
    /// the reverse order, only after a calm spell (hysteresis).
    #[test]
    fn sheds_in_order_and_takes_back_after_calm() {
        let share = 0.1;
        let mut g = Governor::new(share, true, 0, 0);
        let (mut wall, mut cpu) = (0i64, 0i64);
        let mut period = |g: &mut Governor, load: f64| {
            wall += CONTROL_NS;
            cpu += (CONTROL_NS as f64 * share * load) as i64;
            g.control(wall, cpu, found(wall as u64))
        };
        assert_eq!(period(&mut g, 0.7), None, "between LOW and HIGH: nothing moves");
        let c = period(&mut g, 0.95).unwrap();
        assert_eq!((c.from, c.to), (Shed::NONE, Shed { sample: 2, thin: 1, skip_empty_tcp: false, kernel_accounting: false }));
        for _ in 0..5 {
            period(&mut g, 0.95);
        }
        assert_eq!(g.shed(), Shed { sample: MAX_SAMPLE, thin: 1, skip_empty_tcp: false, kernel_accounting: false });
        period(&mut g, 0.95);
        assert!(g.shed().skip_empty_tcp);
        // Calm: nothing for CALM_PERIODS - 1 periods, then step 2 goes first.
        for _ in 0..CALM_PERIODS - 1 {
            assert_eq!(period(&mut g, 0.2), None);
        }
        assert_eq!(period(&mut g, 0.2).unwrap().to, Shed { sample: MAX_SAMPLE, thin: 1, skip_empty_tcp: false, kernel_accounting: false });
        // A busy period in between restarts the wait.
        for _ in 0..CALM_PERIODS - 1 {
            period(&mut g, 0.2);
        }
        period(&mut g, 0.7);
        for _ in 0..CALM_PERIODS - 1 {
            assert_eq!(period(&mut g, 0.2), None);
        }
        assert_eq!(period(&mut g, 0.2).unwrap().to.sample, MAX_SAMPLE / 2);
        assert!(g.sampling_ns > 0 && g.skip_empty_ns > 0);
    }

    #[test]
    fn without_step_two_sampling_is_the_last_before_drops() {
        let mut g = Governor::new(0.1, false, 0, 0);
        let (mut wall, mut cpu) = (0, 0);
        for _ in 0..20 {
            wall += CONTROL_NS;
            cpu += CONTROL_NS;
            g.control(wall, cpu, found(wall as u64));
        }
        assert_eq!(g.shed(), Shed { sample: MAX_SAMPLE, thin: 1, skip_empty_tcp: false, kernel_accounting: false });
    }

    /// Over budget with no new connection coming (a few long ones):
    /// sampling would save nothing, so step 2 comes first.
    #[test]
    fn without_new_connections_sampling_is_skipped() {
        let mut g = Governor::new(0.1, true, 0, 0);
        let (mut wall, mut cpu) = (0, 0);
        // Five connections found in the first period, none after.
        for _ in 0..3 {
            wall += CONTROL_NS;
            cpu += CONTROL_NS;
            g.control(wall, cpu, found(5));
        }
        assert_eq!(g.shed(), Shed { sample: 2, thin: 1, skip_empty_tcp: true, kernel_accounting: false });
        // Connections come again: sampling goes on.
        wall += CONTROL_NS;
        cpu += CONTROL_NS;
        g.control(wall, cpu, found(9));
        assert_eq!(g.shed(), Shed { sample: 4, thin: 1, skip_empty_tcp: true, kernel_accounting: false });
    }

    /// Over budget with a few busy connections found before the first
    /// period (sysbench's four): step 1 would save nothing, so step 1b
    /// thins the parsed ones while they still make transactions, one
    /// doubling of K per [`THIN_SETTLE_PERIODS`]; once none is left above
    /// the floor, step 2; back in the reverse order after calm spells.
    #[test]
    fn busy_established_connections_are_thinned_before_step_two() {
        let mut g = Governor::new(0.1, true, 0, 0);
        let (mut wall, mut cpu) = (0, 0);
        let mut tx = 0;
        let mut period = |g: &mut Governor, load: f64, stoppable: u64, more_tx: u64| {
            wall += CONTROL_NS;
            cpu += (CONTROL_NS as f64 * 0.1 * load) as i64;
            tx += more_tx;
            g.control(wall, cpu, Work { found: 4, parsing: stoppable + 1, transactions: tx, stoppable, tcp_open: 0 })
        };
        // The first period sees the four connections come: sampling.
        assert_eq!(period(&mut g, 2.0, 3, 100).unwrap().to, Shed { sample: 2, thin: 1, skip_empty_tcp: false, kernel_accounting: false });
        let c = period(&mut g, 2.0, 3, 100).unwrap();
        assert_eq!(c.to, Shed { sample: 2, thin: 2, skip_empty_tcp: false, kernel_accounting: false }, "no new connection: thinning");
        // Still over while what the draws saved is measured: nothing moves.
        for _ in 1..THIN_SETTLE_PERIODS {
            assert_eq!(period(&mut g, 2.0, 2, 50), None);
        }
        assert_eq!(period(&mut g, 2.0, 2, 50).unwrap().to.thin, 4);
        // Down to the floor and still over: the wait, then step 2 (K
        // stays: nothing is left for it to stop).
        for _ in 1..THIN_SETTLE_PERIODS {
            assert_eq!(period(&mut g, 2.0, 0, 50), None);
        }
        assert_eq!(period(&mut g, 2.0, 0, 50).unwrap().to, Shed { sample: 2, thin: 4, skip_empty_tcp: true, kernel_accounting: false });
        assert_eq!(period(&mut g, 2.0, 0, 50), None, "nothing left but the backstop");
        // Parsed connections above the floor that make no transactions
        // (idle): thinning them would save nothing.
        let mut idle = Governor::new(0.1, true, 0, 0);
        idle.control(CONTROL_NS, CONTROL_NS, Work { found: 4, parsing: 4, transactions: 0, stoppable: 3, tcp_open: 0 });
        idle.control(2 * CONTROL_NS, 2 * CONTROL_NS, Work { found: 4, parsing: 4, transactions: 0, stoppable: 3, tcp_open: 0 });
        assert_eq!(idle.shed(), Shed { sample: 2, thin: 1, skip_empty_tcp: true, kernel_accounting: false });
        assert_eq!(g.max_thin, 4);
        for _ in 0..CALM_PERIODS {
            period(&mut g, 0.2, 0, 1);
        }
        assert_eq!(g.shed(), Shed { sample: 2, thin: 4, skip_empty_tcp: false, kernel_accounting: false }, "step 2 back first");
        for _ in 0..CALM_PERIODS {
            period(&mut g, 0.2, 0, 1);
        }
        assert_eq!(g.shed().thin, 2, "then 1b, halving");
        for _ in 0..3 * CALM_PERIODS {
            period(&mut g, 0.2, 0, 1);
        }
        assert_eq!(g.shed(), Shed::NONE, "then step 1");
        assert!(g.thinning_ns >= 10 * CONTROL_NS as u64, "{}", g.thinning_ns);
    }

    /// Step 1b's pace on a simulated worker whose cost follows the parsed
    /// connections: eight busy connections of one protocol and one of
    /// another, each parsed one costing 0.4% of a core on top of 0.4% for
    /// the packets, against a budget of 2% (3.6% wanted). Each doubling of
    /// K draws every parsed connection at its next packet (the tracker's
    /// rule, with its floor of one per protocol); the governor waits to see
    /// what the draws saved before the next. The budget is then held by
    /// shedding alone (no pause in the last 20 s), with more than the floor
    /// still parsed, and K moved at most once per settle time.
    #[test]
    fn paced_thinning_holds_the_budget_and_keeps_the_floor() {
        const FLOOR: u32 = 1; // wirelog_track::THIN_FLOOR
        let share = 0.02;
        let (base, per_conn) = (0.004, 0.004);
        let mut g = Governor::new(share, false, 0, 0);
        // Parsed connections per protocol, and the K they were drawn at.
        let mut parsed = [8u32, 1];
        let mut drawn_k = 1u32;
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let (mut wall, mut cpu, mut tx) = (0i64, 0i64, 0u64);
        let mut samples = vec![(0i64, 0i64, 0u64)];
        let mut k_changes = vec![];
        while wall < 40_000 * MS {
            // The draws of a doubled K, at each connection's next packet.
            let k = g.shed().thin;
            if k > drawn_k {
                let ratio = (k / drawn_k) as u64;
                for p in parsed.iter_mut() {
                    for _ in 0..*p {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        if *p > FLOOR && !rng.is_multiple_of(ratio) {
                            *p -= 1;
                        }
                    }
                }
                drawn_k = k;
                k_changes.push(wall);
            }
            let n = (parsed[0] + parsed[1]) as f64;
            wall += MS;
            cpu += (MS as f64 * (base + per_conn * n)) as i64;
            tx += parsed[0] as u64 + parsed[1] as u64;
            let pause = g.charge(wall, cpu);
            if pause > 0 {
                wall += pause;
                g.paused(pause);
                g.charge(wall, cpu);
            }
            let stoppable = parsed.iter().map(|p| p.saturating_sub(FLOOR) as u64).sum();
            let work = Work { found: 9, parsing: n as u64, transactions: tx, stoppable, tcp_open: 0 };
            g.control(wall, cpu, work);
            samples.push((wall, cpu, g.paused_ns));
            assert!(parsed.iter().all(|p| *p >= FLOOR), "{parsed:?}");
        }
        // The bucket's bound over every 10 s window.
        for (i, &(w0, c0, _)) in samples.iter().enumerate().step_by(50) {
            let Some(&(w1, c1, _)) = samples[i..].iter().find(|(w, _, _)| *w >= w0 + 10_000 * MS) else { break };
            let limit = share * ((w1 - w0) + BURST_NS) as f64 + 2.0 * MS as f64;
            assert!((c1 - c0) as f64 <= limit, "window at {w0}: {} > {limit}", c1 - c0);
        }
        // Held by shedding alone at the end: no pause in the last 20 s,
        // and within the share.
        let &(w1, c1, p1) = samples.last().unwrap();
        let &(w0, c0, p0) = samples.iter().find(|(w, _, _)| *w >= w1 - 20_000 * MS).unwrap();
        assert_eq!(p1, p0, "paused in the last 20 s: {parsed:?}, K {}", g.shed().thin);
        assert!(((c1 - c0) as f64) / ((w1 - w0) as f64) <= share * HIGH, "{parsed:?}");
        // More than the floor kept (the estimate rests on several), both
        // protocols still parsed, and K never moved twice within the
        // settle time.
        assert!(parsed[0] > FLOOR && parsed[1] == 1, "{parsed:?}");
        assert!(!g.shed().skip_empty_tcp);
        for w in k_changes.windows(2) {
            assert!(w[1] - w[0] >= THIN_SETTLE_PERIODS as i64 * CONTROL_NS, "{k_changes:?}");
        }
        assert!(k_changes.len() >= 2, "{k_changes:?}");
    }

    /// The worker's loop on an idle machine, where a sleep ends on time:
    /// each wake costs CPU, and while the worker pauses a block waits in
    /// its ring, so its poll does not wait and the loop comes straight back
    /// to the pause. Under load at twice the share, steps 2 and 3 come and
    /// the pauses end (the worker reads again); in the quiet after it the
    /// worker wakes once a second (its tick), its periods are calm and step
    /// 3 is taken back within seconds. Before [`RESUME_NS`] the worker woke
    /// at an empty bucket, the wake put it in debt again and it paused for
    /// good: its whole share spent on pausing, no calm period, step 3 on to
    /// the end (the step-3 live test, 2026-11-30). Shares from the smallest
    /// (a quarter of 0.1% of a core) up, wakes of 5-80 µs.
    #[test]
    fn a_pause_ends_though_waking_costs_cpu() {
        let open = Work { tcp_open: 4, ..Work::default() };
        for share in [0.00025, 0.002, 0.03] {
            for wake_us in [5i64, 20, 80] {
                let wake = wake_us * 1000;
                let mut g = Governor::new(share, true, 0, 0);
                g.allow_kernel_accounting();
                let (mut wall, mut cpu, mut pause) = (0i64, 0i64, 0i64);
                let (mut reads_under_load, mut step3_on, mut off_at) = (0u64, false, None);
                let quiet_from = 5_000 * MS;
                while wall < 15_000 * MS {
                    let loaded = wall < quiet_from;
                    if pause > 0 {
                        wall += pause;
                        g.paused(pause);
                        cpu += wake;
                        pause = g.charge(wall, cpu);
                    } else if loaded {
                        // A block of 1 ms of wire at twice the share.
                        wall += MS;
                        cpu += (2.0 * share * MS as f64) as i64 + wake;
                        reads_under_load += 1;
                        pause = g.charge(wall, cpu);
                    } else {
                        wall += 1_000 * MS;
                        cpu += wake;
                        pause = g.charge(wall, cpu);
                    }
                    g.control(wall, cpu, open);
                    step3_on |= g.shed().kernel_accounting;
                    if !loaded && off_at.is_none() && !g.shed().kernel_accounting {
                        off_at = Some(wall);
                    }
                }
                let case = format!("share {share}, wake {wake_us} µs");
                assert!(step3_on, "{case}: step 3 never on");
                // Read on between pauses, not stuck in the first one: at
                // least half the blocks the share pays for, a block and a
                // wake from a pause each.
                let block = 2.0 * share * MS as f64 + wake as f64;
                let paid = (share * quiet_from as f64 / (block + wake as f64)) as u64;
                assert!(reads_under_load >= paid / 2, "{case}: {reads_under_load} blocks read under load, the share pays for {paid}");
                let off = off_at.unwrap_or_else(|| panic!("{case}: step 3 still on after 10 s of quiet ({} pauses)", g.pauses));
                assert!(off - quiet_from <= 5_000 * MS, "{case}: step 3 taken back {} ms into the quiet", (off - quiet_from) / MS);
                assert_eq!(g.shed(), Shed::NONE, "{case}: every step taken back");
            }
        }
    }

    /// Step 3 comes after step 2, one period later, while TCP connections
    /// are open, and goes back first after a calm spell (the same
    /// hysteresis); on and off again as the load comes and goes.
    #[test]
    fn kernel_accounting_is_step_three_and_goes_back_first() {
        let share = 0.1;
        let mut g = Governor::new(share, true, 0, 0);
        g.allow_kernel_accounting();
        let (mut wall, mut cpu) = (0i64, 0i64);
        // A few long connections, none parsed (`--no-parse`): step 1 and 1b
        // would save nothing.
        let mut period = |g: &mut Governor, load: f64, tcp_open: u64| {
            wall += CONTROL_NS;
            cpu += (CONTROL_NS as f64 * share * load) as i64;
            g.control(wall, cpu, Work { found: 0, parsing: 0, transactions: 0, stoppable: 0, tcp_open })
        };
        let step2 = Shed { skip_empty_tcp: true, ..Shed::NONE };
        let step3 = Shed { kernel_accounting: true, ..step2 };
        assert_eq!(period(&mut g, 2.0, 3).unwrap().to, step2);
        assert_eq!(period(&mut g, 2.0, 3).unwrap().to, step3);
        assert_eq!(period(&mut g, 2.0, 3), None, "nothing left but the backstop");
        // Calm: step 3 goes back first, after CALM_PERIODS.
        for _ in 0..CALM_PERIODS - 1 {
            assert_eq!(period(&mut g, 0.2, 3), None);
        }
        assert_eq!(period(&mut g, 0.2, 3).unwrap(), Change { from: step3, to: step2 });
        // Over again: back on at once (step 2 still is).
        assert_eq!(period(&mut g, 2.0, 3).unwrap().to, step3);
        for _ in 0..2 * CALM_PERIODS {
            period(&mut g, 0.2, 3);
        }
        assert_eq!(g.shed(), Shed::NONE, "step 3, then step 2");
        // On for the busy period and the calm spell, then for the second spell.
        assert_eq!(g.kernel_ns, (1 + 2 * CALM_PERIODS as u64) * CONTROL_NS as u64);
        // No TCP connection open: the kernel would count nothing.
        let mut none = Governor::new(share, true, 0, 0);
        none.allow_kernel_accounting();
        for i in 1..10 {
            none.control(i * CONTROL_NS, i * CONTROL_NS, Work::default());
        }
        assert_eq!(none.shed(), step2);
        // Without step 2 (refused), step 3 comes right after step 1b.
        let mut no2 = Governor::new(share, false, 0, 0);
        no2.allow_kernel_accounting();
        no2.control(CONTROL_NS, CONTROL_NS, Work { tcp_open: 1, ..Work::default() });
        assert_eq!(no2.shed(), Shed { kernel_accounting: true, ..Shed::NONE });
        // Not loaded (the default): never.
        let mut no3 = Governor::new(share, true, 0, 0);
        for i in 1..10 {
            no3.control(i * CONTROL_NS, i * CONTROL_NS, Work { tcp_open: 1, ..Work::default() });
        }
        assert_eq!(no3.shed(), step2);
        // Refused on the way: off, and never again.
        no2.forbid_kernel_accounting();
        no2.control(2 * CONTROL_NS, 2 * CONTROL_NS, Work { tcp_open: 1, ..Work::default() });
        assert_eq!(no2.shed(), Shed::NONE);
    }

    #[test]
    fn shares_leave_room_for_the_other_threads() {
        let b = CpuBudget::parse("10%").unwrap();
        assert!((worker_share(b, 2, 0.02) - 0.04).abs() < 1e-9);
        assert!((worker_share(b, 1, 0.0) - 0.1).abs() < 1e-9);
        // The output thread alone over budget: a quarter of an even split.
        assert!((worker_share(b, 2, 0.5) - 0.0125).abs() < 1e-9);
    }

    #[test]
    fn clocks_move() {
        let (t0, p0) = (thread_cpu_ns(), process_cpu_ns());
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_ns() > t0 && process_cpu_ns() > p0 && mono_ns() > 0);
    }
}
