//! Values of `meta.json` that parse but make no sense: the readers size and divide by them
//! (`page_size`), place pages with them (`topology`), or tell the user about them.

use super::Meta;

/// Smallest and largest base page size a profile may state. Linux's base pages are 4 KiB to
/// 256 KiB; anything outside this wider range is damage, not a machine.
const MIN_PAGE_SIZE: u64 = 1 << 10;
const MAX_PAGE_SIZE: u64 = 1 << 30;

/// Highest `kernel.numa_balancing` value: a bit mask of normal (1) and memory tiering (2).
const MAX_NUMA_BALANCING_MODE: u32 = 3;

/// The offending field's path and what is wrong with it.
type Check = Result<(), (String, String)>;

fn fail(field: impl Into<String>, problem: impl Into<String>) -> Check {
    Err((field.into(), problem.into()))
}

impl Meta {
    /// Checks the values of a parsed `meta.json` for sense.
    pub(super) fn check(&self) -> Check {
        if self.command.is_empty() {
            return fail("command", "is empty; it must hold at least the program");
        }
        self.check_page_size()?;
        if let Some(end) = self.end_unix_ns
            && end < self.start_unix_ns
        {
            return fail(
                "end_unix_ns",
                format!("{end} is before `start_unix_ns` ({})", self.start_unix_ns),
            );
        }
        if let Some(topology) = &self.topology {
            check_topology(topology)?;
        }
        if let Some(balancing) = &self.numa_balancing
            && balancing.mode > MAX_NUMA_BALANCING_MODE
        {
            return fail(
                "numa_balancing.mode",
                format!(
                    "is {}; `kernel.numa_balancing` is 0 to {MAX_NUMA_BALANCING_MODE}",
                    balancing.mode
                ),
            );
        }
        if self.completeness.complete && !self.completeness.reasons.is_empty() {
            return fail(
                "completeness.reasons",
                "lists reasons for incompleteness, but `complete` is true",
            );
        }
        self.check_overhead()
    }

    fn check_page_size(&self) -> Check {
        let size = self.page_size;
        if !size.is_power_of_two() || !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&size) {
            return fail(
                "page_size",
                format!(
                    "is {size}; a page size is a power of two from {MIN_PAGE_SIZE} to \
                     {MAX_PAGE_SIZE} bytes"
                ),
            );
        }
        Ok(())
    }

    fn check_overhead(&self) -> Check {
        let Some(o) = &self.overhead else {
            return Ok(());
        };
        let figures = [
            ("slowdown", o.slowdown),
            ("recorder_cpu_s", o.recorder_cpu_s),
            ("running_cpu_s", o.running_cpu_s),
            ("program_wall_s", o.program_wall_s),
            ("writing_wall_s", o.writing_wall_s),
        ];
        for (name, value) in figures {
            if let Some(v) = value
                && !(v.is_finite() && v >= 0.0)
            {
                return fail(
                    format!("overhead.{name}"),
                    format!("is {v}; it must be a finite number, not negative"),
                );
            }
        }
        Ok(())
    }
}

/// The checks `numalens topology --topology` makes of the same JSON, with the field's path
/// inside `meta.json`.
fn check_topology(topology: &numalens_topology::Topology) -> Check {
    match topology.validate() {
        Ok(()) => Ok(()),
        Err(numalens_topology::TopologyError::Invalid { field, problem, .. }) => {
            fail(format!("topology.{field}"), problem)
        }
        Err(other) => fail("topology", other.to_string()),
    }
}
