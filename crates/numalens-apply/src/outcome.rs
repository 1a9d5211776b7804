//! What a plan run did with each rule, from the profile it recorded: the `migrations` rows the
//! runtime's `PLACE` records became (policy `plan`, reason `objects[i] …`) and the objects of
//! the run, for the closest candidates of a rule that matched nothing.

use std::collections::BTreeMap;

use numalens_format::{Migration, Object, ObjectKind};
use numalens_place::plan::Plan;

use crate::rules::Compiled;

/// One rule's account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleOutcome {
    pub rule: usize,
    pub name: String,
    /// Objects (or static objects) the rule was applied to.
    pub applied: u64,
    pub bytes: u64,
    /// Kernel refusals by errno name.
    pub refused: BTreeMap<String, u64>,
    /// For a rule that matched nothing: objects of this run that look like what it names.
    pub candidates: Vec<String>,
}

/// Every compiled rule's outcome, in plan order.
pub fn outcomes(
    plan: &Plan,
    compiled: &Compiled,
    migrations: &[Migration],
    objects: &[Object],
) -> Vec<RuleOutcome> {
    let mut by_rule: BTreeMap<usize, (u64, u64, BTreeMap<String, u64>)> = BTreeMap::new();
    for m in migrations.iter().filter(|m| m.policy == "plan") {
        let Some(rule) = rule_index(&m.reason) else {
            continue;
        };
        let entry = by_rule.entry(rule).or_default();
        entry.0 += 1;
        entry.1 += m.len;
        if m.result != "ok" {
            *entry.2.entry(m.result.clone()).or_default() += 1;
        }
    }
    compiled
        .object_rules
        .iter()
        .map(|&i| {
            let (applied, bytes, refused) = by_rule.remove(&i).unwrap_or_default();
            let name = plan.objects[i].name.clone();
            let candidates = if applied == 0 {
                candidates(&plan.objects[i], objects)
            } else {
                Vec::new()
            };
            RuleOutcome {
                rule: i,
                name,
                applied,
                bytes,
                refused,
                candidates,
            }
        })
        .collect()
}

/// `objects[12] (object)` → 12.
fn rule_index(reason: &str) -> Option<usize> {
    reason
        .strip_prefix("objects[")?
        .split(']')
        .next()?
        .parse()
        .ok()
}

/// Up to three objects of the run most like the rule's: same name first, then the same
/// function in the name, then the nearest size; only objects with an identity a rule can use.
fn candidates(rule: &numalens_place::plan::ObjectRule, objects: &[Object]) -> Vec<String> {
    let function = |name: &str| name.split(" (").next().unwrap_or(name).to_string();
    let want_bytes = rule.pages.max(1) * 4096;
    let mut scored: Vec<(u32, u64, &Object)> = objects
        .iter()
        .filter(|o| o.site_key.is_some() || o.kind == numalens_format::ObjectKind::Static)
        .map(|o| {
            let score = if o.name == rule.name {
                0
            } else if function(&o.name) == function(&rule.name) {
                1
            } else {
                2
            };
            (score, o.size.abs_diff(want_bytes), o)
        })
        .collect();
    scored.sort_by_key(|(score, distance, o)| (*score, *distance, o.object_id));
    let mut seen = Vec::new();
    for (_, _, o) in scored {
        // Statics carry the site of their definition too; a plan names them by symbol.
        let text = match o.site_key {
            Some(key) if o.kind != ObjectKind::Static => {
                format!("{} ({} bytes, site {key:#x})", o.name, o.size)
            }
            _ => format!("{} ({} bytes, static)", o.name, o.size),
        };
        if !seen.contains(&text) {
            seen.push(text);
        }
        if seen.len() == 3 {
            break;
        }
    }
    seen
}

/// The lines `numalens run` prints: applied rules, refusals, rules that matched nothing.
pub fn render(outcomes: &[RuleOutcome], compiled: &Compiled, plan: &Plan) -> Vec<String> {
    let mut lines = Vec::new();
    let applied = outcomes.iter().filter(|o| o.applied > 0).count();
    lines.push(format!(
        "plan: {applied} of {} object rules applied, {} thread rules{}",
        plan.objects.len(),
        compiled.thread_rules,
        match compiled.skipped.len() {
            0 => String::new(),
            n => format!(", {n} not applicable"),
        }
    ));
    for o in outcomes {
        if o.applied > 0 {
            let refused: u64 = o.refused.values().sum();
            let mut line = format!(
                "  objects[{}] `{}`: {} placed, {:.1} MiB",
                o.rule,
                o.name,
                o.applied,
                o.bytes as f64 / (1 << 20) as f64
            );
            if refused > 0 {
                let why: Vec<String> = o.refused.iter().map(|(e, n)| format!("{n} {e}")).collect();
                line.push_str(&format!(
                    " ({} refused by the kernel: {})",
                    refused,
                    why.join(", ")
                ));
            }
            lines.push(line);
        }
    }
    for o in outcomes.iter().filter(|o| o.applied == 0) {
        let mut line = format!(
            "warning: objects[{}] `{}` matched nothing in this run",
            o.rule, o.name
        );
        if o.candidates.is_empty() {
            line.push_str(" (no object of this run has an identity a rule can name)");
        } else {
            line.push_str(&format!("; closest: {}", o.candidates.join("; ")));
        }
        lines.push(line);
    }
    for (i, why) in &compiled.skipped {
        lines.push(format!(
            "note: objects[{i}] `{}` not applied: {why}",
            plan.objects[*i].name
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_indices_come_from_the_reason() {
        assert_eq!(rule_index("objects[12] (object)"), Some(12));
        assert_eq!(rule_index("objects[0] (static object), spread"), Some(0));
        assert_eq!(rule_index("majority node"), None);
    }
}
