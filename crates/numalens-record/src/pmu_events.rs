//! The events the live `pmu` backend opens for a detected precise memory event (`pmu.rs`):
//! their perf type, configuration words (encoded through the PMU's own sysfs `format` files, so
//! that `ldlat` lands in `config1` where the kernel says it goes), precision, period and CPUs.
//!
//! Defaults, from the papers numalens follows:
//! - Intel load latency: one sample per [`INTEL_PERIOD`] qualifying loads with a threshold of
//!   [`DEFAULT_LDLAT`] cycles (SPM samples `MEM_TRANS_RETIRED.LOAD_LATENCY` every 500 loads; 30
//!   cycles is `perf mem`'s threshold and keeps L1 hits out); stores at the same period.
//! - AMD IBS op: one sample per [`IBS_PERIOD`] cycles (MemProf measured about 5 % overhead at
//!   under one IBS interrupt per 60 K cycles; 65 536 is Carrefour's fast rate and a multiple of
//!   16, which IBS requires), with the L3-miss filter when the PMU has it.

use std::path::Path;

use numalens_assemble::perf_sample::access::EventMeaning;
use numalens_format::SampleKind;

use crate::pmu::PreciseEvent;

pub const DEFAULT_LDLAT: u64 = 30;
pub const INTEL_PERIOD: u64 = 500;
pub const IBS_PERIOD: u64 = 65_536;

/// One event to open on each of its CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveEvent {
    /// As `perf` names it, with the settings numalens gives it.
    pub name: String,
    pub perf_type: u32,
    /// `config`, `config1`, `config2`.
    pub config: [u64; 3],
    /// The configuration of the counting event that must lead this one's group (Intel parts
    /// that list `mem-loads-aux`, Sapphire Rapids and later: the kernel refuses their
    /// `mem-loads` with a data source outside such a group).
    pub leader_config: Option<[u64; 3]>,
    pub precise_ip: u8,
    /// The PMU's raw data belongs to the sample (AMD IBS: its registers).
    pub raw: bool,
    /// The CPUs this PMU covers (hybrid parts: `cpu_core` and `cpu_atom` each their own); `None`
    /// for all online CPUs.
    pub cpus: Option<Vec<u32>>,
    pub meaning: EventMeaning,
    /// Arm SPE: the packets come in an AUX area, not as samples.
    pub spe: Option<crate::spe_event::SpeSetup>,
}

/// The live events of the best precise event found (Intel hybrid parts: loads and stores of each
/// core type); `period` replaces the default sampling period. An error says why this machine's
/// event cannot be driven live and what to do instead.
pub fn live_events(
    found: &[PreciseEvent],
    devices: &Path,
    period: Option<u64>,
    ldlat: u64,
) -> Result<Vec<LiveEvent>, String> {
    let mut events = Vec::new();
    for event in found {
        match event {
            PreciseEvent::IntelLoadLatency {
                pmu,
                perf_type,
                loads,
                stores,
            } => {
                let pmu_dir = devices.join(pmu);
                let cpus = read_cpus(&pmu_dir);
                let period = period.unwrap_or(INTEL_PERIOD);
                let aux = std::fs::read_to_string(pmu_dir.join("events/mem-loads-aux")).ok();
                let aux = aux
                    .map(|terms| encode(&pmu_dir.join("format"), terms.trim(), &[]))
                    .transpose()?;
                let mut add = |what: &str, terms: &str, kind, ldlat: Option<u64>| {
                    let overrides: Vec<(&str, u64)> =
                        ldlat.map(|l| ("ldlat", l)).into_iter().collect();
                    let config = encode(&pmu_dir.join("format"), terms, &overrides)?;
                    let settings = ldlat.map_or(String::new(), |l| format!(",ldlat={l}"));
                    events.push(LiveEvent {
                        name: format!("{pmu}/{what}{settings}/P"),
                        perf_type: *perf_type,
                        config,
                        leader_config: if kind == SampleKind::Load { aux } else { None },
                        precise_ip: 2,
                        raw: false,
                        cpus: cpus.clone(),
                        meaning: EventMeaning {
                            ibs: false,
                            default_kind: kind,
                            fixed_period: period,
                        },
                        spe: None,
                    });
                    Ok::<(), String>(())
                };
                add("mem-loads", loads, SampleKind::Load, Some(ldlat))?;
                if let Some(stores) = stores {
                    add("mem-stores", stores, SampleKind::Store, None)?;
                }
            }
            PreciseEvent::AmdIbsOp { perf_type, l3_miss } if events.is_empty() => {
                let format = devices.join("ibs_op/format");
                let terms = if *l3_miss { "l3missonly=1" } else { "" };
                let period = period.unwrap_or(IBS_PERIOD);
                // The kernel refuses an IBS period with any of its low four bits set.
                if !period.is_multiple_of(16) {
                    return Err(format!(
                        "--sample-period {period}: AMD IBS counts ops in units of 16; give a \
                         multiple of 16 (e.g. {})",
                        period.next_multiple_of(16)
                    ));
                }
                events.push(LiveEvent {
                    name: format!("ibs_op/{terms}/"),
                    perf_type: *perf_type,
                    config: encode(&format, terms, &[])?,
                    leader_config: None,
                    precise_ip: 0,
                    raw: true,
                    cpus: None,
                    meaning: EventMeaning {
                        ibs: true,
                        default_kind: SampleKind::Load,
                        fixed_period: period,
                    },
                    spe: None,
                });
            }
            PreciseEvent::ArmSpe { pmu, perf_type } if events.is_empty() => {
                events.push(crate::spe_event::live_event(
                    pmu, *perf_type, devices, period,
                )?);
            }
            _ => {}
        }
    }
    Ok(events)
}

