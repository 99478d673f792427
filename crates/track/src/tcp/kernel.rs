//! The TCP side of `--kernel-accounting`: when a connection's in-order
//! ACK/PSH|ACK segments change nothing but counters and sequence numbers
//! (what the kernel is told to expect), and how the kernel's totals are
//! folded back as if the tracker had seen those segments.

use super::*;

/// What the kernel needs per endpoint (index 0 the originator, 1 the
/// responder) to count the connection's in-order segments.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KernelView {
    /// The sequence number the endpoint's next in-order segment carries.
    pub next_seq: [u32; 2],
    /// The highest acknowledgement the endpoint sent.
    pub last_ack: [u32; 2],
    /// Whether its data segments may be counted (the reassembly rules that
    /// depend on acknowledgements having been seen are settled).
    pub data_ok: [bool; 2],
}

impl TcpConn {
    /// `Some` only in the state where [`TcpConn::process`] takes the
    /// established path and an in-order segment only advances `last_seq`,
    /// the peer's `ack_seq` and the contiguous reassembly range: both sides
    /// established and open, no deferred close, no data held above a hole.
    pub(crate) fn kernel_view(&self, parts: &ColdParts) -> Option<KernelView> {
        if self.first_packet_seen() != 3 || self.flag(C_CLOSE_DEFERRED) {
            return None;
        }
        let mut data_ok = [false; 2];
        for (i, e) in [&self.orig, &self.resp].into_iter().enumerate() {
            if e.state() != Established || e.did_close() || e.fin_seen() {
                return None;
            }
            let r = self.rare(i == 0, parts);
            if !e.skip_deliveries() {
                let last = e.to_relative(e.last_seq, e.seq_wraps(r));
                if e.reasm.has_ranges(r) || e.reasm.next_deliver(r) != last {
                    return None;
                }
            }
            // Until the peer acknowledged data, delivered data is released
            // by size (MAX_INITIAL_WINDOW), a rule the kernel does not follow.
            data_ok[i] = e.skip_deliveries() || !e.no_data_acked(r);
        }
        Some(KernelView {
            next_seq: [self.orig.last_seq, self.resp.last_seq],
            // An endpoint's acknowledgements move its peer's ack_seq.
            last_ack: [self.resp.ack_seq, self.orig.ack_seq],
            data_ok,
        })
    }

