//! The side tables a report can do without (`sites`, `code_locations`, `page_nodes`): one that
//! cannot be read costs the report only what it adds, and the report says which and why,
//! instead of failing as a whole on a profile whose accesses are all there.

use numalens_format::FormatError;

use crate::model::UnreadableTable;

/// What a side table adds to the report.
pub(crate) const SITES: (&str, &str) = ("sites", "the allocation call sites of heap objects");
pub(crate) const CODE_LOCATIONS: (&str, &str) = (
    "code_locations",
    "the names of threads' start routines and of code addresses",
);
pub(crate) const PAGE_NODES: (&str, &str) = (
    "page_nodes",
    "where pages were at the end of the run (resident pages per object and node)",
);

/// The tables that could not be read, in the order they were tried.
#[derive(Debug, Default)]
pub(crate) struct Unreadable(pub Vec<UnreadableTable>);

impl Unreadable {
    /// The table's contents, or (noting why) its empty value.
    pub(crate) fn or_empty<T: Default>(
        &mut self,
        (table, adds): (&str, &str),
        read: Result<T, FormatError>,
    ) -> T {
        read.unwrap_or_else(|e| {
            self.0.push(UnreadableTable {
                table: table.to_string(),
                problem: e.to_string(),
                missing: adds.to_string(),
            });
            T::default()
        })
    }
}
