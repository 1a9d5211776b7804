//! Names that tell allocation sites apart, shared by the recorder (object names) and the analysis
//! (site locations), so both climb the same way.

/// For sites named by the first of a list of frames (each site's own frames from the innermost
/// outward: its *ladder*), how far out each must name itself so that sites sharing a wrapper
/// (`xmalloc` called by `polybench_alloc_data` called from `main` for each array) get the
/// names of their callers: while a rung names two or more sites, those that can climb do, at
/// most `max_depth` rungs. Sites with a name of their own stay at rung 0.
pub fn distinct_rungs<K: Eq + std::hash::Hash>(ladders: &[Vec<K>], max_depth: usize) -> Vec<usize> {
    let mut rungs = vec![0usize; ladders.len()];
    for _ in 0..max_depth {
        let mut sharing: std::collections::HashMap<&K, usize> = std::collections::HashMap::new();
        for (ladder, &rung) in ladders.iter().zip(&rungs) {
            if let Some(k) = ladder.get(rung) {
                *sharing.entry(k).or_default() += 1;
            }
        }
        let mut climbed = false;
        for (ladder, rung) in ladders.iter().zip(rungs.iter_mut()) {
            let shared = ladder.get(*rung).is_some_and(|k| sharing[k] > 1);
            if shared && ladder.len() > *rung + 1 {
                *rung += 1;
                climbed = true;
            }
        }
        if !climbed {
            break;
        }
    }
    // A climb that found no name of its own (three allocations on one line of `main`, all
    // reached from the same caller) is worth nothing: those sites keep their first name.
    let mut sharing: std::collections::HashMap<&K, usize> = std::collections::HashMap::new();
    for (ladder, &rung) in ladders.iter().zip(&rungs) {
        if let Some(k) = ladder.get(rung) {
            *sharing.entry(k).or_default() += 1;
        }
    }
    for (ladder, rung) in ladders.iter().zip(rungs.iter_mut()) {
        if ladder.get(*rung).is_some_and(|k| sharing[k] > 1) {
            *rung = 0;
        }
    }
    rungs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites_sharing_a_wrapper_climb_to_their_callers_and_no_further() {
        let ladders = vec![
            vec!["xmalloc", "alloc_data", "main:96"],
            vec!["xmalloc", "alloc_data", "main:97"],
            vec!["main:40"],
            // Shares its name with nobody: stays, although it could climb.
            vec!["grid_init", "main:50"],
            // Shares its name and cannot climb: stays.
            vec!["main:40"],
        ];
        assert_eq!(distinct_rungs(&ladders, 4), vec![2, 2, 0, 0, 0]);
        // Stopped one rung short, they still collide: back to their first names.
        assert_eq!(distinct_rungs(&ladders, 1), vec![0, 0, 0, 0, 0]);
    }

    #[test]
    fn sites_that_no_caller_tells_apart_keep_their_names() {
        // Three allocations on one line, reached from one caller.
        let ladders = vec![vec!["main:16", "start"]; 3];
        assert_eq!(distinct_rungs(&ladders, 4), vec![0, 0, 0]);
    }
}
