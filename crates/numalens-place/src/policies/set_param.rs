//! One policy parameter set by name (`carrefour.maptu_min=5`): the parameters the papers
//! disagree on or that depend on the machine, changeable from the command line.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Params;

impl Params {
    /// Sets `group.field` (`carrefour`, `kmaf`, `spm`, `tiering`) to `value` (a JSON value:
    /// a number, `true`, …); the error names the known fields.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let (group, field) = key
            .split_once('.')
            .ok_or_else(|| format!("`{key}` is not GROUP.FIELD (e.g. carrefour.maptu_min)"))?;
        match group {
            "carrefour" => set_field(&mut self.carrefour, group, field, value),
            "kmaf" => set_field(&mut self.kmaf, group, field, value),
            "spm" => set_field(&mut self.spm, group, field, value),
            "tiering" => set_field(&mut self.tiering, group, field, value),
            _ => Err(format!(
                "no parameter group `{group}`: the groups are carrefour, kmaf, spm and tiering"
            )),
        }
    }
}

fn set_field<T: Serialize + DeserializeOwned>(
    params: &mut T,
    group: &str,
    field: &str,
    value: &str,
) -> Result<(), String> {
    let mut json = serde_json::to_value(&*params).map_err(|e| e.to_string())?;
    let fields = json.as_object_mut().ok_or("parameters are not an object")?;
    if !fields.contains_key(field) {
        let mut known: Vec<&String> = fields.keys().collect();
        known.sort();
        return Err(format!(
            "{group} has no parameter `{field}`; its parameters: {}",
            known
                .iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let parsed: serde_json::Value = serde_json::from_str(value).map_err(|_| {
        format!("`{value}` is not a value for {group}.{field} (a number, true or false)")
    })?;
    fields.insert(field.to_string(), parsed);
    *params = serde_json::from_value(json).map_err(|e| format!("{group}.{field}={value}: {e}"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_is_set_and_bad_names_and_values_are_said() {
        let mut p = Params::default();
        p.set("carrefour.maptu_min", "2.5").unwrap();
        assert_eq!(p.carrefour.maptu_min, 2.5);
        p.set("spm.observe_windows", "5").unwrap();
        assert_eq!(p.spm.observe_windows, 5);
        let e = p.set("carrefour.nope", "1").unwrap_err();
        assert!(e.contains("maptu_min"), "{e}");
        assert!(p.set("spm.observe_windows", "-1").is_err());
        assert!(p.set("nothing", "1").is_err());
        assert!(p.set("model.x", "1").unwrap_err().contains("groups"));
    }
}
