//! Tests of `pmu_live.rs`: the attributes, the step-backs and the settings.

use super::*;

/// An event of the stand-in's shape with another PMU's type and configuration.
fn event(perf_type: u32, config: u64) -> LiveEvent {
    let mut e = stand_in(Some(65_536));
    (e.name, e.perf_type, e.config) = (format!("pmu {perf_type}"), perf_type, [config, 0, 0]);
    e
}

fn ibs() -> LiveEvent {
    let mut e = event(11, 1 << 16);
    (e.raw, e.meaning.ibs) = (true, true);
    e
}

const ALL: Features = Features::ALL;

#[test]
fn the_attribute_asks_for_every_field_of_a_memory_sample_and_steps_back() {
    let mut intel = ibs();
    (intel.raw, intel.precise_ip, intel.perf_type) = (false, 2, 4);
    intel.config = [0x1cd, 30, 0];
    let attr = precise_attr(&intel, ALL);
    let wanted = sample::IP
        | sample::TID
        | sample::TIME
        | sample::ADDR
        | sample::CPU
        | sample::IDENTIFIER
        | sample::DATA_SRC
        | sample::WEIGHT_STRUCT
        | sample::PHYS_ADDR;
    assert_eq!(attr.sample_type, wanted);
    assert_eq!((attr.type_, attr.config), (4, 0x1cd));
    // SAFETY: reading the union member this attribute was built with.
    assert_eq!(unsafe { attr.__bindgen_anon_3.config1 }, 30);
    assert_eq!(attr.precise_ip(), 2);
    assert_eq!(attr.inherit(), 1);
    assert_eq!(attr.enable_on_exec(), 1);
    assert_eq!(attr.exclude_kernel(), 0);
    assert_eq!(attr.read_format, sys::PERF_FORMAT_LOST as u64);
    // SAFETY: as above.
    assert_eq!(unsafe { attr.__bindgen_anon_1.sample_period }, 65_536);

    let older = Features {
        kernel: false,
        phys_addr: false,
        phys_addr_denied: true,
        lost_counted: false,
        weight_struct: false,
        precise_cut: 1,
        spe_filters: true,
    };
    let attr = precise_attr(&intel, older);
    assert_eq!(
        attr.sample_type,
        wanted & !(sample::WEIGHT_STRUCT | sample::PHYS_ADDR) | sample::WEIGHT
    );
    assert_eq!(
        (attr.precise_ip(), attr.exclude_kernel(), attr.read_format),
        (1, 1, 0)
    );

    // IBS: its registers come as raw data, without a precision level.
    let attr = precise_attr(&ibs(), ALL);
    assert_eq!(attr.sample_type, wanted | sample::RAW);
    assert_eq!(
        (attr.type_, attr.config, attr.precise_ip()),
        (11, 1 << 16, 0)
    );
}

fn refusal(event: usize, errno: i32) -> Refusal {
    let source = std::io::Error::from_raw_os_error(errno);
    let error = match errno {
        libc::EACCES => SamplerError::Denied(source),
        _ => SamplerError::Other {
            event: "e".into(),
            cpu: 0,
            source,
        },
    };
    Refusal { event, error }
}

/// Intel's loads and stores: the stores refuse what the loads take.
fn loads_and_stores() -> Vec<LiveEvent> {
    let mut loads = ibs();
    (loads.raw, loads.precise_ip, loads.perf_type) = (false, 2, 4);
    let mut stores = loads.clone();
    stores.meaning.default_kind = SampleKind::Store;
    vec![loads, stores]
}

