// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What an AETH says to a requester, as `do_rc_ack()` reads it: the class
//! from the syndrome's top three bits (`aeth >> IB_AETH_NAK_SHIFT`), the
//! code or timer from its low five.

use super::WcStatus;
use crate::wire::aeth::{self, NakCode};

/// The class and code of an AETH. Kernel: the `switch (aeth >>
/// IB_AETH_NAK_SHIFT)` of `do_rc_ack()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AethKind {
    /// 0b000: an ACK (the low bits are the credit count).
    Ack,
    /// 0b001: an RNR NAK; the low five bits index the RNR timer table.
    Rnr {
        /// Index into the RNR timer table (0..=31).
        timer: u8,
    },
    /// 0b011: a NAK with its five-bit code.
    Nak {
        /// The code (0 PSN error, 1 invalid request, 2 remote access,
        /// 3 remote operational, 4 invalid RD request, others reserved).
        code: u8,
    },
    /// Any other class (reserved): the kernel ignores it.
    Reserved,
}

impl AethKind {
    /// Classifies an AETH.
    pub const fn of(a: &aeth::Repr) -> Self {
        let low = a.syndrome & 0x1F;
        match a.syndrome >> 5 {
            0 => Self::Ack,
            1 => Self::Rnr { timer: low },
            3 => Self::Nak { code: low },
            _ => Self::Reserved,
        }
    }

    /// Kernel: `if (aeth >> IB_AETH_NAK_SHIFT) ack_psn--`.
    ///
    /// True for every class but an ACK (`ack_psn` is then the PSN before
    /// the AETH's).
    pub const fn is_nak(self) -> bool {
        !matches!(self, Self::Ack)
    }
}

/// What a requester does with a NAK code. Kernel: the `case 3` of
/// `do_rc_ack()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NakAction {
    /// PSN sequence error: restart at the NAK's PSN.
    Restart,
    /// A class-B error: the oldest request completes with this status and
    /// the QP goes to the error state.
    Fatal(WcStatus),
    /// Any other code (invalid RD request, reserved): ignored.
    Ignore,
}

impl NakAction {
    /// The action for NAK code `code`.
    pub const fn of(code: u8) -> Self {
        const PSN: u8 = NakCode::PsnError.syndrome() & 0x1F;
        const INV: u8 = NakCode::InvalidRequest.syndrome() & 0x1F;
        const ACC: u8 = NakCode::RemoteAccessError.syndrome() & 0x1F;
        const OP: u8 = NakCode::RemoteOperationalError.syndrome() & 0x1F;
        match code {
            PSN => Self::Restart,
            INV => Self::Fatal(WcStatus::RemoteInvalidRequest),
            ACC => Self::Fatal(WcStatus::RemoteAccess),
            OP => Self::Fatal(WcStatus::RemoteOperational),
            _ => Self::Ignore,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(s: u8) -> AethKind {
        AethKind::of(&aeth::Repr {
            syndrome: s,
            msn: 0,
        })
    }

    /// The classes by the syndrome's top bits, as `do_rc_ack()` switches
    /// on them: an RNR NAK (0b001) is not an ACK, 0b010 is reserved.
    #[test]
    fn classes_and_codes() {
        assert_eq!(kind(0x1F), AethKind::Ack);
        assert_eq!(kind(0x2E), AethKind::Rnr { timer: 14 });
        assert_eq!(kind(0x40), AethKind::Reserved);
        assert_eq!(kind(0x63), AethKind::Nak { code: 3 });
        assert!(kind(0x2E).is_nak() && !kind(0x00).is_nak());
        assert_eq!(NakAction::of(0), NakAction::Restart);
        assert_eq!(
            NakAction::of(1),
            NakAction::Fatal(WcStatus::RemoteInvalidRequest)
        );
        assert_eq!(NakAction::of(2), NakAction::Fatal(WcStatus::RemoteAccess));
        assert_eq!(
            NakAction::of(3),
            NakAction::Fatal(WcStatus::RemoteOperational)
        );
        assert_eq!(NakAction::of(4), NakAction::Ignore);
        assert_eq!(NakAction::of(31), NakAction::Ignore);
    }
}
