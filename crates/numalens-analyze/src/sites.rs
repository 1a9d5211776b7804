//! Allocation sites from the `sites` table (one row per frame).

use std::collections::HashMap;

use numalens_format::{CodeLocation, FormatError, Profile, SiteFrame, is_system_source};

use crate::model::{Frame, SiteReport};

/// Every site of the profile by site key, frames innermost first.
pub(crate) fn read_sites(profile: &Profile) -> Result<HashMap<u64, SiteReport>, FormatError> {
    let mut frames: HashMap<u64, Vec<SiteFrame>> = HashMap::new();
    for frame in profile.read_all::<SiteFrame>()? {
        frames.entry(frame.site_key).or_default().push(frame);
    }
    Ok(frames
        .into_iter()
        .map(|(key, mut rows)| {
            rows.sort_by_key(|f| f.depth);
            // Processes of one image (a fork's children) write the same site each: its frames
            // once.
            rows.dedup_by_key(|f| f.depth);
            (key, site(key, rows))
        })
        .collect())
}

fn site(key: u64, rows: Vec<SiteFrame>) -> SiteReport {
    let frames: Vec<Frame> = rows
        .into_iter()
        .map(|f| Frame {
            module: f.module,
            offset: f.offset,
            function: f.function,
            file: f.file,
            line: f.line,
        })
        .collect();
    // The innermost frame with a source line outside the system's headers is the user's code
    // that allocated (allocator internals and libc frames have no line; templates inlined from
    // the C++ library have one in a system header).
    let own =
        |f: &&Frame| f.line.is_some() && f.file.as_deref().is_some_and(|p| !is_system_source(p));
    let location = frames
        .iter()
        .find(own)
        .or_else(|| frames.iter().find(|f| f.file.is_some() && f.line.is_some()))
        .or_else(|| frames.iter().find(|f| f.function.is_some()))
        .or(frames.first())
        .cloned()
        .unwrap_or(Frame {
            module: String::new(),
            offset: 0,
            function: None,
            file: None,
            line: None,
        });
    SiteReport {
        key: format!("{key:#018x}"),
        location,
        frames,
    }
}

/// `function (file:line)` of every symbolised code address, by (pid, address).
pub(crate) fn read_code_names(
    profile: &Profile,
) -> Result<HashMap<(u32, u64), String>, FormatError> {
    Ok(profile
        .read_all::<CodeLocation>()?
        .into_iter()
        .filter_map(|c| {
            let function = c.function?;
            let name = match (c.file, c.line) {
                (Some(file), Some(line)) => {
                    let file = file.rsplit('/').next().unwrap_or_default().to_string();
                    format!("{function} ({file}:{line})")
                }
                _ => function,
            };
            Some(((c.pid, c.ip), name))
        })
        .collect())
}
