//! Who is talking: the process, user and container behind each local end
//! of a connection, found off the packet path.
//!
//! The packet path only queues the tuple of each new connection
//! ([`ConnSender::send`], never blocking: a full queue is a counted drop).
//! A resolver thread first takes the owners the eBPF connect hook noted
//! for client ends (`connect`: who called connect(), even when the socket
//! is gone by now), then asks the kernel for the other sockets in batches
//! (`diag`), maps socket inodes to processes through an index of
//! /proc/PID/fd kept up to date incrementally (`fdindex`), reads each
//! process's name, user and cgroup once (`owner`), and keeps the answer per
//! connection end until the record of the connection has been written
//! ([`Owners`]).

mod cgroups;
mod connect;
mod diag;
mod fdindex;
mod local;
mod owner;

pub use cgroups::CgroupNames;
pub use connect::{ConnectHook, Connector};
pub use diag::{Answer, SockDiag};
pub use fdindex::{FdIndex, IndexStats};
pub use local::addresses as local_addresses;
pub use owner::{container_of, read as read_owner, Users};
/// The owner's fields are the records' (`wirelog-record`), so the output
/// side names them without linking this crate.
pub use wirelog_record::ProcOwner as Owner;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// IPv4 as an IPv4-mapped IPv6 address, the form records use.
pub fn v4_mapped(b: [u8; 4]) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[10] = 0xff;
    a[11] = 0xff;
    a[12..].copy_from_slice(&b);
    a
}

pub fn is_v4(a: &[u8; 16]) -> bool {
    a[..10] == [0; 10] && a[10] == 0xff && a[11] == 0xff
}

/// One end of a connection seen from the host: the local address and port
/// first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tuple {
    pub proto: u8,
    pub local: [u8; 16],
    pub local_port: u16,
    pub remote: [u8; 16],
    pub remote_port: u16,
}

/// A connection the tracker just created, as queued by the packet path.
#[derive(Debug, Clone, Copy)]
pub struct NewConn {
    pub ts_ns: i64,
    pub proto: u8,
    pub src: [u8; 16],
    pub sport: u16,
    pub dst: [u8; 16],
    pub dport: u16,
}

/// Counters of the resolver, readable while it runs.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections queued by the packet path, and those dropped because the
    /// queue was full.
    pub queued: AtomicU64,
    pub dropped: AtomicU64,
    /// Local ends asked about, and found: by the eBPF connect hook, by
    /// their own socket, by the listening socket of their port (the
    /// connection was gone).
    pub asked: AtomicU64,
    pub by_ebpf: AtomicU64,
    pub by_socket: AtomicU64,
    pub by_listener: AtomicU64,
    /// Ends whose socket was gone or whose process was not found.
    pub unresolved: AtomicU64,
    /// Ends not found by their own socket that took the last owner seen on
    /// their (server) port.
    pub by_port: AtomicU64,
    /// Owners dropped because the map was full.
    pub map_full: AtomicU64,
    pub listings: AtomicU64,
    pub pid_scans: AtomicU64,
    pub fd_links: AtomicU64,
    /// CPU time of the resolver thread, ns.
    pub cpu_ns: AtomicU64,
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let g = |a: &AtomicU64| a.load(Relaxed);
        write!(
            f,
            "{} connections queued, {} dropped (queue full); {} local ends asked: {} by eBPF at connect, {} by socket, \
             {} by listener, {} by port, {} unresolved; {} /proc listings, {} processes read, {} fd links; \
             resolver CPU {:.3} s",
            g(&self.queued),
            g(&self.dropped),
            g(&self.asked),
            g(&self.by_ebpf),
            g(&self.by_socket),
            g(&self.by_listener),
            g(&self.by_port),
            g(&self.unresolved),
            g(&self.listings),
            g(&self.pid_scans),
            g(&self.fd_links),
            g(&self.cpu_ns) as f64 / 1e9
        )
    }
}

