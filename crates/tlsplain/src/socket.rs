//! `capture --socket-data`: the bytes processes move through TCP sockets,
//! from the system calls' tracepoints (`syscalls:sys_enter_*` and
//! `sys_exit_*` of read, write, recvfrom, sendto, recvmsg, sendmsg, readv
//! and writev), as events of the same layout as the TLS library's
//! (`programs::HDR`), through the same ring buffer, to the same parsers.
//! One event per system call: a whole message the application handed over
//! or took, however many packets carried it.
//!
//! Which sockets: **decided in the kernel**, on entry. The program follows
//! the call's fd through the task's file table to its file (the inode must
//! be a socket's), its `struct socket` and `struct sock`, and keeps the call
//! only when `sk_protocol` is IPPROTO_TCP, the family AF_INET or AF_INET6
//! and the socket's network namespace the capture's own (the packet path's
//! connections are those of the captured interfaces, which are in that
//! namespace; a socket of another namespace would be joined with the wrong
//! connection, as the same addresses live in many namespaces). Offsets come
//! from the kernel's BTF (`programs::Offsets`). Every other call (files,
//! pipes, UNIX and UDP sockets, other namespaces) costs the walk and ends
//! there; its exit finds no open call (one map lookup). `recv*` with
//! MSG_PEEK is left out: its bytes are read again by the next call.
//!
//! On exit, with a positive result, the program copies what the call moved
//! (up to [`SOCKET_CAP`]: applications read and write in larger pieces
//! than TLS records, and a piece cut short is a gap in its stream): the buffer of read/write/recvfrom/sendto, or the
//! iovecs of readv/writev and of the `user_msghdr` of recvmsg/sendmsg (the
//! first [`MAX_IOV`] of them; bytes beyond are reported as a gap, like an
//! event's bytes beyond the cap). The stream identity in the event's `ssl`
//! field is the `struct sock` address: the same socket shared by two fds
//! or two processes is one stream. The ring, the lost-bytes accounting and
//! the loss counters are the TLS library's (`programs::send`).
//!
//! Not seen: io_uring, sendfile/splice (no copy through user memory), and
//! recvmmsg/sendmmsg.

use wirelog_ebpf::{Alu, Asm, Attachment, Cond, Error, Helper, Insn, Map, MapType, ProgType, Program, Reg, Size, Tracepoint};

use crate::programs::{self, asm, chase, read_kernel, send, Maps, Offsets, DIR_READ, DIR_WRITE, FROM_SOCKET, HDR, SOCK_LEN};

use Reg::*;

/// iovecs of one readv/writev/recvmsg/sendmsg copied into its event.
pub const MAX_IOV: usize = 8;
/// Bytes of one system call copied into its event; beyond, the event
/// carries the full length and user space reports the rest as a gap.
pub const SOCKET_CAP: usize = 64 * 1024;

/// What a system call's second argument is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Buffer {
    /// `buf, count`: read, write, recvfrom, sendto.
    Plain,
    /// `const struct iovec *vec, unsigned long vlen`: readv, writev.
    Iov,
    /// `struct user_msghdr *msg`: recvmsg, sendmsg.
    Msg,
}

/// The system calls followed: (name, direction, the buffer argument's
/// field in the tracepoint's record, its kind, the flags field to check
/// for MSG_PEEK).
const SYSCALLS: [(&str, u32, &str, Buffer, Option<&str>); 8] = [
    ("read", DIR_READ, "buf", Buffer::Plain, None),
    ("write", DIR_WRITE, "buf", Buffer::Plain, None),
    ("recvfrom", DIR_READ, "ubuf", Buffer::Plain, Some("flags")),
    ("sendto", DIR_WRITE, "buff", Buffer::Plain, None),
    ("recvmsg", DIR_READ, "msg", Buffer::Msg, Some("flags")),
    ("sendmsg", DIR_WRITE, "msg", Buffer::Msg, None),
    ("readv", DIR_READ, "vec", Buffer::Iov, None),
    ("writev", DIR_WRITE, "vec", Buffer::Iov, None),
];

const MSG_PEEK: i32 = 2;
const IPPROTO_TCP: i32 = 6;

/// Open calls (pid_tgid -> the call): 0 the buffer argument u64, 8 the
/// `struct sock` u64, 16 vlen u64 (readv/writev), 24 fd i32, then the
/// socket ([`SOCK_LEN`] bytes from 28, laid out as `programs`' open TLS
/// calls hold it, so `programs::Sock::parse` reads both).
const CALL_LEN: usize = 88;
const CALL_SOCK: i16 = 28;
const CALLS: u32 = 16_384;

