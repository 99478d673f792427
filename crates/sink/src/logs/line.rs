//! A log line written straight into the room at the end of the log's
//! buffer ([`Room`]): every value is composed in place at a cursor (digits
//! from a table of pairs, seconds.micros from integers, text escaped 16
//! bytes at a time as it is copied), with one test of the room left per value and
//! no `Vec` length kept up to date per byte. The transaction logs write
//! their lines through it (`tx`).
//!
//! Room: a line declares, before it starts, the most bytes its values
//! write as fixed-size blocks between two checked writes (its *budget*: so
//! many values, each at most [`VALUE_MOST`] bytes of blocks). The room is
//! tested once for the budget when the line starts; a fixed-size block
//! ([`Room::put`]) is then stored without a test. A write whose size
//! depends on the data (escaped text, a long slice, a list's item) tests
//! the room once for its own worst case plus the budget ([`Room::ensure`]),
//! so that the blocks after it fit too. A checked write that does not fit
//! is not written: the line is short, every later checked write is refused
//! as well, and [`Room::short`] says how much room writing the line again
//! needs at most; the line is then written a second time with that much.
//!
//! A block is stored without a branch: at the cursor, or, past the room's
//! last place for a block ([`Room::put`]: a writer that broke its budget),
//! at that last place, where it cannot pass the buffer's end; the line is
//! then short as well (the cursor, which only grows, ends past that place)
//! and is written again. No test of a block jumps to code out of line.
//! (The cursor is still loaded and stored around most blocks: the room is
//! behind a reference, and the compiler cannot tell a store through the
//! buffer's address, itself loaded from the room, from the room's fields.)

use std::mem::MaybeUninit;

use wirelog_record::IpAddr16;

use crate::logs::tx::{json_escapes_any, tail_word, tsv_escapes_any};

/// The spare capacity of a line buffer and a cursor into it.
pub(crate) struct Room<'a> {
    b: &'a mut [MaybeUninit<u8>],
    /// Bytes written (or, past `last`, counted: see [`Room::put`]).
    p: usize,
    /// The furthest a block is stored at: `b.len() - BLOCK_MOST`, so that
    /// no block passes the buffer's end. A cursor past it at the line's
    /// end makes the line short.
    last: usize,
    /// The furthest a checked write may end: `b.len()` less the budget, so
    /// that the blocks after it still fit; 0 once the line is short.
    lim: usize,
    /// The line's budget of fixed-size blocks.
    budget: usize,
    /// Once short: the most the checked writes refused would have taken.
    extra: usize,
    short: bool,
    /// Tests only: block bytes stored since the last passed check, held
    /// against the budget (a line that writes more than it declared fails
    /// its tests instead of being written again), unless `lax` (the test of
    /// a writer breaking its budget).
    #[cfg(test)]
    used: usize,
    #[cfg(test)]
    lax: bool,
}

/// The largest fixed-size block [`Room::put`] stores (checked at compile
/// time).
pub(crate) const BLOCK_MOST: usize = 64;

/// The longest text [`Room::clean_blocks`] stores as blocks: its lead
/// byte and five blocks of 16 bytes are within [`VALUE_MOST`].
const CLEAN_MOST: usize = 64;

/// The most bytes of fixed-size blocks one value of a line stores outside
/// its checked writes: its separator or key, an opening quote, the value's
/// block(s), a closing quote (at most four blocks of at most
/// [`BLOCK_MOST`] bytes). A line's budget is its number of values times
/// this.
pub(crate) const VALUE_MOST: usize = 4 * BLOCK_MOST;

/// "00" to "99".
const PAIRS: [[u8; 2]; 100] = {
    let mut t = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    t
};

/// How many decimal digits `v` has (1 for 0), without a division.
#[inline(always)]
fn decimal_len(v: u64) -> usize {
    let w = v | 1;
    let t = (((64 - w.leading_zeros()) * 1233) >> 12) as usize;
    t + 1 - usize::from(w < super::zeek::POW10[t & 15 | t & 16])
}

/// `v` < 10,000 as four digits (leading zeros included), little-endian:
/// the first digit in the lowest byte.
#[inline(always)]
fn four_digits(v: u32) -> u32 {
    let hi = PAIRS[(v / 100) as usize % 100];
    let lo = PAIRS[(v % 100) as usize];
    u32::from_le_bytes([hi[0], hi[1], lo[0], lo[1]])
}

// The rare values are composed out of line into a returned block, not
// written through the Room: a Room passed to a call is kept in memory, and
// then every write through it reloads its cursor.

/// The digits of `v` >= 100,000,000, left-aligned, and how many.
#[inline(never)]
fn long_digits(v: u64) -> ([u8; 24], usize) {
    let mut d = [0u8; 24];
    let top = v / 100_000_000;
    let n = if top < 100_000_000 {
        let n = decimal_len(top);
        d[..8].copy_from_slice(&(eight_digits(top as u32) >> (8 * (8 - n))).to_le_bytes());
        n
    } else {
        // Above 10^16: at most 20 digits, the first four of them here.
        let n = decimal_len(top / 100_000_000);
        d[..4].copy_from_slice(&(four_digits((top / 100_000_000) as u32) >> (8 * (4 - n))).to_le_bytes());
        d[n..n + 8].copy_from_slice(&eight_digits((top % 100_000_000) as u32).to_le_bytes());
        n + 8
    };
    d[n..n + 8].copy_from_slice(&eight_digits((v % 100_000_000) as u32).to_le_bytes());
    (d, n + 8)
}

/// A negative time or interval as `zeek::write_secs` writes it.
#[cold]
#[inline(never)]
fn negative_secs(ns: i64) -> ([u8; 32], usize) {
    let mut v = Vec::with_capacity(32);
    crate::logs::zeek::write_secs(&mut v, ns);
    let mut d = [0u8; 32];
    let n = v.len().min(32);
    d[..n].copy_from_slice(&v[..n]);
    (d, n)
}

/// An IPv6 address as `zeek::write_addr` writes it (at most 45 bytes).
#[cold]
#[inline(never)]
fn v6_text(a: &IpAddr16) -> ([u8; 48], usize) {
    IpAddr16::v6_text(a.0)
}

/// ".ffffff" (a point, then six decimals of `frac` < 1,000,000) as the low
/// seven bytes of a word.
#[inline(always)]
fn frac_word(frac: u32) -> u64 {
    u64::from(four_digits(frac / 100)) << 8 | u64::from(u16::from_le_bytes(PAIRS[(frac % 100) as usize])) << 40 | u64::from(b'.')
}

