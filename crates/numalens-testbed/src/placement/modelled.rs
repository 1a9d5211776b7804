//! The simulator's memory time of a measured placement: the profile's accesses as `numalens
//! simulate` loads them, under a schedule that puts each page and thread where it was measured
//! to be in each window, on the profile's recorded machine.

use numalens_format::Profile;
use numalens_place::accesses::Accesses;
use numalens_place::layout::{Layout, Move, Schedule, ThreadMove};
use numalens_place::load::{LoadOptions, load};
use numalens_place::{Machine, Model};

use super::observed::Observed;

/// The modelled time and what the schedule had to assume.
#[derive(Debug, Clone, PartialEq)]
pub struct Modelled {
    pub seconds: f64,
    /// The simulator's own local access ratio of the schedule (window granularity).
    pub local_access_ratio: Option<f64>,
    pub notes: Vec<String>,
}

/// Loads `profile` and simulates its measured placement.
pub fn simulate(profile: &Profile, observed: &Observed) -> Result<Modelled, String> {
    let accesses = load(profile, &LoadOptions::default()).map_err(|e| e.to_string())?;
    let topology = profile
        .meta()
        .topology
        .as_ref()
        .ok_or("the profile has no recorded topology")?;
    let machine = Machine::from_topology(topology);
    let (schedule, notes) = measured_schedule(&accesses, &machine, observed);
    let outcome = numalens_place::simulate(&accesses, &machine, &schedule, &Model::default());
    Ok(Modelled {
        seconds: outcome.modelled_time_s,
        local_access_ratio: outcome.local_access_ratio,
        notes,
    })
}

/// Each page and thread on its measured node at the middle of each window; a move (at the end
/// of the window before) wherever that changes. A page no observation covers stays where its
/// first toucher was when it touched it; a thread never seen on a CPU stays on the first node.
pub fn measured_schedule(
    accesses: &Accesses,
    machine: &Machine,
    observed: &Observed,
) -> (Schedule, Vec<String>) {
    let position = |node: u32| machine.nodes.iter().position(|n| *n == node);
    let w = &accesses.windows;
    let windows = w.cells.len().max(1);
    let middle = |k: usize| w.start_ns + w.length_ns * k as u64 + w.length_ns / 2;
    let thread_at = |t: usize, time: u64| {
        let info = &accesses.threads[t];
        observed
            .thread_node(info.pid, info.tid, time)
            .and_then(position)
    };
    let page_at = |p: usize, time: u64| {
        let page = &accesses.pages[p];
        observed
            .page_node(page.pid, page.number, time)
            .and_then(position)
    };
    let mut notes = Vec::new();
    let mut unseen_threads = 0;
    let mut thread_node: Vec<usize> = (0..accesses.threads.len())
        .map(|t| {
            thread_at(t, middle(0)).unwrap_or_else(|| {
                unseen_threads += 1;
                0
            })
        })
        .collect();
    let mut unseen_pages = 0u64;
    let mut page_node: Vec<usize> = (0..accesses.pages.len())
        .map(|p| {
            let page = &accesses.pages[p];
            page_at(p, middle(0))
                .or_else(|| {
                    unseen_pages += page.total();
                    let toucher = page.first_toucher? as usize;
                    thread_at(toucher, page.first_ns)
                })
                .unwrap_or(0)
        })
        .collect();
    if unseen_threads > 0 {
        notes.push(format!(
            "{unseen_threads} thread(s) never seen on a CPU: modelled on the first node"
        ));
    }
    let total = accesses.total().max(1);
    if unseen_pages * 1000 > total {
        notes.push(format!(
            "{:.1} % of the accesses are to pages no scan answered: modelled where their \
             first toucher was",
            unseen_pages as f64 * 100.0 / total as f64
        ));
    }
    let initial = Layout {
        thread_node: thread_node.clone(),
        page_node: page_node.clone(),
        replicated: Vec::new(),
    };
    let mut moves = vec![Vec::new(); windows];
    let mut thread_moves = vec![Vec::new(); windows];
    for k in 1..windows {
        let time = middle(k);
        for (p, node) in page_node.iter_mut().enumerate() {
            if let Some(now) = page_at(p, time)
                && now != *node
            {
                moves[k - 1].push(Move::migrate(p as u32, now));
                *node = now;
            }
        }
        for (t, node) in thread_node.iter_mut().enumerate() {
            if let Some(now) = thread_at(t, time)
                && now != *node
            {
                thread_moves[k - 1].push(ThreadMove {
                    thread: t as u32,
                    to: now,
                });
                *node = now;
            }
        }
    }
    let schedule = Schedule {
        initial,
        moves,
        thread_moves,
        spilled_pages: 0,
        notes: Vec::new(),
    };
    (schedule, notes)
}
