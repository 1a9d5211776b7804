//! What the kernel lets an unprivileged user sample, in words that name the setting to change.
//!
//! `perf_event_open` checks `kernel.perf_event_paranoid` for a user without CAP_PERFMON (Linux
//! 5.8 and later) or CAP_SYS_ADMIN, either of which bypasses it: at 2 or below a program's own
//! user-mode events are allowed; kernel-mode samples and the samples' physical addresses need 1
//! or below (the kernel's `perf_allow_kernel`); above 2 (Debian's and Ubuntu's kernels take 3 and
//! 4) every event is refused.

use std::io;

/// Where the kernel shows the setting.
pub const PARANOID: &str = "/proc/sys/kernel/perf_event_paranoid";

/// The setting now, when it can be read.
pub fn paranoid() -> Option<i32> {
    std::fs::read_to_string(PARANOID).ok()?.trim().parse().ok()
}

/// The setting as a phrase: "is 2 here", or that it could not be read.
fn setting(paranoid: Option<i32>) -> String {
    match paranoid {
        Some(p) => format!("kernel.perf_event_paranoid is {p} here"),
        None => format!("{PARANOID} could not be read"),
    }
}

const CAPABILITY: &str = "CAP_PERFMON (Linux 5.8 and later) or CAP_SYS_ADMIN";

/// Why `perf_event_open` refused every event (`error`, EACCES or EPERM) and what allows it.
pub fn denied(error: &io::Error, paranoid: Option<i32>) -> String {
    let why = match paranoid {
        Some(p) if p <= 2 => format!(
            "{}, which allows a program's own events: a security module (SELinux, AppArmor), \
             the kernel's lockdown or a container's seccomp filter refused it; lift that \
             restriction or give numalens {CAPABILITY}",
            setting(paranoid)
        ),
        _ => format!(
            "{}; a user without {CAPABILITY} may open events only at 2 or lower: allow it with \
             `sysctl kernel.perf_event_paranoid=2` (1 also gives kernel-mode samples and \
             physical addresses) or give numalens one of those capabilities",
            setting(paranoid)
        ),
    };
    format!(
        "perf_event_open was denied ({error}): {why}; or record allocations only with \
         `--backend none`"
    )
}

/// The note of a profile whose `what` (kernel-mode samples, physical addresses) the kernel
/// refused for want of privilege, and what they need.
pub fn refused_note(what: &str, consequence: &str, paranoid: Option<i32>) -> String {
    format!(
        "the kernel refused {what}: {consequence} (they need kernel.perf_event_paranoid 1 or \
         lower — {} — or {CAPABILITY})",
        match paranoid {
            Some(p) => format!("it is {p} here"),
            None => format!("{PARANOID} could not be read"),
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_advice_follows_the_setting() {
        let e = io::Error::from_raw_os_error(libc::EACCES);
        let debian = denied(&e, Some(3));
        assert!(
            debian.contains("is 3 here") && debian.contains("perf_event_paranoid=2"),
            "{debian}"
        );
        assert!(debian.contains("CAP_PERFMON") && debian.contains("CAP_SYS_ADMIN"));
        let allowed = denied(&e, Some(1));
        assert!(
            allowed.contains("is 1 here") && allowed.contains("security module"),
            "{allowed}"
        );
        assert!(denied(&e, None).contains(PARANOID));
        let note = refused_note("physical addresses", "nodes are unknown", Some(2));
        assert!(note.contains("1 or lower — it is 2 here —"), "{note}");
    }
}
