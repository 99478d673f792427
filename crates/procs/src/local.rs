//! The addresses of the network namespace we run in: only ends with one of
//! them can have a socket here to ask about.

use crate::v4_mapped;

/// Addresses of every interface (IPv4 v4-mapped), from getifaddrs(3).
pub fn addresses() -> Vec<[u8; 16]> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list we walk read-only and free once.
    unsafe {
        if libc::getifaddrs(&mut head) != 0 {
            return out;
        }
        let mut p = head;
        while !p.is_null() {
            let a = (*p).ifa_addr;
            if !a.is_null() {
                match (*a).sa_family as i32 {
                    libc::AF_INET => {
                        let sin = &*(a as *const libc::sockaddr_in);
                        out.push(v4_mapped(sin.sin_addr.s_addr.to_ne_bytes()));
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(a as *const libc::sockaddr_in6);
                        out.push(sin6.sin6_addr.s6_addr);
                    }
                    _ => {}
                }
            }
            p = (*p).ifa_next;
        }
        libc::freeifaddrs(head);
    }
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_is_local() {
        let a = super::addresses();
        assert!(a.contains(&crate::v4_mapped([127, 0, 0, 1])), "{a:?}");
    }
}
