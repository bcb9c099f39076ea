//! latency.svg and rss.svg with plotters' SVG backend (no font files needed: text is left to the
//! SVG viewer).
use std::path::Path;

use plotters::prelude::*;

use crate::error::{Error, Result};
use crate::results::{Phase, Run};
use crate::timeline::JobMarks;

const SIZE: (u32, u32) = (960, 540);
const COLORS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
];

/// A named series of (x, y) points.
type Series = (String, Vec<(f64, f64)>);

/// Per-job latency (y) by submission time (x), from `submitted` to `milestone`.
fn latency_points(phase: &Phase, milestone: fn(&JobMarks) -> Option<f64>) -> Vec<(f64, f64)> {
    phase
        .timeline
        .submitted_jobs()
        .iter()
        .filter_map(|m| Some((m.submitted?, milestone(m)? - m.submitted?)))
        .collect()
}

pub fn latency_series(run: &Run) -> Vec<Series> {
    let mut series = vec![
        (
            format!("{}: creation -> all pods exist", run.operator.name),
            latency_points(&run.operator, |m| m.all_pods),
        ),
        (
            format!("{}: creation -> all pods Running", run.operator.name),
            latency_points(&run.operator, |m| m.all_running),
        ),
    ];
    for plain in run.ceiling.iter().chain(&run.replay) {
        series.push((
            format!("{}: first create -> all pods exist", plain.name),
            latency_points(plain, |m| m.all_pods),
        ));
    }
    series
}

pub fn rss_series(run: &Run) -> Vec<Series> {
    [Some(&run.operator), run.all_schemes.as_ref()]
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p.name.clone(),
                p.samples.iter().map(|s| (s.t, s.rss_mb)).collect(),
            )
        })
        .collect()
}

/// Writes both plots into `dir`.
pub fn write(run: &Run, dir: &Path) -> Result<()> {
    chart(
        &dir.join("latency.svg"),
        "Per-job latency by submission time",
        "submitted at (s since the first job)",
        "latency (s)",
        &latency_series(run),
        false,
    )?;
    chart(
        &dir.join("rss.svg"),
        "Operator resident memory",
        "time (s since the operator was ready)",
        "RSS (MB)",
        &rss_series(run),
        true,
    )
}

/// Upper bound of an axis with a little headroom; 1 when empty.
fn upper(values: impl Iterator<Item = f64>) -> f64 {
    let max = values.filter(|v| v.is_finite()).fold(0.0, f64::max);
    if max > 0.0 { max * 1.05 } else { 1.0 }
}

fn chart(path: &Path, title: &str, x_desc: &str, y_desc: &str, series: &[Series], lines: bool) -> Result<()> {
    let fail = |e: &dyn std::fmt::Display| Error::Plot {
        file: path.display().to_string(),
        message: e.to_string(),
    };
    let x_max = upper(series.iter().flat_map(|(_, pts)| pts.iter().map(|p| p.0)));
    let y_max = upper(series.iter().flat_map(|(_, pts)| pts.iter().map(|p| p.1)));
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)
        .map_err(|e| fail(&e))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(|e| fail(&e))?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        if lines {
            chart
                .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))
                .map_err(|e| fail(&e))?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        } else {
            chart
                .draw_series(
                    points
                        .iter()
                        .map(|&(x, y)| Circle::new((x, y), 2, color.mix(0.6).filled())),
                )
                .map_err(|e| fail(&e))?
                .label(name)
                .legend(move |(x, y)| Circle::new((x + 9, y), 4, color.filled()));
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::Sample;
    use crate::timeline::{PodProgress, Timeline};

    #[test]
    fn writes_svg_plots() {
        let mut t = Timeline::new(1);
        t.submitted("a", 0.5);
        t.pod("a", "a-0", PodProgress::Ran, 1.25);
        let mut run = Run {
            operator: Phase::from_timeline("operator", t, false),
            ..Run::default()
        };
        run.operator.samples = vec![
            Sample {
                t: 0.0,
                rss_mb: 10.0,
                peak_rss_mb: 10.0,
                cpu_seconds: 0.0,
            },
            Sample {
                t: 0.25,
                rss_mb: 12.0,
                peak_rss_mb: 12.0,
                cpu_seconds: 0.1,
            },
        ];
        assert_eq!(latency_series(&run)[0].1, vec![(0.5, 0.75)]);
        let dir = tempfile::tempdir().unwrap();
        write(&run, dir.path()).unwrap();
        for file in ["latency.svg", "rss.svg"] {
            let text = std::fs::read_to_string(dir.path().join(file)).unwrap();
            assert!(
                text.starts_with("<svg") && text.contains("</svg>"),
                "{file}: {text}"
            );
        }
    }
}
