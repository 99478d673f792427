//! The eBPF side: programs on the TLS library's read and write functions
//! (uprobes on entry, uretprobes on return) and on the socket system calls,
//! their maps, and the layout of the events they write.
//!
//! On entry to `SSL_read`/`SSL_write` (`SSL *ssl, void *buf, int num`) and
//! `SSL_read_ex`/`SSL_write_ex` (`..., size_t num, size_t *done`), the
//! program keeps the `SSL` pointer, the buffer and (for `_ex`) where the
//! length will be written, per thread (`calls`, keyed by pid_tgid). While
//! the call runs, OpenSSL's socket BIO (or the application's own BIO, as
//! curl's) makes the system call that moves the ciphertext on the socket:
//! a program on `sys_enter_{read,write,recvfrom,sendto,recvmsg,sendmsg}`
//! finds the thread's open call and notes the system call's `fd` in it.
//! This costs a map lookup per such system call on the host, and needs no
//! offset into OpenSSL's private structures (which change between
//! versions) nor a probe on `SSL_set_fd` (applications with their own BIO,
//! curl among them, never call it). A call served from OpenSSL's buffer
//! makes no system call: its event has no fd, and user space takes the fd
//! the same `SSL` had on its previous event.
//!
//! On return, the program reads the result (the return value, or `*done`
//! for `_ex`), copies up to [`DATA_CAP`] bytes of the buffer with
//! `bpf_probe_read_user` into a per-CPU scratch record, and writes header
//! and bytes to the ring buffer (`bpf_ringbuf_output`, only the bytes
//! copied). A record the ring has no room for is lost; its length is added
//! to the `SSL`'s lost bytes of that direction (`streams`), which the next
//! event of the same `SSL` carries, so user space reports a gap of the
//! right size in the right place instead of joining two messages; lost
//! events and bytes are also counted globally (`counters`).
//!
//! Registers are x86-64's `struct pt_regs` (arch/x86/include/asm/ptrace.h):
//! the first argument in `di`, then `si`, `dx`, `cx`; the return value in
//! `ax`. Other architectures are refused at load with a clear error.

use wirelog_ebpf::{Alu, Asm, Cond, Error, Helper, Insn, Map, MapType, ProgType, Program, Reg, RingBuf, Size, Tracepoint};

use Reg::*;

/// Bytes of a message copied into its event; beyond, the event carries the
/// full length and user space reports the rest as a gap.
pub const DATA_CAP: usize = 16 * 1024;

/// The event header (all native-endian):
/// 0 time (CLOCK_MONOTONIC ns) u64; 8 pid_tgid u64 (tgid high, tid low);
/// 16 the `SSL` pointer u64; 24 fd i32 (-1 unknown); 28 direction u32
/// ([`DIR_READ`]/[`DIR_WRITE`]); 32 full length u32; 36 bytes copied u32;
/// 40 bytes lost before this event in reads u64, 48 in writes u64;
/// then the bytes.
pub const HDR: usize = 56;
pub const DIR_READ: u32 = 0;
pub const DIR_WRITE: u32 = 1;

/// Open calls (pid_tgid -> ssl, buf, done pointer, fd, pad), one per thread.
const CALL_LEN: usize = 32;
const CALLS: u32 = 16_384;
/// Lost bytes per (tgid, ssl): (reads, writes).
const STREAM_KEY: usize = 16;
const STREAM_LEN: usize = 16;
const STREAMS: u32 = 65_536;

// struct pt_regs on x86-64.
const DI: i16 = 112;
const SI: i16 = 104;
const CX: i16 = 88;
const AX: i16 = 80;

/// The functions probed: (symbol, direction, `_ex` form).
pub const FUNCTIONS: [(&str, u32, bool); 4] = [
    ("SSL_read", DIR_READ, false),
    ("SSL_write", DIR_WRITE, false),
    ("SSL_read_ex", DIR_READ, true),
    ("SSL_write_ex", DIR_WRITE, true),
];

/// System calls whose `fd` names the socket an open TLS call works on.
pub const FD_SYSCALLS: [&str; 6] = ["read", "write", "recvfrom", "sendto", "recvmsg", "sendmsg"];

