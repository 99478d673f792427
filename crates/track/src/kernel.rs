//! `capture --kernel-accounting`: the tracker delegates connections to an
//! eBPF socket filter on the capture sockets, which counts their in-order
//! segments in a map instead of passing them through the ring.
//!
//! The kernel never decides alone. The tracker writes a connection's entry
//! only in a state where further in-order ACK/PSH|ACK segments change
//! nothing in any record but counters (see `TcpConn::kernel_view`): both
//! sides established and open, the history already holding the letter such
//! a segment would add, no parser on the connection, no data above a hole.
//! The program (`program`) counts exactly those and passes everything else;
//! passing a delegated connection's packet suspends its entry, so the
//! tracker merges the counts before it processes the first packet it is
//! given, then writes the entry again if the state still allows it.
//!
//! The counts are merged (`tracker::kernel`) before a passed packet of the
//! connection, before its inactivity timer decides, before the flow bucket
//! ends, and when it is removed. Counters only grow in the kernel (atomic
//! adds); a merge of a live entry takes the difference with what was merged
//! before instead of resetting it, so nothing added while user space reads
//! is lost. An entry is deleted only when suspended (the program no longer
//! adds to it) or when its connection is removed.
//!
//! Times: a socket filter cannot read the packet's timestamp (`tstamp` is
//! not readable by `BPF_PROG_TYPE_SOCKET_FILTER`, see
//! `sk_filter_is_valid_access`), so the program notes `bpf_ktime_get_ns()`
//! (CLOCK_MONOTONIC) of the last counted packet, and the tracker converts it
//! with the realtime-monotonic offset. The ring's timestamp is taken
//! (CLOCK_REALTIME) just after the filter runs, so a converted time is early
//! by that gap (sub-microsecond). It only reaches a record when a
//! connection's last packet overall, or its flow's last packet in a bucket,
//! was counted in the kernel: a connection closed by FIN or RST has its last
//! packets passed (the FIN suspends the entry); a flow bucket's last
//! `guard` before its end is passed whole. So the difference is limited to
//! conn `duration` and flow `last` of connections that went quiet with
//! their last segment counted (inactivity timeout, end of the capture, or
//! quiet through the whole guard before a bucket end).

mod program;

use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use wirelog_ebpf::{Error, Map, Program};

use crate::key::ConnKey;
use crate::tcp::KernelView;
pub(crate) use program::{ALLOW_ACK, ALLOW_DATA, KEY_LEN};
use program::{
    ACK_NO, ALLOW, BLOCK, COUNTED_ACK, COUNTED_SEQ, CTL_ALLOW, CTL_GEN, CTL_GO_AT, CTL_LEN, CTL_UNTIL, DATA_NO, FIRST_ACK, FIRST_DIR, FIRST_SEQ, GEN, IP_BYTES, IRREG, LAST_ACK, LAST_KTIME, NEXT_SEQ,
    PASSED, PKTS, RESUMED_AT, STATE, UNTIL, VALUE_LEN,
};

/// Connections the map holds at most (per capture, all workers).
pub const DEFAULT_MAX_CONNECTIONS: u32 = 65_536;

/// Before a flow bucket ends, the kernel passes every packet for this long,
/// so that a busy connection's last packet in the bucket is seen (and its
/// time exact), and no count can land in the wrong bucket.
const BUCKET_GUARD_NS: i64 = 1_000_000_000;

/// The loaded program(s) and their map, shared by every worker's tracker.
pub struct KernelAccounting {
    map: Map,
    /// The tracker's word that a suspended entry may count again.
    control: Map,
    /// One program per link-header length (Ethernet 14, cooked 0).
    progs: Vec<(i32, Program)>,
    /// CLOCK_REALTIME - CLOCK_MONOTONIC when loaded, in ns.
    real_minus_mono: i64,
    counted_pkts: AtomicU64,
    counted_bytes: AtomicU64,
    /// Connections not delegated because the map was full.
    map_full: AtomicU64,
    /// `bpf()` map calls made by the trackers (reads, writes, deletes).
    map_calls: AtomicU64,
    /// Delegated connections taken back because kernel accounting went
    /// off (`--cpu-budget` step 3).
    taken_back: AtomicU64,
    /// Entries written, and of those the ones written from a packet
    /// stamped more than [`BEHIND_NS`] before (the tracker that far behind
    /// the wire: the connection's packets since are on their way through
    /// the ring, and the first the kernel sees does not follow the state
    /// written); suspended entries the kernel was told to resume.
    written: AtomicU64,
    written_behind: AtomicU64,
    resumed: AtomicU64,
    /// Resumptions the kernel refused (see `Delegated::go_floor`).
    not_taken: AtomicU64,
}

/// How far behind the wire (packet time against the clock) a tracker is
/// said to be when it writes an entry (see `KernelAccounting::written`).
pub const BEHIND_NS: i64 = 1_000_000_000;

impl KernelAccounting {
    /// Loads the map and a program for each of `l3_offsets` (bytes before
    /// the IP header in what the socket receives), passing `snaplen` bytes.
    pub fn load(max_connections: u32, l3_offsets: &[i32], snaplen: u32) -> Result<Arc<KernelAccounting>, Error> {
        let map = program::create_map(max_connections)?;
        let control = program::create_control_map(max_connections)?;
        let mut progs = Vec::new();
        for &l3 in l3_offsets {
            if !progs.iter().any(|(o, _)| *o == l3) {
                progs.push((l3, program::load(&map, &control, l3, snaplen)?));
            }
        }
        Ok(Arc::new(KernelAccounting {
            map,
            control,
            progs,
            real_minus_mono: clock_offset(),
            counted_pkts: AtomicU64::new(0),
            counted_bytes: AtomicU64::new(0),
            map_full: AtomicU64::new(0),
            map_calls: AtomicU64::new(0),
            taken_back: AtomicU64::new(0),
            written: AtomicU64::new(0),
            written_behind: AtomicU64::new(0),
            resumed: AtomicU64::new(0),
            not_taken: AtomicU64::new(0),
        }))
    }

    /// The descriptor of the program for sockets whose packets start
    /// `l3_offset` bytes before the IP header.
    pub fn program_fd(&self, l3_offset: i32) -> Option<RawFd> {
        self.progs.iter().find(|(o, _)| *o == l3_offset).map(|(_, p)| p.fd())
    }

