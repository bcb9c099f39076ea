//! kfop-derive: the `#[training_job]` attribute, which turns an annotated spec struct into a
//! Kubeflow-compatible custom resource and the glue that plugs it into kfop-runtime.
//!
//! Use it as `kfop_runtime::training_job`: the generated code names only `::kfop_runtime::...`
//! paths, so an operator needs no other dependency.
//!
//! ```
//! use std::collections::BTreeMap;
//!
//! use kfop_runtime::TrainingJob;
//! use kfop_runtime::api::{ReplicaSpec, RunPolicy};
//! use kfop_runtime::kube::CustomResourceExt;
//!
//! #[kfop_runtime::training_job(
//!     group = "kubeflow.org", version = "v1", kind = "PyTorchJob",
//!     controller = "pytorchjob-controller", framework = "pytorch",
//!     container = "pytorch", port_name = "pytorchjob-port", port = 23456,
//!     scale = "Worker",
//!     role(name = "Master", master, restart_policy = "OnFailure", min_replicas = 1, max_replicas = 1),
//!     role(name = "Worker", restart_policy = "OnFailure"),
//! )]
//! pub struct PyTorchJobSpec {
//!     #[serde(default)]
//!     pub run_policy: RunPolicy,
//!     #[kfop(replica_specs)]
//!     pub pytorch_replica_specs: BTreeMap<String, ReplicaSpec>,
//! }
//!
//! assert_eq!(PyTorchJob::crd_name(), "pytorchjobs.kubeflow.org");
//! assert_eq!(PyTorchJob::framework_info().roles.len(), 2);
//! assert_eq!("worker".parse(), Ok(PyTorchJobReplicaType::Worker));
//! ```
//!
//! # Arguments
//!
//! * Required: `group` (with a dot), `version`, `kind` (CamelCase), `controller`, `framework`,
//!   `container`, and at least one `role(...)`.
//! * Optional: `port_name` with `port` (1..=65535), the port added to the container (both or
//!   neither), `plural` (default: lower-case kind + `s`), `shortname` and `category`
//!   (repeatable; category defaults to `kubeflow`), `scale = "<Role>"` (the scale subresource
//!   on that role's replicas), `restart_policy` (for roles that name none),
//!   `container_required` (every replica must run the `container`, as Kubeflow's v1 webhooks
//!   require).
//! * `role(name = "Worker", restart_policy = "OnFailure", master, required, default_replicas = n,
//!   min_replicas = n, max_replicas = n)`: `restart_policy` is one of Always, OnFailure, Never,
//!   ExitCode; several roles may be `master` (TFJob's Chief and Master), and a job may then
//!   contain only one of them; a `required` role must be in every job.
//!
//! The struct must be named `<Kind>Spec` (as in Kubeflow's Go API), have named fields, one
//! `#[kfop(replica_specs)]` map of `ReplicaSpec`s and a `RunPolicy` field named `run_policy` (or
//! marked `#[kfop(run_policy)]`). Its JSON names are camelCase; other fields pass through.
//!
//! # What it generates
//!
//! * The struct with kube-derive's `CustomResource` and the derives it needs (those the user did
//!   not write), so `PyTorchJob` is a namespaced custom resource with `JobStatus` status, the
//!   status (and optional scale) subresource, short names, categories and Kubeflow's `State`
//!   and `Age` printer columns.
//! * Admission rules in the CRD schema (from `kfop-crd-rules`, which the operator also uses
//!   for kinds registered at run time): the job name is a DNS-1035 label short
//!   enough for `<name>-<replica type>-<index>`, replica-type keys are the declared roles
//!   in any letter case (Kubeflow normalises `worker` to `Worker`, and so does kfop-runtime),
//!   each role at most once, replica bounds, non-negative replicas and run-policy durations,
//!   at most one master role, every replica's pod template has containers with a name and an
//!   image, Kubeflow's immutable `schedulingPolicy.queue`, and the required container and
//!   roles. A kind adds its own with `kfop_runtime::api::rules` on a struct it flattens into
//!   the spec.
//! * `PyTorchJobReplicaType`: the roles as an enum with `as_str`, `Display`, a case-insensitive
//!   `FromStr` and serde with Kubeflow's names.
//! * `impl kfop_runtime::TrainingJob for PyTorchJob`, with the `FrameworkInfo` built once.

use proc_macro::TokenStream;

mod args;
mod expand;
mod rules;
#[cfg(test)]
mod snapshots;
mod spec;

/// Turns a training-job spec struct into its custom resource type, replica-type enum and
/// `TrainingJob` impl. See the crate documentation for the arguments.
#[proc_macro_attribute]
pub fn training_job(attr: TokenStream, item: TokenStream) -> TokenStream {
    training_job_impl(attr.into(), item.into()).into()
}

/// The macro over `proc_macro2` tokens, callable from tests; errors become `compile_error!`s.
fn training_job_impl(
    attr: proc_macro2::TokenStream,
    item: proc_macro2::TokenStream,
) -> proc_macro2::TokenStream {
    let job = match args::parse(attr) {
        Ok(job) => job,
        Err(e) => return e.write_errors(),
    };
    match spec::parse(item, &job) {
        Ok(spec) => expand::expand(&job, spec),
        Err(e) => e.to_compile_error(),
    }
}
