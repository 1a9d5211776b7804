//! Scenario `record`: thread K, pinned to node K, first-touched block K of a malloc'd and of a
//! static array. The profile must say so page by page: first-touch samples by thread K with node
//! K attributed to the right object, and `page_nodes` putting every page on node K at exit.

use super::pages::Granule;
use super::probe::ProbeOutput;
use super::recorded::Recorded;
use super::{
    Check, expected_object, first_touched_by, heap_object_site, pages_on_node, profile_complete,
    threads_logical_ids,
};

/// Every check of the scenario, in a stable order.
pub fn checks(r: &Recorded, p: &ProbeOutput, thp_always: bool) -> Vec<Check> {
    let granule = Granule::new(r.page_size, r.samples_have_page_size, thp_always);
    let mut out = vec![
        profile_complete(r),
        threads_logical_ids(r, p),
        heap_object_site(r, p),
    ];
    for block in &p.blocks {
        let name = format!("{}-node", block.array);
        let Some(thread) = p.thread(&block.index.to_string()) else {
            out.push(Check::new(
                format!("first-touch-{name}?"),
                false,
                format!("the probe printed no thread {}", block.index),
            ));
            continue;
        };
        let object = expected_object(r, p, block);
        let (ok, detail) = first_touched_by(r, block, thread, object, granule);
        out.push(Check::new(
            format!("first-touch-{name}{}", thread.node),
            ok,
            detail,
        ));
        let (on, pages, summary) = pages_on_node(r, block, thread.node);
        out.push(Check::new(
            format!("page-nodes-{name}{}", thread.node),
            on == pages && pages > 0,
            format!("{on}/{pages} pages on node {}: {summary}", thread.node),
        ));
    }
    out
}
