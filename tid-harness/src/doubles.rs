// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The test doubles every harness shares: the responder's memory regions
//! (a counted [`MrTable`] and the [`SourceData`] behind it, and the
//! remote-writable regions over scattered pages a TID WRITE lands in,
//! [`WriteRegions`]), the data pattern they serve, a [`PacketSink`] that
//! keeps what an engine sent, and a page allocator for both nodes' pages.

use alloc::collections::VecDeque;
use alloc::vec;
use alloc::vec::Vec;
use core::cell::Cell;

use hfi1_hal::consts::PAGE_SIZE;
use hfi1_hal::sim::SimMemory;
use tid_flow::Sge;
use tid_read_proto::packet::MAX_PACKET;
use tid_read_proto::rc::{MrTable, PacketSink, SourceData};
use tid_read_proto::write::WriteRegions;

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
                for (w, t) in piece.chunks_exact_mut(8).zip(win) {
                    w.copy_from_slice(&(t ^ key).to_le_bytes());
                }
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
            let differs = win.is_empty()
                || piece.chunks_exact(8).zip(win).fold(0u64, |acc, (g, t)| {
                    let g = u64::from_le_bytes(g.try_into().unwrap_or([0; 8]));
                    acc | (g ^ t ^ key)
                }) != 0;
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

/// One memory region of the responder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// First remote address.
    pub base: u64,
    /// Bytes.
    pub len: u64,
    /// Its R_Key.
    pub rkey: u32,
}

impl Region {
    /// True if `[vaddr, vaddr + len)` lies inside the region.
    pub fn covers(&self, vaddr: u64, len: u64) -> bool {
        inside(self.base, self.len, vaddr, len)
    }
}

/// True if `[vaddr, vaddr + len)` lies inside `[base, base + size)`.
fn inside(base: u64, size: u64, vaddr: u64, len: u64) -> bool {
    vaddr
        .checked_add(len)
        .is_some_and(|end| vaddr >= base && end <= base.saturating_add(size))
}

/// A remote-writable memory region of the responder: its pages (one SGE
/// per page, as [`PageAllocator::scattered`] hands them out) in the
/// responder node's memory, where its chip places WRITE data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritableRegion {
    /// First remote address.
    pub base: u64,
    /// Its R_Key.
    pub rkey: u32,
    /// Its pages, in address order, one page each.
    pub pages: Vec<Sge>,
}

impl WritableRegion {
    /// Bytes.
    pub fn len(&self) -> u64 {
        self.pages.len() as u64 * u64::from(PAGE_SIZE)
    }

    /// True if it has no page.
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// True if `[vaddr, vaddr + len)` lies inside the region.
    pub fn covers(&self, vaddr: u64, len: u64) -> bool {
        inside(self.base, self.len(), vaddr, len)
    }

    /// The pages behind `[vaddr, vaddr + len)`, both page aligned; empty
    /// if the range is not inside the region.
    pub fn pages_of(&self, vaddr: u64, len: u64) -> &[Sge] {
        if !self.covers(vaddr, len) {
            return &[];
        }
        let first = ((vaddr - self.base) / u64::from(PAGE_SIZE)) as usize;
        let n = len.div_ceil(u64::from(PAGE_SIZE)) as usize;
        self.pages.get(first..first + n).unwrap_or(&[])
    }
}

/// The handle bit of a writable region (READ regions' handles are their
/// index, writable ones this bit plus theirs).
const WRITABLE: u32 = 1 << 31;

/// The responder's memory regions, their reference counts and the data
/// behind them ([`fill_pattern`]), and its remote-writable regions (the
/// pages of [`WritableRegion`]). Kernel: the `rvt_mregion`s behind
/// `rvt_rkey_ok()` / `rvt_put_mr()`.
///
/// One table holds both because one ack queue does: a READ entry's and a
/// WRITE entry's references are put through the same [`MrTable::put`].
/// A handle is the region's index (a writable region's with bit 31 set).
/// A put of a handle never handed out, or of a region with no reference
/// left, is a misuse: it is counted (and changes no count), and
/// [`Regions::misuses`] makes the harness fail at teardown.
#[derive(Debug, Default)]
pub struct Regions {
    regions: Vec<(Region, Cell<u64>)>,
    writable: Vec<(WritableRegion, Cell<u64>)>,
    misuses: Cell<u64>,
}

