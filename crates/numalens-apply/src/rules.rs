//! A plan compiled into the runtime's rules file (`runtime/include/numalens_plan.h`): fixed
//! records the runtime maps and applies without parsing. Everything that needs judgement is done
//! here, before the program starts: which rules can be applied in this run, static objects'
//! symbols looked up in the program, node ids mapped to this machine, thread rules turned into
//! CPU sets. What cannot be applied is said, rule by rule.

use std::collections::BTreeMap;
use std::path::Path;

use numalens_place::plan::{Action, ObjectRule, Plan};
use numalens_topology::Topology;

use crate::error::ApplyError;

const MAGIC: &[u8; 8] = b"NLRULES1";
const VERSION: u32 = 1;
/// Node ids a rule may name (one 64-bit mask in the runtime).
pub const MAX_NODES: u32 = 64;
const CPU_WORDS: usize = 16;
const MODULE_NAME: usize = 48;
/// A weighted interleave becomes a repeating pattern of at most this many pages.
const PATTERN_MAX: u64 = 256;

const BIND: u32 = 1;
const INTERLEAVE: u32 = 2;
const RANGES: u32 = 3;
const PATTERN: u32 = 4;

/// The rules of one run and what was left out.
#[derive(Debug, Default)]
pub struct Compiled {
    pub bytes: Vec<u8>,
    /// Rules the runtime will look for: (index in `objects[]`, how it is found).
    pub object_rules: Vec<usize>,
    pub thread_rules: usize,
    /// `objects[i]` rules that cannot apply in this run, with why.
    pub skipped: Vec<(usize, String)>,
    /// What the user should know (node mapping, moves left to the engine).
    pub notes: Vec<String>,
}

struct Action_ {
    kind: u32,
    rule: u32,
    first_range: u32,
    range_count: u32,
    nodes: u64,
    node: u32,
}

#[derive(Default)]
struct Builder {
    sites: Vec<(u64, u32)>,
    statics: Vec<(u64, u64, u32, String)>,
    threads: Vec<(u32, u32, [u64; CPU_WORDS])>,
    actions: Vec<Action_>,
    ranges: Vec<(u64, u64, u32)>,
}

/// How plan node ids become this machine's: identity when the machine has every node the plan
/// uses, else (with `force`) by position: the plan's i-th node becomes the machine's i-th node
/// with memory, modulo their number.
pub fn node_map(plan: &Plan, host: &Topology, force: bool) -> Result<NodeMap, ApplyError> {
    let host_nodes: Vec<u32> = host
        .nodes
        .iter()
        .filter(|n| n.memory_bytes != Some(0))
        .map(|n| n.id)
        .collect();
    let used = used_nodes(plan);
    let missing: Vec<u32> = used
        .iter()
        .copied()
        .filter(|n| !host.nodes.iter().any(|h| h.id == *n))
        .collect();
    if missing.is_empty() {
        return Ok(NodeMap(None));
    }
    if !force || host_nodes.is_empty() {
        return Err(ApplyError::Topology(format!(
            "the plan was made for `{}` (nodes {:?}) and uses nodes {missing:?}, which this machine \
             does not have (its nodes: {:?}); make a plan for this machine (`numalens plan PROFILE \
             --policy P` on it), or pass --force to map the plan's nodes by position",
            plan.topology.name,
            plan.topology.nodes.iter().map(|n| n.id).collect::<Vec<_>>(),
            host.nodes.iter().map(|n| n.id).collect::<Vec<_>>(),
        )));
    }
    let map = plan
        .topology
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.id, host_nodes[i % host_nodes.len()]))
        .collect();
    Ok(NodeMap(Some(map)))
}

/// Plan node id → machine node id (none: the same ids).
#[derive(Debug, Clone, Default)]
pub struct NodeMap(Option<BTreeMap<u32, u32>>);

impl NodeMap {
    pub fn get(&self, node: u32) -> u32 {
        self.0
            .as_ref()
            .and_then(|m| m.get(&node).copied())
            .unwrap_or(node)
    }

    pub fn describe(&self) -> Option<String> {
        let map = self.0.as_ref()?;
        let pairs: Vec<String> = map.iter().map(|(a, b)| format!("{a}→{b}")).collect();
        Some(format!(
            "plan nodes mapped by position: {}",
            pairs.join(", ")
        ))
    }
}

