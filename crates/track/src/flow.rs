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
//!
//! A flow costs 32 bytes plus its index slots (issue 18: <= 40 per flow):
//! - the server side (server address, port, protocol, interface) is interned
//!   per bucket as a "service", which many flows share (servers repeat, clients
//!   do not); an IPv4 client is its own 4-byte id, an IPv6 client is interned;
//! - counters are narrow (u32 bytes, 24-bit packets, 16-bit connections): a
//!   packet that would overflow one writes the flow's row so far and starts a
//!   new row for the rest of the bucket, so totals stay exact (the only
//!   visible effect: more than one row for a flow in a bucket);
//! - first and last are u32 offsets from the bucket start in half
//!   microseconds, which keeps every output exact (flows.log rounds to the
//!   microsecond, ClickHouse floors to it, the store floors to the second);
//!   a time the offset cannot hold (before the bucket start, or more than
//!   35.8 minutes into a longer bucket) moves the flow's times to a side
//!   table of exact nanoseconds.

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
    /// The capture interface's id: the kernel's ifindex on `-i any`, which
    /// passes 65,535 on hosts that made and removed many interfaces.
    pub iface: u32,
}

/// The server side of a flow, interned per bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Service {
    server: IpAddr16,
    port: u16,
    iface: u32,
    proto: u8,
    /// The flows' client ids are interned IPv6 addresses, not IPv4 addresses.
    client_v6: bool,
}

