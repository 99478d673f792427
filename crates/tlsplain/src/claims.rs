//! One source of transactions per connection (`capture --socket-data`):
//! the reader thread says which TCP connections the socket source parses
//! (it *claims* them, from the first event its parser took), and how far it
//! has read its ring (a watermark of wall time); the join on the output
//! thread holds each of the packet path's TCP transactions until the
//! watermark passes its last byte, then drops it when its connection was
//! claimed at its time (the socket's transactions stand for it), or lets it
//! go. conn.log keeps coming from the packets.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::sync::Mutex;

/// (orig, orig port, resp, resp port), as records hold them.
pub type Tuple = ([u8; 16], u16, [u8; 16], u16);

/// A claim is forgotten this long after its connection was (the join
/// decides a transaction within a few seconds of its time).
const KEEP_NS: i64 = 120_000_000_000;
/// Transactions and events are stamped by different clocks at different
/// places (a packet on the wire, a system call's return): a transaction
/// within this of a claim's span is covered by it.
pub const SLACK_NS: i64 = 50_000_000;

#[derive(Debug, Default)]
pub struct Claims {
    /// Per tuple, the spans (first event, last event or `i64::MAX` while
    /// the reader follows it) of the connections on it.
    spans: Mutex<HashMap<Tuple, Vec<(i64, i64)>>>,
    /// Every event whose system call returned before this (wall ns) has
    /// been read; 0 before the first round.
    watermark_ns: AtomicI64,
}

impl Claims {
    /// The socket source parses the connection on `t` from `first_ns`.
    pub fn claim(&self, t: Tuple, first_ns: i64) {
        let mut s = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        s.entry(t).or_default().push((first_ns, i64::MAX));
    }

    /// The connection on `t` is no longer followed; its last event was at
    /// `last_ns`.
    pub fn end(&self, t: Tuple, last_ns: i64) {
        let mut s = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(v) = s.get_mut(&t) {
            if let Some(open) = v.iter_mut().rev().find(|c| c.1 == i64::MAX) {
                open.1 = last_ns;
            }
        }
    }

    /// Forgets spans that ended long before `now_ns`.
    pub fn prune(&self, now_ns: i64) {
        let mut s = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        for v in s.values_mut() {
            v.retain(|c| c.1 > now_ns - KEEP_NS);
        }
        s.retain(|_, v| !v.is_empty());
    }

    /// True when the socket source parses the connection on `t` at `ts_ns`.
    pub fn covers(&self, t: &Tuple, ts_ns: i64) -> bool {
        let s = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        s.get(t).is_some_and(|v| v.iter().any(|c| ts_ns >= c.0 - SLACK_NS && ts_ns <= c.1.saturating_add(SLACK_NS)))
    }

    pub fn set_watermark(&self, wall_ns: i64) {
        self.watermark_ns.fetch_max(wall_ns, Relaxed);
    }

    pub fn watermark(&self) -> i64 {
        self.watermark_ns.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_covers_its_connections_span_and_no_other() {
        let c = Claims::default();
        let t: Tuple = ([1; 16], 40000, [2; 16], 3306);
        let s = 1_000_000_000_000i64;
        assert!(!c.covers(&t, s));
        c.claim(t, s);
        assert!(c.covers(&t, s + 5_000_000_000), "open: covers what follows");
        assert!(c.covers(&t, s - SLACK_NS / 2), "a packet's time a little before the system call's");
        assert!(!c.covers(&t, s - 2 * SLACK_NS), "an earlier connection on the same tuple");
        assert!(!c.covers(&([1; 16], 40001, [2; 16], 3306), s));
        c.end(t, s + 1_000_000_000);
        assert!(c.covers(&t, s + 1_000_000_000));
        assert!(!c.covers(&t, s + 2_000_000_000), "a later connection reusing the tuple");
        c.prune(s + 1_000_000_000 + KEEP_NS + 1);
        assert!(!c.covers(&t, s));
        c.set_watermark(5);
        c.set_watermark(3);
        assert_eq!(c.watermark(), 5);
    }
}
