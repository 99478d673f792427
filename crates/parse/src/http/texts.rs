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
    fn empty_and_long_texts() {
        assert_eq!(&*shared(""), "");
        let long = "x".repeat(MAX_LEN + 1);
        let a = shared(&long);
        let b = shared(&long);
        assert_eq!(&*a, long.as_str());
        assert!(!Arc::ptr_eq(&a, &b));
    }
}
