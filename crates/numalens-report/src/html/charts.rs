//! The charts, drawn with plotters into inline SVG: heatmaps with a colour legend, the
//! first-touch plot and horizontal bars. Each takes already-binned data (see `bins`).

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::bins::{Grid, LEVELS, level, level_rgb};
use super::text::{esc, si};

/// Width of every chart in pixels; the page scales them down on narrow screens.
pub(crate) const WIDTH: u32 = 960;
/// Room on the right of a heatmap for its colour legend (and the same blank room on the
/// first-touch plot, so their page axes line up).
const LEGEND: u32 = 120;
const Y_LABELS: u32 = 86;
const X_LABELS: u32 = 44;
const MARGIN: u32 = 10;
const FONT: &str = "sans-serif";

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;
type Fail = Box<dyn std::error::Error>;

/// The horizontal axis of a heatmap.
pub(crate) enum XAxis {
    /// A continuous quantity (pages, milliseconds): column `c` spans `edges[c]..edges[c + 1]`.
    Span { edges: Vec<f64>, desc: String },
    /// One named column each (threads, nodes).
    Named { labels: Vec<String>, desc: String },
}

/// A heatmap: rows × columns of a [`Grid`], optionally with TABARNAC's average row (per column,
/// under the matrix) and average column (per row, on its right), all on one colour scale.
pub(crate) struct Heat<'a> {
    pub grid: &'a Grid,
    pub rows: Vec<String>,
    pub y_desc: String,
    pub x: XAxis,
    pub col_avg: Option<Vec<f64>>,
    pub row_avg: Option<Vec<f64>>,
    /// Print each cell's value in it (small matrices only).
    pub annotate: bool,
    /// What the colours measure, under the legend.
    pub unit: String,
}

impl XAxis {
    fn edges(&self, cols: usize) -> Vec<f64> {
        match self {
            XAxis::Span { edges, .. } => edges.clone(),
            XAxis::Named { .. } => (0..=cols).map(|c| c as f64).collect(),
        }
    }
}

/// Draws `heat` as an SVG element, or a note saying why it could not be drawn.
pub(crate) fn heatmap(heat: &Heat) -> String {
    let rows = heat.grid.rows() + if heat.col_avg.is_some() { 2 } else { 0 };
    let height = MARGIN * 2 + X_LABELS + (rows as u32 * row_height(rows)).max(60);
    svg(height, |root| draw_heat(root, heat))
}

fn row_height(rows: usize) -> u32 {
    match rows {
        0..=6 => 30,
        7..=16 => 20,
        17..=40 => 13,
        _ => 10,
    }
}

/// Runs `draw` on a fresh SVG of the chart width and `height`.
fn svg(height: u32, draw: impl FnOnce(&Area) -> Result<(), Fail>) -> String {
    let mut out = String::new();
    let result = {
        let root = SVGBackend::with_string(&mut out, (WIDTH, height)).into_drawing_area();
        draw(&root).and_then(|()| root.present().map_err(Fail::from))
    };
    match result {
        Ok(()) => compact(&out),
        Err(e) => format!(
            "<p class=\"note\">This chart could not be drawn: {}</p>",
            esc(&e.to_string())
        ),
    }
}

/// Drops the attributes plotters writes on every shape that only repeat SVG's defaults (full
/// opacity, no stroke): a third of the bytes of a heatmap.
fn compact(svg: &str) -> String {
    svg.replace(" opacity=\"1\" fill=", " fill=")
        .replace(" stroke=\"none\"/>", "/>")
}

