//! A TFJob as Kubeflow's `kubeflow.org/v1` API defines it.
use std::collections::BTreeMap;

use kfop_runtime::api::{ReplicaSpec, RunPolicy};

#[kfop_runtime::training_job(
    group = "kubeflow.org",
    version = "v1",
    kind = "TFJob",
    controller = "tfjob-controller",
    framework = "tensorflow",
    container = "tensorflow",
    port_name = "tfjob-port",
    port = 2222,
    restart_policy = "Never",
    role(name = "PS"),
    role(name = "Worker"),
    role(name = "Chief", master, max_replicas = 1),
    role(name = "Master", master, max_replicas = 1),
    role(name = "Evaluator", max_replicas = 1)
)]
pub struct TFJobSpec {
    #[serde(default)]
    pub run_policy: RunPolicy,
    /// `AllWorkers` to succeed only when every worker has; by default worker 0 decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_policy: Option<String>,
    #[kfop(replica_specs)]
    pub tf_replica_specs: BTreeMap<String, ReplicaSpec>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub enable_dynamic_worker: bool,
}
