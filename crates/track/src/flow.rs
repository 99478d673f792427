//! Flows: goProbe-style aggregates per time bucket and interface, keyed by
//! (client, server, server port, protocol), with counters per direction.
//!
//! The flow table sits next to the connection table and shares its work: the
//! connection tracker already knows which side is the client (the SYN sender,
//! or Zeek's flip and port heuristics), and a connection remembers the slot of
//! its flow in the current bucket, so after a connection's first packet in a
//! bucket the flow update is a few additions, without hashing or probing.
//!
//! Rotation never stops packet processing: at a bucket boundary the full table
//! is swapped for an empty one and its flows are handed out as records. When
//! the table is full, a flow is emitted early (a partial record for the bucket,
//! counted) rather than dropped, so totals are never lost.

use std::sync::Arc;

use wirelog_decode::IpAddr16;
use wirelog_record::FlowRecord;

/// Key of a flow inside one bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowKey {
    pub client: IpAddr16,
    pub server: IpAddr16,
    pub server_port: u16,
    pub proto: u8,
    pub iface: u16,
}

impl FlowKey {
    #[inline]
    fn hash(&self, seed: u64) -> u64 {
        let c = u128::from_ne_bytes(self.client.0);
        let s = u128::from_ne_bytes(self.server.0);
        let mut h = seed
            ^ ((self.server_port as u64) << 24
                | (self.proto as u64) << 8
                | (self.iface as u64) << 40);
        for v in [c as u64, (c >> 64) as u64, s as u64, (s >> 64) as u64] {
            h = (h ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            h ^= h >> 29;
        }
        h.wrapping_mul(0xBF58_476D_1CE4_E5B9)
    }
}

/// Counters of one flow in the current bucket.
#[derive(Debug, Clone, Copy)]
struct FlowEntry {
    key: FlowKey,
    bytes_out: u64,
    bytes_in: u64,
    pkts_out: u32,
    pkts_in: u32,
    first_ns: i64,
    last_ns: i64,
    conns: u32,
    /// Position in `slots`, so rotation clears only the slots in use.
    slot: u32,
}

impl FlowEntry {
    #[inline]
    fn add(&mut self, from_client: bool, ip_bytes: u32, ts_ns: i64) {
        if from_client {
            self.bytes_out += ip_bytes as u64;
            self.pkts_out += 1;
        } else {
            self.bytes_in += ip_bytes as u64;
            self.pkts_in += 1;
        }
        self.last_ns = self.last_ns.max(ts_ns);
        self.first_ns = self.first_ns.min(ts_ns);
    }
}

/// Where a connection's packets are counted in the current bucket (8 bytes,
/// kept in every connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowSlot {
    /// The table's rotation count when the slot was taken: any rotation
    /// (bucket end or full table) makes every cached slot stale at once.
    pub epoch: u32,
    pub index: u32,
}

impl FlowSlot {
    pub const NONE: FlowSlot = FlowSlot {
        epoch: u32::MAX,
        index: u32::MAX,
    };
}

pub struct FlowTable {
    interval_ns: i64,
    max_flows: usize,
    seed: u64,
    /// Current bucket number; `i64::MIN` before the first packet.
    bucket: i64,
    /// Start of the next bucket: crossing it rotates (no division per packet).
    next_boundary: i64,
    /// Rotations so far (see [`FlowSlot::epoch`]).
    epoch: u32,
    /// Open addressing: slot -> entry index + 1 (0 = empty).
    slots: Vec<u32>,
    mask: usize,
    entries: Vec<FlowEntry>,
    ifaces: Vec<Arc<str>>,
    /// "if<N>" for interfaces without a name (`read` names none), made once:
    /// formatting it per flow record was ~680 instructions and two allocations.
    unnamed: Vec<Option<Arc<str>>>,
    out: Vec<FlowRecord>,
    /// Flows written before their bucket ended because the table was full.
    pub early_emits: u64,
}

impl FlowTable {
    pub fn new(interval_ns: i64, max_flows: usize, seed: u64) -> Self {
        let max_flows = max_flows.max(16);
        let nslots = (max_flows * 2).next_power_of_two();
        FlowTable {
            interval_ns: interval_ns.max(1),
            max_flows,
            seed,
            bucket: i64::MIN,
            next_boundary: i64::MIN,
            epoch: 0,
            slots: vec![0; nslots],
            mask: nslots - 1,
            entries: Vec::with_capacity(max_flows.min(1 << 16)),
            ifaces: Vec::new(),
            unnamed: Vec::new(),
            out: Vec::new(),
            early_emits: 0,
        }
    }

    /// Names of the interfaces, indexed by the `iface` of the keys.
    pub fn set_iface_name(&mut self, iface: u16, name: &str) {
        let i = iface as usize;
        if self.ifaces.len() <= i {
            self.ifaces.resize_with(i + 1, || Arc::from(""));
        }
        self.ifaces[i] = Arc::from(name);
    }

