//! The BPF ring buffer (`BPF_MAP_TYPE_RINGBUF`) read from user space: the
//! map's pages mapped into this process (the consumer position, read and
//! written here; the producer position and the data, read only), records
//! taken in the order the programs committed them.
//!
//! The layout is the kernel's (`kernel/bpf/ringbuf.c`, and the header
//! `struct bpf_ringbuf_hdr` in `include/uapi/linux/bpf.h` and
//! `kernel/bpf/ringbuf.c`): page 0 is the consumer position, page 1 the
//! producer position, then the data pages, mapped twice in a row so that a
//! record that wraps reads as one slice. Each record starts with an 8-byte
//! header: its length with two flag bits (busy: still being written;
//! discarded) and the page offset the kernel uses; records are 8-byte
//! aligned.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::sys::{Map, MapType};
use crate::Error;

const BUSY: u32 = 1 << 31;
const DISCARD: u32 = 1 << 30;
const HDR: usize = 8;

/// A ring buffer map and its pages mapped for reading.
pub struct RingBuf {
    map: Map,
    page: usize,
    /// The data size (a power of two, the map's max_entries).
    size: usize,
    consumer: *mut u8,
    /// The producer page followed by the data, twice.
    producer: *mut u8,
}

// SAFETY: the mappings belong to this value alone; the kernel side is
// synchronised through the atomic positions.
unsafe impl Send for RingBuf {}

impl RingBuf {
    /// A ring of `size` bytes: a power of two and a multiple of the page
    /// size (the kernel refuses others; the error says so).
    pub fn create(name: &str, size: usize) -> Result<RingBuf, Error> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        if !size.is_power_of_two() || !size.is_multiple_of(page) {
            return Err(Error::other(format!(
                "ring buffer {name}: {size} bytes is not a power of two multiple of the page size ({page})"
            )));
        }
        let map = Map::create(MapType::RingBuf, name, 0, 0, size as u32)?;
        let fd = map.fd();
        // SAFETY: mmap of the map's consumer page, read-write as the kernel allows.
        let consumer = unsafe {
            libc::mmap(std::ptr::null_mut(), page, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if consumer == libc::MAP_FAILED {
            return Err(Error::sys(format!("mapping ring buffer {name}'s consumer page"), io::Error::last_os_error()));
        }
        // SAFETY: mmap of the producer page and the data twice, read only, at
        // the offset the kernel expects.
        let producer = unsafe {
            libc::mmap(std::ptr::null_mut(), page + 2 * size, libc::PROT_READ, libc::MAP_SHARED, fd, page as libc::off_t)
        };
        if producer == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            // SAFETY: unmapping what was mapped just above.
            unsafe { libc::munmap(consumer, page) };
            return Err(Error::sys(format!("mapping ring buffer {name}'s data"), e));
        }
        Ok(RingBuf { map, page, size, consumer: consumer as *mut u8, producer: producer as *mut u8 })
    }

    /// The map, for programs to write to.
    pub fn map(&self) -> &Map {
        &self.map
    }

    pub fn size(&self) -> usize {
        self.size
    }

    fn consumer_pos(&self) -> &AtomicU64 {
        // SAFETY: the consumer page starts with the 8-byte aligned position.
        unsafe { &*(self.consumer as *const AtomicU64) }
    }

    fn producer_pos(&self) -> &AtomicU64 {
        // SAFETY: the producer page starts with the 8-byte aligned position.
        unsafe { &*(self.producer as *const AtomicU64) }
    }

    /// Waits up to `timeout_ms` for data (poll on the map); true when some
    /// is there (or may be: an interrupted wait says true).
    pub fn wait(&self, timeout_ms: i32) -> bool {
        if self.pending() {
            return true;
        }
        let mut p = libc::pollfd { fd: self.map.fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: poll on one pollfd we own.
        let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        r != 0
    }

    /// Records committed and not yet read.
    pub fn pending(&self) -> bool {
        self.consumer_pos().load(Ordering::Acquire) < self.producer_pos().load(Ordering::Acquire)
    }

    /// Hands each committed record to `f` in order, at most `max` of them;
    /// returns how many were read. A record still being written stops the
    /// walk (it is read next time); discarded ones are passed over.
    pub fn read(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let mut cons = self.consumer_pos().load(Ordering::Acquire);
        let mut n = 0;
        while n < max {
            let prod = self.producer_pos().load(Ordering::Acquire);
            if cons >= prod {
                break;
            }
            let at = (cons as usize) & (self.size - 1);
            // SAFETY: the data starts one page after the producer page; `at`
            // is within the first copy, and the header is 8-byte aligned.
            let hdr = unsafe { &*(self.producer.add(self.page + at) as *const AtomicU32) };
            let len = hdr.load(Ordering::Acquire);
            if len & BUSY != 0 {
                break;
            }
            let body = (len & !(BUSY | DISCARD)) as usize;
            if len & DISCARD == 0 {
                // SAFETY: a committed record of `body` bytes after its header;
                // the second copy of the data makes a wrapped one contiguous.
                let rec = unsafe { std::slice::from_raw_parts(self.producer.add(self.page + at + HDR), body) };
                f(rec);
                n += 1;
            }
            cons += ((body + HDR + 7) & !7) as u64;
            // The kernel may reuse the space once the position passes it.
            self.consumer_pos().store(cons, Ordering::Release);
        }
        n
    }
}

impl Drop for RingBuf {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `create` mapped.
        unsafe {
            libc::munmap(self.consumer as *mut libc::c_void, self.page);
            libc::munmap(self.producer as *mut libc::c_void, self.page + 2 * self.size);
        }
    }
}

impl AsRawFd for RingBuf {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.map.fd()
    }
}
