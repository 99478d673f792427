//! Live capture for wirelog: AF_PACKET sockets with TPACKET_V3 receive rings,
//! read zero-copy one retired block at a time.
//!
//! - [`ring`]: the socket, its mmap'ed ring, fanout across worker threads,
//!   kernel statistics, and a borrowed [`ring::Packet`] view per packet.
//! - [`bpf`]: tcpdump expressions compiled to classic BPF by libpcap, loaded
//!   at run time with `dlopen` (no build-time dependency on libpcap), and the
//!   `--skip-empty-tcp` filter.
//! - [`filter`]: the same expressions on packets read from files, run by a
//!   classic BPF interpreter of our own.
//! - [`privs`]: dropping to an unprivileged user once the sockets are open.
//! - [`stop`]: SIGINT/SIGTERM turned into a flag plus an eventfd to poll on.
//!
//! ```no_run
//! use wirelog_capture::{ring::{Ring, RingConfig}, Interface};
//! let iface = Interface::lookup("eth0")?;
//! let mut ring = Ring::open(&iface, &RingConfig::default())?;
//! loop {
//!     ring.wait(1000)?;
//!     while let Some(mut block) = ring.next_block() {
//!         while let Some(p) = block.next_packet() {
//!             println!("{} bytes at {}", p.wire_len, p.ts_ns);
//!         }
//!     } // the block goes back to the kernel here
//! }
//! # Ok::<(), wirelog_capture::CaptureError>(())
//! ```

pub mod bpf;
pub mod budget;
pub mod filter;
pub mod privs;
pub mod ring;
pub mod sockprog;
pub mod stop;
mod sys;
#[cfg(test)]
mod testnet;

use std::ffi::CString;
use std::fmt;
use std::io;

/// What went wrong, for callers that react differently (exit codes, retries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The interface does not exist (in this network namespace).
    NoSuchInterface,
    /// Not allowed to open a packet socket (needs root or CAP_NET_RAW).
    Permission,
    /// The receive ring could not be set up or mapped.
    Ring,
    /// A filter expression did not compile, or libpcap is missing.
    Filter,
    /// Changing user or dropping capabilities failed.
    Privileges,
    /// Any other system call failure.
    Io,
}

/// An error of this crate: a kind plus a message that names what failed.
#[derive(Debug)]
pub struct CaptureError {
    pub kind: ErrorKind,
    pub message: String,
}

impl CaptureError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        CaptureError { kind, message: message.into() }
    }

    /// From the last OS error: `what` says which call on which object failed.
    pub(crate) fn last_os(kind: ErrorKind, what: impl fmt::Display) -> Self {
        Self::os(kind, what, io::Error::last_os_error())
    }

    pub(crate) fn os(kind: ErrorKind, what: impl fmt::Display, err: io::Error) -> Self {
        let kind = match err.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) if kind != ErrorKind::Privileges => ErrorKind::Permission,
            _ => kind,
        };
        let hint = if kind == ErrorKind::Permission {
            " (capturing needs root, or CAP_NET_RAW and CAP_NET_ADMIN)"
        } else {
            ""
        };
        CaptureError { kind, message: format!("{what}: {err}{hint}") }
    }
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CaptureError {}

/// How frames of an interface look in the ring, and the link type they are
/// decoded (and filters compiled) as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Ethernet frames (Ethernet and loopback devices), read with SOCK_RAW:
    /// LINKTYPE_ETHERNET / DLT_EN10MB.
    Ethernet,
    /// The network-layer packet only (SOCK_DGRAM, "cooked"): used for `any`
    /// and for devices without an Ethernet header (tun, WireGuard, PPP, GRE).
    /// Decoded as LINKTYPE_RAW; filters are compiled for DLT_RAW. Non-IP
    /// packets (by `sll_protocol`) are skipped.
    Cooked,
}

impl Framing {
    /// LINKTYPE_* value of the frames (as in pcap files).
    pub fn linktype(self) -> u32 {
        match self {
            Framing::Ethernet => 1,
            Framing::Cooked => 101,
        }
    }

