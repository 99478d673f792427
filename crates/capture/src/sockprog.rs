//! One eBPF program per capture socket, in place of the classic filter
//! (issue 35/36): a socket takes one filter, so what used to need a filter
//! each (the user's `-f`, `--skip-empty-tcp`, `--kernel-accounting`) are
//! stages of one program, in this order:
//!
//! 1. Packets that are not IP (ARP, LLDP, STP, ...), when no `-f` decides
//!    about them, are counted in a per-CPU map (packets and bytes on the
//!    wire) and dropped: user space only counted them. "Not IP" is what the
//!    decoder calls `NotIp`: on Ethernet sockets an EtherType that is not
//!    IPv4, IPv6, MPLS or PPPoE session, or a PPPoE session frame that
//!    carries no IP (a code other than 0, or a PPP control protocol such as
//!    LCP or IPCP), behind up to four VLAN tags
//!    (802.1Q, 802.1ad, 0x9100) in the data and one the kernel keeps in
//!    the socket buffer's metadata; 802.3 frames whose LLC header is not
//!    SNAP with OUI 0 or 0xf8, or whose SNAP EtherType is not IP by the same
//!    rule (see `decode::ethernet::by_ethertype`/`llc_network`); on cooked
//!    sockets a protocol other than IPv4 and IPv6
//!    (`ring::Packet::packet`). A frame too short to tell, or behind more
//!    tags, goes to user space.
//! 2. The user's `-f` program, translated ([`wirelog_ebpf::cbpf`]): 0 drops.
//! 3. The skip-empty-TCP filter, translated, when the flags map says so
//!    ([`FLAG_SKIP_EMPTY`]): `--skip-empty-tcp` sets it at start,
//!    `--cpu-budget` step 2 sets and clears it (a map write, not a program
//!    swap).
//! 4. A tail the caller gives (the kernel accounting lookup of
//!    `--kernel-accounting`), which returns itself, run while the flags map
//!    says so ([`FLAG_KERNEL_ACCOUNTING`]): `--kernel-accounting` sets it at
//!    start, `--cpu-budget` step 3 sets and clears it. Without one, or with
//!    the flag clear, the packet is kept, cut to what `-f` returned (the
//!    snap length).
//! 5. While [`FLAG_SHED`] is set (`--cpu-budget` step 4: the worker pauses
//!    at its share), every packet still kept is refused and counted (key 1
//!    of the counts map, packets and wire bytes) as shed by the budget:
//!    a drop in the kernel, counted by cause, before the ring copies it.
//!    After the tail, so that the connections kernel accounting counts are
//!    still counted during a pause; the tail's exits are made jumps to
//!    this stage for that.
//!
//! The stages expect the socket buffer in `r6` and leave nothing else
//! between them: each translated block uses the stack and `r0`-`r5`,
//! `r7`; the accepted length is kept in `r9`.

use std::io;

use wirelog_ebpf::{cbpf, Alu, Asm, AsmError, Cond, Error, Helper, Insn, Map, MapType, ProgType, Program, Reg, Size};

use crate::Framing;

/// Flags map bit: run the skip-empty-TCP stage.
pub const FLAG_SKIP_EMPTY: u32 = 1;

/// Flags map bit: run the tail (kernel accounting).
pub const FLAG_KERNEL_ACCOUNTING: u32 = 2;

/// Flags map bit: refuse and count every packet that reaches the last
/// stage (`--cpu-budget` step 4, set while the worker pauses).
pub const FLAG_SHED: u32 = 4;

/// Counts map keys: non-IP packets, packets shed ([`FLAG_SHED`]).
const COUNT_NON_IP: i32 = 0;
const COUNT_SHED: i32 = 1;

/// What one socket's program is made of.
pub struct Stages<'a> {
    pub framing: Framing,
    pub snaplen: u32,
    /// Count and drop non-IP packets in the kernel (ignored with `user`,
    /// which decides about them).
    pub count_non_ip: bool,
    /// The user's `-f`, compiled for `framing`.
    pub user: Option<&'a [libc::sock_filter]>,
    /// The skip-empty-TCP filter alone, compiled for `framing`, run while
    /// [`FLAG_SKIP_EMPTY`] is set.
    pub skip_empty: Option<&'a [libc::sock_filter]>,
    /// Instructions run last, with the socket buffer in `r6`, while
    /// [`FLAG_KERNEL_ACCOUNTING`] is set; they end the program themselves.
    pub tail: Option<Vec<Insn>>,
    /// The shed stage, run while [`FLAG_SHED`] is set: only for a capture
    /// with `--cpu-budget` (without, its flag lookup would be a cost on
    /// every kept packet for a step that never comes).
    pub shed: bool,
}

impl Stages<'_> {
    /// True when the program does more than the socket's classic filter
    /// alone (the user's `-f`, with `--skip-empty-tcp` compiled in) would:
    /// it counts non-IP packets in the kernel (no `-f`), runs a tail or the
    /// shed stage, or switches the skip-empty-TCP stage while it runs
    /// (`flags_change`: `--cpu-budget` step 2). Otherwise the caller keeps
    /// the classic filter: the kernel converts it with a direct load from
    /// the packet's linear data for each `ld_abs`/`ld_ind`
    /// (`net/core/filter.c`, `convert_bpf_ld_abs()`), where a loaded eBPF
    /// program has each of them rewritten into a call of
    /// `bpf_skb_load_helper_*_no_cache` (`bpf_gen_ld_abs()`, the verifier's
    /// `gen_ld_abs`): for `tcp port N` on IPv4, six helper calls a packet on the
    /// sender's CPU, ~22 ns more than the classic filter (BENCHMARKS.md,
    /// issue 36, branch snap36c).
    pub fn needed(&self, flags_change: bool) -> bool {
        (self.count_non_ip && self.user.is_none()) || self.tail.is_some() || self.shed || (self.skip_empty.is_some() && flags_change)
    }
}

