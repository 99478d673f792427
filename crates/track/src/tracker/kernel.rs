//! The tracker's side of `--kernel-accounting` (see `crate::kernel`):
//! when a connection is delegated to the kernel, and how the kernel's counts
//! are merged into the connection, its TCP state and its flow.

use std::sync::Arc;

use super::*;
use crate::history::mask;
use crate::kernel::{map_key, Delegations, KernelAccounting, Plan, ALLOW_ACK, ALLOW_DATA};

impl Tracker {
    /// Delegates connections to `k`'s program (see [`KernelAccounting`]).
    pub fn kernel_accounting(&mut self, k: Arc<KernelAccounting>) {
        self.kernel = Some(Box::new(Delegations::new(k)));
    }

    /// Connections delegated to the kernel now.
    pub fn kernel_delegated(&self) -> usize {
        self.kernel.as_ref().map_or(0, |k| k.conns.len())
    }

    /// Before a packet of the connection in slot `idx`: a delegated one
    /// the kernel passed has its counts merged first. The kernel suspended
    /// its entry when it passed the packet; from then on the tracker counts
    /// the connection's packets it is given, to know when it has caught up.
    ///
    /// Packets stamped before the entry was written went through the filter
    /// before it existed (the ring's stamp is taken after the filter runs),
    /// so they are not among those the kernel counts as passed.
    #[inline]
    pub(super) fn kernel_before_packet(&mut self, idx: u32, ts: i64) {
        let Some(k) = self.kernel.as_mut() else { return };
        let Some(d) = k.conns.get_mut(&idx) else { return };
        let after_arming = u32::from(ts > d.armed_at_ns);
        d.last_ts = ts;
        if let Some(n) = d.suspended_seen.as_mut() {
            // Counting stopped when it was suspended: nothing to merge.
            *n += after_arming;
            return;
        }
        match self.kernel_merge(idx, false).map(|(suspended, _)| suspended) {
            Some(true) => {
                if let Some(d) = self.kernel.as_mut().and_then(|k| k.conns.get_mut(&idx)) {
                    d.suspended_seen = Some(after_arming);
                    d.last_ts = ts;
                }
            }
            // Not suspended: a packet from before the entry existed.
            Some(false) if after_arming == 0 => {}
            // Passed without suspending (it cannot be this connection's
            // in-order segment): take it back.
            _ => {
                if let Some(k) = self.kernel.as_mut() {
                    k.release(idx);
                }
            }
        }
    }

    /// After a packet: delegates the connection if its state allows; a
    /// suspended one is queued for [`Tracker::kernel_rearm`], and one no
    /// longer in such a state is taken back.
    pub(super) fn kernel_after_packet(&mut self, idx: u32, iface: u16, ts: i64) {
        let Some(k) = self.kernel.as_ref() else { return };
        if self.keep.is_some() {
            return;
        }
        let pending = k.conns.get(&idx).map(|d| (d.suspended_seen.is_some(), d.queued));
        if pending == Some((false, false)) {
            return; // delegated and counting
        }
        let Some(plan) = self.delegable(idx, ts) else {
            if pending.is_some() {
                if let Some(k) = self.kernel.as_mut() {
                    k.release(idx);
                }
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

    /// After a ring block: writes the entry of each suspended connection
    /// given packets since again, if the tracker has now seen every packet
    /// the kernel passed since it suspended it (so the entry starts from the
    /// state the kernel is at) and its state still allows. One read of the
    /// kernel's `PASSED` per such connection and block, where checking
    /// after each packet cost a `bpf()` call per packet of a connection the
    /// kernel keeps passing.
    ///
    /// Ordering: the tracker has seen `seen` packets of the connection
    /// stamped after the entry was written; the kernel passed `passed`
    /// since it suspended the entry, and counts nothing while suspended. If
    /// `seen >= passed`, no packet the kernel let through is still in the
    /// ring unprocessed, so the tracker's state is the one the kernel is at
    /// and the counts the new entry gathers follow every packet already
    /// processed. Checking later than right after the packet only lets more
    /// packets be processed first; it never makes `seen` count a packet the
    /// kernel did not pass.
    pub fn kernel_rearm(&mut self) {
        let Some(k) = self.kernel.as_mut() else { return };
        if k.recheck.is_empty() || self.keep.is_some() {
            return;
        }
        let mut queue = std::mem::take(&mut k.recheck);
        for &idx in &queue {
            let Some(d) = self.kernel.as_mut().and_then(|k| k.conns.get_mut(&idx)) else { continue };
            d.queued = false;
            let (Some(seen), iface, ts) = (d.suspended_seen, d.iface, d.last_ts) else { continue };
            let Some(plan) = self.delegable(idx, ts) else {
                if let Some(k) = self.kernel.as_mut() {
                    k.release(idx);
                }
                continue;
            };
            let passed = self.kernel_merge(idx, false).map_or(u32::MAX, |(_, passed)| passed);
            if seen < passed {
                continue; // the ring still holds packets of it
            }
            if let Some(k) = self.kernel.as_mut() {
                k.delegate(idx, iface, &plan);
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
        if c.app.is_some() || c.app_probe & PROBE_DONE == 0 {
            return None;
        }
        let view = self.tcp.get(part.slab).and_then(|t| t.kernel_view())?;
        let (key, orig_block) = map_key(&e.key)?;
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
        (allow != [0, 0]).then_some(Plan { key, orig_block, view, allow, until_real_ns })
    }

    /// Merges what the kernel counted for the connection in slot `idx`
    /// (a delegated one); with `release`, it is no longer delegated.
    /// Returns whether the entry was suspended, and the packets the kernel
    /// passed since.
    pub(super) fn kernel_merge(&mut self, idx: u32, release: bool) -> Option<(bool, u32)> {
        let k = self.kernel.as_mut()?;
        let iface = k.conns.get(&idx).map_or(0, |d| d.iface);
        let counted = k.take(idx, release)?;
        let state = (counted.suspended, counted.passed);
        let Some(e) = self.table.get_mut(idx) else { return Some(state) };
        let c = &mut e.value;
        let mut flow_slot = c.flow;
        for side in 0..2 {
            let (pkts, bytes, last) = (counted.pkts[side], counted.bytes[side], counted.last_ns[side]);
            if pkts == 0 {
                continue;
            }
            let is_orig = side == 0;
            if is_orig {
                c.orig_pkts += pkts;
                c.orig_ip_bytes += bytes;
            } else {
                c.resp_pkts += pkts;
                c.resp_ip_bytes += bytes;
            }
            // Counted packets came after every packet the tracker saw of
            // the connection: their time only moves forward.
            c.last_ns = c.last_ns.max(last);
            c.seen_ns = c.seen_ns.max(last);
            if !self.flows.add_cached(flow_slot, is_orig, pkts, bytes, last) {
                // The flow table was written early (full) since: count as
                // the connection's first packets in the new table do.
                let fk = FlowKey { client: e.key.src, server: e.key.dst, server_port: e.key.dport, proto: e.key.proto, iface };
                flow_slot = self.flows.count(&fk, is_orig, 0, last);
                self.flows.add_cached(flow_slot, is_orig, pkts - 1, bytes, last);
            }
        }
        c.flow = flow_slot;
        if let ProtoState::Tcp(part) = &c.state {
            if let Some(t) = self.tcp.get_mut(part.slab) {
                t.kernel_merge(counted.next_seq, [counted.last_ack[0], counted.last_ack[1]], &mut c.hist);
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