fn draw_heat(root: &Area, heat: &Heat) -> Result<(), Fail> {
    let (plot, legend) = root.split_horizontally(WIDTH - LEGEND);
    let grid = heat.grid;
    let edges = heat.x.edges(grid.cols());
    let end = edges.last().copied().unwrap_or(1.0).max(f64::MIN_POSITIVE);
    // The average column sits right of the matrix after a gap, 4% of its width each.
    let x_end = if heat.row_avg.is_some() {
        end * 1.08
    } else {
        end
    };
    let rows = grid.rows() + if heat.col_avg.is_some() { 2 } else { 0 };
    let top = rows as f64;
    let mut chart = ChartBuilder::on(&plot)
        .margin(MARGIN)
        .x_label_area_size(X_LABELS)
        .y_label_area_size(Y_LABELS)
        .build_cartesian_2d(0.0..x_end, 0.0..top.max(1.0))?;
    let x_fmt = |v: &f64| if *v <= end { si(*v) } else { String::new() };
    let (x_desc, ticks) = match &heat.x {
        XAxis::Span { desc, .. } => (desc.as_str(), 10),
        XAxis::Named { desc, .. } => (desc.as_str(), 0),
    };
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(ticks)
        .y_labels(0)
        .x_label_formatter(&x_fmt)
        .x_desc(x_desc)
        .y_desc(heat.y_desc.as_str())
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .draw()?;
    let max = heat_max(heat);
    let mut cells = Vec::new();
    for (r, row) in grid.cells.iter().enumerate() {
        let y = top - r as f64;
        push_runs(&mut cells, row, &edges, (y - 1.0, y), max);
    }
    if let Some(avg) = &heat.col_avg {
        push_runs(&mut cells, avg, &edges, (0.0, 1.0), max);
    }
    if let Some(avg) = &heat.row_avg {
        for (r, v) in avg.iter().enumerate() {
            let y = top - r as f64;
            push_runs(&mut cells, &[*v], &[end * 1.04, x_end], (y - 1.0, y), max);
        }
    }
    chart.draw_series(cells.iter().map(|(x0, x1, y0, y1, lv)| {
        let (r, g, b) = level_rgb(*lv);
        Rectangle::new([(*x0, *y0), (*x1, *y1)], RGBColor(r, g, b).filled())
    }))?;
    if heat.annotate {
        annotate(&mut chart, heat, &edges, top, max)?;
    }
    let label_at = |y: f64| chart.backend_coord(&(0.0, y));
    let mut labels: Vec<(String, (i32, i32))> = Vec::new();
    let every = heat.rows.len().div_ceil(40).max(1);
    for (r, name) in heat.rows.iter().enumerate().step_by(every) {
        labels.push((name.clone(), label_at(top - r as f64 - 0.5)));
    }
    if heat.col_avg.is_some() {
        labels.push(("avg".into(), label_at(0.5)));
    }
    let style = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
    for (text, (x, y)) in labels {
        root.draw_text(&text, &style, (x - 6, y))?;
    }
    column_labels(root, &chart, heat, &edges, end, x_end)?;
    let (_, y_px) = chart.plotting_area().get_pixel_range();
    draw_legend(&legend, max, &heat.unit, y_px)
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// Labels under named columns, and "avg" under the average column.
fn column_labels(
    root: &Area,
    chart: &Chart,
    heat: &Heat,
    edges: &[f64],
    end: f64,
    x_end: f64,
) -> Result<(), Fail> {
    let mut labels: Vec<(String, f64)> = Vec::new();
    if let XAxis::Named { labels: names, .. } = &heat.x {
        let every = names.len().div_ceil(32).max(1);
        let named = names.iter().zip(edges.windows(2)).enumerate();
        for (_, (name, edge)) in named.step_by(every) {
            labels.push((name.clone(), (edge[0] + edge[1]) / 2.0));
        }
    }
    if heat.row_avg.is_some() {
        labels.push(("avg".into(), (end * 1.04 + x_end) / 2.0));
    }
    let style = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    for (text, x) in labels {
        let (px, py) = chart.backend_coord(&(x, 0.0));
        root.draw_text(&text, &style, (px, py + 6))?;
    }
    Ok(())
}

fn heat_max(heat: &Heat) -> f64 {
    let extra = heat.col_avg.iter().chain(&heat.row_avg).flatten().copied();
    extra.fold(heat.grid.max(), f64::max)
}

/// Consecutive cells of one colour become one rectangle, and blank (no access) cells none:
/// most of the file size of a heatmap is its rectangles.
fn push_runs(
    out: &mut Vec<(f64, f64, f64, f64, usize)>,
    row: &[f64],
    edges: &[f64],
    (y0, y1): (f64, f64),
    max: f64,
) {
    let mut c = 0;
    while c < row.len() {
        let lv = level(row[c], max);
        let mut next = c + 1;
        while next < row.len() && level(row[next], max) == lv {
            next += 1;
        }
        if lv > 0 && next < edges.len() {
            out.push((edges[c], edges[next], y0, y1, lv));
        }
        c = next;
    }
}

fn annotate(chart: &mut Chart, heat: &Heat, edges: &[f64], top: f64, max: f64) -> Result<(), Fail> {
    let mut texts = Vec::new();
    for (r, row) in heat.grid.cells.iter().enumerate() {
        for (c, v) in row.iter().enumerate() {
            let white = level(*v, max) > LEVELS / 2;
            let at = ((edges[c] + edges[c + 1]) / 2.0, top - r as f64 - 0.5);
            texts.push((si(*v), at, white));
        }
    }
    let dark = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Center, VPos::Center));
    let light = dark.color(&WHITE);
    chart.draw_series(texts.into_iter().map(|(t, at, white)| {
        Text::new(t, at, if white { light.clone() } else { dark.clone() })
    }))?;
    Ok(())
}