    /// Attaches the program for `l3_offset` to a socket (replacing its
    /// classic filter).
    pub fn attach(&self, socket: RawFd, l3_offset: i32) -> io::Result<()> {
        let p = self.progs.iter().find(|(o, _)| *o == l3_offset).map(|(_, p)| p);
        let p = p.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("no program loaded for link offset {l3_offset}")))?;
        wirelog_ebpf::attach_socket_filter(socket, p)
    }

    /// The program for `l3_offset` without its first instruction (which
    /// moves the socket buffer to `r6`): the last stage of a capture
    /// socket's program (`capture::sockprog`), which runs it with the
    /// buffer in `r6`. It passes what it does not count with `snaplen`.
    pub fn tail(&self, l3_offset: i32, snaplen: u32) -> Result<Vec<wirelog_ebpf::Insn>, Error> {
        let insns = program::program(&self.map, &self.control, l3_offset, snaplen)
            .map_err(|e| Error { what: e.to_string(), os: io::Error::from(io::ErrorKind::InvalidInput), log: String::new() })?;
        debug_assert_eq!(insns[0], wirelog_ebpf::Insn::mov64_reg(wirelog_ebpf::Reg::R6, wirelog_ebpf::Reg::R1));
        Ok(insns[1..].to_vec())
    }

    /// Packets and IP bytes counted in the kernel and merged so far.
    pub fn counted(&self) -> (u64, u64) {
        (self.counted_pkts.load(Relaxed), self.counted_bytes.load(Relaxed))
    }

    /// Connections that stayed in user space because the map was full.
    pub fn map_full(&self) -> u64 {
        self.map_full.load(Relaxed)
    }

    /// `bpf()` map calls the trackers made so far (each one a syscall).
    pub fn map_calls(&self) -> u64 {
        self.map_calls.load(Relaxed)
    }

    /// Delegated connections taken back because kernel accounting went off.
    pub fn taken_back(&self) -> u64 {
        self.taken_back.load(Relaxed)
    }

    /// Entries written; of those, written from a packet more than
    /// [`BEHIND_NS`] old; resumptions asked for.
    pub fn written(&self) -> (u64, u64, u64) {
        (self.written.load(Relaxed), self.written_behind.load(Relaxed), self.resumed.load(Relaxed))
    }

    /// Resumptions asked for that the kernel refused (a packet after the
    /// one named came first that it may not count from): withdrawn, and
    /// asked again from a later packet.
    pub fn not_taken(&self) -> u64 {
        self.not_taken.load(Relaxed)
    }

    pub(crate) fn count_not_taken(&self) {
        self.not_taken.fetch_add(1, Relaxed);
    }

    fn syscall(&self) {
        self.map_calls.fetch_add(1, Relaxed);
    }

    fn to_ktime(&self, real_ns: i64) -> i64 {
        real_ns - self.real_minus_mono
    }

    fn to_real(&self, ktime: u64) -> i64 {
        ktime as i64 + self.real_minus_mono
    }
}

fn now_real_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// CLOCK_REALTIME - CLOCK_MONOTONIC, from the closest of a few paired reads.
fn clock_offset() -> i64 {
    let now = |c| {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: clock_gettime writes the timespec it is given.
        unsafe { libc::clock_gettime(c, &mut ts) };
        ts.tv_sec * 1_000_000_000 + ts.tv_nsec
    };
    let mut best = (i64::MAX, 0);
    for _ in 0..5 {
        let m0 = now(libc::CLOCK_MONOTONIC);
        let r = now(libc::CLOCK_REALTIME);
        let m1 = now(libc::CLOCK_MONOTONIC);
        if m1 - m0 < best.0 {
            best = (m1 - m0, r - (m0 + (m1 - m0) / 2));
        }
    }
    best.1
}

/// The map key of an IPv4 connection and which of its blocks holds the
/// originator's packets; `None` for IPv6 (not delegated).
pub(crate) fn map_key(key: &ConnKey) -> Option<([u8; KEY_LEN], usize)> {
    if !key.src.is_v4() || !key.dst.is_v4() {
        return None;
    }
    // The program loads addresses and ports little-endian from the wire
    // bytes and orders the endpoints by those values.
    let end = |a: &[u8; 16], port: u16| {
        (u32::from_le_bytes([a[12], a[13], a[14], a[15]]), u16::from_le_bytes(port.to_be_bytes()))
    };
    let (o, r) = (end(&key.src.0, key.sport), end(&key.dst.0, key.dport));
    if o == r {
        return None;
    }
    let (lo, hi, orig_block) = if o < r { (o, r, 0) } else { (r, o, 1) };
    let mut k = [0u8; KEY_LEN];
    k[0..4].copy_from_slice(&lo.0.to_le_bytes());
    k[4..8].copy_from_slice(&hi.0.to_le_bytes());
    k[8..10].copy_from_slice(&lo.1.to_le_bytes());
    k[10..12].copy_from_slice(&hi.1.to_le_bytes());
    Some((k, orig_block))
}

/// A delegated connection, as the tracker remembers it.
pub(crate) struct Delegated {
    pub key: [u8; KEY_LEN],
    /// The block (0 or 1) of the originator's packets.
    pub orig_block: usize,
    /// The capture interface, for a flow counted after its slot went stale.
    pub iface: u32,
    /// Packets and bytes per block merged so far.
    pub merged: [[u64; 2]; 2],
    /// The kernel suspended the entry (it passes the connection's packets).
    pub suspended: bool,
    /// Packets of the connection the tracker has been given that were
    /// stamped after the entry was written: numbered as the kernel's `PASSED`.
    pub seen: u32,
    /// Per side (0 the originator): the tracker's next sequence number and
    /// last acknowledgement equal the kernel's chain (what the side's last
    /// packet stamped after the entry was written left, or what the entry
    /// was written with).
    pub chain_ok: [bool; 2],
    /// The control map was told `GO_AT` = this; what the kernel did with it
    /// is not known yet.
    pub go_at: Option<u32>,
    /// With `go_at`: the kernel's `PASSED` read just before the control
    /// value was written, and the `ALLOW` it says (per map block). The
    /// kernel resumes, if at all, after a packet numbered `go_floor` or
    /// later (`RESUMED_AT` is its `PASSED` then, which only grows), so the
    /// tracker has nothing to learn before it is given packet
    /// `go_floor + 1`: the entry is read only from there (see
    /// `Tracker::kernel_learn_resume`).
    pub go_floor: u32,
    pub go_allow: [u32; 2],
    /// The kernel resumed counting after passing packet number `R`: counts
    /// are merged only once the tracker has processed it.
    pub resumed_at: Option<u32>,
    /// The control map holds a value for the connection.
    pub controlled: bool,
    /// The entry's generation (the control value names it).
    pub gen: u32,
    /// The first packet the kernel passed, as last read: its map block,
    /// sequence number and acknowledgement.
    pub first: [u32; 3],
    /// Suspended and given packets since the last look at the kernel's
    /// `PASSED`: queued in [`Delegations::recheck`].
    pub queued: bool,
    /// Time of the last packet the tracker was given of the connection.
    pub last_ts: i64,
    /// CLOCK_REALTIME just before the entry was written: ring packets
    /// stamped earlier went through the filter before it existed.
    pub armed_at_ns: i64,
    /// Kernel accounting was switched off since the entry was written
    /// (`--cpu-budget` step 3): the connection is taken back at the first
    /// safe moment and not handed to the kernel again under this entry.
    pub draining: bool,
}

/// What one read of an entry adds, per side (index 0 the originator).
pub(crate) struct Counted {
    pub pkts: [u64; 2],
    pub bytes: [u64; 2],
    /// Converted time of the side's last counted packet (0: none counted).
    pub last_ns: [i64; 2],
    pub next_seq: [u32; 2],
    pub last_ack: [u32; 2],
    pub suspended: bool,
    /// Packets the kernel passed since the entry was written.
    pub passed: u32,
}

/// The kernel's numbering of a suspended entry, read without merging.
pub(crate) struct Numbering {
    pub suspended: bool,
    pub passed: u32,
    pub irregular: u32,
    pub resumed_at: u32,
    /// Per map block: the number of the last regular data packet and of
    /// the last regular pure ACK passed while suspended.
    pub data_no: [u32; 2],
    pub ack_no: [u32; 2],
}

