// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Kernel-only platform: the global allocator on `kmalloc`/`kfree` and the
//! panic handler (built for `target_os = "none"` only).
//!
//! The C side (`kbuild/glue.c`) provides the three functions imported here.

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::c_void;
use core::fmt::Write;

unsafe extern "C" {
    /// `kmalloc(size)`; the glue picks `GFP_ATOMIC` when the caller cannot
    /// sleep (spinlock held, interrupts off, softirq) and `GFP_KERNEL`
    /// otherwise. Returns memory aligned to at least `min(size, 4096)`
    /// rounded to a power of two when `size` is a power of two, and to 8
    /// always (kmalloc's guarantees).
    fn hfi1_tid_kmalloc(size: usize) -> *mut c_void;
    /// `kfree(ptr)`.
    fn hfi1_tid_kfree(ptr: *mut c_void);
    /// Prints `msg` with `pr_emerg()` and `BUG()`s. Typed as returning
    /// because objtool does not know a C function of ours never returns:
    /// the caller ends in a trap instead.
    fn hfi1_tid_panic(msg: *const u8, len: usize);
}

/// The module's global allocator.
struct KernelAllocator;

/// The smallest alignment `kmalloc` guarantees on x86-64.
const KMALLOC_MIN_ALIGN: usize = 8;

impl KernelAllocator {
    /// The size to ask `kmalloc` for so the result has `layout`'s
    /// alignment: kmalloc aligns a power-of-two size to itself (up to the
    /// page size), so a stricter alignment is met by asking for at least
    /// that many bytes, rounded to a power of two.
    fn kmalloc_size(layout: Layout) -> Option<usize> {
        if layout.align() <= KMALLOC_MIN_ALIGN {
            return Some(layout.size().max(1));
        }
        if layout.align() > 4096 {
            return None;
        }
        layout
            .size()
            .max(layout.align())
            .checked_next_power_of_two()
    }
}

// SAFETY: `kmalloc` returns unique live blocks of at least the requested
// size with the alignment argued in `kmalloc_size`, or null; `kfree` takes
// back any block `kmalloc` returned.
unsafe impl GlobalAlloc for KernelAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match Self::kmalloc_size(layout) {
            // SAFETY: plain kmalloc call.
            Some(size) => unsafe { hfi1_tid_kmalloc(size) }.cast(),
            None => core::ptr::null_mut(),
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above.
        unsafe { hfi1_tid_kfree(ptr.cast()) }
    }
}

#[global_allocator]
static ALLOCATOR: KernelAllocator = KernelAllocator;

/// A fixed buffer the panic message is formatted into (no allocation on
/// the panic path).
struct MsgBuf {
    buf: [u8; 256],
    len: usize,
}

impl Write for MsgBuf {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        for &b in s.as_bytes() {
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = b;
                self.len += 1;
            }
        }
        Ok(())
    }
}

/// Prints the message and BUGs, as Rust-for-Linux's panic handler does.
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    let mut m = MsgBuf {
        buf: [0; 256],
        len: 0,
    };
    let _ = write!(m, "{info}");
    // SAFETY: `m.buf[..m.len]` is initialised.
    unsafe { hfi1_tid_panic(m.buf.as_ptr(), m.len) };
    // SAFETY: `ud2` raises #UD, which the kernel reports like `BUG()`; it
    // touches no memory and never falls through.
    unsafe { core::arch::asm!("ud2", options(noreturn, nomem, nostack)) }
}
