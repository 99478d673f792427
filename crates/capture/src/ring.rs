//! An AF_PACKET socket with a TPACKET_V3 receive ring.
//!
//! The kernel writes packets into fixed-size blocks of a ring shared with us
//! by mmap. A block is handed to user space ("retired") when it is full or
//! when its retire timer expires with at least one packet in it; we walk its
//! packets in place, without copying, and give the whole block back. One
//! wakeup therefore covers a whole block of packets, and an idle interface
//! causes none.
//!
//! Setup order follows libpcap's pcap-linux.c: socket with protocol 0 (so
//! nothing is queued before the filter is in place), TPACKET_V3, filter,
//! ring, mmap, bind, promiscuous mode, then fanout.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, Ordering};

use crate::sys::{self, tpacket3_hdr, tpacket_block_desc, tpacket_req3, tpacket_stats_v3};
use wirelog_packet::{KernelChecksum, LinkType};

use crate::{CaptureError, ErrorKind, Framing, Interface};

/// Default ring per interface: 16 blocks of 1 MiB (split over the workers).
///
/// 16 MiB hold ~0.13 s of a saturated 1 Gbit/s link of full-size frames, or
/// ~120 k small packets (a TPACKET_V3 slot is the packet plus ~80 bytes of
/// headers), while a worker needs ~0.1-0.3 µs per packet: enough to ride out
/// scheduling delays (store flushes run in the writer thread, never in a
/// worker). The ring is kernel memory that counts in the process RSS once
/// mapped (measured: RSS 37 MB idle with 32 MiB, 8 MB with 4 MiB), and the
/// RSS target is 32 MB idle, so bigger is not free; `--ring-size` raises it
/// for bursty 10 Gbit/s links. 1 MiB blocks keep enough blocks for a worker
/// to process some while the kernel fills others; a busy link then costs
/// one wakeup per MiB of packets.
pub const DEFAULT_BLOCK_SIZE: usize = 1 << 20;
pub const DEFAULT_RING_SIZE: usize = 16 << 20;

/// Default block retire timeout: 100 ms.
///
/// A partly filled block reaches us only when this timer fires, so it bounds
/// how late a packet on a quiet link is processed, and on such a link it sets
/// the wakeup rate (at most 10/s per socket; none when no packet arrives,
/// since the kernel retires only blocks holding packets). Records use packet
/// timestamps, so lateness never changes them; 100 ms also keeps shutdown
/// (which waits for the last partly filled block) short.
pub const DEFAULT_RETIRE_MS: u32 = 100;

/// Smallest ring accepted when retrying after ENOMEM.
const MIN_RING: usize = 1 << 20;

/// Settings of one ring.
#[derive(Debug, Clone)]
pub struct RingConfig {
    /// Bytes per block (a power of two, at least a page).
    pub block_size: usize,
    /// Total ring bytes (rounded down to whole blocks, at least 2 blocks).
    pub ring_size: usize,
    pub retire_ms: u32,
    /// Bytes kept of each packet (applied by the BPF program's return value).
    pub snaplen: u32,
    pub promiscuous: bool,
    /// Join this PACKET_FANOUT group (hash mode, with defragmentation).
    pub fanout_group: Option<u16>,
    /// A classic BPF program to attach; None attaches one that keeps every
    /// packet (and applies the snaplen).
    pub filter: Option<Vec<libc::sock_filter>>,
    /// An eBPF socket filter (a loaded program's descriptor) that replaces
    /// the classic one, attached before the filter is locked
    /// (`--kernel-accounting`). Refused, the classic filter stays and
    /// [`Ring::ebpf_refused`] says why.
    pub ebpf_filter: Option<RawFd>,
    /// The interface id the ring's packets carry ([`Packet::packet`]): the
    /// interface's position among those captured. On `any` each packet
    /// carries its own kernel ifindex instead.
    pub if_id: u32,
    /// Leave the filter unlocked (no SO_LOCK_FILTER), so that
    /// [`Ring::swap_filter`] can replace it: `capture --cpu-budget` swaps
    /// the skip-empty-TCP filter on and off as load changes.
    pub swappable_filter: bool,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            block_size: DEFAULT_BLOCK_SIZE,
            ring_size: DEFAULT_RING_SIZE,
            retire_ms: DEFAULT_RETIRE_MS,
            snaplen: 262_144,
            promiscuous: true,
            fanout_group: None,
            filter: None,
            ebpf_filter: None,
            if_id: 0,
            swappable_filter: false,
        }
    }
}

