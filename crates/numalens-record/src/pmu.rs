//! Which precise memory-sampling event the machine's PMU offers, from sysfs
//! (`/sys/bus/event_source/devices`): Intel's load-latency `mem-loads` (and `mem-stores`) on the
//! core PMU (`cpu`, or `cpu_core`/`cpu_atom` on hybrid parts), AMD's `ibs_op`, Arm's `arm_spe_N`.
//! When there is none, what is missing, in words a user can act on.

use std::path::Path;

/// A precise memory event of this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PreciseEvent {
    /// Intel PEBS load latency: the PMU's name, its perf type and the event's sysfs encoding
    /// (`event=0xcd,umask=0x1,ldlat=3`); stores when the PMU lists `mem-stores`.
    IntelLoadLatency {
        pmu: String,
        perf_type: u32,
        loads: String,
        stores: Option<String>,
    },
    /// AMD IBS op sampling; `l3_miss` when the filter on L3 misses exists (Zen 4).
    AmdIbsOp { perf_type: u32, l3_miss: bool },
    /// Arm's Statistical Profiling Extension (samples in an AUX buffer).
    ArmSpe { pmu: String, perf_type: u32 },
}

impl PreciseEvent {
    /// The event as `perf` names it.
    pub fn name(&self) -> String {
        match self {
            PreciseEvent::IntelLoadLatency { pmu, .. } => format!("{pmu}/mem-loads/P"),
            PreciseEvent::AmdIbsOp { .. } => "ibs_op//".into(),
            PreciseEvent::ArmSpe { pmu, .. } => format!("{pmu}//"),
        }
    }
}

/// Why the machine offers no precise memory event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoPreciseEvent {
    #[error(
        "this machine exposes no hardware PMU to perf ({0} lists only software and tracing \
         event sources): a virtual machine without a virtual PMU, or a kernel built without \
         the CPU's PMU driver"
    )]
    NoHardwarePmu(String),
    #[error(
        "the hardware PMU ({pmus}) has no precise memory event: no `mem-loads` (Intel PEBS load \
         latency), `ibs_op` (AMD IBS) or `arm_spe` (Arm SPE) in {dir}"
    )]
    NoMemoryEvent { pmus: String, dir: String },
    #[error("cannot read {0}: {1}")]
    Unreadable(String, String),
}

/// PMUs that are not the CPU's: their presence says nothing of precise sampling.
const NOT_CPU: [&str; 9] = [
    "software",
    "tracepoint",
    "breakpoint",
    "uprobe",
    "kprobe",
    "msr",
    "power",
    "intel_bts",
    "cstate_core",
];

/// The precise memory events under `devices` (`/sys/bus/event_source/devices` on a live
/// machine), best first.
pub fn detect(devices: &Path) -> Result<Vec<PreciseEvent>, NoPreciseEvent> {
    let shown = devices.display().to_string();
    let entries = std::fs::read_dir(devices)
        .map_err(|e| NoPreciseEvent::Unreadable(shown.clone(), e.to_string()))?;
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let read = |pmu: &str, file: &str| {
        std::fs::read_to_string(devices.join(pmu).join(file))
            .ok()
            .map(|s| s.trim().to_string())
    };
    let perf_type = |pmu: &str| read(pmu, "type").and_then(|t| t.parse::<u32>().ok());
    let mut found = Vec::new();
    for pmu in ["cpu_core", "cpu", "cpu_atom"] {
        if let (Some(loads), Some(t)) = (read(pmu, "events/mem-loads"), perf_type(pmu)) {
            found.push(PreciseEvent::IntelLoadLatency {
                pmu: pmu.into(),
                perf_type: t,
                loads,
                stores: read(pmu, "events/mem-stores"),
            });
        }
    }
    if let Some(t) = perf_type("ibs_op") {
        let l3_miss = read("ibs_op", "format/l3missonly").is_some();
        found.push(PreciseEvent::AmdIbsOp {
            perf_type: t,
            l3_miss,
        });
    }
    for pmu in names.iter().filter(|n| n.starts_with("arm_spe")) {
        if let Some(t) = perf_type(pmu) {
            found.push(PreciseEvent::ArmSpe {
                pmu: pmu.clone(),
                perf_type: t,
            });
        }
    }
    if !found.is_empty() {
        return Ok(found);
    }
    let hardware: Vec<&String> = names
        .iter()
        .filter(|n| !NOT_CPU.contains(&n.as_str()))
        .collect();
    if hardware.is_empty() {
        return Err(NoPreciseEvent::NoHardwarePmu(shown));
    }
    Err(NoPreciseEvent::NoMemoryEvent {
        pmus: hardware
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        dir: shown,
    })
}

