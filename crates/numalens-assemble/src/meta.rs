//! The profile's `meta.json`: what is known of the run before its end.

use numalens_format::{Backend, Clock, Host, Meta};

use crate::AssembleOptions;
use crate::raw::RawRecording;

/// The meta of the profile of `raw`: the machine it was recorded on, not the one assembling it.
pub fn recording_meta(raw: &RawRecording, opts: &AssembleOptions<'_>) -> Meta {
    let mut meta = profile_meta(
        raw.command.clone(),
        (raw.start_unix_ns, raw.clock_origin_ns),
        opts,
    );
    meta.lost_samples = raw.lost;
    meta.host = raw.host.clone();
    meta.page_size = raw.page_size;
    meta
}

/// The meta of a profile of `command`, started at `start` (Unix time, then the samples' clock,
/// both in ns), before anything of the run is known.
pub fn profile_meta(command: Vec<String>, start: (u64, u64), opts: &AssembleOptions<'_>) -> Meta {
    let backend = Backend {
        name: opts.backend.to_string(),
        settings: opts.backend_settings.clone(),
    };
    let clock = Clock {
        name: "CLOCK_MONOTONIC".into(),
        origin_ns: start.1,
    };
    let mut meta = Meta::new(command, backend, this_host(), clock);
    meta.start_unix_ns = start.0;
    meta.topology = opts.topology.clone();
    meta.page_size = host_page_size();
    meta.numa_balancing = opts.numa_balancing.clone();
    meta
}

/// The machine this runs on.
pub fn this_host() -> Host {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    Host {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        arch: std::env::consts::ARCH.to_string(),
    }
}

/// The base page size of this machine.
fn host_page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).unwrap_or(4096)
}
