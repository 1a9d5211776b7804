//! A workload's manifest (`workloads/<name>.toml`): its arguments, the objects it accesses with
//! their analytically known counts, and the complete list of findings it must produce.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::formula::Formula;
use crate::vocabulary;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub name: String,
    /// The C file, in `workloads/`.
    pub source: String,
    pub summary: String,
    pub case_study: Option<String>,
    /// Compiler flags besides the compiler command itself (`-O2 -g -fopenmp`, …).
    pub flags: Vec<String>,
    /// Options `numalens record` needs for the objects to be seen (e.g. a lower
    /// `--min-object` for small allocations).
    #[serde(default)]
    pub record_options: Vec<String>,
    /// Default argument values: the program is run as `--name value` for each.
    pub args: BTreeMap<String, u64>,
    /// Relations the arguments must satisfy for the formulas to be exact.
    #[serde(default)]
    pub constraints: Vec<Constraint>,
    pub objects: Vec<Object>,
    /// The complete list: any other finding is a false positive.
    #[serde(default)]
    pub findings: Vec<Finding>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Constraint {
    /// A boolean formula over the arguments.
    pub rule: String,
    /// What to change when it does not hold.
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ObjectKind {
    /// Named by the `/* @object NAME */` marker on its allocating line.
    Heap,
    /// Named by its symbol.
    Static,
    /// Named by the marker on its `mmap` line.
    Mmap,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Object {
    pub name: String,
    pub kind: ObjectKind,
    /// Total bytes over all instances (formula over the arguments).
    pub bytes: String,
    /// How many allocations the marked line makes (formula; 1 unless it allocates in a loop).
    #[serde(default = "one")]
    pub instances: String,
    /// Logical thread that first touches page `page` of `pages` (formula).
    pub first_toucher: String,
    /// Reads by logical thread `tid` (formula).
    pub reads: String,
    /// Writes by logical thread `tid` (formula).
    pub writes: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Finding {
    pub id: String,
    pub object: String,
    pub advice: String,
}

fn one() -> String {
    "1".into()
}

impl Manifest {
    /// Parses and validates a manifest; `workload` names it in errors.
    pub fn parse(workload: &str, text: &str) -> Result<Manifest> {
        let manifest: Manifest = toml::from_str(text).map_err(|e| Error::Manifest {
            workload: workload.into(),
            message: e.to_string(),
        })?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// Checks ids against `docs/FINDINGS.md`, object references, and that every formula parses
    /// and uses only the variables it may.
    pub fn validate(&self) -> Result<()> {
        let fail = |message: String| {
            Err(Error::Manifest {
                workload: self.name.clone(),
                message,
            })
        };
        if !self.args.contains_key("threads") {
            return fail("[args] needs `threads`, the number of threads".into());
        }
        let args: Vec<&str> = self.args.keys().map(String::as_str).collect();
        for constraint in &self.constraints {
            self.formula("constraint", "", &constraint.rule, &args)?;
        }
        let mut names = BTreeSet::new();
        for object in &self.objects {
            if !names.insert(object.name.as_str()) {
                return fail(format!("object '{}' is listed twice", object.name));
            }
            self.check_object(object, &args)?;
        }
        let patterns = vocabulary::patterns();
        for finding in &self.findings {
            let Some(pattern) = patterns.iter().find(|p| p.finding == finding.id) else {
                let known: Vec<_> = patterns.iter().map(|p| p.finding.as_str()).collect();
                return fail(format!(
                    "unknown finding id '{}' (docs/FINDINGS.md has: {})",
                    finding.id,
                    known.join(", ")
                ));
            };
            if pattern.advice != finding.advice {
                return fail(format!(
                    "finding '{}' takes advice '{}', not '{}' (docs/FINDINGS.md)",
                    finding.id, pattern.advice, finding.advice
                ));
            }
            if !names.contains(finding.object.as_str()) {
                return fail(format!(
                    "finding '{}' names object '{}', which is not in [[objects]]",
                    finding.id, finding.object
                ));
            }
        }
        Ok(())
    }

    fn check_object(&self, object: &Object, args: &[&str]) -> Result<()> {
        let with = |extra: &[&'static str]| -> Vec<&str> {
            args.iter().copied().chain(extra.iter().copied()).collect()
        };
        self.formula("bytes", &object.name, &object.bytes, args)?;
        self.formula("instances", &object.name, &object.instances, args)?;
        self.formula("reads", &object.name, &object.reads, &with(&["tid"]))?;
        self.formula("writes", &object.name, &object.writes, &with(&["tid"]))?;
        // Pages of a many-instance object are not analytic: its first toucher must be one
        // thread for all of them.
        let page_vars: &[&'static str] = if object.instances == "1" {
            &["page", "pages"]
        } else {
            &[]
        };
        self.formula(
            "first_toucher",
            &object.name,
            &object.first_toucher,
            &with(page_vars),
        )?;
        Ok(())
    }

    /// Parses one formula, allowing only `variables`.
    pub(crate) fn formula(
        &self,
        field: &'static str,
        object: &str,
        text: &str,
        variables: &[&str],
    ) -> Result<Formula> {
        Formula::parse(text, variables).map_err(|message| Error::Formula {
            workload: self.name.clone(),
            object: object.into(),
            field,
            formula: text.into(),
            message,
        })
    }

    /// The object named `name`.
    pub fn object(&self, name: &str) -> Option<&Object> {
        self.objects.iter().find(|o| o.name == name)
    }
}
