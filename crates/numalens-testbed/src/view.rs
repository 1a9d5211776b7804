//! The part of a numalens topology a guest can express: node ids, CPUs per node, memory per node
//! and SLIT distances. Read either from [`numalens_topology::Topology`] or from the JSON that
//! `numalens topology --json` prints, so that the test bed keeps working while the topology
//! schema grows (the JSON path ignores fields it does not know).

use numalens_topology::Topology;
use numalens_topology::cpulist::parse_cpulist;
use serde_json::Value;

use crate::Error;

/// One node as the test bed sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    pub id: u32,
    pub cpus: Vec<u32>,
    pub memory_bytes: Option<u64>,
}

/// Nodes sorted by id, and the distance matrix indexed by node position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyView {
    pub name: String,
    pub nodes: Vec<NodeView>,
    pub distances: Option<Vec<Vec<u32>>>,
}

impl TopologyView {
    pub fn from_topology(t: &Topology) -> TopologyView {
        let nodes = t
            .nodes
            .iter()
            .map(|n| NodeView {
                id: n.id,
                cpus: n.cpus.clone(),
                memory_bytes: n.memory_bytes,
            })
            .collect();
        TopologyView {
            name: t.name.clone(),
            nodes,
            distances: t.distances.as_ref().map(|d| d.values.clone()),
        }
    }

    /// Parses the JSON document printed by `numalens topology --json`.
    pub fn from_json(text: &str) -> Result<TopologyView, Error> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| Error::Topology(format!("topology JSON does not parse: {e}")))?;
        let name = v["name"].as_str().unwrap_or("unnamed").to_string();
        let nodes = v["nodes"]
            .as_array()
            .ok_or_else(|| Error::Topology("topology JSON has no `nodes` array".into()))?
            .iter()
            .map(node_from_json)
            .collect::<Result<Vec<_>, _>>()?;
        let distances = match &v["distances"]["values"] {
            Value::Null => None,
            m => Some(matrix_from_json(m)?),
        };
        let mut view = TopologyView {
            name,
            nodes,
            distances,
        };
        view.sort_nodes();
        Ok(view)
    }

    fn sort_nodes(&mut self) {
        // The matrix follows node positions, so permute it together with the nodes.
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        order.sort_by_key(|&i| self.nodes[i].id);
        if order.iter().enumerate().all(|(i, &o)| i == o) {
            return;
        }
        self.nodes = order.iter().map(|&i| self.nodes[i].clone()).collect();
        if let Some(m) = &self.distances {
            let p: Vec<Vec<u32>> = order
                .iter()
                .map(|&i| order.iter().map(|&j| m[i][j]).collect())
                .collect();
            self.distances = Some(p);
        }
    }
}

/// Differences between what a guest should show and what it shows: node ids, CPUs per node and
/// distances. Memory is not compared, since the kernel keeps part of each node for itself.
pub fn differences(expected: &TopologyView, actual: &TopologyView) -> Vec<String> {
    let mut d = Vec::new();
    let ids = |v: &TopologyView| v.nodes.iter().map(|n| n.id).collect::<Vec<_>>();
    if ids(expected) != ids(actual) {
        d.push(format!(
            "node ids: expected {:?}, got {:?}",
            ids(expected),
            ids(actual)
        ));
        return d;
    }
    for (e, a) in expected.nodes.iter().zip(&actual.nodes) {
        if e.cpus != a.cpus {
            d.push(format!(
                "node {} cpus: expected {:?}, got {:?}",
                e.id, e.cpus, a.cpus
            ));
        }
    }
    if expected.distances != actual.distances {
        d.push(format!(
            "distances: expected {:?}, got {:?}",
            expected.distances, actual.distances
        ));
    }
    d
}

fn node_from_json(n: &Value) -> Result<NodeView, Error> {
    let id = n["id"]
        .as_u64()
        .ok_or_else(|| Error::Topology(format!("node without numeric `id`: {n}")))?
        as u32;
    let cpus = match &n["cpus"] {
        Value::String(s) => parse_cpulist(s)
            .map_err(|e| Error::Topology(format!("node {id}: bad cpulist {s:?}: {e}")))?,
        Value::Array(a) => a
            .iter()
            .filter_map(|c| c.as_u64())
            .map(|c| c as u32)
            .collect(),
        Value::Null => Vec::new(),
        other => return Err(Error::Topology(format!("node {id}: bad cpus {other}"))),
    };
    Ok(NodeView {
        id,
        cpus,
        memory_bytes: n["memory_bytes"].as_u64(),
    })
}

fn matrix_from_json(m: &Value) -> Result<Vec<Vec<u32>>, Error> {
    let bad = || Error::Topology(format!("distances.values is not a matrix of integers: {m}"));
    m.as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|row| {
            row.as_array()
                .ok_or_else(bad)?
                .iter()
                .map(|x| x.as_u64().map(|x| x as u32).ok_or_else(bad))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_nodes_are_sorted_with_their_distances() {
        let text = r#"{"name":"x","extra":1,"nodes":[{"id":1,"cpus":"2-3"},{"id":0,"cpus":"0,1","memory_bytes":1024}],
            "distances":{"values":[[10,20],[20,10]],"provenance":{}}}"#;
        let mut v = TopologyView::from_json(text).unwrap();
        assert_eq!(v.nodes[0].id, 0);
        assert_eq!(v.nodes[0].cpus, vec![0, 1]);
        assert_eq!(v.nodes[0].memory_bytes, Some(1024));
        assert_eq!(v.nodes[1].cpus, vec![2, 3]);
        v.distances = Some(vec![vec![10, 21], vec![31, 10]]);
        v.nodes.swap(0, 1);
        v.sort_nodes();
        assert_eq!(v.distances.unwrap(), vec![vec![10, 31], vec![21, 10]]);
    }

    #[test]
    fn memory_only_node_has_no_cpus() {
        let text = r#"{"nodes":[{"id":0,"cpus":"0"},{"id":1,"cpus":""}]}"#;
        let v = TopologyView::from_json(text).unwrap();
        assert!(v.nodes[1].cpus.is_empty());
        assert!(v.distances.is_none());
    }

    #[test]
    fn differences_name_the_node() {
        let text = r#"{"nodes":[{"id":0,"cpus":"0"},{"id":1,"cpus":"1"}],"distances":{"values":[[10,20],[20,10]]}}"#;
        let a = TopologyView::from_json(text).unwrap();
        assert!(differences(&a, &a).is_empty());
        let mut b = a.clone();
        b.nodes[1].cpus = vec![1, 2];
        b.distances = Some(vec![vec![10, 21], vec![21, 10]]);
        let d = differences(&a, &b);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].starts_with("node 1 cpus"));
        b.nodes.pop();
        assert!(differences(&a, &b)[0].starts_with("node ids"));
    }

    #[test]
    fn garbage_is_a_clear_error() {
        let e = TopologyView::from_json("{\"nodes\":3}").unwrap_err();
        assert!(e.to_string().contains("nodes"), "{e}");
    }
}
