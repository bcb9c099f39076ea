//! Admission rules a kind adds for what its manifest cannot say (rules between its own fields),
//! as schemars transforms for the framework-specific struct flattened into the spec:
//!
//! ```
//! use kfop_runtime::api::rules::Validation;
//! use kfop_runtime::schemars::JsonSchema;
//!
//! #[derive(JsonSchema)]
//! #[schemars(crate = "kfop_runtime::schemars")]
//! #[schemars(transform = Validation::new(
//!     "!has(self.elasticPolicy) || self.elasticPolicy.minReplicas <= self.elasticPolicy.maxReplicas",
//!     "spec.elasticPolicy.minReplicas must not be above maxReplicas",
//! ).at(".elasticPolicy"))]
//! pub struct PyTorchJobExtra {}
//! ```
//!
//! A flattened struct's schema keys land on the spec's, so these rules see the whole spec. The
//! manifest's own rules (a required role, Kubeflow's named container: `required: true` on a role
//! or on `container`) come from `kfop-crd-rules` and follow these. Messages are static: a
//! `messageExpression` naming keys would exceed the API server's cost budget.
use kfop_crd_rules::Rule;
use schemars::Schema;
use schemars::transform::Transform;
use serde_json::{Value, json};

/// One `x-kubernetes-validations` entry, appended to the schema it transforms.
#[derive(Clone, Debug, PartialEq)]
pub struct Validation(Rule);

impl Validation {
    pub fn new(rule: impl Into<String>, message: impl Into<String>) -> Self {
        Self(Rule::new(rule, message))
    }

    /// Reports a failure at `path` below the schema (e.g. `.elasticPolicy.nProcPerNode`) instead
    /// of at the object the rule is on.
    pub fn at(self, path: impl Into<String>) -> Self {
        Self(self.0.at(path))
    }

    /// Reports a failure as "Required value" instead of "Invalid value".
    pub fn required(self) -> Self {
        Self(self.0.required())
    }

    /// Reports a failure as "Forbidden" instead of "Invalid value".
    pub fn forbidden(self) -> Self {
        Self(self.0.forbidden())
    }
}

impl Transform for Validation {
    fn transform(&mut self, schema: &mut Schema) {
        let rules = schema
            .ensure_object()
            .entry("x-kubernetes-validations")
            .or_insert_with(|| json!([]));
        if let Value::Array(rules) = rules {
            rules.push(self.0.to_json());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_append_in_order_with_path_and_reason() {
        let mut schema = schemars::json_schema!({ "type": "object" });
        Validation::new("self.a <= self.b", "spec.a must not be above spec.b").transform(&mut schema);
        Validation::new("!has(self.c)", "spec.c is not supported")
            .at(".c")
            .forbidden()
            .transform(&mut schema);
        assert_eq!(
            schema.get("x-kubernetes-validations"),
            Some(&json!([
                { "rule": "self.a <= self.b", "message": "spec.a must not be above spec.b" },
                {
                    "rule": "!has(self.c)",
                    "message": "spec.c is not supported",
                    "fieldPath": ".c",
                    "reason": "FieldValueForbidden",
                },
            ]))
        );
    }
}
