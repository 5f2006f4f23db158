//! SVG plot frames a paper can use: real axes with ticks, tick labels and axis titles
//! with units, a palette and a legend. Each suite draws its own plots inside them.

use super::escape;
use std::fmt::Write as _;

pub const PALETTE: [&str; 10] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Ticks at 1, 2 or 5 times a power of ten, covering [lo, hi] with about `n` steps.
pub fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|k| k * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last).map(|k| k as f64 * step).collect()
}

pub fn tick_label(v: f64, ticks: &[f64]) -> String {
    let step = if ticks.len() > 1 {
        (ticks[1] - ticks[0]).abs()
    } else {
        1.0
    };
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let v = if v.abs() < step * 1e-6 { 0.0 } else { v };
    format!("{v:.decimals$}")
}

/// A plotting area: pixel box and the data range it shows.
pub struct Frame {
    pub left: f64,
    pub top: f64,
    pub width: f64,
    pub height: f64,
    pub x: (f64, f64),
    pub y: (f64, f64),
}

impl Frame {
    pub fn px(&self, v: f64) -> f64 {
        self.left + (v - self.x.0) / (self.x.1 - self.x.0) * self.width
    }
    pub fn py(&self, v: f64) -> f64 {
        self.top + self.height - (v - self.y.0) / (self.y.1 - self.y.0) * self.height
    }
    pub fn bottom(&self) -> f64 {
        self.top + self.height
    }

    /// Axis lines, light grid, ticks and their labels, and the two axis titles.
    pub fn axes(
        &self,
        s: &mut String,
        xticks: Option<&[f64]>,
        yticks: Option<&[f64]>,
        xlabel: &str,
        ylabel: &str,
    ) {
        let (l, b, r, t) = (self.left, self.bottom(), self.left + self.width, self.top);
        if let Some(ticks) = xticks {
            for &v in ticks {
                let x = self.px(v);
                let _ = writeln!(
                    s,
                    "<line x1=\"{x:.1}\" y1=\"{t:.1}\" x2=\"{x:.1}\" y2=\"{b:.1}\" stroke=\"#eee\"/><line x1=\"{x:.1}\" y1=\"{b:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#333\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                    b + 5.0,
                    b + 17.0,
                    tick_label(v, ticks)
                );
            }
        }
        if let Some(ticks) = yticks {
            for &v in ticks {
                let y = self.py(v);
                let _ = writeln!(
                    s,
                    "<line x1=\"{l:.1}\" y1=\"{y:.1}\" x2=\"{r:.1}\" y2=\"{y:.1}\" stroke=\"#eee\"/><line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{l:.1}\" y2=\"{y:.1}\" stroke=\"#333\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                    l - 5.0,
                    l - 8.0,
                    y + 4.0,
                    tick_label(v, ticks)
                );
            }
        }
        let _ = writeln!(
            s,
            "<line x1=\"{l:.1}\" y1=\"{b:.1}\" x2=\"{r:.1}\" y2=\"{b:.1}\" stroke=\"#333\"/>"
        );
        if yticks.is_some() {
            let _ = writeln!(
                s,
                "<line x1=\"{l:.1}\" y1=\"{t:.1}\" x2=\"{l:.1}\" y2=\"{b:.1}\" stroke=\"#333\"/>"
            );
        }
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"axis-title\">{}</text>",
            l + self.width / 2.0,
            b + 36.0,
            escape(xlabel)
        );
        if !ylabel.is_empty() {
            let (x, y) = (l - 44.0, t + self.height / 2.0);
            let _ = writeln!(
                s,
                "<text x=\"{x:.1}\" y=\"{y:.1}\" transform=\"rotate(-90 {x:.1} {y:.1})\" text-anchor=\"middle\" class=\"axis-title\">{}</text>",
                escape(ylabel)
            );
        }
    }
}

pub fn open(w: f64, h: f64, title: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{:.0}\" y=\"18\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"bold\">{}</text>\n",
        w / 2.0,
        escape(title)
    )
}

pub fn legend(s: &mut String, x: f64, y: f64, entries: &[(String, &str)]) {
    for (i, (label, color)) in entries.iter().enumerate() {
        let yy = y + 16.0 * i as f64;
        let _ = writeln!(
            s,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{color}\"/><text x=\"{:.1}\" y=\"{yy:.1}\">{}</text>",
            yy - 9.0,
            x + 15.0,
            escape(label)
        );
    }
}
