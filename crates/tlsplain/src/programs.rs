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
/// 56 the socket as the fd program read it ([`SOCK_LEN`] bytes, see
/// `Sock`); 116 the thread's `comm` [16]; then the bytes.
pub const HDR: usize = 136;
pub const DIR_READ: u32 = 0;
pub const DIR_WRITE: u32 = 1;
/// Set in the direction word of the socket system calls' events
/// (`--socket-data`, see `socket`).
pub const FROM_SOCKET: u32 = 1 << 8;
const EV_SOCK: i16 = 56;
const EV_COMM: i16 = 116;

/// Open calls (pid_tgid -> the call), one per thread: 0 ssl u64, 8 buf
/// u64, 16 the `_ex` length pointer u64, 24 fd i32 (-1 unknown), then the
/// socket ([`SOCK_LEN`] bytes from 28): 28 valid u32 (1 once every field
/// was read), 32 family u16, 34 local port u16 (host order), 36 remote
/// port u16 (network order), 40 netns inode u32, 48 local IPv4, 52 remote
/// IPv4, 56 local IPv6 [16], 72 remote IPv6 [16].
const CALL_LEN: usize = 88;
const CALL_SOCK: i16 = 28;
pub const SOCK_LEN: usize = 60;
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

/// Where the fd program finds a descriptor's socket, from the kernel's
/// BTF: task_struct.files -> files_struct.fdt -> fdtable.{fd, max_fds} ->
/// file.{f_inode, private_data} (inode.i_mode says it is a socket) ->
/// socket.sk -> sock_common's addresses, ports, family and namespace.
pub struct Offsets {
    pub(crate) files: i32,
    pub(crate) fdt: i32,
    pub(crate) fd: i32,
    pub(crate) max_fds: i32,
    pub(crate) f_inode: i32,
    pub(crate) i_mode: i32,
    pub(crate) private_data: i32,
    pub(crate) sk: i32,
    pub(crate) family: i32,
    pub(crate) num: i32,
    pub(crate) dport: i32,
    pub(crate) rcv_saddr: i32,
    pub(crate) daddr: i32,
    pub(crate) v6_rcv_saddr: i32,
    pub(crate) v6_daddr: i32,
    pub(crate) net: i32,
    pub(crate) inum: i32,
    /// sock.sk_protocol (`--socket-data` follows IPPROTO_TCP sockets only).
    pub(crate) sk_protocol: i32,
}

impl Offsets {
    pub fn from_kernel() -> Result<Offsets, Error> {
        let btf = wirelog_ebpf::Btf::kernel()?;
        let o = |t: &str, m: &str| btf.member_offset(t, m).map(|v| v as i32);
        Ok(Offsets {
            files: o("task_struct", "files")?,
            fdt: o("files_struct", "fdt")?,
            fd: o("fdtable", "fd")?,
            max_fds: o("fdtable", "max_fds")?,
            f_inode: o("file", "f_inode")?,
            i_mode: o("inode", "i_mode")?,
            private_data: o("file", "private_data")?,
            sk: o("socket", "sk")?,
            family: o("sock_common", "skc_family")?,
            num: o("sock_common", "skc_num")?,
            dport: o("sock_common", "skc_dport")?,
            rcv_saddr: o("sock_common", "skc_rcv_saddr")?,
            daddr: o("sock_common", "skc_daddr")?,
            v6_rcv_saddr: o("sock_common", "skc_v6_rcv_saddr")?,
            v6_daddr: o("sock_common", "skc_v6_daddr")?,
            net: o("sock_common", "skc_net")? + o("possible_net_t", "net")?,
            inum: o("net", "ns")? + o("ns_common", "inum")?,
            sk_protocol: o("sock", "sk_protocol")?,
        })
    }
}

/// The functions probed: (symbol, direction, `_ex` form).
///
/// GnuTLS's `ssize_t gnutls_record_recv/send(gnutls_session_t session,
/// void *data, size_t data_size)` (lib/record.c, documented in
/// gnutls/gnutls.h) have `SSL_read`/`SSL_write`'s shape: the session
/// pointer first (the stream's key, as the `SSL` is), the buffer, its size,
/// and the bytes moved as the result, negative on an error or a retry
/// (`GNUTLS_E_AGAIN`); its default transport moves the record with
/// `recv`/`sendmsg` on the socket, which the system-call programs note. So
/// the same programs serve both libraries.
pub const FUNCTIONS: [(&str, u32, bool); 6] = [
    ("SSL_read", DIR_READ, false),
    ("SSL_write", DIR_WRITE, false),
    ("SSL_read_ex", DIR_READ, true),
    ("SSL_write_ex", DIR_WRITE, true),
    ("gnutls_record_recv", DIR_READ, false),
    ("gnutls_record_send", DIR_WRITE, false),
];