/// The CPUs a PMU's `cpus` file lists (hybrid parts), or its `cpumask` (Arm SPE, whose event
/// the kernel refuses on a CPU the PMU does not cover), if it has one.
pub(crate) fn read_cpus(pmu_dir: &Path) -> Option<Vec<u32>> {
    let text = std::fs::read_to_string(pmu_dir.join("cpus"))
        .or_else(|_| std::fs::read_to_string(pmu_dir.join("cpumask")))
        .ok()?;
    numalens_topology::cpulist::parse_cpulist(text.trim()).ok()
}

/// The configuration words for an event's terms (`event=0xcd,umask=0x1,ldlat=3`), each term
/// placed in the bits its `format/NAME` file names (`config1:0-15`); `overrides` replace or add
/// terms. A term without a value is 1, as perf reads it.
pub fn encode(format: &Path, terms: &str, overrides: &[(&str, u64)]) -> Result<[u64; 3], String> {
    let mut values: Vec<(String, u64)> = Vec::new();
    for term in terms.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (name, value) = term.split_once('=').unwrap_or((term, "1"));
        let value = parse_number(value)
            .ok_or_else(|| format!("the event term `{term}` has no number numalens reads"))?;
        values.push((name.to_string(), value));
    }
    for (name, value) in overrides {
        values.retain(|(n, _)| n != name);
        values.push((name.to_string(), *value));
    }
    let mut config = [0u64; 3];
    for (name, value) in values {
        let spec = std::fs::read_to_string(format.join(&name))
            .map_err(|e| format!("{}: {e}", format.join(&name).display()))?;
        place(&mut config, spec.trim(), value)
            .ok_or_else(|| format!("{}: `{}` is not a format numalens reads", name, spec.trim()))?;
    }
    Ok(config)
}

