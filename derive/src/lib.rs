//! kfop-derive: the `#[training_job]` attribute, which turns an annotated spec struct into a
//! Kubeflow-compatible custom resource and the glue that plugs it into kfop-runtime.
//!
//! Use it through `kfop_runtime::training_job`; the generated code names only
//! `::kfop_runtime::...` paths, so an operator needs no other dependency.
//!
//! ```ignore
//! use std::collections::BTreeMap;
//! use kfop_runtime::api::{ReplicaSpec, RunPolicy};
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
//! ```
//!
//! generates `PyTorchJob` (kube's `CustomResource`, with Kubeflow's printer columns, status and
//! scale subresources and admission rules in its schema), `PyTorchJobReplicaType` and
//! `impl kfop_runtime::TrainingJob for PyTorchJob`.
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
