//! `fzmod bench --sweep`: a rate–distortion sweep of several pipelines over several bounds on
//! one field, as a table, JSON and an SVG plot of PSNR against compression ratio, so that a
//! user can pick a preset by looking.

use std::fmt::Write as _;

/// One pipeline at one bound.
#[derive(Clone, Debug)]
pub struct Point {
    pub pipeline: String,
    pub mode: String,
    pub bound: f64,
    pub ratio: f64,
    /// Bits per value of the archive.
    pub bits_per_value: f64,
    pub psnr_db: f64,
    pub max_abs_error: f64,
    pub compress_gbps: f64,
    pub decompress_gbps: f64,
}

impl Point {
    /// JSON (an exact reconstruction's infinite PSNR becomes null).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "pipeline": self.pipeline, "mode": self.mode, "bound": self.bound, "ratio": self.ratio,
            "bits_per_value": self.bits_per_value, "psnr_db": self.psnr_db, "max_abs_error": self.max_abs_error,
            "compress_gbps": self.compress_gbps, "decompress_gbps": self.decompress_gbps,
        })
    }
}

/// The sweep as a table, one line per point.
pub fn table(points: &[Point]) -> String {
    let mut t = format!(
        "{:<16}{:>10}{:>10}{:>11}{:>11}{:>13}{:>11}{:>11}\n",
        "pipeline", "bound", "ratio", "bits/val", "PSNR dB", "max error", "comp GB/s", "dec GB/s"
    );
    for p in points {
        let _ = writeln!(
            t,
            "{:<16}{:>10}{:>10.3}{:>11.3}{:>11.2}{:>13.4e}{:>11.3}{:>11.3}",
            p.pipeline,
            format!("{} {:e}", p.mode, p.bound),
            p.ratio,
            p.bits_per_value,
            p.psnr_db,
            p.max_abs_error,
            p.compress_gbps,
            p.decompress_gbps
        );
    }
    t
}

/// Colours of the plot's lines, in pipeline order (repeating).
const COLOURS: [&str; 10] =
    ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

/// Ticks of a log axis between `lo` and `hi`: 1, 2, 5 × powers of ten.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut ticks = Vec::new();
    let mut decade = 10f64.powf(lo.log10().floor());
    while decade <= hi {
        for m in [1.0, 2.0, 5.0] {
            let t = m * decade;
            if t >= lo && t <= hi {
                ticks.push(t);
            }
        }
        decade *= 10.0;
    }
    ticks
}

