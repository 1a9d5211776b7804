//! A whole profile directory, analysed as `numalens report` does. The input describes the rows of
//! every table and the values of `meta.json` (any numbers, not only the ones a recording makes)
//! and may replace one table's file by raw bytes; the profile is written with the real writer,
//! opened, analysed (recorded placement, or a what-if machine) and rendered as text (and, one
//! input in four, as HTML).
#![no_main]

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use numalens_analyze::{Options, WhatIf, analyze};
use numalens_format::{
    CodeLocation, Completeness, Label, Migration, Object, ObjectKind, PageNodes, PageStat, Profile,
    ProfileWriter, Sample, SampleKind, SiteFrame, Snoop, Thread,
};

#[derive(Arbitrary, Debug)]
struct Input {
    /// `None`: the machine's 4096.
    page_size: Option<u64>,
    topology: Option<u8>,
    what_if: Option<u8>,
    top: u8,
    thread: Option<u32>,
    object: Option<String>,
    block_size: Option<u64>,
    objects: Vec<(
        u64,
        u32,
        u8,
        String,
        u64,
        u64,
        u64,
        Option<u64>,
        Option<u64>,
    )>,
    threads: Vec<(u32, u32, u32, Option<String>, u64, Option<u64>, Option<u32>)>,
    samples: Vec<SampleIn>,
    page_stats: Vec<(u32, u32, u64, u64, u64, u64, Option<u64>)>,
    page_nodes: Vec<(u64, u32, u64, u64, u64, Option<u32>)>,
    migrations: Vec<(u64, u32, u64, u64, Option<u32>, u32)>,
    sites: Vec<(u64, u32, String, u64, Option<String>)>,
    code: Vec<(u32, u64, String, u64, Option<String>, Option<u32>)>,
    /// Replaces one table's file: (table, bytes).
    raw_table: Option<(u8, Vec<u8>)>,
}

#[derive(Arbitrary, Debug)]
struct SampleIn {
    time_ns: u64,
    pid: u32,
    tid: u32,
    cpu: Option<u32>,
    address: u64,
    kind: u8,
    weight: u32,
    object_id: Option<u64>,
    node: Option<u32>,
    latency: Option<u32>,
    ip: Option<u64>,
    page_size: Option<u32>,
    /// The data source and snoop result of a PMU sample (HITM matching, measured findings).
    source: u8,
    snoop: Option<u8>,
}

const PRESETS: &[&str] = &["machine-a", "machine-b", "machine-c", "altix-4", "cxl-tier"];
const KINDS: &[SampleKind] = &[
    SampleKind::Load,
    SampleKind::Store,
    SampleKind::FirstTouch,
    SampleKind::Hint,
    SampleKind::Fault,
];
const OBJECT_KINDS: &[ObjectKind] = &[
    ObjectKind::Heap,
    ObjectKind::Mmap,
    ObjectKind::Static,
    ObjectKind::Stack,
    ObjectKind::Tls,
    ObjectKind::File,
    ObjectKind::Code,
    ObjectKind::Unknown,
];
const TABLES: &[&str] = &[
    "samples",
    "threads",
    "sites",
    "objects",
    "page_stats",
    "migrations",
    "page_nodes",
    "code_locations",
];

fn preset(i: u8) -> Option<numalens_topology::Topology> {
    numalens_topology::presets::preset(PRESETS[usize::from(i) % PRESETS.len()]).ok()
}