fn parse_number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// Lays `value`'s bits, lowest first, into the ranges of `spec` (`config:0-7,32-35`).
fn place(config: &mut [u64; 3], spec: &str, mut value: u64) -> Option<()> {
    let (word, ranges) = spec.split_once(':')?;
    let word = match word {
        "config" => 0,
        "config1" => 1,
        "config2" => 2,
        _ => return None,
    };
    for range in ranges.split(',') {
        let (lo, hi) = match range.split_once('-') {
            Some((lo, hi)) => (lo.parse::<u32>().ok()?, hi.parse::<u32>().ok()?),
            None => (range.parse().ok()?, range.parse().ok()?),
        };
        if hi < lo || hi > 63 {
            return None;
        }
        let width = hi - lo + 1;
        let mask = if width == 64 {
            u64::MAX
        } else {
            (1 << width) - 1
        };
        config[word] |= (value & mask) << lo;
        value = value.checked_shr(width).unwrap_or(0);
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmu::{detect, fake_pmu as pmu};

    /// An Intel core PMU as the kernel lists it: its type, events and the bit fields of terms.
    fn intel_pmu(root: &Path, name: &str, perf_type: &str, extra: &[(&str, &str)]) {
        let mut files = vec![
            ("type", perf_type),
            ("events/mem-loads", "event=0xcd,umask=0x1,ldlat=3"),
            ("events/mem-stores", "event=0xd0,umask=0x82"),
            ("format/event", "config:0-7"),
            ("format/umask", "config:8-15"),
            ("format/ldlat", "config1:0-15"),
        ];
        files.extend_from_slice(extra);
        pmu(root, name, &files);
    }

    #[test]
    fn intel_loads_carry_the_latency_threshold_in_config1_and_stores_follow() {
        let sys = tempfile::tempdir().unwrap();
        intel_pmu(sys.path(), "cpu", "4", &[]);
        let found = detect(sys.path()).unwrap();
        let events = live_events(&found, sys.path(), None, DEFAULT_LDLAT).unwrap();
        assert_eq!(events.len(), 2);
        let (loads, stores) = (&events[0], &events[1]);
        assert_eq!(loads.name, "cpu/mem-loads,ldlat=30/P");
        assert_eq!((loads.perf_type, loads.config), (4, [0x01cd, 30, 0]));
        assert_eq!(loads.precise_ip, 2);
        assert_eq!(loads.meaning.default_kind, SampleKind::Load);
        assert_eq!(loads.meaning.fixed_period, INTEL_PERIOD);
        assert_eq!(stores.config, [0x82d0, 0, 0]);
        assert_eq!(stores.meaning.default_kind, SampleKind::Store);
        assert!(!loads.raw && loads.cpus.is_none() && loads.leader_config.is_none());
        let events = live_events(&found, sys.path(), Some(2000), 50).unwrap();
        assert_eq!(events[0].config[1], 50);
        assert_eq!(events[1].meaning.fixed_period, 2000);
    }

    #[test]
    fn loads_are_led_by_the_aux_event_where_the_pmu_lists_it() {
        let sys = tempfile::tempdir().unwrap();
        intel_pmu(
            sys.path(),
            "cpu",
            "4",
            &[("events/mem-loads-aux", "event=0x03,umask=0x82")],
        );
        let found = detect(sys.path()).unwrap();
        let events = live_events(&found, sys.path(), None, DEFAULT_LDLAT).unwrap();
        assert_eq!(events[0].leader_config, Some([0x8203, 0, 0]));
        assert_eq!(events[1].leader_config, None, "stores need no leader");
    }

    #[test]
    fn each_core_type_of_a_hybrid_part_gets_its_events_on_its_cpus() {
        let sys = tempfile::tempdir().unwrap();
        intel_pmu(sys.path(), "cpu_core", "4", &[("cpus", "0-7")]);
        intel_pmu(sys.path(), "cpu_atom", "10", &[("cpus", "8-15")]);
        let found = detect(sys.path()).unwrap();
        let events = live_events(&found, sys.path(), None, DEFAULT_LDLAT).unwrap();
        let summary: Vec<(&str, u32, Option<Vec<u32>>)> = events
            .iter()
            .map(|e| (e.name.as_str(), e.perf_type, e.cpus.clone()))
            .collect();
        let core = Some((0..8).collect::<Vec<u32>>());
        let atom = Some((8..16).collect::<Vec<u32>>());
        assert_eq!(
            summary,
            vec![
                ("cpu_core/mem-loads,ldlat=30/P", 4, core.clone()),
                ("cpu_core/mem-stores/P", 4, core),
                ("cpu_atom/mem-loads,ldlat=30/P", 10, atom.clone()),
                ("cpu_atom/mem-stores/P", 10, atom),
            ]
        );
    }

    #[test]
    fn amd_ibs_op_takes_its_type_from_sysfs_and_the_l3_miss_filter_where_present() {
        let sys = tempfile::tempdir().unwrap();
        pmu(sys.path(), "cpu", &[("type", "4")]);
        pmu(
            sys.path(),
            "ibs_op",
            &[("type", "11"), ("format/l3missonly", "config:16")],
        );
        let found = detect(sys.path()).unwrap();
        let events = live_events(&found, sys.path(), None, DEFAULT_LDLAT).unwrap();
        assert_eq!(events.len(), 1);
        let ibs = &events[0];
        assert_eq!((ibs.perf_type, ibs.config), (11, [1 << 16, 0, 0]));
        assert_eq!(ibs.name, "ibs_op/l3missonly=1/");
        assert!(ibs.raw && ibs.meaning.ibs && ibs.precise_ip == 0);
        assert_eq!(ibs.meaning.fixed_period, IBS_PERIOD);
        let odd = live_events(&found, sys.path(), Some(1000), DEFAULT_LDLAT).unwrap_err();
        assert!(odd.contains("multiple of 16 (e.g. 1008)"), "{odd}");
        assert!(live_events(&found, sys.path(), Some(4096), DEFAULT_LDLAT).is_ok());
        // Before Zen 4: no filter.
        std::fs::remove_dir_all(sys.path().join("ibs_op/format")).unwrap();
        let found = detect(sys.path()).unwrap();
        let events = live_events(&found, sys.path(), None, DEFAULT_LDLAT).unwrap();
        assert_eq!(
            (events[0].config, events[0].name.as_str()),
            ([0; 3], "ibs_op//")
        );
    }

    #[test]
    fn terms_are_placed_in_split_fields_and_unknown_terms_are_named() {
        let sys = tempfile::tempdir().unwrap();
        pmu(
            sys.path(),
            "cpu",
            &[
                ("format/event", "config:0-7,32-35"),
                ("format/edge", "config:18"),
            ],
        );
        let format = sys.path().join("cpu/format");
        assert_eq!(
            encode(&format, "event=0x1cd,edge", &[]).unwrap(),
            [1 << 32 | 0xcd | 1 << 18, 0, 0]
        );
        let err = encode(&format, "cmask=2", &[]).unwrap_err();
        assert!(err.contains("cmask"), "{err}");
    }
}
