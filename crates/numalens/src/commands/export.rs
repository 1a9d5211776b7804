//! `numalens export`: the aggregated tables of the analysis (objects, object × thread × node
//! matrix, threads, nodes, findings, communication matrix, node traffic) as CSV or JSON files,
//! one per table, for spreadsheets and notebooks.

use anyhow::{Context, Result};
use numalens_analyze::model::{ReportModel, ThreadReport};
use numalens_analyze::{Options, analyze};
use numalens_format::Profile;
use serde_json::{Value, json};

use super::html_target::profile_at_or_above;
use super::report::{analysis_options, usage_or_error};
use crate::cli::{ExportArgs, ExportFormat};
use crate::exit::UsageError;

/// One exported table: column names and rows of JSON values.
struct Table {
    name: &'static str,
    columns: Vec<String>,
    rows: Vec<Vec<Value>>,
    /// How many of the last columns hold structured values that only the JSON files carry.
    json_only: usize,
}

pub fn run(args: ExportArgs) -> Result<()> {
    if let Some(profile) = profile_at_or_above(&args.output) {
        return Err(UsageError(format!(
            "-o {}: is inside the profile directory {}, whose files only `numalens record` \
             writes; export the tables to another directory",
            args.output.display(),
            profile.display()
        ))
        .into());
    }
    let profile = Profile::open(&args.profile)?;
    let options = Options {
        top: usize::MAX,
        ..analysis_options(&args.placement)?
    };
    let model = analyze(&profile, &options).map_err(usage_or_error)?;
    std::fs::create_dir_all(&args.output)
        .with_context(|| format!("creating {}", args.output.display()))?;
    for table in tables(&model) {
        let (ext, text) = match args.format {
            ExportFormat::Csv => ("csv", csv(&table)),
            ExportFormat::Json => ("json", json_rows(&table)),
        };
        let path = args.output.join(format!("{}.{ext}", table.name));
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {} ({} rows)", path.display(), table.rows.len());
    }
    Ok(())
}

fn tables(m: &ReportModel) -> Vec<Table> {
    vec![
        objects(m),
        object_threads(m),
        threads(m),
        nodes(m),
        findings(m),
        communication(m),
        traffic(m),
    ]
}

fn table(name: &'static str, columns: &[&str], rows: Vec<Vec<Value>>) -> Table {
    Table {
        name,
        columns: columns.iter().map(|c| c.to_string()).collect(),
        rows,
        json_only: 0,
    }
}

/// `T3`, or `tid 1234` for threads missing from the threads table.
fn label(t: &ThreadReport) -> String {
    t.logical_id
        .map_or(format!("tid {}", t.tid), |l| format!("T{l}"))
}

fn thread_label(m: &ReportModel, position: usize) -> Value {
    m.threads.get(position).map(label).into()
}

fn objects(m: &ReportModel) -> Table {
    let rows = m
        .objects
        .iter()
        .map(|o| {
            let a = o.access.as_ref();
            // The same text as the findings' `site`, so that the two read alike.
            let site = o.site.as_ref().map(numalens_analyze::site_text);
            vec![
                o.id.into(),
                o.pid.into(),
                o.kind.clone().into(),
                o.name.clone().into(),
                o.size.into(),
                site.into(),
                a.map_or(0, |a| a.accesses).into(),
                a.map_or(0, |a| a.reads).into(),
                a.map_or(0, |a| a.writes).into(),
                a.map(|a| a.share).into(),
                a.map(|a| a.pages).into(),
                a.map(|a| a.sharing.clone()).into(),
                a.and_then(|a| a.first_toucher)
                    .map(|t| thread_label(m, t.thread))
                    .into(),
                a.and_then(|a| a.main_user)
                    .map(|t| thread_label(m, t.thread))
                    .into(),
                a.and_then(|a| a.local_ratio).into(),
                a.map(|a| a.remote).into(),
                a.map(|a| a.advice.join(" ")).into(),
            ]
        })
        .collect();
    let columns = [
        "object_id",
        "pid",
        "kind",
        "name",
        "size",
        "site",
        "accesses",
        "reads",
        "writes",
        "share",
        "pages",
        "sharing",
        "first_toucher",
        "main_user",
        "local_ratio",
        "remote",
        "advice",
    ];
    table("objects", &columns, rows)
}

fn object_threads(m: &ReportModel) -> Table {
    let mut rows = Vec::new();
    for o in &m.objects {
        for c in o.access.iter().flat_map(|a| &a.matrix) {
            rows.push(vec![
                o.id.into(),
                o.name.clone().into(),
                thread_label(m, c.thread),
                c.node.into(),
                c.reads.into(),
                c.writes.into(),
                c.accesses.into(),
            ]);
        }
    }
    let columns = [
        "object_id",
        "object",
        "thread",
        "node",
        "reads",
        "writes",
        "accesses",
    ];
    table("object_threads", &columns, rows)
}