/// Owners kept for connections whose record was not written yet; beyond
/// this, new owners are dropped (counted).
const MAX_OWNERS: usize = 1 << 20;
/// Batches of new connections in flight to the resolver, per sender.
const QUEUE_BATCHES: usize = 64;
/// Processes re-read per uid and batch when an inode is still unknown.
const RESCAN_BUDGET: usize = 64;
/// Rounds an end whose process was not found is asked about again, and
/// how long apart.
const RETRIES: u8 = 4;
const RETRY_AFTER: Duration = Duration::from_millis(20);

#[derive(Default)]
struct Maps {
    /// Owner of each resolved local end, and when the connection it was
    /// found for began (packet time): a tuple is reused (loopback reuses
    /// TIME_WAIT ports), and the record of the earlier connection must not
    /// forget the later one's owner.
    ends: HashMap<Tuple, (Arc<Owner>, i64)>,
    /// Last owner seen on a local server port (proto, addr, port); `None`
    /// once two different programs were seen on it.
    ports: HashMap<(u8, [u8; 16], u16), Option<Arc<Owner>>>,
}

struct Shared {
    maps: Mutex<Maps>,
    /// Connections enqueued / processed, for [`Owners::sync`].
    progress: Mutex<(u64, u64)>,
    done: Condvar,
    stats: Stats,
}

/// Hands new connections to the resolver (one per capture worker).
#[derive(Clone)]
pub struct ConnSender {
    tx: SyncSender<Vec<NewConn>>,
    shared: Arc<Shared>,
}

impl ConnSender {
    /// Queues a batch without waiting; a full queue drops it (counted).
    pub fn send(&self, batch: Vec<NewConn>) {
        if batch.is_empty() {
            return;
        }
        let n = batch.len() as u64;
        self.shared.stats.queued.fetch_add(n, Relaxed);
        let mut p = self.shared.progress.lock().unwrap();
        match self.tx.try_send(batch) {
            Ok(()) => p.0 += n,
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.shared.stats.dropped.fetch_add(n, Relaxed);
            }
        }
    }
}

/// The output side: owners of connection ends, by tuple.
#[derive(Clone)]
pub struct Owners {
    shared: Arc<Shared>,
}

impl Owners {
    /// Waits (at most `limit`) until every connection queued before this
    /// call has been resolved, so records written next find their owners;
    /// false when the resolver is still behind.
    pub fn sync(&self, limit: Duration) -> bool {
        let mut p = self.shared.progress.lock().unwrap();
        let want = p.0;
        let until = Instant::now() + limit;
        while p.1 < want {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            p = self.shared.done.wait_timeout(p, left).unwrap().0;
        }
        true
    }

    /// The owner of the end `local:local_port` of a connection to
    /// `remote:remote_port`: its own socket's, else the last one seen on
    /// its port when that port is a server port with one program on it.
    pub fn get(&self, proto: u8, local: [u8; 16], local_port: u16, remote: [u8; 16], remote_port: u16) -> Option<Arc<Owner>> {
        let m = self.shared.maps.lock().unwrap();
        let t = Tuple { proto, local, local_port, remote, remote_port };
        if let Some((o, _)) = m.ends.get(&t) {
            return Some(o.clone());
        }
        let o = m.ports.get(&(proto, local, local_port)).cloned().flatten();
        if o.is_some() {
            self.shared.stats.by_port.fetch_add(1, Relaxed);
        }
        o
    }

    /// The connection's record was written: its ends are no longer needed,
    /// unless they were found for a connection on the same tuple that began
    /// after this one's last packet (`last_ns`).
    pub fn forget(&self, proto: u8, a: [u8; 16], ap: u16, b: [u8; 16], bp: u16, last_ns: i64) {
        let mut m = self.shared.maps.lock().unwrap();
        for t in [
            Tuple { proto, local: a, local_port: ap, remote: b, remote_port: bp },
            Tuple { proto, local: b, local_port: bp, remote: a, remote_port: ap },
        ] {
            if m.ends.get(&t).is_some_and(|&(_, born)| born <= last_ns) {
                m.ends.remove(&t);
            }
        }
    }

    pub fn stats(&self) -> &Stats {
        &self.shared.stats
    }
}