impl Regions {
    /// No region.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a region; returns its handle.
    pub fn add(&mut self, r: Region) -> u32 {
        self.regions.push((r, Cell::new(0)));
        u32::try_from(self.regions.len() - 1).unwrap_or(u32::MAX)
    }

    /// Adds a remote-writable region; returns its handle.
    pub fn add_writable(&mut self, r: WritableRegion) -> u32 {
        self.writable.push((r, Cell::new(0)));
        u32::try_from(self.writable.len() - 1).unwrap_or(u32::MAX) | WRITABLE
    }

    /// The writable region `i` (in the order added).
    pub fn writable(&self, i: usize) -> Option<&WritableRegion> {
        self.writable.get(i).map(|(r, _)| r)
    }

    /// The writable region covering `[vaddr, vaddr + len)`.
    pub fn writable_at(&self, vaddr: u64, len: u64) -> Option<&WritableRegion> {
        self.writable
            .iter()
            .map(|(r, _)| r)
            .find(|r| r.covers(vaddr, len))
    }

    /// References held now, over every region.
    pub fn refs(&self) -> u64 {
        let n = |v: &Cell<u64>| v.get();
        self.regions.iter().map(|(_, c)| n(c)).sum::<u64>()
            + self.writable.iter().map(|(_, c)| n(c)).sum::<u64>()
    }

    /// Puts of an unknown handle or of a region with no reference left.
    pub fn misuses(&self) -> u64 {
        self.misuses.get()
    }

    /// The reference count behind handle `mr`.
    fn count(&self, mr: u32) -> Option<&Cell<u64>> {
        if mr & WRITABLE != 0 {
            self.writable.get((mr & !WRITABLE) as usize).map(|(_, c)| c)
        } else {
            self.regions.get(mr as usize).map(|(_, c)| c)
        }
    }
}

/// Takes a reference on the first region of `list` that `hit`s; its
/// index, if that fits a handle (below [`WRITABLE`]).
fn take_ref<R>(list: &[(R, Cell<u64>)], hit: impl Fn(&R) -> bool) -> Option<u32> {
    let (i, (_, refs)) = list.iter().enumerate().find(|(_, (r, _))| hit(r))?;
    let mr = u32::try_from(i).ok().filter(|i| i & WRITABLE == 0)?;
    refs.set(refs.get() + 1);
    Some(mr)
}

impl MrTable for Regions {
    fn get(&self, vaddr: u64, len: u32, rkey: u32) -> Option<u32> {
        take_ref(&self.regions, |r| {
            r.rkey == rkey && r.covers(vaddr, u64::from(len))
        })
    }

    fn put(&self, mr: u32) {
        match self.count(mr) {
            Some(refs) if refs.get() > 0 => refs.set(refs.get() - 1),
            _ => self.misuses.set(self.misuses.get() + 1),
        }
    }
}

impl WriteRegions for Regions {
    fn get_write(&self, vaddr: u64, len: u32, rkey: u32) -> Option<u32> {
        let mr = take_ref(&self.writable, |r| {
            r.rkey == rkey && r.covers(vaddr, u64::from(len))
        })?;
        Some(mr | WRITABLE)
    }

    fn write_pages(&self, mr: u32, vaddr: u64) -> Option<(&[Sge], u64)> {
        if mr & WRITABLE == 0 {
            return None;
        }
        let (r, _) = self.writable.get((mr & !WRITABLE) as usize)?;
        r.covers(vaddr, 0)
            .then(|| (r.pages.as_slice(), vaddr - r.base))
            .filter(|&(_, off)| off < r.len())
    }
}

impl SourceData for Regions {
    fn read(&self, vaddr: u64, out: &mut [u8]) -> bool {
        let inside = self
            .regions
            .iter()
            .any(|(r, _)| r.covers(vaddr, out.len() as u64));
        if inside {
            fill_pattern(vaddr, out);
        }
        inside
    }
}