impl Numbering {
    /// Whether the kernel refused, for good, a resumption told `GO_AT =
    /// go_at` with `allow` (per map block), and has not taken it: the
    /// program's conditions (`program`) fail and can never hold again for
    /// this control value, since `IRREG`, `DATA_NO` and `ACK_NO` only grow
    /// while the entry is suspended. So the control value may be written
    /// anew without the kernel having resumed in between.
    pub fn refused(&self, go_at: u32, allow: [u32; 2]) -> bool {
        if self.resumed_at >= go_at {
            return false;
        }
        self.irregular > go_at
            || (0..2).any(|b| (self.data_no[b] > go_at && allow[b] & ALLOW_DATA == 0) || (self.ack_no[b] > go_at && allow[b] & ALLOW_ACK == 0))
    }
}

/// What the tracker writes for a connection it delegates.
pub(crate) struct Plan {
    pub key: [u8; KEY_LEN],
    /// The block (0 or 1) of the originator's packets.
    pub orig_block: usize,
    pub view: KernelView,
    /// Per side (0 the originator): [`ALLOW_DATA`], [`ALLOW_ACK`] as the history allows.
    pub allow: [u32; 2],
    /// Packet time from which the kernel passes everything.
    pub until_real_ns: i64,
    /// Time of the packet after which the plan was made.
    pub at_ns: i64,
}

/// One tracker's delegated connections (by table slot).
pub(crate) struct Delegations {
    pub shared: Arc<KernelAccounting>,
    pub conns: HashMap<u32, Delegated>,
    /// Suspended connections given packets since their entry was last
    /// read: whether the tracker caught up with the kernel is checked once
    /// per ring block for these, not once per packet (a `bpf()` call each).
    pub recheck: Vec<u32>,
    /// Reused for the slots merged at a flow bucket's end.
    pub scratch: Vec<u32>,
    /// Connections are delegated (`--kernel-accounting`, or `--cpu-budget`
    /// step 3 on); off, the socket programs no longer run the accounting
    /// stage and the delegated connections are taken back.
    pub on: bool,
    /// Generation of the next entry written.
    next_gen: u32,
    value: [u8; VALUE_LEN],
}

impl Delegations {
    pub fn new(shared: Arc<KernelAccounting>) -> Delegations {
        Delegations { shared, conns: HashMap::new(), recheck: Vec::new(), scratch: Vec::new(), on: true, next_gen: 1, value: [0; VALUE_LEN] }
    }

    /// Writes the entry of a connection captured on `iface`. Returns false
    /// when the map refused (full).
    pub fn delegate(&mut self, idx: u32, iface: u32, plan: &Plan) -> bool {
        let Plan { key, orig_block, ref view, until_real_ns, .. } = *plan;
        let v = &mut self.value;
        v.fill(0);
        put(v, UNTIL, &(self.shared.to_ktime(until_real_ns).max(0) as u64).to_ne_bytes());
        let allow = block_allow(plan);
        for side in 0..2 {
            let blk = if side == 0 { orig_block } else { 1 - orig_block };
            let b = BLOCK[blk];
            put(v, b + ALLOW, &allow[blk].to_ne_bytes());
            put(v, b + NEXT_SEQ, &view.next_seq[side].to_ne_bytes());
            put(v, b + LAST_ACK, &view.last_ack[side].to_ne_bytes());
            put(v, b + COUNTED_SEQ, &view.next_seq[side].to_ne_bytes());
            put(v, b + COUNTED_ACK, &view.last_ack[side].to_ne_bytes());
        }
        let gen = self.next_gen;
        self.next_gen = self.next_gen.wrapping_add(1).max(1);
        put(v, GEN, &gen.to_ne_bytes());
        let armed_at_ns = now_real_ns();
        self.shared.syscall();
        if self.shared.map.update(&key, v).is_err() {
            self.shared.map_full.fetch_add(1, Relaxed);
            return false;
        }
        self.shared.written.fetch_add(1, Relaxed);
        if armed_at_ns - plan.at_ns > BEHIND_NS {
            self.shared.written_behind.fetch_add(1, Relaxed);
        }
        let controlled = self.conns.get(&idx).is_some_and(|d| d.controlled && d.key == key);
        self.conns.insert(
            idx,
            Delegated {
                key,
                orig_block,
                iface,
                merged: [[0; 2]; 2],
                suspended: false,
                seen: 0,
                chain_ok: [true; 2],
                go_at: None,
                go_floor: 0,
                go_allow: [0; 2],
                resumed_at: None,
                controlled,
                gen,
                first: [u32::MAX; 3],
                queued: false,
                last_ts: 0,
                armed_at_ns,
                draining: false,
            },
        );
        true
    }

    /// Reads a delegated connection's entry: what was counted since the
    /// last read. With `release` the entry is deleted and the connection is
    /// no longer delegated.
    pub fn take(&mut self, idx: u32, release: bool) -> Option<Counted> {
        let d = self.conns.get_mut(&idx)?;
        let d_key = d.key;
        self.shared.syscall();
        let found = self.shared.map.lookup(&d.key, &mut self.value).unwrap_or(false);
        if !found {
            if self.conns.remove(&idx).is_some_and(|d| d.controlled) {
                self.shared.syscall();
                let _ = self.shared.control.delete(&d_key);
            }
            return None;
        }
        let v = &self.value;
        d.first = [get32(v, FIRST_DIR), get32(v, FIRST_SEQ), get32(v, FIRST_ACK)];
        let mut c = Counted { pkts: [0; 2], bytes: [0; 2], last_ns: [0; 2], next_seq: [0; 2], last_ack: [0; 2], suspended: get32(v, STATE) != 0, passed: get32(v, PASSED) };
        for side in 0..2 {
            let block = if side == 0 { d.orig_block } else { 1 - d.orig_block };
            let b = BLOCK[block];
            let (pkts, bytes) = (get64(v, b + PKTS), get64(v, b + IP_BYTES));
            c.pkts[side] = pkts - d.merged[block][0];
            c.bytes[side] = bytes - d.merged[block][1];
            d.merged[block] = [pkts, bytes];
            let kt = get64(v, b + LAST_KTIME);
            if c.pkts[side] > 0 && kt > 0 {
                c.last_ns[side] = self.shared.to_real(kt);
            }
            c.next_seq[side] = get32(v, b + COUNTED_SEQ);
            c.last_ack[side] = get32(v, b + COUNTED_ACK);
        }
        let total = c.pkts[0] + c.pkts[1];
        if total > 0 {
            self.shared.counted_pkts.fetch_add(total, Relaxed);
            self.shared.counted_bytes.fetch_add(c.bytes[0] + c.bytes[1], Relaxed);
        }
        if release {
            self.release(idx);
        }
        Some(c)
    }

    /// Reads a suspended entry's numbering (nothing merged).
    pub fn numbering(&mut self, idx: u32) -> Option<Numbering> {
        let d = self.conns.get(&idx)?;
        self.shared.syscall();
        if !self.shared.map.lookup(&d.key, &mut self.value).unwrap_or(false) {
            return None;
        }
        let v = &self.value;
        Some(Numbering {
            suspended: get32(v, STATE) != 0,
            passed: get32(v, PASSED),
            irregular: get32(v, IRREG),
            resumed_at: get32(v, RESUMED_AT),
            data_no: BLOCK.map(|b| get32(v, b + DATA_NO)),
            ack_no: BLOCK.map(|b| get32(v, b + ACK_NO)),
        })
    }

