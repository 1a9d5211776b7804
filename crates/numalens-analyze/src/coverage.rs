//! How much of the run exact counts cover.
//!
//! The hooks count what the compiler instrumented: a stack array the compiler proved never
//! escapes its function, or code built without `numalens cc` (a library, the C library's own
//! buffers), is accessed without a count. Its pages still fault when first touched, and the
//! `inst` backend records those faults beside the counts: a page with a first-touch fault and no
//! counted access is a page the counts do not see. Without this, a 2 MiB per-thread stack array
//! simply vanished from the report.

use std::collections::HashMap;

use numalens_format::{Label, Object};

use crate::access::{AccessTally, NO_OBJECT, PageAcc, PageKey};
use crate::model::{Coverage, UncountedObject};

/// Objects listed by name, the most uncounted pages first.
const LISTED: usize = 8;

/// The coverage of exact counts `exact` over the pages with a first-touch fault in `sampled`;
/// `None` without exact counts or without first touches (nothing to compare).
pub(crate) fn of_exact_counts(
    objects: &[Object],
    exact: &[(PageKey, PageAcc)],
    sampled: &AccessTally,
) -> Option<Coverage> {
    if exact.is_empty() {
        return None;
    }
    let counted: ahash::AHashSet<PageKey> = exact
        .iter()
        .filter(|(_, p)| p.users.iter().any(|u| u.accesses() > 0))
        .map(|(k, _)| *k)
        .collect();
    let mut touched_pages = 0u64;
    let mut by_object: HashMap<u32, u64> = HashMap::new();
    for (key, page) in &sampled.pages {
        if page.touch.is_none() || recorders_own(objects, page.object) {
            continue;
        }
        touched_pages += 1;
        if !counted.contains(key) {
            *by_object.entry(page.object).or_default() += 1;
        }
    }
    if touched_pages == 0 {
        return None;
    }
    let mut uncounted: Vec<(u32, u64)> = by_object.into_iter().collect();
    uncounted.sort_by_key(|&(object, pages)| (std::cmp::Reverse(pages), object));
    Some(Coverage {
        touched_pages,
        uncounted_pages: uncounted.iter().map(|(_, n)| n).sum(),
        uncounted: uncounted
            .into_iter()
            .take(LISTED)
            .map(|(p, pages)| uncounted_object(objects, p, pages))
            .collect(),
    })
}

/// The recorder's own memory in the program (its runtime's data, the hooks' page tables and
/// sample files): not the program's, so neither counted nor a blind spot of its counts.
fn recorders_own(objects: &[Object], position: u32) -> bool {
    objects
        .get(position as usize)
        .is_some_and(|o| o.name.contains("libnumalens") || o.name.contains("numalens-inst"))
}

fn uncounted_object(objects: &[Object], position: u32, pages: u64) -> UncountedObject {
    match objects
        .get(position as usize)
        .filter(|_| position != NO_OBJECT)
    {
        Some(o) => UncountedObject {
            object: Some(o.object_id),
            name: o.name.clone(),
            kind: o.kind.label().to_string(),
            pages,
        },
        None => UncountedObject {
            object: None,
            name: "not in a known object".into(),
            kind: "unknown".into(),
            pages,
        },
    }
}
