//! The socket filter of `--kernel-accounting` and the maps it shares with
//! the tracker: the layout of both, and the program in the assembler.
//!
//! The program never decides alone. It counts and drops a packet only when
//! the tracker wrote an entry for its connection and the packet is exactly
//! what the entry says changes nothing but counters: IPv4 without options,
//! not a fragment, TCP with ACK or PSH|ACK only, a non-zero window, the
//! sequence number the entry expects, an acknowledgement that neither goes
//! back nor passes what the peer sent, no sequence wrap, the whole packet
//! within the snap length (a "regular" packet). Anything else of a delegated
//! connection is passed and suspends the entry.
//!
//! A suspended entry keeps following the connection: every packet it passes
//! is numbered (`PASSED`), the expected sequence number and last
//! acknowledgement per side move to the packet's (the "chain"), and `IRREG`
//! notes the number of the last packet that was not regular against the
//! chain. The tracker numbers the packets it is given the same way; once it
//! has processed packet `S >= IRREG` and its own state equals the chain at
//! `S` (see `tracker::kernel`), every packet after `S` changed nothing but
//! counters from a state the tracker would delegate, so the kernel may count
//! from where it is. The tracker says so in the control map (`GO_AT = S`,
//! with the entry's generation and a new bucket guard); the kernel reads it
//! only while suspended, resumes at its next packet if no irregular packet
//! came after `S`, and notes the number of the last packet it passed before
//! (`RESUMED_AT`). The tracker merges what is counted from then on only once
//! it has processed that packet, and before the next one it is given.

use wirelog_ebpf::{Alu, Asm, Cond, Error, Helper, Insn, Map, MapType, ProgType, Program, Reg, Size};

/// Key: the connection's IPv4 tuple in canonical order (the endpoint with
/// the lower (address, port) first, compared as the program loads them):
/// address a, address b (u32 as loaded from the header), port a, port b
/// (u16 as loaded, i.e. network byte order in a native u16).
pub const KEY_LEN: usize = 12;

// Value layout (offsets in bytes). `STATE` is 0 while the kernel may count,
// 1 once it passed a packet of the connection (suspended).
pub const STATE: usize = 0;
/// Packets passed since the entry was written (atomic adds): the tracker
/// numbers the packets it is given the same way.
pub const PASSED: usize = 4;
/// Kernel time (CLOCK_MONOTONIC ns) from which every packet is passed: a
/// guard before the next flow bucket boundary.
pub const UNTIL: usize = 8;
/// Per direction: the block of the lower endpoint's packets, then the other's.
pub const BLOCK: [usize; 2] = [16, 72];
pub const BLOCK_LEN: usize = 56;
// Offsets inside a block.
/// Next expected sequence number (host order): the chain.
pub const NEXT_SEQ: usize = 0;
/// The last acknowledgement this direction sent (host order): the chain.
pub const LAST_ACK: usize = 4;
/// Packets counted (atomic adds).
pub const PKTS: usize = 8;
/// IP bytes counted (atomic adds).
pub const IP_BYTES: usize = 16;
/// Kernel time of the last counted packet.
pub const LAST_KTIME: usize = 24;
/// Which packets may be counted: [`ALLOW_DATA`], [`ALLOW_ACK`].
pub const ALLOW: usize = 32;
/// `NEXT_SEQ` and `LAST_ACK` after the last counted packet: what the
/// tracker merges (the chain moves on with passed packets too).
pub const COUNTED_SEQ: usize = 36;
pub const COUNTED_ACK: usize = 40;
/// While suspended: number of the last regular data packet, and of the
/// last regular pure ACK (checked against the tracker's `ALLOW` when it
/// resumes; until then the kinds are not checked).
pub const DATA_NO: usize = 44;
pub const ACK_NO: usize = 48;
pub const ALLOW_DATA: u32 = 1;
pub const ALLOW_ACK: u32 = 2;
/// Number of the last passed packet that was not regular against the chain.
pub const IRREG: usize = 128;
/// Number of the last packet passed before the kernel last resumed counting.
pub const RESUMED_AT: usize = 132;
/// Written by the tracker with the entry; a control value counts only with it.
pub const GEN: usize = 136;
/// The first packet the entry passed (number 1): its block (`DIR`), sequence
/// number and acknowledgement, by which the tracker knows it.
pub const FIRST_DIR: usize = 140;
pub const FIRST_SEQ: usize = 144;
pub const FIRST_ACK: usize = 148;
pub const VALUE_LEN: usize = 152;
const _: () = assert!(BLOCK[1] + BLOCK_LEN <= IRREG && FIRST_ACK + 4 <= VALUE_LEN);