/// `v` < 100,000,000 as eight digits (leading zeros included),
/// little-endian.
#[inline(always)]
fn eight_digits(v: u32) -> u64 {
    u64::from(four_digits(v / 10_000)) | u64::from(four_digits(v % 10_000)) << 32
}

/// What a log writer keeps between its lines: consecutive lines mostly
/// share the second of their time and the addresses of their connection,
/// so the text of the last ones is kept and copied instead of composed
/// again ([`Room::time`], [`Room::addr_kept`]).
pub(crate) struct Kept {
    /// The whole seconds of the last time written (`u64::MAX`: none yet),
    /// as digits, and how many.
    second: u64,
    second_text: [u8; 24],
    second_len: usize,
    /// The last IPv4 addresses written (one per end of a connection) and
    /// their text (0.0.0.0 until one is).
    addrs: [(IpAddr16, [u8; 16], usize); 2],
}

impl Default for Kept {
    fn default() -> Self {
        let zero = (IpAddr16::from_v4([0; 4]), IpAddr16::v4_text([0; 4]));
        let (a, (t, n)) = zero;
        Kept { second: u64::MAX, second_text: [0; 24], second_len: 0, addrs: [(a, t, n); 2] }
    }
}

impl Kept {
    /// `whole`'s digits, kept.
    #[inline(never)]
    fn new_second(&mut self, whole: u64) {
        let (d, n) = digits(whole);
        self.second = whole;
        self.second_text = d;
        self.second_len = n;
    }
}

/// The decimal digits of `v`, left-aligned, and how many.
fn digits(v: u64) -> ([u8; 24], usize) {
    if v >= 100_000_000 {
        return long_digits(v);
    }
    let n = decimal_len(v);
    let mut d = [0u8; 24];
    d[..8].copy_from_slice(&(eight_digits(v as u32) >> (8 * (8 - n))).to_le_bytes());
    (d, n)
}

/// How a text value is escaped.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Esc {
    /// The transaction logs' TSV text: UTF-8 passes, control bytes, DEL
    /// and `\` as `\xNN` (`tx::tsv_text`).
    Tsv,
    /// Zeek's ASCII writer: `\` doubled, every byte outside printable
    /// ASCII as `\xNN` (`tx::zeek_text`).
    Zeek,
}