/// The colour scale: every level as a band, from 0 at the bottom to `max` at the top.
fn draw_legend(area: &Area, max: f64, unit: &str, y_px: std::ops::Range<i32>) -> Result<(), Fail> {
    let (x0, x1) = (12, 30);
    let height = (y_px.end - y_px.start).max(LEVELS as i32);
    let band = |lv: usize| y_px.end - (lv as i32 * height) / LEVELS as i32;
    for lv in 0..LEVELS {
        let (r, g, b) = level_rgb(lv);
        let rect = [(x0, band(lv + 1)), (x1, band(lv))];
        area.draw(&Rectangle::new(rect, RGBColor(r, g, b).filled()))?;
    }
    area.draw(&Rectangle::new(
        [(x0, y_px.start), (x1, y_px.end)],
        BLACK.stroke_width(1),
    ))?;
    let style = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    let marks = [(0.0, "0".to_string()), (0.5, si(max / 2.0)), (1.0, si(max))];
    for (f, text) in marks {
        let y = y_px.end - (f * height as f64) as i32;
        area.draw(&Text::new(text, (x1 + 5, y), style.clone()))?;
    }
    let unit_style = TextStyle::from((FONT, 11).into_font()).pos(Pos::new(HPos::Left, VPos::Top));
    for (i, line) in wrap(unit, 16).iter().enumerate() {
        area.draw(&Text::new(
            line.clone(),
            (4, y_px.end + 8 + 13 * i as i32),
            unit_style.clone(),
        ))?;
    }
    Ok(())
}

