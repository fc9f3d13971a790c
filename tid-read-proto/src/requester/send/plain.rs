// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The plain RDMA READ requests of the send engine: a new READ's
//! request, and after a restart in its middle a request for the rest.

use hfi1_hal::Psn;
use tid_flow::FlowPlatform;

use super::Step;
use crate::plain_read;
use crate::rc::{EngineError, PacketSink};
use crate::requester::{Env, Requester, SendState};
use crate::wire::reth;

impl<P: FlowPlatform> Requester<P> {
    /// The rest of a plain READ after a restart in its middle: a request
    /// for the bytes from `s_psn` on. Kernel: the
    /// `OP(RDMA_READ_RESPONSE_MIDDLE)` case of `hfi1_make_rc_req()`.
    pub(super) fn plain_rest(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
        i: u32,
    ) -> Result<Step, EngineError> {
        let pmtu = env.conn.pmtu;
        let psn = self.psn;
        let Some(w) = self.sq.get(i).filter(|w| w.tid.is_none()) else {
            self.s_state = SendState::Start;
            return Ok(Step::Stop);
        };
        let skipped = u32::try_from(psn.delta(w.psn))
            .unwrap_or(0)
            .saturating_mul(pmtu);
        let r = reth::Repr {
            vaddr: w.remote_addr.wrapping_add(u64::from(skipped)),
            rkey: w.rkey,
            length: w.length.saturating_sub(skipped),
        };
        let lpsn = w.lpsn;
        self.send_plain(env, sink, psn, &r)?;
        self.stats.retransmits += 1;
        self.s_state = SendState::Start;
        self.psn = lpsn.add(1);
        self.sq.cur = i.wrapping_add(1);
        Ok(Step::Sent)
    }

    /// Sends one RDMA READ request.
    pub(super) fn send_plain(
        &mut self,
        env: &mut Env<'_, '_, P>,
        sink: &mut impl PacketSink,
        psn: Psn,
        r: &reth::Repr,
    ) -> Result<(), EngineError> {
        let conn = env.conn;
        let n = plain_read::write_request(sink.buffer(), conn.path, conn.remote_verbs_qpn, psn, r)?;
        sink.send(n);
        self.sent(0);
        Ok(())
    }
}