/// The maps of the socket programs; the ring, the lost-bytes map and the
/// loss counters are shared with the TLS library's (`Maps`).
pub struct SocketMaps {
    calls: Map,
    /// One record per CPU (an array indexed by the CPU's number: a per-CPU
    /// array's values stop at 32 KiB): the header, then room for one
    /// iovec's bytes at any offset below the cap (so the verifier sees
    /// every copy in bounds).
    scratch: Map,
    /// With a limit (`--socket-data PID|COMM|CGROUP`): the tgids to watch.
    pub pids: Option<Map>,
}

impl SocketMaps {
    pub fn create(limited: bool) -> Result<SocketMaps, Error> {
        Ok(SocketMaps {
            calls: Map::create(MapType::LruHash, "wl_sock_calls", 8, CALL_LEN, CALLS)?,
            scratch: Map::create(MapType::Array, "wl_sock_scratch", 4, HDR + 2 * SOCKET_CAP, possible_cpus())?,
            pids: if limited { Some(Map::create(MapType::Hash, "wl_sock_pids", 4, 4, 65_536)?) } else { None },
        })
    }

    /// Starts watching process `pid` (with a limit).
    pub fn watch(&self, pid: u32) {
        if let Some(p) = &self.pids {
            // A full map leaves the process unwatched.
            let _ = p.update(&pid.to_ne_bytes(), &1u32.to_ne_bytes());
        }
    }
}

/// The programs, attached to the 16 tracepoints; detached on drop.
pub struct SocketPrograms {
    _attached: Vec<(Program, Attachment)>,
    pub maps: SocketMaps,
    /// tracefs was mounted to find the tracepoints (said once).
    pub mounted: Option<std::path::PathBuf>,
}

impl SocketPrograms {
    /// Loads and attaches every program: the sockets of network namespace
    /// `netns` (its inode number) only.
    pub fn load(m: &Maps, limited: bool, o: &Offsets, netns: u32) -> Result<SocketPrograms, Error> {
        let maps = SocketMaps::create(limited)?;
        let mut attached = Vec::new();
        let mut mounted = None;
        for (name, dir, buf, kind, flags) in SYSCALLS {
            let enter = Tracepoint::find("syscalls", &format!("sys_enter_{name}"))?;
            mounted = mounted.or(enter.mounted.clone());
            let p = entry(&maps, &enter, buf, kind, flags, o, netns)?;
            let a = enter.attach(&p)?;
            attached.push((p, a));
            let exit = Tracepoint::find("syscalls", &format!("sys_exit_{name}"))?;
            let p = exit_program(m, &maps, &exit, kind, dir)?;
            let a = exit.attach(&p)?;
            attached.push((p, a));
        }
        Ok(SocketPrograms { _attached: attached, maps, mounted })
    }
}

/// The number of CPU ids the kernel may use (`/sys/devices/system/cpu/
/// possible`, "0-3" or "0,2-5"): the scratch array's size.
fn possible_cpus() -> u32 {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    let last = text.trim().split(',').filter_map(|r| r.rsplit('-').next()?.parse::<u32>().ok()).max();
    // SAFETY: sysconf has no preconditions.
    last.map_or_else(|| unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as u32, |l| l + 1)
}

fn unsupported(what: String) -> Error {
    Error { what, os: std::io::Error::from(std::io::ErrorKind::Unsupported), log: String::new() }
}

/// A field of the tracepoint's record loaded into `dst` (8 bytes: every
/// syscall argument is a long in these records).
fn field(a: &mut Asm, tp: &Tracepoint, name: &str, dst: Reg) -> Result<(), Error> {
    let (off, size) = tp.field(name)?;
    if size != 8 {
        return Err(unsupported(format!("tracepoint {}: field {name} of {size} bytes, not 8", tp.id)));
    }
    a.push(Insn::load(Size::DW, dst, R6, off as i16));
    Ok(())
}

