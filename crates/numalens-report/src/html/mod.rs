//! The HTML report: one self-contained file (inline CSS, inline SVG charts, a little inline
//! script for sorting tables), readable offline and shareable as an attachment.
//!
//! It is a view of the [`ReportModel`] only: every number comes from the model. Large matrices
//! are merged into a bounded number of drawn cells (each chart says its resolution), and the
//! lists are cut at fixed lengths, so the file stays under [`MAX_BYTES`] whatever the profile.

mod bins;
mod charts;
mod groups;
mod help;
mod matrices;
mod objects;
mod sources;
mod summary;
mod text;
mod whatif;

use std::fmt::Write;

use numalens_analyze::ReportModel;

use text::esc;

/// The report never grows past this (5 MB); the bounds below keep it well under.
pub const MAX_BYTES: usize = 5_000_000;

/// Bounds on what one report draws and lists.
pub(crate) mod limits {
    /// Findings listed (the model sorts them most costly first).
    pub const FINDINGS: usize = 50;
    /// Rows of the objects table.
    pub const OBJECT_ROWS: usize = 200;
    /// Objects drawn in detail (heatmap, first touch, timeline, thread × node matrix).
    pub const DETAILED_OBJECTS: usize = 8;
    /// Objects in the size and read/write bar charts.
    pub const BAR_OBJECTS: usize = 20;
    /// Rows of the threads table.
    pub const THREAD_ROWS: usize = 256;
    /// Drawn rows and columns of a thread × page heatmap, and its cells at most.
    pub const HEAT_ROWS: usize = 64;
    pub const HEAT_COLS: usize = 96;
    pub const HEAT_CELLS: usize = 3072;
    /// Drawn rows and columns of a timeline.
    pub const TIME_ROWS: usize = 32;
    pub const TIME_COLS: usize = 64;
    /// Drawn rows (and columns) of the thread × thread and node × node matrices.
    pub const COMM_CELLS: usize = 48;
    pub const NODE_CELLS: usize = 16;
    /// Rows of the per-object tables (users, thread × node matrix).
    pub const OBJECT_TABLE_ROWS: usize = 64;
}

/// The whole report as one HTML document.
pub fn render(model: &ReportModel) -> String {
    let mut body = String::new();
    summary::summary(&mut body, model);
    summary::findings(&mut body, model);
    summary::topology(&mut body, model);
    whatif::what_if(&mut body, model);
    objects::overview(&mut body, model);
    objects::details(&mut body, model);
    matrices::threads(&mut body, model);
    matrices::communication(&mut body, model);
    matrices::traffic(&mut body, model);
    sources::data_sources(&mut body, model);
    matrices::timelines(&mut body, model);
    page(model, &body)
}

const STYLE: &str = include_str!("style.css");
const SCRIPT: &str = include_str!("script.js");

/// The sections, in page order, for the table of contents.
const SECTIONS: [(&str, &str); 11] = [
    ("summary", "Summary"),
    ("findings", "Findings"),
    ("topology", "Topology and placement"),
    ("what-if", "What-if"),
    ("objects", "Objects"),
    ("object-details", "Objects in detail"),
    ("threads", "Threads"),
    ("communication", "Communication"),
    ("traffic", "Node traffic"),
    ("data-sources", "Data sources"),
    ("timelines", "Timelines"),
];

fn page(model: &ReportModel, body: &str) -> String {
    let program = model
        .profile
        .command
        .first()
        .map_or("(unknown program)", String::as_str);
    let mut out = String::with_capacity(body.len() + STYLE.len() + SCRIPT.len() + 2048);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"numalens {}\">\n\
         <title>numalens report: {}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n\
         <header><h1>numalens report <span class=\"program\">{}</span></h1></header>\n<nav>",
        esc(&model.profile.numalens_version),
        esc(program),
        esc(program),
    );
    for (id, title) in SECTIONS {
        // Only profiles whose samples carry a data source (a PMU's) have that section.
        if id == "data-sources" && model.data_sources.is_none() {
            continue;
        }
        let _ = write!(out, "<a href=\"#{id}\">{title}</a>");
    }
    let _ = write!(
        out,
        "</nav>\n<main>\n{body}</main>\n<script>\n{SCRIPT}</script>\n</body>\n</html>\n"
    );
    out
}

/// Opens a section of the page with its heading.
pub(crate) fn open_section(out: &mut String, id: &str) {
    let title = SECTIONS
        .iter()
        .find(|(s, _)| *s == id)
        .map_or(id, |(_, t)| t);
    let _ = write!(out, "<section id=\"{id}\">\n<h2>{title}</h2>\n");
}

pub(crate) fn close_section(out: &mut String) {
    out.push_str("</section>\n");
}

/// A chart in a figure, with its resolution and its reading guide.
pub(crate) fn figure(
    out: &mut String,
    title: &str,
    svg: &str,
    resolution: &str,
    guide: &help::Guide,
) {
    let _ = write!(
        out,
        "<figure class=\"chart\">\n<figcaption><b>{}</b> <span class=\"resolution\">{}</span>\
         </figcaption>\n{svg}\n{}</figure>\n",
        esc(title),
        esc(resolution),
        guide.html()
    );
}
