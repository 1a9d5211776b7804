//! Objects grouped by allocation site. A server allocates its buffers, slabs or connections from
//! one call site, and a list of objects then repeats one name dozens of times; a group is what
//! the reports show instead: one row per site, its instances one level down.

use serde::{Deserialize, Serialize};

use super::{KindCounts, PagePlacement, SiteReport, ThreadShare};

/// The objects of one process and kind allocated at one site; an object without a site, and
/// every static, is a group of its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SiteGroup {
    pub pid: u32,
    /// The members' kind (`heap`, `mmap`, …).
    pub kind: String,
    /// The name of its first member (objects of one site share theirs).
    pub name: String,
    pub site: Option<SiteReport>,
    /// How many objects: the length of `members`.
    pub instances: u64,
    /// Bytes of all its members.
    pub size: u64,
    /// Object ids of every member, best first (by accesses, as objects are ranked).
    pub members: Vec<u64>,
    pub samples: KindCounts,
    pub weight: u64,
    /// Its members' pages at the end of the run, summed.
    pub pages: PagePlacement,
    /// Accesses, reads, writes and accesses of unknown direction of all members.
    pub accesses: u64,
    pub reads: u64,
    pub writes: u64,
    pub unknown_direction: u64,
    /// Of all accesses.
    pub share: f64,
    /// The sharing class of the pages holding most of its accesses; null without accesses.
    pub sharing: Option<String>,
    /// The thread that first touched most of its pages, and the thread with most accesses.
    pub first_toucher: Option<ThreadShare>,
    pub main_user: Option<ThreadShare>,
    /// How many members each thread first touched (most of their pages), most first.
    pub first_touchers: Vec<InstanceCount>,
    pub local_ratio: Option<f64>,
    pub remote: u64,
    /// Advice ids of the findings about its members, each once.
    pub advice: Vec<String>,
    /// Its first members (at most [`GROUP_INSTANCES`]), in the order of `members`.
    pub largest: Vec<GroupInstance>,
}

/// Members a group describes one by one; the others are only in `members`.
pub const GROUP_INSTANCES: usize = 8;

/// Members first touched by one thread (a position in the model's threads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceCount {
    pub thread: usize,
    pub instances: u64,
}

/// One member of a group, as its row under the group shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupInstance {
    pub id: u64,
    pub start: u64,
    pub size: u64,
    pub accesses: u64,
    pub reads: u64,
    pub writes: u64,
    pub share: f64,
    pub first_toucher: Option<ThreadShare>,
    pub local_ratio: Option<f64>,
}
