//! The model with every string made safe for a terminal. Names, paths and arguments come from
//! the profile, so from the recorded program: one with an escape sequence in its command line or
//! a thread name could otherwise rewrite what the report shows.

use std::borrow::Cow;

use numalens_analyze::ReportModel;
use numalens_term::escape_control;
use serde_json::Value;

/// `model` with control characters in all its strings (map keys included) escaped; the model
/// itself when there are none, as in almost every profile.
pub(crate) fn printable(model: &ReportModel) -> Cow<'_, ReportModel> {
    let Ok(mut value) = serde_json::to_value(model) else {
        return Cow::Borrowed(model);
    };
    if !escape_strings(&mut value) {
        return Cow::Borrowed(model);
    }
    match serde_json::from_value(value) {
        Ok(escaped) => Cow::Owned(escaped),
        // Cannot happen for a model that serialised; showing it unescaped is not an option.
        Err(_) => Cow::Owned(blank_strings(model)),
    }
}

/// Escapes every string in `value`; true when one changed.
fn escape_strings(value: &mut Value) -> bool {
    match value {
        Value::String(text) => match escape_control(text) {
            Cow::Borrowed(_) => false,
            Cow::Owned(escaped) => {
                *text = escaped;
                true
            }
        },
        Value::Array(items) => items.iter_mut().fold(false, |c, v| escape_strings(v) | c),
        Value::Object(map) => {
            let mut changed = false;
            for (key, mut v) in std::mem::take(map) {
                changed |= escape_strings(&mut v);
                let key = escape_control(&key);
                changed |= matches!(key, Cow::Owned(_));
                map.insert(key.into_owned(), v);
            }
            changed
        }
        _ => false,
    }
}

/// The model with its command line blanked: the last resort of [`printable`].
fn blank_strings(model: &ReportModel) -> ReportModel {
    let mut model = model.clone();
    model.profile.command = vec!["(not shown: it holds control characters)".into()];
    model
}