/// A loaded socket program and its maps.
pub struct SocketProgram {
    prog: Program,
    /// Per CPU, key 0: non-IP packets and their bytes, counted and dropped;
    /// key 1: packets and wire bytes shed while [`FLAG_SHED`] was set.
    counts: Map,
    /// Key 0: [`FLAG_SKIP_EMPTY`], [`FLAG_KERNEL_ACCOUNTING`], [`FLAG_SHED`].
    flags: Map,
}

// `struct __sk_buff` fields.
const SKB_LEN: i16 = 0;
const SKB_PROTOCOL: i16 = 16;
/// Stack word for map keys (below what the translated blocks use).
const KEY: i16 = -68;

/// EtherTypes the decoder takes as IP or follows to IP through a header
/// other than a VLAN tag or PPPoE: IPv4, IPv6, MPLS (unicast, multicast)
/// (`decode::ethernet::by_ethertype`). The program leaves them to user
/// space.
const TOWARDS_IP: [i32; 4] = [0x0800, 0x86dd, 0x8847, 0x8848];
/// PPPoE session: the program reads the PPPoE and PPP headers
/// ([`pppoe_non_ip`]); PPPoE discovery (0x8863) is not IP like any other
/// EtherType.
const PPPOE_SESSION: i32 = 0x8864;
/// VLAN tags the decoder steps over: 802.1Q, 802.1ad, and the older QinQ
/// 0x9100.
const TAGS: [i32; 3] = [0x8100, 0x88a8, 0x9100];
/// Tags in the frame's data the program steps over before it leaves the
/// frame to user space (the decoder follows any number): a tag the kernel
/// took into the socket buffer's metadata is no longer in the data (see
/// [`ethernet_non_ip`]), so this is on top of that one.
const DATA_TAGS: usize = 4;
const TAG_LABELS: [&str; DATA_TAGS] = ["tag0", "tag1", "tag2", "tag3"];

impl SocketProgram {
    pub fn load(st: &Stages) -> Result<SocketProgram, Error> {
        let counts = Map::create(MapType::PerCpuArray, "wl_nonip", 4, 16, 2)?;
        let flags = Map::create(MapType::Array, "wl_sockflags", 4, 4, 1)?;
        let insns = build(st, &counts, &flags).map_err(|e| Error { what: e.to_string(), os: io::Error::from(io::ErrorKind::InvalidInput), log: String::new() })?;
        let prog = Program::load(ProgType::SocketFilter, "wl_socket", &insns, "GPL")?;
        Ok(SocketProgram { prog, counts, flags })
    }

    pub fn fd(&self) -> std::os::fd::RawFd {
        self.prog.fd()
    }

    /// Non-IP packets and bytes counted (and dropped) in the kernel so far.
    pub fn non_ip(&self) -> (u64, u64) {
        self.count(COUNT_NON_IP)
    }

    /// Packets and wire bytes refused while [`FLAG_SHED`] was set, so far.
    pub fn shed(&self) -> (u64, u64) {
        self.count(COUNT_SHED)
    }

    fn count(&self, key: i32) -> (u64, u64) {
        let n = wirelog_ebpf::possible_cpus();
        let mut v = vec![0u8; 16 * n];
        if !self.counts.lookup_percpu(&(key as u32).to_ne_bytes(), &mut v).unwrap_or(false) {
            return (0, 0);
        }
        let get = |at: usize| u64::from_ne_bytes(v[at..at + 8].try_into().expect("8 bytes"));
        (0..n).fold((0, 0), |(p, b), cpu| (p + get(cpu * 16), b + get(cpu * 16 + 8)))
    }

    /// Sets the flags ([`FLAG_SKIP_EMPTY`], [`FLAG_KERNEL_ACCOUNTING`],
    /// [`FLAG_SHED`]).
    pub fn set_flags(&self, flags: u32) -> io::Result<()> {
        self.flags.update(&0u32.to_ne_bytes(), &flags.to_ne_bytes())
    }
}

fn build(st: &Stages, counts: &Map, flags: &Map) -> Result<Vec<Insn>, AsmError> {
    use Reg::*;
    let snap = st.snaplen.min(i32::MAX as u32) as i32;
    let mut a = Asm::new();
    a.push(Insn::mov64_reg(R6, R1));
    if st.count_non_ip && st.user.is_none() {
        a.push(Insn::load(Size::W, R1, R6, SKB_LEN));
        match st.framing {
            Framing::Ethernet => ethernet_non_ip(&mut a),
            Framing::Cooked => {
                // The protocol as a 32-bit load of a big-endian u16 sees it.
                a.push(Insn::load(Size::W, R1, R6, SKB_PROTOCOL)).jmp_imm(Cond::Eq, R1, 0x0008, "ip").jmp_imm(Cond::Eq, R1, 0xdd86, "ip");
            }
        }
        a.label("non_ip");
        count_and_drop(&mut a, counts, COUNT_NON_IP);
        a.label("ip");
    }
    match st.user {
        Some(u) => {
            a.push_all(cbpf::translate(u)?).jmp_imm(Cond::Eq, R0, 0, "drop").push(Insn::mov64_reg(R9, R0));
        }
        None => {
            a.push(Insn::mov64_imm(R9, snap));
        }
    }
    if let Some(s) = st.skip_empty {
        unless_flag(&mut a, flags, FLAG_SKIP_EMPTY, "skip_done");
        a.push_all(cbpf::translate(s)?)
            .jmp_imm(Cond::Eq, R0, 0, "drop")
            .label("skip_done");
    }
    if let Some(t) = &st.tail {
        // The flag is read afresh for every packet: once it is cleared, no
        // packet starting the stage after the write is counted.
        unless_flag(&mut a, flags, FLAG_KERNEL_ACCOUNTING, "shed");
        // Each exit of the tail becomes a jump to its end (one slot for
        // one: the tail's own jumps keep their offsets), where r0 holds
        // what it returned: 0, counted in the kernel; else the length it
        // passes, which the shed stage may still refuse.
        let exit = Insn::exit().code;
        let n = t.len();
        for (i, insn) in t.iter().enumerate() {
            if insn.code == exit {
                a.push(Insn::jmp_imm(Cond::Ja, R0, 0, (n - 1 - i) as i16));
            } else {
                a.push(*insn);
            }
        }
        a.jmp_imm(Cond::Eq, R0, 0, "drop").push(Insn::mov64_reg(R9, R0));
    }
    // Step 4 of the budget: refused and counted by cause. One array-map
    // lookup per packet kept (inlined by the verifier for an array map),
    // only in a budgeted capture's programs.
    a.label("shed");
    if st.shed {
        unless_flag(&mut a, flags, FLAG_SHED, "keep");
        count_and_drop(&mut a, counts, COUNT_SHED);
    }
    a.label("keep").push(Insn::mov64_reg(R0, R9)).push(Insn::exit());
    a.label("drop").push(Insn::mov64_imm(R0, 0)).push(Insn::exit());
    a.finish()
}