    pub fn bucket_of(&self, ts_ns: i64) -> i64 {
        ts_ns.div_euclid(self.interval_ns)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Start of the next bucket: a packet at or after it ends the current one.
    pub fn next_boundary(&self) -> i64 {
        self.next_boundary
    }

    /// Moves to the bucket of `ts_ns`, emitting the finished bucket's flows.
    #[inline]
    pub fn advance(&mut self, ts_ns: i64) {
        if ts_ns >= self.next_boundary {
            let b = self.bucket_of(ts_ns);
            if b > self.bucket {
                self.rotate();
                self.bucket = b;
                self.next_boundary = (b + 1).saturating_mul(self.interval_ns);
            }
        }
    }

    /// Emits every flow of the current bucket and starts an empty table.
    pub fn rotate(&mut self) {
        if self.entries.is_empty() {
            return;
        }
        self.epoch = self.epoch.wrapping_add(1);
        let bucket_ns = self.bucket.saturating_mul(self.interval_ns);
        for e in self.entries.drain(..) {
            self.slots[e.slot as usize] = 0;
            let iface = iface_name(&self.ifaces, &mut self.unnamed, e.key.iface);
            self.out.push(to_record(&e, bucket_ns, iface));
        }
    }

    /// Counts a packet through a connection's cached slot; false when the
    /// slot is stale and [`FlowTable::count`] must be called with the key.
    #[inline]
    pub fn count_cached(
        &mut self,
        slot: FlowSlot,
        from_client: bool,
        ip_bytes: u32,
        ts_ns: i64,
    ) -> bool {
        if slot.epoch != self.epoch {
            return false;
        }
        match self.entries.get_mut(slot.index as usize) {
            Some(e) => {
                e.add(from_client, ip_bytes, ts_ns);
                true
            }
            None => false,
        }
    }

    /// Adds `pkts` packets of `bytes` IP bytes, the last at `last_ns`,
    /// through a connection's cached slot (packets counted elsewhere, e.g.
    /// in the kernel); false when the slot is stale.
    pub fn add_cached(&mut self, slot: FlowSlot, from_client: bool, pkts: u64, bytes: u64, last_ns: i64) -> bool {
        if slot.epoch != self.epoch {
            return false;
        }
        let Some(e) = self.entries.get_mut(slot.index as usize) else {
            return false;
        };
        if from_client {
            e.bytes_out += bytes;
            e.pkts_out = e.pkts_out.wrapping_add(pkts as u32);
        } else {
            e.bytes_in += bytes;
            e.pkts_in = e.pkts_in.wrapping_add(pkts as u32);
        }
        e.last_ns = e.last_ns.max(last_ns);
        e.first_ns = e.first_ns.min(last_ns);
        true
    }

    /// Counts a packet of `key`'s flow (a connection's first in this bucket,
    /// counting one more connection) and returns the slot to cache.
    pub fn count(
        &mut self,
        key: &FlowKey,
        from_client: bool,
        ip_bytes: u32,
        ts_ns: i64,
    ) -> FlowSlot {
        let index = self.lookup_or_insert(key, ts_ns);
        let e = &mut self.entries[index as usize];
        e.conns += 1;
        e.add(from_client, ip_bytes, ts_ns);
        FlowSlot {
            epoch: self.epoch,
            index,
        }
    }

    fn lookup_or_insert(&mut self, key: &FlowKey, ts_ns: i64) -> u32 {
        let h = key.hash(self.seed);
        let mut i = h as usize & self.mask;
        loop {
            let s = self.slots[i];
            if s == 0 {
                break;
            }
            if self.entries[(s - 1) as usize].key == *key {
                return s - 1;
            }
            i = (i + 1) & self.mask;
        }
        if self.entries.len() >= self.max_flows {
            // Full: write the bucket so far and start again, so no count is lost.
            self.early_emits += self.entries.len() as u64;
            self.rotate();
            return self.lookup_or_insert(key, ts_ns);
        }
        self.entries.push(FlowEntry {
            key: *key,
            bytes_out: 0,
            bytes_in: 0,
            pkts_out: 0,
            pkts_in: 0,
            first_ns: ts_ns,
            last_ns: ts_ns,
            conns: 0,
            slot: i as u32,
        });
        let index = (self.entries.len() - 1) as u32;
        self.slots[i] = index + 1;
        index
    }

    /// Flow records of finished buckets since the last call.
    pub fn take_records(&mut self) -> std::vec::Drain<'_, FlowRecord> {
        self.out.drain(..)
    }

    /// [`FlowTable::take_records`], appended to `into` (see
    /// [`crate::Tracker::move_records_into`]).
    pub fn move_records_into(&mut self, into: &mut Vec<FlowRecord>) {
        crate::tracker::move_all(&mut self.out, into);
    }

    /// Bytes of table memory per flow (entry + two slots).
    /// Bytes a flow takes at most (its entry and its slots at full load).
    pub const fn max_bytes_per_flow() -> usize {
        std::mem::size_of::<FlowEntry>() + 4 * 4
    }

    pub fn bytes_per_flow(&self) -> usize {
        std::mem::size_of::<FlowEntry>() + self.slots.len() * 4 / self.max_flows
    }
}

