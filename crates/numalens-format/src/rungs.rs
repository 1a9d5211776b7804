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
        assert_eq!(distinct_rungs(&ladders, 1), vec![1, 1, 0, 0, 0]);
    }
}
