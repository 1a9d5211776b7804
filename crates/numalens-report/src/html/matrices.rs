//! The matrix views: per object (thread × page distribution, first touch, thread × node,
//! timeline), then threads, thread × thread communication, node × node traffic and timelines.

use std::fmt::Write;

use numalens_analyze::ReportModel;
use numalens_analyze::model::{ObjectAccess, ObjectReport};

use super::bins::{self, Grid, groups};
use super::charts::{FirstTouch, Heat, XAxis, first_touch, heatmap};
use super::text::{ThreadNames, bytes, count, esc, pct};
use super::{close_section, figure, help, limits, open_section};

/// Column edges in axis units: each group of `group` source columns, source column `c` being
/// `widths[c]` units wide.
fn edges(widths: &[f64], group: usize) -> Vec<f64> {
    let mut out = vec![0.0];
    let mut at = 0.0;
    for g in groups(widths.len(), group) {
        at += widths[g].iter().sum::<f64>();
        out.push(at);
    }
    out
}

/// Names of the drawn rows: one thread each, or the first and last of a merged group.
fn row_names(threads: &[usize], per_row: usize, names: &ThreadNames) -> Vec<String> {
    groups(threads.len(), per_row)
        .map(|g| {
            let (first, last) = (threads[g.start], threads[g.end - 1]);
            if first == last {
                names.get(first)
            } else {
                format!("{}–{}", names.get(first), names.get(last))
            }
        })
        .collect()
}

/// Names of groups of `per` consecutive nodes: `node 3`, `nodes 4–7`, `unknown`.
fn node_names(nodes: &[Option<u32>], per: usize) -> Vec<String> {
    let name = |n: Option<u32>| n.map_or("unknown".to_string(), |n| n.to_string());
    groups(nodes.len(), per)
        .map(|g| {
            let (a, b) = (nodes[g.start], nodes[g.end - 1]);
            if g.len() == 1 {
                a.map_or("unknown".to_string(), |n| format!("node {n}"))
            } else {
                format!("nodes {}–{}", name(a), name(b))
            }
        })
        .collect()
}

fn to_f64(values: &[Vec<u64>]) -> Vec<Vec<f64>> {
    values
        .iter()
        .map(|r| r.iter().map(|v| *v as f64).collect())
        .collect()
}

fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

pub(crate) fn object_views(
    out: &mut String,
    m: &ReportModel,
    o: &ObjectReport,
    a: &ObjectAccess,
    names: &ThreadNames,
) {
    let page = m.profile.page_size.max(1);
    let h = &a.heatmap;
    if h.values.is_empty() || h.page_average.is_empty() {
        out.push_str(
            "<p class=\"note\">No per-page distribution in the model for this object.</p>\n",
        );
    } else {
        let widths = bins::column_pages(h);
        let max_cols = limits::HEAT_COLS
            .min(limits::HEAT_CELLS / h.values.len().max(1))
            .max(8);
        let grid = Grid::weighted(&to_f64(&h.values), &widths, limits::HEAT_ROWS, max_cols);
        let edges = edges(&widths, grid.cols_per_cell);
        let pages_per_cell = h.pages_per_column.max(1) * grid.cols_per_cell as u64;
        let row_avg = bins::weighted_means(&h.thread_average, &[], grid.rows_per_cell);
        let heat = Heat {
            grid: &grid,
            rows: row_names(&h.threads, grid.rows_per_cell, names),
            y_desc: "thread".into(),
            x: XAxis::Span {
                edges: edges.clone(),
                desc: "page of the object".into(),
            },
            col_avg: Some(bins::weighted_means(
                &h.page_average,
                &widths,
                grid.cols_per_cell,
            )),
            row_avg: Some(row_avg),
            annotate: false,
            unit: "accesses per page per thread".into(),
        };
        let users = if a.users.len() > h.threads.len() {
            format!(
                "; rows: the {} threads with most accesses of {}",
                h.threads.len(),
                a.users.len()
            )
        } else {
            String::new()
        };
        let resolution = format!(
            "{} pages; each column = {} ({}), each row = {}{users}",
            count(h.pages),
            plural(pages_per_cell as usize, "page"),
            bytes(pages_per_cell * page),
            plural(grid.rows_per_cell, "thread"),
        );
        if m.analysis.access_source != "page_stats" {
            out.push_str(
                "<p class=\"note\">These counts come from samples, not from every access: with \
                 the page-fault backend a page shows little more than its first touch. Record \
                 with <code>--backend inst</code> for exact counts.</p>\n",
            );
        }
        figure(
            out,
            &format!("Access distribution of {}", o.name),
            &heatmap(&heat),
            &resolution,
            &help::DISTRIBUTION,
        );
        first_touch_view(out, a, &edges, grid.cols_per_cell, names);
    }
    node_matrix(out, m, a, names);
    object_timeline(out, m, a, names);
}