/// PSNR (y, dB) against compression ratio (x, log scale), one line per pipeline in order of
/// bound. Points with an infinite PSNR (lossless) are left out of the plot.
pub fn svg(points: &[Point], title: &str) -> String {
    let finite: Vec<&Point> = points.iter().filter(|p| p.psnr_db.is_finite() && p.ratio > 0.0).collect();
    let (w, h, left, right, top, bottom) = (760.0, 500.0, 70.0, 190.0, 40.0, 55.0);
    let (rmin, rmax) = finite.iter().fold((f64::INFINITY, 0f64), |(a, b), p| (a.min(p.ratio), b.max(p.ratio)));
    let (pmin, pmax) =
        finite.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.psnr_db), b.max(p.psnr_db)));
    let (x0, x1) = if finite.is_empty() { (1.0, 10.0) } else { (rmin / 1.2, rmax * 1.2) };
    let (y0, y1) = if finite.is_empty() {
        (0.0, 100.0)
    } else {
        ((pmin / 10.0).floor() * 10.0, (pmax / 10.0).ceil() * 10.0 + 1e-9)
    };
    let x = |r: f64| left + (r.ln() - x0.ln()) / (x1.ln() - x0.ln()) * (w - left - right);
    let y = |p: f64| h - bottom - (p - y0) / (y1 - y0).max(1e-9) * (h - top - bottom);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">{}</text>\n",
        (w - right + left) / 2.0,
        escape(title)
    );
    let (plot_w, plot_h) = (w - left - right, h - top - bottom);
    let _ = writeln!(
        s,
        "<rect x=\"{left}\" y=\"{top}\" width=\"{plot_w}\" height=\"{plot_h}\" fill=\"none\" stroke=\"black\"/>"
    );
    for t in log_ticks(x0, x1) {
        let _ = writeln!(
            s,
            "<line x1=\"{0:.1}\" y1=\"{top}\" x2=\"{0:.1}\" y2=\"{1}\" stroke=\"#ddd\"/><text x=\"{0:.1}\" y=\"{2}\" text-anchor=\"middle\">{t}</text>",
            x(t),
            h - bottom,
            h - bottom + 16.0
        );
    }
    let mut p = y0;
    while p <= y1 {
        let _ = writeln!(
            s,
            "<line x1=\"{left}\" y1=\"{0:.1}\" x2=\"{1}\" y2=\"{0:.1}\" stroke=\"#ddd\"/><text x=\"{2}\" y=\"{3:.1}\" text-anchor=\"end\">{p}</text>",
            y(p),
            w - right,
            left - 6.0,
            y(p) + 4.0
        );
        p += 10.0;
    }
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">compression ratio (log scale)</text>\n\
         <text x=\"18\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 18 {})\">PSNR (dB)</text>",
        left + plot_w / 2.0,
        h - 12.0,
        top + plot_h / 2.0,
        top + plot_h / 2.0
    );
    let mut names: Vec<&str> = Vec::new();
    for q in &finite {
        if !names.contains(&q.pipeline.as_str()) {
            names.push(&q.pipeline);
        }
    }
    for (k, name) in names.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        let mut line: Vec<&&Point> = finite.iter().filter(|q| q.pipeline == *name).collect();
        line.sort_by(|a, b| a.ratio.total_cmp(&b.ratio));
        let coords: Vec<String> = line.iter().map(|q| format!("{:.1},{:.1}", x(q.ratio), y(q.psnr_db))).collect();
        let _ = writeln!(
            s,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"/>",
            coords.join(" ")
        );
        for q in &line {
            let _ = writeln!(
                s,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{colour}\"><title>{} {} {:e}: ratio {:.2}, PSNR {:.2} dB</title></circle>",
                x(q.ratio),
                y(q.psnr_db),
                escape(&q.pipeline),
                q.mode,
                q.bound,
                q.ratio,
                q.psnr_db
            );
        }
        let ly = top + 10.0 + 20.0 * k as f64;
        let _ = writeln!(
            s,
            "<line x1=\"{0}\" y1=\"{ly}\" x2=\"{1}\" y2=\"{ly}\" stroke=\"{colour}\" stroke-width=\"3\"/><text x=\"{2}\" y=\"{3}\">{4}</text>",
            w - right + 12.0,
            w - right + 36.0,
            w - right + 42.0,
            ly + 4.0,
            escape(name)
        );
    }
    s + "</svg>\n"
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(pipeline: &str, bound: f64, ratio: f64, psnr_db: f64) -> Point {
        Point {
            pipeline: pipeline.into(),
            mode: "rel".into(),
            bound,
            ratio,
            bits_per_value: 32.0 / ratio,
            psnr_db,
            max_abs_error: bound,
            compress_gbps: 1.0,
            decompress_gbps: 1.0,
        }
    }

    #[test]
    fn the_plot_has_a_line_per_pipeline_and_a_marker_per_point() {
        let points = [
            point("pfpl", 1e-2, 28.7, 60.1),
            point("pfpl", 1e-3, 10.9, 79.9),
            point("a<b", 1e-2, 60.0, 58.0),
            point("lossless", 1e-3, 1.5, f64::INFINITY),
        ];
        let svg = svg(&points, "etopo5 & friends");
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 3);
        assert!(svg.contains("a&lt;b") && svg.contains("etopo5 &amp; friends"));
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        let table = table(&points);
        assert_eq!(table.lines().count(), 5);
        assert!(table.contains("rel 1e-2"));
    }

    #[test]
    fn log_ticks_cover_the_range() {
        assert_eq!(log_ticks(1.5, 60.0), vec![2.0, 5.0, 10.0, 20.0, 50.0]);
        assert!(svg(&[], "empty").contains("</svg>"));
    }
}