/// Cumulative kernel counters of a socket (PACKET_STATISTICS).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Packets that passed the filter (including those dropped).
    pub packets: u64,
    /// Packets dropped because the ring was full.
    pub drops: u64,
    /// Times the ring was full ("queue frozen").
    pub freeze_q_cnt: u64,
}

/// One packet in a retired block, borrowed from the ring.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// Capture time, ns since the Unix epoch.
    pub ts_ns: i64,
    /// Length on the wire (`tp_len`).
    pub wire_len: u32,
    /// The captured bytes (`tp_snaplen` of them), starting at the link header
    /// (or at the network header on a cooked socket).
    pub data: &'a [u8],
    /// Kernel ifindex the packet was seen on.
    pub ifindex: i32,
    /// `sll_pkttype`: PACKET_HOST, PACKET_BROADCAST, ..., PACKET_OUTGOING.
    pub pkttype: u8,
    /// `sll_hatype`: ARPHRD_* of the interface.
    pub hatype: u16,
    /// `sll_protocol`: the EtherType, host byte order.
    pub protocol: u16,
    /// 802.1Q tag the NIC or kernel stripped from the frame (`tp_vlan_tci`),
    /// so the frame in `data` no longer carries it: the decoder takes it as
    /// the packet's outer VLAN.
    pub vlan_tci: Option<u16>,
    /// The kernel's flow hash of the packet (the one fanout uses).
    pub rxhash: u32,
    /// `tp_status`, for its checksum flags (see [`Packet::checksum_valid`]).
    pub status: u32,
    /// What `data` starts with, from the ring's framing; `None` for a cooked
    /// packet that is not IP (by `sll_protocol`).
    pub linktype: Option<LinkType>,
    /// The interface id the packet carries on (see [`RingConfig::if_id`]).
    pub if_id: u32,
}

impl<'a> Packet<'a> {
    /// The packet as the decoder takes it (link type, interface, offloaded
    /// VLAN, checksum status filled in), or `None` for a cooked packet that
    /// is not IP: there is no link header to say what it is.
    #[inline]
    pub fn packet(&self) -> Option<wirelog_packet::Packet<'a>> {
        let checksum = if self.checksum_not_ready() {
            KernelChecksum::NotReady
        } else if self.checksum_valid() {
            KernelChecksum::Valid
        } else {
            KernelChecksum::Unknown
        };
        Some(wirelog_packet::Packet {
            ts_ns: self.ts_ns,
            wire_len: self.wire_len,
            linktype: self.linktype?,
            if_id: self.if_id,
            vlan_tci: self.vlan_tci,
            checksum,
            data: self.data,
        })
    }

    /// The kernel verified the transport checksum (TP_STATUS_CSUM_VALID: the
    /// NIC or the stack did; never set on outgoing packets).
    #[inline]
    pub fn checksum_valid(&self) -> bool {
        self.status & sys::TP_STATUS_CSUM_VALID != 0
    }

    /// The transport checksum is not filled in yet (TP_STATUS_CSUMNOTREADY:
    /// CHECKSUM_PARTIAL, computed later by the NIC, or never on loopback).
    #[inline]
    pub fn checksum_not_ready(&self) -> bool {
        self.status & sys::TP_STATUS_CSUMNOTREADY != 0
    }

    /// True for a copy of a packet this host sent.
    pub fn is_outgoing(&self) -> bool {
        self.pkttype == sys::PACKET_OUTGOING
    }

    /// True when the packet was seen on a loopback device.
    pub fn on_loopback(&self) -> bool {
        self.hatype == sys::ARPHRD_LOOPBACK
    }

    /// True when a cooked packet carries IPv4 or IPv6.
    pub fn is_ip(&self) -> bool {
        self.protocol == sys::ETH_P_IP || self.protocol == sys::ETH_P_IPV6
    }
}

