//! The Arm SPE event the live `pmu` backend opens: the PMU's own type and `format` files
//! (`ts_enable`, `pa_enable`, `jitter`, `load_filter`, `store_filter`), its CPUs (`cpumask`),
//! the smallest interval it takes (`caps/min_interval`) and which data source encoding its
//! cores write (their MIDR).
//!
//! Default interval: one sample per [`SPE_PERIOD`] operations, the number of AMD IBS's default
//! (MemProf measured about 5 % overhead for IBS at about that rate, where each sample costs an
//! interrupt; SPE writes its samples to memory and interrupts only when the area fills).
//! Only loads and stores are kept (the type filter), with a random jitter on the interval so
//! that a loop whose length divides it is not sampled at one instruction.

use std::path::Path;

use numalens_assemble::perf_sample::access::EventMeaning;
use numalens_assemble::perf_sample::spe::neoverse_data_source;
use numalens_format::SampleKind;

use crate::pmu_events::{LiveEvent, encode, read_cpus};

pub const SPE_PERIOD: u64 = 65_536;

/// The interval's low 8 bits are not the hardware's (`PMSIRR_EL1.INTERVAL` is bits 31:8).
const INTERVAL_UNIT: u64 = 256;
const INTERVAL_MAX: u64 = 0xffff_ff00;

/// What an SPE event needs besides its attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpeSetup {
    /// The cores write the Neoverse data source encoding.
    pub neoverse: bool,
    /// The configuration bits of `pa_enable`: cleared when the kernel refuses physical
    /// addresses (the driver takes them only from a user with CAP_PERFMON).
    pub physical_bits: [u64; 3],
    /// The bits of the load and store filters: cleared when the PMU refuses filtering by type.
    pub filter_bits: [u64; 3],
}

/// The SPE event of PMU `pmu` (perf type `perf_type`) under `devices`, with `period`.
pub fn live_event(
    pmu: &str,
    perf_type: u32,
    devices: &Path,
    period: Option<u64>,
) -> Result<LiveEvent, String> {
    let dir = devices.join(pmu);
    let format = dir.join("format");
    let has = |term: &str| format.join(term).exists();
    let min = std::fs::read_to_string(dir.join("caps/min_interval"))
        .ok()
        .and_then(|t| t.trim().parse::<u64>().ok())
        .unwrap_or(INTERVAL_UNIT);
    let period = checked_period(period.unwrap_or(SPE_PERIOD.max(min)), min)?;
    let mut terms = vec!["ts_enable=1", "pa_enable=1"];
    if has("jitter") {
        terms.push("jitter=1");
    }
    let filters = has("load_filter") && has("store_filter");
    if filters {
        terms.extend(["load_filter=1", "store_filter=1"]);
    }
    let config = encode(&format, &terms.join(","), &[])?;
    let cpus = read_cpus(&dir);
    let midr = midr_of(devices, cpus.as_deref().and_then(|c| c.first().copied()));
    Ok(LiveEvent {
        name: format!("{pmu}/{}/", terms.join(",")),
        perf_type,
        config,
        leader_config: None,
        precise_ip: 0,
        raw: false,
        cpus,
        meaning: EventMeaning {
            ibs: false,
            default_kind: SampleKind::Load,
            fixed_period: period,
        },
        spe: Some(SpeSetup {
            neoverse: midr.is_some_and(neoverse_data_source),
            physical_bits: encode(&format, "pa_enable=1", &[])?,
            filter_bits: if filters {
                encode(&format, "load_filter=1,store_filter=1", &[])?
            } else {
                [0; 3]
            },
        }),
    })
}

/// `period` as the hardware takes it, or why not.
fn checked_period(period: u64, min: u64) -> Result<u64, String> {
    if period < min || period > INTERVAL_MAX {
        return Err(format!(
            "--sample-period {period}: this machine's Arm SPE samples every {min} to \
             {INTERVAL_MAX} operations"
        ));
    }
    if !period.is_multiple_of(INTERVAL_UNIT) {
        return Err(format!(
            "--sample-period {period}: Arm SPE counts operations in units of {INTERVAL_UNIT}; \
             give a multiple of {INTERVAL_UNIT} (e.g. {})",
            period.next_multiple_of(INTERVAL_UNIT)
        ));
    }
    Ok(period)
}