/// The maps every program shares.
pub struct Maps {
    pub calls: Map,
    pub streams: Map,
    pub scratch: Map,
    /// [0]: events the ring had no room for, [1]: their bytes.
    pub counters: Map,
    /// With a limit (`--tls-plaintext PID|COMM|CGROUP`): the tgids to watch.
    pub pids: Option<Map>,
    pub ring: RingBuf,
}

impl Maps {
    pub fn create(ring_size: usize, limited: bool) -> Result<Maps, Error> {
        if !cfg!(target_arch = "x86_64") {
            return Err(Error {
                what: "--tls-plaintext reads x86-64 registers; this architecture is not supported".into(),
                os: std::io::Error::from(std::io::ErrorKind::Unsupported),
                log: String::new(),
            });
        }
        Ok(Maps {
            calls: Map::create(MapType::LruHash, "wl_tls_calls", 8, CALL_LEN, CALLS)?,
            streams: Map::create(MapType::LruHash, "wl_tls_streams", STREAM_KEY, STREAM_LEN, STREAMS)?,
            scratch: Map::create(MapType::PerCpuArray, "wl_tls_scratch", 4, HDR + DATA_CAP, 1)?,
            counters: Map::create(MapType::Array, "wl_tls_counters", 4, 16, 1)?,
            pids: if limited { Some(Map::create(MapType::Hash, "wl_tls_pids", 4, 4, 65_536)?) } else { None },
            ring: RingBuf::create("wl_tls_events", ring_size)?,
        })
    }

    /// Ring records lost and their bytes, so far.
    pub fn lost(&self) -> (u64, u64) {
        let mut v = [0u8; 16];
        if self.counters.lookup(&0u32.to_ne_bytes(), &mut v).unwrap_or(false) {
            (u64::from_ne_bytes(v[..8].try_into().expect("8")), u64::from_ne_bytes(v[8..].try_into().expect("8")))
        } else {
            (0, 0)
        }
    }

    /// Starts watching process `pid` (with a limit).
    pub fn watch(&self, pid: u32) {
        if let Some(p) = &self.pids {
            // A full map leaves the process unwatched; the caller counts it.
            let _ = p.update(&pid.to_ne_bytes(), &1u32.to_ne_bytes());
        }
    }
}

/// Exits when the current process is not watched (with a limit). Leaves
/// pid_tgid in r7.
fn current(a: &mut Asm, m: &Maps) {
    a.push(Insn::call(Helper::GetCurrentPidTgid)).push(Insn::mov64_reg(R7, R0));
    if let Some(p) = &m.pids {
        a.push(Insn::mov64_reg(R1, R0))
            .push(Insn::alu64_imm(Alu::Rsh, R1, 32))
            .push(Insn::store_reg(Size::W, R10, -4, R1))
            .push_all(Insn::load_map_fd(R1, p.fd()))
            .push(Insn::mov64_reg(R2, R10))
            .push(Insn::alu64_imm(Alu::Add, R2, -4))
            .push(Insn::call(Helper::MapLookupElem))
            .jmp_imm(Cond::Eq, R0, 0, "out");
    }
}

/// On entry: note the call's arguments for this thread.
pub fn entry(m: &Maps, ex: bool) -> Result<Program, Error> {
    let mut a = Asm::new();
    a.push(Insn::mov64_reg(R6, R1));
    current(&mut a, m);
    // value at r10-40: ssl, buf, done pointer (or 0), fd -1, pad 0.
    a.push(Insn::load(Size::DW, R1, R6, DI))
        .push(Insn::store_reg(Size::DW, R10, -40, R1))
        .push(Insn::load(Size::DW, R1, R6, SI))
        .push(Insn::store_reg(Size::DW, R10, -32, R1));
    if ex {
        a.push(Insn::load(Size::DW, R1, R6, CX));
    } else {
        a.push(Insn::mov64_imm(R1, 0));
    }
    a.push(Insn::store_reg(Size::DW, R10, -24, R1))
        .push(Insn::store_imm(Size::W, R10, -16, -1))
        .push(Insn::store_imm(Size::W, R10, -12, 0))
        .push(Insn::store_reg(Size::DW, R10, -48, R7))
        .push_all(Insn::load_map_fd(R1, m.calls.fd()))
        .push(Insn::mov64_reg(R2, R10))
        .push(Insn::alu64_imm(Alu::Add, R2, -48))
        .push(Insn::mov64_reg(R3, R10))
        .push(Insn::alu64_imm(Alu::Add, R3, -40))
        .push(Insn::mov64_imm(R4, 0))
        .push(Insn::call(Helper::MapUpdateElem))
        .label("out")
        .push(Insn::mov64_imm(R0, 0))
        .push(Insn::exit());
    let name = if ex { "wl_tls_entry_ex" } else { "wl_tls_entry" };
    Program::load(ProgType::Kprobe, name, &a.finish().map_err(asm)?, "GPL")
}

