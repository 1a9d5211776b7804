//! Findings of one rule on objects allocated in one function, with one fix, gathered into a
//! group: a code that allocates its arrays one after another in one function gets one entry
//! ("first-touch-mismatch on 6 objects allocated in F"), ranked by their combined cost, with
//! each finding one level down. The findings themselves stay as they were in `findings`.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use crate::model::{Cost, FindingGroup, Frame, ReportModel};

/// The groups of `model.findings` with two or more members, most costly first; `site_of` gives
/// the frame naming an object's allocation site (by object id), listed among the top objects
/// or not.
pub(crate) fn of<'a>(
    model: &ReportModel,
    site_of: &dyn Fn(u64) -> Option<&'a Frame>,
) -> Vec<FindingGroup> {
    let mut by_key: BTreeMap<(String, String, String, String), Vec<usize>> = BTreeMap::new();
    let mut lines: Vec<Option<u32>> = Vec::with_capacity(model.findings.len());
    for (at, f) in model.findings.iter().enumerate() {
        let location = site_of(f.object.id);
        lines.push(location.and_then(|l| l.line));
        let Some(function) = location.and_then(|l| l.function.clone()) else {
            continue;
        };
        let file = location.and_then(|l| l.file.clone()).unwrap_or_default();
        by_key
            .entry((f.id.clone(), f.fix.clone(), function, file))
            .or_default()
            .push(at);
    }
    let mut groups: Vec<FindingGroup> = by_key
        .into_iter()
        .filter(|(_, members)| members.len() >= 2)
        .map(|((id, fix, function, file), members)| {
            let mut at: Vec<u32> = members.iter().filter_map(|m| lines[*m]).collect();
            at.sort_unstable();
            at.dedup();
            group(model, id, fix, function, file, at, members)
        })
        .collect();
    groups.sort_by_key(|g| {
        (
            Reverse(g.cost.remote),
            Reverse(g.cost.accesses),
            g.members[0],
        )
    });
    groups
}

fn group(
    model: &ReportModel,
    id: String,
    fix: String,
    function: String,
    file: String,
    lines: Vec<u32>,
    members: Vec<usize>,
) -> FindingGroup {
    let first = &model.findings[members[0]];
    let mut cost = Cost {
        accesses: 0,
        share: 0.0,
        remote: 0,
    };
    for m in &members {
        let c = &model.findings[*m].cost;
        cost.accesses = cost.accesses.saturating_add(c.accesses);
        cost.share += c.share;
        cost.remote = cost.remote.saturating_add(c.remote);
    }
    let place = match (file.is_empty(), lines.first(), lines.last()) {
        (true, _, _) => String::new(),
        (false, Some(a), Some(b)) if a != b => format!(" ({file}:{a}\u{2013}{b})"),
        (false, Some(a), _) => format!(" ({file}:{a})"),
        (false, None, _) => format!(" ({file})"),
    };
    FindingGroup {
        summary: format!(
            "{id} on {} objects allocated in {}{place}",
            members.len(),
            numalens_format::short_function_name(&function)
        ),
        advice: first.advice.clone(),
        why: first.why.clone(),
        id,
        fix,
        function,
        file: (!file.is_empty()).then_some(file),
        lines,
        cost,
        members,
    }
}

impl ReportModel {
    /// The findings as a reader should see them, most costly first: each group once, in place
    /// of its members, and every finding of no group.
    pub fn finding_entries(&self) -> Vec<FindingEntry> {
        let grouped: std::collections::HashSet<usize> = self
            .finding_groups
            .iter()
            .flat_map(|g| g.members.iter().copied())
            .collect();
        let mut entries: Vec<(Cost, usize, FindingEntry)> = self
            .finding_groups
            .iter()
            .enumerate()
            .map(|(g, group)| (group.cost, group.members[0], FindingEntry::Group(g)))
            .collect();
        entries.extend(
            (0..self.findings.len())
                .filter(|f| !grouped.contains(f))
                .map(|f| (self.findings[f].cost, f, FindingEntry::Single(f))),
        );
        // Measured findings rank apart in `findings`; the order there breaks ties.
        entries.sort_by_key(|(c, first, _)| (Reverse(c.remote), Reverse(c.accesses), *first));
        entries.into_iter().map(|(_, _, e)| e).collect()
    }
}

/// One entry of the findings list: a finding (its position in `findings`) or a group (its
/// position in `finding_groups`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindingEntry {
    Single(usize),
    Group(usize),
}
