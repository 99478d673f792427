//! Zeek's connection history: letters recorded once per direction (or
//! logarithmically for repeated anomalies), upper case for the originator.

use wirelog_record::History;

/// Zeek's per-endpoint history masks (TCP_Endpoint::HistoryMasks). Zeek
/// shifts the responder's left by 16 in a 32-bit mask; every mask fits in
/// 8 bits, so here they are shifted by 8 in a 16-bit one (2 bytes less in
/// every connection entry).
pub mod mask {
    pub const SYN_PKT: u32 = 0x1;
    pub const FIN_PKT: u32 = 0x2;
    pub const RST_PKT: u32 = 0x4;
    pub const FIN_RST_PKT: u32 = 0x8;
    pub const DATA_PKT: u32 = 0x10;
    pub const ACK_PKT: u32 = 0x20;
    pub const MULTI_FLAG_PKT: u32 = 0x40;
}

/// Every letter a history holds: Zeek's (`history` in its conn.log docs,
/// `scripts/base/protocols/conn/main.zeek`), each side's case, and `^`
/// (flipped). A letter is kept as its place here plus one, in 5 bits.
const ALPHABET: &[u8; 25] = b"SHADFRCTWGIQshadfrctwgiq^";

/// A letter's 5-bit code (0 for a byte not in [`ALPHABET`]).
const CODES: [u8; 128] = {
    let mut c = [0u8; 128];
    let mut i = 0;
    while i < ALPHABET.len() {
        c[ALPHABET[i] as usize] = i as u8 + 1;
        i += 1;
    }
    c
};

/// Letters in each of the two words (55 bits): 22, [`History::CAPACITY`].
const FIRST: u32 = 11;
const FIRST_MASK: u64 = (1 << (5 * FIRST)) - 1;
const SECOND_MASK: u64 = (1 << (5 * (History::CAPACITY as u32 - FIRST))) - 1;
/// The first word's bit set when a letter came past the capacity ([`History::truncated`]).
const TRUNCATED: u64 = 1 << 55;
/// Where a side's masks start in its word (the originator's the first).
const SEEN_SHIFT: u32 = 56;

/// A connection's history: its letters (in the order they came) and the
/// masks seen, in 16 bytes (issue 35, ninth round: a [`History`] and the
/// masks took 26 bytes of every connection entry). The letters are 5-bit
/// codes, none of them 0, from bit 0 up (the first letter lowest), the
/// first 11 in the first word, the next 11 in the second, so their count
/// is where the highest set bit lies; the first word's bit 55 says a
/// letter was dropped past [`History::CAPACITY`]; bits 56..64 of the
/// first word are the originator's masks, of the second the responder's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistoryState {
    bits: [u64; 2],
}

impl HistoryState {
    #[inline(always)]
    fn seen(&self) -> u16 {
        (self.bits[0] >> SEEN_SHIFT) as u16 | ((self.bits[1] >> SEEN_SHIFT) as u16) << 8
    }

    /// The letters, as the record carries them.
    pub fn letters(&self) -> History {
        let mut h = History::new();
        for mut w in [self.bits[0] & FIRST_MASK, self.bits[1] & SECOND_MASK] {
            while w != 0 {
                if let Some(&c) = ALPHABET.get((w & 31) as usize - 1) {
                    h.push(c);
                }
                w >>= 5;
            }
        }
        h.truncated = self.bits[0] & TRUNCATED != 0;
        h
    }

    /// Appends a letter (Zeek's history string grows by one character).
    #[inline]
    fn push(&mut self, letter: u8) {
        let code = CODES[usize::from(letter & 0x7f)];
        // Every caller passes one of Zeek's letters (`packed_letters_are_a_history`).
        debug_assert!(code != 0, "history letter {:?} not in the alphabet", letter as char);
        if code == 0 {
            return;
        }
        let first = self.bits[0] & FIRST_MASK;
        let second = self.bits[1] & SECOND_MASK;
        // Bits in use in a word of whole codes: its letters times five.
        let used = |w: u64| (64 - w.leading_zeros()).div_ceil(5) * 5;
        if second != 0 || used(first) == 5 * FIRST {
            let at = used(second);
            if at < 5 * (History::CAPACITY as u32 - FIRST) {
                self.bits[1] |= u64::from(code) << at;
            } else {
                self.bits[0] |= TRUNCATED;
            }
        } else {
            self.bits[0] |= u64::from(code) << used(first);
        }
    }

    #[inline]
    fn letter(is_orig: bool, code: u8) -> u8 {
        if is_orig {
            code
        } else {
            code.to_ascii_lowercase()
        }
    }