fn used_nodes(plan: &Plan) -> Vec<u32> {
    let mut nodes: Vec<u32> = plan.threads.iter().map(|t| t.node).collect();
    for r in &plan.objects {
        match &r.action {
            Action::Bind { node } => nodes.push(*node),
            Action::Interleave { nodes: n, .. } => nodes.extend(n),
            Action::Ranges(ranges) => nodes.extend(ranges.iter().map(|r| r.node)),
            Action::Replicate {} => {}
        }
    }
    nodes.sort_unstable();
    nodes.dedup();
    nodes
}

/// Compiles `plan` for a run of `program` on `host`.
pub fn compile(plan: &Plan, program: &Path, host: &Topology, nodes: &NodeMap) -> Compiled {
    let mut out = Compiled::default();
    let mut b = Builder::default();
    let symbols = crate::statics::Symbols::read(program);
    for (i, rule) in plan.objects.iter().enumerate() {
        if let Err(why) = add_object(&mut b, i, rule, &symbols, nodes) {
            out.skipped.push((i, why));
        } else {
            out.object_rules.push(i);
        }
    }
    for (i, t) in plan.threads.iter().enumerate() {
        if t.process != 0 {
            continue;
        }
        let cpus = cpu_mask(host, nodes.get(t.node));
        if cpus.iter().all(|w| *w == 0) {
            out.notes.push(format!(
                "threads[{i}]: node {} has no CPUs here; the thread runs where the kernel puts it",
                t.node
            ));
            continue;
        }
        b.threads.push((t.logical_id, i as u32, cpus));
        out.thread_rules += 1;
    }
    if let Some(note) = nodes.describe() {
        out.notes.push(note);
    }
    let exe_id = numalens_place::plan::read_build_id(program).unwrap_or_default();
    out.bytes = b.encode(&hex_bytes(&exe_id));
    out
}

fn add_object(
    b: &mut Builder,
    index: usize,
    rule: &ObjectRule,
    symbols: &crate::statics::Symbols,
    nodes: &NodeMap,
) -> Result<(), String> {
    let id = &rule.identity;
    if id.process != 0 {
        return Err(format!(
            "it is for process {} of the run; a plan run places the first process",
            id.process
        ));
    }
    if let Some(site) = &id.site {
        let key = parse_key(site).ok_or_else(|| format!("its site `{site}` is not a hex key"))?;
        let action = b.action(index as u32, &rule.action, nodes)?;
        b.sites.push((key, action));
        return Ok(());
    }
    if let Some(symbol) = &id.symbol {
        let module = id.module.as_deref().filter(|m| !symbols.is_program(m));
        if let Some(module) = module {
            return Err(format!(
                "`{symbol}` is a static object of `{module}`; a plan run places the program's own"
            ));
        }
        let (offset, size) = symbols.find(symbol).ok_or_else(|| {
            format!(
                "`{symbol}` is not a static object of this program (a library's, or the plan is \
                 for another build); a plan run places the program's own static objects"
            )
        })?;
        let action = b.action(index as u32, &rule.action, nodes)?;
        b.statics.push((offset, size, action, String::new()));
        return Ok(());
    }
    if id.stack_of_thread.is_some() {
        return Err(
            "a thread's stack is placed with its thread (first touch by that thread)".into(),
        );
    }
    Err("it has no identity a run can find (no site, no symbol)".into())
}

fn parse_key(text: &str) -> Option<u64> {
    u64::from_str_radix(text.trim_start_matches("0x"), 16).ok()
}