/// Which return program a function takes: one per direction and form,
/// [`FUNCTIONS`]' first four in that order.
pub fn ret_index(dir: u32, ex: bool) -> usize {
    dir as usize + 2 * ex as usize
}

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
    const V: i16 = -(CALL_LEN as i16);
    const KEY: i16 = V - 8;
    let mut a = Asm::new();
    a.push(Insn::mov64_reg(R6, R1));
    current(&mut a, m);
    // The value on the stack: zeroed, then ssl, buf, the length pointer
    // (or 0), fd -1.
    for off in (0..CALL_LEN as i16).step_by(8) {
        a.push(Insn::store_imm(Size::DW, R10, V + off, 0));
    }
    a.push(Insn::load(Size::DW, R1, R6, DI))
        .push(Insn::store_reg(Size::DW, R10, V, R1))
        .push(Insn::load(Size::DW, R1, R6, SI))
        .push(Insn::store_reg(Size::DW, R10, V + 8, R1));
    if ex {
        a.push(Insn::load(Size::DW, R1, R6, CX)).push(Insn::store_reg(Size::DW, R10, V + 16, R1));
    }
    a.push(Insn::store_imm(Size::W, R10, V + 24, -1))
        .push(Insn::store_reg(Size::DW, R10, KEY, R7))
        .push_all(Insn::load_map_fd(R1, m.calls.fd()))
        .push(Insn::mov64_reg(R2, R10))
        .push(Insn::alu64_imm(Alu::Add, R2, KEY as i32))
        .push(Insn::mov64_reg(R3, R10))
        .push(Insn::alu64_imm(Alu::Add, R3, V as i32))
        .push(Insn::mov64_imm(R4, 0))
        .push(Insn::call(Helper::MapUpdateElem))
        .label("out")
        .push(Insn::mov64_imm(R0, 0))
        .push(Insn::exit());
    let name = if ex { "wl_tls_entry_ex" } else { "wl_tls_entry" };
    Program::load(ProgType::Kprobe, name, &a.finish().map_err(asm)?, "GPL")
}

/// `bpf_probe_read_kernel(dst + dst_off, size, src + src_off)`, leaving
/// the program at "out" when it fails.
pub(crate) fn read_kernel(a: &mut Asm, dst: Reg, dst_off: i32, size: i32, src: Reg, src_off: i32) {
    a.push(Insn::mov64_reg(R1, dst))
        .push(Insn::alu64_imm(Alu::Add, R1, dst_off))
        .push(Insn::mov64_imm(R2, size))
        .push(Insn::mov64_reg(R3, src))
        .push(Insn::alu64_imm(Alu::Add, R3, src_off))
        .push(Insn::call(Helper::ProbeReadKernel))
        .jmp_imm(Cond::Ne, R0, 0, "out");
}

/// `r9 = *(u64 *)(r9 + off)` in kernel memory, through the stack.
pub(crate) fn chase(a: &mut Asm, off: i32) {
    read_kernel(a, R10, -8, 8, R9, off);
    a.push(Insn::load(Size::DW, R9, R10, -8));
    a.jmp_imm(Cond::Eq, R9, 0, "out");
}

/// `current->files->fdt->fd[fd]`, then its `struct sock`: jumps to "out"
/// unless the fd in r8 is open and names a socket; leaves the `struct
/// sock *` in r9. Clobbers r0-r5, r8 and the stack's 4 bytes below r10.
pub(crate) fn fd_sock(a: &mut Asm, o: &Offsets) {
    a.push(Insn::call(Helper::GetCurrentTask)).push(Insn::mov64_reg(R9, R0));
    chase(a, o.files);
    chase(a, o.fdt);
    // fd < fdt->max_fds
    read_kernel(a, R10, -4, 4, R9, o.max_fds);
    a.push(Insn::load(Size::W, R1, R10, -4)).jmp_reg(Cond::Ge, R8, R1, "out");
    chase(a, o.fd);
    // fdt->fd[fd]
    a.push(Insn::alu64_imm(Alu::Lsh, R8, 3)).push(Insn::alu64_reg(Alu::Add, R9, R8));
    chase(a, 0);
    // A socket's inode: (i_mode & S_IFMT) == S_IFSOCK.
    a.push(Insn::mov64_reg(R8, R9));
    chase(a, o.f_inode);
    read_kernel(a, R10, -4, 2, R9, o.i_mode);
    a.push(Insn::load(Size::H, R1, R10, -4))
        .push(Insn::alu64_imm(Alu::And, R1, 0xf000))
        .jmp_imm(Cond::Ne, R1, 0xc000, "out")
        .push(Insn::mov64_reg(R9, R8));
    chase(a, o.private_data);
    chase(a, o.sk);
}