/// Words of `s` in lines of at most about `width` characters.
fn wrap(s: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in s.split_whitespace() {
        match lines.last_mut() {
            Some(line) if line.len() + 1 + word.len() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

/// The first-touch plot: one mark per column, on the row of the thread that first touched most
/// of its pages, fainter when that thread touched only part of them.
pub(crate) struct FirstTouch<'a> {
    pub edges: &'a [f64],
    pub x_desc: String,
    /// Names of the rows (threads), top to bottom.
    pub rows: Vec<String>,
    /// Per column: the row of its first toucher and that thread's share of the touched pages.
    pub marks: Vec<Option<(usize, f64)>>,
    /// Whether the heatmap above has an average column (to keep the page axes aligned).
    pub avg_column: bool,
}

pub(crate) fn first_touch(ft: &FirstTouch) -> String {
    let rows = ft.rows.len().max(1);
    let height = MARGIN * 2 + X_LABELS + (rows as u32 * row_height(rows)).max(60);
    svg(height, |root| draw_first_touch(root, ft))
}

fn draw_first_touch(root: &Area, ft: &FirstTouch) -> Result<(), Fail> {
    let (plot, _) = root.split_horizontally(WIDTH - LEGEND);
    let end = ft
        .edges
        .last()
        .copied()
        .unwrap_or(1.0)
        .max(f64::MIN_POSITIVE);
    let x_end = if ft.avg_column { end * 1.08 } else { end };
    let top = ft.rows.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&plot)
        .margin(MARGIN)
        .x_label_area_size(X_LABELS)
        .y_label_area_size(Y_LABELS)
        .build_cartesian_2d(0.0..x_end, 0.0..top)?;
    let x_fmt = |v: &f64| if *v <= end { si(*v) } else { String::new() };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .light_line_style(RGBColor(235, 235, 235))
        .y_labels(0)
        .x_labels(10)
        .x_label_formatter(&x_fmt)
        .x_desc(ft.x_desc.as_str())
        .y_desc("first toucher")
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .draw()?;
    // A faint line through each thread's row, so a mark's row is easy to follow.
    chart.draw_series((0..ft.rows.len()).map(|r| {
        let y = top - r as f64 - 0.5;
        PathElement::new(vec![(0.0, y), (end, y)], RGBColor(225, 225, 225))
    }))?;
    let marks = ft.marks.iter().enumerate().filter_map(|(c, m)| {
        let (row, share) = (*m)?;
        let x = (ft.edges[c] + ft.edges[c + 1]) / 2.0;
        let colour = RGBColor(20, 60, 160).mix(0.25 + 0.75 * share.clamp(0.0, 1.0));
        Some(Cross::new(
            (x, top - row as f64 - 0.5),
            4,
            colour.stroke_width(2),
        ))
    });
    chart.draw_series(marks)?;
    let style = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
    let every = ft.rows.len().div_ceil(40).max(1);
    for (r, name) in ft.rows.iter().enumerate().step_by(every) {
        let (x, y) = chart.backend_coord(&(0.0, top - r as f64 - 0.5));
        root.draw_text(name, &style, (x - 6, y))?;
    }
    Ok(())
}

/// The horizontal axis and its labels of a bar chart (the bars carry their own labels).
macro_rules! mesh_x {
    ($chart:expr, $desc:expr, $fmt:expr) => {
        $chart
            .configure_mesh()
            .disable_y_mesh()
            .light_line_style(RGBColor(240, 240, 240))
            .y_labels(0)
            .x_labels(8)
            .x_label_formatter($fmt)
            .x_desc($desc)
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 14))
            .draw()
    };
}

/// Horizontal bars, one row per label, each bar made of coloured segments (stacked).
pub(crate) struct Bars {
    pub labels: Vec<String>,
    /// Per row: its segments' values, in the order of `series`.
    pub values: Vec<Vec<f64>>,
    /// Name and colour of each segment.
    pub series: Vec<(String, RGBColor)>,
    pub x_desc: String,
    /// A logarithmic axis (sizes spanning orders of magnitude); one segment only.
    pub log: bool,
}

pub(crate) fn bars(b: &Bars) -> String {
    let height = MARGIN * 2 + X_LABELS + 40 + b.labels.len().max(1) as u32 * 22;
    svg(height, |root| draw_bars(root, b))
}

