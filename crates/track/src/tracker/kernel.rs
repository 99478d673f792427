//! The tracker's side of `--kernel-accounting` (see `crate::kernel`):
//! when a connection is delegated to the kernel, and how the kernel's counts
//! are merged into the connection, its TCP state and its flow.

use std::sync::Arc;

use super::*;
use crate::history::mask;
use crate::kernel::{map_key, Delegations, KernelAccounting, Plan, ALLOW_ACK, ALLOW_DATA};

/// Packets the tracker must have processed after the kernel's last
/// irregular one before it lets the kernel resume. The numbering assumes a
/// connection's packets reach the ring in the order the filter ran on them;
/// with its two directions on two CPUs, packets filtered at the same time
/// can swap places. A swap that put an irregular packet after the tracker's
/// `S` while the kernel numbered it `S` or below would let the kernel count
/// from a chain the tracker has not reached; the margin covers swaps of
/// nearby packets (a swap over more would need one packet to wait between
/// the filter and the ring while several others pass).
const RESUME_MARGIN: u32 = 4;

/// Packets after `go_floor` the tracker may be given with a resumption
/// pending, neither taken nor refused by the kernel's numbering, before it
/// withdraws it (see [`Tracker::kernel_learn_resume`]). Such a packet was
/// passed by a filter run that began before the control value was written
/// (any later run resumes or refuses); more than a few would mean a
/// numbering the tracker lost, and waiting on it would cost a read per
/// packet.
const RESUME_PATIENCE: u32 = 8;

impl Tracker {
    /// Delegates connections to `k`'s program (see [`KernelAccounting`]).
    pub fn kernel_accounting(&mut self, k: Arc<KernelAccounting>) {
        self.kernel = Some(Box::new(Delegations::new(k)));
    }

    /// `capture --cpu-budget` step 3: connections are delegated from now on
    /// (`on`), or no longer. The caller switches the socket programs'
    /// accounting stage first when turning it off (then the kernel counts
    /// nothing more), last when turning it on.
    ///
    /// Taken back when off, so that the records of a connection that went
    /// to the kernel and back are whole: every counted packet came before
    /// the switch, every packet passed after it; what was counted is merged
    /// before the first passed packet of the connection is processed (the
    /// path a suspended entry takes: `kernel_before_packet`), and an entry
    /// the kernel resumed after packet `R` once the tracker is past `R`. A
    /// suspended entry with nothing counted since its last merge is
    /// released at once; one still counting when the switch came keeps its
    /// entry until its next packet (packets the kernel passed before it was
    /// written may still be in the ring: merged now, its counts would come
    /// before them), its inactivity timer or the flow bucket's end (merged
    /// there as always).
    pub fn set_kernel_accounting(&mut self, on: bool) {
        let Some(k) = self.kernel.as_mut() else { return };
        if k.on == on {
            return;
        }
        k.on = on;
        if on {
            return;
        }
        let mut idxs = std::mem::take(&mut k.scratch);
        idxs.extend(k.conns.keys().copied());
        for &idx in &idxs {
            let Some(k) = self.kernel.as_mut() else { break };
            k.drain(idx);
            let idle = k.conns.get(&idx).is_some_and(|d| d.suspended && d.resumed_at.is_none());
            if idle {
                let _ = self.kernel_merge(idx, true);
            }
        }
        idxs.clear();
        if let Some(k) = self.kernel.as_mut() {
            k.scratch = idxs;
        }
    }

    /// Whether connections are delegated now (see
    /// [`Tracker::set_kernel_accounting`]).
    pub fn kernel_accounting_on(&self) -> bool {
        self.kernel.as_ref().is_some_and(|k| k.on)
    }

    /// Connections delegated to the kernel now.
    pub fn kernel_delegated(&self) -> usize {
        self.kernel.as_ref().map_or(0, |k| k.conns.len())
    }