fn threads(m: &ReportModel) -> Table {
    let rows = m
        .threads
        .iter()
        .map(|t| {
            vec![
                label(t).into(),
                t.pid.into(),
                t.tid.into(),
                t.logical_id.into(),
                t.name.clone().into(),
                t.samples.total.into(),
                t.access.accesses.into(),
                t.access.reads.into(),
                t.access.writes.into(),
                t.access.node.into(),
                t.access.local_ratio.into(),
            ]
        })
        .collect();
    let columns = [
        "thread",
        "pid",
        "tid",
        "logical_id",
        "name",
        "samples",
        "accesses",
        "reads",
        "writes",
        "node",
        "local_ratio",
    ];
    table("threads", &columns, rows)
}

fn nodes(m: &ReportModel) -> Table {
    let rows = m
        .placement
        .load
        .iter()
        .map(|l| {
            let recorded = m.nodes.nodes.iter().find(|n| n.node == l.node);
            vec![
                l.node.into(),
                l.accesses.into(),
                l.pages.into(),
                l.threads.into(),
                recorded.map_or(0, |n| n.pages).into(),
                recorded.map_or(0, |n| n.samples).into(),
            ]
        })
        .collect();
    let columns = [
        "node",
        "accesses_served",
        "pages",
        "threads",
        "recorded_pages",
        "samples",
    ];
    table("nodes", &columns, rows)
}

fn findings(m: &ReportModel) -> Table {
    let rows = m
        .findings
        .iter()
        .enumerate()
        .map(|(rank, f)| {
            vec![
                (rank + 1).into(),
                f.id.clone().into(),
                f.advice.clone().into(),
                f.object.id.into(),
                f.object.name.clone().into(),
                f.object.site.clone().into(),
                f.cost.accesses.into(),
                f.cost.share.into(),
                f.cost.remote.into(),
                f.summary.clone().into(),
                f.rests_on.clone().into(),
                f.basis.as_ref().map_or(Value::Null, |b| json!(b)),
            ]
        })
        .collect();
    let columns = [
        "rank",
        "id",
        "advice",
        "object_id",
        "object",
        "site",
        "accesses",
        "share",
        "remote",
        "summary",
        "rests_on",
        "basis",
    ];
    Table {
        // `basis` is structured: the CSV has its words, `rests_on`.
        json_only: 1,
        ..table("findings", &columns, rows)
    }
}

/// One row per cell row, one column per cell column, named by their first thread.
fn communication(m: &ReportModel) -> Table {
    let c = &m.communication;
    let name = |cell: usize| {
        let t = cell * c.threads_per_cell;
        m.threads.get(t).map_or(format!("{t}"), label)
    };
    let mut columns = vec!["thread".to_string()];
    columns.extend((0..c.values.len()).map(name));
    let rows = c
        .values
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let mut r: Vec<Value> = vec![name(i).into()];
            r.extend(row.iter().map(|v| json!(v)));
            r
        })
        .collect();
    Table {
        name: "communication",
        columns,
        rows,
        json_only: 0,
    }
}

fn traffic(m: &ReportModel) -> Table {
    let p = &m.placement;
    let mut rows = Vec::new();
    for (i, from) in p.nodes.iter().enumerate() {
        for (j, to) in p.nodes.iter().enumerate() {
            let n = p
                .traffic
                .get(i)
                .and_then(|r| r.get(j))
                .copied()
                .unwrap_or(0);
            rows.push(vec![(*from).into(), (*to).into(), n.into()]);
        }
    }
    table("node_traffic", &["from_node", "to_node", "accesses"], rows)
}

/// RFC 4180: a field with a comma, quote or line break is quoted, quotes doubled.
fn csv_field(v: &Value) -> String {
    let text = match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text
    }
}

fn csv(t: &Table) -> String {
    let mut out = String::new();
    let shown = t.columns.len() - t.json_only;
    let header: Vec<String> = t.columns[..shown]
        .iter()
        .map(|c| csv_field(&c.as_str().into()))
        .collect();
    out.push_str(&header.join(","));
    out.push('\n');
    for row in &t.rows {
        let cells: Vec<String> = row.iter().take(shown).map(csv_field).collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

/// An array of objects keyed by column name.
fn json_rows(t: &Table) -> String {
    let rows: Vec<Value> = t
        .rows
        .iter()
        .map(|row| {
            let map = t.columns.iter().cloned().zip(row.iter().cloned()).collect();
            Value::Object(map)
        })
        .collect();
    serde_json::to_string_pretty(&rows).expect("plain JSON") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(csv_field(&json!("a,b")), "\"a,b\"");
        assert_eq!(csv_field(&json!("say \"x\"")), "\"say \"\"x\"\"\"");
        assert_eq!(csv_field(&json!(3)), "3");
        assert_eq!(csv_field(&Value::Null), "");
    }
}
