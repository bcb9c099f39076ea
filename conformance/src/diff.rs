//! Field-by-field comparison of two normalized snapshots.
use std::fmt;

use serde_json::Value;

/// One field whose value differs between the sides; `None` is a field one side lacks.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// Keys from the snapshot's root joined by `/` (`pods/j-worker-0/spec/containers/pytorch/env/RANK/value`).
    pub path: String,
    pub kubeflow: Option<Value>,
    pub kfop: Option<Value>,
}

/// The differences from `kubeflow` to `kfop`. A subtree only one side has is one difference
/// (the whole pod, not each of its fields); arrays compare position by position.
pub fn diff(kubeflow: &Value, kfop: &Value) -> Vec<Difference> {
    let mut found = Vec::new();
    walk(&mut String::new(), Some(kubeflow), Some(kfop), &mut found);
    found
}

fn walk(path: &mut String, a: Option<&Value>, b: Option<&Value>, found: &mut Vec<Difference>) {
    // A JSON null and a missing field read the same: either way the field is not set.
    let a = a.filter(|v| !v.is_null());
    let b = b.filter(|v| !v.is_null());
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                descend(path, key, x.get(key.as_str()), y.get(key.as_str()), found);
            }
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            for i in 0..x.len().max(y.len()) {
                descend(path, &i.to_string(), x.get(i), y.get(i), found);
            }
        }
        (a, b) if a != b => found.push(Difference {
            path: path.clone(),
            kubeflow: a.cloned(),
            kfop: b.cloned(),
        }),
        _ => {}
    }
}

fn descend(path: &mut String, key: &str, a: Option<&Value>, b: Option<&Value>, found: &mut Vec<Difference>) {
    let len = path.len();
    if !path.is_empty() {
        path.push('/');
    }
    path.push_str(key);
    walk(path, a, b, found);
    path.truncate(len);
}

/// A side's value as the report shows it and allowed-difference patterns match it: strings
/// bare, anything else as compact JSON, a missing field as `<absent>`.
pub fn render(value: Option<&Value>) -> String {
    match value {
        None => "<absent>".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: Kubeflow {} / kfop {}",
            self.path,
            render(self.kubeflow.as_ref()),
            render(self.kfop.as_ref())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differences_name_their_fields() {
        let kubeflow = json!({
            "pods": { "j-0": { "env": { "A": { "value": "1" } } }, "j-1": { "phase": "Running" } },
            "events": { "Normal X: y": true },
            "list": [1, 2, 3],
            "same": { "a": [1] },
            "nullish": null,
        });
        let kfop = json!({
            "pods": { "j-0": { "env": { "A": { "value": "0" } } } },
            "events": {},
            "list": [1, 5],
        });
        let found = diff(&kubeflow, &kfop);
        let shown: Vec<String> = found.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "events/Normal X: y: Kubeflow true / kfop <absent>",
                "list/1: Kubeflow 2 / kfop 5",
                "list/2: Kubeflow 3 / kfop <absent>",
                "pods/j-0/env/A/value: Kubeflow 1 / kfop 0",
                "pods/j-1: Kubeflow {\"phase\":\"Running\"} / kfop <absent>",
                "same: Kubeflow {\"a\":[1]} / kfop <absent>",
            ]
        );
        assert!(diff(&kubeflow, &kubeflow).is_empty());
    }
}
