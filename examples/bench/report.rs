//! Markdown tables and hand-written SVG line plots.

use std::fmt::Write;

/// A markdown table.
pub struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column names.
    pub fn new(head: &[&str]) -> Table {
        Table {
            head: head.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as markdown.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
        out.push_str(&line(&self.head));
        out.push_str(&line(&vec!["---".to_string(); self.head.len()]));
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out
    }
}

/// One line of a plot: a name, a colour and a y value per x category.
pub struct Series {
    /// Legend text.
    pub name: String,
    /// An SVG colour.
    pub color: &'static str,
    /// One value per category.
    pub values: Vec<f64>,
}

/// A line plot over evenly spaced categories (e.g. 1, 100, 10,000 sessions), y from 0.
pub fn line_plot(title: &str, categories: &[String], y_label: &str, series: &[Series]) -> String {
    let (width, height) = (560.0, 320.0);
    let (left, right, top, bottom) = (70.0, 150.0, 40.0, 50.0);
    let plot_w = width - left - right;
    let plot_h = height - top - bottom;
    let max = series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .fold(0.0_f64, f64::max)
        .max(1e-9)
        * 1.1;
    let x = |i: usize| {
        if categories.len() < 2 {
            left + plot_w / 2.0
        } else {
            left + plot_w * i as f64 / (categories.len() - 1) as f64
        }
    };
    let y = |v: f64| top + plot_h * (1.0 - v / max);
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{left}" y="22" font-size="14" font-weight="bold">{}</text>"#,
        escape(title)
    );
    for step in 0..=4 {
        let value = max * step as f64 / 4.0;
        let at = y(value);
        let _ = writeln!(
            svg,
            r##"<line x1="{left}" y1="{at:.1}" x2="{:.1}" y2="{at:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            left + plot_w,
            left - 6.0,
            at + 4.0,
            short(value)
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="16" y="{:.1}" transform="rotate(-90 16 {:.1})" text-anchor="middle">{}</text>"#,
        top + plot_h / 2.0,
        top + plot_h / 2.0,
        escape(y_label)
    );
    for (i, category) in categories.iter().enumerate() {
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x(i),
            top + plot_h + 20.0,
            escape(category)
        );
    }
    for (n, s) in series.iter().enumerate() {
        let points: Vec<String> = s
            .values
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v)))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>"#,
            s.color,
            points.join(" ")
        );
        for point in &points {
            let (px, py) = point.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(
                svg,
                r#"<circle cx="{px}" cy="{py}" r="3" fill="{}"/>"#,
                s.color
            );
        }
        let ly = top + 16.0 * n as f64 + 6.0;
        let lx = left + plot_w + 14.0;
        let _ = writeln!(
            svg,
            r#"<line x1="{lx}" y1="{ly}" x2="{:.1}" y2="{ly}" stroke="{}" stroke-width="2"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 18.0,
            s.color,
            lx + 24.0,
            ly + 4.0,
            escape(&s.name)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn short(value: f64) -> String {
    if value >= 10_000.0 {
        format!("{:.0}k", value / 1000.0)
    } else if value >= 100.0 {
        format!("{value:.0}")
    } else if value >= 1.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
