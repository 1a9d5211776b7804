//! Count formulas: integer expressions over the arguments and `tid`, `page`, `pages`, in the
//! syntax of the `evalexpr` crate (`+ - * / %`, comparisons, `&&`, `if(cond, a, b)`).

use evalexpr::{
    ContextWithMutableVariables, DefaultNumericTypes, HashMapContext, Node, Value,
    build_operator_tree,
};

/// A parsed formula, checked to use only the variables it was allowed.
#[derive(Debug, Clone)]
pub struct Formula {
    node: Node<DefaultNumericTypes>,
}

impl Formula {
    pub fn parse(text: &str, variables: &[&str]) -> Result<Formula, String> {
        let node = build_operator_tree::<DefaultNumericTypes>(text).map_err(|e| e.to_string())?;
        if let Some(unknown) = node
            .iter_variable_identifiers()
            .find(|v| !variables.contains(v))
        {
            return Err(format!(
                "unknown variable '{unknown}' (this formula may use: {})",
                variables.join(", ")
            ));
        }
        Ok(Formula { node })
    }

    /// The formula's value for these variable values: a non-negative integer.
    pub fn eval(&self, values: &[(&str, u64)]) -> Result<u64, String> {
        let mut context = HashMapContext::<DefaultNumericTypes>::new();
        for &(name, value) in values {
            let value = i64::try_from(value).map_err(|_| format!("{name} = {value} is too big"))?;
            context
                .set_value(name.into(), Value::from_int(value))
                .map_err(|e| e.to_string())?;
        }
        let value = self
            .node
            .eval_with_context(&context)
            .map_err(|e| e.to_string())?;
        match value {
            Value::Int(v) => u64::try_from(v).map_err(|_| format!("negative value {v}")),
            Value::Boolean(b) => Ok(u64::from(b)),
            other => Err(format!("gives {other}, not an integer")),
        }
    }
}