/// On a socket system call: the open TLS call of this thread, if any and
/// without an fd yet, takes the call's fd (the first one: the socket the
/// TLS record goes through).
pub fn syscall(m: &Maps, tp: &Tracepoint) -> Result<Program, Error> {
    let (fd_off, fd_size) = tp.field("fd")?;
    let size = Size::of(fd_size).ok_or_else(|| Error {
        what: format!("tracepoint {}: fd of {fd_size} bytes", tp.id),
        os: std::io::Error::from(std::io::ErrorKind::Unsupported),
        log: String::new(),
    })?;
    let mut a = Asm::new();
    a.push(Insn::mov64_reg(R6, R1))
        .push(Insn::call(Helper::GetCurrentPidTgid))
        .push(Insn::store_reg(Size::DW, R10, -8, R0))
        .push_all(Insn::load_map_fd(R1, m.calls.fd()))
        .push(Insn::mov64_reg(R2, R10))
        .push(Insn::alu64_imm(Alu::Add, R2, -8))
        .push(Insn::call(Helper::MapLookupElem))
        .jmp_imm(Cond::Eq, R0, 0, "out")
        // The fd slot, sign-extended: -1 while unknown.
        .push(Insn::load(Size::W, R1, R0, 24))
        .push(Insn::alu64_imm(Alu::Lsh, R1, 32))
        .push(Insn::alu64_imm(Alu::Arsh, R1, 32))
        .jmp_imm(Cond::Ne, R1, -1, "out")
        // The fd is an int (the field may be 8 bytes wide); the jump above
        // compared the low 32 bits, as loaded.
        .push(Insn::load(size, R1, R6, fd_off as i16))
        .push(Insn::store_reg(Size::W, R0, 24, R1))
        .label("out")
        .push(Insn::mov64_imm(R0, 0))
        .push(Insn::exit());
    Program::load(ProgType::Tracepoint, "wl_tls_fd", &a.finish().map_err(asm)?, "GPL")
}