/// The MIDR of CPU `cpu` (default 0), from `/sys/devices/system/cpu` beside the event sources'
/// `/sys/bus/event_source/devices`.
fn midr_of(devices: &Path, cpu: Option<u32>) -> Option<u64> {
    let sys = devices.parent()?.parent()?.parent()?;
    let file = sys.join(format!(
        "devices/system/cpu/cpu{}/regs/identification/midr_el1",
        cpu.unwrap_or(0)
    ));
    let text = std::fs::read_to_string(file).ok()?;
    u64::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmu::{detect, fake_pmu as pmu};
    use crate::pmu_events::{DEFAULT_LDLAT, live_events};

    /// A `/sys` with an SPE PMU as an Arm kernel lists it, on CPUs 2–3 of a Neoverse N1.
    fn arm_sys(root: &Path) -> std::path::PathBuf {
        let devices = root.join("bus/event_source/devices");
        pmu(&devices, "armv8_pmuv3_0", &[("type", "8")]);
        pmu(
            &devices,
            "arm_spe_0",
            &[
                ("type", "9"),
                ("cpumask", "2-3"),
                ("caps/min_interval", "1024"),
                ("format/ts_enable", "config:0"),
                ("format/pa_enable", "config:1"),
                ("format/pct_enable", "config:2"),
                ("format/jitter", "config:16"),
                ("format/branch_filter", "config:32"),
                ("format/load_filter", "config:33"),
                ("format/store_filter", "config:34"),
            ],
        );
        let midr = root.join("devices/system/cpu/cpu2/regs/identification");
        std::fs::create_dir_all(&midr).unwrap();
        std::fs::write(midr.join("midr_el1"), "0x00000000413fd0c1\n").unwrap();
        devices
    }

    #[test]
    fn the_spe_event_keeps_loads_and_stores_with_times_and_physical_addresses() {
        let sys = tempfile::tempdir().unwrap();
        let devices = arm_sys(sys.path());
        let found = detect(&devices).unwrap();
        let events = live_events(&found, &devices, None, DEFAULT_LDLAT).unwrap();
        assert_eq!(events.len(), 1);
        let e = &events[0];
        assert_eq!(e.perf_type, 9);
        assert_eq!(e.config, [1 | 1 << 1 | 1 << 16 | 1 << 33 | 1 << 34, 0, 0]);
        assert_eq!(
            e.name,
            "arm_spe_0/ts_enable=1,pa_enable=1,jitter=1,load_filter=1,store_filter=1/"
        );
        assert_eq!(e.cpus, Some(vec![2, 3]));
        assert_eq!(e.meaning.fixed_period, SPE_PERIOD);
        let spe = e.spe.unwrap();
        assert!(spe.neoverse, "Neoverse N1 (part 0xd0c)");
        assert_eq!(spe.physical_bits, [1 << 1, 0, 0]);
        assert_eq!(spe.filter_bits, [1 << 33 | 1 << 34, 0, 0]);
    }

    #[test]
    fn periods_the_hardware_cannot_take_are_refused_with_one_it_can() {
        let sys = tempfile::tempdir().unwrap();
        let devices = arm_sys(sys.path());
        let found = detect(&devices).unwrap();
        let period = |p| live_events(&found, &devices, Some(p), DEFAULT_LDLAT);
        assert_eq!(period(4096).unwrap()[0].meaning.fixed_period, 4096);
        let odd = period(5000).unwrap_err();
        assert!(odd.contains("multiple of 256 (e.g. 5120)"), "{odd}");
        let small = period(512).unwrap_err();
        assert!(small.contains("every 1024 to"), "{small}");
    }

    #[test]
    fn an_spe_without_type_filters_or_a_known_core_still_records() {
        let sys = tempfile::tempdir().unwrap();
        let devices = arm_sys(sys.path());
        for term in ["load_filter", "store_filter", "jitter"] {
            std::fs::remove_file(devices.join("arm_spe_0/format").join(term)).unwrap();
        }
        std::fs::remove_dir_all(sys.path().join("devices")).unwrap();
        let found = detect(&devices).unwrap();
        let e = &live_events(&found, &devices, None, DEFAULT_LDLAT).unwrap()[0];
        assert_eq!(e.config, [0b11, 0, 0]);
        let spe = e.spe.unwrap();
        assert_eq!((spe.neoverse, spe.filter_bits), (false, [0; 3]));
    }
}