#[test]
fn only_the_refused_event_steps_back() {
    let events = loads_and_stores();
    let mut want = Wanted::all(2);
    // The stores refuse a field: the lost count goes first, then the weight structure, the
    // physical address and the precision, theirs alone.
    let mut steps = Vec::new();
    while want.step_back(&events, &refusal(1, libc::EINVAL)) {
        steps.push(want.events[1]);
    }
    assert_eq!(want.events[0], Features::ALL, "the loads keep everything");
    let kept: Vec<(bool, bool, bool, u8)> = steps
        .iter()
        .map(|f| (f.lost_counted, f.weight_struct, f.phys_addr, f.precise_cut))
        .collect();
    assert_eq!(
        kept,
        [
            (false, true, true, 0),
            (false, false, true, 0),
            (false, false, false, 0),
            (false, false, false, 1),
        ]
    );
    assert!(
        !want.events[1].phys_addr_denied,
        "not a refusal for privilege"
    );
    assert_eq!(want.faults, Wanted::all(2).faults);

    // A refusal for privilege: kernel-mode samples, then the physical address, of that
    // event; the next event steps back on its own refusal.
    let mut want = Wanted::all(2);
    assert!(want.step_back(&events, &refusal(0, libc::EACCES)));
    assert!(!want.events[0].kernel && want.events[1].kernel);
    assert!(want.step_back(&events, &refusal(0, libc::EACCES)));
    assert!(!want.events[0].phys_addr && want.events[0].phys_addr_denied);
    assert!(!want.step_back(&events, &refusal(0, libc::EACCES)));
    assert_eq!(want.events[1], Features::ALL);

    // Past the precise events: the page faults beside them.
    let mut want = Wanted::all(2);
    assert!(want.step_back(&events, &refusal(2, libc::EINVAL)));
    assert!(!want.faults.lost_counted && want.faults.page_sizes);
    assert_eq!(want.events, vec![Features::ALL; 2]);
    assert!(want.step_back(&events, &refusal(2, libc::EACCES)));
    assert!(!want.faults.kernel);
}

fn spe() -> LiveEvent {
    let mut e = event(9, 1 | 1 << 1 | 1 << 33 | 1 << 34);
    e.spe = Some(crate::spe_event::SpeSetup {
        neoverse: false,
        physical_bits: [1 << 1, 0, 0],
        filter_bits: [1 << 33 | 1 << 34, 0, 0],
    });
    e
}

#[test]
fn an_spe_event_asks_for_no_samples_and_steps_back_through_its_terms() {
    let event = spe();
    let attr = precise_attr(&event, ALL);
    assert_eq!(attr.sample_type, SPE_SAMPLE_TYPE);
    assert_eq!((attr.type_, attr.config), (9, event.config[0]));
    assert_eq!((attr.inherit(), attr.precise_ip()), (1, 0));
    // SAFETY: reading the union member this attribute was built with.
    assert_eq!(unsafe { attr.__bindgen_anon_1.sample_period }, 65_536);
    assert!(matches!(
        ring_reader(&event, &attr, &Arc::new(PhysicalNodes::default())),
        RingReader::Spe(_)
    ));

    assert_eq!(
        attr.context_switch(),
        1,
        "its records are split by the switches"
    );
    assert_eq!(precise_attr(&ibs(), ALL).context_switch(), 0);
    // Refused for privilege: physical addresses first (`pa_enable` needs CAP_PERFMON whatever
    // perf_event_paranoid says), then kernel-mode samples.
    let events = [event];
    let mut want = Wanted::all(1);
    assert!(want.step_back(&events, &refusal(0, libc::EACCES)));
    assert!(!want.events[0].phys_addr && want.events[0].kernel);
    assert!(want.step_back(&events, &refusal(0, libc::EACCES)));
    let attr = precise_attr(&events[0], want.events[0]);
    assert_eq!(attr.config, 1 | 1 << 33 | 1 << 34, "pa_enable cleared");
    assert_eq!(attr.exclude_kernel(), 1);
    // Refused as invalid: the lost count, then the type filters; no weight or precision.
    let mut want = Wanted::all(1);
    let mut steps = 0;
    while want.step_back(&events, &refusal(0, libc::EOPNOTSUPP)) {
        steps += 1;
    }
    assert_eq!(steps, 3, "lost count, filters, physical addresses");
    assert!(
        want.events[0].weight_struct,
        "SPE has no weight field to drop"
    );
    let attr = precise_attr(&events[0], want.events[0]);
    assert_eq!(attr.config, 1);
    let s = settings(&events, &[attr], &want.events, &PhysicalNodes::default());
    assert_eq!(s["spe_type_filter"], serde_json::json!(false));
    assert_eq!(s["latency_field"], serde_json::json!("spe_total_latency"));
}