/// On return: the event, or the count of its loss.
pub fn ret(m: &Maps, dir: u32, ex: bool) -> Result<Program, Error> {
    let cap = DATA_CAP as i32;
    let mut a = Asm::new();
    // r8: the result, read before r6 is reused.
    a.push(Insn::load(Size::DW, R8, R1, AX));
    a.push(Insn::call(Helper::GetCurrentPidTgid))
        .push(Insn::mov64_reg(R9, R0))
        .push(Insn::store_reg(Size::DW, R10, -8, R0))
        .push_all(Insn::load_map_fd(R1, m.calls.fd()))
        .push(Insn::mov64_reg(R2, R10))
        .push(Insn::alu64_imm(Alu::Add, R2, -8))
        .push(Insn::call(Helper::MapLookupElem))
        .jmp_imm(Cond::Eq, R0, 0, "out")
        .push(Insn::mov64_reg(R7, R0));
    if ex {
        // 1 on success, then the length is in *done.
        a.push(Insn::alu64_imm(Alu::Lsh, R8, 32))
            .push(Insn::alu64_imm(Alu::Arsh, R8, 32))
            .jmp_imm(Cond::Sle, R8, 0, "del")
            .push(Insn::mov64_reg(R1, R10))
            .push(Insn::alu64_imm(Alu::Add, R1, -16))
            .push(Insn::mov64_imm(R2, 8))
            .push(Insn::load(Size::DW, R3, R7, 16))
            .push(Insn::call(Helper::ProbeReadUser))
            .jmp_imm(Cond::Ne, R0, 0, "del")
            .push(Insn::load(Size::DW, R8, R10, -16))
            .jmp_imm(Cond::Eq, R8, 0, "del");
    } else {
        // An int: <= 0 is an error or a retry (WANT_READ), nothing moved.
        a.push(Insn::alu64_imm(Alu::Lsh, R8, 32))
            .push(Insn::alu64_imm(Alu::Arsh, R8, 32))
            .jmp_imm(Cond::Sle, R8, 0, "del");
    }
    // The scratch record (r6).
    a.push(Insn::store_imm(Size::W, R10, -12, 0))
        .push_all(Insn::load_map_fd(R1, m.scratch.fd()))
        .push(Insn::mov64_reg(R2, R10))
        .push(Insn::alu64_imm(Alu::Add, R2, -12))
        .push(Insn::call(Helper::MapLookupElem))
        .jmp_imm(Cond::Eq, R0, 0, "del")
        .push(Insn::mov64_reg(R6, R0))
        .push(Insn::call(Helper::KtimeGetNs))
        .push(Insn::store_reg(Size::DW, R6, 0, R0))
        .push(Insn::store_reg(Size::DW, R6, 8, R9))
        .push(Insn::load(Size::DW, R1, R7, 0))
        .push(Insn::store_reg(Size::DW, R6, 16, R1))
        .push(Insn::load(Size::W, R1, R7, 24))
        .push(Insn::store_reg(Size::W, R6, 24, R1))
        .push(Insn::store_imm(Size::W, R6, 28, dir as i32))
        .push(Insn::store_reg(Size::W, R6, 32, R8))
        // Copy min(result, cap) bytes of the buffer.
        .push(Insn::mov64_reg(R2, R8))
        .jmp_imm(Cond::Le, R2, cap, "len_ok")
        .push(Insn::mov64_imm(R2, cap))
        .label("len_ok")
        .push(Insn::store_reg(Size::W, R6, 36, R2))
        .push(Insn::mov64_reg(R1, R6))
        .push(Insn::alu64_imm(Alu::Add, R1, HDR as i32))
        .push(Insn::load(Size::DW, R3, R7, 8))
        .push(Insn::call(Helper::ProbeReadUser))
        .jmp_imm(Cond::Eq, R0, 0, "copied")
        // Unreadable (a buffer paged out): the event says nothing was copied.
        .push(Insn::store_imm(Size::W, R6, 36, 0))
        .label("copied")
        // The stream's lost bytes (r7 from here; the call is no longer read).
        .push(Insn::mov64_reg(R1, R9))
        .push(Insn::alu64_imm(Alu::Rsh, R1, 32))
        .push(Insn::store_reg(Size::DW, R10, -32, R1))
        .push(Insn::load(Size::DW, R1, R6, 16))
        .push(Insn::store_reg(Size::DW, R10, -24, R1))
        .push(Insn::store_imm(Size::DW, R6, 40, 0))
        .push(Insn::store_imm(Size::DW, R6, 48, 0))
        .push_all(Insn::load_map_fd(R1, m.streams.fd()))
        .push(Insn::mov64_reg(R2, R10))
        .push(Insn::alu64_imm(Alu::Add, R2, -32))
        .push(Insn::call(Helper::MapLookupElem))
        .jmp_imm(Cond::Ne, R0, 0, "have_stream")
        // First event of this SSL: a zeroed entry (BPF_NOEXIST), then look again.
        .push(Insn::store_imm(Size::DW, R10, -48, 0))
        .push(Insn::store_imm(Size::DW, R10, -40, 0))
        .push_all(Insn::load_map_fd(R1, m.streams.fd()))
        .push(Insn::mov64_reg(R2, R10))
        .push(Insn::alu64_imm(Alu::Add, R2, -32))
        .push(Insn::mov64_reg(R3, R10))
        .push(Insn::alu64_imm(Alu::Add, R3, -48))
        .push(Insn::mov64_imm(R4, 1))
        .push(Insn::call(Helper::MapUpdateElem))
        .push_all(Insn::load_map_fd(R1, m.streams.fd()))
        .push(Insn::mov64_reg(R2, R10))
        .push(Insn::alu64_imm(Alu::Add, R2, -32))
        .push(Insn::call(Helper::MapLookupElem))
        .label("have_stream")
        .push(Insn::mov64_reg(R7, R0))
        .jmp_imm(Cond::Eq, R7, 0, "send")
        .push(Insn::load(Size::DW, R1, R7, 0))
        .push(Insn::store_reg(Size::DW, R6, 40, R1))
        .push(Insn::load(Size::DW, R1, R7, 8))
        .push(Insn::store_reg(Size::DW, R6, 48, R1))
        .label("send")
        // Bytes copied, bounded again for the verifier (read back from memory).
        .push(Insn::load(Size::W, R3, R6, 36))
        .jmp_imm(Cond::Gt, R3, cap, "del")
        .push(Insn::alu64_imm(Alu::Add, R3, HDR as i32))
        .push_all(Insn::load_map_fd(R1, m.ring.map().fd()))
        .push(Insn::mov64_reg(R2, R6))
        .push(Insn::mov64_imm(R4, 0))
        .push(Insn::call(Helper::RingbufOutput))
        .jmp_imm(Cond::Eq, R0, 0, "sent")
        // Lost: counted globally, and its bytes owed to the stream's next event.
        .push(Insn::store_imm(Size::W, R10, -12, 0))
        .push_all(Insn::load_map_fd(R1, m.counters.fd()))
        .push(Insn::mov64_reg(R2, R10))
        .push(Insn::alu64_imm(Alu::Add, R2, -12))
        .push(Insn::call(Helper::MapLookupElem))
        .jmp_imm(Cond::Eq, R0, 0, "lost_stream")
        .push(Insn::mov64_imm(R1, 1))
        .push(Insn::atomic_add(Size::DW, R0, 0, R1))
        .push(Insn::atomic_add(Size::DW, R0, 8, R8))
        .label("lost_stream")
        .jmp_imm(Cond::Eq, R7, 0, "del")
        .push(Insn::atomic_add(Size::DW, R7, (dir as i16) * 8, R8))
        .ja("del")
        .label("sent")
        // Delivered: what it carried as lost is no longer owed.
        .jmp_imm(Cond::Eq, R7, 0, "del")
        .push(Insn::load(Size::DW, R1, R6, 40))
        .push(Insn::alu64_imm(Alu::Neg, R1, 0))
        .push(Insn::atomic_add(Size::DW, R7, 0, R1))
        .push(Insn::load(Size::DW, R1, R6, 48))
        .push(Insn::alu64_imm(Alu::Neg, R1, 0))
        .push(Insn::atomic_add(Size::DW, R7, 8, R1))
        .label("del")
        .push_all(Insn::load_map_fd(R1, m.calls.fd()))
        .push(Insn::mov64_reg(R2, R10))
        .push(Insn::alu64_imm(Alu::Add, R2, -8))
        .push(Insn::call(Helper::MapDeleteElem))
        .label("out")
        .push(Insn::mov64_imm(R0, 0))
        .push(Insn::exit());
    let name = match (dir, ex) {
        (DIR_READ, false) => "wl_tls_ret_rd",
        (DIR_READ, true) => "wl_tls_ret_rdex",
        (_, false) => "wl_tls_ret_wr",
        (_, true) => "wl_tls_ret_wrex",
    };
    Program::load(ProgType::Kprobe, name, &a.finish().map_err(asm)?, "GPL")
}