    /// Folds in what the kernel counted since [`TcpConn::kernel_view`]:
    /// the endpoints' next sequence numbers and last acknowledgements.
    /// Sequence numbers first, so that no acknowledgement passes data not
    /// yet merged (which would count as a gap).
    pub(crate) fn kernel_merge(
        &mut self,
        next_seq: [u32; 2],
        last_ack: [u32; 2],
        hist: &mut HistoryState,
        parts: &mut ColdParts,
    ) {
        for (i, &next) in next_seq.iter().enumerate() {
            let (e, _, mut r) = self.ep_rare(i == 0, parts);
            // The kernel passes a segment whose end would wrap, so the new
            // value is never below the old one.
            if seq_delta(next, e.last_seq) > 0 {
                e.update_last_seq(next, &mut r);
                if !e.skip_deliveries() {
                    let v = e.to_relative(e.last_seq, e.seq_wraps(r.by_ref()));
                    e.reasm.set_next_deliver(v, &mut r);
                }
            }
        }
        for (i, &ack) in last_ack.iter().enumerate() {
            // Endpoint i's acknowledgements are of its peer's data.
            let peer_is_orig = i == 1;
            let (p, _, mut r) = self.ep_rare(peer_is_orig, parts);
            if seq_delta(ack, p.ack_seq) <= 0 {
                continue;
            }
            p.update_ack_seq(ack, &mut r);
            let wraps = p.ack_wraps(r.by_ref());
            let (rel_ack, underflow) = relative_seq(p.start_seq, ack, p.ack_seq, wraps, |s, w| p.to_relative(s, w));
            if !underflow {
                self.ack_received(peer_is_orig, rel_ack, hist, parts);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelog_decode::tcp_flags::PSH;

    fn seg(flags: u8, seq: u32, ack: u32, len: u32) -> Segment {
        Segment { flags, seq, ack, window: 512, len, payload_complete: true }
    }

    /// A connection established both ways with data and acks seen.
    fn established(t: &mut TcpConn, h: &mut HistoryState, c: &mut ColdParts) {
        t.process(true, &seg(SYN, 100, 0, 0), h, c);
        t.process(false, &seg(SYN | ACK, 5000, 101, 0), h, c);
        t.process(true, &seg(ACK, 101, 5001, 0), h, c);
        t.process(true, &seg(PSH | ACK, 101, 5001, 50), h, c);
        t.process(false, &seg(PSH | ACK, 5001, 151, 20), h, c);
        t.process(true, &seg(ACK, 151, 5021, 0), h, c);
        // The responder's pure ACK: its letter too is in the history, as
        // the tracker requires before the kernel counts such segments.
        t.process(false, &seg(ACK, 5021, 151, 0), h, c);
    }

    /// Merging the kernel's totals leaves the state the segments themselves
    /// would have left: the same sizes, acknowledgements and history.
    #[test]
    fn a_merge_equals_processing_the_in_order_segments() {
        let (mut seen, mut hs, mut cs) = (TcpConn::new(false), HistoryState::default(), ColdParts::with_capacity(0));
        established(&mut seen, &mut hs, &mut cs);
        // A copy of the connection: no cold part yet (its slot would be the original's).
        assert_eq!(seen.cold_slot(), NO_COLD);
        let (mut merged, mut cm) = (seen.clone(), ColdParts::with_capacity(0));
        let mut hm = hs;
        let v = merged.kernel_view(&cm).expect("established with data both ways");
        assert_eq!(v.next_seq, [151, 5021]);
        assert_eq!(v.data_ok, [true, true]);
        // 100 segments of 1000 bytes from the originator, each acknowledged.
        let mut seq = 151u32;
        for _ in 0..100 {
            seen.process(true, &seg(PSH | ACK, seq, 5021, 1000), &mut hs, &mut cs);
            seq += 1000;
            seen.process(false, &seg(ACK, 5021, seq, 0), &mut hs, &mut cs);
        }
        merged.kernel_merge([seq, 5021], [5021, seq], &mut hm, &mut cm);
        assert_eq!(merged.orig_size(&cm), seen.orig_size(&cs));
        assert_eq!(merged.resp_size(&cm), seen.resp_size(&cs));
        assert_eq!(merged.orig.ack_seq, seen.orig.ack_seq);
        let (rm, rs) = (merged.rare(true, &cm), seen.rare(true, &cs));
        assert_eq!(merged.orig.reasm.trim(rm), seen.orig.reasm.trim(rs));
        assert_eq!(merged.orig.reasm.next_deliver(rm), seen.orig.reasm.next_deliver(rs));
        assert_eq!(merged.missed_bytes(&cm), seen.missed_bytes(&cs));
        assert_eq!(hm.letters().as_str(), hs.letters().as_str());
        // And a FIN after either closes alike.
        let fin = seg(FIN | ACK, seq, 5021, 0);
        seen.process(true, &fin, &mut hs, &mut cs);
        merged.process(true, &fin, &mut hm, &mut cm);
        assert_eq!(merged.conn_state(hm.letters().as_str(), &cm), seen.conn_state(hs.letters().as_str(), &cs));
    }

    #[test]
    fn nothing_is_delegated_before_both_sides_are_established_or_after_a_fin() {
        let (mut t, mut h, mut c) = (TcpConn::new(false), HistoryState::default(), ColdParts::with_capacity(0));
        t.process(true, &seg(SYN, 100, 0, 0), &mut h, &mut c);
        assert!(t.kernel_view(&c).is_none());
        t.process(false, &seg(SYN | ACK, 5000, 101, 0), &mut h, &mut c);
        t.process(true, &seg(ACK, 101, 5001, 0), &mut h, &mut c);
        let v = t.kernel_view(&c).expect("established");
        // No data acknowledged yet: data is not counted in the kernel.
        assert_eq!(v.data_ok, [false, false]);
        t.process(true, &seg(FIN | ACK, 101, 5001, 0), &mut h, &mut c);
        assert!(t.kernel_view(&c).is_none());
    }
}