#[test]
fn settings_say_what_each_event_kept() {
    let events = loads_and_stores();
    let mut want = vec![Features::ALL; 2];
    want[1].weight_struct = false;
    want[1].phys_addr = false;
    want[1].phys_addr_denied = true;
    let attrs: Vec<perf_event_attr> = events
        .iter()
        .zip(&want)
        .map(|(e, w)| precise_attr(e, *w))
        .collect();
    let s = settings(
        &events,
        &attrs,
        &want,
        &PhysicalNodes::from_runs(1 << 27, vec![]),
    );
    assert_eq!(
        s["latency_field"],
        serde_json::json!(["weight_struct", "weight"])
    );
    assert_eq!(s["physical_addresses"], serde_json::json!(false));
    assert_eq!(s["physical_addresses_denied"], serde_json::json!(true));
    let s = settings(
        &events,
        &attrs,
        &[Features::ALL; 2],
        &PhysicalNodes::from_runs(1 << 27, vec![]),
    );
    assert_eq!(s["latency_field"], serde_json::json!("weight_struct"));
    assert!(!s.contains_key("physical_addresses_denied"));
}

#[test]
fn an_ibs_sample_from_a_ring_becomes_an_access_with_its_registers() {
    use numalens_assemble::perf_sample::ibs;
    use numalens_format::DataSource;
    let attr = precise_attr(&ibs(), ALL);
    let reader = PreciseReader {
        layout: Layout {
            sample_type: attr.sample_type,
            ..Layout::default()
        },
        meaning: ibs().meaning,
        physical: Arc::new(PhysicalNodes::from_runs(
            1 << 27,
            vec![(0, 4, 0), (4, 4, 1)],
        )),
        trailer: Trailer::of(attr.sample_type),
    };
    // A load that missed to remote DRAM, as the kernel lays the record out.
    let regs = [
        0,
        0x40_1000,
        0,
        ibs::op_data2(3, true),
        ibs::op_data3(false, true, 250),
        0x7f00_0040,
        5 << 27,
    ];
    let raw = ibs::raw(0, &regs);
    let mut body: Vec<u8> = Vec::new();
    body.extend(99u64.to_le_bytes()); // identifier, first of all
    body.extend(0x40_1000u64.to_le_bytes()); // ip
    body.extend((7u64 | 8 << 32).to_le_bytes()); // pid, tid
    body.extend(1234u64.to_le_bytes()); // time
    body.extend(0u64.to_le_bytes()); // addr: IBS leaves it to the registers
    body.extend(1u64.to_le_bytes()); // cpu, reserved
    body.extend((raw.len() as u32).to_le_bytes());
    body.extend(&raw);
    body.extend(0u64.to_le_bytes()); // weight
    body.extend(0u64.to_le_bytes()); // data source
    body.extend(0u64.to_le_bytes()); // physical address
    let mut record = sys::PERF_RECORD_SAMPLE.to_le_bytes().to_vec();
    record.extend(0u16.to_le_bytes());
    record.extend(((body.len() + 8) as u16).to_le_bytes());
    record.extend(body);
    let Some(PerfEvent::Access(a)) = reader.decode(&record) else {
        panic!("not an access")
    };
    assert_eq!((a.pid, a.tid, a.time_ns, a.cpu), (7, 8, 1234, Some(1)));
    assert_eq!((a.address, a.kind), (0x7f00_0040, SampleKind::Load));
    assert_eq!((a.latency, a.node, a.weight), (Some(250), Some(1), 65_536));
    // The kernel's own data source says nothing (kernels before 6.1): the registers tell.
    assert_eq!(a.data_source, DataSource::RemoteDram);
}
