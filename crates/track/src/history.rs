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

#[derive(Debug, Clone, Default)]
pub struct HistoryState {
    pub letters: History,
    /// The masks seen: the originator's in the low byte, the responder's in the high one.
    seen: u16,
}

impl HistoryState {
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
    #[inline]
    pub fn check(&mut self, is_orig: bool, mask: u32, code: u8) -> bool {
        debug_assert!(mask < 0x100, "history mask {mask:#x} is wider than 8 bits");
        let m = if is_orig { mask } else { mask << 8 };
        self.check_raw(m, Self::letter(is_orig, code))
    }

    /// CheckHistory with a mask (16 bits) and letter used as given (UDP's D/d).
    #[inline]
    pub fn check_raw(&mut self, mask: u32, letter: u8) -> bool {
        debug_assert!(mask <= 0xffff, "history mask {mask:#x} is wider than 16 bits");
        let mask = mask as u16;
        if self.seen & mask == 0 {
            self.seen |= mask;
            self.letters.push(letter);
            false
        } else {
            true
        }
    }

    /// Whether `mask` was seen for this side (its letter is in the history).
    pub fn has(&self, is_orig: bool, mask: u32) -> bool {
        let m = if is_orig { mask } else { mask << 8 };
        self.seen & m as u16 != 0
    }

    #[inline]
    pub fn add(&mut self, is_orig: bool, code: u8) {
        self.letters.push(Self::letter(is_orig, code));
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
        self.letters.push(letter);
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
        assert_eq!(h.letters.as_str(), "Shttt");
        // Every mask of both sides has a bit of its own.
        use mask::*;
        let all = [SYN_PKT, FIN_PKT, RST_PKT, FIN_RST_PKT, DATA_PKT, ACK_PKT, MULTI_FLAG_PKT];
        let mut h = HistoryState::default();
        for (i, m) in all.iter().enumerate() {
            assert!(!h.check(true, *m, b'A' + i as u8));
            assert!(!h.check(false, *m, b'A' + i as u8));
            assert!(h.has(true, *m) && h.has(false, *m));
        }
        assert_eq!(h.letters.as_str(), "AaBbCcDdEeFfGg");
    }
}