/// On a socket system call: the open TLS call of this thread, if any and
/// without an fd yet, takes the call's fd (the first one: the socket the
/// TLS record goes through), and reads that socket's addresses, ports and
/// namespace from the kernel's structures (offsets from BTF), so the event
/// names its connection even when the process and the socket are gone by
/// the time user space reads it.
pub fn syscall(m: &Maps, tp: &Tracepoint, o: &Offsets) -> Result<Program, Error> {
    let (fd_off, fd_size) = tp.field("fd")?;
    let size = Size::of(fd_size).ok_or_else(|| Error {
        what: format!("tracepoint {}: fd of {fd_size} bytes", tp.id),
        os: std::io::Error::from(std::io::ErrorKind::Unsupported),
        log: String::new(),
    })?;
    let sock = CALL_SOCK as i32;
    let mut a = Asm::new();
    a.push(Insn::mov64_reg(R6, R1))
        .push(Insn::call(Helper::GetCurrentPidTgid))
        .push(Insn::store_reg(Size::DW, R10, -16, R0))
        .push_all(Insn::load_map_fd(R1, m.calls.fd()))
        .push(Insn::mov64_reg(R2, R10))
        .push(Insn::alu64_imm(Alu::Add, R2, -16))
        .push(Insn::call(Helper::MapLookupElem))
        .jmp_imm(Cond::Eq, R0, 0, "out")
        .push(Insn::mov64_reg(R7, R0))
        // The fd slot, sign-extended: -1 while unknown.
        .push(Insn::load(Size::W, R1, R7, 24))
        .push(Insn::alu64_imm(Alu::Lsh, R1, 32))
        .push(Insn::alu64_imm(Alu::Arsh, R1, 32))
        .jmp_imm(Cond::Ne, R1, -1, "out")
        // The fd is an int (the field may be 8 bytes wide).
        .push(Insn::load(size, R8, R6, fd_off as i16))
        .push(Insn::alu64_imm(Alu::Lsh, R8, 32))
        .push(Insn::alu64_imm(Alu::Arsh, R8, 32))
        .jmp_imm(Cond::Slt, R8, 0, "out")
        .push(Insn::store_reg(Size::W, R7, 24, R8));
    fd_sock(&mut a, o);
    // The sock_common fields, straight into the call's socket slot.
    read_kernel(&mut a, R7, sock + 4, 2, R9, o.family);
    read_kernel(&mut a, R7, sock + 6, 2, R9, o.num);
    read_kernel(&mut a, R7, sock + 8, 2, R9, o.dport);
    read_kernel(&mut a, R7, sock + 20, 4, R9, o.rcv_saddr);
    read_kernel(&mut a, R7, sock + 24, 4, R9, o.daddr);
    read_kernel(&mut a, R7, sock + 28, 16, R9, o.v6_rcv_saddr);
    read_kernel(&mut a, R7, sock + 44, 16, R9, o.v6_daddr);
    chase(&mut a, o.net);
    read_kernel(&mut a, R7, sock + 12, 4, R9, o.inum);
    a.push(Insn::store_imm(Size::W, R7, CALL_SOCK, 1))
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
        .push(Insn::store_reg(Size::W, R6, 32, R8));
    // The socket the fd program read (valid flag first).
    for off in (0..SOCK_LEN as i16).step_by(4) {
        a.push(Insn::load(Size::W, R1, R7, CALL_SOCK + off)).push(Insn::store_reg(Size::W, R6, EV_SOCK + off, R1));
    }
    a.push(Insn::mov64_reg(R1, R6))
        .push(Insn::alu64_imm(Alu::Add, R1, EV_COMM as i32))
        .push(Insn::mov64_imm(R2, 16))
        .push(Insn::call(Helper::GetCurrentComm))
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
        .label("copied");
    send(&mut a, m, m.calls.fd(), dir, DATA_CAP);
    let name = match (dir, ex) {
        (DIR_READ, false) => "wl_tls_ret_rd",
        (DIR_READ, true) => "wl_tls_ret_rdex",
        (_, false) => "wl_tls_ret_wr",
        (_, true) => "wl_tls_ret_wrex",
    };
    Program::load(ProgType::Kprobe, name, &a.finish().map_err(asm)?, "GPL")
}