/// Packet buffers an [`Outbox`] keeps for reuse.
const SPARE_PACKETS: usize = 1024;

/// Keeps every packet an engine sends, oldest first.
///
/// A caller that is done with a packet may hand its buffer back
/// ([`Outbox::recycle`]); the next sends reuse it instead of allocating,
/// so a long run's packets cost no allocation once warm.
#[derive(Debug)]
pub struct Outbox {
    buf: Vec<u8>,
    sent: VecDeque<Vec<u8>>,
    spare: Vec<Vec<u8>>,
    oversized: u64,
}

impl Default for Outbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Outbox {
    /// An empty outbox with a buffer of [`MAX_PACKET`] bytes.
    pub fn new() -> Self {
        Self {
            buf: vec![0; MAX_PACKET],
            sent: VecDeque::new(),
            spare: Vec::new(),
            oversized: 0,
        }
    }

    /// Takes the oldest packet.
    pub fn pop(&mut self) -> Option<Vec<u8>> {
        self.sent.pop_front()
    }

    /// Takes every packet, oldest first.
    pub fn drain(&mut self) -> impl Iterator<Item = Vec<u8>> + '_ {
        self.sent.drain(..)
    }

    /// Packets waiting.
    pub fn len(&self) -> usize {
        self.sent.len()
    }

    /// True if nothing waits.
    pub fn is_empty(&self) -> bool {
        self.sent.is_empty()
    }

    /// Takes back a packet's buffer (one [`Outbox::pop`] or
    /// [`Outbox::drain`] gave out) for the next sends; beyond a bounded
    /// number kept, it is freed.
    pub fn recycle(&mut self, packet: Vec<u8>) {
        if self.spare.len() < SPARE_PACKETS {
            self.spare.push(packet);
        }
    }

    /// Sends of more bytes than the buffer holds (an engine bug; the
    /// packet is dropped).
    pub fn oversized(&self) -> u64 {
        self.oversized
    }
}

impl PacketSink for Outbox {
    fn buffer(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    fn send(&mut self, len: usize) {
        match self.buf.get(..len) {
            Some(p) => {
                let mut v = self.spare.pop().unwrap_or_default();
                v.clear();
                v.extend_from_slice(p);
                self.sent.push_back(v);
            }
            None => self.oversized += 1,
        }
    }
}

/// Hands out destination pages by page frame number, in rising order,
/// with the gaps the caller asks for (so buffers are as fragmented as a
/// test wants). The pages are physical addresses of the software chip's
/// [`SimMemory`]: [`map`] adds them, [`unmap`] takes them away.
#[derive(Debug, Clone)]
pub struct PageAllocator {
    next_pfn: u64,
}

impl PageAllocator {
    /// Pages from `first_pfn` on.
    pub fn new(first_pfn: u64) -> Self {
        Self {
            next_pfn: first_pfn,
        }
    }

    /// `len` contiguous pages starting `gap` pages after the last page
    /// handed out.
    pub fn run(&mut self, gap: u64, len: u64) -> Sge {
        let start = self.next_pfn.wrapping_add(gap);
        self.next_pfn = start.wrapping_add(len);
        Sge {
            vaddr: start << 12,
            length: u32::try_from(len).unwrap_or(0).wrapping_mul(PAGE_SIZE),
        }
    }

    /// `pages` pages no two of which are contiguous, one SGE each, and a
    /// gap after them.
    pub fn scattered(&mut self, pages: u64) -> Vec<Sge> {
        let sges = (0..pages).map(|k| self.run(u64::from(k > 0), 1)).collect();
        self.next_pfn = self.next_pfn.wrapping_add(1);
        sges
    }