/// The output thread's view (`wirelog-sink` holds it as a trait object,
/// so it links neither /proc reading nor the eBPF loader).
impl wirelog_record::ProcOwners for Owners {
    fn own(&self, batch: &mut wirelog_record::Batch, limit: Duration) -> bool {
        let caught_up = self.sync(limit);
        for r in &mut batch.conns {
            r.orig_proc = self.get(r.ip_proto, r.orig_h.0, r.orig_p, r.resp_h.0, r.resp_p);
            r.resp_proc = self.get(r.ip_proto, r.resp_h.0, r.resp_p, r.orig_h.0, r.orig_p);
        }
        for t in &mut batch.txs {
            let proto = if t.transport == wirelog_record::Proto::Udp { 17 } else { 6 };
            // A transaction from the TLS library (capture --tls-plaintext)
            // comes with the process that made the call: it is kept.
            if t.orig_proc.is_none() {
                t.orig_proc = self.get(proto, t.orig_h.0, t.orig_p, t.resp_h.0, t.resp_p);
            }
            if t.resp_proc.is_none() {
                t.resp_proc = self.get(proto, t.resp_h.0, t.resp_p, t.orig_h.0, t.orig_p);
            }
        }
        caught_up
    }

    fn forget(&self, batch: &wirelog_record::Batch) {
        for r in &batch.conns {
            let last = r.ts_ns + r.duration_ns.unwrap_or(0);
            Owners::forget(self, r.ip_proto, r.orig_h.0, r.orig_p, r.resp_h.0, r.resp_p, last);
        }
    }
}

/// The resolver: opened first (so outputs can hold its [`Owners`] and
/// workers its [`ConnSender`]), its thread spawned once privileges are
/// settled ([`Resolver::spawn`]).
pub struct Resolver {
    sender: ConnSender,
    owners: Owners,
    pending: Option<(SockDiag, Option<ConnectHook>, Receiver<Vec<NewConn>>)>,
    handle: Option<JoinHandle<()>>,
    hook: HookState,
}

/// Whether the eBPF connect hook runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookState {
    /// Loaded; with a note when loading it changed the system (tracefs
    /// mounted).
    Loaded { note: Option<String> },
    /// Not asked for.
    Off,
    /// The kernel refused it: why.
    Refused(String),
}

impl Resolver {
    /// Opens the sock_diag socket, in the calling thread's network
    /// namespace (the one whose sockets are asked about), and with `ebpf`
    /// loads the connect hook (needs CAP_BPF and CAP_PERFMON, or root:
    /// call it before privileges are dropped). A refused hook is not an
    /// error: [`Resolver::hook`] says why and the resolver goes on without.
    pub fn open(ebpf: bool) -> std::io::Result<Resolver> {
        let diag = SockDiag::open()?;
        let (hook, state) = if ebpf {
            match ConnectHook::load() {
                Ok(h) => {
                    let note = h.note.clone();
                    (Some(h), HookState::Loaded { note })
                }
                Err(e) => (None, HookState::Refused(e.to_string())),
            }
        } else {
            (None, HookState::Off)
        };
        let shared = Arc::new(Shared {
            maps: Mutex::new(Maps::default()),
            progress: Mutex::new((0, 0)),
            done: Condvar::new(),
            stats: Stats::default(),
        });
        let (tx, rx) = sync_channel(QUEUE_BATCHES);
        Ok(Resolver {
            sender: ConnSender { tx, shared: shared.clone() },
            owners: Owners { shared },
            pending: Some((diag, hook, rx)),
            handle: None,
            hook: state,
        })
    }

    pub fn hook(&self) -> &HookState {
        &self.hook
    }

    /// Opens and spawns at once.
    pub fn start(ebpf: bool) -> std::io::Result<Resolver> {
        let mut r = Resolver::open(ebpf)?;
        r.spawn()?;
        Ok(r)
    }

    /// Starts the thread. It inherits the calling thread's credentials:
    /// call it from a thread allowed to read other users' /proc/PID/fd.
    pub fn spawn(&mut self) -> std::io::Result<()> {
        let Some((diag, hook, rx)) = self.pending.take() else {
            return Ok(());
        };
        let s = self.owners.shared.clone();
        self.handle =
            Some(std::thread::Builder::new().name("wirelog-procs".into()).spawn(move || Worker::new(diag, hook, s).run(rx))?);
        Ok(())
    }