/// The end of a program that has the event in the scratch record (r6,
/// header and bytes written, the full length in r8, pid_tgid in r9 and at
/// r10-8, the key of its open call in `calls`, at most `cap` bytes): the stream's bytes lost
/// before it go in its header, then it goes to the ring, or its loss is
/// counted and owed to the stream's next event; the open call is deleted.
/// Shared by the TLS library's return probes and the socket system calls'
/// exit programs (`socket`).
pub(crate) fn send(a: &mut Asm, m: &Maps, calls: i32, dir: u32, cap: usize) {
    let cap = cap as i32;
    // The stream's lost bytes (r7 from here; the call is no longer read).
    a.push(Insn::mov64_reg(R1, R9))
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
        // BPF_RB_NO_WAKEUP: the reader wakes on its own every few ms;
        // waking it from here would cost every TLS call a wakeup.
        .push(Insn::mov64_imm(R4, 1))
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
        .push_all(Insn::load_map_fd(R1, calls))
        .push(Insn::mov64_reg(R2, R10))
        .push(Insn::alu64_imm(Alu::Add, R2, -8))
        .push(Insn::call(Helper::MapDeleteElem))
        .label("out")
        .push(Insn::mov64_imm(R0, 0))
        .push(Insn::exit());
}

pub(crate) fn asm(e: wirelog_ebpf::AsmError) -> Error {
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
    /// From a socket system call (`--socket-data`), not the TLS library;
    /// `ssl` is then the kernel's socket (its `struct sock`), an identity.
    pub socket: bool,
    pub len: u32,
    pub lost_read: u64,
    pub lost_write: u64,
    /// The socket, when the fd program could read it.
    pub sock: Option<Sock>,
    pub comm: [u8; 16],
    pub data: &'a [u8],
}

/// A socket as the fd program read it: addresses as records hold them
/// (IPv4 mapped into IPv6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sock {
    pub netns: u32,
    pub local: [u8; 16],
    pub local_port: u16,
    pub remote: [u8; 16],
    pub remote_port: u16,
}

impl Sock {
    /// This socket as it reads once TCP closed it under its owner (a reset
    /// received, the owner still reading what came before): the kernel
    /// takes the local port back, zeroing it, and leaves the addresses and
    /// the remote port (`tcp_set_state(TCP_CLOSE)` calls `inet_put_port`,
    /// net/ipv4/tcp.c; `__inet_put_port` sets `inet_num = 0`,
    /// net/ipv4/inet_hashtables.c). gnutls-cli reads nginx's response after
    /// nginx's reset so.
    pub fn unbound(&self) -> Sock {
        Sock { local_port: 0, ..*self }
    }

    fn parse(b: &[u8]) -> Option<Sock> {
        let u16_at = |o: usize| u16::from_ne_bytes(b[o..o + 2].try_into().expect("2"));
        if u32::from_ne_bytes(b[0..4].try_into().expect("4")) != 1 {
            return None;
        }
        let v4 = |o: usize| {
            let mut a = [0u8; 16];
            a[10] = 0xff;
            a[11] = 0xff;
            a[12..].copy_from_slice(&b[o..o + 4]);
            a
        };
        let v6 = |o: usize| <[u8; 16]>::try_from(&b[o..o + 16]).expect("16");
        let (local, remote) = match u16_at(4) {
            2 => (v4(20), v4(24)),
            10 => (v6(28), v6(44)),
            _ => return None,
        };
        Some(Sock {
            netns: u32::from_ne_bytes(b[12..16].try_into().expect("4")),
            local,
            local_port: u16_at(6),
            remote,
            // skc_dport is in network order.
            remote_port: u16::from_be_bytes(b[8..10].try_into().expect("2")),
        })
    }
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
            dir: u32_at(28) & !FROM_SOCKET,
            socket: u32_at(28) & FROM_SOCKET != 0,
            len: u32_at(32),
            lost_read: u64_at(40),
            lost_write: u64_at(48),
            sock: Sock::parse(&r[EV_SOCK as usize..EV_SOCK as usize + SOCK_LEN]),
            comm: r[EV_COMM as usize..EV_COMM as usize + 16].try_into().expect("16"),
            data,
        })
    }
}
