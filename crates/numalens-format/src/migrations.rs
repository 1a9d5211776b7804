//! Reading the `migrations` table with its rows checked: nothing in the analysis needs a
//! migration's range to be sound yet, so a damaged one would otherwise go unnoticed.

use crate::error::{FormatError, Result};
use crate::reader::Profile;
use crate::tables::Migration;

impl Profile {
    /// Every migration of the profile; a row that cannot be a page migration is an error naming
    /// the file, the row and the column.
    pub fn read_migrations(&self) -> Result<Vec<Migration>> {
        let rows = self.read_all::<Migration>()?;
        let path = self.table_path::<Migration>();
        for (i, row) in rows.iter().enumerate() {
            self.check_migration(row)
                .map_err(|(column, problem)| FormatError::Column {
                    path: path.clone(),
                    column: column.to_string(),
                    problem: format!("row {i}: {problem}"),
                })?;
        }
        Ok(rows)
    }

    fn check_migration(&self, row: &Migration) -> Result<(), (&'static str, String)> {
        if row.len == 0 {
            return Err((
                "len",
                "`len` is 0; a migration moves at least one page".into(),
            ));
        }
        if row.start.checked_add(row.len).is_none() {
            return Err((
                "len",
                format!(
                    "the range {:#x} + {:#x} runs past the end of the address space",
                    row.start, row.len
                ),
            ));
        }
        let Some(topology) = &self.meta().topology else {
            return Ok(());
        };
        let nodes = [("to_node", Some(row.to_node)), ("from_node", row.from_node)];
        for (column, node) in nodes {
            if let Some(node) = node
                && topology.node_index(node).is_none()
            {
                return Err((
                    column,
                    format!(
                        "node {node} is not a node of the recorded machine ({:?})",
                        topology.node_ids()
                    ),
                ));
            }
        }
        Ok(())
    }
}
