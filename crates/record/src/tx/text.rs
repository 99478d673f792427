//! [`SmallText`]: a record's text field that costs no allocation when short.
//!
//! Most of the texts a DNS or Redis transaction carries are short: a query
//! name, an A record's address, a key, a short reply. Held as `String` each
//! was one heap allocation per transaction and field; a `SmallText` keeps up
//! to [`SmallText::INLINE`] bytes in place and anything longer in a shared
//! `Arc<str>` (cloned, not copied, when two fields of a record hold the same
//! name).

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// Bytes kept in place: with the length and the variant's tag the value is
/// 32 bytes, as large as an `Arc<str>` plus the enum's own word.
const INLINE: usize = 30;

/// Text kept in place when it has at most [`SmallText::INLINE`] bytes, else
/// shared. Reads as a `&str` (`Deref`), compares and prints as its text.
#[derive(Clone)]
pub struct SmallText(Repr);

/// Private, so that only this file's constructors write `Inline`'s bytes.
#[derive(Clone)]
enum Repr {
    /// `(length, bytes)`: `bytes[..length]` is the text, always UTF-8: only
    /// [`SmallText::new`] writes it, copying a `&str` whole.
    Inline(u8, [u8; INLINE]),
    Shared(Arc<str>),
}

impl SmallText {
    /// Longest text kept in place.
    pub const INLINE: usize = INLINE;

    /// `s` in place when it fits, else in a new `Arc<str>` (one allocation).
    pub fn new(s: &str) -> SmallText {
        if s.len() <= INLINE {
            let mut b = [0u8; INLINE];
            b[..s.len()].copy_from_slice(s.as_bytes());
            SmallText(Repr::Inline(s.len() as u8, b))
        } else {
            SmallText(Repr::Shared(Arc::from(s)))
        }
    }

    /// The text. Read for every field of every record by the log line and
    /// the store: not validated again (`str::from_utf8` cost ~10
    /// instructions a byte, as much as the allocation it replaced).
    #[allow(unsafe_code)]
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline(n, b) => {
                // SAFETY: `Repr` is private and only `new` makes an `Inline`,
                // from the bytes of a whole `&str` of `n` bytes: `b[..n]` is
                // UTF-8 (a `str` ends on a character boundary).
                unsafe { std::str::from_utf8_unchecked(&b[..usize::from(*n)]) }
            }
            Repr::Shared(s) => s,
        }
    }

    /// Whether the text is held in place (no allocation).
    pub fn is_inline(&self) -> bool {
        matches!(self.0, Repr::Inline(..))
    }

    /// The shared text, when it is too long to be held in place.
    pub fn shared(&self) -> Option<&Arc<str>> {
        match &self.0 {
            Repr::Shared(s) => Some(s),
            Repr::Inline(..) => None,
        }
    }
}

impl Default for SmallText {
    fn default() -> Self {
        SmallText(Repr::Inline(0, [0; INLINE]))
    }
}

impl Deref for SmallText {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for SmallText {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for SmallText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for SmallText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for SmallText {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}
impl Eq for SmallText {}

impl PartialEq<str> for SmallText {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for SmallText {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::hash::Hash for SmallText {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.as_str().hash(h)
    }
}

impl From<&str> for SmallText {
    fn from(s: &str) -> Self {
        SmallText::new(s)
    }
}

impl From<String> for SmallText {
    fn from(s: String) -> Self {
        SmallText::new(&s)
    }
}

impl From<Arc<str>> for SmallText {
    /// Short texts are copied in place; longer ones keep sharing `s`.
    fn from(s: Arc<str>) -> Self {
        if s.len() <= INLINE {
            SmallText::new(&s)
        } else {
            SmallText(Repr::Shared(s))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_texts_stay_in_place_and_long_ones_are_shared() {
        for s in ["", "a", "host0.example.com", "10.2.0.1", &"x".repeat(INLINE)] {
            let t = SmallText::new(s);
            assert!(t.is_inline(), "{s:?}");
            assert_eq!(t, s);
            assert_eq!(&*t, s);
        }
        let long = "y".repeat(INLINE + 1);
        let t = SmallText::new(&long);
        assert!(!t.is_inline());
        assert_eq!(t.as_str(), long);
        // A clone of a long text shares it.
        let c = t.clone();
        assert!(Arc::ptr_eq(t.shared().unwrap(), c.shared().unwrap()));
        let arc: Arc<str> = Arc::from(long.as_str());
        assert!(Arc::ptr_eq(SmallText::from(arc.clone()).shared().unwrap(), &arc));
        assert!(SmallText::from(Arc::<str>::from("short")).is_inline());
        // Multi-byte UTF-8 at the boundary is kept whole.
        let u = "é".repeat(INLINE / 2);
        assert_eq!(SmallText::new(&u).as_str(), u);
        assert_eq!(SmallText::default(), "");
        assert_eq!(format!("{:?} {}", SmallText::from("a\"b"), SmallText::from("c")), "\"a\\\"b\" c");
    }
}