/// Writes a line (or any values) with `f` at the end of `v`, in its spare
/// capacity, `f` storing at most `budget` bytes of fixed-size blocks
/// between its checked writes (see the module's notes); when that is too
/// short, `v` grows by what `f` asked for and `f` writes again (once: the
/// second time it has its room). False if it still did not fit (not
/// reached).
#[inline(always)]
pub(crate) fn append(v: &mut Vec<u8>, budget: usize, mut f: impl FnMut(&mut Room<'_>)) -> bool {
    let mut want = budget;
    for _ in 0..2 {
        if v.capacity() - v.len() < want {
            v.reserve(want);
        }
        let Some(mut room) = Room::new(v.spare_capacity_mut(), budget) else { return false };
        f(&mut room);
        match room.short() {
            None => {
                let n = room.len();
                // SAFETY: a Room's cursor moves only over bytes it wrote
                // until it is short (a checked write that did not fit, or a
                // block stored at the last place instead of the cursor, made
                // it short), and it is not: the first `n` bytes of the spare
                // capacity are initialized.
                unsafe { v.set_len(v.len() + n) };
                return true;
            }
            Some(need) => want = need,
        }
    }
    false
}

impl<'a> Room<'a> {
    /// A room in `b` for a line of `budget` bytes of blocks; `None` if `b`
    /// has less than that, or less than a block.
    fn new(b: &'a mut [MaybeUninit<u8>], budget: usize) -> Option<Self> {
        let lim = b.len().checked_sub(budget)?;
        let last = b.len().checked_sub(BLOCK_MOST)?;
        Some(Room {
            b,
            p: 0,
            last,
            lim,
            budget,
            extra: 0,
            short: false,
            #[cfg(test)]
            used: 0,
            #[cfg(test)]
            lax: false,
        })
    }

    /// Bytes written.
    pub(crate) fn len(&self) -> usize {
        self.p
    }

    /// The bytes written since `start` (a [`Room::len`] taken before), if
    /// none of the writes since then was refused.
    pub(crate) fn written_since(&self, start: usize) -> Option<&[u8]> {
        if self.short || self.p > self.last {
            return None;
        }
        let part = self.b.get(start..self.p)?;
        // SAFETY: the cursor moves only over bytes the room wrote (see
        // `append`), so `..p` is initialized; `MaybeUninit<u8>` has the
        // layout of `u8`.
        Some(unsafe { &*(part as *const [MaybeUninit<u8>] as *const [u8]) })
    }

    /// `None` when every value fitted (`len()` bytes were written), else
    /// the room writing the same values again needs at most (the blocks'
    /// budget included).
    pub(crate) fn short(&self) -> Option<usize> {
        // A cursor past `last`: some block may have been stored at `last`
        // instead of at the cursor (one block more of room keeps the
        // cursor of the same line within `last` the second time).
        (self.short || self.p > self.last)
            .then(|| self.p.saturating_add(self.extra).saturating_add(self.budget).saturating_add(BLOCK_MOST))
    }

    /// The one test of a write whose size depends on the data: true if `n`
    /// bytes fit at the cursor with the line's budget of blocks after them.
    /// If not, the line is short: the write is to be left out, and every
    /// later checked write is refused too.
    #[inline(always)]
    pub(crate) fn ensure(&mut self, n: usize) -> bool {
        match self.p.checked_add(n) {
            Some(end) if end <= self.lim => {
                #[cfg(test)]
                {
                    self.used = 0;
                }
                true
            }
            _ => {
                self.short_by(n);
                false
            }
        }
    }

    /// The next `n` bytes of room, tested ([`Room::ensure`]), or `None`.
    #[inline(always)]
    fn at(&mut self, n: usize) -> Option<&mut [MaybeUninit<u8>]> {
        if !self.ensure(n) {
            return None;
        }
        let p = self.p;
        self.b.get_mut(p..p + n)
    }

    /// Inlined, not a call (the branch is marked cold instead): a call that
    /// is given the room could change any of its fields as far as the
    /// compiler knows, which are then loaded again after it.
    #[inline(always)]
    fn short_by(&mut self, n: usize) {
        std::hint::cold_path();
        self.short = true;
        self.lim = 0;
        self.extra = self.extra.saturating_add(n);
    }

    /// Writes the `N` bytes of `x` (one fixed-size move within the line's
    /// budget, so no room check of its own), keeps the first `n` of them.
    #[inline(always)]
    pub(crate) fn put<const N: usize>(&mut self, x: [u8; N], n: usize) {
        const { assert!(N <= BLOCK_MOST, "a block larger than BLOCK_MOST") };
        debug_assert!(n <= N);
        #[cfg(test)]
        if !self.lax {
            self.used += N;
            assert!(self.used <= self.budget, "a line stored more blocks than its budget");
            assert!(self.p <= self.last);
        }
        // The line's budget keeps the cursor within `last` (when the line
        // started, `b` had at least `budget` bytes past every passed check,
        // and the blocks stored between two checks total at most the
        // budget: each value at most VALUE_MOST, as the writers of `tx` and
        // `zeek` are built; the tests hold every line to it, `used` above).
        // A writer that ever broke it stores its block at `last` instead,
        // over bytes of the line, which is then short (the cursor ends past
        // `last`: see `short`) and written again with more room; never past
        // the buffer. A minimum, not a branch: see the module's notes.
        let at = self.p.min(self.last);
        // SAFETY: `at <= last = b.len() - BLOCK_MOST` and `N <= BLOCK_MOST`
        // (checked at compile time above), so `at + N <= b.len()`; `b` is
        // `MaybeUninit` (any bytes may be stored), and the unaligned store
        // needs no alignment.
        unsafe { self.b.as_mut_ptr().add(at).cast::<[u8; N]>().write_unaligned(x) };
        self.p += n;
    }

    #[inline(always)]
    pub(crate) fn byte(&mut self, c: u8) {
        self.put([c], 1);
    }

    /// Before a value: its JSON key (the quote, comma and colon around it
    /// included, as the caller writes them) or, in TSV, a tab.
    #[inline(always)]
    pub(crate) fn sep<const JSON: bool>(&mut self, json_key: &[u8]) {
        if JSON {
            self.lit(json_key);
        } else {
            self.byte(b'\t');
        }
    }

    /// The line's end: the JSON object's brace and a newline, or a newline.
    #[inline(always)]
    pub(crate) fn end_line<const JSON: bool>(&mut self) {
        if JSON {
            self.put(*b"}\n", 2);
        } else {
            self.byte(b'\n');
        }
    }

    /// A slice of any length (copied by `memcpy`).
    #[inline(always)]
    pub(crate) fn slice(&mut self, s: &[u8]) {
        if let Some(d) = self.at(s.len()) {
            copy(d, s);
            self.p += s.len();
        }
    }

    /// Text that needs no escaping (names, letters, base64): up to 16
    /// bytes as one block composed from overlapping loads (no copy call),
    /// longer text copied.
    #[inline(always)]
    pub(crate) fn ascii(&mut self, s: &[u8]) {
        match s.len() {
            0 => {}
            n @ 1..=15 => self.put(tail16(s), n),
            _ => match <[u8; 16]>::try_from(s) {
                Ok(b) => self.put(b, 16),
                Err(_) => self.slice(s),
            },
        }
    }

    /// Short constant text: copied as one fixed-size block when it fits
    /// one.
    #[inline(always)]
    pub(crate) fn lit(&mut self, s: &[u8]) {
        if s.len() <= 16 {
            let mut x = [0u8; 16];
            x[..s.len()].copy_from_slice(s);
            self.put(x, s.len());
        } else {
            self.slice(s);
        }
    }

    /// The decimal digits of `v`.
    #[inline(always)]
    pub(crate) fn u64(&mut self, v: u64) {
        if v < 100 {
            // One or two digits (most counts: packets, rows, fields, a
            // statement's bytes): their pair, the leading zero shifted out.
            let (w, n) = one_or_two_digits(v);
            self.put(w.to_le_bytes(), n);
        } else if v < 10_000 {
            // Three or four digits: four composed, the leading zero shifted
            // out, one store.
            let n = 3 + usize::from(v >= 1000);
            let w = four_digits(v as u32) >> (8 * (4 - n));
            self.put(w.to_le_bytes(), n);
        } else if v < 100_000_000 {
            // Up to eight digits composed as one word.
            let n = decimal_len(v);
            let w = eight_digits(v as u32) >> (8 * (8 - n));
            self.put(w.to_le_bytes(), n);
        } else if v < 10_000_000_000_000_000 {
            // Up to sixteen: the digits before the last eight, then those.
            let top = v / 100_000_000;
            let n = decimal_len(top);
            let w = eight_digits(top as u32) >> (8 * (8 - n));
            let low = eight_digits((v % 100_000_000) as u32);
            self.put((u128::from(w) | u128::from(low) << (8 * n)).to_le_bytes(), n + 8);
        } else {
            let (d, n) = long_digits(v);
            self.put(d, n);
        }
    }

    /// A tab and the decimal digits of `v`: one block when `v` has at most
    /// eight digits (a TSV line's count, its separator stored with it).
    #[inline(always)]
    pub(crate) fn tab_u64(&mut self, v: u64) {
        if v < 100 {
            let (w, n) = one_or_two_digits(v);
            self.put((u32::from(w) << 8 | u32::from(b'\t')).to_le_bytes(), n + 1);
        } else if v < 10_000 {
            let n = 3 + usize::from(v >= 1000);
            let w = four_digits(v as u32) >> (8 * (4 - n));
            self.put((u64::from(w) << 8 | u64::from(b'\t')).to_le_bytes(), n + 1);
        } else if v < 100_000_000 {
            let n = decimal_len(v);
            let w = eight_digits(v as u32) >> (8 * (8 - n));
            self.put((u128::from(w) << 8 | u128::from(b'\t')).to_le_bytes(), n + 1);
        } else {
            self.byte(b'\t');
            self.u64(v);
        }
    }

    /// A tab and seconds as [`Room::secs`] writes them: one block for an
    /// interval under a second (most latencies), "\t0.ffffff".
    #[inline(always)]
    pub(crate) fn tab_secs(&mut self, ns: i64) {
        if let Some(block) = tab_secs_block(ns) {
            return self.put(block, 9);
        }
        self.byte(b'\t');
        self.secs(ns);
    }

    /// Two intervals of `ns` as [`Room::tab_secs`] writes each: under a
    /// second, its block composed once and stored twice (a response in one
    /// message has the same first-byte and last-byte latency).
    #[inline(always)]
    pub(crate) fn tab_secs_twice(&mut self, ns: i64) {
        if let Some(block) = tab_secs_block(ns) {
            self.put(block, 9);
            return self.put(block, 9);
        }
        self.tab_secs(ns);
        self.tab_secs(ns);
    }

    /// Seconds with six decimals, from nanoseconds rounded to the
    /// microsecond (as `zeek::write_secs`, Zeek's `%.6f` of a time or an
    /// interval).
    #[inline(always)]
    pub(crate) fn secs(&mut self, ns: i64) {
        if ns < 0 {
            return self.secs_negative(ns);
        }
        let us = (ns as u64 + 500) / 1000;
        let whole = us / 1_000_000;
        let frac = (us % 1_000_000) as u32;
        let f = frac_word(frac);
        if whole == 0 {
            // Under a second (most latencies): "0.ffffff", one word.
            return self.put((f << 8 | u64::from(b'0')).to_le_bytes(), 8);
        }
        self.u64(whole);
        self.put(f.to_le_bytes(), 7);
    }

    /// A time as [`Room::secs`] writes it, the whole seconds copied from
    /// `kept` when they are the last line's.
    #[inline(always)]
    pub(crate) fn time(&mut self, ns: i64, kept: &mut Kept) {
        if ns < 0 {
            return self.secs_negative(ns);
        }
        let us = (ns as u64 + 500) / 1000;
        let whole = us / 1_000_000;
        let frac = (us % 1_000_000) as u32;
        if whole != kept.second {
            kept.new_second(whole);
        }
        self.put(kept.second_text, kept.second_len);
        self.put(frac_word(frac).to_le_bytes(), 7);
    }

    /// An address as [`Room::addr`] writes it, an IPv4 address's text
    /// copied from `kept` when it is the last line's at the same end
    /// (`end` 0 or 1).
    #[inline(always)]
    pub(crate) fn addr_kept(&mut self, a: &IpAddr16, kept: &mut Kept, end: usize) {
        let k = &mut kept.addrs[end & 1];
        if k.0 == *a {
            // Only an IPv4 address is ever kept.
            return self.put(k.1, k.2);
        }
        if a.is_v4() {
            let (t, n) = IpAddr16::v4_text([a.0[12], a.0[13], a.0[14], a.0[15]]);
            *k = (*a, t, n);
            self.put(t, n);
        } else {
            self.addr_v6(a);
        }
    }

    #[inline(always)]
    fn secs_negative(&mut self, ns: i64) {
        let (d, n) = negative_secs(ns);
        self.put(d, n);
    }

    /// An address: dotted quad, or IPv6 as the standard library writes it.
    #[cfg(test)]
    #[inline(always)]
    pub(crate) fn addr(&mut self, a: &IpAddr16) {
        if a.is_v4() {
            let (t, n) = IpAddr16::v4_text([a.0[12], a.0[13], a.0[14], a.0[15]]);
            self.put(t, n);
        } else {
            self.addr_v6(a);
        }
    }

    #[inline(always)]
    fn addr_v6(&mut self, a: &IpAddr16) {
        let (d, n) = v6_text(a);
        self.put(d, n);
    }

    /// Text escaped as `esc` wants for a TSV log: `(empty)` when empty,
    /// `\x2d` for a lone `-`, a `,` escaped too inside a set.
    #[inline(always)]
    pub(crate) fn tsv_text(&mut self, s: &[u8], esc: Esc, in_set: bool) {
        self.tsv_text_after::<false>(s, esc, in_set);
    }

    /// A tab, then text as [`Room::tsv_text`] writes it: the tab stored in
    /// the text's own checked room (a TSV line's text value, one store and
    /// one cursor move fewer).
    #[inline(always)]
    pub(crate) fn tab_tsv_text(&mut self, s: &[u8], esc: Esc, in_set: bool) {
        self.tsv_text_after::<true>(s, esc, in_set);
    }

    #[inline(always)]
    fn tsv_text_after<const TAB: bool>(&mut self, s: &[u8], esc: Esc, in_set: bool) {
        let lead = if TAB { Some(b'\t') } else { None };
        match (s, TAB) {
            ([], false) => return self.put(*b"(empty)\0", 7),
            ([], true) => return self.put(*b"\t(empty)", 8),
            ([b'-'], false) => return self.put(*b"\\x2d", 4),
            ([b'-'], true) => return self.put(*b"\t\\x2d", 5),
            _ => {}
        }
        match esc {
            Esc::Tsv if self.clean_blocks(lead, s, Class::Tsv { in_set }) => {}
            Esc::Zeek if self.clean_blocks(lead, s, Class::Zeek { in_set }) => {}
            Esc::Tsv => self.words::<4>(lead, s, Class::Tsv { in_set }, |d, c| tsv_escape(d, c, in_set)),
            Esc::Zeek => self.words::<4>(lead, s, Class::Zeek { in_set }, |d, c| zeek_escape(d, c, in_set)),
        }
    }

    /// Text as a JSON string, quoted.
    #[inline(always)]
    pub(crate) fn json_text(&mut self, s: &[u8]) {
        if !self.clean_blocks(Some(b'"'), s, Class::Json) {
            self.byte(b'"');
            self.words::<6>(None, s, Class::Json, json_escape);
        }
        self.byte(b'"');
    }

    /// Text of at most [`CLEAN_MOST`] bytes that `class` does not escape
    /// (nearly every value of a line: names, statements, fingerprints),
    /// after `lead` (a TSV value's tab, a JSON string's quote), stored as
    /// fixed-size blocks within the value's budget: no checked write (its
    /// worst case, the bounds of its slice and the cursor moved by hand cost
    /// more than the copy). Under 16 bytes, one block with the lead byte;
    /// longer, the lead, the text's 16-byte blocks, the last one ending at
    /// the text's end (over the one before). False, and nothing written,
    /// when longer or when some byte needs escaping ([`Room::words`] then).
    #[inline(always)]
    fn clean_blocks(&mut self, lead: Option<u8>, s: &[u8], class: Class) -> bool {
        let n = s.len();
        if n < 16 {
            if n == 0 {
                if let Some(c) = lead {
                    self.byte(c);
                }
                return true;
            }
            let b = tail16(s);
            if class.any16(b) {
                return false;
            }
            match lead {
                // The block's last byte is past the text (n < 16): shifted
                // out.
                Some(c) => self.put((u128::from_le_bytes(b) << 8 | u128::from(c)).to_le_bytes(), n + 1),
                None => self.put(b, n),
            }
            return true;
        }
        if n > CLEAN_MOST {
            return false;
        }
        let block = |at: usize| -> [u8; 16] {
            match s.get(at..at + 16) {
                Some(b) => b.try_into().unwrap_or([0; 16]),
                None => [0; 16],
            }
        };
        // 1 to 4 whole blocks, then the last 16 bytes (the last whole block
        // again when n is a multiple of 16).
        let whole = n / 16;
        let last = block(n - 16);
        let mut dirty = class.any16(last);
        for i in 0..whole {
            dirty |= class.any16(block(16 * i));
        }
        if dirty {
            return false;
        }
        if let Some(c) = lead {
            self.byte(c);
        }
        for i in 0..whole - 1 {
            self.put(block(16 * i), 16);
        }
        // The last whole block moves the cursor only to where the last 16
        // bytes start.
        self.put(block(16 * (whole - 1)), n % 16);
        self.put(last, 16);
        true
    }

    /// Copies `s` sixteen bytes at a time, each block stored before it is
    /// tested (a block that needs no escaping, nearly all of them, costs
    /// one load, the test and one store; the test is three or four SSE2
    /// compares on x86-64, two word tests elsewhere: [`Class::any16`]); a
    /// block that needs some is written again byte by byte by `escape`,
    /// which writes one byte's escaped form (at most `WORST` bytes) and
    /// says how long it is.
    #[inline(always)]
    fn words<const WORST: usize>(&mut self, lead: Option<u8>, s: &[u8], class: Class, escape: impl Fn(&mut [MaybeUninit<u8>; WORST], u8) -> usize) {
        // The most the text can take, plus a block of slack (and the
        // leading byte, when there is one, a separator stored with it).
        let need = s.len().saturating_mul(WORST).saturating_add(16);
        let Some(d) = self.at(need) else { return };
        let (d, led) = match (lead, d.split_first_mut()) {
            (Some(c), Some((first, rest))) => {
                *first = MaybeUninit::new(c);
                (rest, 1)
            }
            _ => (d, 0),
        };
        match words_into(d, s, class, escape) {
            Some(q) => self.p += q + led,
            // Not reached: `need` is the most the text takes.
            None => self.short_by(need),
        }
    }
}

/// Which bytes a text convention escapes (with the set separator `,`
/// when `in_set`).
#[derive(Clone, Copy)]
pub(crate) enum Class {
    /// `tx::tsv_text`: control bytes, DEL, `\`.
    Tsv { in_set: bool },
    /// `tx::zeek_text`: bytes outside printable ASCII, `\`.
    Zeek { in_set: bool },
    /// `tx::json_str`: control bytes, `"`, `\`.
    Json,
}

impl Class {
    /// Whether any of the 16 bytes of `b` is one the class escapes: SSE2
    /// on x86-64 (every x86-64 has it), two word tests elsewhere.
    #[inline(always)]
    pub(crate) fn any16(self, b: [u8; 16]) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            self.any16_sse2(b)
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self.any16_words(b)
        }
    }

    /// The portable test: the two halves as words.
    #[cfg_attr(target_arch = "x86_64", allow(dead_code))]
    #[inline(always)]
    pub(crate) fn any16_words(self, b: [u8; 16]) -> bool {
        let x = u128::from_le_bytes(b);
        let (lo, hi) = (x as u64, (x >> 64) as u64);
        match self {
            Class::Tsv { in_set } => tsv_escapes_any(lo, in_set) | tsv_escapes_any(hi, in_set),
            Class::Zeek { in_set } => zeek_escapes_any(lo, in_set) | zeek_escapes_any(hi, in_set),
            Class::Json => json_escapes_any(lo) | json_escapes_any(hi),
        }
    }

    /// The test with SSE2: a byte below 0x20 is one whose unsigned maximum
    /// with 0x1f is 0x1f; one at or above 0x7f, whose maximum with 0x7f is
    /// itself; the others by equality.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(crate) fn any16_sse2(self, b: [u8; 16]) -> bool {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of x86-64 (every x86-64 processor has it,
        // and the compiler's baseline for the target enables it); `b` is
        // 16 readable bytes and the load is unaligned.
        unsafe {
            let x = _mm_loadu_si128(b.as_ptr().cast());
            let eq = |c: u8| _mm_cmpeq_epi8(x, _mm_set1_epi8(c as i8));
            let ctrl = _mm_cmpeq_epi8(_mm_max_epu8(x, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f));
            let m = match self {
                Class::Tsv { in_set } => {
                    let m = _mm_or_si128(_mm_or_si128(ctrl, eq(b'\\')), eq(0x7f));
                    if in_set { _mm_or_si128(m, eq(b',')) } else { m }
                }
                Class::Zeek { in_set } => {
                    let high = _mm_cmpeq_epi8(_mm_max_epu8(x, _mm_set1_epi8(0x7f)), x);
                    let m = _mm_or_si128(_mm_or_si128(ctrl, eq(b'\\')), high);
                    if in_set { _mm_or_si128(m, eq(b',')) } else { m }
                }
                Class::Json => _mm_or_si128(_mm_or_si128(ctrl, eq(b'"')), eq(b'\\')),
            };
            _mm_movemask_epi8(m) != 0
        }
    }
}