/// A capture socket and its mapped ring.
pub struct Ring {
    fd: OwnedFd,
    map: NonNull<u8>,
    map_len: usize,
    block_size: usize,
    block_count: usize,
    cur: usize,
    framing: Framing,
    /// Bound to every interface (`any`).
    any: bool,
    ifindex: u32,
    /// See [`RingConfig::if_id`].
    if_id: u32,
    /// Outgoing copies must be dropped in user space (loopback copies on
    /// `any`, or a kernel without PACKET_IGNORE_OUTGOING).
    drop_outgoing_loopback: bool,
    kstats: KernelStats,
    /// The ring size asked for, when ENOMEM made us settle for less.
    shrunk_from: Option<usize>,
    ebpf_refused: Option<String>,
}

// SAFETY: the mapping is owned by the Ring and only touched through &mut self.
unsafe impl Send for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping the region mapped in open(); the fd closes after.
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.map_len) };
    }
}

fn setsockopt<T>(fd: RawFd, level: libc::c_int, name: libc::c_int, val: &T) -> std::io::Result<()> {
    // SAFETY: val points to a T of the given size.
    let r = unsafe {
        libc::setsockopt(fd, level, name, (val as *const T).cast(), std::mem::size_of::<T>() as libc::socklen_t)
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl Ring {
    /// Opens a socket on `iface` with a receive ring. When the kernel cannot
    /// allocate the ring (ENOMEM), the ring is halved until it fits (down to
    /// 1 MiB); [`Ring::shrunk_from`] then says so.
    pub fn open(iface: &Interface, cfg: &RingConfig) -> Result<Ring, CaptureError> {
        let what = |call: &str| format!("interface {}: {call}", iface.name);
        let sock_type = match iface.framing {
            Framing::Ethernet => libc::SOCK_RAW,
            Framing::Cooked => libc::SOCK_DGRAM,
        };
        // Protocol 0: the socket receives nothing until bind() below.
        // SAFETY: plain syscall; the fd is owned right after.
        let raw = unsafe { libc::socket(libc::AF_PACKET, sock_type | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(CaptureError::last_os(ErrorKind::Io, what("socket(AF_PACKET)")));
        }
        // SAFETY: raw is a fresh, valid descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let fdr = fd.as_raw_fd();
        setsockopt(fdr, libc::SOL_PACKET, sys::PACKET_VERSION, &sys::TPACKET_V3)
            .map_err(|e| CaptureError::os(ErrorKind::Ring, what("TPACKET_V3"), e))?;

        // The filter goes on before bind, so no unfiltered packet is queued.
        // Without a user filter, `ret #snaplen` applies the snaplen.
        let keep_all = [libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: cfg.snaplen }];
        let prog: &[libc::sock_filter] = cfg.filter.as_deref().unwrap_or(&keep_all);
        let fprog = libc::sock_fprog { len: prog.len() as u16, filter: prog.as_ptr() as *mut _ };
        setsockopt(fdr, libc::SOL_SOCKET, sys::SO_ATTACH_FILTER, &fprog)
            .map_err(|e| CaptureError::os(ErrorKind::Filter, what("attaching the BPF filter"), e))?;
        let ebpf_refused = cfg.ebpf_filter.and_then(|prog| {
            setsockopt(fdr, libc::SOL_SOCKET, libc::SO_ATTACH_BPF, &prog).err().map(|e| e.to_string())
        });
        // Locked: once privileges are dropped, nothing in this process can
        // widen what the kernel hands over.
        if !cfg.swappable_filter {
            let one: libc::c_int = 1;
            let _ = setsockopt(fdr, libc::SOL_SOCKET, sys::SO_LOCK_FILTER, &one);
        }

        let block_size = cfg.block_size.max(4096).next_power_of_two();
        let wanted = (cfg.ring_size / block_size).max(2) * block_size;
        let mut size = wanted;
        let (block_size, block_count) = loop {
            // Whole blocks; below two blocks of the asked size, two smaller
            // (page-aligned) blocks.
            let count = (size / block_size).max(2);
            let bs = (size / count) & !4095;
            let req = tpacket_req3 {
                tp_block_size: bs as u32,
                tp_block_nr: count as u32,
                tp_frame_size: 2048,
                tp_frame_nr: (bs / 2048 * count) as u32,
                tp_retire_blk_tov: cfg.retire_ms,
                tp_sizeof_priv: 0,
                tp_feature_req_word: sys::TP_FT_REQ_FILL_RXHASH,
            };
            match setsockopt(fdr, libc::SOL_PACKET, sys::PACKET_RX_RING, &req) {
                Ok(()) => break (bs, count),
                Err(e) if e.raw_os_error() == Some(libc::ENOMEM) && size / 2 >= MIN_RING => size /= 2,
                Err(e) => {
                    return Err(CaptureError::os(
                        ErrorKind::Ring,
                        what(&format!("a {} MiB receive ring", size >> 20)),
                        e,
                    ))
                }
            }
        };
        let map_len = block_size * block_count;
        // SAFETY: mapping the ring just configured on this socket.
        let map = unsafe {
            libc::mmap(std::ptr::null_mut(), map_len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fdr, 0)
        };
        if map == libc::MAP_FAILED {
            return Err(CaptureError::last_os(ErrorKind::Ring, what("mmap of the receive ring")));
        }
        let ring = Ring {
            fd,
            map: NonNull::new(map.cast()).expect("mmap returned NULL"),
            map_len,
            block_size,
            block_count,
            cur: 0,
            framing: iface.framing,
            any: iface.index == 0,
            if_id: cfg.if_id,
            ifindex: iface.index,
            drop_outgoing_loopback: iface.index == 0 || iface.is_loopback(),
            kstats: KernelStats::default(),
            shrunk_from: (map_len < wanted).then_some(wanted),
            ebpf_refused,
        };

        // SAFETY: sockaddr_ll is plain data; zeroed is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = sys::ETH_P_ALL.to_be();
        sll.sll_ifindex = iface.index as i32;
        // SAFETY: binding with a valid sockaddr_ll.
        let r = unsafe {
            libc::bind(
                fdr,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            let kind = if e.raw_os_error() == Some(libc::ENODEV) { ErrorKind::NoSuchInterface } else { ErrorKind::Io };
            return Err(CaptureError::os(kind, what("bind"), e));
        }

        if cfg.promiscuous && iface.index != 0 && !iface.is_loopback() {
            #[repr(C)]
            struct PacketMreq {
                mr_ifindex: libc::c_int,
                mr_type: u16,
                mr_alen: u16,
                mr_address: [u8; 8],
            }
            let mreq = PacketMreq {
                mr_ifindex: iface.index as i32,
                mr_type: sys::PACKET_MR_PROMISC,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            setsockopt(fdr, libc::SOL_PACKET, sys::PACKET_ADD_MEMBERSHIP, &mreq)
                .map_err(|e| CaptureError::os(ErrorKind::Io, what("promiscuous mode"), e))?;
        }

        // On loopback every packet passes twice: once going out, once coming
        // in. The kernel can skip the outgoing copy (Linux 4.20+), saving the
        // copy into the ring, but not for a socket in a fanout group (the
        // group's hook does the delivery: seen on Linux 6.18), and on `any` it would
        // also hide what real interfaces send. So loopback copies are also
        // dropped per packet, by sll_pkttype (see Block::next_packet).
        if iface.is_loopback() {
            let on: libc::c_int = 1;
            let _ = setsockopt(fdr, libc::SOL_PACKET, sys::PACKET_IGNORE_OUTGOING, &on);
        }

        if let Some(group) = cfg.fanout_group {
            // PACKET_FANOUT_HASH picks the socket by the packet's flow hash,
            // which the kernel makes symmetric: fanout_demux_hash() uses
            // __skb_get_hash_symmetric() -> __flow_hash_from_keys(), which
            // first calls __flow_hash_consistentify(): it swaps source and
            // destination (addresses, and ports with them) so the smaller
            // address comes first (ports break ties). Both directions of a
            // connection thus hash alike and land in the same worker (tested
            // below and in tests/capture_live.rs). Note tp_rxhash is not that
            // hash: it is skb->hash, which for locally sent TCP is the
            // socket's random txhash, different per direction.
            // FLAG_DEFRAG reassembles IPv4 fragments first, so a fragment
            // without ports cannot be sent to another worker than its flow's.
            // IPv6 has no such flag: its fragments hash on the addresses only
            // (the dissector stops at the fragment header), so a flow whose
            // packets are partly fragmented (large DNS answers over IPv6) can
            // be split between two workers (seen with ipv6-fragmented-dns.pcap
            // and --workers 2). With one worker it is reassembled in user space.
            //
            // The group id is per network namespace and device; callers
            // derive it from the pid so two probes on one host do not share.
            let val: u32 = group as u32 | ((sys::PACKET_FANOUT_HASH | sys::PACKET_FANOUT_FLAG_DEFRAG) << 16);
            setsockopt(fdr, libc::SOL_PACKET, sys::PACKET_FANOUT, &val)
                .map_err(|e| CaptureError::os(ErrorKind::Io, what(&format!("PACKET_FANOUT group {group}")), e))?;
        }
        Ok(ring)
    }

    /// Why the kernel refused [`RingConfig::ebpf_filter`], if it did.
    /// Replaces the socket's classic filter (opened with
    /// [`RingConfig::swappable_filter`]); packets already in the ring stay.
    pub fn swap_filter(&self, prog: &[libc::sock_filter]) -> Result<(), CaptureError> {
        let fprog = libc::sock_fprog { len: prog.len() as u16, filter: prog.as_ptr() as *mut _ };
        setsockopt(self.fd(), libc::SOL_SOCKET, sys::SO_ATTACH_FILTER, &fprog)
            .map_err(|e| CaptureError::os(ErrorKind::Filter, "swapping the BPF filter", e))
    }

    /// A filter that keeps every packet, cut to `snaplen` (what a ring
    /// without a filter of the user's has).
    pub fn keep_all(snaplen: u32) -> Vec<libc::sock_filter> {
        vec![libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: snaplen }]
    }

    pub fn ebpf_refused(&self) -> Option<&str> {
        self.ebpf_refused.as_deref()
    }

    /// The ring size first asked for, when ENOMEM forced a smaller ring.
    pub fn shrunk_from(&self) -> Option<usize> {
        self.shrunk_from
    }

    /// Bytes of the ring actually mapped.
    pub fn size(&self) -> usize {
        self.map_len
    }

    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// True when bound to every interface (`any`): packets then come from
    /// many interfaces, named by [`Packet::ifindex`].
    pub fn is_any(&self) -> bool {
        self.any
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// True when the interface the ring is bound to no longer exists.
    pub fn interface_gone(&self) -> bool {
        self.ifindex != 0 && !crate::interface_exists(self.ifindex)
    }

    /// Blocks in poll() until a block is ready or `timeout_ms` passes
    /// (-1: forever). Returns true when a block is ready.
    pub fn wait(&self, timeout_ms: i32) -> Result<bool, CaptureError> {
        if self.block_ready() {
            return Ok(true);
        }
        let mut pfd = [libc::pollfd { fd: self.fd(), events: libc::POLLIN | libc::POLLERR, revents: 0 }];
        poll(&mut pfd, timeout_ms)?;
        Ok(self.block_ready())
    }

    fn desc(&self, i: usize) -> *mut tpacket_block_desc {
        // SAFETY: i < block_count, so the offset is inside the mapping.
        unsafe { self.map.as_ptr().add(i * self.block_size).cast() }
    }

    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: block_status is a naturally aligned u32 in the shared
        // mapping that the kernel writes concurrently: accessed atomically.
        unsafe { AtomicU32::from_ptr(std::ptr::addr_of_mut!((*self.desc(i)).block_status)) }
    }

    /// True when the next block belongs to user space.
    pub fn block_ready(&self) -> bool {
        self.status(self.cur).load(Ordering::Acquire) & sys::TP_STATUS_USER != 0
    }

    /// The next retired block, if any. Its packets stay valid until the block
    /// is dropped, which hands it back to the kernel.
    pub fn next_block(&mut self) -> Option<Block<'_>> {
        if !self.block_ready() {
            return None;
        }
        let desc = self.desc(self.cur);
        // SAFETY: the block is ours (TP_STATUS_USER, acquire-ordered above).
        let (num, first) = unsafe { ((*desc).num_pkts, (*desc).offset_to_first_pkt) };
        let base = desc.cast::<u8>();
        Some(Block { ring: self, base, next: first as usize, left: num })
    }

    /// Kernel counters, cumulative since the socket opened. (The kernel
    /// resets its counters on each read; they are summed here.)
    pub fn kernel_stats(&mut self) -> KernelStats {
        let mut st = tpacket_stats_v3::default();
        let mut len = std::mem::size_of::<tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: st has room for len bytes.
        let r = unsafe {
            libc::getsockopt(
                self.fd(),
                libc::SOL_PACKET,
                sys::PACKET_STATISTICS,
                (&mut st as *mut tpacket_stats_v3).cast(),
                &mut len,
            )
        };
        if r == 0 {
            self.kstats.packets += st.tp_packets as u64;
            self.kstats.drops += st.tp_drops as u64;
            self.kstats.freeze_q_cnt += st.tp_freeze_q_cnt as u64;
        }
        self.kstats
    }
}

/// poll() that retries on EINTR with the same timeout (a signal handler sets
/// a flag and the callers check it on return anyway).
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> Result<usize, CaptureError> {
    // SAFETY: fds is a valid slice of pollfd.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok(0);
        }
        return Err(CaptureError::os(ErrorKind::Io, "poll", e));
    }
    Ok(r as usize)
}

