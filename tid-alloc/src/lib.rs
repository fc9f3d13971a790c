// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! Pagesets and TID groups.
#![cfg_attr(not(test), no_std)]