/// The interface's name, or "if<N>" when it has none.
fn iface_name(ifaces: &[Arc<str>], unnamed: &mut Vec<Option<Arc<str>>>, iface: u16) -> Arc<str> {
    if let Some(name) = ifaces.get(iface as usize) {
        return name.clone();
    }
    let i = iface as usize;
    if unnamed.len() <= i {
        unnamed.resize(i + 1, None);
    }
    unnamed[i].get_or_insert_with(|| Arc::from(format!("if{iface}").as_str())).clone()
}

fn to_record(e: &FlowEntry, bucket_ns: i64, iface: Arc<str>) -> FlowRecord {
    FlowRecord {
        bucket_ns,
        iface,
        client: e.key.client,
        server: e.key.server,
        server_port: e.key.server_port,
        proto: e.key.proto,
        bytes_out: e.bytes_out,
        pkts_out: e.pkts_out as u64,
        bytes_in: e.bytes_in,
        pkts_in: e.pkts_in as u64,
        first_ns: e.first_ns,
        last_ns: e.last_ns,
        conns: e.conns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: u8, port: u16) -> FlowKey {
        FlowKey {
            client: IpAddr16::from_v4([10, 0, 0, c]),
            server: IpAddr16::from_v4([10, 0, 1, 1]),
            server_port: port,
            proto: 6,
            iface: 0,
        }
    }

    const MIN: i64 = 60_000_000_000;

    #[test]
    fn counts_per_direction_and_rotates_on_bucket_boundaries() {
        let mut t = FlowTable::new(5 * MIN, 1000, 1);
        let t0 = 1_700_000_100 * 1_000_000_000i64; // not aligned to 5 minutes
        t.advance(t0);
        let s = t.count(&key(1, 80), true, 60, t0);
        assert!(t.count_cached(s, false, 1500, t0 + 1000));
        assert!(t.count_cached(s, true, 52, t0 + 2000));
        t.count(&key(1, 80), true, 60, t0 + 3000); // a second connection of the same flow
        t.count(&key(2, 443), true, 60, t0 + 4000);
        assert_eq!(t.take_records().count(), 0);
        // Next bucket: everything so far is emitted, aligned to the wall clock.
        let next = (t0 / (5 * MIN) + 1) * 5 * MIN;
        t.advance(next);
        assert!(
            !t.count_cached(s, true, 40, next),
            "a slot of the last bucket is stale"
        );
        t.count(&key(1, 80), true, 40, next);
        let mut recs: Vec<FlowRecord> = t.take_records().collect();
        recs.sort_by_key(|r| r.server_port);
        assert_eq!(recs.len(), 2);
        let r = &recs[0];
        assert_eq!(r.bucket_ns % (5 * MIN), 0);
        assert_eq!(
            (r.bytes_out, r.pkts_out, r.bytes_in, r.pkts_in, r.conns),
            (172, 3, 1500, 1, 2)
        );
        assert_eq!((r.first_ns, r.last_ns), (t0, t0 + 3000));
        t.rotate();
        let r: Vec<FlowRecord> = t.take_records().collect();
        assert_eq!((r.len(), r[0].bytes_out, r[0].conns), (1, 40, 1));
    }

    #[test]
    fn flows_of_unnamed_interfaces_are_named_by_number() {
        let mut t = FlowTable::new(5 * MIN, 1000, 1);
        t.advance(0);
        t.set_iface_name(2, "eth0");
        for (c, iface) in [(1, 0), (2, 0), (3, 2), (4, 7), (5, 1)] {
            t.count(&FlowKey { iface, ..key(c, 80) }, true, 60, 1);
        }
        t.rotate();
        t.advance(5 * MIN);
        t.count(&FlowKey { iface: 7, ..key(6, 80) }, true, 60, 5 * MIN);
        t.rotate();
        let mut names: Vec<(u8, String)> =
            t.take_records().map(|r| (r.client.0[15], r.iface.to_string())).collect();
        names.sort();
        // Below a named interface the name is empty, as before names were cached.
        let want = [(1, ""), (2, ""), (3, "eth0"), (4, "if7"), (5, ""), (6, "if7")];
        assert_eq!(names, want.map(|(c, n)| (c, n.to_string())));
        let mut t = FlowTable::new(5 * MIN, 1000, 1);
        t.advance(0);
        t.count(&key(1, 80), true, 60, 1);
        t.count(&key(2, 80), true, 60, 1);
        t.rotate();
        assert!(t.take_records().all(|r| &*r.iface == "if0"));
    }

    #[test]
    fn a_full_table_emits_early_and_loses_nothing() {
        let mut t = FlowTable::new(5 * MIN, 16, 1);
        t.advance(0);
        let mut total = 0;
        for i in 0..100u16 {
            t.count(&key((i % 50) as u8, i), true, 100, i as i64);
            total += 100;
        }
        t.rotate();
        let recs: Vec<FlowRecord> = t.take_records().collect();
        assert!(t.early_emits > 0);
        assert_eq!(recs.iter().map(|r| r.bytes_out).sum::<u64>(), total);
    }
}
