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
pub enum SmallText {
    /// `(length, bytes)`: `bytes[..length]` is the text, always UTF-8 (only
    /// the constructors below write it, from a `&str`).
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
            SmallText::Inline(s.len() as u8, b)
        } else {
            SmallText::Shared(Arc::from(s))
        }
    }

    /// The text (an empty one for the impossible case of bytes that are not
    /// UTF-8, which no constructor writes).
    pub fn as_str(&self) -> &str {
        match self {
            SmallText::Inline(n, b) => std::str::from_utf8(&b[..usize::from(*n)]).unwrap_or_default(),
            SmallText::Shared(s) => s,
        }
    }

    /// Whether the text is held in place (no allocation).
    pub fn is_inline(&self) -> bool {
        matches!(self, SmallText::Inline(..))
    }
}

impl Default for SmallText {
    fn default() -> Self {
        SmallText::Inline(0, [0; INLINE])
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
            SmallText::Shared(s)
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
        let (SmallText::Shared(a), SmallText::Shared(b)) = (&t, &t.clone()) else { unreachable!() };
        assert!(Arc::ptr_eq(a, b));
        // Multi-byte UTF-8 at the boundary is kept whole.
        let u = "é".repeat(INLINE / 2);
        assert_eq!(SmallText::new(&u).as_str(), u);
        assert_eq!(SmallText::default(), "");
        assert_eq!(format!("{:?} {}", SmallText::from("a\"b"), SmallText::from("c")), "\"a\\\"b\" c");
    }
}
