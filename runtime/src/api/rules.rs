//! Admission rules a kind adds for what its manifest cannot say (a required role, Kubeflow's
//! named container, rules between its own fields), as schemars transforms for the
//! framework-specific struct flattened into the spec:
//!
//! ```
//! use kfop_runtime::api::rules;
//! use kfop_runtime::schemars::JsonSchema;
//!
//! #[derive(JsonSchema)]
//! #[schemars(crate = "kfop_runtime::schemars")]
//! #[schemars(transform = rules::named_container("xgbReplicaSpecs", "xgboost"))]
//! #[schemars(transform = rules::required_role("xgbReplicaSpecs", "Master"))]
//! pub struct XGBoostJobExtra {}
//! ```
//!
//! A flattened struct's schema keys land on the spec's, so these rules see the whole spec
//! (`self.xgbReplicaSpecs`). They rely on the schema `#[training_job]` gives every replica's
//! `template.spec.containers` (required, with `maxItems` and a `maxLength` name, which bounds
//! their CEL cost). Messages are static: a `messageExpression` naming keys would exceed the API
//! server's cost budget.
use schemars::Schema;
use schemars::transform::Transform;
use serde_json::{Value, json};

/// One `x-kubernetes-validations` entry, appended to the schema it transforms.
#[derive(Clone, Debug, PartialEq)]
pub struct Validation {
    rule: String,
    message: String,
    field_path: Option<String>,
    reason: Option<&'static str>,
}

impl Validation {
    pub fn new(rule: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            rule: rule.into(),
            message: message.into(),
            field_path: None,
            reason: None,
        }
    }

    /// Reports a failure at `path` below the schema (e.g. `.elasticPolicy.nProcPerNode`) instead
    /// of at the object the rule is on.
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

    fn to_json(&self) -> Value {
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

impl Transform for Validation {
    fn transform(&mut self, schema: &mut Schema) {
        let rules = schema
            .ensure_object()
            .entry("x-kubernetes-validations")
            .or_insert_with(|| json!([]));
        if let Value::Array(rules) = rules {
            rules.push(self.to_json());
        }
    }
}

/// Every replica of `specs` runs a container named `container`, as Kubeflow's v1 webhooks
/// require (they take the Service ports and the exit code from it).
pub fn named_container(specs: &str, container: &str) -> Validation {
    Validation::new(
        format!("self.{specs}.all(k, self.{specs}[k].template.spec.containers.exists(c, c.name == '{container}'))"),
        format!(
            "spec.{specs}[*].template.spec.containers must include a container named {container}: name the framework's container {container} in every replica"
        ),
    )
    .at(format!(".{specs}"))
    .required()
}

/// The job has a `role` replica spec (the key in any letter case, as the other rules match it).
pub fn required_role(specs: &str, role: &str) -> Validation {
    let lower = role.to_ascii_lowercase();
    Validation::new(
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
    fn rules_append_in_order_with_path_and_reason() {
        let mut schema = schemars::json_schema!({ "type": "object" });
        required_role("xgbReplicaSpecs", "Master").transform(&mut schema);
        Validation::new("self.a <= self.b", "spec.a must not be above spec.b").transform(&mut schema);
        assert_eq!(
            schema.get("x-kubernetes-validations"),
            Some(&json!([
                {
                    "rule": "self.xgbReplicaSpecs.exists(k, k.lowerAscii() == 'master')",
                    "message": "spec.xgbReplicaSpecs.Master is required: add a Master replica spec",
                    "fieldPath": ".xgbReplicaSpecs",
                    "reason": "FieldValueRequired",
                },
                { "rule": "self.a <= self.b", "message": "spec.a must not be above spec.b" },
            ]))
        );
    }
}