// Control value (written by the tracker only, read by the program).
/// The tracker processed this many packets (numbered as `PASSED`) and its
/// state equals the chain there.
pub const CTL_GO_AT: usize = 0;
/// The entry's `GEN` this was written for.
pub const CTL_GEN: usize = 4;
/// The new `UNTIL` from which every packet is passed.
pub const CTL_UNTIL: usize = 8;
/// The new `ALLOW` of each block.
pub const CTL_ALLOW: [usize; 2] = [16, 20];
pub const CTL_LEN: usize = 24;

/// Data beyond the peer's last acknowledgement from which the kernel passes
/// a segment: below the tracker's 10 MiB of unacknowledged data after which
/// it stops reassembling (`tcp_excessive_data_without_further_acks`).
const MAX_UNACKED: i32 = 8 << 20;

// `struct __sk_buff` fields a socket filter may read.
const SKB_LEN: i16 = 0;
const SKB_PKT_TYPE: i16 = 4;
const SKB_PROTOCOL: i16 = 16;
const SKB_IFINDEX: i16 = 40;
const PACKET_OUTGOING: i32 = 4;
/// The loopback device's ifindex in every network namespace.
const LOOPBACK_IFINDEX: i32 = 1;
/// htons(ETH_P_IP) as a little-endian load sees it.
const ETH_P_IP_BE: i32 = 0x0008;

// Stack layout (offsets from r10).
/// IPv4 header (20 bytes) and TCP header (20 bytes).
const HDR: i16 = -48;
const KEY: i16 = -64;
const DIR: i16 = -72;
const KTIME: i16 = -80;

/// The map: `entries` connections at most.
pub fn create_map(entries: u32) -> Result<Map, Error> {
    Map::create(MapType::Hash, "wl_kacct", KEY_LEN, VALUE_LEN, entries)
}

/// The control map (same keys): the tracker's word that a suspended entry
/// may count again.
pub fn create_control_map(entries: u32) -> Result<Map, Error> {
    Map::create(MapType::Hash, "wl_kacct_ctl", KEY_LEN, CTL_LEN, entries)
}

/// The program for sockets whose packets start `l3_offset` bytes before
/// the IP header (14: Ethernet; 0: cooked `any`), passing `snaplen` bytes of
/// what it does not count.
pub fn load(map: &Map, control: &Map, l3_offset: i32, snaplen: u32) -> Result<Program, Error> {
    let insns = program(map, control, l3_offset, snaplen).map_err(|e| Error {
        what: e.to_string(),
        os: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        log: String::new(),
    })?;
    Program::load(ProgType::SocketFilter, "wl_kacct", &insns, "GPL")
}

