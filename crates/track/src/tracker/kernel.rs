//! The tracker's side of `--kernel-accounting` (see `crate::kernel`):
//! when a connection is delegated to the kernel, and how the kernel's counts
//! are merged into the connection, its TCP state and its flow.

use std::sync::Arc;

use super::*;
use crate::history::mask;
use crate::kernel::{map_key, Delegations, KernelAccounting, ALLOW_ACK, ALLOW_DATA};

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
    /// passed by the kernel has its counts merged first, and is taken back.
    #[inline]
    pub(super) fn kernel_before_packet(&mut self, idx: u32) {
        if self.kernel.as_ref().is_some_and(|k| k.conns.contains_key(&idx)) {
            self.kernel_merge(idx, true);
        }
    }

    /// After a packet: delegates the connection if its state allows.
    pub(super) fn kernel_after_packet(&mut self, idx: u32, iface: u16, ts: i64) {
        let Some(k) = self.kernel.as_mut() else { return };
        if k.conns.contains_key(&idx) || self.keep.is_some() {
            return;
        }
        let Some(e) = self.table.get(idx) else { return };
        let c = &e.value;
        let ProtoState::Tcp(part) = &c.state else { return };
        // A parser, or content detection still going on, needs the bytes.
        if c.app.is_some() || c.app_probe & PROBE_DONE == 0 {
            return;
        }
        let Some(view) = self.tcp.get(part.slab).and_then(|t| t.kernel_view()) else { return };
        let Some((key, orig_block)) = map_key(&e.key) else { return };
        let Some(until) = Delegations::until(self.flows.next_boundary(), ts) else { return };
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
        if allow == [0, 0] {
            return;
        }
        k.delegate(idx, key, orig_block, iface, &view, allow, until);
    }

    /// Merges what the kernel counted for the connection in slot `idx`
    /// (a delegated one); with `release`, it is no longer delegated.
    pub(super) fn kernel_merge(&mut self, idx: u32, release: bool) {
        let Some(k) = self.kernel.as_mut() else { return };
        let iface = k.conns.get(&idx).map_or(0, |d| d.iface);
        let Some(counted) = k.take(idx, release) else { return };
        let Some(e) = self.table.get_mut(idx) else { return };
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
    }

    /// Before the flow bucket ends: every delegated connection's counts
    /// land in the bucket they were counted in.
    pub(super) fn kernel_merge_all(&mut self) {
        let Some(k) = self.kernel.as_ref() else { return };
        let idxs: Vec<u32> = k.conns.keys().copied().collect();
        for idx in idxs {
            self.kernel_merge(idx, false);
        }
    }
}
