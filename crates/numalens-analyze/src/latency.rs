//! The measured latency of each (CPU node, memory node) pair beside the machine model's: the
//! unloaded latencies the simulator uses (`numalens_place::Machine`, docs/SIMULATOR.md), of the
//! recorded topology or the `--topology` machine. The PMU measures cycles and the model is in
//! ns: the recorded CPU clock converts one into the other; without one both are shown in their
//! own unit.

use numalens_topology::Topology;

use crate::model::{LatencyModel, NodePairLatency};

/// Fills the model's latency (and, with a clock, both in both units) into `pairs`.
pub(crate) fn compare(
    pairs: &mut [NodePairLatency],
    machine: &Topology,
    clock_ghz: Option<f64>,
) -> LatencyModel {
    let model = numalens_place::Machine::from_topology(machine);
    let basis = match machine.latency_ns() {
        Some((_, provenance)) => provenance.source,
        None => model.assumptions.join("; "),
    };
    for p in pairs.iter_mut() {
        let (c, m) = (model.index(p.cpu_node), model.index(p.memory_node));
        p.modelled_ns = c
            .zip(m)
            .and_then(|(c, m)| model.latency_ns.get(c)?.get(m).copied());
        p.measured_ns = clock_ghz.map(|ghz| p.mean_cycles as f64 / ghz);
        p.modelled_cycles = clock_ghz.zip(p.modelled_ns).map(|(ghz, ns)| ns * ghz);
    }
    let units = match clock_ghz {
        Some(ghz) => format!("measured cycles and modelled ns converted at the recorded {ghz} GHz"),
        None => "no recorded CPU clock: measured in cycles, modelled in ns, not converted".into(),
    };
    LatencyModel {
        topology: machine.name.clone(),
        basis,
        clock_ghz,
        units,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(cpu_node: u32, memory_node: u32, mean_cycles: u64) -> NodePairLatency {
        NodePairLatency {
            cpu_node,
            memory_node,
            samples: 10,
            mean_cycles,
            measured_ns: None,
            modelled_ns: None,
            modelled_cycles: None,
        }
    }

    #[test]
    fn the_model_latency_is_set_beside_each_pair_and_converted_with_a_clock() {
        // Machine A of the Lepers thesis, read through the conversion the simulator uses.
        let machine = numalens_topology::presets::preset("machine-a").unwrap();
        let expected = numalens_place::Machine::from_topology(&machine).latency_ns;
        let mut pairs = vec![pair(0, 0, 250), pair(0, 1, 500), pair(7, 0, 100)];
        let m = compare(&mut pairs, &machine, Some(2.0));
        assert_eq!(pairs[0].modelled_ns, Some(expected[0][0]));
        assert_eq!(pairs[1].modelled_ns, Some(expected[0][1]));
        assert_ne!(expected[0][0], expected[0][1]);
        assert_eq!(pairs[1].measured_ns, Some(250.0));
        assert_eq!(pairs[1].modelled_cycles, Some(expected[0][1] * 2.0));
        // A node the model does not have: nothing to compare with.
        assert_eq!(pairs[2].modelled_ns, None);
        assert!(m.units.contains("2 GHz"), "{}", m.units);
        let m = compare(&mut pairs, &machine, None);
        assert!(m.units.starts_with("no recorded CPU clock"), "{}", m.units);
        assert_eq!(m.clock_ghz, None);
    }
}