    /// `pages` pages (at most 8) with a one-page gap before page `k`
    /// wherever bit `k` of `gaps` is set (bit 0 is ignored); contiguous
    /// pages share an SGE. A gap follows the last page.
    pub fn with_gaps(&mut self, pages: u64, gaps: u8) -> Vec<Sge> {
        let mut sges: Vec<Sge> = Vec::new();
        for k in 0..pages.min(8) {
            let gap = k > 0 && gaps & (1 << k) != 0;
            let s = self.run(u64::from(gap), 1);
            match sges.last_mut() {
                Some(last) if !gap => last.length += s.length,
                _ => sges.push(s),
            }
        }
        self.next_pfn = self.next_pfn.wrapping_add(1);
        sges
    }
}

/// The page frame numbers of `sges`.
pub fn pfns(sges: &[Sge]) -> impl Iterator<Item = u64> + '_ {
    sges.iter()
        .flat_map(|s| (0..u64::from(s.length / PAGE_SIZE)).map(move |k| (s.vaddr >> 12) + k))
}

/// Adds the pages of `sges` to `mem`.
pub fn map(mem: &mut SimMemory, sges: &[Sge]) {
    pfns(sges).for_each(|p| mem.add_page(p));
}

/// Takes the pages of `sges` away from `mem`.
pub fn unmap(mem: &mut SimMemory, sges: &[Sge]) {
    pfns(sges).for_each(|p| mem.remove_page(p));
}

/// What comparing a buffer with the source found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DataCheck {
    /// Bytes equal to the source.
    pub verified: u64,
    /// Bytes that differ (a page not there counts whole).
    pub mismatched: u64,
    /// The first page that differs: its address and the remote address it
    /// was read from.
    pub first_bad: Option<(u64, u64)>,
}

/// Compares the pages of `sges` in `mem` with the source bytes from
/// remote address `remote` on, in place (no copy of either side).
pub fn check_data(mem: &SimMemory, sges: &[Sge], remote: u64) -> DataCheck {
    static ZERO: [u8; PAGE_SIZE as usize] = [0; PAGE_SIZE as usize];
    let mut c = DataCheck::default();
    for (k, pfn) in pfns(sges).enumerate() {
        let addr = pfn << 12;
        let from = remote.wrapping_add(k as u64 * u64::from(PAGE_SIZE));
        let bad = match mem.page(pfn) {
            // Never written: it reads as zeros.
            Ok(page) => mismatched_bytes(from, page.unwrap_or(&ZERO)),
            Err(_) => u64::from(PAGE_SIZE),
        };
        if bad > 0 && c.first_bad.is_none() {
            c.first_bad = Some((addr, from));
        }
        c.mismatched += bad;
        c.verified += u64::from(PAGE_SIZE) - bad;
    }
    c
}

/// A node's memory as the source of an engine's payloads (a WRITE's local
/// buffer). Kernel: the kernel virtual addresses the send path copies
/// from.
#[derive(Debug, Clone, Copy)]
pub struct MemSource<'a>(pub &'a SimMemory);

impl SourceData for MemSource<'_> {
    fn read(&self, vaddr: u64, out: &mut [u8]) -> bool {
        self.0.read(vaddr, out).is_ok()
    }
}

/// Writes the source bytes of remote addresses `remote..` into the pages
/// of `sges` in `mem` (a WRITE's local buffer). Pages not in `mem` are
/// skipped; returns the bytes written.
pub fn fill_data(mem: &mut SimMemory, sges: &[Sge], remote: u64) -> u64 {
    let mut page = [0u8; PAGE_SIZE as usize];
    let mut written = 0;
    for (k, pfn) in pfns(sges).enumerate() {
        fill_pattern(
            remote.wrapping_add(k as u64 * u64::from(PAGE_SIZE)),
            &mut page,
        );
        if mem.write(pfn << 12, &page).is_ok() {
            written += u64::from(PAGE_SIZE);
        }
    }
    written
}