/// On entry: the call is kept for its exit when its fd is a TCP socket of
/// namespace `netns`.
fn entry(m: &SocketMaps, tp: &Tracepoint, buf: &str, kind: Buffer, flags: Option<&str>, o: &Offsets, netns: u32) -> Result<Program, Error> {
    // The value below the 8 bytes `chase` and `read_kernel` use at r10-8.
    const V: i16 = -(CALL_LEN as i16) - 8;
    const KEY: i16 = V - 8;
    let sock = (V + CALL_SOCK) as i32;
    let mut a = Asm::new();
    a.push(Insn::mov64_reg(R6, R1)).push(Insn::call(Helper::GetCurrentPidTgid)).push(Insn::mov64_reg(R7, R0));
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
    if let Some(f) = flags {
        field(&mut a, tp, f, R1)?;
        a.push(Insn::alu64_imm(Alu::And, R1, MSG_PEEK)).jmp_imm(Cond::Ne, R1, 0, "out");
    }
    // The fd is an int.
    field(&mut a, tp, "fd", R8)?;
    a.push(Insn::alu64_imm(Alu::Lsh, R8, 32)).push(Insn::alu64_imm(Alu::Arsh, R8, 32)).jmp_imm(Cond::Slt, R8, 0, "out");
    for off in (0..CALL_LEN as i16).step_by(8) {
        a.push(Insn::store_imm(Size::DW, R10, V + off, 0));
    }
    a.push(Insn::store_reg(Size::W, R10, V + 24, R8));
    field(&mut a, tp, buf, R1)?;
    a.push(Insn::store_reg(Size::DW, R10, V, R1));
    if kind == Buffer::Iov {
        field(&mut a, tp, "vlen", R1)?;
        a.push(Insn::store_reg(Size::DW, R10, V + 16, R1));
    }
    programs::fd_sock(&mut a, o);
    a.push(Insn::store_reg(Size::DW, R10, V + 8, R9));
    // TCP (sk_protocol is a u16), over IPv4 or IPv6.
    read_kernel(&mut a, R10, -4, 2, R9, o.sk_protocol);
    a.push(Insn::load(Size::H, R1, R10, -4)).jmp_imm(Cond::Ne, R1, IPPROTO_TCP, "out");
    read_kernel(&mut a, R10, sock + 4, 2, R9, o.family);
    a.push(Insn::load(Size::H, R1, R10, (sock + 4) as i16))
        .jmp_imm(Cond::Eq, R1, libc::AF_INET, "inet")
        .jmp_imm(Cond::Ne, R1, libc::AF_INET6, "out")
        .label("inet");
    read_kernel(&mut a, R10, sock + 6, 2, R9, o.num);
    read_kernel(&mut a, R10, sock + 8, 2, R9, o.dport);
    read_kernel(&mut a, R10, sock + 20, 4, R9, o.rcv_saddr);
    read_kernel(&mut a, R10, sock + 24, 4, R9, o.daddr);
    read_kernel(&mut a, R10, sock + 28, 16, R9, o.v6_rcv_saddr);
    read_kernel(&mut a, R10, sock + 44, 16, R9, o.v6_daddr);
    chase(&mut a, o.net);
    read_kernel(&mut a, R10, sock + 12, 4, R9, o.inum);
    a.push(Insn::load(Size::W, R1, R10, (sock + 12) as i16))
        .push_all(Insn::load_imm64(R2, 0, netns as u64))
        .jmp_reg(Cond::Ne, R1, R2, "out")
        .push(Insn::store_imm(Size::W, R10, sock as i16, 1))
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
    Program::load(ProgType::Tracepoint, "wl_sock_enter", &a.finish().map_err(asm)?, "GPL")
}

/// Labels of the unrolled iovec loop, one per round.
const TAKE_REST: [&str; MAX_IOV] = ["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"];
const TAKE_ROOM: [&str; MAX_IOV] = ["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"];