    pub fn sender(&self) -> ConnSender {
        self.sender.clone()
    }

    pub fn owners(&self) -> Owners {
        self.owners.clone()
    }

    /// Stops the thread once the queued connections are resolved (every
    /// sender must have been dropped, or it waits for them).
    pub fn stop(self) {
        let Resolver { sender, handle, pending, .. } = self;
        drop(sender);
        drop(pending);
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

struct Worker {
    diag: SockDiag,
    hook: Option<ConnectHook>,
    cgroups: CgroupNames,
    shared: Arc<Shared>,
    index: FdIndex,
    users: Users,
    /// Owner details per pid, read once.
    owners: HashMap<u32, Arc<Owner>>,
    local: Vec<[u8; 16]>,
    local_read: Instant,
    new_pids: Vec<u32>,
    /// When the connection of each end being resolved began (new this
    /// round, or retried).
    born: HashMap<Tuple, i64>,
    /// Ends with a socket but no process found yet, the rounds left, and
    /// whether this end holds back its connection's progress (one end per
    /// connection does, so [`Owners::sync`] waits for its final answer).
    retry: Vec<(Tuple, u8, bool)>,
}

impl Worker {
    fn new(diag: SockDiag, hook: Option<ConnectHook>, shared: Arc<Shared>) -> Worker {
        Worker {
            diag,
            hook,
            cgroups: CgroupNames::default(),
            shared,
            index: FdIndex::default(),
            users: Users::default(),
            owners: HashMap::new(),
            local: local::addresses(),
            local_read: Instant::now(),
            new_pids: Vec::new(),
            retry: Vec::new(),
            born: HashMap::new(),
        }
    }

    fn run(mut self, rx: Receiver<Vec<NewConn>>) {
        // The first listing, before any connection waits for it.
        self.index.refresh_new(&mut self.new_pids);
        self.publish_stats();
        let mut pending: Vec<NewConn> = Vec::new();
        loop {
            // Ends whose socket exists but whose process was not found yet
            // are asked again soon (the index reaches more processes each
            // round).
            let wait = if self.retry.is_empty() { Duration::from_secs(1) } else { RETRY_AFTER };
            let mut disconnected = false;
            match rx.recv_timeout(wait) {
                Ok(b) => pending.extend(b),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => disconnected = true,
            }
            while let Ok(b) = rx.try_recv() {
                pending.extend(b);
            }
            if pending.is_empty() && self.retry.is_empty() {
                if disconnected {
                    break;
                }
                continue;
            }
            let n = self.resolve(&pending);
            pending.clear();
            if disconnected && self.retry.is_empty() {
                self.publish_stats();
                let mut p = self.shared.progress.lock().unwrap();
                p.1 += n;
                self.shared.done.notify_all();
                break;
            }
            self.publish_stats();
            let mut p = self.shared.progress.lock().unwrap();
            p.1 += n;
            self.shared.done.notify_all();
        }
    }

    fn is_local(&mut self, a: &[u8; 16]) -> bool {
        if (is_v4(a) && a[12] == 127) || *a == std::net::Ipv6Addr::LOCALHOST.octets() {
            return true;
        }
        if self.local.binary_search(a).is_ok() {
            return true;
        }
        // Addresses come and go (DHCP, containers): look again, rarely.
        if self.local_read.elapsed() > Duration::from_secs(5) {
            self.local = local::addresses();
            self.local_read = Instant::now();
            return self.local.binary_search(a).is_ok();
        }
        false
    }

    /// Resolves a round; returns how many connections are done (those of
    /// `conns` without an end left to retry, and earlier ones whose last
    /// retried end got its answer).
    fn resolve(&mut self, conns: &[NewConn]) -> u64 {
        let mut ends: Vec<Tuple> = Vec::with_capacity(conns.len() * 2);
        let retry = std::mem::take(&mut self.retry);
        let owed_before = retry.iter().filter(|r| r.2).count() as u64;
        let mut rounds: HashMap<Tuple, (u8, bool)> = HashMap::new();
        // Connections with an end newly held back this round, as the tuple
        // of their lower end.
        let mut held: std::collections::HashSet<Tuple> = Default::default();
        for (t, left, owed) in retry {
            ends.push(t);
            rounds.insert(t, (left, owed));
        }
        let retried = ends.len();
        for c in conns {
            if c.proto != 6 && c.proto != 17 {
                continue;
            }
            if self.is_local(&c.src) {
                let t = Tuple { proto: c.proto, local: c.src, local_port: c.sport, remote: c.dst, remote_port: c.dport };
                ends.push(t);
                self.born.insert(t, c.ts_ns);
            }
            if self.is_local(&c.dst) {
                let t = Tuple { proto: c.proto, local: c.dst, local_port: c.dport, remote: c.src, remote_port: c.sport };
                ends.push(t);
                self.born.insert(t, c.ts_ns);
            }
        }
        self.shared.stats.asked.fetch_add((ends.len() - retried) as u64, Relaxed);
        // Client ends the connect hook saw need no socket: the hook named
        // who called connect(). One lookup (and delete) per TCP end, retried
        // ones too (their process was not found in /proc yet).
        let mut hooked: Vec<(Tuple, Connector)> = Vec::new();
        if let Some(h) = &self.hook {
            let mut i = 0;
            while i < ends.len() {
                match h.take(&ends[i]) {
                    Some(c) => hooked.push((ends.swap_remove(i), c)),
                    None => i += 1,
                }
            }
        }
        let mut answers = Vec::new();
        let mut found: Vec<(Tuple, Answer)> = Vec::with_capacity(ends.len());
        for chunk in ends.chunks(diag::BATCH) {
            if self.diag.query(chunk, &mut answers).is_err() {
                answers.clear();
                answers.resize(chunk.len(), Answer::Gone);
            }
            found.extend(chunk.iter().copied().zip(answers.iter().copied()));
        }
        // A client asked about while still in SYN_SENT was not in the hook's
        // map yet; if its socket is gone now, it has left SYN_SENT, so the
        // hook has it.
        if let Some(h) = &self.hook {
            found.retain(|(t, a)| {
                let c = if *a == Answer::Gone { h.take(t) } else { None };
                match c {
                    Some(c) => {
                        hooked.push((*t, c));
                        false
                    }
                    None => true,
                }
            });
        }
        // Inodes not indexed yet: one listing for new processes, then the
        // processes of each missing socket's uid, within a budget.
        // (uid, inode) of the sockets not indexed yet.
        let missing = |idx: &FdIndex, found: &[(Tuple, Answer)]| -> Vec<(u32, u64)> {
            let mut m: Vec<(u32, u64)> = found
                .iter()
                .filter_map(|(_, a)| match *a {
                    Answer::Socket { inode, uid } | Answer::Listener { inode, uid } if idx.lookup(inode).is_none() => {
                        Some((uid, inode))
                    }
                    _ => None,
                })
                .collect();
            m.sort_unstable();
            m.dedup();
            m
        };
        if !missing(&self.index, &found).is_empty() {
            self.index.refresh_new(&mut self.new_pids);
            for p in &self.new_pids {
                self.owners.remove(p);
            }
            let still = missing(&self.index, &found);
            for group in still.chunk_by(|a, b| a.0 == b.0) {
                let inodes: Vec<u64> = group.iter().map(|g| g.1).collect();
                self.index.rescan_uid(group[0].0, RESCAN_BUDGET, &inodes);
            }
        }
        // Owners are read from /proc before the maps are locked: the output
        // thread looks owners up under that lock for every record.
        let mut resolved: Vec<(Tuple, Arc<Owner>, bool)> = Vec::with_capacity(found.len() + hooked.len());
        for (t, c) in hooked {
            let owner = self.connector_owner(&c);
            self.shared.stats.by_ebpf.fetch_add(1, Relaxed);
            resolved.push((t, owner, false));
        }
        for (t, a) in found {
            let (inode, by_listener) = match a {
                Answer::Socket { inode, .. } => (inode, false),
                Answer::Listener { inode, .. } => (inode, true),
                Answer::Gone => {
                    self.shared.stats.unresolved.fetch_add(1, Relaxed);
                    continue;
                }
            };
            let owner = self.index.lookup(inode).and_then(|pid| {
                if let Some(o) = self.owners.get(&pid) {
                    return Some(o.clone());
                }
                let o = Arc::new(owner::read(pid, &mut self.users)?);
                self.owners.insert(pid, o.clone());
                Some(o)
            });
            let Some(owner) = owner else {
                let (left, owed) = match rounds.get(&t) {
                    Some(&r) => r,
                    None => {
                        let conn = if (t.local, t.local_port) < (t.remote, t.remote_port) {
                            t
                        } else {
                            Tuple { proto: t.proto, local: t.remote, local_port: t.remote_port, remote: t.local, remote_port: t.local_port }
                        };
                        (RETRIES, held.insert(conn))
                    }
                };
                if left > 0 {
                    self.retry.push((t, left - 1, owed));
                } else {
                    self.shared.stats.unresolved.fetch_add(1, Relaxed);
                }
                continue;
            };
            self.index.touch(owner.pid);
            if by_listener {
                self.shared.stats.by_listener.fetch_add(1, Relaxed);
            } else {
                self.shared.stats.by_socket.fetch_add(1, Relaxed);
            }
            resolved.push((t, owner, by_listener));
        }
        let mut m = self.shared.maps.lock().unwrap();
        for (t, owner, by_listener) in resolved {
            // A port with a listener is a server port: remember its owner
            // for connections that end before they are resolved.
            if by_listener || t.local_port < t.remote_port && t.local_port < 32768 {
                let key = (t.proto, t.local, t.local_port);
                match m.ports.get(&key) {
                    None => {
                        m.ports.insert(key, Some(owner.clone()));
                    }
                    Some(Some(prev)) if prev.name != owner.name || prev.exe != owner.exe => {
                        m.ports.insert(key, None);
                    }
                    _ => {}
                }
            }
            if m.ends.len() >= MAX_OWNERS {
                self.shared.stats.map_full.fetch_add(1, Relaxed);
                continue;
            }
            let born = self.born.get(&t).copied().unwrap_or(i64::MIN);
            m.ends.insert(t, (owner, born));
        }
        drop(m);
        let retried: std::collections::HashSet<Tuple> = self.retry.iter().map(|r| r.0).collect();
        self.born.retain(|t, _| retried.contains(t));
        // Processes that ended stay cached only while indexed.
        if self.owners.len() > 4 * self.index.processes() + 1024 {
            let idx = &self.index;
            self.owners.retain(|_, o| idx.lookup_pid(o.pid));
        }
        let owed_after = self.retry.iter().filter(|r| r.2).count() as u64;
        conns.len() as u64 + owed_before - owed_after
    }

    /// The owner of a connector: read from /proc like any other while the
    /// process lives (the same names as the sock_diag path), else what the
    /// hook saw (its thread's name, uid, cgroup), without an exe path.
    fn connector_owner(&mut self, c: &Connector) -> Arc<Owner> {
        // A cached owner of another name may be a reused pid: read again.
        if let Some(o) = self.owners.get(&c.tgid).filter(|o| o.name == c.comm) {
            let o = o.clone();
            self.index.touch(c.tgid);
            return o;
        }
        if let Some(o) = owner::read(c.tgid, &mut self.users) {
            let o = Arc::new(o);
            self.owners.insert(c.tgid, o.clone());
            // Its other sockets (a UDP one next) are looked for in its
            // fds first, as if found by sock_diag.
            self.index.touch(c.tgid);
            return o;
        }
        let (container, pod) = self.cgroups.path(c.cgroup_id).map(|p| container_of(&format!("0::{p}\n"))).unwrap_or_default();
        Arc::new(Owner {
            pid: c.tgid,
            name: c.comm.clone(),
            exe: String::new(),
            uid: c.uid,
            user: self.users.name(c.uid),
            container,
            pod,
        })
    }

    fn publish_stats(&self) {
        let s = &self.shared.stats;
        s.listings.store(self.index.stats.listings, Relaxed);
        s.pid_scans.store(self.index.stats.pid_scans, Relaxed);
        s.fd_links.store(self.index.stats.fd_links, Relaxed);
        s.cpu_ns.store(thread_cpu_ns(), Relaxed);
    }
}

/// CPU time of the calling thread, ns.
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime fills the timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The eBPF hook's tests need root; skipped with a reason otherwise, and
/// failed instead when every test is required (CI runs as root).
#[cfg(test)]
fn hook_can_load() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    let required = std::env::var("WIRELOG_REQUIRE_ALL_TESTS").is_ok_and(|v| v == "1");
    assert!(!required, "WIRELOG_REQUIRE_ALL_TESTS=1 but the eBPF connect hook needs root");
    eprintln!("SKIPPED: the eBPF connect hook needs root");
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{SocketAddr, TcpListener, TcpStream};

    fn parts(a: SocketAddr) -> ([u8; 16], u16) {
        match a {
            SocketAddr::V4(a) => (v4_mapped(a.ip().octets()), a.port()),
            SocketAddr::V6(a) => (a.ip().octets(), a.port()),
        }
    }

    #[test]
    fn resolves_both_ends_of_a_local_connection_to_this_process() {
        let r = Resolver::start(false).unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _s = l.accept().unwrap();
        let (ca, cp) = parts(c.local_addr().unwrap());
        let (sa, sp) = parts(l.local_addr().unwrap());
        r.sender().send(vec![NewConn { ts_ns: 0, proto: 6, src: ca, sport: cp, dst: sa, dport: sp }]);
        let owners = r.owners();
        owners.sync(Duration::from_secs(10));
        let me = std::process::id();
        let orig = owners.get(6, ca, cp, sa, sp).expect("client end");
        let resp = owners.get(6, sa, sp, ca, cp).expect("server end");
        assert_eq!((orig.pid, resp.pid), (me, me));
        assert_eq!(orig.exe, std::env::current_exe().unwrap().to_string_lossy());
        // The record of an earlier connection on this tuple (loopback reuses
        // TIME_WAIT ports), over before this one began at 0, keeps its owner.
        owners.forget(6, ca, cp, sa, sp, -1);
        assert!(owners.get(6, ca, cp, sa, sp).is_some());
        owners.forget(6, ca, cp, sa, sp, i64::MAX);
        assert!(owners.get(6, ca, cp, sa, sp).is_none());
        let st = owners.stats();
        assert_eq!(st.by_socket.load(Relaxed), 2, "{st}");
        r.stop();
    }

    /// A client whose socket is gone before the resolver asks is still
    /// named, by the connect hook; the server end by its listener.
    #[test]
    fn a_closed_client_end_is_named_by_the_connect_hook() {
        if !hook_can_load() {
            return;
        }
        let r = Resolver::start(true).unwrap();
        assert!(matches!(r.hook(), HookState::Loaded { .. }), "{:?}", r.hook());
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (ca, cp) = parts(c.local_addr().unwrap());
        let (sa, sp) = parts(l.local_addr().unwrap());
        let s = l.accept().unwrap();
        // The client closes first, so its end is TIME_WAIT (no owner) when
        // asked; the server's is the closing socket or the listener.
        drop(c);
        drop(s);
        r.sender().send(vec![NewConn { ts_ns: 0, proto: 6, src: ca, sport: cp, dst: sa, dport: sp }]);
        let owners = r.owners();
        owners.sync(Duration::from_secs(10));
        let orig = owners.get(6, ca, cp, sa, sp).expect("client end");
        assert_eq!(orig.pid, std::process::id());
        assert_eq!(orig.exe, std::env::current_exe().unwrap().to_string_lossy(), "read from /proc while alive");
        let st = owners.stats();
        assert_eq!(st.by_ebpf.load(Relaxed), 1, "{st}");
        assert_eq!(st.by_listener.load(Relaxed) + st.by_socket.load(Relaxed), 1, "{st}");
        assert_eq!(owners.get(6, sa, sp, ca, cp).expect("server end").pid, std::process::id());
        r.stop();
    }
}