    /// Tells the kernel it may count the suspended connection again from
    /// where it is, if no irregular packet came after packet number
    /// `go_at`, passing everything from `until_real_ns`. `passed`: the
    /// entry's `PASSED` read before this call (`Delegated::go_floor`).
    pub fn resume(&mut self, idx: u32, go_at: u32, plan: &Plan, passed: u32) -> bool {
        let Some(d) = self.conns.get_mut(&idx) else { return false };
        let until_real_ns = plan.until_real_ns;
        let mut v = [0u8; CTL_LEN];
        let allow = block_allow(plan);
        for blk in 0..2 {
            put(&mut v, CTL_ALLOW[blk], &allow[blk].to_ne_bytes());
        }
        put(&mut v, CTL_GO_AT, &go_at.to_ne_bytes());
        put(&mut v, CTL_GEN, &d.gen.to_ne_bytes());
        put(&mut v, CTL_UNTIL, &(self.shared.to_ktime(until_real_ns).max(0) as u64).to_ne_bytes());
        self.shared.syscall();
        if self.shared.control.update(&d.key, &v).is_err() {
            return false;
        }
        self.shared.resumed.fetch_add(1, Relaxed);
        d.controlled = true;
        d.go_at = Some(go_at);
        d.go_floor = passed;
        d.go_allow = allow;
        true
    }

    /// Kernel accounting went off (the socket programs' flag cleared
    /// first): the connection in slot `idx` is marked to be taken back. A
    /// resumption it asked for and the kernel has not made is withdrawn
    /// (the control value deleted, then the entry read: the kernel either
    /// resumed before, and what it counted is merged when the tracker is
    /// past the packet it resumed after, or it never will).
    pub fn drain(&mut self, idx: u32) {
        let Some(d) = self.conns.get_mut(&idx) else { return };
        if !d.draining {
            self.shared.taken_back.fetch_add(1, Relaxed);
        }
        d.draining = true;
        self.cancel_resumption(idx);
    }

    /// The kernel did not take the resumption asked for: the control value
    /// is deleted, then the entry read once more (it resumed in between,
    /// or never will). Returns whether it resumed (`resumed_at` set).
    pub fn withdraw(&mut self, idx: u32) -> bool {
        match self.cancel_resumption(idx) {
            Some(true) => true,
            Some(false) => {
                self.shared.count_not_taken();
                false
            }
            None => false,
        }
    }

    /// Cancels the resumption pending on `idx` (what [`Self::drain`] and
    /// [`Self::withdraw`] share): deletes its control value, then reads
    /// the entry once more and notes where the kernel resumed if it did in
    /// between. `None` when none was pending, else whether it resumed.
    fn cancel_resumption(&mut self, idx: u32) -> Option<bool> {
        let d = self.conns.get_mut(&idx)?;
        let go_at = d.go_at.take()?;
        if d.controlled {
            d.controlled = false;
            self.shared.syscall();
            let _ = self.shared.control.delete(&d.key);
        }
        let resumed_at = self.numbering(idx).map(|n| n.resumed_at).filter(|&r| r >= go_at);
        if let (Some(r), Some(d)) = (resumed_at, self.conns.get_mut(&idx)) {
            d.resumed_at = Some(r);
        }
        Some(resumed_at.is_some())
    }

    /// Forgets a delegated connection and deletes its entry.
    pub fn release(&mut self, idx: u32) {
        if let Some(d) = self.conns.remove(&idx) {
            self.shared.syscall();
            let _ = self.shared.map.delete(&d.key);
            if d.controlled {
                self.shared.syscall();
                let _ = self.shared.control.delete(&d.key);
            }
        }
    }

    /// Time from which the kernel must pass everything, for a bucket ending
    /// at `boundary_ns`; `None` when `now_ns` is already inside the guard.
    pub fn until(boundary_ns: i64, now_ns: i64) -> Option<i64> {
        let until = boundary_ns.saturating_sub(BUCKET_GUARD_NS);
        (now_ns < until).then_some(until)
    }
}

/// The `ALLOW` of each block (index: the map's block) for a plan: data
/// only where the reassembly rules let the kernel count it.
fn block_allow(plan: &Plan) -> [u32; 2] {
    let mut out = [0; 2];
    for side in 0..2 {
        let mut a = plan.allow[side] & ALLOW_ACK;
        if plan.view.data_ok[side] {
            a |= plan.allow[side] & ALLOW_DATA;
        }
        out[if side == 0 { plan.orig_block } else { 1 - plan.orig_block }] = a;
    }
    out
}

fn put(v: &mut [u8], at: usize, b: &[u8]) {
    v[at..at + b.len()].copy_from_slice(b);
}

fn get32(v: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(v[at..at + 4].try_into().expect("4 bytes"))
}

