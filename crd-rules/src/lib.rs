//! What a training-job kind's CRD adds to the schemas of the shared types: admission rules
//! (CEL `x-kubernetes-validations`), the pod-template checks, printer columns and the scale
//! paths. One generator behind both ways a kind comes to be: `#[training_job]` calls it at
//! expansion time (root rules, printer columns) and from the schema transform it emits, and the
//! all-in-one operator calls it for a kind registered at run time, so the two CRDs are equal.
//!
//! Kubeflow checks these in validating webhooks; a CRD needs no webhook server, certificates or
//! extra round trip. Messages are static: a `messageExpression` naming the offending keys would
//! concatenate map keys of unbounded length, and the API server rejects the CRD because that
//! expression's estimated cost exceeds its budget a hundredfold.
mod root;
mod rule;
mod shape;
mod spec;

pub use root::root_rules;
pub use rule::{Rule, named_container, required_role};
pub use shape::{RoleShape, Shape};
pub use spec::{Extension, extend_spec_schema, extensions};

/// The categories a kind is listed in when it names none (`kubectl get kubeflow`).
pub const DEFAULT_CATEGORIES: [&str; 1] = ["kubeflow"];

/// The printer columns every kind shows: name, type and JSON path.
pub const PRINTER_COLUMNS: [(&str, &str, &str); 2] = [
    ("State", "string", ".status.conditions[-1:].type"),
    ("Age", "date", ".metadata.creationTimestamp"),
];

/// The CRD's description of the kind.
pub fn description(kind: &str, group: &str, version: &str, framework: &str) -> String {
    format!("A {kind} ({group}/{version}): a {framework} training job.")
}

/// The scale subresource's paths for `role`: the spec's replica count, the status's active
/// count and the pods' label selector.
pub fn scale_paths(replica_specs: &str, role: &str) -> [String; 3] {
    [
        format!(".spec.{replica_specs}.{role}.replicas"),
        format!(".status.replicaStatuses.{role}.active"),
        format!(".status.replicaStatuses.{role}.selector"),
    ]
}