/// The descriptors a worker sleeps on: its rings plus the stop eventfd.
pub struct Waiter {
    fds: Vec<libc::pollfd>,
}

/// A socket error reported by poll (POLLERR) on a ring.
#[derive(Debug)]
pub struct RingError {
    /// Position of the ring in the list given to [`Waiter::new`].
    pub ring: usize,
    pub error: std::io::Error,
}

impl Waiter {
    pub fn new(rings: impl IntoIterator<Item = RawFd>, stop: RawFd) -> Waiter {
        let mut fds: Vec<libc::pollfd> =
            rings.into_iter().map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
        fds.push(libc::pollfd { fd: stop, events: libc::POLLIN, revents: 0 });
        Waiter { fds }
    }

    /// Sleeps until a ring has a block, the stop fd is readable (unless
    /// `with_stop` is false), or `timeout_ms` passes. A pending socket error
    /// (e.g. ENETDOWN when the interface goes down) is read, which clears it,
    /// and returned: left pending, it would make every poll return at once.
    pub fn wait(&mut self, timeout_ms: i32, with_stop: bool) -> Result<Option<RingError>, CaptureError> {
        let n = if with_stop { self.fds.len() } else { self.fds.len() - 1 };
        for f in &mut self.fds {
            f.revents = 0;
        }
        poll(&mut self.fds[..n], timeout_ms)?;
        let rings = self.fds.len() - 1;
        for (i, f) in self.fds[..rings].iter().enumerate() {
            if f.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                let mut err: libc::c_int = 0;
                let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
                // SAFETY: SO_ERROR into an int.
                unsafe {
                    libc::getsockopt(
                        f.fd,
                        libc::SOL_SOCKET,
                        libc::SO_ERROR,
                        (&mut err as *mut libc::c_int).cast(),
                        &mut len,
                    )
                };
                let error = if err != 0 {
                    std::io::Error::from_raw_os_error(err)
                } else {
                    std::io::Error::other(format!("poll reported {:#x}", f.revents))
                };
                return Ok(Some(RingError { ring: i, error }));
            }
        }
        Ok(None)
    }
}