fn asm(e: wirelog_ebpf::AsmError) -> Error {
    Error { what: e.to_string(), os: std::io::Error::from(std::io::ErrorKind::InvalidInput), log: String::new() }
}

/// One event as the programs wrote it.
#[derive(Debug, Clone, Copy)]
pub struct Event<'a> {
    pub mono_ns: u64,
    pub tgid: u32,
    pub ssl: u64,
    pub fd: i32,
    pub dir: u32,
    pub len: u32,
    pub lost_read: u64,
    pub lost_write: u64,
    pub data: &'a [u8],
}

impl<'a> Event<'a> {
    /// None for a record too short for its header or its bytes (never
    /// written by our programs; counted by the caller).
    pub fn parse(r: &'a [u8]) -> Option<Event<'a>> {
        if r.len() < HDR {
            return None;
        }
        let u32_at = |o: usize| u32::from_ne_bytes(r[o..o + 4].try_into().expect("4"));
        let u64_at = |o: usize| u64::from_ne_bytes(r[o..o + 8].try_into().expect("8"));
        let copied = u32_at(36) as usize;
        let data = r.get(HDR..HDR + copied)?;
        let pid_tgid = u64_at(8);
        Some(Event {
            mono_ns: u64_at(0),
            tgid: (pid_tgid >> 32) as u32,
            ssl: u64_at(16),
            fd: u32_at(24) as i32,
            dir: u32_at(28),
            len: u32_at(32),
            lost_read: u64_at(40),
            lost_write: u64_at(48),
            data,
        })
    }
}
