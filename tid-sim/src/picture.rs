// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! `--report run.svg`: the run over simulated time, drawn with
//! `plotters`' SVG backend from the report's [`Series`].
//!
//! Five panels share the time axis (simulated milliseconds):
//!
//! 1. TID (RcvArray) entries in use per receive context, against the
//!    context's entries;
//! 2. hardware flows in use, against the context's 32;
//! 3. QPs waiting on each of the context's queues (flow, TID space);
//! 4. throughput on the responder-to-requester link against the 100 Gb/s
//!    link rate;
//! 5. recovery marks: restarts, NAKs received and retry timeouts, one row
//!    each, a mark wherever the count rose (its label says how many).

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::report::{LINK_BITS_PER_S, Report};
use crate::series::{Sample, Series};

/// Width and height of the picture, pixels.
pub const SIZE: (u32, u32) = (1100, 1300);

/// The legend label of each series drawn, as the SVG holds it.
pub const LABELS: [&str; 9] = [
    "TID entries in use, context 0",
    "RcvArray entries of the context",
    "hardware flows in use",
    "hardware flows of the context",
    "QPs waiting for a flow",
    "QPs waiting for TID space",
    "READ_RESP link throughput",
    "link rate (100 Gb/s)",
    "restarts / NAKs / timeouts",
];

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
/// One line of a panel: label, colour, dashed, points.
type Line<'l> = (&'l str, RGBColor, bool, Vec<(f64, f64)>);
/// One row of marks: name, colour, (time, count) where the count rose.
type Row<'l> = (&'l str, RGBColor, Vec<(u64, u64)>);
/// One panel: title, y axis, y maximum, lines.
type Panel<'l> = (&'l str, &'l str, f64, Vec<Line<'l>>);
type Fallible = Result<(), Box<dyn std::error::Error>>;

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// A panel's chart.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The legend box of a panel, upper right.
fn legend<'a, 'b: 'a>(chart: &mut Chart<'a, 'b>) -> Fallible {
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()?;
    Ok(())
}