fn first_touch_view(
    out: &mut String,
    a: &ObjectAccess,
    edges: &[f64],
    group: usize,
    names: &ThreadNames,
) {
    let h = &a.heatmap;
    let marks = bins::merge_first_touch(&h.first_touch, group);
    if marks.iter().all(Option::is_none) {
        out.push_str("<p class=\"note\">No first-touch data in the model for this object.</p>\n");
        return;
    }
    let mut threads: Vec<usize> = h.threads.clone();
    threads.extend(marks.iter().flatten().map(|(t, _)| *t));
    threads.sort_unstable();
    threads.dedup();
    let rows = threads.iter().map(|t| names.get(*t)).collect();
    let marks = marks
        .iter()
        .map(|m| m.and_then(|(t, s)| threads.iter().position(|x| *x == t).map(|r| (r, s))))
        .collect();
    let ft = FirstTouch {
        edges,
        x_desc: "page of the object".into(),
        rows,
        marks,
        avg_column: true,
    };
    let pages = h.pages_per_column.max(1) * group as u64;
    figure(
        out,
        "First touch per page",
        &first_touch(&ft),
        &format!("each mark = {}", plural(pages as usize, "page")),
        &help::FIRST_TOUCH,
    );
}

fn node_matrix(out: &mut String, m: &ReportModel, a: &ObjectAccess, names: &ThreadNames) {
    if a.matrix.is_empty() {
        return;
    }
    let mut nodes: Vec<Option<u32>> = m.placement.nodes.iter().copied().map(Some).collect();
    for cell in &a.matrix {
        if !nodes.contains(&cell.node) {
            nodes.push(cell.node);
        }
    }
    let mut threads: Vec<usize> = a
        .users
        .iter()
        .map(|u| u.thread)
        .take(limits::OBJECT_TABLE_ROWS)
        .collect();
    threads.sort_unstable();
    let mut values = vec![vec![0.0; nodes.len()]; threads.len()];
    for cell in &a.matrix {
        let (Some(r), Some(c)) = (
            threads.iter().position(|t| *t == cell.thread),
            nodes.iter().position(|n| *n == cell.node),
        ) else {
            continue;
        };
        values[r][c] += cell.accesses as f64;
    }
    let grid = Grid::mean_of(&values, limits::HEAT_ROWS, limits::NODE_CELLS);
    let labels = node_names(&nodes, grid.cols_per_cell);
    let heat = Heat {
        grid: &grid,
        rows: row_names(&threads, grid.rows_per_cell, names),
        y_desc: "thread".into(),
        x: XAxis::Named {
            labels,
            desc: "memory node of the pages".into(),
        },
        col_avg: None,
        row_avg: None,
        annotate: grid.rows() * grid.cols() <= 160,
        unit: "accesses".into(),
    };
    let resolution = format!("each row = {}", plural(grid.rows_per_cell, "thread"));
    figure(
        out,
        "Accesses by thread and memory node",
        &heatmap(&heat),
        &resolution,
        &help::OBJECT_NODES,
    );
}

/// The time axis of the model's timelines, in milliseconds; `None` when accesses have no time.
fn time_edges(m: &ReportModel, buckets: usize, group: usize) -> Option<(Vec<f64>, String)> {
    let ns = m.analysis.time.bucket_ns;
    if ns == 0 || buckets == 0 {
        return None;
    }
    let widths = vec![ns as f64 / 1e6; buckets];
    let per = ns as f64 * group as f64 / 1e6;
    Some((edges(&widths, group), format!("each column = {per:.3} ms")))
}

