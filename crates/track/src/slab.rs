//! A slab: values addressed by a u32 index, freed indexes reused.
//!
//! The TCP endpoint state lives here rather than in the connection entry, so
//! UDP and ICMP connections (most of a DNS-heavy table) do not carry its 64
//! bytes; a TCP entry holds the 4-byte index instead. The parsers' states
//! too: an entry holds a 4-byte index where a box pointer took 8.

use crate::table::advise_huge_pages;

pub struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Slab<T> {
    /// Room reserved for `capacity` values (address space only: pages are
    /// resident once written, as the connection table's entries).
    pub fn with_capacity(capacity: usize) -> Self {
        let mut items = Vec::with_capacity(capacity.min(1 << 20));
        advise_huge_pages(&mut items);
        Slab { items, free: Vec::new() }
    }

    /// The same without the huge-page advice: for a slab most runs never
    /// write (the parsers' states, with parsing off), or write a few
    /// slots of, where a 2 MiB page would be resident for them.
    pub fn with_capacity_small_pages(capacity: usize) -> Self {
        Slab { items: Vec::with_capacity(capacity.min(1 << 20)), free: Vec::new() }
    }

    pub fn insert(&mut self, v: T) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.items[i as usize] = Some(v);
                i
            }
            None => {
                self.items.push(Some(v));
                (self.items.len() - 1) as u32
            }
        }
    }

    #[inline]
    pub fn get(&self, i: u32) -> Option<&T> {
        self.items.get(i as usize).and_then(Option::as_ref)
    }

    #[inline]
    pub fn get_mut(&mut self, i: u32) -> Option<&mut T> {
        self.items.get_mut(i as usize).and_then(Option::as_mut)
    }

    /// Values held.
    pub fn len(&self) -> usize {
        self.items.len() - self.free.len()
    }

    /// Frees index `i` (dropping its value and whatever it owns).
    pub fn remove(&mut self, i: u32) {
        drop(self.take(i));
    }

    /// Frees index `i` and returns its value.
    pub fn take(&mut self, i: u32) -> Option<T> {
        let v = self.items.get_mut(i as usize)?.take();
        if v.is_some() {
            self.free.push(i);
        }
        v
    }

    /// Bytes a value takes at most: its slot and its free-list entry.
    pub const fn bytes_per_value() -> usize {
        std::mem::size_of::<Option<T>>() + std::mem::size_of::<u32>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_indexes_are_reused_and_values_dropped() {
        let mut s: Slab<Box<u32>> = Slab::with_capacity(4);
        let a = s.insert(Box::new(1));
        let b = s.insert(Box::new(2));
        s.remove(a);
        s.remove(a); // twice: freed once
        assert!(s.get(a).is_none());
        let c = s.insert(Box::new(3));
        assert_eq!(c, a);
        assert_eq!(**s.get(b).unwrap(), 2);
        *s.get_mut(c).unwrap().as_mut() += 10;
        assert_eq!(**s.get(c).unwrap(), 13);
        assert_eq!(s.insert(Box::new(4)), 2);
        assert_eq!(s.len(), 3);
    }
}
