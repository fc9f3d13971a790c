// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What tid-sim's capture tests share: reading a capture with `tshark`.

pub mod tshark;