    /// Before a packet of the connection in slot `idx`: a delegated one
    /// the kernel passed has its counts merged first.
    ///
    /// Packets stamped after the entry was written are numbered as the
    /// kernel numbers those it passes (`PASSED`); packets stamped before
    /// went through the filter before the entry existed (the ring's stamp
    /// is taken after the filter runs), so the kernel did not number them.
    ///
    /// A counting entry the kernel suspended (it passed this packet) has
    /// what it counted merged now, before the packet. A suspended one the
    /// kernel resumed after passing packet `R` has the counts merged before
    /// packet `R + 1`: they came after `R` and before `R + 1`.
    #[inline]
    pub(super) fn kernel_before_packet(&mut self, idx: u32, ts: i64, is_orig: bool, seg: Option<&Segment>) {
        let Some(k) = self.kernel.as_mut() else { return };
        if k.conns.is_empty() {
            return;
        }
        let Some(d) = k.conns.get_mut(&idx) else { return };
        d.last_ts = ts;
        if ts <= d.armed_at_ns {
            return;
        }
        if d.suspended {
            d.seen += 1;
            let seen = d.seen;
            // Nothing to learn before packet `go_floor + 1`: the kernel
            // resumes, if at all, after a packet numbered `go_floor` or
            // later, so no count can be due before this one.
            if d.go_at.is_some() && seen > d.go_floor {
                self.kernel_learn_resume(idx);
            }
            let resumed = self.kernel.as_ref().and_then(|k| k.conns.get(&idx)).and_then(|d| d.resumed_at);
            if resumed.is_some_and(|r| seen > r) {
                let _ = self.kernel_merge(idx, false);
                if let Some(d) = self.kernel.as_mut().and_then(|k| k.conns.get_mut(&idx)) {
                    d.resumed_at = None;
                }
            }
            return;
        }
        match self.kernel_merge(idx, false) {
            Some((true, _)) => {
                // Number 1 is the packet the kernel noted. Another one went
                // through the filter before the entry was written, though
                // stamped after the time noted just before writing it.
                if let Some(d) = self.kernel.as_mut().and_then(|k| k.conns.get_mut(&idx)) {
                    let block = if is_orig { d.orig_block } else { 1 - d.orig_block } as u32;
                    if seg.is_some_and(|s| d.first == [block, s.seq, s.ack]) {
                        d.suspended = true;
                        d.seen = 1;
                        return;
                    }
                    // Until then `seen` counts the packets that were not it.
                    d.seen += 1;
                    if d.seen <= 8 {
                        return;
                    }
                }
                // Not among the first few: the numbering is unknown.
                let _ = self.kernel_merge(idx, true);
            }
            // Passed without suspending (it cannot be this connection's
            // in-order segment): take it back.
            _ => {
                let _ = self.kernel_merge(idx, true);
            }
        }
    }

    /// After telling the kernel it may resume: reads whether it did (and
    /// after which packet), or refused (an irregular packet, or a kind of
    /// packet the control value did not allow, came after `GO_AT`): then
    /// the resumption is dropped and [`Tracker::kernel_rearm`] asks again
    /// from a later packet, with what the history allows by then.
    ///
    /// Read only from packet `go_floor + 1` on (and by the timers and the
    /// bucket's end): one read or two per resumption, where it was one per
    /// packet. Exact: the kernel's `RESUMED_AT` is at least `go_floor`, and
    /// counts are merged before packet `RESUMED_AT + 1`, which the tracker
    /// reaches only after a read here. A refusal seen in the entry is for
    /// good (see `Numbering::refused`), so asking again cannot meet a late
    /// resumption under the old value. Neither taken nor refused after
    /// [`RESUME_PATIENCE`] packets, it is withdrawn (the control value
    /// deleted before the last read, `Delegations::withdraw`).
    fn kernel_learn_resume(&mut self, idx: u32) {
        let Some(k) = self.kernel.as_mut() else { return };
        let Some((go_at, floor, allow, seen)) = k.conns.get(&idx).and_then(|d| Some((d.go_at?, d.go_floor, d.go_allow, d.seen))) else { return };
        let n = k.numbering(idx);
        match n {
            // Every earlier RESUMED_AT is below the IRREG `go_at` covered.
            Some(n) if n.resumed_at >= go_at => {
                if let Some(d) = k.conns.get_mut(&idx) {
                    d.resumed_at = Some(n.resumed_at);
                    d.go_at = None;
                }
            }
            Some(n) if n.refused(go_at, allow) => {
                k.shared.count_not_taken();
                if let Some(d) = k.conns.get_mut(&idx) {
                    d.go_at = None;
                }
            }
            Some(_) if seen > floor.saturating_add(RESUME_PATIENCE) => {
                k.withdraw(idx);
            }
            Some(_) => {} // no packet since the control value: later
            None => {
                if let Some(d) = k.conns.get_mut(&idx) {
                    d.go_at = None;
                }
            }
        }
    }