    /// DLT_* value for libpcap's `pcap_open_dead` (DLT_RAW is 12 on Linux).
    pub fn dlt(self) -> i32 {
        match self {
            Framing::Ethernet => 1,
            Framing::Cooked => 12,
        }
    }
}

/// A network interface to capture on (`any`: all of them).
#[derive(Debug, Clone)]
pub struct Interface {
    pub name: String,
    /// Kernel ifindex; 0 for `any`.
    pub index: u32,
    /// ARPHRD_* hardware type (0 for `any`).
    pub hw_type: u16,
    pub framing: Framing,
}

impl Interface {
    /// Looks an interface up by name in the current network namespace.
    pub fn lookup(name: &str) -> Result<Interface, CaptureError> {
        if name == "any" {
            return Ok(Interface { name: name.into(), index: 0, hw_type: 0, framing: Framing::Cooked });
        }
        let no_such = || CaptureError::new(ErrorKind::NoSuchInterface, format!("interface {name}: no such interface"));
        let cname = CString::new(name).map_err(|_| no_such())?;
        if name.len() >= libc::IFNAMSIZ {
            return Err(no_such());
        }
        // SAFETY: a valid NUL-terminated string.
        let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if index == 0 {
            return Err(no_such());
        }
        let hw_type = hw_type_of(name)?;
        let framing = match hw_type {
            sys::ARPHRD_ETHER | sys::ARPHRD_LOOPBACK => Framing::Ethernet,
            _ => Framing::Cooked,
        };
        Ok(Interface { name: name.into(), index, hw_type, framing })
    }

    pub fn is_loopback(&self) -> bool {
        self.hw_type == sys::ARPHRD_LOOPBACK
    }
}

/// The ARPHRD type of an interface, from SIOCGIFHWADDR (works in any network
/// namespace, unlike /sys which shows the namespace it was mounted in).
fn hw_type_of(name: &str) -> Result<u16, CaptureError> {
    // struct ifreq: 16 bytes of name, then a union whose sockaddr starts with sa_family.
    let mut ifr = [0u8; 40];
    ifr[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: plain syscalls on a buffer the size of struct ifreq.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(CaptureError::last_os(ErrorKind::Io, "socket(AF_INET)"));
        }
        let r = libc::ioctl(fd, libc::SIOCGIFHWADDR as _, ifr.as_mut_ptr());
        let err = io::Error::last_os_error();
        libc::close(fd);
        if r < 0 {
            return Err(CaptureError::os(ErrorKind::NoSuchInterface, format!("interface {name}"), err));
        }
    }
    Ok(u16::from_ne_bytes([ifr[16], ifr[17]]))
}

/// True when an interface with this kernel index exists.
pub fn interface_exists(index: u32) -> bool {
    let mut buf = [0 as libc::c_char; libc::IFNAMSIZ];
    // SAFETY: the buffer is IFNAMSIZ long, as if_indextoname requires.
    !unsafe { libc::if_indextoname(index, buf.as_mut_ptr()) }.is_null()
}

/// Name of an interface by kernel index (for `any`), or `if<N>` when it is gone.
pub fn interface_name(index: u32) -> String {
    let mut buf = [0 as libc::c_char; libc::IFNAMSIZ];
    // SAFETY: the buffer is IFNAMSIZ long, as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(index, buf.as_mut_ptr()) };
    if p.is_null() {
        return format!("if{index}");
    }
    // SAFETY: if_indextoname wrote a NUL-terminated name.
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
}

/// Wall-clock time in nanoseconds since the Unix epoch (the clock packet
/// timestamps use).
pub fn now_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_interface_is_a_clear_error() {
        let e = Interface::lookup("nosuchif0").unwrap_err();
        assert_eq!(e.kind, ErrorKind::NoSuchInterface);
        assert!(e.message.contains("nosuchif0"), "{e}");
        assert!(Interface::lookup("x".repeat(40).as_str()).is_err());
    }

    #[test]
    fn loopback_is_ethernet_framed() {
        let lo = Interface::lookup("lo").unwrap();
        assert!(lo.is_loopback());
        assert_eq!(lo.framing, Framing::Ethernet);
        assert_eq!(interface_name(lo.index), "lo");
        assert_eq!(Interface::lookup("any").unwrap().framing, Framing::Cooked);
    }
}
