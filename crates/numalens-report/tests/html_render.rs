//! The HTML report of whole models: the analysis' own snapshot model (a small fixture profile),
//! the same with hostile names, and with nothing in it. The browser test
//! (`crates/numalens/tests/html.rs`) opens the report of a recorded program.

use numalens_analyze::ReportModel;
use numalens_report::html::{MAX_BYTES, render};

/// The model the analysis' snapshot test pins down, read from its snapshot file.
fn snapshot_model() -> ReportModel {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../numalens-analyze/tests/snapshots/snapshot__report_model_json.snap"
    );
    let text = std::fs::read_to_string(path).unwrap();
    // An insta snapshot: a `---` header block, then the JSON.
    let json = text.splitn(3, "---\n").nth(2).unwrap();
    serde_json::from_str(json).unwrap()
}

fn sections(html: &str) -> Vec<&str> {
    html.split("<section id=\"")
        .skip(1)
        .map(|s| &s[..s.find('"').unwrap()])
        .collect()
}

#[test]
fn a_whole_model_gives_every_section_once_in_one_document() {
    let model = snapshot_model();
    let html = render(&model);
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
    assert_eq!(
        sections(&html),
        [
            "summary",
            "findings",
            "topology",
            "what-if",
            "objects",
            "object-details",
            "threads",
            "communication",
            "traffic",
            "timelines"
        ]
    );
    assert_eq!(
        html.matches("<section").count(),
        html.matches("</section>").count()
    );
    assert_eq!(html.matches("<svg").count(), html.matches("</svg>").count());
    // Nothing is fetched: no external script, style, image or font.
    for fetch in ["src=\"http", "href=\"http", "url(", "@import", "<link"] {
        assert!(!html.contains(fetch), "{fetch}");
    }
    // Each listed object is named in the table, and each finding's pattern is shown.
    for o in &model.objects {
        assert!(html.contains(&o.name.replace('&', "&amp;")), "{}", o.name);
    }
    for f in &model.findings {
        assert!(html.contains(&format!("<span class=\"pattern\">{}</span>", f.id)));
    }
    assert!(html.len() < MAX_BYTES);
}

#[test]
fn the_topology_section_shows_each_nodes_cpus_memory_and_distances() {
    let model = snapshot_model();
    let html = render(&model);
    let start = html.find("<section id=\"topology\"").unwrap();
    let section = &html[start..start + html[start..].find("</section>").unwrap()];
    let pl = &model.placement;
    assert!(!pl.machine_nodes.is_empty());
    let distances = pl.distances.as_ref().expect("the preset has distances");
    for (i, n) in pl.machine_nodes.iter().enumerate() {
        let cells: String = distances[i]
            .iter()
            .map(|d| format!("<td class=\"n\">{d}</td>"))
            .collect();
        let row = format!("<tr><td>{}</td><td>{}</td>", n.node, n.cpus);
        let at = section.find(&row).unwrap_or_else(|| panic!("no row {row}"));
        let end = at + section[at..].find("</tr>").unwrap();
        assert!(section[at..end].ends_with(&cells), "{}", &section[at..end]);
        assert!(section.contains(&format!("<th>distance to {}</th>", n.node)));
    }
}

#[test]
fn names_from_the_program_cannot_inject_markup() {
    let mut model = snapshot_model();
    let hostile = "</script><script>alert(1)</script> & <b>";
    for o in &mut model.objects {
        o.name = format!("{hostile}{}", o.id);
    }
    for t in &mut model.threads {
        t.name = Some(hostile.into());
    }
    for f in &mut model.findings {
        f.object.name = hostile.into();
        f.summary = hostile.into();
    }
    model.profile.command = vec![hostile.into()];
    let html = render(&model);
    assert!(!html.contains(hostile));
    assert!(!html.contains("<script>alert"));
    assert!(html.contains("&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;b&gt;"));
    // The page's own script is the only one.
    assert_eq!(html.matches("<script>").count(), 1);
}

#[test]
fn an_empty_model_says_what_is_missing_instead_of_drawing() {
    let mut model = snapshot_model();
    model.objects.clear();
    model.threads.clear();
    model.findings.clear();
    model.communication = Default::default();
    model.placement = Default::default();
    model.what_if = None;
    let html = render(&model);
    assert_eq!(sections(&html).len(), 10);
    assert!(html.contains("No what-if"));
    assert!(html.contains("No finding"));
    assert!(html.contains("No object has a recorded access"));
    assert!(html.contains("No two threads share data"));
    assert!(html.contains("No node traffic"));
    assert!(!html.contains("<svg"));
}

#[test]
fn lost_samples_are_said_before_the_figures() {
    let mut model = snapshot_model();
    model.profile.lost_samples_note =
        numalens_analyze::model::lost_samples_note(250, 750, Some(256));
    let html = render(&model);
    let note = "250 samples or task records (25.0 %) were lost because the ring buffer filled: record again with \
                a larger --ring-pages, e.g. --ring-pages 1024";
    let at = html.find(note).expect("the note is in the report");
    assert!(at < html.find("<div class=\"cards\">").unwrap());
}

#[test]
fn a_static_is_defined_at_its_source_line_not_allocated() {
    let mut model = snapshot_model();
    let object = model
        .objects
        .iter_mut()
        .find(|o| o.access.is_some())
        .expect("an object with accesses");
    object.kind = "static".into();
    let frame = numalens_analyze::model::Frame {
        module: "/bin/app".into(),
        offset: 0x4040,
        function: None,
        file: Some("/src/grid.c".into()),
        line: Some(12),
    };
    object.site = Some(numalens_analyze::model::SiteReport {
        key: "0x00000000000000aa".into(),
        location: frame.clone(),
        frames: vec![frame],
    });
    let html = render(&model);
    assert!(
        html.contains("<th>defined at</th><td><code>/src/grid.c:12</code></td>"),
        "{html}"
    );
    // Under the name in the objects table: the file's base name.
    assert!(html.contains(">grid.c:12</span>"));
}