/// Adds the packet and its length to the counts map's `key` (this CPU's
/// slot), then drops it.
fn count_and_drop(a: &mut Asm, counts: &Map, key: i32) {
    use Reg::*;
    a.push(Insn::store_imm(Size::W, R10, KEY, key))
        .push_all(Insn::load_map_fd(R1, counts.fd()))
        .push(Insn::mov64_reg(R2, R10))
        .push(Insn::alu64_imm(Alu::Add, R2, KEY as i32))
        .push(Insn::call(Helper::MapLookupElem))
        .jmp_imm(Cond::Eq, R0, 0, "drop")
        .push(Insn::mov64_imm(R1, 1))
        .push(Insn::atomic_add(Size::DW, R0, 0, R1))
        .push(Insn::load(Size::W, R1, R6, SKB_LEN))
        .push(Insn::atomic_add(Size::DW, R0, 8, R1))
        .ja("drop");
}

/// Jumps to `label` unless `bit` is set in the flags map's word (read
/// afresh for every packet, so a stage switched off is skipped from the
/// next packet on).
fn unless_flag(a: &mut Asm, flags: &Map, bit: u32, label: &'static str) {
    use Reg::*;
    a.push(Insn::store_imm(Size::W, R10, KEY, 0))
        .push_all(Insn::load_map_fd(R1, flags.fd()))
        .push(Insn::mov64_reg(R2, R10))
        .push(Insn::alu64_imm(Alu::Add, R2, KEY as i32))
        .push(Insn::call(Helper::MapLookupElem))
        .jmp_imm(Cond::Eq, R0, 0, label)
        .push(Insn::load(Size::W, R1, R0, 0))
        .push(Insn::alu64_imm(Alu::And, R1, bit as i32))
        .jmp_imm(Cond::Eq, R1, 0, label);
}