/// A retired block. Dropping it returns it to the kernel.
pub struct Block<'r> {
    ring: &'r mut Ring,
    base: *mut u8,
    next: usize,
    left: u32,
}

impl Block<'_> {
    /// Packets in the block.
    pub fn len(&self) -> u32 {
        // SAFETY: the block is ours until dropped.
        unsafe { (*self.base.cast::<tpacket_block_desc>()).num_pkts }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next packet of the block, borrowed from the ring until the block
    /// is dropped (a lending iterator: `while let Some(p) = b.next_packet()`).
    pub fn next_packet(&mut self) -> Option<Packet<'_>> {
        let bs = self.ring.block_size;
        while self.left > 0 {
            if self.next + sys::TPACKET3_HDRLEN + std::mem::size_of::<libc::sockaddr_ll>() > bs {
                break;
            }
            // SAFETY: the header lies inside the block (checked above); the
            // kernel wrote it before retiring the block, and the block is ours.
            let h: tpacket3_hdr = unsafe { std::ptr::read_unaligned(self.base.add(self.next).cast()) };
            // SAFETY: the sockaddr_ll follows the header (TPACKET_ALIGN(48) = 48).
            let sll: libc::sockaddr_ll =
                unsafe { std::ptr::read_unaligned(self.base.add(self.next + sys::TPACKET3_HDRLEN).cast()) };
            let start = self.next + h.tp_mac as usize;
            let end = start + h.tp_snaplen as usize;
            if end > bs {
                break;
            }
            self.left -= 1;
            self.next = if h.tp_next_offset == 0 { bs } else { self.next + h.tp_next_offset as usize };
            let outgoing = sll.sll_pkttype == sys::PACKET_OUTGOING;
            if self.ring.drop_outgoing_loopback && outgoing && sll.sll_hatype == sys::ARPHRD_LOOPBACK {
                continue;
            }
            // SAFETY: [start, end) is inside the block, which stays ours (and
            // unmodified by the kernel) while `self` is borrowed.
            let data = unsafe { std::slice::from_raw_parts(self.base.add(start), end - start) };
            let protocol = u16::from_be(sll.sll_protocol);
            let linktype = match self.ring.framing {
                Framing::Ethernet => Some(LinkType::ETHERNET),
                Framing::Cooked if protocol == sys::ETH_P_IP || protocol == sys::ETH_P_IPV6 => Some(LinkType::RAW),
                Framing::Cooked => None,
            };
            return Some(Packet {
                ts_ns: h.tp_sec as i64 * 1_000_000_000 + h.tp_nsec as i64,
                wire_len: h.tp_len,
                data,
                ifindex: sll.sll_ifindex,
                pkttype: sll.sll_pkttype,
                hatype: sll.sll_hatype,
                protocol,
                vlan_tci: (h.tp_status & sys::TP_STATUS_VLAN_VALID != 0).then_some((h.tp_vlan_tci & 0x0fff) as u16),
                rxhash: h.tp_rxhash,
                status: h.tp_status,
                linktype,
                if_id: if self.ring.any { sll.sll_ifindex as u32 } else { self.ring.if_id },
            });
        }
        self.left = 0;
        None
    }

    pub fn framing(&self) -> Framing {
        self.ring.framing
    }

    pub fn is_any(&self) -> bool {
        self.ring.any
    }
}

