//! Text rendering of a stored report model (the analysis crate's fixture, as JSON).

use numalens_analyze::ReportModel;
use numalens_report::render_text;

fn fixture() -> ReportModel {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixture-model.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn line_with<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with `{needle}` in:\n{text}"))
}

#[test]
fn lost_samples_come_first_with_the_fix() {
    let mut model = fixture();
    assert_eq!(model.profile.lost_samples, 3);
    model.profile.lost_samples_note = numalens_analyze::model::lost_samples_note(3, 17, Some(4));
    let text = render_text(&model, false);
    let second = text.lines().nth(1).unwrap();
    assert_eq!(
        second,
        "warning: 3 samples or task records (15.0 %) were lost because the ring buffer filled: record again with \
         a larger --ring-pages, e.g. --ring-pages 1024"
    );
    // Without a loss, no warning.
    model.profile.lost_samples_note = None;
    assert!(!render_text(&model, false).contains("warning"));
}

#[test]
fn summary_names_the_run() {
    let text = render_text(&fixture(), false);
    assert!(text.starts_with("Profile fixture.numalens\n"), "{text}");
    assert!(line_with(&text, "command").ends_with("./app --size 8"));
    assert!(line_with(&text, "backend").ends_with("faults (sample_period=1)"));
    let run = line_with(&text, "run ");
    assert!(
        run.contains("exited with status 0, 1.0 ms; profile complete"),
        "{run}"
    );
    let samples = line_with(&text, "samples  ");
    assert!(
        samples.contains("17 (first-touch 10, load 4, store 2, fault 1); 3 lost"),
        "{samples}"
    );
}

#[test]
fn objects_with_site_touchers_and_pages() {
    let text = render_text(&fixture(), false);
    assert!(text.contains("Objects (top 3 of 3,"), "{text}");
    let grid = line_with(&text, "1. grid (main.c:10)");
    assert!(
        grid.contains("[heap] 32.0 KiB: 8 first touches, 13 samples, 8 resident pages"),
        "{grid}"
    );
    assert!(line_with(&text, "allocated at").ends_with("make_grid grid.c:42 by T0"));
    assert!(line_with(&text, "first touched").ends_with("T1 4, T2 4"));
    assert!(line_with(&text, "pages    ").ends_with("node 0: 4, node 1: 4"));
    assert!(text.contains("node 0: 1, untouched: 1"), "{text}");
}

#[test]
fn thread_and_node_tables() {
    let text = render_text(&fixture(), false);
    let head = line_with(&text, "start routine");
    let columns: Vec<&str> = head
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        columns,
        [
            "thread",
            "tid",
            "name",
            "start routine",
            "samples",
            "first-touch",
            "load",
            "store",
            "fault",
            "nodes (samples)",
            "accesses",
            "node",
            "LAR"
        ]
    );
    let t2 = line_with(&text, "  T2 ");
    let cells: Vec<&str> = t2.split_whitespace().collect();
    assert_eq!(
        cells,
        [
            "T2", "102", "worker", "0x401000", "6", "4", "0", "2", "0", "1:6", "204", "2", "100%"
        ]
    );
    assert!(line_with(&text, "tid 999").contains("0:1"));
    let nodes = text.split("Memory nodes").nth(1).unwrap();
    let rows: Vec<Vec<&str>> = nodes
        .lines()
        .skip(2)
        .take(2)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            ["0", "5", "20.0", "KiB", "10"],
            ["1", "5", "20.0", "KiB", "6"]
        ]
    );
    assert!(
        text.contains("untouched pages: 1; pages of unknown node: 3; samples of unknown node: 1")
    );
}

#[test]
fn colour_only_when_asked() {
    let model = fixture();
    assert!(!render_text(&model, false).contains('\u{1b}'));
    let coloured = render_text(&model, true);
    assert!(coloured.contains("\u{1b}[1mProfile\u{1b}[0m"));
    // Colour changes nothing but the escapes.
    let stripped = strip_escapes(&coloured);
    assert_eq!(stripped, render_text(&model, false));
}