fn hex_bytes(hex: &str) -> Vec<u8> {
    (0..hex.len() / 2)
        .filter_map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

fn cpu_mask(host: &Topology, node: u32) -> [u64; CPU_WORDS] {
    let mut mask = [0u64; CPU_WORDS];
    for cpu in host
        .nodes
        .iter()
        .filter(|n| n.id == node)
        .flat_map(|n| &n.cpus)
    {
        if let Some(word) = mask.get_mut(*cpu as usize / 64) {
            *word |= 1 << (cpu % 64);
        }
    }
    mask
}

impl Builder {
    /// Adds the action of `objects[rule]`; errors say why it cannot be applied.
    fn action(&mut self, rule: u32, action: &Action, nodes: &NodeMap) -> Result<u32, String> {
        let checked = |n: u32| {
            let n = nodes.get(n);
            if n < MAX_NODES {
                Ok(n)
            } else {
                Err(format!(
                    "node {n} is beyond the {MAX_NODES} nodes a rule can name"
                ))
            }
        };
        let first_range = self.ranges.len() as u32;
        let (kind, node, mut mask) = match action {
            Action::Bind { node } => (BIND, checked(*node)?, 0),
            Action::Interleave {
                nodes: list,
                weights,
            } => {
                let list: Vec<u32> = list.iter().map(|n| checked(*n)).collect::<Result<_, _>>()?;
                match weights.as_ref().filter(|w| w.iter().any(|x| *x != w[0])) {
                    Some(w) => {
                        self.push_pattern(&list, w)?;
                        (PATTERN, 0, 0)
                    }
                    None => (INTERLEAVE, 0, list.iter().fold(0, |m, n| m | 1u64 << n)),
                }
            }
            Action::Ranges(ranges) => {
                for r in ranges {
                    self.ranges.push((r.pages[0], r.pages[1], checked(r.node)?));
                }
                (RANGES, 0, 0)
            }
            Action::Replicate {} => {
                return Err(
                    "replication is advisory: user space cannot replicate pages \
                            transparently (its note says what to change in the program)"
                        .into(),
                );
            }
        };
        let range_count = self.ranges.len() as u32 - first_range;
        for r in &self.ranges[first_range as usize..] {
            mask |= 1u64 << r.2;
        }
        if kind == BIND {
            mask |= 1u64 << node;
        }
        self.actions.push(Action_ {
            kind,
            rule,
            first_range,
            range_count,
            nodes: mask,
            node,
        });
        Ok(self.actions.len() as u32 - 1)
    }

    /// A weighted interleave as a repeating pattern of pages: the weights reduced to at most
    /// PATTERN_MAX pages, each node's pages spread evenly through the pattern.
    fn push_pattern(&mut self, nodes: &[u32], weights: &[u32]) -> Result<(), String> {
        if weights.len() != nodes.len() {
            return Err(format!(
                "its interleave has {} nodes and {} weights",
                nodes.len(),
                weights.len()
            ));
        }
        let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
        if total == 0 {
            return Err("its interleave weights are all 0".into());
        }
        let scale = total.div_ceil(PATTERN_MAX).max(1);
        let counts: Vec<u64> = weights
            .iter()
            .map(|w| u64::from(*w).div_ceil(scale))
            .collect();
        let len: u64 = counts.iter().sum();
        // Each page goes to the node furthest behind its share so far (smooth round-robin).
        let mut given = vec![0u64; nodes.len()];
        for p in 0..len {
            let k = (0..nodes.len())
                .max_by(|&a, &b| {
                    let behind =
                        |i: usize| counts[i] as f64 * (p + 1) as f64 / len as f64 - given[i] as f64;
                    behind(a).total_cmp(&behind(b)).then(b.cmp(&a))
                })
                .expect("nodes are not empty");
            given[k] += 1;
            self.ranges.push((p, p, nodes[k]));
        }
        Ok(())
    }

    fn encode(&self, exe_build_id: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        for v in [
            VERSION,
            self.sites.len() as u32,
            self.statics.len() as u32,
            self.threads.len() as u32,
            self.actions.len() as u32,
            self.ranges.len() as u32,
            exe_build_id.len().min(40) as u32,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        let mut id = [0u8; 40];
        let n = exe_build_id.len().min(40);
        id[..n].copy_from_slice(&exe_build_id[..n]);
        out.extend_from_slice(&id);
        out.extend_from_slice(&0u32.to_le_bytes());
        for (key, action) in &self.sites {
            out.extend_from_slice(&key.to_le_bytes());
            out.extend_from_slice(&action.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
        }
        for (offset, size, action, module) in &self.statics {
            out.extend_from_slice(&offset.to_le_bytes());
            out.extend_from_slice(&size.to_le_bytes());
            out.extend_from_slice(&action.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
            let mut name = [0u8; MODULE_NAME];
            let m = module.as_bytes();
            let n = m.len().min(MODULE_NAME - 1);
            name[..n].copy_from_slice(&m[..n]);
            out.extend_from_slice(&name);
        }
        for (logical, rule, cpus) in &self.threads {
            out.extend_from_slice(&logical.to_le_bytes());
            out.extend_from_slice(&rule.to_le_bytes());
            for w in cpus {
                out.extend_from_slice(&w.to_le_bytes());
            }
        }
        for a in &self.actions {
            for v in [a.kind, a.rule, a.first_range, a.range_count] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(&a.nodes.to_le_bytes());
            out.extend_from_slice(&a.node.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
        }
        for (first, last, node) in &self.ranges {
            out.extend_from_slice(&first.to_le_bytes());
            out.extend_from_slice(&last.to_le_bytes());
            out.extend_from_slice(&node.to_le_bytes());
            out.extend_from_slice(&0u32.to_le_bytes());
        }
        out
    }
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