fuzz_target!(|input: Input| {
    numalens_fuzz::let_the_reader_catch_decoder_panics();
    let scratch = numalens_fuzz::scratch();
    let dir = scratch.path().join("p.numalens");
    if write(&input, &dir).is_err() {
        return;
    }
    if let Some((table, bytes)) = &input.raw_table {
        let name = TABLES[usize::from(*table) % TABLES.len()];
        std::fs::write(dir.join(format!("{name}.parquet")), bytes).unwrap();
    }
    let Ok(profile) = Profile::open(&dir) else {
        return;
    };
    let options = Options {
        top: usize::from(input.top),
        object: input.object.clone(),
        thread: input.thread,
        workers: 2,
        what_if: input.what_if.and_then(preset).map(|topology| WhatIf {
            name: topology.name.clone(),
            topology,
        }),
        block_size: input.block_size,
        simulate: true,
    };
    if let Ok(model) = analyze(&profile, &options) {
        let _ = numalens_report::render_text(&model, true);
        // The HTML report draws charts from the same numbers; it is slower, so one input in four.
        if input.top % 4 == 0 {
            let _ = numalens_report::html::render(&model);
        }
    }
});

fn write(input: &Input, dir: &std::path::Path) -> numalens_format::Result<()> {
    let mut meta = numalens_fuzz::meta();
    meta.page_size = input.page_size.unwrap_or(4096);
    meta.topology = input.topology.and_then(preset);
    let mut w = ProfileWriter::create(dir, meta)?;
    for o in &input.objects {
        w.push_object(Object {
            object_id: o.0,
            pid: o.1,
            kind: OBJECT_KINDS[usize::from(o.2) % OBJECT_KINDS.len()],
            name: o.3.clone(),
            start: o.4,
            size: o.5,
            alloc_ns: o.6,
            free_ns: o.7,
            alloc_tid: None,
            site_key: o.8,
        })?;
    }
    for t in &input.threads {
        w.push_thread(Thread {
            pid: t.0,
            tid: t.1,
            logical_id: t.2,
            name: t.3.clone(),
            start_routine: None,
            create_ns: t.4,
            exit_ns: t.5,
            parent_tid: t.6,
        })?;
    }
    for s in &input.samples {
        w.push_sample(Sample {
            time_ns: s.time_ns,
            pid: s.pid,
            tid: s.tid,
            cpu: s.cpu,
            address: s.address,
            kind: KINDS[usize::from(s.kind) % KINDS.len()],
            weight: s.weight,
            object_id: s.object_id,
            node: s.node,
            data_source: label(s.source),
            latency: s.latency,
            ip: s.ip,
            page_size: s.page_size,
            snoop: s.snoop.map(label::<Snoop>),
        })?;
    }
    for p in &input.page_stats {
        w.push_page_stat(PageStat {
            pid: p.0,
            tid: p.1,
            page: p.2,
            reads: p.3,
            writes: p.4,
            first_access_ns: p.5,
            object_id: p.6,
        })?;
    }
    for p in &input.page_nodes {
        w.push_page_nodes(PageNodes {
            time_ns: p.0,
            pid: p.1,
            start: p.2,
            pages: p.3,
            page_size: p.4,
            node: p.5,
            status: String::new(),
            source: "scan".into(),
        })?;
    }
    for m in &input.migrations {
        w.push_migration(Migration {
            time_ns: m.0,
            pid: m.1,
            start: m.2,
            len: m.3,
            from_node: m.4,
            to_node: m.5,
            policy: "fuzz".into(),
            reason: String::new(),
            result: "ok".into(),
        })?;
    }
    for s in &input.sites {
        w.push_site_frame(SiteFrame {
            site_key: s.0,
            depth: s.1,
            module: s.2.clone(),
            offset: s.3,
            function: s.4.clone(),
            file: None,
            line: None,
        })?;
    }
    for c in &input.code {
        w.push_code_location(CodeLocation {
            pid: c.0,
            ip: c.1,
            module: c.2.clone(),
            offset: c.3,
            function: c.4.clone(),
            file: None,
            line: c.5,
        })?;
    }
    w.finish(Completeness {
        complete: true,
        exit: None,
        reasons: Vec::new(),
    })?;
    Ok(())
}

/// Any byte as one of the label's values.
fn label<L: Label>(code: u8) -> L {
    L::from_code(code % L::LABELS.len() as u8)
}