/// Forgets what the pages of `sges` hold: they read as zeros again (so a
/// later check sees only what is written after this).
pub fn wipe(mem: &mut SimMemory, sges: &[Sge]) {
    unmap(mem, sges);
    map(mem, sges);
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_put_of_an_unknown_handle_or_twice_is_a_misuse() {
        let mut r = Regions::new();
        r.add(Region {
            base: 0x1000,
            len: 0x1000,
            rkey: 7,
        });
        assert_eq!(r.get(0x1800, 0x800, 7), Some(0));
        assert_eq!(r.get(0x1800, 0x801, 7), None, "past the end");
        assert_eq!(r.get(0x1000, 8, 8), None, "other key");
        assert_eq!(r.refs(), 1);
        r.put(0);
        r.put(0);
        r.put(5);
        assert_eq!((r.refs(), r.misuses()), (0, 2));
    }

    #[test]
    fn writable_regions_share_the_handle_space_and_give_their_pages() {
        let mut r = Regions::new();
        r.add(Region {
            base: 0x1000,
            len: 0x1000,
            rkey: 7,
        });
        let pages = PageAllocator::new(0x40).scattered(4);
        let h = r.add_writable(WritableRegion {
            base: 0x10_0000,
            rkey: 9,
            pages: pages.clone(),
        });
        assert_eq!(
            r.get_write(0x1000, 8, 7),
            None,
            "a READ region is not writable"
        );
        assert_eq!(r.get(0x10_0000, 8, 9), None, "nor a writable one readable");
        assert_eq!(r.get_write(0x10_1000, 0x3001, 9), None, "past the end");
        let m = r.get_write(0x10_1000, 0x3000, 9).unwrap();
        assert_eq!(m, h);
        let (p, off) = r.write_pages(m, 0x10_2000).unwrap();
        assert_eq!((p.len(), off), (4, 0x2000));
        assert_eq!(r.write_pages(0, 0x10_2000), None, "a READ handle");
        assert_eq!(r.write_pages(m, 0x10_4000), None, "outside");
        let w = r.writable_at(0x10_1000, 0x2000).unwrap();
        assert_eq!(w.pages_of(0x10_1000, 0x2000), &pages[1..3]);
        let a = r.get(0x1000, 8, 7).unwrap();
        assert_eq!(r.refs(), 2);
        r.put(m);
        r.put(a);
        r.put(m);
        assert_eq!((r.refs(), r.misuses()), (0, 1));
    }

    #[test]
    fn filled_pages_check_and_wiped_pages_do_not() {
        let mut mem = SimMemory::new();
        let sges = PageAllocator::new(0x10).scattered(3);
        map(&mut mem, &sges);
        assert_eq!(fill_data(&mut mem, &sges, 0x7000), 3 * u64::from(PAGE_SIZE));
        let c = check_data(&mem, &sges, 0x7000);
        assert_eq!((c.verified, c.mismatched), (3 * u64::from(PAGE_SIZE), 0));
        wipe(&mut mem, &sges[1..2]);
        let c = check_data(&mem, &sges, 0x7000);
        assert_eq!(c.first_bad, Some((sges[1].vaddr, 0x8000)));
    }

    #[test]
    fn page_layouts() {
        let mut p = PageAllocator::new(0x100);
        let s = p.scattered(3);
        assert_eq!(
            s.iter().map(|s| s.vaddr >> 12).collect::<Vec<_>>(),
            [0x100, 0x102, 0x104]
        );
        let g = p.with_gaps(4, 0b0100);
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].vaddr >> 12, g[0].length), (0x106, 2 * PAGE_SIZE));
        assert_eq!((g[1].vaddr >> 12, g[1].length), (0x109, 2 * PAGE_SIZE));
        assert_eq!(pfns(&g).count(), 4);
    }

    #[test]
    fn data_check_counts_and_names_the_first_bad_page() {
        let mut mem = SimMemory::new();
        let sges = PageAllocator::new(0x10).scattered(2);
        map(&mut mem, &sges);
        let mut page = vec![0u8; PAGE_SIZE as usize];
        fill_pattern(0x9000, &mut page);
        mem.write(sges[0].vaddr, &page).unwrap();
        let c = check_data(&mem, &sges, 0x9000);
        assert_eq!(c.verified + c.mismatched, 2 * u64::from(PAGE_SIZE));
        assert_eq!(c.first_bad, Some((sges[1].vaddr, 0x9000 + 4096)));
        unmap(&mut mem, &sges);
        assert_eq!(mem.page_count(), 0);
    }
}
