//! The ground truth for one run: a manifest's formulas evaluated for given argument values.

use std::collections::BTreeMap;
use std::ffi::OsString;

use crate::error::{Error, Result};
use crate::manifest::{Manifest, Object, ObjectKind};

pub const PAGE_SIZE: u64 = 4096;

/// The argument values of one run: the defaults with some overridden.
pub fn resolve_args(
    manifest: &Manifest,
    overrides: &[(&str, u64)],
) -> Result<BTreeMap<String, u64>> {
    let mut values = manifest.args.clone();
    for &(name, value) in overrides {
        let Some(slot) = values.get_mut(name) else {
            return Err(Error::UnknownArg {
                workload: manifest.name.clone(),
                name: name.into(),
                known: manifest.args.keys().cloned().collect::<Vec<_>>().join(", "),
            });
        };
        *slot = value;
    }
    let vars = variables(&values);
    for constraint in &manifest.constraints {
        let rule = manifest.formula("constraint", "", &constraint.rule, &names(&vars))?;
        let holds = rule.eval(&vars).map_err(|message| Error::BadArgs {
            workload: manifest.name.clone(),
            message,
        })?;
        if holds == 0 {
            return Err(Error::BadArgs {
                workload: manifest.name.clone(),
                message: constraint.message.clone(),
            });
        }
    }
    Ok(values)
}

/// The program's command-line arguments (`--name value` …) for these overrides.
pub fn args(manifest: &Manifest, overrides: &[(&str, u64)]) -> Result<Vec<OsString>> {
    let values = resolve_args(manifest, overrides)?;
    Ok(values
        .iter()
        .flat_map(|(name, value)| [format!("--{name}").into(), value.to_string().into()])
        .collect())
}

/// What the instrumentation must count for one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpectedObject {
    pub name: String,
    pub kind: ObjectKind,
    pub bytes: u64,
    pub instances: u64,
    /// Reads and writes per logical thread (index = logical thread id).
    pub reads: Vec<u64>,
    pub writes: Vec<u64>,
    /// First toucher per page of a single-instance object; one value standing for every page
    /// of a many-instance object.
    pub first_touchers: Vec<u64>,
}

impl ExpectedObject {
    /// The logical thread that first touches page `page` (0-based within the object).
    pub fn first_toucher(&self, page: u64) -> u64 {
        match self.first_touchers.as_slice() {
            [only] => *only,
            all => all[page as usize],
        }
    }
}

/// The expected counts of every object of the manifest for these argument overrides.
pub fn expected(manifest: &Manifest, overrides: &[(&str, u64)]) -> Result<Vec<ExpectedObject>> {
    let values = resolve_args(manifest, overrides)?;
    manifest
        .objects
        .iter()
        .map(|object| expect_object(manifest, object, &values))
        .collect()
}

fn expect_object(
    manifest: &Manifest,
    object: &Object,
    values: &BTreeMap<String, u64>,
) -> Result<ExpectedObject> {
    let args = variables(values);
    let threads = values["threads"];
    // Each formula is parsed once, then evaluated per thread or per page.
    let eval_all =
        |field: &'static str, text: &str, extra: &str, range: u64, fixed: &[(&str, u64)]| {
            let mut vars = args.clone();
            vars.extend_from_slice(fixed);
            let mut allowed = names(&vars);
            allowed.push(extra);
            let formula = manifest.formula(field, &object.name, text, &allowed)?;
            (0..range)
                .map(|i| {
                    vars.push((extra, i));
                    let value = formula.eval(&vars);
                    vars.pop();
                    value.map_err(|message| Error::Formula {
                        workload: manifest.name.clone(),
                        object: object.name.clone(),
                        field,
                        formula: text.into(),
                        message,
                    })
                })
                .collect::<Result<Vec<u64>>>()
        };
    let bytes = eval_all("bytes", &object.bytes, "_", 1, &[])?[0];
    let instances = eval_all("instances", &object.instances, "_", 1, &[])?[0];
    let reads = eval_all("reads", &object.reads, "tid", threads, &[])?;
    let writes = eval_all("writes", &object.writes, "tid", threads, &[])?;
    let pages = bytes.div_ceil(PAGE_SIZE);
    let first_touchers = if instances == 1 {
        eval_all(
            "first_toucher",
            &object.first_toucher,
            "page",
            pages,
            &[("pages", pages)],
        )?
    } else {
        eval_all("first_toucher", &object.first_toucher, "_", 1, &[])?
    };
    Ok(ExpectedObject {
        name: object.name.clone(),
        kind: object.kind,
        bytes,
        instances,
        reads,
        writes,
        first_touchers,
    })
}

fn variables(values: &BTreeMap<String, u64>) -> Vec<(&str, u64)> {
    values.iter().map(|(k, v)| (k.as_str(), *v)).collect()
}

fn names<'a>(vars: &[(&'a str, u64)]) -> Vec<&'a str> {
    vars.iter().map(|(name, _)| *name).collect()
}
