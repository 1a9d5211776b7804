//! `numalens report`: the report model of a profile, as text or JSON, on stdout.

use std::io::Write;

use anyhow::Result;
use numalens_analyze::{AnalyzeError, Options, analyze};
use numalens_format::Profile;

use super::topology::use_color;
use crate::cli::ReportArgs;
use crate::exit::UsageError;

pub fn run(args: ReportArgs) -> Result<()> {
    let profile = Profile::open(&args.profile)?;
    let options = Options {
        top: args.top,
        object: args.object,
        thread: args.thread,
        ..Options::default()
    };
    let model = analyze(&profile, &options).map_err(|e| match e {
        // The profile is fine; what was asked for is not in it.
        AnalyzeError::UnknownObject { .. } | AnalyzeError::UnknownThread { .. } => {
            UsageError(e.to_string()).into()
        }
        other => anyhow::Error::new(other),
    })?;
    let text = if args.json {
        serde_json::to_string_pretty(&model)? + "\n"
    } else {
        numalens_report::render_text(&model, use_color())
    };
    print_out(&text)?;
    match &args.html {
        Some(path) => write_html(path, &model),
        None => Ok(()),
    }
}

/// Writes the HTML report to `path`; an error names the path.
fn write_html(path: &std::path::Path, model: &numalens_analyze::ReportModel) -> Result<()> {
    let html = numalens_report::html::render(model);
    std::fs::write(path, html)
        .map_err(|e| anyhow::anyhow!("cannot write the HTML report to {}: {e}", path.display()))?;
    eprintln!("numalens: HTML report written to {}", path.display());
    Ok(())
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
fn print_out(text: &str) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}