fn get64(v: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(v[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use wirelog_decode::IpAddr16;
    use wirelog_record::ConnRecord;

    const SRC: [u8; 4] = [10, 213, 0, 1];
    const DST: [u8; 4] = [10, 213, 0, 2];
    const SPORT: u16 = 40_001;
    const DPORT: u16 = 5_001;
    const SPORT2: u16 = 40_002;

    /// An Ethernet frame with an IPv4/TCP segment from SRC to DST.
    fn frame(flags: u8, seq: u32, ack: u32, payload: usize) -> Vec<u8> {
        frame_from(SPORT, flags, seq, ack, payload)
    }

    /// The same from source port `sport` (tests running at once each use
    /// their own tuple).
    fn frame_from(sport: u16, flags: u8, seq: u32, ack: u32, payload: usize) -> Vec<u8> {
        frame_between((SRC, sport), (DST, DPORT), flags, seq, ack, payload)
    }

    /// A frame from `src` to `dst` (address, port).
    fn frame_between(src: ([u8; 4], u16), dst: ([u8; 4], u16), flags: u8, seq: u32, ack: u32, payload: usize) -> Vec<u8> {
        frame_carrying(src, dst, flags, seq, ack, &vec![b'x'; payload])
    }

    /// The same carrying `payload` (the tracker's tests build theirs with it too).
    pub(crate) fn frame_carrying(src: ([u8; 4], u16), dst: ([u8; 4], u16), flags: u8, seq: u32, ack: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let total = (40 + payload.len()) as u16;
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&src.0);
        ip[16..20].copy_from_slice(&dst.0);
        let sum: u32 = ip.chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]]) as u32).sum();
        let sum = (sum & 0xffff) + (sum >> 16);
        ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        f.extend_from_slice(&ip);
        let mut tcp = [0u8; 20];
        tcp[0..2].copy_from_slice(&src.1.to_be_bytes());
        tcp[2..4].copy_from_slice(&dst.1.to_be_bytes());
        tcp[4..8].copy_from_slice(&seq.to_be_bytes());
        tcp[8..12].copy_from_slice(&ack.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = flags;
        tcp[14..16].copy_from_slice(&512u16.to_be_bytes());
        f.extend_from_slice(&tcp);
        f.extend_from_slice(payload);
        f
    }

    fn packet_socket(protocol: u16) -> OwnedFd {
        // SAFETY: socket(2); the descriptor is owned below.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, protocol.to_be() as i32) };
        assert!(fd >= 0, "AF_PACKET socket: {}", io::Error::last_os_error());
        // SAFETY: a fresh descriptor.
        unsafe { OwnedFd::from_raw_fd(fd) }
    }

    /// A packet socket on loopback with `k`'s program attached, whose
    /// reads give up after 300 ms.
    fn lo_receiver(k: &KernelAccounting) -> OwnedFd {
        let rx = packet_socket(libc::ETH_P_ALL as u16);
        let addr = lo_addr();
        // SAFETY: bind/setsockopt with properly sized arguments.
        unsafe {
            assert_eq!(libc::bind(rx.as_raw_fd(), (&addr as *const libc::sockaddr_ll).cast(), std::mem::size_of::<libc::sockaddr_ll>() as u32), 0);
            let tv = libc::timeval { tv_sec: 0, tv_usec: 300_000 };
            libc::setsockopt(rx.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVTIMEO, (&tv as *const libc::timeval).cast(), std::mem::size_of::<libc::timeval>() as u32);
        }
        k.attach(rx.as_raw_fd(), 14).unwrap();
        rx
    }

    fn lo_addr() -> libc::sockaddr_ll {
        // SAFETY: sockaddr_ll is plain data.
        let mut a: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        a.sll_family = libc::AF_PACKET as u16;
        a.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        a.sll_ifindex = 1;
        a.sll_halen = 6;
        a
    }

    /// The sequence numbers of our tuple's incoming frames the socket got.
    fn received_seqs(rx: &OwnedFd) -> Vec<u32> {
        received_seqs_from(rx, SPORT)
    }

    fn received_seqs_from(rx: &OwnedFd, sport: u16) -> Vec<u32> {
        let ours = |f: &[u8]| f.len() >= 54 && f[26..30] == SRC && f[34..36] == sport.to_be_bytes();
        received(rx, ours).iter().map(|f| u32::from_be_bytes([f[38], f[39], f[40], f[41]])).collect()
    }

    /// The incoming frames the loopback receiver got, in order, that `ours`
    /// keeps (until its receive timeout: nothing more).
    fn received(rx: &OwnedFd, ours: impl Fn(&[u8]) -> bool) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = [0u8; 2048];
        loop {
            // SAFETY: sockaddr_ll is plain data.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: recvfrom into our buffer and address.
            let n = unsafe {
                libc::recvfrom(rx.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0, (&mut from as *mut libc::sockaddr_ll).cast(), &mut len)
            };
            if n < 0 {
                return out; // the receive timeout: nothing more
            }
            let f = &buf[..n as usize];
            if from.sll_pkttype != libc::PACKET_OUTGOING && ours(f) {
                out.push(f.to_vec());
            }
        }
    }

    /// A loaded program on a loopback receiver (300 ms receive timeout) and
    /// connection 3 delegated, from `sport`, with both sides' chains at
    /// 1000/7000; the plan, to resume with, and a sender onto loopback.
    struct OnLo {
        k: Arc<KernelAccounting>,
        rx: OwnedFd,
        tx: OwnedFd,
        d: Delegations,
        plan: Plan,
    }

    fn delegated_on_lo(sport: u16) -> OnLo {
        let k = KernelAccounting::load(64, &[14], 65_535).unwrap();
        let rx = lo_receiver(&k);
        let mut d = Delegations::new(k.clone());
        let key = ConnKey { src: IpAddr16::from_v4(SRC), dst: IpAddr16::from_v4(DST), sport, dport: DPORT, proto: 6 };
        let (mk, orig_block) = map_key(&key).unwrap();
        let view = KernelView { next_seq: [1000, 7000], last_ack: [7000, 1000], data_ok: [true, true] };
        let plan = Plan { key: mk, orig_block, view, allow: [ALLOW_DATA | ALLOW_ACK; 2], until_real_ns: i64::MAX, at_ns: now_real_ns() };
        assert!(d.delegate(3, 0, &plan));
        OnLo { k, rx, tx: packet_socket(0), d, plan }
    }

    /// Sends frame `f` onto loopback from `tx`.
    fn send_on_lo(tx: &OwnedFd, f: &[u8]) {
        let addr = lo_addr();
        // SAFETY: sendto with our frame and address.
        let n = unsafe { libc::sendto(tx.as_raw_fd(), f.as_ptr().cast(), f.len(), 0, (&addr as *const libc::sockaddr_ll).cast(), std::mem::size_of::<libc::sockaddr_ll>() as u32) };
        assert_eq!(n, f.len() as isize, "{}", io::Error::last_os_error());
    }

    /// The program drops and counts exactly the in-order segments of a
    /// connection the test delegated, passes the rest, and suspends the
    /// entry at the first one it passes.
    #[test]
    fn in_order_segments_of_a_delegated_connection_are_counted_not_passed() {
        if !wirelog_ebpf::tests_can_load() {
            return;
        }
        let OnLo { k, rx, tx, mut d, .. } = delegated_on_lo(SPORT);

        let send = |f: &[u8]| send_on_lo(&tx, f);
        send(&frame(0x18, 1000, 7000, 100)); // in order: counted
        send(&frame(0x10, 1100, 7000, 0)); // a pure ACK in order: counted
        send(&frame(0x18, 1100, 7000, 100)); // in order: counted
        send(&frame(0x18, 1000, 7000, 100)); // a retransmission: passed, suspends
        send(&frame(0x18, 1200, 7000, 100)); // in order, but suspended: passed
        assert_eq!(received_seqs(&rx), [1000, 1200]);

        let c = d.take(3, true).expect("the entry");
        assert!(c.suspended);
        assert_eq!(c.passed, 2);
        assert_eq!(c.pkts, [3, 0]);
        assert_eq!(c.bytes, [140 + 40 + 140, 0]);
        assert_eq!(c.next_seq, [1200, 7000]);
        assert!(c.last_ns[0] > 0);
        assert_eq!(k.counted(), (3, 320));
        // Suspended: the entry is gone, the connection no longer delegated.
        assert!(d.conns.is_empty());
        assert!(d.take(3, false).is_none());
    }

    /// A suspended entry numbers what it passes and follows the chain; told
    /// that the tracker's state equals the chain after packet `GO_AT`, it
    /// counts again from where it is, unless an irregular packet came after
    /// `GO_AT`.
    #[test]
    fn a_suspended_entry_resumes_from_its_chain_when_told() {
        if !wirelog_ebpf::tests_can_load() {
            return;
        }
        let OnLo { rx, tx, mut d, plan, .. } = delegated_on_lo(SPORT2);
        let send = |f: &[u8]| send_on_lo(&tx, f);
        send(&frame_from(SPORT2, 0x18, 1000, 7000, 100)); // counted
        send(&frame_from(SPORT2, 0x18, 1000, 7000, 100)); // retransmission: passed #1, irregular; chain 1100
        send(&frame_from(SPORT2, 0x18, 1100, 7000, 100)); // regular against the chain: passed #2; chain 1200
        assert_eq!(received_seqs_from(&rx, SPORT2), [1000, 1100]);
        let n = d.numbering(3).expect("the entry");
        assert!(n.suspended);
        assert_eq!((n.passed, n.irregular, n.resumed_at), (2, 1, 0));
        // The tracker processed #1 and found its state equal to the chain.
        assert!(d.resume(3, 1, &plan, 2));
        send(&frame_from(SPORT2, 0x18, 1200, 7000, 100)); // resumes after #2, counted
        send(&frame_from(SPORT2, 0x10, 1300, 7000, 0)); // counted
        send(&frame_from(SPORT2, 0x18, 1300, 7000, 100)); // counted
        assert_eq!(received_seqs_from(&rx, SPORT2), Vec::<u32>::new());
        let n = d.numbering(3).unwrap();
        assert!(!n.suspended);
        assert_eq!((n.passed, n.resumed_at), (2, 2));
        let c = d.take(3, false).unwrap();
        assert_eq!(c.pkts, [4, 0]);
        assert_eq!(c.next_seq, [1400, 7000]);

        // Suspended again (#3, a gap); an irregular packet after the
        // packet the tracker names keeps it suspended.
        send(&frame_from(SPORT2, 0x18, 9000, 7000, 100)); // #3: a gap, irregular; chain 9100
        send(&frame_from(SPORT2, 0x18, 9100, 7000, 100)); // #4: regular
        send(&frame_from(SPORT2, 0x18, 5000, 7000, 100)); // #5: irregular
        assert_eq!(received_seqs_from(&rx, SPORT2), [9000, 9100, 5000]);
        assert!(d.resume(3, 4, &plan, 5));
        send(&frame_from(SPORT2, 0x18, 5100, 7000, 100)); // IRREG 5 > GO_AT 4: passed #6
        assert_eq!(received_seqs_from(&rx, SPORT2), [5100]);
        let n = d.numbering(3).unwrap();
        assert!(n.suspended);
        assert_eq!((n.passed, n.irregular, n.resumed_at), (6, 5, 2));
        // Counted: unchanged, and what is merged is the chain at the last
        // counted packet, not where the passed ones moved it.
        let c = d.take(3, true).unwrap();
        assert_eq!(c.pkts, [0, 0]);
        assert_eq!(c.next_seq, [1400, 7000]);
    }

    /// A tracker beside `truth` (a tracker that sees every packet, with
    /// the same configuration), its kernel accounting program on a loopback
    /// receiver (300 ms receive timeout), and a sender onto loopback: the
    /// set-up of the tests that run a tracker against the kernel.
    struct TrackerOnLo {
        k: Arc<KernelAccounting>,
        rx: OwnedFd,
        tx: OwnedFd,
        tracker: crate::Tracker,
        truth: crate::Tracker,
        dec: wirelog_decode::Decoder,
    }

    impl TrackerOnLo {
        fn new(cfg: crate::TrackerConfig) -> TrackerOnLo {
            use wirelog_decode::{ChecksumMode, DecodeConfig, Decoder};
            let k = KernelAccounting::load(64, &[14], 65_535).unwrap();
            let rx = lo_receiver(&k);
            let (mut tracker, truth) = (crate::Tracker::new(cfg.clone()), crate::Tracker::new(cfg));
            tracker.kernel_accounting(k.clone());
            let dec = Decoder::new(DecodeConfig { checksums: ChecksumMode::Ignore, ..DecodeConfig::default() });
            TrackerOnLo { k, rx, tx: packet_socket(0), tracker, truth, dec }
        }

        /// Gives frame `f`, stamped `ts`, to the tracker (`to_tracker`) and
        /// to the truth (`to_truth`).
        fn give(&mut self, ts: i64, f: &[u8], to_tracker: bool, to_truth: bool) {
            use wirelog_decode::{Decoded, LinkType, Packet};
            match self.dec.packet(&Packet::new(LinkType::ETHERNET, ts, f)) {
                Decoded::Ip(ip) => {
                    if to_tracker {
                        self.tracker.packet(ts, 0, &ip);
                    }
                    if to_truth {
                        self.truth.packet(ts, 0, &ip);
                    }
                }
                Decoded::Skipped(r) => panic!("{r:?}"),
            }
        }

        /// Frame `f` given to both, stamped now.
        fn both(&mut self, f: &[u8]) {
            self.give(now_real_ns(), f, true, true);
        }

        /// Frame `f` sent onto loopback (where the program sees it) and
        /// given to the truth.
        fn wire(&mut self, f: &[u8]) {
            send_on_lo(&self.tx, f);
            self.give(now_real_ns(), f, false, true);
        }

        /// Both trackers finished: their conn, flow and transaction records.
        fn records(&mut self) -> [(Vec<ConnRecord>, Vec<wirelog_record::FlowRecord>, Vec<wirelog_record::TxRecord>); 2] {
            [&mut self.tracker, &mut self.truth].map(|t| {
                t.finish();
                let (mut conns, mut flows, mut txs) = (Vec::new(), Vec::new(), Vec::new());
                t.move_records_into(&mut conns, &mut flows, &mut txs);
                (conns, flows, txs)
            })
        }
    }

    /// What the kernel tests compare of a connection's records.
    type ConnFields = (u64, u64, u64, u64, Option<u64>, Option<u64>, wirelog_record::ConnState, String, u64);

    fn conn_fields(r: &ConnRecord) -> ConnFields {
        (r.orig_pkts, r.orig_ip_bytes, r.resp_pkts, r.resp_ip_bytes, r.orig_bytes, r.resp_bytes, r.conn_state, r.history.as_str().to_string(), r.missed_bytes)
    }

    /// Packets and bytes of the flow records, all buckets and sides.
    fn flow_totals(flows: &[wirelog_record::FlowRecord]) -> (u64, u64) {
        flows.iter().fold((0, 0), |(p, b), f| (p + f.pkts_out + f.pkts_in, b + f.bytes_out + f.bytes_in))
    }

    /// The frames of the connection on port `port` (either side) the
    /// loopback receiver got, in order.
    fn received_frames(rx: &OwnedFd, port: u16) -> Vec<Vec<u8>> {
        received(rx, |f| f.len() >= 54 && (f[34..36] == port.to_be_bytes() || f[36..38] == port.to_be_bytes()))
    }

    /// `--cpu-budget` step 3 going off: a connection the kernel was
    /// counting is taken back at its next packet, what the kernel counted
    /// merged before it, so its conn and flow records equal those of a
    /// tracker that saw every packet; with accounting off no connection is
    /// delegated, and on again the same connection is, afresh.
    #[test]
    fn a_connection_taken_back_when_accounting_goes_off_has_whole_records() {
        if !wirelog_ebpf::tests_can_load() {
            return;
        }
        const SPORT3: u16 = 40_003;
        // The flow bucket ends far from now (the kernel passes everything
        // in the last second before a boundary).
        let mut lo = TrackerOnLo::new(crate::TrackerConfig { app: None, flow_interval_ns: 3_600_000_000_000, ..crate::TrackerConfig::default() });
        let (c, s) = ((SRC, SPORT3), (DST, DPORT));
        let to_s = |flags, seq, ack, len| frame_between(c, s, flags, seq, ack, len);
        let to_c = |flags, seq, ack, len| frame_between(s, c, flags, seq, ack, len);
        // Handshake, data both ways, each acknowledged: delegable.
        let opening = [
            to_s(0x02, 999, 0, 0),
            to_c(0x12, 6999, 1000, 0),
            to_s(0x10, 1000, 7000, 0),
            to_s(0x18, 1000, 7000, 100),
            to_c(0x10, 7000, 1100, 0),
            to_c(0x18, 7000, 1100, 50),
            to_s(0x10, 1100, 7050, 0),
        ];
        for f in &opening {
            lo.both(f);
        }
        assert_eq!(lo.tracker.kernel_delegated(), 1, "delegated once established with data both ways");
        // The kernel counts three in-order segments (not passed).
        for seq in [1100, 1200, 1300] {
            lo.wire(&to_s(0x18, seq, 7050, 100));
        }
        assert_eq!(received_seqs_from(&lo.rx, SPORT3), Vec::<u32>::new(), "counted in the kernel");
        // Off (the socket programs' stage would be switched off first):
        // the entry is still counting, so it is kept until the next packet.
        lo.tracker.set_kernel_accounting(false);
        assert!(!lo.tracker.kernel_accounting_on());
        assert_eq!(lo.tracker.kernel_delegated(), 1);
        assert_eq!(lo.k.taken_back(), 1);
        lo.both(&to_c(0x10, 7050, 1400, 0));
        assert_eq!(lo.tracker.kernel_delegated(), 0, "taken back at its next packet");
        assert_eq!(lo.k.counted(), (3, 3 * 140));
        // Off: not delegated again, however delegable.
        lo.both(&to_s(0x18, 1400, 7050, 100));
        assert_eq!(lo.tracker.kernel_delegated(), 0);
        // On again: delegated afresh at the next packet.
        lo.tracker.set_kernel_accounting(true);
        lo.both(&to_c(0x10, 7050, 1500, 0));
        assert_eq!(lo.tracker.kernel_delegated(), 1);
        for f in [to_s(0x11, 1500, 7050, 0), to_c(0x11, 7050, 1501, 0), to_s(0x10, 1501, 7051, 0)] {
            lo.both(&f);
        }
        let out = lo.records().map(|(conns, flows, _)| {
            assert_eq!(conns.len(), 1);
            (conn_fields(&conns[0]), flow_totals(&flows))
        });
        assert_eq!(out[0], out[1], "taken back: the records of a tracker that saw every packet");
        assert_eq!((out[1].0 .0, out[1].0 .2), (10, 6));
    }

    /// Steps 1b and 3 together: two Redis connections parsed; step 1b
    /// stops one (the other is its protocol's floor), which is then
    /// delegated and counted in the kernel while the parsed one never is;
    /// step 3 goes off, the stopped one is taken back at its next packet
    /// and stays unparsed (no transaction from mid-stream). Its conn and
    /// flow records, and every connection's transactions, equal those of
    /// a tracker that saw every packet (and stopped the same connection:
    /// the draw is seeded).
    #[test]
    fn a_connection_step_1b_stopped_is_counted_in_the_kernel_and_stays_unparsed() {
        if !wirelog_ebpf::tests_can_load() {
            return;
        }
        use crate::app::AppConfig;
        const PSH_ACK: u8 = 0x18;
        let cfg = crate::TrackerConfig { app: Some(AppConfig::default()), flow_interval_ns: 3_600_000_000_000, uid_seed: Some(35), ..crate::TrackerConfig::default() };
        let mut lo = TrackerOnLo::new(cfg);
        let server = (DST, 6379);
        let clients = [(SRC, 40_006u16), (SRC, 40_007u16)];
        let (ping, pong) = (b"PING\r\n", b"+PONG\r\n");
        let seqs = |round: u32| (1000 + round * ping.len() as u32, 7000 + round * pong.len() as u32);
        // A round of connection `c`: its PING and the PONG.
        let round = |c: usize, r: u32| {
            let (cs, ss) = seqs(r);
            [
                frame_carrying(clients[c], server, PSH_ACK, cs, ss, ping),
                frame_carrying(server, clients[c], PSH_ACK, ss, cs + ping.len() as u32, pong),
            ]
        };
        for client in clients {
            for f in [frame_carrying(client, server, 0x02, 999, 0, b""), frame_carrying(server, client, 0x12, 6999, 1000, b""), frame_carrying(client, server, 0x10, 1000, 7000, b"")] {
                lo.both(&f);
            }
        }
        for r in 0..3 {
            for c in 0..2 {
                for f in round(c, r) {
                    lo.both(&f);
                }
            }
        }
        assert_eq!(lo.tracker.kernel_delegated(), 0, "parsed connections are never delegated");
        // Step 1b at 1 in 65,536: the first connection is drawn (and
        // stopped) at its next packet, the second is the floor.
        for t in [&mut lo.tracker, &mut lo.truth] {
            t.set_thinning(1 << 16);
        }
        let [ping3, pong3] = round(0, 3);
        lo.both(&ping3);
        assert_eq!(lo.tracker.app_stats().parse_stopped, 1);
        assert_eq!(lo.tracker.kernel_delegated(), 1, "stopped: delegated at once");
        // The kernel counts the stopped connection's next rounds; the
        // parsed one goes on through the tracker.
        let counted: Vec<Vec<u8>> = std::iter::once(pong3).chain((4..6).flat_map(|r| round(0, r))).collect();
        for (i, f) in counted.iter().enumerate() {
            lo.wire(f);
            if i < 3 {
                for g in round(1, 3 + i as u32) {
                    lo.both(&g);
                }
            }
        }
        assert_eq!(received_seqs_from(&lo.rx, clients[0].1), Vec::<u32>::new(), "counted in the kernel");
        assert_eq!(lo.tracker.kernel_delegated(), 1, "the floor is never delegated");
        // Step 3 off: taken back at the next packet, what was counted
        // merged first; the connection stays unparsed.
        lo.tracker.set_kernel_accounting(false);
        for r in 6..8 {
            for f in round(0, r).iter().chain(&round(1, r)) {
                lo.both(f);
            }
        }
        assert_eq!(lo.tracker.kernel_delegated(), 0, "taken back");
        let ip_bytes = (40 + pong.len() as u64) * 3 + (40 + ping.len() as u64) * 2;
        assert_eq!(lo.k.counted(), (5, ip_bytes));
        for client in clients {
            let (cs, ss) = seqs(8);
            for f in [
                frame_carrying(client, server, 0x11, cs, ss, b""),
                frame_carrying(server, client, 0x11, ss, cs + 1, b""),
                frame_carrying(client, server, 0x10, cs + 1, ss + 1, b""),
            ] {
                lo.both(&f);
            }
        }
        let out = lo.records().map(|(mut conns, flows, txs)| {
            conns.sort_by_key(|r| r.orig_p);
            let conns: Vec<_> = conns.iter().map(|r| (r.orig_p, conn_fields(r), r.service, r.uid.as_str().to_string())).collect();
            let mut per_conn = std::collections::BTreeMap::new();
            for x in &txs {
                let e = per_conn.entry((x.orig_p, x.uid.as_str().to_string())).or_insert((0u32, 0u64));
                e.0 += 1;
                e.1 += x.sample_weight as u64;
            }
            (conns, flow_totals(&flows), per_conn)
        });
        assert_eq!(out[0], out[1], "the records of a tracker that saw every packet");
        let (conns, _, per_conn) = &out[1];
        assert_eq!(conns.len(), 2);
        assert!(conns.iter().all(|c| c.2 == Some("redis")), "both named: {conns:?}");
        let n: Vec<u32> = per_conn.values().map(|v| v.0).collect();
        assert_eq!(n[1], 8, "the floor parsed whole: {per_conn:?}");
        assert!((2..=3).contains(&n[0]), "stopped at the draw, nothing after: {per_conn:?}");
    }

    /// The tracker writes the entry while behind the wire: the packets
    /// after the state it wrote are already on their way through the ring
    /// (stamped before the entry existed, processed after it). The kernel
    /// passes the connection's first packets (irregular against that
    /// state) and follows the chain; the tracker finds the kernel's packet
    /// #1 among its own, asks it to resume once caught up with the chain,
    /// and the kernel counts what comes after. The records equal those of
    /// a tracker that saw every packet, and the pending resumption costs a
    /// bounded number of map reads, not one per packet.
    #[test]
    fn an_entry_written_behind_the_wire_resumes_and_merges_exactly() {
        behind_the_wire(40_008, false);
    }

    /// The same, with a pure ACK of the server's (a kind its history did
    /// not have when the tracker asked the kernel to resume) among the
    /// packets passed after the one the tracker named: the kernel refuses
    /// that resumption for good. The tracker learns it at the next packet
    /// the kernel passes and asks again from there (it waited forever
    /// before, reading the entry before every packet).
    #[test]
    fn a_resumption_the_kernel_refuses_is_asked_again() {
        behind_the_wire(40_009, true);
    }

    fn behind_the_wire(sport: u16, server_ack: bool) {
        if !wirelog_ebpf::tests_can_load() {
            return;
        }
        let mut lo = TrackerOnLo::new(crate::TrackerConfig { app: None, flow_interval_ns: 3_600_000_000_000, ..crate::TrackerConfig::default() });
        let (c, s) = ((SRC, sport), (DST, DPORT));
        let to_s = |flags, seq, ack, len| frame_between(c, s, flags, seq, ack, len);
        let to_c = |flags, seq, ack, len| frame_between(s, c, flags, seq, ack, len);
        // A request of 100 bytes (`i` from 0), its response of 50, and
        // the client's pure ACK of it; the server acknowledges request 20
        // on its own first if `server_ack`.
        let exchange = |i: u32| {
            let (cs, ss) = (1000 + 100 * i, 7000 + 50 * i);
            let mut x = vec![to_s(0x18, cs, ss, 100)];
            if server_ack && i == 20 {
                x.push(to_c(0x10, ss, cs + 100, 0));
            }
            x.extend([to_c(0x18, ss, cs + 100, 50), to_s(0x10, cs + 100, ss + 50, 0)]);
            x
        };
        let handshake = [to_s(0x02, 999, 0, 0), to_c(0x12, 6999, 1000, 0), to_s(0x10, 1000, 7000, 0)];
        let all: Vec<Vec<u8>> = handshake.into_iter().chain((0..60).flat_map(exchange)).collect();
        // Wire times: all in the past, the first ones before the entry is
        // written (whatever the tracker does when).
        let base = now_real_ns() - 10_000_000;
        let stamp = |i: usize| base + i as i64 * 10_000;
        let mut at = 0;
        while lo.tracker.kernel_delegated() == 0 {
            assert!(at < 20, "never delegated");
            lo.give(stamp(at), &all[at], true, true);
            at += 1;
        }
        // Six packets already in the ring: on the wire before the entry
        // was written (the filter passed them without one), stamped so.
        let backlog = at..at + 6;
        for i in backlog.clone() {
            lo.give(stamp(i), &all[i], false, true);
        }
        // On the wire after the entry was written: the kernel passes the
        // first of each direction (the entry's chain is six packets old),
        // follows the chain, and passes the rest (suspended). 90 packets,
        // most of them still in the ring when the tracker asks the kernel
        // to resume.
        let mut stamps: Vec<(Vec<u8>, i64)> = Vec::new();
        let queued = backlog.end..backlog.end + 90;
        for i in queued.clone() {
            lo.wire(&all[i]);
            stamps.push((all[i].clone(), now_real_ns()));
        }
        let passed = received_frames(&lo.rx, sport);
        assert_eq!(passed.len(), 90, "suspended: every packet passed");
        // The tracker catches up: the backlog (stamped before the entry),
        // then what the kernel passed, one ring block of 3 at a time.
        for i in backlog {
            lo.give(stamp(i), &all[i], true, false);
        }
        let calls = lo.k.map_calls();
        for (n, f) in passed.iter().enumerate() {
            let ts = stamps.iter().find(|(g, _)| g == f).expect("a frame sent").1;
            lo.give(ts, f, true, false);
            if n % 3 == 2 {
                lo.tracker.kernel_rearm();
            }
        }
        assert_eq!(lo.k.written().2, 1, "a resumption asked once caught up with the chain");
        let calls = lo.k.map_calls() - calls;
        assert!(calls <= 8, "a pending resumption costs no map call per packet: {calls} for 90 packets");
        // The next packet: the kernel resumes at it, or (the server's ACK
        // after the packet named) passes it and refuses; the tracker then
        // asks again after it.
        lo.wire(&all[queued.end]);
        let first = received_frames(&lo.rx, sport);
        assert_eq!(first.len(), usize::from(server_ack));
        for f in &first {
            lo.give(now_real_ns(), f, true, false);
            lo.tracker.kernel_rearm();
        }
        // Refused, the tracker asks again; here, caught up with everything
        // the kernel passed, it writes the entry afresh instead.
        let (written, _, resumed) = lo.k.written();
        assert_eq!((written, resumed, lo.k.not_taken()), if server_ack { (2, 1, 1) } else { (1, 1, 0) }, "entries written, resumptions asked, not taken");
        // The rest: counted in the kernel.
        for f in &all[queued.end + 1..] {
            lo.wire(f);
        }
        assert_eq!(received_frames(&lo.rx, sport), Vec::<Vec<u8>>::new(), "resumed: counted in the kernel");
        // The close is passed (it suspends the entry) and merged before.
        let (cs, ss) = (1000 + 100 * 60, 7000 + 50 * 60);
        let close = [to_s(0x11, cs, ss, 0), to_c(0x11, ss, cs + 1, 0), to_s(0x10, cs + 1, ss + 1, 0)];
        for f in &close {
            lo.wire(f);
        }
        let passed = received_frames(&lo.rx, sport);
        assert_eq!(passed.len(), 3, "the close passed");
        for f in &passed {
            lo.give(now_real_ns(), f, true, false);
            lo.tracker.kernel_rearm();
        }
        let counted = all.len() - queued.end - usize::from(server_ack);
        assert_eq!(lo.k.counted().0, counted as u64, "counted in the kernel: every packet after the resumption");
        let out = lo.records().map(|(conns, flows, _)| {
            assert_eq!(conns.len(), 1);
            (conn_fields(&conns[0]), flow_totals(&flows))
        });
        assert_eq!(out[0], out[1], "the records of a tracker that saw every packet");
        assert_eq!((out[1].0 .0, out[1].0 .2), (2 + 2 * 60 + 2, 1 + 60 + usize::from(server_ack) as u64 + 1));
    }

    #[test]
    fn keys_order_the_endpoints_as_the_program_does() {
        let a = ConnKey { src: IpAddr16::from_v4([10, 0, 0, 2]), dst: IpAddr16::from_v4([10, 0, 0, 1]), sport: 80, dport: 5000, proto: 6 };
        let (k1, b1) = map_key(&a).unwrap();
        let (k2, b2) = map_key(&a.reversed()).unwrap();
        assert_eq!(k1, k2);
        assert_ne!(b1, b2);
        // Loaded little-endian, 10.0.0.1 is the lower address.
        assert_eq!(&k1[0..4], &[10, 0, 0, 1]);
        assert_eq!(&k1[8..10], &5000u16.to_be_bytes());
    }
}