#[inline]
fn mix(mut h: u64, v: u64) -> u64 {
    h = (h ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^ (h >> 29)
}

#[inline]
fn finish(h: u64) -> u64 {
    h.wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

fn addr_hash(a: &IpAddr16, seed: u64) -> u64 {
    let v = u128::from_ne_bytes(a.0);
    finish(mix(mix(seed, v as u64), (v >> 64) as u64))
}

impl Service {
    fn hash(&self, seed: u64) -> u64 {
        let v = u128::from_ne_bytes(self.server.0);
        let h = seed
            ^ ((self.port as u64) << 24
                | (self.proto as u64) << 8
                | (self.iface as u64) << 40
                | self.client_v6 as u64);
        finish(mix(mix(h, v as u64), (v >> 64) as u64))
    }
}

#[inline]
fn flow_hash(client: u32, service: u32, seed: u64) -> u64 {
    finish(mix(seed, (service as u64) << 32 | client as u64))
}

/// Open addressing over ids kept elsewhere: slot = id + 1 (0 = empty). It
/// grows with what it indexes, by half each time (not doubling: at most 8 and
/// on average ~6.7 bytes of slots per id instead of 5.3-10.7), so a small
/// bucket touches little memory and a big one little more than it needs.
///
/// A slot also keeps some bits of its id's hash above the id (as many as
/// the largest id leaves free: 12 at a million flows), so a probe that meets
/// another id's slot moves on without reading that id's entry. At the load
/// the index runs at (up to 3/4) a miss passes several full slots, and each
/// entry read there was a cache miss of its own.
struct Index {
    slots: Vec<u32>,
    /// The slot bits that hold id + 1; the bits above hold the hash tag.
    id_mask: u32,
}

const MIN_SLOTS: usize = 1024;

impl Index {
    /// An index for ids below `max_ids`.
    fn new(max_ids: usize) -> Self {
        let id_bits = usize::BITS - max_ids.leading_zeros();
        Index {
            slots: vec![0; MIN_SLOTS],
            id_mask: u32::MAX.checked_shr(32u32.saturating_sub(id_bits)).unwrap_or(0).max(1),
        }
    }

    /// The bits of `h` a slot keeps beside its id (the position in the table
    /// comes from `h`'s top bits, the tag from its low ones).
    #[inline]
    fn tag(&self, h: u64) -> u32 {
        h as u32 & !self.id_mask
    }

    /// Puts `id` (of hash `h`) in the empty slot `pos`.
    #[inline]
    fn set(&mut self, pos: usize, h: u64, id: u32) {
        debug_assert!(id < self.id_mask);
        self.slots[pos] = self.tag(h) | (id + 1);
    }

    /// The id `is` accepts on `h`'s probe sequence, or the empty slot where it
    /// would go.
    #[inline]
    fn find(&self, h: u64, mut is: impl FnMut(u32) -> bool) -> Result<u32, usize> {
        let n = self.slots.len();
        // The hash's top bits scaled to the table (any size, no division).
        let mut i = ((h as u128 * n as u128) >> 64) as usize;
        let tag = self.tag(h);
        loop {
            let s = self.slots[i];
            if s == 0 {
                return Err(i);
            }
            let id = (s & self.id_mask) - 1;
            if s & !self.id_mask == tag && is(id) {
                return Ok(id);
            }
            i += 1;
            if i == n {
                i = 0;
            }
        }
    }

    /// Whether one more id would load the slots past 3/4.
    #[inline]
    fn full_at(&self, len: usize) -> bool {
        (len + 1) * 4 > self.slots.len() * 3
    }

    /// Half again as many slots, refilled with ids 0.. of the given hashes.
    #[cold]
    fn grow(&mut self, hashes: impl Iterator<Item = u64>) {
        let n = self.slots.len() / 2 * 3;
        self.slots = vec![0; n];
        for (id, h) in hashes.enumerate() {
            if let Err(i) = self.find(h, |_| false) {
                self.set(i, h, id as u32);
            }
        }
    }

    fn clear(&mut self) {
        self.slots.fill(0);
    }
}

/// Values interned per bucket: id = position.
struct Interner<T> {
    items: Vec<T>,
    index: Index,
}

impl<T: Copy + PartialEq> Interner<T> {
    /// For at most `max_ids` distinct values.
    fn new(max_ids: usize) -> Self {
        Interner {
            items: Vec::new(),
            index: Index::new(max_ids),
        }
    }

    #[inline]
    fn intern(&mut self, v: &T, seed: u64, hash: fn(&T, u64) -> u64) -> u32 {
        let h = hash(v, seed);
        let items = &self.items;
        match self.index.find(h, |id| items[id as usize] == *v) {
            Ok(id) => id,
            Err(mut pos) => {
                if self.index.full_at(self.items.len()) {
                    self.index.grow(self.items.iter().map(|x| hash(x, seed)));
                    pos = self.index.find(h, |_| false).unwrap_err();
                }
                let id = self.items.len() as u32;
                self.items.push(*v);
                self.index.set(pos, h, id);
                id
            }
        }
    }

    fn clear(&mut self) {
        if !self.items.is_empty() {
            self.items.clear();
            self.index.clear();
        }
    }
}

/// Time unit of the entries' first/last: flooring a time to half microseconds
/// keeps both its floored and its rounded microsecond (and second).
const TICK_NS: i64 = 500;
/// `first` of an entry whose times are in [`FlowTable::wide`] (`last` is the position there).
const WIDE: u32 = u32::MAX;
const PKT_BITS: u32 = 24;
const PKT_MAX: u64 = (1 << PKT_BITS) - 1;
const CONN_SHIFT: u32 = 2 * PKT_BITS;
const CONN_MAX: u64 = (1 << (64 - CONN_SHIFT)) - 1;

/// Counters of one flow in the current bucket (32 bytes).
#[derive(Debug, Clone, Copy)]
struct FlowEntry {
    /// IPv4 address (big-endian bits) or id of an interned IPv6 address.
    client: u32,
    service: u32,
    /// IP bytes from the client, to the client.
    bytes: [u32; 2],
    /// Ticks from the table's `tick_base` (or [`WIDE`]).
    first: u32,
    last: u32,
    /// Packets from the client (bits 0-23), to it (24-47), connections (48-63).
    counts: u64,
}

impl FlowEntry {
    /// Counts a packet; false (nothing changed) when a counter would overflow
    /// or the tick is not an offset the entry can hold.
    #[inline]
    fn add(&mut self, dir: usize, ip_bytes: u32, tick: u32) -> bool {
        let (bytes, over) = self.bytes[dir].overflowing_add(ip_bytes);
        let shift = dir as u32 * PKT_BITS;
        if over | ((self.counts >> shift) & PKT_MAX == PKT_MAX) | (tick == WIDE) | (self.first == WIDE) {
            return false;
        }
        self.bytes[dir] = bytes;
        self.counts += 1 << shift;
        self.first = self.first.min(tick);
        self.last = self.last.max(tick);
        true
    }

    fn pkts(&self, dir: usize) -> u64 {
        (self.counts >> (dir as u32 * PKT_BITS)) & PKT_MAX
    }

    fn conns(&self) -> u64 {
        self.counts >> CONN_SHIFT
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
    /// The `max_flows` the table was made for (its index's and interners' size).
    index_max: usize,
    seed: u64,
    /// Current bucket number; `i64::MIN` before the first packet.
    bucket: i64,
    /// Start of the next bucket: crossing it rotates (no division per packet).
    next_boundary: i64,
    /// The bucket start floored to a tick: entries' times count from here.
    tick_base: i64,
    /// Rotations so far (see [`FlowSlot::epoch`]).
    epoch: u32,
    /// Flow entries by (client, service).
    index: Index,
    entries: Vec<FlowEntry>,
    /// Entries of the bucket [`FlowTable::rotate_some`] has emitted so far.
    rotated: usize,
    services: Interner<Service>,
    v6_clients: Interner<IpAddr16>,
    /// Exact (first, last) of the entries whose times do not fit their ticks.
    wide: Vec<(i64, i64)>,
    /// Interface names given by `set_iface_name`, sorted by id (a few, or
    /// a few hundred on a container host: ids are ifindexes, sparse and up
    /// to `u32::MAX`, so not a vector indexed by id).
    ifaces: Vec<(u32, Arc<str>)>,
    /// One past the highest named id: an id below it without a name of its
    /// own is named "" (what the records said when names were a vector
    /// indexed by id; kept so that output does not change).
    named_below: u64,
    /// "if<N>" for interfaces without a name (`read` names none), sorted by
    /// id, made once when a flow first names the interface: formatting it
    /// per flow record was ~680 instructions and two allocations.
    unnamed: Vec<(u32, Arc<str>)>,
    empty: Arc<str>,
    out: Vec<FlowRecord>,
    /// Flow records written before their bucket ended: the table was full,
    /// or a counter was (those also in `overflow_emits`).
    pub early_emits: u64,
    /// Flow records written before their bucket ended because a counter was full.
    pub overflow_emits: u64,
}

impl FlowTable {
    pub fn new(interval_ns: i64, max_flows: usize, seed: u64) -> Self {
        let max_flows = max_flows.max(16);
        FlowTable {
            interval_ns: interval_ns.max(1),
            max_flows,
            index_max: max_flows,
            seed,
            bucket: i64::MIN,
            next_boundary: i64::MIN,
            tick_base: 0,
            epoch: 0,
            // A lookup interns its service before it finds the table full:
            // one id more than there can be flows.
            index: Index::new(max_flows + 1),
            entries: Vec::with_capacity(max_flows.min(1 << 16)),
            rotated: 0,
            services: Interner::new(max_flows + 1),
            v6_clients: Interner::new(max_flows + 1),
            wide: Vec::new(),
            ifaces: Vec::new(),
            named_below: 0,
            unnamed: Vec::new(),
            empty: Arc::from(""),
            out: Vec::new(),
            early_emits: 0,
            overflow_emits: 0,
        }
    }

    /// Names the interface whose keys carry `iface`.
    pub fn set_iface_name(&mut self, iface: u32, name: &str) {
        match self.ifaces.binary_search_by_key(&iface, |(id, _)| *id) {
            Ok(at) => self.ifaces[at].1 = Arc::from(name),
            Err(at) => self.ifaces.insert(at, (iface, Arc::from(name))),
        }
        self.named_below = self.named_below.max(u64::from(iface) + 1);
    }

    pub fn bucket_of(&self, ts_ns: i64) -> i64 {
        ts_ns.div_euclid(self.interval_ns)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Most flows per bucket now.
    pub fn max_flows(&self) -> usize {
        self.max_flows
    }

    /// Moves the limit on flows per bucket, at most the one the table was
    /// made for (the tracker's `SharedMemory`). Entries above a lowered
    /// limit stay until the next new flow writes the bucket early.
    pub fn set_max_flows(&mut self, max_flows: usize) {
        self.max_flows = max_flows.clamp(16, self.index_max);
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
                self.tick_base = b
                    .saturating_mul(self.interval_ns)
                    .div_euclid(TICK_NS)
                    .saturating_mul(TICK_NS);
            }
        }
    }

    /// Emits every flow of the current bucket and starts an empty table.
    pub fn rotate(&mut self) {
        self.rotate_some(usize::MAX);
    }

    /// [`FlowTable::rotate`] in steps, for the end of input: emits the
    /// records of at most `max` more entries and says whether the bucket is
    /// all written (the table then starts empty). At the end of a read of
    /// 540 k flows, emitting them at once held 540 k records (60 MB) in one
    /// vector; the caller takes them between steps. No flow may be counted
    /// between the steps of one rotation.
    pub fn rotate_some(&mut self, max: usize) -> bool {
        if self.entries.is_empty() {
            return true;
        }
        let end = self.entries.len().min(self.rotated.saturating_add(max));
        for i in self.rotated..end {
            // An entry left empty by counts written as a row of their own.
            if self.entries[i].counts != 0 {
                let r = self.to_record(&self.entries[i]);
                self.out.push(r);
            }
        }
        if end < self.entries.len() {
            self.rotated = end;
            return false;
        }
        self.rotated = 0;
        self.epoch = self.epoch.wrapping_add(1);
        self.entries.clear();
        self.index.clear();
        self.services.clear();
        self.v6_clients.clear();
        self.wide.clear();
        true
    }

    /// `ts_ns` in ticks from the bucket start, or [`WIDE`] when it does not fit.
    #[inline]
    fn tick(&self, ts_ns: i64) -> u32 {
        let d = ts_ns.wrapping_sub(self.tick_base) as u64;
        if d < WIDE as u64 * TICK_NS as u64 {
            (d / TICK_NS as u64) as u32
        } else {
            WIDE
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
        let tick = self.tick(ts_ns);
        let dir = !from_client as usize;
        match self.entries.get_mut(slot.index as usize) {
            Some(e) => {
                if !e.add(dir, ip_bytes, tick) {
                    self.add_slow(slot.index, dir, 1, ip_bytes as u64, ts_ns);
                }
                true
            }
            None => false,
        }
    }

    /// Adds `pkts` packets of `bytes` IP bytes, the last at `last_ns`,
    /// through a connection's cached slot (packets counted elsewhere, e.g.
    /// in the kernel); false when the slot is stale.
    pub fn add_cached(&mut self, slot: FlowSlot, from_client: bool, pkts: u64, bytes: u64, last_ns: i64) -> bool {
        if slot.epoch != self.epoch || slot.index as usize >= self.entries.len() {
            return false;
        }
        self.add_slow(slot.index, !from_client as usize, pkts, bytes, last_ns);
        true
    }

    /// Adds counts that may not fit the entry (or a time its ticks cannot
    /// hold): a row that would overflow is written first and the entry starts
    /// over; counts that do not fit even an empty entry are a row of their own.
    #[cold]
    #[inline(never)]
    fn add_slow(&mut self, index: u32, dir: usize, pkts: u64, bytes: u64, ts_ns: i64) {
        let tick = self.tick(ts_ns);
        let e = self.entries[index as usize];
        let fits = |e: &FlowEntry| {
            e.bytes[dir] as u64 + bytes <= u32::MAX as u64 && e.pkts(dir) + pkts <= PKT_MAX
        };
        if !fits(&e) {
            self.restart(index, ts_ns);
            let e = &self.entries[index as usize];
            if !fits(e) {
                let mut r = self.to_record(e);
                r.conns = 0;
                if dir == 0 {
                    (r.bytes_out, r.pkts_out) = (bytes, pkts);
                } else {
                    (r.bytes_in, r.pkts_in) = (bytes, pkts);
                }
                self.out.push(r);
                self.overflow_emits += 1;
                self.early_emits += 1;
                return;
            }
        }
        let e = &mut self.entries[index as usize];
        e.bytes[dir] += bytes as u32;
        e.counts += pkts << (dir as u32 * PKT_BITS);
        self.note_time(index, tick, ts_ns, false);
    }

    /// Takes `ts_ns` (whose tick is `tick`) into entry `index`'s first and
    /// last, or makes them both `ts_ns` when `restart`; the times move to
    /// [`FlowTable::wide`] when the ticks cannot hold them.
    fn note_time(&mut self, index: u32, tick: u32, ts_ns: i64, restart: bool) {
        let base = self.tick_base;
        let e = &mut self.entries[index as usize];
        let (lo, hi) = if e.first == WIDE {
            self.wide[e.last as usize]
        } else {
            (base + e.first as i64 * TICK_NS, base + e.last as i64 * TICK_NS)
        };
        let (lo, hi) = if restart { (ts_ns, ts_ns) } else { (lo.min(ts_ns), hi.max(ts_ns)) };
        if e.first == WIDE {
            self.wide[e.last as usize] = (lo, hi);
        } else if tick == WIDE {
            e.first = WIDE;
            e.last = self.wide.len() as u32;
            self.wide.push((lo, hi));
        } else if restart {
            (e.first, e.last) = (tick, tick);
        } else {
            e.first = e.first.min(tick);
            e.last = e.last.max(tick);
        }
    }

    /// Writes the row of entry `index` so far (a counter is full) and starts
    /// its next row at `ts_ns`, with zero counts.
    #[cold]
    fn restart(&mut self, index: u32, ts_ns: i64) {
        self.overflow_emits += 1;
        self.early_emits += 1;
        let r = self.to_record(&self.entries[index as usize]);
        self.out.push(r);
        let tick = self.tick(ts_ns);
        let e = &mut self.entries[index as usize];
        e.bytes = [0; 2];
        e.counts = 0;
        self.note_time(index, tick, ts_ns, true);
    }

    fn time_ns(&self, tick: u32) -> i64 {
        self.tick_base + tick as i64 * TICK_NS
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
        if e.conns() == CONN_MAX {
            self.restart(index, ts_ns);
        }
        let tick = self.tick(ts_ns);
        let dir = !from_client as usize;
        let e = &mut self.entries[index as usize];
        e.counts += 1 << CONN_SHIFT;
        if !e.add(dir, ip_bytes, tick) {
            self.add_slow(index, dir, 1, ip_bytes as u64, ts_ns);
        }
        FlowSlot {
            epoch: self.epoch,
            index,
        }
    }

    fn lookup_or_insert(&mut self, key: &FlowKey, ts_ns: i64) -> u32 {
        let client_v6 = !key.client.is_v4();
        let service = Service {
            server: key.server,
            port: key.server_port,
            iface: key.iface,
            proto: key.proto,
            client_v6,
        };
        let service = self.services.intern(&service, self.seed, Service::hash);
        self.name_unnamed(key.iface);
        let client = if client_v6 {
            self.v6_clients.intern(&key.client, self.seed, addr_hash)
        } else {
            u32::from_be_bytes([key.client.0[12], key.client.0[13], key.client.0[14], key.client.0[15]])
        };
        let h = flow_hash(client, service, self.seed);
        let entries = &self.entries;
        let pos = match self
            .index
            .find(h, |i| entries[i as usize].client == client && entries[i as usize].service == service)
        {
            Ok(i) => return i,
            Err(pos) => pos,
        };
        if self.entries.len() >= self.max_flows {
            // Full: write the bucket so far and start again, so no count is lost.
            self.early_emits += self.entries.len() as u64;
            self.rotate();
            return self.lookup_or_insert(key, ts_ns);
        }
        let pos = if self.index.full_at(self.entries.len()) {
            let seed = self.seed;
            self.index
                .grow(self.entries.iter().map(|e| flow_hash(e.client, e.service, seed)));
            self.index.find(h, |_| false).unwrap_err()
        } else {
            pos
        };
        self.entries.push(FlowEntry {
            client,
            service,
            bytes: [0; 2],
            first: 0,
            last: 0,
            counts: 0,
        });
        let index = (self.entries.len() - 1) as u32;
        self.index.set(pos, h, index);
        self.note_time(index, self.tick(ts_ns), ts_ns, true);
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

    /// Bytes a flow takes at most: its entry, and an interned service and
    /// IPv6 client of its own, each with the index slots of a table just
    /// grown (load 1/2: 8 bytes of slots per id).
    pub const fn max_bytes_per_flow() -> usize {
        std::mem::size_of::<FlowEntry>()
            + std::mem::size_of::<Service>()
            + std::mem::size_of::<IpAddr16>()
            + 3 * 8
    }

    /// Bytes of table memory per flow now (entries, interned values, slots).
    pub fn bytes_per_flow(&self) -> usize {
        if self.entries.is_empty() {
            return std::mem::size_of::<FlowEntry>();
        }
        let n = self.entries.len();
        let bytes = self.entries.len() * std::mem::size_of::<FlowEntry>()
            + self.services.items.len() * std::mem::size_of::<Service>()
            + self.v6_clients.items.len() * std::mem::size_of::<IpAddr16>()
            + self.wide.len() * 16
            + (self.index.slots.len() + self.services.index.slots.len() + self.v6_clients.index.slots.len()) * 4;
        bytes / n
    }

    /// Makes the "if<N>" name of `iface` if it has no name and none was made.
    #[inline]
    fn name_unnamed(&mut self, iface: u32) {
        if u64::from(iface) >= self.named_below && self.unnamed.binary_search_by_key(&iface, |(id, _)| *id).is_err() {
            self.make_unnamed(iface);
        }
    }

    #[cold]
    #[inline(never)]
    fn make_unnamed(&mut self, iface: u32) {
        if let Err(at) = self.unnamed.binary_search_by_key(&iface, |(id, _)| *id) {
            self.unnamed.insert(at, (iface, Arc::from(format!("if{iface}").as_str())));
        }
    }

    /// The interface's name, or "if<N>" when it has none.
    fn iface_name(&self, iface: u32) -> Arc<str> {
        let find = |names: &[(u32, Arc<str>)]| {
            names.binary_search_by_key(&iface, |(id, _)| *id).ok().map(|at| names[at].1.clone())
        };
        if u64::from(iface) < self.named_below {
            return find(&self.ifaces).unwrap_or_else(|| self.empty.clone());
        }
        find(&self.unnamed).unwrap_or_else(|| Arc::from(format!("if{iface}").as_str()))
    }

    fn to_record(&self, e: &FlowEntry) -> FlowRecord {
        let s = &self.services.items[e.service as usize];
        let client = if s.client_v6 {
            self.v6_clients.items[e.client as usize]
        } else {
            IpAddr16::from_v4(e.client.to_be_bytes())
        };
        let (first_ns, last_ns) = if e.first == WIDE {
            self.wide[e.last as usize]
        } else {
            (self.time_ns(e.first), self.time_ns(e.last))
        };
        FlowRecord {
            bucket_ns: self.bucket.saturating_mul(self.interval_ns),
            iface: self.iface_name(s.iface),
            client,
            server: s.server,
            server_port: s.port,
            proto: s.proto,
            bytes_out: e.bytes[0] as u64,
            pkts_out: e.pkts(0),
            bytes_in: e.bytes[1] as u64,
            pkts_in: e.pkts(1),
            first_ns,
            last_ns,
            conns: e.conns() as u32,
        }
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
    fn index_slots_keep_ids_and_tags_apart() {
        // Id bits from 4 (15 ids: 28 tag bits) to 21 (1 M ids: 11 tag bits),
        // and past the first growth (1,024 slots).
        for max_ids in [15usize, 16, 1023, 1024, 1 << 20] {
            let mut ix = Index::new(max_ids);
            let mut hashes = Vec::new();
            for id in 0..max_ids.min(3000) {
                let h = finish(mix(7, id as u64));
                if ix.full_at(id) {
                    ix.grow(hashes.iter().copied());
                }
                let pos = ix.find(h, |_| false).unwrap_err();
                ix.set(pos, h, id as u32);
                hashes.push(h);
            }
            for (id, &h) in hashes.iter().enumerate() {
                assert_eq!(ix.find(h, |i| i as usize == id), Ok(id as u32), "{max_ids} ids, id {id}");
            }
            // Hashes no id has are not found.
            for k in hashes.len()..hashes.len() + 1000 {
                let h = finish(mix(7, k as u64));
                assert!(ix.find(h, |i| hashes[i as usize] == h).is_err(), "{max_ids} ids, stranger {k}");
            }
        }
    }

    #[test]
    fn flows_of_unnamed_interfaces_are_named_by_number() {
        let mut t = FlowTable::new(5 * MIN, 1000, 1);
        t.advance(0);
        t.set_iface_name(2, "eth0");
        for (c, iface) in [(1, 0u32), (2, 0), (3, 2), (4, 7), (5, 1)] {
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

    /// The end of input writes the bucket in steps, the records taken
    /// between them: the same records in the same order as at once, and
    /// the table empty and in a new epoch after the last step.
    #[test]
    fn a_bucket_written_in_steps_is_the_bucket_written_at_once() {
        let fill = || {
            let mut t = FlowTable::new(5 * MIN, 1000, 1);
            t.advance(0);
            for i in 0..300u16 {
                t.count(&key((i % 200) as u8, 1000 + i % 7), i % 3 != 0, 60 + i as u32, i as i64);
            }
            t
        };
        let mut at_once = fill();
        at_once.rotate();
        let want: Vec<FlowRecord> = at_once.take_records().collect();
        assert!(want.len() > 64, "{}", want.len());
        let mut stepped = fill();
        let (mut got, mut steps) = (Vec::new(), 0);
        while !stepped.rotate_some(64) {
            let step: Vec<FlowRecord> = stepped.take_records().collect();
            assert!(!step.is_empty() && step.len() <= 64, "{}", step.len());
            got.extend(step);
            steps += 1;
        }
        got.extend(stepped.take_records());
        assert_eq!(got, want);
        assert_eq!(steps, want.len().div_ceil(64) - 1);
        // Emptied: a slot of the old bucket is stale, a new flow is the only record.
        assert!(stepped.entries.is_empty() && stepped.rotate_some(64));
        let s = stepped.count(&key(1, 80), true, 60, 500);
        assert!(stepped.count_cached(s, false, 40, 501));
        stepped.rotate();
        assert_eq!(stepped.take_records().count(), 1);
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

    fn sums(recs: &[FlowRecord]) -> (u64, u64, u64, u64, u64) {
        recs.iter().fold((0, 0, 0, 0, 0), |a, r| {
            (a.0 + r.bytes_out, a.1 + r.pkts_out, a.2 + r.bytes_in, a.3 + r.pkts_in, a.4 + r.conns as u64)
        })
    }

    #[test]
    fn an_entry_is_32_bytes() {
        assert_eq!(std::mem::size_of::<FlowEntry>(), 32);
    }

    #[test]
    fn a_full_byte_counter_starts_a_new_row_and_keeps_totals() {
        let mut t = FlowTable::new(5 * MIN, 1000, 1);
        t.advance(0);
        let s = t.count(&key(1, 80), true, 1 << 30, 10_000);
        for i in 0..4 {
            assert!(t.count_cached(s, true, 1 << 30, 20_000 + i * 1000));
        }
        assert!(t.count_cached(s, false, 40, 30_000));
        // Counted elsewhere (the kernel): more than an empty entry holds.
        assert!(t.add_cached(s, false, 3, 5 << 30, 40_000));
        t.rotate();
        let recs: Vec<FlowRecord> = t.take_records().collect();
        assert_eq!(t.overflow_emits, 3);
        assert_eq!(recs.len(), 3, "{recs:?}");
        assert_eq!(sums(&recs), (5 << 30, 5, 40 + (5 << 30), 4, 1));
        // The first row holds what fit, until the packet that did not.
        assert_eq!((recs[0].bytes_out, recs[0].pkts_out, recs[0].conns), (3 << 30, 3, 1));
        assert_eq!((recs[0].first_ns, recs[0].last_ns), (10_000, 21_000));
        assert_eq!((recs[1].bytes_out, recs[1].pkts_out, recs[1].bytes_in), (2 << 30, 2, 40));
        assert_eq!((recs[1].first_ns, recs[1].last_ns, recs[1].conns), (22_000, 30_000, 0));
        assert_eq!((recs[2].bytes_in, recs[2].pkts_in, recs[2].first_ns), (5 << 30, 3, 40_000));
        assert!(recs.iter().all(|r| r.client == recs[0].client && r.bucket_ns == 0));
    }

    #[test]
    fn a_full_packet_or_connection_counter_starts_a_new_row() {
        let mut t = FlowTable::new(5 * MIN, 1000, 1);
        t.advance(0);
        let s = t.count(&key(1, 80), true, 60, 0);
        t.entries[s.index as usize].counts |= PKT_MAX << PKT_BITS | (CONN_MAX - 1) << CONN_SHIFT;
        t.entries[s.index as usize].counts -= 1 << PKT_BITS; // one packet in before full
        assert!(t.count_cached(s, false, 60, 1));
        assert_eq!(t.overflow_emits, 0);
        assert!(t.count_cached(s, false, 60, 2));
        assert_eq!(t.overflow_emits, 1);
        t.count(&key(1, 80), true, 60, 3);
        assert_eq!(t.overflow_emits, 1);
        t.entries[s.index as usize].counts |= CONN_MAX << CONN_SHIFT;
        t.count(&key(1, 80), true, 60, 4);
        assert_eq!(t.overflow_emits, 2);
        t.rotate();
        let recs: Vec<FlowRecord> = t.take_records().collect();
        assert_eq!(recs.len(), 3);
        assert_eq!(recs[0].pkts_in, PKT_MAX);
        assert_eq!((recs[2].pkts_out, recs[2].conns), (1, 1));
    }

    #[test]
    fn times_keep_their_rounded_and_floored_microsecond() {
        let mut t = FlowTable::new(7, 1000, 1); // a bucket start off the tick grid
        let t0 = 1_700_000_000_123_456_789i64;
        t.advance(t0);
        let s = t.count(&key(1, 80), true, 60, t0 + 1);
        assert!(t.count_cached(s, true, 60, t0 + 2));
        t.rotate();
        let r = t.take_records().next().unwrap();
        for (got, want) in [(r.first_ns, t0 + 1), (r.last_ns, t0 + 2)] {
            assert_eq!(got.div_euclid(1000), want.div_euclid(1000));
            assert_eq!((got + 500) / 1000, (want + 500) / 1000);
            assert_eq!(got.div_euclid(500), want.div_euclid(500));
        }
    }

    #[test]
    fn times_out_of_tick_range_stay_exact() {
        let day = 24 * 60 * MIN;
        let mut t = FlowTable::new(day, 1000, 1);
        t.advance(0);
        let late = 23 * 60 * MIN + 123_456_789;
        let s = t.count(&key(1, 80), true, 60, MIN);
        assert!(t.count_cached(s, false, 60, late));
        assert!(t.count_cached(s, false, 60, -5)); // a packet from before the bucket
        t.count(&key(2, 80), true, 60, late + 1);
        t.rotate();
        let mut recs: Vec<FlowRecord> = t.take_records().collect();
        recs.sort_by_key(|r| r.client);
        assert_eq!((recs[0].first_ns, recs[0].last_ns), (-5, late));
        assert_eq!((recs[1].first_ns, recs[1].last_ns), (late + 1, late + 1));
        assert_eq!(sums(&recs), (120, 2, 120, 2, 2));
    }

    #[test]
    fn ipv6_clients_and_services_are_interned_per_bucket() {
        let mut t = FlowTable::new(5 * MIN, 1000, 1);
        t.advance(0);
        let v6 = |last: u8| {
            let mut a = [0u8; 16];
            a[0] = 0x20;
            a[1] = 0x01;
            a[15] = last;
            IpAddr16(a)
        };
        let k = |c: IpAddr16, port: u16| FlowKey {
            client: c,
            server: v6(100),
            server_port: port,
            proto: 6,
            iface: 3,
        };
        for round in 0..2 {
            for c in 0..50u8 {
                for port in [80, 443] {
                    t.count(&k(v6(c), port), true, 60, round);
                }
            }
        }
        t.count(&key(1, 80), true, 60, 5);
        assert_eq!((t.len(), t.services.items.len(), t.v6_clients.items.len()), (101, 3, 50));
        t.rotate();
        let recs: Vec<FlowRecord> = t.take_records().collect();
        assert_eq!(recs.len(), 101);
        assert!(recs[..100].iter().all(|r| r.server == v6(100) && r.conns == 2 && r.pkts_out == 2));
        assert_eq!(recs[7].client, v6(3));
        assert_eq!((recs[100].client, recs[100].server_port), (key(1, 80).client, 80));
        assert_eq!(&*recs[100].iface, "if0");
        assert_eq!((t.services.items.len(), t.v6_clients.items.len()), (0, 0));
    }

    #[test]
    fn the_index_grows_with_the_flows() {
        let mut t = FlowTable::new(5 * MIN, 1 << 20, 1);
        t.advance(0);
        for i in 0..100_000u32 {
            let mut k = key(0, 80);
            k.client = IpAddr16::from_v4(i.to_be_bytes());
            t.count(&k, true, 60, 0);
        }
        assert_eq!(t.len(), 100_000);
        assert!(t.index.slots.len() * 3 >= 100_000 * 4 && t.index.slots.len() <= 100_000 * 2);
        let mut k = key(0, 80);
        k.client = IpAddr16::from_v4(77_777u32.to_be_bytes());
        let s = t.count(&k, false, 60, 1);
        assert_eq!(s.index, 77_777);
        t.rotate();
        let recs: Vec<FlowRecord> = t.take_records().collect();
        assert_eq!((recs[77_777].pkts_in, recs[77_777].conns), (1, 2));
    }
}
