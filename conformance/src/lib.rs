//! kfop-conformance: Kubeflow as the oracle. Kubeflow's own training-operator (v1.8.1, built
//! from its Go module, run out of cluster as a [`kfop_testenv::Peer`]) and kfop's all-in-one
//! operator (the `kfop-operator` binary) each watch one namespace of a private plane and serve
//! the same (kfop's) CRDs, both without gang scheduling or both with Volcano or
//! scheduler-plugins. Every case of the corpus runs the same job under both, through the same
//! scripted lifecycle (kwok plays the kubelet), and after every step the two normalized
//! snapshots are diffed field by field. A difference is either declared in
//! `allowed-differences.yaml` (a deliberate fix or a known kfop bug) or a failure.
//!
//! * [`cases`]: the corpus, read from `cases/` and the peer module's `examples/`;
//! * [`drive`]: acting a step on one side and waiting for it to settle;
//! * [`side`]: one operator's namespace, which drive acts on and snapshot reads;
//! * [`snapshot`]: what a side shows, normalized;
//! * [`diff`]: field-by-field comparison;
//! * [`allowed`]: the declared differences and their Markdown table;
//! * [`report`]: the result tables;
//! * [`schema_paths`]: Kubeflow's CRD schemas, path by path, against kfop's;
//! * [`glob`]: the wildcards of case, step, field and value patterns;
//! * [`takeover`]: kfop taking over from Kubeflow under live jobs, and handing back;
//! * [`operators`], [`runner`]: the plane, both operators and the run.

pub mod admission;
pub mod allowed;
pub mod cases;
pub mod diff;
pub mod drive;
mod error;
pub mod glob;
pub mod operators;
pub mod report;
pub mod runner;
pub mod schema_paths;
pub mod side;
pub mod snapshot;
pub mod takeover;

pub use error::{Error, Result};
