//! SHA-256 (FIPS 180-4), written here because the record and parse crates
//! take no such dependency: JA4 hashes two short strings per connection and
//! the certificate fingerprints hash a few KiB. The portable compression
//! costs ~2.7 k instructions per 64-byte block, which made the two JA4
//! hashes a sixth of what a TLS connection costs; where the CPU has the SHA
//! extensions (x86-64 `sha_ni`, checked at run time) they do the rounds.

const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

const H0: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

fn compress(h: &mut [u32; 8], block: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    if ni::available() {
        // SAFETY: the CPU has the features `ni::compress` is compiled for.
        #[allow(unsafe_code)]
        unsafe {
            ni::compress(h, block)
        };
        return;
    }
    compress_portable(h, block);
}

fn compress_portable(h: &mut [u32; 8], block: &[u8]) {
    let mut w = [0u32; 64];
    for (i, c) in block.chunks_exact(4).enumerate() {
        w[i] = u32::from_be_bytes([c[0], c[1], c[2], c[3]]);
    }
    for i in 16..64 {
        let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
        let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16]
            .wrapping_add(s0)
            .wrapping_add(w[i - 7])
            .wrapping_add(s1);
    }
    let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = *h;
    for i in 0..64 {
        let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
        let ch = (e & f) ^ (!e & g);
        let t1 = hh
            .wrapping_add(s1)
            .wrapping_add(ch)
            .wrapping_add(K[i])
            .wrapping_add(w[i]);
        let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
        let maj = (a & b) ^ (a & c) ^ (b & c);
        let t2 = s0.wrapping_add(maj);
        hh = g;
        g = f;
        f = e;
        e = d.wrapping_add(t1);
        d = c;
        c = b;
        b = a;
        a = t1.wrapping_add(t2);
    }
    for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
        *x = x.wrapping_add(y);
    }
}

/// The rounds on the SHA extensions (SHA256RNDS2 does two rounds on the
/// state held as ABEF and CDGH; SHA256MSG1/MSG2 extend the message
/// schedule four words at a time).
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod ni {
    use std::arch::x86_64::*;

    pub(super) fn available() -> bool {
        is_x86_feature_detected!("sha") && is_x86_feature_detected!("sse4.1") && is_x86_feature_detected!("ssse3")
    }

    /// # Safety
    /// The CPU must have SHA, SSE4.1 and SSSE3 ([`available`]); `block` is 64 bytes.
    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    pub(super) unsafe fn compress(h: &mut [u32; 8], block: &[u8]) {
        debug_assert_eq!(block.len(), 64);
        // Big-endian words: reverse the bytes of each 32-bit lane.
        let swap = _mm_set_epi64x(0x0c0d_0e0f_0809_0a0b, 0x0405_0607_0001_0203);
        // SAFETY: `h` is 8 words (32 bytes): two unaligned 16-byte loads
        // at words 0 and 4 stay inside it.
        let (abcd, efgh) = unsafe { (_mm_loadu_si128(h.as_ptr().cast()), _mm_loadu_si128(h.as_ptr().add(4).cast())) };
        // [a,b,c,d], [e,f,g,h] (lane 0 first) -> ABEF = [f,e,b,a], CDGH = [h,g,d,c].
        let badc = _mm_shuffle_epi32(abcd, 0xB1);
        let hgfe = _mm_shuffle_epi32(efgh, 0x1B);
        let mut abef = _mm_alignr_epi8(badc, hgfe, 8);
        let mut cdgh = _mm_blend_epi16(hgfe, badc, 0xF0);
        let (abef_in, cdgh_in) = (abef, cdgh);

        let mut w = [_mm_setzero_si128(); 16];
        for (g, chunk) in block.chunks_exact(16).enumerate() {
            // SAFETY: `chunk` is 16 bytes (`chunks_exact`).
            let words = unsafe { _mm_loadu_si128(chunk.as_ptr().cast()) };
            w[g] = _mm_shuffle_epi8(words, swap);
        }
        for g in 4..16 {
            // W[t-16] + s0(W[t-15]), + W[t-7], + s1(W[t-2]), four at a time.
            let t = _mm_sha256msg1_epu32(w[g - 4], w[g - 3]);
            let t = _mm_add_epi32(t, _mm_alignr_epi8(w[g - 1], w[g - 2], 4));
            w[g] = _mm_sha256msg2_epu32(t, w[g - 1]);
        }
        for (g, wg) in w.iter().enumerate() {
            // SAFETY: `K` is 64 words and `g` < 16: words 4g..4g+4 are inside it.
            let k = unsafe { _mm_loadu_si128(super::K.as_ptr().add(4 * g).cast()) };
            let wk = _mm_add_epi32(*wg, k);
            // Two rounds with the low half, two with the high half; the
            // roles of the two state registers swap after each pair.
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));
        }
        let abef = _mm_add_epi32(abef, abef_in);
        let cdgh = _mm_add_epi32(cdgh, cdgh_in);
        // Back to [a,b,c,d], [e,f,g,h].
        let abef_lo = _mm_shuffle_epi32(abef, 0x1B); // [a,b,e,f]
        let ghcd = _mm_shuffle_epi32(cdgh, 0xB1); // [g,h,c,d]
        let (abcd, efgh) = (_mm_blend_epi16(abef_lo, ghcd, 0xF0), _mm_alignr_epi8(ghcd, abef_lo, 8));
        // SAFETY: as the loads above: two 16-byte stores inside `h`'s 32 bytes.
        unsafe {
            _mm_storeu_si128(h.as_mut_ptr().cast(), abcd);
            _mm_storeu_si128(h.as_mut_ptr().add(4).cast(), efgh);
        }
    }
}

