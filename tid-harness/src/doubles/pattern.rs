// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The data pattern every region serves and every check compares with:
//! a function of the remote address alone, cheap to fill and to compare.

/// Words of the pattern's window: the pattern repeats a 4 KiB window of
/// random words, each window XORed with its own key.
const WINDOW_WORDS: usize = 512;

/// A 64-bit mix (splitmix64's finaliser after its increment): a bijection,
/// so distinct inputs give distinct outputs.
const fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The window: word `i` is `mix(i)` (worked out at compile time).
const fn window() -> [u64; WINDOW_WORDS] {
    let mut w = [0u64; WINDOW_WORDS];
    let mut i = 0;
    while i < WINDOW_WORDS {
        // In range: i < WINDOW_WORDS (evaluated at compile time only).
        #[allow(clippy::indexing_slicing)]
        {
            w[i] = mix(i as u64 ^ 0x7769_6E64_6F77);
        }
        i += 1;
    }
    w
}

static WINDOW: [u64; WINDOW_WORDS] = window();

/// The words of the window from word `i0` on.
fn window_from(i0: usize) -> &'static [u64] {
    WINDOW.get(i0..).unwrap_or(&[])
}

/// The source word at remote word address `addr8` (a byte address shifted
/// right by 3): word `addr8 % 512` of a fixed window of random words,
/// XORed with a key mixed from the 4 KiB window number `addr8 / 512`.
///
/// A byte placed at the wrong offset differs (another word of the window),
/// so does one from the wrong page, region or QP (another key: the mix is
/// a bijection, so no two windows share a key); a wrong byte matches by
/// chance with probability 1/256, as with any random pattern. Filling and
/// comparing are an XOR with one key per 4 KiB, which the compiler
/// vectorises: the pattern costs about what a `memcpy` of it would.
pub fn pattern_word(addr8: u64) -> u64 {
    let w = window_from((addr8 % WINDOW_WORDS as u64) as usize)
        .first()
        .copied()
        .unwrap_or(0);
    w ^ mix(addr8 / WINDOW_WORDS as u64)
}

/// The source byte at remote address `addr`.
pub fn pattern(addr: u64) -> u8 {
    let [b0, b1, b2, b3, b4, b5, b6, b7] = pattern_word(addr >> 3).to_le_bytes();
    match addr & 7 {
        0 => b0,
        1 => b1,
        2 => b2,
        3 => b3,
        4 => b4,
        5 => b5,
        6 => b6,
        _ => b7,
    }
}

/// Runs `f(addr, bytes, window_words, key)` over `buf` (the bytes from
/// remote address `addr` on) in pieces: an unaligned head and tail byte by
/// byte (`window_words` empty), and between them word-aligned pieces that
/// stay inside one 4 KiB window, each with the window's words and key.
fn by_window<B: AsRef<[u8]>>(
    addr: u64,
    buf: B,
    mut split: impl FnMut(B, usize) -> (B, B),
    mut f: impl FnMut(u64, B, &[u64], u64),
) {
    let mut a = addr;
    let mut rest = buf;
    let head = (a.wrapping_neg() & 7).min(rest.as_ref().len() as u64) as usize;
    if head > 0 {
        let (h, t) = split(rest, head);
        f(a, h, &[], 0);
        rest = t;
        a = a.wrapping_add(head as u64);
    }
    while rest.as_ref().len() >= 8 {
        let i0 = ((a >> 3) % WINDOW_WORDS as u64) as usize;
        let words = (WINDOW_WORDS - i0).min(rest.as_ref().len() / 8);
        let (chunk, t) = split(rest, words * 8);
        f(
            a,
            chunk,
            window_from(i0),
            mix((a >> 3) / WINDOW_WORDS as u64),
        );
        rest = t;
        a = a.wrapping_add(words as u64 * 8);
    }
    if !rest.as_ref().is_empty() {
        f(a, rest, &[], 0);
    }
}

/// Writes the words of `win` XORed with `key` into `piece` (whole words).
#[inline(always)]
fn fill_words_body(piece: &mut [u8], win: &[u64], key: u64) {
    for (w, t) in piece.chunks_exact_mut(8).zip(win) {
        w.copy_from_slice(&(t ^ key).to_le_bytes());
    }
}