/// On exit: the event, when the call was kept and moved bytes.
fn exit_program(m: &Maps, sm: &SocketMaps, tp: &Tracepoint, kind: Buffer, dir: u32) -> Result<Program, Error> {
    let cap = SOCKET_CAP as i32;
    // The iovec loop's state, below what `send` uses (to r10-48).
    const CURSOR: i16 = -56;
    const LEFT: i16 = -64;
    const REST: i16 = -72;
    const OFF: i16 = -80;
    const IOV: i16 = -96;
    const TAKE: i16 = -104;
    let mut a = Asm::new();
    a.push(Insn::mov64_reg(R6, R1));
    field(&mut a, tp, "ret", R8)?;
    a.push(Insn::call(Helper::GetCurrentPidTgid))
        .push(Insn::mov64_reg(R9, R0))
        .push(Insn::store_reg(Size::DW, R10, -8, R0))
        .push_all(Insn::load_map_fd(R1, sm.calls.fd()))
        .push(Insn::mov64_reg(R2, R10))
        .push(Insn::alu64_imm(Alu::Add, R2, -8))
        .push(Insn::call(Helper::MapLookupElem))
        .jmp_imm(Cond::Eq, R0, 0, "out")
        .push(Insn::mov64_reg(R7, R0))
        // An error, or nothing moved (end of stream).
        .jmp_imm(Cond::Sle, R8, 0, "del")
        .push(Insn::call(Helper::GetSmpProcessorId))
        .push(Insn::store_reg(Size::W, R10, -12, R0))
        .push_all(Insn::load_map_fd(R1, sm.scratch.fd()))
        .push(Insn::mov64_reg(R2, R10))
        .push(Insn::alu64_imm(Alu::Add, R2, -12))
        .push(Insn::call(Helper::MapLookupElem))
        .jmp_imm(Cond::Eq, R0, 0, "del")
        .push(Insn::mov64_reg(R6, R0))
        .push(Insn::call(Helper::KtimeGetNs))
        .push(Insn::store_reg(Size::DW, R6, 0, R0))
        .push(Insn::store_reg(Size::DW, R6, 8, R9))
        .push(Insn::load(Size::DW, R1, R7, 8))
        .push(Insn::store_reg(Size::DW, R6, 16, R1))
        .push(Insn::load(Size::W, R1, R7, 24))
        .push(Insn::store_reg(Size::W, R6, 24, R1))
        .push(Insn::store_imm(Size::W, R6, 28, (dir | FROM_SOCKET) as i32))
        .push(Insn::store_reg(Size::W, R6, 32, R8));
    for off in (0..SOCK_LEN as i16).step_by(4) {
        a.push(Insn::load(Size::W, R1, R7, CALL_SOCK + off)).push(Insn::store_reg(Size::W, R6, 56 + off, R1));
    }
    a.push(Insn::mov64_reg(R1, R6)).push(Insn::alu64_imm(Alu::Add, R1, 116)).push(Insn::mov64_imm(R2, 16)).push(Insn::call(Helper::GetCurrentComm));
    match kind {
        Buffer::Plain => {
            a.push(Insn::mov64_reg(R2, R8))
                .jmp_imm(Cond::Le, R2, cap, "len_ok")
                .push(Insn::mov64_imm(R2, cap))
                .label("len_ok")
                .push(Insn::store_reg(Size::W, R6, 36, R2))
                .push(Insn::mov64_reg(R1, R6))
                .push(Insn::alu64_imm(Alu::Add, R1, HDR as i32))
                .push(Insn::load(Size::DW, R3, R7, 0))
                .push(Insn::call(Helper::ProbeReadUser))
                .jmp_imm(Cond::Eq, R0, 0, "copied")
                // Unreadable: the event says nothing was copied.
                .push(Insn::store_imm(Size::W, R6, 36, 0))
                .ja("copied");
        }
        Buffer::Iov | Buffer::Msg => {
            a.push(Insn::store_imm(Size::DW, R10, OFF, 0)).push(Insn::store_reg(Size::DW, R10, REST, R8));
            if kind == Buffer::Iov {
                a.push(Insn::load(Size::DW, R1, R7, 0))
                    .push(Insn::store_reg(Size::DW, R10, CURSOR, R1))
                    .push(Insn::load(Size::DW, R1, R7, 16))
                    .push(Insn::store_reg(Size::DW, R10, LEFT, R1));
            } else {
                // struct user_msghdr (x86-64): msg_iov at 16, msg_iovlen at 24.
                a.push(Insn::mov64_reg(R1, R10))
                    .push(Insn::alu64_imm(Alu::Add, R1, IOV as i32))
                    .push(Insn::mov64_imm(R2, 16))
                    .push(Insn::load(Size::DW, R3, R7, 0))
                    .push(Insn::alu64_imm(Alu::Add, R3, 16))
                    .push(Insn::call(Helper::ProbeReadUser))
                    .jmp_imm(Cond::Ne, R0, 0, "iov_done")
                    .push(Insn::load(Size::DW, R1, R10, IOV))
                    .push(Insn::store_reg(Size::DW, R10, CURSOR, R1))
                    .push(Insn::load(Size::DW, R1, R10, IOV + 8))
                    .push(Insn::store_reg(Size::DW, R10, LEFT, R1));
            }
            for i in 0..MAX_IOV {
                a.push(Insn::load(Size::DW, R1, R10, LEFT))
                    .jmp_imm(Cond::Eq, R1, 0, "iov_done")
                    .push(Insn::load(Size::DW, R1, R10, REST))
                    .jmp_imm(Cond::Eq, R1, 0, "iov_done")
                    .push(Insn::load(Size::DW, R1, R10, OFF))
                    .jmp_imm(Cond::Ge, R1, cap, "iov_done")
                    // The iovec {base, len}.
                    .push(Insn::mov64_reg(R1, R10))
                    .push(Insn::alu64_imm(Alu::Add, R1, IOV as i32))
                    .push(Insn::mov64_imm(R2, 16))
                    .push(Insn::load(Size::DW, R3, R10, CURSOR))
                    .push(Insn::call(Helper::ProbeReadUser))
                    .jmp_imm(Cond::Ne, R0, 0, "iov_done")
                    // take = min(len, bytes the call moved still unplaced, room under the cap)
                    .push(Insn::load(Size::DW, R2, R10, IOV + 8))
                    .push(Insn::load(Size::DW, R1, R10, REST))
                    .jmp_reg(Cond::Le, R2, R1, TAKE_REST[i])
                    .push(Insn::mov64_reg(R2, R1))
                    .label(TAKE_REST[i])
                    .push(Insn::load(Size::DW, R3, R10, OFF))
                    .push(Insn::mov64_imm(R1, cap))
                    .push(Insn::alu64_reg(Alu::Sub, R1, R3))
                    .jmp_reg(Cond::Le, R2, R1, TAKE_ROOM[i])
                    .push(Insn::mov64_reg(R2, R1))
                    .label(TAKE_ROOM[i])
                    // Bounds the verifier can see (never taken).
                    .jmp_imm(Cond::Gt, R2, cap, "iov_done")
                    .jmp_imm(Cond::Gt, R3, cap, "iov_done")
                    .push(Insn::store_reg(Size::DW, R10, TAKE, R2))
                    .push(Insn::mov64_reg(R1, R6))
                    .push(Insn::alu64_imm(Alu::Add, R1, HDR as i32))
                    .push(Insn::alu64_reg(Alu::Add, R1, R3))
                    .push(Insn::load(Size::DW, R3, R10, IOV))
                    .push(Insn::call(Helper::ProbeReadUser))
                    .jmp_imm(Cond::Ne, R0, 0, "iov_done")
                    .push(Insn::load(Size::DW, R2, R10, TAKE))
                    .push(Insn::load(Size::DW, R1, R10, OFF))
                    .push(Insn::alu64_reg(Alu::Add, R1, R2))
                    .push(Insn::store_reg(Size::DW, R10, OFF, R1))
                    .push(Insn::load(Size::DW, R1, R10, REST))
                    .push(Insn::alu64_reg(Alu::Sub, R1, R2))
                    .push(Insn::store_reg(Size::DW, R10, REST, R1))
                    .push(Insn::load(Size::DW, R1, R10, LEFT))
                    .push(Insn::alu64_imm(Alu::Sub, R1, 1))
                    .push(Insn::store_reg(Size::DW, R10, LEFT, R1))
                    .push(Insn::load(Size::DW, R1, R10, CURSOR))
                    .push(Insn::alu64_imm(Alu::Add, R1, 16))
                    .push(Insn::store_reg(Size::DW, R10, CURSOR, R1));
            }
            // What was copied (the rest of the call's bytes: a gap).
            a.label("iov_done").push(Insn::load(Size::DW, R1, R10, OFF)).push(Insn::store_reg(Size::W, R6, 36, R1)).ja("copied");
        }
    }
    a.label("copied");
    send(&mut a, m, sm.calls.fd(), dir, SOCKET_CAP);
    Program::load(ProgType::Tracepoint, "wl_sock_exit", &a.finish().map_err(asm)?, "GPL")
}