/// The arguments of the `perf` command that records `event` as `numalens import` reads it: data
/// addresses, their physical addresses, weights (latency), the CPU of each sample (the node a
/// first touch placed its page on), on the clock numalens' runtime uses.
pub fn perf_record_args(event: &str) -> Vec<String> {
    [
        "record",
        "-e",
        event,
        "-d",
        "--phys-data",
        "--sample-cpu",
        "-W",
        "-k",
        "CLOCK_MONOTONIC",
    ]
    .map(str::to_string)
    .to_vec()
}

/// Where the kernel lists the event sources.
pub const DEVICES: &str = "/sys/bus/event_source/devices";

/// This machine's precise memory events.
pub fn host() -> Result<Vec<PreciseEvent>, NoPreciseEvent> {
    detect(Path::new(DEVICES))
}

/// A PMU's directory under a fake `devices` tree, with these files (tests).
#[cfg(test)]
pub(crate) fn fake_pmu(root: &Path, name: &str, files: &[(&str, &str)]) {
    for (file, text) in files {
        let path = root.join(name).join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("{text}\n")).unwrap();
    }
}

#[cfg(test)]
mod tests {
    use super::fake_pmu as pmu;
    use super::*;

    #[test]
    fn each_vendors_precise_event_is_found() {
        let intel = tempfile::tempdir().unwrap();
        pmu(intel.path(), "software", &[("type", "1")]);
        pmu(
            intel.path(),
            "cpu",
            &[
                ("type", "4"),
                ("events/mem-loads", "event=0xcd,umask=0x1,ldlat=3"),
                ("events/mem-stores", "event=0xd0,umask=0x82"),
            ],
        );
        let found = detect(intel.path()).unwrap();
        assert_eq!(found[0].name(), "cpu/mem-loads/P");
        assert!(matches!(
            &found[0],
            PreciseEvent::IntelLoadLatency {
                perf_type: 4,
                stores: Some(_),
                ..
            }
        ));

        let amd = tempfile::tempdir().unwrap();
        pmu(amd.path(), "cpu", &[("type", "4")]);
        pmu(
            amd.path(),
            "ibs_op",
            &[("type", "11"), ("format/l3missonly", "config:16")],
        );
        assert_eq!(
            detect(amd.path()).unwrap(),
            vec![PreciseEvent::AmdIbsOp {
                perf_type: 11,
                l3_miss: true
            }]
        );

        let arm = tempfile::tempdir().unwrap();
        pmu(arm.path(), "armv8_pmuv3_0", &[("type", "8")]);
        pmu(arm.path(), "arm_spe_0", &[("type", "9")]);
        assert_eq!(detect(arm.path()).unwrap()[0].name(), "arm_spe_0//");
    }

    #[test]
    fn what_is_missing_is_said() {
        let vm = tempfile::tempdir().unwrap();
        for name in ["software", "tracepoint", "breakpoint", "uprobe", "msr"] {
            pmu(vm.path(), name, &[("type", "1")]);
        }
        let err = detect(vm.path()).unwrap_err();
        assert!(matches!(err, NoPreciseEvent::NoHardwarePmu(_)), "{err}");
        assert!(err.to_string().contains("virtual PMU"), "{err}");

        pmu(
            vm.path(),
            "cpu",
            &[("type", "4"), ("events/cycles", "event=0x3c")],
        );
        let err = detect(vm.path()).unwrap_err();
        assert!(
            matches!(err, NoPreciseEvent::NoMemoryEvent { ref pmus, .. } if pmus == "cpu"),
            "{err}"
        );
    }
}