/// Jumps to `non_ip` for what the decoder calls not IP on an Ethernet
/// frame (`decode::ethernet::network`), to `ip` for the rest; `r1` holds
/// the socket buffer's length, the frame is read from the socket buffer's
/// data (`ld_abs`/`ld_ind`, which end the program with 0 past the end: every
/// read is behind a length test, and a frame too short to tell goes to
/// user space, where the decoder calls it truncated).
///
/// VLAN tags: the data the program reads is what the ring gets, from the
/// MAC header on, with any tag the kernel took into the metadata
/// (`skb->vlan_tci`, `__sk_buff.vlan_present`) already cut out of it, and
/// the decoder takes that tag from `tp_vlan_tci` without looking at the
/// data for it; so what follows the tags in the data decides alone:
/// - On receive the kernel takes the outer 802.1Q or 802.1ad tag out of
///   the data itself, whatever the device's `rxvlan` offload says, before
///   any packet socket sees the frame: `net/core/dev.c`,
///   `__netif_receive_skb_core()`: `if (eth_type_vlan(skb->protocol))
///   skb = skb_vlan_untag(skb);` before the `ptype_all` taps
///   (`deliver_skb`). `skb_vlan_untag()`
///   (`net/core/skbuff.c`) takes one tag only, and none when the NIC
///   already put one in the metadata, so the second tag of a QinQ frame,
///   and a 0x9100 tag (not `eth_type_vlan`), stay in the data. A NIC with
///   `rxvlan` on does the same for the outer tag before that. veth offers
///   the flag (`NETIF_F_HW_VLAN_CTAG_RX`/`STAG_RX` in `VETH_FEATURES`,
///   `drivers/net/veth.c`) but strips nothing itself: a frame sent with
///   its tags in the data arrives with the outer one in the metadata with
///   `rxvlan` on and off alike (seen on 6.18; the veth test in
///   `tests/capture_live.rs` runs both).
/// - The filter runs on that socket buffer with its data pushed back to the
///   MAC header: `net/packet/af_packet.c`, `tpacket_rcv()` (and
///   `packet_rcv()`): `skb_push(skb, skb->data - skb_mac_header(skb))`
///   then `run_filter()`; the ring's `tp_vlan_tci` and
///   `TP_STATUS_VLAN_VALID` come from `skb_vlan_tag_present()` there.
/// - Outgoing copies (`dev_queue_xmit_nit()`) keep a tag in the data unless
///   the sender's device offloads it (`txvlan`), when it is metadata.
///
/// The test `tagged_non_ip_counted_in_the_kernel` sends each kind through
/// loopback, where both the outgoing copy (tags in the data) and the
/// received one (outer tag in the metadata) are seen.
fn ethernet_non_ip(a: &mut Asm) {
    use Reg::*;
    a.jmp_imm(Cond::Lt, R1, 14, "ip").push(Insn::ld_abs(Size::H, 12)).push(Insn::mov64_imm(R7, 14)).jmp_imm(
        Cond::Ge,
        R0,
        0x0600,
        "ethertype",
    );
    // 802.3 (a length, not an EtherType): an LLC header
    // (`decode::ethernet::llc_network`), IP only behind SNAP with OUI 0
    // (RFC 1042) or 0x0000f8 (802.1H) and then an EtherType as above.
    a.push(Insn::load(Size::W, R1, R6, SKB_LEN))
        .jmp_imm(Cond::Lt, R1, 17, "ip")
        .push(Insn::ld_abs(Size::H, 14))
        .jmp_imm(Cond::Ne, R0, 0xaaaa, "llc")
        .push(Insn::ld_abs(Size::B, 16))
        .jmp_imm(Cond::Ne, R0, 3, "llc_control")
        .push(Insn::load(Size::W, R1, R6, SKB_LEN))
        .jmp_imm(Cond::Lt, R1, 22, "ip")
        .push(Insn::ld_abs(Size::W, 16))
        .push(Insn::alu64_imm(Alu::And, R0, 0x00ff_ffff))
        .jmp_imm(Cond::Eq, R0, 0, "snap")
        .jmp_imm(Cond::Ne, R0, 0xf8, "non_ip")
        .label("snap")
        .push(Insn::ld_abs(Size::H, 20))
        .push(Insn::mov64_imm(R7, 22))
        .ja("ethertype")
        // Not SNAP: not IP, once the control field (one byte for U-format,
        // two otherwise) is there.
        .label("llc")
        .push(Insn::ld_abs(Size::B, 16))
        .label("llc_control")
        .push(Insn::alu64_imm(Alu::And, R0, 3))
        .jmp_imm(Cond::Eq, R0, 3, "non_ip")
        .push(Insn::load(Size::W, R1, R6, SKB_LEN))
        .jmp_imm(Cond::Lt, R1, 18, "ip")
        .ja("non_ip");
    // `decode::ethernet::by_ethertype`, unrolled: r0 holds the EtherType,
    // r7 the offset of what follows it. A tag is 4 bytes (its last two
    // the next EtherType); a length after a tag is not IP, as there.
    a.label("ethertype");
    for i in 0..=DATA_TAGS {
        for t in TOWARDS_IP {
            a.jmp_imm(Cond::Eq, R0, t, "ip");
        }
        a.jmp_imm(Cond::Eq, R0, PPPOE_SESSION, "pppoe");
        let Some(&next) = TAG_LABELS.get(i) else {
            // More tags than the program follows: user space decides.
            for t in TAGS {
                a.jmp_imm(Cond::Eq, R0, t, "ip");
            }
            a.ja("non_ip");
            break;
        };
        for t in TAGS {
            a.jmp_imm(Cond::Eq, R0, t, next);
        }
        a.ja("non_ip").label(next);
        unless_room(a, 4);
        a.push(Insn::ld_ind(Size::H, R7, 2)).push(Insn::alu64_imm(Alu::Add, R7, 4));
    }
    pppoe_non_ip(a);
}

/// Goes to user space (`ip`) unless the frame holds `bytes` from `r7` on.
fn unless_room(a: &mut Asm, bytes: i32) {
    use Reg::*;
    a.push(Insn::load(Size::W, R1, R6, SKB_LEN))
        .push(Insn::mov64_reg(R2, R7))
        .push(Insn::alu64_imm(Alu::Add, R2, bytes))
        .jmp_reg(Cond::Gt, R2, R1, "ip");
}