pub(super) fn program(map: &Map, control: &Map, l3: i32, snaplen: u32) -> Result<Vec<Insn>, wirelog_ebpf::AsmError> {
    use Reg::*;
    let snap = snaplen.min(i32::MAX as u32) as i32;
    let b = |off: usize| off as i16;
    let mut a = Asm::new();
    a.push(Insn::mov64_reg(R6, R1))
        .push(Insn::load(Size::W, R1, R6, SKB_PROTOCOL))
        .jmp_imm(Cond::Ne, R1, ETH_P_IP_BE, "pass")
        // Loopback's outgoing copies are dropped by the capture; pass
        // them untouched (the incoming copy is the one that counts).
        .push(Insn::load(Size::W, R1, R6, SKB_PKT_TYPE))
        .jmp_imm(Cond::Ne, R1, PACKET_OUTGOING, "incoming")
        .push(Insn::load(Size::W, R1, R6, SKB_IFINDEX))
        .jmp_imm(Cond::Eq, R1, LOOPBACK_IFINDEX, "pass")
        .label("incoming")
        // A packet longer than the snap length reaches the tracker
        // truncated, which it treats differently: pass.
        // The IPv4 header, then the TCP header after the IP options.
        .push(Insn::mov64_reg(R1, R6))
        .push(Insn::mov64_imm(R2, l3))
        .push(Insn::mov64_reg(R3, R10))
        .push(Insn::alu64_imm(Alu::Add, R3, HDR as i32))
        .push(Insn::mov64_imm(R4, 20))
        .push(Insn::call(Helper::SkbLoadBytes))
        .jmp_imm(Cond::Ne, R0, 0, "pass")
        .push(Insn::load(Size::B, R1, R10, HDR))
        .push(Insn::mov64_reg(R2, R1))
        .push(Insn::alu64_imm(Alu::Rsh, R2, 4))
        .jmp_imm(Cond::Ne, R2, 4, "pass")
        .push(Insn::load(Size::B, R2, R10, HDR + 9))
        .jmp_imm(Cond::Ne, R2, 6, "pass")
        .push(Insn::alu64_imm(Alu::And, R1, 0x0f))
        .jmp_imm(Cond::Lt, R1, 5, "pass")
        .push(Insn::alu64_imm(Alu::Lsh, R1, 2))
        .push(Insn::alu64_imm(Alu::Add, R1, l3))
        .push(Insn::mov64_reg(R2, R1))
        .push(Insn::mov64_reg(R1, R6))
        .push(Insn::mov64_reg(R3, R10))
        .push(Insn::alu64_imm(Alu::Add, R3, HDR as i32 + 20))
        .push(Insn::mov64_imm(R4, 20))
        .push(Insn::call(Helper::SkbLoadBytes))
        .jmp_imm(Cond::Ne, R0, 0, "pass");
    // The canonical key and this packet's direction in it.
    a.push(Insn::load(Size::W, R1, R10, HDR + 12))
        .push(Insn::load(Size::W, R2, R10, HDR + 16))
        .push(Insn::load(Size::H, R3, R10, HDR + 20))
        .push(Insn::load(Size::H, R4, R10, HDR + 22))
        .jmp_reg(Cond::Lt, R1, R2, "dir0")
        .jmp_reg(Cond::Gt, R1, R2, "dir1")
        .jmp_reg(Cond::Lt, R3, R4, "dir0")
        .jmp_reg(Cond::Gt, R3, R4, "dir1")
        .ja("pass")
        .label("dir0")
        .push(Insn::store_imm(Size::DW, R10, DIR, 0))
        .ja("key01")
        .label("dir1")
        .push(Insn::store_imm(Size::DW, R10, DIR, 1))
        // The lower endpoint first: swap the two.
        .push(Insn::mov64_reg(R5, R1))
        .push(Insn::mov64_reg(R1, R2))
        .push(Insn::mov64_reg(R2, R5))
        .push(Insn::mov64_reg(R5, R3))
        .push(Insn::mov64_reg(R3, R4))
        .push(Insn::mov64_reg(R4, R5))
        .label("key01")
        .push(Insn::store_reg(Size::W, R10, KEY, R1))
        .push(Insn::store_reg(Size::W, R10, KEY + 4, R2))
        .push(Insn::store_reg(Size::H, R10, KEY + 8, R3))
        .push(Insn::store_reg(Size::H, R10, KEY + 10, R4))
        .label("lookup")
        .push_all(Insn::load_map_fd(R1, map.fd()))
        .push(Insn::mov64_reg(R2, R10))
        .push(Insn::alu64_imm(Alu::Add, R2, KEY as i32))
        .push(Insn::call(Helper::MapLookupElem))
        .jmp_imm(Cond::Eq, R0, 0, "pass")
        .push(Insn::mov64_reg(R7, R0))
        // r8: this direction's block, r9: the other's.
        .push(Insn::load(Size::DW, R1, R10, DIR))
        .push(Insn::mov64_reg(R8, R7))
        .push(Insn::mov64_reg(R9, R7))
        .jmp_imm(Cond::Ne, R1, 0, "blocks1")
        .push(Insn::alu64_imm(Alu::Add, R8, BLOCK[0] as i32))
        .push(Insn::alu64_imm(Alu::Add, R9, BLOCK[1] as i32))
        .ja("blocks")
        .label("blocks1")
        .push(Insn::alu64_imm(Alu::Add, R8, BLOCK[1] as i32))
        .push(Insn::alu64_imm(Alu::Add, R9, BLOCK[0] as i32))
        .label("blocks")
        // Suspended: counting again needs the tracker's word, for this
        // entry, naming a packet no irregular one came after.
        .push(Insn::load(Size::W, R1, R7, b(STATE)))
        .jmp_imm(Cond::Eq, R1, 0, "checks")
        .push_all(Insn::load_map_fd(R1, control.fd()))
        .push(Insn::mov64_reg(R2, R10))
        .push(Insn::alu64_imm(Alu::Add, R2, KEY as i32))
        .push(Insn::call(Helper::MapLookupElem))
        .jmp_imm(Cond::Eq, R0, 0, "checks")
        .push(Insn::load(Size::W, R1, R0, b(CTL_GEN)))
        .push(Insn::load(Size::W, R2, R7, b(GEN)))
        .jmp_reg(Cond::Ne, R1, R2, "checks")
        .push(Insn::load(Size::W, R3, R0, b(CTL_GO_AT)))
        .push(Insn::load(Size::W, R2, R7, b(IRREG)))
        .jmp_reg(Cond::Lt, R3, R2, "checks");
    // A kind of packet after GO_AT the tracker's history does not allow
    // (its letter) keeps it suspended.
    for blk in 0..2 {
        let (ok_data, ok_ack) = (["kind_data_ok0", "kind_data_ok1"][blk], ["kind_ack_ok0", "kind_ack_ok1"][blk]);
        a.push(Insn::load(Size::W, R1, R7, b(BLOCK[blk] + DATA_NO)))
            .jmp_reg(Cond::Le, R1, R3, ok_data)
            .push(Insn::load(Size::W, R2, R0, b(CTL_ALLOW[blk])))
            .push(Insn::alu64_imm(Alu::And, R2, ALLOW_DATA as i32))
            .jmp_imm(Cond::Eq, R2, 0, "checks")
            .label(ok_data)
            .push(Insn::load(Size::W, R1, R7, b(BLOCK[blk] + ACK_NO)))
            .jmp_reg(Cond::Le, R1, R3, ok_ack)
            .push(Insn::load(Size::W, R2, R0, b(CTL_ALLOW[blk])))
            .push(Insn::alu64_imm(Alu::And, R2, ALLOW_ACK as i32))
            .jmp_imm(Cond::Eq, R2, 0, "checks")
            .label(ok_ack);
    }
    for blk in 0..2 {
        a.push(Insn::load(Size::W, R1, R0, b(CTL_ALLOW[blk]))).push(Insn::store_reg(Size::W, R7, b(BLOCK[blk] + ALLOW), R1));
    }
    a.push(Insn::load(Size::DW, R1, R0, b(CTL_UNTIL)))
        .push(Insn::store_reg(Size::DW, R7, b(UNTIL), R1))
        .push(Insn::load(Size::W, R1, R7, b(PASSED)))
        .push(Insn::store_reg(Size::W, R7, b(RESUMED_AT), R1))
        .push(Insn::store_imm(Size::W, R7, b(STATE), 0))
        .label("checks")
        // A fragment, a packet longer than the snap length (the tracker
        // sees it truncated), flags other than ACK or PSH|ACK, a zero
        // window (a history letter).
        .push(Insn::load(Size::H, R1, R10, HDR + 6))
        .push(Insn::alu64_imm(Alu::And, R1, 0xff3f))
        .jmp_imm(Cond::Ne, R1, 0, "irregular")
        .push(Insn::load(Size::W, R1, R6, SKB_LEN))
        .jmp_imm(Cond::Gt, R1, snap, "irregular")
        .push(Insn::load(Size::B, R1, R10, HDR + 33))
        .jmp_imm(Cond::Eq, R1, 0x10, "flags_ok")
        .jmp_imm(Cond::Ne, R1, 0x18, "irregular")
        .label("flags_ok")
        .push(Insn::load(Size::H, R1, R10, HDR + 34))
        .jmp_imm(Cond::Eq, R1, 0, "irregular")
        // An IP header with options: the length below assumes none.
        .push(Insn::load(Size::B, R1, R10, HDR))
        .jmp_imm(Cond::Ne, R1, 0x45, "irregular")
        // Near a flow bucket boundary every packet crosses.
        .push(Insn::call(Helper::KtimeGetNs))
        .push(Insn::store_reg(Size::DW, R10, KTIME, R0))
        .push(Insn::load(Size::DW, R1, R7, b(UNTIL)))
        .jmp_reg(Cond::Ge, R0, R1, "irregular");
    // r2: IP length, r3: payload length.
    a.push(Insn::load(Size::H, R2, R10, HDR + 2))
        .push(Insn::to_be(R2, 16))
        .push(Insn::load(Size::B, R3, R10, HDR + 32))
        .push(Insn::alu64_imm(Alu::Rsh, R3, 4))
        .push(Insn::alu64_imm(Alu::Lsh, R3, 2))
        .jmp_imm(Cond::Lt, R3, 20, "irregular")
        .push(Insn::alu64_imm(Alu::Add, R3, 20))
        .jmp_reg(Cond::Gt, R3, R2, "irregular")
        .push(Insn::mov64_reg(R1, R2))
        .push(Insn::alu64_reg(Alu::Sub, R1, R3))
        .push(Insn::mov64_reg(R3, R1))
        // The history letter this packet would add must be there already
        // (checked when resuming while suspended).
        .push(Insn::load(Size::W, R1, R7, b(STATE)))
        .jmp_imm(Cond::Ne, R1, 0, "seq")
        .push(Insn::load(Size::W, R1, R8, b(ALLOW)))
        .jmp_imm(Cond::Eq, R3, 0, "pure_ack")
        .push(Insn::alu64_imm(Alu::And, R1, ALLOW_DATA as i32))
        .jmp_imm(Cond::Eq, R1, 0, "irregular")
        .ja("seq")
        .label("pure_ack")
        .push(Insn::alu64_imm(Alu::And, R1, ALLOW_ACK as i32))
        .jmp_imm(Cond::Eq, R1, 0, "irregular")
        // r4: the sequence number, exactly the expected one; r5: one past
        // its data, without a wrap.
        .label("seq")
        .push(Insn::load(Size::W, R4, R10, HDR + 24))
        .push(Insn::to_be(R4, 32))
        .push(Insn::load(Size::W, R1, R8, b(NEXT_SEQ)))
        .jmp_reg(Cond::Ne, R4, R1, "irregular")
        .push(Insn::mov64_reg(R5, R4))
        .push(Insn::alu64_reg(Alu::Add, R5, R3))
        .push(Insn::mov64_reg(R1, R5))
        .push(Insn::alu64_imm(Alu::Rsh, R1, 32))
        .jmp_imm(Cond::Ne, R1, 0, "irregular")
        // r4 from here: the acknowledgement, not behind this side's last,
        // not beyond what the peer sent.
        .push(Insn::load(Size::W, R4, R10, HDR + 28))
        .push(Insn::to_be(R4, 32))
        .push(Insn::load(Size::W, R1, R8, b(LAST_ACK)))
        .jmp_reg(Cond::Lt, R4, R1, "irregular")
        .push(Insn::load(Size::W, R1, R9, b(NEXT_SEQ)))
        .jmp_reg(Cond::Gt, R4, R1, "irregular")
        // Data: not too far beyond the peer's acknowledgements.
        .jmp_imm(Cond::Eq, R3, 0, "regular")
        .push(Insn::load(Size::W, R1, R9, b(LAST_ACK)))
        .push(Insn::mov64_reg(R0, R5))
        .push(Insn::alu64_reg(Alu::Sub, R0, R1))
        .jmp_imm(Cond::Gt, R0, MAX_UNACKED, "irregular")
        // Regular: the chain moves on; counted unless suspended.
        .label("regular")
        .push(Insn::store_reg(Size::W, R8, b(NEXT_SEQ), R5))
        .push(Insn::store_reg(Size::W, R8, b(LAST_ACK), R4))
        .push(Insn::load(Size::W, R1, R7, b(STATE)))
        .jmp_imm(Cond::Ne, R1, 0, "regular_passed")
        .push(Insn::store_reg(Size::W, R8, b(COUNTED_SEQ), R5))
        .push(Insn::store_reg(Size::W, R8, b(COUNTED_ACK), R4))
        .push(Insn::mov64_imm(R1, 1))
        .push(Insn::atomic_add(Size::DW, R8, b(PKTS), R1))
        .push(Insn::atomic_add(Size::DW, R8, b(IP_BYTES), R2))
        .push(Insn::load(Size::DW, R1, R10, KTIME))
        .push(Insn::store_reg(Size::DW, R8, b(LAST_KTIME), R1))
        .push(Insn::mov64_imm(R0, 0))
        .push(Insn::exit())
        // Not regular: suspended, numbered as the last irregular packet,
        // and the chain restarts from this packet (its payload from the
        // real header lengths, none when they do not add up).
        .label("irregular")
        .push(Insn::load(Size::H, R2, R10, HDR + 2))
        .push(Insn::to_be(R2, 16))
        .push(Insn::load(Size::B, R1, R10, HDR))
        .push(Insn::alu64_imm(Alu::And, R1, 0x0f))
        .push(Insn::alu64_imm(Alu::Lsh, R1, 2))
        .push(Insn::load(Size::B, R3, R10, HDR + 32))
        .push(Insn::alu64_imm(Alu::Rsh, R3, 4))
        .push(Insn::alu64_imm(Alu::Lsh, R3, 2))
        .push(Insn::alu64_reg(Alu::Add, R3, R1))
        .jmp_reg(Cond::Gt, R3, R2, "irregular_nolen")
        .push(Insn::alu64_reg(Alu::Sub, R2, R3))
        .ja("irregular_len")
        .label("irregular_nolen")
        .push(Insn::mov64_imm(R2, 0))
        .label("irregular_len")
        .push(Insn::load(Size::W, R4, R10, HDR + 24))
        .push(Insn::to_be(R4, 32))
        .push(Insn::alu64_reg(Alu::Add, R4, R2))
        .push(Insn::store_reg(Size::W, R8, b(NEXT_SEQ), R4))
        .push(Insn::load(Size::W, R4, R10, HDR + 28))
        .push(Insn::to_be(R4, 32))
        .push(Insn::store_reg(Size::W, R8, b(LAST_ACK), R4))
        .push(Insn::store_imm(Size::W, R7, b(STATE), 1))
        .push(Insn::load(Size::W, R1, R7, b(PASSED)))
        .jmp_imm(Cond::Ne, R1, 0, "not_first")
        .push(Insn::load(Size::DW, R2, R10, DIR))
        .push(Insn::store_reg(Size::W, R7, b(FIRST_DIR), R2))
        .push(Insn::load(Size::W, R2, R10, HDR + 24))
        .push(Insn::to_be(R2, 32))
        .push(Insn::store_reg(Size::W, R7, b(FIRST_SEQ), R2))
        .push(Insn::store_reg(Size::W, R7, b(FIRST_ACK), R4))
        .label("not_first")
        .push(Insn::alu64_imm(Alu::Add, R1, 1))
        .push(Insn::store_reg(Size::W, R7, b(IRREG), R1))
        .ja("pass_numbered")
        // Suspended and regular: numbered by kind.
        .label("regular_passed")
        .push(Insn::load(Size::W, R1, R7, b(PASSED)))
        .push(Insn::alu64_imm(Alu::Add, R1, 1))
        .jmp_imm(Cond::Eq, R3, 0, "regular_passed_ack")
        .push(Insn::store_reg(Size::W, R8, b(DATA_NO), R1))
        .ja("pass_numbered")
        .label("regular_passed_ack")
        .push(Insn::store_reg(Size::W, R8, b(ACK_NO), R1))
        .label("pass_numbered")
        .push(Insn::mov64_imm(R1, 1))
        .push(Insn::atomic_add(Size::W, R7, b(PASSED), R1))
        .label("pass")
        .push(Insn::mov64_imm(R0, snap))
        .push(Insn::exit());
    a.finish()
}
