//! The online policies one window at a time. Each online policy (Carrefour, online kMAF, SPM,
//! tiering) is a state that takes the accesses of one more window and gives the moves it makes
//! at that window's end ([`Stepper`]). The batch schedules that `simulate` and `plan` use run the
//! same stepper over the recorded windows ([`run_batch`]); the online engine of `numalens run`
//! feeds it each epoch as the epoch closes, so what it decides costs one window's work, and
//! what it keeps is the policy's own state per page, not the run's history.

use crate::accesses::Cell;
use crate::layout::{Move, Schedule, ThreadMove};
use crate::machine::Machine;

use super::{Input, Params, Policy, carrefour, kmaf_online, spm, tiering};

/// What a step is given besides the window's cells.
pub struct StepInput<'a> {
    pub machine: &'a Machine,
    pub params: &'a Params,
    /// Node position per thread (every thread seen so far), where the policy's accesses count.
    pub threads: &'a [usize],
    /// Pages known so far (what [`Stepper::add_pages`] was given in all).
    pub pages: usize,
    /// The virtual page number of a page index.
    pub page_number: &'a dyn Fn(u32) -> u64,
    pub page_size: u64,
    pub window_ns: u64,
    /// Accesses one sample stands for (see `Accesses::sample_period`).
    pub sample_period: u64,
    /// This is the run's last window (known to a batch run only): online kMAF does not remap
    /// threads after it.
    pub last: bool,
}

/// The moves made at the end of a window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    pub moves: Vec<Move>,
    pub thread_moves: Vec<ThreadMove>,
}

/// An online policy's state.
pub enum Stepper {
    Carrefour(carrefour::Online),
    KmafOnline(kmaf_online::Online),
    Spm(spm::Online),
    Tiering(tiering::Online),
}

impl Stepper {
    /// The state of `policy` before the first window; `None` for a policy that does not decide
    /// while the run goes on. `total_windows` is the run's length when known (a batch run): SPM's
    /// default observation is a quarter of it, else one window.
    pub fn new(
        policy: Policy,
        machine: &Machine,
        params: &Params,
        page_size: u64,
        total_windows: Option<usize>,
    ) -> Option<Stepper> {
        Some(match policy {
            Policy::Carrefour => Stepper::Carrefour(carrefour::Online::default()),
            Policy::KmafOnline => Stepper::KmafOnline(kmaf_online::Online::default()),
            Policy::Spm => Stepper::Spm(spm::Online::new(&params.spm, total_windows)),
            Policy::Tiering => Stepper::Tiering(tiering::Online::new(machine, page_size)),
            _ => return None,
        })
    }

    /// Pages seen for the first time, in index order, with the node each was placed on.
    pub fn add_pages(&mut self, initial_nodes: &[usize]) {
        match self {
            Stepper::Carrefour(s) => s.add_pages(initial_nodes),
            Stepper::KmafOnline(s) => s.add_pages(initial_nodes),
            Stepper::Spm(s) => s.add_pages(initial_nodes),
            Stepper::Tiering(s) => s.add_pages(initial_nodes),
        }
    }

    /// One window's cells (sorted by page, then thread): the moves at its end.
    pub fn step(&mut self, input: &StepInput, cells: &[Cell]) -> Step {
        match self {
            Stepper::Carrefour(s) => s.step(input, cells),
            Stepper::KmafOnline(s) => s.step(input, cells),
            Stepper::Spm(s) => s.step(input, cells),
            Stepper::Tiering(s) => s.step(input, cells),
        }
    }

    /// What the policy did so far, in words.
    pub fn notes(&self) -> Vec<String> {
        match self {
            Stepper::Carrefour(s) => s.notes(),
            Stepper::KmafOnline(s) => s.notes(),
            Stepper::Spm(s) => s.notes(),
            Stepper::Tiering(s) => s.notes(),
        }
    }

    /// Bytes the state holds, by capacity.
    pub fn memory_bytes(&self) -> usize {
        match self {
            Stepper::Carrefour(s) => s.memory_bytes(),
            Stepper::KmafOnline(s) => s.memory_bytes(),
            Stepper::Spm(s) => s.memory_bytes(),
            Stepper::Tiering(s) => s.memory_bytes(),
        }
    }
}

/// An online policy over a recorded run: the stepper fed window by window, starting from
/// `base` (first touch).
pub(super) fn run_batch(policy: Policy, input: &Input, base: Schedule) -> Schedule {
    let a = input.accesses;
    let windows = a.windows.cells.len();
    let Some(mut stepper) = Stepper::new(
        policy,
        input.machine,
        input.params,
        a.page_size,
        Some(windows),
    ) else {
        return base;
    };
    stepper.add_pages(&base.initial.page_node);
    let page_number = |p: u32| a.pages[p as usize].number;
    let mut moves = Vec::with_capacity(windows);
    let mut thread_moves = Vec::with_capacity(windows);
    for (w, cells) in a.windows.cells.iter().enumerate() {
        let step = stepper.step(
            &StepInput {
                machine: input.machine,
                params: input.params,
                threads: input.threads,
                pages: a.pages.len(),
                page_number: &page_number,
                page_size: a.page_size,
                window_ns: a.windows.length_ns,
                sample_period: a.sample_period,
                last: w + 1 == windows,
            },
            cells,
        );
        moves.push(step.moves);
        thread_moves.push(step.thread_moves);
    }
    let mut s = Schedule { moves, ..base };
    if thread_moves.iter().any(|t| !t.is_empty()) {
        s.thread_moves = thread_moves;
    }
    s.notes.extend(stepper.notes());
    s
}

/// Node positions below this fit a page's one-word set of nodes.
pub(crate) const NODES_IN_A_WORD: usize = 32;

/// A node position's bit in a one-word set (positions below [`NODES_IN_A_WORD`]).
pub(crate) fn node_bit(node: usize) -> u32 {
    debug_assert!(node < NODES_IN_A_WORD);
    1u32 << node
}

/// A node position in two bytes (machines have far fewer nodes).
pub(crate) fn compact_node(node: usize) -> u16 {
    u16::try_from(node).unwrap_or(u16::MAX)
}

/// Room for `additional` more items, growing by a sixteenth rather than doubling: per-page
/// state of a long run is most of the engine's memory, and pages arrive a window at a time.
pub(crate) fn reserve_lean<T>(v: &mut Vec<T>, additional: usize) {
    if v.capacity() - v.len() < additional {
        v.reserve_exact(additional.max(v.len() / 16));
    }
}

/// `v` grown to `len` items of `value` (never shrunk), growing as [`reserve_lean`] does.
pub(crate) fn grow_lean<T: Clone>(v: &mut Vec<T>, len: usize, value: T) {
    if len > v.len() {
        let more = len - v.len();
        reserve_lean(v, more);
        v.resize(len, value);
    }
}