#[cfg(test)]
mod tests {
    use crate::{Capturer, Config};
    use std::io::{IoSlice, Read, Write};
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;
    use wirelog_parse::ParseConfig;
    use wirelog_record::{Detail, TxRecord, TxSource};

    /// The programs pass the verifier and attach; an HTTP exchange over
    /// loopback TCP between two threads of this process (the client's
    /// request through sendmsg with two iovecs, the server peeking at it
    /// first (MSG_PEEK, not taken twice), reading it with recvfrom and
    /// answering with writev, the client reading with read) is one
    /// transaction of source `socket`, with the sizes both ends moved.
    #[test]
    fn an_http_exchange_over_tcp_system_calls_is_one_socket_transaction() {
        if !wirelog_ebpf::tests_can_load() {
            return;
        }
        let cfg = Config { tls_library: false, limit: None, socket: Some(None), ring_size: 1 << 20, parse: ParseConfig::default() };
        let c = Capturer::load(cfg).unwrap_or_else(|e| panic!("{e}"));
        assert!(c.files().is_empty(), "no TLS library probed without --tls-plaintext");
        let got: Arc<Mutex<Vec<TxRecord>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let sink = got.clone();
        let running = c.spawn(stop.clone(), move |txs| sink.lock().unwrap().append(txs)).unwrap();
        // A server's port below the ephemeral range, as servers have: the
        // roles are right even when the listening ports were read (for
        // another connection of this namespace) a moment before it opened.
        let l = (20_000..30_000u16)
            .map(|p| p.wrapping_add((std::process::id() % 10_000) as u16) % 10_000 + 20_000)
            .find_map(|p| std::net::TcpListener::bind(("127.0.0.1", p)).ok())
            .expect("a free port");
        let port = l.local_addr().unwrap().port();
        let body = vec![b'b'; 5000];
        let server = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut peek = [0u8; 16];
            // SAFETY: recv into a buffer we own.
            let n = unsafe { libc::recv(s.as_raw_fd(), peek.as_mut_ptr().cast(), peek.len(), libc::MSG_PEEK) };
            assert!(n > 0);
            let mut req = Vec::new();
            let mut buf = [0u8; 1024];
            while !req.ends_with(b"\r\n\r\n") {
                let n = s.read(&mut buf).unwrap();
                assert!(n > 0);
                req.extend_from_slice(&buf[..n]);
            }
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
            let n = s.write_vectored(&[IoSlice::new(head.as_bytes()), IoSlice::new(&body)]).unwrap();
            assert_eq!(n, head.len() + body.len());
        });
        let mut client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (a, b) = (b"GET /over-the-socket HTTP/1.1\r\n".to_vec(), b"Host: x\r\n\r\n".to_vec());
        let iov = [libc::iovec { iov_base: a.as_ptr() as *mut _, iov_len: a.len() }, libc::iovec { iov_base: b.as_ptr() as *mut _, iov_len: b.len() }];
        // SAFETY: a zeroed msghdr pointing at two iovecs that outlive the call.
        let sent = unsafe {
            let mut m: libc::msghdr = std::mem::zeroed();
            m.msg_iov = iov.as_ptr() as *mut _;
            m.msg_iovlen = 2;
            libc::sendmsg(client.as_raw_fd(), &m, 0)
        };
        assert_eq!(sent as usize, a.len() + b.len());
        let mut resp = Vec::new();
        let mut buf = [0u8; 4096];
        while resp.len() < 5000 + 38 {
            // SAFETY: read into a buffer we own.
            let n = unsafe { libc::read(client.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            assert!(n > 0);
            resp.extend_from_slice(&buf[..n as usize]);
        }
        server.join().unwrap();
        client.flush().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Relaxed);
        let running_stats = running.socket_stats().expect("socket stats");
        running.join();
        let txs = got.lock().unwrap();
        let ours: Vec<&TxRecord> = txs.iter().filter(|t| t.resp_p == port).collect();
        assert_eq!(ours.len(), 1, "{ours:#?}\n{running_stats}");
        let t = ours[0];
        assert_eq!(t.source, TxSource::Socket);
        let Detail::Http(h) = &t.tx.detail else { panic!("{t:#?}") };
        assert_eq!((&*h.method, &*h.uri, h.status_code, h.response_body_len), ("GET", "/over-the-socket", 200, 5000), "{t:#?}");
        assert_eq!(t.tx.request.unwrap().bytes, (a.len() + b.len()) as u64, "{t:#?}");
        let me = std::fs::read_to_string("/proc/self/comm").unwrap();
        assert_eq!(t.orig_proc.as_ref().map(|p| p.pid), Some(std::process::id()), "{t:#?}");
        assert_eq!(t.resp_proc.as_ref().map(|p| p.name.as_str()), Some(me.trim_end()), "{t:#?}");
    }
}