/// `t` (1 to 15 bytes) as a block, the bytes past it spaces (which no
/// class escapes): overlapping word loads, no loop.
#[inline(always)]
fn tail16(t: &[u8]) -> [u8; 16] {
    const SPACES: u64 = 0x2020_2020_2020_2020;
    let n = t.len();
    let word = |at: usize| -> u64 { u64::from_le_bytes(t[at..at + 8].try_into().unwrap_or([0; 8])) };
    let (lo, hi) = if n > 8 {
        // The last word loaded ends at the text's end: its first 16 - n
        // bytes are the first word's again.
        (word(0), word(n - 8) >> (8 * (16 - n)) | SPACES << (8 * (n - 8)))
    } else if n == 8 {
        (word(0), SPACES)
    } else {
        (tail_word(t), SPACES)
    };
    (u128::from(lo) | u128::from(hi) << 64).to_le_bytes()
}

/// [`Room::words`]' copy into `d`; how many bytes it wrote, or `None` if
/// `d` was too short (not reached: `d` holds the text's worst case).
///
/// Each part of the text is tested before it is stored, and a part that
/// needs no escaping (nearly all) is stored by fixed-size moves of the
/// text's own bytes: a text under 16 bytes as two overlapping loads and
/// stores (of 8 or 4 bytes, or three single bytes), tested as one block;
/// a longer one 16 bytes at a time, its last part as the text's last 16
/// bytes, overlapping the block before (whose bytes there, if this block
/// needs no escaping, were copied as they are). A part that needs some is
/// written byte by byte by `escape`.
#[inline(always)]
fn words_into<const WORST: usize>(
    d: &mut [MaybeUninit<u8>],
    s: &[u8],
    class: Class,
    escape: impl Fn(&mut [MaybeUninit<u8>; WORST], u8) -> usize,
) -> Option<usize> {
    let n = s.len();
    if n < 16 {
        let clean = if n >= 8 {
            let (lo, hi) = (word8(s, 0)?, word8(s, n - 8)?);
            !class.any16(blocks(lo, hi)) && {
                store(d, 0, lo)?;
                store(d, n - 8, hi)?;
                true
            }
        } else if n >= 4 {
            let (lo, hi) = (word4(s, 0)?, word4(s, n - 4)?);
            let w = u64::from(u32::from_le_bytes(lo)) | u64::from(u32::from_le_bytes(hi)) << 32;
            !class.any16(blocks(w.to_le_bytes(), w.to_le_bytes())) && {
                store(d, 0, lo)?;
                store(d, n - 4, hi)?;
                true
            }
        } else if n > 0 {
            // One to three bytes: the first, the middle and the last cover
            // them; the rest of the word spaces (which no class escapes).
            let (a, b, c) = (s[0], s[n / 2], s[n - 1]);
            let w = [a, b, c, b' ', b' ', b' ', b' ', b' '];
            !class.any16(blocks(w, w)) && {
                store(d, 0, [a])?;
                store(d, n / 2, [b])?;
                store(d, n - 1, [c])?;
                true
            }
        } else {
            true
        };
        return if clean { Some(n) } else { escape_bytes(d, 0, s, &escape) };
    }
    let mut q = 0;
    let mut parts = s.chunks_exact(16);
    for b in &mut parts {
        let b: [u8; 16] = b.try_into().ok()?;
        if class.any16(b) {
            q = escape_bytes(d, q, &b, &escape)?;
        } else {
            store(d, q, b)?;
            q += 16;
        }
    }
    let rest = parts.remainder();
    if !rest.is_empty() {
        let last: [u8; 16] = s.get(n - 16..)?.try_into().ok()?;
        if class.any16(last) {
            q = escape_bytes(d, q, rest, &escape)?;
        } else {
            // q >= 16: a whole block was written before.
            store(d, (q + rest.len()).checked_sub(16)?, last)?;
            q += rest.len();
        }
    }
    Some(q)
}

