//! `numalens report`: the report model of a profile, as text or JSON, on stdout.

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use numalens_analyze::{AnalyzeError, Options, WhatIf, analyze};
use numalens_format::Profile;
use numalens_topology::TopologyError;

use super::html_target;
use super::topology::use_color;
use crate::cli::{PlacementArgs, ReportArgs};
use crate::exit::UsageError;

pub fn run(args: ReportArgs) -> Result<()> {
    if let Some(path) = &args.html {
        html_target::check(path, "--html")?;
    }
    if args.object.as_deref() == Some("") {
        return Err(UsageError(
            "--object needs a name (an empty one would match every object); leave it out to \
             see them all"
                .into(),
        )
        .into());
    }
    let profile = Profile::open(&args.profile)?;
    let options = Options {
        top: args.top,
        object: args.object,
        thread: args.thread,
        ..analysis_options(&args.placement)?
    };
    let model = analyze(&profile, &options).map_err(usage_or_error)?;
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

/// The placement and block size options, with the what-if machine loaded.
pub fn analysis_options(args: &PlacementArgs) -> Result<Options> {
    let what_if = match &args.topology {
        None => None,
        Some(name) if Path::new(name).is_file() => Some(WhatIf {
            name: name.clone(),
            topology: numalens_topology::load_json_file(Path::new(name))?,
        }),
        Some(name) => {
            let topology = numalens_topology::presets::preset(name).map_err(|e| match e {
                TopologyError::UnknownPreset { .. } => {
                    UsageError(format!("--topology: {e} (or give a topology JSON file)")).into()
                }
                other => anyhow::Error::new(other),
            })?;
            Some(WhatIf {
                name: name.clone(),
                topology,
            })
        }
    };
    Ok(Options {
        what_if,
        block_size: args.block_size,
        ..Options::default()
    })
}

/// Errors about what was asked for (the profile is fine) are usage errors.
pub fn usage_or_error(e: AnalyzeError) -> anyhow::Error {
    match e {
        AnalyzeError::UnknownObject { .. }
        | AnalyzeError::UnknownThread { .. }
        | AnalyzeError::BlockSize { .. } => UsageError(e.to_string()).into(),
        other => anyhow::Error::new(other),
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not an error.
pub fn print_out(text: &str) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}
