//! Test-only helpers of the socket tests in this crate (`ring`, `bpf`,
//! `sockprog`): loopback brought up in the test thread's own network
//! namespace, and the packet-socket address of that loopback.

/// Sets `lo` up in the calling thread's network namespace.
pub fn lo_up() {
    let mut ifr = [0u8; 40];
    ifr[..2].copy_from_slice(b"lo");
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS on a struct ifreq buffer.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        assert!(fd >= 0);
        assert_eq!(libc::ioctl(fd, libc::SIOCGIFFLAGS as _, ifr.as_mut_ptr()), 0);
        let flags = i16::from_ne_bytes([ifr[16], ifr[17]]) | libc::IFF_UP as i16;
        ifr[16..18].copy_from_slice(&flags.to_ne_bytes());
        assert_eq!(libc::ioctl(fd, libc::SIOCSIFFLAGS as _, ifr.as_mut_ptr()), 0);
        libc::close(fd);
    }
}

/// Moves the calling thread into a new network namespace with `lo` up,
/// or returns false when that is not allowed (not root).
pub fn private_netns() -> bool {
    // SAFETY: unshare affects only the calling thread (the test's own).
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return false;
    }
    lo_up();
    true
}

/// The packet-socket address of loopback (interface 1 in a fresh
/// namespace), every protocol: for bind and sendto.
pub fn loopback_addr() -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is plain data.
    let mut a: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    a.sll_family = libc::AF_PACKET as u16;
    a.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    a.sll_ifindex = 1;
    a.sll_halen = 6;
    a
}