    /// After a packet: delegates the connection if its state allows; a
    /// suspended one is queued for [`Tracker::kernel_rearm`], and one no
    /// longer in such a state is taken back. Notes whether the tracker's
    /// state still equals the kernel's chain for the packet's side.
    pub(super) fn kernel_after_packet(&mut self, idx: u32, iface: u32, ts: i64, is_orig: bool, seg: Option<&Segment>) {
        let Some(k) = self.kernel.as_ref() else { return };
        if self.keep.is_some() || (!k.on && k.conns.is_empty()) {
            return;
        }
        let pending = k.conns.get(&idx).map(|d| (d.suspended, d.queued));
        // The kernel may be counting after a packet still in the ring: the
        // entry (and its counts) stays until they are merged, before the
        // next packet the kernel passes (every one once the bucket guard
        // this check may be about has begun).
        let counting_ahead = k.conns.get(&idx).is_some_and(|d| d.go_at.is_some() || d.resumed_at.is_some());
        if pending.is_some() {
            // The kernel's chain holds this packet's next sequence number
            // and acknowledgement (whatever it made of it); the tracker's
            // state agrees only if it took them as they are.
            let view = self.table.get(idx).and_then(|e| match &e.value.state {
                ProtoState::Tcp(part) => self.tcp.with_cold(part, |t, cold| t.kernel_view(cold)).flatten(),
                _ => None,
            });
            let side = usize::from(!is_orig);
            if let Some(d) = self.kernel.as_mut().and_then(|k| k.conns.get_mut(&idx)) {
                d.chain_ok[side] = ts > d.armed_at_ns
                    && match (view, seg) {
                        (Some(v), Some(s)) => v.next_seq[side] == s.seq.wrapping_add(s.len) && v.last_ack[side] == s.ack,
                        _ => false,
                    };
            }
        }
        if pending == Some((false, false)) {
            return; // delegated and counting
        }
        let draining = self.kernel.as_ref().is_none_or(|k| !k.on || k.conns.get(&idx).is_some_and(|d| d.draining));
        let plan = if draining { None } else { self.delegable(idx, ts) };
        let Some(plan) = plan else {
            if pending.is_some() && !counting_ahead {
                let _ = self.kernel_merge(idx, true);
            }
            return;
        };
        let Some(k) = self.kernel.as_mut() else { return };
        match pending {
            None => {
                k.delegate(idx, iface, &plan);
            }
            Some((_, true)) => {} // already queued
            Some((_, false)) => {
                if let Some(d) = k.conns.get_mut(&idx) {
                    d.queued = true;
                    k.recheck.push(idx);
                }
            }
        }
    }

    /// After a ring block: hands back to the kernel each suspended
    /// connection given packets since, if its state still allows. One read
    /// of the entry per such connection and block (checking after each
    /// packet cost a `bpf()` call per packet of a connection the kernel
    /// keeps passing).
    ///
    /// Ordering. The tracker has processed packet `S` (`seen`) of the
    /// kernel's numbering; the kernel has passed `PASSED` and counts
    /// nothing while suspended.
    /// - `S >= PASSED`: no packet the kernel let through is still in the
    ///   ring, so the tracker's state is the one the kernel is at: the entry
    ///   is written afresh from it.
    /// - Otherwise, with `IRREG <= S` and the tracker's state equal to the
    ///   kernel's chain for both sides (`chain_ok`: the chain after packet
    ///   `S`): every packet after `S` was regular against that chain, so it
    ///   only moved the chain on and will change nothing but counters when
    ///   the tracker processes it, from a state the tracker delegates now.
    ///   The kernel's chain is then the state the tracker will be at, and it
    ///   may count from where it is; the control map says so (`GO_AT = S`)
    ///   and the kernel checks `IRREG <= S` again when it resumes. What it
    ///   counts comes after packet `RESUMED_AT` and before the next one it
    ///   passes: merged in between (`kernel_before_packet`), and by the
    ///   timers or the flow bucket's end only once the tracker is past
    ///   `RESUMED_AT`.
    pub fn kernel_rearm(&mut self) {
        let Some(k) = self.kernel.as_mut() else { return };
        if k.recheck.is_empty() || self.keep.is_some() {
            return;
        }
        let mut queue = std::mem::take(&mut k.recheck);
        for &idx in &queue {
            let Some(d) = self.kernel.as_mut().and_then(|k| k.conns.get_mut(&idx)) else { continue };
            d.queued = false;
            if !d.suspended || d.go_at.is_some() || d.resumed_at.is_some() {
                continue;
            }
            let (seen, chain_ok, iface, ts, draining) = (d.seen, d.chain_ok, d.iface, d.last_ts, d.draining);
            let plan = if draining { None } else { self.delegable(idx, ts) };
            let Some(plan) = plan else {
                let _ = self.kernel_merge(idx, true);
                continue;
            };
            let Some(k) = self.kernel.as_mut() else { return };
            let Some(n) = k.numbering(idx) else {
                k.conns.remove(&idx);
                continue;
            };
            if !n.suspended {
                continue; // cannot be: the tracker did not tell it to resume
            }
            if seen >= n.passed {
                k.delegate(idx, iface, &plan);
            } else if seen >= n.irregular.saturating_add(RESUME_MARGIN) && chain_ok == [true, true] {
                k.resume(idx, seen, &plan, n.passed);
            }
        }
        queue.clear();
        if let Some(k) = self.kernel.as_mut() {
            if k.recheck.is_empty() {
                k.recheck = queue;
            }
        }
    }