fn strip_escapes(text: &str) -> String {
    let mut out = String::new();
    let mut in_escape = false;
    for c in text.chars() {
        match (in_escape, c) {
            (false, '\u{1b}') => in_escape = true,
            (true, 'm') => in_escape = false,
            (true, _) => {}
            (false, c) => out.push(c),
        }
    }
    out
}

#[test]
fn findings_come_first_with_fix_and_cost() {
    let text = render_text(&fixture(), false);
    let findings = text
        .find("Findings (1, most costly first)")
        .expect("findings section");
    assert!(findings < text.find("Object accesses").unwrap(), "{text}");
    assert!(line_with(&text, "1. first-touch-mismatch").contains("grid (main.c:10) [heap]"));
    assert!(line_with(&text, "site ").ends_with("make_grid grid.c:42"));
    assert!(line_with(&text, "fix ").contains("(parallel-first-touch)"));
    let cost = line_with(&text, "cost ");
    assert!(
        cost.contains("301 accesses (59% of all), 300 remote"),
        "{cost}"
    );
    let row = line_with(&text, "  1  grid (main.c:10)");
    let cells: Vec<&str> = row.split_whitespace().collect();
    // #, object (3 words), size (2), accesses, share, R/W, sharing, first toucher (2), main user (2), LAR, advice
    assert_eq!(
        cells[3..],
        [
            "32.0",
            "KiB",
            "508",
            "99%",
            "300/200",
            "private",
            "T1",
            "50%",
            "T0",
            "59%",
            "41%",
            "parallel-first-touch"
        ]
    );
    assert!(text.contains("Placement (what-if on machine-a)"), "{text}");
    assert!(line_with(&text, "local access ratio").contains("41% (211 local, 301 remote"));
}

/// The site of a static: one frame with the file and line of its definition and no function.
fn definition(file: &str, line: u32) -> numalens_analyze::model::SiteReport {
    let frame = numalens_analyze::model::Frame {
        module: "/bin/app".into(),
        offset: 0x4040,
        function: None,
        file: Some(file.into()),
        line: Some(line),
    };
    numalens_analyze::model::SiteReport {
        key: "0x00000000000000aa".into(),
        location: frame.clone(),
        frames: vec![frame],
    }
}

#[test]
fn a_static_is_defined_at_its_source_line_not_allocated() {
    let mut model = fixture();
    let table = model
        .objects
        .iter_mut()
        .find(|o| o.name == "table")
        .unwrap();
    assert_eq!(table.kind, "static");
    table.site = Some(definition("/src/tables.c", 7));
    let text = render_text(&model, false);
    assert!(
        line_with(&text, "defined at").ends_with("defined at     /src/tables.c:7"),
        "{text}"
    );
    // The heap object's site is still an allocation.
    assert!(line_with(&text, "allocated at").ends_with("make_grid grid.c:42 by T0"));
}

/// Every finding now says what it rests on; only the measured ones have a measured cost. A model
/// written before the basis shows no "rests on" line and renders as it did.
#[test]
fn a_finding_from_accesses_rests_on_them_and_costs_under_the_placement() {
    let mut model = fixture();
    let before = render_text(&model, false);
    assert!(!before.contains("rests on"), "{before}");
    let f = &mut model.findings[0];
    f.rests_on = Some(
        "508 exact counted accesses; object access share 99% ≥ 1%; mismatched access share 59% ≥ 40%"
            .into(),
    );
    let text = render_text(&model, false);
    let rests_on = line_with(&text, "rests on");
    assert!(
        rests_on.ends_with("mismatched access share 59% ≥ 40%"),
        "{rests_on}"
    );
    let cost = line_with(&text, "cost ");
    assert!(cost.ends_with("300 remote under the placement"), "{cost}");
    // The same finding as the PMU's measurement: its cost is measured.
    model.findings[0].id = "measured-remote".into();
    let text = render_text(&model, false);
    let cost = line_with(&text, "cost ");
    assert!(cost.ends_with("as the PMU measured"), "{cost}");
}