impl Drop for Block<'_> {
    fn drop(&mut self) {
        // Everything read from the block happens before the kernel may
        // reuse it.
        fence(Ordering::Release);
        self.ring.status(self.ring.cur).store(sys::TP_STATUS_KERNEL, Ordering::Release);
        self.ring.cur = (self.ring.cur + 1) % self.ring.block_count;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::io::{Read, Write};

    use crate::testnet::private_netns;

    fn skip_unless_root() -> bool {
        if crate::privs::is_root() {
            return false;
        }
        let required = std::env::var("WIRELOG_REQUIRE_ALL_TESTS").is_ok_and(|v| v == "1");
        assert!(!required, "this test needs root (a private network namespace)");
        eprintln!("SKIPPED: needs root (a private network namespace)");
        true
    }

    /// (src ip, sport, dst ip, dport) of an IPv4/TCP Ethernet frame.
    fn tuple(f: &[u8]) -> Option<([u8; 4], u16, [u8; 4], u16)> {
        if f.len() < 14 + 24 || f[12..14] != [0x08, 0x00] || f[14 + 9] != 6 {
            return None;
        }
        let ip = &f[14..];
        let l4 = &ip[((ip[0] & 0xf) as usize) * 4..];
        Some((
            ip[12..16].try_into().unwrap(),
            u16::from_be_bytes([l4[0], l4[1]]),
            ip[16..20].try_into().unwrap(),
            u16::from_be_bytes([l4[2], l4[3]]),
        ))
    }

    /// Two rings in one fanout group on loopback, 40 TCP connections: every
    /// packet is seen once (outgoing copies ignored), both directions of each
    /// connection reach the same ring.
    #[test]
    fn fanout_is_flow_symmetric_and_loopback_is_not_doubled() {
        if skip_unless_root() {
            return;
        }
        assert!(private_netns(), "unshare(CLONE_NEWNET) failed as root");
        let lo = Interface::lookup("lo").unwrap();
        let group = (std::process::id() as u16) ^ 0x5a5a;
        let cfg = RingConfig {
            ring_size: 8 << 20,
            block_size: 64 << 10,
            retire_ms: 10,
            fanout_group: Some(group),
            ..RingConfig::default()
        };
        let mut rings = [Ring::open(&lo, &cfg).unwrap(), Ring::open(&lo, &cfg).unwrap()];

        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        let conns = 40;
        let t = std::thread::spawn(move || {
            for _ in 0..conns {
                let (mut s, _) = server.accept().unwrap();
                let mut b = [0u8; 5];
                s.read_exact(&mut b).unwrap();
                s.write_all(b"world").unwrap();
            }
        });
        // The spawned thread is in the original namespace: connect from here
        // only after checking the listener lives in ours (it was bound here).
        let mut sent = 0;
        for _ in 0..conns {
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            c.write_all(b"hello").unwrap();
            let mut b = [0u8; 5];
            c.read_exact(&mut b).unwrap();
            sent += 1;
        }
        t.join().unwrap();
        assert_eq!(sent, conns);
        std::thread::sleep(std::time::Duration::from_millis(100));

        // Rings and packet count per connection (keyed by the client port).
        let mut seen: HashMap<u16, (Vec<usize>, usize)> = HashMap::new();
        let mut total = 0;
        for (i, ring) in rings.iter_mut().enumerate() {
            while let Some(mut b) = ring.next_block() {
                while let Some(p) = b.next_packet() {
                    assert!(!p.is_outgoing(), "an outgoing loopback copy was not ignored");
                    let Some((_, sp, _, dp)) = tuple(p.data) else {
                        continue;
                    };
                    let client = if dp == addr.port() { sp } else { dp };
                    let e = seen.entry(client).or_default();
                    e.0.push(i);
                    e.1 += 1;
                    total += 1;
                }
            }
        }
        // Small blocks retired every 10 ms: 128 of them hold 1.28 s of traffic
        // without reading, so nothing is dropped even on a loaded machine.
        let drops: u64 = rings.iter_mut().map(|r| r.kernel_stats().drops).sum();
        assert_eq!(seen.len(), conns, "connections seen ({drops} kernel drops)");
        let mut per_ring = [0usize; 2];
        for (port, (rings_of, n)) in &seen {
            assert!(rings_of.iter().all(|r| *r == rings_of[0]), "connection from port {port} split over rings");
            // SYN, SYN-ACK, ACK, 2 data, 2 ACKs (or piggybacked), FINs...: never
            // the doubled count loopback would give without ignoring outgoing copies.
            assert!((6..=12).contains(n), "connection from port {port}: {n} packets");
            per_ring[rings_of[0]] += 1;
        }
        assert!(per_ring[0] > 0 && per_ring[1] > 0, "fanout used one ring only: {per_ring:?}");
        let k: u64 = rings.iter_mut().map(|r| r.kernel_stats().packets).sum();
        assert!(k >= total as u64, "kernel counted {k} packets, rings gave {total}");
    }

    #[test]
    fn a_bad_interface_index_fails_cleanly() {
        if skip_unless_root() {
            return;
        }
        let iface = Interface { name: "gone0".into(), index: 999_999, hw_type: 1, framing: Framing::Ethernet };
        let e = Ring::open(&iface, &RingConfig::default()).err().expect("bind must fail");
        assert!(e.message.starts_with("interface gone0: "), "{e}");
    }
}