fn object_timeline(out: &mut String, m: &ReportModel, a: &ObjectAccess, names: &ThreadNames) {
    let t = &a.timeline;
    let buckets = t.values.iter().map(Vec::len).max().unwrap_or(0);
    if t.values.iter().flatten().all(|v| *v == 0) {
        return;
    }
    let grid = Grid::mean_of(&to_f64(&t.values), limits::TIME_ROWS, limits::TIME_COLS);
    let Some((edges, resolution)) = time_edges(m, buckets, grid.cols_per_cell) else {
        return;
    };
    let heat = Heat {
        grid: &grid,
        rows: row_names(&t.threads, grid.rows_per_cell, names),
        y_desc: "thread".into(),
        x: XAxis::Span {
            edges,
            desc: "time since the start of the recording (ms)".into(),
        },
        col_avg: None,
        row_avg: None,
        annotate: false,
        unit: "accesses per interval per thread".into(),
    };
    let resolution = format!(
        "{resolution}, each row = {}",
        plural(grid.rows_per_cell, "thread")
    );
    figure(
        out,
        "Accesses over time",
        &heatmap(&heat),
        &resolution,
        &help::OBJECT_TIMELINE,
    );
}

pub(crate) fn threads(out: &mut String, m: &ReportModel) {
    open_section(out, "threads");
    let names = ThreadNames::new(m);
    out.push_str(
        "<div class=\"scroll\"><table class=\"data sortable\"><thead><tr><th data-type=\"s\">thread</th>\
         <th data-type=\"n\">tid</th><th data-type=\"s\">name</th><th data-type=\"s\">start routine</th>\
         <th data-type=\"n\">node</th><th data-type=\"n\">accesses</th><th data-type=\"n\">reads</th>\
         <th data-type=\"n\">writes</th><th data-type=\"n\">local</th><th data-type=\"s\">most used objects</th>\
         </tr></thead><tbody>\n",
    );
    for (i, t) in m.threads.iter().enumerate().take(limits::THREAD_ROWS) {
        let a = &t.access;
        let objects: Vec<String> = a.objects.iter().take(3).map(|o| o.name.clone()).collect();
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td class=\"n\" data-v=\"{}\">{}</td>\
             <td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\" data-v=\"{}\">{}</td>\
             <td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\" data-v=\"{}\">{}</td><td>{}</td></tr>",
            esc(&names.get(i)),
            t.tid,
            esc(t.name.as_deref().unwrap_or("")),
            esc(t
                .start_function
                .as_deref()
                .or(t.start_routine.as_deref())
                .unwrap_or("")),
            a.node.map_or(-1, i64::from),
            a.node.map_or("–".into(), |n| n.to_string()),
            a.accesses,
            count(a.accesses),
            a.reads,
            count(a.reads),
            a.writes,
            count(a.writes),
            a.local_ratio.unwrap_or(-1.0),
            pct(a.local_ratio),
            esc(&objects.join(", "))
        );
    }
    out.push_str("</tbody></table></div>\n");
    if m.threads.len() > limits::THREAD_ROWS {
        let _ = writeln!(
            out,
            "<p class=\"note\">{} more threads are in the JSON model (<code>--json</code>).</p>",
            m.threads.len() - limits::THREAD_ROWS
        );
    }
    close_section(out);
}