/// The 8 bytes of `s` at `at`.
#[inline(always)]
fn word8(s: &[u8], at: usize) -> Option<[u8; 8]> {
    s.get(at..at.checked_add(8)?)?.try_into().ok()
}

/// The 4 bytes of `s` at `at`.
#[inline(always)]
fn word4(s: &[u8], at: usize) -> Option<[u8; 4]> {
    s.get(at..at.checked_add(4)?)?.try_into().ok()
}

/// Two 8-byte words as one 16-byte block (the escaping test's).
#[inline(always)]
fn blocks(lo: [u8; 8], hi: [u8; 8]) -> [u8; 16] {
    (u128::from(u64::from_le_bytes(lo)) | u128::from(u64::from_le_bytes(hi)) << 64).to_le_bytes()
}

/// Stores the block `b` at `d[q..q + N]`.
#[inline(always)]
fn store<const N: usize>(d: &mut [MaybeUninit<u8>], q: usize, b: [u8; N]) -> Option<()> {
    let to: &mut [MaybeUninit<u8>; N] = d.get_mut(q..q.checked_add(N)?)?.try_into().ok()?;
    for (t, b) in to.iter_mut().zip(b) {
        *t = MaybeUninit::new(b);
    }
    Some(())
}

/// Copies `s` into the start of `d` (as long as `s`).
#[inline(always)]
fn copy(d: &mut [MaybeUninit<u8>], s: &[u8]) {
    for (d, &s) in d.iter_mut().zip(s) {
        *d = MaybeUninit::new(s);
    }
}

