//! The placement actions of a run: rules of a plan the runtime applied (`PLACE` records) and
//! the online engine's page moves, as rows of the profile's `migrations` table.

use numalens_format::Migration;
use numalens_preload::events::Event;

/// The `policy` of the rows made from a plan's rules.
pub const PLAN_POLICY: &str = "plan";

/// A `migrations` row from a `PLACE` record at `time_ns` (monotonic) of process `pid`; `None`
/// for a thread's placement (no pages) or a record that is not `PLACE`.
pub fn plan_row(time_ns: u64, pid: u32, event: &Event, origin: u64) -> Option<Migration> {
    let Event::Place {
        address,
        len,
        rule,
        node,
        errno,
        what,
        spread,
    } = *event
    else {
        return None;
    };
    let kind = match what {
        0 => "object",
        1 => "static object",
        _ => return None,
    };
    // A node a damaged log could not have: the row would make the table unreadable.
    let to_node = u32::try_from(node).ok().filter(|n| *n < 1 << 16)?;
    // Spread over several nodes (an interleave or a weighted pattern): the row names the lowest,
    // the plan has the others.
    let spread = if spread {
        ", spread over the rule's nodes"
    } else {
        ""
    };
    Some(Migration {
        time_ns: time_ns.saturating_sub(origin),
        pid,
        start: address,
        len: len.max(1),
        from_node: None,
        to_node,
        policy: PLAN_POLICY.into(),
        reason: format!("objects[{rule}] ({kind}){spread}"),
        result: errno_name(errno),
    })
}

/// `ok`, or the errno's symbolic name (`EINVAL`, …) as the `migrations.result` column has it.
pub fn errno_name(errno: i32) -> String {
    if errno == 0 {
        return "ok".into();
    }
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ESRCH => "ESRCH",
        libc::EIO => "EIO",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EINVAL => "EINVAL",
        libc::ENODEV => "ENODEV",
        libc::EXDEV => "EXDEV",
        libc::ENOSPC => "ENOSPC",
        libc::E2BIG => "E2BIG",
        _ => return format!("errno {errno}"),
    };
    name.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(node: i64, errno: i32, what: u8) -> Event {
        Event::Place {
            address: 0x7f00_0000_0000,
            len: 8192,
            rule: 3,
            node: node.max(0),
            errno,
            what,
            spread: node < 0,
        }
    }

    #[test]
    fn a_bound_object_is_a_row_with_its_node_and_the_kernel_s_answer() {
        let row = plan_row(1_500, 42, &place(2, 0, 0), 500).unwrap();
        assert_eq!(
            (row.time_ns, row.pid, row.len, row.to_node),
            (1_000, 42, 8192, 2)
        );
        assert_eq!((row.policy.as_str(), row.result.as_str()), ("plan", "ok"));
        assert_eq!(row.reason, "objects[3] (object)");
        let refused = plan_row(0, 42, &place(1, libc::EINVAL, 1), 0).unwrap();
        assert_eq!(refused.result, "EINVAL");
        assert!(refused.reason.contains("static object"));
    }

    #[test]
    fn spread_rules_say_so_and_threads_are_no_rows() {
        let row = plan_row(0, 1, &place(-1, 0, 0), 0).unwrap();
        assert!(row.reason.contains("spread"));
        assert!(plan_row(0, 1, &place(-1, 0, 2), 0).is_none());
        assert!(plan_row(0, 1, &Event::End, 0).is_none());
        let damaged = Event::Place {
            address: 0,
            len: 1,
            rule: 0,
            node: i64::MAX,
            errno: 0,
            what: 0,
            spread: false,
        };
        assert!(plan_row(0, 1, &damaged, 0).is_none());
    }
}
