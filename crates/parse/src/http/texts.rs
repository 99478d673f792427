//! Header values shared between transactions: the host, user agent, content
//! types, method, version, status message and most paths of a server repeat
//! on every request, so each distinct text is allocated once and every
//! transaction that carries it holds the same `Arc<str>`.
//!
//! The cache is per thread (a thread parses many short connections, so a
//! per-connection set would allocate again for each new one) and
//! direct-mapped: a slot holds the last text that hashed to it, so memory is
//! bounded (`SLOTS` texts of at most `MAX_LEN` bytes) and a text that does
//! not repeat costs one allocation, as it would without the cache.

use std::cell::RefCell;
use std::sync::Arc;

/// Number of slots (a power of two).
const SLOTS: usize = 1024;
/// Longer texts are not kept: they rarely repeat and would hold memory.
const MAX_LEN: usize = 256;

thread_local! {
    static TEXTS: RefCell<Vec<Option<Arc<str>>>> = const { RefCell::new(Vec::new()) };
}

/// `text` as a shared string: the cached one when the same text was seen
/// recently on this thread, else a new one (cached when short).
pub(crate) fn shared(text: &str) -> Arc<str> {
    if text.is_empty() {
        // Arc<str>'s default points at a static: no allocation.
        return Arc::default();
    }
    if text.len() > MAX_LEN {
        return Arc::from(text);
    }
    let slot = (hash(text.as_bytes()) >> (64 - SLOTS.trailing_zeros())) as usize;
    TEXTS.with(|cell| {
        let mut slots = cell.borrow_mut();
        if slots.is_empty() {
            slots.resize(SLOTS, None);
        }
        match &mut slots[slot] {
            Some(kept) if **kept == *text => kept.clone(),
            entry => {
                let fresh: Arc<str> = Arc::from(text);
                *entry = Some(fresh.clone());
                fresh
            }
        }
    })
}

/// The texts nearly every message carries: request methods, protocol
/// versions (as `HttpTx::version` holds them, without `HTTP/`) and the
/// commonest status reasons. Their index is `common_index`'s.
const COMMON: [&str; 23] = [
    "GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "1.1", "1.0", "OK", "Not Found",
    "Not Modified", "Found", "Moved Permanently", "No Content", "Partial Content", "Bad Request", "Forbidden",
    "Unauthorized", "Created", "See Other", "Internal Server Error",
];

thread_local! {
    static COMMON_TEXTS: [Arc<str>; COMMON.len()] = COMMON.map(Arc::from);
}

/// Where `text` is in [`COMMON`]: a `match` on the bytes (lengths first),
/// no hash.
#[inline]
fn common_index(text: &[u8]) -> Option<usize> {
    Some(match text {
        b"GET" => 0,
        b"POST" => 1,
        b"HEAD" => 2,
        b"PUT" => 3,
        b"DELETE" => 4,
        b"OPTIONS" => 5,
        b"PATCH" => 6,
        b"CONNECT" => 7,
        b"1.1" => 8,
        b"1.0" => 9,
        b"OK" => 10,
        b"Not Found" => 11,
        b"Not Modified" => 12,
        b"Found" => 13,
        b"Moved Permanently" => 14,
        b"No Content" => 15,
        b"Partial Content" => 16,
        b"Bad Request" => 17,
        b"Forbidden" => 18,
        b"Unauthorized" => 19,
        b"Created" => 20,
        b"See Other" => 21,
        b"Internal Server Error" => 22,
        _ => return None,
    })
}

/// `text` as a shared string when it is one of the [`COMMON`] texts, each
/// allocated once per thread: the method, version and reason of most
/// messages cost no UTF-8 check, hash or cache lookup ([`shared`]'s ~200
/// instructions a text with the lossy conversion before it).
#[inline]
pub(crate) fn common(text: &[u8]) -> Option<Arc<str>> {
    let i = common_index(text)?;
    Some(COMMON_TEXTS.with(|texts| texts[i].clone()))
}

/// Multiplicative hash, eight bytes at a time (texts are short; the top bits
/// pick the slot).
#[inline]
fn hash(b: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = b.len() as u64;
    let mut words = b.chunks_exact(8);
    for w in &mut words {
        let mut x = [0u8; 8];
        x.copy_from_slice(w);
        h = (h.rotate_left(23) ^ u64::from_le_bytes(x)).wrapping_mul(K);
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut x = [0u8; 8];
        x[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(23) ^ u64::from_le_bytes(x)).wrapping_mul(K);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_text_is_one_allocation() {
        let a = shared("text/html");
        let b = shared("text/html");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(&*a, "text/html");
    }

    #[test]
    fn colliding_texts_stay_distinct() {
        // Whatever slots they land in, each call returns its own text.
        let names: Vec<String> = (0..5000).map(|i| format!("/page/{i}")).collect();
        for n in &names {
            assert_eq!(&*shared(n), n.as_str());
        }
        for n in names.iter().rev() {
            assert_eq!(&*shared(n), n.as_str());
        }
    }

    #[test]
    fn common_texts_are_themselves_and_shared() {
        for (i, text) in COMMON.iter().enumerate() {
            assert_eq!(common_index(text.as_bytes()), Some(i), "{text}");
            let (a, b) = (common(text.as_bytes()).unwrap(), common(text.as_bytes()).unwrap());
            assert_eq!(&*a, *text);
            assert!(Arc::ptr_eq(&a, &b));
        }
        // Other case, a prefix, a longer text, none: not common.
        for other in [&b"get"[..], b"GE", b"GETS", b"ok", b"HTTP/1.1", b"1.1 ", b""] {
            assert!(common(other).is_none(), "{:?}", String::from_utf8_lossy(other));
        }
    }

    #[test]
    fn empty_and_long_texts() {
        assert_eq!(&*shared(""), "");
        let long = "x".repeat(MAX_LEN + 1);
        let a = shared(&long);
        let b = shared(&long);
        assert_eq!(&*a, long.as_str());
        assert!(!Arc::ptr_eq(&a, &b));
    }
}