fn draw_bars(root: &Area, b: &Bars) -> Result<(), Fail> {
    let totals: Vec<f64> = b.values.iter().map(|v| v.iter().sum()).collect();
    let max = totals.iter().copied().fold(0.0, f64::max).max(1.0);
    let n = b.labels.len().max(1) as f64;
    let label_room = 260;
    let area = root.margin(28, 0, 0, 0);
    let fmt = |v: &f64| si(*v);
    let y_of = |r: usize| n - r as f64;
    let mut pixel_rows = Vec::new();
    if b.log {
        let mut chart = ChartBuilder::on(&area)
            .margin(MARGIN)
            .x_label_area_size(X_LABELS)
            .y_label_area_size(label_room)
            .build_cartesian_2d((0.5..max * 2.0).log_scale(), 0.0..n)?;
        mesh_x!(chart, b.x_desc.as_str(), &fmt)?;
        chart.draw_series(b.values.iter().enumerate().map(|(r, v)| {
            let v = v.first().copied().unwrap_or(0.0).max(0.5);
            let (_, colour) = &b.series[0];
            Rectangle::new([(0.5, y_of(r) - 0.8), (v, y_of(r) - 0.2)], colour.filled())
        }))?;
        for r in 0..b.labels.len() {
            pixel_rows.push(chart.backend_coord(&(0.5, y_of(r) - 0.5)));
        }
    } else {
        let mut chart = ChartBuilder::on(&area)
            .margin(MARGIN)
            .x_label_area_size(X_LABELS)
            .y_label_area_size(label_room)
            .build_cartesian_2d(0.0..max * 1.05, 0.0..n)?;
        mesh_x!(chart, b.x_desc.as_str(), &fmt)?;
        let mut rects = Vec::new();
        for (r, v) in b.values.iter().enumerate() {
            let mut x = 0.0;
            for (s, value) in v.iter().enumerate() {
                let (_, colour) = &b.series[s];
                rects.push(Rectangle::new(
                    [(x, y_of(r) - 0.8), (x + value, y_of(r) - 0.2)],
                    colour.filled(),
                ));
                x += value;
            }
        }
        chart.draw_series(rects)?;
        for r in 0..b.labels.len() {
            pixel_rows.push(chart.backend_coord(&(0.0, y_of(r) - 0.5)));
        }
    }
    let style = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
    for (label, (x, y)) in b.labels.iter().zip(pixel_rows) {
        root.draw_text(label, &style, (x - 6, y))?;
    }
    bar_legend(root, &b.series)
}

/// The names of the stacked series, as coloured squares above the bars.
fn bar_legend(root: &Area, series: &[(String, RGBColor)]) -> Result<(), Fail> {
    let style = TextStyle::from((FONT, 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    let mut x = 270;
    for (name, colour) in series {
        root.draw(&Rectangle::new([(x, 8), (x + 12, 20)], colour.filled()))?;
        root.draw_text(name, &style, (x + 17, 14))?;
        x += 30 + 8 * name.len() as i32;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(cells: Vec<Vec<f64>>) -> Grid {
        Grid {
            cells,
            rows_per_cell: 1,
            cols_per_cell: 1,
        }
    }

    #[test]
    fn a_heatmap_draws_one_rect_per_run_and_none_for_blank_cells() {
        let g = grid(vec![vec![1.0, 1.0, 0.0, 4.0], vec![0.0; 4]]);
        let svg = heatmap(&Heat {
            grid: &g,
            rows: vec!["T<0>".into(), "T1".into()],
            y_desc: "thread".into(),
            x: XAxis::Span {
                edges: vec![0.0, 1.0, 2.0, 3.0, 4.0],
                desc: "page".into(),
            },
            col_avg: None,
            row_avg: None,
            annotate: false,
            unit: "accesses per page".into(),
        });
        assert!(svg.starts_with("<svg"), "{svg}");
        // Cells: the run of two 1.0s and the 4.0; legend: LEVELS bands.
        let fills = svg.matches("<rect").count();
        let level_one = level_rgb(level(1.0, 4.0));
        let fill = format!(
            "fill=\"#{:02X}{:02X}{:02X}\"",
            level_one.0, level_one.1, level_one.2
        );
        // One rectangle for the run of two, one band of the legend.
        assert_eq!(svg.matches(&fill).count(), 2, "{svg}");
        assert!((2 + LEVELS..=4 + LEVELS).contains(&fills), "{fills} rects");
        // Labels are text of the SVG, escaped.
        assert!(svg.contains("T&lt;0&gt;"), "{svg}");
        assert!(!svg.contains("T<0>"));
    }

    #[test]
    fn shapes_lose_only_their_default_attributes() {
        let svg = "<rect x=\"1\" opacity=\"1\" fill=\"#C86400\" stroke=\"none\"/>\
                   <rect opacity=\"0.5\" fill=\"#000000\" stroke=\"#000000\"/>";
        assert_eq!(
            compact(svg),
            "<rect x=\"1\" fill=\"#C86400\"/><rect opacity=\"0.5\" fill=\"#000000\" stroke=\"#000000\"/>"
        );
    }

    #[test]
    fn words_wrap_into_short_lines() {
        assert_eq!(
            wrap("accesses per page per thread", 16),
            vec!["accesses per", "page per thread"]
        );
    }
}