/// Feeds `data` to `compress` in 64-byte blocks, then the Merkle-Damgard
/// padding (0x80, zeros, the bit length as `length` encodes it) that MD5
/// and SHA-256 share.
pub(crate) fn blocks(data: &[u8], length: impl Fn(u64) -> [u8; 8], mut compress: impl FnMut(&[u8])) {
    let mut full = data.chunks_exact(64);
    for b in &mut full {
        compress(b);
    }
    let rest = full.remainder();
    let mut tail = [0u8; 128];
    tail[..rest.len()].copy_from_slice(rest);
    tail[rest.len()] = 0x80;
    let n = if rest.len() < 56 { 64 } else { 128 };
    tail[n - 8..n].copy_from_slice(&length((data.len() as u64) * 8));
    for b in tail[..n].chunks_exact(64) {
        compress(b);
    }
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: impl IntoIterator<Item = u8>) -> String {
    let mut s = String::new();
    for b in bytes {
        s.push(char::from_digit((b >> 4) as u32, 16).unwrap_or('0'));
        s.push(char::from_digit((b & 15) as u32, 16).unwrap_or('0'));
    }
    s
}

/// SHA-256 digest of `data`.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    let mut h = H0;
    blocks(data, u64::to_be_bytes, |b| compress(&mut h, b));
    let mut out = [0u8; 32];
    for (o, v) in out.chunks_exact_mut(4).zip(h) {
        o.copy_from_slice(&v.to_be_bytes());
    }
    out
}

/// Lower-case hex of the SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(sha256(data))
}

#[cfg(test)]
mod tests {
    use super::sha256_hex;

    /// The SHA-extension rounds (when this CPU has them) equal the portable
    /// ones on every length from 0 to 300 bytes and on a long input.
    #[test]
    fn both_compressions_agree() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let portable = |d: &[u8]| {
            let mut h = super::H0;
            super::blocks(d, u64::to_be_bytes, |b| super::compress_portable(&mut h, b));
            h
        };
        let dispatched = |d: &[u8]| {
            let mut h = super::H0;
            super::blocks(d, u64::to_be_bytes, |b| super::compress(&mut h, b));
            h
        };
        for n in (0..=300).chain([4096, 5000]) {
            assert_eq!(dispatched(&data[..n]), portable(&data[..n]), "{n} bytes");
        }
        #[cfg(target_arch = "x86_64")]
        eprintln!("SHA extensions: {}", super::ni::available());
    }

    #[test]
    fn fips_180_vectors() {
        // FIPS 180-4's examples: one block, two blocks (padding spills over).
        assert_eq!(sha256_hex(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(
            sha256_hex(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }
}