pub(crate) fn communication(out: &mut String, m: &ReportModel) {
    open_section(out, "communication");
    let c = &m.communication;
    if m.analysis.limits.is_some() {
        out.push_str(
            "<p class=\"note\">Unknown: page faults alone do not show which threads share data \
             (see the top of this report).</p>\n",
        );
        close_section(out);
        return;
    }
    if c.values.is_empty() || c.values.iter().flatten().all(|v| *v == 0) {
        out.push_str("<p class=\"note\">No two threads share data in this profile.</p>\n");
        close_section(out);
        return;
    }
    let names = ThreadNames::new(m);
    let grid = Grid::mean_of(&to_f64(&c.values), limits::COMM_CELLS, limits::COMM_CELLS);
    let per = c.threads_per_cell.max(1) * grid.rows_per_cell;
    let labels = row_names(&c.threads, per, &names);
    let heat = Heat {
        grid: &grid,
        rows: labels.clone(),
        y_desc: "thread".into(),
        x: XAxis::Named {
            labels,
            desc: "thread".into(),
        },
        col_avg: None,
        row_avg: None,
        annotate: grid.rows() <= 8,
        unit: "shared accesses".into(),
    };
    let resolution = format!(
        "blocks of {}; each row and column = {}",
        bytes(c.block_size),
        plural(per, "thread")
    );
    figure(
        out,
        "Thread × thread communication",
        &heatmap(&heat),
        &resolution,
        &help::COMMUNICATION,
    );
    close_section(out);
}

pub(crate) fn traffic(out: &mut String, m: &ReportModel) {
    open_section(out, "traffic");
    let p = &m.placement;
    if p.traffic.is_empty() || p.nodes.is_empty() {
        out.push_str("<p class=\"note\">No node traffic: the placement gave no node to the threads or pages.</p>\n");
        close_section(out);
        return;
    }
    let grid = Grid::mean_of(&to_f64(&p.traffic), limits::NODE_CELLS, limits::NODE_CELLS);
    let nodes: Vec<Option<u32>> = p.nodes.iter().copied().map(Some).collect();
    let heat = Heat {
        grid: &grid,
        rows: node_names(&nodes, grid.rows_per_cell),
        y_desc: "threads on".into(),
        x: XAxis::Named {
            labels: node_names(&nodes, grid.cols_per_cell),
            desc: "memory on".into(),
        },
        col_avg: None,
        row_avg: None,
        annotate: grid.rows() <= 16,
        unit: "accesses".into(),
    };
    let resolution = format!(
        "{} placement on {}; local access ratio {}",
        p.mode,
        p.topology,
        pct(p.local_ratio)
    );
    figure(
        out,
        "Node traffic matrix",
        &heatmap(&heat),
        &resolution,
        &help::TRAFFIC,
    );
    close_section(out);
}

pub(crate) fn timelines(out: &mut String, m: &ReportModel) {
    open_section(out, "timelines");
    let buckets = m.analysis.time.buckets;
    let rows: Vec<(usize, Vec<f64>)> = m
        .threads
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.access.objects.is_empty())
        .map(|(i, t)| {
            let mut sum = vec![0.0; buckets];
            for o in &t.access.objects {
                for (s, v) in sum.iter_mut().zip(&o.buckets) {
                    *s += *v as f64;
                }
            }
            (i, sum)
        })
        .collect();
    let values: Vec<Vec<f64>> = rows.iter().map(|(_, v)| v.clone()).collect();
    let grid = Grid::mean_of(&values, limits::TIME_ROWS, limits::TIME_COLS);
    match time_edges(m, buckets, grid.cols_per_cell) {
        Some((edges, resolution)) if grid.max() > 0.0 => {
            let names = ThreadNames::new(m);
            let threads: Vec<usize> = rows.iter().map(|(i, _)| *i).collect();
            let heat = Heat {
                grid: &grid,
                rows: row_names(&threads, grid.rows_per_cell, &names),
                y_desc: "thread".into(),
                x: XAxis::Span {
                    edges,
                    desc: "time since the start of the recording (ms)".into(),
                },
                col_avg: None,
                row_avg: None,
                annotate: false,
                unit: "accesses per interval per thread".into(),
            };
            let resolution = format!(
                "{resolution}, each row = {}",
                plural(grid.rows_per_cell, "thread")
            );
            figure(
                out,
                "Accesses of each thread over time",
                &heatmap(&heat),
                &resolution,
                &help::THREAD_TIMELINE,
            );
        }
        _ => out.push_str(
            "<p class=\"note\">No timeline: the accesses of this profile carry no time (exact \
             counts alone), or none were recorded.</p>\n",
        ),
    }
    close_section(out);
}
