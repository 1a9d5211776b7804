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
    let mut sites: Vec<(u64, SiteReport)> = frames
        .into_iter()
        .map(|(key, mut rows)| {
            rows.sort_by_key(|f| f.depth);
            // Processes of one image (a fork's children) write the same site each: its frames
            // once.
            rows.dedup_by_key(|f| f.depth);
            (key, site(key, rows))
        })
        .collect();
    locate_wrapped_sites(&mut sites);
    Ok(sites.into_iter().collect())
}

/// (function, file, line): what tells one frame's place from another's.
type Place = (Option<String>, Option<String>, Option<u32>);

/// Sites reached through a wrapper of the program's own (`xmalloc` inside
/// `polybench_alloc_data`) are located at the first own frame outward that tells them apart,
/// as the recorder names their objects: one location for every array said nothing.
fn locate_wrapped_sites(sites: &mut [(u64, SiteReport)]) {
    let ladders: Vec<Vec<Place>> = sites.iter().map(|(_, s)| own_places(s)).collect();
    let rungs = numalens_format::distinct_rungs(&ladders, 4);
    for ((_, site), (ladder, rung)) in sites.iter_mut().zip(ladders.iter().zip(rungs)) {
        if rung == 0 {
            continue;
        }
        let place = &ladder[rung];
        if let Some(frame) = site.frames.iter().find(|f| &frame_place(f) == place) {
            site.location = frame.clone();
        }
    }
}

fn frame_place(f: &Frame) -> Place {
    (f.function.clone(), f.file.clone(), f.line)
}

/// The places of a site's own frames from its location outward, consecutive repeats once;
/// empty when its location is not own code.
fn own_places(site: &SiteReport) -> Vec<Place> {
    let Some(at) = site
        .frames
        .iter()
        .position(|f| own(f) && *f == site.location)
    else {
        return Vec::new();
    };
    let mut places: Vec<Place> = Vec::new();
    for place in site.frames[at..].iter().filter(|f| own(f)).map(frame_place) {
        if places.last() != Some(&place) {
            places.push(place);
        }
    }
    places
}

/// A frame of the user's code: a source line outside the system's headers.
fn own(f: &Frame) -> bool {
    f.line.is_some() && f.file.as_deref().is_some_and(|p| !is_system_source(p))
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
    let location = frames
        .iter()
        .find(|f| own(f))
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