/// True if a whole word of `piece` differs from `win` XORed with `key`.
#[inline(always)]
fn words_differ_body(piece: &[u8], win: &[u64], key: u64) -> bool {
    piece.chunks_exact(8).zip(win).fold(0u64, |acc, (g, t)| {
        let g = u64::from_le_bytes(g.try_into().unwrap_or([0; 8]));
        acc | (g ^ t ^ key)
    }) != 0
}

/// [`fill_words_body`] compiled for AVX2 (32-byte stores instead of the
/// baseline's 16).
///
/// # Safety
///
/// The CPU must support AVX2.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[target_feature(enable = "avx2")]
unsafe fn fill_words_avx2(piece: &mut [u8], win: &[u64], key: u64) {
    fill_words_body(piece, win, key);
}

/// [`words_differ_body`] compiled for AVX2.
///
/// # Safety
///
/// The CPU must support AVX2.
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[target_feature(enable = "avx2")]
unsafe fn words_differ_avx2(piece: &[u8], win: &[u64], key: u64) -> bool {
    words_differ_body(piece, win, key)
}

/// Fills whole words, with AVX2 where the host has it (host builds).
fn fill_words(piece: &mut [u8], win: &[u64], key: u64) {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 was detected on this CPU just above.
        return unsafe { fill_words_avx2(piece, win, key) };
    }
    fill_words_body(piece, win, key);
}

/// Compares whole words, with AVX2 where the host has it (host builds).
fn words_differ(piece: &[u8], win: &[u64], key: u64) -> bool {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 was detected on this CPU just above.
        return unsafe { words_differ_avx2(piece, win, key) };
    }
    words_differ_body(piece, win, key)
}

/// Fills `out` with the source bytes from remote address `addr` on.
pub fn fill_pattern(addr: u64, out: &mut [u8]) {
    by_window(
        addr,
        out,
        |b, n| b.split_at_mut(n),
        |a, piece, win, key| {
            if win.is_empty() {
                for (i, b) in piece.iter_mut().enumerate() {
                    *b = pattern(a.wrapping_add(i as u64));
                }
            } else {
                fill_words(piece, win, key);
            }
        },
    );
}

/// Bytes of `got` that differ from the source bytes from remote address
/// `addr` on. Compares whole windows first and counts bytes only in a
/// window that differs.
pub fn mismatched_bytes(addr: u64, got: &[u8]) -> u64 {
    let mut bad = 0u64;
    by_window(
        addr,
        got,
        |b, n| b.split_at(n),
        |a, piece, win, key| {
            let differs = win.is_empty() || words_differ(piece, win, key);
            if differs {
                bad += piece
                    .iter()
                    .enumerate()
                    .filter(|&(i, &b)| b != pattern(a.wrapping_add(i as u64)))
                    .count() as u64;
            }
        },
    );
    bad
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    #[test]
    fn the_pattern_is_the_same_bytewise_and_wordwise() {
        let mut a = [0u8; 37];
        fill_pattern(0x1_0003, &mut a);
        for (i, b) in a.iter().enumerate() {
            assert_eq!(*b, pattern(0x1_0003 + i as u64));
        }
        assert_ne!(a[..8], a[8..16]);
    }

    #[test]
    fn the_pattern_tells_offsets_pages_and_regions_apart() {
        let page = |a: u64| {
            let mut p = vec![0u8; 4096];
            fill_pattern(a, &mut p);
            p
        };
        let p = page(0x10_0000);
        assert_eq!(mismatched_bytes(0x10_0000, &p), 0);
        // The same window one page on, or another region, or shifted by
        // a word: nearly every byte differs.
        for other in [0x10_1000, 0x7_0000_0000, 0x10_0008] {
            let bad = mismatched_bytes(other, &p);
            assert!(bad > 4096 * 9 / 10, "{other:#x}: {bad}");
        }
        // One byte off: counted exactly, wherever it is.
        for (at, addr) in [(0usize, 0x10_0000u64), (4095, 0x10_0000), (13, 0x10_0003)] {
            let mut q = page(addr);
            q[at] ^= 0x40;
            assert_eq!(mismatched_bytes(addr, &q), 1, "{at} {addr:#x}");
        }
        // Unaligned, across a window boundary, short.
        let mut q = vec![0u8; 100];
        fill_pattern(0x10_0FF3, &mut q);
        assert_eq!(mismatched_bytes(0x10_0FF3, &q), 0);
        for (i, b) in q.iter().enumerate() {
            assert_eq!(*b, pattern(0x10_0FF3 + i as u64));
        }
        assert_eq!(mismatched_bytes(0x10_0FF3, &q[..3]), 0);
    }
}
