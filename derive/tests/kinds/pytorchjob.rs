//! A PyTorchJob as Kubeflow's `kubeflow.org/v1` API defines it (without elasticPolicy).
use std::collections::BTreeMap;

use kfop_runtime::api::{ReplicaSpec, RunPolicy};

#[kfop_runtime::training_job(
    group = "kubeflow.org",
    version = "v1",
    kind = "PyTorchJob",
    plural = "pytorchjobs",
    shortname = "pytorchjob",
    controller = "pytorchjob-controller",
    framework = "pytorch",
    container = "pytorch",
    port_name = "pytorchjob-port",
    port = 23456,
    scale = "Worker",
    role(
        name = "Master",
        master,
        restart_policy = "OnFailure",
        min_replicas = 1,
        max_replicas = 1
    ),
    role(name = "Worker", restart_policy = "OnFailure", default_replicas = 1)
)]
pub struct PyTorchJobSpec {
    #[serde(default)]
    pub run_policy: RunPolicy,
    #[kfop(replica_specs)]
    pub pytorch_replica_specs: BTreeMap<String, ReplicaSpec>,
    /// Processes per node: `auto`, `cpu`, `gpu` or a number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nproc_per_node: Option<String>,
}
