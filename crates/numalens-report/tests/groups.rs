//! Objects of one allocation site shown as one group: a model whose 40 buffers come from one
//! call site, beside the fixture's own objects, in the text and HTML reports.

use numalens_analyze::ReportModel;
use numalens_analyze::model::{GroupInstance, InstanceCount, SiteGroup, ThreadShare};
use numalens_report::{html, render_text};

const MIB: u64 = 1 << 20;

fn fixture() -> ReportModel {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixture-model.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The fixture with 40 buffers of `memcached+0x11d1d` ranked first and each listed object a
/// group of its own.
fn model() -> ReportModel {
    let mut m = fixture();
    let all = m.analysis.accesses.max(1);
    let largest: Vec<GroupInstance> = (0..8)
        .map(|i| GroupInstance {
            id: 1000 + i,
            start: 0x7f00_0000_0000 + i * MIB,
            size: MIB,
            accesses: 1000 - i,
            reads: 900 - i,
            writes: 100,
            share: 0.01,
            first_toucher: Some(ThreadShare {
                thread: (i % 3) as usize,
                count: 256,
                share: 1.0,
            }),
            local_ratio: Some(0.5),
        })
        .collect();
    let slabs = SiteGroup {
        pid: m.objects[0].pid,
        kind: "heap".into(),
        name: "memcached+0x11d1d".into(),
        site: None,
        instances: 40,
        size: 40 * MIB,
        members: (1000..1040).collect(),
        samples: m.objects[0].samples,
        weight: 40_000,
        pages: Default::default(),
        accesses: 38_000,
        reads: 34_000,
        writes: 4_000,
        unknown_direction: 0,
        share: 38_000.0 / (all + 38_000) as f64,
        sharing: Some("private".into()),
        first_toucher: None,
        main_user: None,
        first_touchers: vec![
            InstanceCount {
                thread: 0,
                instances: 14,
            },
            InstanceCount {
                thread: 1,
                instances: 13,
            },
            InstanceCount {
                thread: 2,
                instances: 13,
            },
        ],
        local_ratio: Some(0.5),
        remote: 19_000,
        advice: Vec::new(),
        largest,
    };
    let mut groups = vec![slabs];
    for o in &m.objects {
        let a = o.access.as_ref();
        groups.push(SiteGroup {
            pid: o.pid,
            kind: o.kind.clone(),
            name: o.name.clone(),
            site: o.site.clone(),
            instances: 1,
            size: o.size,
            members: vec![o.id],
            samples: o.samples,
            weight: o.weight,
            pages: o.pages.clone(),
            accesses: a.map_or(0, |a| a.accesses),
            reads: a.map_or(0, |a| a.reads),
            writes: a.map_or(0, |a| a.writes),
            unknown_direction: 0,
            share: a.map_or(0.0, |a| a.share),
            sharing: a.map(|a| a.sharing.clone()),
            first_toucher: a.and_then(|a| a.first_toucher),
            main_user: a.and_then(|a| a.main_user),
            first_touchers: Vec::new(),
            local_ratio: a.and_then(|a| a.local_ratio),
            remote: a.map_or(0, |a| a.remote),
            advice: a.map_or(Vec::new(), |a| a.advice.clone()),
            largest: Vec::new(),
        });
    }
    m.groups = groups;
    m
}

#[test]
fn the_text_shows_one_row_of_forty_instances_and_three_of_them() {
    let plain = render_text(&fixture(), false);
    let text = render_text(&model(), false);
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("memcached+0x11d1d"))
        .collect();
    // One row: the objects section lists the model's objects, and none is of this site.
    assert_eq!(rows.len(), 1, "{text}");
    let row = rows[0];
    assert!(row.contains("memcached+0x11d1d (40 instances)"), "{row}");
    assert!(row.contains("40.0 MiB"), "{row}");
    assert!(row.contains("38.0k"), "{row}");
    assert!(row.contains("T0 ×14, T1 ×13, T2 ×13"), "{row}");
    // Its three largest instances one level down, then the count of the others.
    let table = &text[text.find("Object accesses").unwrap()..];
    let lines: Vec<&str> = table.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("40 instances"))
        .unwrap();
    assert!(lines[at + 1].contains("  0x7f0000000000"), "{table}");
    assert!(lines[at + 1].contains("1.0 MiB"), "{table}");
    assert!(lines[at + 3].contains("  0x7f0000200000"), "{table}");
    assert!(lines[at + 4].contains("… 37 more"), "{table}");
    // A group of one is the object's own row, as before grouping.
    let grid = |t: &str| {
        t.lines()
            .find(|l| l.contains("grid (main.c:10)") && l.contains('%'))
            .map(|l| {
                l.split_once('.')
                    .map_or(l, |x| x.1)
                    .trim_start()
                    .to_string()
            })
    };
    let before = grid(&plain).unwrap();
    let after = grid(&text).unwrap();
    let tail = |l: &str| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" ");
    assert_eq!(tail(&before), tail(&after));
}

#[test]
fn the_json_keeps_the_objects_and_adds_the_groups() {
    let m = model();
    let json = serde_json::to_value(&m).unwrap();
    assert_eq!(json["groups"][0]["members"].as_array().unwrap().len(), 40);
    assert_eq!(json["groups"][0]["instances"], 40);
    assert_eq!(
        json["objects"].as_array().unwrap().len(),
        fixture().objects.len()
    );
}

#[test]
fn the_html_opens_a_group_in_place() {
    let page = html::render(&model());
    let row = page
        .split("<tr>")
        .find(|r| r.contains("memcached+0x11d1d"))
        .unwrap();
    assert!(row.contains("<details class=\"group\">"), "{row}");
    assert!(row.contains("(40 instances)"), "{row}");
    assert!(row.contains("<code>0x7f0000000000</code>"), "{row}");
    assert!(row.contains("… 32 more"), "{row}");
    assert_eq!(page.matches("memcached+0x11d1d").count(), 1);
}