/// A PPPoE session header at `r7` (label `pppoe`): not IP as
/// `decode::ppp::pppoe_network` and `ppp_network` say, i.e. a code other
/// than 0 (discovery packets on the session EtherType), or a PPP protocol
/// other than IPv4 (0x0021) and IPv6 (0x0057): LCP, IPCP, IPv6CP, PAP,
/// CHAP, ... The PPP header may start with the 0xff 0x03 address/control
/// bytes and its protocol may be one odd byte (RFC 1661 sections 6.5,
/// 6.6; `decode::ppp::Header`). What the decoder would call truncated goes
/// to user space, which counts it there.
fn pppoe_non_ip(a: &mut Asm) {
    use Reg::*;
    const CODE: i32 = 1;
    const PPP: i32 = 6;
    a.label("pppoe");
    unless_room(a, PPP);
    a.push(Insn::ld_ind(Size::B, R7, CODE)).jmp_imm(Cond::Ne, R0, 0, "non_ip");
    unless_room(a, PPP + 1);
    a.push(Insn::ld_ind(Size::B, R7, PPP)).jmp_imm(Cond::Ne, R0, 0xff, "ppp_protocol");
    // 0xff: the address byte if 0x03 follows, else a one-byte protocol
    // 0xff (odd), not IP.
    unless_room(a, PPP + 2);
    a.push(Insn::ld_ind(Size::B, R7, PPP + 1))
        .jmp_imm(Cond::Ne, R0, 3, "non_ip")
        .push(Insn::alu64_imm(Alu::Add, R7, 2));
    unless_room(a, PPP + 1);
    a.push(Insn::ld_ind(Size::B, R7, PPP));
    // r0: the protocol's first byte, at r7 + PPP. Odd: the whole protocol.
    a.label("ppp_protocol")
        .jmp_imm(Cond::Eq, R0, 0x21, "ip")
        .jmp_imm(Cond::Eq, R0, 0x57, "ip")
        .jmp_imm(Cond::Set, R0, 1, "non_ip");
    unless_room(a, PPP + 2);
    a.push(Insn::ld_ind(Size::H, R7, PPP))
        .jmp_imm(Cond::Eq, R0, 0x0021, "ip")
        .jmp_imm(Cond::Eq, R0, 0x0057, "ip")
        .ja("non_ip");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::{compile, SKIP_EMPTY_TCP};
    use wirelog_decode::{DecodeConfig, Decoded, Decoder, LinkType, SkipReason};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    fn root() -> bool {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            return true;
        }
        let required = std::env::var("WIRELOG_REQUIRE_ALL_TESTS").is_ok_and(|v| v == "1");
        assert!(!required, "this test needs root (a private network namespace, eBPF)");
        eprintln!("SKIPPED: needs root");
        false
    }

    use crate::testnet::{lo_up, loopback_addr as addr};

    /// A packet socket on loopback, with `prog` attached before bind
    /// (none: a sender).
    fn socket(prog: Option<&SocketProgram>) -> OwnedFd {
        // SAFETY: socket(2); owned right after.
        let fd = unsafe { OwnedFd::from_raw_fd(libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0)) };
        if let Some(p) = prog {
            wirelog_ebpf::attach_socket_filter(fd.as_raw_fd(), &p.prog).unwrap();
        }
        let a = addr();
        let tv = libc::timeval { tv_sec: 0, tv_usec: 200_000 };
        // SAFETY: bind/setsockopt with properly sized arguments.
        unsafe {
            assert_eq!(libc::bind(fd.as_raw_fd(), (&a as *const libc::sockaddr_ll).cast(), std::mem::size_of::<libc::sockaddr_ll>() as u32), 0);
            libc::setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVTIMEO, (&tv as *const libc::timeval).cast(), std::mem::size_of::<libc::timeval>() as u32);
        }
        fd
    }

    fn send(tx: &OwnedFd, f: &[u8]) {
        let a = addr();
        // SAFETY: sendto with our frame and address.
        let n = unsafe { libc::sendto(tx.as_raw_fd(), f.as_ptr().cast(), f.len(), 0, (&a as *const libc::sockaddr_ll).cast(), std::mem::size_of::<libc::sockaddr_ll>() as u32) };
        assert_eq!(n, f.len() as isize);
    }

    /// The EtherTypes (or 802.3 lengths) of the incoming frames received.
    fn received(rx: &OwnedFd) -> Vec<u16> {
        let mut out = Vec::new();
        let mut buf = [0u8; 2048];
        for _ in 0..10_000 {
            // SAFETY: sockaddr_ll is plain data.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: recvfrom into our buffer and address.
            let n = unsafe { libc::recvfrom(rx.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0, (&mut from as *mut libc::sockaddr_ll).cast(), &mut len) };
            if n < 0 {
                break;
            }
            if from.sll_pkttype != libc::PACKET_OUTGOING {
                out.push(u16::from_be_bytes([buf[12], buf[13]]));
            }
        }
        out
    }

    fn frame(ethertype: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.extend_from_slice(payload);
        f.resize(f.len().max(60), 0);
        f
    }

    /// IPv4/TCP from 10.0.0.1:1234 to 10.0.0.2:80 with `flags` and `data` bytes.
    fn tcp4(flags: u8, data: usize) -> Vec<u8> {
        let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        ip[2..4].copy_from_slice(&((40 + data) as u16).to_be_bytes());
        let mut t = vec![0u8; 20];
        t[0..2].copy_from_slice(&1234u16.to_be_bytes());
        t[2..4].copy_from_slice(&80u16.to_be_bytes());
        t[12] = 5 << 4;
        t[13] = flags;
        ip.extend_from_slice(&t);
        ip.resize(40 + data, b'x');
        frame(0x0800, &ip)
    }

    /// Non-IP frames are counted in the kernel, exactly, and never reach
    /// the socket; IP frames do; with a user filter, the filter decides
    /// about non-IP frames too (`arp` lets ARP through, uncounted); the
    /// skip-empty stage drops empty ACKs only while its flag is set.
    #[test]
    fn non_ip_counted_in_the_kernel_and_stages_compose() {
        if !root() {
            return;
        }
        let Ok(skip) = compile(SKIP_EMPTY_TCP, Framing::Ethernet, 65535) else {
            eprintln!("SKIPPED: libpcap not installed");
            return;
        };
        // SAFETY: unshare affects only this test's thread.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
        lo_up();
        let arp = frame(0x0806, &[0, 1, 8, 0, 6, 4, 0, 1]);
        let lldp = frame(0x88cc, &[2, 7, 4, 0, 0, 0, 0, 0, 1]);
        let mut stp = frame(0x0026, &[0x42, 0x42, 0x03, 0, 0]);
        stp[12..14].copy_from_slice(&38u16.to_be_bytes());
        let snap_ip = frame(0x0030, &[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00]);
        let tx = socket(None);

        let p = SocketProgram::load(&Stages { framing: Framing::Ethernet, snaplen: 65535, count_non_ip: true, user: None, skip_empty: Some(&skip), tail: None, shed: false }).unwrap_or_else(|e| panic!("{e}: {}", e.log));
        let rx = socket(Some(&p));
        for _ in 0..7 {
            send(&tx, &arp);
        }
        for _ in 0..3 {
            send(&tx, &lldp);
        }
        send(&tx, &stp);
        send(&tx, &snap_ip);
        send(&tx, &tcp4(0x10, 0));
        send(&tx, &tcp4(0x18, 10));
        assert_eq!(received(&rx), [0x0030, 0x0800, 0x0800], "only what may be IP reaches the socket");
        // Loopback also shows each frame's outgoing copy: both counted, as
        // user space would have counted both.
        let (pkts, bytes) = p.non_ip();
        assert_eq!(pkts, 2 * 11);
        assert_eq!(bytes, 2 * (7 * arp.len() + 3 * lldp.len() + stp.len()) as u64);

        p.set_flags(FLAG_SKIP_EMPTY).unwrap();
        send(&tx, &tcp4(0x10, 0));
        send(&tx, &tcp4(0x18, 10));
        send(&tx, &tcp4(0x02, 0));
        assert_eq!(received(&rx).len(), 2, "the empty ACK dropped while the flag is set");
        p.set_flags(0).unwrap();
        send(&tx, &tcp4(0x10, 0));
        assert_eq!(received(&rx).len(), 1);

        let arp_only = compile("arp or tcp", Framing::Ethernet, 100).unwrap();
        let q = SocketProgram::load(&Stages { framing: Framing::Ethernet, snaplen: 100, count_non_ip: true, user: Some(&arp_only), skip_empty: None, tail: None, shed: false }).unwrap();
        let rx2 = socket(Some(&q));
        send(&tx, &arp);
        send(&tx, &lldp);
        send(&tx, &tcp4(0x18, 200));
        assert_eq!(received(&rx2), [0x0806, 0x0800]);
        assert_eq!(q.non_ip(), (0, 0), "the user's filter decides about non-IP frames");

        // A tail (here one that drops everything, in place of kernel
        // accounting's) runs only while its flag is set, beside step 2's.
        let tail = vec![Insn::mov64_imm(Reg::R0, 0), Insn::exit()];
        let r = SocketProgram::load(&Stages { framing: Framing::Ethernet, snaplen: 65535, count_non_ip: true, user: None, skip_empty: Some(&skip), tail: Some(tail), shed: false }).unwrap();
        let rx3 = socket(Some(&r));
        send(&tx, &tcp4(0x18, 10));
        assert_eq!(received(&rx3).len(), 1, "flag clear: the tail is not run");
        r.set_flags(FLAG_KERNEL_ACCOUNTING).unwrap();
        send(&tx, &tcp4(0x18, 10));
        assert_eq!(received(&rx3).len(), 0, "flag set: the tail decides");
        r.set_flags(FLAG_SKIP_EMPTY).unwrap();
        send(&tx, &tcp4(0x18, 10));
        send(&tx, &tcp4(0x10, 0));
        assert_eq!(received(&rx3).len(), 1, "step 2 alone: the empty ACK dropped, the tail off");
    }

    /// Issue 36: a program is loaded only when it does more than the
    /// classic filter: with `-f` alone (with or without
    /// `--skip-empty-tcp`, which the classic filter then compiles in), or
    /// with nothing to do (no `-f`, non-IP counting off), the classic
    /// filter runs instead; non-IP counting, a tail, the shed stage, or a
    /// skip-empty stage whose flag changes while it runs need it.
    #[test]
    fn a_program_only_when_it_does_more_than_the_classic_filter() {
        let f = [libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: 256 }];
        let tail = || Some(vec![Insn::mov64_imm(Reg::R0, 0), Insn::exit()]);
        let st = |count_non_ip, user: Option<&'static [libc::sock_filter]>, skip_empty: Option<&'static [libc::sock_filter]>, tail: Option<Vec<Insn>>, shed| Stages { framing: Framing::Ethernet, snaplen: 256, count_non_ip, user, skip_empty, tail, shed };
        let f: &'static [libc::sock_filter] = Box::leak(Box::new(f));
        // (stages, budget toggles flags, needed)
        let cases = [
            (st(true, Some(f), None, None, false), false, false),
            (st(true, Some(f), Some(f), None, false), false, false),
            (st(false, None, None, None, false), false, false),
            (st(false, None, Some(f), None, false), false, false),
            (st(true, None, None, None, false), false, true),
            (st(true, Some(f), None, tail(), false), false, true),
            (st(true, Some(f), None, None, true), true, true),
            (st(false, Some(f), Some(f), None, false), true, true),
        ];
        for (i, (s, flags_change, needed)) in cases.iter().enumerate() {
            assert_eq!(s.needed(*flags_change), *needed, "case {i}");
        }
    }

    /// `--cpu-budget` step 4: while [`FLAG_SHED`] is set, every packet
    /// that would reach the socket is refused and counted (packets, wire
    /// bytes), after the tail: a packet the tail counts (here: returns 0
    /// for the 64-byte frame, standing for kernel accounting) is not shed
    /// while [`FLAG_KERNEL_ACCOUNTING`] is set; non-IP frames stay counted
    /// as such; clearing the flag lets packets through again.
    #[test]
    fn shed_flag_refuses_and_counts_after_the_tail() {
        if !root() {
            return;
        }
        // SAFETY: unshare affects only this test's thread.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
        lo_up();
        let accounted = tcp4(0x18, 10);
        let other = tcp4(0x18, 100);
        assert_ne!(accounted.len(), other.len());
        let arp = frame(0x0806, &[0, 1, 8, 0, 6, 4, 0, 1]);
        let tail = vec![
            Insn::load(Size::W, Reg::R1, Reg::R6, SKB_LEN),
            Insn::jmp_imm(Cond::Ne, Reg::R1, accounted.len() as i32, 2),
            Insn::mov64_imm(Reg::R0, 0),
            Insn::exit(),
            Insn::mov64_imm(Reg::R0, 65535),
            Insn::exit(),
        ];
        let tx = socket(None);
        let p = SocketProgram::load(&Stages { framing: Framing::Ethernet, snaplen: 65535, count_non_ip: true, user: None, skip_empty: None, tail: Some(tail), shed: true }).unwrap_or_else(|e| panic!("{e}: {}", e.log));
        let rx = socket(Some(&p));
        // Loopback: each frame's outgoing copy and the received one.
        send(&tx, &accounted);
        send(&tx, &other);
        assert_eq!(received(&rx).len(), 2, "no flag: both kept");
        p.set_flags(FLAG_KERNEL_ACCOUNTING).unwrap();
        send(&tx, &accounted);
        send(&tx, &other);
        assert_eq!(received(&rx).len(), 1, "the tail takes the accounted frame");
        assert_eq!(p.shed(), (0, 0));

        p.set_flags(FLAG_KERNEL_ACCOUNTING | FLAG_SHED).unwrap();
        send(&tx, &accounted);
        send(&tx, &other);
        send(&tx, &other);
        send(&tx, &arp);
        assert_eq!(received(&rx).len(), 0, "shedding: nothing reaches the socket");
        assert_eq!(p.shed(), (4, 4 * other.len() as u64), "the tail's frame is not shed, the others are, both copies");
        assert_eq!(p.non_ip(), (2, 2 * arp.len() as u64), "non-IP frames counted as such");

        // Step 3 off, step 4 on: the tail does not run, everything is shed.
        p.set_flags(FLAG_SHED).unwrap();
        send(&tx, &accounted);
        assert_eq!(received(&rx).len(), 0);
        assert_eq!(p.shed(), (6, 4 * other.len() as u64 + 2 * accounted.len() as u64));

        p.set_flags(FLAG_KERNEL_ACCOUNTING).unwrap();
        send(&tx, &other);
        assert_eq!(received(&rx).len(), 1, "the flag cleared: kept again");
        assert_eq!(p.shed().0, 6);

        // Without a tail the stage is there all the same.
        let q = SocketProgram::load(&Stages { framing: Framing::Ethernet, snaplen: 65535, count_non_ip: true, user: None, skip_empty: None, tail: None, shed: true }).unwrap();
        let rx2 = socket(Some(&q));
        q.set_flags(FLAG_SHED).unwrap();
        send(&tx, &other);
        assert_eq!(received(&rx2).len(), 0);
        assert_eq!(q.shed(), (2, 2 * other.len() as u64));
        q.set_flags(0).unwrap();
        send(&tx, &other);
        assert_eq!(received(&rx2).len(), 1);

        // A program built without the stage (no budget) ignores the flag.
        let r = SocketProgram::load(&Stages { framing: Framing::Ethernet, snaplen: 65535, count_non_ip: true, user: None, skip_empty: None, tail: None, shed: false }).unwrap();
        let rx3 = socket(Some(&r));
        r.set_flags(FLAG_SHED).unwrap();
        send(&tx, &other);
        assert_eq!(received(&rx3).len(), 1, "no shed stage: kept");
        assert_eq!(r.shed(), (0, 0));
    }

    /// `ethertype` then `body` behind `tags` (TPID, VLAN id) in the data.
    fn tagged(tags: &[(u16, u16)], ethertype: u16, body: &[u8]) -> Vec<u8> {
        let mut data = Vec::new();
        for (i, &(_, vid)) in tags.iter().enumerate() {
            data.extend_from_slice(&vid.to_be_bytes());
            // Each tag ends with the next one's TPID, the last with `ethertype`.
            data.extend_from_slice(&tags.get(i + 1).map_or(ethertype, |t| t.0).to_be_bytes());
        }
        data.extend_from_slice(body);
        frame(tags[0].0, &data)
    }

    /// PPPoE frames (RFC 2516), untagged and behind tags: (what, frame,
    /// counted as not IP, its outer tag taken into the metadata), as
    /// `tagged_non_ip_counted_in_the_kernel` takes them. Discovery frames
    /// (0x8863, and a code other than 0 on 0x8864) and sessions carrying PPP
    /// control protocols are not IP; sessions carrying IPv4/IPv6, with or
    /// without address/control bytes and protocol field compression, and
    /// frames cut before the decoder can tell, reach the socket.
    fn pppoe_cases(ip: &[u8]) -> Vec<(&'static str, Vec<u8>, bool, bool)> {
        let session = |code: u8, ppp: &[u8]| {
            let mut h = vec![0x11, code, 0x12, 0x34];
            h.extend_from_slice(&(ppp.len() as u16).to_be_bytes());
            h.extend_from_slice(ppp);
            h
        };
        let with = |proto: &[u8], body: &[u8]| [proto, body].concat();
        let lcp = [1, 1, 0, 4];
        let mut ip6 = vec![0x60, 0, 0, 0, 0, 0, 59, 64];
        ip6.resize(40, 0);
        let padi = [0x11, 0x09, 0, 0, 0, 4, 1, 1, 0, 0];
        // A frame as sent, not padded to 60 bytes.
        let cut = |ppp: &[u8]| {
            let mut f = frame(0x8864, &session(0, ppp));
            f.truncate(14 + 6 + ppp.len());
            f
        };
        vec![
            ("PPPoE PADI", frame(0x8863, &padi), true, false),
            ("802.1Q PPPoE PADI", tagged(&[(0x8100, 5)], 0x8863, &padi), true, true),
            ("PPPoE PADT on the session EtherType", frame(0x8864, &session(0xa7, &[])), true, false),
            ("PPPoE LCP", frame(0x8864, &session(0, &with(&[0xc0, 0x21], &lcp))), true, false),
            ("PPPoE ff 03 LCP", frame(0x8864, &session(0, &with(&[0xff, 0x03, 0xc0, 0x21], &lcp))), true, false),
            ("PPPoE one-byte protocol 0xff", frame(0x8864, &session(0, &with(&[0xff, 0x21], ip))), true, false),
            ("PPPoE one-byte CCP", frame(0x8864, &session(0, &with(&[0xfd], &lcp))), true, false),
            ("802.1Q PPPoE IPCP", tagged(&[(0x8100, 5)], 0x8864, &session(0, &with(&[0x80, 0x21], &lcp))), true, true),
            ("QinQ PPPoE IPv6CP", tagged(&[(0x88a8, 20), (0x8100, 30)], 0x8864, &session(0, &with(&[0x80, 0x57], &lcp))), true, true),
            ("0x9100 PPPoE PAP", tagged(&[(0x9100, 7)], 0x8864, &session(0, &with(&[0xc0, 0x23], &lcp))), true, false),
            ("PPPoE IPv4", frame(0x8864, &session(0, &with(&[0x00, 0x21], ip))), false, false),
            ("PPPoE one-byte IPv4", frame(0x8864, &session(0, &with(&[0x21], ip))), false, false),
            ("PPPoE ff 03 IPv4", frame(0x8864, &session(0, &with(&[0xff, 0x03, 0x00, 0x21], ip))), false, false),
            ("PPPoE ff 03 one-byte IPv6", frame(0x8864, &session(0, &with(&[0xff, 0x03, 0x57], &ip6))), false, false),
            ("802.1Q PPPoE IPv6", tagged(&[(0x8100, 5)], 0x8864, &session(0, &with(&[0x00, 0x57], &ip6))), false, true),
            ("QinQ PPPoE IPv4", tagged(&[(0x88a8, 20), (0x8100, 30)], 0x8864, &session(0, &with(&[0x00, 0x21], ip))), false, true),
            ("PPPoE cut after its header", cut(&[]), false, false),
            ("PPPoE cut after ff", cut(&[0xff]), false, false),
            ("PPPoE cut after ff 03", cut(&[0xff, 0x03]), false, false),
            ("PPPoE cut in a two-byte protocol", cut(&[0xc0]), false, false),
        ]
    }

    /// Issue 36: non-IP frames behind VLAN tags are counted in the kernel
    /// whether the tags are in the data or the outer one in the metadata;
    /// IP behind tags, and frames behind more tags than the program
    /// follows, reach the socket. On loopback each frame is seen twice:
    /// its outgoing copy with every tag in the data, and the received one,
    /// whose outer 802.1Q/802.1ad tag the kernel moved to the metadata
    /// (`skb_vlan_untag`, see `ethernet_non_ip`), 4 bytes shorter.
    #[test]
    fn tagged_non_ip_counted_in_the_kernel() {
        if !root() {
            return;
        }
        // SAFETY: unshare affects only this test's thread.
        assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
        lo_up();
        let arp = [0, 1, 8, 0, 6, 4, 0, 1];
        let lldp = [2, 7, 4, 0, 0, 0, 0, 0, 1];
        let ip = &tcp4(0x18, 10)[14..];
        // (frame, counted as not IP, its outer tag taken into the metadata)
        let mut cases: Vec<(&str, Vec<u8>, bool, bool)> = vec![
            ("802.1Q ARP", tagged(&[(0x8100, 5)], 0x0806, &arp), true, true),
            ("QinQ LLDP", tagged(&[(0x88a8, 20), (0x8100, 30)], 0x88cc, &lldp), true, true),
            ("double 802.1Q ARP", tagged(&[(0x8100, 5), (0x8100, 6)], 0x0806, &arp), true, true),
            ("0x9100 ARP", tagged(&[(0x9100, 7)], 0x0806, &arp), true, false),
            // 802.3 behind a tag: STP (LLC 42 42 03) and Cisco SNAP (PVST+).
            ("802.1Q STP", tagged(&[(0x8100, 5)], 38, &[0x42, 0x42, 0x03, 0, 0]), true, true),
            ("802.1Q PVST+", tagged(&[(0x8100, 5)], 50, &[0xaa, 0xaa, 0x03, 0, 0, 0x0c, 0x01, 0x0b, 0, 0]), true, true),
            ("802.1Q IPv4", tagged(&[(0x8100, 5)], 0x0800, ip), false, true),
            ("QinQ IPv4", tagged(&[(0x88a8, 20), (0x8100, 30)], 0x0800, ip), false, true),
            ("six tags ARP", tagged(&[(0x8100, 1); 6], 0x0806, &arp), false, true),
        ];
        // Untagged 802.3 SNAP: RFC 1042 ARP is not IP, a tag then IPv4 is.
        let mut snap_arp = frame(0x0030, &[0xaa, 0xaa, 0x03, 0, 0, 0]);
        snap_arp[20..22].copy_from_slice(&0x0806u16.to_be_bytes());
        cases.push(("SNAP ARP", snap_arp, true, false));
        let mut snap_q_ip = frame(0x0040, &[0xaa, 0xaa, 0x03, 0, 0, 0, 0x81, 0x00, 0, 9, 0x08, 0x00]);
        snap_q_ip.truncate(26);
        snap_q_ip.extend_from_slice(ip);
        cases.push(("SNAP 802.1Q IPv4", snap_q_ip, false, false));

        cases.extend(pppoe_cases(ip));

        let tx = socket(None);
        let p = SocketProgram::load(&Stages { framing: Framing::Ethernet, snaplen: 65535, count_non_ip: true, user: None, skip_empty: None, tail: None, shed: false }).unwrap_or_else(|e| panic!("{e}: {}", e.log));
        let rx = socket(Some(&p));
        let (mut pkts, mut bytes) = (0, 0);
        for (what, f, non_ip, untagged) in &cases {
            // What the program counts is what the decoder calls not IP; of
            // what it passes, only frames behind more tags than it follows
            // are not IP to the decoder.
            let decoded = match Decoder::new(DecodeConfig::default()).decode(LinkType::ETHERNET, 0, f) {
                Decoded::Skipped(r) => Some(r),
                Decoded::Ip(_) => None,
            };
            let beyond_tags = what.starts_with("six tags");
            assert_eq!(decoded == Some(SkipReason::NotIp), *non_ip || beyond_tags, "{what}: the decoder says {decoded:?}");
            send(&tx, f);
            let got = received(&rx);
            let (p1, b1) = p.non_ip();
            if *non_ip {
                assert!(got.is_empty(), "{what}: reached the socket");
                pkts += 2;
                bytes += 2 * f.len() as u64 - if *untagged { 4 } else { 0 };
            } else {
                assert_eq!(got.len(), 1, "{what}: the received copy reaches the socket");
            }
            assert_eq!((p1, b1), (pkts, bytes), "{what}: counted in the kernel");
        }
    }
}