/// Draws one panel of lines: `(label, colour, dashed, points)`.
fn panel(
    area: &Area<'_>,
    title: &str,
    y_desc: &str,
    x_max: f64,
    y_max: f64,
    lines: &[Line<'_>],
) -> Fallible {
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
    chart
        .configure_mesh()
        .x_desc("simulated time (ms)")
        .y_desc(y_desc)
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for (label, colour, dashed, pts) in lines {
        let style = ShapeStyle::from(colour).stroke_width(if *dashed { 1 } else { 2 });
        let c = *colour;
        if *dashed {
            chart.draw_series(DashedLineSeries::new(pts.iter().copied(), 6, 4, style))?
        } else {
            chart.draw_series(LineSeries::new(pts.iter().copied(), style))?
        }
        .label(*label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    legend(&mut chart)
}

/// Points of a value that holds until the next one: a step at each.
fn steps(pts: impl IntoIterator<Item = (f64, f64)>) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (t, v) in pts {
        if let Some(&(_, prev)) = out.last() {
            out.push((t, prev));
        }
        out.push((t, v));
    }
    out
}

/// Points of one counter over time (it holds between samples).
fn line(s: &Series, f: impl Fn(&Sample) -> f64) -> Vec<(f64, f64)> {
    steps(s.samples.iter().map(|x| (ms(x.t_ns), f(x))))
}

/// The colour of a capacity line: the link rate red, the others grey.
fn value_grey(label: &str) -> RGBColor {
    if label == LABELS[7] {
        RED
    } else {
        RGBColor(120, 120, 120)
    }
}

/// The flat line of a capacity across the run.
fn flat(x_max: f64, y: f64) -> Vec<(f64, f64)> {
    vec![(0.0, y), (x_max, y)]
}

/// The recovery panel: one row of marks per counter.
fn marks(area: &Area<'_>, s: &Series, x_max: f64) -> Fallible {
    let rows: [Row<'_>; 3] = [
        ("restart", RED, s.marks(|x| x.restarts)),
        ("NAK", MAGENTA, s.marks(|x| x.naks)),
        ("timeout", BLACK, s.marks(|x| x.timeouts)),
    ];
    let mut chart = ChartBuilder::on(area)
        .caption(LABELS[8], ("sans-serif", 18))
        .margin(8)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..x_max, 0f64..4f64)?;
    chart
        .configure_mesh()
        .x_desc("simulated time (ms)")
        .y_labels(5)
        .y_label_formatter(&|y| match y.round() as i32 {
            3 => "restart".into(),
            2 => "NAK".into(),
            1 => "timeout".into(),
            _ => String::new(),
        })
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for (k, (name, colour, pts)) in rows.into_iter().enumerate() {
        let y = 3.0 - k as f64;
        let total: u64 = pts.iter().map(|p| p.1).sum();
        chart
            .draw_series(
                pts.iter()
                    .map(|&(t, _)| TriangleMarker::new((ms(t), y), 5, colour.filled())),
            )?
            .label(format!("{name}: {total}"))
            .legend(move |(x, y)| TriangleMarker::new((x + 10, y), 5, colour.filled()));
    }
    legend(&mut chart)
}

fn draw(root: &Area<'_>, r: &Report, s: &Series) -> Fallible {
    root.fill(&WHITE)?;
    let verdict = if r.ok() { "PASS" } else { "FAIL" };
    let root = root.titled(
        &format!("tid-sim {verdict}: {}", r.inputs_line()),
        ("sans-serif", 20),
    )?;
    let areas = root.split_evenly((5, 1));
    let x_max = ms(r.sim_ns.max(s.samples.last().map_or(1, |x| x.t_ns))).max(1e-3);
    let cap = f64::from(s.tid_capacity.first().copied().unwrap_or(1));
    let flows = f64::from(s.flow_capacity);
    let qps = f64::from(s.qps.max(1));
    // Each interval's mean throughput, drawn over the interval it covers.
    let mut tp = Vec::new();
    let mut from = 0.0;
    for (t, b) in s.throughput_bps() {
        tp.push((from, b / 1e9));
        tp.push((ms(t), b / 1e9));
        from = ms(t);
    }
    let link = LINK_BITS_PER_S / 1e9;
    let blue = RGBColor(31, 119, 180);
    let orange = RGBColor(230, 120, 20);
    let green = RGBColor(30, 150, 60);
    let tid0 = line(s, |x| {
        f64::from(x.tid_entries.first().copied().unwrap_or(0))
    });
    let flows_used = line(s, |x| f64::from(x.flows));
    let wait_flow = line(s, |x| f64::from(x.wait_flow));
    let wait_tid = line(s, |x| f64::from(x.wait_tid));
    // A value against its capacity (dashed), with headroom above.
    let against = |title, y, value: Line<'static>, cap_label, cap: f64| -> Panel<'static> {
        let lines = vec![
            value,
            (cap_label, value_grey(cap_label), true, flat(x_max, cap)),
        ];
        (title, y, cap * 1.2, lines)
    };
    let panels: [Panel<'_>; 4] = [
        against(
            "TID entries in use",
            "entries",
            (LABELS[0], blue, false, tid0),
            LABELS[1],
            cap,
        ),
        against(
            "hardware flows in use",
            "flows",
            (LABELS[2], green, false, flows_used),
            LABELS[3],
            flows,
        ),
        (
            "QPs waiting, by queue",
            "QPs",
            qps * 1.15,
            vec![
                (LABELS[4], orange, false, wait_flow),
                (LABELS[5], blue, false, wait_tid),
            ],
        ),
        against(
            "throughput, responder to requester",
            "Gb/s",
            (LABELS[6], blue, false, tp),
            LABELS[7],
            link,
        ),
    ];
    for (area, (title, y, y_max, lines)) in areas.iter().zip(panels) {
        panel(area, title, y, x_max, y_max, &lines)?;
    }
    if let Some(area) = areas.get(4) {
        marks(area, s, x_max)?;
    }
    root.present()?;
    Ok(())
}

/// The picture of `r` (which must carry its series) as an SVG document.
///
/// # Errors
///
/// A message if the report has no series or plotters fails.
pub fn render(r: &Report) -> Result<String, String> {
    let s = r
        .series
        .as_ref()
        .ok_or("the report has no series (run with --report)")?;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        draw(&root, r, s).map_err(|e| e.to_string())?;
    }
    Ok(svg)
}