    /// What to write in the connection's entry, if its state allows.
    fn delegable(&self, idx: u32, ts: i64) -> Option<Plan> {
        let e = self.table.get(idx)?;
        let c = &e.value;
        let ProtoState::Tcp(part) = &c.state else { return None };
        // A parser, or content detection still going on, needs the bytes.
        // A parser that stopped (step 1b left the connection out, or it
        // gave up) needs none: `AppState::segment` returns at once, and
        // the draw of step 1b skips it, so the packets the kernel counts
        // would change nothing of it but `whole_payload` (conn.log's
        // service; it cannot change once `kernel_view` allows: both sides
        // established, so the connection's partial status is settled).
        // Taken back, it stays stopped: nothing parses it from mid-stream.
        match self.apps.get(c.app) {
            Some(a) if !a.counts_only(|| self.tcp.with(part, |t| t.is_partial()).unwrap_or(true)) => return None,
            Some(_) => {}
            None if !c.detection.is_over() => return None,
            None => {}
        }
        // Asked after the cheap refusals above: a connection being parsed
        // (most of them, when parsing is on) costs no TCP-state lookup.
        let view = self.tcp.with_cold(part, |t, cold| t.kernel_view(cold)).flatten()?;
        let (key, orig_block) = map_key(&self.table.key(idx)?)?;
        let until_real_ns = Delegations::until(self.flows.next_boundary(), ts)?;
        let allow = [true, false].map(|orig| {
            let mut a = 0;
            if c.hist.has(orig, mask::DATA_PKT) {
                a |= ALLOW_DATA;
            }
            if c.hist.has(orig, mask::ACK_PKT) {
                a |= ALLOW_ACK;
            }
            a
        });
        (allow != [0, 0]).then_some(Plan { key, orig_block, view, allow, until_real_ns, at_ns: ts })
    }

    /// Merges what the kernel counted for the connection in slot `idx`
    /// (a delegated one); with `release`, it is no longer delegated.
    /// Returns whether the entry was suspended, and the packets the kernel
    /// passed since.
    pub(super) fn kernel_merge(&mut self, idx: u32, release: bool) -> Option<(bool, u32)> {
        if !release {
            let d = self.kernel.as_ref()?.conns.get(&idx)?;
            if d.go_at.is_some() {
                self.kernel_learn_resume(idx);
            }
            let d = self.kernel.as_ref()?.conns.get(&idx)?;
            if d.resumed_at.is_some_and(|r| d.seen < r) {
                // Counted after a packet still in the ring: not yet.
                return None;
            }
        }
        let k = self.kernel.as_mut()?;
        let iface = k.conns.get(&idx).map_or(0, |d| d.iface);
        let counted = k.take(idx, release)?;
        let state = (counted.suspended, counted.passed);
        let Some((e, keys)) = self.table.get_mut_keys(idx) else { return Some(state) };
        let c = &mut e.value;
        let mut flow_slot = c.flow;
        for side in 0..2 {
            let (pkts, bytes, last) = (counted.pkts[side], counted.bytes[side], counted.last_ns[side]);
            if pkts == 0 {
                continue;
            }
            let is_orig = side == 0;
            self.overflow.add(idx, c, side, pkts, bytes);
            // Counted packets came after every packet the tracker saw of
            // the connection: their time only moves forward.
            let seen = self.overflow.seen(idx, c).max(last);
            let new_last = c.last_ns.max(last);
            self.overflow.set_times(idx, &mut c.last_ns, &mut c.seen_after_last, new_last, seen);
            if !self.flows.add_cached(flow_slot, is_orig, pkts, bytes, last) {
                // The flow table was written early (full) since: count as
                // the connection's first packets in the new table do.
                let key = keys.full(&e.key);
                let fk = FlowKey { client: key.src, server: key.dst, server_port: key.dport, proto: key.proto, iface };
                flow_slot = self.flows.count(&fk, is_orig, 0, last);
                self.flows.add_cached(flow_slot, is_orig, pkts - 1, bytes, last);
            }
        }
        c.flow = flow_slot;
        if let ProtoState::Tcp(part) = &mut c.state {
            if let Some((t, cold)) = self.tcp.get_mut(part) {
                t.kernel_merge(counted.next_seq, [counted.last_ack[0], counted.last_ack[1]], &mut c.hist, cold);
            }
        }
        Some(state)
    }

    /// Before the flow bucket ends: every delegated connection's counts
    /// land in the bucket they were counted in.
    pub(super) fn kernel_merge_all(&mut self) {
        let Some(k) = self.kernel.as_mut() else { return };
        let mut idxs = std::mem::take(&mut k.scratch);
        idxs.extend(k.conns.keys().copied());
        for &idx in &idxs {
            let _ = self.kernel_merge(idx, false);
        }
        idxs.clear();
        if let Some(k) = self.kernel.as_mut() {
            k.scratch = idxs;
        }
    }
}
