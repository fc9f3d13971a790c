// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! What the parser targets share: the parse -> emit round trip of one wire
//! header.

/// Reads `data` through the view `$m::$view` (`Packet`, or `Record` for
/// ERF); gives the view to `$touch` (the accessors a parser target also
/// exercises); if the header parses (`$m::Repr::parse`), emits it again
/// over the header's bytes all set to `$fill` and checks every byte came
/// back. `$what` names the header in the failure.
macro_rules! round_trip {
    (
        $m:ident :: $view:ident, $data:expr, $fill:expr, $what:literal
        $(, |$v:ident| $touch:expr)?
    ) => {{
        let data: &[u8] = $data;
        if let Ok(view) = $m::$view::new_checked(data) {
            $({
                let $v = &view;
                let _ = $touch;
            })?
            if let Ok(r) = $m::Repr::parse(&view) {
                let mut out = data.to_vec();
                out[..$m::HEADER_LEN].fill($fill);
                r.emit(&mut $m::$view::new_unchecked(&mut out[..]))
                    .expect(concat!("a parsed ", $what, " emits"));
                assert_eq!(&out[..], data);
            }
        }
    }};
}
pub(crate) use round_trip;