    /// Adds `code` the first time `mask` is seen for this side. Returns true
    /// when it had been seen before (Zeek's CheckHistory).
    #[inline(always)]
    pub fn check(&mut self, is_orig: bool, mask: u32, code: u8) -> bool {
        debug_assert!(mask < 0x100, "history mask {mask:#x} is wider than 8 bits");
        let m = if is_orig { mask } else { mask << 8 };
        self.check_raw(m, Self::letter(is_orig, code))
    }

    /// CheckHistory with a mask (16 bits) and letter used as given (UDP's D/d).
    /// Runs on every TCP packet and nearly always finds the mask seen, so
    /// that test is inlined and tests each word's top byte in place; the
    /// first sighting, a few times per connection, is out of line.
    #[inline(always)]
    pub fn check_raw(&mut self, mask: u32, letter: u8) -> bool {
        debug_assert!(mask <= 0xffff, "history mask {mask:#x} is wider than 16 bits");
        let orig = u64::from(mask & 0xff) << SEEN_SHIFT;
        let resp = u64::from((mask >> 8) & 0xff) << SEEN_SHIFT;
        if (self.bits[0] & orig) | (self.bits[1] & resp) != 0 {
            return true;
        }
        self.first_seen(orig, resp, letter);
        false
    }

    #[cold]
    #[inline(never)]
    fn first_seen(&mut self, orig: u64, resp: u64, letter: u8) {
        self.bits[0] |= orig;
        self.bits[1] |= resp;
        self.push(letter);
    }

    /// Whether `mask` was seen for this side (its letter is in the history).
    pub fn has(&self, is_orig: bool, mask: u32) -> bool {
        let m = if is_orig { mask } else { mask << 8 };
        self.seen() & m as u16 != 0
    }

    #[inline]
    pub fn add(&mut self, is_orig: bool, code: u8) {
        self.push(Self::letter(is_orig, code));
    }

    /// Zeek's ScaledHistoryEntry: the letter is recorded at the 1st, 10th,
    /// 100th, ... occurrence.
    #[inline]
    pub fn scaled(&mut self, is_orig: bool, code: u8, count: u32) {
        if is_power_of_ten(count) {
            self.add(is_orig, code);
        }
    }

    pub fn add_raw(&mut self, letter: u8) {
        self.push(letter);
    }
}

fn is_power_of_ten(mut n: u32) -> bool {
    if n == 0 {
        return false;
    }
    while n.is_multiple_of(10) {
        n /= 10;
    }
    n == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_case_and_once() {
        let mut h = HistoryState::default();
        assert!(!h.check(true, mask::SYN_PKT, b'S'));
        assert!(h.check(true, mask::SYN_PKT, b'S'));
        assert!(!h.check(false, mask::SYN_PKT, b'H'));
        for n in 1..=120 {
            h.scaled(false, b'T', n);
        }
        assert_eq!(h.letters().as_str(), "Shttt");
        // Every mask of both sides has a bit of its own.
        use mask::*;
        let all = [SYN_PKT, FIN_PKT, RST_PKT, FIN_RST_PKT, DATA_PKT, ACK_PKT, MULTI_FLAG_PKT];
        let mut h = HistoryState::default();
        for (i, m) in all.iter().enumerate() {
            assert!(!h.check(true, *m, b"SHADFRC"[i]));
            assert!(!h.check(false, *m, b"SHADFRC"[i]));
            assert!(h.has(true, *m) && h.has(false, *m));
        }
        assert_eq!(h.letters().as_str(), "SsHhAaDdFfRrCc");
    }

    /// Every letter of the alphabet in every place, past the capacity
    /// (dropped and marked as `History` drops and marks them), with the
    /// masks beside them untouched: the same letters as a `History` given
    /// the same pushes, in 16 bytes.
    #[test]
    fn packed_letters_are_a_history() {
        assert_eq!(std::mem::size_of::<HistoryState>(), 16);
        for start in 0..ALPHABET.len() {
            let mut h = HistoryState::default();
            let mut want = History::new();
            assert!(!h.check_raw(0x8001, b'^'));
            want.push(b'^');
            for i in 0..30 {
                let c = ALPHABET[(start + 7 * i) % ALPHABET.len()];
                h.add_raw(c);
                want.push(c);
                let got = h.letters();
                assert_eq!((got.as_str(), got.truncated), (want.as_str(), want.truncated));
                assert!(h.has(true, 0x1) && h.has(false, 0x80) && !h.has(true, 0x2));
            }
            assert!(h.letters().truncated);
        }
    }
}