/// The bytes of `w` written at `q` each as `escape` writes it (into room
/// for its longest form); the end, or `None` if `d` is too short.
#[cold]
#[inline(never)]
fn escape_bytes<const WORST: usize>(
    d: &mut [MaybeUninit<u8>],
    mut q: usize,
    w: &[u8],
    escape: &impl Fn(&mut [MaybeUninit<u8>; WORST], u8) -> usize,
) -> Option<usize> {
    for &c in w {
        let to: &mut [MaybeUninit<u8>; WORST] = d.get_mut(q..q + WORST)?.try_into().ok()?;
        q += escape(to, c);
    }
    Some(q)
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// `\xNN` (lower-case hex, as Zeek writes an escaped byte) at the start of
/// `d`: 4.
fn hex_escape(d: &mut [MaybeUninit<u8>], c: u8) -> usize {
    debug_assert!(d.len() >= 4);
    copy(d, &[b'\\', b'x', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]);
    4
}

fn plain(d: &mut [MaybeUninit<u8>], c: u8) -> usize {
    copy(d, &[c]);
    1
}

/// `tx::tsv_text`'s escaping of one byte.
fn tsv_escape(d: &mut [MaybeUninit<u8>; 4], c: u8, in_set: bool) -> usize {
    if c < 0x20 || c == 0x7f || c == b'\\' || (in_set && c == b',') {
        hex_escape(&mut d[..], c)
    } else {
        plain(&mut d[..], c)
    }
}

/// `tx::zeek_text`'s escaping of one byte.
fn zeek_escape(d: &mut [MaybeUninit<u8>; 4], c: u8, in_set: bool) -> usize {
    match c {
        b'\\' => {
            copy(d, b"\\\\");
            2
        }
        b',' if in_set => hex_escape(&mut d[..], c),
        0x20..=0x7e => plain(&mut d[..], c),
        _ => hex_escape(&mut d[..], c),
    }
}

/// `tx::json_str`'s escaping of one byte.
fn json_escape(d: &mut [MaybeUninit<u8>; 6], c: u8) -> usize {
    let two = |d: &mut [MaybeUninit<u8>], e: u8| {
        copy(&mut d[..], &[b'\\', e]);
        2
    };
    match c {
        b'"' => two(d, b'"'),
        b'\\' => two(d, b'\\'),
        b'\n' => two(d, b'n'),
        b'\r' => two(d, b'r'),
        b'\t' => two(d, b't'),
        c if c < 0x20 => {
            copy(d, &[b'\\', b'u', b'0', b'0', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]);
            6
        }
        c => plain(&mut d[..], c),
    }
}

/// Whether any of the eight bytes in `w` is one Zeek's ASCII writer
/// escapes: outside printable ASCII (below 0x20, DEL, 0x80 and above), `\`,
/// and `,` inside a set.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline(always)]
fn zeek_escapes_any(w: u64, in_set: bool) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Below 0x20, DEL and `\` as the TSV test has them; the high bit on
    // its own.
    w & HIGH != 0 || tsv_escapes_any(w, in_set)
}

/// `v` < 100 as its digits, little-endian, and how many there are (the
/// leading zero of its pair shifted out): [`Room::u64`] and
/// [`Room::tab_u64`] write most counts so (branch log53).
#[inline(always)]
fn one_or_two_digits(v: u64) -> (u16, usize) {
    debug_assert!(v < 100);
    let n = 1 + usize::from(v >= 10);
    (u16::from_le_bytes(PAIRS[v as usize]) >> (8 * (2 - n)), n)
}

/// "\t0.ffffff", 9 bytes of one block: an interval of `ns` as
/// [`Room::tab_secs`] writes it when under a second rounded to the
/// microsecond (most latencies); None otherwise.
#[inline(always)]
fn tab_secs_block(ns: i64) -> Option<[u8; 16]> {
    if !(0..999_999_500).contains(&ns) {
        return None;
    }
    let us = (ns as u64 + 500) / 1000;
    let w = (frac_word(us as u32) << 8 | u64::from(b'0')) << 8 | u64::from(b'\t');
    let high = u128::from(b'0' + (us % 10) as u8);
    Some((u128::from(w) | high << 64).to_le_bytes())
}

/// Texts for the escaping tests (here and in `tx.rs`): every length to 70
/// (past the longest text stored as blocks, [`CLEAN_MOST`])
/// with each of `specials` at each position, then 20,000 pseudo-random
/// strings of quotes, separators, control bytes and multi-byte characters.
#[cfg(test)]
pub(crate) fn escaping_cases(specials: &[char], mut check: impl FnMut(&str)) {
    for len in 0..=70 {
        let base: String = "abcdefghij0123456789".chars().cycle().take(len).collect();
        check(&base);
        for at in 0..len {
            for &c in specials {
                let mut t: Vec<char> = base.chars().collect();
                t[at] = c;
                check(&t.into_iter().collect::<String>());
            }
        }
    }
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let alphabet: Vec<char> = "ab -,\\\"\t\n\u{0}\u{7f}\u{e9}\u{1F600}".chars().collect();
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % 24) as usize;
        let s: String = (0..len).map(|i| alphabet[((x >> (i * 2 % 60)) % alphabet.len() as u64) as usize]).collect();
        check(&s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `f` writes after "x\t" into a room of `cap` bytes (written
    /// again with the room it asked for when short), without the "x\t".
    fn written(cap: usize, mut f: impl FnMut(&mut Room)) -> Vec<u8> {
        let mut v: Vec<u8> = Vec::with_capacity(cap + 2);
        v.extend_from_slice(b"x\t");
        let mut passes = 0;
        assert!(append(&mut v, 2 * VALUE_MOST, |r| {
            passes += 1;
            f(r)
        }));
        assert!(passes == 1 || v.capacity() > cap + 2, "a second pass only when short");
        v.split_off(2)
    }

    #[test]
    fn numbers_as_zeek_writes_them() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut values: Vec<u64> = (0..=12_000).chain([u64::MAX, u64::MAX - 1, 10u64.pow(19), 99_999, 100_000]).collect();
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(x >> (x % 64));
        }
        for v in values {
            let mut want = Vec::new();
            crate::logs::zeek::push_u64(&mut want, v);
            assert_eq!(written(64, |r| r.u64(v)), want, "{v}");
            // With its tab stored with the digits.
            assert_eq!(written(64, |r| r.tab_u64(v)), [&b"\t"[..], &want].concat(), "{v}");
        }
    }

    #[test]
    fn seconds_as_zeek_writes_them() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut values: Vec<i64> = vec![0, 499, 500, 999_499, 999_500, 999_999_499, 999_999_500, 1_000_000_000, i64::MAX - 500, i64::MIN + 500, -1, -500, -501, 1_795_916_374_815_063_499];
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push((x >> (x % 64)) as i64);
            values.push(-((x >> (x % 64 + 1)) as i64));
        }
        for ns in values {
            let mut want = Vec::new();
            crate::logs::zeek::write_secs(&mut want, ns);
            assert_eq!(written(64, |r| r.secs(ns)), want, "{ns}");
            assert_eq!(written(64, |r| r.tab_secs(ns)), [&b"\t"[..], &want].concat(), "{ns}");
            let tab_want = [&b"\t"[..], &want].concat();
            assert_eq!(written(96, |r| r.tab_secs_twice(ns)), [&tab_want[..], &tab_want].concat(), "{ns}");
        }
    }

    /// Times written with the kept second (repeated, changed, negative,
    /// huge) come out as `zeek::write_secs` writes them.
    #[test]
    fn times_with_the_kept_second_as_zeek_writes_them() {
        let mut kept = Kept::default();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut t = 1_795_916_374_815_063_499i64;
        for i in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            t = match i % 7 {
                0 => (x >> (x % 64)) as i64,
                1 => -((x >> 40) as i64),
                2 => i64::MAX - 500 - (x % 1000) as i64,
                _ => t.saturating_add((x % 400_000_000) as i64).min(i64::MAX - 500),
            };
            let mut want = Vec::new();
            crate::logs::zeek::write_secs(&mut want, t);
            assert_eq!(written(64, |r| r.time(t, &mut kept)), want, "{t}");
            assert_eq!(written(64, |r| r.time(t, &mut kept)), want, "{t} again");
        }
    }

    /// Addresses written with the kept text of the last ones at each end
    /// (repeated, alternating, IPv6 among them, `::` and 0.0.0.0 first).
    #[test]
    fn addresses_with_the_kept_text_as_zeek_writes_them() {
        let mut kept = Kept::default();
        let addrs = [IpAddr16([0; 16]), IpAddr16::from_v4([0; 4]), IpAddr16::from_v4([10, 0, 0, 1]), IpAddr16::from_v4([192, 168, 200, 17]), IpAddr16([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])];
        for i in 0..200usize {
            for end in 0..2 {
                let a = addrs[(i * 7 / 3 + end) % addrs.len()];
                let mut want = Vec::new();
                crate::logs::zeek::write_addr(&mut want, &a);
                assert_eq!(written(64, |r| r.addr_kept(&a, &mut kept, end)), want, "{a:?}");
            }
        }
    }

    #[test]
    fn addresses_as_zeek_writes_them() {
        for o in 0..=255u8 {
            for a in [IpAddr16::from_v4([o, 255 - o, o / 3, 9]), IpAddr16::from_v4([o; 4]), IpAddr16([o; 16])] {
                let mut want = Vec::new();
                crate::logs::zeek::write_addr(&mut want, &a);
                assert_eq!(written(64, |r| r.addr(&a)), want);
            }
        }
    }

    /// Every length from 0 to 40, each byte that needs escaping at each
    /// position, random text: the word-at-a-time escaping writes what the
    /// Vec writers of `tx` write, also when the room is short at first.
    #[test]
    fn text_as_the_vec_writers_write_it() {
        let check = |s: &str| {
            for in_set in [false, true] {
                let mut want = Vec::new();
                crate::logs::tx::tsv_text(&mut want, s, in_set);
                for cap in [0, 5, 4096] {
                    assert_eq!(written(cap, |r| r.tsv_text(s.as_bytes(), Esc::Tsv, in_set)), want, "{s:?}");
                    let tabbed = [&b"\t"[..], &want].concat();
                    assert_eq!(written(cap, |r| r.tab_tsv_text(s.as_bytes(), Esc::Tsv, in_set)), tabbed, "{s:?}");
                }
                let mut want = Vec::new();
                crate::logs::tx::zeek_text(&mut want, s, in_set);
                assert_eq!(written(4096, |r| r.tsv_text(s.as_bytes(), Esc::Zeek, in_set)), want, "{s:?}");
                let tabbed = [&b"\t"[..], &want].concat();
                assert_eq!(written(4096, |r| r.tab_tsv_text(s.as_bytes(), Esc::Zeek, in_set)), tabbed, "{s:?}");
            }
            let mut want = Vec::new();
            crate::logs::tx::json_str(&mut want, s);
            for cap in [0, 7, 4096] {
                assert_eq!(written(cap, |r| r.json_text(s.as_bytes())), want, "{s:?}");
            }
        };
        let specials = ['\t', '\n', '\r', '\\', '"', ',', '-', '\u{0}', '\u{1}', '\u{1f}', '\u{7f}', ' ', '~', '\u{e9}', '\u{20ac}'];
        escaping_cases(&specials, check);
    }

    /// The 16-byte tests (SSE2 on x86-64, and the portable one every
    /// other target uses) agree with the byte-wise escaping of each class
    /// for every byte value at every position, and for the padded tails.
    #[test]
    fn block_tests_agree_with_the_bytewise_escaping() {
        let classes = [Class::Tsv { in_set: false }, Class::Tsv { in_set: true }, Class::Zeek { in_set: false }, Class::Zeek { in_set: true }, Class::Json];
        for class in classes {
            let escapes = |c: u8| -> bool {
                let mut d = [MaybeUninit::new(0u8); 6];
                let mut d4 = [MaybeUninit::new(0u8); 4];
                match class {
                    Class::Tsv { in_set } => tsv_escape(&mut d4, c, in_set) != 1,
                    Class::Zeek { in_set } => zeek_escape(&mut d4, c, in_set) != 1,
                    Class::Json => json_escape(&mut d, c) != 1,
                }
            };
            for c in 0..=255u8 {
                for at in 0..16 {
                    let mut b = *b"abcdefghijklmnop";
                    b[at] = c;
                    let want = escapes(c);
                    assert_eq!(class.any16_words(b), want, "{c:#x} at {at}");
                    #[cfg(target_arch = "x86_64")]
                    assert_eq!(class.any16_sse2(b), want, "{c:#x} at {at}");
                    // A tail of every length holding the byte keeps it.
                    for n in at + 1..16 {
                        let t = tail16(&b[..n]);
                        assert_eq!(&t[..n], &b[..n]);
                        assert!(t[n..].iter().all(|&x| x == b' '));
                        assert_eq!(class.any16(t), want, "{c:#x} at {at} of {n}");
                    }
                }
            }
        }
    }

    /// A writer that stores far more blocks than its budget (the room's
    /// budget test turned off: `lax`) never stores past the buffer: its
    /// blocks past the last place are stored there, the line is short, and
    /// the second pass, with the room the first asked for, writes it whole.
    /// Buffers of every size around the line's, so that the cursor passes
    /// the last place at every block of the line.
    #[test]
    fn a_writer_past_its_budget_stores_within_the_buffer_and_writes_again() {
        let blocks: Vec<[u8; BLOCK_MOST]> = (0..40u8).map(|i| [b'a' + i % 26; BLOCK_MOST]).collect();
        let want: Vec<u8> = blocks.iter().enumerate().flat_map(|(i, b)| b[..1 + i % BLOCK_MOST].to_vec()).collect();
        for cap in [0, 1, BLOCK_MOST - 1, BLOCK_MOST, BLOCK_MOST + 1, 200, want.len() - 1, want.len(), want.len() + BLOCK_MOST] {
            let mut v: Vec<u8> = Vec::with_capacity(cap);
            let room_at_first = v.capacity();
            let mut passes = 0;
            let fitted = append(&mut v, BLOCK_MOST, |r| {
                passes += 1;
                r.lax = true;
                for (i, b) in blocks.iter().enumerate() {
                    r.put(*b, 1 + i % BLOCK_MOST);
                }
            });
            assert!(fitted, "{cap}");
            assert_eq!(v, want, "{cap}");
            // Written again exactly when some block was past the last place.
            assert_eq!(passes, if room_at_first >= want.len() + BLOCK_MOST { 1 } else { 2 }, "{cap}");
            assert!(v.len() <= v.capacity());
        }
    }

    #[test]
    fn a_short_room_asks_for_what_the_line_needs_at_most() {
        let line = |r: &mut Room| {
            r.secs(1_795_916_374_815_063_000);
            r.byte(b'\t');
            r.tsv_text("select 1".repeat(100).as_bytes(), Esc::Tsv, false);
            r.byte(b'\t');
            r.u64(u64::MAX);
            r.lit(b"\tok\n");
        };
        let full = written(1 << 16, line);
        for cap in [0, 1, 10, 17, 18, 30, 500, 800, 830, 840] {
            assert_eq!(written(cap, line), full, "{cap}");
        }
    }
}
