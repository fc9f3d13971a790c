// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The READ_REQ payload: TID entries, one 32-bit little-endian word each
//! (SPEC §3 "TID entry"). Kernel: the `flow->tid_entry[]` array, sent as the
//! request's payload by `hfi1_build_tid_rdma_read_packet()` and copied back
//! out of the packet by `tid_rdma_rcv_read_request()`.
//!
//! See the panic contract in [`crate::wire`].

use hfi1_hal::TidEntry;

use super::{Error, Result};

/// Bytes per TID entry.
pub const ENTRY_LEN: usize = 4;

/// A read-only view of a payload of TID entries.
#[derive(Debug, Clone, Copy)]
pub struct Entries<'a> {
    bytes: &'a [u8],
}

impl<'a> Entries<'a> {
    /// Wraps a payload without checking it; a trailing partial word is
    /// ignored.
    pub const fn new_unchecked(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    /// Wraps a payload; its length must be a whole number of entries.
    pub fn new_checked(bytes: &'a [u8]) -> Result<Self> {
        if bytes.len() % ENTRY_LEN != 0 {
            return Err(Error::Malformed("tid_entries.len"));
        }
        Ok(Self { bytes })
    }

    /// Number of whole entries.
    pub fn len(&self) -> usize {
        self.bytes.len() / ENTRY_LEN
    }

    /// True when there is no whole entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entry `i`, or `None` past the end.
    pub fn get(&self, i: usize) -> Option<TidEntry> {
        let start = i.checked_mul(ENTRY_LEN)?;
        match self.bytes.get(start..start.checked_add(ENTRY_LEN)?)? {
            &[a, b, c, d] => Some(TidEntry::from_raw(u32::from_le_bytes([a, b, c, d]))),
            _ => None,
        }
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = TidEntry> + 'a {
        self.bytes.chunks_exact(ENTRY_LEN).map(|c| {
            let mut w = [0u8; ENTRY_LEN];
            w.copy_from_slice(c);
            TidEntry::from_raw(u32::from_le_bytes(w))
        })
    }
}

/// Bytes needed to carry `n` entries.
pub const fn payload_len(n: usize) -> usize {
    n.saturating_mul(ENTRY_LEN)
}

/// Writes `entries` at the start of `buf`; returns the bytes written.
pub fn emit(entries: &[TidEntry], buf: &mut [u8]) -> Result<usize> {
    let need = payload_len(entries.len());
    let out = buf.get_mut(..need).ok_or(Error::Truncated)?;
    for (slot, e) in out.chunks_exact_mut(ENTRY_LEN).zip(entries) {
        slot.copy_from_slice(&e.raw().to_le_bytes());
    }
    Ok(need)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hfi1_hal::TidCtrl;

    #[test]
    fn literal() {
        // IDX 1 CTRL 3 LEN 64 = 0x0070_0040; IDX 1023 CTRL 2 LEN 3.
        let bytes = [0x40, 0x00, 0x70, 0x00, 0x03, 0x00, 0xE0, 0xFF];
        let e = Entries::new_checked(&bytes).unwrap();
        assert_eq!(e.len(), 2);
        assert_eq!(e.get(0), Some(TidEntry::new(1, TidCtrl::Pair, 64).unwrap()));
        assert_eq!(
            e.get(1),
            Some(TidEntry::new(1023, TidCtrl::Odd, 3).unwrap())
        );
        assert_eq!(e.get(2), None);
        let v: Vec<_> = e.iter().collect();
        let mut out = [0u8; 8];
        assert_eq!(emit(&v, &mut out), Ok(8));
        assert_eq!(out, bytes);
        assert!(emit(&v, &mut out[..7]).is_err());
        assert!(Entries::new_checked(&bytes[..7]).is_err());
        assert_eq!(Entries::new_unchecked(&bytes[..7]).len(), 1);
    }
}
