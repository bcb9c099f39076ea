//! One `x-kubernetes-validations` entry, and the rules a kind may ask for by name.
use serde_json::{Value, json};

/// One CEL admission rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub rule: String,
    pub message: String,
    /// Where a failure is reported, below the schema the rule is on (e.g. `.elasticPolicy`).
    pub field_path: Option<String>,
    /// `FieldValueRequired`, `FieldValueForbidden`, ...; `None` reports "Invalid value".
    pub reason: Option<&'static str>,
}

impl Rule {
    pub fn new(rule: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            rule: rule.into(),
            message: message.into(),
            field_path: None,
            reason: None,
        }
    }

    /// Reports a failure at `path` below the schema instead of at the object the rule is on.
    pub fn at(mut self, path: impl Into<String>) -> Self {
        self.field_path = Some(path.into());
        self
    }

    /// Reports a failure as "Required value" instead of "Invalid value".
    pub fn required(mut self) -> Self {
        self.reason = Some("FieldValueRequired");
        self
    }

    /// Reports a failure as "Forbidden" instead of "Invalid value".
    pub fn forbidden(mut self) -> Self {
        self.reason = Some("FieldValueForbidden");
        self
    }

    /// The entry as the CRD holds it.
    pub fn to_json(&self) -> Value {
        let mut rule = json!({ "rule": self.rule, "message": self.message });
        if let Some(path) = &self.field_path {
            rule["fieldPath"] = json!(path);
        }
        if let Some(reason) = self.reason {
            rule["reason"] = json!(reason);
        }
        rule
    }
}

/// Every replica of `specs` runs a container named `container`, as Kubeflow's v1 webhooks
/// require. It relies on the bounded `template.spec.containers` schema [`crate::extensions`]
/// gives every replica, which keeps its CEL cost within the API server's budget.
pub fn named_container(specs: &str, container: &str) -> Rule {
    Rule::new(
        format!("self.{specs}.all(k, self.{specs}[k].template.spec.containers.exists(c, c.name == '{container}'))"),
        format!(
            "spec.{specs}[*].template.spec.containers must include a container named {container}: name the framework's container {container} in every replica"
        ),
    )
    .at(format!(".{specs}"))
    .required()
}

/// The job has a `role` replica spec (the key in any letter case, as the other rules match it).
pub fn required_role(specs: &str, role: &str) -> Rule {
    let lower = role.to_ascii_lowercase();
    Rule::new(
        format!("self.{specs}.exists(k, k.lowerAscii() == '{lower}')"),
        format!("spec.{specs}.{role} is required: add a {role} replica spec"),
    )
    .at(format!(".{specs}"))
    .required()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_carries_its_path_and_reason() {
        assert_eq!(
            required_role("xgbReplicaSpecs", "Master").to_json(),
            json!({
                "rule": "self.xgbReplicaSpecs.exists(k, k.lowerAscii() == 'master')",
                "message": "spec.xgbReplicaSpecs.Master is required: add a Master replica spec",
                "fieldPath": ".xgbReplicaSpecs",
                "reason": "FieldValueRequired",
            })
        );
        assert_eq!(
            Rule::new("self.a", "spec.a must hold").to_json(),
            json!({ "rule": "self.a", "message": "spec.a must hold" })
        );
    }
}
